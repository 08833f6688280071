"""The exact discrete Gaussian sampler for an integer variance (the one a site's secure-sum
noise uses): its law (chi-square against the exact pmf) for squares and non-squares, its exact
path, and the variance of a sum of site noises."""

import math

import numpy as np
import pytest
from chi_square import ALPHA, chi_square_p

from fedpca.errors import ConfigurationError
from fedpca.dp import discrete_gaussian_fast as fast
from fedpca.dp.discrete_gaussian import (
    MAX_SIGMA_SQ,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
)
from fedpca.dp.discrete_gaussian_fast import discrete_gaussian


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


@pytest.mark.parametrize("sigma_sq", [MAX_SIGMA_SQ - 1, 56_960_879])
def test_the_largest_non_square_variances_are_calibrated(sigma_sq):
    # t = floor(sqrt(s)) + 1: the acceptance's denominator 2 s t^2 is near 2^54 here
    n = 400_000
    draws = discrete_gaussian(sigma_sq, n, np.random.default_rng(sigma_sq))
    assert draws.var() == pytest.approx(sigma_sq, rel=5 * math.sqrt(2 / n))
    assert abs(draws.mean()) < 5 * math.sqrt(sigma_sq / n)
    assert abs((draws > 0).mean() - (draws < 0).mean()) < 5 / math.sqrt(n)


def test_the_exact_path_has_the_right_law_for_a_non_square(monkeypatch):
    # force every decision through the exact path (Python integers and decimal brackets)
    monkeypatch.setattr(fast, "ACCEPT_MARGIN", 1e20)
    monkeypatch.setattr(fast, "LOG_ERROR", 1.0)
    draws = discrete_gaussian(7, 6_000, np.random.default_rng(2))
    assert chi_square_p(draws, lambda y: discrete_gaussian_pmf(7, y)) > ALPHA


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, MAX_SIGMA_SQ + 1])
def test_bad_sigma_sq_is_refused(bad):
    with pytest.raises(ConfigurationError, match="sigma_sq"):
        discrete_gaussian(bad, 10)
