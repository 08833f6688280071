"""DPS-PCA in the Flower App (``flwr run .`` with ``algorithm="dps-pca"``, the default).

It runs the same thing as ``fedpca simulate dps-pca``. Every parameter is a ``run_config``
key (``[tool.flwr.app.config]`` in pyproject.toml); a site's privacy keys in its own
``node_config`` win (see :mod:`fedpca.flower.app_sites`). With ``secure-min-sites = m > 0`` the
fit rounds run through Flower's SecAgg+ and ``secagg-max-weight`` must bound every site's
record count; with ``discrete = true`` (a real site's own policy decides it) the sites send
distributed discrete Gaussian residues and ``secagg-max-weight`` is the secure sums'
``max_records``.
"""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid

from fedpca.algorithms.dps_pca import privacy_record
from fedpca.flower.app_centring import is_centred, run_centred
from fedpca.flower.app_sites import finish, secure_max_records, server_scenario
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.centred_plan import centred_dps
from fedpca.strategies.dps_pca import DPSPCA, DPSPCAStrategy
from fedpca.flower.workflow import run_strategy, secure_aggregation


def server_main(grid: Grid, context: Context) -> None:
    """Run DPS-PCA over the connected sites (a moments round first when run_config
    ``centring`` asks, :mod:`fedpca.flower.app_centring`) and write the result if ``output`` is
    set."""
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, DPSPCAScenario, centred_dps)
        return
    scenario, config, readiness = server_scenario(DPSPCAScenario, grid, context)
    max_records = secure_max_records(scenario, config)
    sums = scenario.secure_sums(max_records)
    strategy = (DPSPCAStrategy if scenario.secagg_plus else DPSPCA)(
        dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat, rounds=scenario.rounds,
        min_sites=scenario.required_sites(), seed=scenario.seed,
        evaluate_fn=scenario.distance_to_truth if config.get("dataset") == "synthetic" else None,
        secure=sums, privacy=privacy_record(scenario.policy(), sums),
        explained_variance=scenario.explained_variance,
    )
    run_strategy(grid, context, strategy, readiness=readiness,
                 secure=secure_aggregation(scenario, strategy, max_records))
    finish(strategy.result(config), config)
