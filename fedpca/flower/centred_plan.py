"""The strategy of a centred run, built once for the simulation over tables and the App.

:class:`CentredPlan` derives what every centred strategy shares from the run's policy (the
request's: each site calibrates with its own), the consortium's contract and the
federation: the public rotation seed of the secure sums, the moments round's
:class:`~fedpca.algorithms.centring.MomentsServer` (its secure sum when the policy's
releases are discrete; every record's own views with a local policy);
:func:`centred_dpdis`, :func:`centred_dps`, :func:`centred_kplane` and :func:`centred_ldp`
add the algorithm's own secure sums and parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedpca.algorithms.centred_run import centred_ldp_privacy, centred_privacy
from fedpca.algorithms.centring import CentredPolicy, moments_server, moments_sum
from fedpca.algorithms.dpdis_pca import VARIANT_SECURE, secure_sum_for
from fedpca.algorithms.dps_pca import secure_sums
from fedpca.algorithms.kplane import secure_sum_for as kplane_secure_sum
from fedpca.algorithms.secure_sum import public_seed
from fedpca.dp.moments import ColumnBounds
from fedpca.scenarios.base import Scenario
from fedpca.strategies.dpdis_pca import CentredDPdisPCA
from fedpca.strategies.dps_pca import CentredDPSPCA
from fedpca.strategies.kplane import CentredKPlane
from fedpca.strategies.ldp_pca import CentredLDP


class CentredPlan:
    """What a centred run's strategy derives from its policy, contract and federation.

    Args:
        scenario: the algorithm's parameters (``k``, ``seed``, ``min_sites``, ...).
        policy: the run's :class:`CentredPolicy` (the request's).
        bounds, columns: the contract's bounds and output column names.
        max_records: a public bound on every site's record count (secure sums only).
        wait_for_sites: the sites every round waits for (``None``: ``min_sites``).
    """

    def __init__(self, scenario: Scenario, policy: CentredPolicy, bounds: ColumnBounds,
                 columns: Sequence[str], max_records: int,
                 wait_for_sites: int | None = None) -> None:
        self.scenario, self.policy, self.bounds = scenario, policy, bounds
        self.columns, self.max_records = list(columns), max_records
        self.wait_for_sites = wait_for_sites
        seed = scenario.seed
        self.rotation_seed = seed if seed is not None else public_seed()
        secure = (moments_sum(policy, bounds, max_records, scenario.sites, self.rotation_seed)
                  if policy.discrete else None)
        self.centring = moments_server(policy, bounds, scenario.sites, secure)

    def options(self, mechanism: str) -> dict[str, Any]:
        """The centred strategy's options every algorithm shares."""
        return {"centring": self.centring, "columns": self.columns, "dim": self.bounds.dim,
                "min_sites": self.scenario.required_sites(),
                "wait_for_sites": self.wait_for_sites,
                "privacy": centred_privacy(self.policy, self.bounds, mechanism)}


def centred_dpdis(plan: CentredPlan) -> CentredDPdisPCA:
    """Centred DPdisPCA (any variant) under ``plan``."""
    scenario = plan.scenario
    secure = (secure_sum_for(plan.policy.algorithm_policy(plan.bounds), plan.bounds.dim,
                             plan.max_records, scenario.sites, plan.rotation_seed)
              if scenario.variant == VARIANT_SECURE else None)
    return CentredDPdisPCA(k=scenario.k, r=scenario.r, weighting=scenario.weighting,
                           variant=scenario.variant, secure=secure, **plan.options(CentredDPdisPCA.mechanism))


def centred_dps(plan: CentredPlan) -> CentredDPSPCA:
    """Centred DPS-PCA under ``plan`` (with its Rayleigh-quotient round when the policy asks
    for the explained variance)."""
    scenario = plan.scenario
    secure = (secure_sums(plan.policy.algorithm_policy(plan.bounds), plan.bounds.dim,
                          scenario.k, plan.max_records, scenario.sites, plan.rotation_seed)
              if plan.policy.discrete else None)
    return CentredDPSPCA(k=scenario.k, s_hat=scenario.s_hat, rounds=scenario.rounds,
                         seed=scenario.seed, secure=secure,
                         explained_variance=plan.policy.explained_variance,
                         **plan.options(CentredDPSPCA.mechanism))


def centred_kplane(plan: CentredPlan) -> CentredKPlane:
    """Centred SuLQ k-plane under ``plan``: its rounds' counts are turned back with the
    policy's clip norm ``C``."""
    scenario = plan.scenario
    share = plan.policy.algorithm_policy(plan.bounds)
    secure = (kplane_secure_sum(share, plan.bounds.dim, scenario.clusters, plan.max_records,
                                scenario.sites, plan.rotation_seed)
              if plan.policy.discrete else None)
    return CentredKPlane(clusters=scenario.clusters, subspace_dim=scenario.subspace_dim,
                         rounds=scenario.rounds, clip_norm=share.clip_norm, seed=scenario.seed,
                         secure=secure, **plan.options(CentredKPlane.mechanism))


def centred_ldp(plan: CentredPlan) -> CentredLDP:
    """Centred LDP-PCA under ``plan`` (a local policy): its privacy record states the
    covariance view's per-record noise."""
    scenario = plan.scenario
    options = {**plan.options(CentredLDP.mechanism),
               "privacy": centred_ldp_privacy(plan.policy, plan.bounds)}
    return CentredLDP(k=scenario.k, sparse=scenario.sparse, lam=scenario.lam, **options)
