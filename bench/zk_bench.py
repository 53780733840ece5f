"""ZooKeeper benchmark: znode latency, throughput and watch delivery on a 3-node zkraft cluster.

    python3 bench/zk_bench.py [--runs 3] [--clients 1] [--inflight 200] [--seconds 4] [--real-zookeeper]
    python3 bench/zk_bench.py --client kazoo --java [--java-processes 1,4] [--java-inflight 200]

One client process (or `--clients N` processes) against a fresh 3-node
`zkraft quorum start` cluster serving the ZooKeeper state machine, default
node settings, 100-byte values, everything through the public SDK
(`client.zk.aio.AsyncZkClient`), on the event loop zkraft's own processes run
(`runtime.event_loop`: uvloop). Output is JSON lines on stdout, one object per
measurement and a final `summary` object; nothing is asserted (benchmarks
print figures, tests never assert times).

Measurements, per run, each run on fresh clusters:

* `latency_floor`: `bench/latency_floor.py` — a gRPC stream round trip
  between two processes and an fsync contended by three, alone; a create
  cannot be faster than two round trips and one fsync on this machine.
* `quorum_baseline`: the bare quorum's committed writes/s, `QuorumClient.set`
  with `--inflight` writes outstanding on a register-map cluster, measured by
  the same window loop as the ZooKeeper figures. The difference between it and
  `creates/s` is the ZooKeeper layer's cost (sessions, the znode tree, the
  session stream), not consensus.
* `sequential_create`: one create at a time on a client connected to the
  leader; p50/p99 of call-to-reply.
* `watch_fire`: client A on a follower sets a get-watch; client B does
  setData; the time from B's call to A's watch callback, re-arming each time.
  B sits once on the leader and once on the other follower (the write is
  then forwarded): a ZooKeeper client lands on a follower two times in three.
* `ephemeral_gone`: client A creates an ephemeral node, client B (on a
  follower, synced) holds an exists watch on it; the time from A's `close()`
  call to B's DELETED event. A sits once on the leader, once on the other
  follower; each sample is a new session.
* `throughput` for create (distinct paths), setData and getData on the
  leader, getData on a follower: `--clients` worker processes (this script
  with `--worker`), each with its own clients and `inflight / clients`
  coroutines that each keep one request in flight, all measuring the same
  window (a start instant on the system-wide monotonic clock); rates are
  summed, latencies merged.
* `summary`: medians over runs, and each figure next to its target (what a
  real 3-node ZooKeeper reaches on a 2-core machine driven by kazoo with 200
  in flight).

`--real-zookeeper` (optional: java, kazoo and pyspark's ZooKeeper jars) adds,
each run, the same figures for a 3-node Apache ZooKeeper ensemble
(`tests/real_zookeeper.py`, full JIT, fsync on) driven by kazoo, so the
targets are checked against the real thing on the same machine in the same
run. Every record carries `system`: `zkraft` or `zookeeper`. It also adds
`paired` records: sequential create and watch-fire with both clusters up at
once and the two systems taking samples in alternating blocks of 50, so that
both see the same moments of a machine whose speed drifts by up to 2x within
minutes; `p50_ratio` is zkraft's p50 over ZooKeeper's.

`--client kazoo` drives zkraft with kazoo on its ZooKeeper client ports (`clientPort`) instead of the SDK
on its gRPC ports, and compares it with kazoo on real ZooKeeper (implies `--real-zookeeper`); the paired
records then use kazoo on both sides. `--java` adds a load of ZooKeeper's own Java client
(`bench/java/ZkLoad.java`, compiled at run time against pyspark's ZooKeeper jars, see `bench/java_load.py`):
the throughput figures again, with `--java-processes` (default 1 and 4) processes of `--java-inflight`
(default 200) requests each, on zkraft's client ports and on real ZooKeeper. Each run measures both systems
one after the other, each going first every other run (the machine drifts), then emits a
`vs_real_zookeeper` record: zkraft's figure over ZooKeeper's, figure by figure; the summary gives their
medians and the issue's targets (kazoo: at least 1.5x ZooKeeper's throughput, at most its latency p50;
Java: at least its throughput).

Nodes come from `tests/quorum_harness.py` (`QuorumProcesses`, default
timeouts); everything listens on 127.0.0.1; every wait has a deadline and
every loop a bound; nodes and worker processes are SIGKILLed on exit, on
Ctrl-C and on SIGTERM. Data lives in a temporary directory (`--dir` chooses
the disk), removed at the end unless `--keep` (node and worker logs stay).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import java_load  # noqa: E402
from bench.figures import emit, median_or_none, percentile_ms  # noqa: E402
from client.zk.aio import AsyncZkClient  # noqa: E402
from client.zk.exceptions import ZkException  # noqa: E402
from client.zk.states import EventType, WatchedEvent  # noqa: E402
from quorum.register_client import QuorumClient, QuorumClientError  # noqa: E402
from quorum.settings import NodeSettings  # noqa: E402
from runtime import event_loop  # noqa: E402
from tests.quorum_harness import BENCH_QUORUM_PROPERTIES, QuorumProcesses, node_status, subprocess_env, wait_for_leader  # noqa: E402

CLUSTER_SIZE = 3
ZK_PROPERTIES = {"quorum.state.machine": "zookeeper", **BENCH_QUORUM_PROPERTIES}  # default timings
REGISTER_PROPERTIES = {"quorum.state.machine": "register", **BENCH_QUORUM_PROPERTIES}
LEADER_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 15.0
SESSION_TIMEOUT_MS = 10_000
LATENCY_FLOOR_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 10.0  # one request, one watch event: a sample that takes longer aborts the run
DRAIN_TIMEOUT_S = 30.0  # after a window: how long outstanding requests may take to finish
ERROR_PAUSE_S = 0.01  # after a failed request: do not spin on a failing cluster
OPS_PER_COROUTINE_MAX = 10_000_000  # bounds every request loop
WORKER_START_TIMEOUT_S = 60.0
WORKER_EXIT_TIMEOUT_S = 10.0
WORKER_STOP_TIMEOUT_S = 30.0  # "stop": a worker closes its sessions (each waits for its closeSession reply)
WORKER_START_DELAY_S = 0.3  # the window's start instant lies this far ahead of the phase message
WORKER_PHASES_MAX = 10_000  # bounds a worker's phase loop (bench/membership_bench.py asks for repeats)
WORKER_LINE_BYTES_MAX = 64 << 20
SEQUENTIAL_WARMUP_OPS = 50
PAIRED_BLOCK_SAMPLES = 50  # samples of one system before the other takes its turn (--real-zookeeper)
# Before paired samples, on fresh clusters: enough for the JVM's JIT to compile ZooKeeper's request path.
PAIRED_WARMUP_SAMPLES = 300
WATCH_WARMUP_SAMPLES = 20
EPHEMERAL_WARMUP_SAMPLES = 5
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
THROUGHPUT_OPS = ("create", "set_data", "get_data_leader", "get_data_follower")
JAVA_PROCESSES_MAX = 64  # --java-processes: each is a JVM of up to 512 MB heap (bench/java_load.py)

# What a real 3-node ZooKeeper reaches on this same 2-core machine, kazoo, 200 in flight (the issue's targets).
TARGETS: dict[str, tuple[str, float]] = {
    "creates_per_s": (">=", 2000.0),
    "set_data_per_s": (">=", 3700.0),
    "get_data_leader_per_s": (">=", 5500.0),
    "get_data_follower_per_s": (">=", 5500.0),
    "sequential_create_p50_ms": ("<=", 1.2),
    "watch_fire_p50_ms_setter_on_leader": ("<=", 1.3),
    "watch_fire_p50_ms_setter_on_follower": ("<=", 1.3),
}


# --client kazoo: the issue's targets against real ZooKeeper driven by kazoo in the same run, as zkraft's
# figure over ZooKeeper's (throughput at least 1.5x, latency p50 at most ZooKeeper's).
KAZOO_RATIO_TARGETS: dict[str, tuple[str, float]] = {
    "creates_per_s": (">=", 1.5),
    "set_data_per_s": (">=", 1.5),
    "get_data_leader_per_s": (">=", 1.5),
    "get_data_follower_per_s": (">=", 1.5),
    "sequential_create_p50_ms": ("<=", 1.0),
    "watch_fire_p50_ms_setter_on_leader": ("<=", 1.0),
    "watch_fire_p50_ms_setter_on_follower": ("<=", 1.0),
}
# --java: ZooKeeper's Java client, at least real ZooKeeper's throughput in the same run.
JAVA_RATIO_TARGET = (">=", 1.0)


def now_ns() -> int:
    # CLOCK_MONOTONIC is system-wide on Linux: worker processes share the parent's window instants.
    return time.monotonic_ns()


def latency_figures(samples_ns: list[int]) -> dict[str, Any]:
    lat = sorted(samples_ns)
    return {
        "samples": len(lat),
        "p50_ms": percentile_ms(lat, 0.50),
        "p99_ms": percentile_ms(lat, 0.99),
        "max_ms": percentile_ms(lat, 1.0),
    }


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process from /proc (Linux), None when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S  # utime, stime (fields 14, 15 of stat)


BUSY_COLUMNS = (1, 2, 3, 6, 7, 8)  # user, nice, system, irq, softirq, steal
IRQ_COLUMNS = (6, 7)  # irq, softirq: loopback networking and disk completions, charged to no process


def _machine_seconds(columns: tuple[int, ...]) -> float | None:
    """CPU time of all cores since boot in these columns of /proc/stat's "cpu" line."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    return sum(int(fields[i]) for i in columns) / CLOCK_TICKS_PER_S


async def cpu_percent_during(pids: dict[str, int | None], start_ns: int, end_ns: int) -> dict[str, float | None]:
    """Each process's CPU use over [start_ns, end_ns], in percent of one core (a 2-core machine has 200).

    `machine` is every core's busy time, `irq` the part spent in interrupts (mostly our loopback traffic),
    `others` the rest that no listed process took: other work on a shared machine, kernel threads (a few
    percent either side of zero is accounting noise). When it is large, the window's figures are suspect.
    """

    def sample() -> dict[str, float | None]:
        processes = {name: _cpu_seconds(pid) if pid else None for name, pid in pids.items()}
        return {"machine": _machine_seconds(BUSY_COLUMNS), "irq": _machine_seconds(IRQ_COLUMNS), **processes}

    await asyncio.sleep(max(0.0, (start_ns - now_ns()) / 1e9))
    t0, before = now_ns(), sample()
    await asyncio.sleep(max(0.0, (end_ns - now_ns()) / 1e9))
    t1, after = now_ns(), sample()
    elapsed_s = (t1 - t0) / 1e9
    percent: dict[str, float | None] = {}
    for name, b in before.items():
        a = after[name]
        percent[name] = None if a is None or b is None or elapsed_s <= 0 else round(100 * (a - b) / elapsed_s, 1)
    mine = [v for k, v in percent.items() if k != "machine"]  # the processes and irq
    machine = percent["machine"]
    percent["others"] = None if machine is None or None in mine else round(machine - sum(v or 0.0 for v in mine), 1)
    return percent


def pids_by_argument(arguments: dict[str, str]) -> dict[str, int | None]:
    """For each name, the pid of a process with that exact argument on its command line (Linux /proc), or None."""
    found: dict[str, int | None] = dict.fromkeys(arguments)
    wanted = {argument.encode(): name for name, argument in arguments.items()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        for argument in argv:
            if argument in wanted:
                found[wanted[argument]] = int(entry.name)
    return found


async def connect(address: str) -> AsyncZkClient:
    """A started client on exactly `address` (no other server to fall back to: the figure names its node)."""
    zk = AsyncZkClient([address], timeout=CONNECT_TIMEOUT_S, session_timeout_ms=SESSION_TIMEOUT_MS,
                       randomize_hosts=False, ensemble_tracker=False)  # fmt: skip
    await zk.start()
    if zk.server != address:
        await zk.close()
        raise RuntimeError(f"client meant for {address} is connected to {zk.server}")
    return zk


# ---------------------------------------------------------------- the window loop
@dataclass(slots=True)
class Window:
    """Requests acknowledged in [start_ns, end_ns]; latencies of those also started inside it."""

    start_ns: int
    end_ns: int
    acknowledged: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_ns: list[int] = field(default_factory=list)


Op = Callable[[int, int], Awaitable[object]]  # (coroutine number, its request number) -> a request


async def run_window(
    op: Op, inflight: int, warmup_start_ns: int, warmup_s: float, seconds: float, errors: tuple[type[Exception], ...]
) -> dict[str, Any]:
    """`inflight` coroutines each keep one `op` outstanding from `warmup_start_ns` until the window ends."""
    start_ns, end_ns = _window_ns(warmup_start_ns, warmup_s, seconds)
    window = Window(start_ns=start_ns, end_ns=end_ns)
    await asyncio.sleep(max(0.0, (warmup_start_ns - now_ns()) / 1e9))

    async def worker(w: int) -> None:
        for i in range(OPS_PER_COROUTINE_MAX):
            t0 = now_ns()
            if t0 >= window.end_ns:
                return
            try:
                await op(w, i)
            except errors as exc:
                name = type(exc).__name__
                window.errors[name] = window.errors.get(name, 0) + 1
                await asyncio.sleep(ERROR_PAUSE_S)
                continue
            t1 = now_ns()
            if window.start_ns <= t1 <= window.end_ns:
                window.acknowledged += 1
                if t0 >= window.start_ns:
                    window.latencies_ns.append(t1 - t0)

    tasks = [asyncio.create_task(worker(w)) for w in range(inflight)]
    timeout_s = (window.end_ns - now_ns()) / 1e9 + DRAIN_TIMEOUT_S
    done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for t in done:
        t.result()  # a bug in the benchmark itself should not hide
    return {
        "inflight": inflight,
        "seconds": seconds,
        "acknowledged": window.acknowledged,
        "ops_per_s": round(window.acknowledged / seconds, 1),
        "latencies_us": [ns // 1000 for ns in window.latencies_ns],
        "errors": window.errors,
        "unfinished": len(pending),
    }


# ---------------------------------------------------------------- the quorum baseline
async def quorum_baseline(root: Path, run: int, args: argparse.Namespace, payload: bytes) -> dict[str, Any]:
    with QuorumProcesses(root / f"run-{run}" / "register", n=CLUSTER_SIZE, properties=REGISTER_PROPERTIES) as procs:
        procs.start_all()
        leader_id, _ = await wait_for_leader(procs.addresses, LEADER_TIMEOUT_S)
        async with QuorumClient(list(procs.addresses.values()), request_timeout_s=REQUEST_TIMEOUT_S) as client:

            async def op(w: int, i: int) -> object:
                return await client.set(f"baseline/{w}/{i}".encode(), payload)

            start_ns = now_ns()
            window_ns = _window_ns(start_ns, args.warmup, args.baseline_seconds)
            async with asyncio.TaskGroup() as tasks:
                window = tasks.create_task(
                    run_window(op, args.inflight, start_ns, args.warmup, args.baseline_seconds, (QuorumClientError,))
                )
                cpu = tasks.create_task(cpu_percent_during({**_node_pids(procs), "client": os.getpid()}, *window_ns))
    figures = window.result()
    lat = figures.pop("latencies_us")
    figures.update(latency_figures([us * 1000 for us in lat]))
    return {"measure": "quorum_baseline", "run": run, "leader": leader_id, "writes_per_s": figures.pop("ops_per_s"),
            **figures, "cpu_percent": cpu.result()}  # fmt: skip


def _window_ns(warmup_start_ns: int, warmup_s: float, seconds: float) -> tuple[int, int]:
    start_ns = warmup_start_ns + int(warmup_s * 1e9)
    return start_ns, start_ns + int(seconds * 1e9)


def _node_pids(procs: QuorumProcesses) -> dict[str, int | None]:
    return {f"node{node_id}": procs.pid(node_id) for node_id in sorted(procs.addresses)}


# ---------------------------------------------------------------- latency figures (this process)
@dataclass(frozen=True, slots=True)
class Nodes:
    """The run's cluster as the figures name it: the leader and two followers."""

    addresses: dict[int, str]
    leader: int
    follower_a: int  # watchers, follower reads
    follower_b: int  # the "other node" for setters and ephemeral owners

    def address(self, node_id: int) -> str:
        return self.addresses[node_id]


class ZkraftSequentialCreates:
    """One create at a time from one zkraft session; `samples(n)` times the next n creates (ns each)."""

    def __init__(self, address: str, base: str, payload: bytes) -> None:
        self._address, self._base, self._payload = address, base, payload
        self._zk: AsyncZkClient | None = None
        self._next = 0

    async def open(self) -> None:
        self._zk = await connect(self._address)
        await self._zk.create(self._base, makepath=True)

    async def samples(self, n: int) -> list[int]:
        assert self._zk is not None
        out = []
        for _ in range(n):
            path = f"{self._base}/n{self._next}"
            self._next += 1
            t0 = now_ns()
            await asyncio.wait_for(self._zk.create(path, self._payload), REQUEST_TIMEOUT_S)
            out.append(now_ns() - t0)
        return out

    async def close(self) -> None:
        if self._zk is not None:
            await self._zk.close()


async def sequential_create(
    nodes: Nodes, node: int, run: int, args: argparse.Namespace, payload: bytes
) -> dict[str, Any]:
    role = _role(nodes, node)
    creates = ZkraftSequentialCreates(nodes.address(node), f"/bench/run{run}/sequential-{role}", payload)
    try:
        await creates.open()
        await creates.samples(SEQUENTIAL_WARMUP_OPS)
        samples = await creates.samples(args.sequential_ops)
    finally:
        await creates.close()
    return {"measure": "sequential_create", "run": run, "node": node, "role": role, **latency_figures(samples)}


def _role(nodes: Nodes, node: int) -> str:
    return "leader" if node == nodes.leader else "follower"


def _event_future() -> tuple[asyncio.Future[tuple[int, EventType]], Callable[[WatchedEvent], None]]:
    """A future resolved by the first event of a watch, with the instant the callback ran."""
    fired: asyncio.Future[tuple[int, EventType]] = asyncio.get_running_loop().create_future()

    def on_event(event: WatchedEvent) -> None:
        if not fired.done():
            fired.set_result((now_ns(), event.type))

    return fired, on_event


class ZkraftWatchFires:
    """A watcher session re-arming a get-watch and a setter session; `samples(n)` times n setData -> callback."""

    def __init__(self, watcher_address: str, setter_address: str, path: str, payload: bytes) -> None:
        self._watcher_address, self._setter_address = watcher_address, setter_address
        self._path, self._payload = path, payload
        self._watcher: AsyncZkClient | None = None
        self._setter: AsyncZkClient | None = None

    async def open(self) -> None:
        self._watcher = await connect(self._watcher_address)
        self._setter = await connect(self._setter_address)
        await self._setter.create(self._path, self._payload, makepath=True)
        await self._watcher.sync(self._path)  # the follower has the node before the first get

    async def samples(self, n: int) -> list[int]:
        assert self._watcher is not None and self._setter is not None
        out = []
        for _ in range(n):
            fired, on_event = _event_future()
            await asyncio.wait_for(self._watcher.get(self._path, watch=on_event), REQUEST_TIMEOUT_S)
            t0 = now_ns()
            await asyncio.wait_for(self._setter.set(self._path, self._payload), REQUEST_TIMEOUT_S)
            t1, event_type = await asyncio.wait_for(fired, REQUEST_TIMEOUT_S)
            if event_type is not EventType.CHANGED:
                raise RuntimeError(f"watch on {self._path} fired {event_type}, expected CHANGED")
            out.append(t1 - t0)
        return out

    async def close(self) -> None:
        for zk in (self._setter, self._watcher):
            if zk is not None:
                await zk.close()


async def watch_fire(
    nodes: Nodes, setter_node: int, run: int, args: argparse.Namespace, payload: bytes
) -> dict[str, Any]:
    role = "leader" if setter_node == nodes.leader else "follower"
    fires = ZkraftWatchFires(
        nodes.address(nodes.follower_a), nodes.address(setter_node), f"/bench/run{run}/watch-{role}", payload
    )
    try:
        await fires.open()
        await fires.samples(WATCH_WARMUP_SAMPLES)
        samples = await fires.samples(args.watch_samples)
    finally:
        await fires.close()
    return {"measure": "watch_fire", "run": run, "watcher_node": nodes.follower_a, "setter_node": setter_node,
            "setter_role": role, **latency_figures(samples)}  # fmt: skip


async def _ephemeral_sample(owner_address: str, watcher: AsyncZkClient, path: str, payload: bytes) -> tuple[int, int]:
    """(close call to DELETED event, close call to close() returning), both in ns, for one new session."""
    owner = await connect(owner_address)
    try:
        await asyncio.wait_for(owner.create(path, payload, ephemeral=True), REQUEST_TIMEOUT_S)
        fired, on_event = _event_future()
        await asyncio.wait_for(watcher.sync(path), REQUEST_TIMEOUT_S)  # so that exists sees the node
        if await asyncio.wait_for(watcher.exists(path, watch=on_event), REQUEST_TIMEOUT_S) is None:
            raise RuntimeError(f"{path} is missing on the watcher's server after sync")
        t0 = now_ns()
        await asyncio.wait_for(owner.close(), REQUEST_TIMEOUT_S)
        closed_ns = now_ns()
    finally:
        await owner.close()  # a no-op after a close that went through
    t1, event_type = await asyncio.wait_for(fired, REQUEST_TIMEOUT_S)
    if event_type is not EventType.DELETED:
        raise RuntimeError(f"exists watch on {path} fired {event_type}, expected DELETED")
    return t1 - t0, closed_ns - t0


async def ephemeral_gone(
    nodes: Nodes, owner_node: int, run: int, args: argparse.Namespace, payload: bytes
) -> dict[str, Any]:
    role = "leader" if owner_node == nodes.leader else "follower"
    watcher = await connect(nodes.address(nodes.follower_a))
    try:
        base = f"/bench/run{run}/ephemeral-{role}"
        await watcher.create(base, makepath=True)
        gone: list[int] = []
        close_calls: list[int] = []
        for i in range(EPHEMERAL_WARMUP_SAMPLES + args.ephemeral_samples):
            gone_ns, close_ns = await _ephemeral_sample(nodes.address(owner_node), watcher, f"{base}/e{i}", payload)
            if i >= EPHEMERAL_WARMUP_SAMPLES:
                gone.append(gone_ns)
                close_calls.append(close_ns)
    finally:
        await watcher.close()
    return {"measure": "ephemeral_gone", "run": run, "watcher_node": nodes.follower_a, "owner_node": owner_node,
            "owner_role": role, **latency_figures(gone),
            "close_call_p50_ms": percentile_ms(sorted(close_calls), 0.50)}  # fmt: skip


# ---------------------------------------------------------------- worker processes
class Workers:
    """`n` client processes (this script with --worker), driven by JSON lines on their stdin and stdout.

    A context manager that SIGKILLs whatever is left on exit. A worker exits by itself when its stdin
    closes, so a parent that dies leaves no worker behind for longer than one phase.
    """

    def __init__(self, log_dir: Path, n: int, command: Sequence[str] | None = None) -> None:
        """`command`: the argv of one worker (default: this script with --worker; bench/java_load.py's Java one)."""
        argv = list(command) if command is not None else [sys.executable, str(Path(__file__).resolve()), "--worker"]
        log_dir.mkdir(parents=True, exist_ok=True)
        self._logs: list[IO[bytes]] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        for k in range(n):
            log = (log_dir / f"worker-{k}.log").open("ab")
            self._logs.append(log)
            self._procs.append(subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=REPO_ROOT, env=subprocess_env(),
            ))  # fmt: skip

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=WORKER_EXIT_TIMEOUT_S)
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        for log in self._logs:
            log.close()

    async def ask(self, messages: Sequence[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
        """Send one message to each worker, then wait for one answer from each."""
        for proc, message in zip(self._procs, messages, strict=True):
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        reads = [asyncio.create_task(asyncio.to_thread(_read_line, proc)) for proc in self._procs]
        try:
            _, pending = await asyncio.wait(reads, timeout=timeout_s)
        finally:
            for read in reads:
                read.cancel()  # no-op on the finished ones
        if pending:
            raise TimeoutError(f"{len(pending)} of {len(reads)} workers did not answer within {timeout_s:g} s")
        failures = [read.exception() for read in reads]  # every outcome retrieved, so none is logged as lost
        for failure in failures:
            if failure is not None:
                raise failure
        answers = [json.loads(read.result()) for read in reads]
        for k, answer in enumerate(answers):
            if "error" in answer:
                raise RuntimeError(f"worker {k}: {answer['error']}")
        return answers


def _read_line(proc: subprocess.Popen[bytes]) -> bytes:
    assert proc.stdout is not None
    line = proc.stdout.readline(WORKER_LINE_BYTES_MAX)
    if not line.endswith(b"\n"):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # for its exit code: a worker that closed its output is usually exiting
        raise RuntimeError(f"worker pid {proc.pid} ended its output (exit code {proc.poll()}), see its log")
    return line


@dataclass(frozen=True, slots=True)
class Load:
    """Who drives a throughput figure: `client` "sdk" (AsyncZkClient), "kazoo" or "java" (ZooKeeper's own
    Java client, bench/java/ZkLoad.java), in `processes` worker processes of `inflight` requests each."""

    client: str
    processes: int
    inflight: int


def default_load(args: argparse.Namespace) -> Load:
    return Load(args.client, args.clients, args.inflight // args.clients)


async def throughput(
    node_pids: dict[str, int | None], nodes: Nodes, log_dir: Path, run: int, args: argparse.Namespace, load: Load
) -> list[dict[str, Any]]:
    """Every throughput figure of one run, with `load.processes` worker processes measuring the same windows.

    Records are returned, not printed.
    """
    command = java_load.worker_command() if load.client == "java" else None
    with Workers(log_dir, load.processes, command) as workers:
        pids = {**node_pids, **{f"client{k}": pid for k, pid in enumerate(workers.pids)}}
        prefix = f"/bench/run{run}/{load.client}-{load.processes}p"  # each load its own nodes
        setup = [
            {"driver": load.client, "leader": nodes.address(nodes.leader), "now_ns": now_ns(),
             "follower": nodes.address(nodes.follower_a), "prefix": f"{prefix}-{k}", "inflight": load.inflight,
             "payload_bytes": args.payload_bytes}
            for k in range(load.processes)
        ]  # fmt: skip
        await workers.ask(setup, WORKER_START_TIMEOUT_S)
        records = []
        for op in THROUGHPUT_OPS:
            start_ns = now_ns() + int(WORKER_START_DELAY_S * 1e9)
            phase = {"op": op, "start_ns": start_ns, "warmup_s": args.warmup, "seconds": args.seconds}
            timeout_s = WORKER_START_DELAY_S + args.warmup + args.seconds + DRAIN_TIMEOUT_S + 5
            async with asyncio.TaskGroup() as tasks:
                answers = tasks.create_task(workers.ask([phase] * load.processes, timeout_s))
                cpu = tasks.create_task(cpu_percent_during(pids, *_window_ns(start_ns, args.warmup, args.seconds)))
            merged = _merge_throughput(nodes, run, op, answers.result(), args.seconds)
            records.append({**merged, "client": load.client, "cpu_percent": cpu.result()})
        await workers.ask([{"op": "stop"}] * load.processes, WORKER_STOP_TIMEOUT_S)
    return records


def _merge_throughput(nodes: Nodes, run: int, op: str, answers: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    node = nodes.follower_a if op == "get_data_follower" else nodes.leader
    errors: dict[str, int] = {}
    for a in answers:
        for name, count in a["errors"].items():
            errors[name] = errors.get(name, 0) + count
    return {
        "measure": "throughput",
        "run": run,
        "op": op,
        "node": node,
        "role": "follower" if node != nodes.leader else "leader",
        "clients": len(answers),
        "inflight_per_client": answers[0]["inflight"],
        "seconds": seconds,
        "ops_per_s": round(sum(a["ops_per_s"] for a in answers), 1),
        "ops_per_s_per_client": [a["ops_per_s"] for a in answers],
        **latency_figures([us * 1000 for a in answers for us in a["latencies_us"]]),
        "errors": errors,
        "unfinished": sum(a["unfinished"] for a in answers),
    }


async def _worker_ops(setup: dict[str, Any]) -> tuple[dict[str, Op], list[AsyncZkClient]]:
    """The worker's clients and its requests: distinct create paths, one data node per coroutine."""
    leader = await connect(setup["leader"])
    follower = await connect(setup["follower"])
    prefix, payload = setup["prefix"], os.urandom(setup["payload_bytes"])
    await leader.create(f"{prefix}/create", makepath=True)
    await leader.create(f"{prefix}/data", makepath=True)
    for w in range(setup["inflight"]):
        await leader.create(f"{prefix}/data/w{w}", payload)
    await follower.sync(prefix)  # the follower has every data node before its first read

    async def create(w: int, i: int) -> object:
        return await leader.create(f"{prefix}/create/w{w}-{i}", payload)

    async def set_data(w: int, i: int) -> object:
        return await leader.set(f"{prefix}/data/w{w}", payload)

    async def get_data_leader(w: int, i: int) -> object:
        return await leader.get(f"{prefix}/data/w{w}")

    async def get_data_follower(w: int, i: int) -> object:
        return await follower.get(f"{prefix}/data/w{w}")

    ops: dict[str, Op] = {"create": create, "set_data": set_data, "get_data_leader": get_data_leader,
                          "get_data_follower": get_data_follower}  # fmt: skip
    return ops, [leader, follower]


async def worker_main() -> None:
    """--worker: set up on the first line, then one phase per line until "stop" or end of input."""

    async def read() -> dict[str, Any] | None:
        line = await asyncio.to_thread(sys.stdin.readline)
        return json.loads(line) if line else None

    def answer(record: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    setup = await read()
    if setup is None:
        return
    kazoo = setup["driver"] == "kazoo"
    clients: list[Any] = []
    try:
        if kazoo:
            kazoo_ops, clients = await asyncio.to_thread(_kazoo_worker_ops, setup)
        else:
            ops, clients = await _worker_ops(setup)
        answer({"ready": True})
        for _ in range(WORKER_PHASES_MAX):
            phase = await read()
            if phase is None or phase["op"] == "stop":
                # Sessions closed before the answer: the parent kills a worker that has answered, and a
                # session left to expire would still cost the servers work in the next measurement.
                for c in clients:
                    await (asyncio.to_thread(kazoo_close, c) if kazoo else c.close())
                clients = []
                answer({"stopped": True})
                return
            window = (setup["inflight"], phase["start_ns"], phase["warmup_s"], phase["seconds"])
            if kazoo:
                answer(await asyncio.to_thread(kazoo_window, kazoo_ops[phase["op"]], *window))
            else:
                answer(await run_window(ops[phase["op"]], *window, (ZkException,)))
    except Exception as exc:  # the process boundary: tell the parent what failed
        answer({"error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        for c in clients:
            await (asyncio.to_thread(kazoo_close, c) if kazoo else c.close())


# ---------------------------------------------------------------- a real ZooKeeper, driven by kazoo (optional)
# The same figures, same paths, same windows, with kazoo (threads, not asyncio) against Apache ZooKeeper's
# own servers from pyspark's jars (tests/real_zookeeper.py). Imported only when --real-zookeeper is given.
REAL_ZK_TICK_TIME_MS = 2000  # ZooKeeper's default, as our nodes' tickTime
# The harness starts ZooKeeper for quick conformance tests: C1 JIT only and no fsync. A benchmark wants it
# as deployed and as durable as our nodes (fsync before acknowledging), so those two flags are dropped.
REAL_ZK_DROPPED_FLAGS = ("-XX:TieredStopAtLevel=1", "-Dzookeeper.forceSync=no")


def real_zookeeper_unavailable() -> str | None:
    """Why --real-zookeeper cannot run here (no kazoo, no harness, no java or jars), or None."""
    try:
        import kazoo.client  # type: ignore[import-untyped]  # noqa: F401

        from tests import real_zookeeper
    except ImportError as exc:
        return f"{exc} (kazoo and pyspark come with the test extra: python3 -m pip install -e '.[test]')"
    return real_zookeeper.unavailable_reason()


def kazoo_connect(address: str) -> Any:
    from kazoo.client import KazooClient

    zk = KazooClient(address, timeout=SESSION_TIMEOUT_MS / 1000, randomize_hosts=False)
    zk.start(timeout=CONNECT_TIMEOUT_S)
    return zk


def kazoo_close(zk: Any) -> None:
    zk.stop()
    zk.close()


class _Fired:
    """The first event of a kazoo watch and when its callback ran (kazoo calls it on its own thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.at_ns = 0
        self.type = ""

    def __call__(self, event: Any) -> None:
        if not self.event.is_set():
            self.at_ns, self.type = now_ns(), str(event.type)
            self.event.set()

    def wait(self, what: str) -> tuple[int, str]:
        if not self.event.wait(REQUEST_TIMEOUT_S):
            raise RuntimeError(f"no watch event for {what} within {REQUEST_TIMEOUT_S:g} s")
        return self.at_ns, self.type


class KazooSequentialCreates:
    """ZkraftSequentialCreates for kazoo (blocking calls: run it in a thread)."""

    def __init__(self, address: str, base: str, payload: bytes) -> None:
        self._address, self._base, self._payload = address, base, payload
        self._zk: Any = None
        self._next = 0

    def open(self) -> None:
        self._zk = kazoo_connect(self._address)
        self._zk.create(self._base, makepath=True)

    def samples(self, n: int) -> list[int]:
        out = []
        for _ in range(n):
            path = f"{self._base}/n{self._next}"
            self._next += 1
            t0 = now_ns()
            self._zk.create(path, self._payload)
            out.append(now_ns() - t0)
        return out

    def close(self) -> None:
        if self._zk is not None:
            kazoo_close(self._zk)


class KazooWatchFires:
    """ZkraftWatchFires for kazoo (blocking calls: run it in a thread)."""

    def __init__(self, watcher_address: str, setter_address: str, path: str, payload: bytes) -> None:
        self._watcher_address, self._setter_address = watcher_address, setter_address
        self._path, self._payload = path, payload
        self._watcher: Any = None
        self._setter: Any = None

    def open(self) -> None:
        self._watcher = kazoo_connect(self._watcher_address)
        self._setter = kazoo_connect(self._setter_address)
        self._setter.create(self._path, self._payload, makepath=True)
        self._watcher.sync(self._path)

    def samples(self, n: int) -> list[int]:
        out = []
        for _ in range(n):
            fired = _Fired()
            self._watcher.get(self._path, watch=fired)
            t0 = now_ns()
            self._setter.set(self._path, self._payload)
            t1, event_type = fired.wait(self._path)
            if event_type != "CHANGED":
                raise RuntimeError(f"watch on {self._path} fired {event_type}, expected CHANGED")
            out.append(t1 - t0)
        return out

    def close(self) -> None:
        for zk in (self._setter, self._watcher):
            if zk is not None:
                kazoo_close(zk)


def kazoo_sequential_create(address: str, base: str, ops: int, payload: bytes) -> list[int]:
    creates = KazooSequentialCreates(address, base, payload)
    try:
        creates.open()
        creates.samples(SEQUENTIAL_WARMUP_OPS)
        return creates.samples(ops)
    finally:
        creates.close()


def kazoo_watch_fire(watcher_address: str, setter_address: str, path: str, samples: int, payload: bytes) -> list[int]:
    fires = KazooWatchFires(watcher_address, setter_address, path, payload)
    try:
        fires.open()
        fires.samples(WATCH_WARMUP_SAMPLES)
        return fires.samples(samples)
    finally:
        fires.close()


def kazoo_ephemeral_gone(
    owner_address: str, watcher_address: str, base: str, samples: int, payload: bytes
) -> tuple[list[int], list[int]]:
    watcher = kazoo_connect(watcher_address)
    gone, close_calls = [], []
    try:
        watcher.create(base, makepath=True)
        for i in range(EPHEMERAL_WARMUP_SAMPLES + samples):
            path, fired = f"{base}/e{i}", _Fired()
            owner = kazoo_connect(owner_address)
            try:
                owner.create(path, payload, ephemeral=True)
                watcher.sync(path)
                if watcher.exists(path, watch=fired) is None:
                    raise RuntimeError(f"{path} is missing on the watcher's server after sync")
                t0 = now_ns()
                owner.stop()  # kazoo's stop() closes the session: the ephemeral goes
                closed_ns = now_ns()
            finally:
                kazoo_close(owner)
            t1, event_type = fired.wait(path)
            if event_type != "DELETED":
                raise RuntimeError(f"exists watch on {path} fired {event_type}, expected DELETED")
            if i >= EPHEMERAL_WARMUP_SAMPLES:
                gone.append(t1 - t0)
                close_calls.append(closed_ns - t0)
        return gone, close_calls
    finally:
        kazoo_close(watcher)


@dataclass(slots=True)
class _KazooChains:
    """`inflight` chains of asynchronous kazoo requests, each issuing the next from the last one's callback."""

    op: Callable[[int, int], Any]  # (chain, its request number) -> kazoo IAsyncResult
    window: Window
    active: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: threading.Event = field(default_factory=threading.Event)

    def issue(self, w: int, i: int) -> None:
        t0 = now_ns()
        if t0 >= self.window.end_ns or i >= OPS_PER_COROUTINE_MAX:
            with self.lock:
                self.active -= 1
                if self.active == 0:
                    self.finished.set()
            return
        self.op(w, i).rawlink(lambda result: self.done(w, i, t0, result))

    def done(self, w: int, i: int, t0: int, result: Any) -> None:
        t1 = now_ns()
        with self.lock:
            if not result.successful():
                name = type(result.exception).__name__
                self.window.errors[name] = self.window.errors.get(name, 0) + 1
            elif self.window.start_ns <= t1 <= self.window.end_ns:
                self.window.acknowledged += 1
                if t0 >= self.window.start_ns:
                    self.window.latencies_ns.append(t1 - t0)
        if result.successful():
            self.issue(w, i + 1)
        else:  # do not spin on a failing server; kazoo's callback thread must not sleep
            threading.Timer(ERROR_PAUSE_S, self.issue, (w, i + 1)).start()


def kazoo_window(
    op: Callable[[int, int], Any], inflight: int, warmup_start_ns: int, warmup_s: float, seconds: float
) -> dict[str, Any]:
    """run_window for kazoo: the same window, counted the same way."""
    start_ns, end_ns = _window_ns(warmup_start_ns, warmup_s, seconds)
    chains = _KazooChains(op, Window(start_ns=start_ns, end_ns=end_ns), active=inflight)
    time.sleep(max(0.0, (warmup_start_ns - now_ns()) / 1e9))
    for w in range(inflight):
        chains.issue(w, 0)
    chains.finished.wait((end_ns - now_ns()) / 1e9 + DRAIN_TIMEOUT_S)
    with chains.lock:
        window = chains.window
        return {
            "inflight": inflight,
            "seconds": seconds,
            "acknowledged": window.acknowledged,
            "ops_per_s": round(window.acknowledged / seconds, 1),
            "latencies_us": [ns // 1000 for ns in window.latencies_ns],
            "errors": dict(window.errors),
            "unfinished": chains.active,
        }


def _kazoo_worker_ops(setup: dict[str, Any]) -> tuple[dict[str, Callable[[int, int], Any]], list[Any]]:
    leader, follower = kazoo_connect(setup["leader"]), kazoo_connect(setup["follower"])
    prefix, payload = setup["prefix"], os.urandom(setup["payload_bytes"])
    leader.create(f"{prefix}/create", makepath=True)
    leader.create(f"{prefix}/data", makepath=True)
    for w in range(setup["inflight"]):
        leader.create(f"{prefix}/data/w{w}", payload)
    follower.sync(prefix)
    ops: dict[str, Callable[[int, int], Any]] = {
        "create": lambda w, i: leader.create_async(f"{prefix}/create/w{w}-{i}", payload),
        "set_data": lambda w, i: leader.set_async(f"{prefix}/data/w{w}", payload),
        "get_data_leader": lambda w, i: leader.get_async(f"{prefix}/data/w{w}"),
        "get_data_follower": lambda w, i: follower.get_async(f"{prefix}/data/w{w}"),
    }
    return ops, [leader, follower]


async def kazoo_latencies(nodes: Nodes, run: int, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    """sequential_create, watch_fire and ephemeral_gone through kazoo (the real ensemble, or zkraft's client ports)."""
    records = []
    for node in (nodes.leader, nodes.follower_a):
        role = _role(nodes, node)
        seq = await asyncio.to_thread(
            kazoo_sequential_create, nodes.address(node), f"/bench/run{run}/sequential-{role}", args.sequential_ops,
            payload,
        )  # fmt: skip
        records.append({"measure": "sequential_create", "run": run, "node": node, "role": role,
                        **latency_figures(seq)})  # fmt: skip
    for setter in (nodes.leader, nodes.follower_b):
        role = "leader" if setter == nodes.leader else "follower"
        lat = await asyncio.to_thread(
            kazoo_watch_fire, nodes.address(nodes.follower_a), nodes.address(setter), f"/bench/run{run}/watch-{role}",
            args.watch_samples, payload,
        )  # fmt: skip
        records.append({"measure": "watch_fire", "run": run, "watcher_node": nodes.follower_a, "setter_node": setter,
                        "setter_role": role, **latency_figures(lat)})  # fmt: skip
    for owner in (nodes.leader, nodes.follower_b):
        role = "leader" if owner == nodes.leader else "follower"
        gone, close_calls = await asyncio.to_thread(
            kazoo_ephemeral_gone, nodes.address(owner), nodes.address(nodes.follower_a),
            f"/bench/run{run}/ephemeral-{role}", args.ephemeral_samples, payload,
        )  # fmt: skip
        records.append({"measure": "ephemeral_gone", "run": run, "watcher_node": nodes.follower_a,
                        "owner_node": owner, "owner_role": role, **latency_figures(gone),
                        "close_call_p50_ms": percentile_ms(sorted(close_calls), 0.50)})  # fmt: skip
    return records


def bench_zookeeper(directory: Path) -> Any:
    """A 3-node Apache ZooKeeper ensemble as the benchmark runs it (tests/real_zookeeper.py, full JIT)."""
    from tests.real_zookeeper import RealZooKeeper

    class BenchZooKeeper(RealZooKeeper):  # type: ignore[misc]
        def command(self, node_id: int) -> list[str]:
            return [a for a in super().command(node_id) if a not in REAL_ZK_DROPPED_FLAGS]

    return BenchZooKeeper(directory, n=CLUSTER_SIZE, tick_time_ms=REAL_ZK_TICK_TIME_MS)


async def serving_ensemble_nodes(ensemble: Any) -> Nodes:
    modes = await asyncio.to_thread(ensemble.wait_serving, LEADER_TIMEOUT_S)
    leader = next(node_id for node_id, mode in modes.items() if mode == "leader")
    a, b = (n for n in sorted(ensemble.addresses) if n != leader)
    return Nodes(dict(ensemble.addresses), leader, a, b)


async def real_zk_run(root: Path, run: int, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    system = "zookeeper"
    with bench_zookeeper(root / f"run-{run}" / "real-zookeeper") as ensemble:
        ensemble.start_all()
        nodes = await serving_ensemble_nodes(ensemble)
        leader, a, b = nodes.leader, nodes.follower_a, nodes.follower_b
        emit({"measure": "cluster", "system": system, "version": ensemble.version, "run": run,
              "addresses": nodes.addresses, "leader": leader, "follower_a": a, "follower_b": b,
              "jvm_flags": [a for a in ensemble.command(leader)[1:] if a.startswith("-") and a != "-cp"]})  # fmt: skip
        for record in await kazoo_latencies(nodes, run, args, payload):
            records.append({**record, "client": "kazoo", "system": system})
            emit(records[-1])
        # The harness keeps the JVMs' pids to itself: find each by its zoo.cfg argument.
        node_pids = pids_by_argument({f"node{i}": str(ensemble.config_path(i)) for i in sorted(ensemble.addresses)})
        log_dir = root / f"run-{run}" / "real-zookeeper-workers"
        kazoo_load = Load("kazoo", args.clients, args.inflight // args.clients)
        measured = await throughput(node_pids, nodes, log_dir, run, args, kazoo_load)
        if args.java:
            measured += await java_throughput(node_pids, nodes, log_dir, run, args)
        for record in measured:
            records.append({**record, "system": system})
            emit(records[-1])
    return records


async def java_throughput(
    node_pids: dict[str, int | None], nodes: Nodes, log_dir: Path, run: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The throughput figures with ZooKeeper's Java client, once per count in --java-processes."""
    records = []
    for processes in args.java_processes:
        load = Load("java", processes, args.java_inflight)
        records += await throughput(node_pids, nodes, log_dir / f"java-{processes}", run, args, load)
    return records


# ---------------------------------------------------------------- paired with real ZooKeeper
class _Probe:
    """A latency probe of either system, driven from the event loop (kazoo's blocking ones in a thread)."""

    def __init__(self, probe: Any, blocking: bool) -> None:
        self._probe, self._blocking = probe, blocking

    async def _do(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args) if self._blocking else await fn(*args)

    async def open(self) -> None:
        await self._do(self._probe.open)

    async def samples(self, n: int) -> list[int]:
        result: list[int] = await self._do(self._probe.samples, n)
        return result

    async def close(self) -> None:
        await self._do(self._probe.close)


async def paired_samples(ours: _Probe, theirs: _Probe, warmup: int, total: int) -> tuple[list[int], list[int]]:
    """Samples of both systems taken in alternating blocks, each system first in every other block, so
    that both see the same moments of a machine whose speed drifts within minutes."""
    await ours.open()
    try:
        await theirs.open()
        try:
            await ours.samples(warmup)
            await theirs.samples(warmup)
            mine: list[int] = []
            other: list[int] = []
            for block, start in enumerate(range(0, total, PAIRED_BLOCK_SAMPLES)):
                n = min(PAIRED_BLOCK_SAMPLES, total - start)
                if block % 2 == 0:
                    mine += await ours.samples(n)
                    other += await theirs.samples(n)
                else:
                    other += await theirs.samples(n)
                    mine += await ours.samples(n)
            return mine, other
        finally:
            await theirs.close()
    finally:
        await ours.close()


def _paired_record(figure: str, role: str, run: int, ours: list[int], theirs: list[int]) -> dict[str, Any]:
    mine, other = latency_figures(ours), latency_figures(theirs)
    ratio = round(mine["p50_ms"] / other["p50_ms"], 3) if mine["p50_ms"] and other["p50_ms"] else None
    return {"measure": "paired", "figure": figure, "role": role, "run": run, "zkraft": mine, "zookeeper": other,
            "p50_ratio": ratio}  # fmt: skip


async def paired_run(root: Path, run: int, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    """Sequential create and watch-fire of zkraft and real ZooKeeper, both clusters up, samples interleaved."""
    records: list[dict[str, Any]] = []

    def keep(record: dict[str, Any]) -> None:
        records.append(record)
        emit(record)

    with (
        QuorumProcesses(root / f"run-{run}" / "paired-zkraft", n=CLUSTER_SIZE, properties=ZK_PROPERTIES) as procs,
        bench_zookeeper(root / f"run-{run}" / "paired-zookeeper") as ensemble,
    ):
        procs.start_all()
        ensemble.start_all()
        ours = await _nodes_of(procs)
        _, term = await _leader_term(procs)
        theirs = await serving_ensemble_nodes(ensemble)
        leader = ours.leader
        kazoo = args.client == "kazoo"  # else our SDK on zkraft's gRPC ports
        if kazoo:
            ours = zookeeper_port_nodes(procs, ours)
        creates_probe: Any = KazooSequentialCreates if kazoo else ZkraftSequentialCreates
        fires_probe: Any = KazooWatchFires if kazoo else ZkraftWatchFires
        base = f"/bench/run{run}/paired"
        for role in ("leader", "follower"):
            mine, other = (n.leader if role == "leader" else n.follower_a for n in (ours, theirs))
            zkraft_creates = creates_probe(ours.address(mine), f"{base}-sequential-{role}", payload)
            kazoo_creates = KazooSequentialCreates(theirs.address(other), f"{base}-sequential-{role}", payload)
            samples = await paired_samples(
                _Probe(zkraft_creates, blocking=kazoo), _Probe(kazoo_creates, blocking=True),
                PAIRED_WARMUP_SAMPLES, args.sequential_ops,
            )  # fmt: skip
            keep(_paired_record("sequential_create", role, run, *samples) | {"client": args.client})
        for role in ("leader", "follower"):
            path = f"{base}-watch-{role}"
            mine, other = (n.leader if role == "leader" else n.follower_b for n in (ours, theirs))
            zkraft_fires = fires_probe(ours.address(ours.follower_a), ours.address(mine), path, payload)
            kazoo_fires = KazooWatchFires(theirs.address(theirs.follower_a), theirs.address(other), path, payload)
            samples = await paired_samples(
                _Probe(zkraft_fires, blocking=kazoo), _Probe(kazoo_fires, blocking=True),
                PAIRED_WARMUP_SAMPLES, args.watch_samples,
            )  # fmt: skip
            keep(_paired_record("watch_fire", role, run, *samples) | {"client": args.client})
        leader_after, term_after = await _leader_term(procs)
        if (leader_after, term_after) != (leader, term):
            keep({"measure": "leader_changed", "system": "zkraft", "run": run, "leader": leader_after,
                  "term": term_after, "during": "paired"})  # fmt: skip
    return records


# ---------------------------------------------------------------- one run
async def _nodes_of(procs: QuorumProcesses) -> Nodes:
    leader_id, _ = await wait_for_leader(procs.addresses, LEADER_TIMEOUT_S)
    a, b = (n for n in sorted(procs.addresses) if n != leader_id)
    return Nodes(dict(procs.addresses), leader_id, a, b)


async def _leader_term(procs: QuorumProcesses) -> tuple[int, int]:
    leader_id, address = await wait_for_leader(procs.addresses, LEADER_TIMEOUT_S)
    return leader_id, (await node_status(address)).term


def zookeeper_port_nodes(procs: QuorumProcesses, nodes: Nodes) -> Nodes:
    """The same nodes at their ZooKeeper client ports (`clientPort`), where kazoo and the Java client connect."""
    return Nodes({i: procs.zk_address(i) for i in nodes.addresses}, nodes.leader, nodes.follower_a, nodes.follower_b)


async def zkraft_run(root: Path, run: int, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    """Every zkraft figure of one run on one fresh cluster: through the SDK (gRPC) or kazoo (ZooKeeper's
    protocol) as --client says, then with --java ZooKeeper's Java client on the client ports."""
    records: list[dict[str, Any]] = []

    def keep(record: dict[str, Any]) -> None:
        records.append({"client": args.client, **record, "system": "zkraft"})
        emit(records[-1])

    with QuorumProcesses(root / f"run-{run}" / "zookeeper", n=CLUSTER_SIZE, properties=ZK_PROPERTIES) as procs:
        procs.start_all()
        nodes = await _nodes_of(procs)
        _, term = await _leader_term(procs)
        zk_nodes = zookeeper_port_nodes(procs, nodes) if args.client == "kazoo" or args.java else None
        emit({"measure": "cluster", "system": "zkraft", "run": run, "addresses": nodes.addresses,
              "zk_addresses": zk_nodes.addresses if zk_nodes else None, "leader": nodes.leader, "term": term,
              "follower_a": nodes.follower_a, "follower_b": nodes.follower_b})  # fmt: skip
        driven = zk_nodes if zk_nodes is not None and args.client == "kazoo" else nodes
        if driven is zk_nodes:
            latencies = await kazoo_latencies(driven, run, args, payload)
        else:
            latencies = await sdk_latencies(nodes, run, args, payload)
        for record in latencies:
            keep(record)
        log_dir = root / f"run-{run}" / "workers"
        for record in await throughput(_node_pids(procs), driven, log_dir, run, args, default_load(args)):
            keep(record)
        if zk_nodes is not None and args.java:
            for record in await java_throughput(_node_pids(procs), zk_nodes, log_dir, run, args):
                keep(record)
        leader_after, term_after = await _leader_term(procs)
        if (leader_after, term_after) != (nodes.leader, term):
            # Figures of this run straddle an election: say so rather than hide it.
            keep({"measure": "leader_changed", "run": run, "leader": leader_after, "term": term_after})
    return records


async def sdk_latencies(nodes: Nodes, run: int, args: argparse.Namespace, payload: bytes) -> list[dict[str, Any]]:
    """sequential_create, watch_fire and ephemeral_gone through the SDK on zkraft's gRPC ports."""
    records = []
    for node in (nodes.leader, nodes.follower_a):
        records.append(await sequential_create(nodes, node, run, args, payload))
    for setter in (nodes.leader, nodes.follower_b):
        records.append(await watch_fire(nodes, setter, run, args, payload))
    for owner in (nodes.leader, nodes.follower_b):
        records.append(await ephemeral_gone(nodes, owner, run, args, payload))
    return records


# ---------------------------------------------------------------- summary and main
def _select(records: list[dict[str, Any]], measure: str, key: str, **match: Any) -> list[Any]:
    return [r[key] for r in records if r["measure"] == measure and all(r.get(k) == v for k, v in match.items())]


def system_figures(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Medians over runs of one system's records."""
    figures: dict[str, float | None] = {
        "sequential_create_p50_ms": median_or_none(_select(records, "sequential_create", "p50_ms", role="leader")),
        "sequential_create_p99_ms": median_or_none(_select(records, "sequential_create", "p99_ms", role="leader")),
        # A client of a follower: its write is forwarded to the leader (ZooKeeper's followers do the same).
        "sequential_create_p50_ms_on_follower": median_or_none(
            _select(records, "sequential_create", "p50_ms", role="follower")
        ),
        "sequential_create_p99_ms_on_follower": median_or_none(
            _select(records, "sequential_create", "p99_ms", role="follower")
        ),
    }
    for op in THROUGHPUT_OPS:
        name = "creates_per_s" if op == "create" else f"{op}_per_s"
        figures[name] = median_or_none(_select(records, "throughput", "ops_per_s", op=op))
    for role in ("leader", "follower"):
        for q in ("p50", "p99"):
            figures[f"watch_fire_{q}_ms_setter_on_{role}"] = median_or_none(
                _select(records, "watch_fire", f"{q}_ms", setter_role=role)
            )
    for role in ("leader", "follower"):
        for q in ("p50", "p99"):
            figures[f"ephemeral_gone_{q}_ms_owner_on_{role}"] = median_or_none(
                _select(records, "ephemeral_gone", f"{q}_ms", owner_role=role)
            )
    return figures


def paired_figures(records: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Medians over runs of the paired records: each system's p50 and zkraft's p50 over ZooKeeper's."""
    figures: dict[str, dict[str, float | None]] = {}
    for figure in ("sequential_create", "watch_fire"):
        for role in ("leader", "follower"):
            paired = [r for r in records if r["measure"] == "paired" and r["figure"] == figure and r["role"] == role]
            if paired:
                figures[f"{figure}_{role}"] = {
                    "zkraft_p50_ms": median_or_none([r["zkraft"]["p50_ms"] for r in paired]),
                    "zookeeper_p50_ms": median_or_none([r["zookeeper"]["p50_ms"] for r in paired]),
                    "p50_ratio": median_or_none([r["p50_ratio"] for r in paired]),
                }
    return figures


def _of(records: list[dict[str, Any]], system: str, java_processes: int | None = None) -> list[dict[str, Any]]:
    """One system's records: its main figures (SDK or kazoo), or its Java load with that many processes."""
    if java_processes is None:
        return [r for r in records if r.get("system") == system and r.get("client") != "java"]
    return [r for r in records if r.get("system") == system and r.get("client") == "java"
            and r.get("clients") == java_processes]  # fmt: skip


def java_figures(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Medians over runs of the Java load's ops/s (records of one system and one process count)."""
    return {_rate_name(op): median_or_none(_select(records, "throughput", "ops_per_s", op=op)) for op in THROUGHPUT_OPS}


def _rate_name(op: str) -> str:
    return "creates_per_s" if op == "create" else f"{op}_per_s"


def ratios(ours: dict[str, float | None], theirs: dict[str, float | None]) -> dict[str, float | None]:
    """zkraft's figure over real ZooKeeper's, figure by figure (None where either is missing)."""
    return {name: round(v / theirs[name], 3) if v and theirs.get(name) else None  # type: ignore[operator]
            for name, v in ours.items()}  # fmt: skip


def run_ratios(records: list[dict[str, Any]], run: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run's zkraft / real ZooKeeper ratios: both measured minutes apart, the order alternating by run."""
    mine = [r for r in records if r.get("run") == run]
    return {
        "measure": "vs_real_zookeeper",
        "run": run,
        "client": args.client,
        "figures": ratios(system_figures(_of(mine, "zkraft")), system_figures(_of(mine, "zookeeper"))),
        "java": {
            f"{n}_processes": ratios(java_figures(_of(mine, "zkraft", n)), java_figures(_of(mine, "zookeeper", n)))
            for n in (args.java_processes if args.java else ())
        },
    }


def _median_ratios(per_run: list[dict[str, float | None]]) -> dict[str, float | None]:
    names = per_run[0].keys() if per_run else ()
    return {name: median_or_none([r.get(name) for r in per_run]) for name in names}


def _met(value: float | None, relation: str, target: float) -> bool | None:
    return None if value is None else (value >= target if relation == ">=" else value <= target)


def _targets(figures: dict[str, float | None], real: dict[str, float | None] | None,
             vs_real: dict[str, float | None], args: argparse.Namespace) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The SDK's absolute targets, or with --client kazoo the issue's ratios to real ZooKeeper."""
    targets: dict[str, dict[str, Any]] = {}
    if args.client == "kazoo":
        for name, (relation, target) in KAZOO_RATIO_TARGETS.items():
            ratio = vs_real.get(name)
            targets[name] = {"measured": figures[name], "real_zookeeper": (real or {}).get(name),
                             "ratio": ratio, "target_ratio": f"{relation} {target:g}",
                             "met": _met(ratio, relation, target)}  # fmt: skip
        return targets
    for name, (relation, target) in TARGETS.items():
        targets[name] = {"measured": figures[name], "target": f"{relation} {target:g}",
                         "met": _met(figures[name], relation, target)}  # fmt: skip
        if real is not None:
            targets[name]["real_zookeeper"] = real[name]
    return targets


def java_summary(records: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any] | None:
    """Per process count: both systems' medians, the median of the per-run ratios, and the target."""
    if not args.java:
        return None
    per_run = [r for r in records if r["measure"] == "vs_real_zookeeper"]
    summary: dict[str, Any] = {}
    relation, target = JAVA_RATIO_TARGET
    for n in args.java_processes:
        vs_real = _median_ratios([r["java"][f"{n}_processes"] for r in per_run])
        summary[f"{n}_processes"] = {
            "inflight_per_process": args.java_inflight,
            "zkraft": java_figures(_of(records, "zkraft", n)),
            "zookeeper": java_figures(_of(records, "zookeeper", n)),
            "vs_real_zookeeper": vs_real,
            "met": {name: _met(ratio, relation, target) for name, ratio in vs_real.items()},
        }
    return summary


def summarize(records: list[dict[str, Any]], args: argparse.Namespace, real_zk_skipped: str | None) -> dict[str, Any]:
    figures = system_figures(_of(records, "zkraft"))
    real_records = _of(records, "zookeeper")
    real = system_figures(real_records) if real_records else None
    vs_real = _median_ratios([r["figures"] for r in records if r["measure"] == "vs_real_zookeeper"])
    baseline = median_or_none(_select(records, "quorum_baseline", "writes_per_s"))
    creates = figures["creates_per_s"]
    return {
        "measure": "summary",
        "runs": args.runs,
        "client": args.client,
        "clients": args.clients,
        "inflight_total": args.inflight,
        "seconds_per_window": args.seconds,
        "quorum_baseline_writes_per_s": baseline,
        # What the machine alone costs a replicated write (bench/latency_floor.py), for the latency figures.
        "latency_floor": {
            key: median_or_none(_select(records, "latency_floor", key))
            for key in ("grpc_stream_rtt_p50_ms", "fsync_3_concurrent_p50_ms", "create_floor_ms", "watch_fire_floor_ms")
        },
        **figures,
        # The share of the bare quorum's write rate left after the ZooKeeper layer.
        "creates_vs_quorum_baseline": round(creates / baseline, 3) if creates and baseline else None,
        "errors": sum(sum(r["errors"].values()) for r in records if "errors" in r),
        "leader_changes": sum(1 for r in records if r["measure"] == "leader_changed"),
        "targets": _targets(figures, real, vs_real, args),
        "real_zookeeper": real if real is not None else {"skipped": real_zk_skipped},
        # Medians over runs of each run's zkraft / real ZooKeeper ratio (vs_real_zookeeper records).
        "vs_real_zookeeper": vs_real if real is not None else None,
        # The same latencies with both systems up and their samples interleaved (paired_run): "role" is
        # the node of the creating client, or of the setter.
        "paired_with_real_zookeeper": paired_figures(records) if real is not None else None,
        # ZooKeeper's own Java client (--java), per process count.
        "java": java_summary(records, args),
        # Other work on the machine skews every figure: say how busy it was.
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
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
        "clients": args.clients,
        "inflight_total": args.inflight,
        "payload_bytes": args.payload_bytes,
        "node_settings": {
            "tick_ms": defaults.tick_ms,
            "election_timeout_ticks": defaults.election_timeout_ticks,
            "heartbeat_interval_ticks": defaults.heartbeat_interval_ticks,
            "tick_time_ms": defaults.tick_time_ms,
        },
    }


def _counts(text: str) -> tuple[int, ...]:
    """Process counts from "1,4" -> (1, 4), each >= 1 and at most JAVA_PROCESSES_MAX."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated process counts such as 1,4, got {text!r}") from None
    if not counts or min(counts) < 1 or max(counts) > JAVA_PROCESSES_MAX:
        raise argparse.ArgumentTypeError(f"each process count must be in [1, {JAVA_PROCESSES_MAX}], got {text!r}")
    return counts


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="repetitions, each on fresh clusters (default 3)")
    p.add_argument("--clients", type=int, default=1, help="client processes for the throughput figures (default 1)")
    p.add_argument("--inflight", type=int, default=200, help="requests in flight, all clients together (default 200)")
    p.add_argument("--seconds", type=float, default=4.0, help="measured window per throughput figure (default 4)")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up before each window (default 1)")
    p.add_argument("--baseline-seconds", type=float, default=3.0, help="quorum baseline window (default 3)")
    p.add_argument("--sequential-ops", type=int, default=1000, help="sequential creates timed (default 1000)")
    p.add_argument("--watch-samples", type=int, default=200, help="watch-fire samples per setter (default 200)")
    p.add_argument("--ephemeral-samples", type=int, default=50, help="ephemeral-gone samples per owner (default 50)")
    p.add_argument("--payload-bytes", type=int, default=100, help="value size (default 100)")
    p.add_argument("--dir", type=Path, default=None, help="parent directory of the data (default: the temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the data directory (node and worker logs)")
    p.add_argument(
        "--real-zookeeper",
        action="store_true",
        help="also measure Apache ZooKeeper (pyspark's jars) driven by kazoo, each run (needs java)",
    )
    p.add_argument(
        "--client",
        choices=("sdk", "kazoo"),
        default="sdk",
        help="what drives zkraft: our SDK on its gRPC ports (default) or kazoo on its ZooKeeper client ports, "
        "with kazoo on real ZooKeeper in the same run (implies --real-zookeeper)",
    )
    p.add_argument(
        "--java",
        action="store_true",
        help="also a load of ZooKeeper's own Java client on zkraft's client ports and on real ZooKeeper, "
        "each run (implies --real-zookeeper; needs javac)",
    )
    p.add_argument("--java-processes", type=_counts, default=(1, 4),
                   help="Java client processes, one load per count (default 1,4)")  # fmt: skip
    p.add_argument("--java-inflight", type=int, default=200, help="requests in flight per Java process (default 200)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return args
    if args.java_inflight < 1:
        p.error(f"--java-inflight must be >= 1, got {args.java_inflight}")
    # kazoo on zkraft and the Java client are compared with real ZooKeeper driven the same way in the same run.
    args.real_zookeeper = args.real_zookeeper or args.client == "kazoo" or args.java
    if min(args.runs, args.clients, args.sequential_ops, args.watch_samples, args.ephemeral_samples) < 1:
        p.error("--runs, --clients, --sequential-ops, --watch-samples, --ephemeral-samples must be >= 1")
    if args.seconds <= 0 or args.baseline_seconds <= 0 or args.warmup < 0 or args.payload_bytes < 0:
        p.error("--seconds and --baseline-seconds must be > 0; --warmup and --payload-bytes >= 0")
    if args.inflight < args.clients or args.inflight % args.clients:
        p.error(f"--inflight ({args.inflight}) must be a multiple of --clients ({args.clients})")
    return args


async def latency_floor(root: Path, run: int) -> dict[str, Any]:
    """bench/latency_floor.py in a process of its own: this machine's gRPC round trip and contended fsync."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).resolve().parent / "latency_floor.py"), "--dir", str(root),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), LATENCY_FLOOR_TIMEOUT_S)
    return {**json.loads(out), "run": run}


async def bench(root: Path, args: argparse.Namespace) -> None:
    payload = os.urandom(args.payload_bytes)
    emit(setup_record(root, args))
    real_zk_skipped = real_zookeeper_unavailable() if args.real_zookeeper else "not asked for (--real-zookeeper)"
    if args.real_zookeeper and real_zk_skipped:
        emit({"measure": "real_zookeeper", "skipped": real_zk_skipped})
    java_skipped = java_load.unavailable_reason() if args.java else None
    if java_skipped:
        emit({"measure": "java", "skipped": java_skipped})
        args.java = False
    records: list[dict[str, Any]] = []
    for run in range(1, args.runs + 1):
        floor = await latency_floor(root, run)
        emit(floor)
        records.append(floor)
        baseline = await quorum_baseline(root, run, args, payload)
        emit(baseline)
        records.append(baseline)
        systems = [zkraft_run] if real_zk_skipped else [zkraft_run, real_zk_run]
        if run % 2 == 0:
            systems.reverse()  # the machine's speed drifts within minutes: each system goes first every other run
        for system_run in systems:
            records += await system_run(root, run, args, payload)
        if real_zk_skipped is None:
            records += await paired_run(root, run, args, payload)
            records.append(run_ratios(records, run, args))
            emit(records[-1])
    emit(summarize(records, args, real_zk_skipped))


def _describe(exc: BaseException) -> str:
    """One line naming what failed, through TaskGroup's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def raise_keyboard_interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, raise_keyboard_interrupt)  # SIGTERM cleans up like Ctrl-C
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        event_loop.run(worker_main())
        return 0
    root = Path(tempfile.mkdtemp(prefix="zkraft-zkbench-", dir=args.dir))
    try:
        with _sigterm_as_interrupt():
            event_loop.run(bench(root, args))
        return 0
    except KeyboardInterrupt:
        emit({"measure": "aborted", "reason": "interrupted"})
        return 130
    except Exception as exc:  # the process boundary: say what failed, keep the logs
        args.keep = True
        emit({"measure": "aborted", "reason": _describe(exc), "logs": str(root)})
        return 1
    finally:
        # Every QuorumProcesses and Workers context has killed its processes by now (__exit__ ran while unwinding).
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
