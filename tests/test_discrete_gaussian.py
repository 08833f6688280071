"""The exact discrete Gaussian sampler: its law (chi-square against the exact pmf), the
variance of a sum of site noises, and its exact Bernoulli(exp(-gamma)) building block."""

import math

import numpy as np
import pytest
from chi_square import ALPHA, chi_square_p

from fedpca.errors import ConfigurationError
from fedpca.privacy.discrete_gaussian import (
    _accept_exact,
    bernoulli_exp_neg,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace,
)

@pytest.mark.parametrize("sigma_sq", [1, 2, 7, 100, 2500])
def test_draws_follow_the_exact_pmf(sigma_sq):
    draws = discrete_gaussian(sigma_sq, 300_000, np.random.default_rng(sigma_sq))
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(sigma_sq, y)) > ALPHA
    assert draws.dtype == np.int64


def test_a_wrong_variance_is_detected_by_the_same_test():
    draws = discrete_gaussian(100, 300_000, np.random.default_rng(5))
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(110, y)) < ALPHA


def test_the_sum_of_m_site_noises_has_m_times_the_variance():
    m, sigma_sq, trials = 16, 40, 20_000
    rng = np.random.default_rng(3)
    total = sum(discrete_gaussian(sigma_sq, trials, rng) for _ in range(m))
    expected = m * discrete_gaussian_variance(sigma_sq)
    # The sample variance of `trials` near-Gaussian draws has relative sd sqrt(2/trials).
    assert total.var() == pytest.approx(expected, rel=5 * math.sqrt(2 / trials))
    assert abs(total.mean()) < 5 * math.sqrt(expected / trials)


@pytest.mark.parametrize("num,den", [(0, 1), (1, 3), (1, 1), (7, 2), (25, 10)])
def test_bernoulli_exp_neg_has_probability_exp_minus_gamma(num, den):
    n = 200_000
    hits = bernoulli_exp_neg(np.full(n, num), np.full(n, den), np.random.default_rng(num)).sum()
    p = math.exp(-num / den)
    assert abs(hits - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1e-9


def test_discrete_laplace_follows_its_pmf():
    t = 4
    draws = discrete_laplace(t, 200_000, np.random.default_rng(11))
    norm = (1 - math.exp(-1 / t)) / (1 + math.exp(-1 / t))
    assert chi_square_p(draws, lambda y: norm * np.exp(-np.abs(y) / t)) > ALPHA


def test_the_exact_integer_path_for_huge_proposals_accepts_with_the_same_probability():
    # Force the unbounded-integer path on a proposal the fast path also handles.
    s, t, magnitude, n = 9, 4, 5, 40_000
    rng = np.random.default_rng(2)
    exact = sum(_accept_exact(magnitude, s, t, rng) for _ in range(n))
    p = math.exp(-((magnitude - s / t) ** 2) / (2 * s))
    assert abs(exact - n * p) <= 5 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, 2**30])
def test_bad_sigma_sq_is_refused(bad):
    with pytest.raises(ConfigurationError, match="sigma_sq"):
        discrete_gaussian(bad, 10)
