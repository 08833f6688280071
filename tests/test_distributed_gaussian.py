"""The distributed discrete Gaussian: rotation, rounding sensitivity, the KLS bound against the
exact privacy of a sum of discrete Gaussians, the zCDP conversion, calibration, the wrap bound
and the encode/decode pipeline (statistical tests with fixed seeds)."""

import itertools
import math

import numpy as np
import pytest
from scipy import linalg, optimize, special, stats

from fedpca.errors import ConfigurationError, ParameterError
from fedpca.dp.ddg_encoding import (
    centre,
    decode_sum,
    encode_site,
    modular_sum,
    randomized_round,
)
from fedpca.dp.discrete_gaussian import (
    MAX_SIGMA_SQ,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
)
from fedpca.dp.ddg_accounting import (
    ddg_gaussian_multiplier,
    ddg_pld_epsilon,
    ddg_pld_within,
    ddg_pld_slack,
    ddg_rdp,
    ddg_tau,
    rdp_to_delta,
    rdp_to_epsilon,
    rounded_sensitivity,
    zcdp_epsilon,
)
from fedpca.dp import distributed_gaussian
from fedpca.dp.distributed_gaussian import (
    INFLATION_RANGE,
    calibrate_ddg,
    choose_grid,
    minimum_modulus,
    wrap_probability,
)
from fedpca.dp.hadamard import RandomizedHadamard, fwht, next_power_of_two

SQRT2 = math.sqrt(2.0)


# --- rotation ---------------------------------------------------------------------------


def test_fwht_is_the_sylvester_hadamard_matrix():
    x = np.random.default_rng(0).normal(size=64)
    np.testing.assert_allclose(fwht(x), linalg.hadamard(64) @ x, atol=1e-12)


@pytest.mark.parametrize("dimension", [1, 5, 64, 1000])
def test_rotation_is_orthogonal_and_inverts_exactly(dimension):
    rotation = RandomizedHadamard(dimension, seed=11)
    assert rotation.padded == next_power_of_two(dimension) >= dimension
    rng = np.random.default_rng(dimension)
    x, y = rng.normal(size=(2, dimension))
    rx, ry = rotation.rotate(x), rotation.rotate(y)
    assert np.dot(rx, ry) == pytest.approx(np.dot(x, y), abs=1e-10)
    assert np.linalg.norm(rx) == pytest.approx(np.linalg.norm(x), rel=1e-13)
    np.testing.assert_allclose(rotation.unrotate(rx), x, atol=1e-13)
    # The matrix itself is orthogonal (columns of the identity map to orthonormal vectors).
    if dimension <= 64:
        matrix = np.stack([rotation.rotate(e) for e in np.eye(dimension)], axis=1)
        np.testing.assert_allclose(matrix.T @ matrix, np.eye(dimension), atol=1e-13)


def test_rotation_flattens_a_spike():
    rotation = RandomizedHadamard(4096, seed=1)
    spike = np.zeros(4096)
    spike[7] = 1.0
    np.testing.assert_allclose(np.abs(rotation.rotate(spike)), 1 / 64)


# --- rounding sensitivity -----------------------------------------------------------------


def test_coupled_rounding_moves_by_at_most_the_difference_plus_sqrt_d():
    """For every U: ||floor(y + U) - floor(y' + U)|| <= ||y - y'|| + sqrt(D); adversarial pairs
    (tiny differences straddling integers, large ones, mixed) never exceed it."""
    rng = np.random.default_rng(4)
    dim = 256
    worst = 0.0
    for trial in range(300):
        y = rng.normal(scale=50, size=dim)
        scale = [1e-9, 1e-3, 0.5, 3.0][trial % 4]
        y2 = y + rng.normal(scale=scale, size=dim)
        u = rng.random(dim)
        if trial % 3 == 0:  # put every y just below an integer so tiny moves cross it
            y = np.floor(y) + 1 - u - 1e-12
            y2 = y + np.abs(rng.normal(scale=scale, size=dim))
        diff = np.floor(y + u) - np.floor(y2 + u)
        bound = np.linalg.norm(y - y2) + math.sqrt(dim)
        worst = max(worst, np.linalg.norm(diff) / bound)
        assert np.abs(diff).max() <= np.ceil(np.abs(y - y2)).max()
    assert worst <= 1.0
    assert worst > 0.9  # the additive sqrt(D) is nearly attained by tiny straddling moves


def test_rounded_sensitivity_is_delta_over_gamma_plus_sqrt_d():
    value = rounded_sensitivity(SQRT2, 1e-3, 1024, norm_bound=100.0)
    assert value == pytest.approx(SQRT2 / 1e-3 + 32, rel=1e-9)
    assert value > SQRT2 / 1e-3 + 32  # the floating-point slack only adds


def test_randomized_rounding_is_unbiased():
    y = np.full(200_000, 3.3)
    rounded = randomized_round(y, np.random.default_rng(2))
    assert set(np.unique(rounded)) == {3, 4}
    assert rounded.mean() == pytest.approx(3.3, abs=5 * math.sqrt(0.21 / y.size))


# --- the KLS bound against exact numbers ---------------------------------------------------


def sum_pmf(sigma_sq: int, sites: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact pmf of the sum of ``sites`` i.i.d. N_Z(0, sigma_sq) (truncation below 1e-300)."""
    radius = math.ceil(40 * math.sqrt(sigma_sq)) + 1
    support = np.arange(-radius, radius + 1)
    one = discrete_gaussian_pmf(sigma_sq, support)
    pmf = one
    for _ in range(sites - 1):
        pmf = np.convolve(pmf, one)
    total = np.arange(pmf.size) - radius * sites
    return total, pmf


def exact_delta(sigma_sq: int, sites: int, shift: int, epsilon: float) -> float:
    """sup over both directions of the hockey-stick divergence of Z and Z + shift."""
    _, pmf = sum_pmf(sigma_sq, sites)
    p = np.concatenate([pmf, np.zeros(shift)])
    q = np.concatenate([np.zeros(shift), pmf])
    return max(np.maximum(0, p - math.exp(epsilon) * q).sum(),
               np.maximum(0, q - math.exp(epsilon) * p).sum())


@pytest.mark.parametrize(
    "sigma_sq,sites,shift",
    [(1, 2, 1), (1, 5, 1), (1, 8, 2), (2, 3, 2), (3, 6, 1), (4, 10, 3), (10, 4, 1), (25, 3, 7)],
)
def test_kls_bound_is_at_least_the_exact_delta(sigma_sq, sites, shift):
    for epsilon in (0.25, 0.5, 1.0, 2.0, 4.0):
        bound = rdp_to_delta(ddg_rdp(sigma_sq, sites, float(shift), padded=1), epsilon)
        exact = exact_delta(sigma_sq, sites, shift, epsilon)
        assert bound >= exact, (sigma_sq, sites, shift, epsilon, bound, exact)
    # and the bound is informative, not vacuous, at epsilon = 2
    assert rdp_to_delta(ddg_rdp(sigma_sq, sites, float(shift), padded=1), 2.0) < 0.5


def pld_bound(sigma_sq: int, sites: int, sensitivity: float, padded: int, delta: float) -> float:
    """Epsilon at ``delta`` by the Gaussian-PLD-plus-slack bound for one release."""
    view = (ddg_gaussian_multiplier(sigma_sq, sites, sensitivity),
            ddg_pld_slack(sigma_sq, sites, padded))
    return ddg_pld_epsilon([view], delta)


@pytest.mark.parametrize(
    "sigma_sq,sites,shift",
    [(1, 2, 1), (1, 5, 1), (1, 8, 2), (2, 3, 2), (3, 6, 1), (4, 10, 3), (10, 4, 1), (25, 3, 7)],
)
def test_pld_slack_bound_is_at_least_the_exact_epsilon(sigma_sq, sites, shift):
    # At delta = the exact delta(eps) of the sum, a valid bound must claim at least eps.
    for epsilon in (0.25, 0.5, 1.0, 2.0, 4.0):
        exact = exact_delta(sigma_sq, sites, shift, epsilon)
        if exact < 1e-250:  # beyond what the closed forms resolve
            continue
        assert pld_bound(sigma_sq, sites, float(shift), 1, exact) >= epsilon * (1 - 1e-9)


def test_pld_slack_bound_holds_in_two_dimensions():
    # The multivariate step: independent coordinates, the shift's L2 norm as sensitivity.
    sigma_sq, sites, shift = 2, 3, (1, 2)
    _, pmf = sum_pmf(sigma_sq, sites)
    joint = np.outer(pmf, pmf)
    shifted = np.roll(np.roll(joint, shift[0], axis=0), shift[1], axis=1)
    for epsilon in (0.5, 1.0, 2.0):
        exact = max(np.maximum(0, joint - math.exp(epsilon) * shifted).sum(),
                    np.maximum(0, shifted - math.exp(epsilon) * joint).sum())
        assert pld_bound(sigma_sq, sites, math.hypot(*shift), 2, exact) >= epsilon * (1 - 1e-9)


def test_pld_slack_bound_is_the_gaussian_one_for_practical_noise():
    # Large noise: the slack vanishes and the sum is the continuous Gaussian of the same
    # variance (the RDP bound costs ~15% more noise at 11 releases).
    sigma_sq, sites, sensitivity, padded = 10**6, 100, 1000.0, 8192
    assert ddg_pld_slack(sigma_sq, sites, padded) < 1e-30
    z = math.sqrt(sites * sigma_sq) / sensitivity
    gauss = stats.norm.cdf(-2.0 * z + 1 / (2 * z)) - math.exp(2.0) * stats.norm.cdf(
        -2.0 * z - 1 / (2 * z))
    assert pld_bound(sigma_sq, sites, sensitivity, padded, gauss) == pytest.approx(2.0, rel=1e-6)
    eleven = [(ddg_gaussian_multiplier(sigma_sq, sites, sensitivity), 0.0)] * 11
    rdp = rdp_to_epsilon(ddg_rdp(sigma_sq, sites, sensitivity, padded, 11), 1e-5)
    assert ddg_pld_epsilon(eleven, 1e-5) < 0.95 * rdp


def bisected_epsilon(releases: list[tuple[float, float]], delta: float) -> float:
    """ddg_pld_epsilon's definition, every step evaluated: the bisection on the composed
    Gaussian's delta curve, to 1e-9 and rounded up, plus twice the slack."""
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    curve = GaussianPrivacyLoss(sum(z**-2 for z, _ in releases) ** -0.5, sensitivity=1.0)
    slack = sum(h for _, h in releases)
    target = delta * math.exp(-slack)
    low, high = 0.0, 1.0
    while curve.get_delta_for_epsilon(high) > target:
        low, high = high, 2 * high
    if curve.get_delta_for_epsilon(0.0) <= target:
        return 2 * slack
    while high - low > 1e-9:
        mid = (low + high) / 2
        low, high = (mid, high) if curve.get_delta_for_epsilon(mid) > target else (low, mid)
    return high + 2 * slack


@pytest.mark.parametrize("seed", range(4))
def test_the_pld_epsilon_is_the_plain_bisections_value(seed):
    # the bisection skips the comparisons the curve's monotonicity answers: same value
    rng = np.random.default_rng(seed)
    for _ in range(15):
        releases = [(float(z), float(rng.choice([0.0, 1e-40, 1e-6, 1e-3])))
                    for z in 10 ** rng.uniform(-0.7, 1.5, size=rng.choice([1, 3, 11]))]
        delta = float(10 ** rng.uniform(-12, -2))
        assert ddg_pld_epsilon(releases, delta) == bisected_epsilon(releases, delta)
    # a slack so large that delta e^-H underflows to 0 and one that leaves it subnormal
    for slack in (800.0, 700.0, 745.0):
        assert ddg_pld_epsilon([(0.05, slack)], 1e-5) == bisected_epsilon([(0.05, slack)], 1e-5)


@pytest.mark.parametrize("slack", [0.0, 1e-6, 0.05])
def test_the_calibration_search_point_test_never_accepts_more_than_the_bisection(slack):
    # the calibration's search asks "epsilon <= target?" with one point of the delta curve;
    # a yes must mean the bisected epsilon (the one charged) is within the target, and the
    # two may disagree only within the bisection's tolerance of the target
    releases = [(0.7, slack / 2)] * 2 + [(1.3, slack / 2)]
    exact = ddg_pld_epsilon(releases, 1e-6)
    for target in exact + np.array([-1e-3, -1e-6, -2e-9, 0.0, 2e-9, 1e-6, 1e-3]):
        within = ddg_pld_within(releases, 1e-6, float(target))
        if within:
            assert exact <= target
        if abs(target - exact) > 2e-9:
            assert within == (exact <= target), target - exact


@pytest.mark.parametrize("sigma_sq,sites,shift", [(1, 2, 1), (1, 10, 3), (2, 5, 2), (9, 4, 5)])
def test_kls_rdp_bound_dominates_the_exact_renyi_divergence(sigma_sq, sites, shift):
    _, pmf = sum_pmf(sigma_sq, sites)
    p = np.concatenate([pmf, np.zeros(shift)])
    q = np.concatenate([np.zeros(shift), pmf])
    keep = (p > 1e-280) & (q > 1e-280)
    log_p, log_q = np.log(p[keep]), np.log(q[keep])
    orders = (1.1, 1.5, 2.0, 4.0, 8.0, 16.0)
    bound = ddg_rdp(sigma_sq, sites, float(shift), padded=1, orders=orders)
    for alpha, rdp in zip(orders, bound, strict=True):
        exact = special.logsumexp(alpha * log_p + (1 - alpha) * log_q) / (alpha - 1)
        # (equality up to rounding when tau ~ 0: then the sum is a discrete Gaussian, whose
        # Renyi divergence at an integer shift is exactly the Gaussian's)
        assert exact <= rdp * (1 + 1e-12), (alpha, exact, rdp)


def test_sum_of_discrete_gaussians_has_m_times_the_variance():
    support, pmf = sum_pmf(7, 6)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert (pmf * support**2).sum() == pytest.approx(6 * discrete_gaussian_variance(7), rel=1e-12)


def test_tau_matches_the_papers_sum_and_vanishes_for_moderate_noise():
    assert ddg_tau(1, 2) == pytest.approx(10 * math.exp(-math.pi**2), rel=1e-12)
    expected = 10 * sum(math.exp(-2 * math.pi**2 * 2 * k / (k + 1)) for k in range(1, 5))
    assert ddg_tau(2, 5) == pytest.approx(expected, rel=1e-12)
    assert ddg_tau(4, 10_000) < 1e-9
    assert ddg_tau(5, 1) == 0.0


def cks_zcdp_epsilon(rho: float, delta: float) -> float:
    """Canonne-Kamath-Steinke's conversion, optimised over a continuous order alpha > 1:
    delta = exp((alpha - 1)(alpha rho - eps)) / alpha * (1 - 1/alpha)^(alpha - 1)."""

    def eps(log_alpha_minus_1: float) -> float:
        a = 1 + math.exp(log_alpha_minus_1)
        return a * rho + math.log1p(-1 / a) - math.log(delta * a) / (a - 1)

    result = optimize.minimize_scalar(eps, bounds=(-8, 12), method="bounded",
                                      options={"xatol": 1e-10})
    return float(result.fun)


@pytest.mark.parametrize("rho,delta", [(0.01, 1e-5), (0.1, 1e-6), (0.5, 1e-2), (2.0, 1e-5)])
def test_zcdp_conversion_matches_the_cks_formula(rho, delta):
    ours = zcdp_epsilon(rho, delta)
    reference = cks_zcdp_epsilon(rho, delta)
    assert reference <= ours <= reference * 1.002  # a grid of orders only over-states it
    assert ours <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # the classic bound
    # Converting the Gaussian mechanism's rho = 1/(2 z^2) never under-states its exact delta.
    z = 1 / math.sqrt(2 * rho)
    exact = stats.norm.cdf(-ours * z + 1 / (2 * z)) - math.exp(ours) * stats.norm.cdf(
        -ours * z - 1 / (2 * z))
    assert exact <= delta


# --- calibration -------------------------------------------------------------------------

BASE = {"releases": 3, "sensitivity": SQRT2, "dimension": 1000, "sites": 10, "gamma": 0.01,
            "norm_bound": 50.0}


def test_calibration_is_minimal_and_meets_the_target():
    cal = calibrate_ddg(1.0, 1e-5, **BASE)
    assert cal.epsilon <= 1.0
    smaller = ddg_rdp(cal.sigma_sq - 1, cal.sites, cal.grid_sensitivity, cal.padded, cal.releases)
    assert rdp_to_epsilon(smaller, 1e-5) > 1.0
    assert cal.padded == 1024
    assert cal.grid_sensitivity == pytest.approx(SQRT2 / 0.01 + 32, rel=1e-9)


@pytest.mark.parametrize("epsilon, delta, changes", [
    (1.0, 1e-5, {}), (1.0, 1e-5, {"releases": 1}), (1.0, 1e-5, {"gamma": 2e-4}),
    (1.0, 1e-5, {"releases": 30, "dimension": 4}), (1.0, 1e-5, {"gamma": 0.5, "sites": 2}),
    # a few grid steps of noise: KLS's RDP bound decides, below the Gaussian's guess
    (1.0, 1e-3, {"releases": 1, "gamma": 30.0, "sites": 1, "dimension": 1}),
    (8.0, 1e-9, {"releases": 5, "gamma": 5.0, "sites": 1, "dimension": 8}),
])
def test_the_noise_is_the_smallest_that_either_bound_allows(epsilon, delta, changes):
    # the search starts from the continuous Gaussian's noise and never trusts it: whichever
    # bound decides, the noise one grid step^2 smaller fails both
    cal = calibrate_ddg(epsilon, delta, **{**BASE, **changes})
    check = (cal.sites * cal.draws, cal.grid_sensitivity, cal.padded, cal.releases, delta,
             epsilon)
    assert distributed_gaussian._within(cal.sigma_sq, *check)
    assert cal.sigma_sq == 1 or not distributed_gaussian._within(cal.sigma_sq - 1, *check)


@pytest.mark.parametrize("answer", [1, 2, 123_457, MAX_SIGMA_SQ - 1, MAX_SIGMA_SQ])
@pytest.mark.parametrize("miss", [-MAX_SIGMA_SQ, -1000, -1, 0, 1, 37, MAX_SIGMA_SQ])
def test_the_noise_search_finds_the_smallest_from_any_starting_guess(answer, miss):
    looked = []
    found = distributed_gaussian._smallest(lambda s2: looked.append(s2) or s2 >= answer,
                                           answer + miss)
    assert found == answer and all(1 <= s2 <= MAX_SIGMA_SQ for s2 in looked)
    assert len(looked) <= (2 if miss == 0 else 2 * MAX_SIGMA_SQ.bit_length() + 2)


def test_calibration_is_monotone():
    base = calibrate_ddg(1.0, 1e-5, **BASE).sigma_sq
    assert calibrate_ddg(0.5, 1e-5, **BASE).sigma_sq > base
    assert calibrate_ddg(1.0, 1e-7, **BASE).sigma_sq > base
    assert calibrate_ddg(1.0, 1e-5, **{**BASE, "releases": 6}).sigma_sq > base
    assert calibrate_ddg(1.0, 1e-5, **{**BASE, "sensitivity": 2.0}).sigma_sq > base
    assert calibrate_ddg(1.0, 1e-5, **{**BASE, "gamma": 0.005}).sigma_sq > base
    more_sites = calibrate_ddg(1.0, 1e-5, **{**BASE, "sites": 20})
    assert more_sites.sigma_sq < base
    # the total noise M s^2 is what matters once tau is negligible
    assert 20 * more_sites.sigma_sq == pytest.approx(10 * base, rel=1e-3)


def test_calibration_refuses_noise_beyond_the_sampler():
    with pytest.raises(ConfigurationError, match="coarser grid"):
        calibrate_ddg(0.01, 1e-9, **{**BASE, "gamma": 1e-6, "sites": 1})


def test_calibration_splits_large_noise_into_several_exact_draws():
    one = calibrate_ddg(1.0, 1e-5, **{**BASE, "gamma": 2e-4})
    assert one.draws > 1 and one.sigma_sq <= MAX_SIGMA_SQ and one.epsilon <= 1.0
    # the analysis is KLS's with sites * draws summands: the same as that many sites
    as_sites = calibrate_ddg(1.0, 1e-5, **{**BASE, "gamma": 2e-4, "sites": 10 * one.draws})
    assert as_sites.draws == 1 and as_sites.sigma_sq == one.sigma_sq
    with pytest.raises(ConfigurationError, match="draws"):
        calibrate_ddg(1.0, 1e-5, **{**BASE, "gamma": 2e-4}, max_draws=one.draws - 1)


# --- wrap bound and grid choice -------------------------------------------------------------


def test_wrap_probability_is_monotone_and_minimum_modulus_meets_it():
    spec = {"norm_bound": 100.0, "sites_in_sum": 50, "dimension": 4096, "gamma": 1e-3,
            "sigma_sq": 400, "draws": 1}
    probs = [wrap_probability(modulus=2**k, **spec) for k in range(14, 30)]
    assert all(a >= b for a, b in itertools.pairwise(probs))
    needed = minimum_modulus(max_wrap_probability=1e-9, **spec)
    assert wrap_probability(modulus=needed, **spec) <= 1e-9
    assert wrap_probability(modulus=needed // 2, **spec) > 1e-9
    assert wrap_probability(modulus=2 * 50, **spec) == 1.0


def test_choose_grid_meets_every_constraint():
    choice = choose_grid(2.0, 1e-2, releases=1, sensitivity=SQRT2, norm_bound=1000.0,
                         dimension=500_500, sites=100, max_draws=1)
    cal = choice.calibration
    assert cal.padded == 2**19
    assert choice.inflation <= 0.02
    assert cal.inflation == pytest.approx(choice.inflation, rel=1e-6)
    assert cal.epsilon <= 2.0 and cal.sigma_sq <= MAX_SIGMA_SQ and cal.draws == 1
    assert choice.wrap_probability <= 1e-9 and choice.modulus_needed <= choice.modulus
    # a slightly finer grid would be infeasible (the search returns the finest it can find)
    finer = 0.97 * choice.inflation * SQRT2 / math.sqrt(2**19)
    with pytest.raises(ConfigurationError):
        calibrate_ddg(2.0, 1e-2, releases=1, sensitivity=SQRT2, dimension=500_500, sites=100,
                      gamma=finer, norm_bound=1000.0, max_draws=1)
    # with more draws allowed the search reaches the finest grid of its range
    finest = choose_grid(2.0, 1e-2, releases=1, sensitivity=SQRT2, norm_bound=1000.0,
                         dimension=500_500, sites=100)
    assert finest.inflation == pytest.approx(0.02 / INFLATION_RANGE, rel=0.01)
    assert 1 < finest.calibration.draws <= 16


def test_choose_grid_refuses_a_modulus_that_wraps_with_public_reasons():
    with pytest.raises(ParameterError) as info:
        choose_grid(1.0, 1e-6, releases=1, sensitivity=SQRT2, norm_bound=5000.0,
                    dimension=20_000, sites=50, sites_in_sum=200, modulus=2**16)
    message = str(info.value)
    assert "wrap" in message and "modulus=65536" in message and "sites_in_sum=200" in message
    assert "larger modulus" in message
    with pytest.raises(ConfigurationError, match="sites_in_sum"):
        choose_grid(1.0, 1e-6, releases=1, sensitivity=SQRT2, norm_bound=1.0,
                    dimension=100, sites=50, sites_in_sum=10)


# --- encode / decode -------------------------------------------------------------------


def site_vectors(sites: int, dimension: int, norm: float, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(sites, dimension))
    return vectors * (norm / np.linalg.norm(vectors, axis=1, keepdims=True))


@pytest.mark.parametrize("draws", [1, 2])
def test_decoded_sum_is_unbiased_with_the_predicted_variance(draws):
    sites, dim, gamma, sigma_sq, trials = 4, 2048, 0.05, 9, 40
    modulus = 2**20
    rotation = RandomizedHadamard(dim, seed=5)
    vectors = site_vectors(sites, dim, 30.0, seed=6)
    truth = vectors.sum(axis=0)
    rng = np.random.default_rng(7)
    errors = np.empty((trials, dim))
    for t in range(trials):
        messages = [encode_site(v, gamma=gamma, rotation=rotation, sigma_sq=sigma_sq,
                                modulus=modulus, draws=draws, rng=rng) for v in vectors]
        errors[t] = decode_sum(modular_sum(messages, modulus), gamma=gamma, rotation=rotation,
                               modulus=modulus) - truth
    frac = np.array([rotation.rotate(v / gamma) % 1.0 for v in vectors])
    rounding_var = (frac * (1 - frac)).sum(axis=0).mean()  # mean over rotated coordinates
    noise_var = sites * draws * discrete_gaussian_variance(sigma_sq)  # M k s^2 (slightly less)
    expected = gamma**2 * (noise_var + rounding_var)
    samples = errors.size
    assert errors.var() == pytest.approx(expected, rel=5 * math.sqrt(2 / samples))
    assert abs(errors.mean()) < 5 * math.sqrt(expected / samples)
    z = errors.mean(axis=0) / math.sqrt(expected / trials)  # per coordinate: ~N(0, 1)
    assert np.mean(z**2) == pytest.approx(1.0, abs=5 * math.sqrt(2 / dim))
    assert np.abs(z).max() < 5.5


def test_decode_of_encode_is_the_sum_up_to_rounding_and_noise():
    sites, dim, gamma, sigma_sq, modulus = 5, 300, 1e-3, 4, 2**24
    rotation = RandomizedHadamard(dim, seed=8)
    vectors = site_vectors(sites, dim, 20.0, seed=9)
    rng = np.random.default_rng(10)
    messages = [encode_site(v, gamma=gamma, rotation=rotation, sigma_sq=sigma_sq,
                            modulus=modulus, rng=rng) for v in vectors]
    assert all(m.dtype == np.int64 and m.min() >= 0 and m.max() < modulus for m in messages)
    decoded = decode_sum(modular_sum(messages, modulus), gamma=gamma, rotation=rotation,
                         modulus=modulus)
    assert decoded.shape == (dim,)
    # ||error|| <= gamma (||rounding errors|| + ||noise||) with each rounding error below 1
    noise_bound = math.sqrt(sites * sigma_sq * rotation.padded) * 1.3
    assert np.linalg.norm(decoded - vectors.sum(axis=0)) < gamma * (
        sites * math.sqrt(rotation.padded) + noise_bound)
    assert np.linalg.norm(decoded - vectors.sum(axis=0)) < 0.01 * np.linalg.norm(vectors.sum(0))


def test_a_modulus_below_the_bound_wraps_and_decodes_wrongly():
    sites, dim, gamma, sigma_sq = 4, 256, 1e-3, 4
    rotation = RandomizedHadamard(dim, seed=12)
    vectors = site_vectors(sites, dim, 10.0, seed=13)
    spec = {"norm_bound": 10.0, "sites_in_sum": sites, "dimension": dim, "gamma": gamma,
            "sigma_sq": sigma_sq, "draws": 1}
    good = minimum_modulus(max_wrap_probability=1e-9, **spec)
    bad = good // 64
    assert wrap_probability(modulus=bad, **spec) == 1.0
    rng = np.random.default_rng(14)
    for modulus, ok in ((good, True), (bad, False)):
        messages = [encode_site(v, gamma=gamma, rotation=rotation, sigma_sq=sigma_sq,
                                modulus=modulus, rng=rng) for v in vectors]
        decoded = decode_sum(modular_sum(messages, modulus), gamma=gamma, rotation=rotation,
                             modulus=modulus)
        close = np.linalg.norm(decoded - vectors.sum(0)) < 0.05 * np.linalg.norm(vectors.sum(0))
        assert bool(close) == ok


def test_centre_maps_to_the_half_open_centred_range():
    m = 16
    np.testing.assert_array_equal(centre(np.arange(m), m), [0, 1, 2, 3, 4, 5, 6, 7,
                                                            -8, -7, -6, -5, -4, -3, -2, -1])


def test_a_full_size_statistic_encodes_and_decodes_quickly():
    """d = 1000: the upper triangle has 500,500 entries (padded to 2^19)."""
    dim = 500_500
    choice = choose_grid(2.0, 1e-2, releases=1, sensitivity=SQRT2, norm_bound=1000.0,
                         dimension=dim, sites=100)
    rotation = RandomizedHadamard(dim, seed=3)
    v = site_vectors(1, dim, 1000.0, seed=15)[0]
    cal = choice.calibration
    message = encode_site(v, gamma=choice.gamma, rotation=rotation, sigma_sq=cal.sigma_sq,
                          draws=cal.draws, modulus=choice.modulus, rng=np.random.default_rng(16))
    decoded = decode_sum(message, gamma=choice.gamma, rotation=rotation, modulus=choice.modulus)
    error = decoded - v
    expected_sd = choice.gamma * math.sqrt(cal.draws * cal.sigma_sq)
    assert error.std() == pytest.approx(expected_sd, rel=0.01)


def test_encode_refuses_bad_inputs():
    rotation = RandomizedHadamard(8, seed=0)
    with pytest.raises(ConfigurationError):
        encode_site(np.full(8, np.nan), gamma=0.1, rotation=rotation, sigma_sq=4, modulus=2**10)
    with pytest.raises(ConfigurationError):
        encode_site(np.zeros(8), gamma=0.1, rotation=rotation, sigma_sq=4, modulus=1001)
    with pytest.raises(ConfigurationError):
        encode_site(np.zeros(9), gamma=0.1, rotation=rotation, sigma_sq=4, modulus=2**10)


@pytest.mark.parametrize("dim", [20_000, 100_000])
def test_dps_pca_secure_power_steps_at_genomics_width_fit_a_sites_default_draw_limit(dim):
    """Ancestry PCs over SNPs: ``X_i^T X_i Q`` (k = 2) of sites of 10,000 records, sums of
    M = 10 sites, eps 1 over 11 releases (10 power rounds and the start)."""
    from fedpca.algorithms.dps_pca import power_step_sensitivity
    from fedpca.algorithms.secure_sum import SecureSum
    from fedpca.algorithms.site_limits import DEFAULT_MAX_NOISE_DRAWS

    secure = SecureSum(sensitivity=power_step_sensitivity(1.0), max_records=10_000,
                       norm_per_record=1.0, dimension=2 * dim, sites_in_sum=10,
                       rotation_seed=0)
    choice = secure.grid(1.0, 1e-6, 11, 10)
    cal = choice.calibration
    assert cal.draws <= DEFAULT_MAX_NOISE_DRAWS and cal.epsilon <= 1.0 * (1 + 1e-6)
    assert choice.wrap_probability <= 1e-9
    if dim == 20_000:  # a site's message at that width: encoded, decoded, noise as calibrated
        rotation = RandomizedHadamard(2 * dim, seed=17)
        v = site_vectors(1, 2 * dim, 10_000.0, seed=18)[0]
        message = encode_site(v, gamma=choice.gamma, rotation=rotation, sigma_sq=cal.sigma_sq,
                              draws=cal.draws, modulus=choice.modulus,
                              rng=np.random.default_rng(19))
        error = decode_sum(message, gamma=choice.gamma, rotation=rotation,
                           modulus=choice.modulus) - v
        assert error.std() == pytest.approx(choice.gamma * math.sqrt(cal.draws * cal.sigma_sq),
                                            rel=0.02)
