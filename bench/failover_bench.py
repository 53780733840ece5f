"""Failover benchmark: partition unavailability after a broker SIGKILL, and controlled-shutdown leadership moves.

    python3 bench/failover_bench.py [--runs 3] [--partitions 100,1000] [--shutdown-partitions 900] [--keep]

Each measurement runs on a fresh loopback cluster (tests/kafka_harness.py: 3
quorum nodes, 3 brokers, zookeeper.session.timeout.ms 4000 unless
`--session-timeout-ms`), one topic, RF 3, min.insync.replicas 2.

`kill` (per partition count): SIGKILL a broker that is not the controller, at
`kill_wall`. From that moment each survivor is probed with one raw gRPC
Produce (acks=all, a one-record batch for every still-unavailable affected
partition) at a time, `--probe-backoff-ms` apart; a partition is available at
the first probe response that accepts its write. Affected partitions are the
ones the killed broker led. Figures (seconds from the kill):

* `session_timeout_s`: configured; nothing can happen before the quorum expires the session;
* `detected_s`: the controller's `broker_change` event naming the dead broker;
* `first_leader_move_s` / `last_leader_move_s`: the controller's first and last
  `OfflinePartition -> OnlinePartition` line for the topic in state-change.log;
* `isr_removals_done_s`: its last `OnlineReplica -> OfflineReplica` line for the dead broker;
* `all_available_s`: the last affected partition accepting an acks=all write (the headline);
* `after_detection_s` = all_available_s − detected_s: what the target (< 3 s at 1,000 partitions) is about.

`controlled_shutdown` (`--shutdown-partitions`, default 900 so that the
victim leads ~300 on 3 brokers): SIGTERM a broker that is not the controller;
`request_received_s` (the controller's `controlled_shutdown` event),
`succeeded_s` (the broker's `controlled_shutdown_succeeded`: it leads nothing),
`exited_s`; `controller_handling_s` = succeeded − received. After exit the
znodes are checked: the victim must lead nothing. Target: succeeded_s < 2 s.

Log timestamps come from the broker processes (same host clock). Output: JSON
lines via bench/figures.py `emit`, then a `summary` with medians over the
`--runs` that were undisturbed (`session_churn` 0: no session expired and the
controller did not move; on an overloaded machine 4 s sessions expire and the
run measures the overload). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import emit, median_or_none  # noqa: E402
from client.kafka.records import RecordBatchBuilder  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import BENCH_QUORUM_PROPERTIES  # noqa: E402
from zkraft_proto import broker_pb2 as pb  # noqa: E402
from zkraft_proto import broker_pb2_grpc  # noqa: E402

TOPIC = "fo"
TARGETS = {"kill_1000_after_detection_s": 3.0, "controlled_shutdown_300_s": 2.0}
SETUP_TIMEOUT_S = 300.0
MEASURE_TIMEOUT_S = 120.0
PROBE_RPC_TIMEOUT_S = 30.0
START_ATTEMPTS_MAX = 2
_STATE_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+ (.*)$")


# ---------------------------------------------------------------- timestamps


def json_ts(record: dict[str, Any]) -> float:
    """A structlog ISO-8601 UTC timestamp as epoch seconds."""
    return dt.datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()


def state_change_entries(path: Path) -> list[tuple[float, str]]:
    """(epoch seconds, message) of each state-change.log line; log4j local time with milliseconds."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _STATE_LINE.match(line)
        if m:
            when = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((when, m.group(2)))
    return out


def rel(t: float | None, origin: float) -> float | None:
    return None if t is None else round(t - origin, 3)


# ---------------------------------------------------------------- cluster


def start_cluster(root: Path, partitions: int, session_timeout_ms: int) -> KafkaCluster:
    """A fresh cluster with the topic, every ISR full. A start that fails (a port taken between the harness
    picking it and the broker binding it) is retried once in a new directory."""
    props = {"zookeeper.session.timeout.ms": str(session_timeout_ms), "replica.lag.time.max.ms": "10000"}
    for attempt in range(START_ATTEMPTS_MAX):
        cluster = KafkaCluster(
            root / f"attempt-{attempt}", brokers=3, broker_properties=props, quorum_properties=BENCH_QUORUM_PROPERTIES
        )
        try:
            cluster.start()
            break
        except AssertionError as e:
            cluster.stop_all()
            emit({"record": "start_failed", "dir": str(root), "attempt": attempt, "error": str(e)[:500]})
    else:
        raise RuntimeError(f"cluster in {root} did not start in {START_ATTEMPTS_MAX} attempts")
    cluster.create_topic(
        TOPIC, partitions=partitions, replication_factor=3, timeout_s=SETUP_TIMEOUT_S, min_insync_replicas="2"
    )
    wait_until(
        lambda: all(len(s.isr) == 3 for s in all_states(cluster, partitions).values()),
        SETUP_TIMEOUT_S,
        interval_s=0.5,
        message="ISRs did not fill",
    )
    return cluster


def all_states(cluster: KafkaCluster, partitions: int) -> dict[int, Any]:
    return {p: cluster.partition_state(TOPIC, p) for p in range(partitions)}


def session_churn(cluster: KafkaCluster) -> int:
    """Sessions lost and re-established, controllers elected beyond the first: non-zero flags a disturbed run
    (e.g. a CPU-starved machine where 4 s sessions expire)."""
    lost = sum(len(cluster.log_events(b, "session_reestablished")) for b in cluster.broker_ids)
    elected = sum(len(cluster.log_events(b, "controller_elected")) for b in cluster.broker_ids)
    return lost + max(0, elected - 1)


def pick_victim(cluster: KafkaCluster, states: dict[int, Any]) -> int:
    controller = cluster.wait_controller()
    led: dict[int, int] = {b: 0 for b in cluster.broker_ids if b != controller}
    for s in states.values():
        if s.leader in led:
            led[s.leader] += 1
    return max(led, key=lambda b: led[b])


# ---------------------------------------------------------------- probing


def probe_request(partitions: set[int], payload: bytes) -> pb.ProduceRequest:
    return pb.ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        topics=[
            pb.TopicProduceData(
                name=TOPIC, partitions=[pb.PartitionProduceData(index=p, records=payload) for p in sorted(partitions)]
            )
        ],
    )


async def probe_until_available(
    channels: dict[int, grpc.aio.Channel], affected: set[int], backoff_s: float
) -> tuple[dict[int, float], int]:
    """Monotonic time at which each affected partition first accepted an acks=all write; requests sent.

    One prober per surviving broker, one request in flight each: every pending partition in one Produce.
    """
    builder = RecordBatchBuilder()
    builder.append(None, b"probe")
    payload = builder.build()
    available: dict[int, float] = {}
    sent = 0

    async def prober(channel: grpc.aio.Channel) -> None:
        nonlocal sent
        stub = broker_pb2_grpc.BrokerStub(channel)
        deadline = time.monotonic() + MEASURE_TIMEOUT_S
        while time.monotonic() < deadline:
            pending = affected - available.keys()
            if not pending:
                return
            sent += 1
            try:
                response = await stub.Produce(probe_request(pending, payload), timeout=PROBE_RPC_TIMEOUT_S)
            except grpc.aio.AioRpcError:
                await asyncio.sleep(backoff_s)
                continue
            now = time.monotonic()
            for part in response.responses[0].partitions:
                if part.error_code == 0:
                    available.setdefault(part.index, now)
            if affected - available.keys():
                await asyncio.sleep(backoff_s)

    await asyncio.gather(*(prober(c) for c in channels.values()))
    return available, sent


async def kill_and_probe(
    cluster: KafkaCluster, victim: int, affected: set[int], backoff_s: float
) -> tuple[dict[int, float], int, float, float]:
    """Open channels to the survivors, SIGKILL `victim`, probe; also returns the kill's monotonic and wall time."""
    channels = {b: grpc.aio.insecure_channel(cluster.broker_address(b)) for b in cluster.broker_ids if b != victim}
    try:
        for channel in channels.values():
            await asyncio.wait_for(channel.channel_ready(), PROBE_RPC_TIMEOUT_S)
        cluster.kill_broker(victim)
        killed_mono, killed_wall = time.monotonic(), time.time()
        available, sent = await probe_until_available(channels, affected, backoff_s)
        return available, sent, killed_mono, killed_wall
    finally:
        for channel in channels.values():
            await channel.close()


# ---------------------------------------------------------------- measurements


def measure_kill(root: Path, partitions: int, args: argparse.Namespace, run: int) -> dict[str, Any]:
    setup_start = time.monotonic()
    cluster = start_cluster(root, partitions, args.session_timeout_ms)
    try:
        setup_s = time.monotonic() - setup_start
        states = all_states(cluster, partitions)
        victim = pick_victim(cluster, states)
        controller = cluster.wait_controller()
        affected = {p for p, s in states.items() if s.leader == victim}
        available, sent, killed_mono, killed_wall = asyncio.run(
            kill_and_probe(cluster, victim, affected, args.probe_backoff_ms / 1000)
        )
        # The controller's side, from its logs.
        detected = next(
            (
                json_ts(e)
                for e in cluster.log_events(controller, "broker_change")
                if victim in e.get("dead", []) and json_ts(e) >= killed_wall
            ),
            None,
        )
        entries = [(t, m) for t, m in state_change_entries(cluster.data_dir(controller) / "state-change.log")]
        entries = [(t, m) for t, m in entries if t >= killed_wall - 0.001]
        moves = [
            t for t, m in entries if f"partition {TOPIC}-" in m and "from OfflinePartition to OnlinePartition" in m
        ]
        removals = [t for t, m in entries if f"replica {victim} " in m and "to OfflineReplica" in m]
        times = sorted(available.values())
        all_available = (times[-1] - killed_mono) if len(available) == len(affected) and times else None
        record = {
            "record": "kill",
            "run": run,
            "partitions": partitions,
            "affected_partitions": len(affected),
            "available_partitions": len(available),
            "victim": victim,
            "controller": controller,
            "session_timeout_s": args.session_timeout_ms / 1000,
            "detected_s": rel(detected, killed_wall),
            "first_leader_move_s": rel(moves[0] if moves else None, killed_wall),
            "last_leader_move_s": rel(moves[-1] if moves else None, killed_wall),
            "leader_moves_logged": len(moves),
            "isr_removals_done_s": rel(removals[-1] if removals else None, killed_wall),
            "first_available_s": round(times[0] - killed_mono, 3) if times else None,
            "all_available_s": round(all_available, 3) if all_available is not None else None,
            "after_detection_s": (
                round(all_available - (detected - killed_wall), 3)
                if all_available is not None and detected is not None
                else None
            ),
            "probe_requests": sent,
            "setup_s": round(setup_s, 1),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "session_churn": session_churn(cluster),
        }
        emit(record)
        return record
    finally:
        cluster.stop_all()


def measure_controlled_shutdown(root: Path, partitions: int, args: argparse.Namespace, run: int) -> dict[str, Any]:
    setup_start = time.monotonic()
    cluster = start_cluster(root, partitions, args.session_timeout_ms)
    try:
        setup_s = time.monotonic() - setup_start
        states = all_states(cluster, partitions)
        victim = pick_victim(cluster, states)
        controller = cluster.wait_controller()
        led = sum(1 for s in states.values() if s.leader == victim)
        started_mono, started_wall = time.monotonic(), time.time()
        exit_code = cluster.stop_broker(victim, timeout_s=MEASURE_TIMEOUT_S)
        exited_s = time.monotonic() - started_mono
        received = next(
            (json_ts(e) for e in cluster.log_events(controller, "controlled_shutdown") if e.get("target") == victim),
            None,
        )
        succeeded = next((json_ts(e) for e in cluster.log_events(victim, "controlled_shutdown_succeeded")), None)
        after = all_states(cluster, partitions)
        still_led = sum(1 for s in after.values() if s.leader == victim)
        offline = sum(1 for s in after.values() if s.leader < 0)
        record = {
            "record": "controlled_shutdown",
            "run": run,
            "partitions": partitions,
            "led_partitions": led,
            "victim": victim,
            "controller": controller,
            "exit_code": exit_code,
            "request_received_s": rel(received, started_wall),
            "succeeded_s": rel(succeeded, started_wall),
            "controller_handling_s": round(succeeded - received, 3) if succeeded and received else None,
            "exited_s": round(exited_s, 3),
            "still_led_after_exit": still_led,
            "offline_after_exit": offline,
            "setup_s": round(setup_s, 1),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "session_churn": session_churn(cluster),
        }
        emit(record)
        return record
    finally:
        cluster.stop_all()


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", default="100,1000", help="comma-separated partition counts for the kill")
    parser.add_argument("--shutdown-partitions", type=int, default=900, help="0 skips the controlled shutdown")
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    parser.add_argument("--probe-backoff-ms", type=float, default=50)
    parser.add_argument("--dir", default=None, help="where the clusters' data goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep data and logs")
    args = parser.parse_args()
    counts = [int(c) for c in args.partitions.split(",") if c]
    base = Path(tempfile.mkdtemp(prefix="failover-bench-", dir=args.dir))
    emit(
        {
            "record": "setup",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "data_dir": str(base),
            "session_timeout_ms": args.session_timeout_ms,
            "probe_backoff_ms": args.probe_backoff_ms,
        }
    )
    kills: dict[int, list[dict[str, Any]]] = {c: [] for c in counts}
    shutdowns: list[dict[str, Any]] = []
    try:
        for run in range(args.runs):
            for count in counts:
                kills[count].append(measure_kill(base / f"kill-{count}-{run}", count, args, run))
            if args.shutdown_partitions:
                shutdowns.append(
                    measure_controlled_shutdown(base / f"shutdown-{run}", args.shutdown_partitions, args, run)
                )
    finally:
        # Medians over undisturbed runs only: a run whose sessions expired or whose controller moved measures
        # the machine's overload, not failover (its records are still printed above, with session_churn > 0).
        summary: dict[str, Any] = {"record": "summary", "runs": args.runs, "targets": TARGETS}
        for count, records in kills.items():
            clean = [r for r in records if r.get("session_churn") == 0]
            summary[f"kill_{count}_disturbed_runs"] = len(records) - len(clean)
            for key in ("detected_s", "first_leader_move_s", "last_leader_move_s", "isr_removals_done_s",
                        "all_available_s", "after_detection_s"):  # fmt: skip
                summary[f"kill_{count}_{key}_median"] = median_or_none([r.get(key) for r in clean])
        clean = [r for r in shutdowns if r.get("session_churn") == 0]
        summary["controlled_shutdown_disturbed_runs"] = len(shutdowns) - len(clean)
        for key in ("request_received_s", "succeeded_s", "controller_handling_s", "exited_s", "led_partitions"):
            summary[f"controlled_shutdown_{key}_median"] = median_or_none([r.get(key) for r in clean])
        emit(summary)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
