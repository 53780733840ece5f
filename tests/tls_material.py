"""Certificates for TLS tests, made with `cryptography`: a CA, a server and a client certificate it signed,
and a second, unrelated CA for "a client that trusts the wrong CA" tests.

    material = make_tls_material(tmp_path)
    material.ca_file          # PEM: the CA certificate (a truststore)
    material.server_keystore  # PEM: the server's private key + certificate (SANs 127.0.0.1 and localhost)
    material.server_key, material.server_cert   # the same, apart (kazoo's keyfile/certfile, librdkafka)
    material.client_keystore, material.client_key, material.client_cert          # a client certificate
    material.other_ca_file    # PEM: a CA that signed nothing here
    material.wrong_host_keystore   # a server certificate from the CA naming only elsewhere.invalid

Keys are EC P-256: quick to make, accepted by OpenSSL, Java and librdkafka alike.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 2


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    ca_file: Path
    server_key: Path
    server_cert: Path
    server_keystore: Path
    client_key: Path
    client_cert: Path
    client_keystore: Path
    other_ca_file: Path
    wrong_host_keystore: Path  # signed by the CA, but for elsewhere.invalid only: fails hostname verification


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )  # digital_signature, key_cert_sign, crl_sign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    common_name: str,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    server: bool,
    names: tuple[x509.GeneralName, ...] = (
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ),
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_tls_material(directory: Path) -> TlsMaterial:
    """Writes a fresh CA, server and client certificates and an unrelated CA into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("zkraft test CA")
    _, other_ca_cert = _ca("zkraft other test CA")
    files: dict[str, Path] = {}

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        files[name] = path
        return path

    write("ca.pem", _cert_pem(ca_cert))
    write("other-ca.pem", _cert_pem(other_ca_cert))
    for role in ("server", "client"):
        key, cert = _leaf(f"zkraft test {role}", ca_key, ca_cert, server=role == "server")
        write(f"{role}.key", _key_pem(key))
        write(f"{role}.crt", _cert_pem(cert) + _cert_pem(ca_cert))
        write(f"{role}-keystore.pem", _key_pem(key) + _cert_pem(cert) + _cert_pem(ca_cert))
    key, cert = _leaf("zkraft elsewhere", ca_key, ca_cert, server=True, names=(x509.DNSName("elsewhere.invalid"),))
    write("wrong-host-keystore.pem", _key_pem(key) + _cert_pem(cert) + _cert_pem(ca_cert))
    return TlsMaterial(
        ca_file=files["ca.pem"],
        server_key=files["server.key"],
        server_cert=files["server.crt"],
        server_keystore=files["server-keystore.pem"],
        client_key=files["client.key"],
        client_cert=files["client.crt"],
        client_keystore=files["client-keystore.pem"],
        other_ca_file=files["other-ca.pem"],
        wrong_host_keystore=files["wrong-host-keystore.pem"],
    )
