"""SuLQ k-plane in the Flower App (``flwr run . --run-config 'algorithm="sulq-kplane"'``).

``rounds`` Flower rounds: the server sends the ``clusters`` current bases (public; the first
from the run's seed), every site answers with its noisy per-cluster second moments and
counts (DP on their own, per-site noise; with ``secure-min-sites = M`` distributed discrete
Gaussian residues summed by SecAgg+, ``secagg-max-weight`` bounding every site's records). With the synthetic data (``dataset =
"synthetic"``) the server records the cost and the distance to the planted subspaces, as
``fedpca simulate sulq-kplane`` does. With run_config ``centring``, a moments round first
(:mod:`fedpca.flower.app_centring`).
"""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid

from fedpca.flower.app_centring import is_centred, run_centred
from fedpca.flower.app_sites import finish, secure_max_records, server_scenario
from fedpca.scenarios.kplane import KPlaneScenario
from fedpca.flower.centred_plan import centred_kplane
from fedpca.strategies.kplane import SuLQKPlane
from fedpca.flower.workflow import run_strategy, secure_aggregation


def server_main(grid: Grid, context: Context) -> None:
    """Run SuLQ k-plane over the connected sites (a moments round first when run_config
    ``centring`` asks) and write the result if ``output`` is set."""
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, KPlaneScenario, centred_kplane)
        return
    scenario, config, readiness = server_scenario(KPlaneScenario, grid, context)
    secure = scenario.secure_sum(secure_max_records(scenario, config) or None)
    strategy = SuLQKPlane(
        dim=scenario.dim, clusters=scenario.clusters, subspace_dim=scenario.subspace_dim,
        rounds=scenario.rounds, clip_norm=scenario.clip_norm,
        min_sites=scenario.required_sites(), seed=scenario.seed,
        evaluate_fn=scenario.evaluate if config.get("dataset") == "synthetic" else None,
        secure=secure, privacy=scenario.privacy(secure),
    )
    run_strategy(grid, context, strategy, readiness=readiness,
                 secure=secure_aggregation(scenario, strategy, 1.0))
    finish(strategy.result(config), config)
