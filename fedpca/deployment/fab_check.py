"""Code the coordinator cannot replace: a site accepts only a configuration-only FAB.

Flower ships an App to the sites as a FAB (a zip archive) uploaded by whoever runs ``flwr
run``; a SuperNode normally installs it and runs its Python code next to the site's records,
so the coordinator could send a ClientApp that returns the records. A fedpca site instead
runs the ClientApp of the fedpca *it* installed and pinned (``fedpca site superexec``), and
refuses, before anything runs, any FAB that carries a file other than its configuration
(``pyproject.toml`` and Flower's manifest) or whose ``clientapp`` names another component.
The coordinator keeps what a FAB legitimately carries: the run_config defaults, which a real
site treats as untrusted anyway.

This module is Flower-free: it reads the archive with :mod:`zipfile` and :mod:`tomllib`.
"""

from __future__ import annotations

import io
import tomllib
import zipfile
from pathlib import Path

from fedpca.algorithms.specs import app_config
from fedpca.apps.app_config import COMPONENTS, PUBLISHER
from fedpca.errors import FedPCAError

#: The only members a configuration-only FAB may hold.
CONFIG_ONLY_MEMBERS = frozenset({"pyproject.toml", ".info/CONTENT"})
#: Files named in a refusal, at most.
LISTED = 5


class FabRefusedError(FedPCAError):
    """A site refused the App the coordinator sent (nothing ran, nothing was released)."""


def check_fab(content: bytes) -> None:
    """Raise :class:`FabRefusedError` unless ``content`` is a configuration-only fedpca FAB
    whose ClientApp is the site's own pinned ``fedpca.apps.app:client_app``."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
            extra = sorted(names - CONFIG_ONLY_MEMBERS)
            if extra:
                raise FabRefusedError(
                    f"refused: the App (FAB) carries {len(extra)} files besides its "
                    f"configuration ({', '.join(extra[:LISTED])}"
                    f"{', ...' if len(extra) > LISTED else ''}); "
                    "this site runs only the fedpca it installed, never code sent by the "
                    "coordinator. Send a configuration-only App: fedpca deploy app --out DIR"
                )
            project = tomllib.loads(archive.read("pyproject.toml").decode("utf-8"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise FabRefusedError(f"refused: the App (FAB) is not a readable Flower App: {exc}") from None
    clientapp = project.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {}).get(
        "clientapp"
    )
    if clientapp != COMPONENTS["clientapp"]:
        raise FabRefusedError(
            f"refused: the App names clientapp={clientapp!r}; this site runs only "
            f"{COMPONENTS['clientapp']!r} of its installed fedpca"
        )


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
