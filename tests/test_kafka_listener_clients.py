"""Kafka's own clients against the brokers' Kafka listeners: a 3-broker cluster of real processes.

What a user of librdkafka (confluent-kafka) or kafka-python checks first: the client connects to the
bootstrap list, negotiates versions (ApiVersions), and lists the cluster's topics, brokers and partition
leaders (Metadata) as the cluster itself has them in ZooKeeper; each broker is named by its Kafka
listener, not by its gRPC endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer

from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

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
