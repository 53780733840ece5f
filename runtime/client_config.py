"""TLS of a client from the files users already write: Kafka's client.properties and ZooKeeper's client configuration.

Kafka's tools take `--command-config client.properties` (AdminClientConfig / CommonClientConfigs:
`security.protocol`, `ssl.truststore.location`, `ssl.keystore.location`, `ssl.*.type=PEM`,
`ssl.endpoint.identification.algorithm`); zkCli takes `-client-configuration FILE` with ZooKeeper's
ZKClientConfig names (`zookeeper.client.secure=true`, `zookeeper.ssl.trustStore.location`,
`zookeeper.ssl.keyStore.location`, `zookeeper.ssl.hostnameVerification`). Both come out as one
runtime.tls.TlsConfig (None: plaintext), which runtime.grpc_channels turns into gRPC credentials.

The SASL half of `security.protocol=SASL_SSL` (SaslConfigs): `sasl.mechanism` and the user in `sasl.jaas.config`
(`ScramLoginModule` or `PlainLoginModule required username="..." password="...";`), or librdkafka's
`sasl.username` / `sasl.password`, come out as SaslCredentials, which the SDK logs in with on the brokers' gRPC ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runtime.jaas import JaasError, parse_jaas_config
from runtime.properties import PropertiesError, read_properties_file
from runtime.tls import (
    TlsConfig,
    TlsConfigError,
    from_kafka_properties,
    from_zookeeper_properties,
    require_hostname_verification,
)

# Kafka's SecurityProtocol names; the SASL half of SASL_* is authentication, not transport.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
CLIENT_SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """Who a client logs in as, and how (sasl.mechanism)."""

    mechanism: str
    username: str
    password: str = field(repr=False)


def kafka_client_sasl(props: Mapping[str, str]) -> SaslCredentials | None:
    """SASL from Kafka client properties: None unless security.protocol is SASL_SSL or SASL_PLAINTEXT."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise TlsConfigError(f"security.protocol: {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()  # Kafka's default, not served here
    if mechanism not in CLIENT_SASL_MECHANISMS:
        raise TlsConfigError(
            f"sasl.mechanism: {mechanism} is not served; give one of {', '.join(CLIENT_SASL_MECHANISMS)}"
        )
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if "sasl.jaas.config" in props:
        try:
            options = parse_jaas_config(props["sasl.jaas.config"]).options
        except JaasError as exc:
            raise TlsConfigError(f"sasl.jaas.config: {exc}") from None
        username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise TlsConfigError(
            f'security.protocol={protocol} needs a user: sasl.jaas.config with username="..." password="..." '
            "(or sasl.username and sasl.password)"
        )
    return SaslCredentials(mechanism, username, password)


def read_config_file(path: Path) -> dict[str, str]:
    """A client properties file; TlsConfigError (one line) when it cannot be read."""
    try:
        return read_properties_file(Path(path))
    except PropertiesError as exc:
        raise TlsConfigError(str(exc)) from None


def kafka_client_tls(props: Mapping[str, str]) -> TlsConfig | None:
    """TLS from Kafka client properties: None for PLAINTEXT / SASL_PLAINTEXT (Kafka's default PLAINTEXT)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise TlsConfigError(f"security.protocol: {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
    if protocol not in TLS_PROTOCOLS:
        return None
    return require_hostname_verification(from_kafka_properties(props), "ssl.endpoint.identification.algorithm")


def zookeeper_client_tls(props: Mapping[str, str]) -> TlsConfig | None:
    """TLS from ZooKeeper client properties: None unless zookeeper.client.secure=true."""
    secure = props.get("zookeeper.client.secure", "false").strip().lower()
    if secure not in ("true", "false"):
        raise TlsConfigError(f"zookeeper.client.secure: {secure!r} is not true or false")
    if secure == "false":
        return None
    # A client has no clientAuth of its own; ZooKeeper's server-side default ("need") is meaningless here.
    tls = from_zookeeper_properties({**props, "zookeeper.ssl.clientAuth": "none"}, prefix="zookeeper.ssl.")
    return require_hostname_verification(tls, "zookeeper.ssl.hostnameVerification")


def kafka_zookeeper_tls(props: Mapping[str, str]) -> TlsConfig | None:
    """A Kafka tool's `--zk-tls-config-file` (Kafka 2.5+): Kafka's `zookeeper.ssl.*` names with
    `zookeeper.ssl.client.enable=true`; other keys are ignored, as Kafka ignores them. ZooKeeper's own client
    names (`zookeeper.client.secure`, a zookeeper-client.properties) are read too."""
    if "zookeeper.ssl.client.enable" not in props:
        return zookeeper_client_tls(props)
    enabled = props["zookeeper.ssl.client.enable"].strip().lower()
    if enabled not in ("true", "false"):
        raise TlsConfigError(f"zookeeper.ssl.client.enable: {enabled!r} is not true or false")
    if enabled == "false":
        return None
    tls = from_kafka_properties(props, prefix="zookeeper.")
    return require_hostname_verification(tls, "zookeeper.ssl.endpoint.identification.algorithm")


def kafka_client_security(props: Mapping[str, str]) -> dict[str, object]:
    """The SDK's security keywords of Kafka client properties: `tls` (TlsConfig) and `sasl` (SaslCredentials),
    each only when the properties ask for it, so that `Producer(..., **kafka_client_security(props))` works."""
    keywords = {"tls": kafka_client_tls(props), "sasl": kafka_client_sasl(props)}
    return {key: value for key, value in keywords.items() if value is not None}


def kafka_client_tls_file(path: Path | None) -> TlsConfig | None:
    """`--command-config FILE` of a Kafka-style tool: its TLS, None without a file."""
    return None if path is None else kafka_client_tls(read_config_file(path))


def zookeeper_client_tls_file(path: Path | None) -> TlsConfig | None:
    """`-client-configuration FILE` of the ZooKeeper shell: its TLS, None without a file."""
    return None if path is None else zookeeper_client_tls(read_config_file(path))
