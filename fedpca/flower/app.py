"""The Flower App declared in pyproject.toml: one ServerApp/ClientApp pair for every algorithm.

``run_config["algorithm"]`` picks the algorithm (``dps-pca`` by default) among
:data:`fedpca.algorithms.specs.SPECS`. The ClientApp (:data:`client_app`, module level) is
the site's shell (:mod:`fedpca.flower.site.clientapp`) over its
:class:`~fedpca.site.service.SiteService`, opened once per node and run in each process
(:func:`app_source`): a real site (node_config names its ``policy``) answers from its own
policy, data and lifetime ledger (:class:`~fedpca.site.real_site.RealSiteSource`), a
simulated partition from the run_config's scenario
(:class:`~fedpca.simulated_sites.PartitionSource`), or, when the run_config names ``plink``
prefixes and a ``panel``, from its PLINK fileset
(:class:`~fedpca.simulated_sites.GenotypeSource`). The ServerApp (:data:`server_app`) runs
:func:`fedpca.flower.server.serverapp.run_server_app`, imported when it runs: a real site starts a
fresh ClientApp process for every message, and that process imports this module, so this
module imports no server code (nor a simulated partition's).
"""

from __future__ import annotations

import functools

from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid, ServerApp

from fedpca.algorithms.specs import run_algorithm, spec
from fedpca.blas import single_thread_blas
from fedpca.flower.site.clientapp import cached_service, node_of, service_client_app
from fedpca.flower.site.site_client import source_client
from fedpca.site.real_site import RealSiteSource, is_real_site
from fedpca.site.service import Node, SiteSource


def app_source(node: Node) -> SiteSource:
    """Where this node's answers come from in its run: a real site's own policy, data and
    ledger, or the run_config's scenario's partition ``partition-id``."""
    single_thread_blas()
    algorithm = spec(run_algorithm(node.run_config))
    if is_real_site(node):
        return RealSiteSource(node, algorithm.name)
    # imported here, not above: a real site's ClientApp process never simulates (start-up)
    from fedpca.scenarios.genotypes import PLINK, genotype_run
    from fedpca.simulated_sites import PartitionSource, genotype_source, partition_of

    partition, partitions = partition_of(node.node_config, bool(node.run_config.get("centring")))
    if node.run_config.get(PLINK):  # a genotype run: one PLINK fileset per partition
        return genotype_source(genotype_run(dict(node.run_config)), partition, partitions)
    scenario = algorithm.scenario_class().from_run_config(dict(node.run_config),
                                                          sites=partitions)
    return PartitionSource(scenario, partition, partitions)


def client_fn(context: Context) -> Client:
    """This node's site as a Flower ``Client`` (the site the App's ClientApp answers with,
    :func:`app_source`), e.g. for a ClientApp of one's own."""
    return source_client(context, app_source(node_of(context)))


client_app = service_client_app(functools.partial(cached_service, app_source))
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the configured algorithm (:func:`fedpca.flower.server.serverapp.run_server_app`)."""
    # imported here, not above: a ClientApp process imports this module (start-up)
    from fedpca.flower.server.serverapp import run_server_app

    run_server_app(grid, context)
