"""TLS on the broker's Kafka listeners: which listeners encrypt, and each one's `ssl.*` settings.

A listener whose security protocol (listener.security.protocol.map) ends in `_SSL` (SSL, SASL_SSL) serves TLS;
PLAINTEXT and SASL_PLAINTEXT listeners do not, and no `ssl.*` setting touches them. Kafka's names, PEM files
only (Kafka 2.7+, `ssl.keystore.type=PEM`; runtime/tls.py reads them):

    listeners=SSL://127.0.0.1:9093
    ssl.keystore.type=PEM
    ssl.keystore.location=/etc/kafka/broker-keystore.pem     # private key + certificate chain
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem
    ssl.client.auth=none                                      # none (Kafka's default), requested, required

Per-listener overrides follow KafkaConfig's listener prefix rule (ListenerName.configPrefix,
KafkaConfig.valuesWithPrefixOverride): `listener.name.<listener name in lower case>.ssl.<x>` replaces
`ssl.<x>` for that listener alone, one property at a time.

Unlike Kafka, a truststore is required even with `ssl.client.auth=none` (runtime/tls.TlsConfig always has one).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping

from runtime.tls import TlsConfig, TlsConfigError, from_kafka_properties, read_pem

# The `ssl.*` broker properties a TLS listener reads (Kafka's SslConfigs / BrokerSecurityConfigs names).
SSL_PROPERTY_NAMES = frozenset(
    {
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.client.auth",
        "ssl.endpoint.identification.algorithm",
    }
)
_LISTENER_PREFIXED = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(ssl\..+)$")


def is_ssl_property(key: str) -> bool:
    """`ssl.<x>` or `listener.name.<listener>.ssl.<x>` with `ssl.<x>` a property a TLS listener reads."""
    if key in SSL_PROPERTY_NAMES:
        return True
    prefixed = _LISTENER_PREFIXED.match(key)
    return prefixed is not None and prefixed.group(2) in SSL_PROPERTY_NAMES


def serves_tls(security_protocol: str) -> bool:
    return security_protocol.endswith("SSL")


def listener_prefix(listener_name: str) -> str:
    """Kafka's ListenerName.configPrefix: `listener.name.<name in lower case>.`."""
    return f"listener.name.{listener_name.lower()}."


def listener_tls_config(properties: Mapping[str, str], listener_name: str, security_protocol: str) -> TlsConfig | None:
    """The TLS settings of one listener (None when it does not serve TLS); TlsConfigError names a bad property."""
    if not serves_tls(security_protocol):
        return None
    prefix = listener_prefix(listener_name)
    merged = {name: properties[name] for name in SSL_PROPERTY_NAMES if name in properties}
    merged.update({name: properties[prefix + name] for name in SSL_PROPERTY_NAMES if prefix + name in properties})
    try:
        config = from_kafka_properties(merged)
    except TlsConfigError as exc:
        raise TlsConfigError(f"listener {listener_name} ({security_protocol}): {exc}") from None
    if config.keystore_file is None:
        raise TlsConfigError(
            f"listener {listener_name} ({security_protocol}): ssl.keystore.location is not set "
            "(the broker's private key and certificate)"
        )
    return config


def server_context(config: TlsConfig, listener_name: str) -> ssl.SSLContext:
    """The listener's SSL context; TlsConfigError (one line) when a file cannot be read or used."""
    where = f"listener {listener_name}"
    try:
        assert config.keystore_file is not None
        read_pem(config.keystore_file)
        read_pem(config.truststore_file)
        return config.server_ssl_context()
    except TlsConfigError as exc:
        raise TlsConfigError(f"{where}: {exc}") from None
    except (ssl.SSLError, OSError) as exc:
        files = f"{config.keystore_file} / {config.truststore_file}"
        raise TlsConfigError(f"{where}: the keystore or truststore cannot be used ({files}): {exc}") from None
