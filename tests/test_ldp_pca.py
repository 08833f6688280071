"""LDP-PCA core: calibrated symmetric noise, the sqrt(2) C^2 bound, recovery, refusals."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize

from fedpca.algorithms.ldp_pca import (
    LDPCovarianceServer,
    LDPCovarianceSite,
    LDPPolicy,
    default_lambda,
    run_ldp_pca,
    support_scores,
)
from fedpca.algorithms.site import SiteAnswer
from fedpca.flower.site.site_client import PrivateSiteClient as LDPCovarianceClient
from fedpca.data.ldp_model import LDPSpikedModel
from fedpca.errors import (
    BudgetExceededError,
    ConfigurationError,
    InvalidDataError,
    InvalidRequestError,
)
from fedpca.linalg.subspace import subspace_distance, thin_qr
from fedpca.dp.mechanisms import symmetric_gaussian
from fedpca.scenarios.ldp_pca import LDPScenario

POLICY = LDPPolicy(epsilon=1.0, delta=1e-5)
C = 1.7  # a non-unit clip norm for the sensitivity search


def variance_interval(sample_var: float, dof: int, alpha: float = 1e-4):
    """Two-sided chi-square interval for the variance (fails 1 in 10^4 runs by chance)."""
    lo = dof * sample_var / stats.chi2.ppf(1 - alpha / 2, dof)
    hi = dof * sample_var / stats.chi2.ppf(alpha / 2, dof)
    return lo, hi


def unit_rows(rng, n, d, norm=0.9):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * norm


def view_noise(site: LDPCovarianceSite, released: np.ndarray) -> np.ndarray:
    """The noise of a release (release minus ``X^T X``), checked to be exactly symmetric."""
    Z = released - site.X.T @ site.X
    np.testing.assert_array_equal(Z, Z.T)
    return Z[np.triu_indices_from(Z)]


def test_one_record_view_noise_has_variance_sigma_1_squared():
    rng = np.random.default_rng(0)
    d = 8
    sigma_1 = POLICY.record_sigma
    draws = []
    for i in range(300):  # 300 records, one view each
        site = LDPCovarianceSite(unit_rows(rng, 1, d), POLICY, site=f"r{i}")
        draws.append(view_noise(site, site.release_covariance()))
    noise = np.concatenate(draws)
    lo, hi = variance_interval(noise.var(ddof=0), noise.size)
    assert lo <= sigma_1**2 <= hi
    assert abs(noise.mean()) < 5 * sigma_1 / np.sqrt(noise.size)
    assert stats.kstest(noise / sigma_1, "norm").pvalue > 1e-4


def test_m_records_carry_variance_m_sigma_1_squared_through_the_flower_client():
    rng = np.random.default_rng(1)
    m, d = 40, 12
    sigma_1 = POLICY.record_sigma
    draws = []
    for i in range(100):
        site = LDPCovarianceSite(unit_rows(rng, m, d), POLICY, site=f"s{i}")
        (value,), n, metrics = LDPCovarianceClient(site).fit([], {"phase": "covariance", "dim": d})
        assert n == m and metrics["releases"] == 1
        draws.append(view_noise(site, value))
    noise = np.concatenate(draws)
    lo, hi = variance_interval(noise.var(ddof=0), noise.size)
    assert lo <= m * sigma_1**2 <= hi
    # Off-diagonal and diagonal entries alike (the upper triangle includes the diagonal).
    assert abs(np.corrcoef(noise[:-1], noise[1:])[0, 1]) < 5 / np.sqrt(noise.size)


def test_ledger_records_the_per_record_sigma_and_refuses_a_second_release():
    site = LDPCovarianceSite(unit_rows(np.random.default_rng(2), 30, 5), POLICY, site="h")
    site.release_covariance()
    (release,) = site.ledger.releases
    assert release.sensitivity == pytest.approx(math.sqrt(2))
    assert release.sigma == pytest.approx(POLICY.record_sigma)
    assert site.ledger.epsilon_spent() == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(BudgetExceededError, match="h: refused.*allows 1 releases"):
        site.release_covariance()
    assert site.ledger.count == 1


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_server_can_only_raise_the_noise(factor):
    site = LDPCovarianceSite(unit_rows(np.random.default_rng(3), 10, 4), POLICY, site="s")
    own = POLICY.calibration().noise_multiplier
    LDPCovarianceClient(site).fit(
        [], {"phase": "covariance", "dim": 4, "min_noise_multiplier": own * factor}
    )
    assert site.ledger.releases[0].noise_multiplier == pytest.approx(max(own, own * factor))


def test_paper_mode_is_the_classic_formula_at_the_corrected_sensitivity():
    policy = LDPPolicy(epsilon=0.5, delta=1e-4, accounting="paper")
    paper_sigma = math.sqrt(2 * math.log(1.25 / 1e-4)) / 0.5  # the paper's sigma_1
    assert policy.record_sigma == pytest.approx(math.sqrt(2) * paper_sigma)
    assert LDPPolicy(epsilon=0.5, delta=1e-4).record_sigma < policy.record_sigma
    with pytest.raises(ConfigurationError, match="only valid for epsilon < 1"):
        LDPPolicy(epsilon=1.0, delta=1e-4, accounting="paper")


def upper_gap(xy: np.ndarray, d: int) -> float:
    x, y = (v if np.linalg.norm(v) <= C else v * C / np.linalg.norm(v) for v in (xy[:d], xy[d:]))
    return float(np.linalg.norm(np.triu(np.outer(x, x) - np.outer(y, y))))


@pytest.mark.parametrize("d", [2, 3, 5])
def test_adversarial_search_never_exceeds_the_view_sensitivity(d):
    rng = np.random.default_rng(d)
    bound = LDPPolicy(clip_norm=C).sensitivity
    assert bound == pytest.approx(math.sqrt(2) * C**2)
    worst = 0.0
    for _ in range(30):
        x0 = rng.standard_normal(2 * d) * C
        res = minimize(lambda v: -upper_gap(v, d), x0, method="Powell", options={"maxiter": 4000})
        worst = max(worst, -res.fun, upper_gap(x0, d))
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.98 * bound  # attained by x = C e1, y = C e2: the search is strong enough


def test_replacing_a_record_moves_the_site_sum_by_at_most_the_bound():
    rng = np.random.default_rng(4)
    bound = LDPPolicy(clip_norm=C).sensitivity
    for _ in range(200):
        X = unit_rows(rng, 20, 6, norm=C)
        Y = X.copy()
        Y[rng.integers(20)] = unit_rows(rng, 1, 6, norm=C * rng.uniform(0, 1))
        assert np.linalg.norm(np.triu(X.T @ X - Y.T @ Y)) <= bound * (1 + 1e-9)


def planted_sites(rng, V, n_sites, n_each, noise=0.05):
    """Rows concentrated on span(V), norm <= 1: a strong-signal population."""
    p, k = V.shape
    sites = []
    for _ in range(n_sites):
        rows = rng.standard_normal((n_each, k)) @ V.T + noise * rng.standard_normal((n_each, p))
        sites.append(rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1.0))
    return sites


def test_dense_reference_recovers_the_subspace_at_a_generous_budget_and_more_privacy_costs():
    rng = np.random.default_rng(5)
    V = thin_qr(rng.standard_normal((30, 3)))
    sites = planted_sites(rng, V, 4, 5000)

    def distance(eps, seed):
        result = run_ldp_pca(sites, 3, LDPPolicy(epsilon=eps, delta=1e-5), seed=seed,
                             evaluate=lambda Q: {"distance": subspace_distance(Q, V)})
        return result.history[0]["distance"]

    assert distance(50.0, 0) < 0.05
    assert np.mean([distance(50.0, s) for s in range(3)]) < np.mean(
        [distance(0.1, s) for s in range(3)]
    )


def test_sparse_reference_recovers_the_support_at_a_generous_budget():
    rng = np.random.default_rng(6)
    p, s, k = 60, 6, 2
    support = np.sort(rng.permutation(p)[:s])
    V = np.zeros((p, k))
    V[support] = thin_qr(rng.standard_normal((s, k)))
    policy = LDPPolicy(epsilon=50.0, delta=1e-5)
    result = run_ldp_pca(planted_sites(rng, V, 4, 5000), k, policy, seed=1, sparse=True,
                         true_support=support,
                         evaluate=lambda Q: {"distance": subspace_distance(Q, V)})
    entry = result.history[0]
    assert entry["support_recall"] == 1.0 and entry["support_precision"] == 1.0
    assert entry["support"] == support.tolist()
    assert entry["admm_converged"] and entry["admm_iterations"] < 500
    assert entry["lam"] == pytest.approx(default_lambda(policy.record_sigma, p, 20_000))
    assert entry["distance"] < 0.1
    # Rows off the estimated support are exactly zero in the output basis.
    off = np.setdiff1d(np.arange(p), support)
    assert np.abs(result.basis[off]).max() < 1e-8


def test_default_lambda_bounds_the_largest_noise_entry_as_documented():
    rng = np.random.default_rng(7)
    d, n, sigma_1 = 30, 5000, 2.0
    lam = default_lambda(sigma_1, d, n)
    exceed = [
        np.abs(symmetric_gaussian(rng, d, sigma_1 * math.sqrt(n)) / n).max() > lam
        for _ in range(400)
    ]
    assert np.mean(exceed) <= 1 / math.sqrt(4 * math.pi * math.log(d * (d + 1)))


def test_support_scores():
    assert support_scores([1, 2, 3, 9], [1, 2, 3]) == {
        "support_precision": 0.75, "support_recall": 1.0,
    }
    assert support_scores([], [4]) == {"support_precision": 0.0, "support_recall": 0.0}


def test_model_matches_the_paper():
    model = LDPSpikedModel(dim=40, k=10, sparsity=None, seed=3)
    lam = np.linalg.eigvalsh(model.covariance)[::-1]
    np.testing.assert_allclose(lam[:10], 1 / 200)
    np.testing.assert_allclose(lam[10:], 1 / 400)
    np.testing.assert_allclose(model.truth.T @ model.truth, np.eye(10), atol=1e-12)
    X = model.sample(50_000, stream=1)
    assert np.linalg.norm(X, axis=1).max() <= 1.0  # the paper's w.h.p. bound, no clipping
    empirical = X.T @ X / len(X)
    assert np.linalg.norm(empirical - model.covariance, 2) < 0.1 * lam[0]
    np.testing.assert_array_equal(model.sample(5, stream=2), model.sample(5, stream=2))


def test_sparse_model_has_s_nonzero_orthonormal_rows():
    model = LDPSpikedModel(dim=400, k=10, sparsity=20, seed=1)
    assert model.support.size == 20
    assert np.count_nonzero(np.linalg.norm(model.truth, axis=1)) == 20
    np.testing.assert_allclose(model.truth.T @ model.truth, np.eye(10), atol=1e-12)
    assert not np.array_equal(model.support, np.arange(20))  # randomly permuted rows


@pytest.mark.parametrize(
    "kwargs,match",
    [({"k": 41}, "k <= dim"), ({"sparsity": 3}, "k <= sparsity"), ({"spike": -1.0}, "spike")],
)
def test_model_refuses_bad_parameters(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        LDPSpikedModel(**{"dim": 40, "k": 5, **kwargs})


def test_nan_data_is_refused_with_the_site_named():
    X = np.ones((5, 3)) * 0.1
    X[2, 1] = np.nan
    with pytest.raises(InvalidDataError, match="clinic: data has 1 NaN"):
        LDPCovarianceSite(X, POLICY, site="clinic")
    with pytest.raises(InvalidDataError, match="1: data has 1 NaN"):
        run_ldp_pca([np.full((5, 3), 0.1), X], 1, POLICY)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"k": 4}, "k <= dim"),
        ({"k": 0}, "k must be >= 1"),
        ({"sparse": True, "lam": -0.5}, "lam must be a finite number >= 0"),
        ({"sparse": True}, "needs lam, or record_sigma"),
    ],
)
def test_server_refuses_bad_parameters(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        LDPCovarianceServer(**{"dim": 3, "k": 1, **kwargs})


def test_server_takes_a_single_round():
    server = LDPCovarianceServer(3, 1)
    server.receive([SiteAnswer("a", 10, np.diag([3.0, 2.0, 1.0]), 1.0)])
    np.testing.assert_allclose(np.abs(server.basis[:, 0]), [1.0, 0.0, 0.0])
    with pytest.raises(ConfigurationError, match="single round"):
        server.receive([SiteAnswer("a", 10, np.eye(3), 1.0)])
    assert len(server.history) == 1


def test_run_refuses_mismatched_sites_and_no_sites():
    with pytest.raises(ConfigurationError, match="same number of features"):
        run_ldp_pca([np.zeros((3, 4)), np.zeros((3, 5))], 1, POLICY)
    with pytest.raises(ConfigurationError, match="at least one site"):
        run_ldp_pca([], 1, POLICY)


@pytest.mark.parametrize(
    "value,match",
    [
        (np.ones((3, 2)), "shape"),
        (np.full((3, 3), np.inf), "finite"),
        (np.triu(np.ones((3, 3))), "not symmetric"),
    ],
)
def test_server_refuses_malformed_answers(value, match):
    server = LDPCovarianceServer(3, 1)
    good = SiteAnswer("a", 10, np.eye(3), 1.0)
    with pytest.raises((InvalidRequestError, InvalidDataError), match=match):
        server.receive([good, SiteAnswer("b", 10, value, 1.0)])
    assert server.history == []


@pytest.mark.parametrize(
    "arrays,config,match",
    [
        ([np.eye(3)], {"phase": "covariance", "dim": 3}, "no arrays"),
        ([], {"phase": "power", "dim": 3}, "unknown phase"),
        ([], {"phase": "covariance", "dim": 5}, "expects d = 5 features but this site holds 3"),
        ([], {"phase": "covariance"}, "expects d = None"),
        ([], {"phase": "covariance", "dim": 3, "sigma": 0.0}, "unknown config keys"),
        ([], {"phase": "covariance", "dim": 3, "min_noise_multiplier": float("nan")}, "finite"),
    ],
)
def test_client_refuses_malformed_requests_and_releases_nothing(arrays, config, match):
    client = LDPCovarianceClient(LDPCovarianceSite(np.eye(3) * 0.5, POLICY, site="lab"))
    with pytest.raises(InvalidRequestError, match=match):
        client.fit(arrays, config)
    assert client.site.ledger.count == 0


def test_scenario_round_trips_through_run_config():
    scenario = LDPScenario(sites=3, dim=20, samples=300, k=2, sparse=True, sparsity=5,
                           lam=0.01, seed=4)
    assert LDPScenario.from_run_config(scenario.to_run_config()) == scenario
    default = LDPScenario(sites=2, samples=100)
    config = default.to_run_config()
    assert config["seed"] == -1 and config["lam"] == -1.0 and config["sparsity"] == 0
    assert LDPScenario.from_run_config(config) == default


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"dataset": "cifar"}, r"dataset must be one of \('synthetic', .*got dataset='cifar'"),
        ({"alpha": 0.5}, "needs a labelled dataset"),
        ({"lam": -1.0}, "lam must be"),
        ({"samples": 2, "sites": 3}, "cannot give each of 3 sites"),
        ({"epsilon": 1.0, "accounting": "paper"}, "only valid for epsilon < 1"),
    ],
)
def test_scenario_refuses_bad_configuration(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        LDPScenario(**kwargs)


def test_scenario_on_a_named_dataset():
    pytest.importorskip("sklearn")
    scenario = LDPScenario(dataset="breast-cancer", sites=3, k=2, epsilon=5.0, seed=0)
    assert (scenario.data_dim, scenario.data_samples) == (30, 569)
    assert scenario.true_support() is None
    result = run_ldp_pca(scenario.all_sites(), 2, scenario.policy(), seed=0,
                         evaluate=scenario.evaluate)
    entry = result.history[0]
    assert 0 <= entry["distance"] <= math.sqrt(2) + 1e-9
    assert 0 < entry["energy_ratio"] <= 1 + 1e-9
    # Against the pooled PCA itself the metrics are perfect.
    assert scenario.evaluate(scenario.reference_basis()) == pytest.approx(
        {"distance": 0.0, "energy_ratio": 1.0}, abs=1e-7
    )
