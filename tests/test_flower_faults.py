"""Faults in a Flower simulation: random failures at scale still give a valid result, with
every ledger counting what its site did. (A failing site stopping the run with its own
reason, read from its reply's error, is checked in tests/test_message_api.py's shared
federation.)

(Apart from tests/test_flower_simulation.py so that the two files' federations run on two
test workers at once.)
"""

import math

import numpy as np
import pytest
from cli_runs import run_cli_record

pytestmark = pytest.mark.federation


#: 80 sites, each failing each round with probability 0.2 (no failure in a round: 0.8^80 ~
#: 2e-8; fewer than 40 answers: far less), through the CLI with the paper's accounting (what
#: the run checks does not depend on the accounting).
SITES, MIN_SITES = 80, 40
SCALE_ARGV = [
    "simulate", "dps-pca", "--sites", str(SITES), "--dim", "40", "--samples", "16000", "--k",
    "2", "--sparsity", "6", "--s-hat", "10", "--rounds", "3", "--epsilon", "2.0", "--delta",
    "1e-5", "--min-sites", str(MIN_SITES), "--failure-rate", "0.2", "--seed", "4",
    "--accounting", "paper",
]


def test_random_site_failures_at_scale_give_a_valid_result(tmp_path):
    _, record = run_cli_record(SCALE_ARGV, tmp_path / "scale.json")
    answered = record["sites_answered"]
    assert len(answered) == 3 + 1
    for sites in answered:
        assert MIN_SITES <= len(sites) < SITES  # some failed, enough answered
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
