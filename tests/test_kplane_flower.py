"""SuLQ k-plane through Flower: the simulation gives the reference's bases under the same
seeds, the client refuses malformed requests, and the CLI prints and writes its record."""

import json

import numpy as np
import pytest

from fedpca.cli import main as cli_main
from fedpca.clients.kplane import KPlaneClient
from fedpca.clustering.kplane import KPlanePolicy, KPlaneSite, run_sulq_kplane
from fedpca.data.subspaces import random_subspaces
from fedpca.errors import BudgetExceededError, InvalidRequestError
from fedpca.kplane_scenario import KPlaneScenario
from fedpca.simulations.kplane import simulate_kplane

SCENARIO = KPlaneScenario(
    sites=3, dim=5, samples=900, clusters=3, subspace_dim=2, noise=0.01, rounds=3,
    epsilon=3.0, delta=1e-5, seed=11, data_seed=4,
)


def test_flower_run_equals_reference():
    flower = simulate_kplane(SCENARIO)
    reference = run_sulq_kplane(
        SCENARIO.all_site_data(), SCENARIO.clusters, SCENARIO.subspace_dim, SCENARIO.policy(),
        seed=SCENARIO.seed, evaluate=SCENARIO.evaluate,
    )
    assert len(flower.bases) == SCENARIO.clusters
    for U, V in zip(flower.bases, reference.bases):
        np.testing.assert_allclose(U, V, atol=1e-8, rtol=0)
    for key in ("cost", "wasserstein_distance", "epsilon_spent", "cluster_sizes"):
        np.testing.assert_allclose(
            [h[key] for h in flower.history], [h[key] for h in reference.history], atol=1e-8
        )
    assert [h["sites"] for h in flower.history] == [3] * SCENARIO.rounds
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
    assert set(metrics) == {"site", "epsilon_spent", "releases"}
    with pytest.raises(BudgetExceededError, match="allows 1 releases"):
        c.fit(list(BASES), dict(REQUEST))


def test_cli_prints_the_round_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = cli_main([
        "simulate", "dp-kplane", "--sites", "2", "--dim", "4", "--samples", "400",
        "--clusters", "2", "--subspace-dim", "2", "--noise", "0.05", "--rounds", "2",
        "--epsilon", "0.5", "--delta", "1e-4", "--accounting", "paper", "--seed", "5",
        "--output", str(out),
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "round  sites" in printed and "W dist" in printed and "eps spent" in printed
    record = json.loads(out.read_text())
    for key in ("algorithm", "sites", "dim", "samples", "k", "epsilon", "delta", "accounting",
                "noise_multiplier", "sigma", "wall_seconds", "clusters", "subspace_dim",
                "cost", "wasserstein_distance", "costs", "wasserstein_distances",
                "epsilon_spent"):
        assert key in record
    assert record["algorithm"] == "sulq-kplane" and record["k"] == record["clusters"] == 2
    assert len(record["costs"]) == len(record["wasserstein_distances"]) == 2
    assert record["wasserstein_distance"] == record["wasserstein_distances"][-1]
    assert record["noise_multiplier"] == pytest.approx(2 / 0.5 * np.sqrt(2 * np.log(4 / 1e-4)))
    assert record["sigma"] == pytest.approx(2 * record["noise_multiplier"])  # D = 2 C^2
    assert len(record["result"]["bases"]) == 2


def test_cli_reports_bad_configuration(capsys):
    code = cli_main(["simulate", "dp-kplane", "--subspace-dim", "5"])
    assert code == 2
    assert "subspace_dim=5 must be below dim=5" in capsys.readouterr().err
