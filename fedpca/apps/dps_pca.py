"""DPS-PCA in the Flower App (``flwr run .`` with ``algorithm="dps-pca"``, the default).

It runs the same thing as ``fedpca simulate dps-pca``. Every parameter is a ``run_config``
key (``[tool.flwr.app.config]`` in pyproject.toml); a site's privacy keys in its own
``node_config`` win (see :mod:`fedpca.apps.common`). With ``secure-min-sites = m > 0`` the
fit rounds run through Flower's SecAgg+ and ``secagg-max-weight`` must bound every site's
record count.
"""

from __future__ import annotations

from flwr.common import Context
from flwr.server import Grid

from fedpca.apps.common import finish, server_scenario
from fedpca.errors import ConfigurationError
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.strategies.dps_pca import DPSPCA, DPSPCAStrategy
from fedpca.strategies.workflow import SecAggSettings, run_strategy


def _secure_settings(scenario: DPSPCAScenario, config: dict) -> SecAggSettings | None:
    if scenario.secure_min_sites is None:
        return None
    max_weight = float(config.get("secagg-max-weight", 0))
    if max_weight <= 0:
        raise ConfigurationError(
            "secure aggregation needs run_config secagg-max-weight: a public upper bound "
            "on every site's record count (sites weight their answers by it)"
        )
    sites = scenario.required_sites()
    settings = SecAggSettings.for_sites(sites, max_weight, scenario.secure_min_sites)
    settings.check(sites)
    return settings


def server_main(grid: Grid, context: Context) -> None:
    """Run DPS-PCA over the connected sites and write the result if ``output`` is set."""
    scenario, config = server_scenario(DPSPCAScenario, grid, context)
    secure = _secure_settings(scenario, config)
    # SecAgg+ exists in Flower 1.41 only as a legacy workflow: the legacy twin for it
    strategy = (DPSPCA if secure is None else DPSPCAStrategy)(
        dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat, rounds=scenario.rounds,
        min_sites=scenario.required_sites(), seed=scenario.seed,
        evaluate_fn=scenario.distance_to_truth if config.get("dataset") == "synthetic" else None,
        privacy=scenario.privacy(),
    )
    run_strategy(grid, context, strategy, secure=secure)
    finish(strategy.result(config), config)
