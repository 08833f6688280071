"""Typed access to a parsed site policy (TOML): tables, texts, positive numbers, shares and
file paths, each problem a one-line :class:`PolicyError` naming the file and the key
(:mod:`fedpca.site.policy` reads the policy's own keys with it)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fedpca.errors import ConfigurationError


class PolicyError(ConfigurationError):
    """A site policy file is missing, unreadable or makes no sense (one-line reason)."""


class PolicyReader:
    """Typed access to a parsed policy, with errors naming the file and the key."""

    def __init__(self, path: Path, raw: dict[str, Any]) -> None:
        self.path, self.raw = path, raw

    def error(self, reason: str) -> PolicyError:
        return PolicyError(f"site policy {self.path}: {reason}")

    def table(self, name: str, required: bool = True) -> dict[str, Any]:
        value = self.raw.get(name)
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            raise self.error(f"the table [{name}] is missing")
        return value

    def text(self, table: dict, where: str, key: str, default: str | None = None,
             hint: str = "") -> str:
        value = table.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{where}.{key} must be a non-empty string, got {value!r}"
                             + (f"; {hint}" if hint else ""))
        return value

    def positive(self, table: dict, where: str, key: str, default: float | None = None,
                 hint: str = "") -> float:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0
        ):
            raise self.error(f"{where}.{key} must be a finite number > 0, got {value!r}"
                             + (f"; {hint}" if hint else ""))
        return float(value)

    def share(self, table: dict, where: str, key: str) -> float | None:
        """An optional share in ``(0, 1)``."""
        if key not in table:
            return None
        value = self.positive(table, where, key)
        if value >= 1:
            raise self.error(f"{where}.{key}={value:g} must be below 1 (a share of the budget)")
        return value
