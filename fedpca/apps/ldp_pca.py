"""LDP covariance aggregation in the Flower App (``algorithm="ldp-pca"``, ``sparse`` for the
Fantope solver on the server). One round; every record's view is DP on its own."""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid

from fedpca.apps.common import finish, server_scenario
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.strategies.ldp_pca import LDPCovariance
from fedpca.strategies.workflow import run_strategy


def server_main(grid: Grid, context: Context) -> None:
    """Aggregate the sites' noisy covariances (sparse: Fantope ADMM); write the result."""
    scenario, config = server_scenario(LDPScenario, grid, context)
    strategy = LDPCovariance(
        dim=scenario.dim, k=scenario.k, sparse=scenario.sparse, lam=scenario.lam,
        min_sites=scenario.required_sites(), privacy=scenario.privacy(),
    )
    run_strategy(grid, context, strategy)
    finish(strategy.result(config), config)
