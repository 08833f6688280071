"""The former homes of fedpca's Flower names, kept importable with a ``DeprecationWarning``.

Each former package (``fedpca.strategies``, ``fedpca.clients``, ``fedpca.simulations``,
``fedpca.apps``) is one ``__init__`` that calls :func:`alias_package`; its former
per-algorithm modules are registered here as plain modules holding the moved names, so
``from fedpca.clients.dps_pca import client_for_site`` still works. docs/api.md lists the new
names (Migration).
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Mapping
from typing import Any


def alias_package(package: str, modules: Mapping[str, Mapping[str, Any]], new: str) -> None:
    """Register ``package.MODULE`` for every entry of ``modules`` (its names and the objects
    they now are) and warn that ``package`` is deprecated in favour of ``new``."""
    parent = sys.modules[package]
    for name, members in modules.items():
        module = types.ModuleType(f"{package}.{name}", f"Deprecated: see {new}.")
        module.__dict__.update(members)
        sys.modules[module.__name__] = module
        setattr(parent, name, module)
    warnings.warn(f"{package} is deprecated: import from {new} (docs/api.md, Migration)",
                  DeprecationWarning, stacklevel=3)
