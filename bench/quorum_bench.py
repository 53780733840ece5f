"""Quorum benchmark: committed writes/s, commit latency and leader failover on a 3-node loopback cluster.

    python3 bench/quorum_bench.py [--seconds 5] [--runs 3] [--failovers 5] [--inflight 1,256]
                                  [--steady-seconds 30] [--real-zookeeper]

Every figure goes through the node's proposal path (`QuorumClient.set`: one
Propose RPC per event-loop turn, acknowledged after commit on a majority with
fsync and apply on the leader) against real `zkraft quorum start` processes
with default settings. Output is JSON lines on stdout, one object per
measurement and a final `summary` object; nothing is asserted (docs/DESIGN.md §11:
benchmarks print figures, tests never assert times).

Measurements, in the order they run:

* `setup`: machine and settings, so figures from different machines compare.
* `lmdb_fsync_baseline`: the disk's raw rate of one LMDB write transaction of
  100 bytes plus `env.sync(True)`, opened as the node's log store opens it
  (sync=False, metasync=False, explicit sync), in the same directory as the
  cluster data. This separates the machine's fsync from our overhead.
* `throughput` (per run and per in-flight level): a fresh cluster per run;
  `inflight` workers each keep one proposal outstanding (distinct keys,
  100-byte values); after a warm-up, writes acknowledged within a fixed window
  are counted, and the latency (call to acknowledgement) of every proposal
  started and finished inside the window gives p50/p99. `node_cpu_us_per_write`
  is the three nodes' CPU time (utime + stime) over the window per write: other
  load on the machine moves it much less than writes/s, so it is the figure to
  compare two versions of the code on a busy machine.
* `steady` (on the failover cluster, before its first kill): elections under
  steady load with no fault: `--steady-inflight` writers for `--steady-seconds`
  while every node's Status is polled; `term_changes` (the highest term seen at
  the end over the one at the start) and `elections_per_minute` must be 0: a
  follower campaigns at once only when its stream to the leader breaks hard
  (RaftConfig.campaign_on_leader_loss), never on load alone.
* `failover` (per round): one writer keeps one proposal in flight; the
  leader is SIGKILLed; `failover_s` is the time from the kill to the first
  write acknowledged by the new leader: the first acknowledgement after the
  kill from another server than the killed one (only the leader answers a
  proposal). A reply the old leader sent just before it died is counted in
  `acks_from_old_leader_after_kill` and skipped. `leader_known_s` is when a
  survivor was first seen naming a leader of a newer term (Status polled every
  10 ms, late on a loaded machine), so `failover_s - leader_known_s` is
  roughly the client's rediscovery. The killed node is then restarted and `rejoin_s` is the time
  until it follows the leader of the new term and has applied everything that
  leader had committed when the node came back.
* `failover` with `"system": "zookeeper"` (`--real-zookeeper`): the same
  rounds on a real 3-node Apache ZooKeeper with a kazoo writer
  (bench/real_zookeeper_failover.py), after zkraft's.
* `summary`: medians over runs for throughput and latency; median, min and
  max over failover rounds (and ZooKeeper's); elections per minute.

Processes come from `tests/quorum_harness.py` (`QuorumProcesses`, default
timeouts, loop threads placed by role as `zkraft up` runs them). All nodes listen on 127.0.0.1; every wait has a
deadline; every node is SIGKILLed on exit, on Ctrl-C and on SIGTERM. Data
lives in a temporary directory (`--dir` chooses the disk), removed at the end
unless `--keep` (then the node logs stay for a look).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import lmdb  # noqa: E402

from bench.figures import emit, median_or_none, percentile_ms, process_cpu_seconds  # noqa: E402
from quorum.register_client import QuorumClient, QuorumClientError  # noqa: E402
from quorum.settings import NodeSettings  # noqa: E402
from runtime import event_loop  # noqa: E402
from tests.quorum_harness import BENCH_QUORUM_PROPERTIES, QuorumProcesses, StatusPoller, wait_for_leader  # noqa: E402

CLUSTER_SIZE = 3
STATUS_TIMEOUT_S = 1.0
STATUS_POLL_S = 0.01
LEADER_TIMEOUT_S = 120.0  # a loaded machine starts three nodes slowly
REJOIN_TIMEOUT_S = 60.0
FAILOVER_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 30.0
STEADY_WRITES_BEFORE_KILL = 50
STEADY_POLL_S = 0.1
STEADY_TIMEOUT_S = 20.0
CLIENT_REQUEST_TIMEOUT_S = 10.0
BASELINE_MAP_SIZE_BYTES = 1 << 30


# ---------------------------------------------------------------- status
async def _statuses(poller: StatusPoller, addresses: dict[int, str], ids: Sequence[int]) -> dict[int, Any]:
    """Status of each of `ids` that answers in time."""
    answers = await poller.statuses([addresses[i] for i in ids])
    return {i: answers[addresses[i]] for i in ids if answers[addresses[i]] is not None}


# ---------------------------------------------------------------- baseline
def lmdb_fsync_baseline(directory: Path, seconds: float, payload: bytes) -> dict[str, Any]:
    """One process: write txn of `payload` + env.sync(True), repeated for `seconds`."""
    path = directory / "lmdb-baseline"
    path.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), map_size=BASELINE_MAP_SIZE_BYTES, sync=False, metasync=False)
    samples: list[int] = []
    try:
        start = time.perf_counter()
        end = start + seconds
        i = 0
        while time.perf_counter() < end:
            t0 = time.perf_counter_ns()
            with env.begin(write=True) as txn:
                txn.put(i.to_bytes(8, "big"), payload)
            env.sync(True)
            samples.append(time.perf_counter_ns() - t0)
            i += 1
        elapsed = time.perf_counter() - start
    finally:
        env.close()
        shutil.rmtree(path, ignore_errors=True)
    samples.sort()
    return {
        "measure": "lmdb_fsync_baseline",
        "seconds": round(elapsed, 3),
        "syncs": len(samples),
        "syncs_per_s": round(len(samples) / elapsed, 1),
        "p50_ms": percentile_ms(samples, 0.50),
        "p99_ms": percentile_ms(samples, 0.99),
    }


# ---------------------------------------------------------------- throughput
@dataclass(slots=True)
class _Window:
    start_ns: int
    end_ns: int
    committed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_ns: list[int] = field(default_factory=list)
    cpu_at_start: float | None = None  # the nodes' CPU seconds at the window's first write
    cpu_at_end: float | None = None  # ... and at the first write after it


async def measure_throughput(
    client: QuorumClient,
    inflight: int,
    warmup_s: float,
    seconds: float,
    key_prefix: str,
    payload: bytes,
    node_pids: Sequence[int] = (),
) -> dict[str, Any]:
    now = time.perf_counter_ns()
    window = _Window(start_ns=now + int(warmup_s * 1e9), end_ns=now + int((warmup_s + seconds) * 1e9))

    async def worker(w: int) -> None:
        i = 0
        while time.perf_counter_ns() < window.end_ns:
            key = f"{key_prefix}/{w}/{i}".encode()
            i += 1
            t0 = time.perf_counter_ns()
            try:
                await client.set(key, payload)
            except QuorumClientError as exc:
                window.errors[exc.code] = window.errors.get(exc.code, 0) + 1
                await asyncio.sleep(0.01)  # do not spin on a failing cluster
                continue
            t1 = time.perf_counter_ns()
            if t1 > window.end_ns and window.cpu_at_end is None:
                window.cpu_at_end = process_cpu_seconds(node_pids)
            if window.start_ns <= t1 <= window.end_ns:
                window.committed += 1
                if window.cpu_at_start is None:  # the first write in the window starts the CPU count
                    window.cpu_at_start = process_cpu_seconds(node_pids)
                if t0 >= window.start_ns:
                    window.latencies_ns.append(t1 - t0)

    tasks = [asyncio.create_task(worker(w)) for w in range(inflight)]
    done, pending = await asyncio.wait(tasks, timeout=warmup_s + seconds + DRAIN_TIMEOUT_S)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for t in done:
        t.result()  # a bug in the benchmark itself should not hide
    lat = sorted(window.latencies_ns)
    # Node CPU per write over the window (the nodes' utime + stime): much less moved than writes/s by other load
    # on the machine, so it is the figure to compare two versions on a busy machine.
    started, ended = window.cpu_at_start, window.cpu_at_end
    node_cpu_s = ended - started if started is not None and ended is not None else None
    return {
        "inflight": inflight,
        "seconds": seconds,
        "committed": window.committed,
        "writes_per_s": round(window.committed / seconds, 1),
        "p50_ms": percentile_ms(lat, 0.50),
        "p99_ms": percentile_ms(lat, 0.99),
        "max_ms": percentile_ms(lat, 1.0),
        "latency_samples": len(lat),
        "errors": window.errors,
        "unfinished_workers": len(pending),
        "node_cpu_us_per_write": (
            round(node_cpu_s * 1e6 / window.committed, 1) if node_cpu_s is not None and window.committed else None
        ),
    }


async def throughput_run(root: Path, run: int, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    results = []
    with QuorumProcesses(root / f"run-{run}", n=CLUSTER_SIZE, properties=node_properties(args)) as procs:
        procs.start_all()
        await wait_for_leader(procs.addresses, LEADER_TIMEOUT_S)
        for inflight in args.inflight:
            async with QuorumClient(list(procs.addresses.values()), request_timeout_s=CLIENT_REQUEST_TIMEOUT_S) as c:
                pids = [pid for pid in map(procs.pid, procs.addresses) if pid is not None]
                figures = await measure_throughput(
                    c, inflight, args.warmup, args.seconds, f"run{run}/inflight{inflight}", payload, pids
                )
            record = {"measure": "throughput", "run": run, **figures}
            emit(record)
            results.append(record)
    return results


# ---------------------------------------------------------------- elections under steady load
async def steady_elections(
    procs: QuorumProcesses, poller: StatusPoller, client: QuorumClient, args: argparse.Namespace, payload: bytes
) -> dict[str, Any]:
    """Terms and leaders every node reports while `--steady-inflight` writers load the cluster, no fault."""
    addresses = procs.addresses
    ids = sorted(addresses)
    start = await _statuses(poller, addresses, ids)
    term_at_start = max(s.term for s in start.values())
    leaders: set[tuple[int, int]] = {(s.term, s.leader) for s in start.values() if s.leader}
    polls = unanswered = 0
    loading = asyncio.create_task(
        measure_throughput(client, args.steady_inflight, args.warmup, args.steady_seconds, "steady", payload)
    )
    while not loading.done():
        live = await _statuses(poller, addresses, ids)
        polls += 1
        unanswered += len(ids) - len(live)
        leaders |= {(s.term, s.leader) for s in live.values() if s.leader}
        await asyncio.wait({loading}, timeout=STEADY_POLL_S)
    load = loading.result()
    end = await _statuses(poller, addresses, ids)
    term_changes = max(s.term for s in end.values()) - term_at_start
    window_s = args.warmup + args.steady_seconds
    return {
        "measure": "steady",
        "inflight": args.steady_inflight,
        "seconds": round(window_s, 3),
        "writes_per_s": load["writes_per_s"],
        "errors": load["errors"],
        "term_changes": term_changes,
        "elections_per_minute": round(term_changes * 60 / window_s, 3),
        "leaders_seen": sorted(leaders),
        "status_polls": polls,
        "status_unanswered": unanswered,
    }


# ---------------------------------------------------------------- failover
@dataclass(slots=True)
class _Writer:
    """One proposal in flight until stopped; remembers every acknowledgement and every error."""

    client: QuorumClient
    payload: bytes
    acks: list[tuple[int, int, int, str]] = field(default_factory=list)  # (call ns, ack ns, log index, server)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (ns, error code)
    stopped: bool = False

    async def run(self, key_prefix: str) -> None:
        i = 0
        while not self.stopped:
            key = f"{key_prefix}/{i}".encode()
            i += 1
            t0 = time.perf_counter_ns()
            try:
                p = await self.client.set(key, self.payload)
            except QuorumClientError as exc:
                # The client gave up (its retries are bounded): note it and propose the next write.
                self.errors.append((time.perf_counter_ns(), exc.code))
                await asyncio.sleep(0.005)
                continue
            self.acks.append((t0, time.perf_counter_ns(), p.index, self.client.leader))


@dataclass(slots=True)
class _TermWatch:
    """What polling the survivors' Status (every STATUS_POLL_S) saw after the kill."""

    seen_ns: int = 0  # when a survivor first reported a leader in a newer term
    new_leader: int = 0
    new_term: int = 0


async def _watch_terms(
    poller: StatusPoller, addresses: dict[int, str], survivors: Sequence[int], old_term: int, watch: _TermWatch
) -> None:
    deadline = time.monotonic() + FAILOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        live = await _statuses(poller, addresses, survivors)
        for s in live.values():
            if s.term > old_term and s.leader in survivors:
                watch.seen_ns, watch.new_leader, watch.new_term = time.perf_counter_ns(), s.leader, s.term
                return
        await asyncio.sleep(STATUS_POLL_S)
    raise TimeoutError(f"no survivor reported a leader newer than term {old_term} within {FAILOVER_TIMEOUT_S:g} s")


async def _wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s")
        await asyncio.sleep(0.001)


async def _wait_rejoined(poller: StatusPoller, addresses: dict[int, str], node_id: int) -> dict[str, Any]:
    """Until `node_id` follows the leader in its term and has applied what that leader had committed at first look."""
    deadline = time.monotonic() + REJOIN_TIMEOUT_S
    target_commit: int | None = None
    while time.monotonic() < deadline:
        statuses = await _statuses(poller, addresses, sorted(addresses))
        leaders = [s for s in statuses.values() if s.role == "leader"]
        me = statuses.get(node_id)
        if leaders and me is not None:
            leader = max(leaders, key=lambda s: s.term)
            if target_commit is None:
                target_commit = leader.commit_index
            if me.term == leader.term and me.leader == leader.id and me.applied_index >= target_commit:
                return {"rejoined_term": me.term, "rejoined_applied_index": me.applied_index}
        await asyncio.sleep(0.02)
    raise TimeoutError(f"node {node_id} did not rejoin within {REJOIN_TIMEOUT_S:g} s")


async def failover_round(procs: QuorumProcesses, poller: StatusPoller, writer: _Writer, rnd: int) -> dict[str, Any]:
    addresses: dict[int, str] = procs.addresses
    acks_before = len(writer.acks)
    await _wait_for(
        lambda: len(writer.acks) >= acks_before + STEADY_WRITES_BEFORE_KILL,
        STEADY_TIMEOUT_S,
        "the writer made no steady progress before the kill",
    )
    leader_id, _ = await wait_for_leader(addresses, LEADER_TIMEOUT_S)
    old = (await _statuses(poller, addresses, [leader_id])).get(leader_id)
    if old is None or old.role != "leader":
        raise RuntimeError(f"node {leader_id} stopped leading before the kill")
    survivors = [i for i in sorted(addresses) if i != leader_id]
    watch = _TermWatch()
    n_acks, n_errors = len(writer.acks), len(writer.errors)
    kill_ns = time.perf_counter_ns()
    watcher = asyncio.create_task(_watch_terms(poller, addresses, survivors, old.term, watch))
    # SIGKILL and reap in a thread, so the event loop keeps taking acknowledgements meanwhile.
    await asyncio.to_thread(procs.kill, leader_id)
    dead_ns = time.perf_counter_ns()
    try:
        await asyncio.wait_for(watcher, FAILOVER_TIMEOUT_S + 1)
    finally:
        watcher.cancel()
    killed = addresses[leader_id]
    await _wait_for(
        lambda: any(server != killed for _, _, _, server in writer.acks[n_acks:]),
        FAILOVER_TIMEOUT_S,
        "no write was acknowledged by the new leader",
    )
    t0, t1, index, _ = next(a for a in writer.acks[n_acks:] if a[3] != killed)
    errors_during: dict[str, int] = {}
    for t, code in writer.errors[n_errors:]:
        if t <= t1:
            errors_during[code] = errors_during.get(code, 0) + 1
    record: dict[str, Any] = {
        "measure": "failover",
        "round": rnd,
        "killed": leader_id,
        "old_term": old.term,
        "new_leader": watch.new_leader,
        "new_term": watch.new_term,
        "failover_s": round((t1 - kill_ns) / 1e9, 4),
        "leader_known_s": round((watch.seen_ns - kill_ns) / 1e9, 4),
        "kill_reaped_s": round((dead_ns - kill_ns) / 1e9, 4),
        "first_write_index": index,
        "max_index_acked_before_kill": max((a[2] for a in writer.acks[:n_acks]), default=0),
        "acks_from_old_leader_after_kill": sum(1 for a in writer.acks[n_acks:] if a[3] == killed),
        "first_write_call_to_ack_s": round((t1 - t0) / 1e9, 4),
        "client_errors_before_first_write": errors_during,
    }
    restart_ns = time.perf_counter_ns()
    procs.restart(leader_id)
    record.update(await _wait_rejoined(poller, addresses, leader_id))
    record["rejoin_s"] = round((time.perf_counter_ns() - restart_ns) / 1e9, 3)
    return record


async def failover_rounds(root: Path, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    results = []
    with QuorumProcesses(root / "failover", n=CLUSTER_SIZE, properties=node_properties(args)) as procs:
        procs.start_all()
        await wait_for_leader(procs.addresses, LEADER_TIMEOUT_S)
        async with (
            QuorumClient(list(procs.addresses.values()), request_timeout_s=CLIENT_REQUEST_TIMEOUT_S) as client,
            StatusPoller(STATUS_TIMEOUT_S) as poller,  # status polls on channels of their own
        ):
            if args.steady_seconds:
                steady = await steady_elections(procs, poller, client, args, payload)
                emit(steady)
                results.append(steady)
            writer = _Writer(client, payload)
            writer_task = asyncio.create_task(writer.run("failover"))
            try:
                for rnd in range(1, args.failovers + 1):
                    try:
                        record = await failover_round(procs, poller, writer, rnd)
                    except (TimeoutError, AssertionError, RuntimeError) as exc:
                        record = {"measure": "failover", "round": rnd, "error": f"{type(exc).__name__}: {exc}"}
                        for node_id in procs.addresses:  # bring the cluster back whole for the next round
                            if not procs.alive(node_id):
                                procs.restart(node_id)
                    emit(record)
                    results.append(record)
            finally:
                writer.stopped = True
                done, _ = await asyncio.wait({writer_task}, timeout=CLIENT_REQUEST_TIMEOUT_S + 1)
                if not done:
                    writer_task.cancel()
                    await asyncio.gather(writer_task, return_exceptions=True)
                elif writer_task.exception() is not None:
                    raise writer_task.exception()  # type: ignore[misc]
    return results


# ---------------------------------------------------------------- summary and main
def summarize(
    baseline: dict[str, Any], runs: list[dict[str, Any]], records: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "measure": "summary",
        "runs": args.runs,
        "seconds_per_run": args.seconds,
        "lmdb_fsync_per_s": baseline["syncs_per_s"],
        # Other work on the machine skews every figure: say how busy it was.
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    for inflight in args.inflight:
        mine = [r for r in runs if r["inflight"] == inflight]
        summary[f"inflight_{inflight}"] = {
            "writes_per_s_median": median_or_none([r["writes_per_s"] for r in mine]),
            "writes_per_s_runs": [r["writes_per_s"] for r in mine],
            "p50_ms_median": median_or_none([r["p50_ms"] for r in mine]),
            "p99_ms_median": median_or_none([r["p99_ms"] for r in mine]),
            "node_cpu_us_per_write_median": median_or_none(
                [r["node_cpu_us_per_write"] for r in mine if r["node_cpu_us_per_write"] is not None]
            ),
            "errors": sum(sum(r["errors"].values()) for r in mine),
        }
    failovers = [r for r in records if r["measure"] == "failover" and "system" not in r]
    known = [f["leader_known_s"] for f in failovers if "leader_known_s" in f]
    summary["failover"] = {
        **_failover_figures(failovers),
        "leader_known_median_s": median_or_none(known),
        "rejoin_median_s": median_or_none([f.get("rejoin_s") for f in failovers]),
    }
    real = [r for r in records if r["measure"] == "failover" and r.get("system") == "zookeeper"]
    if args.real_zookeeper:
        summary["failover_real_zookeeper"] = _failover_figures(real)
    steady = [r for r in records if r["measure"] == "steady"]
    if steady:
        summary["steady"] = {
            "term_changes": sum(r["term_changes"] for r in steady),
            "elections_per_minute": steady[0]["elections_per_minute"],
            "writes_per_s": steady[0]["writes_per_s"],
        }
    return summary


def _failover_figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [f["failover_s"] for f in rounds if "failover_s" in f]
    return {
        "rounds": len(rounds),
        "failed_rounds": len(rounds) - len(ok),
        "median_s": median_or_none(ok),
        "min_s": min(ok) if ok else None,
        "max_s": max(ok) if ok else None,
    }


def setup_record(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    defaults = NodeSettings(node_id=1, data_dir=root, listen="127.0.0.1:1", peers={1: "127.0.0.1:1"})
    return {
        "measure": "setup",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "data_dir": str(root),
        "cluster_size": CLUSTER_SIZE,
        "node_settings": {
            "tick_ms": defaults.tick_ms,
            "election_timeout_ticks": defaults.election_timeout_ticks,
            "heartbeat_interval_ticks": defaults.heartbeat_interval_ticks,
            "snapshot_interval_entries": defaults.snapshot_interval_entries,
        },
        "properties": node_properties(args),
    }


def node_properties(args: argparse.Namespace) -> dict[str, str]:
    """The nodes' properties: the benchmarks' (tests/quorum_harness.py), then every --property."""
    return {**BENCH_QUORUM_PROPERTIES, **dict(args.property)}


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _positive_ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measured window per throughput figure (default 5)")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up before each window (default 1)")
    p.add_argument("--runs", type=int, default=3, help="throughput repetitions, each on a fresh cluster (default 3)")
    p.add_argument("--inflight", type=_positive_ints, default=[1, 256], help="in-flight levels (default 1,256)")
    p.add_argument("--payload-bytes", type=int, default=100, help="value size of each write (default 100)")
    p.add_argument("--failovers", type=int, default=5, help="leader kills (default 5)")
    p.add_argument(
        "--steady-seconds",
        type=float,
        default=30.0,
        help="window counting elections under steady load before the kills (default 30; 0: none)",
    )
    p.add_argument("--steady-inflight", type=int, default=256, help="writers of that window (default 256)")
    p.add_argument(
        "--real-zookeeper",
        action="store_true",
        help="the same failover rounds on a real 3-node ZooKeeper with kazoo (java and pyspark's jars)",
    )
    p.add_argument("--baseline-seconds", type=float, default=2.0, help="LMDB fsync baseline duration (default 2)")
    p.add_argument(
        "--property",
        type=_property,
        action="append",
        default=[],
        help="a node property for every cluster, e.g. raft.campaign.on.leader.loss=false (repeatable)",
    )
    p.add_argument("--dir", type=Path, default=None, help="parent directory of the data (default: the temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the data directory (node logs) after the run")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.warmup < 0 or args.runs < 0 or args.failovers < 0 or args.payload_bytes < 0:
        p.error("--seconds must be > 0; --warmup, --runs, --failovers, --payload-bytes must be >= 0")
    if args.steady_seconds < 0 or args.steady_inflight < 1:
        p.error("--steady-seconds must be >= 0 and --steady-inflight >= 1")
    if args.real_zookeeper:
        from tests.real_zookeeper import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            p.error(f"--real-zookeeper cannot run here: {reason}")
    return args


async def bench(root: Path, args: argparse.Namespace) -> None:
    payload = os.urandom(args.payload_bytes)
    emit(setup_record(root, args))
    baseline = lmdb_fsync_baseline(root, args.baseline_seconds, payload)
    emit(baseline)
    runs: list[dict[str, Any]] = []
    for run in range(1, args.runs + 1):
        runs += await throughput_run(root, run, args, payload)
    records = await failover_rounds(root, args, payload) if args.failovers or args.steady_seconds else []
    if args.real_zookeeper and args.failovers:
        from bench import real_zookeeper_failover

        records += await asyncio.to_thread(
            real_zookeeper_failover.failover_rounds, root / "real-zookeeper", args.failovers, payload
        )
    emit(summarize(baseline, runs, records, args))


def _raise_keyboard_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)  # SIGTERM cleans up like Ctrl-C
    root = Path(tempfile.mkdtemp(prefix="zkraft-bench-", dir=args.dir))
    try:
        event_loop.run(bench(root, args))
        return 0
    except KeyboardInterrupt:
        emit({"measure": "aborted", "reason": "interrupted"})
        return 130
    except Exception as exc:  # the process boundary: say what failed, keep the logs
        args.keep = True
        emit({"measure": "aborted", "reason": f"{type(exc).__name__}: {exc}", "logs": str(root)})
        return 1
    finally:
        # Every QuorumProcesses context has stopped its nodes by now (its __exit__ ran while unwinding).
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
