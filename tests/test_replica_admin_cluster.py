"""The SDK's records deletion, leader election, KIP-455 reassignment and offsets_for_times on real processes.

Three brokers on a real quorum (tests/kafka_harness.py); the SDK talks gRPC to them. What a user checks:
after delete_records a consumer from the beginning starts at the new low watermark and the followers' logs
start there too; a reassignment held in progress (its new replica throttled to 1 byte/s) is listed
with its adding replica and, once cancelled, the partition is back on its original replicas; a preferred
election brings leadership back to the preferred replica and answers ELECTION_NOT_NEEDED when it already has it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from client import Admin, Consumer, Producer, TopicPartition
from client.kafka.errors import (
    ElectionNotNeededError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    OffsetOutOfRangeError,
)
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.reassignment_hold import remove_throttle, set_follower_rates, throttle_new_replica

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
BROKER_PROPERTIES = {"replica.lag.time.max.ms": "3000", "log.cleaner.enable": "false"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> KafkaCluster:
    with KafkaCluster(Path(tmp_path_factory.mktemp("replica-admin")), 3, BROKER_PROPERTIES) as running:
        running.start()
        set_follower_rates(running)  # binds only the replicas a test lists: see tests/reassignment_hold.py
        yield running


def produce(cluster: KafkaCluster, topic: str, count: int, partition: int = 0) -> list[int]:
    """Timestamps (ms) of `count` records produced with acks=all, one ms apart."""
    start_ms = int(time.time() * 1000) - count
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=1) as producer:
        for i in range(count):
            producer.send(topic, value=b"v%d" % i, partition=partition, timestamp_ms=start_ms + i)
        producer.flush()
    return [start_ms + i for i in range(count)]


def produce_batches(cluster: KafkaCluster, topic: str, count: int) -> None:
    """`count` records in `count` batches (each flushed alone) to partition 0."""
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=1) as producer:
        for i in range(count):
            producer.send(topic, value=b"b%d" % i, partition=0)
            producer.flush()


def test_delete_records_moves_the_low_watermark_on_every_replica(cluster: KafkaCluster) -> None:
    cluster.create_topic("deleted", partitions=1, replication_factor=3)
    produce(cluster, "deleted", 30)
    tp = TopicPartition("deleted", 0)
    with Admin(cluster.bootstrap_servers) as admin:
        assert admin.delete_records({tp: 10}) == {tp: {"low_watermark": 10}}
        with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 30"):
            admin.delete_records({tp: 31})
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        assert consumer.beginning_offsets([tp]) == {tp: 10}
        consumer.assign([tp])
        offsets: list[int] = []
        wait_until(lambda: offsets.extend(r.offset for rs in consumer.poll(200).values() for r in rs) or
                   len(offsets) >= 20, TIMEOUT_S, message="the consumer did not read the 20 records left")  # fmt: skip
        assert offsets == list(range(10, 30))
    # The followers follow the leader's log start offset through their fetches: after the leader dies, the new
    # leader answers the same low watermark.
    leader = cluster.partition_state("deleted", 0).leader
    cluster.kill_broker(leader)
    try:
        wait_until(lambda: cluster.partition_state("deleted", 0).leader not in (-1, leader), TIMEOUT_S)
        with Consumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
            assert wait_until(lambda: _beginning(consumer, tp) == 10, TIMEOUT_S, message="new leader's start")
    finally:
        cluster.start_broker(leader)


def _beginning(consumer: Consumer, tp: TopicPartition) -> int | None:
    try:
        return consumer.beginning_offsets([tp])[tp]
    except Exception:  # the new leader is still being elected: ask again
        return None


def test_offsets_for_times(cluster: KafkaCluster) -> None:
    cluster.create_topic("timed", partitions=1, replication_factor=1)
    stamps = produce(cluster, "timed", 5)
    tp = TopicPartition("timed", 0)
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
        found = consumer.offsets_for_times({tp: stamps[2]})
        assert (found[tp].offset, found[tp].timestamp) == (2, stamps[2])
        assert consumer.offsets_for_times({tp: stamps[-1] + 60_000}) == {tp: None}


def test_reassignment_listed_then_cancelled_back_to_the_original_replicas(cluster: KafkaCluster) -> None:
    cluster.create_topic("moving", partitions=1, replication_factor=1)
    original = cluster.assignment("moving")[0]
    spare = next(b for b in cluster.broker_ids if b not in original)
    tp = TopicPartition("moving", 0)
    produce_batches(cluster, "moving", 3)
    throttle_new_replica(cluster, tp, spare)  # the new replica cannot catch up: the reassignment stays running
    try:
        with Admin(cluster.bootstrap_servers) as admin:
            with pytest.raises(NoReassignmentInProgressError):
                _raise(admin.alter_partition_reassignments({tp: None})[tp])
            assert isinstance(admin.alter_partition_reassignments({tp: []})[tp], InvalidReplicaAssignmentError)
            assert admin.alter_partition_reassignments({tp: [*original, spare]}) == {tp: None}
            ongoing = admin.list_partition_reassignments()
            assert ongoing == {
                tp: {"replicas": [*original, spare], "adding_replicas": [spare], "removing_replicas": []}
            }
            assert cluster.assignment("moving")[0] == (*original, spare)
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            wait_until(lambda: not admin.list_partition_reassignments([tp]), TIMEOUT_S, message="still listed")
        wait_until(lambda: cluster.assignment("moving")[0] == original, TIMEOUT_S, message="not back to original")
        assert cluster.partition_state("moving", 0).leader == original[0]
    finally:
        remove_throttle(cluster, tp)


def test_preferred_leader_election(cluster: KafkaCluster) -> None:
    cluster.create_topic("elected", partitions=1, replication_factor=3)
    preferred = cluster.assignment("elected")[0][0]
    tp = TopicPartition("elected", 0)
    with Admin(cluster.bootstrap_servers) as admin:
        result = admin.perform_leader_election(0, {"elected": [0]})
        assert isinstance(result[tp], ElectionNotNeededError)
        cluster.kill_broker(preferred)
        wait_until(lambda: cluster.partition_state("elected", 0).leader not in (-1, preferred), TIMEOUT_S)
        cluster.start_broker(preferred)
        wait_until(lambda: preferred in cluster.partition_state("elected", 0).isr, TIMEOUT_S, message="not in ISR")
        assert admin.perform_leader_election(0, [tp]) == {tp: None}
        assert cluster.partition_state("elected", 0).leader == preferred
        # Over every partition only the elected or failed ones are answered (earlier tests moved leaders too);
        # once all are led by their preferred replicas, none.
        assert all(error is None for error in admin.perform_leader_election(0, None).values())
        assert admin.perform_leader_election(0, None) == {}


def _raise(error: Exception | None) -> None:
    if error is not None:
        raise error
