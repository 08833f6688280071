"""Checks on a site's data and on server requests, with errors that say what to fix."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np

from fedpca.errors import ConfigurationError, InvalidDataError, ParameterError

def validate_site_data(X: object, site: str = "site", dim: int | None = None) -> np.ndarray:
    """Return ``X`` as a C-contiguous float64 ``n x d`` array, or raise InvalidDataError.

    Refuses: non-arrays, every non-float dtype (integers, booleans, strings, objects: an
    integer column is often a category code, so converting is the caller's explicit choice),
    arrays that are not 2-D, zero rows or columns, NaN/inf, and a width other than ``dim``.
    """
    try:
        arr = np.asarray(X)
    except Exception as exc:  # noqa: BLE001 - anything unconvertible is bad data
        raise InvalidDataError(f"{site}: data cannot be read as an array: {exc}") from exc
    if not np.issubdtype(arr.dtype, np.floating):
        kind = "integer" if np.issubdtype(arr.dtype, np.integer) else str(arr.dtype)
        raise InvalidDataError(
            f"{site}: data has {kind} dtype {arr.dtype}; fedpca needs real-valued "
            "measurements as floats. If these are numeric measurements (not category codes), "
            "convert them explicitly, e.g. X.astype(float), and scale them with public bounds"
        )
    if arr.ndim != 2:
        raise InvalidDataError(
            f"{site}: data must be 2-D (records x features), got shape {arr.shape}; "
            "reshape it, e.g. X.reshape(len(X), -1)"
        )
    n, d = arr.shape
    if n == 0:
        raise InvalidDataError(f"{site}: data has no records (shape {arr.shape})")
    if d == 0:
        raise InvalidDataError(f"{site}: data has no features (shape {arr.shape})")
    if dim is not None and d != dim:
        raise InvalidDataError(
            f"{site}: data has {d} features but the federation expects {dim}; every site "
            "must use the same feature order and width"
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        bad_rows = np.flatnonzero(~finite.all(axis=1))
        raise InvalidDataError(
            f"{site}: data has {int((~finite).sum())} NaN/inf entries in {bad_rows.size} rows "
            f"(first rows: {bad_rows[:5].tolist()}); impute or drop them before the run"
        )
    return arr


def require_choice(value: object, name: str, choices: tuple[str, ...] | list[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ConfigurationError."""
    if value not in choices:
        raise ParameterError(f"{{{name}}} must be one of {tuple(choices)}", {name: value})
    return str(value)


def require_positive_int(
    value: object, name: str, minimum: int = 1, error: type[Exception] = ConfigurationError
) -> int:
    """Return ``value`` as int if it is an integer >= ``minimum``, else raise ``error`` (a
    :class:`~fedpca.errors.ParameterError` for the default ConfigurationError)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _parameter_error(error, name, value, "must be an integer")
    if value < minimum:
        raise _parameter_error(error, name, value, f"must be >= {minimum}")
    return int(value)


def require_finite_positive(
    value: object, name: str, error: type[Exception] = ConfigurationError
) -> float:
    """Return ``value`` as float if it is finite and > 0, else raise ``error`` (a
    :class:`~fedpca.errors.ParameterError` for the default ConfigurationError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise _parameter_error(error, name, value, "must be a number")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise _parameter_error(error, name, value, "must be finite and > 0")
    return float(value)


def _parameter_error(
    error: type[Exception], name: str, value: object, requirement: str
) -> Exception:
    """``name requirement, got value`` as ``error``; a ConfigurationError becomes a
    ParameterError, so front ends can spell ``name`` their own way."""
    if error is ConfigurationError:
        return ParameterError(f"{{{name}}} {requirement}", {name: value})
    return error(f"{name} {requirement}, got {value!r}")


def require_ordered(values: Mapping[str, int]) -> None:
    """Raise ParameterError unless the named values do not decrease in the order given,
    e.g. ``{"k": 3, "s_hat": 20, "dim": 200}`` for ``k <= s_hat <= dim``."""
    if any(low > high for low, high in itertools.pairwise(values.values())):
        raise ParameterError("need " + " <= ".join(f"{{{name}}}" for name in values), values)


def require_sizes(values: Mapping[str, int]) -> None:
    """Raise ParameterError unless every named value is a positive integer and they do not
    decrease in the order given, e.g. ``{"k": 3, "sparsity": 10, "dim": 200}`` for
    ``1 <= k <= sparsity <= dim`` (:func:`require_positive_int`, :func:`require_ordered`)."""
    for name, value in values.items():
        require_positive_int(value, name)
    require_ordered(values)


def require_site_count(value: int | None, name: str, sites: int, minimum: int = 1) -> None:
    """Raise ParameterError unless ``value`` (a number of sites such as ``min_sites``; None
    means all) is in ``minimum..sites``."""
    if value is not None and not minimum <= value <= sites:
        raise ParameterError(
            f"{{{name}}} must be in {minimum}..{sites} (the number of {{sites}})",
            {name: value, "sites": sites},
        )
