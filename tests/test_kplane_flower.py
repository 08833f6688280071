"""SuLQ k-plane through Flower: the simulation gives the reference's bases under the same
seeds, the client refuses malformed requests, and the CLI prints and writes its record.

One federation, started through ``fedpca simulate sulq-kplane``, serves the reference
comparison and the CLI's output.
"""

import functools
import re

import numpy as np
import pytest
from cli_runs import run_cli_record
from record_schema import record_keys

from fedpca.algorithms.kplane import KPlanePolicy, KPlaneSite, run_sulq_kplane
from fedpca.cli import main as cli_main
from fedpca.flower.site.site_client import PrivateSiteClient as KPlaneClient
from fedpca.results import ClusteringResult
from fedpca.errors import BudgetExceededError, InvalidRequestError
from fedpca.linalg.subspace import random_subspaces
from fedpca.dp.guarantee import SiteGuarantee
from fedpca.run_record import run_record
from fedpca.scenarios.kplane import KPlaneScenario

pytestmark = pytest.mark.federation


@functools.cache
def scenario():
    """The scenario, its policy calibrated when a test first asks, not as each worker collects."""
    return KPlaneScenario(
        sites=3, dim=5, samples=900, clusters=3, subspace_dim=2, noise=0.01, rounds=3,
        epsilon=3.0, delta=1e-5, seed=11, data_seed=11,
    )


#: scenario() as command-line flags (the CLI seeds the data with --seed too).
ARGV = [
    "simulate", "sulq-kplane", "--sites", "3", "--dim", "5", "--samples", "900",
    "--clusters", "3", "--subspace-dim", "2", "--noise", "0.01", "--rounds", "3",
    "--epsilon", "3.0", "--delta", "1e-5", "--seed", "11",
]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``fedpca simulate sulq-kplane`` with scenario()'s flags: (printed, record, JSON path)."""
    output = tmp_path_factory.mktemp("kplane") / "run.json"
    return (*run_cli_record(ARGV, output), output)


def test_flower_run_equals_reference(cli_run):
    flower = ClusteringResult.load(cli_run[2])
    setting = scenario()
    reference = run_sulq_kplane(
        setting.all_site_data(), setting.clusters, setting.subspace_dim, setting.policy(),
        seed=setting.seed, evaluate=setting.evaluate,
    )
    assert len(flower.bases) == scenario().clusters
    for U, V in zip(flower.bases, reference.bases):
        np.testing.assert_allclose(U, V, atol=1e-8, rtol=0)
    for key in ("cost", "wasserstein_distance", "epsilon_spent", "cluster_sizes"):
        np.testing.assert_allclose(
            [h[key] for h in flower.history], [h[key] for h in reference.history], atol=1e-8
        )
    assert [h["sites"] for h in flower.history] == [3] * scenario().rounds
    assert flower.history[-1]["epsilon_spent"] == pytest.approx(3.0, rel=1e-3)
    assert flower.config["site_releases"] == {"0": 3, "1": 3, "2": 3}
    assert flower.privacy == reference.privacy and flower.assignments is None


def client(rounds: int = 2) -> KPlaneClient:
    X = np.random.default_rng(0).uniform(-0.3, 0.3, size=(40, 5))
    return KPlaneClient(KPlaneSite(X, KPlanePolicy(rounds=rounds), site="clinic"))


BASES = random_subspaces(np.random.default_rng(1), 5, 3, 2)
REQUEST = {"round": 1, "dim": 5, "clusters": 3}


@pytest.mark.parametrize("parameters,config,match", [
    (BASES[:2], REQUEST, "announces 3 clusters but carries 2 bases"),
    (BASES, {**REQUEST, "clusters": "3"}, "'clusters' must be a positive integer"),
    (BASES, {**REQUEST, "dim": 6}, "expects d = 6 features"),
    (BASES, {**REQUEST, "phase": "power"}, "unknown config keys"),
    ([BASES[0], BASES[1], BASES[2] * 1.5], REQUEST, "not orthonormal"),
    ([BASES[0], BASES[1], np.full((5, 2), np.inf)], REQUEST, "NaN or inf"),
])
def test_client_refuses_malformed_requests_before_release(parameters, config, match):
    c = client()
    with pytest.raises(InvalidRequestError, match=f"clinic.*{match}"):
        c.fit(list(parameters), dict(config))
    assert c.site.ledger.count == 0


def test_client_answers_then_refuses_beyond_its_ledger():
    c = client(rounds=1)
    (message,), n, metrics = c.fit(list(BASES), dict(REQUEST))
    assert message.shape == (3, 16) and n == 40
    assert set(metrics) == {*SiteGuarantee.metric_keys(), "site", "epsilon_spent", "releases"}
    with pytest.raises(BudgetExceededError, match="allows 1 releases"):
        c.fit(list(BASES), dict(REQUEST))


def test_cli_prints_the_round_table_and_writes_json(cli_run):
    printed, record, _ = cli_run
    assert "round   sites       cost     W dist  eps spent   elapsed" in printed
    # one live line per round, in order, each with sites answered of those asked
    rows = [line.split() for line in printed.splitlines() if re.match(r"^\s*\d+\s+\d+/\d+ ", line)]
    assert [int(row[0]) for row in rows] == [entry["round"] for entry in record["history"]]
    assert all(row[1] == "3/3" for row in rows) and all(row[-1] == "s" for row in rows)
    assert set(record) == record_keys("sulq-kplane")
    assert record["algorithm"] == "sulq-kplane" and record["k"] == record["clusters"] == 3
    assert record["rounds"] == record["flower_rounds"] == 3
    assert len(record["costs"]) == len(record["wasserstein_distances"]) == 3
    assert record["wasserstein_distance"] == record["wasserstein_distances"][-1]
    assert record["noise_multiplier"] == scenario().privacy()["noise_multiplier"]
    assert record["sigma"] == pytest.approx(2 * record["noise_multiplier"])  # D = 2 C^2
    assert len(record["bases"]) == 3


def test_the_record_of_a_paper_calibrated_run():
    # the paper's DPS-PCA closed form over T releases, in the record both paths write
    scenario = KPlaneScenario(sites=2, dim=4, samples=400, clusters=2, subspace_dim=2,
                              noise=0.05, rounds=2, epsilon=0.5, delta=1e-4,
                              accounting="paper", seed=5, data_seed=5)
    result = run_sulq_kplane(scenario.all_site_data(), 2, 2, scenario.policy(), seed=5)
    record = run_record(result)
    assert record["accounting"] == "paper"
    assert record["noise_multiplier"] == pytest.approx(2 / 0.5 * np.sqrt(2 * np.log(4 / 1e-4)))
    assert record["sigma"] == pytest.approx(2 * record["noise_multiplier"])


def test_cli_passes_the_paper_accounting_on(capsys):
    # epsilon 5 over 2 releases is outside the paper's formula: refused before Flower starts
    code = cli_main(["simulate", "sulq-kplane", "--rounds", "2", "--epsilon", "5",
                     "--accounting", "paper"])
    assert code == 2
    assert "only valid below 1 per release, got --epsilon=5.0" in capsys.readouterr().err


def test_cli_reports_bad_configuration(capsys):
    code = cli_main(["simulate", "sulq-kplane", "--subspace-dim", "5"])
    assert code == 2
    assert ("--subspace-dim must be below --dim, got --subspace-dim=5, --dim=5 (default)"
            in capsys.readouterr().err)
