"""The broker's endpoints: Kafka's `listeners`, `advertised.listeners` and `listener.security.protocol.map`.

A broker serves two front ends. Kafka's binary protocol is served on the listeners named in `listeners`
(Kafka's syntax, `PLAINTEXT://127.0.0.1:9092,CLIENT://:9093`; port 0 binds an ephemeral port, which is
what gets registered). The broker's own gRPC service stays on `host.name`:`port` (the settings every
zkraft deployment already has) and is registered as one more listener, named `GRPC`, so that the
controller, the replica fetchers and zkraft's tools find it in `/brokers/ids/<id>` exactly as they did.

`listeners` left unset means no Kafka listener: a broker that serves only gRPC (Kafka's own default,
`PLAINTEXT://:9092`, would collide with the gRPC port's default). `zkraft up` and the test harness always
set it. Kafka's four security protocols are served: PLAINTEXT, SSL (its `ssl.*` settings: broker/listener_tls.py),
SASL_PLAINTEXT (broker/sasl/) and SASL_SSL (both: TLS first, then the SASL login inside it).

Kafka 2.8 KafkaConfig.listeners / advertisedListeners / listenerSecurityProtocolMap and
EndPoint.createEndPoint are the reference.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from client.kafka.znodes import GRPC_LISTENER_NAME, SECURITY_PROTOCOLS, EndPoint, parse_endpoint

SERVED_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
# Kafka's default listener.security.protocol.map: each protocol's name is a listener name.
DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}


class ListenerConfigError(ValueError):
    """A bad listener setting: one line naming the property and the listener."""


@dataclass(frozen=True, slots=True)
class KafkaListener:
    """One Kafka listener: where it binds and what it registers (the advertised endpoint)."""

    name: str
    bind_host: str | None  # None binds every interface, as Kafka's `PLAINTEXT://:9092`
    bind_port: int  # 0: an ephemeral port
    advertised: EndPoint  # port 0 stands for the bound port

    def registered(self, bound_port: int) -> EndPoint:
        """The endpoint to register, with the bound port in place of an advertised port 0."""
        ad = self.advertised
        if ad.port != 0:
            return ad
        return EndPoint(ad.host, bound_port, ad.listener_name, ad.security_protocol)


def parse_protocol_map(text: str) -> dict[str, str]:
    """`CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT` -> {listener: protocol}; empty text is Kafka's default map."""
    if not text.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    mapping: dict[str, str] = {}
    for item in text.split(","):
        name, sep, protocol = item.strip().partition(":")
        if not sep or not name.strip() or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"listener.security.protocol.map: {item.strip()!r} is not LISTENER:PROTOCOL "
                f"with a protocol among {', '.join(SECURITY_PROTOCOLS)}"
            )
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def _parse_list(prop: str, text: str, protocol_map: Mapping[str, str]) -> dict[str, EndPoint]:
    endpoints: dict[str, EndPoint] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            endpoint = parse_endpoint(item, protocol_map)
        except ValueError as exc:
            raise ListenerConfigError(f"{prop}: {exc}") from None
        if endpoint.listener_name in endpoints:
            raise ListenerConfigError(f"{prop}: listener {endpoint.listener_name} is named twice")
        if endpoint.listener_name == GRPC_LISTENER_NAME:
            raise ListenerConfigError(f"{prop}: the listener name {GRPC_LISTENER_NAME} is the broker's gRPC endpoint")
        if endpoint.security_protocol not in SERVED_SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"{prop}: listener {endpoint.listener_name} uses security protocol {endpoint.security_protocol}, "
                f"which this broker does not serve yet (only {', '.join(sorted(SERVED_SECURITY_PROTOCOLS))})"
            )
        if not 0 <= endpoint.port <= 65535:
            raise ListenerConfigError(f"{prop}: listener {endpoint.listener_name} has port {endpoint.port}")
        endpoints[endpoint.listener_name] = endpoint
    return endpoints


def parse_listeners(listeners: str, advertised_listeners: str, protocol_map_text: str) -> tuple[KafkaListener, ...]:
    """The Kafka listeners, checked as Kafka's KafkaConfig does; raises ListenerConfigError (one line)."""
    protocol_map = parse_protocol_map(protocol_map_text)
    bound = _parse_list("listeners", listeners, protocol_map)
    advertised = _parse_list("advertised.listeners", advertised_listeners, protocol_map) or dict(bound)
    for name, endpoint in advertised.items():
        if name not in bound:
            raise ListenerConfigError(
                f"advertised.listeners: listener {name} is not among the listeners ({', '.join(bound) or 'none'})"
            )
        if endpoint.host in ("0.0.0.0", "::"):
            raise ListenerConfigError(
                f"advertised.listeners: listener {name} advertises the wildcard address {endpoint.host}"
            )
    return tuple(
        KafkaListener(
            name=name,
            bind_host=endpoint.host,
            bind_port=endpoint.port,
            advertised=_advertised(advertised.get(name, endpoint)),
        )
        for name, endpoint in bound.items()
    )


def _advertised(endpoint: EndPoint) -> EndPoint:
    """A listener bound to every interface advertises the host's name (Kafka: InetAddress.getCanonicalHostName)."""
    if endpoint.host in (None, "", "0.0.0.0", "::"):
        return EndPoint(socket.getfqdn(), endpoint.port, endpoint.listener_name, endpoint.security_protocol)
    return endpoint
