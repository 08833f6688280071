"""Fast exact sampling of the discrete Gaussian ``N_Z(0, sigma^2)`` for an integer ``sigma``
(:func:`discrete_gaussian_scale`) or an integer ``sigma^2`` (:func:`discrete_gaussian`).

``P(Y = y)`` proportional to ``exp(-y^2 / (2 sigma^2))`` for every integer ``y``: exactly, not
approximately. The algorithm is Algorithm 3 of Canonne, Kamath and Steinke, "The Discrete
Gaussian for Differential Privacy" (NeurIPS 2020): a discrete-Laplace proposal ``P(Y = y)``
proportional to ``exp(-|y| / t)`` for an integer ``t >= 1``, accepted with probability
``exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2))``; the product of the two is proportional to
``exp(-y^2 / (2 sigma^2))`` whatever ``t``. For an integer ``sigma``, ``t = sigma`` and the
acceptance is ``exp(-(|y| - sigma)^2 / (2 sigma^2))`` (about 76% of proposals are accepted);
for an integer ``s = sigma^2`` that is not a square, ``t = floor(sqrt(s)) + 1`` (the paper's
choice) and the acceptance is ``exp(-(t |y| - s)^2 / (2 s t^2))``, a ratio of integers. What
follows is how each random decision is made.

**Lazy uniforms.** Every decision compares one uniform ``U`` on ``[0, 1)`` with a number:
the acceptance is ``[U < exp(-r)]``, and the proposal's magnitude is ``k = floor(-t ln U)``,
i.e. the ``k`` with ``exp(-(k + 1) / t) < U <= exp(-k / t)`` (then ``P(k) = exp(-k/t) (1 -
exp(-1/t))``, the geometric law of a discrete Laplace magnitude).
``U``'s first 53 bits are one ``Generator.random()`` value ``u``: ``U`` lies in ``[u, u +
2^-53)``. numpy evaluates the function approximately, with a stated error bound; when the
bound makes the decision the same for every ``U`` in that interval, it is certain and made
in numpy:

* magnitude: ``x = -t ln(u + 2^-54)`` in float64; ``k = floor(x)`` is certain when ``x``
  is farther than ``E = 2 (t 2^-53 / u + 2^-48 (x + 1))`` from an integer (``E`` covers
  the width of ``U``'s interval and the float64 ``log``, assumed within ``2^-50`` relative);
* acceptance: ``r = offset^2 / den`` in float64 (``offset`` and ``den`` the integers above;
  for ``r <= 64`` its three roundings move it by less than ``2^-46``), then
  ``p = exp(-min(r, 64))`` in float32 (:data:`ACCEPT_MARGIN` relative covers these, the
  float32 argument and ``exp``, assumed within ``2^-20``); ``U < exp(-r)`` is certain when
  ``u + 2^-53 <= p (1 - margin)``, ``U >= exp(-r)`` when ``u >= p (1 + margin)`` (beyond
  ``r = 64``, ``exp(-r) < 2^-53`` so only ``u = 0`` is undecided).

Otherwise (probability about ``2^-16`` per acceptance, ``2^-47 t`` per magnitude) the
element goes to an exact path in Python integers: further 64-bit words extend ``U``'s bits
and ``exp`` is bracketed with the ``decimal`` module (correctly rounded, with an explicit
error bound) at growing precision, until the comparison is certain. No decision is ever
taken on an approximation: the law is exactly the discrete Gaussian, provided numpy's float64
``log`` and float32 ``exp`` are within the stated errors (their documented errors are a few
units in the last place, 16 to 32 times smaller; ``tests/test_exact_noise.py`` checks both
against ``decimal``). Timing depends on the noise drawn (more proposals, rarely the exact
path), never on the data.

Randomness: 64-bit words of the given ``numpy.random.Generator``'s bit generator (a site
passes its fresh, OS-seeded generator).
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fedpca.errors import ConfigurationError
from fedpca.dp.discrete_gaussian import MAX_SIGMA_SQ

#: Relative margin on float32 ``exp(-r)``, ``r <= 64``, in the acceptance test (the float32
#: argument costs ``64 * 2^-24 = 2^-18``, the ``exp`` at most ``2^-20``).
ACCEPT_MARGIN = 2.0**-16
#: Largest ``r`` given to float32 ``exp`` (``exp(-64) < 2^-53``: a certain rejection).
ACCEPT_CLIP = 64.0
#: Relative error assumed of float64 ``log`` (4 units in the last place), doubled with the
#: multiplication's rounding in the magnitude's bound.
LOG_ERROR = 2.0**-48
#: Bits of ``U`` in its first draw: ``Generator.random()`` is ``a 2^-53``, ``a`` uniform on
#: ``[0, 2^53)``, for every numpy bit generator (the top 53 bits of a 64-bit word).
FIRST_BITS = 53
ULP = 2.0**-FIRST_BITS
#: Largest ``sigma`` supported (``(|y| - sigma)^2`` stays exact in float64 and int64).
MAX_SIGMA = 2**30
#: Decimal digits of the first exact bracket (20 more per refinement).
DECIMAL_DIGITS = 40
#: Proposals handled per numpy pass (its arrays stay in the processor's cache).
BLOCK = 1 << 15


def discrete_gaussian_scale(sigma: int, size: int | tuple[int, ...],
                            rng: np.random.Generator) -> np.ndarray:
    """``size`` i.i.d. exact draws (int64) from ``N_Z(0, sigma^2)``, ``sigma`` a positive
    integer up to :data:`MAX_SIGMA`. Their variance is ``sigma^2`` within a relative
    ``1e-8`` once ``sigma >= 2``
    (:func:`fedpca.dp.discrete_gaussian.discrete_gaussian_variance`)."""
    sigma = _checked(sigma, "sigma", MAX_SIGMA, "a standard deviation")
    return _draws(_Proposal(sigma, 1, sigma, 2 * sigma * sigma), size, rng)


def discrete_gaussian(sigma_sq: int, size: int | tuple[int, ...],
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """``size`` i.i.d. exact draws (int64) from ``N_Z(0, sigma_sq)``, ``sigma_sq`` a positive
    integer up to :data:`~fedpca.dp.discrete_gaussian.MAX_SIGMA_SQ` (a caller rounds its
    variance *up*, which only adds noise). ``rng``: by default seeded from the operating
    system for this call. Its variance is slightly below ``sigma_sq``
    (:func:`~fedpca.dp.discrete_gaussian.discrete_gaussian_variance`)."""
    s = _checked(sigma_sq, "sigma_sq", MAX_SIGMA_SQ, "a variance")
    rng = rng if rng is not None else np.random.default_rng()
    root = math.isqrt(s)
    if root * root == s:
        return discrete_gaussian_scale(root, size, rng)
    t = root + 1
    return _draws(_Proposal(t, t, s, 2 * s * t * t), size, rng)


def _checked(value: object, name: str, limit: int, what: str) -> int:
    """``value`` as an ``int``, refused unless it is a positive integer up to ``limit``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigurationError(
            f"{name} must be a positive integer (round {what} up), got {value!r}"
        )
    if value > limit:
        raise ConfigurationError(
            f"{name}={value} exceeds {limit} (grid steps); choose a coarser grid so the noise "
            "has fewer grid steps"
        )
    return int(value)


@dataclass(frozen=True)
class _Proposal:
    """Discrete-Laplace proposals of scale ``t``, each accepted with probability
    ``exp(-(scale |y| - centre)^2 / den)`` (module docstring)."""

    t: int
    scale: int
    centre: int
    den: int


def _draws(proposal: _Proposal, size: int | tuple[int, ...],
           rng: np.random.Generator) -> np.ndarray:
    """``size`` accepted proposals, in order (int64)."""
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    total = math.prod(shape)
    out = np.empty(total, dtype=np.int64)
    filled = 0
    while filled < total:
        missing = total - filled
        proposals = min(missing + missing // 3 + 64, BLOCK)  # about 76% are accepted
        taken = _accepted(proposal, proposals, rng)[:missing]
        out[filled:filled + taken.size] = taken
        filled += taken.size
    return out.reshape(shape)


def _accepted(proposal: _Proposal, count: int, rng: np.random.Generator) -> np.ndarray:
    """The accepted ones of ``count`` discrete-Laplace proposals, in order."""
    uniforms = rng.random(2 * count)
    magnitude = _magnitudes(proposal.t, uniforms[:count], rng)
    signs = np.unpackbits(rng.bit_generator.random_raw(-(-count // 64)).view(np.uint8))
    negative = signs[:count].view(bool)
    keep = _below_exp(uniforms[count:], proposal.scale * magnitude - proposal.centre,
                      proposal.den, rng)
    keep &= ~(negative & (magnitude == 0))  # -0 would count zero twice
    np.negative(magnitude, out=magnitude, where=negative)
    return magnitude[keep]


def _magnitudes(t: int, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per prefix ``u = a 2^-53`` of ``U``: ``k = floor(-t ln U)``, certain when the
    float64 value is farther than its error bound from an integer (module docstring)."""
    x = u + ULP / 2
    np.log(x, out=x)
    x *= -t
    k = np.floor(x)
    bound = x + 1
    bound *= LOG_ERROR
    with np.errstate(divide="ignore"):
        bound += (t * ULP) / u  # u = 0: infinite, never certain
    bound *= 2
    certain = (x - k) > bound
    k += 1
    k -= x
    certain &= k > bound  # k + 1 - x
    magnitude = np.floor(x).astype(np.int64)
    for i in np.flatnonzero(~certain):
        magnitude[i] = _exact_magnitude(t, _prefix(u[i]), rng)
    return magnitude


def _below_exp(u: np.ndarray, offset: np.ndarray, den: int,
               rng: np.random.Generator) -> np.ndarray:
    """Per element ``[U < exp(-offset^2 / den)]``, ``U``'s prefix ``u = a 2^-53`` (the float32
    ``exp`` and its margin: module docstring)."""
    r = offset.astype(np.float64)
    r *= r
    r /= den
    np.minimum(r, ACCEPT_CLIP, out=r)
    p = np.exp(-r.astype(np.float32))
    below = (u + ULP) <= p * np.float32(1 - ACCEPT_MARGIN)
    maybe = u <= p * np.float32(1 + ACCEPT_MARGIN)
    for i in np.flatnonzero(maybe != below):
        below[i] = _exact_below_exp(Fraction(int(offset[i]) ** 2, den), _prefix(u[i]), rng)
    return below


def _prefix(u: float) -> int:
    """``a`` for ``u = a 2^-53`` (exact)."""
    return int(u * 2.0**FIRST_BITS)


# --- the exact path: Python integers and decimal brackets --------------------------------

def _exp_bracket(r: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """``lo <= exp(-r) <= hi`` for a rational ``r >= 0``: ``decimal`` rounds ``r`` to
    ``digits`` significant digits (relative error ``10^(1-digits)``) and its ``exp`` is
    correctly rounded (half a unit in the last place); the bracket widens both by
    ``(2 + 2 r) 10^(1-digits)``, more than their effect on ``exp(-r)``."""
    with decimal.localcontext() as context:
        context.prec = digits
        value = (-(decimal.Decimal(r.numerator) / decimal.Decimal(r.denominator))).exp()
    slack = Fraction(2 + 2 * math.ceil(r), 10 ** (digits - 1))
    value = Fraction(value)
    return value * (1 - slack), value * (1 + slack)


def _exact_below_exp(r: Fraction, leading: int, rng: np.random.Generator) -> bool:
    """``[U < exp(-r)]`` for ``U`` in ``[leading, leading + 1) 2^-53``, deciding with more
    bits of ``U`` and a finer bracket of ``exp(-r)`` until it is certain."""
    numerator, bits, digits = leading, FIRST_BITS, DECIMAL_DIGITS
    while True:
        low, high = Fraction(numerator, 1 << bits), Fraction(numerator + 1, 1 << bits)
        lo, hi = _exp_bracket(r, digits)
        if high <= lo:
            return True
        if low >= hi:
            return False
        numerator, bits = _more_bits(numerator, bits, rng)
        digits += 20


def _exact_magnitude(t: int, leading: int, rng: np.random.Generator) -> int:
    """The ``k`` with ``exp(-(k+1)/t) < U <= exp(-k/t)`` for ``U`` in
    ``[leading, leading + 1) 2^-53``, with more bits of ``U`` until it is certain."""
    numerator, bits, digits = leading, FIRST_BITS, DECIMAL_DIGITS
    while True:
        if numerator > 0:
            low, high = Fraction(numerator, 1 << bits), Fraction(numerator + 1, 1 << bits)
            guess = _log_guess(t, numerator, bits, digits)
            for k in (guess - 1, guess, guess + 1):
                if k < 0:
                    continue
                if (_exp_bracket(Fraction(k, t), digits)[0] >= high
                        and _exp_bracket(Fraction(k + 1, t), digits)[1] <= low):
                    return k
        numerator, bits = _more_bits(numerator, bits, rng)
        digits += 20


def _log_guess(t: int, numerator: int, bits: int, digits: int) -> int:
    """``floor(-t ln U)`` at ``U``'s midpoint, to ``digits`` digits (a candidate only)."""
    with decimal.localcontext() as context:
        context.prec = digits
        middle = decimal.Decimal(2 * numerator + 1) / decimal.Decimal(1 << (bits + 1))
        return int((-t * middle.ln()).to_integral_value(rounding=decimal.ROUND_FLOOR))


def _more_bits(numerator: int, bits: int, rng: np.random.Generator) -> tuple[int, int]:
    """``U``'s next 64 bits appended (a fresh word: ``U``'s bits are i.i.d. fair)."""
    word = int(rng.bit_generator.random_raw())
    return (numerator << 64) | word, bits + 64
