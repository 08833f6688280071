"""Simulate LDP-PCA with Flower: N virtual sites on the synthetic model or a dataset."""

from __future__ import annotations

import functools
import time

from flwr.client import Client, ClientApp
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.apps.workflow import run_strategy
from fedpca.clients.ldp_pca import client_for_site
from fedpca.errors import FedPCAError
from fedpca.ldp_scenario import LDPScenario
from fedpca.results import PCAResult
from fedpca.simulations.launcher import launch
from fedpca.strategies.ldp_pca import LDPCovarianceStrategy


def _client_fn(scenario: LDPScenario, context: Context) -> Client:
    partition = int(context.node_config["partition-id"])
    return client_for_site(
        context, scenario.prepared_site(partition), scenario.policy(), str(partition),
        seed=scenario.seed,
    )


def simulate_ldp_pca(scenario: LDPScenario, verbose: bool = False) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    Privacy guarantee: every record's view is (scenario.epsilon, scenario.delta)-DP (local
    model, replace-one); no party, the server included, is trusted.
    """
    start = time.perf_counter()
    strategy = LDPCovarianceStrategy(
        dim=scenario.data_dim, k=scenario.k, sparse=scenario.sparse, lam=scenario.lam,
        min_sites=scenario.min_sites or scenario.sites, evaluate_fn=scenario.evaluate,
        true_support=scenario.true_support(), privacy=scenario.privacy(),
    )
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        run_strategy(grid, context, strategy, strategy.num_rounds)

    client_app = ClientApp(client_fn=functools.partial(_client_fn, scenario))
    launch(server_app, client_app, scenario.sites, verbose=verbose)
    if not strategy.server.history:
        raise FedPCAError(
            f"the simulation stopped before the sites' views were aggregated; site failures: "
            f"{strategy.failures[:5]}"
        )
    config = {**scenario.to_run_config(), "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)
