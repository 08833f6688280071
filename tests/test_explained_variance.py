"""What a PCA user reads beside the components: the DP explained variance and its ratio
for every algorithm (post-processing of a whole noisy matrix, or DPS-PCA's charged release
of its final basis's Rayleigh quotients), the loadings table and the private choice of k.
No Flower federation is started."""

import csv

import numpy as np
import pytest
from scipy import stats
from test_sensitivity import C, adversarial_max, project

from fedpca.algorithms.central import run_analyze_gauss, run_mod_sulq
from fedpca.algorithms.dpdis_pca import DPdisPCAPolicy, run_dpdis_pca
from fedpca.algorithms.dps_pca import VARIANCE_MECHANISM, DPSPCASite, DPSPCAPolicy, run_dps_pca
from fedpca.algorithms.explained_variance import (
    along_basis,
    choose_k,
    rayleigh_sensitivity,
    rayleigh_statistics,
    variance_ratio,
)
from fedpca.algorithms.ldp_pca import LDPPolicy, run_ldp_pca
from fedpca.cli import main as cli_main
from fedpca.flower.site.site_client import PrivateSiteClient as DPSPCAClient
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.linalg.subspace import thin_qr
from fedpca.loadings import write_loadings
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template
from fedpca.results import PCAResult
from fedpca.run_record import run_record
from fedpca.scenarios.base import AUTO_K
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario

HUGE = 1e4  # an epsilon whose noise is negligible: the DP figures meet the exact ones


def rows(n=3000, d=8, seed=0):
    """Rows of norm <= 1 with a clear spectrum (three leading directions)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.array([3.0, 2.0, 1.2] + [0.3] * (d - 3))
    return X / np.linalg.norm(X, axis=1).max()


X = rows()
EXACT = np.linalg.eigvalsh(X.T @ X / len(X))[::-1]
SITES = np.array_split(X, 3)


def test_ratios_use_the_noisy_trace_and_never_sum_above_one():
    assert variance_ratio(np.array([3.0, 1.0]), 8.0).tolist() == [0.375, 0.125]
    # noise made the trace smaller than the top values: raised to their sum
    assert variance_ratio(np.array([3.0, 1.0]), 2.0).tolist() == [0.75, 0.25]
    assert variance_ratio(np.array([-1.0, 2.0]), 4.0).tolist() == [0.0, 0.5]
    assert variance_ratio(np.array([-1.0]), -3.0) is None


def test_along_basis_gives_the_eigenvalues_for_eigenvectors_and_no_ratio_without_trace():
    A = X.T @ X / len(X)
    _, vectors = np.linalg.eigh(A)
    V = vectors[:, ::-1][:, :2]
    values, ratio = along_basis(V, A @ V, float(np.trace(A)))
    assert values == pytest.approx(EXACT[:2], rel=1e-12)
    assert ratio == pytest.approx(EXACT[:2] / EXACT.sum(), rel=1e-12)
    assert along_basis(V, A @ V, None)[1] is None


def test_choose_k_is_the_smallest_reaching_the_target():
    spectrum = np.array([5.0, 3.0, 1.5, 0.5, -0.2])  # trace 9.8
    assert choose_k(spectrum, 0.5) == 1
    assert choose_k(spectrum, 0.8) == 2  # 8 / 9.8 = 0.816
    assert choose_k(spectrum, 0.9) == 3
    # the clamped values sum to 10 > the trace: the fifth (negative) adds nothing
    assert choose_k(spectrum, 1.0) == 4
    assert choose_k(np.array([5.0, 3.0, 2.0]), 1.0) == 3
    for target in (0.0, 1.5):
        with pytest.raises(ConfigurationError, match=r"in \(0, 1\]"):
            choose_k(spectrum, target)
    with pytest.raises(ConfigurationError, match="no positive eigenvalue"):
        choose_k(np.array([-1.0, -2.0]), 0.9)


@pytest.mark.parametrize("run, has_ratio", [
    (lambda: run_dpdis_pca(SITES, 2, policy=DPdisPCAPolicy(epsilon=HUGE), seed=1,
                           variant="full"), True),
    (lambda: run_dpdis_pca(SITES, 2, r=4, policy=DPdisPCAPolicy(epsilon=HUGE), seed=1), False),
    (lambda: run_ldp_pca(SITES, 2, LDPPolicy(epsilon=HUGE, delta=1e-5), seed=1), None),
    (lambda: run_analyze_gauss(X, 2, HUGE, 1e-5, seed=1), True),
    (lambda: run_dps_pca(SITES, 2, 8, DPSPCAPolicy(epsilon=HUGE, rounds=8,
                                                 explained_variance=True), seed=1), True),
])
def test_every_algorithm_reports_its_dp_explained_variance(run, has_ratio):
    result = run()
    # LDP-PCA's noise is per record: even at a huge epsilon it is not negligible
    rel = 0.05 if has_ratio is None else 1e-3
    assert result.explained_variance == pytest.approx(EXACT[:2], rel=rel)
    if has_ratio is False:  # DPdisPCA's factor variant: no whole noisy matrix
        assert result.explained_variance_ratio is None
        with pytest.raises(AttributeError, match="no total variance"):
            result.explained_variance_ratio_
    else:
        assert result.explained_variance_ratio_ == pytest.approx(EXACT[:2] / EXACT.sum(),
                                                                 rel=rel)


def test_mod_sulq_ratios_are_shares_of_its_noisy_trace():
    result = run_mod_sulq(X, 3, 1.0, 1e-5, seed=2)
    ratio = result.explained_variance_ratio
    assert np.all(ratio >= 0) and ratio.sum() <= 1.0
    assert result.explained_variance == pytest.approx(result.history[0]["eigenvalues"])


def test_dps_pca_without_the_release_has_no_explained_variance_and_one_release_less():
    policy = DPSPCAPolicy(epsilon=1.0, rounds=3)
    with_release = DPSPCAPolicy(epsilon=1.0, rounds=3, explained_variance=True)
    assert (policy.releases, with_release.releases) == (4, 5)
    assert len(with_release.plan()) == 5
    assert with_release.calibration().noise_multiplier > policy.calibration().noise_multiplier
    result = run_dps_pca(SITES, 2, 8, policy, seed=1)
    assert result.explained_variance is None
    with pytest.raises(AttributeError, match="explained_variance=True"):
        result.explained_variance_


def test_the_variance_round_orders_components_and_spends_within_the_budget():
    policy = DPSPCAPolicy(epsilon=2.0, rounds=4, explained_variance=True)
    result = run_dps_pca(SITES, 3, 8, policy, seed=4)
    assert result.history[-1]["phase"] == "variance" and len(result.history) == 6
    assert np.all(np.diff(result.explained_variance) <= 0)
    assert max(h["epsilon_spent"] for h in result.history) <= 2.0
    record = run_record(result)
    assert record["rounds"] == 4 and record["flower_rounds"] == 6


def test_a_site_whose_policy_did_not_agree_refuses_the_rayleigh_request_uncharged():
    site = DPSPCASite(SITES[0], DPSPCAPolicy(rounds=3), site="s")
    Q = thin_qr(np.random.default_rng(0).standard_normal((X.shape[1], 2)))
    with pytest.raises(InvalidRequestError, match="explained_variance = false"):
        site.release_rayleigh(Q)
    assert site.ledger.count == 0


def test_discrete_noise_is_refused_with_the_release():
    with pytest.raises(ConfigurationError, match="not built for discrete"):
        DPSPCAPolicy(secure_min_sites=3, discrete=True, explained_variance=True)


def rayleigh_gap(xy: np.ndarray, V: np.ndarray) -> float:
    d = V.shape[0]
    x, y = project(xy[:d]), project(xy[d:])
    return float(np.linalg.norm(rayleigh_statistics(x[None], V)
                                - rayleigh_statistics(y[None], V)))


@pytest.mark.parametrize("d, k", [(3, 1), (6, 4)])
def test_the_rayleigh_sensitivity_holds_under_adversarial_search_and_is_tight(d, k):
    rng = np.random.default_rng(d * 10 + k)
    bound = rayleigh_sensitivity(C)
    worst = 0.0
    for _ in range(2):
        V = thin_qr(rng.standard_normal((d, k)))
        worst = max(worst, adversarial_max(lambda v: rayleigh_gap(v, V), 2 * d, rng,
                                           starts=15))
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.98 * bound  # attained: x = C v_1, y = 0


def test_replacing_a_record_in_a_dataset_respects_the_rayleigh_bound():
    rng = np.random.default_rng(5)
    d, k, n = 7, 3, 25
    V = thin_qr(rng.standard_normal((d, k)))
    for _ in range(200):
        A = np.array([project(r) for r in rng.standard_normal((n, d)) * 2])
        B = A.copy()
        B[rng.integers(n)] = project(rng.standard_normal(d) * 5)
        gap = np.linalg.norm(rayleigh_statistics(A, V) - rayleigh_statistics(B, V))
        assert gap <= rayleigh_sensitivity(C) * (1 + 1e-9)


def test_the_rayleigh_release_noise_has_the_calibrated_variance():
    policy = DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=5, explained_variance=True)
    d, k = 30, 20
    V = thin_qr(np.random.default_rng(9).standard_normal((d, k)))
    noise, sigma = [], None
    for s in range(200):  # one such release per site and run
        site = DPSPCASite(rows(n=40, d=d, seed=s), policy, site=f"s{s}")
        noise.append(site.release_rayleigh(V) * site.n - rayleigh_statistics(site.X, V))
        sigma = site.sigma(rayleigh_sensitivity(1.0))
        assert site.ledger.count == 1
    noise = np.concatenate(noise)
    assert sigma == pytest.approx(policy.calibration().noise_multiplier * np.sqrt(2))
    dof = noise.size
    alpha = 1e-4  # fails 1 in 10^4 runs by chance
    lo = dof * noise.var(ddof=0) / stats.chi2.ppf(1 - alpha / 2, dof)
    hi = dof * noise.var(ddof=0) / stats.chi2.ppf(alpha / 2, dof)
    assert lo <= sigma**2 <= hi
    assert abs(noise.mean()) < 5 * sigma / np.sqrt(dof)


def test_loadings_table_names_the_columns_in_the_csv_and_the_record(tmp_path):
    result = run_analyze_gauss(X, 2, HUGE, 1e-5, seed=1)
    path = write_loadings(result, tmp_path / "loadings.csv")
    with path.open() as f:
        table = list(csv.reader(f))
    assert table[0] == ["column", "PC1", "PC2"]
    assert [row[0] for row in table[1:]] == [f"x{j}" for j in range(X.shape[1])]
    np.testing.assert_array_equal(np.array([row[1:] for row in table[1:]], dtype=float),
                                  result.basis)
    result.columns = [f"lab{j}" for j in range(X.shape[1])]
    record = run_record(result)
    assert list(record["loadings"]) == result.columns
    assert record["loadings"]["lab0"] == result.basis[0].tolist()
    assert record["explained_variance_ratio"] == result.explained_variance_ratio.tolist()
    result.save(tmp_path / "r.json")
    loaded = PCAResult.load(tmp_path / "r.json")
    assert loaded.columns == result.columns
    np.testing.assert_array_equal(loaded.explained_variance, result.explained_variance)


def test_a_site_policy_sets_the_release_and_the_coordinator_cannot(tmp_path):
    np.save(tmp_path / "records.npy", X)
    path = write_policy_template(tmp_path / "policy.toml", "a", "records.npy")
    plain = load_site_policy(path)
    assert plain.privacy_config("dps-pca")["explained-variance"] is False  # never the request
    rounds = plain.releases_per_run("dps-pca")
    path.write_text(path.read_text().replace("# explained-variance = true",
                                             "explained-variance = true"))
    agreed = load_site_policy(path)
    assert agreed.privacy_config("dps-pca")["explained-variance"] is True
    assert agreed.releases_per_run("dps-pca") == rounds + 1
    assert len(agreed.planned_run("dps-pca")) == rounds + 1
    assert "explained-variance" not in agreed.privacy_config("dpdis-pca")


@pytest.mark.parametrize("agreed", [False, True])
def test_a_site_refuses_a_variance_release_it_does_not_make_in_the_readiness_round(tmp_path,
                                                                                  agreed):
    from flwr.common import Context, RecordDict

    from fedpca.site.real_site import RealSiteSource
    from fedpca.site.ledger_lifecycle import create_site_ledger

    np.save(tmp_path / "records.npy", X)
    path = write_policy_template(tmp_path / "policy.toml", "a", "records.npy")
    if agreed:
        path.write_text(path.read_text().replace("# explained-variance = true",
                                                 "explained-variance = true"))
    path.chmod(0o600)
    policy = load_site_policy(path)
    create_site_ledger(policy.witness())
    node = Context(run_id=3, node_id=1, node_config={"policy": str(path)}, state=RecordDict(),
                   run_config={"algorithm": "dps-pca", "explained-variance": True})
    if agreed:
        assert RealSiteSource(node, "dps-pca").ready().site == "a"
    else:  # the run would fail at its last round: refused now, before any release
        with pytest.raises(InvalidRequestError, match="does not make"):
            RealSiteSource(node, "dps-pca").ready()
    assert policy.open_ledger().rows() == []


def test_dpdis_pca_keeps_the_fewest_components_that_explain_the_target():
    policy = DPdisPCAPolicy(epsilon=HUGE)
    target = float(np.cumsum(EXACT)[2] / EXACT.sum()) - 0.01  # three components reach it
    result = run_dpdis_pca(SITES, X.shape[1], policy=policy, seed=1, variant="full",
                           variance=target)
    assert result.k == 3 and result.config["k"] == 3
    assert result.explained_variance_ratio.sum() >= target
    assert result.explained_variance_ratio[:2].sum() < target
    capped = run_dpdis_pca(SITES, 2, policy=policy, seed=1, variant="full", variance=target)
    assert capped.k == 2  # k is the most components
    with pytest.raises(ConfigurationError, match="factor variant"):
        run_dpdis_pca(SITES, 3, policy=policy, seed=1, variance=target)


@pytest.mark.parametrize("argv, message", [
    (["dpdis-pca", "--k", "auto"], "--k auto needs --variance"),
    (["dpdis-pca", "--k", "auto", "--variance", "0.9"],
     "--variance must be a share in (0, 1], of a --variant with the whole noisy matrix"),
    (["dpdis-pca", "--variant", "full", "--variance", "1.5"], "--variance must be a share"),
    (["dps-pca", "--k", "auto"], "dps-pca needs k before it runs"),
    (["sulq-kplane", "--k", "auto"], "sulq-kplane needs k before it runs"),
    (["dps-pca", "--scree", "s.png"], "add --explained-variance"),
    (["sulq-kplane", "--loadings", "l.csv"], "drop --loadings"),
])
def test_the_cli_refuses_what_the_run_cannot_give_before_starting_flower(argv, message, capsys):
    code = cli_main(["simulate", *argv, "--sites", "2", "--samples", "40"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_k_auto_resolves_to_at_most_d_components():
    scenario = DPdisPCAScenario(sites=2, dim=12, samples=200, k=AUTO_K, variance=0.9,
                                variant="full")
    assert scenario.k == 12 and scenario.server().variance == 0.9
    again = DPdisPCAScenario.from_run_config(scenario.to_run_config())
    assert (again.k, again.variance) == (12, 0.9)


def test_the_scree_plot_draws_ratios_or_refuses_without_variance(tmp_path):
    from fedpca.plots import plot_scree

    record = run_record(run_analyze_gauss(X, 3, 1.0, 1e-5, seed=1))
    path = plot_scree(record, tmp_path / "scree.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    factor = run_dpdis_pca(SITES, 2, r=4, policy=DPdisPCAPolicy(), seed=1)
    assert plot_scree(run_record(factor), tmp_path / "factor.png").exists()  # no ratio: values
    chosen = run_dpdis_pca(SITES, X.shape[1], policy=DPdisPCAPolicy(), seed=1, variant="full",
                           variance=0.95)  # with the target's line
    assert plot_scree(run_record(chosen), tmp_path / "chosen.png").exists()
    with pytest.raises(ConfigurationError, match="no explained variance"):
        plot_scree(run_record(run_dps_pca(SITES, 2, 8, DPSPCAPolicy(rounds=2), seed=1)),
                   tmp_path / "none.png")


def test_the_flower_client_answers_the_variance_phase_only_if_its_policy_agreed():
    Q = thin_qr(np.random.default_rng(3).standard_normal((X.shape[1], 2)))
    agreed = DPSPCAClient(DPSPCASite(SITES[0], DPSPCAPolicy(rounds=2, explained_variance=True),
                                     site="a"))
    (answer,), n, metrics = agreed.fit([Q], {"phase": "variance", "round": 3})
    assert answer.shape == (3,) and n == len(SITES[0]) and metrics["releases"] == 1
    assert agreed.site.ledger.releases[0].mechanism == VARIANCE_MECHANISM
    refused = DPSPCAClient(DPSPCASite(SITES[0], DPSPCAPolicy(rounds=2), site="b"))
    with pytest.raises(InvalidRequestError, match="explained_variance = false"):
        refused.fit([Q], {"phase": "variance", "round": 3})
    with pytest.raises(InvalidRequestError, match="exactly one basis"):
        agreed.fit([], {"phase": "variance", "round": 3})
    assert refused.site.ledger.count == 0


def test_the_explained_variance_line_lists_components_and_the_cumulative_ratio():
    from fedpca.report import LISTED_COMPONENTS, explained_summary

    assert explained_summary(None, None) is None
    assert explained_summary([2.0, 1.0], None) == "DP explained variance per record: 2, 1"
    line = explained_summary(np.arange(12.0, 0, -1), np.full(12, 0.05))
    shown = ", ".join(["0.05"] * LISTED_COMPONENTS)
    assert line.endswith(f"3, ...; ratio {shown}, ... (cumulative 0.600)")


def test_the_estimators_expose_the_ratio_where_it_is_released():
    from fedpca.estimators import PPCA, AnalyzeGaussPCA

    fitted = AnalyzeGaussPCA(n_components=2, epsilon=HUGE, random_state=1).fit(X)
    assert fitted.explained_variance_ratio_ == pytest.approx(EXACT[:2] / EXACT.sum(), rel=1e-3)
    with pytest.raises(AttributeError, match="no ratio either"):
        PPCA(n_components=1, random_state=1).fit(X).explained_variance_ratio_


def test_the_flower_app_writes_the_loadings_next_to_its_record(tmp_path):
    from fedpca.flower.server.app_server import finish

    result = run_analyze_gauss(X, 2, 1.0, 1e-5, seed=1)
    finish(result, {"output": str(tmp_path / "run.json")})
    rows = (tmp_path / "run.loadings.csv").read_text().splitlines()
    assert rows[0] == "column,PC1,PC2" and len(rows) == 1 + X.shape[1]


def test_show_draws_the_scree_plot_of_a_saved_record(tmp_path, capsys):
    from cli_runs import run_cli

    from fedpca.run_record import save_run_record

    save_run_record(run_analyze_gauss(X, 2, 1.0, 1e-5, seed=1), tmp_path / "ag.json")
    code, printed = run_cli(["show", str(tmp_path / "ag.json"), "--scree",
                             str(tmp_path / "ag.png")])
    assert code == 0 and (tmp_path / "ag.png").exists()
    assert "DP explained variance per record: " in printed
    save_run_record(run_dps_pca(SITES, 2, 8, DPSPCAPolicy(rounds=2), seed=1), tmp_path / "d.json")
    code, _ = run_cli(["show", str(tmp_path / "d.json"), "--scree", str(tmp_path / "d.png")])
    assert code == 2 and "released no explained variance" in capsys.readouterr().err


@pytest.mark.parametrize("method, variant", [("analyze-gauss", "factor"), ("dpdis-pca", "full")])
def test_a_centred_table_run_keeps_the_fewest_components_with_their_column_names(method,
                                                                                 variant):
    from test_centring import BOUNDS, COLUMNS, ROWS

    from fedpca.algorithms.centred_run import run_centred_pca
    from fedpca.algorithms.centring import CentredPolicy

    policy = CentredPolicy(epsilon=4.0, standardize=True)
    result = run_centred_pca(np.array_split(ROWS, 4), BOUNDS, len(COLUMNS), policy, method,
                             variant, COLUMNS, seed=2, variance=0.6)
    ratio = result.explained_variance_ratio
    assert 1 <= result.k < len(COLUMNS) and result.config["k"] == result.k
    assert ratio.sum() >= 0.6 > ratio[:-1].sum()
    assert list(run_record(result)["loadings"]) == list(COLUMNS)
    if method == "dpdis-pca":
        with pytest.raises(ConfigurationError, match="factor variant"):
            run_centred_pca(np.array_split(ROWS, 4), BOUNDS, 2, policy, method, "factor",
                            COLUMNS, seed=2, variance=0.6)


def test_show_says_how_many_scales_sit_at_the_noise_floor_and_flags_the_ratio(tmp_path):
    """A standardised run at eps 0.05 on 400 rows floors several private scales: the record
    flags its ratio, ``fedpca show`` counts them and warns above a quarter of the columns,
    naming the fix."""
    from cli_runs import run_cli
    from test_centring import BOUNDS, ROWS

    from fedpca.algorithms.centred_run import run_centred_pca
    from fedpca.algorithms.centring import CentredPolicy
    from fedpca.results import CentredPCAResult
    from fedpca.run_record import save_run_record

    result = run_centred_pca(np.array_split(ROWS, 2), BOUNDS, 2,
                             CentredPolicy(epsilon=0.05, standardize=True), "analyze-gauss",
                             seed=4)
    floored = len(result.floored_scales)
    assert floored > BOUNDS.dim / 4 and result.explained_variance_ratio_floored
    save_run_record(result, tmp_path / "run.json")
    assert CentredPCAResult.load(tmp_path / "run.json").explained_variance_ratio_floored
    code, printed = run_cli(["show", str(tmp_path / "run.json")])
    assert code == 0
    assert f"scales: {floored} of {BOUNDS.dim} columns at the noise floor" in printed
    assert f"warning: standardising failed for {floored} of {BOUNDS.dim} columns" in printed
    for fix in ("more epsilon", "[data] moments-share", "public scales in the contract",
                "centring only"):
        assert fix in printed
    assert "every ratio reads high" in printed


def test_the_floor_warning_starts_above_a_quarter_of_the_columns():
    from fedpca.report import explained_summary, floor_lines

    assert floor_lines(2, 8) == ["scales: 2 of 8 columns at the noise floor"]
    assert floor_lines(0, 8, public=5) == [
        "scales: 0 of 8 columns at the noise floor, 5 public (the contract's)"]
    assert len(floor_lines(3, 8)) == 2 and floor_lines(3, 8)[1].startswith("warning: ")
    flagged = explained_summary([2.0, 1.0], [0.5, 0.25], floored=True)
    assert flagged.endswith("(cumulative 0.750) (flagged: over a total in which the columns "
                            "whose scale sits at the noise floor count for almost nothing, so "
                            "every ratio reads high)")
    assert "flagged" not in explained_summary([2.0, 1.0], [0.5, 0.25])
