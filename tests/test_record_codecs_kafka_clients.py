"""Every codec written by one client library and read by the others, through the brokers' Kafka listener.

Writers: librdkafka (confluent-kafka: raw snappy, lz4frame LZ4, its own zstd
and gzip), our SDK (xerial snappy, Kafka's LZ4 frame) and kafka-python (xerial
snappy through python-snappy, python-lz4 frames, zstandard: the test extra
installs its optional codec libraries). Readers: the SDK, librdkafka, aiokafka
(all codecs through cramjam) and kafka-python. Every reader must see the same offsets, keys, values
and headers (and with LogAppendTime, the same append times); the broker's segment files must hold the writer's codec
(compression.type=producer), which also proves librdkafka did not quietly
fall back to uncompressed: it does so for a codec whose broker feature it does
not detect in ApiVersions (LZ4 needs FindCoordinator advertised, zstd Produce
v7 and Fetch v10). One quorum and one broker of real processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from client import Consumer, Producer
from client.kafka.records import iter_batches
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
COUNT = 500
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("codec-clients"), brokers=1) as kafka:
        kafka.start()
        yield kafka


def _value(i: int) -> bytes:
    return b"record %d " % i + b"abc" * (i % 50)  # compressible, so librdkafka does compress


def _expected() -> list[Row]:
    return [(i, b"k%d" % i, _value(i), (("n", b"%d" % i),)) for i in range(COUNT)]


def _stored_codecs(cluster: KafkaCluster, topic: str) -> set[int]:
    segments = sorted((cluster.data_dir(1) / f"{topic}-0").glob("*.log"))
    return {header.compression for path in segments for header, _ in iter_batches(path.read_bytes())}


# ---------------------------------------------------------------- writers


def _librdkafka_produce(cluster: KafkaCluster, topic: str, codec: str) -> None:
    producer = RdProducer({
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "compression.type": codec,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
    })  # fmt: skip
    errors: list[object] = []
    for i in range(COUNT):
        producer.produce(topic, _value(i), b"k%d" % i, partition=0, headers=[("n", b"%d" % i)],
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))  # fmt: skip
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "librdkafka did not deliver everything in time"
    assert errors == []


def _sdk_produce(cluster: KafkaCluster, topic: str, codec: str) -> None:
    with Producer(cluster.kafka_bootstrap_servers, acks="all", compression_type=codec, linger_ms=20) as producer:
        for i in range(COUNT):
            producer.send(topic, _value(i), key=b"k%d" % i, partition=0, headers=[("n", b"%d" % i)])
        producer.flush(TIMEOUT_S)


def _kafka_python_produce(cluster: KafkaCluster, topic: str, codec: str) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all", linger_ms=20,
                             compression_type=None if codec == "none" else codec)  # fmt: skip
    try:
        futures = [
            producer.send(topic, _value(i), key=b"k%d" % i, partition=0, headers=[("n", b"%d" % i)])
            for i in range(COUNT)
        ]
        producer.flush(TIMEOUT_S)
        assert all(f.get(timeout=TIMEOUT_S).offset == i for i, f in enumerate(futures))
    finally:
        producer.close(TIMEOUT_S)


# ---------------------------------------------------------------- readers


def _sdk_read(cluster: KafkaCluster, topic: str) -> list[Row]:
    with Consumer(topic, bootstrap_servers=cluster.kafka_bootstrap_servers, auto_offset_reset="earliest",
                  consumer_timeout_ms=5000) as consumer:  # fmt: skip
        rows = []
        for record in consumer:
            rows.append((record.offset, record.key, record.value, tuple(record.headers)))
            if len(rows) == COUNT:
                break
    return rows


def _librdkafka_read(cluster: KafkaCluster, topic: str) -> list[Row]:
    consumer = RdConsumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": f"rd-{topic}",
                           "enable.auto.commit": False})  # fmt: skip
    consumer.assign([RdTopicPartition(topic, 0, 0)])
    rows: list[Row] = []
    try:

        def done() -> bool:
            for message in consumer.consume(COUNT, timeout=1.0):
                assert message.error() is None, message.error()
                headers = tuple((k, v) for k, v in message.headers() or [])
                rows.append((message.offset(), message.key(), message.value(), headers))
            return len(rows) >= COUNT

        wait_until(done, TIMEOUT_S, interval_s=0.01, message=f"librdkafka did not read {COUNT} records")
    finally:
        consumer.close()
    return rows


def _aiokafka_read(cluster: KafkaCluster, topic: str) -> list[Row]:
    async def read() -> list[Row]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            rows: list[Row] = []
            async with asyncio.timeout(TIMEOUT_S):
                while len(rows) < COUNT:
                    batches = await consumer.getmany(tp, timeout_ms=1000)
                    for message in batches.get(tp, []):
                        rows.append((message.offset, message.key, message.value, tuple(message.headers)))
            return rows
        finally:
            await consumer.stop()

    return asyncio.run(read())


def _kafka_python_read(cluster: KafkaCluster, topic: str) -> list[Row]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=5000)  # fmt: skip
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        rows: list[Row] = []
        for message in consumer:
            rows.append((message.offset, message.key, message.value, tuple(message.headers)))
            if len(rows) == COUNT:
                break
        return rows
    finally:
        consumer.close()


def _read_by_everyone(cluster: KafkaCluster, topic: str, codec: str) -> None:
    expected = _expected()
    assert _sdk_read(cluster, topic) == expected, "SDK"
    assert _librdkafka_read(cluster, topic)[:COUNT] == expected, "librdkafka"
    assert _aiokafka_read(cluster, topic)[:COUNT] == expected, "aiokafka"
    assert _kafka_python_read(cluster, topic) == expected, "kafka-python"


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_writes_each_codec_and_every_client_reads_it(cluster: KafkaCluster, codec: str) -> None:
    topic = f"rd-{codec}"
    cluster.create_topic(topic)
    _librdkafka_produce(cluster, topic, codec)
    assert _stored_codecs(cluster, topic) == {CODECS.index(codec)}
    _read_by_everyone(cluster, topic, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_the_sdk_writes_each_codec_and_every_client_reads_it(cluster: KafkaCluster, codec: str) -> None:
    topic = f"sdk-{codec}"
    cluster.create_topic(topic)
    _sdk_produce(cluster, topic, codec)
    assert _stored_codecs(cluster, topic) == {CODECS.index(codec)}
    _read_by_everyone(cluster, topic, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_writes_each_codec_and_every_client_reads_it(cluster: KafkaCluster, codec: str) -> None:
    topic = f"kp-{codec}"
    cluster.create_topic(topic)
    _kafka_python_produce(cluster, topic, codec)
    assert _stored_codecs(cluster, topic) == {CODECS.index(codec)}
    _read_by_everyone(cluster, topic, codec)


def test_topic_compression_type_recompresses_librdkafka_batches(cluster: KafkaCluster) -> None:
    cluster.create_topic("rd-to-gzip", compression_type="gzip")
    _librdkafka_produce(cluster, "rd-to-gzip", "lz4")
    assert _stored_codecs(cluster, "rd-to-gzip") == {1}
    _read_by_everyone(cluster, "rd-to-gzip", "gzip")


def test_log_append_time_reaches_librdkafka_aiokafka_and_the_sdk(cluster: KafkaCluster) -> None:
    topic = "rd-appended"
    cluster.create_topic(topic, message_timestamp_type="LogAppendTime")
    producer = RdProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "compression.type": "zstd",
                           "acks": "all", "linger.ms": 20})  # fmt: skip
    reports: dict[int, tuple[int, int]] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        reports[msg.offset()] = msg.timestamp()  # type: ignore[attr-defined]

    before_ms = time.time_ns() // 1_000_000
    for i in range(COUNT):  # timestamp: 2001, which the broker's append time replaces
        producer.produce(topic, _value(i), b"k%d" % i, partition=0, timestamp=1_000_000_000_000, on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    after_ms = time.time_ns() // 1_000_000
    assert len(reports) == COUNT
    assert {kind for kind, _ in reports.values()} == {TIMESTAMP_LOG_APPEND_TIME}, "delivery reports: LogAppendTime"
    assert all(before_ms <= ts <= after_ms for _, ts in reports.values())
    consumer = RdConsumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "rd-appended",
                           "enable.auto.commit": False})  # fmt: skip
    consumer.assign([RdTopicPartition(topic, 0, 0)])
    seen: dict[int, tuple[int, int]] = {}
    try:

        def done() -> bool:
            for message in consumer.consume(COUNT, timeout=1.0):
                assert message.error() is None, message.error()
                seen[message.offset()] = message.timestamp()
            return len(seen) >= COUNT

        wait_until(done, TIMEOUT_S, interval_s=0.01, message="librdkafka did not read the LogAppendTime topic")
    finally:
        consumer.close()
    assert seen == reports, "the consumer sees each record's append time, as the producer was told"
    with Consumer(topic, bootstrap_servers=cluster.kafka_bootstrap_servers, auto_offset_reset="earliest",
                  consumer_timeout_ms=5000) as sdk:  # fmt: skip
        records = [r for _, r in zip(range(COUNT), sdk, strict=False)]
    assert {r.offset: (r.timestamp_type, r.timestamp) for r in records} == {
        o: (1, ts) for o, (_, ts) in reports.items()
    }
