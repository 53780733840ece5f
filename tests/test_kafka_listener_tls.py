"""Kafka's own clients over a broker's SSL listeners (real processes: a quorum and one broker).

What a user of librdkafka (confluent-kafka) and kafka-python checks: with `security.protocol=SSL` and the CA
file they produce and consume; the broker registers its SSL endpoint as Kafka does; a plaintext client on the
SSL port, a client that does not trust the broker's CA, and a client that dials a name the certificate does not
carry each fail at once with an error saying so, while the broker logs one line and serves on.

Two SSL listeners: CLIENT with a certificate for 127.0.0.1/localhost, and ELSEWHERE whose certificate
(`listener.name.elsewhere.ssl.keystore.location`, the per-listener override) names another host only.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

from broker.kafka_listener import GRPC_ON_TLS_LISTENER, HTTP2_PREFACE
from runtime.tls import TlsConfig
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import LOOPBACK, free_ports
from tests.tls_material import TlsMaterial, make_tls_material

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "secured"
RECORDS = 200
WAIT_S = 60.0
# A refused client must fail well within this: it is told at its first connection, not by a timeout.
REFUSAL_S = 10.0
POLLS_MAX = 20


class SslCluster:
    def __init__(self, kafka: KafkaCluster, material: TlsMaterial, client_port: int, elsewhere_port: int) -> None:
        self.kafka = kafka
        self.material = material
        self.client_address = f"{LOOPBACK}:{client_port}"
        self.elsewhere_address = f"{LOOPBACK}:{elsewhere_port}"

    def ssl_config(self, **extra: str) -> dict[str, str]:
        return {
            "bootstrap.servers": self.client_address,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.material.ca_file),
            **extra,
        }

    def handshake_failures(self) -> list[dict[str, Any]]:
        return self.kafka.log_events(1, "kafka_tls_handshake_failed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SslCluster]:
    root = tmp_path_factory.mktemp("kafka-tls")
    material = make_tls_material(root / "tls")
    client_port, elsewhere_port = free_ports(2)
    properties = {
        "listeners": f"CLIENT://{LOOPBACK}:{client_port},ELSEWHERE://{LOOPBACK}:{elsewhere_port}",
        "listener.security.protocol.map": "CLIENT:SSL,ELSEWHERE:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.server_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(material.ca_file),
        "listener.name.elsewhere.ssl.keystore.location": str(material.wrong_host_keystore),
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    with KafkaCluster(root / "cluster", brokers=1, broker_properties=properties) as kafka:
        kafka.start()
        kafka.create_topic(TOPIC, partitions=2, replication_factor=1)
        yield SslCluster(kafka, material, client_port, elsewhere_port)
        kafka.assert_alive(1)


def test_the_registration_names_the_ssl_endpoints_as_kafka_writes_them(cluster: SslCluster) -> None:
    data, _ = cluster.kafka.zk.get("/brokers/ids/1")
    registration = json.loads(data)
    assert registration["endpoints"] == [
        f"CLIENT://{cluster.client_address}",
        f"ELSEWHERE://{cluster.elsewhere_address}",
        f"GRPC://{cluster.kafka.broker_address(1)}",
    ]
    assert registration["listener_security_protocol_map"] == {"CLIENT": "SSL", "ELSEWHERE": "SSL", "GRPC": "PLAINTEXT"}


def consume_values(consumer: Any, count: int, poll: Any) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count and time.monotonic() < deadline:
        values.extend(poll(consumer))
    return values


def test_librdkafka_produces_and_consumes_over_ssl(cluster: SslCluster) -> None:
    producer = Producer(cluster.ssl_config(acks="all"))
    sent = [f"librdkafka-{i}".encode() for i in range(RECORDS)]
    for value in sent:
        producer.produce(TOPIC, value)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer(cluster.ssl_config(**{"group.id": "tls-librdkafka", "auto.offset.reset": "earliest"}))
    consumer.subscribe([TOPIC])
    try:

        def poll(c: Consumer) -> list[bytes]:
            message = c.poll(1.0)
            if message is None or message.error() is not None:
                return []
            return [message.value()] if message.value().startswith(b"librdkafka-") else []

        assert sorted(consume_values(consumer, RECORDS, poll)) == sorted(sent)
    finally:
        consumer.close()


def test_kafka_python_produces_and_consumes_over_ssl(cluster: SslCluster) -> None:
    common = {
        "bootstrap_servers": cluster.client_address,
        "security_protocol": "SSL",
        "ssl_cafile": str(cluster.material.ca_file),
        "ssl_check_hostname": True,
    }
    producer = KafkaProducer(acks="all", **common)
    sent = [f"kafka-python-{i}".encode() for i in range(RECORDS)]
    for value in sent:
        producer.send(TOPIC, value)
    producer.flush(WAIT_S)
    producer.close()
    consumer = KafkaConsumer(TOPIC, group_id="tls-kafka-python", auto_offset_reset="earliest", **common)
    try:

        def poll(c: KafkaConsumer) -> list[bytes]:
            batches = c.poll(timeout_ms=1000)
            return [r.value for records in batches.values() for r in records if r.value.startswith(b"kafka-python-")]

        assert sorted(consume_values(consumer, RECORDS, poll)) == sorted(sent)
    finally:
        consumer.close()


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def librdkafka_refusal(config: dict[str, str]) -> str:
    """What librdkafka reports when it cannot get metadata: its error callbacks and its log, joined."""
    errors: list[str] = []
    collected = Collected()
    logger = logging.getLogger(f"librdkafka-{len(config)}-{time.monotonic_ns()}")
    logger.addHandler(collected)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    admin = AdminClient({**config, "error_cb": lambda err: errors.append(str(err)), "logger": logger})
    started = time.monotonic()
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=REFUSAL_S)
    assert time.monotonic() - started <= REFUSAL_S + 1
    for _ in range(POLLS_MAX):  # deliver the callbacks and log lines queued so far (bounded: 2 s at most)
        if not admin.poll(0.1):
            break
    return " | ".join(errors + collected.messages)


def test_a_plaintext_client_on_the_ssl_port_fails_and_the_broker_logs_it(cluster: SslCluster) -> None:
    before = len(cluster.handshake_failures())
    reported = librdkafka_refusal({"bootstrap.servers": cluster.client_address})
    # The broker closes at the first bytes that are not a ClientHello: librdkafka, waiting for its ApiVersions
    # answer, reports the disconnection in that state (its hint for a wrong security.protocol).
    assert "Disconnected" in reported and "APIVERSION_QUERY" in reported, reported
    started = time.monotonic()
    with pytest.raises(KafkaError, match="Unable to bootstrap"):  # kafka-python: "socket disconnected" in its log
        KafkaProducer(bootstrap_servers=cluster.client_address, bootstrap_timeout_ms=5000)
    assert time.monotonic() - started <= REFUSAL_S
    wait_until(lambda: len(cluster.handshake_failures()) > before, WAIT_S, message="no kafka_tls_handshake_failed line")
    assert "plaintext client" in cluster.handshake_failures()[before]["reason"]
    cluster.kafka.assert_alive(1)


def test_a_client_that_does_not_trust_the_brokers_ca_is_refused(cluster: SslCluster) -> None:
    before = len(cluster.handshake_failures())
    reported = librdkafka_refusal(cluster.ssl_config(**{"ssl.ca.location": str(cluster.material.other_ca_file)}))
    assert "certificate verify failed" in reported, reported
    wait_until(lambda: len(cluster.handshake_failures()) > before, WAIT_S, message="no kafka_tls_handshake_failed line")
    cluster.kafka.assert_alive(1)


def test_hostname_verification_refuses_a_certificate_for_another_name(cluster: SslCluster) -> None:
    elsewhere = {"bootstrap.servers": cluster.elsewhere_address}
    reported = librdkafka_refusal(cluster.ssl_config(**elsewhere))
    assert "certificate verify failed" in reported or "hostname" in reported.lower(), reported
    # The same listener, with verification turned off as Kafka's clients allow: the CA is still checked, and works.
    admin = AdminClient(cluster.ssl_config(**elsewhere, **{"ssl.endpoint.identification.algorithm": "none"}))
    assert TOPIC in admin.list_topics(timeout=WAIT_S).topics


def test_a_grpc_client_on_an_ssl_listener_is_told_where_to_go(cluster: SslCluster) -> None:
    context = TlsConfig(None, cluster.material.ca_file).client_ssl_context()
    host, port = cluster.client_address.split(":")
    with socket.create_connection((host, int(port)), timeout=REFUSAL_S) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(HTTP2_PREFACE)
            answer = b""
            while GRPC_ON_TLS_LISTENER.encode() not in answer:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                answer += chunk
    assert GRPC_ON_TLS_LISTENER.encode() in answer
    assert answer[3] == 0x4  # SETTINGS first (RFC 9113 §3.4), then the GOAWAY
    assert cluster.kafka.log_events(1, "grpc_handoff_refused")


def test_the_broker_refuses_to_start_with_a_keystore_it_cannot_read(tmp_path: Path) -> None:
    material = make_tls_material(tmp_path / "tls")
    properties = {
        "listeners": f"SSL://{LOOPBACK}:0",
        "ssl.keystore.location": str(tmp_path / "missing.pem"),
        "ssl.truststore.location": str(material.ca_file),
    }
    with KafkaCluster(tmp_path / "cluster", brokers=1, broker_properties=properties) as kafka:
        kafka.quorum.start_all()
        kafka.start_broker(1, wait=False)
        wait_until(lambda: not kafka.alive(1), WAIT_S, message="the broker kept running with an unreadable keystore")
        assert f"listener SSL: {tmp_path / 'missing.pem'}: cannot be read" in kafka.log_text(1)
