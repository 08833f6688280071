"""Scenario dataclasses <-> Flower ``run_config`` (dashed keys, no ``None`` values)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="RunConfigFields")


class RunConfigFields:
    """Mixin for frozen scenario dataclasses.

    ``RUN_CONFIG_NONE`` maps a field that may be ``None`` to the value standing for it in a
    run_config (which cannot hold ``None``); ``INT_FIELDS`` are converted with ``int`` on
    the way in (TOML and CLI overrides may give floats or strings).
    """

    RUN_CONFIG_NONE: ClassVar[dict[str, Any]] = {}
    INT_FIELDS: ClassVar[frozenset[str]] = frozenset()

    def to_run_config(self) -> dict[str, Any]:
        """Flower ``run_config`` keys: field names with dashes, ``None`` encoded."""
        return {
            name.replace("_", "-"): self.RUN_CONFIG_NONE[name] if value is None else value
            for name, value in asdict(self).items()  # type: ignore[call-overload]
        }

    @classmethod
    def from_run_config(cls: type[T], config: dict[str, Any], **overrides: Any) -> T:
        """Build from a Flower ``run_config`` (unknown keys ignored), then apply overrides."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            key = f.name.replace("_", "-")
            if key not in config:
                continue
            value = config[key]
            if f.name in cls.RUN_CONFIG_NONE and value == cls.RUN_CONFIG_NONE[f.name]:
                value = None
            elif f.name in cls.INT_FIELDS:
                value = int(value)
            kwargs[f.name] = value
        kwargs.update(overrides)
        return cls(**kwargs)
