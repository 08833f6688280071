"""Exact noise at a site: the fast exact discrete Gaussian sampler (its law, its exact path, the
one floating-point fact it trusts), the grid mechanism (grid points, calibrated variance, the
rounding's sensitivity bound under adversarial search) and what the ledger charges."""

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from chi_square import ALPHA, chi_square_p
from scipy import stats

from fedpca.algorithms.dpdis_pca import VARIANT_FULL, DPdisPCAPolicy, DPdisPCASite
from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy
from fedpca.algorithms.ldp_pca import LDPCovarianceSite, LDPPolicy
from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.linalg.subspace import thin_qr
from fedpca.dp import discrete_gaussian_fast as fast
from fedpca.dp.discrete_gaussian import discrete_gaussian_pmf
from fedpca.dp.ddg_accounting import ddg_gaussian_multiplier, ddg_pld_slack, ddg_rdp
from fedpca.dp.exact_noise import (
    GRID_INFLATION,
    ExactGaussian,
    float_error,
    grid_step,
    rounded_sensitivity,
)
from fedpca.dp.accountant import composed_epsilon, gaussian_view, release_rdp
from fedpca.dp.mechanisms import power_step_sensitivity

# --- the sampler ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma", [1, 2, 3, 7, 40])
def test_draws_follow_the_exact_pmf(sigma):
    draws = fast.discrete_gaussian_scale(sigma, 400_000, np.random.default_rng(sigma))
    assert draws.dtype == np.int64
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(sigma**2, y)) > ALPHA


def test_a_wrong_scale_is_detected_by_the_same_test():
    draws = fast.discrete_gaussian_scale(10, 400_000, np.random.default_rng(5))
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(10.5**2, y)) < ALPHA


@pytest.mark.parametrize("sigma", [1024, 2**20, 2**26])
def test_large_scales_have_the_calibrated_variance(sigma):
    n = 400_000
    draws = fast.discrete_gaussian_scale(sigma, n, np.random.default_rng(sigma))
    # its variance is sigma^2 (1 - O(exp(-2 pi^2 sigma^2))) by Poisson summation; the sample
    # variance of n near-Gaussian draws has relative sd sqrt(2 / n)
    assert draws.var() == pytest.approx(sigma**2, rel=5 * math.sqrt(2 / n))
    assert abs(draws.mean()) < 5 * sigma / math.sqrt(n)
    # a discrete Laplace proposal with t = sigma: symmetric, no excess at zero
    assert abs((draws > 0).mean() - (draws < 0).mean()) < 5 / math.sqrt(n)


def relative_errors(computed: np.ndarray, exact) -> float:
    """The largest ``|computed / exact - 1|``, ``exact`` a function of a Decimal."""
    decimal.getcontext().prec = 40
    return max(abs(Fraction(float(c)) / Fraction(exact(decimal.Decimal(float(a)))) - 1)
               for a, c in computed)


def test_numpys_log_and_exp_are_as_accurate_as_the_margins_assume():
    # the floating-point facts the sampler trusts, with room to spare: float64 log within
    # 2^-50 relative on (0, 1], float32 exp within 2^-20 on [-64, 0]
    rng = np.random.default_rng(0)
    u = np.concatenate([rng.random(3000), 1 - rng.random(500) * 1e-9, rng.random(500) * 1e-12])
    u = u[u > 0]
    assert relative_errors(zip(u, np.log(u)), lambda a: a.ln()) < 2.0**-51
    r = np.concatenate([rng.uniform(0, 64, 3000), rng.uniform(0, 1e-3, 500)]).astype(np.float32)
    exp32 = np.exp(-r)
    assert exp32.dtype == np.float32
    assert relative_errors(zip(r, exp32), lambda a: (-a).exp()) < 2.0**-21


def test_the_exact_bracket_contains_exp():
    for r in (Fraction(0), Fraction(1, 3), Fraction(37, 2), Fraction(10**6 + 1, 10**4)):
        lo, hi = fast._exp_bracket(r, 30)
        decimal.getcontext().prec = 80
        value = Fraction((-decimal.Decimal(r.numerator) / r.denominator).exp())
        assert lo <= value <= hi and hi - lo < value * Fraction(1, 10**20) * (3 + 2 * r)


def test_the_exact_path_decides_like_the_fast_one():
    rng = np.random.default_rng(1)
    # acceptance: U in [a, a+1) 2^-53 against exp(-r), far from and at the boundary
    r = Fraction(1, 2)
    decimal.getcontext().prec = 60
    boundary = int(decimal.Decimal(-0.5).exp() * 2**53)  # exp(-1/2) is in this interval
    assert fast._exact_below_exp(r, boundary - 10, rng)
    assert not fast._exact_below_exp(r, boundary + 10, rng)
    decided = [fast._exact_below_exp(r, boundary, rng) for _ in range(400)]
    assert 0 < sum(decided) < 400  # the boundary interval is split by further bits
    # magnitude: the k with exp(-(k+1)/sigma) < U <= exp(-k/sigma)
    sigma = 1000
    for u in (0.9, 0.3, 1e-5):
        k = fast._exact_magnitude(sigma, int(u * 2**53), rng)
        assert math.exp(-(k + 1) / sigma) < u <= math.exp(-k / sigma)
    # U in [0, 2^-53): decided by further bits, far in the tail
    assert fast._exact_magnitude(sigma, 0, rng) >= 36 * sigma


def test_the_exact_path_has_the_right_law_where_it_is_taken(monkeypatch):
    # force every decision through the exact path: the law must not change
    monkeypatch.setattr(fast, "ACCEPT_MARGIN", 1e20)
    monkeypatch.setattr(fast, "LOG_ERROR", 1.0)
    draws = fast.discrete_gaussian_scale(3, 6_000, np.random.default_rng(2))
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(9, y)) > ALPHA


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, 2**31])
def test_bad_scales_are_refused(bad):
    with pytest.raises(ConfigurationError, match="sigma"):
        fast.discrete_gaussian_scale(bad, 10, np.random.default_rng())


# --- the grid mechanism -----------------------------------------------------------------------

def worst_rounding_pair(steps: int, coordinates: int) -> tuple[np.ndarray, np.ndarray]:
    """Two vectors about ``steps sqrt(D)`` apart whose nearest roundings are ``(steps + 1)
    sqrt(D)`` apart: every coordinate of ``a`` just below a half-integer, of ``b`` just above
    the half-integer ``steps`` further (the bound is attained)."""
    a = np.full(coordinates, 0.5 - 1e-9)
    return a, a + steps + 2e-9


def rounding_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.rint(a) - np.rint(b)))


@pytest.mark.parametrize("coordinates", [1, 4, 30, 600])
def test_rounding_never_adds_more_than_sqrt_d_and_can_add_that_much(coordinates):
    for steps in (0, 1, 3):
        a, b = worst_rounding_pair(steps, coordinates)
        bound = rounded_sensitivity(float(np.linalg.norm(a - b)), 0.0, 1.0, coordinates)
        assert rounding_distance(a, b) == pytest.approx(bound, abs=1e-6)
    rng = np.random.default_rng(coordinates)
    for shift in (0.3, 1.0, 2.5, 17.0):
        bound = rounded_sensitivity(shift, 0.0, 1.0, coordinates)
        for _ in range(30):  # hill climbing from random pairs at distance <= shift
            a = rng.uniform(-5, 5, coordinates)
            step = rng.standard_normal(coordinates)
            b = a + shift * step / np.linalg.norm(step)
            best = rounding_distance(a, b)
            for _ in range(40):
                trial = b + rng.normal(0, 0.3, coordinates)
                trial = a + (trial - a) * min(1.0, shift / np.linalg.norm(trial - a))
                if rounding_distance(a, trial) >= best:
                    b, best = trial, rounding_distance(a, trial)
            assert best <= bound


def power_statistic(X: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return X.T @ (X @ Q)


@pytest.mark.parametrize("coarse", [1.0, 1 / 4, 1 / 64])
def test_the_rounded_power_step_stays_within_its_sensitivity_under_adversarial_records(coarse):
    # gamma much coarser than the sites' so that the rounding term dominates
    rng = np.random.default_rng(7)
    n, d, k, C = 20, 6, 2, 1.0
    sensitivity = power_step_sensitivity(C)
    gamma = 2.0 ** math.floor(math.log2(coarse * sensitivity))
    error = float_error(n * C**2 * math.sqrt(k), n + d)
    bound = rounded_sensitivity(sensitivity, error, gamma, d * k)
    worst = 0.0
    for _ in range(40):
        X = rng.standard_normal((n, d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / C)
        Q = thin_qr(rng.standard_normal((d, k)))
        replaced = X.copy()
        for _ in range(30):  # climb: the replacement record that moves the rounding most
            candidate = replaced[0] + rng.normal(0, 0.3, d)
            candidate *= C / max(C, np.linalg.norm(candidate))
            trial = replaced.copy()
            trial[0] = candidate
            moved = np.linalg.norm(np.rint(power_statistic(trial, Q) / gamma)
                                   - np.rint(power_statistic(X, Q) / gamma))
            if moved >= worst:
                worst, replaced = moved, trial
            assert moved <= bound
    assert worst > 0.5 * bound  # the search got close


def test_the_grid_is_public_and_adds_at_most_a_thousandth():
    sensitivity = power_step_sensitivity(1.0)
    for coordinates in (600, 200_000, 6830 * 6831 // 2):
        gamma = grid_step(sensitivity, coordinates)
        assert math.log2(gamma).is_integer()
        assert gamma * math.sqrt(coordinates) <= GRID_INFLATION * sensitivity
        assert 2 * gamma * math.sqrt(coordinates) > GRID_INFLATION * sensitivity
        noise = ExactGaussian.for_release(3.4 * sensitivity, sensitivity, coordinates, 0.0)
        assert noise.inflation <= GRID_INFLATION


def test_released_values_are_grid_points_with_the_calibrated_variance():
    rng = np.random.default_rng(11)
    sensitivity, sigma, coordinates = power_step_sensitivity(1.0), 2.0, 50_000
    noise = ExactGaussian.for_release(sigma, sensitivity, coordinates, 1e-9)
    values = rng.uniform(-3, 3, coordinates)
    released = noise.noisy(values, rng)
    steps = released / noise.gamma
    assert np.array_equal(steps, np.round(steps))  # exactly gamma * integer
    rounded = np.rint(values / noise.gamma) * noise.gamma
    variance = (released - rounded).var()
    expected = (noise.sigma * noise.gamma) ** 2
    # sigma in grid steps is the continuous sigma grown by the rounding's inflation (< 0.1%)
    assert expected == pytest.approx(sigma**2, rel=3e-3)
    # chi-square confidence bound on the sample variance (coordinates - 1 degrees of freedom)
    low, high = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], coordinates - 1) / (coordinates - 1)
    assert low * expected <= variance <= high * expected


def test_a_symmetric_release_is_a_symmetric_matrix_of_grid_points():
    rng = np.random.default_rng(3)
    dim = 40
    noise = ExactGaussian.for_release(1.5, 1.4, dim * (dim + 1) // 2, 0.0)
    matrix = rng.standard_normal((dim, dim))
    released = noise.noisy_symmetric(matrix + matrix.T, rng)
    assert np.array_equal(released, released.T)
    steps = released / noise.gamma
    assert np.array_equal(steps, np.round(steps))


# --- what the ledger charges ------------------------------------------------------------------

def test_the_ledger_charges_the_discrete_gaussian_on_the_rounded_sensitivity():
    sensitivity, z, coordinates = power_step_sensitivity(1.0), 3.4, 600
    noise = ExactGaussian.for_release(z * sensitivity, sensitivity, coordinates, 1e-12)
    release = noise.release("dps-pca/power", (200, 3))
    assert (release.summands, release.padded, release.sites_in_sum) == (1, coordinates, 0)
    assert release.sensitivity == noise.grid_sensitivity
    assert release.sigma == noise.sigma and release.discrete
    # Canonne-Kamath-Steinke: alpha Delta^2 / (2 s^2), the continuous Gaussian's curve
    orders = (2.0, 8.0, 32.0)
    expected = np.array(orders) * noise.grid_sensitivity**2 / (2 * noise.sigma**2)
    np.testing.assert_allclose(release_rdp(release, orders), expected, rtol=1e-12)
    np.testing.assert_allclose(
        ddg_rdp(noise.sigma**2, 1, noise.grid_sensitivity, coordinates, 1, orders), expected
    )
    # its Gaussian view is at least as noisy as the continuous release it replaces
    multiplier, slack = gaussian_view(release)
    assert multiplier >= z
    assert multiplier == ddg_gaussian_multiplier(noise.sigma**2, 1, noise.grid_sensitivity)
    assert 0 <= slack == ddg_pld_slack(noise.sigma**2, 1, coordinates) < 1e-25


def test_an_exact_site_spends_no_more_than_its_float_calibration_allows():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 12)) / 4
    Q = thin_qr(rng.standard_normal((12, 3)))
    exact = DPSPCASite(X, DPSPCAPolicy(1.0, 1e-5, rounds=3, noise_sampler="exact"))
    floating = DPSPCASite(X, DPSPCAPolicy(1.0, 1e-5, rounds=3))
    for site in (exact, floating):
        site.release_diagonal()
        for _ in range(3):
            site.release_power(Q)
    assert all(r.mechanism.endswith("+exact") and r.discrete for r in exact.ledger.releases)
    assert exact.ledger.epsilon_spent() <= floating.ledger.epsilon_spent() * (1 + 1e-6)
    assert exact.ledger.epsilon_spent() == composed_epsilon(exact.ledger.releases, 1e-5)
    with pytest.raises(BudgetExceededError, match="allows 4 releases"):
        exact.release_power(Q)


def test_exact_site_releases_are_grid_points():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 8)) / 3
    site = DPSPCASite(X, DPSPCAPolicy(1.0, 1e-5, rounds=2, noise_sampler="exact"))
    Q = thin_qr(rng.standard_normal((8, 2)))
    statistic = power_statistic(site.X, Q)
    released = site.noisy_release("probe", statistic, power_step_sensitivity(1.0), error=0.0)
    gamma = grid_step(power_step_sensitivity(1.0), statistic.size)
    assert released.shape == statistic.shape
    assert np.array_equal(released / gamma, np.round(released / gamma))
    # a one-release mechanism forms its noisy matrix of grid points (DPdisPCA, LDP)
    dpdis = DPdisPCASite(X, DPdisPCAPolicy(1.0, 1e-5, noise_sampler="exact"))
    matrix = dpdis.release(VARIANT_FULL)
    ldp = LDPCovarianceSite(X, LDPPolicy(1.0, 1e-5, noise_sampler="exact"))
    covariance = ldp.release_covariance()
    for value in (matrix, covariance):
        assert np.array_equal(value, value.T)
        assert all(r.discrete for r in dpdis.ledger.releases + ldp.ledger.releases)


@pytest.mark.parametrize("sampler", ["exact", "float"])
def test_continuous_secure_shares_are_refused_before_the_site_exists(sampler):
    X = np.random.default_rng(0).standard_normal((50, 5)) / 3
    with pytest.raises(ConfigurationError, match="discrete=true") as refused:
        DPSPCASite(X, DPSPCAPolicy(1.0, 1e-5, rounds=2, secure_min_sites=3,
                                 noise_sampler=sampler))
    assert "Migrating from SecAgg+" in str(refused.value)


def test_noise_beyond_the_samplers_range_coarsens_the_grid_or_is_refused(caplog):
    sensitivity = power_step_sensitivity(1.0)
    coarse = ExactGaussian.for_release(500 * sensitivity, sensitivity, 10**6, 0.0)
    assert coarse.sigma <= 2**26 and coarse.inflation > 2 * GRID_INFLATION
    assert "coarsened" in caplog.text
    with pytest.raises(ConfigurationError, match="needs more than"):
        ExactGaussian.for_release(1e5 * sensitivity, sensitivity, 10**6, 0.0)


def test_a_simulation_of_exact_noise_says_so_in_its_header_and_record():
    from fedpca.scenarios.dps_pca import DPSPCAScenario

    scenario = DPSPCAScenario(sites=2, dim=20, samples=400, k=2, sparsity=4, s_hat=5,
                              noise_sampler="exact")
    assert "exact noise (grid points)]" in scenario.header()[0]
    assert scenario.privacy()["noise_sampler"] == "exact"
    assert scenario.to_run_config()["noise-sampler"] == "exact"
    assert "exact" not in DPSPCAScenario(sites=2, dim=20, samples=400, k=2, sparsity=4,
                                         s_hat=5).header()[0]
