"""Broker benchmark: zkraft (`zkraft up`, 3 brokers) against real Apache Kafka (3 brokers), same run, same client.

    python3 bench/kafka_bench.py [--runs 3] [--records 500000] [--partitions 3] [--clusters zkraft,kafka] [--keep]

Each run starts each cluster in turn, fresh, in a temporary directory (which one goes first alternates from
run to run, so that neither always meets a cooler machine), sends `--warmup-records` unreported through
librdkafka (Kafka's JIT compiler warms up; both sides open their first connections), then measures with
100-byte records:

| measure | client | what |
|---|---|---|
| `rdkafka_produce_<setting>` | librdkafka | records/s of one producer process (bench/rdkafka_driver.py) with |
| | | the settings RF 1 acks=1, RF 3 acks=1, RF 3 acks=all; brokers' CPU seconds per million records |
| `rdkafka_consume_<setting>` | librdkafka | records/s reading that topic back (every partition assigned, no group) |
| `rdkafka_latency_rf3_acksall` | librdkafka | end-to-end p50/p99 at `--latency-rate` (10,000/s), RF 3 acks=all |
| `java_produce_<setting>` | Kafka's Java | kafka-producer-perf-test (Kafka 3.9's jars, JIT at full speed), the |
| | | same settings, `--java-records-factor` times `--records` (the client is that much faster) |
| `java_consume_<setting>` | Kafka's Java | kafka-consumer-perf-test's fetch rate (its group join left out) |
| `java_e2e_rf3_acksall` | Kafka's Java | kafka-e2e-latency: one record at a time, acks=all, awaited, then polled |
| | | back (`--e2e-records`): the pipeline's own latency, with no queueing |
| `sdk_produce_<setting>` | zkraft SDK | `zkraft producer-perf-test` (zkraft only: the SDK speaks gRPC) |
| `sdk_consume_<setting>` | zkraft SDK | `zkraft consumer-perf-test` |
| `broker_ceiling_rf1_acks1` | gRPC | pre-built 160-record batches, 3 coroutines per leader: no client work |

zkraft's librdkafka figures go through the brokers' Kafka listeners (the `kafka_address` of each broker in
cluster.json); a `zkraft up` that records none (before the Kafka listener) gets its SDK figures only. The
real Kafka is Apache Kafka 3.9 on a real ZooKeeper (bench/kafka_baseline.py; jars from Maven Central through
tests/kafka39/pom.xml, so java and mvn are needed), driven by the same librdkafka driver with the same
settings. Broker CPU = the utime + stime of the three broker processes (/proc/<pid>/stat) over the phase,
client CPU = the client process's (the driver's, the JVM tool's: getrusage of waited-for children);
the quorum's (zkraft) or ZooKeeper's (Kafka) is reported apart as `coordination_cpu_s_per_million`.

Output: JSON lines, one per measurement, then a `summary` with medians over runs, the ratios zkraft / Kafka
(throughput: >= 1 is the target; latency: <= 1), and Kafka's published single-producer figures as the floor
(three machines, 2014: 821,000 records/s RF 1 acks=1, 421,000 RF 3 acks=all, 940,000 consumed, end-to-end
p50 <= 2 ms and p99 <= 5 ms). Nothing is asserted. Everything listens on 127.0.0.1; `zkraft up` is stopped
with SIGTERM (SIGKILL after a deadline), Kafka's and ZooKeeper's JVMs are SIGKILLed at the end of their turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import emit, median_or_none, process_cpu_seconds  # noqa: E402
from client.kafka.records import RecordBatchBuilder  # noqa: E402
from zkraft_proto import broker_pb2 as pb  # noqa: E402
from zkraft_proto import broker_pb2_grpc  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DRIVER = REPO_ROOT / "bench" / "rdkafka_driver.py"
SETTINGS = (("rf1_acks1", 1, "1"), ("rf3_acks1", 3, "1"), ("rf3_acksall", 3, "all"))
LATENCY_SETTING = ("rf3_acksall", 3, "all")
CLUSTERS = ("zkraft", "kafka")
CLIENTS = ("rdkafka", "java", "sdk")
# Kafka's published single-producer figures (three machines; "Benchmarking Apache Kafka: 2 Million Writes
# Per Second (On Three Cheap Machines)", 2014): the floor the issue sets for zkraft's librdkafka figures.
PUBLISHED_FLOOR = {
    "rdkafka_produce_rf1_acks1": 821_000,
    "rdkafka_produce_rf3_acksall": 421_000,
    "rdkafka_consume_min": 940_000,
    "rdkafka_latency_p50_ms_max": 2.0,
    "rdkafka_latency_p99_ms_max": 5.0,
}
SDK_TARGETS = {"sdk_produce_rf1_acks1": 200_000, "sdk_produce_rf3_acksall": 100_000, "sdk_consume_min": 400_000}
UP_TIMEOUT_S = 120.0
UP_STOP_TIMEOUT_S = 90.0
TOOL_TIMEOUT_S = 600.0
DRIVER_TIMEOUT_S = 900.0
LATENCY_READY_TIMEOUT_S = 60.0
LEADERS_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.1
CEILING_SECONDS = 5.0
PORT_BLOCK_TRIES = 200
_PRODUCER_TOTAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)


# ---------------------------------------------------------------- the clusters


def free_port_block(n: int) -> int:
    """The first of `n` consecutive free loopback ports (bound and released; a race is reported by `zkraft up`)."""
    for _ in range(PORT_BLOCK_TRIES):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + n > 65535:
            continue
        sockets = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no block of free ports")


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [e.get("PYTHONPATH")])])
    e["PYTHONUNBUFFERED"] = "1"
    return e


@dataclass(frozen=True, slots=True)
class Target:
    """One cluster under measurement, as the phases need it."""

    name: str  # "zkraft" or "kafka"
    kafka_bootstrap: str | None  # Kafka protocol; None when zkraft has no Kafka listener yet
    grpc_bootstrap: str | None  # zkraft's SDK; None for Kafka
    broker_pids: Callable[[], list[int]]
    coordination_pids: Callable[[], list[int]]
    create_topic: Callable[[str, int, int], None]
    root: Path  # this cluster's directory of the run, where its tools may write


class Up:
    """`zkraft up --brokers 3` in the background, stopped with SIGTERM on exit."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.lines: list[str] = []
        command = [
            sys.executable, "-m", "zkraft", "up", "--data-dir", str(data_dir), "--brokers", "3",
            "--base-port", str(free_port_block(3)), "--broker-base-port", str(free_port_block(3)),
            "--kafka-base-port", str(free_port_block(3)), "--zk-base-port", str(free_port_block(3)),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(), cwd=REPO_ROOT
        )
        self._ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if line.startswith("zkraft up: running"):
                self._ready.set()
        self._ready.set()

    def wait(self) -> dict[str, Any]:
        """cluster.json once `zkraft up` says it is running."""
        if not self._ready.wait(UP_TIMEOUT_S) or self.process.poll() is not None:
            raise RuntimeError("zkraft up did not start:\n" + "\n".join(self.lines[-20:]))
        return json.loads((self.data_dir / "cluster.json").read_text(encoding="utf-8"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=UP_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def zkraft(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        capture_output=True,
        text=True,
        env=env(),
        cwd=REPO_ROOT,
        timeout=TOOL_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"zkraft {args[0]} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def live_pids(records: list[dict[str, Any]]) -> Callable[[], list[int]]:
    return lambda: [record["pid"] for record in records if record.get("pid")]


@contextlib.contextmanager
def zkraft_target(root: Path) -> Iterator[Target]:
    up = Up(root)
    try:
        cluster = up.wait()
        brokers = cluster["brokers"]
        kafka_addresses = [b["kafka_address"] for b in brokers if b.get("kafka_address")]
        grpc_bootstrap = ",".join(b["address"] for b in brokers)

        def create_topic(topic: str, partitions: int, factor: int) -> None:
            zkraft(
                "topics", "--bootstrap-server", grpc_bootstrap.split(",")[0], "--create", "--topic", topic,
                "--partitions", str(partitions), "--replication-factor", str(factor),
            )  # fmt: skip

        yield Target(
            name="zkraft",
            kafka_bootstrap=",".join(kafka_addresses) if len(kafka_addresses) == len(brokers) else None,
            grpc_bootstrap=grpc_bootstrap,
            broker_pids=live_pids(brokers),
            coordination_pids=live_pids(cluster["quorum"]),
            create_topic=create_topic,
            root=root,
        )
    finally:
        up.stop()


@contextlib.contextmanager
def kafka_target(root: Path) -> Iterator[Target]:
    from bench.kafka_baseline import RealKafka

    with RealKafka(root) as kafka:
        yield Target(
            name="kafka",
            kafka_bootstrap=kafka.bootstrap_servers,
            grpc_bootstrap=None,
            broker_pids=kafka.broker_pids,
            coordination_pids=kafka.coordination_pids,
            create_topic=kafka.create_topic,
            root=root,
        )


# ---------------------------------------------------------------- librdkafka through the Kafka protocol


def run_driver(role: str, bootstrap: str, topic: str, records: int, *extra: str) -> dict[str, Any]:
    """One bench/rdkafka_driver.py process to completion; its JSON line."""
    command = [sys.executable, str(DRIVER), role, "--bootstrap", bootstrap, "--topic", topic,
               "--records", str(records), *extra]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env(), timeout=DRIVER_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"rdkafka_driver {role} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_leaders(bootstrap: str, topic: str, partitions: int) -> None:
    """Until Metadata (librdkafka's) shows every partition of `topic` with a leader."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + LEADERS_TIMEOUT_S
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is not None and metadata.error is None and len(metadata.partitions) == partitions:
            if all(p.leader >= 0 for p in metadata.partitions.values()):
                return
        time.sleep(POLL_INTERVAL_S)
    raise RuntimeError(f"topic {topic} has no leader for every partition after {LEADERS_TIMEOUT_S:g} s")


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every child process this one has waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def with_cpu(target: Target, records: int, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`measure()`'s figures plus the brokers' (and the quorum's or ZooKeeper's) CPU seconds per million records."""
    brokers, coordination = target.broker_pids(), target.coordination_pids()
    brokers_before, coordination_before = process_cpu_seconds(brokers), process_cpu_seconds(coordination)
    clients_before = children_cpu_seconds()
    figures = measure()
    per_million = 1e6 / max(1, figures.get("records", records))
    # The client process (driver, JVM tool or zkraft's perf test) has been waited for: its CPU is the children's.
    figures["client_cpu_s_per_million"] = round((children_cpu_seconds() - clients_before) * per_million, 3)
    figures["broker_cpu_s_per_million"] = round((process_cpu_seconds(brokers) - brokers_before) * per_million, 3)
    figures["coordination_cpu_s_per_million"] = round(
        (process_cpu_seconds(coordination) - coordination_before) * per_million, 3
    )
    return figures


class LatencyConsumer:
    """A latency-consume driver process in the background; `wait_ready` once it sits at the end of the topic."""

    def __init__(self, bootstrap: str, topic: str, records: int) -> None:
        command = [sys.executable, str(DRIVER), "latency-consume", "--bootstrap", bootstrap, "--topic", topic,
                   "--records", str(records)]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())
            self._ready.set()
        self._ready.set()

    def wait_ready(self) -> None:
        if not self._ready.wait(LATENCY_READY_TIMEOUT_S) or self.lines[:1] != ["ready"]:
            raise RuntimeError(f"latency consumer not ready after {LATENCY_READY_TIMEOUT_S:g} s: {self.lines}")

    def result(self) -> dict[str, Any]:
        self.process.wait(timeout=DRIVER_TIMEOUT_S)
        self._reader.join(timeout=DRIVER_TIMEOUT_S)
        if self.process.returncode != 0 or len(self.lines) < 2:
            assert self.process.stderr is not None
            raise RuntimeError(
                f"latency consumer exited {self.process.returncode}: {self.process.stderr.read()[-800:]}"
            )
        return json.loads(self.lines[-1])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def rdkafka_latency(bootstrap: str, topic: str, records: int, rate: int) -> dict[str, Any]:
    """A latency-consume process positioned at the end, then a latency-produce process at `rate` records/s."""
    consumer = LatencyConsumer(bootstrap, topic, records)
    try:
        consumer.wait_ready()
        produced = run_driver("latency-produce", bootstrap, topic, records, "--acks", LATENCY_SETTING[2],
                              "--rate", str(rate))  # fmt: skip
        consumed = consumer.result()
    finally:
        consumer.kill()
    return {**consumed, "rate": rate, "produce_records_per_s": produced["records_per_s"],
            "produce_failed": produced["failed"]}  # fmt: skip


def rdkafka_phases(target: Target, args: argparse.Namespace, record: Callable[[str, dict[str, Any]], None]) -> None:
    """librdkafka's produce and consume for each setting, then the latency run, through the Kafka protocol."""
    bootstrap = target.kafka_bootstrap
    if bootstrap is None:
        emit({"cluster": target.name, "measure": "rdkafka", "skipped": "no kafka_address in cluster.json"})
        return
    if args.warmup_records:
        # Unreported: the JVM's JIT (Kafka) and the first connections and allocations (both) before the clock.
        target.create_topic("rdkafka-warmup", args.partitions, 3)
        wait_leaders(bootstrap, "rdkafka-warmup", args.partitions)
        run_driver("produce", bootstrap, "rdkafka-warmup", args.warmup_records, "--acks", "all")
        run_driver("consume", bootstrap, "rdkafka-warmup", args.warmup_records)
    for name, factor, acks in SETTINGS:
        topic = f"rdkafka-{name}"
        target.create_topic(topic, args.partitions, factor)
        wait_leaders(bootstrap, topic, args.partitions)
        record(f"rdkafka_produce_{name}", with_cpu(target, args.records, lambda topic=topic, acks=acks: run_driver(
            "produce", bootstrap, topic, args.records, "--acks", acks)))  # fmt: skip
        record(f"rdkafka_consume_{name}", with_cpu(target, args.records, lambda topic=topic: run_driver(
            "consume", bootstrap, topic, args.records)))  # fmt: skip
    name, factor, _acks = LATENCY_SETTING
    topic = f"rdkafka-latency-{name}"
    target.create_topic(topic, args.partitions, factor)
    wait_leaders(bootstrap, topic, args.partitions)
    record(f"rdkafka_latency_{name}", rdkafka_latency(bootstrap, topic, args.latency_records, args.latency_rate))


# ---------------------------------------------------------------- Kafka's own Java tools through the Kafka protocol

# The JVM settings kafka-run-class.sh gives a tool (KAFKA_JVM_PERFORMANCE_OPTS), with the heap
# kafka-producer-perf-test.sh sets: the client at full JIT speed, so that the broker, not the client, bounds.
JAVA_TOOL_OPTIONS = ("-Xms512m", "-Xmx512m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true")  # fmt: skip
PRODUCER_PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"  # bin/kafka-producer-perf-test.sh
CONSUMER_PERF_MAIN = "org.apache.kafka.tools.ConsumerPerformance"  # bin/kafka-consumer-perf-test.sh
END_TO_END_MAIN = "org.apache.kafka.tools.EndToEndLatency"  # bin/kafka-e2e-latency.sh
# The Java producer's settings, the same against both clusters: its defaults (batch.size 16 KiB,
# linger.ms 0 in 3.9) but the linger librdkafka's driver uses, so both clients batch alike.
JAVA_PRODUCER_PROPS = ("linger.ms=5", "batch.size=65536", "buffer.memory=67108864")
# "Percentiles: 50th = 1, 99th = 3, 99.9th = 5" (whole milliseconds, as EndToEndLatency rounds them down)
_E2E_PERCENTILES = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)")
_E2E_AVERAGE = re.compile(r"Avg latency: ([\d.]+) ms")


class JavaTools:
    """Apache Kafka 3.9's own performance tools (tests/kafka39/pom.xml's jars) as bin/*.sh would run them."""

    def __init__(self, root: Path) -> None:
        from tests import maven_jars
        from tests.kafka39_harness import KafkaTools

        self._tools = KafkaTools(root, maven_jars.resolve(), jvm_options=JAVA_TOOL_OPTIONS)

    def run(self, main_class: str, *args: str) -> str:
        """The tool's stdout; ToolError (with its output's tail) when it fails or runs over."""
        return self._tools.run_ok(main_class, args, timeout_s=TOOL_TIMEOUT_S)

    def produce(self, bootstrap: str, topic: str, records: int, acks: str) -> dict[str, Any]:
        out = self.run(
            PRODUCER_PERF_MAIN, "--topic", topic, "--num-records", str(records), "--record-size", "100",
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}",
            *JAVA_PRODUCER_PROPS,
        )  # fmt: skip
        return parse_producer_total(out, "kafka-producer-perf-test")

    def consume(self, bootstrap: str, topic: str, records: int) -> dict[str, Any]:
        """kafka-consumer-perf-test's figures; records/s is its fetch rate (the group's join left out)."""
        out = self.run(
            CONSUMER_PERF_MAIN, "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records),
            "--timeout", "60000",
        )  # fmt: skip
        # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
        # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
        row = [field.strip() for field in out.strip().splitlines()[-1].split(",")]
        if len(row) < 10:
            raise RuntimeError(f"unexpected kafka-consumer-perf-test output: {out[-300:]}")
        return {"records": int(float(row[4])), "records_per_s": round(float(row[9])), "mb_per_s": float(row[8]),
                "rebalance_ms": float(row[6])}  # fmt: skip

    def end_to_end(self, bootstrap: str, topic: str, records: int) -> dict[str, Any]:
        """kafka-e2e-latency: one record at a time, sent with acks=all and awaited, then polled back."""
        out = self.run(END_TO_END_MAIN, bootstrap, topic, str(records), "all", "100")
        percentiles, average = _E2E_PERCENTILES.search(out), _E2E_AVERAGE.search(out)
        if percentiles is None or average is None:
            raise RuntimeError(f"unexpected kafka-e2e-latency output: {out[-300:]}")
        p50, p99, p999 = (float(group) for group in percentiles.groups())
        return {"records": records, "avg_ms": float(average.group(1)), "p50_ms": p50, "p99_ms": p99, "p999_ms": p999}


def parse_producer_total(out: str, tool: str) -> dict[str, Any]:
    """The last line of a producer-perf-test (Kafka's or `zkraft producer-perf-test`, which prints the same)."""
    match = _PRODUCER_TOTAL.search(out.strip().splitlines()[-1]) if out.strip() else None
    if match is None:
        raise RuntimeError(f"unexpected {tool} output: {out[-300:]}")
    return {
        "records": int(match.group(1)),
        "records_per_s": float(match.group(2)),
        "mb_per_s": float(match.group(3)),
        "avg_latency_ms": float(match.group(4)),
        "max_latency_ms": float(match.group(5)),
        "p50_ms": float(match.group(6)),
        "p99_ms": float(match.group(8)),
    }


def java_phases(target: Target, args: argparse.Namespace, record: Callable[[str, dict[str, Any]], None]) -> None:
    """Kafka's Java perf tools for each setting, then kafka-e2e-latency, through the Kafka protocol."""
    bootstrap = target.kafka_bootstrap
    if bootstrap is None:
        return
    tools = JavaTools(target.root / "java-tools")
    if args.warmup_records:
        target.create_topic("java-warmup", args.partitions, 3)
        wait_leaders(bootstrap, "java-warmup", args.partitions)
        tools.produce(bootstrap, "java-warmup", args.warmup_records, "all")
    records = args.records * args.java_records_factor
    for name, factor, acks in SETTINGS:
        topic = f"java-{name}"
        target.create_topic(topic, args.partitions, factor)
        wait_leaders(bootstrap, topic, args.partitions)
        record(f"java_produce_{name}", with_cpu(target, records, lambda topic=topic, acks=acks: tools.produce(
            bootstrap, topic, records, acks)))  # fmt: skip
        record(f"java_consume_{name}", with_cpu(target, records, lambda topic=topic: tools.consume(
            bootstrap, topic, records)))  # fmt: skip
    # EndToEndLatency reads one partition (it checks that each poll returns exactly the record it sent).
    name, factor, _acks = LATENCY_SETTING
    topic = f"java-latency-{name}"
    target.create_topic(topic, 1, factor)
    wait_leaders(bootstrap, topic, 1)
    record(f"java_e2e_{name}", tools.end_to_end(bootstrap, topic, args.e2e_records))


# ---------------------------------------------------------------- zkraft's SDK through gRPC


def sdk_produce(bootstrap: str, topic: str, records: int, acks: str) -> dict[str, Any]:
    out = zkraft(
        "producer-perf-test", "--topic", topic, "--num-records", str(records), "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}",
    )  # fmt: skip
    return parse_producer_total(out, "producer-perf-test")


def sdk_consume(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    out = zkraft("consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records))
    row = [field.strip() for field in out.strip().splitlines()[-1].split(",")]
    return {"records": int(float(row[4])), "records_per_s": float(row[5]), "mb_per_s": float(row[3])}


async def broker_ceiling(bootstrap: str, topic: str) -> float:
    """Records/s the brokers take with no client-side record work (pre-built batches)."""
    builder = RecordBatchBuilder()
    for _ in range(160):
        builder.append(None, b"x" * 100)
    batch = builder.build()
    first = bootstrap.split(",")[0]
    async with grpc.aio.insecure_channel(first) as channel:
        metadata = await broker_pb2_grpc.BrokerStub(channel).Metadata(pb.MetadataRequest(topics=[topic]))
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    by_leader: dict[int, list[int]] = {}
    for partition in metadata.topics[0].partitions:
        by_leader.setdefault(partition.leader_id, []).append(partition.partition_index)
    sent = [0]
    deadline = time.monotonic() + CEILING_SECONDS

    async def worker(leader: int, partitions: list[int]) -> None:
        async with grpc.aio.insecure_channel(addresses[leader]) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            request = pb.ProduceRequest(
                acks=1,
                timeout_ms=30000,
                topics=[
                    pb.TopicProduceData(
                        name=topic, partitions=[pb.PartitionProduceData(index=p, records=batch) for p in partitions]
                    )
                ],
            )
            while time.monotonic() < deadline:
                await stub.Produce(request)
                sent[0] += 160 * len(partitions)

    started = time.monotonic()
    await asyncio.gather(*(worker(leader, parts) for leader, parts in by_leader.items() for _ in range(3)))
    return sent[0] / (time.monotonic() - started)


def sdk_phases(target: Target, args: argparse.Namespace, record: Callable[[str, dict[str, Any]], None]) -> None:
    """`zkraft producer-perf-test` / `consumer-perf-test` for each setting, then the gRPC ceiling."""
    bootstrap = target.grpc_bootstrap
    if bootstrap is None:
        return
    for name, factor, acks in SETTINGS:
        topic = f"sdk-{name}"
        target.create_topic(topic, args.partitions, factor)
        record(f"sdk_produce_{name}", with_cpu(target, args.records, lambda topic=topic, acks=acks: sdk_produce(
            bootstrap, topic, args.records, acks)))  # fmt: skip
        record(f"sdk_consume_{name}", with_cpu(target, args.records, lambda topic=topic: sdk_consume(
            bootstrap, topic, args.records)))  # fmt: skip
    ceiling = asyncio.run(broker_ceiling(bootstrap, "sdk-rf1_acks1"))
    record("broker_ceiling_rf1_acks1", {"records_per_s": round(ceiling)})


# ---------------------------------------------------------------- runs and the summary


def one_run(run: int, args: argparse.Namespace, root: Path) -> dict[str, float]:
    """Every cluster of `--clusters` in turn (the order alternating by run); figures keyed cluster_measure_field."""
    figures: dict[str, float] = {}
    order = list(args.clusters) if run % 2 else list(reversed(args.clusters))
    for cluster in order:

        def record(measure: str, values: dict[str, Any], cluster: str = cluster) -> None:
            emit({"run": run, "cluster": cluster, "measure": measure, **values})
            for field in ("records_per_s", "broker_cpu_s_per_million", "client_cpu_s_per_million", "p50_ms", "p99_ms"):
                if isinstance(values.get(field), int | float):
                    figures[f"{cluster}_{measure}_{field}"] = values[field]

        opened = zkraft_target if cluster == "zkraft" else kafka_target
        with opened(root / f"run-{run}-{cluster}") as target:
            emit({"run": run, "cluster": cluster, "measure": "started", "kafka_bootstrap": target.kafka_bootstrap})
            for client in args.clients:
                CLIENT_PHASES[client](target, args, record)
    return figures


CLIENT_PHASES = {"rdkafka": rdkafka_phases, "java": java_phases, "sdk": sdk_phases}


def summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """Medians over runs, zkraft / Kafka ratios for librdkafka's figures, and the published floor."""
    keys = sorted({key for figures in runs for key in figures})
    medians = {key: median_or_none([figures.get(key) for figures in runs]) for key in keys}
    ratios = {}
    for key, value in medians.items():
        if key.startswith(("zkraft_rdkafka_", "zkraft_java_")) and value:
            baseline = medians.get("kafka_" + key.removeprefix("zkraft_"))
            if baseline:
                ratios["zkraft_over_kafka_" + key.removeprefix("zkraft_")] = round(value / baseline, 3)
    for cluster in sorted({key.split("_", 1)[0] for key in keys}):
        for client in ("rdkafka", "java"):
            consumed = [v for k, v in medians.items() if k.startswith(f"{cluster}_{client}_consume_") and
                        k.endswith("_records_per_s") and v]  # fmt: skip
            if consumed:
                medians[f"{cluster}_{client}_consume_min_records_per_s"] = min(consumed)
    return {"measure": "summary", "runs": len(runs), "medians": medians, "ratios": ratios,
            "published_floor": PUBLISHED_FLOOR, "sdk_targets": SDK_TARGETS}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000, help="records per produce and consume phase")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--warmup-records", type=int, default=200_000, help="unreported records first (0: none)")
    parser.add_argument("--latency-records", type=int, default=100_000, help="records of the latency run")
    parser.add_argument("--latency-rate", type=int, default=10_000, help="records/s of the latency run")
    parser.add_argument("--clusters", default=",".join(CLUSTERS), help="which of zkraft,kafka to run")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="which of rdkafka,java,sdk to run")
    parser.add_argument(
        "--java-records-factor",
        type=int,
        default=4,
        help="the Java tools send this many times --records (they are that much faster)",
    )
    parser.add_argument("--e2e-records", type=int, default=5000, help="records of kafka-e2e-latency (one at a time)")
    parser.add_argument("--dir", type=Path, default=None, help="where the clusters' data goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    args.clusters = [c for c in args.clusters.split(",") if c]
    unknown = sorted(set(args.clusters) - set(CLUSTERS))
    if unknown or not args.clusters:
        parser.error(f"--clusters takes a comma-separated subset of {','.join(CLUSTERS)}, got {unknown or 'none'}")
    args.clients = [c for c in args.clients.split(",") if c]
    unknown = sorted(set(args.clients) - set(CLIENTS))
    if unknown or not args.clients:
        parser.error(f"--clients takes a comma-separated subset of {','.join(CLIENTS)}, got {unknown or 'none'}")
    if args.warmup_records < 0:
        parser.error(f"--warmup-records must be >= 0, got {args.warmup_records}")
    for name in (
        "runs",
        "records",
        "partitions",
        "latency_records",
        "latency_rate",
        "java_records_factor",
        "e2e_records",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if "kafka" in args.clusters or "java" in args.clients:
        from bench.kafka_baseline import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            parser.error(
                f"the real Kafka baseline and Kafka's Java tools cannot run here: {reason} "
                "(or leave them out: --clusters zkraft --clients rdkafka,sdk)"
            )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="zkraft-kafka-bench-", dir=args.dir))
    emit({"measure": "setup", "cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0], "records": args.records,
          "partitions": args.partitions, "clusters": args.clusters})  # fmt: skip
    runs = []
    try:
        for run in range(1, args.runs + 1):
            runs.append(one_run(run, args, root))
    finally:
        if not args.keep:
            with contextlib.suppress(OSError):
                shutil.rmtree(root)
    emit(summary(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
