"""Empirical privacy audit: a distinguishing attack on one release of a Gaussian mechanism.

The attack (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021, "Adversary instantiation"):

1. **Neighbouring datasets** (:func:`worst_case_neighbours`): the rest of the data fixed, one
   record replaced, ``x = C e_1`` in the original and ``y = C e_2`` in the neighbour. This pair
   attains the replace-one sensitivity ``sqrt(2) C^2`` of every statistic fedpca releases
   (``diag(X^T X)``, the upper triangle of ``X^T X``, and ``X^T X Q`` when the request
   ``Q`` spans ``e_1, e_2``: :func:`worst_case_basis`), so the two output distributions are
   as far apart as the calibration allows.
2. **Trials**: many independent releases on each dataset, each by a fresh site (fresh ledger,
   independent noise). Noise is unseeded (OS randomness) unless a seed is given; a seed only
   picks the per-trial noise seeds, the noise itself is still drawn by the mechanism. A
   seeded audit pairs the two datasets' trials (common random numbers): trial ``i`` on the
   original and trial ``i`` on the neighbour draw their noise from the same seed. Each
   dataset's trials are still independent releases of that dataset, so each error count
   below is still binomial and the bound of step 4 still holds (it combines the two
   intervals by a union bound, which needs no independence between them); what pairing
   changes is the calibration, where noise the two releases of a pair share cancels in
   their difference (:func:`_calibrate`).
3. **Test statistic**: the projection of a release onto the difference of the two mean
   outputs (the noiseless outputs, estimated on a separate *calibration* set of trials,
   exactly when the pairs share their noise); for two Gaussians with the same isotropic
   covariance this is the likelihood-ratio test. The guess is "neighbour" when the
   projection exceeds a threshold, also chosen on the calibration set
   (:func:`choose_threshold`), so the evaluation trials are unbiased.
4. **Bound**: with ``FPR`` (guessing "neighbour" on the original) and ``FNR`` (guessing
   "original" on the neighbour) counted on the evaluation trials, every (eps, delta)-DP
   mechanism satisfies ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta``.
   Plugging in the upper ends of the two-sided Clopper-Pearson intervals (each at level
   ``1 - alpha``, so both hold together with probability ``>= 1 - alpha``) gives
   ``eps_lb = max(log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u))``,
   floored at 0: the mechanism is *not* (eps, delta)-DP for any ``eps < eps_lb``, with
   confidence ``1 - alpha``.

What the audit proves and what it does not: ``eps_lb > claimed`` is statistical evidence
(at confidence ``1 - alpha``) that the implementation leaks more than it claims: too little
noise, an understated sensitivity, a broken calibration. ``eps_lb <= claimed`` (PASS) proves
nothing: it is a lower bound from one pair of datasets, one test and finitely many trials;
DP follows only from the analysis. With ``N`` trials no bound exceeds about ``log(N / 3.7)``
(no error at all: ``FPR_u = FNR_u = 1 - (alpha / 2)^(1/N)``), and even a mechanism whose
claim is exact is expected well below it: the bound pays the Clopper-Pearson penalty and sees
only the error rates ``N`` trials can measure. This module knows nothing of Flower: a
mechanism is any :data:`ReleaseFn`; :mod:`fedpca.audit.targets` builds them from the
real clients.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from fedpca.errors import ConfigurationError
from fedpca.dp.calibration import check_privacy_parameters
from fedpca.dp.validation import require_finite_positive, require_positive_int

logger = logging.getLogger(__name__)

#: One release on the original (``False``) or the neighbouring (``True``) dataset, its noise
#: drawn from ``seed`` (``None``: OS randomness); returns the released values as a 1-D array
#: whose noise is i.i.d. (e.g. the upper triangle of a symmetric matrix, not its mirror).
ReleaseFn = Callable[[bool, int | None], np.ndarray]

#: Fewest trials per dataset: below this the Clopper-Pearson bounds say nothing useful.
MIN_TRIALS = 100
#: Fewest calibration trials per dataset (two means and two spreads are estimated).
MIN_CALIBRATION_TRIALS = 10
#: Thresholds tried by :func:`choose_threshold`, spread over the two fitted Gaussians.
THRESHOLD_GRID = 2001
#: Index of the replaced record in :func:`worst_case_neighbours`.
REPLACED_ROW = 0
#: Norm of the fixed records, as a fraction of ``C`` (inside the ball: never clipped).
FIXED_ROW_NORM = 0.5


@dataclass(frozen=True)
class NeighbouringDatasets:
    """Two datasets that differ in one record (replace-one).

    Attributes:
        original: ``n x d`` records, row :data:`REPLACED_ROW` is ``C e_1``.
        neighbour: the same records with that row replaced by ``C e_2``.
    """

    original: np.ndarray
    neighbour: np.ndarray

    def pick(self, neighbour: bool) -> np.ndarray:
        """The neighbouring dataset if ``neighbour``, else the original."""
        return self.neighbour if neighbour else self.original


def worst_case_neighbours(
    samples: int, dim: int, clip_norm: float = 1.0, seed: int = 0
) -> NeighbouringDatasets:
    """``samples`` records of ``dim`` features, one replaced: ``C e_1`` versus ``C e_2``.

    The other ``samples - 1`` records are fixed (drawn from ``seed``, norm
    ``FIXED_ROW_NORM * C``). The replaced pair attains the ``sqrt(2) C^2`` replace-one
    sensitivity of ``diag(X^T X)``, of the upper triangle of ``X^T X`` and of ``X^T X Q``
    for a ``Q`` spanning ``e_1, e_2``; the fixed records shift both outputs equally.
    """
    require_positive_int(samples, "samples")
    if require_positive_int(dim, "dim") < 2:
        raise ConfigurationError(f"the audit replaces C e_1 by C e_2: it needs dim >= 2, got {dim}")
    clip_norm = require_finite_positive(clip_norm, "clip_norm")
    rest = np.random.default_rng(seed).standard_normal((samples, dim))
    rest *= FIXED_ROW_NORM * clip_norm / np.linalg.norm(rest, axis=1, keepdims=True)
    original, neighbour = rest.copy(), rest.copy()
    original[REPLACED_ROW] = clip_norm * np.eye(dim)[0]
    neighbour[REPLACED_ROW] = clip_norm * np.eye(dim)[1]
    return NeighbouringDatasets(original, neighbour)


def worst_case_basis(dim: int, k: int = 2) -> np.ndarray:
    """The orthonormal request ``Q = [e_1 ... e_k]`` (``k >= 2``): its span holds both
    replaced records, so ``X^T X Q`` moves by the full ``sqrt(2) C^2`` (a curious server may
    send any orthonormal ``Q``)."""
    if not 2 <= k <= dim:
        raise ConfigurationError(
            f"the worst-case request needs 2 <= k <= dim, got k={k}, dim={dim}"
        )
    return np.eye(dim)[:, :k]


@dataclass(frozen=True)
class AuditTarget:
    """One mechanism to audit: its releases on two neighbouring datasets and its claim.

    Attributes:
        mechanism: a name such as ``"dps-pca/power"``.
        release: makes one release (see :data:`ReleaseFn`).
        claimed_epsilon: the epsilon the mechanism claims for that one release, at ``delta``.
        delta: the delta of the claim.
        setup: a sentence saying which datasets and request the attack uses.
    """

    mechanism: str
    release: ReleaseFn
    claimed_epsilon: float
    delta: float
    setup: str


@dataclass(frozen=True)
class Interval:
    """A rate's point estimate and its two-sided Clopper-Pearson interval."""

    estimate: float
    lower: float
    upper: float


@dataclass(frozen=True)
class AuditResult:
    """What one audit found (see the module docstring for what it means).

    Attributes:
        mechanism, claimed_epsilon, delta, setup: from the :class:`AuditTarget`.
        trials: evaluation releases per dataset; ``calibration_trials`` more per dataset
            chose the test direction and threshold.
        confidence: ``1 - alpha``: the probability that ``epsilon_lower`` is a valid bound.
        threshold: the projection threshold of the test.
        false_positives, false_negatives: counts on the evaluation trials.
        fpr, fnr: their rates with Clopper-Pearson intervals at ``confidence``.
        epsilon_lower: the empirical lower bound on epsilon.
        separation: the distance between the two projected means in noise standard
            deviations (evaluation trials): ``1 / z`` for a Gaussian mechanism with noise
            multiplier ``z`` whose sensitivity the datasets attain.
        seeded: whether the trials' noise seeds came from a seed (reproducible).
    """

    mechanism: str
    claimed_epsilon: float
    delta: float
    setup: str
    trials: int
    calibration_trials: int
    confidence: float
    threshold: float
    false_positives: int
    false_negatives: int
    fpr: Interval
    fnr: Interval
    epsilon_lower: float
    separation: float
    seeded: bool

    @property
    def passed(self) -> bool:
        """No evidence of a violation: ``epsilon_lower <= claimed_epsilon`` (not a proof)."""
        return self.epsilon_lower <= self.claimed_epsilon

    @property
    def margin(self) -> float:
        """``claimed_epsilon - epsilon_lower`` (negative: the claim is refuted)."""
        return self.claimed_epsilon - self.epsilon_lower

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record, with the verdict."""
        return {**asdict(self), "passed": self.passed, "margin": self.margin}


def clopper_pearson(
    successes: np.ndarray | float, trials: int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper-Pearson interval at level ``1 - alpha`` for ``successes`` out of
    ``trials`` (vectorised; real-valued counts are allowed, for planning)."""
    k = np.asarray(successes, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(alpha / 2, k, trials - k + 1), 0.0)
        upper = np.where(k < trials, stats.beta.ppf(1 - alpha / 2, k + 1, trials - k), 1.0)
    return lower, upper


def epsilon_lower_bound(
    fpr_upper: np.ndarray | float, fnr_upper: np.ndarray | float, delta: float
) -> np.ndarray:
    """``max(log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u), 0)``
    (vectorised); a non-positive numerator gives 0."""
    fpr_u, fnr_u = np.asarray(fpr_upper, np.float64), np.asarray(fnr_upper, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.log(np.clip(1 - delta - fnr_u, 0.0, None) / fpr_u)
        other = np.log(np.clip(1 - delta - fpr_u, 0.0, None) / fnr_u)
    return np.nan_to_num(np.maximum(np.maximum(one, other), 0.0), nan=0.0)


def choose_threshold(
    original_scores: np.ndarray, neighbour_scores: np.ndarray, trials: int, delta: float,
    alpha: float,
) -> float:
    """The threshold that maximises the bound expected from ``trials`` evaluation trials,
    with each dataset's calibration scores fitted by a Gaussian.

    The fit only steers the choice: whatever it returns, the evaluation bound stays valid
    (the evaluation trials are independent of it). It lets a small calibration set pick a
    threshold deep in the tails, where its own counts would be too few to compare.
    """
    tiny = np.finfo(np.float64).tiny
    m0, s0 = float(np.mean(original_scores)), max(float(np.std(original_scores, ddof=1)), tiny)
    m1, s1 = float(np.mean(neighbour_scores)), max(float(np.std(neighbour_scores, ddof=1)), tiny)
    spread = max(s0, s1)
    grid = np.linspace(min(m0, m1) - 6 * spread, max(m0, m1) + 6 * spread, THRESHOLD_GRID)
    false_pos = trials * stats.norm.sf(grid, m0, s0)
    false_neg = trials * stats.norm.cdf(grid, m1, s1)
    expected = epsilon_lower_bound(
        clopper_pearson(false_pos, trials, alpha)[1],
        clopper_pearson(false_neg, trials, alpha)[1],
        delta,
    )
    return float(grid[int(np.argmax(expected))])


def _releases(
    target: AuditTarget, neighbour: bool, seeds: list[int | None], width: int | None = None
) -> np.ndarray:
    """``len(seeds)`` releases on one dataset, one row per trial, each a 1-D array of
    ``width`` values (the first release's, if None)."""
    rows = [np.asarray(target.release(neighbour, seed), dtype=np.float64) for seed in seeds]
    expected = (rows[0].size if width is None else width,)
    unexpected = sorted({row.shape for row in rows} - {expected})
    if unexpected:
        raise ConfigurationError(
            f"audit of {target.mechanism}: every release must be a 1-D array of "
            f"{expected[0]} values, got shapes {unexpected}; flatten the output (upper "
            "triangle for a symmetric matrix) in its ReleaseFn"
        )
    stacked = np.vstack(rows)
    if not np.isfinite(stacked).all():
        raise ConfigurationError(f"audit of {target.mechanism}: a release is not finite")
    return stacked


def _noise_seeds(rng: np.random.Generator | None, count: int) -> list[int | None]:
    """``count`` trials' noise seeds (one per pair of releases, :func:`_paired_releases`)."""
    if rng is None:
        return [None] * count
    return [int(s) for s in rng.integers(0, 2**63, size=count)]


def _paired_releases(
    target: AuditTarget, seeds: list[int | None], width: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The original's and the neighbour's releases, trial ``i`` of both from ``seeds[i]``
    (OS randomness for both when it is None)."""
    original = _releases(target, False, seeds, width)
    return original, _releases(target, True, seeds, original.shape[1])


def _separation(original_scores: np.ndarray, neighbour_scores: np.ndarray) -> float:
    pooled = math.sqrt((np.var(original_scores, ddof=1) + np.var(neighbour_scores, ddof=1)) / 2)
    gap = float(np.mean(neighbour_scores) - np.mean(original_scores))
    if pooled == 0:  # a noiseless release: the datasets are told apart without error
        return math.copysign(math.inf, gap) if gap else 0.0
    return gap / pooled


def _calibrate(
    target: AuditTarget, rng: np.random.Generator | None, calibration_trials: int, trials: int,
    alpha: float,
) -> tuple[np.ndarray, float]:
    """The test: the projection direction (difference of the two mean releases) and the
    threshold, both from ``calibration_trials`` releases per dataset. Seeded, the pairs
    share their noise draws: a mechanism whose noise does not depend on the data (every
    fedpca mechanism's) then gives the exact difference of its two noiseless outputs,
    where unpaired trials leave noise in every coordinate of the estimate."""
    original, neighbour = _paired_releases(target, _noise_seeds(rng, calibration_trials))
    direction = neighbour.mean(axis=0) - original.mean(axis=0)
    threshold = choose_threshold(
        original @ direction, neighbour @ direction, trials, target.delta, alpha
    )
    return direction, threshold


def run_audit(
    target: AuditTarget,
    trials: int = 4000,
    calibration_trials: int = 1000,
    alpha: float = 0.05,
    seed: int | None = None,
) -> AuditResult:
    """Audit one release of ``target`` (see the module docstring for the method).

    Args:
        target: the mechanism, its neighbouring releases and its claim.
        trials: evaluation releases per dataset (at least :data:`MIN_TRIALS`).
        calibration_trials: further releases per dataset that choose the test direction and
            threshold (at least :data:`MIN_CALIBRATION_TRIALS`).
        alpha: ``1 - confidence`` of the bound, in (0, 1).
        seed: draws every trial's noise seed, the same for the trial's release on each
            dataset (reproducible audit with common random numbers; the noise still comes
            from the mechanism). ``None``: every release uses OS randomness.

    Returns:
        An :class:`AuditResult`. Passing (``epsilon_lower <= claimed``) does not prove DP.
    """
    trials = require_positive_int(trials, "trials", minimum=MIN_TRIALS)
    calibration_trials = require_positive_int(
        calibration_trials, "calibration_trials", minimum=MIN_CALIBRATION_TRIALS
    )
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ConfigurationError(f"alpha must be in (0, 1), got {alpha!r}; e.g. alpha=0.05")
    check_privacy_parameters(target.claimed_epsilon, target.delta)
    rng = None if seed is None else np.random.default_rng(seed)
    direction, threshold = _calibrate(target, rng, calibration_trials, trials, alpha)
    original, neighbour = (
        releases @ direction
        for releases in _paired_releases(target, _noise_seeds(rng, trials), direction.size)
    )
    false_pos, false_neg = int(np.sum(original > threshold)), int(np.sum(neighbour <= threshold))
    rates = [
        Interval(count / trials, *map(float, clopper_pearson(count, trials, alpha)))
        for count in (false_pos, false_neg)
    ]
    result = AuditResult(
        mechanism=target.mechanism,
        claimed_epsilon=target.claimed_epsilon,
        delta=target.delta,
        setup=target.setup,
        trials=trials,
        calibration_trials=calibration_trials,
        confidence=1 - alpha,
        threshold=threshold,
        false_positives=false_pos,
        false_negatives=false_neg,
        fpr=rates[0],
        fnr=rates[1],
        epsilon_lower=float(epsilon_lower_bound(rates[0].upper, rates[1].upper, target.delta)),
        separation=_separation(original, neighbour),
        seeded=seed is not None,
    )
    logger.info(
        "audit %s: eps_lb %.3f vs claimed %.3f (FP %d, FN %d of %d): %s", target.mechanism,
        result.epsilon_lower, result.claimed_epsilon, false_pos, false_neg, trials,
        "PASS" if result.passed else "FAIL",
    )
    return result
