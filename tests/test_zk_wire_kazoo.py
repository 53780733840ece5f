"""kazoo, the ZooKeeper client of Python, against a real three-node quorum's client ports (the
ZooKeeper wire protocol, zkemu.jute_server).

What a kazoo user would check: every znode operation, watches, ephemeral and sequential nodes,
transactions, sessions on different nodes seeing one tree, a session moving to another node
when its server is SIGKILLed (keeping its ephemerals), ZooKeeper's session id + password rule,
and kazoo and our own SDK (client.ZkClient) seeing each other's writes and watches. Every wait is a
poll with a deadline.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import EventType

from client import ZkClient
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0
KAZOO_TIMEOUT_S = 4.0  # the session timeout kazoo asks for (the quorum allows 1 to 10 s)


class Recorder:
    """Collects what a watch or listener is called with, from kazoo's thread."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.items)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    # ruok answers only where the whitelist has it (ZooKeeper's default is srvr alone).
    properties = {**FAST_ZK_PROPERTIES, "4lw.commands.whitelist": "ruok"}
    with QuorumProcesses(tmp_path_factory.mktemp("wire"), n=3, properties=properties) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        asyncio.run(processes.wait_client_ports(timeout_s=LEADER_TIMEOUT_S))
        yield processes


@pytest.fixture
def kazoos() -> Iterator[list[KazooClient]]:
    made: list[KazooClient] = []
    yield made
    for zk in made:
        zk.stop()
        zk.close()


def kazoo(made: list[KazooClient], hosts: str, **kwargs: Any) -> KazooClient:
    """A started kazoo client trying `hosts` in the order given."""
    kwargs.setdefault("timeout", KAZOO_TIMEOUT_S)
    zk = KazooClient(hosts=hosts, randomize_hosts=False, **kwargs)
    made.append(zk)
    zk.start(timeout=WAIT_S)
    return zk


def test_kazoo_znode_operations(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    zk = kazoo(kazoos, cluster.zk_address(1))
    assert zk.create("/ops", b"v0") == "/ops"
    data, stat = zk.get("/ops")
    assert (data, stat.version, stat.data_length) == (b"v0", 0, 2)
    assert zk.set("/ops", b"v1", version=0).version == 1
    with pytest.raises(BadVersionError):
        zk.set("/ops", b"v2", version=0)
    path, stat = zk.create("/ops/child", b"c", include_data=True)  # create2: the Stat comes back
    assert path == "/ops/child" and stat.data_length == 1
    with pytest.raises(NodeExistsError):
        zk.create("/ops/child")
    with pytest.raises(NoNodeError):
        zk.create("/missing/child")
    assert zk.create("/deep/a/b", b"x", makepath=True) == "/deep/a/b"
    zk.ensure_path("/deep/a/c")
    assert sorted(zk.get_children("/deep/a")) == ["b", "c"]
    children, stat = zk.get_children("/ops", include_data=True)  # getChildren2
    assert children == ["child"] and stat.numChildren == 1
    assert zk.exists("/ops/child") is not None
    assert zk.exists("/ops/none") is None
    with pytest.raises(NoNodeError):
        zk.get("/ops/none")
    with pytest.raises(NotEmptyError):
        zk.delete("/ops")
    zk.delete("/ops", recursive=True)
    assert zk.exists("/ops") is None
    assert zk.sync("/deep") == "/deep"
    assert "zookeeper" in zk.get_children("/")


def test_kazoo_ephemeral_and_sequential_nodes(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    owner = kazoo(kazoos, cluster.zk_address(2))
    observer = kazoo(kazoos, cluster.zk_address(3))
    owner.ensure_path("/seq")
    first = owner.create("/seq/n-", b"", sequence=True)
    second = owner.create("/seq/n-", b"", ephemeral=True, sequence=True)
    assert first == "/seq/n-0000000000" and second == "/seq/n-0000000001"
    stat = owner.exists(second)
    assert stat is not None and stat.ephemeralOwner == owner.client_id[0]
    # The observer's server may lag the owner's (ZooKeeper promises each session its own order,
    # not another session's), so it must first see the ephemeral: otherwise "gone" could mean
    # "not yet created here", and the persistent node beside it would not be there yet either.
    wait_until(lambda: observer.exists(second) is not None, WAIT_S, message="observer sees the ephemeral")
    owner.stop()  # closeSession: its ephemerals go at once
    wait_until(lambda: observer.exists(second) is None, WAIT_S, message="ephemeral deleted with its session")
    assert observer.exists(first) is not None


def test_kazoo_transactions(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    zk = kazoo(kazoos, cluster.zk_address(1))
    zk.create("/txn", b"0")
    t = zk.transaction()
    t.create("/txn/a", b"a")
    t.set_data("/txn", b"1")
    t.check("/txn", 1)
    t.delete("/txn/a")
    results = t.commit()
    assert results[0] == "/txn/a" and results[1].version == 1 and results[2:] == [True, True]
    failing = zk.transaction()
    failing.create("/txn/b", b"b")
    failing.check("/txn", 99)
    results = failing.commit()
    assert isinstance(results[0], RolledBackError) and isinstance(results[1], BadVersionError)
    assert zk.exists("/txn/b") is None


def test_kazoo_watches(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    zk = kazoo(kazoos, cluster.zk_address(3))
    writer = kazoo(kazoos, cluster.zk_address(1))
    data_events, child_events, exist_events = Recorder(), Recorder(), Recorder()
    zk.create("/w", b"")
    zk.get("/w", watch=data_events)
    zk.get_children("/w", watch=child_events)
    zk.exists("/w/new", watch=exist_events)
    writer.set("/w", b"changed")
    writer.create("/w/new")
    wait_until(lambda: data_events.snapshot(), WAIT_S, message="data watch fired")
    wait_until(lambda: child_events.snapshot() and exist_events.snapshot(), WAIT_S, message="child/exist fired")
    assert [(e.type, e.path) for e in data_events.snapshot()] == [(EventType.CHANGED, "/w")]
    assert [(e.type, e.path) for e in child_events.snapshot()] == [(EventType.CHILD, "/w")]
    assert [(e.type, e.path) for e in exist_events.snapshot()] == [(EventType.CREATED, "/w/new")]
    deleted = Recorder()
    zk.get("/w/new", watch=deleted)
    writer.delete("/w/new")
    wait_until(lambda: deleted.snapshot(), WAIT_S, message="delete watch fired")
    assert [(e.type, e.path) for e in deleted.snapshot()] == [(EventType.DELETED, "/w/new")]
    # kazoo's recipes re-read after each event: the watch is seen before the data it announces.
    seen = Recorder()
    zk.DataWatch("/w", lambda data, stat: seen(data))
    writer.set("/w", b"recipe")
    wait_until(lambda: b"recipe" in seen.snapshot(), WAIT_S, message="DataWatch saw the new data")


def test_sessions_on_different_nodes_see_one_tree(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    clients = [kazoo(kazoos, cluster.zk_address(node_id)) for node_id in (1, 2, 3)]
    for k, zk in enumerate(clients):
        zk.create(f"/shared-{k}", str(k).encode())
    for zk in clients:
        zk.sync("/")
        assert [zk.get(f"/shared-{k}")[0] for k in range(3)] == [b"0", b"1", b"2"]


def test_kazoo_and_sdk_see_each_others_writes_and_watches(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    zk = kazoo(kazoos, cluster.zk_address(1))
    sdk = ZkClient(",".join(cluster.addresses[n] for n in (2, 3)), timeout=WAIT_S, session_timeout_ms=4000)
    sdk.start()
    try:
        kazoo_saw, sdk_saw = Recorder(), Recorder()
        zk.create("/mixed", b"from-kazoo")
        sdk.sync("/mixed")
        assert sdk.get("/mixed")[0] == b"from-kazoo"
        zk.get("/mixed", watch=kazoo_saw)
        sdk.set("/mixed", b"from-sdk")
        wait_until(lambda: kazoo_saw.snapshot(), WAIT_S, message="kazoo's watch fired by the SDK's write")
        assert zk.get("/mixed")[0] == b"from-sdk"
        sdk.get("/mixed", watch=sdk_saw)
        zk.delete("/mixed")
        wait_until(lambda: sdk_saw.snapshot(), WAIT_S, message="the SDK's watch fired by kazoo's delete")
        assert sdk_saw.snapshot()[0].path == "/mixed"
    finally:
        sdk.close()


def test_session_id_and_password_accepted_elsewhere(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    first = kazoo(kazoos, cluster.zk_address(1))
    session_id, password = first.client_id
    first.create("/owned", b"", ephemeral=True)
    # ZooKeeper's rule: any server accepts the session's id and password (the session moves there).
    second = kazoo(kazoos, cluster.zk_address(3), client_id=(session_id, password))
    assert second.client_id[0] == session_id
    assert second.exists("/owned").ephemeralOwner == session_id
    # A wrong password is answered as an expired session (ConnectResponse timeOut 0): kazoo drops the
    # session id and starts a new session.
    wrong = kazoo(kazoos, cluster.zk_address(2), client_id=(session_id, bytes(16)))
    assert wrong.client_id[0] not in (0, session_id)
    assert second.exists("/owned").ephemeralOwner == session_id  # the real session is untouched


def test_kazoo_session_moves_when_its_server_is_killed(tmp_path: Path, kazoos: list[KazooClient]) -> None:
    with QuorumProcesses(tmp_path, n=3, properties=FAST_ZK_PROPERTIES) as cluster:
        cluster.start_all()
        asyncio.run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        hosts = ",".join(cluster.zk_address(n) for n in (1, 2, 3))
        zk = kazoo(kazoos, hosts)  # on node 1 first: not randomized
        observer = kazoo(kazoos, cluster.zk_address(3))
        session_id = zk.client_id[0]
        zk.create("/survivor", b"", ephemeral=True)
        states = Recorder()
        zk.add_listener(states)
        cluster.kill(1)
        wait_until(lambda: KazooState.SUSPENDED in states.snapshot(), WAIT_S, message="kazoo saw its server go")
        wait_until(lambda: zk.state == KazooState.CONNECTED, WAIT_S, message="kazoo reconnected elsewhere")
        assert KazooState.LOST not in states.snapshot()
        assert zk.client_id[0] == session_id
        assert zk.exists("/survivor").ephemeralOwner == session_id
        observer.sync("/")
        assert observer.exists("/survivor").ephemeralOwner == session_id
        zk.set("/survivor", b"still mine")
        for client in kazoos:
            client.stop()


def test_kazoo_recipes_and_four_letter_word(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    first = kazoo(kazoos, cluster.zk_address(1))
    second = kazoo(kazoos, cluster.zk_address(2))
    assert first.command(b"ruok") == "imok"  # a four-letter word on the client port
    counter = first.Counter("/recipes/counter")
    counter += 5
    other = second.Counter("/recipes/counter")
    other += 2  # a versioned setData that sees the first client's value
    assert counter.value == 7
    lock, contender = first.Lock("/recipes/lock", "first"), second.Lock("/recipes/lock", "second")
    assert lock.acquire(timeout=WAIT_S)
    assert not contender.acquire(blocking=False)
    assert contender.contenders() == ["first"]
    lock.release()
    assert contender.acquire(timeout=WAIT_S)
    contender.release()
    seen = Recorder()
    first.ensure_path("/recipes/kids")
    first.ChildrenWatch("/recipes/kids", lambda children: seen(sorted(children)))
    second.create("/recipes/kids/a")
    wait_until(lambda: ["a"] in seen.snapshot(), WAIT_S, message="ChildrenWatch saw the new child")
