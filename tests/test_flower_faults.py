"""Faults in a Flower simulation: a failing site stops the run with its own reason; random
failures at scale still give a valid result, with every ledger counting what its site did.

(Apart from tests/test_flower_simulation.py so that the two files' federations run on two
test workers at once.)
"""

import functools
import math

import numpy as np
import pytest
from cli_runs import run_cli_record
from flwr.client import ClientApp
from flwr.server import ServerApp

from fedpca.clients.dps_pca import client_for_site
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.simulations.launcher import launch
from fedpca.strategies.base import RoundFailedError
from fedpca.strategies.dps_pca import DPSPCAStrategy
from fedpca.strategies.workflow import run_strategy

pytestmark = pytest.mark.federation


def _bad_site_client_fn(scenario, context):
    partition = int(context.node_config["partition-id"])
    data = scenario.site_data(partition).copy()
    if partition == 1:
        data[0, 0] = np.nan
    return client_for_site(context, data, scenario.policy(), str(partition), seed=1)


def test_a_failing_site_stops_the_run_with_its_reason():
    scenario = DPSPCAScenario(sites=3, dim=20, samples=300, k=2, sparsity=4, s_hat=6,
                              rounds=2, seed=1)
    strategy = DPSPCAStrategy(dim=20, k=2, s_hat=6, rounds=2, min_sites=3, seed=1)
    server_app = ServerApp()

    @server_app.main()
    def _main(grid, context):
        run_strategy(grid, context, strategy, strategy.num_rounds)

    client_app = ClientApp(client_fn=functools.partial(_bad_site_client_fn, scenario))
    with pytest.raises(RoundFailedError, match=r"2 site\(s\) answered, need 3.*1: data has 1 NaN"):
        launch(server_app, client_app, 3)
    assert strategy.server.history == []  # nothing aggregated from an under-populated round


#: 200 sites, each failing each round with probability 0.1, through the CLI with the paper's
#: accounting (what the run checks does not depend on the accounting).
SCALE_ARGV = [
    "simulate", "dps-pca", "--sites", "200", "--dim", "40", "--samples", "40000", "--k", "2",
    "--sparsity", "6", "--s-hat", "10", "--rounds", "3", "--epsilon", "2.0", "--delta", "1e-5",
    "--min-sites", "150", "--failure-rate", "0.1", "--seed", "4", "--accounting", "paper",
]


def test_random_site_failures_at_scale_give_a_valid_result(tmp_path):
    _, record = run_cli_record(SCALE_ARGV, tmp_path / "scale.json")
    answered = record["sites_answered"]
    assert len(answered) == 3 + 1
    for sites in answered:
        assert 150 <= len(sites) < 200  # some failed (P[no failure] ~ 1e-9), enough answered
    Q = np.asarray(record["basis"])
    np.testing.assert_allclose(Q.T @ Q, np.eye(2), atol=1e-10)
    assert np.isfinite(record["history"][-1]["distance"])
    releases = record["config"]["site_releases"]
    for site in {s for sites in answered for s in sites}:
        # each ledger counts exactly the rounds in which that site answered
        assert releases[site] == sum(site in sites for sites in answered)
    # --accounting paper reaches the record: paper 000's closed form over T + 1 releases
    assert record["accounting"] == "paper"
    assert record["noise_multiplier"] == pytest.approx(4 / 2.0 * math.sqrt(2 * math.log(8 / 1e-5)))
    assert len(record["distances"]) == 4
    assert record["subspace_distance"] == record["distances"][-1]
