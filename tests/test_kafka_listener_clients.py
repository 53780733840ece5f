"""Kafka's own clients against the brokers' Kafka listeners: a 3-broker cluster of real processes.

What a user of librdkafka (confluent-kafka), kafka-python or aiokafka checks first: the client connects to the
bootstrap list, negotiates versions (ApiVersions), and lists the cluster's topics, brokers and partition
leaders (Metadata) as the cluster itself has them in ZooKeeper; each broker is named by its Kafka
listener, not by its gRPC endpoint.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer

from client import Admin, Consumer, NewTopic, Producer
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
BROKERS = 3
TOPIC = "listed"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-listener"), brokers=BROKERS) as kafka:
        kafka.start()
        kafka.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        yield kafka


def test_registration_names_the_kafka_listener_and_the_grpc_endpoint(cluster: KafkaCluster) -> None:
    data, _ = cluster.zk.get("/brokers/ids/1")
    registration = json.loads(data)
    assert registration["version"] == 5
    assert registration["endpoints"] == [
        f"PLAINTEXT://{cluster.kafka_address(1)}",
        f"GRPC://{cluster.broker_address(1)}",
    ]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "GRPC": "PLAINTEXT"}
    # The top-level host/port Kafka's tools read is the first PLAINTEXT listener: the Kafka one.
    assert f"{registration['host']}:{registration['port']}" == cluster.kafka_address(1)


def test_librdkafka_lists_topics_brokers_and_leaders(cluster: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})

    def listed():  # type: ignore[no-untyped-def]
        metadata = admin.list_topics(timeout=10)
        topic = metadata.topics.get(TOPIC)
        if topic is None or len(topic.partitions) < PARTITIONS or len(metadata.brokers) < BROKERS:
            return None
        return metadata if all(p.leader >= 0 for p in topic.partitions.values()) else None

    metadata = wait_until(listed, TIMEOUT_S, interval_s=0.2, message="librdkafka did not see the topic")
    assert {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
        b: cluster.kafka_address(b) for b in cluster.broker_ids
    }
    assert metadata.controller_id == cluster.controller_id()
    for partition in metadata.topics[TOPIC].partitions.values():
        state = cluster.partition_state(TOPIC, partition.id)
        assert partition.leader == state.leader
        assert sorted(partition.replicas) == sorted(cluster.assignment(TOPIC)[partition.id])
        assert sorted(partition.isrs) == sorted(state.isr)


def test_kafka_python_admin_and_consumer_list_topics(cluster: KafkaCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
    try:
        assert TOPIC in admin.list_topics()
        [described] = admin.describe_topics([TOPIC])
        assert described["error_code"] == 0
        assert len(described["partitions"]) == PARTITIONS
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers)
    try:
        assert TOPIC in consumer.topics()
        assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
    finally:
        consumer.close()


def test_metadata_for_an_unknown_topic_without_auto_creation_is_an_error(cluster: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers, "allow.auto.create.topics": False})
    metadata = admin.list_topics(topic="no-such-topic", timeout=10)
    assert metadata.topics["no-such-topic"].error is not None


def test_the_sdk_and_tools_take_the_kafka_bootstrap_list(cluster: KafkaCluster) -> None:
    """A gRPC client reaching a Kafka listener is handed to that broker's gRPC service, whose Metadata names
    every broker's gRPC endpoint: the SDK's Admin, Producer and Consumer and `zkraft topics` work unchanged."""
    servers = cluster.kafka_bootstrap_servers
    with Admin(servers) as admin:
        admin.create_topics([NewTopic("via-kafka-list", 2, 3)], timeout_ms=30000)
    with Producer(servers, acks="all") as producer:
        sent = [producer.send("via-kafka-list", f"v{i}".encode(), partition=i % 2) for i in range(20)]
        producer.flush()
    assert sorted((m.get(timeout=30).partition, m.get(timeout=30).offset) for m in sent) == sorted(
        (p, o) for p in range(2) for o in range(10)
    )
    consumer = Consumer(
        "via-kafka-list", bootstrap_servers=servers, auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    try:
        values = sorted(record.value for record in consumer)
    finally:
        consumer.close()
    assert values == sorted(f"v{i}".encode() for i in range(20))
    described = subprocess.run(
        [sys.executable, "-m", "zkraft", "topics", "--bootstrap-server", servers, "--describe", "--topic", TOPIC],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    assert f"Topic: {TOPIC}\tPartitionCount: {PARTITIONS}\tReplicationFactor: 3" in described.stdout


def test_aiokafka_lists_topics(cluster: KafkaCluster) -> None:
    async def listed() -> set[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
        await consumer.start()
        try:
            return await consumer.topics()
        finally:
            await consumer.stop()

    assert TOPIC in asyncio.run(listed())
