"""Broker benchmark: produce and consume throughput of 100-byte records on `zkraft up` (3 quorum nodes, 3 brokers).

    python3 bench/kafka_bench.py [--runs 3] [--records 1000000] [--partitions 3] [--keep]

Each run starts a fresh `zkraft up --brokers 3` in a temporary directory and,
for each setting (RF 1 acks=1, RF 3 acks=1, RF 3 acks=all), creates a topic
with `zkraft topics --bootstrap-server`, produces `--records` records with
`zkraft producer-perf-test` (one producer process, unlimited throughput) and
reads them back with `zkraft consumer-perf-test`: what a Kafka user runs, so
the figures include the client. Each tool's own summary line is parsed.

Baseline, same run and cluster: `broker_ceiling` sends one pre-built 160-record
batch per partition per request from 3 coroutines per leader (no per-record
client work), for the RF 1 acks=1 topic; the gap between it and the
producer figure is the client's cost.

Output: JSON lines, one per measurement, then a `summary` with medians over
runs next to the targets (produce >= 200,000/s RF 1 acks=1, >= 100,000/s RF 3
acks=all; consume >= 400,000/s). Nothing is asserted. Processes listen on
127.0.0.1 only; `zkraft up` is stopped with SIGTERM (SIGKILL after a
deadline) at the end of each run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import emit, median_or_none  # noqa: E402
from client.records import RecordBatchBuilder  # noqa: E402
from zkraft_proto import broker_pb2 as pb  # noqa: E402
from zkraft_proto import broker_pb2_grpc  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SETTINGS = (("rf1_acks1", 1, "1"), ("rf3_acks1", 3, "1"), ("rf3_acksall", 3, "all"))
TARGETS = {"produce_rf1_acks1": 200_000, "produce_rf3_acksall": 100_000, "consume": 400_000}
UP_TIMEOUT_S = 120.0
TOOL_TIMEOUT_S = 600.0
CEILING_SECONDS = 5.0
_PRODUCER_TOTAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)


def free_port_block(n: int) -> int:
    """The first of `n` consecutive free loopback ports (bound and released; a race is reported by `zkraft up`)."""
    for _ in range(200):
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


class Up:
    """`zkraft up --brokers 3` in the background, stopped with SIGTERM on exit."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.lines: list[str] = []
        self.bootstrap = ""
        command = [
            sys.executable, "-m", "zkraft", "up", "--data-dir", str(data_dir), "--brokers", "3",
            "--base-port", str(free_port_block(3)), "--broker-base-port", str(free_port_block(3)),
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
            match = re.search(r"bootstrap servers (\S+);", line)
            if match:
                self.bootstrap = match.group(1)
                self._ready.set()
        self._ready.set()

    def wait(self) -> str:
        if not self._ready.wait(UP_TIMEOUT_S) or not self.bootstrap:
            raise RuntimeError("zkraft up did not start:\n" + "\n".join(self.lines[-20:]))
        return self.bootstrap

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
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


def produce(bootstrap: str, topic: str, records: int, acks: str) -> dict[str, float]:
    out = zkraft(
        "producer-perf-test", "--topic", topic, "--num-records", str(records), "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}",
    )  # fmt: skip
    match = _PRODUCER_TOTAL.search(out.strip().splitlines()[-1])
    if match is None:
        raise RuntimeError(f"unexpected producer-perf-test output: {out[-300:]}")
    return {
        "records_per_s": float(match.group(2)),
        "mb_per_s": float(match.group(3)),
        "avg_latency_ms": float(match.group(4)),
        "max_latency_ms": float(match.group(5)),
        "p50_ms": float(match.group(6)),
        "p99_ms": float(match.group(8)),
    }


def consume(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    out = zkraft("consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records))
    row = [field.strip() for field in out.strip().splitlines()[-1].split(",")]
    return {"records": float(row[4]), "records_per_s": float(row[5]), "mb_per_s": float(row[3])}


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


def one_run(run: int, args: argparse.Namespace, root: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    up = Up(root / f"run-{run}")
    try:
        bootstrap = up.wait()
        for name, factor, acks in SETTINGS:
            topic = f"bench-{name}"
            zkraft(
                "topics", "--bootstrap-server", bootstrap.split(",")[0], "--create", "--topic", topic,
                "--partitions", str(args.partitions), "--replication-factor", str(factor),
            )  # fmt: skip
            produced = produce(bootstrap, topic, args.records, acks)
            emit({"run": run, "measure": f"produce_{name}", **produced})
            figures[f"produce_{name}"] = produced["records_per_s"]
            consumed = consume(bootstrap, topic, args.records)
            emit({"run": run, "measure": f"consume_{name}", **consumed})
            figures[f"consume_{name}"] = consumed["records_per_s"]
        ceiling = asyncio.run(broker_ceiling(bootstrap, "bench-rf1_acks1"))
        emit({"run": run, "measure": "broker_ceiling_rf1_acks1", "records_per_s": round(ceiling)})
        figures["broker_ceiling_rf1_acks1"] = ceiling
    finally:
        up.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the clusters' data goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zkraft-kafka-bench-", dir=args.dir))
    emit({"measure": "setup", "cpus": os.cpu_count(), "records": args.records, "partitions": args.partitions})
    runs = []
    try:
        for run in range(1, args.runs + 1):
            runs.append(one_run(run, args, root))
    finally:
        if not args.keep:
            with contextlib.suppress(OSError):
                shutil.rmtree(root)
    keys = sorted({k for r in runs for k in r})
    summary = {k: median_or_none([r.get(k) for r in runs]) for k in keys}
    summary["consume_min"] = min((v for k, v in summary.items() if k.startswith("consume_") and v), default=None)
    emit(
        {
            "measure": "summary",
            "runs": len(runs),
            **summary,
            "targets": TARGETS,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
