"""The distributed discrete Gaussian (DDG): calibration, grid and modulus choice.

Reference: Kairouz, Liu and Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation" (ICML 2021). The privacy of a sum of discrete Gaussians (the
two bounds every epsilon here is the smaller of) is :mod:`fedpca.dp.ddg_accounting`'s; this
module chooses, from public quantities only, the noise each site draws (:func:`calibrate_ddg`),
and the grid step and modulus of a secure sum (:func:`choose_grid`) so that a modular sum wraps
with at most a stated probability.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from fedpca.dp import calibration_cache
from fedpca.dp.accountant import worst_case_epsilon
from fedpca.dp.ddg_accounting import (
    PLD_TOLERANCE,
    RDP_ORDERS,
    SMOOTHING_VARIANCE,
    ddg_gaussian_multiplier,
    ddg_pld_epsilon,
    ddg_pld_slack,
    ddg_pld_within,
    ddg_rdp,
    ddg_tau,
    gaussian_std_needed,
    rdp_to_epsilon,
    rounded_sensitivity,
)
from fedpca.dp.discrete_gaussian import MAX_SIGMA_SQ
from fedpca.dp.events import Release
from fedpca.dp.hadamard import next_power_of_two
from fedpca.errors import ConfigurationError, ParameterError

logger = logging.getLogger(__name__)

#: Default modulus: residues fit a signed 32-bit integer and the protocol's mask arithmetic.
DEFAULT_MODULUS = 2**31
#: Default bound on the probability that a modular sum wraps (a utility failure, not privacy).
DEFAULT_WRAP_PROBABILITY = 1e-9
#: Default largest rounding inflation ``sqrt(D) gamma / Delta`` of the sensitivity.
DEFAULT_MAX_INFLATION = 0.02
#: Most noise draws per site and coordinate that :func:`calibrate_ddg` will use.
MAX_DRAWS = 1024
#: The draws per site :func:`choose_grid` first allows itself for a finer grid (sampling time
#: grows with them); it doubles them, up to its ``max_draws``, only when no grid of its range
#: qualifies with fewer (a wide statistic, whose grid step must be small).
DEFAULT_MAX_DRAWS = 16
#: :func:`choose_grid` searches inflations down to ``max_inflation / INFLATION_RANGE``; finer
#: grids would reduce the noise by under 1.5% of its standard deviation.
INFLATION_RANGE = 4.0

@dataclass(frozen=True)
class DDGCalibration:
    """The per-site noise of a DDG release and what ``releases`` of them achieve.

    Attributes:
        sigma_sq: variance parameter ``s^2`` (grid units) of each discrete Gaussian draw.
        draws: ``k``, independent draws each site adds per coordinate (variance ``k s^2``).
        sites: ``M``, the minimum number of honest sites in every sum.
        releases: ``T``, the releases composed.
        epsilon: epsilon achieved at ``delta`` by the composition (KLS bound, RDP conversion).
        delta: the delta at which epsilon is stated.
        target_epsilon: the epsilon asked for.
        gamma: the grid step (real units per integer).
        sensitivity: replace-one L2 sensitivity ``Delta`` of one site's statistic.
        grid_sensitivity: ``Delta / gamma + sqrt(D)`` (+ float slack), in grid units.
        padded: ``D``, the padded dimension.
        tau: KLS's correction for a sum of discrete Gaussians.
        accounting: the bound that gives ``epsilon``: ``"ddg-pld"`` (the Gaussian's PLD plus
            the pointwise slack) or ``"kls-rdp"`` (KLS's Renyi bound), the smaller of the two.
    """

    sigma_sq: int
    draws: int
    sites: int
    releases: int
    epsilon: float
    delta: float
    target_epsilon: float
    gamma: float
    sensitivity: float
    grid_sensitivity: float
    padded: int
    tau: float
    accounting: str = "kls-rdp"

    @property
    def inflation(self) -> float:
        """Relative growth of the sensitivity from rounding (``sqrt(D) gamma / Delta`` plus
        the floating-point slack)."""
        return self.grid_sensitivity * self.gamma / self.sensitivity - 1

    @property
    def central_sigma(self) -> float:
        """Standard deviation, in real units, of the noise in a sum of ``sites`` messages
        (at most: the discrete Gaussian's variance is slightly below ``s^2``)."""
        return self.gamma * math.sqrt(self.sites * self.draws * self.sigma_sq)

    @property
    def noise_multiplier(self) -> float:
        """``central_sigma / sensitivity``: a sum's noise in units of the sensitivity."""
        return self.central_sigma / self.sensitivity

    def record(self) -> dict[str, float | int | str]:
        """The fields a result's privacy record needs for this calibration."""
        return {
            "mechanism": "distributed-discrete-gaussian",
            "epsilon": self.target_epsilon,
            "epsilon_achieved": self.epsilon,
            "delta": self.delta,
            "accounting": self.accounting,
            "releases_per_site": self.releases,
            "min_sites_per_sum": self.sites,
            "sigma_sq_per_draw": self.sigma_sq,
            "draws_per_site": self.draws,
            "grid_step": self.gamma,
            "sensitivity": self.sensitivity,
            "grid_sensitivity": self.grid_sensitivity,
            "padded_dimension": self.padded,
            "central_sigma": self.central_sigma,
            "sigma": self.central_sigma,
            "noise_multiplier": self.noise_multiplier,
        }

    def release(self, mechanism: str) -> Release:
        """One release of this calibration as a ledger records it: the noise of a sum of
        ``sites`` messages (the conditional guarantee), each site adding ``draws`` draws (its
        own share, :meth:`Release.own_share`)."""
        summands = self.sites * self.draws
        return Release(mechanism, self.grid_sensitivity, math.sqrt(summands * self.sigma_sq),
                       (self.padded,), summands, self.padded, self.sites, self.gamma)

    def worst_case_epsilon(self) -> float:
        """Epsilon at ``delta`` of :attr:`releases` releases seen through one site's own
        share (the unconditional guarantee, against a coordinator that bypasses the sum)."""
        return worst_case_epsilon([self.release("")] * self.releases, self.delta)

    def rdp(self, orders: tuple[float, ...] = RDP_ORDERS) -> np.ndarray:
        """The composed RDP curve (for a ledger that composes with other mechanisms)."""
        return ddg_rdp(self.sigma_sq, self.sites * self.draws, self.grid_sensitivity,
                       self.padded, self.releases, orders)


def _bounds(sigma_sq: int, sites: int, grid_sensitivity: float, padded: int, releases: int,
            delta: float) -> dict[str, float]:
    """Epsilon by the KLS RDP bound and by the PLD-plus-slack bound (module docstring)."""
    rdp = rdp_to_epsilon(ddg_rdp(sigma_sq, sites, grid_sensitivity, padded, releases), delta)
    one = (ddg_gaussian_multiplier(sigma_sq, sites, grid_sensitivity),
           ddg_pld_slack(sigma_sq, sites, padded))
    return {"kls-rdp": rdp, "ddg-pld": ddg_pld_epsilon([one] * releases, delta)}


def _within(sigma_sq: int, sites: int, grid_sensitivity: float, padded: int, releases: int,
            delta: float, epsilon: float) -> bool:
    """Whether the smaller of the two valid bounds is at most ``epsilon`` (the PLD one by
    :func:`ddg_pld_within`, then the RDP one only if needed)."""
    one = (ddg_gaussian_multiplier(sigma_sq, sites, grid_sensitivity),
           ddg_pld_slack(sigma_sq, sites, padded))
    if ddg_pld_within([one] * releases, delta, epsilon):
        return True
    rdp = ddg_rdp(sigma_sq, sites, grid_sensitivity, padded, releases)
    return rdp_to_epsilon(rdp, delta) <= epsilon


def calibrate_ddg(epsilon: float, delta: float, *, releases: int, sensitivity: float,
                  dimension: int, sites: int, gamma: float, norm_bound: float,
                  max_draws: int = MAX_DRAWS) -> DDGCalibration:
    """The smallest integer ``s^2`` per draw, with the fewest draws ``k <= max_draws`` per site
    (``s^2 <= MAX_SIGMA_SQ``), such that ``releases`` releases, each the sum of at least
    ``sites`` messages, are (epsilon, delta)-DP per record of the releasing site.

    Args:
        epsilon, delta: the target for the composition of all ``releases``.
        releases: ``T``; sensitivity: ``Delta`` (real units, replace-one, L2).
        dimension: length of the statistic (padded to the next power of two ``D``).
        sites: ``M``; gamma: grid step; norm_bound: public ``B >= ||v||`` (float slack).
    Raises ConfigurationError if even ``max_draws`` draws of ``MAX_SIGMA_SQ`` are not enough.
    """
    padded, grid_sens = _checked_grid(epsilon, delta, releases, sites, dimension, sensitivity,
                                      gamma, norm_bound)
    public = {"epsilon": epsilon, "delta": delta, "releases": releases,
              "sensitivity": sensitivity, "dimension": dimension, "sites": sites,
              "gamma": gamma, "norm_bound": norm_bound, "max_draws": max_draws}
    kept = calibration_cache.load_ddg(public)
    if kept is not None:
        sigma_sq, draws = kept
        if (1 <= draws <= max_draws and 1 <= sigma_sq <= MAX_SIGMA_SQ
                and _within(sigma_sq, sites * draws, grid_sens, padded, releases, delta,
                            epsilon)):
            return _ddg_calibration(sigma_sq, draws, epsilon, delta, releases, sensitivity,
                                    sites, gamma, grid_sens, padded)
        logger.warning("calibration cache: the noise kept for %s does not meet them; "
                       "recalibrating", public)

    sigma_sq, draws = _noise(epsilon, delta, releases, sites, gamma, grid_sens, padded,
                             max_draws)
    calibration_cache.store_ddg(public, sigma_sq, draws)
    return _ddg_calibration(sigma_sq, draws, epsilon, delta, releases, sensitivity, sites,
                            gamma, grid_sens, padded)


def agreed_calibration(epsilon: float, delta: float, *, releases: int, sensitivity: float,
                       dimension: int, sites: int, gamma: float, norm_bound: float,
                       sigma_sq: int, draws: int) -> DDGCalibration:
    """The calibration of a given noise: ``draws`` draws of ``N_Z(0, sigma_sq)`` per site and
    coordinate on grid step ``gamma`` (the noise a secure sum's members agreed on), checked to
    make ``releases`` releases, each the sum of at least ``sites`` such shares, (epsilon,
    delta)-DP per record of the releasing site (the same privacy check as
    :func:`calibrate_ddg`'s; its epsilon is the smaller of the two bounds).

    Raises ConfigurationError, quoting only these public inputs, when the noise is outside
    the sampler's range or below what the target needs.
    """
    padded, grid_sens = _checked_grid(epsilon, delta, releases, sites, dimension, sensitivity,
                                      gamma, norm_bound)
    for name, value, high in (("sigma_sq", sigma_sq, MAX_SIGMA_SQ), ("draws", draws, MAX_DRAWS)):
        if not _count(value) or value > high:
            raise ConfigurationError(f"{name} must be an integer in 1..{high}, got {value!r}")
    if not _within(sigma_sq, sites * draws, grid_sens, padded, releases, delta, epsilon):
        raise ConfigurationError(
            f"the agreed noise ({draws} draw(s) of variance {sigma_sq} grid steps^2 per site, "
            f"grid step {gamma:.4g}) in sums of {sites} sites is below what epsilon={epsilon:g}, "
            f"delta={delta:g} over {releases} releases needs"
        )
    return _ddg_calibration(sigma_sq, draws, epsilon, delta, releases, sensitivity, sites,
                            gamma, grid_sens, padded)


def _checked_grid(epsilon: float, delta: float, releases: int, sites: int, dimension: int,
                  sensitivity: float, gamma: float, norm_bound: float) -> tuple[int, float]:
    """The padded dimension and the rounded sensitivity (grid units) of a release, once every
    input is checked (ConfigurationError, quoting the input, for one out of range)."""
    from fedpca.dp.calibration import check_privacy_parameters

    check_privacy_parameters(epsilon, delta)
    for name, value in (("releases", releases), ("sites", sites), ("dimension", dimension)):
        if not _count(value):
            raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")
    for name, value in (("sensitivity", sensitivity), ("gamma", gamma), ("norm_bound", norm_bound)):
        if not (math.isfinite(value) and value > 0):
            raise ConfigurationError(f"{name} must be a finite number > 0, got {value!r}")
    padded = next_power_of_two(dimension)
    return padded, rounded_sensitivity(sensitivity, gamma, padded, norm_bound)


def _count(value: object) -> bool:
    """Whether ``value`` is an integer (not a bool) of at least 1."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _noise(epsilon: float, delta: float, releases: int, sites: int, gamma: float,
           grid_sens: float, padded: int, max_draws: int) -> tuple[int, int]:
    """:func:`calibrate_ddg`'s search: the fewest draws per site that
    :data:`MAX_SIGMA_SQ` makes enough, then the smallest ``s^2`` with them (both by
    :func:`_within`, which is monotone in each)."""

    def enough(count: int) -> bool:  # monotone: more draws are more noise
        return _within(MAX_SIGMA_SQ, sites * count, grid_sens, padded, releases, delta, epsilon)

    fewest, draws = 0, 1  # not enough(fewest) (0: none tried); enough(draws) once found
    while not enough(draws):
        if draws >= max_draws:
            raise ConfigurationError(
                f"the distributed discrete Gaussian needs more than {max_draws} draws of "
                f"variance {MAX_SIGMA_SQ} grid steps^2 per site for epsilon={epsilon}, "
                f"delta={delta}, releases={releases}, sites={sites}, D={padded}, "
                f"gamma={gamma:.4g}; use a coarser grid (larger gamma) or more sites per sum"
            )
        fewest, draws = draws, min(2 * draws, max_draws)
    while draws - fewest > 1:  # the fewest draws that are enough, by bisection
        middle = (fewest + draws) // 2
        fewest, draws = (fewest, middle) if enough(middle) else (middle, draws)
    # the continuous Gaussian part alone meets the target at K s^2 - t^2 = T (std Delta)^2
    summands = sites * draws
    std = gaussian_std_needed(max(epsilon - PLD_TOLERANCE, epsilon / 2), delta)
    guess = math.ceil((releases * (std * grid_sens) ** 2 + SMOOTHING_VARIANCE) / summands)
    return _smallest(lambda s2: _within(s2, summands, grid_sens, padded, releases, delta,
                                        epsilon), guess), draws


def _smallest(within: Callable[[int], bool], guess: int) -> int:
    """The smallest ``s^2`` in ``[1, MAX_SIGMA_SQ]`` at which the monotone ``within`` holds
    (it holds at :data:`MAX_SIGMA_SQ`), searched outward from ``guess``: steps that double
    bracket it, a bisection closes the bracket. Two checks when the guess is right, where a
    bisection of the whole range takes 26; the answer is the same either way."""
    guess = min(max(guess, 1), MAX_SIGMA_SQ)
    step = 1
    if within(guess):
        low, high = guess - 1, guess
        while low >= 1 and within(low):
            high, step = low, 2 * step
            low = guess - step
        low = max(low, 0)  # not within (0: below the range)
    else:
        low, high = guess, guess + 1
        while high < MAX_SIGMA_SQ and not within(high):
            low, step = high, 2 * step
            high = guess + step
        high = min(high, MAX_SIGMA_SQ)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if within(middle) else (middle, high)
    return high


def _ddg_calibration(sigma_sq: int, draws: int, epsilon: float, delta: float, releases: int,
                     sensitivity: float, sites: int, gamma: float, grid_sens: float,
                     padded: int) -> DDGCalibration:
    """:func:`calibrate_ddg`'s result for the noise ``sigma_sq`` x ``draws`` it found (or
    kept, checked), with the smaller of the two bounds as its epsilon."""
    bounds = _bounds(sigma_sq, sites * draws, grid_sens, padded, releases, delta)
    accounting = min(bounds, key=bounds.__getitem__)
    return DDGCalibration(
        sigma_sq=sigma_sq, draws=draws, sites=sites, releases=releases,
        epsilon=bounds[accounting], delta=delta, target_epsilon=epsilon, gamma=gamma,
        sensitivity=sensitivity, grid_sensitivity=grid_sens, padded=padded,
        tau=ddg_tau(sigma_sq, sites * draws), accounting=accounting,
    )


def _sum_variance_proxy(norm_bound: float, sites_in_sum: int, padded: int, gamma: float,
                        sigma_sq: int, draws: int) -> float:
    """Variance proxy of one coordinate of the rotated signal sum plus the noise sum."""
    return (sites_in_sum * norm_bound / gamma) ** 2 / padded + sites_in_sum * draws * sigma_sq


def wrap_probability(*, norm_bound: float, sites_in_sum: int, dimension: int, gamma: float,
                     sigma_sq: int, draws: int, modulus: int) -> float:
    """Bound on the probability that some coordinate of the integer sum of ``sites_in_sum``
    messages leaves ``[-m/2, m/2)`` (then the centred modular sum is wrong).

    From public quantities only. The rotated scaled sum ``R(sum_i v_i / gamma)`` has norm at most
    ``N B / gamma``, so each coordinate is sub-Gaussian with proxy ``(N B / gamma)^2 / D``
    (Hoeffding over the public signs); the noise sum is sub-Gaussian with proxy ``N k s^2`` (CKS:
    ``N_Z(0, s^2)`` is ``s^2``-sub-Gaussian); they are independent, so the proxies add to ``V``.
    The rounding errors add less than ``N`` in absolute value. A union bound over ``D``
    coordinates gives ``2 D exp(-(m/2 - N)^2 / (2 V))``.
    """
    padded = next_power_of_two(dimension)
    margin = modulus / 2 - sites_in_sum
    if margin <= 0:
        return 1.0
    var = _sum_variance_proxy(norm_bound, sites_in_sum, padded, gamma, sigma_sq, draws)
    return min(1.0, 2 * padded * math.exp(-(margin**2) / (2 * var)))


def minimum_modulus(*, norm_bound: float, sites_in_sum: int, dimension: int, gamma: float,
                    sigma_sq: int, draws: int,
                    max_wrap_probability: float = DEFAULT_WRAP_PROBABILITY) -> int:
    """The smallest power-of-two modulus whose :func:`wrap_probability` is at most the target."""
    padded = next_power_of_two(dimension)
    var = _sum_variance_proxy(norm_bound, sites_in_sum, padded, gamma, sigma_sq, draws)
    half = sites_in_sum + math.sqrt(2 * var * math.log(2 * padded / max_wrap_probability))
    return 1 << math.ceil(math.log2(2 * half))


@dataclass(frozen=True)
class GridChoice:
    """A grid step, per-site noise and modulus that meet the privacy target and the wrap bound.

    Attributes:
        gamma: grid step; inflation: ``sqrt(D) gamma / Delta``; calibration: the noise;
        modulus: ``m``; wrap_probability: the bound at ``m``; sites_in_sum: ``N`` it assumes;
        modulus_needed: the smallest power of two that would also meet the wrap bound.
    """

    gamma: float
    inflation: float
    calibration: DDGCalibration
    modulus: int
    wrap_probability: float
    sites_in_sum: int
    modulus_needed: int


def choose_grid(epsilon: float, delta: float, *, releases: int, sensitivity: float,
                norm_bound: float, dimension: int, sites: int, sites_in_sum: int | None = None,
                modulus: int = DEFAULT_MODULUS,
                max_wrap_probability: float = DEFAULT_WRAP_PROBABILITY,
                max_inflation: float = DEFAULT_MAX_INFLATION,
                max_draws: int = MAX_DRAWS) -> GridChoice:
    """The finest grid (smallest rounding inflation ``sqrt(D) gamma / Delta``, between
    ``max_inflation / INFLATION_RANGE`` and ``max_inflation``) whose calibrated noise needs at
    most ``cap`` draws per site and coordinate and whose modular sum of ``sites_in_sum``
    (default ``sites``) messages wraps with probability at most ``max_wrap_probability``, for
    the first ``cap`` of :data:`DEFAULT_MAX_DRAWS`, twice that, ... up to ``max_draws`` for
    which one qualifies. The choice does not depend on ``max_draws`` when a smaller cap
    serves, so every site and the server derive the same grid from the same public inputs
    (a site then refuses a grid whose draws pass its own limit:
    :meth:`~fedpca.algorithms.site_limits.SiteLimits.require_draws`). Every input is public;
    ``norm_bound`` must be guaranteed by clipping (e.g. ``n_i C^2`` for the upper triangle
    of ``X_i^T X_i``).

    Raises ParameterError, quoting only these public inputs, when no grid qualifies.
    """
    public = {"epsilon": epsilon, "delta": delta, "releases": releases,
              "sensitivity": sensitivity, "norm_bound": norm_bound, "dimension": dimension,
              "sites": sites, "sites_in_sum": sites_in_sum, "modulus": modulus,
              "max_wrap_probability": max_wrap_probability, "max_inflation": max_inflation,
              "max_draws": max_draws}
    common = {key: public[key] for key in ("epsilon", "delta", "releases", "sensitivity",
                                           "norm_bound", "dimension", "sites", "modulus",
                                           "max_wrap_probability")}
    n_sum = sites if sites_in_sum is None else sites_in_sum
    kept = calibration_cache.load_grid(public)
    if kept is not None:
        inflation, cap = kept
        choice = _grid_at(inflation, n_sum=n_sum, max_draws=cap, **common)
        if choice is not None and choice.wrap_probability <= max_wrap_probability:
            return choice
        logger.warning("calibration cache: the grid kept for %s does not meet them; "
                       "choosing it again", public)
    cap = min(DEFAULT_MAX_DRAWS, max_draws)
    while True:
        try:
            choice = _finest_grid(n_sum=n_sum, max_inflation=max_inflation, max_draws=cap,
                                  **common)
        except ParameterError:
            if cap >= max_draws:
                raise
            cap = min(2 * cap, max_draws)
            continue
        calibration_cache.store_grid(public, choice.inflation, cap)
        return choice


def _finest_grid(*, max_inflation: float, **common: Any) -> GridChoice:
    """:func:`choose_grid` for one cap ``max_draws``; ``common``: :func:`_grid_at`'s
    keywords."""
    if common["n_sum"] < common["sites"]:
        raise ConfigurationError(
            f"sites_in_sum={common['n_sum']} must be >= sites={common['sites']}")
    if not 0 < max_inflation < 1:
        raise ConfigurationError(f"max_inflation must be in (0, 1), got {max_inflation}")
    best = _grid_at(max_inflation, **common)
    if best is None or best.wrap_probability > common["max_wrap_probability"]:
        _refuse(best, max_inflation=max_inflation, **common)
    top = math.log(max_inflation)
    low, high = math.log(max_inflation / INFLATION_RANGE), top
    for _ in range(8):  # bisection on log(inflation): feasibility is monotone in it
        mid = (low + high) / 2
        low, high = (low, mid) if _fits(math.exp(mid), **common) else (mid, high)
    return best if high == top else _grid_at(math.exp(high), **common)


def _fits(inflation: float, *, epsilon: float, delta: float, releases: int,
          sensitivity: float, norm_bound: float, dimension: int, sites: int, n_sum: int,
          modulus: int, max_wrap_probability: float, max_draws: int) -> bool:
    """Whether the grid of rounding inflation ``inflation`` qualifies: its noise, searched
    from the public inputs alone (no kept calibration, no epsilon to state), needs at most
    ``max_draws`` draws per site and its sum wraps with probability at most
    ``max_wrap_probability`` (:func:`_grid_at`'s test, for the bisection's trial grids)."""
    padded = next_power_of_two(dimension)
    gamma = _grid_step(inflation, sensitivity, dimension)
    grid_sens = rounded_sensitivity(sensitivity, gamma, padded, norm_bound)
    try:
        sigma_sq, draws = _noise(epsilon, delta, releases, sites, gamma, grid_sens, padded,
                                 max_draws)
    except ConfigurationError:
        return False
    wrap = wrap_probability(norm_bound=norm_bound, sites_in_sum=n_sum, dimension=dimension,
                            gamma=gamma, sigma_sq=sigma_sq, draws=draws, modulus=modulus)
    return wrap <= max_wrap_probability


def _grid_at(inflation: float, *, epsilon: float, delta: float, releases: int,
             sensitivity: float, norm_bound: float, dimension: int, sites: int, n_sum: int,
             modulus: int, max_wrap_probability: float, max_draws: int) -> GridChoice | None:
    """The grid of rounding inflation ``inflation``, its calibrated noise (at most
    ``max_draws`` draws per site) and its wrap probability (``None``: no noise qualifies)."""
    gamma = _grid_step(inflation, sensitivity, dimension)
    try:
        cal = calibrate_ddg(epsilon, delta, gamma=gamma, releases=releases,
                            sensitivity=sensitivity, dimension=dimension, sites=sites,
                            norm_bound=norm_bound, max_draws=max_draws)
    except ConfigurationError:
        return None
    spec = {"norm_bound": norm_bound, "sites_in_sum": n_sum, "dimension": dimension,
            "gamma": gamma, "sigma_sq": cal.sigma_sq, "draws": cal.draws}
    wrap = wrap_probability(modulus=modulus, **spec)
    needed = minimum_modulus(max_wrap_probability=max_wrap_probability, **spec)
    return GridChoice(gamma, inflation, cal, modulus, wrap, n_sum, needed)


def _grid_step(inflation: float, sensitivity: float, dimension: int) -> float:
    """The grid step ``gamma`` of rounding inflation ``sqrt(D) gamma / Delta`` (one formula for
    the bisection's trial grids and the chosen one)."""
    return inflation * sensitivity / math.sqrt(next_power_of_two(dimension))


def _refuse(best: GridChoice | None, *, epsilon: float, delta: float, releases: int,
            dimension: int, sites: int, n_sum: int, modulus: int, max_wrap_probability: float,
            max_inflation: float, max_draws: int, **_: Any) -> NoReturn:
    """Raise ParameterError: no grid of ``max_inflation`` or finer qualifies (``best``, the
    coarsest, has no noise within ``max_draws`` or wraps too often)."""
    padded = next_power_of_two(dimension)
    values = {"epsilon": epsilon, "delta": delta, "releases": releases, "dimension": dimension,
              "sites": sites, "sites_in_sum": n_sum, "modulus": modulus}
    if best is None:
        raise ParameterError(
            f"even at the coarsest allowed grid (rounding inflation {max_inflation:g}) the "
            f"distributed discrete Gaussian needs more than {max_draws} draws of the "
            f"sampler's largest variance {MAX_SIGMA_SQ} grid steps^2 per site (padded "
            f"dimension {padded})", values,
            hint="the sum needs more honest sites ({sites}: the sites' [secure-aggregation] "
                 "min-sites), fewer {releases} (the policies' rounds), a larger {epsilon} (the "
                 "policies' run-epsilon) or a shorter statistic ({dimension}: fewer columns, "
                 "a smaller k)",
        )
    raise ParameterError(
        f"a modular sum can wrap: at the coarsest allowed grid the wrap bound is "
        f"{best.wrap_probability:.3g} (at most {max_wrap_probability:g} allowed) and needs a "
        f"modulus of at least 2^{int(math.log2(best.modulus_needed))} (padded dimension "
        f"{padded})", values,
        hint="sum fewer sites at once ({sites_in_sum}), bound every site's records more "
             "tightly (run_config secagg-max-weight: the largest site's record count) or "
             "use a shorter statistic ({dimension}: fewer columns, a smaller k), or a larger "
             "{modulus} (fedpca's protocol uses 2^31, the largest Flower's encoding passes)",
    )
