"""Secure sums over groups of sites, combined robustly: one malicious member moves the result
no further than the honest groups' own spread allows (no Flower import).

**Why groups.** Inside one secure sum a member's contribution is invisible: within its declared
records' norm (:mod:`fedpca.algorithms.sum_bounds`) it can add a chosen subspace or a rank-one
push and the sum follows it. Split the members into groups, run one secure sum per group and
the server sees one noisy sum per group: a group holding a member that sent more than its
records' statistics look like stands out from the others.

**No privacy cost.** Each member answers exactly one group's sum per round, in a group of at
least ``M + c`` members (``M`` and ``c`` the sites' own, checked by every member in its key
agreement, :mod:`fedpca.secure.conditions`): every group sum carries the noise of at least
``M`` honest members' shares, which is what each member's guarantee assumes. The members'
shares are the same as in one sum, so the total noise is too; only which partial sums are
revealed changes, and each is a sum a member's guarantee already covers. Who is in which group
is the coordinator's choice and needs no agreement: a member's guarantee rests on its own
checks of its group's key agreement, never on the grouping (a hostile coordinator that puts a
member in a group below ``M + c`` members is refused by that member).

**The rule** (:func:`outlying_groups`). Group ``g`` with ``n_g`` declared records decodes to
``S_g``; its mean is ``mu_g = S_g / n_g``. With at least :data:`MIN_GROUPS` groups the server
takes the coordinate-wise median ``c`` of the means, each group's distance ``r_g = ||mu_g -
c||`` and their median ``s``, and drops every group with ``r_g > spread * s`` (``spread``:
:data:`DEFAULT_SPREAD`). With one malicious member among ``G >= 3`` groups the median and ``s``
stay those of honest groups, so the malicious group is dropped unless its mean lies within
``spread`` times the distance the honest groups' sampling and noise put between them: it moves
the kept sum by at most about ``spread * s * n_g``. Before the rule, each group sum beyond its
members' declared records' bound (:func:`~fedpca.algorithms.sum_bounds.sum_bound`) is dropped.
A dropped group's sites stay out for the rest of the run (a server passes them as
``distrusted``): a multi-round run's later bases would otherwise let a member that was caught
push again along them below the rule's threshold, and a group caught once has no claim to be
trusted the next round. The honest members of that group are lost to the run with it, which the
run record says. The kept groups' sums are added and the released statistic is normalised by
their members' records: when nothing is dropped it is the plain sum of every member's message
(the same numbers, up to the order of float additions).

**What it costs and what it does not bound.** An honest run loses a group's records when the
rule drops an honest group (sites whose populations differ from the rest's legitimately can
look like an attack; measured in ``benchmarks/results/malicious_site.md``). A malicious member
whose contribution stays within ``spread`` times the honest spread is not detected. Two groups
cannot say which of them is wrong, so with fewer than :data:`MIN_GROUPS` only the bounds apply.
A coordinator colluding with a member can choose the grouping: the rule assumes an honest
coordinator (the integrity model of ``docs/privacy.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.site import SiteAnswer
from fedpca.algorithms.sum_bounds import (
    DEFAULT_FALSE_ALARM,
    SumBoundError,
    beyond_bound,
    require_within_bound,
)
from fedpca.errors import ConfigurationError

logger = logging.getLogger(__name__)

#: The fewest groups the rule compares: with two, neither can be told from the other.
MIN_GROUPS = 3

#: How many times the groups' median distance to the median mean a group may lie before it
#: is dropped.
DEFAULT_SPREAD = 3.0


def assign_groups(members: Sequence[str], group_size: int, min_sites: int = 1
                  ) -> list[tuple[str, ...]]:
    """``members`` (sorted by name) dealt round-robin into ``len(members) // group_size``
    groups, so every group holds at least ``group_size`` members and sizes differ by at most
    one; a single group when there are fewer than ``2 * group_size`` members.

    Raises:
        ConfigurationError: ``group_size`` below ``min_sites`` (the sites' ``M + c``: a
            smaller group's sum would not carry the noise their guarantees assume) or
            more than the members.
    """
    if group_size < max(min_sites, 1):
        raise ConfigurationError(
            f"a secure sum's group needs at least M + c = {max(min_sites, 1)} members (the "
            f"sites' own), got a group size of {group_size}")
    ordered = sorted(members)
    if len(ordered) < group_size:
        raise ConfigurationError(
            f"{len(ordered)} site(s) cannot fill one group of {group_size}; lower the group "
            "size or add sites")
    count = len(ordered) // group_size
    return [tuple(ordered[g::count]) for g in range(count)]


def in_groups(answers: Sequence[SiteAnswer], groups: Sequence[Sequence[str]] | None
              ) -> list[SiteAnswer]:
    """``answers`` marked with the index of the group (of ``groups``, site names) each
    site's message was summed in; unchanged without groups (one sum)."""
    if groups is None:
        return list(answers)
    index = {site: g for g, members in enumerate(groups) for site in members}
    return [replace(a, group=index[a.site]) for a in answers]


def outlying_groups(totals: Sequence[np.ndarray], counts: Sequence[int],
                    spread: float = DEFAULT_SPREAD) -> dict[int, float]:
    """The groups the rule drops (module docstring), each with ``r_g / s``: their sums
    ``totals`` over ``counts`` declared records; none with fewer than :data:`MIN_GROUPS`."""
    if len(totals) < MIN_GROUPS:
        return {}
    means = np.stack([np.ravel(t) / n for t, n in zip(totals, counts)])
    distances = np.linalg.norm(means - np.median(means, axis=0), axis=1)
    scale = float(np.median(distances))
    if scale == 0.0:
        return {g: float("inf") for g, r in enumerate(distances) if r > 0.0}
    return {g: float(r / scale) for g, r in enumerate(distances) if r > spread * scale}


@dataclass(frozen=True)
class GroupedSum:
    """A round's sum over the kept groups.

    Attributes:
        kept: the answers of the kept groups' members, in the answers' order (their records
            normalise the sum).
        total: the sum of the kept groups' decoded sums (data units).
        dropped: why each dropped group was dropped, naming its members.
    """

    kept: list[SiteAnswer]
    total: np.ndarray
    dropped: list[str]


def answer_groups(answers: Sequence[SiteAnswer]) -> list[list[SiteAnswer]]:
    """``answers`` by the secure sum they were summed in (:attr:`SiteAnswer.group`; answers
    without a group form one sum), in group order, each group's in the answers' order."""
    groups: dict[int, list[SiteAnswer]] = {}
    for a in answers:
        groups.setdefault(-1 if a.group is None else a.group, []).append(a)
    return [groups[g] for g in sorted(groups)]


def robust_decode(secure: SecureSum, answers: Sequence[SiteAnswer], what: str,
                  alpha: float = DEFAULT_FALSE_ALARM, spread: float = DEFAULT_SPREAD,
                  distrusted: Collection[str] = ()) -> GroupedSum:
    """Decode each group's sum of ``answers``' messages, drop the groups holding a
    ``distrusted`` site (one whose group an earlier round dropped), beyond their bound or
    outlying (module docstring) and add the rest. One group: its sum, refused beyond its
    bound (:func:`~fedpca.algorithms.sum_bounds.require_within_bound`).

    Raises:
        SumBoundError: a single sum beyond its bound, or no group left.
    """
    groups = answer_groups(answers)
    if len(groups) == 1:
        total = secure.decode([a.value for a in groups[0]])
        require_within_bound(secure, total, groups[0], what, alpha)
        return GroupedSum(list(groups[0]), total, [])
    totals = [secure.decode([a.value for a in group]) for group in groups]
    dropped: dict[int, str] = {}
    for g, (group, total) in enumerate(zip(groups, totals)):
        earlier = sorted({a.site for a in group} & set(distrusted))
        ratio = None if earlier else beyond_bound(secure, total, group, alpha)
        if earlier:
            dropped[g] = (f"it holds site(s) {', '.join(earlier)}, whose group an earlier "
                          "round dropped")
        elif ratio is not None:
            dropped[g] = (f"{ratio:.3g} times the bound its members' declared records allow "
                          f"at false-alarm rate {alpha:g}")
    within = [g for g in range(len(groups)) if g not in dropped]
    outliers = outlying_groups([totals[g] for g in within],
                               [sum(a.n for a in groups[g]) for g in within], spread)
    for index, ratio in outliers.items():
        dropped[within[index]] = (f"its mean lies {ratio:.3g} times the groups' median "
                                  f"distance from their median (limit {spread:g})")
    reasons = [f"the secure sum of {what} over sites "
               f"{', '.join(sorted(a.site for a in groups[g]))} was dropped: {why}"
               for g, why in sorted(dropped.items())]
    for reason in reasons:
        logger.info("%s", reason)
    kept_groups = [g for g in range(len(groups)) if g not in dropped]
    if not kept_groups:
        raise SumBoundError(f"every group's secure sum of {what} was dropped: "
                            + "; ".join(reasons), failures=reasons)
    total = np.sum([totals[g] for g in kept_groups], axis=0)
    kept = {id(a) for g in kept_groups for a in groups[g]}
    return GroupedSum([a for a in answers if id(a) in kept], total, reasons)
