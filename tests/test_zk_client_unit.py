"""The ZooKeeper client (client.ZkClient, client.zk.aio.AsyncZkClient) without a real server.

Pure parts (exceptions, stats, host strings, the watch table, retry) are
tested directly; the session behaviour (ordering, errors, transactions,
watches, reconnect with SetWatches, expiry, pings, recipes, chroot) against
the in-process fake servers of `tests/zk_fake_server.py`.
"""

from __future__ import annotations

import ast
import asyncio
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import AsyncZkClient, ZkClient, ZkRetry
from client.zk.exceptions import (
    EXCEPTIONS,
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    NoWatcherError,
    OperationTimeoutError,
    RetryFailedError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    UnknownErrorCode,
    ZkTimeoutError,
    ZookeeperError,
    exception_for,
)
from client.zk.paths import parse_hosts
from client.zk.recipe.watchers import ChildrenWatch, DataWatch
from client.zk.retry import AsyncZkRetry
from client.zk.states import (
    NO_ZXID,
    AddWatchMode,
    EventType,
    KeeperState,
    WatchedEvent,
    WatcherType,
    ZkState,
    ZnodeStat,
)
from client.zk.watches import WatchRegistry, WatchSnapshot, WatchTable
from tests.helpers import wait_until
from tests.zk_fake_server import FakeCluster

REPO_ROOT = Path(__file__).resolve().parent.parent
SESSION_MS = 600  # ping after 200 ms idle, connection lost after 400 ms of silence
WAIT_S = 10.0


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    cl = FakeCluster(3)
    yield cl
    cl.close()


class Recorder:
    """A thread-safe list of what callbacks received."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.items)


def sans_zxid(events: list[Any]) -> list[Any]:
    """The events with their zxids blanked, where a test checks what fired rather than when."""
    return [e._replace(zxid=NO_ZXID) for e in events]


def _czxid(zk: ZkClient, path: str) -> int:
    stat = zk.exists(path)
    assert stat is not None
    return stat.czxid


@pytest.fixture
def clients(cluster: FakeCluster) -> Iterator[list[ZkClient]]:
    made: list[ZkClient] = []
    yield made
    for zk in made:
        zk.close()


def connect(cluster: FakeCluster, made: list[ZkClient], hosts: str | None = None, **kwargs: Any) -> ZkClient:
    kwargs.setdefault("session_timeout_ms", SESSION_MS)
    kwargs.setdefault("timeout", WAIT_S)
    zk = ZkClient(hosts or cluster.hosts, **kwargs)
    made.append(zk)
    zk.start()
    return zk


def flush_callbacks(zk: ZkClient, other: ZkClient) -> None:
    """Wait until `zk` has run every callback for events so far (its callbacks run in order)."""
    marker = Recorder()
    other.ensure_path("/flush")
    zk.get("/flush", watch=marker)
    other.set("/flush", b"")
    wait_until(lambda: marker.snapshot(), WAIT_S)


def pin(cluster: FakeCluster, index: int) -> str:
    """Hosts with server `index` first, then the others (use with randomize_hosts=False)."""
    order = [cluster.servers[index]] + [s for i, s in enumerate(cluster.servers) if i != index]
    return ",".join(s.address for s in order)


# ---------------------------------------------------------------- pure parts


def test_every_code_has_its_kazoo_named_class() -> None:
    expected = {
        0: "RolledBackError",
        -1: "SystemZookeeperError",
        -2: "RuntimeInconsistency",
        -4: "ConnectionLoss",
        -5: "MarshallingError",
        -6: "UnimplementedError",
        -7: "OperationTimeoutError",
        -8: "BadArgumentsError",
        -101: "NoNodeError",
        -102: "NoAuthError",
        -103: "BadVersionError",
        -108: "NoChildrenForEphemeralsError",
        -110: "NodeExistsError",
        -111: "NotEmptyError",
        -112: "SessionExpiredError",
        -118: "SessionMovedError",
        -121: "NoWatcherError",
    }
    for code, name in expected.items():
        assert EXCEPTIONS[code].__name__ == name
    for code, cls in EXCEPTIONS.items():
        exc = exception_for(code, "", "/a/b")
        assert type(exc) is cls and exc.code == code and isinstance(exc, ZookeeperError)
        assert "/a/b" in str(exc) and "\n" not in str(exc)
    unknown = exception_for(-9999, "what\nis this", "/x")
    assert isinstance(unknown, UnknownErrorCode) and unknown.code == -9999 and str(unknown) == "what is this"
    assert issubclass(ConnectionClosedError, SessionExpiredError)
    assert ConnectionLoss.retriable and OperationTimeoutError.retriable and not NoNodeError.retriable
    assert str(NoNodeError("node /x does not exist", "/x")) == "node /x does not exist"


def test_znode_stat_has_zookeeper_fields_and_kazoo_properties() -> None:
    stat = ZnodeStat(1, 2, 1500, 2500, 3, 4, 5, 0x77, 6, 7, 8)
    assert stat._fields == (
        "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
        "ephemeralOwner", "dataLength", "numChildren", "pzxid",
    )  # fmt: skip
    assert (stat.created, stat.last_modified) == (1.5, 2.5)
    assert (stat.children_version, stat.acl_version, stat.data_length, stat.children_count) == (4, 5, 6, 7)
    assert stat.owner_session_id == 0x77
    assert stat._replace(ephemeralOwner=0).owner_session_id is None


def test_parse_hosts() -> None:
    assert parse_hosts("a:1, b:2") == (["a:1", "b:2"], "")
    assert parse_hosts("a:1,b/kafka/") == (["a:1", "b:2181"], "/kafka")
    assert parse_hosts(["a:1", "[::1]"]) == (["a:1", "[::1]:2181"], "")
    with pytest.raises(ValueError):
        parse_hosts(" , ")


def test_watch_registry_follows_zookeeper_rules() -> None:
    reg = WatchRegistry()
    a, b, c = Recorder(), Recorder(), Recorder()
    reg.add(WatchTable.DATA, "/n", a)
    reg.add(WatchTable.EXIST, "/n", a)  # same watcher twice: called once
    reg.add(WatchTable.CHILD, "/n", b)
    reg.add(WatchTable.PERSISTENT_RECURSIVE, "/", c)
    assert reg.triggered(EventType.CHANGED, "/n") == [a, c]
    assert reg.triggered(EventType.CHANGED, "/n") == [c]  # one-shot: gone
    assert reg.triggered(EventType.CHILD, "/n") == [b]  # recursive watches get no CHILD events
    reg.add(WatchTable.DATA, "/n", a)
    reg.add(WatchTable.CHILD, "/n", b)
    reg.add(WatchTable.PERSISTENT, "/n", b)
    assert reg.triggered(EventType.DELETED, "/n") == [a, b, c]
    assert reg.has(WatchTable.PERSISTENT, "/n", b) and not reg.has(WatchTable.DATA, "/n")
    assert reg.remove("/n", WatcherType.PERSISTENT) == [b]
    reg.add(WatchTable.EXIST, "/m", a)
    assert reg.snapshot() == WatchSnapshot([], ["/m"], [], [], ["/"])
    assert reg.drain() == [a, c] and len(reg) == 0


def test_set_watches_batches_split_by_path_characters() -> None:
    snap = WatchSnapshot(["/" + "a" * 9] * 5, ["/" + "b" * 9] * 3, [], ["/p"], [])
    batches = list(snap.batches(chars_max=25))
    assert [len(b.data) + len(b.exist) + len(b.persistent) for b in batches] == [2, 2, 2, 3]
    assert sum((b.data for b in batches), []) == snap.data
    assert sum((b.persistent for b in batches), []) == ["/p"]


def test_retry_retries_connection_loss_with_backoff() -> None:
    sleeps: list[float] = []
    calls = []

    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise ConnectionLoss("connection lost", "/p")
        return x * 2

    retry = ZkRetry(max_tries=5, delay=0.1, backoff=2, max_jitter=0.0, sleep_func=sleeps.append)
    assert retry(flaky, 21) == 42
    assert sleeps == [0.1, 0.2] and retry.attempts == 2


def test_retry_gives_up_after_max_tries_and_deadline() -> None:
    def lost() -> None:
        raise ConnectionLoss("connection lost")

    with pytest.raises(RetryFailedError, match="too many retry attempts") as info:
        ZkRetry(max_tries=2, delay=0, sleep_func=lambda s: None)(lost)
    assert isinstance(info.value.__cause__, ConnectionLoss)

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    retry = ZkRetry(
        max_tries=-1, delay=1.0, backoff=1, max_jitter=0, deadline=3.5, sleep_func=sleep, clock=lambda: now[0]
    )
    with pytest.raises(RetryFailedError, match="deadline"):
        retry(lost)
    assert now[0] == 3.0


def test_retry_does_not_retry_other_errors_or_expiry_by_default() -> None:
    calls = []

    def missing() -> None:
        calls.append(1)
        raise NoNodeError("no node", "/x")

    with pytest.raises(NoNodeError):
        ZkRetry(sleep_func=lambda s: None)(missing)
    assert len(calls) == 1

    def expired() -> None:
        calls.append(1)
        raise SessionExpiredError()

    with pytest.raises(SessionExpiredError):
        ZkRetry(sleep_func=lambda s: None)(expired)
    with pytest.raises(RetryFailedError):
        ZkRetry(max_tries=1, ignore_expire=True, sleep_func=lambda s: None)(expired)


def test_async_retry() -> None:
    attempts = []

    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise OperationTimeoutError("slow")
        return "ok"

    async def no_sleep(seconds: float) -> None:
        return None

    assert asyncio.run(AsyncZkRetry(max_tries=3, sleep_func=no_sleep)(flaky)) == "ok"


def test_client_package_imports_no_server_package() -> None:
    forbidden = {"quorum", "zkemu", "broker", "spark_connector", "zkraft"}
    offenders = []
    for path in sorted((REPO_ROOT / "client").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO_ROOT)}: {n}" for n in names if n.split(".")[0] in forbidden]
    assert not offenders, offenders


# ---------------------------------------------------------------- against the fake servers


def test_crud_and_stats(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients)
    assert zk.connected and zk.state is ZkState.CONNECTED and zk.client_state is KeeperState.CONNECTED
    session_id, password = zk.client_id or (0, b"")
    assert session_id and len(password) == 16 and zk.session_timeout_ms == SESSION_MS

    assert zk.create("/a", b"one") == "/a"
    data, stat = zk.get("/a")
    assert data == b"one" and stat.version == 0 and stat.dataLength == 3 and stat.czxid == stat.mzxid > 0
    stat2 = zk.set("/a", b"two", version=0)
    assert stat2.version == 1 and zk.get("/a")[0] == b"two"
    assert zk.exists("/a") == stat2 and zk.exists("/nope") is None

    path, created = zk.create("/a/e-", b"x", ephemeral=True, sequence=True, include_data=True)
    assert path == "/a/e-0000000000" and created.owner_session_id == session_id
    assert zk.create("/deep/er/node", makepath=True) == "/deep/er/node"
    assert zk.ensure_path("/deep/er") and zk.ensure_path("/x/y/z") and zk.exists("/x/y/z") is not None
    assert zk.get_children("/a") == ["e-0000000000"]
    children, parent = zk.get_children("/a", include_data=True)
    assert children == ["e-0000000000"] and parent.numChildren == 1 and parent.cversion == 1
    assert zk.get_ephemerals() == ["/a/e-0000000000"] and zk.get_ephemerals("/deep") == []
    assert zk.get_all_children_number("/deep") == 2
    assert zk.sync("/a") == "/a"
    assert zk.delete("/deep/er/node") is True and zk.exists("/deep/er/node") is None
    assert zk.last_zxid >= stat2.mzxid


def test_errors_are_kazoo_exceptions_naming_the_path(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients)
    zk.create("/p", b"")
    zk.create("/p/c", b"")
    zk.create("/eph", ephemeral=True)
    cases = [
        (lambda: zk.get("/missing"), NoNodeError, "/missing"),
        (lambda: zk.create("/p"), NodeExistsError, "/p"),
        (lambda: zk.set("/p", b"x", version=7), BadVersionError, "/p"),
        (lambda: zk.delete("/p"), NotEmptyError, "/p"),
        (lambda: zk.create("/eph/kid"), NoChildrenForEphemeralsError, "/eph"),
        (lambda: zk.create("/no/parent"), NoNodeError, "/no/parent"),
        (lambda: zk.get("/trailing/"), BadArgumentsError, "/trailing/"),
        (lambda: zk.get("relative"), BadArgumentsError, "relative"),
    ]
    for call, cls, path in cases:
        with pytest.raises(cls) as info:
            call()
        assert info.value.code == cls.code and path in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(TypeError):
        zk.create("/t", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        zk.get("/p", watch="not callable")  # type: ignore[arg-type]


def test_recursive_delete(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients)
    for path in ("/t/a/1", "/t/a/2", "/t/b"):
        zk.create(path, makepath=True)
    assert zk.delete("/t", recursive=True) is True
    assert zk.exists("/t") is None and zk.get_children("/") == []
    assert zk.delete("/t", recursive=True) is True  # already gone: fine, as kazoo


def test_transaction_results_like_kazoo(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients)
    zk.create("/tx", b"v0")
    t = zk.transaction()
    t.check("/tx", 0)
    t.create("/tx/s-", b"a", sequence=True)
    t.set_data("/tx", b"v1")
    t.create("/tx/gone")
    t.delete("/tx/gone")
    results = t.commit()
    assert results[0] is True and results[1] == "/tx/s-0000000000" and results[3] == "/tx/gone"
    assert isinstance(results[2], ZnodeStat) and results[2].version == 1 and results[4] is True
    with pytest.raises(ValueError, match="committed"):
        t.create("/late")

    failed = zk.transaction()
    failed.create("/tx/new")
    failed.check("/tx", 0)  # the version is 1 now
    failed.delete("/tx/s-0000000000")
    results = failed.commit()
    assert [type(r) for r in results] == [RolledBackError, BadVersionError, RuntimeInconsistency]
    assert "/tx" in str(results[1])
    assert zk.exists("/tx/new") is None and zk.exists("/tx/s-0000000000") is not None

    with zk.transaction() as t2:
        t2.set_data("/tx", b"v2", version=1)
    assert zk.get("/tx")[0] == b"v2"


def test_one_shot_watches_fire_once(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk, other = connect(cluster, clients), connect(cluster, clients)
    zk.create("/w", b"0")
    data_events, child_events, exist_events = Recorder(), Recorder(), Recorder()
    zk.get("/w", watch=data_events)
    zk.exists("/w", watch=data_events)  # the same watcher through two reads: one call per event
    zk.get_children("/w", watch=child_events)
    assert zk.exists("/later", watch=exist_events) is None  # armed although the node is missing

    changed_zxid = other.set("/w", b"1").mzxid
    other.set("/w", b"2")  # not watched any more
    other.create("/w/kid")
    other.create("/later")
    kid_zxid, later_zxid = _czxid(other, "/w/kid"), _czxid(other, "/later")
    wait_until(lambda: len(exist_events.snapshot()) == 1, WAIT_S)
    wait_until(lambda: len(child_events.snapshot()) == 1, WAIT_S)
    # Each event carries the zxid of the change that fired it (ZooKeeper 3.9's WatchedEvent.getZxid()).
    assert data_events.snapshot() == [WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/w", changed_zxid)]
    assert child_events.snapshot() == [WatchedEvent(EventType.CHILD, KeeperState.CONNECTED, "/w", kid_zxid)]
    assert exist_events.snapshot() == [WatchedEvent(EventType.CREATED, KeeperState.CONNECTED, "/later", later_zxid)]

    deleted = Recorder()
    zk.get("/later", watch=deleted)
    zk.get_children("/later", watch=deleted)
    other.delete("/later")
    wait_until(lambda: deleted.snapshot(), WAIT_S)
    assert sans_zxid(deleted.snapshot()) == [WatchedEvent(EventType.DELETED, KeeperState.CONNECTED, "/later")]
    assert deleted.snapshot()[0].zxid > later_zxid


def test_watch_event_arrives_before_the_reply_of_a_later_read(cluster: FakeCluster) -> None:
    seen: list[str] = []

    def dispatcher(callback: Any, args: tuple[Any, ...]) -> None:
        seen.append("event")  # called as the event is read, in the client's reader

    async def scenario() -> None:
        watcher = AsyncZkClient(cluster.hosts, session_timeout_ms=SESSION_MS, callback_dispatcher=dispatcher)
        writer = AsyncZkClient(cluster.hosts, session_timeout_ms=SESSION_MS)
        await watcher.start()
        await writer.start()
        try:
            await writer.create("/order", b"old")
            await watcher.get("/order", watch=lambda event: None)
            await writer.set("/order", b"new")
            data, _ = await watcher.get("/order")
            seen.append(f"reply {data.decode()}")
        finally:
            await watcher.close()
            await writer.close()

    cluster.run(scenario())
    assert seen == ["event", "reply new"]


def test_persistent_and_recursive_watches(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk, other = connect(cluster, clients), connect(cluster, clients)
    zk.create("/pw")
    persistent, recursive = Recorder(), Recorder()
    zk.add_watch("/pw", persistent, AddWatchMode.PERSISTENT)
    zk.add_watch("/pw", recursive, AddWatchMode.PERSISTENT_RECURSIVE)
    other.set("/pw", b"1")
    other.create("/pw/a")
    other.create("/pw/a/b")
    other.set("/pw", b"2")
    wait_until(lambda: len(persistent.snapshot()) == 3, WAIT_S)
    wait_until(lambda: len(recursive.snapshot()) == 4, WAIT_S)
    assert [(e.type, e.path) for e in persistent.snapshot()] == [
        (EventType.CHANGED, "/pw"), (EventType.CHILD, "/pw"), (EventType.CHANGED, "/pw"),
    ]  # fmt: skip
    assert [(e.type, e.path) for e in recursive.snapshot()] == [
        (EventType.CHANGED, "/pw"), (EventType.CREATED, "/pw/a"), (EventType.CREATED, "/pw/a/b"),
        (EventType.CHANGED, "/pw"),
    ]  # fmt: skip

    zk.remove_watches("/pw", WatcherType.PERSISTENT_RECURSIVE)
    with pytest.raises(NoWatcherError):
        zk.remove_watches("/pw", WatcherType.PERSISTENT_RECURSIVE)
    zk.remove_watches("/pw", WatcherType.ANY)
    other.set("/pw", b"3")
    marker = Recorder()
    zk.get("/pw", watch=marker)
    other.set("/pw", b"4")
    wait_until(lambda: marker.snapshot(), WAIT_S)  # events are ordered: the removed watches saw nothing before
    assert len(persistent.snapshot()) == 3 and len(recursive.snapshot()) == 4


def test_listeners_context_manager_and_stop(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    states = Recorder()
    observer = connect(cluster, clients)
    with ZkClient(cluster.hosts, session_timeout_ms=SESSION_MS) as zk:
        zk.add_listener(states)
        zk.create("/eph-1", ephemeral=True)
        watch = Recorder()
        zk.exists("/never", watch=watch)
        assert observer.exists("/eph-1") is not None
    wait_until(lambda: states.snapshot() == [ZkState.LOST], WAIT_S)
    assert zk.state is ZkState.LOST and zk.client_state is KeeperState.CLOSED and not zk.connected
    assert observer.exists("/eph-1") is None  # a closed session's ephemerals go at once
    assert watch.snapshot() == [WatchedEvent(EventType.NONE, KeeperState.CLOSED, None)]
    with pytest.raises(ConnectionClosedError):
        zk.get("/")


def test_calls_before_start_and_start_timeout(cluster: FakeCluster) -> None:
    zk = ZkClient(cluster.hosts, session_timeout_ms=SESSION_MS)
    try:
        assert zk.state is ZkState.LOST and zk.client_id is None
        with pytest.raises(ConnectionClosedError):
            zk.exists("/")
        for server in cluster.servers:
            server.available = False
        with pytest.raises(ZkTimeoutError):
            zk.start(timeout=0.5)
        assert zk.state is ZkState.LOST
        for server in cluster.servers:
            server.available = True
        zk.start()
        assert zk.connected
    finally:
        zk.close()


def test_reconnect_resumes_the_session_and_replays_missed_events(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    first, second, third = cluster.servers
    states = Recorder()
    zk = connect(cluster, clients, hosts=pin(cluster, 0), randomize_hosts=False)
    zk.add_listener(states)
    assert zk.server == first.address
    zk.create("/w", b"0")
    zk.create("/c")
    zk.create("/mine", ephemeral=True)
    zk.create("/pers")
    data_w, child_w, exist_w, pers_w, quiet_w = Recorder(), Recorder(), Recorder(), Recorder(), Recorder()
    zk.get("/w", watch=data_w)
    zk.get_children("/c", watch=child_w)
    zk.exists("/born", watch=exist_w)
    zk.add_watch("/pers", pers_w)
    zk.get("/mine", watch=quiet_w)
    session_id = (zk.client_id or (0, b""))[0]
    seen_zxid = zk.last_zxid

    for server in cluster.servers:
        server.available = False
    cluster.kill_connections(first)
    wait_until(lambda: zk.state is ZkState.SUSPENDED, WAIT_S)
    cluster.set_data("/w", b"1")  # changes made while the client is away
    cluster.create("/c/kid")
    cluster.create("/born")
    cluster.set_data("/pers", b"missed")
    third.available = True
    wait_until(lambda: zk.state is ZkState.CONNECTED, WAIT_S)
    assert zk.server == third.address and (zk.client_id or (0, b""))[0] == session_id

    resumed = [c for c in third.connects if c.session_id == session_id]
    assert resumed and resumed[-1].last_zxid_seen == seen_zxid
    # The fake server records a request when it reads it, which may come after the client says CONNECTED.
    wait_until(lambda: any(r.WhichOneof("op") == "set_watches" for r in third.requests), WAIT_S)
    set_watches = [r.set_watches for r in third.requests if r.WhichOneof("op") == "set_watches"]
    assert len(set_watches) == 1 and third.requests[0].WhichOneof("op") == "set_watches"
    sw = set_watches[0]
    assert sw.relative_zxid == seen_zxid
    assert list(sw.data_watches) == ["/mine", "/w"] and list(sw.exist_watches) == ["/born"]
    assert list(sw.child_watches) == ["/c"]
    assert list(sw.persistent_watches) == ["/pers"] and not sw.persistent_recursive_watches

    wait_until(lambda: data_w.snapshot() and child_w.snapshot() and exist_w.snapshot(), WAIT_S)
    assert sans_zxid(data_w.snapshot()) == [WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/w")]
    assert sans_zxid(exist_w.snapshot()) == [WatchedEvent(EventType.CREATED, KeeperState.CONNECTED, "/born")]
    assert [e.type for e in child_w.snapshot()] == [EventType.CHILD]
    assert pers_w.snapshot() == [] and quiet_w.snapshot() == []  # persistent: re-armed without catch-up
    wait_until(lambda: states.snapshot() == [ZkState.SUSPENDED, ZkState.CONNECTED], WAIT_S)
    assert zk.exists("/mine") is not None  # the session, and its ephemeral, survived

    cluster.set_data("/pers", b"seen")  # the re-armed persistent watch works on the new server
    wait_until(lambda: pers_w.snapshot(), WAIT_S)
    assert sans_zxid(pers_w.snapshot()) == [WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/pers")]


def test_inflight_request_fails_with_connection_loss_when_the_server_goes_silent(
    cluster: FakeCluster, clients: list[ZkClient]
) -> None:
    zk = connect(cluster, clients, hosts=pin(cluster, 0), randomize_hosts=False)
    zk.create("/a", b"x")
    cluster.servers[0].silent = True
    with pytest.raises(ConnectionLoss) as info:
        zk.get("/a")  # nothing heard for 2/3 of the session timeout: the connection is dropped
    assert "/a" in str(info.value) and info.value.path == "/a"
    wait_until(lambda: zk.state is ZkState.CONNECTED, WAIT_S)
    assert zk.server != cluster.servers[0].address
    assert zk.retry(zk.get, "/a")[0] == b"x"


def test_requests_made_while_suspended_wait_for_the_reconnect(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients, hosts=pin(cluster, 0), randomize_hosts=False, session_timeout_ms=3000)
    for server in cluster.servers:
        server.available = False
    cluster.kill_connections(cluster.servers[0])
    wait_until(lambda: zk.state is ZkState.SUSPENDED, WAIT_S)
    result: list[Any] = []
    caller = threading.Thread(target=lambda: result.append(zk.create("/queued", b"q")))
    caller.start()
    caller.join(0.3)
    assert caller.is_alive() and not result
    cluster.servers[1].available = True
    caller.join(WAIT_S)
    assert result == ["/queued"] and zk.get("/queued")[0] == b"q"


def test_a_server_behind_the_client_is_skipped(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    first, lagging, good = cluster.servers
    zk = connect(cluster, clients, hosts=pin(cluster, 0), randomize_hosts=False)
    zk.create("/seen", b"")
    assert zk.last_zxid > 0
    lagging.lagging = True
    first.available = False
    cluster.kill_connections(first)
    wait_until(lambda: zk.state is ZkState.CONNECTED and zk.server == good.address, WAIT_S)
    assert [c.session_id for c in lagging.connects] == [(zk.client_id or (0, b""))[0]]  # tried, refused


def test_protocol_violation_drops_the_connection(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients, hosts=pin(cluster, 0), randomize_hosts=False)
    cluster.servers[0].corrupt_next_xid = True
    with pytest.raises(ConnectionLoss):
        zk.exists("/")
    wait_until(lambda: zk.connected, WAIT_S)
    assert zk.exists("/") is not None


def test_idle_session_is_kept_alive_by_pings(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    states = Recorder()
    zk = connect(cluster, clients)
    zk.add_listener(states)
    server = cluster.server_of(zk.server)
    wait_until(lambda: sum(r.WhichOneof("op") == "ping" for r in server.requests) >= 5, WAIT_S)
    assert zk.connected and states.snapshot() == [] and len(server.connects) == 1


def test_expired_session_is_lost_until_start(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    states = Recorder()
    zk = connect(cluster, clients)
    zk.add_listener(states)
    watch = Recorder()
    zk.create("/node")
    zk.get("/node", watch=watch)
    old_id = (zk.client_id or (0, b""))[0]
    cluster.expire(old_id)  # the server ends the stream; the reconnect hears "expired"
    wait_until(lambda: zk.state is ZkState.LOST, WAIT_S)
    assert zk.client_state is KeeperState.EXPIRED_SESSION
    wait_until(lambda: watch.snapshot(), WAIT_S)
    assert watch.snapshot() == [WatchedEvent(EventType.NONE, KeeperState.EXPIRED_SESSION, None)]
    with pytest.raises(SessionExpiredError):
        zk.get("/node")
    zk.start()
    assert zk.connected and (zk.client_id or (0, b""))[0] != old_id
    wait_until(lambda: states.snapshot() == [ZkState.SUSPENDED, ZkState.LOST, ZkState.CONNECTED], WAIT_S)


def test_no_server_within_the_session_timeout_is_lost(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients, hosts=pin(cluster, 0), randomize_hosts=False)
    for server in cluster.servers:
        server.available = False
    cluster.kill_connections(cluster.servers[0])
    wait_until(lambda: zk.state is ZkState.LOST, WAIT_S)
    assert zk.client_state is KeeperState.EXPIRED_SESSION
    with pytest.raises(SessionExpiredError):
        zk.exists("/")


def test_data_watch_recipe(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk, other = connect(cluster, clients), connect(cluster, clients)
    calls = Recorder()

    @zk.DataWatch("/dw")
    def on_change(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
        calls((data, stat.version if stat else None))
        return False if data == b"stop" else None

    assert calls.snapshot() == [(None, None)]  # called at once: no node yet
    other.create("/dw", b"a")
    wait_until(lambda: len(calls.snapshot()) == 2, WAIT_S)
    other.set("/dw", b"b")
    wait_until(lambda: len(calls.snapshot()) == 3, WAIT_S)
    other.set("/dw", b"stop")
    wait_until(lambda: len(calls.snapshot()) == 4, WAIT_S)
    other.set("/dw", b"ignored")
    marker = Recorder()
    zk.get("/dw", watch=marker)
    other.set("/dw", b"again")
    wait_until(lambda: marker.snapshot(), WAIT_S)
    assert calls.snapshot() == [(None, None), (b"a", 0), (b"b", 1), (b"stop", 2)]

    events = Recorder()
    DataWatch(zk, "/dw", lambda data, stat, event: events((data, event)))
    other.delete("/dw")
    wait_until(lambda: len(events.snapshot()) == 2, WAIT_S)
    data, event = events.snapshot()[1]
    assert (data, sans_zxid([event])) == (None, [WatchedEvent(EventType.DELETED, KeeperState.CONNECTED, "/dw")])


def test_children_watch_recipe_and_new_session(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk, other = connect(cluster, clients), connect(cluster, clients)
    zk.create("/cw")
    calls = Recorder()
    ChildrenWatch(zk, "/cw", calls)
    other.create("/cw/a")
    wait_until(lambda: calls.snapshot() == [[], ["a"]], WAIT_S)

    cluster.expire((zk.client_id or (0, b""))[0])
    wait_until(lambda: zk.state is ZkState.LOST, WAIT_S)
    other.create("/cw/b")  # while the session is lost: seen after the new session reads again
    zk.start()
    wait_until(lambda: calls.snapshot() == [[], ["a"], ["a", "b"]], WAIT_S)
    other.create("/cw/c")  # and the re-armed watch works
    wait_until(lambda: calls.snapshot()[-1] == ["a", "b", "c"], WAIT_S)

    other.delete("/cw", recursive=True)  # the node is gone: the watch stops
    flush_callbacks(zk, other)
    count = len(calls.snapshot())
    other.create("/cw/x", makepath=True)
    flush_callbacks(zk, other)
    assert len(calls.snapshot()) == count


def test_chroot(cluster: FakeCluster, clients: list[ZkClient]) -> None:
    zk = connect(cluster, clients, hosts=cluster.hosts + "/app/env")
    zk.ensure_path("/")
    assert cluster.node("/app/env") is not None
    assert zk.create("/x", b"1") == "/x" and cluster.node("/app/env/x") is not None
    assert zk.create("/s-", sequence=True, ephemeral=True) == "/s-0000000001"
    assert zk.get_children("/") == ["s-0000000001", "x"] and zk.get_ephemerals() == ["/s-0000000001"]
    events = Recorder()
    zk.get("/x", watch=events)
    t = zk.transaction()
    t.create("/y")
    t.set_data("/x", b"2")
    assert t.commit()[0] == "/y"
    wait_until(lambda: events.snapshot(), WAIT_S)
    assert sans_zxid(events.snapshot()) == [WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/x")]
    with pytest.raises(NoNodeError) as info:
        zk.get("/missing")
    assert info.value.path == "/missing"


def test_async_client(cluster: FakeCluster) -> None:
    async def scenario() -> list[Any]:
        got: list[Any] = []
        fired = asyncio.Event()

        async def on_event(event: WatchedEvent) -> None:
            await asyncio.sleep(0)
            got.append(event)
            got.append(await zk.get("/aio"))  # a callback may await the client
            fired.set()

        zk = AsyncZkClient(cluster.hosts, session_timeout_ms=SESSION_MS, rng=random.Random(7))
        zk.add_listener(got.append)
        async with zk:
            await zk.create("/aio", b"1")
            await zk.get("/aio", watch=on_event)
            async with zk.transaction() as t:
                t.set_data("/aio", b"2")
            await asyncio.wait_for(fired.wait(), WAIT_S)
            assert await zk.retry(zk.exists, "/aio") is not None
            with pytest.raises(NoNodeError):
                await zk.delete("/none")
        got.append(zk.state)
        return got

    got = cluster.run(scenario())
    assert got[0] is ZkState.CONNECTED
    assert sans_zxid([got[1]]) == [WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/aio")] and got[2][0] == b"2"
    assert got[-1] is ZkState.LOST


def test_async_client_callbacks_run_one_at_a_time_in_event_order(cluster: FakeCluster) -> None:
    """A plain watcher whose event arrives while a coroutine watcher is still running waits for it."""

    async def scenario() -> tuple[list[str], list[str]]:
        order: list[str] = []
        release = asyncio.Event()
        quick_ran = asyncio.Event()

        async def slow(event: WatchedEvent) -> None:
            order.append(f"slow start {event.path}")
            await release.wait()
            order.append(f"slow end {event.path}")

        def quick(event: WatchedEvent) -> None:
            order.append(f"quick {event.path}")
            quick_ran.set()

        zk = AsyncZkClient(cluster.hosts, session_timeout_ms=SESSION_MS, rng=random.Random(7))
        async with zk:
            await zk.create("/a")
            await zk.create("/b")
            await zk.get("/a", watch=slow)
            await zk.get("/b", watch=quick)
            await zk.set("/a", b"1")
            await zk.set("/b", b"1")
            await zk.get("/b")  # the event of /b reaches the client before this reply
            while_slow_runs = list(order)
            release.set()
            await asyncio.wait_for(quick_ran.wait(), WAIT_S)
        return while_slow_runs, order

    while_slow_runs, order = cluster.run(scenario())
    assert while_slow_runs == ["slow start /a"]
    assert order == ["slow start /a", "slow end /a", "quick /b"]
