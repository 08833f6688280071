"""The noise a site adds has exactly the calibrated distribution (statistical tests)."""

from dataclasses import replace
import functools

import numpy as np
import pytest
from scipy import stats

from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAPolicy
from fedpca.flower.site.site_client import PrivateSiteClient as DPSPCAClient
from fedpca.linalg.subspace import thin_qr
from fedpca.dp.mechanisms import power_step_sensitivity


@functools.cache
def site_policy():
    """The sites' policy, calibrated when a test first asks, not as each worker collects."""
    return DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=60, clip_norm=1.0)


def site_data(seed=0, n=50, d=40):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * 0.9


def variance_interval(sample_var: float, dof: int, alpha: float = 1e-4):
    """Two-sided chi-square interval for the variance (fails 1 in 10^4 runs by chance)."""
    lo = dof * sample_var / stats.chi2.ppf(1 - alpha / 2, dof)
    hi = dof * sample_var / stats.chi2.ppf(alpha / 2, dof)
    return lo, hi


@pytest.mark.parametrize("sampler", ["float", "exact"])
def test_power_release_noise_has_calibrated_variance_through_the_flower_client(sampler):
    # exact: grid points; the rounding (gamma / 2 <= 1e-4 sigma) and the grid's 0.1% more
    # noise are far below what 9,600 draws resolve
    X = site_data()
    site = DPSPCASite(X, replace(site_policy(), noise_sampler=sampler), site="s0")
    client = DPSPCAClient(site)
    sigma = site_policy().calibration().sigma(power_step_sensitivity(1.0))
    rng = np.random.default_rng(5)
    residuals = []
    for _ in range(site_policy().rounds):
        Q = thin_qr(rng.standard_normal((X.shape[1], 4)))
        (H,), n, _ = client.fit([Q], {"phase": "power", "round": 1})
        residuals.append(H * n - site.X.T @ (site.X @ Q))  # = the noise G_i
    noise = np.concatenate([r.ravel() for r in residuals])
    lo, hi = variance_interval(noise.var(ddof=0), noise.size)
    assert lo <= sigma**2 <= hi
    assert abs(noise.mean()) < 5 * sigma / np.sqrt(noise.size)
    # Gaussian shape, and no correlation between neighbouring entries.
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-4
    assert abs(np.corrcoef(noise[:-1], noise[1:])[0, 1]) < 5 / np.sqrt(noise.size)


def test_diagonal_release_noise_has_calibrated_variance():
    d = 400
    sigmas, draws = [], []
    for s in range(30):  # one initialisation release per site
        X = site_data(seed=s, d=d)
        site = DPSPCASite(X, site_policy(), site=f"s{s}")
        draws.append(site.release_diagonal() * site.n - np.einsum("ij,ij->j", site.X, site.X))
        sigmas.append(site.sigma(power_step_sensitivity(1.0)))
    noise = np.concatenate(draws)
    lo, hi = variance_interval(noise.var(ddof=0), noise.size)
    assert lo <= sigmas[0] ** 2 <= hi


def test_sites_draw_independent_noise_and_unseeded_noise_differs():
    X = site_data()
    Q = thin_qr(np.random.default_rng(1).standard_normal((X.shape[1], 3)))
    a = DPSPCASite(X, site_policy(), site="a").release_power(Q)
    b = DPSPCASite(X, site_policy(), site="b").release_power(Q)
    assert not np.allclose(a, b)
    seeded = [DPSPCASite(X, site_policy(), site="a", seed=3).release_power(Q) for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])
    other_site = DPSPCASite(X, site_policy(), site="b", seed=3).release_power(Q)
    assert not np.allclose(seeded[0], other_site)


@pytest.mark.parametrize("factor", [0.5, 1.0, 3.0])
def test_server_can_only_raise_the_noise(factor):
    X = site_data()
    site = DPSPCASite(X, site_policy(), site="s")
    own = site_policy().calibration().noise_multiplier
    Q = thin_qr(np.random.default_rng(2).standard_normal((X.shape[1], 2)))
    DPSPCAClient(site).fit([Q], {"phase": "power", "round": 1, "min_noise_multiplier": own * factor})
    recorded = site.ledger.releases[-1].noise_multiplier
    assert recorded == pytest.approx(max(own, own * factor))
