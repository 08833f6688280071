"""LDP-PCA through Flower equals the reference under the same seeds; the CLI works.

One federation, started through ``fedpca simulate ldp-pca --sparse``, serves the reference
comparison and the CLI's output; the dense variant's record is checked on the Flower App's
run (tests/test_flower_app.py), which writes the same record.
"""

import functools
import math

import numpy as np
import pytest
from cli_runs import run_cli_record
from record_schema import record_keys

from fedpca.algorithms.ldp_pca import run_ldp_pca
from fedpca.algorithms.site import SiteAnswer
from fedpca.cli import main as cli_main
from fedpca.errors import ConfigurationError
from fedpca.results import PCAResult
from fedpca.scenarios.ldp_pca import LDPScenario
from fedpca.flower.server.strategies import LDPCovarianceStrategy

pytestmark = pytest.mark.federation


@functools.cache
def scenario():
    """The scenario, its policy calibrated when first asked."""
    return LDPScenario(
        sites=3, dim=30, samples=900, k=2, sparse=True, sparsity=5, epsilon=2.0, delta=1e-5,
        seed=11, data_seed=11,
    )


#: scenario() as command-line flags (the CLI seeds the data with --seed too).
ARGV = [
    "simulate", "ldp-pca", "--sparse", "--sites", "3", "--dim", "30", "--samples", "900",
    "--k", "2", "--sparsity", "5", "--epsilon", "2.0", "--delta", "1e-5", "--seed", "11",
]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``fedpca simulate ldp-pca --sparse`` with scenario()'s flags: (printed, record, path)."""
    output = tmp_path_factory.mktemp("ldp") / "ldp.json"
    return (*run_cli_record(ARGV, output), output)


@pytest.fixture(scope="module")
def flower_result(cli_run):
    return PCAResult.load(cli_run[2])


def test_flower_run_equals_reference(flower_result):
    setting = scenario()
    reference = run_ldp_pca(
        setting.all_sites(), setting.k, setting.policy(), seed=setting.seed, sparse=True,
        evaluate=setting.evaluate, true_support=setting.true_support(),
    )
    np.testing.assert_allclose(flower_result.basis, reference.basis, atol=1e-8, rtol=0)
    got, want = flower_result.history[0], reference.history[0]
    assert got["support"] == want["support"]
    for key in ("distance", "energy_ratio", "lam", "admm_iterations", "support_precision",
                "support_recall", "epsilon_spent"):
        assert got[key] == pytest.approx(want[key], abs=1e-8), key


def test_every_site_answered_once_and_spent_its_budget(flower_result):
    assert flower_result.sites_answered == [["0", "1", "2"]]
    assert flower_result.history[0]["epsilon_spent"] == pytest.approx(2.0, rel=1e-3)
    assert flower_result.privacy["trust_model"].startswith("local")
    assert flower_result.privacy["sensitivity"] == pytest.approx(math.sqrt(2))


def test_cli_prints_the_fantope_summary_and_writes_json(cli_run):
    printed, record, _ = cli_run
    assert "LDP-PCA (sparse, Fantope ADMM)" in printed and "energy ratio q/q_o" in printed
    assert "Fantope ADMM: lam " in printed and ", precision " in printed
    assert set(record) == record_keys("ldp-pca", sparse=True)
    assert record["algorithm"] == "ldp-pca" and record["sparse"] is True
    assert record["distance_reference"] == "model truth"
    assert record["clipped_rows"] == sum(site.clip.clipped_rows for site in scenario().all_sites())
    assert record["noise_multiplier"] == scenario().privacy()["noise_multiplier"]
    assert record["sigma"] == pytest.approx(math.sqrt(2) * record["noise_multiplier"])
    assert 0 <= record["subspace_distance"] <= math.sqrt(2) + 1e-9
    assert record["subspace_distance"] == record["history"][0]["distance"]
    assert record["admm_iterations"] == record["history"][0]["admm_iterations"]


def test_the_dense_header_names_the_paper_calibration():
    scenario = LDPScenario(sites=2, dim=12, samples=400, k=2, epsilon=0.5, delta=1e-4,
                           accounting="paper", seed=5)
    multiplier = math.sqrt(2 * math.log(1.25e4)) / 0.5
    assert scenario.header() == [(
        "LDP-PCA (dense): synthetic, 2 sites, n=400, d=12, k=2; every record's view "
        f"(0.5, 0.0001)-DP [paper: noise multiplier {multiplier:.3f}, "
        f"sigma_1 {math.sqrt(2) * multiplier:.3f}]"
    )]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--k", "50"], "need --k <= --dim, got --k=50, --dim=40 (default)"),
        (["--dataset", "cifar"], "--dataset must be one of ('synthetic', "),
        (["--sparse", "--lam", "-1"], "lam must be"),
        (["--sparse", "--epsilon", "1", "--accounting", "paper"], "only valid for --epsilon < 1"),
    ],
)
def test_cli_reports_bad_configuration_before_starting(argv, message, capsys):
    assert cli_main(["simulate", "ldp-pca", "--sites", "2", "--samples", "100", *argv]) == 2
    assert message in capsys.readouterr().err


def test_strategy_asks_once_and_combines_like_the_server():
    strategy = LDPCovarianceStrategy(
        dim=4, k=1, sparse=True, privacy={"sigma": 2.0, "sensitivity": math.sqrt(2)},
        min_noise_multiplier=3.0,
    )
    assert strategy.num_rounds == 1
    assert strategy.server.round_request(1) == ([], {"phase": "covariance", "dim": 4})
    with pytest.raises(ConfigurationError, match="single round"):
        strategy.server.round_request(2)
    # The default lam follows the noise the sites were asked for (raised, never lowered).
    assert strategy.server.record_sigma == pytest.approx(3.0 * math.sqrt(2))
    A = np.diag([4.0, 1.0, 0.5, 0.2]) * 100
    basis, metrics = strategy.server.round_result(1, [SiteAnswer("a", 100, A, 1.0)])
    assert abs(basis[0, 0]) == pytest.approx(1.0)
    assert metrics["support_size"] >= 1 and "support" not in metrics and "phase" not in metrics
    assert "sparse=True" in repr(strategy)
