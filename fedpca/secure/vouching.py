"""Which members of the roster a site vouches for: the only ones it counts as honest.

A roster is a file someone wrote; in practice often the study's coordinating centre, i.e. the
coordinator. Its proofs of possession (:mod:`fedpca.secure.roster`) show that each key's
holder made its entry, not that the holder is a real member: the roster's writer can add
members whose keys it holds (Sybils), and a sum of "``M`` members" that are one real site
plus ``M - 1`` of those is the real site's answer alone.

So a site names, in its own policy, the members it vouches for:

* **by key fingerprint** (``vouched``): the member's :func:`~fedpca.secure.roster.key_fingerprint`,
  read to the site out of band (a phone call, a meeting) by someone the site knows at that
  member, and compared with the one ``fedpca site check`` prints for the roster's entry;
* **by certificate authority** (``vouched-ca``): a CA the site trusts to certify members (the
  consortium's own CA, run by a party that is not the coordinator, or an institution's); a
  member whose roster entry carries an X.509 certificate of its key, issued to its name *for
  this consortium* (the certificate's organisational unit names the roster's consortium) by
  that CA, both certificates valid now, and not revoked, is vouched for
  (:func:`member_certificate` issues one).

**Revocation**: a policy may list revoked key fingerprints (``revoked``) and CRL files of its
vouched CAs (``revocation-list``, :func:`load_revocation_list`: signed by one of them and not
past its next update); a revoked member is vouched for neither by fingerprint nor by
certificate.

What a hostile roster writer could do, and what stops it: list Sybils (they count as
colluders: ``c`` grows by one per unvouched member of a key list, and
:mod:`fedpca.secure.conditions` refuses a setup whose threshold cannot then keep ``M`` vouched
honest members in a sum); replace a vouched member's key (its fingerprint no longer matches:
the site refuses to start, naming the fingerprint); issue a certificate itself (it is not a
CA the site vouched for); list a vouched member under another name (the proof of possession
binds name and key); present a certificate the same CA issued for another study, or to the
coordinator's own node (the consortium in its organisational unit is not this roster's, or its
name is not the member's); keep using a certificate after the CA's own certificate expired, or
after the consortium revoked it (both refused). What the site must do out of band: compare
fingerprints (or obtain the CA's certificate and its revocation list) from a source the
coordinator does not control. If it vouches for keys it did not compare, its guarantee rests on
the roster writer's word.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.x509.oid import NameOID

from fedpca.errors import ConfigurationError
from fedpca.secure.roster import Roster, normal_fingerprint

#: How long a member certificate :func:`member_certificate` issues is valid by default (days).
CERTIFICATE_DAYS = 730


def vouched_members(roster: Roster, member: str, fingerprints: Sequence[str],
                    authorities: Sequence[x509.Certificate],
                    now: datetime.datetime | None = None, revoked: Sequence[str] = (),
                    revocation_lists: Sequence[x509.CertificateRevocationList] = ()
                    ) -> frozenset[str]:
    """The roster members site ``member`` vouches for: itself, every member whose key has one
    of ``fingerprints``, and every member whose certificate one of ``authorities`` issued for
    the roster's consortium (both valid at ``now``, the certificate in none of the
    ``revocation_lists``), except the members whose key fingerprint is ``revoked``.

    Raises:
        ConfigurationError: a fingerprint matches no roster entry (the roster changed that
            member's key, or dropped it), or the policy vouches for a key it revokes.
    """
    by_fingerprint = {roster.fingerprint(name): name for name in roster.names}
    withdrawn = {normal_fingerprint(text) for text in revoked}
    vouched = {member}
    for text in fingerprints:
        fingerprint = normal_fingerprint(text)
        if fingerprint in withdrawn:
            raise ConfigurationError(
                f"the policy both vouches for and revokes key {fingerprint}; remove it from "
                "vouched (a revoked member is never counted as honest)")
        if fingerprint not in by_fingerprint:
            raise ConfigurationError(
                f"the policy vouches for key {fingerprint}, which no member of the roster "
                f"(digest {roster.digest}) holds: the roster changed or dropped that member's "
                "key; compare the roster with the member again before any secure run"
            )
        vouched.add(by_fingerprint[fingerprint])
    moment = now or datetime.datetime.now(datetime.timezone.utc)
    for name, pem in roster.certificates.items():
        if roster.fingerprint(name) in withdrawn:
            continue
        if any(_certifies(pem, authority, name, roster.keys[name], roster.consortium, moment,
                          revocation_lists)
               for authority in authorities):
            vouched.add(name)
    return frozenset(vouched)


def load_authority(path: str | Path) -> x509.Certificate:
    """A certificate authority's PEM certificate that a site vouches for; refuses a file that
    is not one (not PEM, or not a CA)."""
    path = Path(path).expanduser()
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except FileNotFoundError:
        raise ConfigurationError(f"vouched-ca {path} does not exist; put the consortium CA's "
                                 "certificate there") from None
    except (OSError, ValueError, x509.ExtensionNotFound) as exc:
        raise ConfigurationError(f"vouched-ca {path} is not a PEM CA certificate "
                                 f"({type(exc).__name__}); ask the CA for its certificate"
                                 ) from None
    if not constraints.value.ca:
        raise ConfigurationError(f"vouched-ca {path} is not a CA certificate (basic "
                                 "constraints ca=false); name the CA's own certificate")
    return certificate


def load_revocation_list(path: str | Path, authorities: Sequence[x509.Certificate],
                         now: datetime.datetime | None = None
                         ) -> x509.CertificateRevocationList:
    """A vouched CA's PEM certificate revocation list; refuses a file that is not one, that
    none of ``authorities`` signed, or that is past its next update (a stale list could miss
    a revocation: fetch a fresh one from the CA)."""
    path = Path(path).expanduser()
    try:
        crl = x509.load_pem_x509_crl(path.read_bytes())
    except FileNotFoundError:
        raise ConfigurationError(f"revocation-list {path} does not exist; put the consortium "
                                 "CA's revocation list there") from None
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"revocation-list {path} is not a PEM revocation list "
                                 f"({type(exc).__name__}); ask the CA for its list") from None
    if not any(crl.issuer == a.subject and crl.is_signature_valid(a.public_key())
               for a in authorities):
        raise ConfigurationError(f"revocation-list {path} is not signed by a CA this site "
                                 "vouches for (vouched-ca); ask that CA for its list")
    moment = now or datetime.datetime.now(datetime.timezone.utc)
    if crl.next_update_utc is not None and crl.next_update_utc < moment:
        raise ConfigurationError(f"revocation-list {path} expired on "
                                 f"{crl.next_update_utc:%Y-%m-%d} "
                                 "(its next update); fetch a fresh one from the CA")
    return crl


def _certifies(pem: str, authority: x509.Certificate, name: str, key: bytes, consortium: str,
               now: datetime.datetime,
               revocation_lists: Sequence[x509.CertificateRevocationList] = ()) -> bool:
    """Whether ``pem`` is ``authority``'s certificate of ``key`` for member ``name`` of
    ``consortium``, both certificates valid at ``now`` and ``pem`` revoked by none of the
    authority's ``revocation_lists``."""
    try:
        certificate = x509.load_pem_x509_certificate(pem.encode())
        certificate.verify_directly_issued_by(authority)
    except (ValueError, TypeError, InvalidSignature):
        return False
    subject = certificate.subject
    public = certificate.public_key()
    return (_valid_at(certificate, now) and _valid_at(authority, now)
            and _values(subject, NameOID.COMMON_NAME) == [name]
            and _values(subject, NameOID.ORGANIZATIONAL_UNIT_NAME) == [consortium]
            and isinstance(public, Ed25519PublicKey)
            and public.public_bytes(serialization.Encoding.Raw,
                                    serialization.PublicFormat.Raw) == key
            and not any(crl.issuer == authority.subject
                        and crl.get_revoked_certificate_by_serial_number(
                            certificate.serial_number) is not None
                        for crl in revocation_lists))


def _valid_at(certificate: x509.Certificate, now: datetime.datetime) -> bool:
    return certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc


def _values(name: x509.Name, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(attribute.value) for attribute in name.get_attributes_for_oid(oid)]


def new_authority(name: str, days: int = CERTIFICATE_DAYS
                  ) -> tuple[Ed25519PrivateKey, x509.Certificate]:
    """A consortium certificate authority: its Ed25519 key and self-signed certificate."""
    key = Ed25519PrivateKey.generate()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    certificate = (_builder(subject, subject, key.public_key(), days)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .sign(key, None))
    return key, certificate


def member_certificate(authority_key: Ed25519PrivateKey, authority: x509.Certificate,
                       name: str, key: Ed25519PublicKey, consortium: str,
                       days: int = CERTIFICATE_DAYS) -> str:
    """The CA's PEM certificate of member ``name``'s secure-aggregation key in
    ``consortium`` (its organisational unit: a site vouches only for certificates of its
    roster's consortium), for its roster entry's ``certificate``."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, consortium)])
    certificate = (_builder(subject, authority.subject, key, days)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .sign(authority_key, None))
    return certificate.public_bytes(serialization.Encoding.PEM).decode("ascii")


def revocation_list(authority_key: Ed25519PrivateKey, authority: x509.Certificate,
                    certificates: Sequence[x509.Certificate], days: int = 30
                    ) -> x509.CertificateRevocationList:
    """The CA's revocation list of ``certificates`` (its members' certificates it withdraws),
    valid for ``days`` days (the sites refuse it after that: publish a fresh one)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateRevocationListBuilder().issuer_name(authority.subject)
               .last_update(now - datetime.timedelta(minutes=5))
               .next_update(now + datetime.timedelta(days=days)))
    for certificate in certificates:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(certificate.serial_number)
            .revocation_date(now - datetime.timedelta(minutes=5)).build())
    return builder.sign(authority_key, None)


def _builder(subject: x509.Name, issuer: x509.Name, key: Ed25519PublicKey, days: int
             ) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days)))
