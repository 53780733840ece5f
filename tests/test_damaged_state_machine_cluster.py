"""A quorum node whose znode database (`zk/data.mdb`) was damaged rebuilds it and serves again.

Three `zkraft quorum start` processes serve the ZooKeeper service. One node is
SIGKILLed, more znodes are written without it, 8 KiB of random bytes are
written over the page of its database that holds a marker znode, and it is
started again. What a user checks: the node answers again, every znode the
cluster acknowledged reads back through it, the damaged file lies beside the
new one, and the two other processes never stopped (same pids). The state
comes from the node's own snapshot and log, or, with its snapshots damaged
too, from a peer's state. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from client.zk.aio import AsyncZkClient
from tests.disk_damage import DAMAGE_BYTES, damage_pages_holding
from tests.quorum_harness import (
    FAST_ZK_PROPERTIES,
    QuorumProcesses,
    node_status,
    poll_until,
    wait_applied,
    wait_for_leader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

T = TypeVar("T")

PROPERTIES = {
    **FAST_ZK_PROPERTIES,
    # Snapshots every 20 entries, the log compacted to 5 behind: each node holds snapshots and a compacted log.
    "snapshot.interval.entries": "20",
    "snapshot.trailing.entries": "5",
}
LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0
PARENTS = 30
CHILDREN_PER_PARENT = 100  # one multi each: 3,000 znodes before the kill
CHILDREN_WHILE_DOWN = 20  # per parent, written while the damaged node is down
READS_IN_FLIGHT_MAX = 64
MARKER = b"damage-me-" + b"m" * 40


def run(cluster: QuorumProcesses, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the test body; on failure, show the nodes' last log lines."""
    try:
        return asyncio.run(body())
    except BaseException:
        print(cluster.logs_tail(40))
        raise


async def write_znodes(hosts: list[str], parent_numbers: range, first_child: int, count: int) -> dict[str, bytes]:
    """`count` children under each numbered parent, one multi per parent, and the marker znode with the
    first batch; returns what was acknowledged."""
    written: dict[str, bytes] = {}
    async with AsyncZkClient(",".join(hosts), timeout=WAIT_S) as zk:
        if first_child == 0:
            await zk.create("/app/marker", MARKER, makepath=True)
            written["/app/marker"] = MARKER
        for p in parent_numbers:
            parent = f"/app/p{p:03d}"
            await zk.ensure_path(parent)
            t = zk.transaction()
            batch = {
                f"{parent}/n{c:05d}": f"value-{p}-{c}".encode() * 4 for c in range(first_child, first_child + count)
            }
            for path, data in batch.items():
                t.create(path, data)
            results = await t.commit()
            assert results == list(batch), f"multi under {parent} failed: {results[:3]}"
            written.update(batch)
    return written


async def read_all_through(address: str, expected: dict[str, bytes]) -> dict[str, bytes | None]:
    """Every path's data read through the node at `address` alone, after a sync (None: no such node)."""
    async with AsyncZkClient(address, timeout=WAIT_S, randomize_hosts=False, ensemble_tracker=False) as zk:
        await zk.sync("/")
        gate = asyncio.Semaphore(READS_IN_FLIGHT_MAX)

        async def one(path: str) -> tuple[str, bytes | None]:
            async with gate:
                found = await zk.exists(path)
                return path, (await zk.get(path))[0] if found is not None else None

        return dict(await asyncio.gather(*(one(p) for p in expected)))


def damage_snapshots(data_dir: Path, seed: int) -> int:
    """Random bytes over the middle of every snapshot file of the node; returns how many."""
    rng = random.Random(seed)
    snaps = sorted((data_dir / "snapshots").glob("*.snap"))
    for snap in snaps:
        size = snap.stat().st_size
        with open(snap, "r+b") as f:
            f.seek(size // 2)
            f.write(rng.randbytes(min(DAMAGE_BYTES, size - size // 2)))
    return len(snaps)


async def wait_snapshot_taken(address: str) -> None:
    async def probe() -> bool | None:
        status = await node_status(address)
        return True if status.snapshot_index > 0 and status.first_index > 1 else None

    await poll_until(probe, WAIT_S, f"{address} never took a snapshot and compacted its log")


def hosts_without(cluster: QuorumProcesses, node_id: int) -> list[str]:
    return [a for n, a in sorted(cluster.addresses.items()) if n != node_id]


async def damage_and_restart(cluster: QuorumProcesses, victim: int, damage_snapshot_files: bool) -> dict[str, bytes]:
    """Write, kill `victim`, write more, damage its database (and snapshots), restart it; returns every
    acknowledged znode."""
    everyone = list(cluster.addresses.values())
    written = await write_znodes(everyone, range(PARENTS), 0, CHILDREN_PER_PARENT)
    leader, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
    commit = (await node_status(leader_address)).commit_index
    await wait_applied(everyone, commit, WAIT_S)
    await wait_snapshot_taken(cluster.addresses[victim])
    cluster.kill(victim)
    await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S, exclude=[victim])
    written |= await write_znodes(
        hosts_without(cluster, victim), range(PARENTS), CHILDREN_PER_PARENT, CHILDREN_WHILE_DOWN
    )

    data_dir = cluster.data_dir(victim)
    assert damage_pages_holding(data_dir / "zk" / "data.mdb", MARKER, seed=victim) >= 1
    if damage_snapshot_files:
        assert damage_snapshots(data_dir, seed=victim) >= 1
    cluster.start(victim)
    await cluster.wait_serving(victim, WAIT_S)
    _, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
    commit = (await node_status(leader_address)).commit_index
    await wait_applied([cluster.addresses[victim]], commit, WAIT_S)
    return written


def assert_rebuilt(cluster: QuorumProcesses, victim: int, source: str) -> None:
    damaged = cluster.log_events(victim, "state_machine_damaged")
    assert [e["phase"] for e in damaged] == ["open"], damaged
    moved = cluster.log_events(victim, "state_machine_moved_aside")
    assert len(moved) == 1 and Path(moved[0]["moved_to"]).exists(), moved
    kept = list((cluster.data_dir(victim) / "zk").glob("data.mdb.damaged-*"))
    assert [str(p) for p in kept] == [moved[0]["moved_to"]]
    assert not cluster.log_events(victim, "node_failed"), cluster.log_events(victim, "node_failed")
    restored = cluster.log_events(victim, "state_machine_restored")
    assert [e["source"] for e in restored] == [source], restored
    assert restored[0]["index"] > 0 and restored[0]["term"] > 0


async def assert_all_readable(cluster: QuorumProcesses, victim: int, written: dict[str, bytes]) -> None:
    found = await read_all_through(cluster.addresses[victim], written)
    missing = [p for p, data in written.items() if found[p] != data]
    assert not missing, f"{len(missing)} of {len(written)} acknowledged znodes wrong on node {victim}: {missing[:5]}"


def pids(cluster: QuorumProcesses, node_ids: list[int]) -> dict[int, int | None]:
    return {n: cluster.pid(n) for n in node_ids}


def case(tmp_path: Path, pick_victim: str, damage_snapshot_files: bool, source: str) -> None:
    with QuorumProcesses(tmp_path, n=3, properties=PROPERTIES) as cluster:

        async def body() -> None:
            cluster.start_all()
            leader, _ = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
            victim = leader if pick_victim == "leader" else next(n for n in cluster.addresses if n != leader)
            healthy = [n for n in cluster.addresses if n != victim]
            before = pids(cluster, healthy)
            written = await damage_and_restart(cluster, victim, damage_snapshot_files)
            assert_rebuilt(cluster, victim, source)
            await assert_all_readable(cluster, victim, written)
            cluster.assert_alive(*cluster.addresses)
            assert pids(cluster, healthy) == before, "a healthy node was restarted"

        run(cluster, body)


def test_follower_with_a_damaged_database_rebuilds_from_its_snapshot_and_log(tmp_path: Path) -> None:
    case(tmp_path, "follower", damage_snapshot_files=False, source="local_snapshot")


def test_follower_without_a_usable_snapshot_takes_a_peers_state(tmp_path: Path) -> None:
    case(tmp_path, "follower", damage_snapshot_files=True, source="peer_snapshot")


def test_leader_with_a_damaged_database_rebuilds_and_rejoins(tmp_path: Path) -> None:
    case(tmp_path, "leader", damage_snapshot_files=False, source="local_snapshot")
