"""DPdisPCA in the Flower App (``flwr run . --run-config 'algorithm="dpdis-pca" ...'``).

One round: every site sends ``P_s`` (``d x r``) of its noisy second-moment matrix; the server
merges them. With ``variant = "secure-sum"`` and ``secure-min-sites = M`` the sites send
distributed discrete Gaussian residues of ``X_s^T X_s`` through SecAgg+ and
``secagg-max-weight`` bounds every site's record count. Sites read their records from node_config ``data-path`` or, in simulation, from
the configured ``dataset`` partition. The server holds no data; when the answering sites are
exactly the partitions of the configured synthetic model or public data set, it rebuilds
their data and records the energy ratio, as ``fedpca simulate dpdis-pca`` does. The privacy
record uses the record counts the sites reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.common import Context
from flwr.server import Grid

from fedpca.algorithms.dpdis_pca import privacy_record
from fedpca.flower.app_centring import is_centred, run_centred
from fedpca.flower.app_sites import finish, secure_max_records, server_scenario
from fedpca.errors import FedPCAError
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.flower.centred_plan import centred_dpdis
from fedpca.strategies.dpdis_pca import DPdisPCA
from fedpca.flower.workflow import run_strategy, secure_aggregation


def server_main(grid: Grid, context: Context) -> None:
    """Run one DPdisPCA round over the connected sites (a moments round first when
    run_config ``centring`` asks, :mod:`fedpca.flower.app_centring`); write the result if
    asked."""
    if is_centred(dict(context.run_config)):
        run_centred(grid, context, DPdisPCAScenario, centred_dpdis)
        return
    scenario, config, readiness = server_scenario(DPdisPCAScenario, grid, context)
    secure = scenario.secure_sum(secure_max_records(scenario, config) or None)
    strategy = DPdisPCA(
        dim=scenario.dim, k=scenario.k, r=scenario.r, weighting=scenario.weighting,
        variant=scenario.variant, min_sites=scenario.required_sites(), secure=secure,
        variance=scenario.variance,
    )
    run_strategy(grid, context, strategy, readiness=readiness,
                 secure=secure_aggregation(scenario, strategy, 1.0))
    strategy.privacy = (
        privacy_record(scenario.policy(), list(strategy.site_sizes.values()))
        if secure is None else scenario.privacy(secure)
    )
    evaluation = _known_evaluation(config, strategy.site_sizes)
    if evaluation is not None:
        strategy.server.record_energy_ratio(evaluation)
    finish(strategy.result(config), config)


def _known_evaluation(config: dict[str, Any], site_records: dict[str, int]) -> np.ndarray | None:
    """The pooled second moment of the answering sites' data when the server can rebuild it
    (they are exactly the partitions the run_config describes), else None."""
    try:
        known = DPdisPCAScenario.from_run_config(config, sites=len(site_records))
        return known.evaluation() if known.holds_sites(site_records) else None
    except FedPCAError:  # the run_config does not describe the sites' data
        return None
