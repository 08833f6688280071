"""The threshold conditions a site checks before it sends anything of its own.

Notation (all public): ``N`` members in the session (the verified key list), ``c`` of them
other than the site may collude with the coordinator (the site's own assumption), Shamir
threshold ``t``, ``M`` = the site's minimum number of honest members in any sum the
coordinator can unmask.

What the protocol guarantees an honest member does: it endorses at most one survivor set per
round, and it reveals its round secrets only for the set it endorsed, only when it holds ``t``
endorsements of that set (its own and ``t - 1`` MACs that verify). A colluder endorses
anything and forges nothing it does not need: it holds its own pairwise keys, so the
endorsements *it* sends verify; it cannot produce an honest member's endorsement.

Derivation.

(1) *One sum per round.* Call ``t`` endorsements of a set ``U`` a certificate for ``U``.
    At most ``c`` endorsements in a certificate come from colluders, so at least ``t - c``
    come from honest members. Honest members endorse at most one set per round, so
    certificates for two different sets ``U != U'`` need ``2 (t - c)`` *distinct* honest
    endorsers, out of the ``N - c`` honest members. Forbidding that for every way the
    coordinator may split the honest members: ``2 (t - c) > N - c``, i.e. ``2t > N + c``.
    Without it the coordinator obtains the sums over two sets differing by one member (it
    declares that member dropped in one of them): their difference is that member's value.

(2) *At least M honest members in every sum.* A sum is unmasked only for a certified set,
    which holds at least ``t - c`` honest endorsers (each endorser is in the set it
    endorses): require ``t - c >= M``.

(3) *Something can be unmasked.* The self-mask seeds need ``t`` shares, one per member:
    ``t <= N``. ``t > c`` (colluders alone must not reconstruct a seed) follows from (2)
    because ``M >= 2``.

(4) *A federation.* ``N >= 2`` and the site is one of the ``N`` (the protocol checks the
    latter; ``M >= 2`` with (2) and (3) implies ``N >= 2`` already).

The smallest valid threshold is therefore ``max(floor((N + c) / 2) + 1, c + M)``, and no
valid threshold exists when that exceeds ``N``. Example: ``N = 6, c = 1, M = 2`` gives
``t = 4``. Refusals name only ``N, t, c, M``: public numbers, never data-derived ones.
"""

from __future__ import annotations

from fedpca.errors import InvalidRequestError

class ProtocolRefusal(InvalidRequestError):
    """A secure-aggregation message was refused before the site released anything for it."""


def check_setup(members: int, threshold: int, colluders: int, min_sites: int) -> None:
    """Refuse a session whose threshold lets the coordinator unmask a forbidden sum.

    Args:
        members: ``N``, the members of the session (verified key list).
        threshold: ``t``, the Shamir threshold (also the endorsements needed to reveal).
        colluders: ``c``, how many other members the site assumes collude with the coordinator.
        min_sites: ``M``, the site's minimum of honest members in any revealed sum.

    Raises:
        ProtocolRefusal: a condition of the module docstring fails.
    """
    n, t, c, m = members, threshold, colluders, min_sites
    got = f"got N={n} members, t={t}, c={c} colluders, M={m}"
    if m < 2 or c < 0:
        raise ProtocolRefusal(
            f"the site's policy needs M >= 2 and c >= 0, {got}; fix the site's policy"
        )
    if n < 2:
        raise ProtocolRefusal(f"a secure sum needs N >= 2 members, {got}; add members")
    if t > n:
        raise ProtocolRefusal(
            f"threshold above the member count: nothing could be unmasked (need t <= N), {got}; "
            "lower the threshold or wait for more members"
        )
    if 2 * t <= n + c:
        raise ProtocolRefusal(
            f"threshold too low: the coordinator could unmask two different sums in one round "
            f"(need 2t > N + c), {got}; raise the threshold to at least "
            "smallest_threshold(N, c, M)"
        )
    if t - c < m:
        raise ProtocolRefusal(
            f"threshold too low: a revealed sum could hold fewer than M honest members "
            f"(need t - c >= M), {got}; raise the threshold or add members"
        )


def smallest_threshold(members: int, colluders: int, min_sites: int) -> int:
    """The smallest ``t`` that :func:`check_setup` accepts for ``N, c, M``.

    Raises:
        ProtocolRefusal: no threshold works (too few members for ``c`` and ``M``).
    """
    threshold = max((members + colluders) // 2 + 1, colluders + min_sites)
    check_setup(members, threshold, colluders, min_sites)
    return threshold


def check_vouched(vouched: int, colluders: int, min_sites: int) -> None:
    """Refuse a site whose roster holds too few members it vouched for: with ``c`` colluders
    among them, a key list can hold at most ``V - c`` honest vouched members (every unvouched
    member counts as one more colluder), so it needs ``V >= M + c``.

    Raises:
        ProtocolRefusal: ``V < M + c`` (the numbers are public: the site's own policy and the
            roster's size).
    """
    if vouched < min_sites + colluders:
        raise ProtocolRefusal(
            f"this site vouched for V={vouched} members of the roster (itself included); with "
            f"c={colluders} colluders no key list can hold M={min_sites} honest members it "
            "vouched for (need V >= M + c); nothing sent: vouch for more members (compare "
            "their key fingerprints) or lower min-sites"
        )
