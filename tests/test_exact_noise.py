"""Exact noise at a site: the fast exact discrete Gaussian sampler (its law, its exact path, the
one floating-point fact it trusts), the grid mechanism (grid points, calibrated variance, the
rounding's sensitivity bound under adversarial search) and what the ledger charges."""

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedpca.algorithms.dpdis_pca import VARIANT_FULL, DPdisPCAPolicy, DPdisPCASite
from fedpca.algorithms.dps_pca import DPSPCASite, SitePolicy
from fedpca.algorithms.ldp_pca import LDPCovarianceSite, LDPPolicy
from fedpca.errors import BudgetExceededError, ConfigurationError
from fedpca.linalg.subspace import thin_qr
from fedpca.privacy import discrete_gaussian_fast as fast
from fedpca.privacy.discrete_gaussian import discrete_gaussian_pmf
from fedpca.privacy.distributed_gaussian import ddg_gaussian_multiplier, ddg_pld_slack, ddg_rdp
from fedpca.privacy.exact_noise import (
    GRID_INFLATION,
    ExactGaussian,
    float_error,
    grid_step,
)
from fedpca.privacy.ledger import composed_epsilon
from fedpca.privacy.mechanisms import power_step_sensitivity

#: A statistical test fails only below this p-value (fixed seeds: repeatable).
ALPHA = 1e-4


def chi_square_p(draws: np.ndarray, pmf) -> float:
    """p-value of a chi-square test of ``draws`` against ``pmf`` (tails pooled)."""
    values, counts = np.unique(draws, return_counts=True)
    expected = pmf(values) * draws.size
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], draws.size - expected[keep].sum())
    return float(stats.chisquare(observed, expected).pvalue)


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


def test_numpys_exp_is_as_accurate_as_the_margins_assume():
    # the one floating-point fact the sampler trusts: relative error below 2^-47 on [0, 64]
    rng = np.random.default_rng(0)
    arguments = np.concatenate([rng.uniform(0, 64, 4000), rng.uniform(0, 1, 1000)])
    computed = np.exp(-arguments)
    decimal.getcontext().prec = 40
    worst = max(
        abs(Fraction(float(c)) / Fraction((-decimal.Decimal(float(a))).exp()) - 1)
        for a, c in zip(arguments, computed)
    )
    assert worst < 2.0**-50


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
    monkeypatch.setattr(fast, "ACCEPT_MARGIN", 2.0)
    monkeypatch.setattr(fast, "MAGNITUDE_MARGIN", 2.0)
    draws = fast.discrete_gaussian_scale(3, 20_000, np.random.default_rng(2))
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(9, y)) > ALPHA


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, 2**31])
def test_bad_scales_are_refused(bad):
    with pytest.raises(ConfigurationError, match="sigma"):
        fast.discrete_gaussian_scale(bad, 10, np.random.default_rng())
