"""Simulate any fedpca algorithm with Flower: N virtual sites in one process (Ray backend).

:func:`simulate` runs a scenario's server (:meth:`~fedpca.scenarios.base.Scenario.server_plan`)
against one virtual site per partition of its data, each answering with the algorithm's
site (:data:`fedpca.algorithms.specs.SPECS`); :func:`simulate_tables` runs a centred run
(:meth:`~fedpca.scenarios.base.Scenario.centred_server`: the moments round, then the
algorithm's rounds on the centred, standardised rows) against one virtual site per table,
each reading and preprocessing its own table in its own process
(:class:`~fedpca.scenarios.tables.TableRun`). With the same seeds, a centred run gives the
same result as the Flower-free reference runs of :mod:`fedpca.algorithms.centred_run`.

Privacy guarantee: each virtual site's, as its algorithm's policy states it (unit: one
record of the site, replace-one; LDP-PCA: every record on its own): per-site noise, or every
release inside secure sums of at least ``M`` sites. A simulation's server may evaluate
against every site's data (this process can rebuild it); a real run's server cannot.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.centring import CentringSite
from fedpca.algorithms.specs import spec
from fedpca.errors import FedPCAError
from fedpca.flower.app_sites import (
    partition_budget,
    partition_client,
    partition_identity,
    site_partitions,
)
from fedpca.flower.centred_client import centred_client
from fedpca.flower.site_client import ClientFactory, client_factory
from fedpca.flower.federation import Engine, run_federation
from fedpca.flower.workflow import after_run, secure_aggregation, strategy_for
from fedpca.progress import RoundObserver
from fedpca.scenarios.base import Scenario
from fedpca.scenarios.centred_plan import CentredPlan
from fedpca.scenarios.tables import TableRun
from fedpca.secure.identity import SecureIdentity, simulation_identity


class SimulatedSiteFailure(FedPCAError):
    """A virtual site failed on purpose (a scenario's ``failure_rate``): it released
    nothing."""


def failing_client(failure_rate: float, client_fn: Any, context: Context) -> Client:
    """``client_fn``'s client, or a failure with probability ``failure_rate`` before
    anything is released (a simulated site that dropped out of this round)."""
    if np.random.default_rng().random() < failure_rate:
        partition = context.node_config["partition-id"]
        raise SimulatedSiteFailure(f"site {partition}: simulated failure (nothing released)")
    return client_fn(context)


def simulate(
    scenario: Scenario, verbose: bool = False, observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> Any:
    """Run ``scenario`` as a Flower simulation and return its result (its config: the
    scenario's parameters, ``wall_seconds``, each site's ``site_releases``, the number of
    ``failures`` and what the scenario adds, :meth:`~fedpca.scenarios.base.Scenario.simulation_config`)."""
    start = time.perf_counter()
    plan = scenario.server_plan()
    strategy = strategy_for(plan, scenario, wait_for_sites=scenario.sites)
    client_fn = functools.partial(partition_client, client_for(scenario), scenario)
    failure_rate = getattr(scenario, "failure_rate", 0.0)
    if failure_rate:
        client_fn = functools.partial(failing_client, failure_rate, client_fn)
    run_federation(strategy, client_fn, scenario.sites, verbose=verbose, observer=observer,
                   engine=engine, secure=secure_aggregation(scenario, strategy, plan.max_weight),
                   identity_fn=functools.partial(partition_identity, scenario),
                   budget_fn=functools.partial(partition_budget, scenario))
    after_run(plan, strategy)
    config = {
        **scenario.to_run_config(), **scenario.simulation_config(),
        "wall_seconds": time.perf_counter() - start,
        "site_releases": dict(sorted(strategy.site_releases.items())),
        "failures": len(strategy.failures),
    }
    return strategy.result(config)


def client_for(scenario: Scenario) -> ClientFactory:
    """The client factory of ``scenario``'s algorithm (its site class)."""
    return client_factory(spec(scenario.ALGORITHM).site_class())


def table_client(site_cls: type, run: TableRun, context: Context) -> Client:
    """Virtual site ``partition-id``'s centred client over its own table, under the run's
    policy."""
    partition = int(context.node_config["partition-id"])
    centring = CentringSite(run.site_rows(partition), run.loaded_contract.bounds, run.policy(),
                            site=str(partition), seed=run.scenario.seed)
    return centred_client(context, site_cls, centring)


def table_identity(run: TableRun, rounds: int, context: Context) -> SecureIdentity | None:
    """Virtual site ``partition-id``'s identity for the run's secure sums over ``rounds``
    Flower rounds (``None`` without secure sums)."""
    min_sites = run.policy().secure_min_sites
    if min_sites is None:
        return None
    return simulation_identity(int(context.node_config["partition-id"]),
                               site_partitions(context), min_sites, rounds)


def table_plan(run: TableRun) -> CentredPlan:
    """The centred run's plan for ``run``: its policy, the contract and the largest table's
    record count."""
    contract = run.loaded_contract
    return CentredPlan(run.scenario, run.policy(), contract.bounds, contract.output_columns,
                       max(run.sizes()))


def simulate_tables(
    run: TableRun, verbose: bool = False, observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> Any:
    """Run ``run``'s centred algorithm against one virtual site per table, each answering
    with the algorithm's site over its centred rows; the result (a
    :class:`~fedpca.results.CentredPCAResult`, or SuLQ k-plane's centred clustering) with
    the run's config."""
    start = time.perf_counter()
    scenario = run.scenario
    plan = scenario.centred_server(table_plan(run))
    strategy = strategy_for(plan, scenario, wait_for_sites=run.sites)
    site_cls = spec(scenario.ALGORITHM).site_class()
    run_federation(strategy, functools.partial(table_client, site_cls, run),
                   run.sites, verbose=verbose, observer=observer, engine=engine,
                   secure=secure_aggregation(scenario, strategy, plan.max_weight),
                   identity_fn=functools.partial(table_identity, run, strategy.num_rounds))
    config = {**scenario.to_run_config(), "dataset": "tables", "standardize": run.standardize,
              "contract": run.loaded_contract.hash,
              "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)
