"""Simulate any fedpca algorithm with Flower: N virtual sites in one process (Ray backend).

:func:`simulate` runs a scenario's server (:meth:`~fedpca.scenarios.base.Scenario.server_plan`)
against one virtual site per partition of its data, each answering with the algorithm's
site (:data:`fedpca.algorithms.specs.SPECS`); :func:`simulate_tables` runs a centred run
(:meth:`~fedpca.scenarios.base.Scenario.centred_server`: the moments round, then the
algorithm's rounds on the centred, standardised rows) against one virtual site per table,
each reading and preprocessing its own table in its own process
(:class:`~fedpca.scenarios.tables.TableRun`); :func:`simulate_genotypes` runs DPS-PCA against
one virtual site per PLINK fileset (:class:`~fedpca.scenarios.genotypes.GenotypeRun`). With
the same seeds, a centred run gives the
same result as the Flower-free reference runs of :mod:`fedpca.algorithms.centred_run`.

Privacy guarantee: each virtual site's, as its algorithm's policy states it (unit: one
record of the site, replace-one; LDP-PCA: every record on its own): per-site noise, or every
release inside secure sums of at least ``M`` sites. A simulation's server may evaluate
against every site's data (this process can rebuild it); a real run's server cannot.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from flwr.client import Client
from flwr.common import Context

from fedpca.audit.malicious import Attack
from fedpca.flower.site.clientapp import node_of
from fedpca.flower.federation import Engine, run_federation, source_sites
from fedpca.flower.site.site_client import source_client
from fedpca.flower.server.workflow import after_run, strategy_for
from fedpca.progress import RoundObserver
from fedpca.scenarios.base import Scenario
from fedpca.scenarios.genotypes import GenotypeRun
from fedpca.scenarios.plans import CentredPlan, ServerPlan
from fedpca.scenarios.tables import TableRun
from fedpca.secure.identity import SecureIdentity
from fedpca.simulated_sites import (
    FlakySource,
    GenotypeSource,
    PartitionSource,
    TableSource,
    partition_of,
)
from fedpca.site.service import Node, SiteSource


def partition_source(scenario: Scenario, node: Node, attack: Attack | None = None
                     ) -> SiteSource:
    """Virtual site ``partition-id``'s source: its partition of ``scenario``'s data (failing
    each round with the scenario's ``failure_rate``, when it sets one; site ``"0"``
    malicious with an ``attack``, experiments only)."""
    source = PartitionSource(scenario, *partition_of(node.node_config), attack=attack)
    failure_rate = getattr(scenario, "failure_rate", 0.0)
    return FlakySource(source, failure_rate) if failure_rate else source


def partition_client(scenario: Scenario, context: Context) -> Client:
    """Virtual site ``partition-id``'s client for ``scenario`` (for a ClientApp of your own,
    :func:`~fedpca.flower.site.clientapp.site_client_app`), its in-memory ledger in
    ``context.state``."""
    return source_client(context, partition_source(scenario, node_of(context)))


def partition_identity(scenario: Scenario, context: Context) -> SecureIdentity | None:
    """Virtual site ``partition-id``'s identity for ``scenario``'s secure sums (``None``
    without them)."""
    return partition_source(scenario, node_of(context)).identity()


def simulate(
    scenario: Scenario, verbose: bool = False, observer: RoundObserver | None = None,
    engine: Engine | None = None, attack: Attack | None = None,
) -> Any:
    """Run ``scenario`` as a Flower simulation and return its result (its config: the
    scenario's parameters, ``wall_seconds``, each site's ``site_releases``, the number of
    ``failures`` and what the scenario adds,
    :meth:`~fedpca.scenarios.base.Scenario.simulation_config`). With an ``attack``
    (experiments only), site ``"0"`` is malicious (:mod:`fedpca.audit.malicious`) and the
    config names it (``malicious_site``)."""
    marked = {} if attack is None else {"malicious_site": str(attack)}
    return run_sources(scenario, scenario.server_plan(), scenario.sites,
                       functools.partial(partition_source, scenario, attack=attack),
                       {**scenario.to_run_config(), **scenario.simulation_config(), **marked},
                       verbose=verbose, observer=observer, engine=engine)


def run_sources(scenario: Scenario, plan: ServerPlan, sites: int,
                source: Callable[[Node], SiteSource], config: dict[str, Any],
                verbose: bool = False, observer: RoundObserver | None = None,
                engine: Engine | None = None) -> Any:
    """Run ``plan``'s server against ``sites`` virtual sites answering from ``source(node)``;
    the result with ``config``, the wall time, each site's releases and the failures."""
    start = time.perf_counter()
    strategy = strategy_for(plan, scenario, wait_for_sites=sites)
    run_federation(strategy, source_sites(source), sites, verbose=verbose, observer=observer,
                   engine=engine)
    after_run(plan, strategy)
    return strategy.result({
        **config, "wall_seconds": time.perf_counter() - start,
        "site_releases": dict(sorted(strategy.site_releases.items())),
        "failures": len(strategy.failures),
    })


def genotype_source(run: GenotypeRun, node: Node) -> SiteSource:
    """Virtual site ``partition-id``'s fileset of ``run``."""
    return GenotypeSource(run, *partition_of(node.node_config))


def simulate_genotypes(
    run: GenotypeRun, verbose: bool = False, observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> Any:
    """Run DPS-PCA against one virtual site per PLINK fileset of ``run``, each streaming its
    genotype rows; the result with the run's config (the panel's digest as its
    ``contract``)."""
    return run_sources(run.scenario, run.server_plan(), run.sites,
                       functools.partial(genotype_source, run), run.run_config(),
                       verbose=verbose, observer=observer, engine=engine)


def table_source(run: TableRun, rounds: int, node: Node) -> SiteSource:
    """Virtual site ``partition-id``'s table of ``run`` (``rounds``: the run's rounds)."""
    return TableSource(run, *partition_of(node.node_config), rounds)


def simulate_tables(
    run: TableRun, verbose: bool = False, observer: RoundObserver | None = None,
    engine: Engine | None = None,
) -> Any:
    """Run ``run``'s centred algorithm against one virtual site per table, each answering
    with the algorithm's site over its centred rows; the result (a
    :class:`~fedpca.results.CentredPCAResult`, or SuLQ k-plane's centred clustering) with
    the run's config."""
    start = time.perf_counter()
    scenario, contract = run.scenario, run.loaded_contract
    # the centred run's plan: the sites' policy, the contract, the largest table's count
    plan = scenario.centred_server(CentredPlan(scenario, run.policy(), contract.bounds,
                                               contract.output_columns, max(run.sizes())))
    strategy = strategy_for(plan, scenario, wait_for_sites=run.sites)
    sites = source_sites(functools.partial(table_source, run, strategy.num_rounds))
    run_federation(strategy, sites, run.sites, verbose=verbose, observer=observer,
                   engine=engine)
    config = {**scenario.to_run_config(), "dataset": "tables", "standardize": run.standardize,
              "contract": contract.hash,
              "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)
