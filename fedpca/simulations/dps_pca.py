"""Simulate DPS-PCA with Flower: N virtual sites on the synthetic model, one process."""

from __future__ import annotations

import functools
import time

import numpy as np
from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.dps_pca import privacy_record
from fedpca.flower.app_sites import partition_budget, partition_client, partition_identity
from fedpca.clients.dps_pca import client_for_site
from fedpca.errors import FedPCAError
from fedpca.dp.validation import require_site_count
from fedpca.progress import RoundObserver
from fedpca.results import PCAResult
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.simulation import Engine, run_federation
from fedpca.strategies.dps_pca import DPSPCA, DPSPCAStrategy
from fedpca.flower.workflow import secure_aggregation


class SimulatedSiteFailure(FedPCAError):
    """A virtual site failed on purpose (``failure_rate``): it released nothing."""


def _client_fn(scenario: DPSPCAScenario, context: Context) -> Client:
    if scenario.failure_rate and np.random.default_rng().random() < scenario.failure_rate:
        partition = context.node_config["partition-id"]
        raise SimulatedSiteFailure(f"site {partition}: simulated failure (nothing released)")
    return partition_client(client_for_site, scenario, context)


def simulate_dps_pca(
    scenario: DPSPCAScenario, verbose: bool = False,
    observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> PCAResult:
    """Run ``scenario`` as a Flower simulation and return its result.

    Privacy guarantee: each virtual site's transcript is (scenario.epsilon,
    scenario.delta)-DP per record: on its own (per-site noise, untrusted server), or, with
    ``scenario.secure_min_sites = m``, inside every SecAgg+ sum of at least ``m`` sites.
    """
    # more than the federation's sites would never arrive: the run would wait forever
    require_site_count(scenario.min_sites, "min_sites", scenario.sites)
    start = time.perf_counter()
    strategy_cls = DPSPCAStrategy if scenario.secagg_plus else DPSPCA
    sums = scenario.secure_sums()
    strategy = strategy_cls(
        dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat, rounds=scenario.rounds,
        min_sites=scenario.required_sites(), wait_for_sites=scenario.sites, seed=scenario.seed,
        evaluate_fn=scenario.distance_to_truth, secure=sums,
        explained_variance=scenario.explained_variance,
        privacy=privacy_record(scenario.policy(), sums),
    )
    secure = secure_aggregation(scenario, strategy, scenario.largest_site())
    client_fn = functools.partial(_client_fn, scenario)
    run_federation(strategy, client_fn, scenario.sites, verbose=verbose, secure=secure,
                   observer=observer, engine=engine,
                   identity_fn=functools.partial(partition_identity, scenario),
                   budget_fn=functools.partial(partition_budget, scenario))
    config = {
        **scenario.to_run_config(),
        "wall_seconds": time.perf_counter() - start,
        "site_releases": dict(sorted(strategy.site_releases.items())),
        "failures": len(strategy.failures),
    }
    return strategy.result(config)
