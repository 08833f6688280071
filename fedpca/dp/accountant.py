"""The one accountant: the epsilon, at a delta, of releases composed over a run or a lifetime.

Every ledger (a simulated site's :class:`~fedpca.dp.ledger.PrivacyLedger`, a real site's
SQLite lifetime ledger) stores :class:`~fedpca.dp.events.Release` records and asks this module
what they compose to: the PLD accountant (dp-accounting) for continuous Gaussian releases; with
distributed discrete Gaussian releases among them, the smaller of their Renyi-DP bound and the
PLD of the Gaussians they post-process plus their pointwise slack
(:mod:`fedpca.dp.ddg_accounting`). A release inside secure sums has two guarantees: the
conditional one (:func:`composed_epsilon` of the releases) and the unconditional one of the
site's own shares (:func:`worst_case_epsilon`).
"""

from __future__ import annotations

import functools

from fedpca.dp.calibration import pld_epsilon
from fedpca.dp.ddg_accounting import RDP_ORDERS, ddg_pld_epsilon, rdp_to_epsilon
from fedpca.dp.events import Release

#: Relative slack when comparing spent epsilon with the budget (floating-point noise only).
EPSILON_SLACK = 1e-6


def composed_epsilon(releases: list[Release], delta: float) -> float:
    """Epsilon at ``delta`` of all ``releases`` composed: the PLD accountant when every one
    is a continuous Gaussian; with distributed discrete Gaussian releases among them, the
    smaller of two valid bounds: their Renyi-DP curves added and converted by dp-accounting,
    and the PLD of the Gaussians they post-process plus their pointwise slack
    (:func:`fedpca.dp.ddg_accounting.ddg_pld_epsilon`)."""
    if not any(r.discrete for r in releases):
        return pld_epsilon(tuple(r.noise_multiplier for r in releases), delta)
    return _discrete_epsilon(tuple(releases), delta)


def worst_case_epsilon(releases: list[Release], delta: float) -> float:
    """Epsilon at ``delta`` of ``releases`` against a coordinator that sees every site's own
    share (:meth:`~fedpca.dp.events.Release.own_share`): the unconditional
    guarantee, equal to :func:`composed_epsilon` when no release is inside a secure sum."""
    return composed_epsilon([r.own_share() for r in releases], delta)


@functools.lru_cache(maxsize=4096)
def _discrete_epsilon(releases: tuple[Release, ...], delta: float) -> float:
    rdp = rdp_to_epsilon(sum(r.rdp(RDP_ORDERS) for r in releases), delta)
    return min(rdp, ddg_pld_epsilon([r.gaussian_view() for r in releases], delta))
