"""Kafka's client security properties, as a client passes them through (the Spark connector's `kafka.*` options).

The names are Kafka 2.8's CommonClientConfigs `security.protocol`, SslConfigs' `ssl.*` and SaslConfigs' `sasl.*`
for clients. `check_names` refuses any other name in one line, as Kafka's ConfigDef refuses an unknown
property where it is strict; `client_tls` reads the TLS half (runtime.client_config: PEM files, Kafka 2.7+).
"""

from __future__ import annotations

from collections.abc import Mapping

from runtime.client_config import kafka_client_security, kafka_client_tls
from runtime.tls import TlsConfig

__all__ = [
    "SECURITY_PROPERTIES",
    "UnknownSecurityPropertyError",
    "check_names",
    "client_security",
    "client_tls",
    "is_security_name",
]

SECURITY_PROPERTIES = frozenset(
    {
        "security.protocol",
        # SslConfigs
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
        # SaslConfigs (client side)
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.client.callback.handler.class",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
    }
)
_FAMILIES = ("ssl.", "sasl.")


class UnknownSecurityPropertyError(ValueError):
    """A `ssl.*` or `sasl.*` name Kafka's clients do not know."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown Kafka client security property {name!r}")
        self.name = name


def is_security_name(name: str) -> bool:
    """Whether `name` belongs to the security families (known or not): the caller passes those through here."""
    return name == "security.protocol" or name.startswith(_FAMILIES)


def check_names(props: Mapping[str, str]) -> None:
    unknown = sorted(name for name in props if is_security_name(name) and name not in SECURITY_PROPERTIES)
    if unknown:
        raise UnknownSecurityPropertyError(unknown[0])


def client_tls(props: Mapping[str, str]) -> TlsConfig | None:
    """The TLS of `security.protocol` SSL or SASL_SSL with the `ssl.*` files; None for a plaintext protocol.
    Raises TlsConfigError or UnknownSecurityPropertyError with one line."""
    check_names(props)
    return kafka_client_tls(props)


def client_security(props: Mapping[str, str]) -> dict[str, object]:
    """The SDK's `tls` and `sasl` keywords of these properties (runtime.client_config.kafka_client_security);
    raises TlsConfigError or UnknownSecurityPropertyError with one line."""
    check_names(props)
    return kafka_client_security(props)
