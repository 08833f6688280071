"""Simulate a centred run over tables with Flower: one virtual site per table, one contract.

The moments round, then the algorithm's rounds on the centred (standardised) rows
(:mod:`fedpca.flower.centring`, :mod:`fedpca.flower.centred_client`); each virtual site
reads and preprocesses its own table in its own process
(:class:`~fedpca.scenarios.tables.TableRun`). With the same seeds, a centred DPdisPCA run
gives the same result as the Flower-free reference run
:func:`fedpca.algorithms.centred_run.run_centred_pca`.

Privacy guarantee: each virtual site's moments release and the algorithm's releases compose
to (epsilon, delta)-DP per record under its
:class:`~fedpca.algorithms.centring.CentredPolicy` (per-site noise, or every release inside
verified secure sums of at least ``M`` sites).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from flwr.client import Client
from flwr.common import Context

from fedpca.algorithms.centring import CentringSite
from fedpca.algorithms.dpdis_pca import DPdisPCASite
from fedpca.algorithms.dps_pca import DPSPCASite
from fedpca.algorithms.kplane import KPlaneSite
from fedpca.algorithms.ldp_pca import LDPCovarianceSite
from fedpca.flower.app_sites import site_partitions
from fedpca.flower.centred_client import centred_client
from fedpca.results import CentredClusteringResult
from fedpca.progress import RoundObserver
from fedpca.results import CentredPCAResult
from fedpca.scenarios.tables import TableRun
from fedpca.secure.identity import SecureIdentity, simulation_identity
from fedpca.flower.simulation import Engine, run_federation
from fedpca.flower.centred_plan import (
    CentredPlan,
    centred_dpdis,
    centred_dps,
    centred_kplane,
    centred_ldp,
)
from fedpca.flower.strategy import MessageSiteStrategy
from fedpca.flower.workflow import secure_aggregation


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
    """The centred strategy's plan for ``run``: its policy, the contract, the largest
    table's record count, every site waited for."""
    contract = run.loaded_contract
    return CentredPlan(run.scenario, run.policy(), contract.bounds, contract.output_columns,
                       max(run.sizes()), wait_for_sites=run.sites)


def simulate_tables(
    build: Callable[[CentredPlan], MessageSiteStrategy], site_cls: type, run: TableRun,
    verbose: bool = False,
    observer: RoundObserver | None = None, engine: Engine | None = None,
) -> CentredPCAResult | CentredClusteringResult:
    """Run ``build``'s centred strategy for ``run`` (:func:`table_plan`) against one virtual
    site per table, each answering with a ``site_cls`` over its centred rows; the result with
    the run's config."""
    start = time.perf_counter()
    scenario, strategy = run.scenario, build(table_plan(run))
    run_federation(strategy, functools.partial(table_client, site_cls, run),
                   run.sites, verbose=verbose, observer=observer, engine=engine,
                   secure=secure_aggregation(scenario, strategy, 1.0),
                   identity_fn=functools.partial(table_identity, run, strategy.num_rounds))
    config = {**scenario.to_run_config(), "dataset": "tables", "standardize": run.standardize,
              "contract": run.loaded_contract.hash,
              "wall_seconds": time.perf_counter() - start}
    return strategy.result(config)


#: Each algorithm's centred Flower simulation over tables,
#: ``(run, verbose=False, observer=None, engine=None) -> result``: DPdisPCA (any variant),
#: DPS-PCA, SuLQ k-plane (a clustering) and LDP-PCA (local moments).
simulate_dpdis_tables = functools.partial(simulate_tables, centred_dpdis, DPdisPCASite)
simulate_dps_tables = functools.partial(simulate_tables, centred_dps, DPSPCASite)
simulate_kplane_tables = functools.partial(simulate_tables, centred_kplane, KPlaneSite)
simulate_ldp_tables = functools.partial(simulate_tables, centred_ldp, LDPCovarianceSite)
