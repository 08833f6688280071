"""Exact sampling of the discrete Gaussian ``N_Z(0, sigma^2)`` (integer-valued noise).

``P(Y = y) proportional to exp(-y^2 / (2 sigma^2))`` for every integer ``y``. The sampler is
Algorithm 3 of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020): discrete-Laplace proposals accepted with probability
``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``, every Bernoulli(exp(-gamma)) decided by exact
integer comparisons (Algorithm 1 of the same paper). Nothing in the sampling uses floating
point: the law of every draw is exactly the discrete Gaussian, with no rounding of
probabilities. ``sigma^2`` must be a positive integer (a caller rounds its variance *up*, which
only adds noise); every intermediate value then fits in 64-bit integers for
``sigma^2 <= MAX_SIGMA_SQ``, and the rare proposals too large for that are decided with
Python's unbounded integers, so no proposal is ever dropped.

The integers come from ``numpy.random.Generator.integers`` (exact uniform integers); by
default the generator is seeded from the operating system's entropy for every call.

Vectorised: arrays of proposals are accepted or rejected together, so a million draws take
about a second.
"""

from __future__ import annotations

import math
import secrets

import numpy as np

from fedpca.errors import ConfigurationError

#: Fewest candidates one rejection pass proposes (small requests then rarely need two).
OVERSAMPLE_MIN = 32
#: Largest ``sigma^2`` the int64 fast path supports (``2 sigma^4 t^2``-sized products).
MAX_SIGMA_SQ = 2**26
#: Trials drawn per element in one numpy pass where a run of independent Bernoulli trials is
#: needed until the first failure (more than 8 successes in a row: probability at most
#: exp(-8) = 3e-4 for Bernoulli(exp(-1)), 1/8! for the ``A_K`` of one exp(-g) draw) ...
TRIALS_PER_PASS = 8
#: ... while the pass holds at most this many trials (one per element beyond it).
BATCHED_TRIALS = 8192


def bernoulli_exp_neg(num: np.ndarray, den: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) draws for integer arrays ``num >= 0``, ``den >= 1``."""
    num = np.asarray(num, dtype=np.int64)
    den = np.broadcast_to(np.asarray(den, dtype=np.int64), num.shape).copy()
    result = np.ones(num.shape, dtype=bool)
    whole, frac = np.divmod(num, den)
    # exp(-gamma) = exp(-1)^floor(gamma) * exp(-frac(gamma)): all factors must succeed.
    active = whole > 0
    while active.any():
        idx = np.flatnonzero(active)
        trials = _exp_neg_one_trials(idx.size, rng)
        used = np.minimum(whole[idx], trials.shape[1])
        needed = np.arange(trials.shape[1]) < used[:, None]
        result[idx[~(trials | ~needed).all(axis=1)]] = False
        whole[idx] -= used
        active = (whole > 0) & result
    idx = np.flatnonzero(result & (frac > 0))  # exp(-0) = 1: nothing left to draw
    if idx.size:
        result[idx] = _bernoulli_exp_neg_unit(frac[idx], den[idx], rng)
    return result


def _trials_per_pass(count: int) -> int:
    """Trials per element of one numpy pass over ``count`` elements (see
    :data:`TRIALS_PER_PASS`)."""
    return int(min(TRIALS_PER_PASS, max(1, BATCHED_TRIALS // max(count, 1))))


def _exp_neg_one_trials(count: int, rng: np.random.Generator) -> np.ndarray:
    """A ``count x b`` array of independent exact Bernoulli(exp(-1)) trials.

    Where a run of such trials is needed (a geometric count, a product of ``exp(-1)``
    factors), ``b`` (:func:`_trials_per_pass`) of them are drawn per element at once and the
    unused ones discarded, which leaves the law unchanged.
    """
    batch = _trials_per_pass(count)
    ones = np.ones(count * batch, dtype=np.int64)
    return _bernoulli_exp_neg_unit(ones, ones, rng).reshape(count, batch)


def _leading_successes(failed: np.ndarray) -> np.ndarray:
    """Per row of a boolean ``count x b`` array of failures, the trials before the first
    failure (``b`` if none failed)."""
    if failed.shape[1] == 1:
        return (~failed[:, 0]).astype(np.int64)
    return np.where(failed.any(axis=1), failed.argmax(axis=1), failed.shape[1])


def _bernoulli_exp_neg_unit(num: np.ndarray, den: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-g)) for ``g = num/den`` in [0, 1]: draw ``A_K ~ Bernoulli(g/K)`` for
    ``K = 1, 2, ...`` until one fails; the answer is whether that ``K`` is odd.

    The ``A_K`` of several consecutive ``K`` are drawn in one pass (:func:`_trials_per_pass`)
    and those after the first failure discarded: the same law, fewer passes.
    """
    k = np.ones(num.shape, dtype=np.int64)  # the K of the first failure, once found
    alive = np.ones(num.shape, dtype=bool)
    while alive.any():
        idx = np.flatnonzero(alive)
        width = _trials_per_pass(idx.size)
        K = k[idx, None] + np.arange(width)
        leading = _leading_successes(rng.integers(0, den[idx, None] * K) >= num[idx, None])
        k[idx] += leading
        alive[idx[leading < width]] = False
    return k % 2 == 1


def discrete_laplace(t: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exact draws with ``P(Y = y)`` proportional to ``exp(-|y| / t)`` (integer ``t >= 1``)."""
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        # About 1/0.63 proposals per missing draw (a proposal is kept with probability at
        # least 1 - 1/e), accepted ones taken in order as below: usually one pass.
        missing = size - filled
        n = missing + missing * 3 // 4 + OVERSAMPLE_MIN
        u = rng.integers(0, t, n)
        keep = bernoulli_exp_neg(u, np.full(n, t), rng)
        v = np.zeros(n, dtype=np.int64)
        alive = keep.copy()
        while alive.any():  # V ~ Geometric: successive Bernoulli(exp(-1)) successes
            idx = np.flatnonzero(alive)
            trials = _exp_neg_one_trials(idx.size, rng)
            leading = _leading_successes(~trials)
            v[idx] += leading
            alive[idx] = leading == trials.shape[1]  # every trial succeeded: go on
        x = u + t * v
        negative = rng.integers(0, 2, n).astype(bool)
        keep &= ~(negative & (x == 0))  # -0 would count zero twice
        taken = np.where(negative, -x, x)[keep][: size - filled]
        out[filled : filled + taken.size] = taken
        filled += taken.size
    return out


def discrete_gaussian(
    sigma_sq: int, size: int | tuple[int, ...], rng: np.random.Generator | None = None
) -> np.ndarray:
    """``size`` i.i.d. exact draws from ``N_Z(0, sigma_sq)`` (``sigma_sq`` a positive integer).

    Its variance is slightly below ``sigma_sq`` (see :func:`discrete_gaussian_variance`).
    """
    if isinstance(sigma_sq, bool) or not isinstance(sigma_sq, (int, np.integer)) or sigma_sq < 1:
        raise ConfigurationError(
            f"sigma_sq must be a positive integer (round a variance up), got {sigma_sq!r}"
        )
    if sigma_sq > MAX_SIGMA_SQ:
        raise ConfigurationError(
            f"sigma_sq={sigma_sq} exceeds {MAX_SIGMA_SQ}; choose a coarser grid so the noise "
            "has fewer grid steps"
        )
    rng = rng if rng is not None else np.random.default_rng()
    shape = (size,) if isinstance(size, int) else tuple(size)
    total = math.prod(shape)
    s = int(sigma_sq)
    t = math.isqrt(s) + 1
    out = np.empty(total, dtype=np.int64)
    filled = 0
    # |Y| t - s stays below 2^31 (so its square below 2^62) for |Y| <= LIMIT.
    limit = (2**31 - 1 + s) // t
    while filled < total:
        # Propose more candidates than are missing (accepted ones are i.i.d. draws of the
        # target, taken in order), so a small request rarely needs a second pass.
        y = discrete_laplace(t, max(2 * (total - filled), OVERSAMPLE_MIN), rng)
        magnitude = np.abs(y)
        small = magnitude <= limit
        accept = np.zeros(y.shape, dtype=bool)
        idx = np.flatnonzero(small)
        diff = magnitude[idx] * t - s
        # exp(-(|y| - s/t)^2 / (2 s)) = exp(-(|y| t - s)^2 / (2 s t^2))
        # bernoulli_exp_neg splits floor and remainder first, so both stay within int64.
        accept[idx] = bernoulli_exp_neg(
            diff * diff, np.full(idx.size, 2 * s * t * t, dtype=np.int64), rng
        )
        for i in np.flatnonzero(~small):  # astronomically rare: exact Python integers
            accept[i] = _accept_exact(int(magnitude[i]), s, t, rng)
        taken = y[accept][: total - filled]
        out[filled:filled + taken.size] = taken
        filled += taken.size
    return out.reshape(shape)


def _accept_exact(magnitude: int, s: int, t: int, rng: np.random.Generator) -> bool:
    """The acceptance test for one huge proposal, in unbounded integers (same algorithm)."""
    whole, frac = divmod((magnitude * t - s) ** 2, 2 * s * t * t)
    one = np.ones(1, dtype=np.int64)
    for _ in range(whole):  # each exp(-1) factor; the first failure (p = 1 - 1/e) ends it
        if not _bernoulli_exp_neg_unit(one, one, rng)[0]:
            return False
    k = 1
    while secrets.randbelow(2 * s * t * t * k) < frac:
        k += 1
    return k % 2 == 1


def discrete_gaussian_pmf(sigma_sq: float, support: np.ndarray) -> np.ndarray:
    """``P(Y = y)`` of ``N_Z(0, sigma_sq)`` on ``support`` (normalised over a wide range)."""
    radius = int(math.ceil(40 * math.sqrt(sigma_sq))) + 1
    full = np.arange(-radius, radius + 1)
    mass = np.exp(-(full.astype(np.float64) ** 2) / (2 * sigma_sq))
    return np.exp(-(np.asarray(support, np.float64) ** 2) / (2 * sigma_sq)) / mass.sum()


def discrete_gaussian_variance(sigma_sq: float) -> float:
    """The variance of ``N_Z(0, sigma_sq)`` (below ``sigma_sq``; equal to it in the limit)."""
    radius = int(math.ceil(40 * math.sqrt(sigma_sq))) + 1
    full = np.arange(-radius, radius + 1)
    return float((discrete_gaussian_pmf(sigma_sq, full) * full.astype(np.float64) ** 2).sum())
