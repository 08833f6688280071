"""Simulate SuLQ k-plane with Flower: N virtual sites on the union of subspaces, one process."""

from __future__ import annotations

import functools
import time

from fedpca.flower.app_sites import partition_budget, partition_client, partition_identity
from fedpca.clients.kplane import client_for_site
from fedpca.results import ClusteringResult
from fedpca.progress import RoundObserver
from fedpca.scenarios.kplane import KPlaneScenario
from fedpca.flower.simulation import Engine, run_federation
from fedpca.strategies.kplane import SuLQKPlane
from fedpca.flower.workflow import secure_aggregation


def simulate_kplane(
    scenario: KPlaneScenario, verbose: bool = False,
    observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> ClusteringResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    Privacy guarantee: each virtual site's transcript is (scenario.epsilon,
    scenario.delta)-DP per record (per-site noise, untrusted server), or, with
    ``scenario.secure_min_sites = M``, every SecAgg+ sum of at least ``M`` sites is.
    """
    start = time.perf_counter()
    secure = scenario.secure_sum()
    strategy = SuLQKPlane(
        dim=scenario.dim, clusters=scenario.clusters, subspace_dim=scenario.subspace_dim,
        rounds=scenario.rounds, clip_norm=scenario.clip_norm,
        min_sites=scenario.required_sites(), wait_for_sites=scenario.sites,
        seed=scenario.seed, evaluate_fn=scenario.evaluate, secure=secure,
        privacy=scenario.privacy(secure),
    )
    client_fn = functools.partial(partition_client, client_for_site, scenario)
    run_federation(strategy, client_fn, scenario.sites, verbose=verbose, observer=observer,
                   engine=engine, secure=secure_aggregation(scenario, strategy, 1.0),
                   identity_fn=functools.partial(partition_identity, scenario),
                   budget_fn=functools.partial(partition_budget, scenario))
    config = {
        **scenario.to_run_config(),
        "wall_seconds": time.perf_counter() - start,
        "site_releases": dict(sorted(strategy.site_releases.items())),
    }
    return strategy.result(config)
