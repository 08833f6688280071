"""``fedpca simulate ALGORITHM`` commands: one module per algorithm, found automatically.

Each module here defines ``register(subparsers)`` that adds its sub-command and sets
``func`` to a callable taking the parsed arguments and returning an exit code. Shared flags
and the JSON record live in :mod:`fedpca.commands.common`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from fedpca.commands.common import with_flag_errors


def register_all(subparsers: argparse._SubParsersAction) -> None:
    """Import every command module in this package and let it register itself; each
    command's parameter errors then name its flags (``--s-hat``, not ``s_hat``)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("simulate_"):
            importlib.import_module(f"{__name__}.{info.name}").register(subparsers)
    for parser in subparsers.choices.values():
        parser.set_defaults(func=with_flag_errors(parser.get_default("func"), parser))
