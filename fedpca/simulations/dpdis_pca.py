"""Simulate DPdisPCA with Flower: N virtual sites (synthetic model or a data set), one process."""

from __future__ import annotations

import functools
import time

from fedpca.apps.common import partition_client
from fedpca.clients.dpdis_pca import client_for_site
from fedpca.progress import RoundObserver
from fedpca.results import PCAResult
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.simulations.launcher import Engine, run_federation
from fedpca.strategies.dpdis_pca import DPdisPCA


def simulate_dpdis_pca(
    scenario: DPdisPCAScenario, verbose: bool = False,
    observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    The history records ``energy_ratio`` against the pooled second-moment matrix (computed
    in this process from every site's data: an evaluation only a simulation can make).

    Privacy guarantee: each virtual site's one release is (scenario.epsilon,
    scenario.delta)-DP per record (per-site noise; the server is not trusted).
    """
    start = time.perf_counter()
    strategy = DPdisPCA(
        dim=scenario.dim, k=scenario.k, r=scenario.r, weighting=scenario.weighting,
        variant=scenario.variant, min_sites=scenario.min_sites or scenario.sites,
        wait_for_sites=scenario.sites, evaluation=scenario.evaluation(),
        privacy=scenario.privacy(),
    )
    client_fn = functools.partial(partition_client, client_for_site, scenario)
    run_federation(strategy, client_fn, scenario.sites, verbose=verbose, observer=observer,
                   engine=engine)
    config = {**scenario.to_run_config(), "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)
