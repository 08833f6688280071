"""Code the coordinator cannot replace: a site accepts only a configuration-only FAB.

Flower ships an App to the sites as a FAB (a zip archive) uploaded by whoever runs ``flwr
run``; a SuperNode normally installs it and runs its Python code next to the site's records,
so the coordinator could send a ClientApp that returns the records. A fedpca site instead
runs the ClientApp of the fedpca *it* installed and pinned (``fedpca site superexec``), and
refuses, before anything runs, any FAB that carries a file other than its configuration
(``pyproject.toml`` and Flower's manifest) or whose ``clientapp`` names another component.
The coordinator keeps what a FAB legitimately carries: the run_config defaults, which a real
site treats as untrusted anyway.

Memory. A zip member may expand a thousandfold (a 200 KB FAB can hold a 100 MB
``pyproject.toml``), so the check reads every member's sizes from the archive's central
directory *before* it decompresses anything and refuses a FAB past :data:`MAX_FAB_BYTES` as
received, a member past :data:`MAX_MEMBER_BYTES` or a compression ratio past
:data:`MAX_COMPRESSION_RATIO` once expanded, or members past :data:`MAX_EXPANDED_BYTES`
together. Those sizes are the sender's word, so the one member it reads is read through a
bounded reader that stops one byte past the limit: a header that lies costs no more memory.

This module is Flower-free: it reads the archive with :mod:`zipfile` and :mod:`tomllib`.
"""

from __future__ import annotations

import io
import tomllib
import zipfile
from pathlib import Path

from fedpca.algorithms.specs import app_config
from fedpca.flower.app_config import COMPONENTS, PUBLISHER
from fedpca.errors import FedPCAError

#: The only members a configuration-only FAB may hold.
CONFIG_ONLY_MEMBERS = frozenset({"pyproject.toml", ".info/CONTENT"})
#: Files named in a refusal, at most.
LISTED = 5
#: Most bytes a FAB may have as received (Flower itself accepts 10 MB); a FAB carrying code
#: (the whole fedpca package is about 1 MB) is refused with the files it carries.
MAX_FAB_BYTES = 4 * 1024 * 1024
#: Most bytes any one member may expand to (``pyproject.toml`` included).
MAX_MEMBER_BYTES = 64 * 1024
#: Most bytes all members together may expand to.
MAX_EXPANDED_BYTES = 4 * 1024 * 1024
#: Most a member may expand relative to its compressed size (TOML text compresses about 3x).
MAX_COMPRESSION_RATIO = 100


class FabRefusedError(FedPCAError):
    """A site refused the App the coordinator sent (nothing ran, nothing was released)."""


def check_fab(content: bytes) -> None:
    """Raise :class:`FabRefusedError` unless ``content`` is a configuration-only fedpca FAB
    whose ClientApp is the site's own pinned ``fedpca.flower.app:client_app``, within the
    size limits of this module (checked before anything is decompressed)."""
    if len(content) > MAX_FAB_BYTES:
        raise FabRefusedError(
            f"refused: the App (FAB) has {len(content)} bytes, above this site's limit of "
            f"{MAX_FAB_BYTES}; a configuration-only App is a few KB"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            members = archive.infolist()
            _check_members({info.filename for info in members})
            _check_sizes(members)
            text = _read_bounded(archive, "pyproject.toml").decode("utf-8")
        project = tomllib.loads(text)
    except (zipfile.BadZipFile, KeyError, EOFError, UnicodeDecodeError,
            tomllib.TOMLDecodeError) as exc:
        raise FabRefusedError(
            f"refused: the App (FAB) is not a readable Flower App: {exc}") from None
    clientapp = project.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {}).get(
        "clientapp"
    )
    if clientapp != COMPONENTS["clientapp"]:
        raise FabRefusedError(
            f"refused: the App names clientapp={clientapp!r}; this site runs only "
            f"{COMPONENTS['clientapp']!r} of its installed fedpca"
        )


def _check_members(names: set[str]) -> None:
    """Refuse a FAB holding files other than its configuration."""
    extra = sorted(names - CONFIG_ONLY_MEMBERS)
    if extra:
        raise FabRefusedError(
            f"refused: the App (FAB) carries {len(extra)} files besides its "
            f"configuration ({', '.join(extra[:LISTED])}"
            f"{', ...' if len(extra) > LISTED else ''}); "
            "this site runs only the fedpca it installed, never code sent by the "
            "coordinator. Send a configuration-only App: fedpca deploy app --out DIR"
        )


def _check_sizes(members: list[zipfile.ZipInfo]) -> None:
    """Refuse members whose declared sizes (central directory, nothing decompressed) pass
    :data:`MAX_MEMBER_BYTES`, :data:`MAX_COMPRESSION_RATIO` or, together,
    :data:`MAX_EXPANDED_BYTES`."""
    for info in members:
        if info.file_size > MAX_MEMBER_BYTES:
            raise FabRefusedError(
                f"refused: the App (FAB) member {info.filename} expands to {info.file_size} "
                f"bytes, above this site's limit of {MAX_MEMBER_BYTES} per member; nothing "
                "was decompressed"
            )
        if info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
            raise FabRefusedError(
                f"refused: the App (FAB) member {info.filename} expands "
                f"{info.file_size / max(info.compress_size, 1):.0f} times, above this site's "
                f"limit of {MAX_COMPRESSION_RATIO}; nothing was decompressed"
            )
    total = sum(info.file_size for info in members)
    if total > MAX_EXPANDED_BYTES:
        raise FabRefusedError(
            f"refused: the App (FAB) expands to {total} bytes, above this site's limit of "
            f"{MAX_EXPANDED_BYTES}; nothing was decompressed"
        )


def _read_bounded(archive: zipfile.ZipFile, name: str) -> bytes:
    """Member ``name``, decompressed at most one byte past :data:`MAX_MEMBER_BYTES` whatever
    its header declares (a member that is longer than declared is refused)."""
    with archive.open(name) as member:
        data = member.read(MAX_MEMBER_BYTES + 1)
    if len(data) > MAX_MEMBER_BYTES:
        raise FabRefusedError(
            f"refused: the App (FAB) member {name} expands past this site's limit of "
            f"{MAX_MEMBER_BYTES} bytes, more than its header declares; reading stopped there"
        )
    return data


def config_only_pyproject(name: str = "fedpca-app", version: str = "0.1.0") -> str:
    """The ``pyproject.toml`` of a configuration-only fedpca App."""
    lines = [
        "[build-system]",
        'requires = ["hatchling"]',
        'build-backend = "hatchling.build"',
        "",
        "[project]",
        f'name = "{name}"',
        f'version = "{version}"',
        'description = "fedpca: configuration only; every node runs its own installed fedpca"',
        'license = "Apache-2.0"',
        "dependencies = []",
        "",
        "[tool.flwr.app]",
        f'publisher = "{PUBLISHER}"',
        "",
        "[tool.flwr.app.components]",
        *(f'{key} = "{value}"' for key, value in COMPONENTS.items()),
        "",
        "[tool.flwr.app.config]",
        *(f"{key} = {_toml(value)}" for key, value in app_config().items()),
        "",
    ]
    return "\n".join(lines)


def write_config_only_app(directory: str | Path) -> Path:
    """Write a configuration-only App (one ``pyproject.toml``) into ``directory`` for
    ``flwr run DIRECTORY <federation>``; returns the directory."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    strays = sorted(p.name for p in target.iterdir() if p.name != "pyproject.toml")
    if strays:
        raise FabRefusedError(
            f"{target} holds other files ({', '.join(strays[:LISTED])}); flwr run would ship "
            "them and the sites would refuse the App: use an empty folder"
        )
    (target / "pyproject.toml").write_text(config_only_pyproject())
    return target


def _toml(value: bool | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
