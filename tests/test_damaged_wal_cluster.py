"""Quorum nodes whose write-ahead log tail was damaged after a crash start again and lose nothing acknowledged.

Three real `zkraft quorum start` processes serving the ZooKeeper service,
SIGKILLed; then the end of a node's write-ahead log is damaged the way a
failing disk does it (a flipped byte, a record cut mid-way, a zeroed record
header) and the node is started again. What a user checks: the node starts,
serves, and every znode whose create was acknowledged before the kill is
readable through it (after `sync`) and through the others; its log names the
indexes that were cut. When every node was damaged, every znode any node's
files still held is served afterwards. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from client.zk.aio import AsyncZkClient
from client.zk.client import _SharedLoop
from client.zk.exceptions import ZkException
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, node_status, wait_applied, wait_for_leader
from zkemu.tree import ZnodeTree

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T = TypeVar("T")

PROPERTIES = FAST_ZK_PROPERTIES
LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0
CREATES_IN_FLIGHT = 64
READS_IN_FLIGHT = 128
_RECORD_HEAD = struct.Struct(">II")  # quorum/wal.py: payload length, crc32 seeded with the segment's number
_SAVE_HEAD = struct.Struct(">BQQQI")  # quorum/lmdb_log_store.py: flags, hard state, entry count
_SAVE_HAS_SNAPSHOT = 2
_SAVE_ENTRY_INDEX = struct.Struct(">Q")  # each entry's head begins with its index
# The damage hits the record this many entries before a node's last one: it and everything after it is cut.
CUT_ENTRIES = 100
# Test (b): the quorum is killed once this many creates were acknowledged, with more in flight.
CREATES_BEFORE_KILL = 2000
CREATES_UNTIL_KILLED_MAX = 1_000_000


def run(coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
    """Run a coroutine on the clients' loop (one gRPC asyncio loop per process)."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout_s)


# ---- the damage, done to the files as a failing disk would


def _segment(cluster: QuorumProcesses, node_id: int) -> Path:
    segments = sorted((cluster.data_dir(node_id) / "raft" / "wal").glob("*.wal"))
    assert segments, f"node {node_id} has no write-ahead log segment"
    return segments[-1]


def _entry_records(segment: Path) -> list[tuple[int, int, int]]:
    """(offset, payload length, last entry index) of the segment's valid records that carry entries."""
    data = segment.read_bytes()
    seq = int(segment.stem)
    found: list[tuple[int, int, int]] = []
    offset = 0
    while offset + _RECORD_HEAD.size <= len(data):
        length, crc = _RECORD_HEAD.unpack_from(data, offset)
        payload = data[offset + _RECORD_HEAD.size : offset + _RECORD_HEAD.size + length]
        if length == 0 or len(payload) < length or zlib.crc32(payload, seq & 0xFFFFFFFF) != crc:
            break
        flags, _, _, _, count = _SAVE_HEAD.unpack_from(payload)
        if count > 0:
            at = _SAVE_HEAD.size
            if flags & _SAVE_HAS_SNAPSHOT:
                at += 4 + struct.unpack_from(">I", payload, at)[0]
            first_index = _SAVE_ENTRY_INDEX.unpack_from(payload, at)[0]
            found.append((offset, length, first_index + count - 1))
        offset += _RECORD_HEAD.size + length
    assert found, f"{segment} holds no record with entries"
    return found


def _record_to_damage(segment: Path) -> tuple[int, int]:
    """(offset, payload length) of the record that holds the entry CUT_ENTRIES before the segment's last one (or
    its first record): the damage cuts that record and every one after it."""
    records = _entry_records(segment)
    last_index = records[-1][2]
    offset, length, _ = next((r for r in reversed(records) if r[2] <= last_index - CUT_ENTRIES), records[0])
    return offset, length


def flip_a_byte(segment: Path) -> int:
    offset, length = _record_to_damage(segment)
    at = offset + _RECORD_HEAD.size + length // 2
    with open(segment, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))
    return offset


def cut_mid_record(segment: Path) -> int:
    offset, length = _record_to_damage(segment)
    with open(segment, "r+b") as f:
        f.truncate(offset + _RECORD_HEAD.size + length // 2)
    return offset


def zero_the_header(segment: Path) -> int:
    offset, _ = _record_to_damage(segment)
    with open(segment, "r+b") as f:
        f.seek(offset)
        f.write(b"\0" * _RECORD_HEAD.size)
    return offset


# ---- clients


async def create_znodes(address: str, parent: str, count: int) -> list[str]:
    """Create `count` znodes under `parent` through `address`, CREATES_IN_FLIGHT at a time; the acknowledged ones."""
    async with AsyncZkClient(address, session_timeout_ms=4000, randomize_hosts=False, ensemble_tracker=False) as zk:
        await zk.ensure_path(parent)
        acked: list[str] = []
        sem = asyncio.Semaphore(CREATES_IN_FLIGHT)

        async def one(k: int) -> None:
            async with sem:
                acked.append(str(await zk.create(f"{parent}/n{k:06d}", b"v%d" % k)))

        await asyncio.gather(*(one(k) for k in range(count)))
        return acked


async def missing_through(address: str, paths: list[str]) -> list[str]:
    """The `paths` a client connected only to `address` cannot read after a `sync`."""
    async with AsyncZkClient(address, session_timeout_ms=4000, randomize_hosts=False, ensemble_tracker=False) as zk:
        for parent in sorted({p.rsplit("/", 1)[0] for p in paths}):
            await zk.sync(parent)
        sem = asyncio.Semaphore(READS_IN_FLIGHT)

        async def absent(path: str) -> bool:
            async with sem:
                return await zk.exists(path) is None

        flags = await asyncio.gather(*(absent(p) for p in paths))
        return [p for p, gone in zip(paths, flags, strict=True) if gone]


def _children_on_disk(cluster: QuorumProcesses, node_id: int, parent: str) -> set[str]:
    """The children of `parent` in a stopped node's znode tree, read from its files."""
    tree = ZnodeTree(cluster.data_dir(node_id) / "zk")
    try:
        return {f"{parent}/{name}" for name in tree.get_children(parent)[0]}
    finally:
        tree.close()


def assert_all_readable(cluster: QuorumProcesses, acked: list[str]) -> None:
    for node_id, address in cluster.addresses.items():
        missing = run(missing_through(address, acked))
        assert missing == [], f"node {node_id} lacks {len(missing)} acknowledged znodes, e.g. {missing[:5]}"


# ---- the tests


def test_a_follower_with_a_damaged_wal_tail_rejoins_and_serves_every_acknowledged_znode(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, n=3, properties=PROPERTIES) as cluster:
        cluster.start_all()
        leader, leader_address = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        acked = run(create_znodes(leader_address, "/before", 3000))
        commit = run(node_status(leader_address)).commit_index
        run(wait_applied(cluster.addresses.values(), commit, timeout_s=WAIT_S))
        follower = min(n for n in cluster.addresses if n != leader)
        applied = run(node_status(cluster.addresses[follower])).applied_index

        cluster.kill(follower)
        segment = _segment(cluster, follower)
        damaged_at = flip_a_byte(segment)
        cluster.start(follower)

        run(wait_applied([cluster.addresses[follower]], commit, timeout_s=WAIT_S))
        acked += run(create_znodes(leader_address, "/after", 200))
        assert_all_readable(cluster, acked)
        cluster.assert_alive()

        [cut] = cluster.log_events(follower, "write_ahead_log_tail_cut")
        assert (cut["segment"], cut["offset_bytes"], cut["reason"]) == (segment.name, damaged_at, "crc_mismatch")
        assert cut["last_valid_index"] < cut["first_index_cut"] <= applied - CUT_ENTRIES < cut["last_index_cut"], cut
        assert cut["last_index_cut"] <= applied, cut
        [recovered] = cluster.log_events(follower, "log_recovered_from_applied_state")
        assert recovered["snapshot_base"] == applied and recovered["log_end_before"] == cut["last_valid_index"]


DAMAGES: tuple[Callable[[Path], int], ...] = (flip_a_byte, cut_mid_record, zero_the_header)


async def _write_until_killed(address: str, acked: list[str], started: asyncio.Event) -> None:
    """Create znodes until the cluster dies under the client; `acked` gets each acknowledged path."""
    async with AsyncZkClient(address, session_timeout_ms=4000, randomize_hosts=False, ensemble_tracker=False) as zk:
        await zk.ensure_path("/live")
        numbers = iter(range(CREATES_UNTIL_KILLED_MAX))

        async def worker() -> None:
            for k in numbers:
                acked.append(str(await zk.create(f"/live/n{k:06d}", b"v%d" % k)))
                if len(acked) >= CREATES_BEFORE_KILL:
                    started.set()

        with contextlib.suppress(ZkException):
            await asyncio.gather(*(worker() for _ in range(CREATES_IN_FLIGHT)))


def test_every_node_with_a_damaged_wal_tail_still_elects_and_keeps_every_acknowledged_znode(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, n=3, properties=PROPERTIES) as cluster:
        cluster.start_all()
        _, leader_address = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        acked: list[str] = []
        loop, _ = _SharedLoop.get()
        started = asyncio.Event()
        writer = asyncio.run_coroutine_threadsafe(_write_until_killed(leader_address, acked, started), loop)
        run(asyncio.wait_for(started.wait(), WAIT_S))
        for node_id in cluster.addresses:  # writes still in flight: a crash of the whole quorum
            cluster.kill(node_id)
        acked_before_kill = list(acked)  # the client got these replies before the last node died
        writer.cancel()
        with contextlib.suppress(Exception):
            writer.result(WAIT_S)

        # What any node's tree holds after the crash was committed: none of it may be lost.
        surviving = sorted(set().union(*(_children_on_disk(cluster, n, "/live") for n in cluster.addresses)))
        assert set(acked_before_kill) <= set(surviving)
        damaged = {
            n: damage(_segment(cluster, n)) for n, damage in zip(sorted(cluster.addresses), DAMAGES, strict=True)
        }
        cluster.start_all()
        run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        assert_all_readable(cluster, surviving)
        cluster.assert_alive()
        for node_id, offset in damaged.items():
            cuts = cluster.log_events(node_id, "write_ahead_log_tail_cut")
            assert [c["offset_bytes"] for c in cuts] == [offset], cuts
