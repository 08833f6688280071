"""Simulate DPS-PCA with Flower: N virtual sites on the synthetic model, one process."""

from __future__ import annotations

import functools
import time

import numpy as np

from flwr.client import Client, ClientApp
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.apps.workflow import SecAggSettings, run_strategy
from fedpca.clients.dps_pca import client_for_site
from fedpca.clients.secure_aggregation import secure_aggregation_mod
from fedpca.errors import FedPCAError
from fedpca.results import PCAResult
from fedpca.scenario import DPSPCAScenario
from fedpca.simulations.launcher import launch
from fedpca.strategies.dps_pca import DPSPCAStrategy


class SimulatedSiteFailure(FedPCAError):
    """A virtual site failed on purpose (``failure_rate``): it released nothing."""


def _client_fn(scenario: DPSPCAScenario, context: Context) -> Client:
    partition = int(context.node_config["partition-id"])
    if scenario.failure_rate and np.random.default_rng().random() < scenario.failure_rate:
        raise SimulatedSiteFailure(f"site {partition}: simulated failure (nothing released)")
    return client_for_site(
        context, scenario.prepared_site(partition), scenario.policy(), str(partition),
        seed=scenario.seed,
    )


def simulate_dps_pca(scenario: DPSPCAScenario, verbose: bool = False) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    Privacy guarantee: each virtual site's transcript is (scenario.epsilon,
    scenario.delta)-DP per record: on its own (per-site noise, untrusted server), or, with
    ``scenario.secure_min_sites = m``, inside every SecAgg+ sum of at least ``m`` sites.
    """
    start = time.perf_counter()
    strategy = DPSPCAStrategy(
        dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat, rounds=scenario.rounds,
        min_sites=scenario.required_sites(), wait_for_sites=scenario.sites, seed=scenario.seed,
        evaluate_fn=scenario.distance_to_truth, privacy=scenario.privacy(),
    )
    secure = None
    if scenario.secure_min_sites is not None:
        secure = SecAggSettings.for_sites(scenario.sites, scenario.largest_site())
        secure.check(scenario.sites)
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        run_strategy(grid, context, strategy, strategy.num_rounds, secure=secure)

    client_app = ClientApp(
        client_fn=functools.partial(_client_fn, scenario), mods=[secure_aggregation_mod]
    )
    launch(server_app, client_app, scenario.sites, verbose=verbose)
    if len(strategy.server.history) < strategy.num_rounds:
        raise FedPCAError(
            f"the simulation stopped after {len(strategy.server.history)} of "
            f"{strategy.num_rounds} rounds; site failures: {strategy.failures[:5]}"
        )
    config = {
        **scenario.to_run_config(),
        "wall_seconds": time.perf_counter() - start,
        "site_releases": dict(sorted(strategy.site_releases.items())),
        "failures": len(strategy.failures),
    }
    return strategy.result(config)
