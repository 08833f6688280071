"""Secure aggregation against an active, hostile coordinator: sans-I/O state machines.

The protocol sums integer vectors modulo a power of two so that the coordinator (the server)
learns only sums over at least ``M`` honest members, even when it deviates from the protocol
and ``c`` members collude with it. It follows Bonawitz et al., "Practical Secure Aggregation
for Privacy-Preserving Machine Learning" (CCS 2017), in the version secure against an
active server: key advertisements are signed under a PKI (:mod:`fedpca.secure.roster`), and
a consistency round precedes every unmasking. Nothing here does I/O or imports Flower: a
:class:`SiteSession` and a :class:`ServerSession` consume and emit message objects, whose
``to_dict()`` holds only ``str``, ``int``, ``bytes`` and lists of them (what a Flower
``ConfigRecord`` carries; lists of member names travel joined by newlines and fixed-size
MACs, keys and seeds concatenated, so that a round's messages hold a few values, not
hundreds). A site's state survives between messages as
:meth:`SiteSession.to_bytes` (its long-term signing key and roster stay in its files).

Messages. Setup (once per run):

1. ``SetupRequest`` (run id, rounds ``R``, threshold ``t``, modulus) -> ``Advertisement``: a
   fresh X25519 public key, signed with the member's Ed25519 roster key over the protocol
   version, consortium, run id, member, key and the run parameters. The site refuses rounds
   above its ``max_rounds``, a modulus that is not a power of two in ``2..2**62``, and at once
   a threshold no member count could make valid (``t < c + M`` or above the roster size).
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
    :class:`SecureAggregationError` before it reconstructs anything. A round whose survivors
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

Every refusal (:class:`ProtocolRefusal`) happens before the site changes its state or releases
anything, so a refused message may be retried.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn

import numpy as np
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedpca.errors import ConfigurationError, FedPCAError, InvalidDataError
from fedpca.secure import shamir
from fedpca.secure.conditions import ProtocolRefusal, check_setup
from fedpca.secure.keys import (
    KEY_BYTES,
    MAX_MODULUS,
    PROTOCOL_VERSION,
    canonical,
    canonical_name,
    digest,
    pair_keys,
    prg_sum,
    round_seed,
    shared_secret,
)
from fedpca.secure.roster import NAME_PATTERN, Roster

__all__ = [
    "MAX_LENGTH",
    "Advertisement",
    "ConsistencyRequest",
    "Endorsement",
    "InputRequest",
    "KeyList",
    "MaskedInput",
    "ProtocolRefusal",
    "Reveal",
    "SecureAggregationError",
    "ServerSession",
    "SetupRequest",
    "ShareBundle",
    "SiteSession",
    "UnmaskRequest",
    "advertisement_payload",
    "message_from_dict",
]

logger = logging.getLogger(__name__)

#: The longest vector a site masks (2**27 entries, 1 GiB as uint64); longer is absurd.
MAX_LENGTH = 2**27
#: Field elements that carry one 32-byte seed.
SEED_ELEMENTS = shamir.elements_for(KEY_BYTES)
_SIGNATURE_BYTES, _NONCE_BYTES, _MAX_RUN_ID = 64, 12, 256
_STATE_FORMAT = "fedpca-secagg-site-state/3"


class SecureAggregationError(FedPCAError):
    """The server cannot decode a round (too few survivors or reveals, or lost seeds);
    nothing was unmasked."""


# --- validation of message fields ------------------------------------------------------------


def _refuse(message: str) -> NoReturn:
    raise ProtocolRefusal(message)


def _int(value: object, what: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        _refuse(f"{what} must be an integer >= {low}; the message is malformed")
    return value


def _run_id(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_RUN_ID:
        _refuse("run_id must be a non-empty string of at most 256 characters")
    return value


def _name(value: object, what: str = "member") -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        _refuse(f"{what} is not a valid member name; the message is malformed")
    return value


def _names(values: object, what: str) -> tuple[str, ...]:
    """``values`` as distinct member names, checked in one regular-expression match of the
    names joined by newlines (a list of hundreds arrives in every message of a round); the
    newlines must be exactly the joins (a name holding one is refused)."""
    if not isinstance(values, (list, tuple)):
        _refuse(f"{what} must be a list of member names")
    names = tuple(values)
    joined = "\n".join(names) if set(map(type, names)) <= {str} else None
    if joined is None or (names and (joined.count("\n") != len(names) - 1
                                     or not _NAME_LIST.fullmatch(joined))):
        _refuse(f"{what} holds an invalid member name; the message is malformed")
    if len(set(names)) != len(names):
        _refuse(f"{what} names a member twice; the message is malformed")
    return names


def _blob(value: object, what: str, length: int | None = None) -> bytes:
    if not isinstance(value, bytes) or (length is not None and len(value) != length):
        size = f" of {length} bytes" if length is not None else ""
        _refuse(f"{what} must be bytes{size}; the message is malformed")
    return value


def _blobs(mapping: object, what: str, length: int | None = None) -> dict[str, bytes]:
    if not isinstance(mapping, Mapping):
        _refuse(f"{what} must map member names to bytes")
    _names(list(mapping), what)
    values = mapping.values()
    if not set(map(type, values)) <= {bytes} or (
            length is not None and not set(map(len, values)) <= {length}):
        size = f" of {length} bytes" if length is not None else ""
        _refuse(f"{what} must hold bytes{size}; the message is malformed")
    return dict(mapping)


def _set(instance: object, **values: object) -> None:
    for key, value in values.items():
        object.__setattr__(instance, key, value)


def _read_wire(data: object, kind: str, schema: Mapping[str, type | tuple[type, type]]
               ) -> dict[str, Any]:
    """``data``'s fields after checking its kind, its field names and their wire types."""
    if not isinstance(data, Mapping):
        _refuse(f"a {kind} message must be a mapping")
    if data.get("kind") != kind:
        _refuse(f"expected a {kind} message; the coordinator sent another kind")
    fields = set(data) - {"kind"}
    if fields != set(schema):
        wrong = sorted(fields ^ set(schema))
        _refuse(f"a {kind} message has missing or unexpected fields {wrong}")
    out = {}
    for key, spec in schema.items():
        value = data[key]
        if isinstance(spec, tuple):
            container, item = spec
            ok = isinstance(value, container) and all(isinstance(v, item) for v in value)
        else:
            ok = isinstance(value, spec) and not isinstance(value, bool)
        if not ok:
            _refuse(f"field {key!r} of a {kind} message has the wrong type")
        out[key] = list(value) if isinstance(spec, tuple) else value
    return out


def _pairs(keys: Sequence[str], values: list[bytes], kind: str) -> dict[str, bytes]:
    if len(keys) != len(values) or len(set(keys)) != len(keys):
        _refuse(f"a {kind} message pairs its names and values wrongly")
    return dict(zip(keys, values))


def _vector_bytes(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype="<i8").tobytes()


def _vector_from(data: bytes, what: str) -> np.ndarray:
    if len(data) % 8:
        _refuse(f"{what} is not a whole number of int64 values")
    return np.frombuffer(data, dtype="<i8").astype(np.int64)


def _join(names: Sequence[str]) -> str:
    """Member names on the wire: one string, the names joined by newlines (no name holds
    one), so that Flower checks and copies one value, not hundreds, in every message."""
    return "\n".join(names)


def _split(text: str, what: str) -> tuple[str, ...]:
    """The member names of a :func:`_join`-ed string (empty: none), checked by
    :func:`_names`."""
    return _names(text.split("\n") if text else [], what)


def _fixed(keys: Sequence[str], data: bytes, size: int, kind: str) -> dict[str, bytes]:
    """``keys`` paired in order with the ``size``-byte values ``data`` concatenates (MACs,
    keys, signatures, seeds travel as one bytes value)."""
    if len(data) != size * len(keys):
        _refuse(f"a {kind} message pairs its names and values wrongly")
    return {k: data[size * i:size * (i + 1)] for i, k in enumerate(keys)}


_BLOBS = (list, bytes)
#: Member names joined by newlines (:func:`_names`).
_NAME_LIST = re.compile(rf"(?:{NAME_PATTERN.pattern}\n)*{NAME_PATTERN.pattern}")


# --- messages --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetupRequest:
    """S1, server -> every member: the public run parameters."""

    KIND: ClassVar[str] = "secagg-setup"
    run_id: str
    rounds: int
    threshold: int
    modulus: int

    def __post_init__(self) -> None:
        _run_id(self.run_id)
        _int(self.rounds, "rounds", 1)
        _int(self.threshold, "threshold", 1)
        _int(self.modulus, "modulus", 2)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "rounds": self.rounds,
                "threshold": self.threshold, "modulus": self.modulus}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SetupRequest:
        return cls(**_read_wire(data, cls.KIND, {"run_id": str, "rounds": int,
                                                 "threshold": int, "modulus": int}))


@dataclass(frozen=True)
class Advertisement:
    """S1 reply: a member's fresh X25519 public key, signed with its roster key."""

    KIND: ClassVar[str] = "secagg-advertisement"
    member: str
    run_id: str
    public_key: bytes
    signature: bytes

    def __post_init__(self) -> None:
        _name(self.member)
        _run_id(self.run_id)
        _blob(self.public_key, "public_key", KEY_BYTES)
        _blob(self.signature, "signature", _SIGNATURE_BYTES)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "public_key": self.public_key, "signature": self.signature}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Advertisement:
        return cls(**_read_wire(data, cls.KIND, {"member": str, "run_id": str,
                                                 "public_key": bytes, "signature": bytes}))


@dataclass(frozen=True)
class KeyList:
    """S2, server -> every member: the advertisements it collected."""

    KIND: ClassVar[str] = "secagg-key-list"
    run_id: str
    advertisements: tuple[Advertisement, ...]

    def __post_init__(self) -> None:
        _run_id(self.run_id)
        ads = tuple(self.advertisements)
        if not all(isinstance(a, Advertisement) and a.run_id == self.run_id for a in ads):
            _refuse("a key list holds an advertisement of another run; the message is malformed")
        _names([a.member for a in ads], "advertisements")
        _set(self, advertisements=ads)

    def to_dict(self) -> dict[str, Any]:
        ads = self.advertisements
        return {"kind": self.KIND, "run_id": self.run_id,
                "members": _join([a.member for a in ads]),
                "public_keys": b"".join(a.public_key for a in ads),
                "signatures": b"".join(a.signature for a in ads)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyList:
        d = _read_wire(data, cls.KIND, {"run_id": str, "members": str, "public_keys": bytes,
                                        "signatures": bytes})
        members = _split(d["members"], "members")
        keys = _fixed(members, d["public_keys"], KEY_BYTES, cls.KIND)
        signatures = _fixed(members, d["signatures"], _SIGNATURE_BYTES, cls.KIND)
        ads = [Advertisement(m, d["run_id"], keys[m], signatures[m]) for m in members]
        return cls(d["run_id"], tuple(ads))


@dataclass(frozen=True)
class ShareBundle:
    """S2 reply: one AES-GCM ciphertext of shares per other member (nonce + ciphertext)."""

    KIND: ClassVar[str] = "secagg-share-bundle"
    member: str
    run_id: str
    ciphertexts: Mapping[str, bytes]

    def __post_init__(self) -> None:
        _name(self.member)
        _run_id(self.run_id)
        _set(self, ciphertexts=_blobs(self.ciphertexts, "ciphertexts"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "recipients": _join(list(self.ciphertexts)),
                "ciphertexts": list(self.ciphertexts.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShareBundle:
        d = _read_wire(data, cls.KIND, {"member": str, "run_id": str, "recipients": str,
                                        "ciphertexts": _BLOBS})
        recipients = _split(d["recipients"], "recipients")
        return cls(d["member"], d["run_id"], _pairs(recipients, d["ciphertexts"], cls.KIND))


@dataclass(frozen=True)
class InputRequest:
    """Round stage 1, server -> member: the vector length; the first one also relays the
    ciphertexts addressed to the member and names ``U_setup``."""

    KIND: ClassVar[str] = "secagg-input-request"
    run_id: str
    round: int
    length: int
    setup_members: tuple[str, ...] = ()
    ciphertexts: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _run_id(self.run_id)
        _int(self.round, "round")
        _int(self.length, "length")
        _set(self, setup_members=_names(self.setup_members, "setup_members"),
             ciphertexts=_blobs(self.ciphertexts, "ciphertexts"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "round": self.round,
                "length": self.length, "setup_members": _join(self.setup_members),
                "senders": _join(list(self.ciphertexts)),
                "ciphertexts": list(self.ciphertexts.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InputRequest:
        d = _read_wire(data, cls.KIND, {"run_id": str, "round": int, "length": int,
                                        "setup_members": str, "senders": str,
                                        "ciphertexts": _BLOBS})
        senders = _split(d["senders"], "senders")
        return cls(d["run_id"], d["round"], d["length"],
                   _split(d["setup_members"], "setup_members"),
                   _pairs(senders, d["ciphertexts"], cls.KIND))


@dataclass(frozen=True, eq=False)
class MaskedInput:
    """Round stage 1 reply: the masked vector (int64 residues modulo the modulus)."""

    KIND: ClassVar[str] = "secagg-masked-input"
    member: str
    run_id: str
    round: int
    vector: np.ndarray

    def __post_init__(self) -> None:
        _name(self.member)
        _run_id(self.run_id)
        _int(self.round, "round")
        vector = np.asarray(self.vector)
        if vector.ndim != 1 or not np.issubdtype(vector.dtype, np.integer):
            _refuse("a masked input must be a one-dimensional integer vector")
        _set(self, vector=vector.astype(np.int64))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "round": self.round, "vector": _vector_bytes(self.vector)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaskedInput:
        d = _read_wire(data, cls.KIND, {"member": str, "run_id": str, "round": int,
                                        "vector": bytes})
        return cls(d["member"], d["run_id"], d["round"], _vector_from(d["vector"], "vector"))


@dataclass(frozen=True)
class ConsistencyRequest:
    """Round stage 2, server -> every endorser: ``U3``, the members whose masked inputs it
    holds, and the survivors it asks to endorse ``U3`` (empty: every survivor), to whom each
    endorser addresses its MACs."""

    KIND: ClassVar[str] = "secagg-consistency-request"
    run_id: str
    round: int
    survivors: tuple[str, ...]
    endorsers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _run_id(self.run_id)
        _int(self.round, "round")
        _set(self, survivors=_names(self.survivors, "survivors"),
             endorsers=_names(self.endorsers, "endorsers"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "round": self.round,
                "survivors": _join(self.survivors), "endorsers": _join(self.endorsers)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConsistencyRequest:
        d = _read_wire(data, cls.KIND, {"run_id": str, "round": int, "survivors": str,
                                        "endorsers": str})
        return cls(d["run_id"], d["round"], _split(d["survivors"], "survivors"),
                   _split(d["endorsers"], "endorsers"))


@dataclass(frozen=True)
class Endorsement:
    """Round stage 2 reply: one HMAC of ``(session, round, U3, endorser, addressee)`` per
    other endorser."""

    KIND: ClassVar[str] = "secagg-endorsement"
    member: str
    run_id: str
    round: int
    macs: Mapping[str, bytes]

    def __post_init__(self) -> None:
        _name(self.member)
        _run_id(self.run_id)
        _int(self.round, "round")
        _set(self, macs=_blobs(self.macs, "macs", KEY_BYTES))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "round": self.round, "peers": _join(list(self.macs)),
                "macs": b"".join(self.macs.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Endorsement:
        d = _read_wire(data, cls.KIND, {"member": str, "run_id": str, "round": int,
                                        "peers": str, "macs": bytes})
        return cls(d["member"], d["run_id"], d["round"],
                   _fixed(_split(d["peers"], "peers"), d["macs"], KEY_BYTES, cls.KIND))


@dataclass(frozen=True)
class UnmaskRequest:
    """Round stage 3, server -> endorser: ``U3`` again and the MACs addressed to it."""

    KIND: ClassVar[str] = "secagg-unmask-request"
    run_id: str
    round: int
    survivors: tuple[str, ...]
    macs_for_you: Mapping[str, bytes]

    def __post_init__(self) -> None:
        _run_id(self.run_id)
        _int(self.round, "round")
        _set(self, survivors=_names(self.survivors, "survivors"),
             macs_for_you=_blobs(self.macs_for_you, "macs_for_you", KEY_BYTES))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "round": self.round,
                "survivors": _join(self.survivors), "endorsers": _join(list(self.macs_for_you)),
                "macs": b"".join(self.macs_for_you.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnmaskRequest:
        d = _read_wire(data, cls.KIND, {"run_id": str, "round": int, "survivors": str,
                                        "endorsers": str, "macs": bytes})
        return cls(d["run_id"], d["round"], _split(d["survivors"], "survivors"),
                   _fixed(_split(d["endorsers"], "endorsers"), d["macs"], KEY_BYTES, cls.KIND))


@dataclass(frozen=True, eq=False)
class Reveal:
    """Round stage 3 reply: the member's shares of ``b_k^r`` for every ``k`` in ``U3``
    (rows in ``share_members`` order, ``SEED_ELEMENTS`` field elements each) and its own
    round seeds with the members outside ``U3``."""

    KIND: ClassVar[str] = "secagg-reveal"
    member: str
    run_id: str
    round: int
    share_members: tuple[str, ...]
    shares: np.ndarray
    seeds: Mapping[str, bytes]

    def __post_init__(self) -> None:
        _name(self.member)
        _run_id(self.run_id)
        _int(self.round, "round")
        members = _names(self.share_members, "share_members")
        shares = np.asarray(self.shares)
        if shares.shape != (len(members), SEED_ELEMENTS) or not np.issubdtype(
                shares.dtype, np.integer):
            _refuse("a reveal needs one row of seed shares per member it names")
        _set(self, share_members=members, shares=shares.astype(np.int64),
             seeds=_blobs(self.seeds, "seeds", KEY_BYTES))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "round": self.round, "share_members": _join(self.share_members),
                "shares": _vector_bytes(self.shares.ravel()), "dropped": _join(list(self.seeds)),
                "seeds": b"".join(self.seeds.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reveal:
        d = _read_wire(data, cls.KIND, {"member": str, "run_id": str, "round": int,
                                        "share_members": str, "shares": bytes,
                                        "dropped": str, "seeds": bytes})
        members = _split(d["share_members"], "share_members")
        shares = _vector_from(d["shares"], "shares")
        if shares.size != len(members) * SEED_ELEMENTS:
            _refuse("a reveal needs one row of seed shares per member it names")
        return cls(d["member"], d["run_id"], d["round"], members,
                   shares.reshape(-1, SEED_ELEMENTS),
                   _fixed(_split(d["dropped"], "dropped"), d["seeds"], KEY_BYTES, cls.KIND))


_MESSAGES = {cls.KIND: cls for cls in (SetupRequest, Advertisement, KeyList, ShareBundle,
                                       InputRequest, MaskedInput, ConsistencyRequest,
                                       Endorsement, UnmaskRequest, Reveal)}


def message_from_dict(data: Mapping[str, Any]) -> Any:
    """The message ``data`` encodes, whichever kind it is (``ProtocolRefusal`` if none)."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in _MESSAGES:
        _refuse("not a secure-aggregation message (unknown kind)")
    return _MESSAGES[kind].from_dict(data)


# --- signed and MAC'd contents ---------------------------------------------------------------


def advertisement_payload(consortium: str, request: SetupRequest, member: str,
                          public_key: bytes) -> bytes:
    """What an advertisement's signature covers: the key and every public run parameter."""
    return canonical(PROTOCOL_VERSION, "advertisement", consortium, request.run_id, member,
                     public_key, request.rounds, request.threshold, request.modulus)


def _session_id(consortium: str, request: SetupRequest, ads: Sequence[Advertisement]) -> bytes:
    keys = sorted([a.member, a.public_key] for a in ads)
    return digest(PROTOCOL_VERSION, "session", consortium, request.run_id, request.rounds,
                  request.threshold, request.modulus, keys)


def _shares_aad(session_id: bytes, sender: str, recipient: str) -> bytes:
    return canonical(PROTOCOL_VERSION, "shares", session_id, sender, recipient)


def _survivors_digest(session_id: bytes, round_number: int, survivors: Sequence[str]) -> bytes:
    """What identifies one round's survivor set: the MACs cover it, and a site remembers it
    as the set it endorsed."""
    return digest(PROTOCOL_VERSION, "survivors", session_id, round_number, sorted(survivors))


def _endorsed_set(survivors_digest: bytes) -> bytes:
    """The start of every endorsement MAC's content for one survivor set (computed once per
    set: the canonical encoding is a concatenation, so the MAC's content is this followed by
    the canonical endorser and addressee, :func:`~fedpca.secure.keys.canonical_name`)."""
    return canonical(PROTOCOL_VERSION, "endorse", survivors_digest)


def _mac(key: bytes, endorsed_set: bytes, endorser: str, addressee: str) -> hmac.HMAC:
    tag = hmac.HMAC(key, hashes.SHA256())
    tag.update(endorsed_set + canonical_name(endorser) + canonical_name(addressee))
    return tag


def _mask_sign(member: str, peer: str) -> int:
    """+1 when ``member`` adds the pair's mask (``peer`` sorts after it), else -1."""
    return 1 if peer > member else -1


# --- the site --------------------------------------------------------------------------------

_NEW, _ADVERTISED, _SHARED, _READY = "new", "advertised", "shared", "ready"


class SiteSession:
    """One site's side of one run: consumes server messages, emits replies.

    Args:
        member: the site's name in the roster.
        signing_key: the site's Ed25519 key (its public key must be the roster's entry).
        roster: the consortium's roster.
        min_sites: ``M >= 2``, the fewest honest members in any sum the site helps reveal.
        colluders: ``c >= 0``, how many other members the site assumes collude with the server.
        max_rounds: the most rounds the site agrees to in one run.
    """

    def __init__(self, member: str, signing_key: Ed25519PrivateKey, roster: Roster, *,
                 min_sites: int, colluders: int, max_rounds: int) -> None:
        if member not in roster:
            raise ConfigurationError(f"site {member!r} is not in the roster; ask the consortium "
                                     "to add its public key")
        public = signing_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                       serialization.PublicFormat.Raw)
        if public != roster.keys[member]:
            raise ConfigurationError(f"the signing key of site {member!r} is not the roster's "
                                     "key for it; load the right key file or update the roster")
        for name, value, low in (("min_sites", min_sites, 2), ("colluders", colluders, 0),
                                 ("max_rounds", max_rounds, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigurationError(f"{name} must be an integer >= {low}; fix the site's "
                                         "secure-aggregation policy")
        self.member = member
        self.min_sites, self.colluders, self.max_rounds = min_sites, colluders, max_rounds
        self._signing_key, self._roster = signing_key, roster
        self._stage = _NEW
        self._params: SetupRequest | None = None
        self._exchange_key: bytes | None = None          # X25519 private key, S1 to S2 only
        self._advertisement: Advertisement | None = None
        self._session_id = b""
        self._seeds: dict[int, bytes] = {}               # own b^r until round r is masked
        self._own_shares = np.zeros((0, SEED_ELEMENTS), dtype=np.int64)
        self._masked: set[int] = set()
        self._endorsed: dict[int, bytes] = {}            # round -> digest of the set endorsed
        self._revealed: set[int] = set()
        #: What the key agreement and the relay fixed for the rest of the run (the bulk of
        #: the state: keys and shares of every member).
        self._agreed = _Agreed()
        #: The input request :meth:`check_input` last passed and what it opened (this message
        #: only; never saved).
        self._checked: tuple[InputRequest, Any] | None = None

    @property
    def parameters(self) -> SetupRequest | None:
        """The run's parameters once the site advertised a key (``None`` before)."""
        return self._params

    # -- setup ---------------------------------------------------------------------------------

    def advertise(self, request: SetupRequest) -> Advertisement:
        """S1: check the run parameters, make a fresh X25519 key pair and sign it."""
        self._expect(_NEW, "a setup request", "this site already advertised a key for the run")
        t, c, m = request.threshold, self.colluders, self.min_sites
        if request.rounds > self.max_rounds:
            self._fail(f"the run asks for more rounds than this site's max_rounds "
                       f"({self.max_rounds}); lower the rounds or raise the site's limit")
        if request.modulus > MAX_MODULUS or request.modulus & (request.modulus - 1):
            self._fail("the modulus must be a power of two between 2 and 2**62; fix the run's "
                       "modulus")
        if t - c < m:
            self._fail(f"threshold t={t} cannot keep M={m} honest members in a sum with c={c} "
                       "colluders (need t - c >= M); raise the threshold")
        if t > len(self._roster.names):
            self._fail(f"threshold t={t} exceeds the roster's {len(self._roster.names)} "
                       "members, so nothing could be unmasked; lower the threshold")
        private = X25519PrivateKey.generate()
        public = private.public_key().public_bytes(serialization.Encoding.Raw,
                                                   serialization.PublicFormat.Raw)
        signature = self._signing_key.sign(
            advertisement_payload(self._roster.consortium, request, self.member, public))
        self._params = request
        self._exchange_key = private.private_bytes(serialization.Encoding.Raw,
                                                   serialization.PrivateFormat.Raw,
                                                   serialization.NoEncryption())
        self._advertisement = Advertisement(self.member, request.run_id, public, signature)
        self._stage = _ADVERTISED
        logger.info("site %s advertised its key for run %s", self.member, request.run_id)
        return self._advertisement

    def share(self, key_list: KeyList) -> ShareBundle:
        """S2: verify every advertisement and the thresholds, then send the seed shares."""
        self._expect(_ADVERTISED, "a key list", "this site already answered a key list")
        params = self._check_run(key_list.run_id)
        self._verify_key_list(key_list)
        members = tuple(sorted(a.member for a in key_list.advertisements))
        try:
            check_setup(len(members), params.threshold, self.colluders, self.min_sites)
        except ProtocolRefusal as refusal:
            self._fail(f"{refusal}; nothing sent")
        session_id = _session_id(self._roster.consortium, params, key_list.advertisements)
        keys = self._derive_pair_keys(key_list, session_id)
        seeds = {r: os.urandom(KEY_BYTES) for r in range(1, params.rounds + 1)}
        elements = np.concatenate([shamir.bytes_to_elements(seeds[r]) for r in sorted(seeds)])
        points = np.arange(1, len(members) + 1)
        shares = shamir.split(elements, params.threshold, points).reshape(
            len(members), params.rounds, SEED_ELEMENTS)
        ciphertexts = {}
        for index, peer in enumerate(members):
            if peer != self.member:
                nonce = os.urandom(_NONCE_BYTES)
                plaintext = _vector_bytes(shares[index].ravel())
                ciphertexts[peer] = nonce + AESGCM(keys[peer].send).encrypt(
                    nonce, plaintext, _shares_aad(session_id, self.member, peer))
        self._session_id, self._seeds = session_id, seeds
        self._own_shares = shares[members.index(self.member)]
        self._agreed = _Agreed.from_pair_keys(members, keys)
        self._exchange_key = None
        self._stage = _SHARED
        logger.info("site %s verified the key list of run %s and sent its shares",
                    self.member, params.run_id)
        return ShareBundle(self.member, params.run_id, ciphertexts)

    def _verify_key_list(self, key_list: KeyList) -> None:
        """Protects against Sybils (names outside the roster), advertisements the server
        forged or altered (signatures under roster keys over the parameters this site saw)
        and a list that drops or replaces this site's own advertisement."""
        assert self._params is not None and self._advertisement is not None
        for ad in key_list.advertisements:
            if ad.member not in self._roster:
                self._fail(f"the key list names {ad.member!r}, who is not in the roster: the "
                           "coordinator may be inventing members; nothing sent")
            content = advertisement_payload(self._roster.consortium, self._params, ad.member,
                                            ad.public_key)
            try:
                self._roster.public_key(ad.member).verify(ad.signature, content)
            except InvalidSignature:
                self._fail(f"the advertisement of {ad.member!r} is not signed by its roster key "
                           "over this run's parameters: forged or altered; nothing sent")
        own = [a for a in key_list.advertisements if a.member == self.member]
        if own != [self._advertisement]:
            self._fail("the key list does not hold this site's advertisement unchanged; "
                       "nothing sent")

    def _derive_pair_keys(self, key_list: KeyList, session_id: bytes) -> dict[str, Any]:
        assert self._exchange_key is not None
        private = X25519PrivateKey.from_private_bytes(self._exchange_key)
        keys = {}
        for ad in key_list.advertisements:
            if ad.member == self.member:
                continue
            try:
                secret = shared_secret(private, ad.public_key)
            except ValueError:
                self._fail(f"the key of {ad.member!r} is not a valid X25519 key; nothing sent")
            keys[ad.member] = pair_keys(secret, session_id, self.member, ad.member)
        return keys

    # -- rounds --------------------------------------------------------------------------------

    def check_input(self, request: InputRequest) -> None:
        """Refuse an input request before the caller computes (and charges) its value: an
        unknown run, a round out of range or already masked, an absurd length, or (on the
        first request) relayed shares that do not decrypt. :meth:`masked_input` of the same
        request object reuses what this opened."""
        self._checked = (request, self._check_input(request))

    def masked_input(self, request: InputRequest, value: np.ndarray) -> MaskedInput:
        """Mask ``value`` (int64 residues in ``[0, modulus)``) for ``request``'s round, at most
        once per round."""
        checked, self._checked = self._checked, None
        received = checked[1] if checked and checked[0] is request else self._check_input(request)
        params = self._params
        assert params is not None
        vector = np.asarray(value)
        if (vector.shape != (request.length,) or not np.issubdtype(vector.dtype, np.integer)
                or vector.min() < 0 or vector.max() >= params.modulus):
            raise InvalidDataError("the value to mask must be a vector of the requested length "
                                   "of integer residues in [0, modulus); encode it first")
        if received is not None:
            self._agreed = self._agreed.relayed(*received)
            self._stage = _READY
        agreed = self._agreed
        peers = [p for p in agreed.setup_members if p != self.member]
        seeds = [round_seed(agreed.mask_key(p), request.round) for p in peers]
        masks = prg_sum([self._seeds.pop(request.round)]
                        + [s for p, s in zip(peers, seeds) if _mask_sign(self.member, p) > 0],
                        [s for p, s in zip(peers, seeds) if _mask_sign(self.member, p) < 0],
                        request.length, params.modulus)
        self._masked.add(request.round)
        logger.info("site %s masked its input for round %d", self.member, request.round)
        out = ((vector.astype(np.uint64) + masks) & np.uint64(params.modulus - 1)).astype(np.int64)
        return MaskedInput(self.member, params.run_id, request.round, out)

    def _check_input(self, request: InputRequest
                     ) -> tuple[tuple[str, ...], np.ndarray] | None:
        if self._stage not in (_SHARED, _READY):
            self._fail("an input request before the key agreement completed; run the setup first")
        self._check_round(request.run_id, request.round)
        if request.round in self._masked:
            self._fail(f"this site already masked an input for round {request.round}; a round "
                       "is masked once")
        if not 0 < request.length <= MAX_LENGTH:
            self._fail("the vector length must be between 1 and 2**27; fix the request")
        if self._stage == _READY:
            if request.setup_members or request.ciphertexts:
                self._fail("shares are relayed once, with the first input request; drop them")
            return None
        return self._open_relay(request)

    def _open_relay(self, request: InputRequest
                    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Decrypt the relayed shares (one row per member of ``U_setup``, in its order). Protects against a split view (different key lists give
        different session ids, so nothing decrypts), altered or withheld ciphertexts, and a
        ``U_setup`` too small for the threshold or outside the key list."""
        params = self._params
        assert params is not None
        setup = tuple(sorted(request.setup_members))
        if self.member not in setup or not set(setup) <= set(self._agreed.members):
            self._fail("U_setup must hold this site and only members of the key list; the "
                       "first input request must relay the shares")
        if len(setup) < params.threshold:
            self._fail(f"fewer members sent shares than the threshold t={params.threshold}; "
                       "nothing could be unmasked, so nothing is sent")
        if set(request.ciphertexts) != set(setup) - {self.member}:
            self._fail("the relayed shares must come from exactly the other members of U_setup")
        shares = {self.member: self._own_shares}
        for sender, blob in request.ciphertexts.items():
            try:
                plaintext = AESGCM(self._agreed.receive_key(sender)).decrypt(
                    blob[:_NONCE_BYTES], blob[_NONCE_BYTES:],
                    _shares_aad(self._session_id, sender, self.member))
            except (InvalidTag, ValueError):
                self._fail(f"the shares from {sender!r} do not decrypt: the coordinator altered "
                           "them or showed members different key lists; nothing sent")
            values = np.frombuffer(plaintext, dtype="<i8").astype(np.int64)
            if values.size != params.rounds * SEED_ELEMENTS or values.min() < 0 or (
                    values.max() >= shamir.PRIME):
                self._fail(f"the shares from {sender!r} are malformed; nothing sent")
            shares[sender] = values.reshape(params.rounds, SEED_ELEMENTS)
        return setup, np.stack([shares[k] for k in setup])

    def endorse(self, request: ConsistencyRequest) -> Endorsement:
        """Endorse the survivor set ``U3`` of a round, at most one set per round, with a MAC
        for each other endorser the server names. Protects against a server that shows
        members different survivor sets to unmask two sums. (Which survivors endorse is the
        server's choice: a site reveals only after ``t - 1`` other survivors' MACs of the set
        it endorsed verify, whoever they are.)"""
        params = self._ready(request.run_id, request.round)
        survivors = tuple(sorted(request.survivors))
        endorsers = tuple(sorted(request.endorsers)) or survivors
        if request.round not in self._masked:
            self._fail(f"this site sent no masked input for round {request.round}; it endorses "
                       "only rounds it took part in")
        if self.member not in survivors or not set(survivors) <= set(
                self._agreed.setup_members):
            self._fail("the survivors must include this site and lie within U_setup; nothing "
                       "endorsed")
        if self.member not in endorsers or not set(endorsers) <= set(survivors):
            self._fail("the endorsers must include this site and be survivors; nothing endorsed")
        for what, members in (("survivors", survivors), ("endorsers", endorsers)):
            if len(members) < params.threshold:
                self._fail(f"fewer {what} than the threshold t={params.threshold}; the round "
                           "cannot be unmasked, nothing endorsed")
        survivors_digest = _survivors_digest(self._session_id, request.round, survivors)
        earlier = self._endorsed.get(request.round)
        if earlier is not None and earlier != survivors_digest:
            self._fail(f"this site already endorsed another survivor set for round "
                       f"{request.round}; it endorses one set per round")
        endorsed = _endorsed_set(survivors_digest)
        agreed = self._agreed
        macs = {peer: _mac(agreed.endorse_key(peer), endorsed, self.member, peer).finalize()
                for peer in endorsers if peer != self.member}
        self._endorsed[request.round] = survivors_digest
        logger.info("site %s endorsed the survivors of round %d", self.member, request.round)
        return Endorsement(self.member, params.run_id, request.round, macs)

    def unmask(self, request: UnmaskRequest) -> Reveal:
        """Reveal the round's secrets, once, for the set this site endorsed, when ``t - 1``
        other survivors' MACs of that set verify."""
        params = self._ready(request.run_id, request.round)
        survivors = tuple(sorted(request.survivors))
        if request.round in self._revealed:
            self._fail(f"this site already revealed its secrets for round {request.round}; it "
                       "reveals once per round")
        survivors_digest = _survivors_digest(self._session_id, request.round, survivors)
        if self._endorsed.get(request.round) != survivors_digest:
            self._fail("the unmask request names another survivor set than this site endorsed; "
                       "nothing revealed")
        self._verify_endorsements(request, survivors_digest, survivors, params.threshold)
        self._revealed.add(request.round)
        agreed = self._agreed
        shares = agreed.round_shares(survivors, request.round)
        dropped = sorted(set(agreed.setup_members) - set(survivors))
        seeds = {j: round_seed(agreed.mask_key(j), request.round) for j in dropped}
        logger.info("site %s revealed its round %d secrets", self.member, request.round)
        return Reveal(self.member, params.run_id, request.round, survivors, shares, seeds)

    def _verify_endorsements(self, request: UnmaskRequest, survivors_digest: bytes,
                             survivors: tuple[str, ...], threshold: int) -> None:
        """Every MAC must be from another survivor and verify (an altered one means the
        server shows sets inconsistently); ``t - 1`` of them plus this site's own."""
        endorsed = _endorsed_set(survivors_digest)
        others = set(survivors) - {self.member}
        for peer, tag in request.macs_for_you.items():
            if peer not in others:
                self._fail("an endorsement comes from outside the survivor set; nothing revealed")
            try:
                _mac(self._agreed.endorse_key(peer), endorsed, peer, self.member).verify(tag)
            except InvalidSignature:
                self._fail(f"the endorsement of {peer!r} does not verify: the coordinator "
                           "altered it or showed members different survivor sets; nothing "
                           "revealed")
        if len(request.macs_for_you) < threshold - 1:
            self._fail(f"fewer than t={threshold} members endorsed this survivor set; nothing "
                       "revealed")

    # -- checks --------------------------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        logger.warning("site %s refused: %s", self.member, message)
        raise ProtocolRefusal(message) from None

    def _expect(self, stage: str, what: str, otherwise: str) -> None:
        if self._stage != stage:
            self._fail(f"{what} is out of order: {otherwise}" if self._stage != _NEW else
                       f"{what} is out of order: the run has not been set up")

    def _check_run(self, run_id: str) -> SetupRequest:
        if self._params is None or run_id != self._params.run_id:
            self._fail("the message is for another run than this session's; start a new session")
        return self._params

    def _check_round(self, run_id: str, round_number: int) -> SetupRequest:
        params = self._check_run(run_id)
        if not 1 <= round_number <= params.rounds:
            self._fail(f"round {round_number} is outside the run's rounds 1..{params.rounds}")
        return params

    def _ready(self, run_id: str, round_number: int) -> SetupRequest:
        if self._stage != _READY:
            self._fail("a round message before this site masked any input; nothing released")
        return self._check_round(run_id, round_number)

    # -- state ---------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The session state (secret: it holds seeds and keys; keep it on the site) without the
        signing key and roster: a JSON header of what changes from message to message, then
        what the key agreement and the relay fixed (:class:`_Agreed`, serialised once per run,
        because a simulation saves the state after every message)."""
        params = self._params
        header = {
            "format": _STATE_FORMAT, "member": self.member, "min_sites": self.min_sites,
            "colluders": self.colluders, "max_rounds": self.max_rounds, "stage": self._stage,
            "params": None if params is None else [params.run_id, params.rounds,
                                                   params.threshold, params.modulus],
            "exchange_key": _b64(self._exchange_key),
            "advertisement": None if self._advertisement is None else [
                _b64(self._advertisement.public_key), _b64(self._advertisement.signature)],
            "session_id": _b64(self._session_id),
            "seeds": {str(r): _b64(s) for r, s in self._seeds.items()},
            "own_shares": _b64(_vector_bytes(self._own_shares.ravel())),
            "masked": sorted(self._masked), "revealed": sorted(self._revealed),
            "endorsed": {str(r): _b64(d) for r, d in self._endorsed.items()},
        }
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        return b"".join([len(text).to_bytes(4, "big"), text, self._agreed.to_bytes()])

    @classmethod
    def from_bytes(cls, data: bytes, signing_key: Ed25519PrivateKey, roster: Roster
                   ) -> SiteSession:
        """A session restored from :meth:`to_bytes`, with the site's signing key and roster
        re-read from its files."""
        try:
            size = int.from_bytes(data[:4], "big")
            state = json.loads(data[4:4 + size].decode("utf-8"))
            if state.get("format") != _STATE_FORMAT:
                raise ValueError("format")
            site = cls(state["member"], signing_key, roster, min_sites=state["min_sites"],
                       colluders=state["colluders"], max_rounds=state["max_rounds"])
            site._restore(state, data[4 + size:])
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            if isinstance(exc, FedPCAError):
                raise
            raise ProtocolRefusal("the saved secure-aggregation state cannot be read; the run "
                                  "must start over") from None
        return site

    def _restore(self, state: dict[str, Any], agreed: bytes) -> None:
        if state["stage"] not in (_NEW, _ADVERTISED, _SHARED, _READY):
            raise ValueError("stage")
        self._stage = state["stage"]
        if state["params"] is not None:
            self._params = SetupRequest(*state["params"])
        self._exchange_key = _unb64(state["exchange_key"])
        if state["advertisement"] is not None and self._params is not None:
            public, signature = (_unb64(v) for v in state["advertisement"])
            self._advertisement = Advertisement(self.member, self._params.run_id, public,
                                                signature)
        self._session_id = _unb64(state["session_id"]) or b""
        self._seeds = {int(r): _unb64(s) for r, s in state["seeds"].items()}
        self._own_shares = np.frombuffer(_unb64(state["own_shares"]), dtype="<i8").astype(
            np.int64).reshape(-1, SEED_ELEMENTS)
        self._masked, self._revealed = set(state["masked"]), set(state["revealed"])
        self._endorsed = {int(r): _unb64(d) for r, d in state["endorsed"].items()}
        self._agreed = _Agreed.from_bytes(agreed)


class _Agreed:
    """What a site's key agreement and the relay fixed for the rest of a run (secret).

    The verified member list (sorted); the pairwise keys with each member, one
    ``KEY_BYTES`` slot per member in that order (the site's own slot zero, never read): the
    share-decryption keys until the relay, the endorsement and mask keys for the whole run;
    after the relay, ``U_setup`` and the site's shares of the self-mask seeds of each of its
    members, ``(|U_setup|, R, SEED_ELEMENTS)``. Immutable (a change makes a new object), so
    its serialisation is made once: a simulation saves a site's state after every message,
    and these are its bulk.
    """

    def __init__(self, members: Sequence[str] = (), receive: bytes = b"", endorse: bytes = b"",
                 mask: bytes = b"", setup_members: Sequence[str] = (),
                 shares: np.ndarray | None = None, serialised: bytes | None = None) -> None:
        self.members, self.setup_members = tuple(members), tuple(setup_members)
        self._index = {m: i for i, m in enumerate(self.members)}
        self._setup_index = {m: i for i, m in enumerate(self.setup_members)}
        self._receive, self._endorse, self._mask = receive, endorse, mask
        self._shares = (np.zeros((0, 0, SEED_ELEMENTS), dtype=np.int64) if shares is None
                        else shares)
        self._serialised = serialised

    @classmethod
    def from_pair_keys(cls, members: Sequence[str], keys: Mapping[str, Any]) -> _Agreed:
        """After the key agreement: ``keys`` maps every other member to its
        :class:`~fedpca.secure.keys.PairKeys`."""
        empty = bytes(KEY_BYTES)

        def slots(kind: str) -> bytes:
            return b"".join(getattr(keys[m], kind) if m in keys else empty for m in members)

        return cls(members, slots("receive"), slots("endorse"), slots("mask"))

    def relayed(self, setup_members: Sequence[str], shares: np.ndarray) -> _Agreed:
        """After the relay: ``U_setup`` and the shares (rows in its order); the
        share-decryption keys are dropped (never needed again)."""
        return _Agreed(self.members, b"", self._endorse, self._mask, setup_members, shares)

    def receive_key(self, peer: str) -> bytes:
        """The AES-GCM key of the shares ``peer`` sent this site."""
        return self._slot(self._receive, peer)

    def endorse_key(self, peer: str) -> bytes:
        """The HMAC key of endorsements between this site and ``peer``."""
        return self._slot(self._endorse, peer)

    def mask_key(self, peer: str) -> bytes:
        """The key of this site's pairwise mask seeds with ``peer``."""
        return self._slot(self._mask, peer)

    def _slot(self, keys: bytes, peer: str) -> bytes:
        index = self._index[peer]
        return keys[KEY_BYTES * index:KEY_BYTES * (index + 1)]

    def round_shares(self, members: Sequence[str], round_number: int) -> np.ndarray:
        """This site's shares of round ``round_number``'s self-mask seeds of ``members`` (all
        in ``U_setup``): one row each, in their order."""
        rows = [self._setup_index[k] for k in members]
        return self._shares[rows, round_number - 1]

    def to_bytes(self) -> bytes:
        """A JSON header (the member lists), then the key slots and the shares (int32: field
        elements are below ``2**31``)."""
        if self._serialised is None:
            header = json.dumps({"members": list(self.members),
                                 "setup_members": list(self.setup_members),
                                 "receive": bool(self._receive),
                                 "rounds": self._shares.shape[1]},
                                separators=(",", ":")).encode("utf-8")
            self._serialised = b"".join([
                len(header).to_bytes(4, "big"), header, self._receive, self._endorse,
                self._mask, np.ascontiguousarray(self._shares, dtype="<i4").tobytes()])
        return self._serialised

    @classmethod
    def from_bytes(cls, data: bytes) -> _Agreed:
        """The inverse of :meth:`to_bytes` (``ValueError`` if ``data`` is not one)."""
        size = int.from_bytes(data[:4], "big")
        header = json.loads(data[4:4 + size].decode("utf-8"))
        members, setup = header["members"], header["setup_members"]
        slots = KEY_BYTES * len(members)
        offset = 4 + size
        receive = data[offset:offset + slots] if header["receive"] else b""
        offset += len(receive)
        endorse, mask = data[offset:offset + slots], data[offset + slots:offset + 2 * slots]
        offset += 2 * slots
        rows = int(header["rounds"])
        if len(endorse) != slots or len(mask) != slots or len(receive) not in (0, slots) or (
                len(data) - offset != 4 * len(setup) * rows * SEED_ELEMENTS):
            raise ValueError("agreed state")
        shares = np.frombuffer(data, dtype="<i4", offset=offset).astype(np.int64).reshape(
            len(setup), rows, SEED_ELEMENTS)
        return cls(members, receive, endorse, mask, setup, shares, serialised=bytes(data))


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


# --- the honest server -----------------------------------------------------------------------


@dataclass
class _Round:
    length: int
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    survivors: tuple[str, ...] = ()
    #: The endorsers of the current consistency attempt, those of them who endorsed (once
    #: the unmask requests are made), and the survivors who failed an earlier attempt.
    asked: tuple[str, ...] = ()
    endorsements: dict[str, Endorsement] = field(default_factory=dict)
    endorsers: tuple[str, ...] = ()
    failed: set[str] = field(default_factory=set)
    reveals: dict[str, Reveal] = field(default_factory=dict)
    result: np.ndarray | None = None


class ServerSession:
    """The honest server: drives the stages, collects and relays, decodes each round's sum.

    A message that does not fit the protocol raises :class:`ProtocolRefusal` (the server drops
    it); a round it cannot decode raises :class:`SecureAggregationError`.
    """

    def __init__(self, run_id: str, rounds: int, threshold: int, modulus: int) -> None:
        self.params = SetupRequest(run_id, rounds, threshold, modulus)
        if modulus > MAX_MODULUS or modulus & (modulus - 1):
            raise ConfigurationError("the modulus must be a power of two between 2 and 2**62")
        self._ads: dict[str, Advertisement] = {}
        self._members: tuple[str, ...] = ()
        self._bundles: dict[str, ShareBundle] = {}
        self._setup_members: tuple[str, ...] = ()
        self._rounds: dict[int, _Round] = {}

    @property
    def setup_members(self) -> tuple[str, ...]:
        """``U_setup``: the members whose shares were relayed (empty before round one)."""
        return self._setup_members

    def setup_request(self) -> SetupRequest:
        """S1: the request every member gets."""
        return self.params

    def receive_advertisement(self, ad: Advertisement) -> None:
        """Collect one S1 reply."""
        if self._members or ad.run_id != self.params.run_id or ad.member in self._ads:
            _refuse("an advertisement out of order, of another run, or repeated")
        self._ads[ad.member] = ad

    def key_list(self) -> KeyList:
        """S2: every advertisement collected (the member set is fixed from here on)."""
        if len(self._ads) < self.params.threshold:
            raise SecureAggregationError(f"fewer members advertised keys than the threshold "
                                         f"t={self.params.threshold}; wait for more members")
        self._members = tuple(sorted(self._ads))
        return KeyList(self.params.run_id, tuple(self._ads[m] for m in self._members))

    def receive_bundle(self, bundle: ShareBundle) -> None:
        """Collect one S2 reply."""
        expected = set(self._members) - {bundle.member}
        if (bundle.member not in self._members or bundle.run_id != self.params.run_id
                or set(bundle.ciphertexts) != expected or self._setup_members):
            _refuse("a share bundle out of order, of another run, or not for every member")
        self._bundles[bundle.member] = bundle

    def input_requests(self, round_number: int, length: int) -> dict[str, InputRequest]:
        """A round's input requests, one per member of ``U_setup`` (the first also relays)."""
        if not 1 <= round_number <= self.params.rounds or round_number in self._rounds:
            raise ConfigurationError(f"round {round_number} is out of range or already started")
        if not 0 < length <= MAX_LENGTH:
            raise ConfigurationError("the vector length must be between 1 and 2**27")
        relay = not self._setup_members
        if relay:
            if len(self._bundles) < self.params.threshold:
                raise SecureAggregationError("fewer members sent shares than the threshold; the "
                                             "run cannot go on")
            self._setup_members = tuple(sorted(self._bundles))
        self._rounds[round_number] = _Round(length)
        requests = {}
        for member in self._setup_members:
            if relay:
                relayed = {j: self._bundles[j].ciphertexts[member]
                           for j in self._setup_members if j != member}
                requests[member] = InputRequest(self.params.run_id, round_number, length,
                                                self._setup_members, relayed)
            else:
                requests[member] = InputRequest(self.params.run_id, round_number, length)
        return requests

    def receive_masked_input(self, message: MaskedInput) -> None:
        """Collect one masked input (before the round's consistency request)."""
        state = self._round(message.round)
        vector = message.vector
        if (message.member not in self._setup_members or message.member in state.inputs
                or state.survivors or vector.shape != (state.length,) or vector.min() < 0
                or vector.max() >= self.params.modulus):
            _refuse("a masked input out of order, repeated, or malformed")
        state.inputs[message.member] = vector

    def consistency_request(self, round_number: int) -> ConsistencyRequest:
        """``U3``, the members whose masked inputs arrived, and the survivors asked to
        endorse it (:meth:`endorsers`). Called again when the last attempt got fewer than
        ``t`` reveals (:meth:`decodable`): the same ``U3``, endorsed by every survivor that
        has not failed an attempt. Fails below the threshold, or when a survivor failed to
        reveal after members dropped before the input (design point (d))."""
        state = self._round(round_number)
        threshold = self.params.threshold
        if len(state.inputs) < threshold:
            raise SecureAggregationError(
                f"round {round_number}: fewer survivors than the threshold t={threshold}; the "
                "round fails and nothing is unmasked")
        if not state.survivors:
            state.survivors = tuple(sorted(state.inputs))
            everyone = self._dropped(state)
            state.asked = state.survivors if everyone else state.survivors[:threshold]
        else:
            if self._dropped(state):  # every survivor was asked, and one did not reveal
                raise SecureAggregationError(
                    f"round {round_number}: a survivor dropped before revealing while other "
                    "members had dropped before the input stage, so their pairwise masks are "
                    "lost; the round fails and nothing is unmasked")
            state.failed |= (set(state.asked) - set(state.endorsements)) | (
                set(state.endorsers) - set(state.reveals))
            state.asked = tuple(m for m in state.survivors if m not in state.failed)
            if len(state.asked) < threshold:
                raise SecureAggregationError(
                    f"round {round_number}: fewer than t={threshold} survivors endorse and "
                    "reveal; the round fails and nothing is unmasked")
        state.endorsements, state.endorsers = {}, ()
        return ConsistencyRequest(self.params.run_id, round_number, state.survivors, state.asked)

    def endorsers(self, round_number: int) -> tuple[str, ...]:
        """The survivors asked to endorse ``U3`` and then to reveal. First, every survivor
        when a member of ``U_setup`` sent no input (each must reveal its pairwise seed with
        it), else the first ``t``: ``t`` endorsements and ``t`` reveals unmask the sum, so
        the last two exchanges of a round go to ``t`` sites, not all (and each endorser MACs
        only the others asked). If one of them fails, the next attempt
        (:meth:`consistency_request`) asks every survivor that has not failed. (Which
        survivors endorse is the server's choice and changes nothing a site checks: a site
        may endorse the same ``U3`` again, for another list of endorsers, and reveals once.)"""
        return self._round(round_number).asked

    def receive_endorsement(self, message: Endorsement) -> None:
        """Collect one endorsement."""
        state = self._round(message.round)
        if (message.member not in state.asked or state.endorsers
                or set(message.macs) != set(state.asked) - {message.member}):
            _refuse("an endorsement out of order or not for every other endorser")
        state.endorsements[message.member] = message

    def unmask_requests(self, round_number: int) -> dict[str, UnmaskRequest]:
        """One unmask request per endorser that has not revealed yet, with the MACs of this
        attempt addressed to it (none below ``t`` endorsements: :meth:`decodable` is then
        false and the next attempt asks more survivors)."""
        state = self._round(round_number)
        endorsers = tuple(sorted(state.endorsements))
        if len(endorsers) < self.params.threshold:
            return {}
        state.endorsers = endorsers
        return {
            i: UnmaskRequest(self.params.run_id, round_number, state.survivors,
                             {j: state.endorsements[j].macs[i] for j in endorsers if j != i})
            for i in endorsers if i not in state.reveals
        }

    def decodable(self, round_number: int) -> bool:
        """Whether the reveals suffice: ``t`` of them, and every survivor's when members
        dropped before the input."""
        state = self._round(round_number)
        return len(state.reveals) >= self.params.threshold and (
            not self._dropped(state) or set(state.survivors) <= set(state.reveals))

    def _dropped(self, state: _Round) -> bool:
        """Whether members of ``U_setup`` sent no input this round."""
        return set(state.survivors) != set(self._setup_members)

    def receive_reveal(self, message: Reveal) -> None:
        """Collect one reveal."""
        state = self._round(message.round)
        dropped = set(self._setup_members) - set(state.survivors)
        if (message.member not in state.endorsers or message.member in state.reveals
                or message.share_members != state.survivors or set(message.seeds) != dropped):
            _refuse("a reveal out of order, repeated, or not for the survivor set")
        state.reveals[message.member] = message

    def decode(self, round_number: int) -> np.ndarray:
        """The round's exact sum of the survivors' values modulo the modulus (int64)."""
        state = self._round(round_number)
        if state.result is not None:
            return state.result.copy()
        threshold, modulus = self.params.threshold, self.params.modulus
        if not state.survivors or len(state.reveals) < threshold:
            raise SecureAggregationError(
                f"round {round_number}: fewer reveals than the threshold t={threshold}; the "
                "round fails and nothing is unmasked")
        dropped = [j for j in self._setup_members if j not in state.survivors]
        silent = [i for i in state.survivors if i not in state.reveals]
        if dropped and silent:
            raise SecureAggregationError(
                f"round {round_number}: a survivor dropped before revealing while other members "
                "had dropped before the input stage, so their pairwise masks are lost; the round "
                "fails and nothing is unmasked")
        total = np.zeros(state.length, dtype=np.uint64)
        for i in state.survivors:
            total += state.inputs[i].astype(np.uint64)
        pairs = [(i, j) for i in (state.survivors if dropped else ()) for j in dropped]
        total -= prg_sum(
            self._self_mask_seeds(state, round_number)
            + [state.reveals[i].seeds[j] for i, j in pairs if _mask_sign(i, j) > 0],
            [state.reveals[i].seeds[j] for i, j in pairs if _mask_sign(i, j) < 0],
            state.length, modulus)
        state.result = (total & np.uint64(modulus - 1)).astype(np.int64)
        logger.info("server decoded round %d", round_number)
        return state.result.copy()

    def _self_mask_seeds(self, state: _Round, round_number: int) -> list[bytes]:
        revealers = sorted(state.reveals)[: self.params.threshold]
        points = np.array([self._members.index(m) + 1 for m in revealers])
        shares = np.stack([state.reveals[m].shares for m in revealers])
        elements = shamir.reconstruct(points, shares)
        try:
            return [shamir.elements_to_bytes(e, KEY_BYTES) for e in elements]
        except InvalidDataError:
            raise SecureAggregationError(
                f"round {round_number}: the revealed shares do not reconstruct the self-mask "
                "seeds (a member sent wrong shares); the round fails") from None

    def _round(self, round_number: int) -> _Round:
        state = self._rounds.get(round_number)
        if state is None:
            _refuse(f"round {round_number} has not started")
        return state
