"""DPdisPCA through Flower: the client's refusals, the simulation equals the reference, the CLI.

One federation, started through ``fedpca simulate dpdis-pca``, serves the reference
comparison and the CLI's output.
"""

import json
import math
import re

import numpy as np
import pytest
from cli_runs import run_cli_record
from flwr.common import Context, FitIns, RecordDict, ndarrays_to_parameters
from record_schema import record_keys

from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, DPdisPCASite, run_dpdis_pca
from fedpca.cli import main as cli_main
from fedpca.flower.site.site_client import PrivateSiteClient as DPdisPCAClient
from fedpca.flower.site.site_client import client_factory
from fedpca.flower.site.run_state import ContextState
from fedpca.site.service import LEDGER
from fedpca.errors import BudgetExceededError, InvalidRequestError
from fedpca.results import PCAResult
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.flower.server.strategies import DPdisPCAStrategy

#: The algorithm's client factory (the one client of every algorithm, over its site).
client_for_site = client_factory(DPdisPCASite)

pytestmark = pytest.mark.federation

D = 10
POLICY = DPdisPCAPolicy(epsilon=1.0, delta=1e-5)
REQUEST = {"variant": "factor", "dim": D, "r": 4}
# Unequal site sizes (601 = 201 + 200 + 200) so the "samples" weighting matters; the default
# r = 2k = 6; the paper's classic Gaussian calibration (epsilon < 1).
SCENARIO = DPdisPCAScenario(
    sites=3, dim=24, samples=601, k=3, weighting="samples", epsilon=0.5, delta=1e-4,
    accounting="paper", seed=7, data_seed=7,
)
#: SCENARIO as command-line flags (the CLI seeds the data with --seed too).
ARGV = [
    "simulate", "dpdis-pca", "--sites", "3", "--dim", "24", "--samples", "601", "--k", "3",
    "--weighting", "samples", "--epsilon", "0.5", "--delta", "1e-4",
    "--accounting", "paper", "--seed", "7",
]


@pytest.fixture
def client():
    X = np.random.default_rng(0).uniform(-0.3, 0.3, size=(40, D))
    X[0] *= 10  # one row above the clip norm
    return DPdisPCAClient(DPdisPCASite(X, POLICY, site="hospital-3"))


def test_one_release_then_every_request_is_refused(client):
    (P,), n, metrics = client.fit([], dict(REQUEST))
    assert P.shape == (D, 4) and n == 40
    # Only what is public under the site's policy: no data-dependent count leaves the site.
    assert metrics == {"site": "hospital-3", "epsilon_spent": pytest.approx(1.0, rel=1e-3),
                       "releases": 1, **client.site.guarantee().to_metrics()}
    assert metrics["guarantee.delta"] == POLICY.delta  # the site's own policy, public
    assert client.site.clip_report.clipped_rows == 1  # known to the site, not sent
    with pytest.raises(BudgetExceededError, match="hospital-3.*allows 1 releases"):
        client.fit([], {"variant": "full", "dim": D})
    assert client.site.ledger.count == 1


@pytest.mark.parametrize(
    "arrays,config,match",
    [
        ([], {**REQUEST, "r": 0}, "integer in 1..10 .*got 0"),
        ([], {**REQUEST, "r": 1.5}, "integer in 1..10 .*got 1.5"),
        ([], {**REQUEST, "r": D + 1}, "integer in 1..10 .*got 11"),
        ([], {"variant": "factor", "dim": D}, "integer in 1..10 .*got None"),
        ([], {**REQUEST, "dim": D + 2}, "expects d = 12 features but this site holds 10"),
        ([], {"variant": "factor", "r": 4}, "expects d = None"),
        ([], {**REQUEST, "sigma": 0.0}, "unknown config keys"),
        ([np.zeros((D, 4))], dict(REQUEST), "no arrays"),
        ([], {"variant": "full", "dim": D, "r": 4}, "takes no r"),
        ([], {"variant": "power", "dim": D}, "unknown variant"),
    ],
)
def test_malformed_requests_are_refused_and_nothing_is_released(client, arrays, config, match):
    with pytest.raises(InvalidRequestError, match=f"hospital-3: refused: .*{match}"):
        client.fit(arrays, config)
    assert client.site.ledger.count == 0


def test_a_bad_noise_floor_is_refused(client):
    with pytest.raises(InvalidRequestError, match="min_noise_multiplier must be finite"):
        client.fit([], {**REQUEST, "min_noise_multiplier": float("nan")})
    assert client.site.ledger.count == 0


def test_the_full_variant_sends_the_noisy_matrix(client):
    (A_hat,), _, _ = client.fit([], {"variant": "full", "dim": D})
    np.testing.assert_array_equal(A_hat, A_hat.T)
    E = A_hat - client.site.X.T @ client.site.X / client.site.n
    assert 0 < np.abs(E).max() < 10 * client.site.ledger.releases[0].sigma


def test_the_ledger_in_context_state_survives_a_rebuilt_client():
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    X = np.eye(D) * 0.5
    request = FitIns(ndarrays_to_parameters([]), dict(REQUEST))
    client_for_site(context, X, POLICY, "s").fit(request)
    with pytest.raises(BudgetExceededError, match="allows 1 releases per run and this run has made 1"):
        client_for_site(context, X, POLICY, "s").fit(request)  # a rebuilt client remembers
    kept = DPdisPCASite(X, POLICY, site="s").ledger
    kept.restore(json.loads(ContextState(context).load(LEDGER)))
    assert kept.count == 1


def test_strategy_describes_itself_and_asks_for_one_round():
    strategy = DPdisPCAStrategy(dim=30, k=4, weighting="samples")
    assert strategy.num_rounds == 1
    assert repr(strategy) == (
        "DPdisPCAStrategy(dim=30, k=4, r=8, weighting='samples', variant='factor', min_sites=2)"
    )
    assert strategy.server.round_request(1) == ([], {"variant": "factor", "dim": 30, "r": 8})


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``fedpca simulate dpdis-pca --quiet`` with SCENARIO's flags: (printed, JSON path),
    the loadings (``run.csv``) and scree plot (``run.png``) beside the JSON."""
    output = tmp_path_factory.mktemp("dpdis") / "run.json"
    printed, _ = run_cli_record([*ARGV, "--quiet", "--loadings", str(output.with_suffix(".csv")),
                                 "--scree", str(output.with_suffix(".png"))], output)
    return printed, output


@pytest.fixture(scope="module")
def flower_result(cli_run):
    return PCAResult.load(cli_run[1])


def test_flower_run_equals_the_reference(flower_result):
    sites = SCENARIO.all_prepared_sites()
    assert [s.X.shape[0] for s in sites] == [201, 200, 200]
    reference = run_dpdis_pca(
        sites, SCENARIO.k, SCENARIO.r, SCENARIO.policy(), seed=SCENARIO.seed,
        weighting=SCENARIO.weighting, evaluation=SCENARIO.evaluation(),
    )
    np.testing.assert_allclose(flower_result.basis, reference.basis, atol=1e-8, rtol=0)
    np.testing.assert_allclose(flower_result.explained_variance, reference.explained_variance,
                               rtol=1e-8)
    (flower,), (ref,) = flower_result.history, reference.history
    assert flower["energy_ratio"] == pytest.approx(ref["energy_ratio"], abs=1e-8)
    assert flower["epsilon_spent"] == pytest.approx(ref["epsilon_spent"])
    assert flower_result.sites_answered == [["0", "1", "2"]]
    assert flower_result.privacy == reference.privacy
    assert flower_result.privacy["trust_model"] == "per-site noise"
    assert flower_result.config["bytes_per_site"] == 24 * 6 * 8


def test_cli_prints_the_summary_and_writes_json(cli_run):
    printed, output = cli_run
    # --quiet: no header, no table header, no round line; the seeded-run warning, the
    # summary and the record
    assert "DPdisPCA on" not in printed and "eps spent" not in printed
    assert not [line for line in printed.splitlines() if re.match(r"^\s*\d+\s+\d+/\d+ ", line)]
    assert printed.splitlines()[:2] == [
        "seeded run: reproducible, not for production", printed.splitlines()[1]
    ] and printed.splitlines()[1].startswith("energy ratio q/q_o = ")
    assert "energy ratio q/q_o = " in printed
    assert "bytes sent per site: 1,152 (the full d x d matrix: 4,608; 4.0x)" in printed
    assert "DP explained variance per record: " in printed and "; ratio" not in printed
    record = json.loads(output.read_text())
    assert set(record) == record_keys("dpdis-pca")
    assert record["algorithm"] == "dpdis-pca" and record["dataset"] == "synthetic"
    assert record["r"] == 6 and record["bytes_per_site"] == 24 * 6 * 8
    assert record["bytes_full_matrix"] == 24 * 24 * 8
    assert record["rounds"] == record["flower_rounds"] == 1
    assert 0 < record["energy_ratio"] <= 1 + 1e-12
    assert record["energy_ratio"] == record["history"][0]["energy_ratio"]
    assert record["noise_multiplier"] == pytest.approx(math.sqrt(2 * math.log(1.25e4)) / 0.5)
    assert record["sigma"] == pytest.approx(record["noise_multiplier"] * math.sqrt(2) / 200)


def test_cli_writes_the_loadings_and_the_scree_plot(cli_run, flower_result):
    output = cli_run[1]
    rows = output.with_suffix(".csv").read_text().splitlines()
    assert rows[0] == "column,PC1,PC2,PC3" and rows[1].startswith("x0,")
    loadings = np.array([row.split(",")[1:] for row in rows[1:]], dtype=float)
    np.testing.assert_array_equal(loadings, flower_result.basis)
    assert output.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    # the factor variant: the merged A_c's variances, no ratio (no whole noisy matrix)
    assert flower_result.explained_variance.shape == (3,)
    assert flower_result.explained_variance_ratio is None


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--r", "0"], "--r must be >= 1, got --r=0"),
        (["--alpha", "0.3"], "--alpha (Dirichlet label skew) needs a labelled data set"),
        (["--epsilon", "1.0", "--accounting", "paper"], "only valid for --epsilon < 1"),
        (["--k", "8", "--dim", "6"], "need --k <= --dim, got --k=8, --dim=6"),
    ],
)
def test_cli_reports_bad_configuration_without_starting_flower(flags, message, capsys):
    # in terms of the command's flags, not the library's parameter names
    code = cli_main(["simulate", "dpdis-pca", "--sites", "2", "--samples", "40", *flags])
    assert code == 2
    assert message in capsys.readouterr().err
