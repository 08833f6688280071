"""LDP covariance aggregation in the Flower App (``algorithm="ldp-pca"``, ``sparse`` for the
Fantope solver on the server). One round; every record's view is DP on its own."""

from __future__ import annotations

from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid

from fedpca.apps.common import finish, min_sites, site_client_for
from fedpca.blas import single_thread_blas
from fedpca.clients.ldp_pca import client_for_site
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.strategies.ldp_pca import LDPCovarianceStrategy
from fedpca.strategies.workflow import run_strategy


def client_fn(context: Context) -> Client:
    """This node's LDP-PCA client."""
    single_thread_blas()
    return site_client_for(context, "ldp-pca", LDPScenario, client_for_site)


def server_main(grid: Grid, context: Context) -> None:
    """Aggregate the sites' noisy covariances (sparse: Fantope ADMM); write the result."""
    config = dict(context.run_config)
    scenario = LDPScenario.from_run_config(config, sites=1)
    strategy = LDPCovarianceStrategy(
        dim=scenario.dim, k=scenario.k, sparse=scenario.sparse, lam=scenario.lam,
        min_sites=min_sites(config), privacy=scenario.privacy(),
    )
    run_strategy(grid, context, strategy, strategy.num_rounds)
    finish(strategy.result(config), config)
