"""A local certificate authority and one certificate per node, written as the PEM files runtime.tls reads.

`zkraft up --secure` makes a CA for the cluster, then a certificate per quorum node and broker (and one for
the admin client) signed by it. Each process gets a PEM "keystore" (its private key followed by its
certificate and the CA's: the chain Kafka 2.7+ reads with `ssl.keystore.type=PEM`) and every process the
same "truststore" (the CA certificate alone). Certificates carry the host names and IP addresses a peer
dials in their subjectAltName, since TLS hostname verification (RFC 6125, Kafka's `https` endpoint
identification) reads only the SAN. Private keys are written 0600: the files are the cluster's secret.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# P-256 keys: as strong as RSA-3072 and far cheaper per handshake, which the node-to-node channels open often.
_CURVE = ec.SECP256R1()
CA_VALIDITY_DAYS = 3650
NODE_VALIDITY_DAYS = 825  # the longest a public CA may issue (CA/Browser Forum baseline), a sensible cap here
# A certificate is valid from a little before now, so that a clock a few minutes behind still accepts it.
_CLOCK_SKEW = datetime.timedelta(minutes=5)
KEY_FILE_MODE = 0o600


class CertificateError(ValueError):
    """A CA or certificate that cannot be made or read: one line naming the file."""


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """The CA's key and certificate, in memory, to sign node certificates."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def create_authority(common_name: str, validity_days: int = CA_VALIDITY_DAYS) -> CertificateAuthority:
    """A self-signed CA that may sign end-entity certificates only (path length 0)."""
    key = ec.generate_private_key(_CURVE)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=validity_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(key, certificate)


def _subject_alt_names(names: Iterable[str]) -> list[x509.GeneralName]:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return entries


def issue(
    authority: CertificateAuthority, common_name: str, names: Iterable[str], validity_days: int = NODE_VALIDITY_DAYS
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A key and a certificate for one process, usable as a TLS server and as a TLS client (mutual TLS).

    `names`: the host names and IP addresses peers dial it by (its subjectAltName); may be empty for a
    client-only certificate."""
    key = ec.generate_private_key(_CURVE)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(authority.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=validity_days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()), critical=False)
    )
    alt_names = _subject_alt_names(names)
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return key, builder.sign(authority.key, hashes.SHA256())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # PKCS#8 unencrypted ("BEGIN PRIVATE KEY"): what Kafka's PEM keystore reads without ssl.key.password.
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_secret(path: Path, data: bytes) -> None:
    """Create `path` with mode 0600 from the start (no window where another user could read it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEY_FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, KEY_FILE_MODE)  # an existing file keeps its old mode through O_CREAT


def write_keystore(
    path: Path, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate, authority: CertificateAuthority
) -> None:
    """Key, certificate and CA certificate in one PEM file (Kafka's PEM keystore: key then chain), mode 0600."""
    chain = certificate.public_bytes(serialization.Encoding.PEM) + authority.certificate_pem
    write_secret(path, _key_pem(key) + chain)


def write_authority(directory: Path, authority: CertificateAuthority) -> tuple[Path, Path]:
    """The CA's key (0600, needed only to issue more certificates) and its certificate (the truststore)."""
    key_file, ca_file = directory / "ca-key.pem", directory / "ca.pem"
    write_secret(key_file, _key_pem(authority.key))
    ca_file.write_bytes(authority.certificate_pem)
    return key_file, ca_file


def load_authority(directory: Path) -> CertificateAuthority:
    """The CA written by write_authority, to issue further certificates."""
    key_file, ca_file = directory / "ca-key.pem", directory / "ca.pem"
    try:
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        certificate = x509.load_pem_x509_certificate(ca_file.read_bytes())
    except OSError as exc:
        raise CertificateError(f"{exc.filename}: cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise CertificateError(f"{directory}: the CA key or certificate is not valid PEM ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError(f"{key_file}: not an EC private key")
    return CertificateAuthority(key, certificate)


def issue_keystore(authority: CertificateAuthority, path: Path, common_name: str, names: Iterable[str]) -> Path:
    """Issue a certificate for `common_name` with SANs `names` and write it as a PEM keystore at `path`."""
    key, certificate = issue(authority, common_name, names)
    write_keystore(path, key, certificate, authority)
    return path
