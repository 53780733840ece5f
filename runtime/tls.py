"""TLS settings from PEM files, as Kafka 2.7+ (`ssl.keystore.type=PEM`) and ZooKeeper 3.9 accept them.

One file holds a process's private key and its certificate chain (the "keystore"), one file the CA
certificates it trusts (the "truststore"). The same pair configures every kind of port: the asyncio
socket servers (ZooKeeper's wire protocol, Kafka's listeners) through `ssl.SSLContext`, and the gRPC
servers and channels (quorum peers, zkemu, brokers, the SDK) through gRPC's credentials, so that one
certificate per node serves all its ports.

Property names: Kafka's `ssl.keystore.location` / `ssl.truststore.location` /
`ssl.endpoint.identification.algorithm` / `ssl.client.auth` (KafkaConfig, SslConfigs), and ZooKeeper's
`ssl.keyStore.location` / `ssl.trustStore.location` / `ssl.hostnameVerification` /
`ssl.clientAuth` under a prefix (`ssl.` for client ports, `ssl.quorum.` for peers; ZooKeeper's
X509Util). Only PEM is read: a JKS or PKCS12 store is refused with a line that says so.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # grpc is imported where it is used: a tool's --help, which reads TLS flags, loads no gRPC
    import grpc

CLIENT_AUTH_MODES = ("none", "requested", "required")
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----\s*", re.S)


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used: one line naming the property or file."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """One process's TLS material and policy.

    keystore_file: PEM with the private key and the certificate chain (None: a client without one).
    truststore_file: PEM with the CA certificates peers must chain to.
    verify_hostname: clients check the server's certificate names its address (Kafka's `https`
        endpoint identification, ZooKeeper's `ssl.hostnameVerification`).
    client_auth: what a server asks of clients: "none", "requested" or "required" (mutual TLS).
    """

    keystore_file: Path | None
    truststore_file: Path
    verify_hostname: bool = True
    client_auth: str = "none"

    def __post_init__(self) -> None:
        if self.client_auth not in CLIENT_AUTH_MODES:
            raise TlsConfigError(f"ssl.client.auth: {self.client_auth!r} is not one of {', '.join(CLIENT_AUTH_MODES)}")

    def server_ssl_context(self) -> ssl.SSLContext:
        """For an asyncio socket server: presents the keystore, asks clients as `client_auth` says."""
        if self.keystore_file is None:
            raise TlsConfigError("a TLS server needs ssl.keystore.location (its key and certificate)")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.truststore_file))
        context.load_cert_chain(str(self.keystore_file))
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "requested": ssl.CERT_OPTIONAL,
            "required": ssl.CERT_REQUIRED,
        }[self.client_auth]
        return context

    def client_ssl_context(self) -> ssl.SSLContext:
        """For a socket client: trusts the truststore, presents the keystore when there is one."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.truststore_file))
        context.check_hostname = self.verify_hostname
        if self.keystore_file is not None:
            context.load_cert_chain(str(self.keystore_file))
        return context

    def grpc_server_credentials(self) -> grpc.ServerCredentials:
        import grpc

        if self.keystore_file is None:
            raise TlsConfigError("a TLS server needs ssl.keystore.location (its key and certificate)")
        key, chain = split_keystore(self.keystore_file)
        return grpc.ssl_server_credentials(
            [(key, chain)],
            root_certificates=read_pem(self.truststore_file),
            require_client_auth=self.client_auth == "required",
        )

    def grpc_channel_credentials(self) -> grpc.ChannelCredentials:
        import grpc

        key, chain = split_keystore(self.keystore_file) if self.keystore_file is not None else (None, None)
        return grpc.ssl_channel_credentials(read_pem(self.truststore_file), key, chain)


def read_pem(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    if not _PEM_BLOCK.search(data):
        raise TlsConfigError(f"{path}: not a PEM file (only PEM keystores and truststores are read)")
    return data


def split_keystore(path: Path) -> tuple[bytes, bytes]:
    """(private key, certificate chain) of a PEM keystore, as gRPC wants them apart."""
    keys, certs = [], []
    for block in _PEM_BLOCK.finditer(read_pem(path)):
        (keys if b"PRIVATE KEY" in block.group(1) else certs).append(block.group(0))
    if len(keys) != 1 or not certs:
        raise TlsConfigError(f"{path}: a keystore holds one private key and its certificate chain")
    return keys[0], b"".join(certs)


def _flag(value: str, prop: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise TlsConfigError(f"{prop}: {value!r} is not true or false")
    return value.strip().lower() == "true"


def _pem_type(props: Mapping[str, str], prop: str) -> None:
    kind = props.get(prop, "PEM").strip().upper()
    if kind != "PEM":
        raise TlsConfigError(f"{prop}: {kind} stores are not read; give PEM files ({prop}=PEM)")


def from_kafka_properties(props: Mapping[str, str], prefix: str = "") -> TlsConfig:
    """Kafka's `ssl.*` names (with a listener prefix such as `listener.name.client.` when given)."""
    p = prefix + "ssl."
    _pem_type(props, p + "keystore.type")
    _pem_type(props, p + "truststore.type")
    truststore = props.get(p + "truststore.location", "").strip()
    if not truststore:
        raise TlsConfigError(f"{p}truststore.location is not set (the CA certificates to trust)")
    keystore = props.get(p + "keystore.location", "").strip()
    algorithm = props.get(p + "endpoint.identification.algorithm", "https").strip().lower()
    return TlsConfig(
        keystore_file=Path(keystore) if keystore else None,
        truststore_file=Path(truststore),
        verify_hostname=algorithm == "https",
        client_auth=props.get(p + "client.auth", "none").strip().lower(),
    )


def from_zookeeper_properties(props: Mapping[str, str], prefix: str = "ssl.") -> TlsConfig:
    """ZooKeeper's names under `prefix` (`ssl.` client ports, `ssl.quorum.` peers, `zookeeper.ssl.` clients)."""
    _pem_type(props, prefix + "keyStore.type")
    _pem_type(props, prefix + "trustStore.type")
    truststore = props.get(prefix + "trustStore.location", "").strip()
    if not truststore:
        raise TlsConfigError(f"{prefix}trustStore.location is not set (the CA certificates to trust)")
    keystore = props.get(prefix + "keyStore.location", "").strip()
    client_auth = props.get(prefix + "clientAuth", "need").strip().lower()
    # ZooKeeper's ClientAuth: NONE, WANT, NEED (its default).
    mode = {"none": "none", "want": "requested", "need": "required"}.get(client_auth)
    if mode is None:
        raise TlsConfigError(f"{prefix}clientAuth: {client_auth!r} is not one of none, want, need")
    return TlsConfig(
        keystore_file=Path(keystore) if keystore else None,
        truststore_file=Path(truststore),
        verify_hostname=_flag(props.get(prefix + "hostnameVerification", "true"), prefix + "hostnameVerification"),
        client_auth=mode,
    )


def require_hostname_verification(tls: TlsConfig | None, prop: str) -> TlsConfig | None:
    """gRPC's channels always check that the server's certificate names the address dialled (there is no
    switch to turn it off short of naming another host), so a setting that turns it off is refused
    rather than ignored; `prop` names the setting in the one-line error."""
    if tls is not None and not tls.verify_hostname:
        raise TlsConfigError(
            f"{prop}: host name verification cannot be turned off on gRPC connections; "
            "give certificates that name the addresses clients dial (zkraft up --secure does)"
        )
    return tls
