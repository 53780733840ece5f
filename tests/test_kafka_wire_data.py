"""Kafka's own clients produce and consume through the brokers' Kafka listeners: a 3-broker cluster of real
processes, topics with 3 replicas.

What a user checks: records written by librdkafka (confluent-kafka), kafka-python and aiokafka come back,
to any of them and to our SDK (which reads the same logs over gRPC), at the same offsets with the same keys,
values, headers and timestamps; ListOffsets by timestamp finds the first record at or after a time; acks=0
writes without an answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from client import Consumer as SdkConsumer
from client.kafka.structs import TopicPartition
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
RECORDS = 50
BASE_TIMESTAMP_MS = 1_700_000_000_000  # fixed CreateTimes, one millisecond apart, so lookups by time are exact


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-wire-data"), brokers=3) as kafka:
        kafka.start()
        yield kafka


# A record as every library hands it back: (offset, key, value, headers as a tuple of (str, bytes), timestamp).
Seen = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]


def _expected(prefix: str, count: int = RECORDS) -> list[Seen]:
    return [
        (
            i,
            f"{prefix}-key-{i}".encode(),
            f"{prefix}-value-{i}".encode() * (1 + i % 7),
            (("n", str(i).encode()), ("lib", prefix.encode())),
            BASE_TIMESTAMP_MS + i,
        )
        for i in range(count)
    ]


# ---------------------------------------------------------------- producers


def _produce_librdkafka(cluster: KafkaCluster, topic: str, records: list[Seen], **config: Any) -> list[int]:
    producer = RdProducer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            **config,
        }
    )
    offsets: list[int] = []
    failures: list[str] = []

    def delivered(err: Any, message: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            offsets.append(message.offset())

    for _, key, value, headers, timestamp in records:
        producer.produce(topic, value=value, key=key, headers=list(headers), timestamp=timestamp, on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0, "librdkafka did not deliver every record in time"
    assert failures == []
    return sorted(offsets)


def _produce_kafka_python(cluster: KafkaCluster, topic: str, records: list[Seen]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all", linger_ms=5)
    try:
        futures = [
            producer.send(topic, value=value, key=key, headers=list(headers), timestamp_ms=timestamp)
            for _, key, value, headers, timestamp in records
        ]
        producer.flush(TIMEOUT_S)
        return sorted(f.get(TIMEOUT_S).offset for f in futures)
    finally:
        producer.close(TIMEOUT_S)


def _produce_aiokafka(cluster: KafkaCluster, topic: str, records: list[Seen]) -> list[int]:
    async def run() -> list[int]:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            sent = [
                await producer.send(topic, value=value, key=key, headers=list(headers), timestamp_ms=timestamp)
                for _, key, value, headers, timestamp in records
            ]
            return sorted([(await s).offset for s in sent])
        finally:
            await producer.stop()

    return asyncio.run(run())


# ---------------------------------------------------------------- consumers (assign, no group)


def _read_librdkafka(cluster: KafkaCluster, topic: str, count: int, start: int = 0) -> list[Seen]:
    consumer = RdConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": f"unused-{topic}",  # librdkafka wants one; assign() with no commits never joins it
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    seen: list[Seen] = []
    try:
        consumer.assign([RdTopicPartition(topic, 0, start)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen.append(
                (
                    message.offset(),
                    message.key(),
                    message.value(),
                    tuple((k, v) for k, v in message.headers() or []),
                    message.timestamp()[1],
                )
            )
    finally:
        consumer.close()
    return seen


def _read_kafka_python(cluster: KafkaCluster, topic: str, count: int) -> list[Seen]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, enable_auto_commit=False)
    seen: list[Seen] = []
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                seen += [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
    finally:
        consumer.close()
    return seen


def _read_aiokafka(cluster: KafkaCluster, topic: str, count: int) -> list[Seen]:
    async def run() -> list[Seen]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, enable_auto_commit=False)
        await consumer.start()
        seen: list[Seen] = []
        try:
            from aiokafka import TopicPartition as AioTopicPartition

            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            deadline = time.monotonic() + TIMEOUT_S
            while len(seen) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    seen += [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


def _read_sdk(cluster: KafkaCluster, topic: str, count: int) -> list[Seen]:
    seen: list[Seen] = []
    with SdkConsumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                seen += [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
    return seen


READERS = {
    "librdkafka": _read_librdkafka,
    "kafka-python": _read_kafka_python,
    "aiokafka": _read_aiokafka,
    "sdk": _read_sdk,
}
WRITERS = {
    "librdkafka": _produce_librdkafka,
    "kafka-python": _produce_kafka_python,
    "aiokafka": _produce_aiokafka,
}


@pytest.mark.parametrize("writer", WRITERS)
def test_records_written_by_one_library_are_read_by_every_library_and_the_sdk(
    cluster: KafkaCluster, writer: str
) -> None:
    topic = f"written-by-{writer}"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    records = _expected(writer)
    assert WRITERS[writer](cluster, topic, records) == list(range(RECORDS))
    for reader, read in READERS.items():
        assert read(cluster, topic, RECORDS) == records, f"{reader} read back other records than {writer} wrote"


def test_offsets_for_times_finds_the_first_record_at_or_after_a_time(cluster: KafkaCluster) -> None:
    topic = "by-time"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    _produce_librdkafka(cluster, topic, _expected("t"))
    consumer = RdConsumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "unused-by-time"})
    try:
        asked = [RdTopicPartition(topic, 0, BASE_TIMESTAMP_MS + t) for t in (0, 17, RECORDS + 5)]
        found = [consumer.offsets_for_times([tp], timeout=TIMEOUT_S)[0].offset for tp in asked]
        assert found == [0, 17, -1]  # -1: no record that late (librdkafka's OFFSET_END)
        low, high = consumer.get_watermark_offsets(RdTopicPartition(topic, 0), timeout=TIMEOUT_S)
        assert (low, high) == (0, RECORDS)
    finally:
        consumer.close()


def test_acks_0_records_are_written_without_an_answer(cluster: KafkaCluster) -> None:
    topic = "acks-zero"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    producer = RdProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": 0, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = RdConsumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "unused-acks-zero"})
    try:

        def all_there() -> bool:
            return consumer.get_watermark_offsets(RdTopicPartition(topic, 0), timeout=10)[1] == RECORDS

        wait_until(all_there, TIMEOUT_S, interval_s=0.2, message="the acks=0 records did not all arrive")
    finally:
        consumer.close()
    assert [r[2] for r in _read_kafka_python(cluster, topic, RECORDS)] == [b"%d" % i for i in range(RECORDS)]
    # No answer is not a failure: the broker neither wrote a response nor dropped the connection for these.
    failed = [e for b in cluster.broker_ids for e in cluster.log_events(b, "kafka_request_failed")]
    assert [e for e in failed if e.get("api") == "Produce"] == []


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_pass_through_as_written(cluster: KafkaCluster, codec: str) -> None:
    # The record path never opens a batch: what librdkafka compressed is stored and fetched as it came.
    topic = f"compressed-{codec}"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    records = _expected(codec)
    assert _produce_librdkafka(cluster, topic, records, **{"compression.type": codec}) == list(range(RECORDS))
    assert _read_librdkafka(cluster, topic, RECORDS) == records
