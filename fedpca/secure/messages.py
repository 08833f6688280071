"""The secure aggregation's messages: ten frozen value objects and their dict form.

Each message checks its own fields as it is made, and ``to_dict()``/``from_dict()`` give and
read its wire form (:mod:`fedpca.secure.wire`), which holds only ``str``, ``int``, ``bytes``
and lists of them, as a Flower ``ConfigRecord`` carries. :func:`message_from_dict` reads a
message of any kind. In protocol order (:mod:`fedpca.secure`): setup
(:class:`SetupRequest` -> :class:`Advertisement`, :class:`KeyList` -> :class:`ShareBundle`),
then each round (:class:`InputRequest` -> :class:`MaskedInput`,
:class:`ConsistencyRequest` -> :class:`Endorsement`, :class:`UnmaskRequest` ->
:class:`Reveal`). A message the coordinator sends is untrusted: a malformed one raises
:class:`~fedpca.secure.conditions.ProtocolRefusal` before any session reads it.

What a coordinator that sends each member *different* values could do with every field of a
request, and what stops it (a value every member gets alike is the protocol's to check, in
:mod:`fedpca.secure.site_session`):

* :class:`SetupRequest` ``run_id``, ``rounds``, ``threshold``, ``modulus``, ``description``:
  every one of them is covered by the member's advertisement signature and hashed into the
  session id (:mod:`fedpca.secure.authenticated`), so a member shown other values than its
  peers refuses their advertisements at the key list, before it sends any share. The
  ``description`` is the run's description of every round's sum (grid step, noise, record
  bound, sites per sum, dimension, sensitivity, rotation seed, modulus; the ``M`` and ``c``
  it assumes: :class:`~fedpca.algorithms.secure_sum.SumDescription`): per-member grids or
  noises are therefore refused, and a round's request must name exactly the described sum.
* :class:`KeyList` ``advertisements``: a different list per member (a split view) gives
  different session ids, so the shares and MACs of members shown different lists neither
  decrypt nor verify; a list holding Sybils, forged or altered keys is refused outright.
* :class:`InputRequest` ``round``, ``length``: a member masks each round once and checks the
  length against the described sum; ``setup_members`` and ``ciphertexts`` (``U_setup``): a
  different set per member is harmless, since a member reveals only for survivors inside its
  own ``U_setup``, which holds ``t`` members.
* :class:`ConsistencyRequest` ``survivors``, ``endorsers``: a different survivor set per
  member (to unmask two sums differing by one member) gets no reveal: a member reveals only
  for the one set it endorsed, once ``t - 1`` others' MACs of that set verify, and at most
  one set per round can gather ``t`` endorsements (:mod:`fedpca.secure.conditions`).
* :class:`UnmaskRequest` ``survivors``, ``macs_for_you``: another set than the member
  endorsed, or MACs that do not verify, are refused; the member reveals once per round.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, get_type_hints

import numpy as np

from fedpca.secure import shamir
from fedpca.secure.keys import KEY_BYTES
from fedpca.secure.wire import (
    BLOBS,
    check_blob,
    check_blobs,
    check_description,
    check_int,
    check_name,
    check_names,
    check_run_id,
    join_names,
    paired,
    read_wire,
    refuse,
    set_frozen,
    split_fixed,
    split_names,
    vector_bytes,
    vector_from,
)

__all__ = [
    "SEED_ELEMENTS",
    "Advertisement",
    "ConsistencyRequest",
    "Endorsement",
    "InputRequest",
    "KeyList",
    "MaskedInput",
    "Reveal",
    "SetupRequest",
    "ShareBundle",
    "UnmaskRequest",
    "message_from_dict",
]

#: Field elements that carry one 32-byte seed.
SEED_ELEMENTS = shamir.elements_for(KEY_BYTES)
_SIGNATURE_BYTES = 64


@dataclass(frozen=True)
class Keyed:
    """How a field mapping member names to bytes travels: the names joined under ``names``,
    the values under ``values`` (default: the field's own name), concatenated when each is
    ``size`` bytes, else as a list."""

    names: str
    size: int | None = None
    values: str | None = None


def _keyed(names: str, size: int | None = None, values: str | None = None, **kw: Any) -> Any:
    """A dataclass field mapping member names to bytes, sent as :class:`Keyed` says."""
    return field(metadata={"wire": Keyed(names, size, values)}, **kw)


#: A field of member names (joined on the wire: :func:`~fedpca.secure.wire.join_names`).
_NAMES = tuple[str, ...]


class WireMessage:
    """A message whose wire form follows its fields: ``str``, ``int`` and ``bytes`` as they
    are, member names joined into one string, an int64 array as bytes
    (:func:`~fedpca.secure.wire.vector_bytes`), a map of names to bytes as its field's
    :class:`Keyed` says; read back through :func:`~fedpca.secure.wire.read_wire`'s checks."""

    KIND: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.KIND}
        for name, kind in _wire(type(self)):
            value = getattr(self, name)
            if isinstance(kind, Keyed):
                out[kind.names] = join_names(list(value))
                out[kind.values or name] = (b"".join(value.values()) if kind.size
                                            else list(value.values()))
            elif kind == _NAMES:
                out[name] = join_names(value)
            else:
                out[name] = vector_bytes(value.ravel()) if kind is np.ndarray else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        schema: dict[str, Any] = {}
        for name, kind in _wire(cls):
            if isinstance(kind, Keyed):
                schema[kind.names] = str
                schema[kind.values or name] = bytes if kind.size else BLOBS
            else:
                schema[name] = str if kind == _NAMES else bytes if kind is np.ndarray else kind
        d = read_wire(data, cls.KIND, schema)
        values: dict[str, Any] = {}
        for name, kind in _wire(cls):
            if isinstance(kind, Keyed):
                keys, blobs = split_names(d[kind.names], kind.names), d[kind.values or name]
                values[name] = (split_fixed(keys, blobs, kind.size, cls.KIND) if kind.size
                                else paired(keys, blobs, cls.KIND))
            elif kind == _NAMES:
                values[name] = split_names(d[name], name)
            else:
                values[name] = vector_from(d[name], name) if kind is np.ndarray else d[name]
        return cls(**cls._from_wire(values))

    @classmethod
    def _from_wire(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The constructor's arguments from the fields as read (a message reshapes here)."""
        return values


@functools.cache
def _wire(cls: type) -> tuple[tuple[str, Any], ...]:
    """Each field's name and wire kind (its :class:`Keyed`, or its annotation), in order."""
    hints = get_type_hints(cls)
    return tuple((f.name, f.metadata.get("wire", hints[f.name])) for f in fields(cls))


@dataclass(frozen=True)
class SetupRequest(WireMessage):
    """S1, server -> every member: the public run parameters, with the run's description
    (what every round's sum is, in the words of the layer that makes the sums: a site's
    :mod:`fedpca.site.secure_stage` reads it), which every member signs with its key."""

    KIND: ClassVar[str] = "secagg-setup"
    run_id: str
    rounds: int
    threshold: int
    modulus: int
    description: str = ""

    def __post_init__(self) -> None:
        check_run_id(self.run_id)
        check_int(self.rounds, "rounds", 1)
        check_int(self.threshold, "threshold", 1)
        check_int(self.modulus, "modulus", 2)
        check_description(self.description)


@dataclass(frozen=True)
class Advertisement(WireMessage):
    """S1 reply: a member's fresh X25519 public key, signed with its roster key."""

    KIND: ClassVar[str] = "secagg-advertisement"
    member: str
    run_id: str
    public_key: bytes
    signature: bytes

    def __post_init__(self) -> None:
        check_name(self.member)
        check_run_id(self.run_id)
        check_blob(self.public_key, "public_key", KEY_BYTES)
        check_blob(self.signature, "signature", _SIGNATURE_BYTES)


@dataclass(frozen=True)
class KeyList:
    """S2, server -> every member: the advertisements it collected."""

    KIND: ClassVar[str] = "secagg-key-list"
    run_id: str
    advertisements: tuple[Advertisement, ...]

    def __post_init__(self) -> None:
        check_run_id(self.run_id)
        ads = tuple(self.advertisements)
        if not all(isinstance(a, Advertisement) and a.run_id == self.run_id for a in ads):
            refuse("a key list holds an advertisement of another run; the message is malformed")
        check_names([a.member for a in ads], "advertisements")
        set_frozen(self, advertisements=ads)

    def to_dict(self) -> dict[str, Any]:
        ads = self.advertisements
        return {"kind": self.KIND, "run_id": self.run_id,
                "members": join_names([a.member for a in ads]),
                "public_keys": b"".join(a.public_key for a in ads),
                "signatures": b"".join(a.signature for a in ads)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyList:
        d = read_wire(data, cls.KIND, {"run_id": str, "members": str, "public_keys": bytes,
                                       "signatures": bytes})
        members = split_names(d["members"], "members")
        keys = split_fixed(members, d["public_keys"], KEY_BYTES, cls.KIND)
        signatures = split_fixed(members, d["signatures"], _SIGNATURE_BYTES, cls.KIND)
        ads = [Advertisement(m, d["run_id"], keys[m], signatures[m]) for m in members]
        return cls(d["run_id"], tuple(ads))


@dataclass(frozen=True)
class ShareBundle(WireMessage):
    """S2 reply: one AES-GCM ciphertext of shares per other member (nonce + ciphertext)."""

    KIND: ClassVar[str] = "secagg-share-bundle"
    member: str
    run_id: str
    ciphertexts: Mapping[str, bytes] = _keyed("recipients")

    def __post_init__(self) -> None:
        check_name(self.member)
        check_run_id(self.run_id)
        set_frozen(self, ciphertexts=check_blobs(self.ciphertexts, "ciphertexts"))


@dataclass(frozen=True)
class InputRequest(WireMessage):
    """Round stage 1, server -> member: the vector length; the first one also relays the
    ciphertexts addressed to the member and names ``U_setup``."""

    KIND: ClassVar[str] = "secagg-input-request"
    run_id: str
    round: int
    length: int
    setup_members: tuple[str, ...] = ()
    ciphertexts: Mapping[str, bytes] = _keyed("senders", default_factory=dict)

    def __post_init__(self) -> None:
        check_run_id(self.run_id)
        check_int(self.round, "round")
        check_int(self.length, "length")
        set_frozen(self, setup_members=check_names(self.setup_members, "setup_members"),
                   ciphertexts=check_blobs(self.ciphertexts, "ciphertexts"))


@dataclass(frozen=True, eq=False)
class MaskedInput(WireMessage):
    """Round stage 1 reply: the masked vector (int64 residues modulo the modulus)."""

    KIND: ClassVar[str] = "secagg-masked-input"
    member: str
    run_id: str
    round: int
    vector: np.ndarray

    def __post_init__(self) -> None:
        check_name(self.member)
        check_run_id(self.run_id)
        check_int(self.round, "round")
        vector = np.asarray(self.vector)
        if vector.ndim != 1 or not np.issubdtype(vector.dtype, np.integer):
            refuse("a masked input must be a one-dimensional integer vector")
        set_frozen(self, vector=vector.astype(np.int64))


@dataclass(frozen=True)
class ConsistencyRequest(WireMessage):
    """Round stage 2, server -> every endorser: ``U3``, the members whose masked inputs it
    holds, and the survivors it asks to endorse ``U3`` (empty: every survivor), to whom each
    endorser addresses its MACs."""

    KIND: ClassVar[str] = "secagg-consistency-request"
    run_id: str
    round: int
    survivors: tuple[str, ...]
    endorsers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_run_id(self.run_id)
        check_int(self.round, "round")
        set_frozen(self, survivors=check_names(self.survivors, "survivors"),
                   endorsers=check_names(self.endorsers, "endorsers"))


@dataclass(frozen=True)
class Endorsement(WireMessage):
    """Round stage 2 reply: one HMAC of ``(session, round, U3, endorser, addressee)`` per
    other endorser."""

    KIND: ClassVar[str] = "secagg-endorsement"
    member: str
    run_id: str
    round: int
    macs: Mapping[str, bytes] = _keyed("peers", KEY_BYTES)

    def __post_init__(self) -> None:
        check_name(self.member)
        check_run_id(self.run_id)
        check_int(self.round, "round")
        set_frozen(self, macs=check_blobs(self.macs, "macs", KEY_BYTES))


@dataclass(frozen=True)
class UnmaskRequest(WireMessage):
    """Round stage 3, server -> endorser: ``U3`` again and the MACs addressed to it."""

    KIND: ClassVar[str] = "secagg-unmask-request"
    run_id: str
    round: int
    survivors: tuple[str, ...]
    macs_for_you: Mapping[str, bytes] = _keyed("endorsers", KEY_BYTES, "macs")

    def __post_init__(self) -> None:
        check_run_id(self.run_id)
        check_int(self.round, "round")
        set_frozen(self, survivors=check_names(self.survivors, "survivors"),
                   macs_for_you=check_blobs(self.macs_for_you, "macs_for_you", KEY_BYTES))


@dataclass(frozen=True, eq=False)
class Reveal(WireMessage):
    """Round stage 3 reply: the member's shares of ``b_k^r`` for every ``k`` in ``U3``
    (rows in ``share_members`` order, ``SEED_ELEMENTS`` field elements each) and its own
    round seeds with the members outside ``U3``."""

    KIND: ClassVar[str] = "secagg-reveal"
    member: str
    run_id: str
    round: int
    share_members: tuple[str, ...]
    shares: np.ndarray
    seeds: Mapping[str, bytes] = _keyed("dropped", KEY_BYTES)

    def __post_init__(self) -> None:
        check_name(self.member)
        check_run_id(self.run_id)
        check_int(self.round, "round")
        members = check_names(self.share_members, "share_members")
        shares = np.asarray(self.shares)
        if shares.shape != (len(members), SEED_ELEMENTS) or not np.issubdtype(
                shares.dtype, np.integer):
            refuse("a reveal needs one row of seed shares per member it names")
        set_frozen(self, share_members=members, shares=shares.astype(np.int64),
                   seeds=check_blobs(self.seeds, "seeds", KEY_BYTES))

    @classmethod
    def _from_wire(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The shares' rows, one per member named (their bytes are one flat vector)."""
        if values["shares"].size != len(values["share_members"]) * SEED_ELEMENTS:
            refuse("a reveal needs one row of seed shares per member it names")
        return {**values, "shares": values["shares"].reshape(-1, SEED_ELEMENTS)}


_MESSAGES = {cls.KIND: cls for cls in (SetupRequest, Advertisement, KeyList, ShareBundle,
                                       InputRequest, MaskedInput, ConsistencyRequest,
                                       Endorsement, UnmaskRequest, Reveal)}


def message_from_dict(data: Mapping[str, Any]) -> Any:
    """The message ``data`` encodes, whichever kind it is (``ProtocolRefusal`` if none)."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in _MESSAGES:
        refuse("not a secure-aggregation message (unknown kind)")
    return _MESSAGES[kind].from_dict(data)
