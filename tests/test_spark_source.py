"""The `zkraft` Spark source and sink against real brokers on loopback, with `local[2]` (issue 8).

One SparkSession and one 3-broker cluster for the whole module: starting
Spark costs seconds. The session starts first, before this process opens any
gRPC channel (PySpark launches its JVM with a fork). Each test uses its own
topics. Streaming tests use `trigger(availableNow=True)`, or
`processAllAvailable()` on a running query; waiting is on conditions with
deadlines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.errors import PySparkRuntimeError  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

REPO_ROOT = Path(__file__).resolve().parent.parent
QUERY_TIMEOUT_S = 180.0
BASE_TS_MS = 1_700_000_000_000


def start_spark(app: str) -> SparkSession:
    """`local[2]` with the repository importable by Spark's Python workers (they are separate processes)."""
    paths = [str(REPO_ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    try:
        return builder.getOrCreate()
    except PySparkRuntimeError:
        # The JVM launch fails now and then on a loaded machine; a second launch is the documented remedy.
        return builder.getOrCreate()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = start_spark("zkraft-spark-tests")
    import spark_connector

    spark_connector.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory):
    from tests.kafka_harness import KafkaCluster

    # Retention checks often, for the data-loss tests (only their topic has segments small enough to go).
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka"), brokers=3, broker_properties={"log.retention.check.interval.ms": "300"}
    ) as kafka:
        kafka.start()
        yield kafka


# --------------------------------------------------------------------------- helpers


def produce(cluster, topic: str, partitions: int, per_partition: int, first: int = 0) -> list[tuple]:
    """Records i = first .. first + n - 1, round robin over partitions; returns (partition, key, value, ts_ms)."""
    from client import Producer

    sent = []
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=1) as producer:
        for i in range(first, first + partitions * per_partition):
            p = i % partitions
            key, value, ts = b"k%d" % i, b"value-%06d" % i, BASE_TS_MS + i
            producer.send(topic, value=value, key=key, partition=p, timestamp_ms=ts)
            sent.append((p, key, value, ts))
        producer.flush(60)
    return sent


def reader(spark: SparkSession, cluster, stream: bool = True, **options: str):
    source = (spark.readStream if stream else spark.read).format("zkraft")
    source = source.option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    for key, value in options.items():
        source = source.option(key, value)
    return source.load()


def rows_of(df) -> list[tuple]:
    """(topic, partition, offset, key, value, timestamp ms, timestampType), sorted."""
    picked = df.selectExpr("topic", "partition", "offset", "key", "value", "unix_millis(timestamp)", "timestampType")
    return sorted(tuple(r) for r in picked.collect())


def expected_rows(topic: str, sent: list[tuple], partitions: int) -> list[tuple]:
    """What the source must return for records produced by `produce` into an empty topic."""
    next_offset = dict.fromkeys(range(partitions), 0)
    out = []
    for p, key, value, ts in sent:
        out.append((topic, p, next_offset[p], key, value, ts, 0))
        next_offset[p] += 1
    return sorted(out)


def run_available_now(df, name: str, checkpoint: Path):
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"query {name} did not finish in {QUERY_TIMEOUT_S} s"
    assert query.exception() is None, query.exception()
    return query


def topics_cli(cluster, *args: str) -> None:
    command = [sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, *args]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 0, done.stderr


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


# --------------------------------------------------------------------------- streaming


def test_available_now_returns_exactly_the_produced_records(spark, cluster, tmp_path) -> None:
    cluster.create_topic("exact", partitions=4, replication_factor=2)
    sent = produce(cluster, "exact", 4, 50)
    df = reader(spark, cluster, subscribe="exact", startingOffsets="earliest")
    run_available_now(df, "exact", tmp_path / "ck")
    assert rows_of(spark.table("exact")) == expected_rows("exact", sent, 4)
    assert spark.table("exact").schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,timestampType:int>"
    )


def test_max_offsets_per_trigger_splits_the_work_into_micro_batches(spark, cluster, tmp_path) -> None:
    cluster.create_topic("limited", partitions=4, replication_factor=1)
    produce(cluster, "limited", 4, 30)  # 120 records, 30 per partition
    df = reader(spark, cluster, subscribe="limited", startingOffsets="earliest", maxOffsetsPerTrigger="40")
    query = run_available_now(df, "limited", tmp_path / "ck")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [40, 40, 40]
    assert spark.table("limited").count() == 120
    # The checkpointed offsets are Kafka's JSON, readable by a person.
    last = query.recentProgress[-1]["sources"][0]["endOffset"]
    assert (json.loads(last) if isinstance(last, str) else last) == {"limited": {"0": 30, "1": 30, "2": 30, "3": 30}}


def test_restart_from_checkpoint_gives_every_record_exactly_once(spark, cluster, tmp_path) -> None:
    cluster.create_topic("resume", partitions=4, replication_factor=2)
    first = produce(cluster, "resume", 4, 25)
    out, checkpoint = tmp_path / "out", tmp_path / "ck"

    def start():
        df = reader(spark, cluster, subscribe="resume", startingOffsets="earliest", maxOffsetsPerTrigger="30")
        return df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))

    query = start().start()
    query.processAllAvailable()
    query.stop()
    assert query.exception() is None
    second = produce(cluster, "resume", 4, 25, first=100)
    again = start().trigger(availableNow=True).start()
    assert again.awaitTermination(QUERY_TIMEOUT_S)
    assert again.exception() is None
    assert rows_of(spark.read.parquet(str(out))) == expected_rows("resume", first + second, 4)


def test_a_partition_added_with_alter_is_picked_up(spark, cluster, tmp_path) -> None:
    cluster.create_topic("growing", partitions=2, replication_factor=1)
    before = produce(cluster, "growing", 2, 10)
    df = reader(spark, cluster, subscribePattern="grow.*", startingOffsets="earliest")
    query = df.writeStream.format("memory").queryName("growing").option("checkpointLocation", str(tmp_path)).start()
    try:
        query.processAllAvailable()
        assert spark.table("growing").count() == 20
        topics_cli(cluster, "--alter", "--topic", "growing", "--partitions", "3")
        cluster.wait_leaders("growing", 3)
        after = produce(cluster, "growing", 3, 10, first=1000)
        from tests.helpers import wait_until

        wait_until(
            lambda: spark.table("growing").count() == 50,
            QUERY_TIMEOUT_S,
            interval_s=0.5,
            message="records of the new partition did not arrive",
        )
        query.processAllAvailable()
    finally:
        query.stop()
    got = rows_of(spark.table("growing"))
    assert sorted((r[1], r[3]) for r in got) == sorted((p, k) for p, k, _, _ in before + after)
    assert {r[1] for r in got} == {0, 1, 2}


def test_the_query_survives_sigkill_of_a_partition_leader(spark, cluster, tmp_path) -> None:
    cluster.create_topic("failover", partitions=4, replication_factor=3)
    sent = produce(cluster, "failover", 4, 500)
    # 16 micro-batches of 125: the query is still running when the leader dies (checked below).
    df = reader(spark, cluster, subscribe="failover", startingOffsets="earliest", maxOffsetsPerTrigger="125")
    query = (
        df.writeStream.format("memory")
        .queryName("failover")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    from tests.helpers import wait_until

    wait_until(lambda: query.recentProgress, QUERY_TIMEOUT_S, interval_s=0.05, message="no micro-batch finished")
    victim = cluster.partition_state("failover", 0).leader
    cluster.kill_broker(victim)
    running_at_kill = query.isActive
    try:
        assert running_at_kill, "the query ended before the leader was killed: nothing was tested"
        assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish after the leader was killed"
        assert query.exception() is None, query.exception()
        assert rows_of(spark.table("failover")) == expected_rows("failover", sent, 4)
    finally:
        cluster.start_broker(victim)


# --------------------------------------------------------------------------- data loss


def test_a_topic_deleted_mid_query_fails_the_query_by_default(spark, cluster, tmp_path) -> None:
    from client import Admin
    from tests.helpers import wait_until

    cluster.create_topic("doomed", partitions=2, replication_factor=1)
    produce(cluster, "doomed", 2, 10)
    df = reader(spark, cluster, subscribe="doomed", startingOffsets="earliest")
    query = df.writeStream.format("memory").queryName("doomed").option("checkpointLocation", str(tmp_path)).start()
    try:
        query.processAllAvailable()
        with Admin(cluster.bootstrap_servers) as admin:
            admin.delete_topics(["doomed"], timeout_ms=20_000)
        wait_until(lambda: not query.isActive, QUERY_TIMEOUT_S, interval_s=0.2, message="query kept running")
        message = str(query.exception())
        assert "doomed-0" in message and "gone" in message and "failOnDataLoss" in message
    finally:
        query.stop()


def test_a_topic_deleted_mid_query_is_skipped_without_fail_on_data_loss(spark, cluster, tmp_path) -> None:
    from client import Admin

    cluster.create_topic("lost", partitions=1, replication_factor=1)
    cluster.create_topic("kept", partitions=1, replication_factor=1)
    produce(cluster, "lost", 1, 10)
    produce(cluster, "kept", 1, 10)
    df = reader(spark, cluster, subscribe="lost,kept", startingOffsets="earliest", failOnDataLoss="false")
    query = df.writeStream.format("memory").queryName("lostkept").option("checkpointLocation", str(tmp_path)).start()
    try:
        query.processAllAvailable()
        with Admin(cluster.bootstrap_servers) as admin:
            admin.delete_topics(["lost"], timeout_ms=20_000)
        produce(cluster, "kept", 1, 10, first=10)
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
        kept = spark.table("lostkept").where("topic = 'kept'").count()
        assert kept == 20
    finally:
        query.stop()


def _aged_topic(cluster, name: str) -> int:
    """A topic whose oldest records retention has deleted; returns its log start offset (> 0)."""
    from client import TopicPartition
    from spark_connector.brokers import OffsetLookup
    from tests.helpers import wait_until

    cluster.create_topic(name, partitions=1, replication_factor=1, segment_bytes="1024", retention_bytes="2048")
    for first in range(0, 200, 10):  # 20 separate batches, so the 1 KiB segments roll between them
        produce(cluster, name, 1, 10, first=first)
    lookup = OffsetLookup(cluster.bootstrap_servers)
    tp = TopicPartition(name, 0)
    return int(wait_until(lambda: lookup.earliest([tp])[tp], 30, message=f"retention never trimmed {name}"))


def test_retention_removing_unread_records_fails_the_query_by_default(spark, cluster, tmp_path) -> None:
    start = _aged_topic(cluster, "aged")
    df = reader(spark, cluster, subscribe="aged", startingOffsets='{"aged":{"0":0}}')
    query = df.writeStream.format("memory").queryName("aged").option("checkpointLocation", str(tmp_path)).start()
    try:
        with pytest.raises(Exception) as failure:
            query.processAllAvailable()
        message = str(failure.value)
        assert "aged-0" in message and "failOnDataLoss" in message, message
        assert spark.table("aged").count() == 0, f"nothing may be written when offsets 0..{start} are gone"
    finally:
        query.stop()


def test_retention_removing_unread_records_is_skipped_without_fail_on_data_loss(spark, cluster, tmp_path) -> None:
    start = _aged_topic(cluster, "aged2")
    df = reader(spark, cluster, subscribe="aged2", startingOffsets='{"aged2":{"0":0}}', failOnDataLoss="false")
    query = df.writeStream.format("memory").queryName("aged2").option("checkpointLocation", str(tmp_path)).start()
    try:
        query.processAllAvailable()
        offsets = sorted(r[0] for r in spark.table("aged2").select("offset").collect())
        assert offsets and offsets[0] >= start, "reading goes on from the earliest offset still there"
        assert offsets == list(range(offsets[0], 200)), "everything from there to the end, once"
    finally:
        query.stop()


# --------------------------------------------------------------------------- batch and sink


def test_batch_read_between_starting_and_ending_offsets(spark, cluster) -> None:
    cluster.create_topic("ranged", partitions=2, replication_factor=1)
    produce(cluster, "ranged", 2, 20)
    df = reader(
        spark,
        cluster,
        stream=False,
        subscribe="ranged",
        startingOffsets='{"ranged":{"0":5,"1":-2}}',
        endingOffsets='{"ranged":{"0":15,"1":-1}}',
    )
    got = rows_of(df)
    assert [(r[1], r[2]) for r in got] == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(20)]
    assert reader(spark, cluster, stream=False, subscribe="ranged", minPartitions="6").rdd.getNumPartitions() == 6
    # Record i has timestamp BASE_TS_MS + i and lies in partition i % 2 at offset i // 2.
    by_time = reader(spark, cluster, stream=False, subscribe="ranged", startingTimestamp=str(BASE_TS_MS + 10))
    assert min((r[1], r[2]) for r in rows_of(by_time)) == (0, 5)
    assert by_time.count() == 30
    per_partition = json.dumps({"ranged": {"0": BASE_TS_MS + 30, "1": BASE_TS_MS + 1}})
    by_times = reader(spark, cluster, stream=False, subscribe="ranged", startingOffsetsByTimestamp=per_partition)
    assert by_times.groupBy("partition").min("offset").orderBy("partition").collect() == [(0, 15), (1, 0)]


def test_unknown_and_contradictory_options_fail_at_load(spark, cluster) -> None:
    with pytest.raises(Exception, match="(?i)unknown option .subscribepatern"):
        reader(spark, cluster, stream=False, subscribePatern="x")
    with pytest.raises(Exception, match="exactly one of the options subscribe, subscribePattern, assign"):
        reader(spark, cluster, subscribe="a", assign='{"a":[0]}')
    with pytest.raises(Exception, match="auto.offset.reset"):
        reader(spark, cluster, subscribe="a", **{"kafka.auto.offset.reset": "earliest"})


def test_the_sink_round_trips(spark, cluster, tmp_path) -> None:
    cluster.create_topic("sunk", partitions=3, replication_factor=1)
    rows = [(f"k{i}", f"value {i}", i % 3) for i in range(60)]
    frame = spark.createDataFrame(rows, "key string, value string, partition int")
    # Python data sources accept only append and overwrite as save modes; Kafka's default ErrorIfExists is refused.
    writer = frame.write.format("zkraft").mode("append").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    writer.option("topic", "sunk").save()
    back = reader(spark, cluster, stream=False, subscribe="sunk").selectExpr(
        "cast(key as string) k", "cast(value as string) v", "partition"
    )
    assert sorted(tuple(r) for r in back.collect()) == sorted(rows)
    # And the streaming sink: copy "sunk" into "copied" with headers.
    cluster.create_topic("copied", partitions=1, replication_factor=1)
    copy = (
        reader(spark, cluster, subscribe="sunk", startingOffsets="earliest")
        .selectExpr("key", "value", "array(named_struct('key', 'from', 'value', cast(topic as binary))) headers")
        .writeStream.format("zkraft")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", "copied")
        .option("includeHeaders", "true")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert copy.awaitTermination(QUERY_TIMEOUT_S)
    assert copy.exception() is None
    copied = reader(spark, cluster, stream=False, subscribe="copied", includeHeaders="true").collect()
    assert sorted((r.key.decode(), r.value.decode()) for r in copied) == sorted((k, v) for k, v, _ in rows)
    assert all([(h.key, h.value) for h in r.headers] == [("from", b"sunk")] for r in copied)


# --------------------------------------------------------------------------- a TLS cluster


@pytest.fixture(scope="module")
def tls_cluster(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory):
    """One broker whose gRPC port (what the source fetches through) serves TLS only, with Kafka's ssl.* names."""
    from tests.kafka_harness import KafkaCluster
    from tests.tls_material import make_tls_material

    root = tmp_path_factory.mktemp("kafka-tls")
    material = make_tls_material(root / "pki")
    tls = {
        "security.inter.broker.protocol": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.server_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(material.ca_file),
    }
    with KafkaCluster(root / "cluster", brokers=1, broker_properties=tls) as kafka:
        kafka.start()
        kafka.ca_file = material.ca_file
        yield kafka


def test_the_source_reads_a_topic_from_a_tls_cluster_with_kafkas_ssl_options(spark, tls_cluster) -> None:
    from client import Producer
    from runtime.tls import TlsConfig

    tls = TlsConfig(None, tls_cluster.ca_file)
    tls_cluster.create_topic("over-tls", partitions=2)  # through the quorum, waiting for the leaders
    with Producer(tls_cluster.bootstrap_servers, acks="all", tls=tls) as producer:
        for i in range(20):
            producer.send("over-tls", value=b"v%d" % i, partition=i % 2)
        producer.flush(60)
    security = {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(tls_cluster.ca_file),
    }
    df = reader(spark, tls_cluster, stream=False, subscribe="over-tls", **security)
    assert sorted(r.value for r in df.select("value").collect()) == sorted(b"v%d" % i for i in range(20))
