"""Simulate DPdisPCA with Flower: N virtual sites (synthetic model or a data set), one process."""

from __future__ import annotations

import functools
import time

from flwr.client import Client, ClientApp
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.apps.workflow import run_strategy
from fedpca.clients.dpdis_pca import client_for_site
from fedpca.dpdis_scenario import DPdisPCAScenario
from fedpca.errors import FedPCAError
from fedpca.results import PCAResult
from fedpca.simulations.launcher import launch
from fedpca.strategies.dpdis_pca import DPdisPCAStrategy


def _client_fn(scenario: DPdisPCAScenario, context: Context) -> Client:
    partition = int(context.node_config["partition-id"])
    return client_for_site(
        context, scenario.prepared_site(partition), scenario.policy(), str(partition),
        seed=scenario.seed,
    )


def simulate_dpdis_pca(scenario: DPdisPCAScenario, verbose: bool = False) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    The history records ``energy_ratio`` against the pooled second-moment matrix (computed
    in this process from every site's data: an evaluation only a simulation can make).

    Privacy guarantee: each virtual site's one release is (scenario.epsilon,
    scenario.delta)-DP per record (per-site noise; the server is not trusted).
    """
    start = time.perf_counter()
    strategy = DPdisPCAStrategy(
        dim=scenario.dim, k=scenario.k, r=scenario.r, weighting=scenario.weighting,
        variant=scenario.variant, min_sites=scenario.min_sites or scenario.sites,
        evaluation=scenario.evaluation(), privacy=scenario.privacy(),
    )
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        run_strategy(grid, context, strategy, strategy.num_rounds)

    client_app = ClientApp(client_fn=functools.partial(_client_fn, scenario))
    launch(server_app, client_app, scenario.sites, verbose=verbose)
    if not strategy.server.history:
        raise FedPCAError(
            f"the DPdisPCA round did not complete; site failures: {strategy.failures[:5]}"
        )
    config = {
        **scenario.to_run_config(),
        "r": strategy.server.r,
        "bytes_per_site": strategy.server.bytes_per_site,
        "wall_seconds": time.perf_counter() - start,
    }
    return strategy.result(config)
