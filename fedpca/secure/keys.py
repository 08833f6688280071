"""Canonical encoding, pairwise key derivation and the mask PRG (all from ``cryptography``).

Every pair of members runs one X25519 key agreement per run (fresh key pairs, advertised
under the members' Ed25519 roster keys). From the shared secret, HKDF-SHA256 with
``salt = session id`` derives independent keys, told apart by their ``info`` labels:

* ``share`` (direction-specific: sender, recipient): the AES-GCM key of the shares one member
  sends the other through the coordinator;
* ``endorse`` (the pair, sorted): the HMAC-SHA256 key of consistency endorsements (the MAC'd
  message names endorser and addressee, so a MAC is never valid reflected back);
* ``mask`` (the pair, sorted): the key from which each round's pairwise mask seed is derived,
  ``HKDF(mask key, info = b"round" + round)``: seeds of different rounds are independent,
  so revealing one round's seed says nothing about another round's.

The session id salts everything: members shown different key lists (a split view) derive
different keys, and their ciphertexts and MACs do not verify.

:func:`prg_sum` expands each 32-byte seed with ChaCha20 (key = seed, all-zero nonce: every
seed keys exactly one stream; the keystream is taken as ChaCha20-Poly1305's encryption of
zeros, the cheapest call for it) into words reduced modulo a power of two by masking, which
is exactly uniform. Of a pair, the member whose name sorts first adds the pair's mask and the
other subtracts it (:func:`mask_sign`), so the pair's masks cancel in the sum.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

#: The version string every signed, MAC'd, or hashed protocol message starts with.
PROTOCOL_VERSION = "fedpca-secagg/2"
#: Bytes of every symmetric key and seed.
KEY_BYTES = 32
#: The largest modulus :func:`prg_sum` reduces to.
MAX_MODULUS = 2**62
#: The longest vector a site masks (2**27 entries, 1 GiB as uint64); longer is absurd.
MAX_LENGTH = 2**27
#: ChaCha20-Poly1305's nonce and tag sizes (the PRG's nonce is all zeros: one stream per seed).
_NONCE_BYTES, _TAG_BYTES = 12, 16

Field = str | bytes | int | Sequence["Field"]


def canonical(*fields: Field) -> bytes:
    """An unambiguous, prefix-free encoding of strings, bytes, integers and lists of them.

    Each field is a type tag, its length (4 bytes, big-endian) and its content, so no two
    different field sequences encode to the same bytes (no ``"a" + "bc"`` vs ``"ab" + "c"``
    confusion in anything signed, MAC'd or hashed).
    """
    return b"".join(map(_encode, fields))


def _encode(field: Field) -> bytes:
    # strings first: lists of member names are the bulk of what is encoded
    if isinstance(field, str):
        data = field.encode("utf-8")
        return b"s" + len(data).to_bytes(4, "big") + data
    if isinstance(field, bytes):
        return b"b" + len(field).to_bytes(4, "big") + field
    if isinstance(field, bool):
        raise TypeError("canonical() takes no booleans; encode them as integers")
    if isinstance(field, int):
        return b"i" + field.to_bytes(9, "big", signed=True)
    if isinstance(field, (list, tuple)):
        return b"l" + len(field).to_bytes(4, "big") + b"".join(map(_encode, field))
    raise TypeError(f"canonical() cannot encode {type(field).__name__}")


@functools.lru_cache(maxsize=4096)
def canonical_name(name: str) -> bytes:
    """:func:`canonical` of one member name (cached: every endorsement MAC's content ends with
    the canonical endorser and addressee, ``canonical(a, b) == canonical(a) + canonical(b)``)."""
    return canonical(name)


def digest(*fields: Field) -> bytes:
    """SHA-256 of :func:`canonical` of ``fields``."""
    return hashlib.sha256(canonical(*fields)).digest()


def hkdf(secret: bytes, info: bytes, salt: bytes | None = None) -> bytes:
    """HKDF-SHA256 of ``secret`` to one 32-byte key."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(secret)


@dataclass(frozen=True)
class PairKeys:
    """What a member derives for one peer: the share keys of both directions, the
    endorsement key and the mask key."""

    send: bytes
    receive: bytes
    endorse: bytes
    mask: bytes


def shared_secret(private_key: X25519PrivateKey, peer_public_key: bytes) -> bytes:
    """The X25519 shared secret with a peer's raw 32-byte public key.

    Raises:
        ValueError: the peer's key is malformed or of low order (``cryptography`` refuses an
            all-zero shared secret).
    """
    return private_key.exchange(X25519PublicKey.from_public_bytes(peer_public_key))


def pair_keys(secret: bytes, session_id: bytes, member: str, peer: str) -> PairKeys:
    """The keys ``member`` uses with ``peer``, from their X25519 shared secret."""
    low, high = sorted((member, peer))
    return PairKeys(
        send=hkdf(secret, canonical(PROTOCOL_VERSION, "share", member, peer), session_id),
        receive=hkdf(secret, canonical(PROTOCOL_VERSION, "share", peer, member), session_id),
        endorse=hkdf(secret, canonical(PROTOCOL_VERSION, "endorse", low, high), session_id),
        mask=hkdf(secret, canonical(PROTOCOL_VERSION, "mask", low, high), session_id),
    )


def round_seed(mask_key: bytes, round_number: int) -> bytes:
    """The pair's mask seed of one round: HMAC-SHA256(mask key, ``b"round"`` + round), a
    PRF, so the seeds of different rounds are independent and revealing one (a dropped peer's)
    says nothing about the others (HMAC: about a third of HKDF's cost, paid per peer and
    round)."""
    tag = hmac.HMAC(mask_key, hashes.SHA256())
    tag.update(b"round" + round_number.to_bytes(4, "big"))
    return tag.finalize()


def _check(length: int, modulus: int) -> None:
    if not 2 <= modulus <= MAX_MODULUS or modulus & (modulus - 1):
        raise ValueError("the modulus must be a power of two in 2..2**62")
    if length < 1:
        raise ValueError("a mask has at least one entry")


def _streams(seeds: Sequence[bytes], length: int, modulus: int) -> np.ndarray:
    """One ChaCha20 stream per seed, as rows of ``length`` words: 32-bit words when the
    modulus divides ``2**32`` (half the keystream), else 64-bit ones.

    The keystream is ChaCha20-Poly1305's encryption of zeros under the seed with the all-zero
    nonce (RFC 8439: the ChaCha20 keystream from block 1; the 16-byte tag is dropped): one
    call per seed, which costs about half of a ``Cipher`` object's set-up, paid per peer and
    round."""
    dtype = np.dtype("<u4") if modulus <= 2**32 else np.dtype("<u8")
    for seed in seeds:
        if len(seed) != KEY_BYTES:
            raise ValueError("a PRG seed has 32 bytes")
    zeros, nonce = bytes(dtype.itemsize * length), bytes(_NONCE_BYTES)
    data = b"".join([ChaCha20Poly1305(seed).encrypt(nonce, zeros, None) for seed in seeds])
    width = length + _TAG_BYTES // dtype.itemsize
    return np.frombuffer(data, dtype=dtype).reshape(len(seeds), width)[:, :length]


def prg_sum(added: Sequence[bytes], subtracted: Sequence[bytes], length: int,
            modulus: int) -> np.ndarray:
    """``(sum PRG(a) - sum PRG(s)) mod modulus`` over the seeds ``added`` and
    ``subtracted`` (uint64), in one pass over all their streams. Exact: the words are
    summed modulo ``2**64``, which the power-of-two modulus divides."""
    _check(length, modulus)
    total = np.zeros(length, dtype=np.uint64)
    if added:
        total += _streams(added, length, modulus).sum(axis=0, dtype=np.uint64)
    if subtracted:
        total -= _streams(subtracted, length, modulus).sum(axis=0, dtype=np.uint64)
    return total & np.uint64(modulus - 1)


def mask_sign(member: str, peer: str) -> int:
    """+1 when ``member`` adds the pair's mask (``peer`` sorts after it), else -1."""
    return 1 if peer > member else -1
