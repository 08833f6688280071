"""Exceptions raised by fedpca. Every message says what was wrong and how to fix it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

#: The most characters of a value from the coordinator that a refusal quotes (:func:`quoted`).
MAX_QUOTED = 80


def quoted(value: Any, most: int = MAX_QUOTED) -> str:
    """``repr(value)`` for a refusal, when it is at most ``most`` characters; otherwise its
    type, its length and the start of the SHA-256 of its text: a value the coordinator sent
    (a 10 MB string, say) is never echoed back whole, nor written whole to the site's log."""
    text = repr(value)
    if len(text) <= most:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:16]
    return f"<{type(value).__name__} of {len(text)} characters, sha256 {digest}...>"


class FedPCAError(Exception):
    """Base class of every error fedpca raises on purpose."""


class InvalidDataError(FedPCAError, ValueError):
    """A site's data cannot be used (shape, dtype, non-finite values, empty)."""


class InvalidRequestError(FedPCAError, ValueError):
    """A server request was refused before anything was released."""


class BudgetExceededError(FedPCAError):
    """A release was refused because it would exceed the site's privacy budget."""


class RunFailedError(FedPCAError):
    """A federated run stopped before its result; ``failures`` holds each failing site's own
    reason (its reply's error), in the order they arrived."""

    def __init__(self, message: str, failures: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.failures = list(failures)


class ConfigurationError(FedPCAError, ValueError):
    """A parameter is out of range or inconsistent with another."""


class NotFittedError(FedPCAError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (like scikit-learn's NotFittedError)."""


class ParameterNames(Protocol):
    """How a front end spells a run parameter: as a Python keyword, a run_config key, a
    command-line flag."""

    def name(self, parameter: str) -> str:
        """The parameter's name, e.g. ``s_hat`` or ``--s-hat``."""
        ...

    def assignment(self, parameter: str, value: object) -> str:
        """The parameter set to ``value``, e.g. ``s_hat=300`` or ``--s-hat=300``."""
        ...


class KeywordNames:
    """Parameters as Python keyword arguments (``s_hat=300``): the library's own spelling."""

    def name(self, parameter: str) -> str:
        """The keyword itself."""
        return parameter

    def assignment(self, parameter: str, value: object) -> str:
        """``parameter=value`` (strings quoted; a long value by :func:`quoted`)."""
        text = quoted(value) if isinstance(value, str) else str(value)
        return f"{parameter}={text if len(text) <= MAX_QUOTED else quoted(value)}"


class RunConfigNames(KeywordNames):
    """Parameters as Flower run_config keys (``s-hat=300``): what a coordinator writes after
    ``flwr run ... --run-config``."""

    def name(self, parameter: str) -> str:
        """The run_config key: the keyword with dashes."""
        return parameter.replace("_", "-")

    def assignment(self, parameter: str, value: object) -> str:
        """``key=value`` (strings quoted, as TOML writes them)."""
        return super().assignment(self.name(parameter), value)


class ParameterError(ConfigurationError):
    """A run parameter, or a combination of parameters, is out of range.

    It knows which parameters it is about, so every front end names them its own way:
    ``str(error)`` uses Python keywords (``need k <= s_hat <= dim, got k=3, s_hat=300,
    dim=200``); the command line renders the same error with its flags
    (``need --k <= --s-hat <= --dim, got --k=3, --s-hat=300 (default), --dim=200``).

    Args:
        requirement: what must hold, every parameter written as a ``{name}`` field, e.g.
            ``"need {k} <= {s_hat} <= {dim}"``.
        values: the value of every parameter named, in the order to list them after "got".
        hint: how to fix it (optional); may name parameters as ``{name}`` fields too.
    """

    def __init__(self, requirement: str, values: Mapping[str, object], hint: str = "") -> None:
        self.requirement = requirement
        self.values = dict(values)
        self.hint = hint
        super().__init__(self.render(KeywordNames()))

    def render(self, names: ParameterNames) -> str:
        """The message with every parameter spelled by ``names``."""
        spelled = {parameter: names.name(parameter) for parameter in self.values}
        got = ", ".join(names.assignment(p, value) for p, value in self.values.items())
        message = f"{self.requirement.format(**spelled)}, got {got}"
        return f"{message}; {self.hint.format(**spelled)}" if self.hint else message

    def __reduce__(self) -> tuple[type[ParameterError], tuple[str, dict[str, object], str]]:
        """Pickle by the parts (errors cross process boundaries in Flower simulations)."""
        return (type(self), (self.requirement, self.values, self.hint))
