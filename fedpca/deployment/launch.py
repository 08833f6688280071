"""What starting Flower's processes on loopback takes, apart from the deployment they make up
(:class:`~fedpca.deployment.local.LocalDeployment`): a started process with the log holding
its output (:class:`Launched`) and that output followed as it comes (:class:`LogEcho`), the
``key=value`` text of ``--run-config`` and ``--node-config`` (:func:`config_pairs`), the
run_config keys a Flower App declares (:func:`app_config_keys`), and loopback ports
(:func:`free_port`, :func:`listening`).
"""

from __future__ import annotations

import numbers
import socket
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fedpca.deployment.certs import LOOPBACK
from fedpca.errors import ConfigurationError, FedPCAError

__all__ = [
    "LOG_TAIL_LINES",
    "ConfigValue",
    "DeploymentError",
    "Launched",
    "LogEcho",
    "app_config_keys",
    "config_pairs",
    "free_port",
    "listening",
]

#: Log lines quoted in an error.
LOG_TAIL_LINES = 30
#: A run_config or node_config value, as Flower's TOML takes it.
ConfigValue = bool | int | float | str


class DeploymentError(FedPCAError, RuntimeError):
    """A Flower process did not start, exited, or a run did not deliver its result."""


@dataclass
class Launched:
    """A process this deployment started, with the log file holding its output."""

    name: str
    process: subprocess.Popen
    log: Path

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of its log."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log})"
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, what: str) -> DeploymentError:
        """An error saying ``what`` went wrong, with the end of the log."""
        return DeploymentError(
            f"{self.name} (pid {self.process.pid}): {what}; last lines of {self.log}:\n"
            f"{self.tail()}"
        )


class LogEcho:
    """Copies what a launched process logs to ``stream`` as it comes: called with the
    process at every look while a run waits for it (a
    :data:`~fedpca.deployment.local.RunWatcher`), then :meth:`flush` once it exited."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.log: Path | None = None
        self.offset = 0

    def __call__(self, item: Launched) -> None:
        if item.log != self.log:  # another process: its log from the start
            self.log, self.offset = item.log, 0
        self.flush()

    def flush(self) -> None:
        """Write what the log gained since the last look."""
        if self.log is None:
            return
        with self.log.open("rb") as handle:
            handle.seek(self.offset)
            gained = handle.read()
        self.offset += len(gained)
        self.stream.write(gained.decode(errors="replace"))
        self.stream.flush()


def config_pairs(values: Mapping[str, ConfigValue]) -> str:
    """``key=value`` pairs as ``--run-config``/``--node-config`` take them (TOML values)."""
    pairs = []
    for key, value in values.items():
        if not key or any(c.isspace() or c == "=" for c in key):
            raise ConfigurationError(f"config key {key!r} must be a word without '='")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, numbers.Integral):
            text = str(int(value))
        elif isinstance(value, numbers.Real):
            text = repr(float(value))
        elif isinstance(value, str) and not {'"', "\\"} & set(value):
            text = f'"{value}"'
        else:
            raise ConfigurationError(
                f"config value {key}={value!r} must be a bool, a number or a string "
                "without quotes or backslashes"
            )
        pairs.append(f"{key}={text}")
    return " ".join(pairs)


def app_config_keys(app_dir: Path) -> set[str]:
    """The run_config keys a Flower App declares (``[tool.flwr.app.config]``)."""
    with (app_dir / "pyproject.toml").open("rb") as handle:
        project = tomllib.load(handle)
    return set(project.get("tool", {}).get("flwr", {}).get("app", {}).get("config", {}))


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on loopback ``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((LOOPBACK, port)) == 0
