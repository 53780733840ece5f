"""Spark's own Kafka source and sink (`format("kafka")`, spark-sql-kafka-0-10) against zkraft's Kafka listeners.

Nothing of zkraft's on Spark's side: the jars are Spark's (tests/spark_kafka/pom.xml, resolved from Maven
Central once per checkout and put in spark.jars), `kafka.bootstrap.servers` is the cluster's Kafka bootstrap
list. Records are written by librdkafka with keys, headers and timestamps, so every column Spark returns is
checked against what was sent and the offsets the brokers acknowledged:

- batch reads (`spark.read`): subscribe with earliest..latest, assign with JSON starting/ending offsets,
  subscribePattern, startingTimestamp, includeHeaders, minPartitions;
- streaming reads (`spark.readStream`, trigger availableNow): earliest, resumed from a checkpoint after more
  records arrive, maxOffsetsPerTrigger splitting the backlog into micro-batches;
- writes: a DataFrame written with format("kafka") (zstd-compressed by Kafka's producer) read back by
  librdkafka, and a streaming write.

One SparkSession and one 3-broker cluster for the module (the session first: PySpark forks to launch its
JVM). The module skips with one line when java or mvn is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from tests import maven_jars  # noqa: E402
from tests.helpers import wait_until  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

BROKERS = 3
# A loaded 2-core machine can take most of a minute to start three brokers and a quorum.
CLUSTER_START_TIMEOUT_S = 180.0
PARTITIONS = 3
BASE_TS_MS = 1_700_000_000_000
QUERY_TIMEOUT_S = 240.0
FLUSH_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 60.0
CONSUME_POLL_S = 0.5

Row = tuple[str, int, int, bytes, bytes, int]  # topic, partition, offset, key, value, timestamp ms


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    reason = maven_jars.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    from tests.spark_kafka_session import spark_kafka_jars, start_spark_with_kafka

    session = start_spark_with_kafka("zkraft-spark-kafka-source-tests", spark_kafka_jars())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("kafka"), brokers=BROKERS) as kafka:
        kafka.start(timeout_s=CLUSTER_START_TIMEOUT_S)
        yield kafka


# --------------------------------------------------------------------------- helpers


def produce(cluster, topic: str, count: int, first: int = 0) -> list[Row]:
    """`count` records round robin over the partitions, acks=all, each with a header; the rows Spark must return
    for them (offsets as the brokers acknowledged them)."""
    acknowledged: list[Row] = []
    failures: list[str] = []

    def on_delivery(error, message) -> None:
        if error is not None:
            failures.append(str(error))
            return
        timestamp_ms = message.timestamp()[1]
        acknowledged.append(
            (topic, message.partition(), message.offset(), message.key(), message.value(), timestamp_ms)
        )

    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(
            topic, value=b"value-%06d" % i, key=b"key-%d" % i, partition=i % PARTITIONS,
            timestamp=BASE_TS_MS + i, headers=[("seq", b"%d" % i)], on_delivery=on_delivery,
        )  # fmt: skip
    assert producer.flush(FLUSH_TIMEOUT_S) == 0, "records left unacknowledged"
    assert not failures, failures
    return sorted(acknowledged)


def kafka_reader(spark, cluster, stream: bool = False, **options: str):
    reader = (spark.readStream if stream else spark.read).format("kafka")
    reader = reader.option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows_of(df) -> list[Row]:
    picked = df.selectExpr("topic", "partition", "offset", "key", "value", "unix_millis(timestamp)")
    return sorted((r[0], r[1], r[2], bytes(r[3]), bytes(r[4]), r[5]) for r in picked.collect())


def create_topic(cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=BROKERS)


def run_available_now(df, name: str, checkpoint: Path, **options: str):
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(checkpoint))
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"query {name} did not finish in {QUERY_TIMEOUT_S} s"
    assert query.exception() is None, query.exception()
    return query


# --------------------------------------------------------------------------- batch reads


def test_batch_read_subscribe_earliest_returns_every_record_with_its_offset(spark, cluster) -> None:
    topic = "spark-batch"
    create_topic(cluster, topic)
    sent = produce(cluster, topic, 300)
    df = kafka_reader(spark, cluster, subscribe=topic, startingOffsets="earliest", endingOffsets="latest")
    assert rows_of(df) == sent
    assert {row[0] for row in df.select("timestampType").collect()} == {0}  # CreateTime, as the producer set it


def test_batch_read_options_assign_offsets_pattern_timestamp_headers(spark, cluster) -> None:
    topic = "spark-options"
    create_topic(cluster, topic)
    sent = produce(cluster, topic, 90)  # 30 a partition, offsets 0..29

    assign = json.dumps({topic: [0, 2]})
    starting, ending = json.dumps({topic: {"0": 5, "2": -2}}), json.dumps({topic: {"0": 10, "2": 20}})
    ranged = kafka_reader(spark, cluster, assign=assign, startingOffsets=starting, endingOffsets=ending)
    assert rows_of(ranged) == [r for r in sent if (r[1] == 0 and 5 <= r[2] < 10) or (r[1] == 2 and r[2] < 20)]

    pattern = kafka_reader(spark, cluster, subscribePattern="spark-opt.*", startingOffsets="earliest")
    assert rows_of(pattern) == sent

    # Record i has timestamp BASE_TS_MS + i: from BASE_TS_MS + 60 on, the last third of every partition.
    since = kafka_reader(spark, cluster, subscribe=topic, startingTimestamp=str(BASE_TS_MS + 60))
    assert rows_of(since) == [r for r in sent if r[5] >= BASE_TS_MS + 60]

    headers = kafka_reader(spark, cluster, subscribe=topic, includeHeaders="true", minPartitions="6")
    assert headers.rdd.getNumPartitions() >= 6
    seen = {
        (row["partition"], row["offset"]): [(h["key"], bytes(h["value"])) for h in row["headers"]]
        for row in headers.select("partition", "offset", "headers").collect()
    }
    assert len(seen) == len(sent)
    for _topic, partition, offset, _key, value, _ts in sent:
        assert seen[(partition, offset)] == [("seq", value.removeprefix(b"value-").lstrip(b"0") or b"0")]


# --------------------------------------------------------------------------- streaming reads


def test_streaming_read_earliest_then_resumes_from_its_checkpoint(spark, cluster, tmp_path: Path) -> None:
    """Into Parquet files (the memory sink cannot restart from a checkpoint): the second run adds exactly the
    records that came after the first, none twice."""
    topic, output = "spark-stream", tmp_path / "rows"
    create_topic(cluster, topic)
    first = produce(cluster, topic, 150)
    df = kafka_reader(spark, cluster, stream=True, subscribe=topic, startingOffsets="earliest")

    def run_into_parquet() -> None:
        query = (
            df.writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"query did not finish in {QUERY_TIMEOUT_S} s"
        assert query.exception() is None, query.exception()

    run_into_parquet()
    assert rows_of(spark.read.parquet(str(output))) == first
    more = produce(cluster, topic, 60, first=150)
    run_into_parquet()
    assert rows_of(spark.read.parquet(str(output))) == sorted(first + more)


def test_streaming_read_max_offsets_per_trigger_splits_the_backlog(spark, cluster, tmp_path: Path) -> None:
    topic = "spark-stream-limited"
    create_topic(cluster, topic)
    sent = produce(cluster, topic, 300)
    df = kafka_reader(
        spark, cluster, stream=True, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="100"
    )
    query = run_available_now(df, "spark_stream_limited", tmp_path / "checkpoint")
    assert rows_of(spark.table("spark_stream_limited")) == sent
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) >= 3 and max(batches) <= 100, batches


# --------------------------------------------------------------------------- writes


def consume_all(cluster, topic: str, count: int) -> list[tuple[bytes, bytes]]:
    """(key, value) of `count` records read by librdkafka from every partition's start."""
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": f"check-{topic}",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[tuple[bytes, bytes]] = []
    try:

        def read_some() -> bool:
            for message in consumer.consume(1000, CONSUME_POLL_S):
                assert message.error() is None, message.error()
                got.append((message.key(), message.value()))
            return len(got) >= count

        wait_until(read_some, CONSUME_TIMEOUT_S, interval_s=0.01, message=f"read {len(got)} of {count} from {topic}")
    finally:
        consumer.close()
    return sorted(got)


def test_batch_write_with_compression_is_read_back_by_librdkafka(spark, cluster) -> None:
    topic = "spark-written"
    create_topic(cluster, topic)
    df = spark.range(500).selectExpr("cast(concat('k', id) as binary) key", "cast(concat('v', id) as binary) value")
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
        .option("kafka.compression.type", "zstd")
        .option("kafka.acks", "all")
        .option("topic", topic)
        .save()
    )
    assert consume_all(cluster, topic, 500) == sorted((b"k%d" % i, b"v%d" % i) for i in range(500))


def test_streaming_write_copies_one_topic_into_another(spark, cluster, tmp_path: Path) -> None:
    source, sink = "spark-copy-from", "spark-copy-to"
    create_topic(cluster, source)
    create_topic(cluster, sink)
    sent = produce(cluster, source, 120)
    df = kafka_reader(spark, cluster, stream=True, subscribe=source, startingOffsets="earliest")
    query = (
        df.selectExpr("key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "streaming write did not finish"
    assert query.exception() is None, query.exception()
    assert consume_all(cluster, sink, len(sent)) == sorted((r[3], r[4]) for r in sent)
