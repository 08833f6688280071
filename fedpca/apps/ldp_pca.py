"""LDP covariance aggregation in the Flower App (``algorithm="ldp-pca"``, ``sparse`` for the
Fantope solver on the server). One round; every record's view is DP on its own. With
run_config ``centring``, a local moments round first (:mod:`fedpca.flower.app_centring`)."""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid

from fedpca.flower.app_centring import is_centred, run_centred
from fedpca.flower.app_sites import finish, server_scenario
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.flower.centred_plan import centred_ldp
from fedpca.strategies.ldp_pca import LDPCovariance
from fedpca.flower.workflow import run_strategy


def server_main(grid: Grid, context: Context) -> None:
    """Aggregate the sites' noisy covariances (sparse: Fantope ADMM; every record's local
    moments first when run_config ``centring`` asks); write the result."""
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, LDPScenario, centred_ldp)
        return
    scenario, config, readiness = server_scenario(LDPScenario, grid, context)
    strategy = LDPCovariance(
        dim=scenario.dim, k=scenario.k, sparse=scenario.sparse, lam=scenario.lam,
        min_sites=scenario.required_sites(), privacy=scenario.privacy(),
    )
    run_strategy(grid, context, strategy, readiness=readiness)
    finish(strategy.result(config), config)
