"""The broker's TLS, from Kafka's property names: its gRPC port, its channels to other brokers, its quorum session.

Inter-broker traffic (replica fetches, the controller's requests, controlled shutdown) runs over the
brokers' gRPC ports here, so `security.inter.broker.protocol` (Kafka's KafkaConfig) decides whether
that port and those channels are TLS: SSL or SASL_SSL turns TLS on with the broker's `ssl.keystore.*`
and `ssl.truststore.*`, the same certificate serving and dialling (a broker authenticates to another
by it when `ssl.client.auth=required`). The ZooKeeper session uses Kafka 2.5's `zookeeper.ssl.*`
(`zookeeper.ssl.client.enable=true`), since the quorum's port may demand a client certificate of its own.
"""

from __future__ import annotations

from broker.config import BrokerConfig
from runtime.tls import TlsConfig, TlsConfigError, from_kafka_properties, require_hostname_verification

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def _kafka_names(config: BrokerConfig, prefix: str) -> dict[str, str]:
    field_prefix = prefix.replace(".", "_")
    names = ("keystore.location", "keystore.type", "truststore.location", "truststore.type")
    props = {f"{prefix}ssl.{n}": getattr(config, f"{field_prefix}ssl_{n.replace('.', '_')}") for n in names}
    algorithm = getattr(config, f"{field_prefix}ssl_endpoint_identification_algorithm")
    props[f"{prefix}ssl.endpoint.identification.algorithm"] = algorithm
    return props


def grpc_tls(config: BrokerConfig) -> TlsConfig | None:
    """The gRPC port's and the inter-broker channels' TLS; None when security.inter.broker.protocol is plaintext."""
    if config.security_inter_broker_protocol not in TLS_PROTOCOLS:
        return None
    props = {**_kafka_names(config, ""), "ssl.client.auth": config.ssl_client_auth}
    tls = from_kafka_properties(props)
    if tls.keystore_file is None:
        raise TlsConfigError("ssl.keystore.location: a TLS broker port needs the broker's key and certificate")
    require_hostname_verification(tls, "ssl.endpoint.identification.algorithm")
    if tls.client_auth == "requested":
        # gRPC's Python API either requires a client certificate or never asks for one.
        raise TlsConfigError("ssl.client.auth: requested is not served on the gRPC port; give none or required")
    return tls


def zookeeper_tls(config: BrokerConfig) -> TlsConfig | None:
    """The quorum session's TLS (zookeeper.ssl.client.enable=true), None otherwise."""
    if not config.zookeeper_ssl_client_enable:
        return None
    tls = from_kafka_properties(_kafka_names(config, "zookeeper."), prefix="zookeeper.")
    return require_hostname_verification(tls, "zookeeper.ssl.endpoint.identification.algorithm")
