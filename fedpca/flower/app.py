"""The Flower App declared in pyproject.toml: one ServerApp/ClientApp pair for every algorithm.

``run_config["algorithm"]`` picks the algorithm (``dps-pca`` by default) among
:data:`fedpca.algorithms.specs.SPECS`. The ClientApp (:data:`client_app`, module level) is
the site's shell (:mod:`fedpca.flower.clientapp`) over its
:class:`~fedpca.site.service.SiteService`, opened once per node and run in each process
(:func:`app_source`): a real site (node_config names its ``policy``) answers from its own
policy, data and lifetime ledger (:class:`~fedpca.site.real_site.RealSiteSource`), a
simulated partition from the run_config's scenario
(:class:`~fedpca.site.partition.PartitionSource`). The ServerApp runs the algorithm's server
(:func:`server_main`: the scenario's :meth:`~fedpca.scenarios.base.Scenario.server_plan`, or
a centred run's :func:`~fedpca.flower.app_centring.run_centred`), on the Message API unless
Flower's SecAgg+ is asked; a run that fails writes a failure record
(:func:`fedpca.run_record.failure_recorded`).
"""

from __future__ import annotations

import functools

from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.algorithms.specs import DEFAULT_ALGORITHM, AlgorithmSpec, spec
from fedpca.blas import single_thread_blas
from fedpca.errors import ConfigurationError, ParameterError, RunConfigNames
from fedpca.flower.app_centring import is_centred, run_centred
from fedpca.flower.app_server import finish, record_path, server_scenario
from fedpca.flower.clientapp import cached_service, node_of, service_client_app
from fedpca.flower.prompt_grid import prompt
from fedpca.flower.site_client import site_client
from fedpca.flower.workflow import run_plan
from fedpca.run_record import failure_recorded
from fedpca.site.partition import PartitionSource, partition_of
from fedpca.site.real_site import RealSiteSource, is_real_site
from fedpca.site.service import Node, SiteSource


def _algorithm(context: Context | Node) -> str:
    return str(context.run_config.get("algorithm", DEFAULT_ALGORITHM))


def _spec(context: Context | Node) -> AlgorithmSpec:
    return spec(_algorithm(context))


def app_source(node: Node) -> SiteSource:
    """Where this node's answers come from in its run: a real site's own policy, data and
    ledger, or the run_config's scenario's partition ``partition-id``."""
    single_thread_blas()
    algorithm = _spec(node)
    if is_real_site(node):
        return RealSiteSource(node, algorithm.name)
    partition, partitions = partition_of(node.node_config, bool(node.run_config.get("centring")))
    scenario = algorithm.scenario_class().from_run_config(dict(node.run_config),
                                                          sites=partitions)
    return PartitionSource(scenario, partition, partitions)


def client_fn(context: Context) -> Client:
    """This node's site as a Flower ``Client`` (the site the App's ClientApp answers with,
    :func:`app_source`), e.g. for a ClientApp of one's own."""
    return site_client(context, app_source(node_of(context)).site())


def server_main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm over the connected sites (a moments round first when
    run_config ``centring`` asks) and write the result if run_config ``output`` is set."""
    scenario_cls = _spec(context).scenario_class()
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, scenario_cls)
        return
    scenario, config, readiness = server_scenario(scenario_cls, grid, context)
    strategy = run_plan(grid, context, scenario, scenario.server_plan(config), readiness)
    finish(strategy.result(config), config)


client_app = service_client_app(functools.partial(cached_service, app_source))
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm. A run that fails (e.g. fewer than ``min-sites`` sites
    can afford it) writes a failure record to run_config ``output`` and raises, so Flower
    marks the run failed; a parameter error names the run_config keys to change."""
    with failure_recorded(_algorithm(context), record_path(dict(context.run_config))):
        try:
            server_main(prompt(grid), context)
        except ParameterError as error:  # named as the coordinator writes them
            raise ConfigurationError(error.render(RunConfigNames())) from None
