"""SASL on a broker's Kafka listener, with Kafka's own clients: a broker on a 3-node quorum, real processes.

The listener is SASL_PLAINTEXT with PLAIN (users in the JAAS config), SCRAM-SHA-256 and SCRAM-SHA-512 (users
made with `zkraft configs --entity-type users` while the broker runs). What a user checks: librdkafka,
kafka-python and aiokafka produce and consume as a SCRAM or PLAIN user; a wrong password, an unknown user and
a mechanism the listener does not enable are each refused with the client's clear error while the broker
serves on; a client that skips authentication gets nothing; a user deleted while connected is refused when its
connection re-authenticates (SCRAM-SHA-256 sessions here live 3 s, `connections.max.reauth.ms`, KIP-368).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer as RdProducer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as PyKafkaError

from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
REAUTH_MS = 3000
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";'
)
SASL_PROPERTIES = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": str(REAUTH_MS),
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}


class SaslCluster(KafkaCluster):
    """The harness's cluster with each broker's Kafka listener on SASL_PLAINTEXT."""

    def write_config(self, broker_id: int) -> Path:
        self.properties["listeners"] = f"SASL_PLAINTEXT://{self.kafka_address(broker_id)}"
        return super().write_config(broker_id)


def zkraft_configs(cluster: KafkaCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkraft", "configs", "--zookeeper", cluster.zookeeper, "--entity-type", "users", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=subprocess_env(),
        cwd=REPO_ROOT,
        check=False,
    )


def add_user(cluster: KafkaCluster, user: str, config: str) -> None:
    done = zkraft_configs(cluster, "--entity-name", user, "--alter", "--add-config", config)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"Completed Updating config for entity: user-principal '{user}'."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with SaslCluster(tmp_path_factory.mktemp("kafka-sasl"), brokers=1, broker_properties=SASL_PROPERTIES) as kafka:
        kafka.start()
        # Made while the broker runs: it logs them in without a restart.
        add_user(kafka, "alice", "SCRAM-SHA-512=[password=alice-secret]")
        add_user(
            kafka, "bob", "SCRAM-SHA-256=[iterations=8192,password=bob-secret],SCRAM-SHA-512=[password=bob-secret]"
        )
        yield kafka


def rd_config(cluster: KafkaCluster, mechanism: str, user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def rd_produce_consume(cluster: KafkaCluster, mechanism: str, user: str, password: str, count: int = 50) -> None:
    topic = f"rd-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    producer = RdProducer(rd_config(cluster, mechanism, user, password, **{"allow.auto.create.topics": True}))
    delivered: list[Any] = []
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err or msg.offset()))
    assert producer.flush(TIMEOUT_S) == 0
    assert sorted(delivered) == list(range(count)), delivered[:3]
    consumer = RdConsumer(
        rd_config(cluster, mechanism, user, password, **{"group.id": topic, "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:

        def read_all() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) >= count

        wait_until(read_all, TIMEOUT_S, interval_s=0.01, message=f"{user} read {len(values)} of {count}")
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(count))


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("SCRAM-SHA-512", "alice", "alice-secret"), ("PLAIN", "carol", "carol-secret")],
)
def test_librdkafka_produces_and_consumes(cluster: KafkaCluster, mechanism: str, user: str, password: str) -> None:
    rd_produce_consume(cluster, mechanism, user, password)
    logins = cluster.log_events(1, "kafka_sasl_authenticated")
    assert any(e["principal"] == f"User:{user}" and e["mechanism"] == mechanism for e in logins)


def test_kafka_python_produces_and_consumes_with_scram_sha_512(cluster: KafkaCluster) -> None:
    topic = f"py-{uuid.uuid4().hex[:6]}"
    auth = {
        "bootstrap_servers": cluster.kafka_bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "bob",
        "sasl_plain_password": "bob-secret",
    }
    producer = KafkaProducer(**auth)
    try:
        for i in range(20):
            producer.send(topic, f"p{i}".encode()).get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **auth)
    try:
        values = sorted(record.value for record in consumer)
    finally:
        consumer.close()
    assert values == sorted(f"p{i}".encode() for i in range(20))


def test_aiokafka_produces_and_consumes_with_scram_sha_256(cluster: KafkaCluster) -> None:
    topic = f"aio-{uuid.uuid4().hex[:6]}"
    auth = {
        "bootstrap_servers": cluster.kafka_bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "bob",
        "sasl_plain_password": "bob-secret",
    }

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(**auth)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **auth)
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=10000, max_records=10)
            return [r.value for records in batches.values() for r in records]
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(asyncio.wait_for(roundtrip(), TIMEOUT_S))) == sorted(f"a{i}".encode() for i in range(10))


def rd_login_error(cluster: KafkaCluster, mechanism: str, user: str, password: str) -> RdKafkaError:
    """The first error librdkafka reports for a client that cannot log in (its error callback)."""
    errors: list[RdKafkaError] = []
    producer = RdProducer(rd_config(cluster, mechanism, user, password, error_cb=errors.append))
    wait_until(lambda: producer.poll(0.2) is not None and errors, TIMEOUT_S, message="no login error reported")
    return errors[0]


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "message"),
    [
        (
            "SCRAM-SHA-512",
            "alice",
            "wrong",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
        (
            "SCRAM-SHA-512",
            "mallory",
            "alice-secret",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
        ("PLAIN", "carol", "wrong", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", "alice", "alice-secret", "invalid credentials with SASL mechanism SCRAM-SHA-256"),
    ],
)
def test_bad_credentials_are_refused_with_kafkas_message(
    cluster: KafkaCluster, mechanism: str, user: str, password: str, message: str
) -> None:
    error = rd_login_error(cluster, mechanism, user, password)
    assert error.code() == RdKafkaError._AUTHENTICATION
    assert message in error.str()
    rd_produce_consume(cluster, "SCRAM-SHA-512", "alice", "alice-secret", count=5)  # the broker serves on
    cluster.assert_alive(1)


def test_a_mechanism_the_listener_does_not_enable_is_refused(cluster: KafkaCluster) -> None:
    errors: list[RdKafkaError] = []
    producer = RdProducer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice",
            "error_cb": errors.append,
        }
    )
    wait_until(lambda: producer.poll(0.2) is not None and errors, TIMEOUT_S, message="no login error reported")
    assert "Unsupported SASL mechanism" in errors[0].str(), errors[0].str()
    assert "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" in errors[0].str()  # the mechanisms the broker enables
    events = cluster.log_events(1, "kafka_sasl_mechanism_refused")
    assert any(e["mechanism"] == "OAUTHBEARER" for e in events)
    cluster.assert_alive(1)


def test_kafka_python_reports_a_wrong_password(cluster: KafkaCluster, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python retries a failed login until max_block_ms, then gives up; what it logs on the way is Kafka's
    error and message."""
    with pytest.raises(PyKafkaError):
        KafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password="wrong",
            max_block_ms=5000,
        )
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text
    cluster.assert_alive(1)


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the broker closed the connection without answering (a reset when it left bytes unread)."""
    try:
        return sock.recv(4) == b""
    except ConnectionResetError:
        return True


def test_requests_before_authentication_close_the_connection(cluster: KafkaCluster) -> None:
    """Kafka's SaslServerAuthenticator: before SaslHandshake only ApiVersions is served; a Metadata request
    closes the connection unanswered. A client configured for PLAINTEXT therefore never gets metadata."""
    host, port = cluster.kafka_address(1).rsplit(":", 1)
    header = struct.pack(">hhih", 3, 1, 7, 4) + b"test"  # Metadata v1, correlation id 7, client id "test"
    body = struct.pack(">i", -1)  # all topics
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert closed_by_peer(sock)
    events = cluster.log_events(1, "kafka_request_refused")
    assert any("during SASL handshake" in e["reason"] for e in events)
    # Before login a frame may not exceed sasl.server.max.receive.size (512 KiB), and HTTP/2's preface is not
    # handed to the gRPC service as on a PLAINTEXT listener: both close the connection unread.
    for opening in (struct.pack(">i", 600_000) + b"x" * 1024, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
            sock.sendall(opening)
            assert closed_by_peer(sock)
    assert cluster.log_events(1, "kafka_sasl_frame_refused")
    cluster.assert_alive(1)


def test_a_deleted_user_is_refused_at_reauthentication(cluster: KafkaCluster) -> None:
    """librdkafka re-authenticates before the 3 s session ends (KIP-368); once dave's credential is deleted,
    that re-authentication fails, the broker closes the connection, and librdkafka's next login is refused."""
    add_user(cluster, "dave", "SCRAM-SHA-256=[password=dave-secret]")
    errors: list[RdKafkaError] = []
    producer = RdProducer(rd_config(cluster, "SCRAM-SHA-256", "dave", "dave-secret", error_cb=errors.append))
    delivered: list[Any] = []
    producer.produce("dave-topic", b"before", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0 and delivered == [None]
    done = zkraft_configs(cluster, "--entity-name", "dave", "--alter", "--delete-config", "SCRAM-SHA-256")
    assert done.returncode == 0, done.stderr

    def refused_at_reauthentication() -> bool:
        producer.poll(0.1)
        return any(
            e["reauthentication"] and e["principal"] == "User:dave"
            for e in cluster.log_events(1, "kafka_sasl_authentication_failed")
        )

    wait_until(refused_at_reauthentication, TIMEOUT_S, interval_s=0.01, message="dave was not refused")

    def login_refused() -> bool:
        producer.poll(0.1)
        return any(e.code() == RdKafkaError._AUTHENTICATION for e in errors)

    wait_until(login_refused, TIMEOUT_S, interval_s=0.01, message="librdkafka reported no authentication error")


def test_configs_describes_and_deletes_users(cluster: KafkaCluster) -> None:
    described = zkraft_configs(cluster, "--entity-name", "bob", "--describe")
    assert described.returncode == 0, described.stderr
    line = described.stdout.strip()
    assert line.startswith("Configs for user-principal 'bob' are SCRAM-SHA-256=salt=")
    assert "iterations=8192" in line and "SCRAM-SHA-512=salt=" in line and "bob-secret" not in line
    missing = zkraft_configs(cluster, "--entity-name", "bob", "--alter", "--delete-config", "SCRAM-SHA-1")
    assert missing.returncode != 0 and "Invalid config(s): SCRAM-SHA-1" in missing.stderr
    assert "Traceback" not in missing.stderr
    weak = zkraft_configs(
        cluster, "--entity-name", "eve", "--alter", "--add-config", "SCRAM-SHA-512=[iterations=10,password=x]"
    )
    assert weak.returncode != 0 and "Iterations 10 is less than the minimum 4096" in weak.stderr


def test_librdkafka_admin_manages_scram_users_with_kip_554(cluster: KafkaCluster) -> None:
    """AlterUserScramCredentials / DescribeUserScramCredentials: a user made by Kafka's admin client (which sends
    only the salted password) logs in, is described with its iterations, and is gone once deleted."""
    admin = AdminClient(rd_config(cluster, "SCRAM-SHA-512", "alice", "alice-secret"))
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    upsert = UserScramCredentialUpsertion("erin", sha256, b"erin-secret", b"erin-salt")
    admin.alter_user_scram_credentials([upsert])["erin"].result(timeout=TIMEOUT_S)
    rd_produce_consume(cluster, "SCRAM-SHA-256", "erin", "erin-secret", count=5)
    described = admin.describe_user_scram_credentials(["erin"])["erin"].result(timeout=TIMEOUT_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    too_few = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10), b"x")
    with pytest.raises(KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([too_few])["erin"].result(timeout=TIMEOUT_S)
    deletion = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])["erin"].result(timeout=TIMEOUT_S)
    with pytest.raises(KafkaException, match="Attempt to describe a user credential that does not exist: erin"):
        admin.describe_user_scram_credentials(["erin"])["erin"].result(timeout=TIMEOUT_S)
    with pytest.raises(KafkaException, match="Attempt to delete a user credential that does not exist"):
        admin.alter_user_scram_credentials([deletion])["erin"].result(timeout=TIMEOUT_S)
    assert rd_login_error(cluster, "SCRAM-SHA-256", "erin", "erin-secret").code() == RdKafkaError._AUTHENTICATION
