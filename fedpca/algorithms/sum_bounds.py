"""Bounded influence: every decoded secure sum and every per-site answer is checked against
the norm its sites' declared records allow, and one beyond it is dropped or stops the run (no
Flower import).

**What a malicious member can do.** Inside fedpca's verified secure aggregation nobody sees a
member's statistic, so a member (a vouched site with its own key, the coordinator honest)
can add anything to its masked input: a chosen subspace, a rank-one push, its statistic
scaled by any factor. The sum decodes as usual and the result follows the attacker (issue 49:
a chosen 3-dimensional subspace moved the released basis 1.73 from the honest run). A
coordinator colluding with one member gains nothing more here: it already sees the decoded
sum, and what it may choose (the sum's description) every member signs
(:mod:`fedpca.algorithms.secure_sum`). With per-site answers every answer is seen, but a
site may still send any array of the right shape.

**What the secure-sum check bounds.** One record adds at most ``norm_per_record`` to the L2
norm of its site's statistic (``C^2`` for DPS-PCA's ``diag(X^T X)`` and ``X^T X Q`` with rows
clipped to ``C`` and ``Q`` orthonormal, and for DPdisPCA's upper triangle of ``X^T X``;
``sqrt(2) C^2`` for k-plane's scatter and weighted count;
:meth:`~fedpca.dp.moments.ColumnBounds.record_norm` for the centring moments), so member
``i`` declaring ``n_i`` records (its answer's public ``n``, capped at the sum's
``max_records``) contributes at most ``min(n_i, max_records) * norm_per_record``. The decoded
sum is that plus the members' noise and rounding, whose L2 norm is bounded at false-alarm rate
``alpha`` (:func:`noise_norm_bound`). A decoded sum whose norm exceeds :func:`sum_bound` was
tampered with (or, with probability at most ``alpha`` plus the description's wrap
probability, is an honest sum's unlucky noise). One sum beyond it stops the run with
:class:`SumBoundError`, naming the sum's members and its ratio to the bound, before anything
derived from it is released; a group's sum beyond it is dropped
(:mod:`fedpca.algorithms.sum_groups`). The check is the server's own and needs nothing from
the sites.

**What the per-site check bounds** (:func:`answer_bound`). A per-site answer is a site's
statistic plus its own Gaussian noise, divided by its declared ``n_i``; the statistic's norm
is at most ``n_i`` times the statistic's norm per record at the site's clip norm ``C_i`` and
the noise's is bounded like a sum's, with the site's ``sigma_i = z_i Delta(C_i)`` (its
guarantee's noise multiplier ``z_i`` and sensitivity). An answer beyond it is dropped from the
round and named (:func:`answers_within_bounds`). ``C_i`` and ``z_i`` are the site's own,
stated in its guarantee beside its name in the run record: a site declaring a larger clip norm
or noise than the consortium's buys itself more room, visibly.

**What neither bounds.** A member whose contribution stays within its declared records' norm
is not detected, however it chose that contribution: it can steer the result as far as
``n_i`` records at the clip norm, all on a direction of its choosing, could (records wrong
within the contract's ranges are indistinguishable from true ones). A member can also declare
up to ``max_records`` records and use all that room. Sums over groups of at least ``M + c``
members, combined robustly (:mod:`fedpca.algorithms.sum_groups`), bound it further, to about
what the honest groups' own spread allows.

**The noise bound.** A member's message is its rotated statistic over the grid step
``gamma``, rounded ``floor(y + U)`` (an error in an interval of length one with mean zero:
sub-Gaussian with variance proxy ``1/4``, Hoeffding's lemma) plus ``draws`` discrete Gaussian
draws ``N_Z(0, sigma_sq)`` per coordinate, each sub-Gaussian with variance proxy ``sigma_sq``
(Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020:
its moment generating function is at most the continuous Gaussian's, so its tails are no
heavier). The ``N`` members' errors are independent, so each of the ``D`` padded coordinates
is sub-Gaussian with proxy ``s^2 = N (draws sigma_sq + 1/4)``; by Hsu, Kakade, Zhang ("A tail
inequality for quadratic forms of subgaussian random vectors", 2012, with ``A = I``) their
norm exceeds ``s sqrt(D + 2 sqrt(D t) + 2 t)`` with probability at most ``e^-t``, ``t =
ln(1/alpha)``: a provable sub-Gaussian bound (for a continuous Gaussian it is Laurent and
Massart's chi-square bound, so the real false-alarm rate is below ``alpha``). Un-rotating is
an isometry and un-padding drops coordinates, so the decoded noise is no longer, and it is
times ``gamma`` in the data's units.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.site import SiteAnswer
from fedpca.dp.hadamard import next_power_of_two
from fedpca.errors import ConfigurationError, RunFailedError

logger = logging.getLogger(__name__)

#: The false-alarm rate of every secure sum's bound: an honest sum is refused with at most
#: this probability (plus its description's wrap probability).
DEFAULT_FALSE_ALARM = 1e-6

#: The sub-Gaussian variance proxy of one randomised rounding ``floor(y + U)`` (grid units^2).
ROUNDING_PROXY = 0.25


class SumBoundError(RunFailedError):
    """A decoded secure sum exceeded what its members' declared records allow; the run was
    stopped before anything derived from the sum was released."""


@dataclass(frozen=True)
class SumBound:
    """The most a decoded secure sum's L2 norm may be (data units) at one false-alarm rate.

    Attributes:
        records: ``sum_i min(n_i, max_records) * norm_per_record``: the members' statistics.
        noise: the norm their noise and rounding stay below but with probability ``alpha``.
        alpha: that false-alarm rate.
    """

    records: float
    noise: float
    alpha: float

    @property
    def total(self) -> float:
        """The bound on the decoded sum's norm: ``records + noise``."""
        return self.records + self.noise


def noise_norm_bound(secure: SecureSum, members: int, alpha: float = DEFAULT_FALSE_ALARM
                     ) -> float:
    """The L2 norm (data units) that ``members`` members' noise and rounding in ``secure``'s
    decoded sum exceed with probability at most ``alpha`` (Hsu-Kakade-Zhang over the ``D``
    padded coordinates with proxy ``N (draws sigma_sq + 1/4)`` grid units^2, module
    docstring)."""
    if not 0.0 < alpha < 1.0:
        raise ConfigurationError(f"the false-alarm rate must lie in (0, 1), got {alpha!r}")
    if not secure.agreed:
        raise ConfigurationError("a secure sum's bound needs its agreed grid and noise")
    padded, t = next_power_of_two(secure.dimension), math.log(1.0 / alpha)
    proxy = members * (secure.draws * secure.sigma_sq + ROUNDING_PROXY)
    return secure.grid_step * math.sqrt(proxy * (padded + 2 * math.sqrt(padded * t) + 2 * t))


def sum_bound(secure: SecureSum, counts: Sequence[int], alpha: float = DEFAULT_FALSE_ALARM
              ) -> SumBound:
    """The bound on the norm of ``secure``'s decoded sum over members declaring ``counts``
    records (each capped at ``max_records``) at false-alarm rate ``alpha``."""
    records = sum(min(max(int(n), 0), secure.max_records) for n in counts)
    return SumBound(records * secure.norm_per_record,
                    noise_norm_bound(secure, len(counts), alpha), alpha)


def beyond_bound(secure: SecureSum, total: np.ndarray, answers: Sequence[SiteAnswer],
                 alpha: float = DEFAULT_FALSE_ALARM) -> float | None:
    """The ratio of ``total``'s norm (the decoded ``secure`` sum of ``answers``' members) to
    :func:`sum_bound` of their declared counts when it exceeds the bound, else ``None``."""
    bound = sum_bound(secure, [a.n for a in answers], alpha)
    norm = float(np.linalg.norm(total))
    return None if norm <= bound.total else norm / bound.total


def require_within_bound(secure: SecureSum, total: np.ndarray, answers: Sequence[SiteAnswer],
                         what: str, alpha: float = DEFAULT_FALSE_ALARM) -> None:
    """Refuse ``total``, the decoded ``secure`` sum of ``answers``' members (``what``: the
    statistic it is, for the error), when its norm exceeds :func:`sum_bound` of their
    declared counts.

    Raises:
        SumBoundError: naming the members and the norm's ratio to the bound (the
            coordinator's own data; no record count or statistic is quoted).
    """
    ratio = beyond_bound(secure, total, answers, alpha)
    if ratio is None:
        return
    members = ", ".join(sorted(a.site for a in answers))
    raise SumBoundError(
        f"the secure sum of {what} over sites {members} exceeded what their declared records "
        f"allow ({ratio:.3g} times the bound at false-alarm rate {alpha:g}): a "
        "member sent more than its records could produce; the run stopped and nothing "
        "derived from the sum was released")


def checked_decode(secure: SecureSum, answers: Sequence[SiteAnswer], what: str,
                   alpha: float = DEFAULT_FALSE_ALARM) -> np.ndarray:
    """:meth:`SecureSum.decode` of ``answers``' messages, refused with :class:`SumBoundError`
    beyond their declared records' bound (:func:`require_within_bound`): the one decoding
    every algorithm's server uses, in process and in the Flower App alike."""
    total = secure.decode([a.value for a in answers])
    require_within_bound(secure, total, answers, what, alpha)
    return total


#: The room the per-site bound leaves for a site's exact sampler (its grid adds at most 0.2%
#: to the noise and rounds each coordinate by at most ``2^-11`` of the sensitivity).
EXACT_NOISE_SLACK = 0.01


@dataclass(frozen=True)
class AnswerStatistic:
    """What bounds one kind of per-site answer: the site's statistic over its ``n_i`` records
    plus Gaussian noise, divided by ``n_i`` (a mean), as functions of its clip norm ``C``.

    Attributes:
        norm_per_record: the statistic's L2 norm grows by at most this per record (so the
            mean's is at most it).
        sensitivity: the statistic's replace-one L2 sensitivity: the mean's noise is
            ``z * sensitivity(C) / n_i`` per coordinate.
        coordinates: the noise's coordinates (``D``).
        mirrored: the noise is drawn on an upper triangle and mirrored (its norm at most
            ``sqrt(2)`` times the triangle's).
        rank: the answer is ``P`` with ``P P^T`` the top ``rank`` part of the noisy mean
            (DPdisPCA's factor), whose squared norm is at most the mean's trace bound plus
            ``rank`` times the noise's norm; ``None``: the noisy mean itself.
    """

    norm_per_record: Callable[[float], float]
    sensitivity: Callable[[float], float]
    coordinates: int
    mirrored: bool = False
    rank: int | None = None


def answer_bound(statistic: AnswerStatistic, answer: SiteAnswer,
                 alpha: float = DEFAULT_FALSE_ALARM, noise_floor: float | None = None
                 ) -> float | None:
    """The most ``answer``'s value may be in L2 norm, from its declared ``n_i`` and its
    guarantee's clip norm and noise multiplier (raised to the run's ``noise_floor``, the
    ``min_noise_multiplier`` its requests asked for), at false-alarm rate ``alpha`` (Laurent
    and Massart's chi-square bound over ``D`` coordinates, widened by
    :data:`EXACT_NOISE_SLACK`); ``None`` for an answer that states no guarantee."""
    if answer.guarantee is None:
        return None
    clip, t, D = answer.guarantee.clip_norm, math.log(1.0 / alpha), statistic.coordinates
    multiplier = max(answer.guarantee.noise_multiplier, noise_floor or 0.0)
    sigma = multiplier * statistic.sensitivity(clip) / answer.n
    noise = (sigma * (1 + EXACT_NOISE_SLACK) * math.sqrt(D + 2 * math.sqrt(D * t) + 2 * t)
             * (math.sqrt(2) if statistic.mirrored else 1.0))
    mean = statistic.norm_per_record(clip)
    return mean + noise if statistic.rank is None else math.sqrt(mean + statistic.rank * noise)


def answers_within_bounds(statistic: AnswerStatistic, answers: Sequence[SiteAnswer],
                          alpha: float = DEFAULT_FALSE_ALARM, noise_floor: float | None = None,
                          distrusted: Collection[str] = ()
                          ) -> tuple[list[SiteAnswer], list[str]]:
    """The answers within :func:`answer_bound` (in their order) and why each other one was
    dropped, naming its site and its ratio to the bound; an answer stating no guarantee
    cannot be checked and is dropped too, as is a ``distrusted`` site's (one an earlier
    round dropped: it stays out for the run).

    Raises:
        SumBoundError: every answer was dropped (naming each).
    """
    kept, dropped = [], []
    for a in answers:
        bound = answer_bound(statistic, a, alpha, noise_floor)
        norm = float(np.linalg.norm(a.value))
        if a.site not in distrusted and bound is not None and norm <= bound:
            kept.append(a)
            continue
        dropped.append(f"site {a.site}'s answer was dropped: " + (
            "an earlier round dropped its answer" if a.site in distrusted else
            "it states no guarantee (clip norm and noise) to check it against"
            if bound is None else
            f"{norm / bound:.3g} times the bound its declared records, clip norm and noise "
            f"allow at false-alarm rate {alpha:g}"))
        logger.info("%s", dropped[-1])
    if not kept:
        raise SumBoundError("every site's answer was dropped: " + "; ".join(dropped),
                            failures=dropped)
    return kept, dropped
