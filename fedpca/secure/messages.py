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
from types import MappingProxyType
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


class FlatMessage:
    """A message whose wire form is its dataclass fields as they are, each of the wire type
    its annotation names (``str``, ``int`` or ``bytes``: :meth:`wire`)."""

    KIND: ClassVar[str]

    @classmethod
    def wire(cls) -> Mapping[str, type]:
        """Each field's name and wire type, in field order, read once from the annotations."""
        return _flat_wire(cls)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, **{name: getattr(self, name) for name in self.wire()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        return cls(**read_wire(data, cls.KIND, cls.wire()))


@functools.cache
def _flat_wire(cls: type) -> Mapping[str, type]:
    hints = get_type_hints(cls)
    return MappingProxyType({f.name: hints[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class SetupRequest(FlatMessage):
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
class Advertisement(FlatMessage):
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
class ShareBundle:
    """S2 reply: one AES-GCM ciphertext of shares per other member (nonce + ciphertext)."""

    KIND: ClassVar[str] = "secagg-share-bundle"
    member: str
    run_id: str
    ciphertexts: Mapping[str, bytes]

    def __post_init__(self) -> None:
        check_name(self.member)
        check_run_id(self.run_id)
        set_frozen(self, ciphertexts=check_blobs(self.ciphertexts, "ciphertexts"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "recipients": join_names(list(self.ciphertexts)),
                "ciphertexts": list(self.ciphertexts.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShareBundle:
        d = read_wire(data, cls.KIND, {"member": str, "run_id": str, "recipients": str,
                                       "ciphertexts": BLOBS})
        recipients = split_names(d["recipients"], "recipients")
        return cls(d["member"], d["run_id"], paired(recipients, d["ciphertexts"], cls.KIND))


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
        check_run_id(self.run_id)
        check_int(self.round, "round")
        check_int(self.length, "length")
        set_frozen(self, setup_members=check_names(self.setup_members, "setup_members"),
                   ciphertexts=check_blobs(self.ciphertexts, "ciphertexts"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "round": self.round,
                "length": self.length, "setup_members": join_names(self.setup_members),
                "senders": join_names(list(self.ciphertexts)),
                "ciphertexts": list(self.ciphertexts.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InputRequest:
        d = read_wire(data, cls.KIND, {"run_id": str, "round": int, "length": int,
                                       "setup_members": str, "senders": str,
                                       "ciphertexts": BLOBS})
        senders = split_names(d["senders"], "senders")
        return cls(d["run_id"], d["round"], d["length"],
                   split_names(d["setup_members"], "setup_members"),
                   paired(senders, d["ciphertexts"], cls.KIND))


@dataclass(frozen=True, eq=False)
class MaskedInput:
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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "round": self.round, "vector": vector_bytes(self.vector)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaskedInput:
        d = read_wire(data, cls.KIND, {"member": str, "run_id": str, "round": int,
                                       "vector": bytes})
        return cls(d["member"], d["run_id"], d["round"], vector_from(d["vector"], "vector"))


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
        check_run_id(self.run_id)
        check_int(self.round, "round")
        set_frozen(self, survivors=check_names(self.survivors, "survivors"),
                   endorsers=check_names(self.endorsers, "endorsers"))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "round": self.round,
                "survivors": join_names(self.survivors), "endorsers": join_names(self.endorsers)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConsistencyRequest:
        d = read_wire(data, cls.KIND, {"run_id": str, "round": int, "survivors": str,
                                       "endorsers": str})
        return cls(d["run_id"], d["round"], split_names(d["survivors"], "survivors"),
                   split_names(d["endorsers"], "endorsers"))


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
        check_name(self.member)
        check_run_id(self.run_id)
        check_int(self.round, "round")
        set_frozen(self, macs=check_blobs(self.macs, "macs", KEY_BYTES))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "round": self.round, "peers": join_names(list(self.macs)),
                "macs": b"".join(self.macs.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Endorsement:
        d = read_wire(data, cls.KIND, {"member": str, "run_id": str, "round": int,
                                       "peers": str, "macs": bytes})
        return cls(d["member"], d["run_id"], d["round"],
                   split_fixed(split_names(d["peers"], "peers"), d["macs"], KEY_BYTES, cls.KIND))


@dataclass(frozen=True)
class UnmaskRequest:
    """Round stage 3, server -> endorser: ``U3`` again and the MACs addressed to it."""

    KIND: ClassVar[str] = "secagg-unmask-request"
    run_id: str
    round: int
    survivors: tuple[str, ...]
    macs_for_you: Mapping[str, bytes]

    def __post_init__(self) -> None:
        check_run_id(self.run_id)
        check_int(self.round, "round")
        set_frozen(self, survivors=check_names(self.survivors, "survivors"),
                   macs_for_you=check_blobs(self.macs_for_you, "macs_for_you", KEY_BYTES))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "run_id": self.run_id, "round": self.round,
                "survivors": join_names(self.survivors),
                "endorsers": join_names(list(self.macs_for_you)),
                "macs": b"".join(self.macs_for_you.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnmaskRequest:
        d = read_wire(data, cls.KIND, {"run_id": str, "round": int, "survivors": str,
                                       "endorsers": str, "macs": bytes})
        return cls(d["run_id"], d["round"], split_names(d["survivors"], "survivors"),
                   split_fixed(split_names(d["endorsers"], "endorsers"), d["macs"], KEY_BYTES,
                               cls.KIND))


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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "member": self.member, "run_id": self.run_id,
                "round": self.round, "share_members": join_names(self.share_members),
                "shares": vector_bytes(self.shares.ravel()),
                "dropped": join_names(list(self.seeds)),
                "seeds": b"".join(self.seeds.values())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reveal:
        d = read_wire(data, cls.KIND, {"member": str, "run_id": str, "round": int,
                                       "share_members": str, "shares": bytes,
                                       "dropped": str, "seeds": bytes})
        members = split_names(d["share_members"], "share_members")
        shares = vector_from(d["shares"], "shares")
        if shares.size != len(members) * SEED_ELEMENTS:
            refuse("a reveal needs one row of seed shares per member it names")
        return cls(d["member"], d["run_id"], d["round"], members,
                   shares.reshape(-1, SEED_ELEMENTS),
                   split_fixed(split_names(d["dropped"], "dropped"), d["seeds"], KEY_BYTES,
                               cls.KIND))


_MESSAGES = {cls.KIND: cls for cls in (SetupRequest, Advertisement, KeyList, ShareBundle,
                                       InputRequest, MaskedInput, ConsistencyRequest,
                                       Endorsement, UnmaskRequest, Reveal)}


def message_from_dict(data: Mapping[str, Any]) -> Any:
    """The message ``data`` encodes, whichever kind it is (``ProtocolRefusal`` if none)."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in _MESSAGES:
        refuse("not a secure-aggregation message (unknown kind)")
    return _MESSAGES[kind].from_dict(data)


# --- signed and MAC'd contents ---------------------------------------------------------------
