"""The broker's TLS, from Kafka's property names: its gRPC port, its channels to other brokers, its quorum session.

Inter-broker traffic (replica fetches, the controller's requests, controlled shutdown) runs over the
brokers' gRPC ports here, so `security.inter.broker.protocol` (Kafka's KafkaConfig) decides whether
that port and those channels are TLS: SSL or SASL_SSL turns TLS on with the broker's `ssl.keystore.*`
and `ssl.truststore.*`, the same certificate serving and dialling (a broker authenticates to another
by it when `ssl.client.auth=required`). The ZooKeeper session uses Kafka 2.5's `zookeeper.ssl.*`
(`zookeeper.ssl.client.enable=true`), since the quorum's port may demand a client certificate of its own.

The gRPC port is the listener `GRPC` (broker/listeners.py): `listener.security.protocol.map=...,GRPC:SASL_SSL` names
its security protocol as Kafka names any listener's, and without that entry it is `security.inter.broker.protocol`.
SASL_SSL and SASL_PLAINTEXT make the port require a login (broker/grpc_authentication.py). Brokers call each other
by certificate, so a SASL gRPC port needs TLS with `listener.name.grpc.ssl.client.auth=required` (the listener's
override of `ssl.client.auth`, which the Kafka listeners keep; gRPC's Python server either requires a client
certificate or never asks for one: there is no "requested").
"""

from __future__ import annotations

from broker.config import BrokerConfig
from broker.listener_tls import listener_prefix
from broker.listeners import ListenerConfigError, parse_protocol_map
from client.kafka.znodes import GRPC_LISTENER_NAME
from runtime.tls import TlsConfig, TlsConfigError, from_kafka_properties, require_hostname_verification

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def _kafka_names(config: BrokerConfig, prefix: str) -> dict[str, str]:
    field_prefix = prefix.replace(".", "_")
    names = ("keystore.location", "keystore.type", "truststore.location", "truststore.type")
    props = {f"{prefix}ssl.{n}": getattr(config, f"{field_prefix}ssl_{n.replace('.', '_')}") for n in names}
    algorithm = getattr(config, f"{field_prefix}ssl_endpoint_identification_algorithm")
    props[f"{prefix}ssl.endpoint.identification.algorithm"] = algorithm
    return props


def grpc_security_protocol(config: BrokerConfig) -> str:
    """The GRPC listener's security protocol: its listener.security.protocol.map entry, else
    security.inter.broker.protocol (TlsConfigError, one line, when the map is malformed)."""
    try:
        protocol_map = parse_protocol_map(config.listener_security_protocol_map)
    except ListenerConfigError as exc:
        raise TlsConfigError(str(exc)) from None
    if config.listener_security_protocol_map.strip() and GRPC_LISTENER_NAME in protocol_map:
        return protocol_map[GRPC_LISTENER_NAME]
    return config.security_inter_broker_protocol


def grpc_requires_sasl(config: BrokerConfig) -> bool:
    return grpc_security_protocol(config).startswith("SASL_")


def grpc_tls(config: BrokerConfig) -> TlsConfig | None:
    """The gRPC port's and the inter-broker channels' TLS; None when the GRPC listener's protocol is plaintext."""
    protocol = grpc_security_protocol(config)
    if protocol not in TLS_PROTOCOLS:
        if protocol == "SASL_PLAINTEXT":
            raise TlsConfigError(
                f"listener.security.protocol.map: {GRPC_LISTENER_NAME}:SASL_PLAINTEXT is not served: brokers call "
                "each other's gRPC port by certificate, so a SASL gRPC port is SASL_SSL with ssl.client.auth=required"
            )
        return None
    props = {**_kafka_names(config, ""), "ssl.client.auth": config.ssl_client_auth}
    # Kafka's per-listener rule (KafkaConfig.valuesWithPrefixOverride): listener.name.grpc.ssl.<x> wins for the port.
    prefix = listener_prefix(GRPC_LISTENER_NAME)
    props |= {key[len(prefix) :]: value for key, value in config.given.items() if key.startswith(prefix + "ssl.")}
    tls = from_kafka_properties(props)
    if tls.keystore_file is None:
        raise TlsConfigError("ssl.keystore.location: a TLS broker port needs the broker's key and certificate")
    require_hostname_verification(tls, "ssl.endpoint.identification.algorithm")
    if tls.client_auth == "requested":
        # gRPC's Python API either requires a client certificate or never asks for one.
        raise TlsConfigError("ssl.client.auth: requested is not served on the gRPC port; give none or required")
    if protocol == "SASL_SSL" and tls.client_auth != "required":
        raise TlsConfigError(
            f"ssl.client.auth={tls.client_auth}: the gRPC port's protocol is SASL_SSL, and brokers call each other's "
            "gRPC port by certificate: set listener.name.grpc.ssl.client.auth=required (or ssl.client.auth)"
        )
    return tls


def zookeeper_tls(config: BrokerConfig) -> TlsConfig | None:
    """The quorum session's TLS (zookeeper.ssl.client.enable=true), None otherwise."""
    if not config.zookeeper_ssl_client_enable:
        return None
    tls = from_kafka_properties(_kafka_names(config, "zookeeper."), prefix="zookeeper.")
    return require_hostname_verification(tls, "zookeeper.ssl.endpoint.identification.algorithm")
