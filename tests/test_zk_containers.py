"""Container and TTL znodes in the tree: create modes 4-6, owners as ZooKeeper stores and reports them, the
containers index, and deleteContainer decided at apply with the transaction's time (research §1.3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quorum.state_check import DamagedRecordError
from zkemu.ephemeral_type import CONTAINER_OWNER, TTL_MS_MAX, NodeKind, kind_of, ttl_of, ttl_owner
from zkemu.errors import Code
from zkemu.events import EventType, WatchTrigger
from zkemu.tree_check import check_tree
from zkraft_proto import zk_pb2 as pb

from .test_zk_tree import EPHEMERAL, Zk

CONTAINER, TTL, TTL_SEQUENTIAL = 4, 5, 6


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[Zk]:
    z = Zk(tmp_path / "tree")
    yield z
    z.tree.close()


def create(zk: Zk, path: str, mode: int, ttl_ms: int = 0, session: int = 0) -> pb.TxnResult:
    return zk.op(pb.Op(create=pb.CreateOp(path=path, mode=mode, ttl_ms=ttl_ms)), session)


def delete_container(zk: Zk, path: str, at_ms: int | None = None, never_used_ms: int = 0) -> pb.TxnResult:
    """A sweep entry stamped `at_ms` (default: the next zxid's time, as Zk.txn stamps)."""
    t = pb.Txn(
        time_ms=zk.time_of(zk.zxid + 1) if at_ms is None else at_ms,
        delete_container=pb.DeleteContainerTxn(path=path, never_used_ms=never_used_ms),
    )
    return pb.TxnResult.FromString(zk.append(t.SerializeToString()))


def stored_owner(zk: Zk, path: str) -> int:
    import zkemu.tree as tree_module

    raw = zk.tree._env.begin().get(path.encode(), db=zk.tree._nodes)
    return int(tree_module._NODE.unpack_from(raw)[tree_module._OWNER])


def test_owner_encodings_are_zookeepers() -> None:
    assert CONTAINER_OWNER == -0x8000000000000000
    assert ttl_owner(1000) == 0xFF000000000003E8 - (1 << 64)
    assert ttl_of(ttl_owner(TTL_MS_MAX)) == TTL_MS_MAX
    assert kind_of(0) is NodeKind.PERSISTENT
    assert kind_of(0x0100018C2F3A0001) is NodeKind.EPHEMERAL
    # A session of server 255 (clock bits in 40-55) is still an ephemeral, not a TTL node.
    assert kind_of(0xFF00_4C2F_3A00_0001 - (1 << 64)) is NodeKind.EPHEMERAL
    assert kind_of(CONTAINER_OWNER) is NodeKind.CONTAINER
    assert kind_of(ttl_owner(1)) is NodeKind.TTL


def test_container_and_ttl_nodes_store_zookeepers_owner_and_report_zero(zk: Zk) -> None:
    assert create(zk, "/c", CONTAINER).err == 0
    assert create(zk, "/t", TTL, ttl_ms=5000).err == 0
    res = create(zk, "/s-", TTL_SEQUENTIAL, ttl_ms=TTL_MS_MAX)
    assert res.err == 0 and res.path == "/s-0000000002"
    assert stored_owner(zk, "/c") == CONTAINER_OWNER
    assert stored_owner(zk, "/t") == ttl_owner(5000)
    for path in ("/c", "/t", "/s-0000000002"):
        assert zk.stat(path).ephemeral_owner == 0
        assert zk.tree.get_data(path)[1].ephemeral_owner == 0
    assert res.stat.ephemeral_owner == 0
    assert zk.tree.ephemerals_count() == 0


def test_children_are_allowed_under_containers_and_ttl_nodes_even_ephemeral_ones(zk: Zk) -> None:
    zk.open_session(7)
    create(zk, "/c", CONTAINER)
    create(zk, "/t", TTL, ttl_ms=10)
    assert zk.create("/c/e", mode=EPHEMERAL, session=7).err == 0
    assert zk.create("/t/p").err == 0
    assert zk.stat("/c/e").ephemeral_owner == 7
    assert zk.create("/c/e/x").err == Code.NOCHILDRENFOREPHEMERALS


def test_a_container_goes_once_it_had_a_child_and_has_none(zk: Zk) -> None:
    create(zk, "/c", CONTAINER)
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid), 0, 10) == []  # never used: kept
    assert delete_container(zk, "/c").err == Code.BADVERSION
    zk.create("/c/x")
    assert delete_container(zk, "/c").err == Code.NOTEMPTY
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid), 0, 10) == []
    zk.delete("/c/x")
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid), 0, 10) == ["/c"]
    res = delete_container(zk, "/c")
    assert res.err == 0
    assert zk.last.triggers == (
        WatchTrigger(EventType.NODE_DELETED, "/c"),
        WatchTrigger(EventType.NODE_CHILDREN_CHANGED, "/"),
    )
    assert zk.tree.stat("/c") is None
    assert zk.stat("/").pzxid == zk.zxid
    assert delete_container(zk, "/c").err == Code.NONODE
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid), 0, 10) == []


def test_a_never_used_container_goes_only_with_max_never_used_set_and_past_it(zk: Zk) -> None:
    create(zk, "/c", CONTAINER)
    created_ms = zk.time_of(zk.zxid)
    assert zk.tree.sweep_candidates(created_ms + 100, 100, 10) == []
    assert zk.tree.sweep_candidates(created_ms + 101, 100, 10) == ["/c"]
    assert delete_container(zk, "/c", at_ms=created_ms + 100, never_used_ms=100).err == Code.BADVERSION
    assert delete_container(zk, "/c", at_ms=created_ms + 101, never_used_ms=0).err == Code.BADVERSION
    assert delete_container(zk, "/c", at_ms=created_ms + 101, never_used_ms=100).err == 0


def test_a_ttl_node_goes_when_unmodified_and_childless_past_its_ttl(zk: Zk) -> None:
    create(zk, "/t", TTL, ttl_ms=1000)
    created_ms = zk.time_of(zk.zxid)
    assert zk.tree.sweep_candidates(created_ms + 1000, 0, 10) == []
    assert zk.tree.sweep_candidates(created_ms + 1001, 0, 10) == ["/t"]
    assert delete_container(zk, "/t", at_ms=created_ms + 1000).err == Code.BADVERSION
    zk.set_data("/t", b"touched")  # mtime moves: the TTL counts from here
    set_ms = zk.time_of(zk.zxid)
    assert delete_container(zk, "/t", at_ms=created_ms + 1001).err == Code.BADVERSION
    zk.create("/t/child")
    assert zk.tree.sweep_candidates(set_ms + 5000, 0, 10) == []
    assert delete_container(zk, "/t", at_ms=set_ms + 5000).err == Code.NOTEMPTY
    zk.delete("/t/child")
    assert delete_container(zk, "/t", at_ms=set_ms + 1001).err == 0
    assert zk.tree.stat("/t") is None


def test_delete_container_refuses_ordinary_and_special_nodes(zk: Zk) -> None:
    zk.open_session(7)
    zk.create("/p")
    zk.create("/e", mode=EPHEMERAL, session=7)
    before = zk.tree.digest()
    assert delete_container(zk, "/p").err == Code.BADVERSION
    assert delete_container(zk, "/e").err == Code.BADVERSION
    assert delete_container(zk, "/zookeeper").err == Code.BADARGUMENTS
    assert delete_container(zk, "nope").err == Code.BADARGUMENTS
    assert delete_container(zk, "/missing").err == Code.NONODE
    assert zk.last.triggers == ()
    assert zk.tree.digest() != before  # only the applied index moved
    assert zk.tree.stat("/p") is not None and zk.tree.stat("/e") is not None


def test_sweep_candidates_stop_at_the_limit(zk: Zk) -> None:
    for i in range(5):
        create(zk, f"/t{i}", TTL, ttl_ms=1)
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid) + 10, 0, 3) == ["/t0", "/t1", "/t2"]


def test_index_follows_deletes_of_every_kind_and_the_checker_agrees(zk: Zk) -> None:
    create(zk, "/c", CONTAINER)
    create(zk, "/t", TTL, ttl_ms=1)
    zk.create("/c/x")
    zk.delete("/c/x")
    zk.delete("/t")  # a client may delete them like any node
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid) + 10, 0, 10) == ["/c"]
    assert zk.multi(pb.Op(delete=pb.DeleteOp(path="/c", version=-1))).err == 0
    assert zk.tree.sweep_candidates(zk.time_of(zk.zxid) + 10, 0, 10) == []
    create(zk, "/kept", CONTAINER)
    zk.tree.close()
    check_tree(zk.path)


def test_the_checker_finds_a_node_missing_from_the_index(zk: Zk) -> None:
    create(zk, "/c", CONTAINER)
    with zk.tree._env.begin(write=True) as txn:
        txn.delete(b"/c", db=zk.tree._containers)
    zk.tree.close()
    with pytest.raises(DamagedRecordError, match="0 index records for 1 container/TTL nodes"):
        check_tree(zk.path)


def test_snapshot_carries_the_index_and_the_digest_matches(tmp_path: Path) -> None:
    a = Zk(tmp_path / "a")
    create(a, "/c", CONTAINER)
    a.create("/c/x")
    a.delete("/c/x")
    create(a, "/t", TTL, ttl_ms=50)
    snap = tmp_path / "snap"
    snap.write_bytes(b"".join(a.tree.snapshot_chunks()))
    b = Zk(tmp_path / "b")
    b.tree.restore(snap, a.tree.applied_index())
    assert b.tree.digest() == a.tree.digest()
    now_ms = a.time_of(a.zxid) + 100
    assert b.tree.sweep_candidates(now_ms, 0, 10) == a.tree.sweep_candidates(now_ms, 0, 10) == ["/c", "/t"]
    # The same log applied elsewhere gives the same digest, index included.
    c = Zk(tmp_path / "c")
    for entry in a.log:
        c.append(entry.data)
    assert c.tree.digest() == a.tree.digest()
    for z in (a, b, c):
        z.tree.close()
