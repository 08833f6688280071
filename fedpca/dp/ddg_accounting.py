"""The distributed discrete Gaussian (DDG)'s accounting: the privacy of a sum of discrete Gaussians.

Calibration, grid and modulus are :mod:`fedpca.dp.distributed_gaussian`'s; this module holds
the bounds it (and the accountant, :mod:`fedpca.dp.accountant`) evaluates, and imports neither.

Reference: Kairouz, Liu and Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation" (ICML 2021), called KLS below; the sampler and the
sub-Gaussian tail of ``N_Z(0, s^2)`` are from Canonne, Kamath and Steinke, "The Discrete
Gaussian for Differential Privacy" (NeurIPS 2020), called CKS.

Pipeline (encoding in ``fedpca.dp.ddg_encoding``): a site with statistic ``v`` (public
replace-one L2 sensitivity ``Delta``, public norm bound ``||v|| <= B``) sends
``(floor(R(v / gamma) + U) + noise) mod m``: ``R`` the public randomised Hadamard rotation
(``fedpca.dp.hadamard``, padded dimension ``D``), ``U`` uniform on ``[0, 1)^D``, noise
the sum of ``k`` i.i.d. ``N_Z(0, s^2)`` per coordinate with an integer ``s^2``. The server decodes
the modular sum of at least ``M`` such messages.

**Unit of privacy: one record of one site (replace-one).** Two neighbouring datasets give
statistics ``v, v'`` with ``||v - v'|| <= Delta``. Privacy of the rounded vector, for every
``U``: write ``y = R(v/gamma)`` (exact arithmetic first) and couple the two roundings through the
same ``U``. For reals ``a >= b``, ``floor(a + u) - floor(b + u)`` is an integer in
``[a - b - 1, a - b + 1)``, so its absolute value is at most ``ceil(a - b) < (a - b) + 1``. Hence
``|R_U(y)_i - R_U(y')_i| <= |y_i - y'_i| + 1`` and, by the triangle inequality and because the
rotation is orthogonal, ``||R_U(y) - R_U(y')||_2 <= Delta / gamma + sqrt(D)`` for *every* ``U``.
Each fixed ``U`` thus gives an additive-noise mechanism whose two neighbouring inputs differ by
an integer vector of at most that norm, covered by the bound below; the real mechanism is the
mixture over ``U`` (the same ``U`` law for both inputs), and the hockey-stick divergence (like
``exp((alpha - 1) D_alpha)``) is jointly convex, so the mixture obeys the same bound. Because the
bound holds for every ``U``, it holds whatever the
law of ``U`` (the generator's 53-bit uniforms included): the law of ``U`` only decides that the
rounding is unbiased. Floating point: the computed ``y`` differs from the exact one by at most
``(log2 D + 4) 2^-52 (||v||/gamma + sqrt(D))`` in L2 per dataset; twice that is added to the
sensitivity (:func:`rounded_sensitivity`), with ``||v|| <= B``. KLS's conditional-rounding
bound is about one client's whole vector of norm at most ``c``, not about the difference of
two aggregates, and is not used.

**The sum of M discrete Gaussians** is not a discrete Gaussian. KLS bound it (Proposition 14,
in RDP form, as the authors' own accounting code implements it): with ``a = Delta_2^2 / (M s^2)``
and ``tau = 10 sum_{k=1}^{M-1} exp(-2 pi^2 s^2 k / (k + 1))``, for every order ``alpha >= 1``
``D_alpha(Z || Z + delta) <= min(alpha a / 2 + tau D, alpha (sqrt(a) + tau sqrt(D))^2 / 2)``
(valid for ``s >= 1/2``, i.e. every integer ``s^2 >= 1``). Their Theorem 1 is also quoted in
the concentrated form ``eps = min(sqrt(a + tau D / 2), sqrt(a) + tau sqrt(D))``, whose first
branch gives ``alpha a / 2 + alpha tau D / 4`` instead; at every order this module uses the
larger of the two, ``alpha a / 2 + tau D max(1, alpha / 4)``, so either reading is honoured
(the tests check the result against exact Renyi and hockey-stick divergences of the sum).
The sum over *more* than ``M`` sites is at least as private (adding independent noise is
post-processing), so ``M`` is the minimum number of honest sites in every sum. ``tau`` is about
``1e-16`` once ``s^2 >= 4``, so for practical noise levels the bound is the Gaussian one at
sensitivity ``Delta / gamma + sqrt(D)`` and ``M s^2`` total variance.

**Several draws per site.** The exact sampler supports ``s^2 <= MAX_SIGMA_SQ``. A site that
needs more noise adds ``k`` independent ``N_Z(0, s^2)`` draws per coordinate; the sum over
``M`` sites is then the sum of ``M k`` i.i.d. discrete Gaussians, which is exactly KLS's setting
with ``M k`` summands (``n = M k`` in ``a`` and ``tau``). :func:`calibrate_ddg` uses the fewest
draws that fit.

``T`` releases of a site compose by adding their RDP curves; (epsilon, delta) comes from
dp-accounting's RDP-to-DP conversion (``compute_epsilon``, the bound of CKS Proposition 12)
over :data:`RDP_ORDERS`. The modular reduction, the centring, the un-rotation and the unpadding
are post-processing of the exact integer sum, so they cost nothing.

**A second, tighter bound: the Gaussian's privacy loss distribution plus a pointwise slack**
(:func:`ddg_pld_epsilon`). The RDP route costs about 15% more noise than the continuous
Gaussian's exact PLD at ``T = 11`` releases. Two pointwise (max-divergence) facts close the gap;
both follow from Poisson summation, ``sum_j exp(-(j - x)^2 / (2 v)) = sqrt(2 pi v) (1 + e(x))``
with ``|e(x)| <= e_v = 2 sum_{n>=1} exp(-2 pi^2 v n^2)`` for every real ``x``:

* *(A) the sum is a discrete Gaussian up to a factor.* ``N_Z(0, k s^2) * N_Z(0, s^2)`` at ``x``
  is ``exp(-x^2 / (2 (k+1) s^2))`` times such a sum with ``v = k s^2 / (k+1)``; both it and
  ``N_Z(0, (k+1) s^2)`` are normalised, so their ratio lies in ``[(1-e_v)/(1+e_v),
  (1+e_v)/(1-e_v)]`` everywhere. Convolution with a non-negative kernel keeps pointwise
  ratios, so by induction the sum of ``K`` i.i.d. ``N_Z(0, s^2)`` is within the factor
  ``exp(+-a_K)``, ``a_K = sum_{k=1}^{K-1} log((1 + e_k) / (1 - e_k))``, of
  ``N_Z(0, K s^2)`` (KLS's ``tau`` is a looser form of ``a_K``).
* *(B) a discrete Gaussian is a post-processed continuous one up to a factor.* Draw
  ``X ~ N(0, sigma^2 - t^2)`` and output ``N_Z(X, t^2)`` (the discrete Gaussian centred at the
  real ``X``). This map commutes with integer shifts, and its output pmf at ``k`` is the
  ``N(0, sigma^2)`` density at ``k`` divided by a Poisson sum in ``[1 - e_t, 1 + e_t]``, while
  ``N_Z(0, sigma^2)(k)`` is that density divided by one in ``[1 - e_sigma, 1 + e_sigma]``: the
  ratio lies in ``[(1 - e_sigma)/(1 + e_t), (1 + e_sigma)/(1 - e_t)]``.

Per coordinate the two factors multiply, over ``D`` independent coordinates and ``T`` adaptively
composed releases they multiply again: every transcript's probability is within
``exp(+-H)``, ``H = sum_releases D (a_K + b)``, of the probability of the same transcript from
integer-shift-equivariant post-processing of ``T`` Gaussian releases with noise
``sqrt(K s^2 - t^2)`` and sensitivity ``Delta / gamma + sqrt(D)`` (per fixed ``U``, as above).
Hence ``delta(eps) <= exp(H) delta_Gauss(eps - 2 H)`` (hockey-stick divergence, then data
processing), and the Gaussians compose exactly into one Gaussian whose delta curve
dp-accounting gives in closed form (:func:`ddg_pld_epsilon`). With ``t^2 = 4`` and practical noise
``H`` is below ``1e-30``. Both bounds are valid; every epsilon here is the smaller of the two.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

#: RDP orders for the conversion to (epsilon, delta): dense and geometric on (1.01, 10^4].
RDP_ORDERS = tuple(float(a) for a in 1.0 + np.geomspace(0.011, 1e4, 600))
#: Unit roundoff margin used in the floating-point slack of the rotated sensitivity.
FLOAT_UNIT = 2.0**-52
#: Width to which :func:`ddg_pld_epsilon` brackets epsilon (its value is rounded up to it).
PLD_TOLERANCE = 1e-9


def ddg_tau(sigma_sq: int, sites: int) -> float:
    """KLS's ``tau = 10 sum_{k=1}^{M-1} exp(-2 pi^2 s^2 k / (k + 1))``."""
    k = np.arange(1, sites, dtype=np.float64)
    return float(10.0 * np.exp(-2.0 * math.pi**2 * sigma_sq * k / (k + 1)).sum())


#: ``t^2`` of bound (B) in the module docstring: the discrete smoothing of the Gaussian.
SMOOTHING_VARIANCE = 4.0
#: Poisson-sum terms for :func:`poisson_error` (the terms decay like ``exp(-2 pi^2 v n^2)``).
POISSON_TERMS = np.arange(1, 40, dtype=np.float64)


def poisson_error(variance: np.ndarray | float) -> np.ndarray:
    """``e_v = 2 sum_{n>=1} exp(-2 pi^2 v n^2)``: the largest relative deviation of
    ``sum_j exp(-(j - x)^2 / (2 v))`` from ``sqrt(2 pi v)`` over real ``x`` (per ``v``)."""
    v = np.asarray(variance, dtype=np.float64)[..., None]
    return 2.0 * np.exp(-2.0 * math.pi**2 * v * POISSON_TERMS**2).sum(axis=-1)


def _log_ratio(e_up: np.ndarray | float, e_down: np.ndarray | float) -> np.ndarray:
    return np.log1p(e_up) - np.log1p(-np.asarray(e_down))


def ddg_pld_slack(sigma_sq: int, summands: int, padded: int) -> float:
    """``D (a_K + b)``: the pointwise log-factor between one release's noise (the sum of
    ``summands`` i.i.d. ``N_Z(0, sigma_sq)`` per coordinate, ``padded`` coordinates) and
    post-processed continuous Gaussian noise (module docstring, bounds A and B)."""
    k = np.arange(1, summands, dtype=np.float64)
    e_k = poisson_error(sigma_sq * k / (k + 1))
    a = float(_log_ratio(e_k, e_k).sum())
    total = summands * sigma_sq
    e_t, e_s = poisson_error(_smoothing(total)), poisson_error(total)
    b = float(max(_log_ratio(e_s, e_t), _log_ratio(e_t, e_s)))
    return padded * (a + b)


def _smoothing(total_variance: float) -> float:
    return min(SMOOTHING_VARIANCE, total_variance / 2)


def ddg_gaussian_multiplier(sigma_sq: int, summands: int, sensitivity: float) -> float:
    """Noise multiplier of the continuous Gaussian that one release is, up to the slack,
    a post-processing of: ``sqrt(K s^2 - t^2) / Delta`` (grid units)."""
    total = summands * sigma_sq
    return math.sqrt(total - _smoothing(total)) / sensitivity


def ddg_pld_within(releases: list[tuple[float, float]], delta: float, epsilon: float) -> bool:
    """Whether :func:`ddg_pld_epsilon` of ``releases`` is at most ``epsilon``, by one point of
    the Gaussian delta curve instead of a bisection: true only when the Gaussian part's
    epsilon is at most ``epsilon - 2H`` less the bisection's tolerance, so a true answer
    implies the bisection's value is within ``epsilon`` (never the reverse error)."""
    curve, slack = _composed_curve(releases)
    gaussian_epsilon = epsilon - 2 * slack - PLD_TOLERANCE
    if gaussian_epsilon < 0:
        return False
    return curve.get_delta_for_epsilon(gaussian_epsilon) <= delta * math.exp(-slack)


def _composed_curve(releases: list[tuple[float, float]]) -> tuple[Any, float]:
    """The exact delta curve (dp-accounting's ``GaussianPrivacyLoss``) of the one Gaussian
    that ``releases`` (``(multiplier, slack)`` pairs) compose into, multiplier
    ``(sum_i z_i^-2)^-1/2``, and their total slack ``H``."""
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    combined = sum(z**-2 for z, _ in releases) ** -0.5
    return GaussianPrivacyLoss(combined, sensitivity=1.0), sum(h for _, h in releases)


@functools.lru_cache(maxsize=256)
def gaussian_std_needed(epsilon: float, delta: float) -> float:
    """The standard deviation, per unit of sensitivity, of the one Gaussian release whose
    exact delta curve meets (``epsilon``, ``delta``) (dp-accounting's own search, to 1e-7;
    cached). Only a starting point for searches whose every answer is checked by
    :func:`ddg_pld_within`: never a privacy decision itself."""
    from dp_accounting.pld.common import DifferentialPrivacyParameters
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    guarantee = DifferentialPrivacyParameters(epsilon, delta)
    return GaussianPrivacyLoss.from_privacy_guarantee(guarantee).standard_deviation


def ddg_pld_epsilon(releases: list[tuple[float, float]], delta: float) -> float:
    """Epsilon at ``delta`` of releases given as ``(Gaussian multiplier, slack)`` pairs
    (:func:`ddg_gaussian_multiplier`, :func:`ddg_pld_slack`): ``eps_Gauss(delta e^-H) + 2H``
    with ``H`` the total slack. Gaussian releases compose exactly into one Gaussian of
    multiplier ``(sum_i z_i^-2)^-1/2`` (their privacy loss distributions are Gaussian), whose
    exact delta curve is dp-accounting's ``GaussianPrivacyLoss``; epsilon is found by bisection
    on that decreasing curve (to 1e-9, rounded up). The bisection skips the comparisons that
    the curve's monotonicity already answers, from points next to its root found first by
    Brent's method: the same value from about 15 evaluations of the curve instead of 35."""
    curve, slack = _composed_curve(releases)
    target = delta * math.exp(-slack)

    def exceeds(epsilon: float) -> bool:
        return curve.get_delta_for_epsilon(epsilon) > target

    low, high = 0.0, 1.0
    while exceeds(high):
        low, high = high, 2 * high
        if high > 1e6:
            return math.inf
    if not exceeds(0.0):
        return 2 * slack
    above, below = _root_bracket(curve, target, low, high)
    while high - low > PLD_TOLERANCE:
        mid = (low + high) / 2
        if mid <= above or (mid < below and exceeds(mid)):
            low = mid
        else:
            high = mid
    return high + 2 * slack


def _root_bracket(curve: Any, target: float, low: float, high: float) -> tuple[float, float]:
    """Points ``above <= below`` of ``[low, high]`` (where the decreasing delta ``curve``
    crosses ``target``) with the curve above ``target`` at ``above`` (or ``above == low``)
    and not above it at ``below`` (or ``below == high``): about 1e-11 on either side of the
    crossing that Brent's method finds on the log of the curve (none when ``target`` is 0: a
    slack so large that ``delta e^-H`` underflows)."""
    from scipy import optimize

    if not target > 0:
        return low, high
    floor = max(target * 1e-10, math.ulp(0.0))  # for a curve that underflows to 0

    def gap(epsilon: float) -> float:
        return math.log(max(curve.get_delta_for_epsilon(epsilon), floor) / target)

    root = optimize.brentq(gap, low, high, xtol=1e-12, rtol=1e-12)
    above, below = low, high
    width = 1e-11 + 1e-12 * root
    for epsilon in (root - width, root + width):
        if above < epsilon < below:
            if curve.get_delta_for_epsilon(epsilon) > target:
                above = epsilon
            else:
                below = epsilon
    return above, below


def rounded_sensitivity(sensitivity: float, gamma: float, padded: int, norm_bound: float) -> float:
    """L2 sensitivity, in grid units, of the rounded rotated vector (module docstring):
    ``Delta / gamma + sqrt(D)`` plus twice the floating-point slack of the rotation."""
    slack = (math.log2(padded) + 4) * FLOAT_UNIT * (norm_bound / gamma + math.sqrt(padded))
    return sensitivity / gamma + math.sqrt(padded) + 2 * slack


def ddg_rdp(sigma_sq: int, sites: int, sensitivity: float, padded: int, releases: int = 1,
            orders: tuple[float, ...] = RDP_ORDERS) -> np.ndarray:
    """RDP curve (KLS) of ``releases`` sums of ``sites`` i.i.d. ``N_Z(0, sigma_sq)`` vectors of
    padded dimension ``padded`` (``sites`` counts summands: sites times draws per site), for
    neighbouring inputs that differ by at most ``sensitivity`` in L2 (grid units)."""
    alpha = np.asarray(orders, dtype=np.float64)
    a = sensitivity**2 / (sites * sigma_sq)
    tau = ddg_tau(sigma_sq, sites)
    first = alpha * a / 2 + tau * padded * np.maximum(1.0, alpha / 4)
    second = alpha * (math.sqrt(a) + tau * math.sqrt(padded)) ** 2 / 2
    return releases * np.minimum(first, second)


def rdp_to_epsilon(rdp: np.ndarray, delta: float, orders: tuple[float, ...] = RDP_ORDERS) -> float:
    """Epsilon at ``delta`` of an RDP curve (dp-accounting's conversion)."""
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    return float(compute_epsilon(orders, rdp, delta)[0])


def rdp_to_delta(rdp: np.ndarray, epsilon: float, orders: tuple[float, ...] = RDP_ORDERS) -> float:
    """Delta at ``epsilon`` of an RDP curve (dp-accounting's conversion)."""
    from dp_accounting.rdp.rdp_privacy_accountant import compute_delta

    return float(compute_delta(orders, rdp, epsilon)[0])


def zcdp_epsilon(rho: float, delta: float, orders: tuple[float, ...] = RDP_ORDERS) -> float:
    """Epsilon at ``delta`` of ``rho``-zCDP, via dp-accounting's ``ZCDpEvent``."""
    import dp_accounting

    accountant = dp_accounting.rdp.RdpAccountant(orders=orders)
    accountant.compose(dp_accounting.ZCDpEvent(rho))
    return float(accountant.get_epsilon(delta))


