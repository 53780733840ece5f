"""`listeners`, `advertised.listeners` and `listener.security.protocol.map` as Kafka's KafkaConfig reads them,
and the registration that names the Kafka listeners and the gRPC endpoint."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfigError, from_properties
from broker.server import registered_endpoints
from client.kafka.znodes import BrokerRegistration, EndPoint, decode_broker, encode_broker


def listeners_of(**properties: str):  # type: ignore[no-untyped-def]
    return from_properties({k.replace("_", "."): v for k, v in properties.items()}).kafka_listeners


def test_unset_listeners_mean_a_grpc_only_broker() -> None:
    assert listeners_of() == ()


def test_listeners_with_an_ephemeral_port_register_the_bound_one() -> None:
    [listener] = listeners_of(listeners="PLAINTEXT://127.0.0.1:0")
    assert (listener.name, listener.bind_host, listener.bind_port) == ("PLAINTEXT", "127.0.0.1", 0)
    assert listener.registered(40123) == EndPoint("127.0.0.1", 40123, "PLAINTEXT", "PLAINTEXT")


def test_advertised_listeners_are_what_gets_registered() -> None:
    [listener] = listeners_of(listeners="PLAINTEXT://0.0.0.0:9092", advertised_listeners="PLAINTEXT://kafka-1:19092")
    assert listener.bind_host == "0.0.0.0"
    assert listener.registered(9092) == EndPoint("kafka-1", 19092, "PLAINTEXT", "PLAINTEXT")


def test_named_listeners_map_to_their_protocol() -> None:
    listeners = listeners_of(
        listeners="CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
        listener_security_protocol_map="CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
    )
    assert [(item.name, item.advertised.security_protocol) for item in listeners] == [
        ("CLIENT", "PLAINTEXT"),
        ("REPLICATION", "PLAINTEXT"),
    ]


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        (
            {"listeners": "SASL_SSL://127.0.0.1:9093"},
            "listener SASL_SSL (SASL_SSL): ssl.truststore.location is not set",
        ),
        (
            {
                "listeners": "CLIENT://:9092",
                "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT",
                "listener.name.client.sasl.enabled.mechanisms": "GSSAPI",
            },
            "listener.name.client.sasl.enabled.mechanisms: listener CLIENT enables GSSAPI",
        ),
        (
            {"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN"},
            "listener SASL_PLAINTEXT enables PLAIN but has no JAAS config",
        ),
        ({"listeners": "CLIENT://:9092"}, "No security protocol defined for listener CLIENT"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listener PLAINTEXT is named twice"),
        ({"listeners": "nonsense"}, "Unable to parse nonsense to a broker endpoint"),
        ({"listeners": "PLAINTEXT://:70000"}, "listener PLAINTEXT has port 70000"),
        (
            {"listeners": "GRPC://:9092", "listener.security.protocol.map": "GRPC:PLAINTEXT"},
            "the listener name GRPC is the broker's gRPC endpoint",
        ),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SASL_SSL://h:9093"},
            "advertised.listeners: listener SASL_SSL is not among the listeners (PLAINTEXT)",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092",
                "advertised.listeners": "OTHER://h:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            },
            "advertised.listeners: listener OTHER is not among the listeners (PLAINTEXT)",
        ),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "advertises the wildcard address 0.0.0.0",
        ),
        ({"listener.security.protocol.map": "CLIENT"}, "'CLIENT' is not LISTENER:PROTOCOL"),
    ],
)
def test_a_bad_listener_setting_is_one_line_naming_it(properties: dict[str, str], message: str) -> None:
    with pytest.raises(BrokerConfigError) as raised:
        from_properties(properties)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_registration_lists_kafka_listeners_then_the_grpc_endpoint() -> None:
    config = from_properties({"host.name": "127.0.0.1", "port": "9192", "listeners": "PLAINTEXT://127.0.0.1:9092"})
    endpoints = registered_endpoints(config, (EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT"),))
    registration = decode_broker(1, encode_broker(BrokerRegistration(1, endpoints, timestamp_ms=1)))
    assert [e.connection_string for e in registration.endpoints] == [
        "PLAINTEXT://127.0.0.1:9092",
        "GRPC://127.0.0.1:9192",
    ]
    assert registration.grpc_endpoint() == EndPoint("127.0.0.1", 9192, "GRPC", "PLAINTEXT")
    assert registration.plaintext_endpoint() == EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT")


def test_a_registration_from_before_kafka_listeners_has_its_grpc_endpoint_under_plaintext() -> None:
    old = b'{"version":4,"host":"127.0.0.1","port":9092,"endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,'
    old += b'"timestamp":"1","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}'
    assert decode_broker(1, old).grpc_endpoint() == EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT")
