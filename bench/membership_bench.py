"""Membership benchmarks: a new voter joining a loaded 3-node quorum; read capacity with observers added.

    python3 bench/membership_bench.py [--entries 100000] [--seconds 5] [--inflight 64]
    python3 bench/membership_bench.py --znodes [--entries 100000] [--seconds 5] [--inflight 64]
    python3 bench/membership_bench.py --observers 0,1,2 [--seconds 5] [--repeats 3] [--inflight 64]

The join (the default): real `zkraft quorum start` processes (register state machine, default settings) on loopback:

* `fill`: `--entries` writes into the cluster first (distinct keys, 100-byte values), so that the new node
  has that much state to catch up with: a snapshot (the nodes snapshot every 100,000 entries by default,
  at a point between half and all of it), then the log after it.
* `before`: committed writes/s over a window with `--inflight` writers (bench/quorum_bench.py's
  measure_throughput), on the three nodes.
* `join`: a fourth node started with `--join`, then `zkraft quorum add` (as a learner, caught up, promoted)
  while the same writers run: `add_to_voter_s` is from the add request to the promotion committed;
  `during` is the writes/s of a window that starts with the add request.

`--znodes` makes the same join on a quorum in ZooKeeper mode: `fill` creates `--entries` znodes (100 bytes each,
through the SDK), and `before`/`during` are setData/s through the leader from one client session per voter
(bench/zk_bench.py's worker processes), so the joiner catches up with a tree of that many znodes.

`--observers 0,1,2` measures instead what observers are for (ZooKeeper's observers: read capacity without
more voters to wait for). One quorum in ZooKeeper mode (3 voters); for each count in turn, observers are added
(`zkraft quorum add --observer`, never removed) and then:

* `reads_per_s`: getData of a small znode (100 bytes), pipelined from one client session per member serving
  clients, voters and observers alike (bench/zk_bench.py's worker processes, `--inflight` requests in flight
  split evenly among them), so the read load is spread over every member;
* `writes_per_s`: setData through the leader with the same sessions and in-flight count, in the same
  configuration: an observer is one more node the leader replicates to, and must not slow writes much.

Each figure is the median of `--repeats` windows of `--seconds`, printed as one `observers` line per
configuration with its ratios to the first (`reads_over_first`, `writes_over_first`), where the CPU went in
percent of one core (`*_nodes_cpu_percent`, `*_clients_cpu_percent`, `*_others_cpu_percent`: other work on the
machine) and `term_changes` (elections during its windows, which make its figures suspect). Every member and
every client process share this machine's cores: with more processes than cores (3 to 5 members and as many
clients on 2 cores here) the cores, not the members, bound the figures, and an observer only adds read
capacity on cores of its own. Each line's `note` says so.

Output is JSON lines; nothing is asserted (benchmarks print figures). Every node is SIGKILLed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from io import StringIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import median_or_none  # noqa: E402
from bench.quorum_bench import measure_throughput  # noqa: E402
from bench.zk_bench import (  # noqa: E402
    DRAIN_TIMEOUT_S,
    WORKER_START_DELAY_S,
    WORKER_START_TIMEOUT_S,
    WORKER_STOP_TIMEOUT_S,
    Workers,
    cpu_percent_during,
    latency_figures,
    now_ns,
)
from client.zk.aio import AsyncZkClient  # noqa: E402
from quorum.register_client import QuorumClient  # noqa: E402
from tests.quorum_harness import (  # noqa: E402
    BENCH_QUORUM_PROPERTIES,
    QuorumProcesses,
    node_status,
    peers_text,
    wait_for_leader,
    wait_serving,
)
from zkraft.tools import quorum_members  # noqa: E402

BOOTSTRAP = (1, 2, 3)
NEW_NODE = 4
TIMEOUT_S = 120.0
FILL_INFLIGHT = 256
OBSERVERS_MAX = 4  # --observers: node ids 4 to 7
ZK_PROPERTIES = {"quorum.state.machine": "zookeeper", **BENCH_QUORUM_PROPERTIES}  # default timings
SMALL_ZNODE_BYTES = 100
WARMUP_S = 1.0  # before each window: every session's pipeline full
# bench/zk_bench.py's worker ops: getData through the session on its member, setData through the leader's.
READ_OP, WRITE_OP = "get_data_follower", "set_data"


class _Processes(QuorumProcesses):
    def command(self, node_id: int, **kw: object) -> list[str]:
        cmd = super().command(node_id, peers=peers_text({i: self.addresses[i] for i in BOOTSTRAP}))
        if node_id not in BOOTSTRAP:
            at = cmd.index("--peers")
            cmd[at : at + 2] = ["--join", self.addresses[1]]
        return cmd


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


async def write_all(entries: int, write: Callable[[int], Awaitable[object]]) -> float:
    """`write(i)` for every i below `entries`, FILL_INFLIGHT at a time; the seconds it took."""
    started = time.perf_counter()
    queue = iter(range(entries))

    async def worker() -> None:
        for i in queue:
            await write(i)

    await asyncio.gather(*(worker() for _ in range(FILL_INFLIGHT)))
    return time.perf_counter() - started


async def add_new_node(procs: _Processes, servers: str) -> tuple[float, Awaitable[None]]:
    """Start NEW_NODE with --join and ask for it as a voter (`zkraft quorum add`, in a thread): (when the add
    was asked, the add itself)."""
    procs.start(NEW_NODE)
    await wait_serving(procs.addresses[NEW_NODE], TIMEOUT_S)
    started = time.perf_counter()
    add = asyncio.to_thread(
        quorum_members.add, servers, NEW_NODE, procs.addresses[NEW_NODE], out=StringIO(), catch_up_timeout_s=TIMEOUT_S
    )
    return started, asyncio.ensure_future(add)


async def fill(client: QuorumClient, entries: int, payload: bytes) -> dict[str, Any]:
    elapsed = await write_all(entries, lambda i: client.set(b"fill/%d" % i, payload))
    return {
        "measure": "fill",
        "entries": entries,
        "seconds": round(elapsed, 1),
        "writes_per_s": round(entries / elapsed),
    }


async def bench(root: Path, args: argparse.Namespace) -> None:
    payload = b"x" * 100
    with _Processes(root, n=4) as procs:
        for i in BOOTSTRAP:
            procs.start(i)
        addresses = {i: procs.addresses[i] for i in BOOTSTRAP}
        await wait_for_leader(addresses, TIMEOUT_S)
        async with QuorumClient(list(addresses.values()), request_timeout_s=10.0) as client:
            emit(await fill(client, args.entries, payload))
            before = await measure_throughput(client, args.inflight, 3.0, args.seconds, "before", payload)
            emit({"measure": "before", **before})
            started, add = await add_new_node(procs, ",".join(addresses.values()))
            during = await measure_throughput(client, args.inflight, 0.0, args.seconds, "during", payload)
            await asyncio.wait_for(add, TIMEOUT_S)
            add_s = time.perf_counter() - started
            emit({"measure": "during", **during})
            emit(
                {
                    "measure": "join",
                    "entries": args.entries,
                    "add_to_voter_s": round(add_s, 2),
                    "during_over_before": round(during["writes_per_s"] / max(before["writes_per_s"], 1e-9), 3),
                }
            )


# ---------------------------------------------------------------- --znodes: the join with a ZooKeeper tree
async def fill_znodes(addresses: list[str], entries: int, payload: bytes) -> dict[str, Any]:
    async with AsyncZkClient(addresses, session_timeout_ms=30_000) as zk:
        await zk.ensure_path("/fill")
        elapsed = await write_all(entries, lambda i: zk.create(f"/fill/n{i}", payload))
    return {
        "measure": "fill",
        "znodes": entries,
        "seconds": round(elapsed, 1),
        "creates_per_s": round(entries / elapsed),
    }


async def znode_join_bench(root: Path, args: argparse.Namespace) -> None:
    with _Processes(root, n=len(BOOTSTRAP) + 1, properties=ZK_PROPERTIES) as procs:
        for i in BOOTSTRAP:
            procs.start(i)
        await wait_for_leader({i: procs.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S)
        emit(await fill_znodes([procs.addresses[i] for i in BOOTSTRAP], args.entries, b"x" * SMALL_ZNODE_BYTES))
        leader_id, leader, term = await leader_term(procs)
        n = len(BOOTSTRAP)
        inflight = [max(1, args.inflight // n + (k < args.inflight % n)) for k in range(n)]
        with Workers(procs.root / "workers", n) as workers:
            setup = [
                {"driver": "sdk", "leader": leader, "follower": procs.addresses[m], "now_ns": now_ns(),
                 "prefix": f"/bench/join/member-{m}", "inflight": inflight[k], "payload_bytes": SMALL_ZNODE_BYTES}
                for k, m in enumerate(BOOTSTRAP)
            ]  # fmt: skip
            await workers.ask(setup, WORKER_START_TIMEOUT_S)
            pids = {
                **{f"node{m}": procs.pid(m) for m in BOOTSTRAP},
                **{f"client{k}": p for k, p in enumerate(workers.pids)},
            }
            before = await window(workers, pids, WRITE_OP, n, args)
            emit({"measure": "before", **before})
            started, add = await add_new_node(procs, ",".join(procs.addresses[i] for i in BOOTSTRAP))
            during = await window(workers, pids, WRITE_OP, n, args)  # its warm-up starts with the add request
            await asyncio.wait_for(add, TIMEOUT_S)
            add_s = time.perf_counter() - started
            emit({"measure": "during", **during})
            await workers.ask([{"op": "stop"}] * n, WORKER_STOP_TIMEOUT_S)
        emit(
            {
                "measure": "join",
                "znodes": args.entries,
                "leader": leader_id,
                "term_changes": (await leader_term(procs))[2] - term,
                "add_to_voter_s": round(add_s, 2),
                "during_over_before": _ratio(during["ops_per_s"], before["ops_per_s"]),
            }
        )


# ---------------------------------------------------------------- --observers: read capacity
def observer_counts(text: str) -> tuple[int, ...]:
    """`0,1,2`: observer counts, increasing (observers are added between configurations, never removed)."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected increasing observer counts such as 0,1,2, got {text!r}") from None
    if any(not 0 <= c <= OBSERVERS_MAX for c in counts):
        raise argparse.ArgumentTypeError(f"each observer count must be in [0, {OBSERVERS_MAX}], got {text!r}")
    if any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
        raise argparse.ArgumentTypeError(f"observer counts must increase, got {text!r}")
    return counts


async def add_observer(procs: _Processes, node_id: int) -> None:
    procs.start(node_id)
    await wait_serving(procs.addresses[node_id], TIMEOUT_S)
    servers = ",".join(procs.addresses[i] for i in BOOTSTRAP)
    await asyncio.to_thread(
        quorum_members.add, servers, node_id, procs.addresses[node_id], observer=True, out=StringIO()
    )


async def window(
    workers: Workers, pids: dict[str, int | None], op: str, n: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One window of `op` on every worker at once: the summed rate, latencies, errors, where the CPU went."""
    start_ns = now_ns() + int(WORKER_START_DELAY_S * 1e9)
    phase = {"op": op, "start_ns": start_ns, "warmup_s": WARMUP_S, "seconds": args.seconds}
    window_start_ns = start_ns + int(WARMUP_S * 1e9)
    async with asyncio.TaskGroup() as tasks:
        answers = tasks.create_task(
            workers.ask([phase] * n, WORKER_START_DELAY_S + WARMUP_S + args.seconds + DRAIN_TIMEOUT_S + 5)
        )
        cpu = tasks.create_task(cpu_percent_during(pids, window_start_ns, window_start_ns + int(args.seconds * 1e9)))
    done, percent = answers.result(), cpu.result()
    return {
        "ops_per_s": round(sum(a["ops_per_s"] for a in done), 1),
        "p50_ms": latency_figures([us * 1000 for a in done for us in a["latencies_us"]])["p50_ms"],
        "errors": sum(sum(a["errors"].values()) + a["unfinished"] for a in done),
        "machine_cpu_percent": percent["machine"],
        "nodes_cpu_percent": _summed(percent, "node"),
        "clients_cpu_percent": _summed(percent, "client"),
        "others_cpu_percent": percent["others"],  # other work on a shared machine: when large, the window is suspect
    }


def _summed(percent: dict[str, float | None], prefix: str) -> float | None:
    values = [v for name, v in percent.items() if name.startswith(prefix)]
    return None if None in values else round(sum(v or 0.0 for v in values), 1)


async def measure_members(
    procs: _Processes, members: list[int], observers: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Reads over every serving member and writes through the leader, `--repeats` windows each."""
    leader_id, leader, term = await leader_term(procs)
    n = len(members)
    inflight = [max(1, args.inflight // n + (k < args.inflight % n)) for k in range(n)]  # the same total each time
    with Workers(procs.root / f"workers-{observers}", n) as workers:
        setup = [
            {"driver": "sdk", "leader": leader, "follower": procs.addresses[m], "now_ns": now_ns(),
             "prefix": f"/bench/observers-{observers}/member-{m}", "inflight": inflight[k],
             "payload_bytes": SMALL_ZNODE_BYTES}
            for k, m in enumerate(members)
        ]  # fmt: skip
        await workers.ask(setup, WORKER_START_TIMEOUT_S)
        pids = {**{f"node{m}": procs.pid(m) for m in members}, **{f"client{k}": p for k, p in enumerate(workers.pids)}}
        reads, writes = [], []
        for _ in range(args.repeats):
            reads.append(await window(workers, pids, READ_OP, n, args))
            writes.append(await window(workers, pids, WRITE_OP, n, args))
        await workers.ask([{"op": "stop"}] * len(members), WORKER_STOP_TIMEOUT_S)
    term_after = (await leader_term(procs))[2]
    return {
        "measure": "observers", "observers": observers, "voters": len(BOOTSTRAP), "members_serving": len(members),
        "leader": leader_id, "term_changes": term_after - term, "inflight": sum(inflight), "seconds": args.seconds,
        "repeats": args.repeats,
        "reads_per_s": median_or_none([r["ops_per_s"] for r in reads]),
        "writes_per_s": median_or_none([w["ops_per_s"] for w in writes]),
        "read_p50_ms": median_or_none([r["p50_ms"] for r in reads]),
        "write_p50_ms": median_or_none([w["p50_ms"] for w in writes]),
        "reads_per_s_windows": [r["ops_per_s"] for r in reads],
        "writes_per_s_windows": [w["ops_per_s"] for w in writes],
        "errors": sum(r["errors"] for r in reads + writes),
        **{f"{what}_{cpu}": median_or_none([w[cpu] for w in windows])
           for what, windows in (("reads", reads), ("writes", writes))
           for cpu in ("machine_cpu_percent", "nodes_cpu_percent", "clients_cpu_percent", "others_cpu_percent")},
    }  # fmt: skip


async def leader_term(procs: _Processes) -> tuple[int, str, int]:
    """(leader id, its address, its term): an election during the windows (`term_changes`) makes them suspect."""
    leader_id, address = await wait_for_leader({i: procs.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S)
    return leader_id, address, (await node_status(address)).term


def cores_note(members: int, cores: int) -> str:
    """Every member and one client process per member share this machine's cores."""
    processes = f"{members} members and {members} client processes on {cores} cores"
    return processes if 2 * members <= cores else f"{processes}: the cores, not the members, bound these figures"


async def observer_bench(root: Path, args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    with _Processes(root, n=len(BOOTSTRAP) + max(args.observers), properties=ZK_PROPERTIES) as procs:
        for i in BOOTSTRAP:
            procs.start(i)
        await wait_for_leader({i: procs.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S)
        members = list(BOOTSTRAP)
        first: dict[str, Any] | None = None
        for count in args.observers:
            while len(members) < len(BOOTSTRAP) + count:
                members.append(len(members) + 1)
                await add_observer(procs, members[-1])
            record = await measure_members(procs, members, count, args)
            first = first or record  # the ratios compare each configuration with the first one measured
            record["reads_over_first"] = _ratio(record["reads_per_s"], first["reads_per_s"])
            record["writes_over_first"] = _ratio(record["writes_per_s"], first["writes_per_s"])
            emit({**record, "cores": cores, "note": cores_note(len(members), cores)})


def _ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else round(value / base, 3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, default=100_000, help="writes in the tree before the join (default 100000)")
    p.add_argument("--seconds", type=float, default=5.0, help="each throughput window (default 5)")
    p.add_argument("--inflight", type=int, default=64, help="requests in flight, all clients together (default 64)")
    p.add_argument("--observers", type=observer_counts, default=None,
                   help="instead of the join: reads/s and writes/s with these observer counts, e.g. 0,1,2")  # fmt: skip
    p.add_argument("--znodes", action="store_true", help="the join on a quorum in ZooKeeper mode, --entries znodes")
    p.add_argument("--repeats", type=int, default=3, help="--observers: windows per figure, median printed (default 3)")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.inflight < 1 or args.repeats < 1 or args.entries < 1:
        p.error("--seconds must be > 0; --inflight, --repeats and --entries >= 1")
    with tempfile.TemporaryDirectory(prefix="membership-bench-") as root:
        if args.observers:
            asyncio.run(observer_bench(Path(root), args))
        else:
            asyncio.run(znode_join_bench(Path(root), args) if args.znodes else bench(Path(root), args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
