"""Secure aggregation against an active, hostile coordinator: sans-I/O state machines.

The protocol sums integer vectors modulo a power of two so that the coordinator (the server)
learns only sums over at least ``M`` honest members, even when it deviates from the protocol
and ``c`` members collude with it. It follows Bonawitz et al., "Practical Secure Aggregation
for Privacy-Preserving Machine Learning" (CCS 2017), in the version secure against an
active server: key advertisements are signed under a PKI (:mod:`fedpca.secure.roster`), and
a consistency round precedes every unmasking. Nothing here does I/O or imports Flower: a
:class:`~fedpca.secure.site_session.SiteSession` and a
:class:`~fedpca.secure.server_session.ServerSession` consume and emit message objects
(:mod:`fedpca.secure.messages`), whose ``to_dict()`` holds only ``str``, ``int``, ``bytes``
and lists of them (what a Flower ``ConfigRecord`` carries; lists of member names travel
joined by newlines and fixed-size MACs, keys and seeds concatenated, so that a round's
messages hold a few values, not hundreds). A site's state survives between messages as
:meth:`~fedpca.secure.site_session.SiteSession.to_bytes` (its long-term signing key and
roster stay in its files).

Messages. Setup (once per run):

1. ``SetupRequest`` (run id, rounds ``R``, threshold ``t``, modulus, the run's description of
   its sums) -> ``Advertisement``: a fresh X25519 public key, signed with the member's Ed25519
   roster key over the protocol version, consortium, run id, member, key and the run
   parameters, the description's digest included (so members shown different descriptions
   refuse each other: what each field of each request could do, sent per member, is listed
   in :mod:`fedpca.secure.messages`). The site refuses rounds above its ``max_rounds``, a
   modulus that is not a power of two in ``2..2**62``, and at once a threshold no member count
   could make valid (``t < c + M`` or above the roster size).
2. ``KeyList`` -> ``ShareBundle``. The site verifies *before sending anything*: every
   advertisement is from a roster member and signed over the parameters it saw, names are
   distinct, its own advertisement is there unchanged, and ``N`` satisfies
   :func:`~fedpca.secure.conditions.check_setup`. The session id hashes the parameters and
   the sorted (member, key) list. The site draws ``R`` independent self-mask seeds, Shamir
   shares them (points = index in the sorted member list + 1) and sends every other member
   its shares, AES-GCM encrypted under their direction-specific pairwise key.
3. The first ``InputRequest`` relays to each member the ciphertexts addressed to it; the set
   of senders (with the member) is ``U_setup``. The site decrypts them all, and requires
   ``|U_setup| >= t``.

Each round ``r``: ``InputRequest`` -> ``MaskedInput`` ``y_i = x_i + PRG(b_i^r) + sum_{j > i}
PRG(s_ij^r) - sum_{j < i} PRG(s_ij^r)`` over ``j`` in ``U_setup`` (name order);
``ConsistencyRequest(U3)`` -> ``Endorsement`` (one HMAC per other member of ``U3``);
``UnmaskRequest(U3, MACs)`` -> ``Reveal`` (shares of ``b_k^r`` for ``k`` in ``U3``, and the
site's own round seeds ``s_ij^r`` for ``j`` in ``U_setup \\ U3``) once ``t - 1`` MACs verify.
The server then decodes exactly ``sum_{i in U3} x_i mod modulus``.

Design changes from Bonawitz et al. (on purpose):

(a) The long-term pairwise secret is never secret-shared or reconstructed. A member declared
    dropped in round ``r`` has only its round-``r`` pairwise seeds revealed, each by the
    survivor holding it; seeds of different rounds are independent PRF outputs, so nothing about
    other rounds leaks and the dropped member can go on in later rounds.
(b) Self-mask seeds are fresh per round (``os.urandom``, never derived from one seed) and all
    shared at setup, so a round costs no further key exchange.
(c) Endorsements are pairwise HMAC-SHA256 tags under keys from the authenticated key
    agreement, not Ed25519 signatures. Each is checked only by its addressee, which is all
    the consistency check needs (a member reveals only when *it* holds ``t`` endorsements of
    the set it endorsed). The MAC'd message names endorser and addressee, so the coordinator
    cannot reflect a member's own tag back to it as a peer's. Measured on the 2-core
    development machine (``cryptography`` 50, OpenSSL): one Ed25519 verification ~120 us, one
    HMAC-SHA256 check (new HMAC object, update, constant-time verify) ~2.2 us, about 50 times
    less: with 300 survivors, a member's 299 checks per round cost ~0.7 ms instead of ~36 ms.
(d) A member that dropped before the input stage *and* a survivor that then drops between
    the consistency and unmask stages of the same round make the round fail: the pairwise
    seeds of that pair are lost (only the survivor reveals them). The server raises
    :class:`~fedpca.secure.server_session.SecureAggregationError` before it reconstructs
    anything. A round whose survivors
    fall below ``t`` fails before any unmasking too.

Why a member's value stays hidden (active server, ``c`` colluders): a member reveals at most
once per round, and only for the one set it endorsed; by the conditions of
:mod:`fedpca.secure.conditions` at most one set per round gets ``t`` endorsements, and it
holds at least ``t - c >= M`` honest members. For ``k`` in that set, ``b_k^r`` is revealed but
no honest pair seed ``s_kj^r`` with another honest survivor ``j`` is (each is revealed only
when one of the pair is outside the set); for ``k`` outside it, ``b_k^r`` never is. Even if the
server shows members different ``U_setup`` sets, a member reveals only for a ``U3`` inside its
own ``U_setup`` and every ``U_setup`` holds ``t`` members, so every sum with all pads cancelled
covers at least ``M`` honest members. A member shown a different key list derives a different
session id, hence different keys: its ciphertexts and MACs fail (the split-view defence).

Every refusal (:class:`~fedpca.secure.conditions.ProtocolRefusal`) happens before the site
changes its state or releases anything, so a refused message may be retried.

The modules, one sentence each, are listed in ``docs/layout.md``.
"""
