"""TLS certificates and SuperNode keys for a Flower deployment, made with ``cryptography``.

What a deployment needs (Flower 1.41, SuperLink with TLS and ``--enable-supernode-auth``):

* a certificate authority (``ca.crt``): every SuperNode and the ``flwr`` CLI verify the
  SuperLink against it (``--root-certificates``, ``root-certificates`` in config.toml);
* the SuperLink's server certificate (``server.pem``) and key (``server.key``), signed by
  the CA, whose subjectAltName lists every address the sites dial (the SuperLink's DNS name
  or IP address) and always ``IP:127.0.0.1``: a SuperLink bound to ``0.0.0.0`` has its own
  SuperExec dial ``127.0.0.1`` with TLS (``flwr.supercore.address.resolve_bind_address``);
* one EC P-384 key pair per site in OpenSSH format (``<site>`` private, ``<site>.pub``
  public): the SuperNode signs with the private key (``--auth-supernode-private-key``), the
  coordinator registers the public key (``flwr supernode register <site>.pub``).

The CA's private key is used once, in memory, and never written: to add an address, make a
new CA and server certificate. A site's private key should be made at the site
(:func:`write_site_key`) so that only its ``.pub`` file ever leaves it. Private keys are
written with mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedpca.errors import ConfigurationError
from fedpca.secure.roster import check_member_name, load_roster_key
from fedpca.secure.vouching import member_certificate, new_authority, revocation_list

logger = logging.getLogger(__name__)

#: The address every server certificate covers (the SuperLink's own SuperExec dials it).
LOOPBACK = "127.0.0.1"
#: Validity of the CA and the server certificate.
DEFAULT_VALID_DAYS = 365
#: Curve of every key made here (Flower's node authentication accepts NIST curves).
CURVE = ec.SECP384R1
CA_FILE = "ca.crt"
SERVER_CERT_FILE = "server.pem"
SERVER_KEY_FILE = "server.key"


@dataclass(frozen=True)
class SiteKey:
    """A site's key pair on disk: ``private`` (OpenSSH, mode 0600) and ``public`` (.pub)."""

    name: str
    private: Path
    public: Path


@dataclass(frozen=True)
class ServerFiles:
    """The SuperLink's TLS files: the CA certificate, its certificate and its key."""

    ca_cert: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class DeploymentFiles:
    """Everything :func:`write_deployment_files` made."""

    server: ServerFiles
    sites: tuple[SiteKey, ...]


def write_server_files(
    out_dir: str | Path,
    hosts: Sequence[str] = (),
    valid_days: int = DEFAULT_VALID_DAYS,
) -> ServerFiles:
    """Make a CA and a SuperLink certificate valid for ``hosts`` (IP addresses or DNS names
    the sites dial) and for 127.0.0.1."""
    hosts = list(dict.fromkeys([*hosts, LOOPBACK]))
    alt_names = x509.SubjectAlternativeName(_alt_names(hosts))
    if valid_days < 1:
        raise ConfigurationError(f"valid_days must be >= 1, got {valid_days}")
    out = _directory(out_dir)
    now = datetime.datetime.now(datetime.timezone.utc)
    until = now + datetime.timedelta(days=valid_days)
    ca_key = ec.generate_private_key(CURVE())
    ca_cert = _ca_certificate(ca_key, now, until)
    server_key = ec.generate_private_key(CURVE())
    server_cert = (
        _builder(_name("fedpca SuperLink"), ca_cert.subject, server_key.public_key(), now, until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(alt_names, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA384())
    )
    files = ServerFiles(out / CA_FILE, out / SERVER_CERT_FILE, out / SERVER_KEY_FILE)
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(files.key, server_key)
    logger.info("wrote %s, %s, %s for hosts %s", files.ca_cert, files.cert, files.key, hosts)
    return files


def write_site_key(out_dir: str | Path, name: str) -> SiteKey:
    """Make site ``name``'s EC P-384 key pair, OpenSSH format: ``<name>``, ``<name>.pub``."""
    if not name or "/" in name or name.startswith("."):
        raise ConfigurationError(f"site name {name!r} must be a plain file name")
    out = _directory(out_dir)
    key = ec.generate_private_key(CURVE())
    site = SiteKey(name, out / name, out / f"{name}.pub")
    _write_private(site.private, key, serialization.PrivateFormat.OpenSSH)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    site.public.write_bytes(public + f" {name}\n".encode())
    logger.info("wrote key pair %s, %s", site.private, site.public)
    return site


def write_deployment_files(
    out_dir: str | Path,
    sites: Sequence[str],
    hosts: Sequence[str] = (),
    valid_days: int = DEFAULT_VALID_DAYS,
) -> DeploymentFiles:
    """The CA, the SuperLink's certificate and one key pair per site, all in ``out_dir``."""
    if len(set(sites)) != len(sites):
        raise ConfigurationError(f"site names must be distinct, got {list(sites)}")
    server = write_server_files(out_dir, hosts, valid_days)
    return DeploymentFiles(server, tuple(write_site_key(out_dir, s) for s in sites))


def write_secagg_authority(out_dir: str | Path, name: str) -> tuple[Path, Path]:
    """A consortium CA for secure-aggregation keys (:func:`fedpca.secure.vouching.new_authority`):
    ``(key file (0600), certificate file)`` in ``out_dir``, never overwriting a key."""
    out = _directory(out_dir)
    key_path, cert_path = out / "secagg-ca.key.pem", out / "secagg-ca.pem"
    if key_path.exists():
        raise ConfigurationError(f"{key_path} exists; a CA key is never overwritten (sites "
                                 "vouch for its certificate): keep it, or choose another folder")
    key, certificate = new_authority(name)
    _write_private(key_path, key)
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


def write_member_certificate(ca_dir: str | Path, name: str, key: str, consortium: str,
                             out: str | Path) -> Path:
    """The CA in ``ca_dir``'s certificate of member ``name``'s public ``key`` (base64) in
    ``consortium``, as a PEM file ``out``."""
    authority_key, authority = _secagg_authority(ca_dir)
    public = Ed25519PublicKey.from_public_bytes(load_roster_key(key))
    path = Path(out)
    path.write_text(member_certificate(authority_key, authority, check_member_name(name), public,
                                       consortium), encoding="ascii")
    return path


def write_revocation_list(ca_dir: str | Path, certificates: list[Path], out: str | Path,
                          days: int) -> Path:
    """The CA in ``ca_dir``'s revocation list of the member ``certificates`` (PEM files it
    issued), valid for ``days`` days, as a PEM file ``out``."""
    authority_key, authority = _secagg_authority(ca_dir)
    revoked = [x509.load_pem_x509_certificate(Path(p).read_bytes()) for p in certificates]
    path = Path(out)
    path.write_bytes(revocation_list(authority_key, authority, revoked, days).public_bytes(
        serialization.Encoding.PEM))
    return path


def _secagg_authority(ca_dir: str | Path) -> tuple[Ed25519PrivateKey, x509.Certificate]:
    """The secure-aggregation CA's key and certificate in ``ca_dir``."""
    ca_dir = Path(ca_dir)
    authority_key = serialization.load_pem_private_key(
        (ca_dir / "secagg-ca.key.pem").read_bytes(), password=None)
    authority = x509.load_pem_x509_certificate((ca_dir / "secagg-ca.pem").read_bytes())
    if not isinstance(authority_key, Ed25519PrivateKey):
        raise ConfigurationError(f"{ca_dir} holds no secure-aggregation CA key; make one with "
                                 "fedpca deploy secagg-ca")
    return authority_key, authority


def _directory(path: str | Path) -> Path:
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _write_private(path: Path, key: ec.EllipticCurvePrivateKey | Ed25519PrivateKey,
                   private_format: serialization.PrivateFormat = (
                       serialization.PrivateFormat.PKCS8)) -> None:
    """Write ``key`` unencrypted (PEM; PKCS8 unless ``private_format`` says otherwise),
    readable by its owner only (0600 from creation on)."""
    data = key.private_bytes(serialization.Encoding.PEM, private_format,
                             serialization.NoEncryption())
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before - datetime.timedelta(minutes=5))  # clock skew
        .not_valid_after(not_after)
    )


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey, not_before: datetime.datetime, not_after: datetime.datetime
) -> x509.Certificate:
    """A self-signed CA certificate that may sign server certificates only."""
    name = _name("fedpca deployment CA")
    return (
        _builder(name, name, key.public_key(), not_before, not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA384())
    )


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=not cert_sign, key_cert_sign=cert_sign,
        crl_sign=cert_sign, encipher_only=False, decipher_only=False,
    )


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """``IP:`` entries for addresses, ``DNS:`` entries for names."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        if not host or any(c.isspace() for c in host):
            raise ConfigurationError(f"host {host!r} is not an IP address or DNS name")
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names
