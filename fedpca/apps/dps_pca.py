"""DPS-PCA in the Flower App (``flwr run .`` with ``algorithm="dps-pca"``, the default).

It runs the same thing as ``fedpca simulate dps-pca``.

Every parameter is a ``run_config`` key (``[tool.flwr.app.config]`` in pyproject.toml,
overridable with ``flwr run . --run-config 'epsilon=0.5 rounds=5'``). A site's privacy
settings (``epsilon``, ``delta``, ``rounds``, ``accounting``, ``clip-norm``) may also be set
in its own ``node_config``, which wins over the server's run_config: the site, not the
coordinator, owns its budget. A site reads its records from ``node_config["data-path"]``
(a ``.npy`` or ``.csv`` file) when given, otherwise from the synthetic model partition
``node_config["partition-id"]`` of ``num-partitions``. The ServerApp writes the result as
JSON to run_config ``output`` when it is not empty.
"""

from __future__ import annotations

import logging

from flwr.client import Client
from flwr.common import Context
from flwr.server import Grid

from fedpca.apps.workflow import SecAggSettings, run_strategy
from fedpca.blas import single_thread_blas
from fedpca.clients.dps_pca import client_for_site
from fedpca.data.files import load_site_file
from fedpca.errors import ConfigurationError
from fedpca.report import result_summary
from fedpca.scenario import DPSPCAScenario
from fedpca.strategies.dps_pca import DPSPCAStrategy

logger = logging.getLogger(__name__)

#: Sites the ServerApp waits for when run_config ``min-sites`` is 0.
DEFAULT_MIN_SITES = 2
#: node_config keys a site may use to set its own privacy policy.
SITE_POLICY_KEYS = ("epsilon", "delta", "rounds", "accounting", "clip-norm", "secure-min-sites")


def client_fn(context: Context) -> Client:
    """Build this node's DPS-PCA client from run_config, overridden by its node_config."""
    single_thread_blas()
    node = dict(context.node_config)
    merged = dict(context.run_config)
    merged.update({key: node[key] for key in SITE_POLICY_KEYS if key in node})
    sites = int(node.get("num-partitions", 1))
    scenario = DPSPCAScenario.from_run_config(merged, sites=sites)
    if "data-path" in node:
        site = str(node.get("site-name", node["data-path"]))
        data = load_site_file(str(node["data-path"]), site=site)
    else:
        partition = int(node["partition-id"])
        site, data = str(partition), scenario.prepared_site(partition)
    return client_for_site(context, data, scenario.policy(), site, seed=scenario.seed)


def server_main(grid: Grid, context: Context) -> None:
    """Run DPS-PCA over the connected sites and write the result if ``output`` is set."""
    config = dict(context.run_config)
    # The server holds no data: one "site" is enough to validate the shared parameters.
    scenario = DPSPCAScenario.from_run_config(config, sites=1)
    strategy = DPSPCAStrategy(
        dim=scenario.dim, k=scenario.k, s_hat=scenario.s_hat, rounds=scenario.rounds,
        min_sites=max(scenario.min_sites or DEFAULT_MIN_SITES, scenario.secure_min_sites or 0),
        seed=scenario.seed,
        evaluate_fn=scenario.distance_to_truth if config.get("data") == "synthetic" else None,
        privacy=scenario.privacy(),
    )
    secure = None
    if scenario.secure_min_sites is not None:
        max_weight = float(config.get("secagg-max-weight", 0))
        if max_weight <= 0:
            raise ConfigurationError(
                "secure aggregation needs run_config secagg-max-weight: a public upper bound "
                "on every site's record count (sites weight their answers by it)"
            )
        secure = SecAggSettings.for_sites(scenario.required_sites(), max_weight)
    run_strategy(grid, context, strategy, strategy.num_rounds, secure=secure)
    result = strategy.result(config)
    logger.info("DPS-PCA finished: %s", result_summary(result))
    output = str(config.get("output", ""))
    if output:
        result.save(output)
