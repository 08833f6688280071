"""The consortium's roster (member name -> Ed25519 public key) and a site's signing key.

The roster is the PKI of secure aggregation: a member accepts another member's key
advertisement only under that member's roster key, so the coordinator cannot invent members
(Sybils) or speak for a member. Every member holds the same roster file, distributed out of
band (not through the coordinator)::

    [roster]
    consortium = "example"

    [[member]]
    name = "site-a"
    key = "<base64 of the 32 raw Ed25519 public-key bytes>"

A site's signing key is an unencrypted PKCS8 PEM file readable by its owner only (0600, in a
0700 directory when this module creates it); :func:`load_signing_key` refuses a file that
group or others may read or write.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

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


def check_member_name(name: object) -> str:
    """``name`` if it is a valid member name, else a :class:`ConfigurationError`."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigurationError(
            f"member name {name!r} is not valid; use 1 to 64 letters, digits, '.', '_' or '-' "
            "(not starting with '.' or '-')"
        )
    return name


@dataclass(frozen=True)
class Roster:
    """The consortium's members and their Ed25519 public keys (raw 32 bytes)."""

    consortium: str
    keys: Mapping[str, bytes]

    @classmethod
    def from_members(cls, consortium: str, members: Mapping[str, str], source: str = "roster"
                     ) -> Roster:
        """A roster from ``name -> base64 key``; refuses bad names, keys and duplicates."""
        if not isinstance(consortium, str) or not consortium:
            raise ConfigurationError(f"{source}: [roster] consortium must be a non-empty string")
        keys: dict[str, bytes] = {}
        for name, encoded in members.items():
            raw = _decode_key(check_member_name(name), encoded, source)
            if raw in keys.values():
                raise ConfigurationError(
                    f"{source}: member {name!r} has the same key as another member; every "
                    "member needs its own key (write_signing_key)"
                )
            keys[name] = raw
        if not keys:
            raise ConfigurationError(f"{source}: the roster lists no [[member]]; add the members")
        return cls(consortium, dict(sorted(keys.items())))

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
    members: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != {"name", "key"}:
            raise ConfigurationError(
                f"roster {path}: every [[member]] needs exactly name = \"...\" and key = \"...\""
            )
        name = check_member_name(entry["name"])
        if name in members:
            raise ConfigurationError(
                f"roster {path}: member {name!r} is listed twice; keep one entry per member"
            )
        members[name] = entry["key"]
    return Roster.from_members(header["consortium"], members, source=f"roster {path}")


def write_roster(path: str | Path, consortium: str, members: Mapping[str, str]) -> Path:
    """Write a roster (``members``: name -> base64 public key) and check that it loads."""
    path = Path(path).expanduser()
    Roster.from_members(consortium, members, source=f"roster {path}")
    lines = ["[roster]", f"consortium = {json.dumps(consortium, ensure_ascii=False)}", ""]
    for name in sorted(members):
        lines += ["[[member]]", f"name = {json.dumps(name)}", f"key = {json.dumps(members[name])}",
                  ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    load_roster(path)
    logger.info("wrote roster %s", path)
    return path


def write_signing_key(directory: str | Path, name: str) -> tuple[Path, str]:
    """A new Ed25519 signing key for member ``name``: ``(private key path, base64 public key)``.

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
    public = key.public_key().public_bytes(serialization.Encoding.Raw,
                                           serialization.PublicFormat.Raw)
    logger.info("wrote signing key %s", path)
    return path, base64.b64encode(public).decode("ascii")


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
