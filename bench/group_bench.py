"""Consumer-group and log-cleaner benchmark (issue 7's figures).

    python3 bench/group_bench.py [--runs 3] [--records 1200000] [--clean-mb 64]

Per run, on a fresh 3-broker cluster (tests/kafka_harness.py: 3 quorum nodes,
3 brokers, Kafka's default `group.initial.rebalance.delay.ms=3000`):

* `rebalance_join`: 10 consumers of one group (range assignor) share a
  12-partition topic; an 11th subscribes; the time from its first poll until
  all 11 hold a disjoint assignment covering the 12 partitions again. All
  consumers are polled from one thread (a poll never blocks past its timeout),
  so the figure includes the client's own turn-around.
* `group_read`: 3 `zkraft consumer-perf-test --group` processes read a
  12-partition topic of `--records` 100-byte records (an equal share per
  partition) at once; records / (last end - first start), from the tools' own
  start/end times, and `group_read_after_join`: records / (last end - the
  moment the last member finished joining). `__consumer_offsets` is created
  by a warm-up first. Baseline in the same run: one `consumer-perf-test`
  without a group reading the same records (`single_read`).
* `cleaner`: a compacted log of `--clean-mb` MB of 100-byte values over 10,000
  keys is cleaned by broker/log/cleaner.py (one pass over every sealed
  segment); MB/s of log read. Baseline: reading the same segment files
  (`segment_read`), the ceiling of any cleaner on this disk.

JSON lines, a `summary` with medians at the end; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from bench.figures import emit, median_or_none  # noqa: E402
from broker.log import LogConfig, PartitionLog  # noqa: E402
from broker.log.cleaner import plan_clean  # noqa: E402
from client import Consumer, Producer  # noqa: E402
from client.kafka.records import RecordBatchBuilder  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import BENCH_QUORUM_PROPERTIES, REPO_ROOT, subprocess_env  # noqa: E402

PARTITIONS = 12
GROUP_SIZE = 10
POLL_ROUNDS_MAX = 200_000
REBALANCE_DEADLINE_S = 60.0
# Kafka's default initial delay: the 3 reading processes, started together, join one generation (no
# rebalance mid-read); the 11th member of `rebalance_join` joins a non-empty group, which has no delay.
BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": "3000", "group.min.session.timeout.ms": "1000"}


def produce_evenly(bootstrap: str, topic: str, records: int) -> None:
    value = os.urandom(100)
    with Producer(bootstrap, acks=1, linger_ms=5) as producer:
        for i in range(records):
            producer.send(topic, value=value, partition=i % PARTITIONS)
        producer.flush()


def covering(consumers: list[Consumer]) -> bool:
    assigned = [c.assignment() for c in consumers]
    total = sum(len(a) for a in assigned)
    union = set().union(*assigned)
    return all(assigned) and total == PARTITIONS and len(union) == PARTITIONS


def rebalance_join(bootstrap: str, topic: str) -> float:
    def member(i: int) -> Consumer:
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id="bench-rebalance",
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
            client_id=f"member-{i}",
        )
        consumer.subscribe([topic])
        return consumer

    consumers = [member(i) for i in range(GROUP_SIZE)]
    try:
        deadline = time.monotonic() + REBALANCE_DEADLINE_S
        for _ in range(POLL_ROUNDS_MAX):
            for consumer in consumers:
                consumer.poll(timeout_ms=0, max_records=1)
            if len({p for c in consumers for p in c.assignment()}) == PARTITIONS and covering(consumers):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the first 10 members never settled")
        newcomer = member(GROUP_SIZE)
        consumers.append(newcomer)
        started = time.monotonic()
        for _ in range(POLL_ROUNDS_MAX):
            for consumer in consumers:
                consumer.poll(timeout_ms=0, max_records=1)
            if newcomer.assignment() and covering(consumers):
                return time.monotonic() - started
            if time.monotonic() - started > REBALANCE_DEADLINE_S:
                break
        raise RuntimeError("the group did not rebalance onto 11 members")
    finally:
        for consumer in consumers:
            consumer.close()


def _parse_perf_row(output: str) -> tuple[float, float, int, float]:
    """(start s, end s, records, rebalance s) from consumer-perf-test's data row."""
    fields = [f.strip() for f in output.strip().splitlines()[-1].split(",")]

    def when(text: str) -> float:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S:%f").timestamp()

    return when(fields[0]), when(fields[1]), int(float(fields[4])), float(fields[6]) / 1000


def perf_consumers(bootstrap: str, topic: str, records: int, processes: int, group: str | None) -> tuple[float, float]:
    """(records/s from the first start to the last end, records/s once every member was assigned)."""
    share = records // processes
    command = [
        sys.executable, "-m", "zkraft", "consumer-perf-test", "--bootstrap-server", bootstrap,
        "--topic", topic, "--messages", str(share), "--timeout", "30000",
    ]  # fmt: skip
    if group is not None:
        command += ["--group", group]
    running = [
        subprocess.Popen(command, cwd=REPO_ROOT, env=subprocess_env(), stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    rows = []
    for proc in running:
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"consumer-perf-test failed: {out[-300:]}")
        rows.append(_parse_perf_row(out))
    start = min(r[0] for r in rows)
    fetching = max(r[0] + r[3] for r in rows)  # the last member to finish joining starts fetching here
    end = max(r[1] for r in rows)
    total = sum(r[2] for r in rows)
    return total / max(end - start, 1e-6), total / max(end - fetching, 1e-6)


def cleaner_figures(root: Path, megabytes: int) -> tuple[float, float]:
    """(cleaner MB/s, plain segment read MB/s) over one compacted log."""
    log = PartitionLog(
        root / "clean-0",
        LogConfig(segment_bytes=16 * 1024 * 1024, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0),
        structlog.get_logger(),
    )
    value = os.urandom(100)
    written, i = 0, 0
    while written < megabytes * 1024 * 1024:
        builder = RecordBatchBuilder()
        for _ in range(500):
            builder.append(b"key-%05d" % (i % 10_000), value)
            i += 1
        data = bytearray(builder.build())
        written += len(data)
        log.append(data, 0)
    log.roll()
    started = time.monotonic()
    read = sum(len(s.pread(0, s.size)) for s in log.segments[:-1])
    read_s = time.monotonic() - started
    task = plan_clean(log, 0, log.log_end_offset, now_ms=time.time_ns() // 1_000_000)
    assert task is not None
    started = time.monotonic()
    task.compute()
    clean_s = time.monotonic() - started
    task.discard()
    log.close()
    return read / 1e6 / clean_s, read / 1e6 / read_s


def one_run(run: int, args: argparse.Namespace, root: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    with KafkaCluster(
        root / f"run-{run}", brokers=3, broker_properties=BROKER_PROPERTIES, quorum_properties=BENCH_QUORUM_PROPERTIES
    ) as cluster:
        cluster.start()
        cluster.create_topic("groups", partitions=PARTITIONS, replication_factor=1)
        produce_evenly(cluster.bootstrap_servers, "groups", args.records)
        figures["rebalance_join_s"] = rebalance_join(cluster.bootstrap_servers, "groups")
        emit({"run": run, "measure": "rebalance_join", "seconds": round(figures["rebalance_join_s"], 3)})
        figures["single_read"], _ = perf_consumers(cluster.bootstrap_servers, "groups", args.records, 1, None)
        emit({"run": run, "measure": "single_read", "records_per_s": round(figures["single_read"])})
        # Warm-up: the first group use creates __consumer_offsets (50 partitions); not part of the figure.
        perf_consumers(cluster.bootstrap_servers, "groups", PARTITIONS, 1, "warm-up")
        total, fetching = perf_consumers(cluster.bootstrap_servers, "groups", args.records, 3, f"bench-{run}")
        figures["group_read"], figures["group_read_after_join"] = total, fetching
        emit(
            {
                "run": run,
                "measure": "group_read_3_consumers",
                "records_per_s": round(total),
                "records_per_s_after_join": round(fetching),
            }
        )
    clean, read = cleaner_figures(root / f"clean-{run}", args.clean_mb)
    figures["cleaner_mb_s"], figures["segment_read_mb_s"] = clean, read
    emit({"run": run, "measure": "cleaner", "mb_per_s": round(clean, 1), "segment_read_mb_per_s": round(read, 1)})
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_200_000)
    parser.add_argument("--clean-mb", type=int, default=64)
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="zkraft-group-bench-") as tmp:
        for run in range(1, args.runs + 1):
            runs.append(one_run(run, args, Path(tmp)))
    summary = {k: median_or_none([r.get(k) for r in runs]) for k in sorted({k for r in runs for k in r})}
    if summary.get("group_read") and summary.get("single_read"):
        summary["group_over_single"] = round(statistics.median(r["group_read"] / r["single_read"] for r in runs), 2)
    emit({"measure": "summary", "runs": len(runs), **summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
