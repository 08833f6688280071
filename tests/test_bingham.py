"""The Bingham samplers draw from the right distributions (statistical tests, stated levels).

Reference values come from the density itself, integrated numerically: on the sphere of
``R^3`` the marginal of ``w = v_i^2`` under ``exp(sum_j lambda_j v_j^2)`` is

    f(w) ~ exp(lambda_i w) w^(-1/2) exp((1-w)(lambda_j + lambda_l)/2)
           * I_0((1-w)(lambda_j - lambda_l)/2)

(the rest of ``v`` is uniform on a circle of radius ``sqrt(1-w)``), and for the Watson case
``lambda = (kappa, 0, ..., 0)`` on the sphere of ``R^d`` it is
``exp(kappa w) w^(-1/2) (1-w)^((d-3)/2)``.
"""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from fedpca.errors import ConfigurationError, InvalidDataError
from fedpca.linalg import bingham
from fedpca.linalg.bingham import _eigen, envelope_parameter, sample_vector_bingham
from fedpca.linalg.compressed_eigen import count_above as _count_above
from fedpca.linalg.compressed_eigen import lanczos_pair as _lanczos_pair
from fedpca.linalg.matrix_bingham import integrated_autocorrelation_time, sample_matrix_bingham
from fedpca.linalg.subspace import thin_qr

#: Per-test false-alarm probability of every statistical check in this file.
ALPHA = 1e-4
#: Batches for the standard error of a chain's mean (batch means).
BATCHES = 50


def rotation(d: int, seed: int) -> np.ndarray:
    return thin_qr(np.random.default_rng(seed).standard_normal((d, d)))


def sphere3_log_marginal(lam: np.ndarray, i: int):
    """log f(w) (unnormalised) of w = v_i^2 on the sphere of R^3, lambda = lam."""
    j, l = [a for a in range(3) if a != i]
    half_sum, half_diff = (lam[j] + lam[l]) / 2, abs(lam[j] - lam[l]) / 2

    def log_f(w):
        rest = 1.0 - w
        # i0e(x) = exp(-x) I0(x): keeps exponents finite for large lambdas
        log_i0 = half_diff * rest + np.log(special.i0e(half_diff * rest))
        return lam[i] * w + half_sum * rest + log_i0

    return log_f


def watson_log_marginal(kappa: float, d: int):
    return lambda w: kappa * w + (d - 3) / 2 * np.log1p(-w)


class Marginal:
    """CDF and mean of w in [0, 1] with density ~ exp(log_f(w)) w^(-1/2), by integration.

    Substituting w = u^2 removes the w^(-1/2) singularity: the density of u on [0, 1] is
    ~ 2 exp(log_f(u^2)); the CDF comes from scipy.integrate.cumulative_trapezoid on a fine
    grid (error ~1e-10, far below what any test here can resolve).
    """

    def __init__(self, log_f, points: int = 200_001):
        u = np.linspace(0.0, 1.0, points)
        with np.errstate(divide="ignore"):
            log_density = log_f(u**2)
        log_density[~np.isfinite(log_density)] = -np.inf
        density = np.exp(log_density - log_density[np.isfinite(log_density)].max())
        cdf = integrate.cumulative_trapezoid(density, u, initial=0.0)
        self.u, self.cdf = u, cdf / cdf[-1]
        self.mean = integrate.trapezoid(density * u**2, u) / cdf[-1]

    def __call__(self, w: np.ndarray) -> np.ndarray:
        return np.interp(np.sqrt(np.clip(w, 0.0, 1.0)), self.u, self.cdf)


# ---------------------------------------------------------------------------------------
# Exact vector sampler (k = 1)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [(5.0, 1.0, -3.0), (60.0, 45.0, 0.0), (0.0, -4.0, -30.0)])
def test_vector_draws_match_the_density_on_the_sphere_of_r3(lam):
    lam = np.asarray(lam)
    R = rotation(3, 7)
    B = R @ np.diag(lam) @ R.T
    v = sample_vector_bingham(B, size=4000, rng=np.random.default_rng(1))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-12)
    w = (v @ R) ** 2  # squared coordinates in B's eigenbasis
    for i in range(3):
        marginal = Marginal(sphere3_log_marginal(lam, i))
        # Bonferroni over the three coordinates: ALPHA for the whole test.
        assert stats.kstest(w[:, i], marginal).pvalue > ALPHA / 3


@pytest.mark.parametrize("kappa", [40.0, -40.0, 2.0])
def test_vector_draws_match_the_watson_density_in_ten_dimensions(kappa):
    d = 10
    R = rotation(d, 3)
    B = kappa * np.outer(R[:, 0], R[:, 0])
    v = sample_vector_bingham(B, size=4000, rng=np.random.default_rng(2))
    w = (v @ R[:, 0]) ** 2
    assert stats.kstest(w, Marginal(watson_log_marginal(kappa, d))).pvalue > ALPHA


def test_conditional_draws_match_the_density_on_the_complement():
    # d = 5, W with 2 columns: the draws live on a 2-sphere whose Bingham matrix is the
    # compression N^T B N; in its eigenbasis the marginals are the R^3 ones above.
    d = 5
    rng = np.random.default_rng(4)
    lam = np.array([30.0, 22.0, 10.0, 3.0, -5.0])
    R = rotation(d, 11)
    B = R @ np.diag(lam) @ R.T
    W = thin_qr(rng.standard_normal((d, 2)) + 2 * R[:, :2])
    v = sample_vector_bingham(B, size=4000, rng=rng, orthogonal_to=W)
    assert np.abs(v @ W).max() < 1e-12
    N = np.linalg.svd(np.eye(d) - W @ W.T)[0][:, :3]
    theta, U = np.linalg.eigh(N.T @ B @ N)
    w = (v @ N @ U) ** 2
    for i in range(3):
        marginal = Marginal(sphere3_log_marginal(theta, i))
        assert stats.kstest(w[:, i], marginal).pvalue > ALPHA / 3


# ---------------------------------------------------------------------------------------
# The two envelopes (ACG and polar chart), forced one at a time
# ---------------------------------------------------------------------------------------


def force_envelope(monkeypatch, kind: str) -> None:
    """Make the sampler use one envelope family wherever it is valid: "acg" never tries the
    chart; "chart" accepts it whatever its expected acceptance rate or cap share;
    "chart-narrow" also fixes its polar region to ``||w||^2 <= 0.3``, so that the uniform
    cap component carries much of the mass."""
    if kind == "acg":
        monkeypatch.setattr(bingham, "LOG_MIN_CHART_EFFICIENCY", math.inf)
    else:
        monkeypatch.setattr(bingham, "LOG_MIN_CHART_EFFICIENCY", -math.inf)
        monkeypatch.setattr(bingham, "MAX_CAP_SHARE", 1.0)
    if kind == "chart-narrow":
        monkeypatch.setattr(bingham, "RHO_MIN", 0.3)
        monkeypatch.setattr(bingham, "RHO_MAX", 0.3)


def conditional_draws(B: np.ndarray, W: np.ndarray, size: int, rng):
    """Exact draws orthogonal to W through the sampler's own envelope choice, and that
    envelope's kind."""
    lam, vecs = _eigen(B)
    sampler = bingham._ConditionalSampler(lam, W.shape[1])
    envelope = sampler.envelope(vecs.T @ W)
    return (vecs @ sampler.draw(envelope, rng, size)).T, envelope.kind, sampler


@pytest.mark.parametrize("kind", ["acg", "chart", "chart-narrow"])
@pytest.mark.parametrize("lam", [(5.0, 1.0, -3.0), (60.0, 45.0, 0.0), (0.0, -4.0, -30.0)])
def test_each_envelope_draws_from_the_density_on_the_sphere_of_r3(monkeypatch, kind, lam):
    force_envelope(monkeypatch, kind)
    lam = np.asarray(lam)
    R = rotation(3, 17)
    v, used, sampler = conditional_draws(R @ np.diag(lam) @ R.T, np.zeros((3, 0)), 3000,
                                         np.random.default_rng(21))
    assert used == kind.split("-")[0]
    w = (v @ R) ** 2
    for i in range(3):
        assert stats.kstest(w[:, i], Marginal(sphere3_log_marginal(lam, i))).pvalue > ALPHA / 3


@pytest.mark.parametrize("kind", ["acg", "chart"])
def test_each_envelope_draws_from_the_conditional_on_the_complement(monkeypatch, kind):
    force_envelope(monkeypatch, kind)
    d = 6
    rng = np.random.default_rng(22)
    lam = np.array([80.0, 70.0, 60.0, 20.0, 5.0, 0.0])
    R = rotation(d, 23)
    B = R @ np.diag(lam) @ R.T
    W = thin_qr(R[:, :3] + 0.3 * rng.standard_normal((d, 3)))
    v, used, _ = conditional_draws(B, W, 3000, rng)
    assert used == kind
    assert np.abs(v @ W).max() < 1e-12
    N = np.linalg.svd(np.eye(d) - W @ W.T)[0][:, : d - 3]
    theta, U = np.linalg.eigh(N.T @ B @ N)
    w = (v @ N @ U) ** 2
    for i in range(3):
        assert stats.kstest(w[:, i], Marginal(sphere3_log_marginal(theta, i))).pvalue > ALPHA / 3


def test_envelopes_bound_the_density_everywhere(monkeypatch):
    # Rejection sampling is exact only if the density never exceeds its envelope: every log
    # acceptance ratio must be <= 0. Adversarial sweep over dimensions, concentrations,
    # constraint sizes and frames near and far from B's leading eigenvectors.
    rng = np.random.default_rng(24)
    worst = {"acg": -np.inf, "chart": -np.inf}
    for d in (4, 12, 40):
        for scale in (0.5, 5.0, 50.0, 2000.0):
            for m in (0, 1, 3):
                lam = np.sort(rng.standard_normal(d) ** 2 * scale)[::-1]
                lam[: m + 1] += scale  # a leading cluster, as in a concentrated chain
                near = np.eye(d)[:, :m] + rng.standard_normal((d, m)) * rng.choice([0.05, 1.0])
                W = thin_qr(near) if m else np.zeros((d, 0))
                for kind in ("acg", "chart"):
                    force_envelope(monkeypatch, kind)
                    sampler = bingham._ConditionalSampler(lam, m)
                    # the second envelope starts from the first one's pole (Lanczos step)
                    moved = thin_qr(W + 0.05 * rng.standard_normal((d, m))) if m else W
                    for frame in (W, moved):
                        envelope = sampler.envelope(frame)
                        if envelope.kind != kind:
                            continue  # the chart is not valid here (e.g. a degenerate top)
                        _, log_ratio = envelope.propose(rng, 2000)
                        worst[kind] = max(worst[kind], float(log_ratio.max()))
    assert worst["acg"] <= 1e-9 and worst["chart"] <= 1e-9
    assert worst["acg"] > -5 and worst["chart"] > -5  # both families were exercised


def test_chart_hands_over_to_the_acg_envelope_and_stays_exact(monkeypatch):
    force_envelope(monkeypatch, "chart")
    monkeypatch.setattr(bingham, "CHART_MAX_PROPOSALS", 1)
    lam = np.array([5.0, 1.0, -3.0])
    R = rotation(3, 25)
    v, used, sampler = conditional_draws(R @ np.diag(lam) @ R.T, np.zeros((3, 0)), 3000,
                                         np.random.default_rng(26))
    assert used == "chart"
    assert sampler.counts["chart"][1] > 0 and sampler.counts["acg"][1] > 0
    w = (v @ R) ** 2
    for i in range(3):
        assert stats.kstest(w[:, i], Marginal(sphere3_log_marginal(lam, i))).pvalue > ALPHA / 3


def test_lanczos_step_refines_a_pole_and_bounds_the_top_eigenvalue():
    rng = np.random.default_rng(27)
    d, m = 30, 3
    lam = np.sort(rng.standard_normal(d) ** 2 * 50)[::-1]
    lam[: m + 1] += 500
    W = thin_qr(np.eye(d)[:, 1 : m + 1] + 0.1 * rng.standard_normal((d, m)))
    N = np.linalg.svd(np.eye(d) - W @ W.T)[0][:, : d - m]
    theta, U = np.linalg.eigh(N.T @ np.diag(lam) @ N)
    top = N @ U[:, -1]

    def residual(p):
        r = lam * p - (p @ (lam * p)) * p
        return np.linalg.norm(r - W @ (W.T @ r))

    assert _lanczos_pair(lam, W, W[:, 0]) is None  # nothing of it outside W
    start = top + 0.05 * rng.standard_normal(d)
    start /= np.linalg.norm(start)
    value, pole = _lanczos_pair(lam, W, start)
    assert value <= theta[-1] + 1e-9
    assert np.linalg.norm(pole) == pytest.approx(1.0)
    assert np.abs(W.T @ pole).max() < 1e-12
    assert value == pytest.approx(pole @ (lam * pole), rel=1e-12)
    projected = start - W @ (W.T @ start)
    assert residual(pole) < 0.5 * residual(projected / np.linalg.norm(projected))


def test_gibbs_with_the_chart_matches_the_acg_chain(monkeypatch):
    # A concentrated d = 30, k = 3 matrix Bingham (the regime the chart is for): the chains
    # built from chart draws and from ACG draws estimate the same long-run averages.
    d, k = 30, 3
    lam = np.concatenate([[150.0, 140.0, 130.0], np.linspace(20.0, 0.0, d - k)])
    R = rotation(d, 28)
    B = R @ np.diag(lam) @ R.T
    means, ses = [], []
    for kind in ("chart", "acg"):
        force_envelope(monkeypatch, kind)
        proposals = []
        for name in ("_ACGEnvelope", "_ChartEnvelope"):
            cls = getattr(bingham, name)
            original = cls.propose
            monkeypatch.setattr(
                cls, "propose",
                lambda self, rng, count, original=original: proposals.append(self.kind)
                or original(self, rng, count))
        chain = sample_matrix_bingham(B, k, n_samples=3000, burn_in=20,
                                      rng=np.random.default_rng(29))
        assert proposals.count(kind) > 0.9 * len(proposals)
        mean, se = batch_means(projector_diagonals(chain, R))
        means.append(mean)
        ses.append(se)
    assert np.all(np.abs(means[0] - means[1]) <= critical_value(d) * np.hypot(*ses))


def test_eigenvalue_count_on_the_complement_matches_a_dense_eigensolver():
    # The count behind the sampler's shift (inertia of the bordered matrix), against eigh
    # of the explicitly compressed matrix, including points at eigenvalues of B.
    rng = np.random.default_rng(5)
    d = 9
    for m in (1, 2, 4):
        lam = np.sort(rng.standard_normal(d) * 5)[::-1]
        W = thin_qr(rng.standard_normal((d, m)))
        N = np.linalg.svd(np.eye(d) - W @ W.T)[0][:, : d - m]
        theta = np.linalg.eigvalsh(N.T @ np.diag(lam) @ N)
        points = np.concatenate([np.linspace(lam[-1] - 1, lam[0] + 1, 57), lam[:2]])
        counts = _count_above(lam, W, points)
        expected = (theta[None, :] > points[:57, None]).sum(axis=1)
        np.testing.assert_array_equal(counts[:57], expected)
        np.testing.assert_array_equal(counts[57:], -1)


def test_envelope_parameter_solves_kent_equation():
    assert envelope_parameter(np.zeros(7)) == pytest.approx(7.0)
    for gaps in (np.array([0.0, 1e4, 2e4]), np.array([0.0, 0.3, 2.0, 5.0, 5.0])):
        b = envelope_parameter(gaps, start=2.5)
        assert 1.0 <= b <= gaps.size
        assert np.sum(1.0 / (b + 2 * gaps)) == pytest.approx(1.0, rel=1e-6)


def test_vector_sampler_is_reproducible_and_checks_its_input():
    B = np.diag([3.0, 1.0, 0.0, 0.0])
    a = sample_vector_bingham(B, size=5, rng=np.random.default_rng(0))
    b = sample_vector_bingham(B, size=5, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(a, b)
    assert sample_vector_bingham(B, rng=np.random.default_rng(0)).shape == (4,)
    with pytest.raises(InvalidDataError, match="symmetric"):
        sample_vector_bingham(np.triu(np.ones((3, 3))))
    with pytest.raises(InvalidDataError, match="NaN"):
        sample_vector_bingham(np.diag([1.0, np.nan]))
    with pytest.raises(InvalidDataError, match="square"):
        sample_vector_bingham(np.ones((2, 3)))
    with pytest.raises(ConfigurationError, match="orthonormal"):
        sample_vector_bingham(B, orthogonal_to=np.ones((4, 1)))
    with pytest.raises(ConfigurationError, match="empty"):
        sample_vector_bingham(B, orthogonal_to=np.eye(4))


# ---------------------------------------------------------------------------------------
# Gibbs sampler (matrix Bingham)
# ---------------------------------------------------------------------------------------


def batch_means(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error of a correlated chain (rows = sweeps) by batch means."""
    usable = values[: values.shape[0] // BATCHES * BATCHES]
    means = usable.reshape(BATCHES, -1, *values.shape[1:]).mean(axis=1)
    return means.mean(axis=0), means.std(axis=0, ddof=1) / np.sqrt(BATCHES)


def critical_value(coordinates: int) -> float:
    """Two-sided Student-t quantile (BATCHES - 1 dof) at level ALPHA, Bonferroni over
    ``coordinates`` simultaneous comparisons."""
    return stats.t.isf(ALPHA / (2 * coordinates), BATCHES - 1)


def projector_diagonals(chain, R: np.ndarray) -> np.ndarray:
    """diag(R^T V V^T R) for every kept frame V (rows)."""
    return np.einsum("sik->si", (np.swapaxes(R, 0, 1) @ chain.samples) ** 2)


def test_gibbs_with_one_column_matches_the_integrated_density():
    lam = np.array([4.0, 1.0, -2.0])
    R = rotation(3, 5)
    B = R @ np.diag(lam) @ R.T
    chain = sample_matrix_bingham(B, 1, n_samples=6000, burn_in=0, rng=np.random.default_rng(6))
    diag = projector_diagonals(chain, R)
    mean, se = batch_means(diag)
    exact = [Marginal(sphere3_log_marginal(lam, i)).mean for i in range(3)]
    assert np.all(np.abs(mean - exact) <= critical_value(3) * se)


def test_gibbs_two_frames_in_r3_match_the_complementary_vector_bingham():
    # For k = 2 in R^3, V V^T = I - u u^T with u the unit normal, and
    # tr(V^T B V) = tr(B) - u^T B u: u is vector Bingham with matrix -B.
    lam = np.array([3.0, 0.5, -1.5])
    R = rotation(3, 8)
    B = R @ np.diag(lam) @ R.T
    chain = sample_matrix_bingham(B, 2, n_samples=8000, burn_in=10, rng=np.random.default_rng(9))
    gram = np.swapaxes(chain.samples, 1, 2) @ chain.samples
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(2), gram.shape), atol=1e-12)
    mean, se = batch_means(projector_diagonals(chain, R))
    exact = [1.0 - Marginal(sphere3_log_marginal(-lam, i)).mean for i in range(3)]
    assert np.all(np.abs(mean - exact) <= critical_value(3) * se)


def haar_rejection_projector_diagonals(lam: np.ndarray, k: int, draws: int, rng) -> np.ndarray:
    """Exact matrix Bingham draws with diagonal B by brute force: uniform (Haar) frames
    accepted with probability exp(tr(V^T B V) - sum of the k largest lambdas)."""
    d = lam.size
    Q, R = np.linalg.qr(rng.standard_normal((draws, d, k)))
    V = Q * np.sign(np.diagonal(R, axis1=1, axis2=2))[:, None, :]
    rows = np.einsum("sik,sik->si", V, V)  # diag(V V^T)
    log_accept = rows @ lam - np.sort(lam)[-k:].sum()
    return rows[np.log(rng.random(draws)) < log_accept]


def test_gibbs_three_frames_in_r5_match_brute_force_rejection():
    lam = np.array([1.5, 1.0, 0.4, 0.0, -1.2])
    rng = np.random.default_rng(12)
    exact = haar_rejection_projector_diagonals(lam, 3, 300_000, rng)
    chain = sample_matrix_bingham(
        np.diag(lam), 3, n_samples=6000, burn_in=10, rng=np.random.default_rng(13)
    )
    mean, se = batch_means(projector_diagonals(chain, np.eye(5)))
    exact_se = exact.std(axis=0, ddof=1) / np.sqrt(len(exact))
    # The brute-force standard error is far smaller than the chain's: the t quantile of the
    # chain's batch means is (slightly) conservative for the difference.
    assert np.all(np.abs(mean - exact.mean(axis=0)) <= critical_value(5) * np.hypot(se, exact_se))
    assert mean.sum() == pytest.approx(3.0)


def test_gibbs_diagnostics_and_reproducibility():
    B = np.diag([50.0, 40.0, 5.0, 1.0, 0.0, 0.0])
    a, b = (
        sample_matrix_bingham(B, 2, n_samples=30, burn_in=5, thin=2,
                              rng=np.random.default_rng(3))
        for _ in range(2)
    )
    np.testing.assert_array_equal(a.samples, b.samples)
    diag = a.diagnostics
    assert a.samples.shape == (30, 6, 2)
    assert diag.energy.shape == (5 + 29 * 2 + 1,)
    assert diag.window_start == 5 and diag.burn_in == 5 and diag.thin == 2
    np.testing.assert_allclose(
        diag.energy[-1], np.trace(a.samples[-1].T @ B @ a.samples[-1]), rtol=1e-12
    )
    assert diag.proposals_per_draw >= 1.0
    assert diag.effective_sample_size == pytest.approx(
        (diag.energy.size - 5) / diag.autocorrelation_time
    )


def test_gibbs_checks_its_parameters():
    B = np.eye(4)
    with pytest.raises(ConfigurationError, match="exceeds"):
        sample_matrix_bingham(B, 5)
    with pytest.raises(ConfigurationError, match="burn_in"):
        sample_matrix_bingham(B, 2, burn_in=-1)
    with pytest.raises(ConfigurationError, match="orthonormal"):
        sample_matrix_bingham(B, 2, initial=np.ones((4, 2)))
    with pytest.raises(ConfigurationError, match="columns"):
        sample_matrix_bingham(B, 2, initial=np.eye(4)[:, :3])


def test_autocorrelation_time_of_an_ar1_chain():
    # AR(1) with coefficient rho has integrated autocorrelation time (1 + rho) / (1 - rho).
    rng = np.random.default_rng(0)
    for rho in (0.0, 0.6):
        x = np.empty(40_000)
        x[0] = 0.0
        noise = rng.standard_normal(x.size)
        for t in range(1, x.size):
            x[t] = rho * x[t - 1] + noise[t]
        tau = integrated_autocorrelation_time(x)
        assert tau == pytest.approx((1 + rho) / (1 - rho), rel=0.15)
    assert np.isnan(integrated_autocorrelation_time(np.ones(50)))
    assert np.isnan(integrated_autocorrelation_time(np.arange(3.0)))
