"""The Flower simulation gives the reference's basis under the same seeds, at d=1000 without
deadlock; the CLI works.

One federation, started through ``fedpca simulate dps-pca``, serves the reference
comparison, the d=1000 check and the CLI's table and JSON record: every federation costs
seconds of start-up.
"""

import json

import numpy as np
import pytest

from cli_runs import run_cli_record
from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.cli import main as cli_main
from fedpca.results import PCAResult
from fedpca.scenario import DPSPCAScenario
from record_schema import record_keys

pytestmark = pytest.mark.federation

# FLOWER_NOTES: multi-threaded BLAS froze the ServerApp from about d=1000 on.
SCENARIO = DPSPCAScenario(
    sites=2, dim=1000, samples=20_000, k=3, sparsity=10, s_hat=30, rounds=4,
    epsilon=4.0, delta=1e-5, seed=2, data_seed=2,
)
#: SCENARIO as command-line flags (the CLI seeds the data with --seed too).
ARGV = [
    "simulate", "dps-pca", "--sites", "2", "--dim", "1000", "--samples", "20000", "--k", "3",
    "--sparsity", "10", "--s-hat", "30", "--rounds", "4", "--epsilon", "4.0",
    "--delta", "1e-5", "--seed", "2",
]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``fedpca simulate dps-pca`` with SCENARIO's flags: (printed, JSON path)."""
    output = tmp_path_factory.mktemp("dps-pca") / "run.json"
    printed, _ = run_cli_record(ARGV, output)
    return printed, output


@pytest.fixture(scope="module")
def flower_result(cli_run):
    return PCAResult.load(cli_run[1])


@pytest.fixture(scope="module")
def record(cli_run):
    return json.loads(cli_run[1].read_text())


def test_flower_run_equals_reference(flower_result):
    reference = run_dps_pca(
        SCENARIO.all_site_data(), SCENARIO.k, SCENARIO.s_hat, SCENARIO.policy(),
        seed=SCENARIO.seed, evaluate=SCENARIO.distance_to_truth,
    )
    np.testing.assert_allclose(flower_result.basis, reference.basis, atol=1e-8, rtol=0)
    assert [h["distance"] for h in flower_result.history] == pytest.approx(
        [h["distance"] for h in reference.history], abs=1e-8
    )
    assert [h["epsilon_spent"] for h in flower_result.history] == pytest.approx(
        [h["epsilon_spent"] for h in reference.history]
    )


def test_every_site_answered_every_round_and_spent_its_budget(flower_result):
    assert flower_result.sites_answered == [["0", "1"]] * (SCENARIO.rounds + 1)
    assert flower_result.history[-1]["epsilon_spent"] == pytest.approx(4.0, rel=1e-3)
    assert flower_result.privacy["trust_model"].startswith("per-site noise")
    assert flower_result.privacy["secure_min_sites"] is None


def test_cli_prints_the_round_table_and_summary(cli_run, flower_result):
    printed = cli_run[0]
    assert "round  phase  sites" in printed and "eps spent" in printed
    assert "trust model: per-site noise" in printed
    assert f"dps-pca: k=3, distance {flower_result.history[-1]['distance']:.4f}" in printed
    assert "wall time " in printed


def test_cli_writes_the_run_record(record):
    assert set(record) == record_keys("dps-pca")
    assert record["algorithm"] == "dps-pca" and record["accounting"] == "pld"
    assert (record["sites"], record["samples"], record["dim"], record["k"]) == (2, 20_000, 1000, 3)
    assert (record["sparsity"], record["s_hat"], record["seed"]) == (10, 30, 2)
    # rounds=4 power rounds run as 5 Flower rounds: the initialisation comes first
    assert record["rounds"] == 4 and record["flower_rounds"] == len(record["history"]) == 5
    assert len(record["distances"]) == len(record["epsilon_spent"]) == 5
    assert record["subspace_distance"] == record["distances"][-1]
    assert record["noise_multiplier"] == SCENARIO.privacy()["noise_multiplier"]
    assert record["wall_seconds"] == record["config"]["wall_seconds"] > 0


def test_cli_reports_bad_configuration(capsys):
    code = cli_main(["simulate", "dps-pca", "--sites", "3", "--samples", "2"])
    assert code == 2
    assert "cannot give each of 3 sites" in capsys.readouterr().err


def test_simulation_at_d_1000_does_not_deadlock_and_converges(flower_result):
    assert flower_result.dim == 1000
    assert flower_result.history[-1]["distance"] < 0.5
