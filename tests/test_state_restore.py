"""quorum.state_restore: which base a state machine behind its log is restored from, and what the log keeps.

A register map applied entries 1..30 of term 1, took a snapshot at 20 and the
log was compacted to 15; then its database was lost (a fresh, empty map).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from quorum.errors import StartupError
from quorum.log_store import MemoryLogStore
from quorum.raft.types import Entry, HardState, PersistentState, SnapshotMeta
from quorum.register_command import encode_set
from quorum.settings import NodeSettings
from quorum.snapshot_store import SnapshotStore
from quorum.state_fetch import PEER_CONNECT_TIMEOUT_S, fetch_peer_state
from quorum.state_machine import RegisterMap
from quorum.state_restore import restore_base
from tests.quorum_harness import free_ports

VOTERS = (1, 2, 3)


def entry(index: int, term: int = 1) -> Entry:
    return Entry(index, term, encode_set(b"k%d" % index, b"v%d-%d" % (index, term)))


def take_snapshot(sm: RegisterMap, snapshots: SnapshotStore, term: int = 1) -> SnapshotMeta:
    meta = SnapshotMeta(sm.applied_index(), term, VOTERS)
    with snapshots.create(meta) as writer:
        for chunk in sm.snapshot_chunks():
            writer.write(chunk)
    return meta


class Node:
    """The storage of one node: a log store, a snapshot store, and the original map (kept for comparing)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.snapshots = SnapshotStore(root / "snapshots", logger=structlog.get_logger())
        self.store = MemoryLogStore()
        original = RegisterMap(root / "original")
        original.apply([entry(i) for i in range(1, 21)])
        self.snapshot_20 = take_snapshot(original, self.snapshots)
        original.apply([entry(i) for i in range(21, 31)])
        self.original = original
        self.store.save(HardState(1, 1, 30), [entry(i) for i in range(1, 31)], None, True)
        self.store.compact(15, self.snapshot_20)
        self.fetched: list[int] = []

    def fresh_map(self) -> RegisterMap:
        return RegisterMap(self.root / "rebuilt")

    def fetch_from(self, peer_map: RegisterMap, term: int) -> Any:
        def fetch(min_index: int) -> tuple[SnapshotMeta, int]:
            self.fetched.append(min_index)
            return take_snapshot(peer_map, self.snapshots, term), 2

        return fetch


def no_fetch(min_index: int) -> tuple[SnapshotMeta, int]:
    raise AssertionError(f"fetched a peer's state (min index {min_index}) with a base at hand")


def replay(sm: RegisterMap, state: PersistentState, through: int) -> None:
    sm.apply([e for e in state.entries if sm.applied_index() < e.index <= through])


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def restored_events(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "state_machine_restored"]


def test_a_state_machine_at_or_past_the_log_start_is_left_alone(node: Node) -> None:
    state = node.store.load()
    with capture_logs() as logs:
        started = restore_base(state, node.original, node.store, node.snapshots, no_fetch, structlog.get_logger())
    assert started == state and logs == []


def test_an_empty_map_is_restored_from_the_own_snapshot_and_the_log_replays_the_rest(node: Node) -> None:
    sm = node.fresh_map()
    state = node.store.load()
    with capture_logs() as logs:
        started = restore_base(state, sm, node.store, node.snapshots, no_fetch, structlog.get_logger())
    assert started == state and sm.applied_index() == 20
    [event] = restored_events(logs)
    assert (event["source"], event["index"], event["term"], event["replay_to"]) == ("local_snapshot", 20, 1, 30)
    replay(sm, started, 30)
    assert [sm.read(b"k%d" % i) for i in range(1, 31)] == [node.original.read(b"k%d" % i) for i in range(1, 31)]


def test_a_damaged_own_snapshot_is_moved_aside_and_a_peers_state_that_the_log_holds_keeps_the_log(node: Node) -> None:
    snap = node.snapshots.path(node.snapshot_20)
    snap.write_bytes(b"\xff" + snap.read_bytes()[1:])
    peer = RegisterMap(node.root / "peer")
    peer.apply([entry(i) for i in range(1, 26)])
    sm = node.fresh_map()
    with capture_logs() as logs:
        started = restore_base(
            node.store.load(), sm, node.store, node.snapshots, node.fetch_from(peer, 1), structlog.get_logger()
        )
    assert node.fetched == [15], "asked for a state covering the log from its compaction point"
    assert [e["event"] for e in logs if "snapshot" in e["event"]] == ["snapshot_damaged", "snapshot_moved_aside"]
    assert list(node.root.glob("snapshots/*.snap.damaged-*")), "the damaged snapshot is kept"
    assert sm.applied_index() == 25
    assert started.compacted_index == 15 and [e.index for e in started.entries] == list(range(16, 31))
    assert started.snapshot == SnapshotMeta(25, 1, VOTERS) == node.store.load().snapshot
    [event] = restored_events(logs)
    assert (event["source"], event["peer"], event["index"]) == ("peer_snapshot", 2, 25)
    replay(sm, started, 30)
    assert [sm.read(b"k%d" % i) for i in range(1, 31)] == [node.original.read(b"k%d" % i) for i in range(1, 31)]


def test_a_peers_state_beyond_the_log_replaces_the_log(node: Node) -> None:
    node.snapshots.set_aside(node.snapshot_20)
    peer = RegisterMap(node.root / "peer")
    peer.apply([entry(i) for i in range(1, 31)] + [entry(i, term=2) for i in range(31, 41)])
    sm = node.fresh_map()
    with capture_logs() as logs:
        started = restore_base(
            node.store.load(), sm, node.store, node.snapshots, node.fetch_from(peer, 2), structlog.get_logger()
        )
    base = SnapshotMeta(40, 2, VOTERS)
    assert started == PersistentState(HardState(1, 1, 30), base, 40, 2, ())
    assert node.store.load() == started, "the log store holds what the core starts from"
    [replaced] = [e for e in logs if e["event"] == "log_replaced_by_snapshot"]
    assert (replaced["log_first"], replaced["log_last"]) == (16, 30)
    assert sm.applied_index() == 40 and sm.read(b"k40") == b"v40-2"


def test_a_peers_state_that_disagrees_with_the_log_at_its_index_replaces_the_log(node: Node) -> None:
    """Entries 26..30 of this node's log are of term 1; the peer's entry 28 is of term 2: this node's
    entries from 26 on were never committed (the committed entry 28 is the peer's), so they go."""
    node.snapshots.set_aside(node.snapshot_20)
    peer = RegisterMap(node.root / "peer")
    peer.apply([entry(i) for i in range(1, 26)] + [entry(i, term=2) for i in range(26, 29)])
    sm = node.fresh_map()
    started = restore_base(
        node.store.load(), sm, node.store, node.snapshots, node.fetch_from(peer, 2), structlog.get_logger()
    )
    assert (started.compacted_index, started.compacted_term, started.entries) == (28, 2, ())
    assert sm.read(b"k27") == b"v27-2"


def test_with_nothing_compacted_the_log_alone_rebuilds_the_state(tmp_path: Path) -> None:
    store = MemoryLogStore()
    store.save(HardState(1, 1, 10), [entry(i) for i in range(1, 11)], None, True)
    snapshots = SnapshotStore(tmp_path / "snapshots", logger=structlog.get_logger())
    sm = RegisterMap(tmp_path / "rebuilt")
    sm.rebuilt = True  # as if its database had just been moved aside
    with capture_logs() as logs:
        started = restore_base(store.load(), sm, store, snapshots, no_fetch, structlog.get_logger())
    assert started == store.load()
    [event] = restored_events(logs)
    assert (event["source"], event["replay_from"], event["replay_to"]) == ("log", 1, 10)


def test_without_a_peer_to_answer_the_fetch_refuses_the_start_naming_each_peer(tmp_path: Path) -> None:
    ports = free_ports(3)
    peers = {n: f"127.0.0.1:{port}" for n, port in zip((1, 2, 3), ports, strict=True)}
    settings = NodeSettings(
        node_id=1, data_dir=tmp_path, listen=peers[1], peers=peers, tick_time_ms=200, init_limit_ticks=5
    )
    snapshots = SnapshotStore(tmp_path / "snapshots", logger=structlog.get_logger())
    started = time.monotonic()
    with capture_logs() as logs, pytest.raises(StartupError) as refused:
        fetch_peer_state(settings, "digest", 15, snapshots, structlog.get_logger())
    assert time.monotonic() - started < 1.0 + PEER_CONNECT_TIMEOUT_S + 1.0, "initLimit x tickTime bounds the wait"
    message = str(refused.value)
    assert "index >= 15" in message and "within 1 s (initLimit x tickTime)" in message
    assert "peer 2:" in message and "peer 3:" in message
    assert {e["peer"] for e in logs if e["event"] == "state_fetch_failed"} <= {2, 3}
    assert snapshots.complete() == []
