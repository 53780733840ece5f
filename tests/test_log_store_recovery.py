"""A quorum node's start-up over a log that lost entries its state machine applied (quorum.raft.recovery).

The files are written as a node leaves them when SIGKILLed (the log store's
write-ahead log not yet checkpointed, the state machine's LMDB committed), then
damaged, then a QuorumNode is built on them: what it starts from, what it
persisted, and the snapshot it can serve.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from quorum import errors
from quorum.lmdb_log_store import LmdbLogStore
from quorum.node import QuorumNode
from quorum.raft.types import Entry, HardState, SnapshotMeta
from quorum.register_command import encode_set
from quorum.settings import NodeSettings
from quorum.state_machine import RegisterMap
from tests.quorum_harness import REPO_ROOT, subprocess_env
from zkemu.tree import ZnodeTree
from zkraft_proto import zk_pb2

PEERS = {1: "127.0.0.1:19001", 2: "127.0.0.1:19002", 3: "127.0.0.1:19003"}


def settings(data_dir: Path) -> NodeSettings:
    return NodeSettings(node_id=1, data_dir=data_dir, listen=PEERS[1], peers=PEERS)


def sets(first: int, last: int, term: int) -> list[Entry]:
    return [Entry(i, term, encode_set(b"k%d" % i, b"v%d" % i)) for i in range(first, last + 1)]


def crashed_node(data_dir: Path, runs: list[list[Entry]], hard_state: HardState, applied_through: int) -> list[int]:
    """A node's files after a SIGKILL: each run saved as one write-ahead record (none checkpointed), the
    register map applied through `applied_through`. Returns each record's offset in the segment."""
    live = data_dir.with_name(data_dir.name + "-live")
    store = LmdbLogStore(live / "raft")
    store.set_identity("zkraft", ",".join(f"{i}={a}" for i, a in sorted(PEERS.items())))
    offsets = []
    for run in runs:
        offsets.append(store._wal.size_bytes)
        store.save(hard_state, run, None, sync=True)
    shutil.copytree(live / "raft", data_dir / "raft", ignore=shutil.ignore_patterns("lock.mdb"))
    store.close()
    machine = RegisterMap(data_dir / "state")
    machine.apply([e for run in runs for e in run if e.index <= applied_through])
    machine.close()
    return offsets


def flip_record(data_dir: Path, offset: int) -> None:
    [segment] = (data_dir / "raft" / "wal").glob("*.wal")
    data = bytearray(segment.read_bytes())
    data[offset + 8 + 1] ^= 0x01
    segment.write_bytes(bytes(data))


def close(node: QuorumNode) -> None:
    node._writer.shutdown(wait=True)
    node._store.close()
    node.state_machine.close()


def test_an_applied_index_beyond_the_cut_log_becomes_a_snapshot_the_node_can_serve(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    offsets = crashed_node(data_dir, [sets(1, 5, 2), sets(6, 8, 2), sets(9, 10, 3)], HardState(3, 2, 8), 10)
    flip_record(data_dir, offsets[1])  # cuts 6-10; the register map applied all of them

    node = QuorumNode(settings(data_dir))
    try:
        core = node.core
        assert (core.first_index, core.last_index, core.applied_index, core.commit_index) == (11, 10, 10, 10)
        assert core.snapshot == SnapshotMeta(10, 3, (1, 2, 3)) and core.term_at(10) == 3
        assert not core.log_incomplete  # what it applied covers everything it may have acknowledged
        assert (core.term, core.vote) == (3, 2)  # the stored vote of that very term stands
        # The snapshot is in the snapshot store, whole, for InstallSnapshot.
        node.snapshot_store().verify(core.snapshot)
        copy = RegisterMap(tmp_path / "copy")
        copy.restore(node.snapshot_store().path(core.snapshot), 10, 3)
        assert [copy.read(b"k%d" % i) for i in (1, 7, 10)] == [b"v1", b"v7", b"v10"]
        copy.close()
    finally:
        close(node)
    # Persisted: the next start finds a consistent store and changes nothing.
    store = LmdbLogStore(data_dir / "raft")
    state = store.load()
    store.close()
    assert (state.snapshot, state.compacted_index, state.entries, state.hard_state) == (
        SnapshotMeta(10, 3, (1, 2, 3)),
        10,
        (),
        HardState(3, 2, 8),
    )


def test_entries_acknowledged_beyond_what_was_applied_leave_the_log_incomplete_until_the_commit_reaches_them(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "node"
    offsets = crashed_node(data_dir, [sets(1, 5, 2), sets(6, 8, 2), sets(9, 12, 2)], HardState(2, 0, 6), 7)
    flip_record(data_dir, offsets[1])

    node = QuorumNode(settings(data_dir))
    try:
        assert (node.core.first_index, node.core.last_index, node.core.applied_index) == (8, 7, 7)
        assert node.core.log_incomplete  # 8-12 were acknowledged, maybe committed, and are gone
        assert (node.core.term, node.core.vote) == (2, 1)  # no vote survived in term 2: count it given
    finally:
        close(node)
    store = LmdbLogStore(data_dir / "raft")
    state = store.load()
    store.close()
    assert state.repair_index == 12 and state.hard_state.vote == 1


def test_the_applied_term_is_stored_with_the_applied_index(tmp_path: Path) -> None:
    machine = RegisterMap(tmp_path / "state")
    assert (machine.applied_index(), machine.applied_term()) == (0, 0)
    machine.apply(sets(1, 3, 4))
    machine.close()
    reopened = RegisterMap(tmp_path / "state")
    assert (reopened.applied_index(), reopened.applied_term()) == (3, 4)
    reopened.close()

    tree = ZnodeTree(tmp_path / "zk")
    create = zk_pb2.Txn(create=zk_pb2.CreateOp(path="/a", data=b"x"), time_ms=1).SerializeToString()
    tree.prepare([Entry(1, 5, create)])
    assert tree.applied_term() == 0  # prepared is not applied: nothing of it is stored before its commit
    tree.apply([Entry(1, 5, create)])
    tree.close()
    reopened_tree = ZnodeTree(tmp_path / "zk")
    assert (reopened_tree.applied_index(), reopened_tree.applied_term()) == (1, 5)
    reopened_tree.close()


def _forget_applied_term(state_dir: Path) -> None:
    """As a database written before the applied term was stored."""
    env = lmdb.open(str(state_dir), max_dbs=2)
    with env.begin(write=True) as txn:
        txn.delete(b"applied_term", db=env.open_db(b"meta", txn=txn))
    env.close()


def test_an_old_database_without_an_applied_term_takes_it_from_the_log(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    crashed_node(data_dir, [sets(1, 5, 2), sets(6, 8, 3)], HardState(3, 1, 8), 7)
    _forget_applied_term(data_dir / "state")
    assert RegisterMap(data_dir / "state").applied_term() is None
    node = QuorumNode(settings(data_dir))
    try:
        assert (node.core.first_index, node.core.last_index, node.core.applied_index) == (1, 8, 7)
        assert node.core.snapshot is None
    finally:
        close(node)


def test_an_old_database_applied_beyond_the_cut_log_refuses_to_start_naming_the_problem(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    offsets = crashed_node(data_dir, [sets(1, 5, 2), sets(6, 8, 3)], HardState(3, 1, 8), 8)
    flip_record(data_dir, offsets[1])
    _forget_applied_term(data_dir / "state")
    with pytest.raises(errors.StartupError, match="applied entry 8 but records no term for it .* log ends at 5"):
        QuorumNode(settings(data_dir))
    # What the message says to do: with the state machine's directory moved aside, the node starts from
    # its log (and would take the rest from the leader).
    (data_dir / "state").rename(tmp_path / "state-aside")
    node = QuorumNode(settings(data_dir))
    try:
        assert (node.core.applied_index, node.core.last_index) == (0, 5)
    finally:
        close(node)


def test_the_refusal_is_one_line_and_a_non_zero_exit_of_the_command(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    offsets = crashed_node(data_dir, [sets(1, 5, 2), sets(6, 8, 3)], HardState(3, 1, 8), 8)
    flip_record(data_dir, offsets[1])
    _forget_applied_term(data_dir / "state")
    config = tmp_path / "quorum.properties"
    config.write_text("quorum.state.machine=register\n", encoding="utf-8")
    peers = ",".join(f"{i}={a}" for i, a in sorted(PEERS.items()))
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "quorum", "start", "--id", "1", "--data-dir", str(data_dir),
         "--listen", PEERS[1], "--peers", peers, "--cluster-id", "zkraft", "--config", str(config)],
        cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # Besides the node's JSON log (the cut it made is in it), exactly one line: the error.
    lines = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith("zkraft: error:") and "records no term" in lines[0], lines
    assert '"event": "write_ahead_log_tail_cut"' in result.stderr
