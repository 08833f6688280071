"""Simulate LDP-PCA with Flower: N virtual sites on the synthetic model or a dataset."""

from __future__ import annotations

import functools
import time

from fedpca.flower.app_sites import partition_budget, partition_client
from fedpca.clients.ldp_pca import client_for_site
from fedpca.progress import RoundObserver
from fedpca.results import PCAResult
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.flower.simulation import Engine, run_federation
from fedpca.strategies.ldp_pca import LDPCovariance


def simulate_ldp_pca(
    scenario: LDPScenario, verbose: bool = False,
    observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    Privacy guarantee: every record's view is (scenario.epsilon, scenario.delta)-DP (local
    model, replace-one); no party, the server included, is trusted.
    """
    start = time.perf_counter()
    strategy = LDPCovariance(
        dim=scenario.data_dim, k=scenario.k, sparse=scenario.sparse, lam=scenario.lam,
        min_sites=scenario.min_sites or scenario.sites, wait_for_sites=scenario.sites,
        evaluate_fn=scenario.evaluate, true_support=scenario.true_support(),
        privacy=scenario.privacy(),
    )
    client_fn = functools.partial(partition_client, client_for_site, scenario)
    run_federation(strategy, client_fn, scenario.sites, verbose=verbose, observer=observer,
                   engine=engine, budget_fn=functools.partial(partition_budget, scenario))
    config = {
        **scenario.to_run_config(),
        "clipped_rows": sum(site.clip.clipped_rows for site in scenario.all_sites()),
        "wall_seconds": time.perf_counter() - start,
    }
    return strategy.result(config)
