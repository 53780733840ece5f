"""An idempotent librdkafka producer keeps its promise across a leader SIGKILLed under it.

Three brokers, a topic with 3 replicas and min.insync.replicas=2; librdkafka (enable.idempotence, acks=all)
sends numbered records while the leader of partition 0 is killed. The producer finds the new leaders
(NOT_LEADER_OR_FOLLOWER, metadata refresh) and retries its in-flight batches with their sequences; the new
leader knows those sequences from the replicated batches, so a batch the old leader had appended is answered
as a duplicate with its original offset, not written twice. Afterwards every acknowledged record is in the
log exactly once, at the offset its acknowledgement named, and no record is there twice. A librdkafka
consumer reading the partitions while the leader dies (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, a
metadata refresh, then the new leader) is handed every record of the log once, in offset order.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = pytest.mark.integration

TIMEOUT_S = 90.0
TOPIC = "numbered"
PARTITIONS = 3
RECORDS = 3000
RECORDS_BEFORE_KILL = 1000
SEND_PAUSE_EVERY = 100  # records between short pauses, so the kill lands while batches are in flight


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    properties = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000"}
    with KafkaCluster(tmp_path_factory.mktemp("kafka-idempotence"), brokers=3, broker_properties=properties) as kafka:
        kafka.start()
        kafka.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        yield kafka


class _Acks:
    """What librdkafka acknowledged: value -> (partition, offset); and what it gave up on."""

    def __init__(self) -> None:
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def on_delivery(self, err: Any, message: Any) -> None:
        with self.lock:
            if err is not None:
                self.failed.append(f"{message.value()!r}: {err}")
            else:
                self.acked[message.value()] = (message.partition(), message.offset())


class _TailingConsumer(threading.Thread):
    """A librdkafka consumer (assign, no group) reading every partition from offset 0 until told the ends."""

    def __init__(self, cluster: KafkaCluster) -> None:
        super().__init__(daemon=True)
        self.bootstrap = cluster.kafka_bootstrap_servers
        self.seen: list[tuple[int, int, bytes]] = []
        self.ends: dict[int, int] | None = None  # set by the test once the producer is done
        self.errors: list[str] = []

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "unused-tailing",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 2 * TIMEOUT_S
            while time.monotonic() < deadline and not self._done():
                for message in consumer.consume(500, timeout=0.2):
                    if message.error() is not None:  # a broker going away is reported here, then retried
                        self.errors.append(str(message.error()))
                    else:
                        self.seen.append((message.partition(), message.offset(), message.value()))
        finally:
            consumer.close()

    def _done(self) -> bool:
        ends = self.ends
        if ends is None:
            return False
        read = Counter(partition for partition, _, _ in self.seen)
        return all(read[p] >= end for p, end in ends.items())


def test_a_leader_killed_under_an_idempotent_producer_loses_and_duplicates_nothing(cluster: KafkaCluster) -> None:
    tailing = _TailingConsumer(cluster)
    tailing.start()
    acks = _Acks()
    producer = Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
        }
    )
    victim = cluster.partition_state(TOPIC, 0).leader
    for i in range(RECORDS):
        if i == RECORDS_BEFORE_KILL:
            cluster.kill_broker(victim)
        producer.produce(TOPIC, value=b"%06d" % i, key=b"%d" % (i % 17), on_delivery=acks.on_delivery)
        if i % SEND_PAUSE_EVERY == 0:
            producer.poll(0.05)
    assert producer.flush(TIMEOUT_S) == 0, "librdkafka still had records in flight"
    assert acks.failed == [], f"librdkafka gave up on {len(acks.failed)} records: {acks.failed[:3]}"
    assert cluster.partition_state(TOPIC, 0).leader != victim

    in_log = _read_everything(cluster)
    counts = Counter(value for value, _ in in_log.values())
    assert [v for v, n in counts.items() if n > 1] == [], "records written twice"
    where = {value: position for position, (value, _) in in_log.items()}
    missing = [v for v in acks.acked if v not in where]
    assert missing == [], f"{len(missing)} acknowledged records are not in the log"
    moved = [v for v, position in acks.acked.items() if where[v] != position]
    assert moved == [], f"{len(moved)} records are not at the offset their acknowledgement named"
    assert len(acks.acked) == RECORDS

    tailing.ends = {p: sum(1 for q, _ in in_log if q == p) for p in range(PARTITIONS)}
    tailing.join(2 * TIMEOUT_S)
    assert not tailing.is_alive(), "the tailing consumer did not reach the end of every partition"
    for p in range(PARTITIONS):
        read = [(offset, value) for q, offset, value in tailing.seen if q == p]
        assert read == sorted((o, v) for (q, o), (v, _) in in_log.items() if q == p), f"partition {p} read differently"


def _read_everything(cluster: KafkaCluster) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """(partition, offset) -> (value, key) for every record up to each partition's high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": "unused-idempotence",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        seen: dict[tuple[int, int], tuple[bytes, bytes]] = {}

        def read_all() -> bool:
            for message in consumer.consume(500, timeout=1.0):
                assert message.error() is None, message.error()
                seen[(message.partition(), message.offset())] = (message.value(), message.key())
            return len(seen) >= sum(ends.values())

        wait_until(read_all, TIMEOUT_S, interval_s=0.01, message="the consumer did not read every partition to its end")
        return seen
    finally:
        consumer.close()
