"""The one accountant: the epsilon, at a delta, of releases composed over a run or a lifetime.

Every ledger (:mod:`fedpca.dp.ledger`'s rules, over a simulated site's in-memory releases or a
real site's SQLite lifetime ledger) stores :class:`~fedpca.dp.events.Release` records, plain
data, and asks this module what they compose to: the PLD accountant (dp-accounting) for
continuous Gaussian releases; with distributed discrete Gaussian releases among them, the
smaller of their Renyi-DP bound (:func:`release_rdp`) and the PLD of the Gaussians they
post-process plus their pointwise slack (:func:`gaussian_view`,
:mod:`fedpca.dp.ddg_accounting`). A release inside secure sums has two guarantees: the
conditional one (:func:`composed_epsilon` of the releases) and the unconditional one of the
site's own shares (:func:`worst_case_epsilon`). Composition is order-free: the releases are
composed as a sorted list of what is accounted of them (their labels aside), so that equal
histories share the caches whichever ledger asks.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from fedpca.dp.calibration import pld_epsilon
from fedpca.dp.ddg_accounting import (
    RDP_ORDERS,
    ddg_gaussian_multiplier,
    ddg_pld_epsilon,
    ddg_pld_slack,
    ddg_rdp,
    rdp_to_epsilon,
)
from fedpca.dp.events import Release

#: Relative slack when comparing spent epsilon with the budget (floating-point noise only).
EPSILON_SLACK = 1e-6


def composed_epsilon(releases: Sequence[Release], delta: float) -> float:
    """Epsilon at ``delta`` of all ``releases`` composed: the PLD accountant when every one
    is a continuous Gaussian; with distributed discrete Gaussian releases among them, the
    smaller of two valid bounds: their Renyi-DP curves added and converted by dp-accounting,
    and the PLD of the Gaussians they post-process plus their pointwise slack
    (:func:`fedpca.dp.ddg_accounting.ddg_pld_epsilon`)."""
    composed = tuple(sorted((_stripped(r) for r in releases), key=accounted))
    if not any(r.discrete for r in composed):
        return pld_epsilon(tuple(r.noise_multiplier for r in composed), delta)
    return _discrete_epsilon(composed, delta)


def worst_case_epsilon(releases: Sequence[Release], delta: float) -> float:
    """Epsilon at ``delta`` of ``releases`` against a coordinator that sees every site's own
    share (:meth:`~fedpca.dp.events.Release.own_share`): the unconditional
    guarantee, equal to :func:`composed_epsilon` when no release is inside a secure sum."""
    return composed_epsilon([r.own_share() for r in releases], delta)


def release_rdp(release: Release, orders: tuple[float, ...]) -> np.ndarray:
    """The Renyi-DP curve of ``release`` at ``orders``: ``alpha / (2 z^2)`` for a continuous
    Gaussian, the Kairouz-Liu-Steinke bound for a sum of discrete Gaussians."""
    if not release.discrete:
        return np.asarray(orders, dtype=np.float64) / (2 * release.noise_multiplier**2)
    sigma_sq = round(release.sigma**2 / release.summands)
    return ddg_rdp(sigma_sq, release.summands, release.sensitivity, release.padded, 1, orders)


def gaussian_view(release: Release) -> tuple[float, float]:
    """``(z, H)``: ``release`` is, up to a pointwise factor ``exp(+-H)`` on every outcome's
    probability, a post-processing of a Gaussian release with multiplier ``z`` (``H = 0`` for
    a continuous Gaussian; the bound of :mod:`fedpca.dp.distributed_gaussian` for a discrete
    one)."""
    if not release.discrete:
        return release.noise_multiplier, 0.0
    sigma_sq = round(release.sigma**2 / release.summands)
    return (ddg_gaussian_multiplier(sigma_sq, release.summands, release.sensitivity),
            ddg_pld_slack(sigma_sq, release.summands, release.padded))


def accounted(release: Release) -> tuple[float, float, int, int, int]:
    """The numbers the accountant reads of ``release`` (``sensitivity, sigma, summands,
    padded, sites_in_sum``): two releases with equal numbers compose alike."""
    return (release.sensitivity, release.sigma, release.summands, release.padded,
            release.sites_in_sum)


def _stripped(release: Release) -> Release:
    """``release`` without its label, shape and grid step (which no accounting reads)."""
    return Release("", release.sensitivity, release.sigma, (), release.summands,
                   release.padded, release.sites_in_sum)


@functools.lru_cache(maxsize=4096)
def _discrete_epsilon(releases: tuple[Release, ...], delta: float) -> float:
    rdp = rdp_to_epsilon(sum(release_rdp(r, RDP_ORDERS) for r in releases), delta)
    return min(rdp, ddg_pld_epsilon([gaussian_view(r) for r in releases], delta))
