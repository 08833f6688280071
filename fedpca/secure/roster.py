"""The consortium's roster (member name -> Ed25519 public key) and a site's signing key.

The roster is the PKI of secure aggregation: a member accepts another member's key
advertisement only under that member's roster key, so the coordinator cannot speak for a
member. Every member holds the same roster file::

    [roster]
    consortium = "example"

    [[member]]
    name = "site-a"
    key = "<base64 of the 32 raw Ed25519 public-key bytes>"
    proof = "<base64 Ed25519 signature, by that key, of the consortium, the name and the key>"
    # certificate = "<PEM X.509 certificate of the key, issued by a consortium CA>"

Each entry's ``proof`` (proof of possession, checked on every load) shows that the holder of
the key made the entry for this consortium and name: nobody can list another member's key
under a name of their choosing. It does **not** show that the holder is a real member: whoever
writes the roster (often the coordinating centre, i.e. the coordinator) can add members whose
keys it made (Sybils). That is why a site counts as honest only the members it vouched for
(:mod:`fedpca.secure.vouching`): by the key's :func:`key_fingerprint`, compared with the
member out of band, or by a certificate authority it trusts.

A site's signing key is an unencrypted PKCS8 PEM file readable by its owner only (0600, in a
0700 directory when this module creates it); :func:`load_signing_key` refuses a file that
group or others may read or write.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedpca.errors import ConfigurationError
from fedpca.file_modes import SHARED_ANY, create_owner_only, refuse_shared

logger = logging.getLogger(__name__)

#: A member name: letters, digits, ``.``, ``_``, ``-``; 1 to 64 characters, not starting
#: with ``.`` or ``-`` (it also names the member's key file).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
#: Bytes of a raw Ed25519 public key.
PUBLIC_KEY_BYTES = 32
#: What a member's proof of possession signs before the consortium, name and key.
_PROOF_LABEL = b"fedpca roster entry v1"
#: Characters of a key fingerprint (base32, 160 bits), read in groups of four.
_FINGERPRINT_CHARS, _GROUP = 32, 4


def check_member_name(name: object) -> str:
    """``name`` if it is a valid member name, else a :class:`ConfigurationError`."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigurationError(
            f"member name {name!r} is not valid; use 1 to 64 letters, digits, '.', '_' or '-' "
            "(not starting with '.' or '-')"
        )
    return name


def key_fingerprint(raw: bytes) -> str:
    """A public key's fingerprint for people to read to each other (base32 of 160 bits of its
    SHA-256, in groups of four), e.g. ``ABCD-EFGH-...``."""
    digest = hashlib.sha256(b"fedpca secagg key\0" + raw).digest()
    text = base64.b32encode(digest[:20]).decode("ascii")[:_FINGERPRINT_CHARS]
    return "-".join(text[i:i + _GROUP] for i in range(0, len(text), _GROUP))


def normal_fingerprint(text: object) -> str:
    """``text`` as :func:`key_fingerprint` writes it (case, spaces and dashes as people type
    them), else a :class:`ConfigurationError`."""
    letters = "".join(str(text).split()).replace("-", "").upper() if isinstance(text, str) else ""
    if len(letters) != _FINGERPRINT_CHARS or not re.fullmatch(r"[A-Z2-7]+", letters):
        raise ConfigurationError(
            f"{text!r} is not a key fingerprint; copy the one fedpca deploy secagg-key printed "
            "for the member (32 letters and digits, e.g. ABCD-EFGH-...)"
        )
    return "-".join(letters[i:i + _GROUP] for i in range(0, len(letters), _GROUP))


def _proof_payload(consortium: str, name: str, raw: bytes) -> bytes:
    return b"\0".join((_PROOF_LABEL, consortium.encode(), name.encode(), raw))


@dataclass(frozen=True)
class RosterEntry:
    """One member's line of the roster, as the member makes it (:func:`roster_entry`).

    Attributes:
        key: the base64 of its 32 raw Ed25519 public-key bytes.
        proof: the base64 of its signature, by that key, of the consortium, name and key.
        certificate: a PEM X.509 certificate of the key, if a consortium CA issued one.
    """

    key: str
    proof: str
    certificate: str | None = None

    @property
    def fingerprint(self) -> str:
        """The key's :func:`key_fingerprint`."""
        return key_fingerprint(load_roster_key(self.key))


def roster_entry(consortium: str, name: str, signing_key: Ed25519PrivateKey,
                 certificate: str | None = None) -> RosterEntry:
    """Member ``name``'s roster entry in ``consortium``, signed with its own key."""
    raw = signing_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                serialization.PublicFormat.Raw)
    proof = signing_key.sign(_proof_payload(consortium, check_member_name(name), raw))
    return RosterEntry(base64.b64encode(raw).decode("ascii"),
                       base64.b64encode(proof).decode("ascii"), certificate)


@dataclass(frozen=True)
class Roster:
    """The consortium's members, their Ed25519 public keys (raw 32 bytes), each proven by its
    holder, and the certificates some of them carry (PEM)."""

    consortium: str
    keys: Mapping[str, bytes]
    certificates: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_members(cls, consortium: str, members: Mapping[str, RosterEntry],
                     source: str = "roster") -> Roster:
        """A roster from ``name -> entry``; refuses bad names, keys, proofs and duplicates."""
        if not isinstance(consortium, str) or not consortium:
            raise ConfigurationError(f"{source}: [roster] consortium must be a non-empty string")
        keys: dict[str, bytes] = {}
        for name, entry in members.items():
            raw = _decode_key(check_member_name(name), entry.key, source)
            if raw in keys.values():
                raise ConfigurationError(
                    f"{source}: member {name!r} has the same key as another member; every "
                    "member needs its own key (write_signing_key)"
                )
            _check_proof(consortium, name, raw, entry.proof, source)
            keys[name] = raw
        if not keys:
            raise ConfigurationError(f"{source}: the roster lists no [[member]]; add the members")
        certificates = {name: entry.certificate for name, entry in sorted(members.items())
                        if entry.certificate is not None}
        return cls(consortium, dict(sorted(keys.items())), certificates)

    @property
    def digest(self) -> str:
        """The roster's SHA-256 over its consortium, members and keys (hex, 16 characters):
        two sites hold the same roster when they print the same digest."""
        content = json.dumps([self.consortium, {n: k.hex() for n, k in self.keys.items()},
                              dict(self.certificates)], sort_keys=True)
        return hashlib.sha256(content.encode()).hexdigest()[:16]

    def fingerprint(self, name: str) -> str:
        """Member ``name``'s :func:`key_fingerprint`."""
        return key_fingerprint(self.keys[name])

    @property
    def names(self) -> tuple[str, ...]:
        """The member names, sorted."""
        return tuple(self.keys)

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def public_key(self, name: str) -> Ed25519PublicKey:
        """The member's Ed25519 public key (KeyError if ``name`` is not a member)."""
        return Ed25519PublicKey.from_public_bytes(self.keys[name])


def load_roster(path: str | Path) -> Roster:
    """Read a roster TOML file; every problem is a one-line :class:`ConfigurationError`."""
    path = Path(path).expanduser()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(
            f"roster {path} does not exist; ask the consortium for its roster file"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"roster {path} cannot be read: {exc}") from None
    header = raw.get("roster")
    if not isinstance(header, dict) or not isinstance(header.get("consortium"), str):
        raise ConfigurationError(
            f"roster {path}: needs a [roster] table with consortium = \"name\""
        )
    entries = raw.get("member", [])
    if not isinstance(entries, list):
        raise ConfigurationError(f"roster {path}: members must be [[member]] tables")
    members: dict[str, RosterEntry] = {}
    for entry in entries:
        if (not isinstance(entry, dict) or not {"name", "key", "proof"} <= set(entry)
                or not set(entry) <= {"name", "key", "proof", "certificate"}
                or not all(isinstance(v, str) for v in entry.values())):
            raise ConfigurationError(
                f"roster {path}: every [[member]] needs name, key and proof (and may have a "
                "certificate), as the line fedpca deploy secagg-key printed; a roster without "
                "proofs is from an older fedpca: ask each member for its entry again"
            )
        name = check_member_name(entry["name"])
        if name in members:
            raise ConfigurationError(
                f"roster {path}: member {name!r} is listed twice; keep one entry per member"
            )
        members[name] = RosterEntry(entry["key"], entry["proof"], entry.get("certificate"))
    return Roster.from_members(header["consortium"], members, source=f"roster {path}")


def write_roster(path: str | Path, consortium: str, members: Mapping[str, RosterEntry]
                 ) -> Path:
    """Write a roster (``members``: name -> the entry the member made) and check that it
    loads."""
    path = Path(path).expanduser()
    Roster.from_members(consortium, members, source=f"roster {path}")
    lines = ["[roster]", f"consortium = {json.dumps(consortium, ensure_ascii=False)}", ""]
    for name in sorted(members):
        entry = members[name]
        lines += ["[[member]]", f"name = {json.dumps(name)}", f"key = {json.dumps(entry.key)}",
                  f"proof = {json.dumps(entry.proof)}"]
        if entry.certificate is not None:
            lines.append(f"certificate = {json.dumps(entry.certificate)}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    load_roster(path)
    logger.info("wrote roster %s", path)
    return path


def write_signing_key(directory: str | Path, name: str, consortium: str
                      ) -> tuple[Path, RosterEntry]:
    """A new Ed25519 signing key for member ``name`` of ``consortium``: ``(private key path,
    the member's roster entry)``.

    The private key is an unencrypted PKCS8 PEM file, mode 0600 from creation on, named
    ``<name>.secagg-key.pem`` in ``directory`` (created 0700 if absent). An existing key is
    never overwritten: the roster names its public key.
    """
    directory = Path(directory).expanduser()
    check_member_name(name)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path = directory / f"{name}.secagg-key.pem"
    try:
        create_owner_only(path, pem)
    except FileExistsError:
        raise ConfigurationError(
            f"signing key {path} exists; keep it, or delete it first and give the consortium "
            "the new public key for the roster"
        ) from None
    logger.info("wrote signing key %s", path)
    return path, roster_entry(consortium, name, key)


def load_signing_key(path: str | Path) -> Ed25519PrivateKey:
    """A site's Ed25519 signing key; refuses a file group or others may read or write."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigurationError(
            f"signing key {path} does not exist; create it with write_signing_key"
        )
    refuse_shared(path, "signing key", SHARED_ANY)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"signing key {path} cannot be read ({type(exc).__name__}); it must be an "
            "unencrypted PKCS8 PEM file"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigurationError(f"signing key {path} is not an Ed25519 key; write a new one")
    return key


def public_key_b64(key: Ed25519PrivateKey) -> str:
    """The base64 of ``key``'s raw public key (what the roster lists)."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def _check_proof(consortium: str, name: str, raw: bytes, proof: object, source: str) -> None:
    """Refuse an entry whose proof is not its key's signature of the consortium, name and key."""
    try:
        signature = base64.b64decode(proof, validate=True) if isinstance(proof, str) else b""
        Ed25519PublicKey.from_public_bytes(raw).verify(
            signature, _proof_payload(consortium, name, raw))
    except (binascii.Error, ValueError, InvalidSignature):
        raise ConfigurationError(
            f"{source}: the proof of member {name!r} is not its key's signature of consortium "
            f"{consortium!r}, its name and its key: the entry was not made by the holder of the "
            "key for this consortium; ask the member for the line fedpca deploy secagg-key "
            "printed"
        ) from None


def load_roster_key(encoded: str) -> bytes:
    """The raw public key of a roster entry's ``key`` (base64), else a
    :class:`ConfigurationError`."""
    return _decode_key("given", encoded, "the key")


def _decode_key(name: str, encoded: object, source: str) -> bytes:
    if not isinstance(encoded, str):
        raise ConfigurationError(f"{source}: member {name!r} key must be a base64 string")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(
            f"{source}: member {name!r} key is not valid base64; copy it again from the "
            "member's public key"
        ) from None
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ConfigurationError(
            f"{source}: member {name!r} key is not 32 raw Ed25519 public-key bytes; copy the "
            "base64 the member's write_signing_key printed"
        )
    return raw
