"""Rows per second into a streaming query (noop sink, `local[2]`): the zkraft source against three baselines.

    python3 bench/spark_bench.py                      # 1M 100-byte records on 4 partitions, 2 runs each
    python3 bench/spark_bench.py --records 200000 --runs 1

Measured in one run, on one SparkSession (issue 8):

| record | what |
|---|---|
| `setup` | Python, CPUs, load average, records, partitions |
| `zkraft_source` | `readStream.format("zkraft")`, startingOffsets=earliest, `trigger(availableNow=True)` |
| `zkraft_read_only` | the same ranges read by `read_range` (Fetch + Arrow decode) here, serially, without Spark |
| `python_source_ceiling` | a trivial Python streaming source yielding prebuilt Arrow batches of the same schema: |
| | one 250k-row batch per partition (our layout, `4x250000`) and one 1M-row batch (`1x1000000`) |
| `rate_source` | Spark's built-in `rate-micro-batch` source, one batch of the same row count |
| `parquet_stream` | a Parquet file stream of the same rows and columns |
| `kafka_source` | Spark's own `readStream.format("kafka")` (spark-sql-kafka-0-10, jars from |
| | tests/spark_kafka/pom.xml), `cluster=zkraft` through the brokers' Kafka listeners and `cluster=kafka` on |
| | a real 3-broker Apache Kafka on a real ZooKeeper (bench/kafka_baseline.py) holding the same records |
| `summary` | each figure's best and median run, zkraft as a share of the Python-source ceiling (both), and |
| | Spark's Kafka source on zkraft over it on real Kafka (target >= 0.9) and over the Parquet stream (>= 0.5) |

The Kafka source's rows need java and mvn (the jars come from Maven Central once per checkout); without
them, or with `--no-kafka-source`, its rows are left out and the rest runs as before.

Every query runs once unreported first (`--warmup-rounds`), so that no
measured run pays for starting Python workers or JIT-compiling Spark's
Arrow path; the order of the queries rotates from round to round, so that no
source always runs first. Rates: `rows_per_s` = rows / the query's wall time
from start() to termination (query planning and Python worker start included,
as a user sees it);
`processing_rows_per_s` = rows / the sum of the micro-batches'
triggerExecution times (Spark's own figure). The brokers (3, on loopback) run
on the same cores as Spark; compare `loadavg_1m` before comparing figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

from figures import emit  # noqa: E402

VALUE_BYTES = 100
QUERY_TIMEOUT_S = 900.0
BASE_TS_MS = 1_700_000_000_000
QUEUE_FULL_POLLS_MAX = 12_000  # of 10 ms: two minutes of a full librdkafka queue is a broker that takes nothing


# --------------------------------------------------------------------------- the ceiling: prebuilt Arrow batches


def ceiling_source_class():
    """A DataSource whose stream reader yields, per partition, prebuilt batches of the Kafka source schema."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from spark_connector.schema import spark_schema

    class CeilingPartition(InputPartition):
        def __init__(self, partition: int, rows: int, batch_rows: int) -> None:
            self.partition, self.rows, self.batch_rows = partition, rows, batch_rows

    class CeilingReader(DataSourceStreamReader):
        def __init__(self, options) -> None:
            self.partitions_count = int(options["partitions"])
            self.rows = int(options["rows"])
            self.batch_rows = int(options["batchrows"])

        def initialOffset(self) -> dict:
            return {"done": 0}

        def latestOffset(self, start: dict, limit) -> dict:
            return {"done": 1}

        def partitions(self, start: dict, end: dict):
            if start["done"] == end["done"]:
                return []
            per = self.rows // self.partitions_count
            return [CeilingPartition(p, per, self.batch_rows) for p in range(self.partitions_count)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            from spark_connector.schema import arrow_schema

            done = 0
            while done < partition.rows:
                n = min(partition.batch_rows, partition.rows - done)
                value_offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * VALUE_BYTES)
                values = pa.Array.from_buffers(pa.binary(), n, [None, value_offsets, pa.py_buffer(b"v" * (n * 100))])
                topic_offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 5)
                offsets = np.arange(done, done + n, dtype=np.int64)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.nulls(n, pa.binary()),
                        values,
                        pa.Array.from_buffers(pa.string(), n, [None, topic_offsets, pa.py_buffer(b"bench" * n)]),
                        pa.array(np.full(n, partition.partition, dtype=np.int32)),
                        pa.array(offsets),
                        pa.array((offsets + BASE_TS_MS) * 1000, type=pa.timestamp("us", tz="UTC")),
                        pa.array(np.zeros(n, dtype=np.int32)),
                    ],
                    schema=arrow_schema(False),
                )
                done += n

        def commit(self, end: dict) -> None:
            pass

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "zkraft_bench_ceiling"

        def schema(self):
            return spark_schema(False)

        def streamReader(self, schema):
            return CeilingReader(self.options)

    return CeilingSource


# --------------------------------------------------------------------------- measuring


def timed_query(df, name: str) -> dict:
    started = time.perf_counter()
    query = df.writeStream.format("noop").queryName(name).trigger(availableNow=True).start()
    if not query.awaitTermination(QUERY_TIMEOUT_S):
        query.stop()
        raise RuntimeError(f"{name}: not finished in {QUERY_TIMEOUT_S} s")
    wall_s = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"{name}: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    trigger_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
    return {
        "rows": rows,
        "micro_batches": len(progress),
        "wall_s": round(wall_s, 3),
        "rows_per_s": round(rows / wall_s) if wall_s else None,
        "processing_rows_per_s": round(rows / (trigger_ms / 1000.0)) if trigger_ms else None,
    }


def read_only(bootstrap: str, topic: str, partitions: int, records: int, fetch_max_bytes: int | None) -> dict:
    """Fetch + decode cost without Spark: every partition's range read by read_range, serially, in this process."""
    from client import TopicPartition
    from spark_connector.brokers import OffsetLookup
    from spark_connector.fetch_reader import read_range
    from spark_connector.options import FETCH_MAX_BYTES_DEFAULT, FETCH_TIMEOUT_MS_DEFAULT
    from spark_connector.planning import OffsetRange, ReadSettings

    settings = ReadSettings(
        bootstrap, False, True, FETCH_TIMEOUT_MS_DEFAULT, fetch_max_bytes or FETCH_MAX_BYTES_DEFAULT
    )
    latest = OffsetLookup(bootstrap).latest([TopicPartition(topic, p) for p in range(partitions)])
    started = time.perf_counter()
    rows = batches = 0
    for tp, until in sorted(latest.items()):
        for batch in read_range(OffsetRange(tp.topic, tp.partition, 0, until, settings)):
            rows += batch.num_rows
            batches += 1
    elapsed_s = time.perf_counter() - started
    return {
        "rows": rows,
        "arrow_batches": batches,
        "wall_s": round(elapsed_s, 3),
        "rows_per_s": round(rows / elapsed_s),
    }


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from client import Producer

    value = b"x" * VALUE_BYTES
    started = time.perf_counter()
    with Producer(bootstrap, acks=1, linger_ms=20, batch_size=1 << 20, max_request_size=8 << 20) as producer:
        for i in range(records):
            producer.send(topic, value=value, partition=i % partitions, timestamp_ms=BASE_TS_MS + i)
        producer.flush(600)
    return time.perf_counter() - started


def write_parquet(spark, path: Path, records: int, partitions: int) -> None:
    df = spark.range(records).selectExpr(
        "cast(null as binary) key",
        f"cast(repeat('x', {VALUE_BYTES}) as binary) value",
        "'bench' topic",
        f"cast(id % {partitions} as int) partition",
        "id offset",
        f"timestamp_millis({BASE_TS_MS} + id) timestamp",
        "0 timestampType",
    )
    df.repartition(partitions).write.parquet(str(path))


def compile_bytecode() -> list[str]:
    """Bytecode for the packages the connector imports, written as `pip install` of a wheel writes it.

    Spark starts a new Python process for the source of every streaming
    query. Where no bytecode is cached (an editable install on a machine with
    PYTHONDONTWRITEBYTECODE set, as the machine these figures come from has) each start
    compiles these packages again, about 35 ms a query that no installed
    connector pays. Python reads the cache whatever that variable says.
    """
    import compileall

    packages = ["spark_connector", "client", "runtime", "zkraft_proto"]
    for package in packages:
        compileall.compile_dir(str(REPO_ROOT / package), quiet=1)
    return packages


def start_spark(kafka_jars: list[Path] | None):
    """`local[2]`; with Spark's own Kafka source on the classpath when `kafka_jars` are given."""
    from tests.spark_kafka_session import start_spark_with_kafka

    return start_spark_with_kafka(
        "zkraft-spark-bench",
        kafka_jars or [],
        conf={"spark.driver.memory": "4g", "spark.sql.session.timeZone": "UTC"},
    )


def produce_with_librdkafka(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    """The records `produce` writes into zkraft (same values, partitions, timestamps), into a Kafka cluster."""
    from confluent_kafka import Producer

    value = b"x" * VALUE_BYTES
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    started = time.perf_counter()
    for i in range(records):
        for _ in range(QUEUE_FULL_POLLS_MAX):
            try:
                producer.produce(topic, value=value, partition=i % partitions, timestamp=BASE_TS_MS + i)
                break
            except BufferError:
                producer.poll(0.01)
        else:
            raise RuntimeError(f"librdkafka's queue stayed full producing into {topic}: are the brokers up?")
    if producer.flush(600) != 0:
        raise RuntimeError(f"records left unacknowledged in {topic}")
    return time.perf_counter() - started


def kafka_source_queries(spark, kafka_bootstraps: dict[str, str], run: int, report) -> list[Callable[[], None]]:
    """One `readStream.format("kafka")` query per cluster ("zkraft", "kafka") over the `bench` topic."""
    queries: list[Callable[[], None]] = []
    for cluster, bootstrap in kafka_bootstraps.items():
        df = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "bench")
            .option("startingOffsets", "earliest")
            .load()
        )
        queries.append(
            lambda df=df, cluster=cluster: report("kafka_source", cluster=cluster)(
                timed_query(df, f"kafka_{cluster}_{run}")
            )
        )
    return queries


def measure_round(
    spark, bootstrap: str, kafka_bootstraps: dict[str, str], parquet: Path, parquet_schema, args, run: int, record
) -> None:
    """Every query once, in an order that rotates from round to round; figures of a warm-up round (run < 0) are
    not reported.

    Rotating, because where a query sits in the round moves its figure on this
    2-core machine (what the previous query left running in the JVM, how warm
    the Python workers are): a fixed order would charge that to one source.
    """

    def report(name: str, **extra):
        return record(name, run=run, **extra) if run >= 0 else (lambda figures: None)

    queries: list[Callable[[], None]] = []

    source = (
        spark.readStream.format("zkraft")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "bench")
        .option("startingOffsets", "earliest")
    )
    if args.fetch_max_bytes:
        source = source.option("kafka.max.partition.fetch.bytes", str(args.fetch_max_bytes))
    queries.append(lambda: report("zkraft_source")(timed_query(source.load(), f"zkraft_{run}")))
    queries.append(
        lambda: report("zkraft_read_only")(
            read_only(bootstrap, "bench", args.partitions, args.records, args.fetch_max_bytes)
        )
    )
    for parts, batch_rows in ((args.partitions, args.records // args.partitions), (1, args.records)):
        df = (
            spark.readStream.format("zkraft_bench_ceiling")
            .option("partitions", str(parts))
            .option("rows", str(args.records))
            .option("batchRows", str(batch_rows))
            .load()
        )
        label = f"{parts}x{batch_rows}"
        queries.append(
            lambda df=df, label=label: report("python_source_ceiling", layout=label)(
                timed_query(df, f"ceiling_{label}_{run}")
            )
        )
    rate = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", str(args.records))
        .option("numPartitions", str(args.partitions))
        .load()
    )
    queries.append(lambda: report("rate_source")(timed_query(rate, f"rate_{run}")))
    files = spark.readStream.schema(parquet_schema).parquet(str(parquet))
    queries.append(lambda: report("parquet_stream")(timed_query(files, f"parquet_{run}")))
    queries.extend(kafka_source_queries(spark, kafka_bootstraps, run, report))
    first = run % len(queries)
    for query in queries[first:] + queries[:first]:
        query()


def kafka_source_jars(args) -> list[Path] | None:
    """Spark's Kafka source jars, or None (said in one line) when `--no-kafka-source` or java/mvn is missing."""
    from bench.kafka_baseline import unavailable_reason
    from tests.spark_kafka_session import spark_kafka_jars

    if args.no_kafka_source:
        return None
    reason = unavailable_reason()
    if reason is not None:
        emit({"record": "kafka_source", "skipped": reason})
        return None
    return spark_kafka_jars()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="zkraft Spark source benchmark")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--warmup-rounds", type=int, default=1, help="unreported rounds of every query first")
    parser.add_argument("--fetch-max-bytes", type=int, default=None, help="kafka.max.partition.fetch.bytes")
    parser.add_argument(
        "--no-kafka-source", action="store_true", help='leave out Spark\'s format("kafka") and the real Kafka'
    )
    args = parser.parse_args(argv)
    for name in ("records", "partitions", "runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.warmup_rounds < 0:
        parser.error(f"--warmup-rounds must be >= 0, got {args.warmup_rounds}")
    return args


def start_clusters(stack: contextlib.ExitStack, tmp: Path, args, with_real_kafka: bool) -> tuple[str, dict[str, str]]:
    """zkraft (and the real Kafka baseline) holding the same `bench` topic; (gRPC bootstrap, Kafka bootstraps)."""
    from bench.kafka_baseline import RealKafka
    from tests.kafka_harness import KafkaCluster
    from tests.quorum_harness import BENCH_QUORUM_PROPERTIES

    cluster = stack.enter_context(KafkaCluster(tmp / "kafka", quorum_properties=BENCH_QUORUM_PROPERTIES))
    cluster.start()
    # The records carry timestamps of 2023 (BASE_TS_MS): without retention.ms=-1, time-based retention (7 days by
    # default, checked every 5 minutes) may delete them in the middle of the run, on either cluster.
    cluster.create_topic("bench", partitions=args.partitions, replication_factor=1, retention_ms="-1")
    seconds = produce(cluster.bootstrap_servers, "bench", args.records, args.partitions)
    emit({"record": "produce", "cluster": "zkraft", "seconds": round(seconds, 3)})
    if not with_real_kafka:
        return cluster.bootstrap_servers, {}
    real = stack.enter_context(RealKafka(tmp / "real-kafka"))
    real.create_topic("bench", args.partitions, 1, retention_ms="-1")
    seconds = produce_with_librdkafka(real.bootstrap_servers, "bench", args.records, args.partitions)
    emit({"record": "produce", "cluster": "kafka", "seconds": round(seconds, 3)})
    return cluster.bootstrap_servers, {"zkraft": cluster.kafka_bootstrap_servers, "kafka": real.bootstrap_servers}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compiled = compile_bytecode()
    jars = kafka_source_jars(args)
    spark = start_spark(jars)  # before any gRPC channel in this process: PySpark forks to launch its JVM
    import spark_connector

    spark_connector.register(spark)
    spark.dataSource.register(ceiling_source_class())
    emit(
        {
            "record": "setup",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": os.getloadavg()[0],
            "records": args.records,
            "partitions": args.partitions,
            "value_bytes": VALUE_BYTES,
            "bytecode_compiled": compiled,
            "kafka_source": jars is not None,
        }
    )
    results: dict[str, list[dict]] = {}

    def record(name: str, **extra) -> None:
        def done(figures: dict) -> None:
            figures = {"record": name, **extra, **figures, "loadavg_1m": round(os.getloadavg()[0], 2)}
            emit(figures)
            key = "/".join([name, *(str(v) for k, v in extra.items() if k != "run")])
            results.setdefault(key, []).append(figures)

        return done

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zkraft-spark-bench-")))
        bootstrap, kafka_bootstraps = start_clusters(stack, tmp, args, with_real_kafka=jars is not None)
        parquet = tmp / "parquet"
        write_parquet(spark, parquet, args.records, args.partitions)
        parquet_schema = spark.read.parquet(str(parquet)).schema
        # Warm-up (not reported): the first queries of a session start Spark's Python workers and JIT-compile the
        # Arrow-to-row path, which would otherwise be charged to whichever query runs first (ours). One unreported
        # round of the same queries puts every measured run, ours and the baselines', on a warm JVM.
        for run in range(-args.warmup_rounds, args.runs):
            measure_round(spark, bootstrap, kafka_bootstraps, parquet, parquet_schema, args, run, record)
    spark.stop()
    emit(summary(results))
    return 0


def summary(results: dict[str, list[dict]]) -> dict:
    """Each figure's best and median run, and zkraft's rate as a share of each Python-source ceiling."""
    out: dict = {"record": "summary"}
    for kind, pick in (("best", max), ("median", statistics.median)):
        figures = {}
        for label, runs in results.items():
            figures[label] = {
                key: pick(rates) if (rates := [r[key] for r in runs if r.get(key)]) else 0
                for key in ("rows_per_s", "processing_rows_per_s")
            }
        out[kind] = figures
        zk = figures.get("zkraft_source")
        for label, ceiling in figures.items():
            if label.startswith("python_source_ceiling") and zk and ceiling["rows_per_s"]:
                out[f"zkraft_share_of/{label}/{kind}"] = round(zk["rows_per_s"] / ceiling["rows_per_s"], 3)
        # The targets for Spark's own Kafka source: on zkraft >= 0.9x on real Kafka, >= 0.5x the Parquet stream.
        on_zkraft = figures.get("kafka_source/zkraft")
        for label in ("kafka_source/kafka", "parquet_stream"):
            other = figures.get(label)
            if on_zkraft and other and other["rows_per_s"]:
                out[f"kafka_source_zkraft_over/{label}/{kind}"] = round(
                    on_zkraft["rows_per_s"] / other["rows_per_s"], 3
                )
    out["targets"] = {
        "kafka_source_zkraft_over/kafka_source/kafka": 0.9,
        "kafka_source_zkraft_over/parquet_stream": 0.5,
    }
    return out


if __name__ == "__main__":
    sys.exit(main())
