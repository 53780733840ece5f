"""Container and TTL znodes in the tree: create modes 4-6, owners as ZooKeeper stores and reports them, the
containers index, and deleteContainer decided at apply with the transaction's time (research §1.3)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as settings_hypothesis
from hypothesis import strategies as st

from client.zk.codec import create_request
from client.zk.states import CreateMode
from client.zk.transaction import CreateTxnOp
from quorum.settings import NodeSettings, SettingsError, load_node_settings, properties_to_values
from quorum.state_check import DamagedRecordError
from zkemu.container_manager import ContainerManager, delete_spacing_s
from zkemu.ephemeral_type import CONTAINER_OWNER, TTL_MS_MAX, NodeKind, kind_of, ttl_of, ttl_owner
from zkemu.errors import Code
from zkemu.events import EventType, WatchTrigger
from zkemu.request_checks import write_problem
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


# ---------------------------------------------------------------- settings, request checks, SDK, sweep
def settings(**values: object) -> NodeSettings:
    return load_node_settings({"id": 1, "data_dir": "/tmp/unused", "peers": "1=127.0.0.1:7001", **values}, None)


def test_settings_take_zookeepers_property_names_and_defaults() -> None:
    s = settings()
    assert not s.extended_types_enabled
    assert (s.container_check_interval_ms, s.container_max_per_minute) == (60000, 10000)
    assert s.container_max_never_used_interval_ms == 0
    values = properties_to_values(
        {
            "zookeeper.extendedTypesEnabled": "TRUE",
            "znode.container.checkIntervalMs": "200",
            "znode.container.maxPerMinute": "5",
            "znode.container.maxNeverUsedIntervalMs": "1000",
        }
    )
    assert values == {
        "extended_types_enabled": True,
        "container_check_interval_ms": 200,
        "container_max_per_minute": 5,
        "container_max_never_used_interval_ms": 1000,
    }


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"extended_types_enabled": "yes"}, "--extended-types-enabled: expected true or false, got 'yes'"),
        ({"container_check_interval_ms": 0}, "znode.container.checkIntervalMs: must be >= 1, got 0"),
        ({"container_max_per_minute": 0}, "znode.container.maxPerMinute: must be >= 1, got 0"),
        ({"container_max_never_used_interval_ms": -1}, "znode.container.maxNeverUsedIntervalMs: must be >= 0, got -1"),
        (
            {"extended_types_enabled": True, "id": 255, "peers": "255=127.0.0.1:7001"},
            "zookeeper.extendedTypesEnabled: node ids must be <= 254 with extended types on, got 255",
        ),
    ],
)
def test_bad_settings_get_one_line_naming_the_property(values: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings(**values)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_boolean_property_that_is_not_true_or_false_is_an_error() -> None:
    with pytest.raises(SettingsError, match="^zookeeper.extendedTypesEnabled: expected true or false, got 'on'$"):
        properties_to_values({"zookeeper.extendedTypesEnabled": "on"})


def test_ttl_creates_are_refused_before_the_log_unless_extended_types_are_on() -> None:
    ttl = pb.CreateOp(path="/t", mode=TTL, ttl_ms=5)
    assert write_problem("create", ttl) == (
        Code.UNIMPLEMENTED,
        "TTL nodes are disabled on this server: /t needs zookeeper.extendedTypesEnabled=true",
    )
    assert write_problem("create", ttl, extended_types_enabled=True) is None
    multi = pb.MultiOp(ops=[pb.Op(create=pb.CreateOp(path="/a")), pb.Op(create=ttl)])
    assert write_problem("multi", multi) is not None
    assert write_problem("multi", multi, extended_types_enabled=True) is None
    assert write_problem("create", pb.CreateOp(path="/c", mode=CONTAINER)) is None


def test_sdk_create_modes_and_the_request_they_send() -> None:
    assert CreateMode.of(False, False, container=True) is CreateMode.CONTAINER
    assert CreateMode.of(False, False, ttl_ms=5) is CreateMode.PERSISTENT_WITH_TTL
    assert CreateMode.of(False, True, ttl_ms=5) is CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL
    for bad in ({"ephemeral": True, "container": True}, {"sequence": True, "container": True}):
        with pytest.raises(ValueError, match="a container node cannot be ephemeral, sequential or have a TTL"):
            CreateMode.of(bad.get("ephemeral", False), bad.get("sequence", False), container=True)
    with pytest.raises(ValueError, match="a TTL node cannot be ephemeral"):
        CreateMode.of(True, False, ttl_ms=5)
    with pytest.raises(ValueError, match="ttl_ms must be an int >= 0"):
        CreateMode.of(False, False, ttl_ms=-1)
    request = create_request(CreateTxnOp("/t", b"", CreateMode.PERSISTENT_WITH_TTL, ttl_ms=5))
    assert (request.create.mode, request.create.ttl_ms) == (TTL, 5)


class _FakeQuorum:
    """The quorum facade's leadership, as the container manager reads it."""

    is_leader = True


class _FakeRouter:
    """Applies each submitted txn to the test tree, stamped with the time the test chooses."""

    def __init__(self, zk: Zk, quorum: _FakeQuorum, now_ms: int, lose_leadership_after: int = -1) -> None:
        self.zk, self.quorum, self.now_ms = zk, quorum, now_ms
        self.submitted: list[pb.Txn] = []
        self.lose_after = lose_leadership_after

    async def submit(self, txn: pb.Txn, timeout_s: float) -> tuple[int, pb.TxnResult]:
        txn.time_ms = self.now_ms
        self.submitted.append(txn)
        result = pb.TxnResult.FromString(self.zk.append(txn.SerializeToString()))
        if len(self.submitted) == self.lose_after:
            self.quorum.is_leader = False
        return self.zk.zxid, result


def _manager(zk: Zk, submitter: _FakeRouter, **values: object) -> ContainerManager:
    s = settings(**values)
    return ContainerManager(submitter.quorum, zk.tree, submitter, s, now_ms=lambda: submitter.now_ms)  # type: ignore[arg-type]


def test_a_sweep_deletes_its_candidates_through_the_log_spaced_by_max_per_minute(zk: Zk) -> None:
    for path in ("/a", "/b", "/idle"):
        create(zk, path, CONTAINER)
    for path in ("/a", "/b"):
        zk.create(f"{path}/x")
        zk.delete(f"{path}/x")
    create(zk, "/t", TTL, ttl_ms=10)
    submitter = _FakeRouter(zk, _FakeQuorum(), now_ms=zk.time_of(zk.zxid) + 11)
    manager = _manager(zk, submitter, container_max_per_minute=6000, container_max_never_used_interval_ms=0)
    assert delete_spacing_s(6000) == 0.01
    started = time.monotonic()
    assert asyncio.run(manager.check()) == 3
    assert time.monotonic() - started >= 3 * 0.01 * 0.9
    assert [t.delete_container.path for t in submitter.submitted] == ["/a", "/b", "/t"]
    assert all(t.delete_container.never_used_ms == 0 for t in submitter.submitted)
    assert zk.tree.get_children("/")[0] == ["idle", "zookeeper"]


def test_a_sweep_stops_when_the_node_stops_leading_and_counts_only_what_went(zk: Zk) -> None:
    for i in range(3):
        create(zk, f"/c{i}", CONTAINER)
    submitter = _FakeRouter(zk, _FakeQuorum(), now_ms=zk.time_of(zk.zxid) + 1000, lose_leadership_after=1)
    manager = _manager(zk, submitter, container_max_never_used_interval_ms=500)
    assert asyncio.run(manager.check()) == 1
    assert [t.delete_container.never_used_ms for t in submitter.submitted] == [500]
    assert zk.tree.stat("/c0") is None and zk.tree.stat("/c1") is not None


# ---------------------------------------------------------------- random histories keep the index exact
_PATHS = ("/a", "/b", "/a/x", "/b/y", "/a/x/z")
_ACTIONS = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(_PATHS), st.sampled_from([0, EPHEMERAL, CONTAINER, TTL])),
    st.tuples(st.just("delete"), st.sampled_from(_PATHS), st.just(0)),
    st.tuples(st.just("set"), st.sampled_from(_PATHS), st.just(0)),
    st.tuples(st.just("sweep"), st.sampled_from(_PATHS), st.integers(0, 30)),
    st.tuples(st.just("close"), st.just(""), st.just(0)),
)


@settings_hypothesis(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(_ACTIONS, max_size=30))
def test_any_history_keeps_the_index_exact_and_the_checker_happy(tmp_path_factory: Any, actions: list[Any]) -> None:
    zk = Zk(tmp_path_factory.mktemp("tree"))
    session = 7
    zk.open_session(session)
    for kind, path, arg in actions:
        match kind:
            case "create":
                create(zk, path, arg, ttl_ms=5 if arg == TTL else 0, session=session if arg == EPHEMERAL else 0)
            case "delete":
                zk.delete(path)
            case "set":
                zk.set_data(path, b"v")
            case "sweep":
                delete_container(zk, path, at_ms=zk.time_of(zk.zxid) + arg, never_used_ms=arg % 3)
            case "close":
                zk.close_session(session)
                session += 1
                zk.open_session(session)
    now_ms = zk.time_of(zk.zxid) + 10
    expected = []
    for path in sorted(_PATHS):
        st_ = zk.tree.stat(path)
        owner = stored_owner(zk, path) if st_ is not None else 0
        if st_ is None or st_.num_children or kind_of(owner) not in (NodeKind.CONTAINER, NodeKind.TTL):
            continue
        # A container that had a child shows cversion > 0 once childless (creates + deletes).
        if kind_of(owner) is NodeKind.CONTAINER and st_.cversion > 0 or kind_of(owner) is NodeKind.TTL:
            expected.append(path)
    assert zk.tree.sweep_candidates(now_ms, 0, 100) == expected
    zk.tree.close()
    check_tree(zk.path)


def test_a_tree_written_before_the_containers_index_checks_and_opens(tmp_path: Path) -> None:
    """An environment without the `containers` database (written by the version before it) is sound: the
    start-up checker takes it and opening the tree adds the database empty."""
    zk = Zk(tmp_path / "old")
    zk.create("/p")
    with zk.tree._env.begin(write=True) as txn:
        txn.drop(zk.tree._containers, delete=True)
    zk.tree.close()
    check_tree(zk.path)
    reopened = Zk(zk.path)
    reopened.log = list(zk.log)  # the log goes on where it was
    assert reopened.tree.stat("/p") is not None
    assert create(reopened, "/c", CONTAINER).err == 0
    reopened.tree.close()
    check_tree(zk.path)
