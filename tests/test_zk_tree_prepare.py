"""ZnodeTree.prepare: entries applied ahead of their commit change nothing anyone can see until `apply`,
and a tree that prepares (rightly, too much, too little, or the wrong entries) ends exactly where a tree
that only applies does: the same results, the same watch triggers, the same digest."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from quorum.raft.types import Entry, EntryKind
from zkemu.tree import AppliedTxn, ZnodeTree
from zkraft_proto import zk_pb2 as pb

T0_MS = 1_700_000_000_000


def txn(index: int, session: int = 0, **body: object) -> Entry:
    t = pb.Txn(time_ms=T0_MS + index, session_id=session, **body)  # type: ignore[arg-type]
    return Entry(index, 1, t.SerializeToString())


def workload(count: int, seed: int) -> list[Entry]:
    """Creates (sequential and ephemeral too), sets, deletes, multis (some failing), sessions, no-ops."""
    rng = random.Random(seed)
    entries: list[Entry] = []
    for i in range(1, count + 1):
        roll = rng.random()
        name = f"/n{rng.randrange(6)}"
        if i == 1:
            entries.append(txn(i, 7, create_session=pb.CreateSessionTxn(session_id=7, timeout_ms=10_000)))
        elif roll < 0.05:
            entries.append(Entry(i, 1, b"", EntryKind.NOOP))
        elif roll < 0.35:
            mode = rng.choice((0, 1, 2, 3))
            entries.append(txn(i, 7, create=pb.CreateOp(path=name, data=b"c%d" % i, mode=mode)))
        elif roll < 0.55:
            entries.append(txn(i, 7, set_data=pb.SetDataOp(path=name, data=b"s%d" % i, version=-1)))
        elif roll < 0.7:
            entries.append(txn(i, 7, delete=pb.DeleteOp(path=name, version=-1)))
        else:
            ops = [
                pb.Op(create=pb.CreateOp(path=f"/m{i}", data=b"m")),
                pb.Op(check=pb.CheckOp(path=name, version=rng.choice((-1, 0, 3)))),
                pb.Op(set_data=pb.SetDataOp(path=f"/m{i}", data=b"mm", version=0)),
            ]
            entries.append(txn(i, 7, multi=pb.MultiOp(ops=ops)))
    return entries


def other_entry(e: Entry) -> Entry:
    """What a new leader might have put at the same index instead (another term, another write)."""
    t = pb.Txn(time_ms=T0_MS + e.index, set_data=pb.SetDataOp(path="/", data=b"other", version=-1))
    return Entry(e.index, e.term + 1, t.SerializeToString())


class Recorder:
    def __init__(self, path: Path) -> None:
        self.triggers: list[AppliedTxn] = []
        self.tree = ZnodeTree(path, on_applied=self.triggers.append)


@pytest.mark.parametrize("seed", range(6))
def test_preparing_ahead_ends_where_applying_does(tmp_path: Path, seed: int) -> None:
    entries = workload(300, seed)
    plain, ahead = Recorder(tmp_path / "plain"), Recorder(tmp_path / "ahead")
    rng = random.Random(seed + 100)
    plain_results: list[bytes] = []
    ahead_results: list[bytes] = []
    prepared_kinds = {"exact": 0, "longer": 0, "shorter": 0, "wrong": 0}
    i = 0
    while i < len(entries):
        run = entries[i : i + rng.randint(1, 4)]
        plain_results += plain.tree.apply(run)
        kind = rng.choice(tuple(prepared_kinds))
        if kind == "exact":
            ahead.tree.prepare(run)
        elif kind == "longer":
            ahead.tree.prepare(entries[i : i + len(run) + 2])
        elif kind == "shorter" and len(run) > 1:
            ahead.tree.prepare(run[:-1])
        elif kind == "wrong":
            ahead.tree.prepare([other_entry(run[0]), *run[1:]])
        prepared_kinds[kind] += 1
        ahead_results += ahead.tree.apply(run)
        i += len(run)
    assert all(prepared_kinds.values())
    assert ahead_results == plain_results
    assert ahead.triggers == plain.triggers
    assert ahead.tree.applied_index() == plain.tree.applied_index() == len(entries)
    assert ahead.tree.digest() == plain.tree.digest()


def test_prepared_entries_are_seen_by_no_read_and_fire_no_watch_before_apply(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "t")
    rec.tree.apply([txn(1, create=pb.CreateOp(path="/a", data=b"old"))])
    before = rec.tree.digest()
    ahead = [txn(2, set_data=pb.SetDataOp(path="/a", data=b"new", version=-1)), txn(3, create=pb.CreateOp(path="/b"))]
    rec.tree.prepare(ahead)
    assert rec.tree.get_data("/a")[0] == b"old" and rec.tree.stat("/b") is None
    assert rec.tree.applied_index() == 1 and rec.tree.digest() == before
    assert len(rec.triggers) == 1
    results = rec.tree.apply(ahead)
    assert [pb.TxnResult.FromString(r).err for r in results] == [0, 0]
    assert rec.tree.get_data("/a")[0] == b"new" and rec.tree.stat("/b") is not None
    assert rec.tree.applied_index() == 3 and len(rec.triggers) == 3


def test_prepare_takes_only_the_entries_next_to_apply(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "t")
    rec.tree.prepare([txn(2, create=pb.CreateOp(path="/gap"))])  # entry 1 is not applied yet
    rec.tree.apply([txn(1, create=pb.CreateOp(path="/a"))])
    assert rec.tree.stat("/gap") is None
    rec.tree.apply([txn(2, create=pb.CreateOp(path="/b"))])
    assert rec.tree.stat("/b") is not None and rec.tree.stat("/gap") is None


def test_restore_drops_what_was_prepared(tmp_path: Path) -> None:
    source = Recorder(tmp_path / "source")
    source.tree.apply([txn(1, create=pb.CreateOp(path="/snap"))])
    snapshot = tmp_path / "snapshot"
    with open(snapshot, "wb") as f:
        for chunk in source.tree.snapshot_chunks():
            f.write(chunk)
    rec = Recorder(tmp_path / "t")
    rec.tree.prepare([txn(1, create=pb.CreateOp(path="/prepared"))])
    rec.tree.restore(snapshot, 1)
    assert rec.tree.stat("/snap") is not None and rec.tree.stat("/prepared") is None
    rec.tree.apply([txn(2, create=pb.CreateOp(path="/after"))])
    assert rec.tree.stat("/after") is not None and rec.tree.stat("/prepared") is None
