"""DPdisPCA in the Flower App (``flwr run . --run-config 'algorithm="dpdis-pca" ...'``).

One round: every site sends ``P_s`` (``d x r``) of its noisy second-moment matrix; the server
merges them. Sites read their records from node_config ``data-path`` or, in simulation, from
the configured ``dataset`` partition. The server holds no data, so no energy ratio is
recorded; the privacy record uses the record counts the sites reported.
"""

from __future__ import annotations

from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid

from fedpca.algorithms.dpdis_pca import privacy_record
from fedpca.apps.common import finish, min_sites, site_config, site_partitions, site_records
from fedpca.apps.workflow import run_strategy
from fedpca.blas import single_thread_blas
from fedpca.clients.dpdis_pca import client_for_site
from fedpca.dpdis_scenario import DPdisPCAScenario
from fedpca.strategies.dpdis_pca import DPdisPCAStrategy


def client_fn(context: Context) -> Client:
    """This node's DPdisPCA client."""
    single_thread_blas()
    scenario = DPdisPCAScenario.from_run_config(
        site_config(context), sites=site_partitions(context)
    )
    name, data = site_records(context, scenario)
    return client_for_site(context, data, scenario.policy(), name, seed=scenario.seed)


def server_main(grid: Grid, context: Context) -> None:
    """Run one DPdisPCA round over the connected sites; write the result if asked."""
    config = dict(context.run_config)
    scenario = DPdisPCAScenario.from_run_config(config, sites=1)
    strategy = DPdisPCAStrategy(
        dim=scenario.dim, k=scenario.k, r=scenario.r, weighting=scenario.weighting,
        variant=scenario.variant, min_sites=min_sites(config),
    )
    run_strategy(grid, context, strategy, strategy.num_rounds)
    strategy.privacy = privacy_record(scenario.policy(), list(strategy.site_sizes.values()))
    finish(strategy.result(config), config)
