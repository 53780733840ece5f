"""The znode tree as a state machine: Stat fields, sequential names, multi, sessions, triggers, errors, snapshots.

Every test builds `zk_pb2.Txn` protos and applies them as Raft entries, as the
quorum would; the zxid of each write is its entry index.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quorum.raft.errors import InvariantViolation
from quorum.raft.types import Entry, EntryKind
from zkemu import tree as tree_module
from zkemu.errors import (
    BadArgumentsError,
    Code,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    ZkError,
    error_for,
    message_for,
)
from zkemu.events import EventType, WatchTrigger
from zkemu.paths import basename, is_special_path, parent_of, validate_path
from zkemu.stat import Stat
from zkemu.tree import DATA_BYTES_MAX, PATH_BYTES_MAX, AppliedTxn, TreeSnapshotError, ZnodeTree, check_data_length
from zkemu.tree_check import check_tree
from zkraft_proto import zk_pb2 as pb

CREATED, DELETED, CHANGED, CHILDREN = (
    EventType.NODE_CREATED,
    EventType.NODE_DELETED,
    EventType.NODE_DATA_CHANGED,
    EventType.NODE_CHILDREN_CHANGED,
)
PERSISTENT, EPHEMERAL, PERSISTENT_SEQUENTIAL, EPHEMERAL_SEQUENTIAL = 0, 1, 2, 3
T0_MS = 1_700_000_000_000


# ---------------------------------------------------------------- helpers
def op_create(path: str, data: bytes = b"", mode: int = PERSISTENT, make_parents: bool = False) -> pb.Op:
    return pb.Op(create=pb.CreateOp(path=path, data=data, mode=mode, make_parents=make_parents))


def op_delete(path: str, version: int = -1) -> pb.Op:
    return pb.Op(delete=pb.DeleteOp(path=path, version=version))


def op_set(path: str, data: bytes, version: int = -1) -> pb.Op:
    return pb.Op(set_data=pb.SetDataOp(path=path, data=data, version=version))


def op_check(path: str, version: int = -1) -> pb.Op:
    return pb.Op(check=pb.CheckOp(path=path, version=version))


class Zk:
    """A tree plus a log: each call appends one entry (zxid = index, time = T0 + index) and applies it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.applied: list[AppliedTxn] = []
        self.tree = ZnodeTree(path, on_applied=self.applied.append)
        self.log: list[Entry] = []

    @property
    def zxid(self) -> int:
        return len(self.log)

    @staticmethod
    def time_of(zxid: int) -> int:
        return T0_MS + zxid

    @property
    def last(self) -> AppliedTxn:
        return self.applied[-1]

    def append(self, data: bytes, kind: EntryKind = EntryKind.NORMAL) -> bytes:
        entry = Entry(len(self.log) + 1, 1, data, kind)
        self.log.append(entry)
        [result] = self.tree.apply([entry])
        return result

    def txn(self, session: int = 0, **body: Any) -> pb.TxnResult:
        t = pb.Txn(time_ms=self.time_of(len(self.log) + 1), session_id=session, **body)
        return pb.TxnResult.FromString(self.append(t.SerializeToString()))

    def op(self, op: pb.Op, session: int = 0) -> pb.TxnResult:
        """A lone write (the Txn body of the same kind as the Op)."""
        kind = op.WhichOneof("op")
        return self.txn(session, **{kind: getattr(op, kind)})

    def create(
        self, path: str, data: bytes = b"", mode: int = PERSISTENT, session: int = 0, make_parents: bool = False
    ) -> pb.TxnResult:
        return self.op(op_create(path, data, mode, make_parents), session)

    def delete(self, path: str, version: int = -1, session: int = 0) -> pb.TxnResult:
        return self.op(op_delete(path, version), session)

    def set_data(self, path: str, data: bytes, version: int = -1, session: int = 0) -> pb.TxnResult:
        return self.op(op_set(path, data, version), session)

    def check(self, path: str, version: int = -1, session: int = 0) -> pb.TxnResult:
        return self.op(op_check(path, version), session)

    def multi(self, *ops: pb.Op, session: int = 0) -> pb.TxnResult:
        return self.txn(session, multi=pb.MultiOp(ops=list(ops)))

    def open_session(self, session: int, timeout_ms: int = 10_000) -> pb.TxnResult:
        return self.txn(session, create_session=pb.CreateSessionTxn(session_id=session, timeout_ms=timeout_ms))

    def close_session(self, session: int, expired: bool = False) -> pb.TxnResult:
        return self.txn(session, close_session=pb.CloseSessionTxn(session_id=session, expired=expired))

    def stat(self, path: str) -> Stat:
        st = self.tree.stat(path)
        assert st is not None, f"{path} does not exist"
        return st


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[Zk]:
    z = Zk(tmp_path / "tree")
    yield z
    z.tree.close()


# ---------------------------------------------------------------- built-in nodes
def test_fresh_tree_has_the_builtin_nodes_with_zookeepers_initial_stats(zk: Zk) -> None:
    assert zk.tree.get_children("/")[0] == ["zookeeper"]
    assert zk.tree.get_children("/zookeeper")[0] == ["config", "quota"]
    # stat / on a new ZooKeeper: stored cversion 0, one child -> cversion -1 (research §1.1).
    assert zk.stat("/") == Stat(cversion=-1, num_children=1)
    assert zk.stat("/zookeeper") == Stat(cversion=-2, num_children=2)
    assert zk.stat("/zookeeper/quota") == Stat()
    # ZooKeeper sets a read-only ACL on /zookeeper/config at start-up: aversion reads -1.
    assert zk.stat("/zookeeper/config") == Stat(aversion=-1)
    assert zk.tree.all_children_number("/") == 3
    assert zk.tree.all_children_number("/zookeeper") == 2
    assert zk.tree.applied_index() == 0
    assert zk.tree.sessions() == {}


def test_first_child_of_root_brings_its_cversion_to_zero(zk: Zk) -> None:
    zk.create("/a")
    assert zk.stat("/").cversion == 0  # 2*1 - 2
    assert zk.stat("/").num_children == 2
    assert zk.stat("/").pzxid == 1


# ---------------------------------------------------------------- Stat fields
def test_create_sets_every_stat_field(zk: Zk) -> None:
    zk.open_session(0x51)
    res = zk.create("/p", b"hello")
    assert res.err == 0 and res.path == "/p"
    z, t = zk.zxid, zk.time_of(zk.zxid)
    expected = Stat(
        czxid=z,
        mzxid=z,
        ctime=t,
        mtime=t,
        version=0,
        cversion=0,
        aversion=0,
        ephemeral_owner=0,
        data_length=5,
        num_children=0,
        pzxid=z,
    )
    assert zk.stat("/p") == expected
    assert Stat.from_pb(res.stat) == expected
    assert zk.tree.get_data("/p") == (b"hello", expected)
    zk.create("/p/e", mode=EPHEMERAL, session=0x51)
    assert zk.stat("/p/e").ephemeral_owner == 0x51


ZXID, TIME = "zxid", "time"  # markers: the field becomes the zxid / the time of the write under test


@dataclasses.dataclass(frozen=True)
class Plus:
    delta: int


STAT_CHANGES = [
    # (write, observed node, fields that change: ZXID / TIME / Plus(delta) / absolute value)
    (
        "set_data /p",
        lambda zk: zk.set_data("/p", b"abc"),
        "/p",
        {"mzxid": ZXID, "mtime": TIME, "version": Plus(1), "data_length": 3},
    ),
    ("set_data /p/c leaves the parent alone", lambda zk: zk.set_data("/p/c", b"zz"), "/p", {}),
    (
        "set_data /p/c on the child",
        lambda zk: zk.set_data("/p/c", b"zz"),
        "/p/c",
        {"mzxid": ZXID, "mtime": TIME, "version": Plus(1), "data_length": 2},
    ),
    ("create /p/d", lambda zk: zk.create("/p/d"), "/p", {"cversion": Plus(1), "num_children": Plus(1), "pzxid": ZXID}),
    (
        "create ephemeral /p/e",
        lambda zk: zk.create("/p/e", mode=EPHEMERAL, session=7),
        "/p",
        {"cversion": Plus(1), "num_children": Plus(1), "pzxid": ZXID},
    ),
    (
        "create sequential /p/s-",
        lambda zk: zk.create("/p/s-", mode=PERSISTENT_SEQUENTIAL),
        "/p",
        {"cversion": Plus(1), "num_children": Plus(1), "pzxid": ZXID},
    ),
    ("delete /p/c", lambda zk: zk.delete("/p/c"), "/p", {"cversion": Plus(1), "num_children": Plus(-1), "pzxid": ZXID}),
    (
        "close session 7 deletes /p/eph",
        lambda zk: zk.close_session(7),
        "/p",
        {"cversion": Plus(1), "num_children": Plus(-1), "pzxid": ZXID},
    ),
    ("create /p/c/g: the grandparent is untouched", lambda zk: zk.create("/p/c/g"), "/p", {}),
    (
        "create /p/c/g on the parent",
        lambda zk: zk.create("/p/c/g"),
        "/p/c",
        {"cversion": Plus(1), "num_children": Plus(1), "pzxid": ZXID},
    ),
    ("check /p", lambda zk: zk.check("/p", 0), "/p", {}),
    ("failed create (exists)", lambda zk: zk.create("/p/c"), "/p", {}),
    ("failed set_data (bad version)", lambda zk: zk.set_data("/p", b"q", version=5), "/p", {}),
    ("failed delete (bad version)", lambda zk: zk.delete("/p/c", version=5), "/p", {}),
    (
        "multi create /p/x + set_data /p",
        lambda zk: zk.multi(op_create("/p/x"), op_set("/p", b"")),
        "/p",
        {
            "cversion": Plus(1),
            "num_children": Plus(1),
            "pzxid": ZXID,
            "mzxid": ZXID,
            "mtime": TIME,
            "version": Plus(1),
            "data_length": 0,
        },
    ),
    ("failed multi changes nothing", lambda zk: zk.multi(op_create("/p/x"), op_set("/p", b"", 9)), "/p", {}),
]


@pytest.mark.parametrize(
    ("action", "observed", "changes"), [c[1:] for c in STAT_CHANGES], ids=[c[0] for c in STAT_CHANGES]
)
def test_stat_fields_change_exactly_as_zookeeper(
    zk: Zk, action: Callable[[Zk], object], observed: str, changes: dict[str, Any]
) -> None:
    zk.open_session(7)
    zk.create("/p", b"x")
    zk.create("/p/c", b"y")
    zk.create("/p/eph", mode=EPHEMERAL, session=7)
    before = dataclasses.asdict(zk.stat(observed))
    action(zk)
    z = zk.zxid
    expected = dict(before)
    for field, change in changes.items():
        if change == ZXID:
            expected[field] = z
        elif change == TIME:
            expected[field] = zk.time_of(z)
        elif isinstance(change, Plus):
            expected[field] = before[field] + change.delta
        else:
            expected[field] = change
    assert dataclasses.asdict(zk.stat(observed)) == expected


def test_visible_cversion_counts_creates_and_deletes(zk: Zk) -> None:
    zk.create("/c")
    for name in "abc":
        zk.create(f"/c/{name}")
    zk.delete("/c/a")
    zk.delete("/c/b")
    # stored cversion 3 (creates only), 1 child: 2*3 - 1 = 5 = 3 creates + 2 deletes
    assert zk.stat("/c").cversion == 5
    assert zk.stat("/c").num_children == 1


def test_set_data_version_skips_minus_one_after_wrapping(zk: Zk) -> None:
    """ZOOKEEPER-4743: after int32 max the counter goes negative; -1 ("any version") is skipped to 0."""
    zk.create("/v")

    def force_version(version: int) -> None:
        env, nodes = zk.tree._env, zk.tree._nodes
        with env.begin(write=True) as txn:
            raw = txn.get(b"/v", db=nodes)
            h = list(tree_module._NODE.unpack_from(raw))
            h[tree_module._VERSION] = version
            txn.put(b"/v", tree_module._NODE.pack(*h) + raw[tree_module._HDR :], db=nodes)

    force_version(2**31 - 1)
    assert zk.set_data("/v", b"", version=2**31 - 1).stat.version == -(2**31)
    force_version(-2)
    assert zk.set_data("/v", b"", version=-2).stat.version == 0


def test_times_come_from_the_txn_only(zk: Zk) -> None:
    zk.txn(create=pb.CreateOp(path="/t"))  # time_ms = T0 + 1
    zk.log.append(Entry(2, 1, pb.Txn(time_ms=42, set_data=pb.SetDataOp(path="/t", version=-1)).SerializeToString()))
    zk.tree.apply([zk.log[-1]])
    st = zk.stat("/t")
    assert (st.ctime, st.mtime) == (T0_MS + 1, 42)


# ---------------------------------------------------------------- sequential nodes
def test_sequence_numbers_count_every_child_create_and_survive_deletes(zk: Zk) -> None:
    zk.create("/q")
    assert zk.create("/q/s-", mode=PERSISTENT_SEQUENTIAL).path == "/q/s-0000000000"
    zk.create("/q/plain")  # not sequential, still counted
    assert zk.create("/q/s-", mode=PERSISTENT_SEQUENTIAL).path == "/q/s-0000000002"
    zk.delete("/q/s-0000000000")
    zk.delete("/q/plain")
    zk.open_session(3)
    assert zk.create("/q/lock-", mode=EPHEMERAL_SEQUENTIAL, session=3).path == "/q/lock-0000000003"
    assert zk.create("/q/", mode=PERSISTENT_SEQUENTIAL).path == "/q/0000000004"
    assert zk.tree.get_children("/q")[0] == ["0000000004", "lock-0000000003", "s-0000000002"]


def test_sequential_under_root_uses_the_roots_stored_cversion(zk: Zk) -> None:
    assert zk.create("/x-", mode=PERSISTENT_SEQUENTIAL).path == "/x-0000000000"
    assert zk.create("/x-", mode=PERSISTENT_SEQUENTIAL).path == "/x-0000000001"


def test_sequential_path_is_validated_after_the_suffix(zk: Zk) -> None:
    zk.create("/q")
    assert zk.create("/q/", mode=PERSISTENT).err == Code.BADARGUMENTS  # ends with /
    assert zk.create("/q/", mode=PERSISTENT_SEQUENTIAL).err == 0  # "/q/0000000001" is fine


def test_failed_multi_does_not_consume_sequence_numbers(zk: Zk) -> None:
    zk.create("/q")
    zk.multi(op_create("/q/s-", mode=PERSISTENT_SEQUENTIAL), op_delete("/missing"))
    res = zk.multi(op_create("/q/s-", mode=PERSISTENT_SEQUENTIAL), op_create("/q/s-", mode=PERSISTENT_SEQUENTIAL))
    assert [r.path for r in res.results] == ["/q/s-0000000000", "/q/s-0000000001"]


# ---------------------------------------------------------------- make_parents
def test_make_parents_creates_missing_ancestors_in_the_same_zxid(zk: Zk) -> None:
    zk.create("/a")
    res = zk.create("/a/b/c/d", b"leaf", make_parents=True)
    assert res.err == 0 and res.path == "/a/b/c/d"
    z = zk.zxid
    for p in ("/a/b", "/a/b/c", "/a/b/c/d"):
        assert zk.stat(p).czxid == z
    assert zk.tree.get_data("/a/b")[0] == b""
    assert zk.stat("/a/b").ephemeral_owner == 0
    assert zk.last.triggers == (
        WatchTrigger(CREATED, "/a/b"),
        WatchTrigger(CHILDREN, "/a"),
        WatchTrigger(CREATED, "/a/b/c"),
        WatchTrigger(CHILDREN, "/a/b"),
        WatchTrigger(CREATED, "/a/b/c/d"),
        WatchTrigger(CHILDREN, "/a/b/c"),
    )


def test_make_parents_with_an_existing_parent_is_a_plain_create(zk: Zk) -> None:
    zk.create("/a")
    assert zk.create("/a/b", make_parents=True).err == 0
    assert zk.create("/a/b", make_parents=True).err == Code.NODEEXISTS


def test_make_parents_sequential_and_ephemeral_leaf(zk: Zk) -> None:
    zk.open_session(9)
    res = zk.create("/x/y/n-", mode=EPHEMERAL_SEQUENTIAL, session=9, make_parents=True)
    assert res.path == "/x/y/n-0000000000"
    assert zk.stat("/x/y").ephemeral_owner == 0
    assert zk.stat(res.path).ephemeral_owner == 9
    assert zk.tree.ephemerals(9) == ["/x/y/n-0000000000"]


def test_make_parents_under_an_ephemeral_fails_and_creates_nothing(zk: Zk) -> None:
    zk.open_session(9)
    zk.create("/e", mode=EPHEMERAL, session=9)
    assert zk.create("/e/a/b", make_parents=True).err == Code.NOCHILDRENFOREPHEMERALS
    assert zk.tree.stat("/e/a") is None
    assert zk.last.triggers == ()


def test_make_parents_rejects_an_invalid_parent_path(zk: Zk) -> None:
    assert zk.create("/a//b", make_parents=True).err == Code.BADARGUMENTS
    assert zk.tree.stat("/a") is None


# ---------------------------------------------------------------- multi
def test_multi_success_results_and_triggers(zk: Zk) -> None:
    zk.create("/m", b"0")
    zk.create("/m/old")
    res = zk.multi(
        op_create("/m/new", b"n"),
        op_create("/m/new/kid"),  # sees the create before it
        op_set("/m", b"1", version=0),
        op_delete("/m/old", version=0),
        op_check("/m", version=1),  # sees the set_data before it
    )
    assert res.err == 0
    assert [r.err for r in res.results] == [0, 0, 0, 0, 0]
    z = zk.zxid
    assert res.results[0].path == "/m/new" and res.results[0].stat.czxid == z
    assert res.results[1].path == "/m/new/kid"
    assert res.results[2].stat.version == 1 and res.results[2].stat.mzxid == z
    assert not res.results[3].HasField("stat") and not res.results[4].HasField("stat")
    assert zk.last.triggers == (
        WatchTrigger(CREATED, "/m/new"),
        WatchTrigger(CHILDREN, "/m"),
        WatchTrigger(CREATED, "/m/new/kid"),
        WatchTrigger(CHILDREN, "/m/new"),
        WatchTrigger(CHANGED, "/m"),
        WatchTrigger(DELETED, "/m/old"),
        WatchTrigger(CHILDREN, "/m"),
    )
    assert zk.stat("/m/new/kid").czxid == zk.stat("/m").mzxid == z


@pytest.mark.parametrize(
    ("ops", "codes"),
    [
        ([op_create("/m/a"), op_create("/m/a/b"), op_set("/missing", b"")], [0, 0, Code.NONODE]),
        ([op_create("/m/a"), op_delete("/nope"), op_create("/m/b")], [0, Code.NONODE, Code.RUNTIMEINCONSISTENCY]),
        (
            [op_check("/m", 3), op_create("/m/a"), op_create("/m/b")],
            [Code.BADVERSION, Code.RUNTIMEINCONSISTENCY, Code.RUNTIMEINCONSISTENCY],
        ),
        ([op_create("/m/a"), op_create("/m/a")], [0, Code.NODEEXISTS]),
        ([op_create("/m/y"), op_delete("/m")], [0, Code.NOTEMPTY]),
        ([op_create("/m/a"), pb.Op()], [0, Code.UNIMPLEMENTED]),
    ],
    ids=["last-fails", "middle-fails", "first-fails", "sees-own-create", "not-empty", "empty-op"],
)
def test_failed_multi_changes_nothing_and_reports_per_op_codes(zk: Zk, ops: list[pb.Op], codes: list[int]) -> None:
    zk.create("/m")
    zk.create("/m/x")
    digest_before = _state_without_index(zk)
    res = zk.multi(*ops)
    assert res.err == 0  # ZooKeeper's outer err of a failed multi
    assert [r.err for r in res.results] == codes
    assert all(not r.path and not r.HasField("stat") for r in res.results)
    assert zk.last.triggers == ()
    assert zk.tree.applied_index() == zk.zxid  # the zxid is consumed all the same
    assert _state_without_index(zk) == digest_before


def test_empty_multi_succeeds(zk: Zk) -> None:
    res = zk.multi()
    assert res.err == 0 and list(res.results) == []


def test_multi_from_an_expired_session_fails_as_a_whole(zk: Zk) -> None:
    res = zk.multi(op_create("/a"), session=0x77)
    assert res.err == Code.SESSIONEXPIRED and list(res.results) == []


# ---------------------------------------------------------------- sessions
def test_sessions_are_recorded_and_forgotten(zk: Zk) -> None:
    zk.open_session(1, 6000)
    assert zk.last.created_session == 1
    zk.open_session(-5, 4000)  # top byte = server id can make an id negative
    assert zk.tree.sessions() == {1: 6000, -5: 4000}
    assert zk.tree.has_session(-5)
    zk.close_session(-5)
    assert zk.last.closed_session == -5
    assert zk.tree.sessions() == {1: 6000}
    assert not zk.tree.has_session(-5)


def test_close_session_deletes_its_ephemerals_under_one_zxid(zk: Zk) -> None:
    zk.open_session(1)
    zk.open_session(2)
    zk.create("/e")
    zk.create("/f")
    for p in ("/e/b", "/f/x", "/e/a"):
        assert zk.create(p, mode=EPHEMERAL, session=1).err == 0
    zk.create("/e/c", mode=EPHEMERAL, session=2)
    e_before = zk.stat("/e")
    assert zk.tree.ephemerals(1) == ["/e/a", "/e/b", "/f/x"]
    assert zk.tree.ephemerals(1, "/e") == ["/e/a", "/e/b"]

    res = zk.close_session(1, expired=True)
    z = zk.zxid
    assert res.err == 0
    assert zk.last.closed_session == 1 and zk.last.session_id == 1
    assert zk.last.triggers == (
        WatchTrigger(DELETED, "/e/a"),
        WatchTrigger(CHILDREN, "/e"),
        WatchTrigger(DELETED, "/e/b"),
        WatchTrigger(CHILDREN, "/e"),
        WatchTrigger(DELETED, "/f/x"),
        WatchTrigger(CHILDREN, "/f"),
    )
    assert zk.tree.get_children("/e")[0] == ["c"]
    assert zk.tree.get_children("/f")[0] == []
    e = zk.stat("/e")
    assert (e.pzxid, e.cversion, e.num_children) == (z, e_before.cversion + 2, 1)
    assert zk.stat("/f").pzxid == z
    assert zk.tree.ephemerals(1) == []
    assert zk.tree.ephemerals(2) == ["/e/c"]
    assert zk.create("/g", session=1).err == Code.SESSIONEXPIRED


def test_an_ephemeral_deleted_explicitly_leaves_the_session_index(zk: Zk) -> None:
    zk.open_session(1)
    zk.create("/e", mode=EPHEMERAL, session=1)
    zk.delete("/e", session=1)
    assert zk.tree.ephemerals(1) == []
    zk.close_session(1)
    assert zk.last.triggers == ()


def test_closing_an_unknown_session_is_a_harmless_no_op(zk: Zk) -> None:
    res = zk.close_session(404)
    assert res.err == 0
    assert zk.last.closed_session is None and zk.last.triggers == ()


def test_writes_need_a_live_session(zk: Zk) -> None:
    assert zk.create("/a", session=0x1234).err == Code.SESSIONEXPIRED
    assert zk.create("/a", mode=EPHEMERAL).err == Code.BADARGUMENTS  # session 0 cannot own an ephemeral
    assert zk.create("/a").err == 0  # session 0: a system write
    zk.open_session(0x1234)
    assert zk.set_data("/a", b"x", session=0x1234).err == 0


def test_a_write_of_a_connection_the_session_moved_away_from_is_refused(zk: Zk) -> None:
    """A client's session is owned by the connection it last (re)connected on: a write left on an older
    connection (a server that was paused or cut off while the client moved on) is SESSIONMOVED when it
    reaches the log after the attach, so it cannot land after the client's later writes."""
    old, new = 0xA1, 0xB2
    create_session = pb.CreateSessionTxn(session_id=7, timeout_ms=4000)
    assert zk.txn(7, connection=old, create_session=create_session).err == 0
    assert zk.txn(7, connection=old, create=pb.CreateOp(path="/a")).err == 0
    assert zk.txn(7, connection=new, attach_session=pb.AttachSessionTxn()).err == 0
    assert zk.tree.sessions() == {7: 4000}
    stale = zk.txn(7, connection=old, delete=pb.DeleteOp(path="/a", version=-1))
    assert stale.err == Code.SESSIONMOVED and zk.tree.stat("/a") is not None
    assert zk.txn(7, connection=new, set_data=pb.SetDataOp(path="/a", data=b"x", version=-1)).err == 0
    assert zk.set_data("/a", b"y", session=7).err == 0  # a write naming no connection is not fenced
    zk.close_session(7)
    assert zk.txn(7, connection=new, attach_session=pb.AttachSessionTxn()).err == Code.SESSIONEXPIRED
    zk.open_session(9)
    assert zk.txn(9, connection=new, attach_session=pb.AttachSessionTxn()).err == 0
    zk.tree.close()
    check_tree(zk.path)  # a session record with its owner is a sound record


def test_a_session_recorded_without_an_owner_fences_nothing_until_attached(zk: Zk) -> None:
    """Records written before owners were kept (and sessions of system writers) hold only the timeout."""
    assert zk.open_session(8).err == 0  # no connection named: owner 0
    assert zk.txn(8, connection=0xC3, create=pb.CreateOp(path="/b")).err == 0
    assert zk.txn(8, connection=0xD4, create=pb.CreateOp(path="/c")).err == 0
    assert zk.txn(8, connection=0xD4, attach_session=pb.AttachSessionTxn()).err == 0
    assert zk.txn(8, connection=0xC3, create=pb.CreateOp(path="/d")).err == Code.SESSIONMOVED
    assert zk.txn(8, attach_session=pb.AttachSessionTxn()).err == Code.BADARGUMENTS


@pytest.mark.parametrize("timeout_ms", [0, -1])
def test_create_session_needs_a_positive_timeout(zk: Zk, timeout_ms: int) -> None:
    assert zk.open_session(5, timeout_ms).err == Code.BADARGUMENTS
    assert not zk.tree.has_session(5)


# ---------------------------------------------------------------- triggers
def test_triggers_per_write(zk: Zk) -> None:
    zk.create("/w")
    assert zk.last.triggers == (WatchTrigger(CREATED, "/w"), WatchTrigger(CHILDREN, "/"))
    zk.set_data("/w", b"1")
    assert zk.last.triggers == (WatchTrigger(CHANGED, "/w"),)
    zk.check("/w")
    assert zk.last.triggers == ()
    zk.delete("/w")
    assert zk.last.triggers == (WatchTrigger(DELETED, "/w"), WatchTrigger(CHILDREN, "/"))
    zk.delete("/w")
    assert zk.last.triggers == ()  # failed writes fire nothing
    assert [a.zxid for a in zk.applied] == [1, 2, 3, 4, 5]


def test_on_applied_sees_the_committed_state(tmp_path: Path) -> None:
    seen: list[tuple[int, Stat | None]] = []
    t = ZnodeTree(tmp_path / "t", on_applied=lambda a: seen.append((a.zxid, t.stat("/a"))))
    t.apply([Entry(1, 1, pb.Txn(time_ms=5, create=pb.CreateOp(path="/a")).SerializeToString())])
    assert seen[0][0] == 1 and seen[0][1] is not None and seen[0][1].czxid == 1
    t.close()


# ---------------------------------------------------------------- errors
ERROR_CASES = [
    ("create under a missing parent", lambda zk: zk.create("/nope/a"), Code.NONODE),
    ("create existing", lambda zk: zk.create("/p"), Code.NODEEXISTS),
    ("create the root", lambda zk: zk.create("/"), Code.NODEEXISTS),
    ("create under an ephemeral", lambda zk: zk.create("/p/eph/x"), Code.NOCHILDRENFOREPHEMERALS),
    ("create an invalid path", lambda zk: zk.create("/p/."), Code.BADARGUMENTS),
    # the parent is looked up before the path is validated (pRequest2TxnCreate)
    ("create under an invalid parent", lambda zk: zk.create("/p/./x"), Code.NONODE),
    ("create a relative path", lambda zk: zk.create("p"), Code.BADARGUMENTS),
    ("create with an unknown mode", lambda zk: zk.create("/p/m", mode=9), Code.BADARGUMENTS),
    ("create with a TTL of 0", lambda zk: zk.create("/p/m", mode=5), Code.BADARGUMENTS),
    (
        "create sequential with a TTL over 2^40-1 ms",
        lambda zk: zk.op(pb.Op(create=pb.CreateOp(path="/p/m", mode=6, ttl_ms=1 << 40))),
        Code.BADARGUMENTS,
    ),
    (
        "create a container with a TTL",
        lambda zk: zk.op(pb.Op(create=pb.CreateOp(path="/p/m", mode=4, ttl_ms=5))),
        Code.BADARGUMENTS,
    ),
    ("create over 1 MiB", lambda zk: zk.create("/p/big", b"x" * (DATA_BYTES_MAX + 1)), Code.BADARGUMENTS),
    ("create a path too long", lambda zk: zk.create("/" + "x" * PATH_BYTES_MAX), Code.BADARGUMENTS),
    ("delete missing", lambda zk: zk.delete("/p/none"), Code.NONODE),
    ("delete under a missing parent", lambda zk: zk.delete("/none/x"), Code.NONODE),
    ("delete non-empty", lambda zk: zk.delete("/p"), Code.NOTEMPTY),
    ("delete with a bad version", lambda zk: zk.delete("/p/c", version=3), Code.BADVERSION),
    ("bad version is checked before not-empty", lambda zk: zk.delete("/p", version=3), Code.BADVERSION),
    ("delete /", lambda zk: zk.delete("/"), Code.BADARGUMENTS),
    ("delete /zookeeper", lambda zk: zk.delete("/zookeeper"), Code.BADARGUMENTS),
    ("delete /zookeeper/quota", lambda zk: zk.delete("/zookeeper/quota"), Code.BADARGUMENTS),
    ("delete /zookeeper/config", lambda zk: zk.delete("/zookeeper/config"), Code.BADARGUMENTS),
    ("delete a path without /", lambda zk: zk.delete("p"), Code.BADARGUMENTS),
    ("set_data missing", lambda zk: zk.set_data("/p/none", b""), Code.NONODE),
    ("set_data with a bad version", lambda zk: zk.set_data("/p", b"", version=1), Code.BADVERSION),
    ("set_data an invalid path", lambda zk: zk.set_data("/p/", b""), Code.BADARGUMENTS),
    ("set_data over 1 MiB", lambda zk: zk.set_data("/p", b"x" * (DATA_BYTES_MAX + 1)), Code.BADARGUMENTS),
    ("check missing", lambda zk: zk.check("/p/none"), Code.NONODE),
    ("check with a bad version", lambda zk: zk.check("/p", 4), Code.BADVERSION),
    ("write from an unknown session", lambda zk: zk.create("/p/s", session=99), Code.SESSIONEXPIRED),
    ("ephemeral without a session", lambda zk: zk.create("/p/s", mode=EPHEMERAL), Code.BADARGUMENTS),
    ("a txn without a body", lambda zk: zk.txn(), Code.UNIMPLEMENTED),
    ("bytes that are not a Txn", lambda zk: pb.TxnResult.FromString(zk.append(b"\xff\xff\xff")), Code.MARSHALLINGERROR),
    (
        "a path that is not UTF-8",
        lambda zk: pb.TxnResult.FromString(
            zk.append(pb.Txn(create=pb.CreateOp(path="/ab")).SerializeToString().replace(b"/ab", b"/\xff\xfe"))
        ),
        Code.MARSHALLINGERROR,
    ),
]


@pytest.mark.parametrize(("action", "code"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_error_codes(zk: Zk, action: Callable[[Zk], pb.TxnResult], code: Code) -> None:
    zk.open_session(1)
    zk.create("/p")
    zk.create("/p/c")
    zk.create("/p/eph", mode=EPHEMERAL, session=1)
    before = _state_without_index(zk)
    res = action(zk)
    assert res.err == code
    assert not res.path and not res.HasField("stat")
    assert zk.tree.applied_index() == zk.zxid
    assert zk.last.triggers == ()
    assert _state_without_index(zk) == before


def test_data_of_exactly_1_mib_is_accepted(zk: Zk) -> None:
    assert zk.create("/big", b"x" * DATA_BYTES_MAX).err == 0
    assert zk.stat("/big").data_length == DATA_BYTES_MAX
    with pytest.raises(BadArgumentsError, match="1048577 bytes for /big exceeds the limit of 1048576"):
        check_data_length("/big", b"x" * (DATA_BYTES_MAX + 1))


def test_path_length_limit_counts_utf8_bytes(zk: Zk) -> None:
    longest = "/" + "x" * (PATH_BYTES_MAX - 1)
    assert zk.create(longest).err == 0
    assert zk.tree.stat(longest) is not None
    assert zk.create("/" + "é" * (PATH_BYTES_MAX // 2 + 1)).err == Code.BADARGUMENTS  # 2 bytes each
    assert zk.tree.stat("/" + "x" * 2000) is None


def test_error_classes_and_messages() -> None:
    err = error_for(Code.NONODE, message_for(Code.NONODE, "/a/b"))
    assert isinstance(err, NoNodeError) and isinstance(err, ZkError)
    assert err.code == Code.NONODE and str(err) == "KeeperErrorCode = NoNode for /a/b"
    assert isinstance(error_for(-111), NotEmptyError)
    assert str(error_for(-111)) == "KeeperErrorCode = Directory not empty"
    assert isinstance(error_for(Code.SESSIONEXPIRED), SessionExpiredError)
    unknown = error_for(-999, "strange")
    assert type(unknown) is ZkError and unknown.code == -999
    assert message_for(-999) == "KeeperErrorCode = Unknown error -999"
    with pytest.raises(ValueError):
        error_for(0)
    for code in Code:
        if code != Code.OK:
            assert error_for(code).code == code


def test_reads_raise_no_node(zk: Zk) -> None:
    with pytest.raises(NoNodeError, match="NoNode for /nope"):
        zk.tree.get_data("/nope")
    with pytest.raises(NoNodeError):
        zk.tree.get_children("/nope")
    with pytest.raises(NoNodeError):
        zk.tree.all_children_number("/nope")
    assert zk.tree.stat("/nope") is None


# ---------------------------------------------------------------- paths
PATH_CASES = [
    ("/", None),
    ("/a", None),
    ("/a/b.c/..d/.e", None),
    ("/a/...", None),
    ("/zookeeper", None),
    ("/ünïcode/日本", None),
    ("", "Path length must be > 0"),
    ("a/b", "Path must start with / character"),
    ("/a/", "Path must not end with / character"),
    ("//a", 'Invalid path string "//a" caused by empty node name specified @1'),
    ("/a//b", 'Invalid path string "/a//b" caused by empty node name specified @3'),
    ("/a/./b", 'Invalid path string "/a/./b" caused by relative paths not allowed @3'),
    ("/a/../b", 'Invalid path string "/a/../b" caused by relative paths not allowed @4'),
    ("/.", 'Invalid path string "/." caused by relative paths not allowed @1'),
    ("/a/..", 'Invalid path string "/a/.." caused by relative paths not allowed @4'),
    ("/a\u0000b", 'Invalid path string "/a\u0000b" caused by null character not allowed @2'),
    ("/a\u0001", 'Invalid path string "/a\u0001" caused by invalid character @2'),
    ("/a\u007fb", 'Invalid path string "/a\u007fb" caused by invalid character @2'),
    ("/a\u009f", 'Invalid path string "/a\u009f" caused by invalid character @2'),
    ("/\ue000", 'Invalid path string "/\ue000" caused by invalid character @1'),
    ("/ab\ufff0", 'Invalid path string "/ab\ufff0" caused by invalid character @3'),
    ("/x\U0001f600", 'Invalid path string "/x\U0001f600" caused by invalid character @2'),
]


@pytest.mark.parametrize(("path", "message"), PATH_CASES)
def test_validate_path_like_zookeeper(path: str, message: str | None) -> None:
    if message is None:
        validate_path(path)
    else:
        with pytest.raises(BadArgumentsError) as info:
            validate_path(path)
        assert str(info.value) == message
        assert info.value.code == Code.BADARGUMENTS


def test_validate_sequential_prefix() -> None:
    validate_path("/a/", is_sequential=True)
    with pytest.raises(BadArgumentsError):
        validate_path("/a//", is_sequential=True)


def test_path_helpers() -> None:
    assert parent_of("/a/b") == "/a" and parent_of("/a") == "/"
    assert basename("/a/b") == "b" and basename("/") == ""
    assert all(is_special_path(p) for p in ("/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"))
    assert not is_special_path("/zookeeper/other")


# ---------------------------------------------------------------- reads
def test_children_are_sorted_and_not_mixed_with_siblings_children(zk: Zk) -> None:
    zk.create("/a")
    zk.create("/ab")
    zk.create("/a-b")
    for name in ("z", "b", "a", "B", "é", "10", "9"):
        zk.create(f"/a/{name}")
    zk.create("/ab/x")
    zk.create("/a-b/y")
    zk.create("/a/b/deep")
    names, st = zk.tree.get_children("/a")
    assert names == ["10", "9", "B", "a", "b", "z", "é"]
    assert st.num_children == 7
    assert zk.tree.all_children_number("/a") == 8
    assert zk.tree.all_children_number("/") == 3 + 3 + 7 + 3


def test_ephemerals_prefix_is_a_plain_string_prefix(zk: Zk) -> None:
    zk.open_session(1)
    for p in ("/a", "/ab", "/b"):
        zk.create(p, mode=EPHEMERAL, session=1)
    assert zk.tree.ephemerals(1, "/a") == ["/a", "/ab"]
    assert zk.tree.ephemerals(1, "") == ["/a", "/ab", "/b"]
    assert zk.tree.ephemerals(2) == []
    assert zk.tree.ephemerals_count() == 3


def test_read_returns_node_data(zk: Zk) -> None:
    zk.create("/r", b"data")
    assert zk.tree.read(b"/r") == b"data"
    assert zk.tree.read(b"/none") is None
    assert zk.tree.read(b"") is None


# ---------------------------------------------------------------- log handling
def test_noop_entries_change_nothing_but_the_applied_index(zk: Zk) -> None:
    zk.create("/a")
    before = _state_without_index(zk)
    assert zk.append(b"", EntryKind.NOOP) == b""
    assert zk.tree.applied_index() == 2
    assert len(zk.applied) == 1  # no callback for a no-op
    assert _state_without_index(zk) == before


def test_an_entry_is_never_applied_twice(zk: Zk) -> None:
    zk.create("/a")
    with pytest.raises(InvariantViolation):
        zk.tree.apply([zk.log[0]])


def test_state_survives_reopening(zk: Zk) -> None:
    zk.open_session(1)
    zk.create("/a", b"x")
    zk.create("/a/e", mode=EPHEMERAL, session=1)
    digest = zk.tree.digest()
    zk.tree.close()
    zk.tree = ZnodeTree(zk.path)
    assert zk.tree.applied_index() == 3
    assert zk.tree.digest() == digest


# ---------------------------------------------------------------- determinism and snapshots
def _workload(zk: Zk) -> None:
    zk.open_session(11)
    zk.open_session(12)
    zk.create("/brokers/ids", make_parents=True)
    zk.create("/brokers/ids/1", b'{"host":"a"}', mode=EPHEMERAL, session=11)
    zk.create("/brokers/ids/2", b'{"host":"b"}', mode=EPHEMERAL, session=12)
    zk.create("/controller", b'{"brokerid":1}', mode=EPHEMERAL, session=11)
    zk.create("/admin/seq-", mode=PERSISTENT_SEQUENTIAL, make_parents=True)
    zk.multi(op_create("/t"), op_create("/t/p", b"0"), op_set("/t", b"v", 0))
    zk.multi(op_create("/t2"), op_check("/t", 7))
    zk.append(b"", EntryKind.NOOP)
    zk.set_data("/t/p", b"1", version=0)
    zk.delete("/admin/seq-0000000000")
    zk.create("/bad", session=999)
    zk.append(b"garbage")
    zk.close_session(11, expired=True)


def _state_without_index(zk: Zk) -> str:
    """The digest of the logical state, with the applied index taken out of the snapshot header."""
    chunks = b"".join(zk.tree.snapshot_chunks())
    header = tree_module._SNAP_HEADER.size
    return hashlib.sha256(chunks[: header - 8] + chunks[header:]).hexdigest()


def test_replicas_fed_the_same_entries_end_identical(tmp_path: Path) -> None:
    a = Zk(tmp_path / "a")
    _workload(a)
    b = ZnodeTree(tmp_path / "b")
    for i in range(0, len(a.log), 3):  # different batching, same entries
        b.apply(a.log[i : i + 3])
    c = ZnodeTree(tmp_path / "c")
    c.apply(a.log)
    assert a.tree.digest() == b.digest() == c.digest()
    assert b.applied_index() == c.applied_index() == len(a.log)
    assert b.ephemerals(12) == ["/brokers/ids/2"] and b.ephemerals(11) == []


def test_snapshot_restore_round_trip_keeps_the_digest(tmp_path: Path) -> None:
    a = Zk(tmp_path / "a")
    _workload(a)
    snap = tmp_path / "snap"
    snap.write_bytes(b"".join(a.tree.snapshot_chunks()))

    b = Zk(tmp_path / "b")
    b.create("/junk")  # replaced wholesale
    b.tree.restore(snap, a.tree.applied_index())
    assert b.tree.digest() == a.tree.digest()
    assert b.tree.applied_index() == a.tree.applied_index()
    assert b.tree.sessions() == a.tree.sessions()
    assert b.tree.stat("/junk") is None
    # both continue identically
    nxt = Entry(len(a.log) + 1, 1, pb.Txn(time_ms=1, create=pb.CreateOp(path="/t/q")).SerializeToString())
    assert a.tree.apply([nxt]) == b.tree.apply([nxt])
    assert a.tree.digest() == b.tree.digest()


def test_snapshot_chunks_stay_near_one_mib(zk: Zk) -> None:
    for i in range(3):
        zk.create(f"/big{i}", b"x" * DATA_BYTES_MAX)
    chunks = list(zk.tree.snapshot_chunks())
    assert len(chunks) >= 3
    assert all(len(c) < 2 * DATA_BYTES_MAX + 4096 for c in chunks)


@pytest.mark.parametrize("damage", ["truncate", "flip", "trailing", "wrong-index", "not-a-snapshot"])
def test_restore_refuses_a_damaged_snapshot_and_keeps_the_state(tmp_path: Path, damage: str) -> None:
    a = Zk(tmp_path / "a")
    _workload(a)
    raw = bytearray(b"".join(a.tree.snapshot_chunks()))
    index = a.tree.applied_index()
    if damage == "truncate":
        raw = raw[: len(raw) - 5]
    elif damage == "flip":
        raw[len(raw) // 2] ^= 0x40
    elif damage == "trailing":
        raw += b"\0"
    elif damage == "wrong-index":
        index += 1
    else:
        raw = bytearray(b"hello world, this is not a snapshot at all")
    snap = tmp_path / "snap"
    snap.write_bytes(bytes(raw))
    b = Zk(tmp_path / "b")
    b.create("/kept")
    digest = b.tree.digest()
    with pytest.raises(TreeSnapshotError):
        b.tree.restore(snap, index)
    assert b.tree.digest() == digest
    assert b.tree.applied_index() == 1


def test_zookeeper_config_is_read_only(zk: Zk) -> None:
    """world:anyone READ on /zookeeper/config: writes under or to it fail with NOAUTH (checked like ZooKeeper's ACL)."""
    assert zk.create("/zookeeper/config/x").err == Code.NOAUTH
    assert zk.set_data("/zookeeper/config", b"x").err == Code.NOAUTH
    assert zk.delete("/zookeeper/config/x").err == Code.NOAUTH
    assert zk.stat("/zookeeper/config") == Stat(aversion=-1)


# ---------------------------------------------------------------- null data
def test_null_data_is_kept_apart_from_empty_data_until_the_node_changes(tmp_path: Path) -> None:
    """ZooKeeper keeps a null buffer apart from an empty one (Kafka reads null as "never written"): a
    node created or set with null data reads null, one with empty or real data does not, and the mark
    leaves with the node, survives a snapshot and restore, and passes the start-up check."""
    zk = Zk(tmp_path / "a")
    zk.txn(create=pb.CreateOp(path="/null", null_data=True))
    zk.create("/empty")
    zk.txn(create=pb.CreateOp(path="/deep/null", null_data=True, make_parents=True))
    assert [_is_null(zk.tree, p) for p in ("/null", "/empty", "/deep", "/deep/null")] == [True, False, False, True]
    assert zk.tree.get_data_or_null("/null")[0] == b""
    with pytest.raises(NoNodeError):
        zk.tree.get_data_or_null("/missing")
    assert zk.stat("/null").data_length == 0
    zk.set_data("/null", b"")
    assert not _is_null(zk.tree, "/null")
    zk.txn(set_data=pb.SetDataOp(path="/empty", null_data=True, version=-1))
    assert _is_null(zk.tree, "/empty")
    zk.set_data("/empty", b"x")
    assert not _is_null(zk.tree, "/empty")
    zk.delete("/deep/null")
    zk.txn(create=pb.CreateOp(path="/deep/null"))
    assert not _is_null(zk.tree, "/deep/null")
    zk.multi(pb.Op(set_data=pb.SetDataOp(path="/deep/null", null_data=True, version=-1)))
    snap = tmp_path / "snap"
    snap.write_bytes(b"".join(zk.tree.snapshot_chunks()))
    restored = ZnodeTree(tmp_path / "b")
    restored.restore(snap, zk.tree.applied_index())
    assert restored.digest() == zk.tree.digest()
    assert _is_null(restored, "/deep/null") and not _is_null(restored, "/empty")
    restored.close()
    zk.tree.close()
    check_tree(tmp_path / "a")


def _is_null(tree: ZnodeTree, path: str) -> bool:
    return tree.get_data_or_null(path)[2]
