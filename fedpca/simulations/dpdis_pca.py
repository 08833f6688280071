"""Simulate DPdisPCA with Flower: N virtual sites (synthetic model or a data set), one process."""

from __future__ import annotations

import functools
import time

from fedpca.flower.app_sites import partition_budget, partition_client, partition_identity
from fedpca.clients.dpdis_pca import client_for_site
from fedpca.progress import RoundObserver
from fedpca.results import PCAResult
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.flower.simulation import Engine, run_federation
from fedpca.strategies.dpdis_pca import DPdisPCA
from fedpca.flower.workflow import secure_aggregation


def simulate_dpdis_pca(
    scenario: DPdisPCAScenario, verbose: bool = False,
    observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    The history records ``energy_ratio`` against the pooled second-moment matrix (computed
    in this process from every site's data: an evaluation only a simulation can make).

    Privacy guarantee: each virtual site's one release is (scenario.epsilon,
    scenario.delta)-DP per record (per-site noise; the server is not trusted), or, in the
    secure-sum variant, every SecAgg+ sum of at least ``scenario.secure_min_sites`` sites.
    """
    start = time.perf_counter()
    secure = scenario.secure_sum()
    strategy = DPdisPCA(
        dim=scenario.dim, k=scenario.k, r=scenario.r, weighting=scenario.weighting,
        variant=scenario.variant, min_sites=scenario.required_sites(),
        wait_for_sites=scenario.sites, evaluation=scenario.evaluation(), secure=secure,
        privacy=scenario.privacy(secure), variance=scenario.variance,
    )
    client_fn = functools.partial(partition_client, client_for_site, scenario)
    run_federation(strategy, client_fn, scenario.sites, verbose=verbose, observer=observer,
                   engine=engine, secure=secure_aggregation(scenario, strategy, 1.0),
                   identity_fn=functools.partial(partition_identity, scenario),
                   budget_fn=functools.partial(partition_budget, scenario))
    config = {**scenario.to_run_config(), "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)
