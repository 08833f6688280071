"""Deliberately broken mechanisms: what the audit must catch (its tests and the measurement of
its power, ``benchmarks/audit_power.py``).

Each is a context manager that breaks the real code for the block and restores it after:

* :func:`halved_noise`: every site and curator draws noise of ``sigma / 2`` (exact noise:
  half the grid steps) while its ledger, its calibration and its claim still say ``sigma``;
* :func:`add_remove_sensitivity`: one mechanism's calibration uses the add/remove-one
  sensitivity, ``sqrt(2)`` below the replace-one figure the claim is about
  (:data:`ADD_REMOVE_SENSITIVITY`), so its noise is ``sqrt(2)`` too small and its claim
  unchanged;
* :func:`halved_secure_sum_noise`: the distributed discrete Gaussian's draws of a secure sum
  with a quarter of the variance (half the standard deviation).

Never use them outside an audit's test: the releases they make are not what they claim.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import ModuleType
from typing import Any

import fedpca.dp.ddg_encoding as ddg_encoding
from fedpca.algorithms.specs import SPECS, load
from fedpca.dp.exact_noise import ExactGaussian
from fedpca.dp.mechanisms import NoiseSource


def _figure(path: str) -> tuple[ModuleType, str, Callable[..., float]]:
    """The module at ``path`` (``module:attribute``), the figure's name, and that figure
    ``sqrt(2)`` too small (every audited figure is ``sqrt(2)`` times its add/remove-one
    counterpart: a changed row's ``sqrt(2) C^2`` against an added row's ``C^2``)."""
    module, _, attribute = path.partition(":")
    real = load(path)
    return (importlib.import_module(module), attribute,
            lambda *args: real(*args) / math.sqrt(2))


#: Per audited mechanism: the module whose figure its calibration reads, the figure's name,
#: and the understated add/remove-one figure (``sqrt(2)`` too small): the federated
#: algorithms' from their specs
#: (:attr:`~fedpca.algorithms.specs.AlgorithmSpec.sensitivities`), then Analyze Gauss's.
ADD_REMOVE_SENSITIVITY: dict[str, tuple[ModuleType, str, Callable[..., float]]] = {
    **{name: _figure(path) for spec in SPECS.values() for name, path in spec.sensitivities},
    "analyze-gauss": _figure("fedpca.algorithms.central:upper_triangle_sensitivity"),
}
#: The mechanisms both bugs are checked on. MOD-SuLQ's calibration is the paper's beta (no
#: sensitivity figure) and far above what its claim needs: halving it leaves it private at
#: the claim.
UNDER_NOISED = sorted(ADD_REMOVE_SENSITIVITY)


@contextlib.contextmanager
def _replaced(changes: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Each ``(owner, name, value)``: ``owner.name = value`` for the block."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in changes]
    try:
        for owner, name, value in changes:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


def halved_noise() -> contextlib.AbstractContextManager[None]:
    """Bug (a): noise of ``sigma / 2`` (exact noise: half the grid steps), claims unchanged."""
    changes: list[tuple[Any, str, Any]] = []
    for method in ("gaussian", "symmetric"):
        real = getattr(NoiseSource, method)
        changes.append((NoiseSource, method,
                        lambda self, index, sigma, size, real=real: real(self, index, sigma / 2,
                                                                         size)))
    exact = ExactGaussian.noisy
    changes.append((ExactGaussian, "noisy",
                    lambda self, values, rng: exact(replace(self, sigma=self.sigma // 2),
                                                    values, rng)))
    return _replaced(changes)


def add_remove_sensitivity(mechanism: str) -> contextlib.AbstractContextManager[None]:
    """Bug (b): ``mechanism``'s calibration reads the add/remove-one sensitivity."""
    owner, attribute, understated = ADD_REMOVE_SENSITIVITY[mechanism]
    return _replaced([(owner, attribute, understated)])


def halved_secure_sum_noise() -> contextlib.AbstractContextManager[None]:
    """A secure sum's distributed discrete Gaussian draws with a quarter of the variance."""
    real = ddg_encoding.discrete_gaussian
    return _replaced([(ddg_encoding, "discrete_gaussian",
                       lambda sigma_sq, size, rng: real(max(1, sigma_sq // 4), size, rng))])
