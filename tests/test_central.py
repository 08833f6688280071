"""Central baselines: noise exactly as calibrated, sensitivity bound, recovery, PPCA."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import NonlinearConstraint, minimize

from fedpca.algorithms.central import (
    analyze_gauss_release,
    mod_sulq_beta,
    mod_sulq_release,
    pool_sites,
    run_analyze_gauss,
    run_local_pca,
    run_mod_sulq,
    run_pooled_pca,
)
from fedpca.algorithms.ppca import run_ppca, run_ppca_chain
from fedpca.data.synthetic import SparseSpikedModel
from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.linalg.bingham import sample_vector_bingham
from fedpca.linalg.subspace import subspace_distance, top_eigenvectors
from fedpca.dp.calibration import calibrate_gaussian, pld_epsilon
from fedpca.dp.mechanisms import upper_triangle_sensitivity
from fedpca.results import PCAResult

#: False-alarm probability of each statistical check.
ALPHA = 1e-4


def unit_rows(n: int, d: int, seed: int, norm: float = 0.9) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * norm


def upper(M: np.ndarray) -> np.ndarray:
    return M[np.triu_indices(M.shape[0])]


def noise_entries(releases, exact: np.ndarray) -> np.ndarray:
    """Upper triangles (diagonal included) of release - exact; every release symmetric."""
    entries = []
    for r in releases:
        scale = float(np.abs(r.matrix).max())
        np.testing.assert_allclose(r.matrix, r.matrix.T, rtol=0, atol=1e-13 * scale)
        entries.append(upper(r.matrix - exact))
    return np.concatenate(entries)


def assert_gaussian_with_sigma(noise: np.ndarray, sigma: float) -> None:
    """Chi-square interval on the variance (level ALPHA), zero mean, normal shape."""
    dof = noise.size
    s2 = float(noise @ noise) / dof  # the mean is known to be 0
    lo = dof * s2 / stats.chi2.ppf(1 - ALPHA / 2, dof)
    hi = dof * s2 / stats.chi2.ppf(ALPHA / 2, dof)
    assert lo <= sigma**2 <= hi
    assert abs(noise.mean()) <= stats.norm.isf(ALPHA / 2) * sigma / math.sqrt(dof)
    assert stats.kstest(noise / sigma, "norm").pvalue > ALPHA


@pytest.mark.parametrize("clip_norm", [1.0, 1.7])
def test_analyze_gauss_noise_is_symmetric_with_the_calibrated_sigma(clip_norm):
    X = unit_rows(30, 8, seed=0, norm=clip_norm * 0.9)
    releases = [analyze_gauss_release(X, 0.8, 1e-5, clip_norm) for _ in range(250)]
    sigma = calibrate_gaussian(1, 0.8, 1e-5).noise_multiplier * math.sqrt(2) * clip_norm**2
    assert releases[0].privacy["sigma"] == pytest.approx(sigma)
    assert releases[0].privacy["sensitivity"] == pytest.approx(math.sqrt(2) * clip_norm**2)
    assert releases[0].privacy["epsilon_achieved"] <= 0.8 * (1 + 1e-6)
    assert_gaussian_with_sigma(noise_entries(releases, X.T @ X), sigma)


def test_analyze_gauss_paper_accounting_is_the_classic_formula():
    X = unit_rows(20, 5, seed=1)
    release = analyze_gauss_release(X, 0.5, 1e-5, accounting="paper")
    classic = math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5 * math.sqrt(2)
    assert release.privacy["sigma"] == pytest.approx(classic)
    with pytest.raises(ConfigurationError, match="epsilon < 1"):
        analyze_gauss_release(X, 2.0, 1e-5, accounting="paper")


@pytest.mark.parametrize("clip_norm", [1.0, 2.0])
def test_mod_sulq_noise_matches_the_papers_beta(clip_norm):
    n, d, alpha, delta = 40, 6, 0.7, 0.05
    X = unit_rows(n, d, seed=2, norm=clip_norm * 0.9)
    # Paper 001, Alg. 1, transcribed independently of the implementation.
    beta = (d + 1) / (n * alpha) * math.sqrt(
        2 * math.log((d**2 + d) / (delta * 2 * math.sqrt(2 * math.pi)))
    ) + 1 / (math.sqrt(alpha) * n)
    assert mod_sulq_beta(d, n, alpha, delta) == pytest.approx(beta, rel=1e-12)
    releases = [mod_sulq_release(X, alpha, delta, clip_norm) for _ in range(250)]
    privacy = releases[0].privacy
    assert privacy["beta"] == pytest.approx(beta) and privacy["epsilon"] == alpha
    assert_gaussian_with_sigma(noise_entries(releases, X.T @ X / n), beta * clip_norm**2)


def test_mod_sulq_beta_is_never_looser_than_the_analytic_gaussian():
    # The paper's beta, seen as a Gaussian mechanism on the upper triangle of A (L2
    # sensitivity sqrt(2)/n), must not give more than alpha at its delta.
    for d in (1, 10, 100):
        for alpha in (0.1, 1.0, 10.0, 100.0):
            for delta in (1e-6, 0.05):
                z = mod_sulq_beta(d, 1000, alpha, delta) * 1000 / math.sqrt(2)
                assert pld_epsilon((z,), delta) <= alpha
    with pytest.raises(ConfigurationError, match="undefined"):
        mod_sulq_beta(1, 100, 1.0, 0.5)
    with pytest.raises(ConfigurationError, match="epsilon"):
        mod_sulq_beta(5, 100, float("inf"), 0.1)


def triangle_gap(x: np.ndarray, y: np.ndarray) -> float:
    """L2 norm of the upper triangle (diagonal included) of x x^T - y y^T."""
    return float(np.linalg.norm(upper(np.outer(x, x) - np.outer(y, y))))


@pytest.mark.parametrize("d", [2, 3, 5])
def test_adversarial_search_never_exceeds_the_analyze_gauss_sensitivity(d):
    C = 1.3
    bound = upper_triangle_sensitivity(C)
    rng = np.random.default_rng(d)
    # Maximise the gap under ||x||, ||y|| <= C with a constrained optimiser (SLSQP).
    norms = NonlinearConstraint(lambda v: [v[:d] @ v[:d], v[d:] @ v[d:]], 0.0, C**2)
    worst = 0.0
    for _ in range(30):
        start = rng.standard_normal(2 * d)
        start *= C / np.linalg.norm(start) * 1.4
        res = minimize(lambda v: -triangle_gap(v[:d], v[d:]), start, method="SLSQP",
                       constraints=[norms], options={"maxiter": 500})
        v = res.x
        # Any tiny constraint violation is removed before the gap is measured.
        x = v[:d] * min(1.0, C / np.linalg.norm(v[:d]))
        y = v[d:] * min(1.0, C / np.linalg.norm(v[d:]))
        worst = max(worst, triangle_gap(x, y))
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.98 * bound  # the search is strong enough to find the supremum


def test_replacing_one_record_moves_the_released_triangle_by_at_most_the_bound():
    rng = np.random.default_rng(3)
    C, n, d = 1.0, 25, 6
    bound = upper_triangle_sensitivity(C)
    for _ in range(200):
        X = unit_rows(n, d, seed=int(rng.integers(1 << 30)), norm=C)
        Y = X.copy()
        y = rng.standard_normal(d)
        Y[rng.integers(n)] = y / np.linalg.norm(y) * C * rng.uniform(0, 1)
        assert np.linalg.norm(upper(X.T @ X - Y.T @ Y)) <= bound * (1 + 1e-12)


@pytest.fixture(scope="module")
def spiked():
    model = SparseSpikedModel(dim=30, k=3, sparsity=6, seed=5)
    return model, model.sample(20_000)


def test_pooled_and_local_baselines(spiked):
    model, X = spiked
    sites = [X[:5000], X[5000:]]
    pooled = run_pooled_pca(pool_sites(sites), 3)
    assert isinstance(pooled, PCAResult) and pooled.privacy["trust_model"] == "none"
    assert subspace_distance(pooled.basis, top_eigenvectors(X.T @ X, 3)) < 1e-6
    eigenvalues = np.linalg.eigvalsh(X.T @ X / len(X))[::-1][:3]
    np.testing.assert_allclose(pooled.history[0]["eigenvalues"], eigenvalues, rtol=1e-10)
    local = run_local_pca(sites, 3, site=0)
    A0 = sites[0].T @ sites[0]
    assert subspace_distance(local.basis, top_eigenvectors(A0, 3)) < 1e-6
    assert local.config["samples"] == 5000 and local.algorithm == "local-pca"
    truth = model.truth
    assert subspace_distance(pooled.basis, truth) < subspace_distance(local.basis, truth)
    with pytest.raises(ConfigurationError, match="site must be"):
        run_local_pca(sites, 3, site=2)
    with pytest.raises(ConfigurationError, match="same number of features"):
        pool_sites([X[:5], X[:5, :4]])


def test_each_private_method_recovers_the_planted_subspace_with_a_large_budget(spiked):
    model, X = spiked
    floor = subspace_distance(run_pooled_pca(X, 3).basis, model.truth)  # sampling error
    results = [
        run_analyze_gauss(X, 3, epsilon=20.0, delta=1e-5, seed=1),
        run_mod_sulq(X, 3, epsilon=2000.0, delta=1e-5, seed=1),
        run_ppca(X, 3, epsilon=200.0, burn_in=50, seed=1),
        run_ppca(X, 1, epsilon=200.0, seed=1),
    ]
    for r in results[:3]:
        assert r.basis.shape == (30, 3)
        np.testing.assert_allclose(r.basis.T @ r.basis, np.eye(3), atol=1e-10)
        assert subspace_distance(r.basis, model.truth) < floor + 0.1, r.algorithm
    # k = 1: the leading direction lies in the planted subspace.
    assert np.linalg.norm(model.truth.T @ results[3].basis) > 0.99
    # ... and a small budget does not (the noise is real).
    weak = run_analyze_gauss(X, 3, epsilon=0.01, delta=1e-5, seed=1)
    assert subspace_distance(weak.basis, model.truth) > floor + 0.3


def test_ppca_privacy_record_and_exactness(spiked):
    _, X = spiked
    one = run_ppca_chain(X[:2000], 1, epsilon=2.0, clip_norm=1.0, seed=3)
    many = run_ppca_chain(X[:2000], 2, epsilon=2.0, burn_in=7, seed=3)
    assert one.result.privacy["exact_sampling"] is True
    assert one.result.privacy["delta"] == 0.0 and one.result.config["burn_in"] == 0
    assert many.result.privacy["exact_sampling"] is False
    assert "limit of exact sampling" in many.result.privacy["caveat"]
    assert many.result.privacy["sensitivity"] == 1.0 and many.result.config["burn_in"] == 7
    assert many.diagnostics.energy.shape == (8,)
    # The data-derived diagnostics are not part of the released result.
    assert "energy" not in str(many.result.to_dict())
    again = run_ppca_chain(X[:2000], 2, epsilon=2.0, burn_in=7, seed=3)
    np.testing.assert_array_equal(many.result.basis, again.result.basis)


def test_ppca_hands_its_chain_diagnostics_to_the_curator_and_the_old_name_warns(spiked):
    _, X = spiked
    found = []
    result = run_ppca(X[:2000], 2, epsilon=2.0, burn_in=7, seed=3, diagnostics=found.append)
    assert len(found) == 1 and found[0].energy.shape == (8,)
    assert "energy" not in str(result.to_dict())
    with pytest.warns(DeprecationWarning, match="run_ppca_chain is deprecated"):
        from fedpca.algorithms.ppca import run_ppca_chain as old
    run = old(X[:2000], 2, epsilon=2.0, burn_in=7, seed=3)
    np.testing.assert_array_equal(run.result.basis, result.basis)
    np.testing.assert_array_equal(run.diagnostics.energy, found[0].energy)


def test_ppca_samples_the_bingham_of_the_clipped_data_scaled_by_alpha_over_2c2():
    # With C = 2 and rows of norm 2, B = alpha / (2 C^2) X^T X: compare one exact k=1
    # draw's statistic with the vector sampler's on the same B (two-sample KS over seeds).
    X = unit_rows(50, 3, seed=9, norm=2.0)
    B = 3.0 / (2 * 4.0) * X.T @ X
    lead = top_eigenvectors(B, 1)[:, 0]
    ppca = [abs(run_ppca(X, 1, epsilon=3.0, clip_norm=2.0, seed=s).basis[:, 0] @ lead)
            for s in range(300)]
    direct = np.abs(sample_vector_bingham(B, size=3000, rng=np.random.default_rng(0)) @ lead)
    assert stats.ks_2samp(ppca, direct).pvalue > ALPHA


def test_central_methods_reject_bad_input_with_clear_errors(spiked):
    _, X = spiked
    with pytest.raises(ConfigurationError, match="exceed the 30 features"):
        run_analyze_gauss(X, 31, 1.0, 1e-5)
    with pytest.raises(ConfigurationError, match="epsilon"):
        run_analyze_gauss(X, 2, float("nan"), 1e-5)
    with pytest.raises(ConfigurationError, match="delta"):
        run_mod_sulq(X, 2, 1.0, 0.0)
    with pytest.raises(ConfigurationError, match="epsilon"):
        run_ppca(X, 2, float("inf"))
    bad = X[:10].copy()
    bad[3, 2] = np.nan
    with pytest.raises(InvalidDataError, match="NaN"):
        run_mod_sulq(bad, 2, 1.0, 1e-5)
    with pytest.raises(InvalidDataError, match="2-D"):
        run_pooled_pca(X[0], 1)
    with pytest.raises(ConfigurationError, match="clip_norm"):
        run_analyze_gauss(X, 2, 1.0, 1e-5, clip_norm=0.0)
