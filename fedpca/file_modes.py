"""Who besides the site's operator may touch its files.

A site's policy sets its budget and its ledger remembers what it spent: anyone who can write
either can give the site a fresh budget, and whoever reads the ledger or the signing key
learns what only the site should. So a site creates its policy, ledger and the ledger's
identity file readable and writable by their owner only (0600, folders 0700), and refuses to
use a policy, roster, data contract or identity file that group or others may write, or a
ledger or signing key that group or others may read or write. The operating-system user that
runs the SuperNode owns them (``deploy/README.md``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fedpca.errors import ConfigurationError

#: Permission bits that let group or others change a file.
SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH
#: Permission bits that let group or others read or change a file.
SHARED_ANY = stat.S_IRWXG | stat.S_IRWXO


def refuse_shared(path: Path, what: str, bits: int = SHARED_WRITE) -> None:
    """Raise if ``path`` exists with any of the permission ``bits`` set (``what`` names it
    in the error, which says how to fix it)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if mode & bits:
        access = "read or write" if bits & (stat.S_IRGRP | stat.S_IROTH) else "write"
        raise ConfigurationError(
            f"{what} {path} has mode {stat.S_IMODE(mode):04o}: group or others may {access} "
            f"it; run chmod 600 {path} as the user that runs the SuperNode"
        )


def create_owner_only(path: Path, data: bytes) -> None:
    """Write a new file ``path`` (refusing an existing one) readable by its owner only, its
    folder created 0700 if absent."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def replace_owner_only(path: Path, data: bytes) -> None:
    """Write ``path`` readable by its owner only (0600, its folder created 0700 if absent),
    replacing an existing file atomically: the new content goes to a fresh file first."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    create_owner_only(partial, data)
    os.replace(partial, path)
