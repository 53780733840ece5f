"""Codecs and LogAppendTime on real broker processes: what a user of the SDK and the Spark source sees.

One quorum and one broker for the module (each test has its own topic). The
stored codec is checked in the broker's own segment files, the records
through the SDK Consumer and through the Spark source's executor read path
(`spark_connector.fetch_reader.read_range`, the function Spark's Python
workers run; the JVM session itself is exercised in tests/test_spark_source.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from client import Consumer, Producer  # noqa: E402
from client.kafka.records import iter_batches  # noqa: E402
from spark_connector.fetch_reader import read_range  # noqa: E402
from spark_connector.planning import OffsetRange, ReadSettings  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import REPO_ROOT, subprocess_env  # noqa: E402

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
COUNT = 600
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("codecs"), brokers=1) as kafka:
        kafka.start()
        yield kafka


def _produce(cluster: KafkaCluster, topic: str, compression_type: str | None, **send: object) -> list:
    with Producer(cluster.bootstrap_servers, acks="all", compression_type=compression_type, linger_ms=20) as producer:
        futures = [
            producer.send(topic, b"value %d " % i + b"z" * (i % 97), key=b"k%d" % i, headers=[("n", b"%d" % i)], **send)
            for i in range(COUNT)
        ]
        producer.flush(TIMEOUT_S)
        return [f.get(0) for f in futures]


def _consume(cluster: KafkaCluster, topic: str) -> list:
    with Consumer(topic, bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                  consumer_timeout_ms=5000) as consumer:  # fmt: skip
        got = []
        for record in consumer:
            got.append(record)
            if len(got) == COUNT:
                break
    return got


def _spark_rows(cluster: KafkaCluster, topic: str) -> list[dict]:
    settings = ReadSettings(cluster.bootstrap_servers, True, True, 30_000, 1 << 20)
    rows: list[dict] = []
    for batch in read_range(OffsetRange(topic, 0, 0, COUNT, settings)):
        rows.extend(batch.to_pylist())
    return rows


def _stored_codecs(cluster: KafkaCluster, topic: str) -> set[int]:
    segments = sorted((cluster.data_dir(1) / f"{topic}-0").glob("*.log"))
    assert segments, f"no segment files for {topic}"
    return {header.compression for path in segments for header, _ in iter_batches(path.read_bytes())}


@pytest.mark.parametrize("codec", CODECS)
def test_sdk_producer_codec_is_stored_and_read_by_sdk_and_spark(cluster: KafkaCluster, codec: str) -> None:
    topic = f"codec-{codec}"
    cluster.create_topic(topic)
    sent = _produce(cluster, topic, codec)
    assert [m.offset for m in sent] == list(range(COUNT))
    assert _stored_codecs(cluster, topic) == {CODECS.index(codec)}, "compression.type=producer keeps the codec"
    expected = [(b"k%d" % i, b"value %d " % i + b"z" * (i % 97)) for i in range(COUNT)]
    records = _consume(cluster, topic)
    assert [(r.key, r.value) for r in records] == expected
    assert [r.headers for r in records] == [(("n", b"%d" % i),) for i in range(COUNT)]
    rows = _spark_rows(cluster, topic)
    assert [(r["key"], r["value"]) for r in rows] == expected
    assert [r["offset"] for r in rows] == list(range(COUNT))


def test_topic_compression_type_recompresses_what_the_producer_sent(cluster: KafkaCluster) -> None:
    cluster.create_topic("to-zstd", compression_type="zstd")
    _produce(cluster, "to-zstd", None)  # uncompressed batches
    assert _stored_codecs(cluster, "to-zstd") == {4}
    assert [r.value for r in _consume(cluster, "to-zstd")] == [b"value %d " % i + b"z" * (i % 97) for i in range(COUNT)]


def test_log_append_time_replaces_the_producers_timestamps(cluster: KafkaCluster) -> None:
    cluster.create_topic("appended", message_timestamp_type="LogAppendTime")
    before_ms = time.time_ns() // 1_000_000
    sent = _produce(cluster, "appended", "lz4", timestamp_ms=1_000_000_000_000)  # 2001: far in the past
    after_ms = time.time_ns() // 1_000_000
    assert all(before_ms <= m.timestamp <= after_ms for m in sent), "the produce response carries log_append_time"
    records = _consume(cluster, "appended")
    assert {r.timestamp_type for r in records} == {1}
    by_offset = {m.offset: m.timestamp for m in sent}
    assert all(r.timestamp == by_offset[r.offset] for r in records), "each record reports its batch's append time"
    rows = _spark_rows(cluster, "appended")
    assert {r["timestampType"] for r in rows} == {1}
    assert [r["timestamp"].timestamp() * 1000 for r in rows] == pytest.approx([by_offset[i] for i in range(COUNT)])


def _zkraft(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkraft", *args], cwd=REPO_ROOT, env=subprocess_env(), input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize(("flags", "codec"), [(["--compression-codec", "lz4"], 3), (["--compression-codec"], 1)])
def test_console_producer_compression_codec(cluster: KafkaCluster, flags: list[str], codec: int) -> None:
    topic = f"console-{codec}"
    cluster.create_topic(topic)
    lines = "".join(f"line {i}\n" for i in range(50))
    done = _zkraft("console-producer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", topic, *flags,
                   stdin=lines)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _stored_codecs(cluster, topic) == {codec}, "alone, --compression-codec means gzip, as in Kafka"


def test_producer_perf_test_compression_type(cluster: KafkaCluster) -> None:
    cluster.create_topic("perf-zstd")
    done = _zkraft("producer-perf-test", "--topic", "perf-zstd", "--num-records", "2000", "--record-size", "100",
                   "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}",
                   "compression.type=zstd", "acks=all")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2000 records sent" in done.stdout
    assert _stored_codecs(cluster, "perf-zstd") == {4}
