"""DeleteRecords, ElectLeaders and KIP-455 reassignment from Kafka's own clients, through the Kafka listeners.

A 3-broker cluster of real processes (tests/kafka_harness.py). The records are written with the SDK; what
librdkafka (confluent-kafka's AdminClient), kafka-python's KafkaAdminClient and aiokafka do with them is what a Kafka
user checks: records deleted below an offset are gone for every consumer, a preferred election answers
ELECTION_NOT_NEEDED when the preferred replica already leads, and a reassignment listed in progress can be
cancelled back to its original replicas.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kio.index import load_request_schema

from broker.kafka_api.entities import build
from client import Consumer, Producer, TopicPartition
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.reassignment_hold import remove_throttle, set_follower_rates, throttle_new_replica
from tests.test_kafka_wire_frames import read_response, request_frame

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
ELECTION_NOT_NEEDED = 84
NOT_CONTROLLER = 41
ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
BROKER_PROPERTIES = {"replica.lag.time.max.ms": "3000", "log.cleaner.enable": "false"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("wire-replica-admin"), 3, BROKER_PROPERTIES) as running:
        running.start()
        set_follower_rates(running)  # binds only the replicas a test lists: see tests/reassignment_hold.py
        yield running


@pytest.fixture
def kafka_python(cluster: KafkaCluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
    try:
        yield admin
    finally:
        admin.close()


def produce(cluster: KafkaCluster, topic: str, partition: int, count: int) -> None:
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=1) as producer:
        for i in range(count):
            producer.send(topic, value=b"r%d" % i, partition=partition)
        producer.flush()


def produce_batches(cluster: KafkaCluster, topic: str, count: int) -> None:
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=1) as producer:
        for i in range(count):
            producer.send(topic, value=b"b%d" % i, partition=0)
            producer.flush()


def beginning(cluster: KafkaCluster, tp: TopicPartition) -> int:
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
        return consumer.beginning_offsets([tp])[tp]


def test_delete_records_from_kafka_python_and_librdkafka(cluster: KafkaCluster, kafka_python: KafkaAdminClient) -> None:
    cluster.create_topic("trimmed", partitions=2, replication_factor=3)
    produce(cluster, "trimmed", 0, 20)
    produce(cluster, "trimmed", 1, 20)

    result = kafka_python.delete_records({KpTopicPartition("trimmed", 0): 7})
    assert [(tp.partition, meta["low_watermark"]) for tp, meta in result.items()] == [(0, 7)]
    assert beginning(cluster, TopicPartition("trimmed", 0)) == 7

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    futures = admin.delete_records([CkTopicPartition("trimmed", 1, 12)])
    [deleted] = [future.result(timeout=30) for future in futures.values()]
    assert deleted.low_watermark == 12
    assert beginning(cluster, TopicPartition("trimmed", 1)) == 12
    # Above the high watermark: OFFSET_OUT_OF_RANGE, nothing deleted.
    futures = admin.delete_records([CkTopicPartition("trimmed", 1, 21)])
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE|out of range"):
        [future.result(timeout=30) for future in futures.values()]
    assert beginning(cluster, TopicPartition("trimmed", 1)) == 12


def test_delete_records_from_aiokafka(cluster: KafkaCluster) -> None:
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition

    cluster.create_topic("trimmed-aio", partitions=1, replication_factor=3)
    produce(cluster, "trimmed-aio", 0, 10)

    async def delete() -> dict:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
        await admin.start()
        try:
            return await admin.delete_records({AioTopicPartition("trimmed-aio", 0): RecordsToDelete(before_offset=3)})
        finally:
            await admin.close()

    assert asyncio.run(delete()) == {AioTopicPartition("trimmed-aio", 0): 3}
    assert beginning(cluster, TopicPartition("trimmed-aio", 0)) == 3


def test_preferred_election_from_both_clients(cluster: KafkaCluster, kafka_python: KafkaAdminClient) -> None:
    cluster.create_topic("chosen", partitions=1, replication_factor=3)
    response = kafka_python.elect_leaders(0, {"chosen": [0]})
    codes = [p.error_code for r in response.replica_election_results for p in r.partition_result]
    assert codes == [ELECTION_NOT_NEEDED]

    preferred = cluster.assignment("chosen")[0][0]
    cluster.kill_broker(preferred)
    wait_until(lambda: cluster.partition_state("chosen", 0).leader not in (-1, preferred), TIMEOUT_S)
    cluster.start_broker(preferred)
    wait_until(lambda: preferred in cluster.partition_state("chosen", 0).isr, TIMEOUT_S, message="not in ISR")

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    results = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("chosen", 0)]).result(timeout=30)
    assert [(tp.topic, tp.partition, error) for tp, error in results.items()] == [("chosen", 0, None)]
    assert cluster.partition_state("chosen", 0).leader == preferred


def test_reassignment_listed_and_cancelled_from_kafka_python(
    cluster: KafkaCluster, kafka_python: KafkaAdminClient
) -> None:
    cluster.create_topic("shifted", partitions=1, replication_factor=1)
    original = cluster.assignment("shifted")[0]
    spare = next(b for b in cluster.broker_ids if b not in original)
    tp = KpTopicPartition("shifted", 0)
    produce_batches(cluster, "shifted", 3)
    throttle_new_replica(cluster, TopicPartition("shifted", 0), spare)  # held in progress until cancelled
    try:
        assert kafka_python.alter_partition_reassignments({tp: [*original, spare]}) == {tp: None}
        listed = kafka_python.list_partition_reassignments()
        assert listed == {tp: {"replicas": [*original, spare], "adding_replicas": [spare], "removing_replicas": []}}
        assert kafka_python.alter_partition_reassignments({tp: None}) == {tp: None}
        wait_until(lambda: not kafka_python.list_partition_reassignments(), TIMEOUT_S, message="still listed")
        wait_until(lambda: cluster.assignment("shifted")[0] == original, TIMEOUT_S, message="not reverted")
    finally:
        remove_throttle(cluster, TopicPartition("shifted", 0))
    # Nothing to cancel any more: NO_REASSIGNMENT_IN_PROGRESS for that partition.
    results = kafka_python.alter_partition_reassignments({tp: None})
    assert results[tp] is not None and results[tp].errno == 85


def test_controller_apis_on_another_broker_answer_not_controller(cluster: KafkaCluster) -> None:
    """Kafka's clients send these to the controller; sent elsewhere, each answers NOT_CONTROLLER (no hang)."""
    controller = cluster.controller_id()
    other = next(b for b in cluster.broker_ids if b != controller)
    host, port = cluster.kafka_address(other).rsplit(":", 1)
    requests = [
        (ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": None, "timeout": 10_000}),
        (ALTER_REASSIGNMENTS, 0, {"timeout": 10_000, "topics": ()}),
        (LIST_REASSIGNMENTS, 0, {"timeout": 10_000, "topics": None}),
    ]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for correlation_id, (api_key, version, fields) in enumerate(requests):
            body = build(load_request_schema(api_key, version), fields)
            sock.sendall(request_frame(api_key, version, correlation_id, body))
            answered_id, response = read_response(sock, api_key, version)
            assert (answered_id, int(response.error_code)) == (correlation_id, NOT_CONTROLLER)
