"""``flwr supernode register`` for several sites' public keys in one process.

``python -m fedpca.deployment.register_keys FEDERATION NAME=PUBLIC_KEY ...`` runs Flower's
own ``flwr`` command line (:func:`~fedpca.deployment.flower_internals.flwr_cli`) once per
key, in order, in this one process: :class:`~fedpca.deployment.local.LocalDeployment` registers a
group of sites with one Flower import (about a second of CPU) instead of one per site. Each
registration is exactly ``flwr supernode register PUBLIC_KEY FEDERATION --name NAME``;
the first that fails stops the rest, and the process exits with its code.

Only public values pass through here: the SuperLink's address and CA come from
``FLWR_HOME`` (the coordinator's), each site's public key from its file.
"""

from __future__ import annotations

import sys

from fedpca.deployment.flower_internals import flwr_cli


def register(federation: str, pairs: list[str]) -> int:
    """Register every ``NAME=PUBLIC_KEY`` of ``pairs`` with ``federation``'s SuperLink; the
    exit code of the first registration that failed, else 0."""
    for pair in pairs:
        name, sep, key = pair.partition("=")
        if not (sep and name and key):
            print(f"register_keys: {pair!r} is not NAME=PUBLIC_KEY", file=sys.stderr)
            return 2
        try:
            flwr_cli(["supernode", "register", key, federation, "--name", name])
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                print(f"register_keys: registering {name} failed (exit code {exit_.code})",
                      file=sys.stderr)
                return exit_.code if isinstance(exit_.code, int) else 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m fedpca.deployment.register_keys FEDERATION "
                 "NAME=PUBLIC_KEY [NAME=PUBLIC_KEY ...]")
    sys.exit(register(sys.argv[1], sys.argv[2:]))
