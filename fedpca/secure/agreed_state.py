"""What a site's key agreement and the relay fixed for the rest of a secure-aggregation run.

:class:`AgreedState` is the bulk of a :class:`~fedpca.secure.site_session.SiteSession`'s
state, and secret: the pairwise keys with every member and the site's shares of the other
members' self-mask seeds, saved with the rest of the session
(:meth:`~fedpca.secure.site_session.SiteSession.to_bytes`) and kept on the site.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedpca.secure.keys import KEY_BYTES
from fedpca.secure.messages import SEED_ELEMENTS

__all__ = ["AgreedState"]


class AgreedState:
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
    def from_pair_keys(cls, members: Sequence[str], keys: Mapping[str, Any]) -> AgreedState:
        """After the key agreement: ``keys`` maps every other member to its
        :class:`~fedpca.secure.keys.PairKeys`."""
        empty = bytes(KEY_BYTES)

        def slots(kind: str) -> bytes:
            return b"".join(getattr(keys[m], kind) if m in keys else empty for m in members)

        return cls(members, slots("receive"), slots("endorse"), slots("mask"))

    def relayed(self, setup_members: Sequence[str], shares: np.ndarray) -> AgreedState:
        """After the relay: ``U_setup`` and the shares (rows in its order); the
        share-decryption keys are dropped (never needed again)."""
        return AgreedState(self.members, b"", self._endorse, self._mask, setup_members, shares)

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
    def from_bytes(cls, data: bytes) -> AgreedState:
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
