"""What a site's secure-aggregation session signs, MACs, hashes and binds its ciphertexts to.

Every content is an unambiguous encoding (:func:`~fedpca.secure.keys.canonical`) that starts
with :data:`~fedpca.secure.keys.PROTOCOL_VERSION` and a label of its kind, so no content of
one kind reads as another:

* an advertisement's Ed25519 signature covers the member's fresh key and every public run
  parameter, the run's description of its sums included (:func:`advertisement_payload`): the
  coordinator cannot reuse it for another run, member, threshold or description, so members
  shown different descriptions (a grid or a noise per member) refuse each other's
  advertisements before any of them sends a share;
* the session id hashes the run parameters, the description and the sorted (member, key)
  list (:func:`session_id_for`): members shown different key lists (a split view) derive
  different ids, hence different keys;
* a share ciphertext's AES-GCM associated data names the session, its sender and its
  recipient (:func:`shares_aad`): it cannot be replayed to another member or run;
* an endorsement's HMAC covers the digest of the survivor set it endorses
  (:func:`survivor_set_digest`), its endorser and its addressee (:func:`endorsement_mac`):
  it cannot be reflected back to its endorser as a peer's.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.hazmat.primitives import hashes, hmac

from fedpca.secure.keys import PROTOCOL_VERSION, canonical, canonical_name, digest
from fedpca.secure.messages import Advertisement, SetupRequest

__all__ = [
    "advertisement_payload",
    "description_digest",
    "endorsed_set",
    "endorsement_mac",
    "session_id_for",
    "shares_aad",
    "survivor_set_digest",
]


def advertisement_payload(consortium: str, request: SetupRequest, member: str,
                          public_key: bytes) -> bytes:
    """What an advertisement's signature covers: the key and every public run parameter (the
    description by its digest)."""
    return canonical(PROTOCOL_VERSION, "advertisement", consortium, request.run_id, member,
                     public_key, request.rounds, request.threshold, request.modulus,
                     description_digest(request))


def session_id_for(consortium: str, request: SetupRequest, ads: Sequence[Advertisement]
                   ) -> bytes:
    """The session id: a hash of the run parameters, the description and the sorted
    (member, key) list."""
    keys = sorted([a.member, a.public_key] for a in ads)
    return digest(PROTOCOL_VERSION, "session", consortium, request.run_id, request.rounds,
                  request.threshold, request.modulus, description_digest(request), keys)


def description_digest(request: SetupRequest) -> bytes:
    """The SHA-256 of the run's description (what members sign and compare of it)."""
    return digest(PROTOCOL_VERSION, "description", request.description)


def shares_aad(session_id: bytes, sender: str, recipient: str) -> bytes:
    """The associated data of the shares ``sender`` encrypts for ``recipient``."""
    return canonical(PROTOCOL_VERSION, "shares", session_id, sender, recipient)


def survivor_set_digest(session_id: bytes, round_number: int, survivors: Sequence[str]
                        ) -> bytes:
    """What identifies one round's survivor set: the MACs cover it, and a site remembers it
    as the set it endorsed."""
    return digest(PROTOCOL_VERSION, "survivors", session_id, round_number, sorted(survivors))


def endorsed_set(survivors_digest: bytes) -> bytes:
    """The start of every endorsement MAC's content for one survivor set (computed once per
    set: the canonical encoding is a concatenation, so the MAC's content is this followed by
    the canonical endorser and addressee, :func:`~fedpca.secure.keys.canonical_name`)."""
    return canonical(PROTOCOL_VERSION, "endorse", survivors_digest)


def endorsement_mac(key: bytes, endorsed: bytes, endorser: str, addressee: str) -> hmac.HMAC:
    """The HMAC-SHA256 of ``endorser``'s endorsement for ``addressee`` of the survivor set
    ``endorsed`` (:func:`endorsed_set`), under the pair's endorsement key."""
    tag = hmac.HMAC(key, hashes.SHA256())
    tag.update(endorsed + canonical_name(endorser) + canonical_name(addressee))
    return tag
