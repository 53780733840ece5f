"""The ZooKeeper client against a real quorum: three `zkraft quorum start` processes serving the ZooKeeper service.

What a kazoo user would check: the znode API end to end, a session that
survives the SIGKILL of its server and of the leader (same session id, its
ephemeral nodes and watches kept), and a session that expires when its client
cannot come back (ephemerals deleted by the leader, observers notified).
Every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from client import ZkClient, ZkRetry
from client.zk.client import _SharedLoop
from client.zk.exceptions import BadVersionError, NodeExistsError, NoNodeError, SessionExpiredError
from client.zk.states import EventType, WatchedEvent, ZkState
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

T = TypeVar("T")

PROPERTIES = FAST_ZK_PROPERTIES  # sessions of 1 to 10 s
SESSION_MS = 4000
LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a harness coroutine on the clients' loop: one gRPC asyncio loop per process."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(LEADER_TIMEOUT_S + 5)


class Recorder:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.items)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path, n=3, properties=PROPERTIES) as processes:
        processes.start_all()
        run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        yield processes


@pytest.fixture
def clients() -> Iterator[list[ZkClient]]:
    made: list[ZkClient] = []
    yield made
    for zk in made:
        zk.close()


def connect(made: list[ZkClient], *addresses: str, **kwargs: Any) -> ZkClient:
    """A started client trying `addresses` in the order given."""
    kwargs.setdefault("session_timeout_ms", SESSION_MS)
    zk = ZkClient(",".join(addresses), timeout=WAIT_S, randomize_hosts=False, **kwargs)
    made.append(zk)
    zk.start()
    return zk


def node_of(cluster: QuorumProcesses, address: str | None) -> int:
    return next(node_id for node_id, a in cluster.addresses.items() if a == address)


def followers(cluster: QuorumProcesses) -> tuple[int, list[int]]:
    leader_id, _ = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
    return leader_id, [n for n in cluster.addresses if n != leader_id]


def test_znode_api_end_to_end(cluster: QuorumProcesses, clients: list[ZkClient]) -> None:
    a1, a2, a3 = (cluster.addresses[n] for n in (1, 2, 3))
    zk, other = connect(clients, a1, a2, a3), connect(clients, a2, a3, a1)
    assert zk.server == a1 and other.server == a2 and zk.session_timeout_ms == SESSION_MS

    assert zk.create("/app/config", b"v0", makepath=True) == "/app/config"
    other.sync("/app/config")
    data, stat = other.get("/app/config")
    assert data == b"v0" and stat.version == 0 and stat.czxid == stat.mzxid > 0
    assert zk.set("/app/config", b"v1", version=0).version == 1
    with pytest.raises(BadVersionError):
        zk.set("/app/config", b"v2", version=0)
    with pytest.raises(NodeExistsError):
        zk.create("/app/config")
    with pytest.raises(NoNodeError):
        zk.get("/app/missing")

    changed, children, created = Recorder(), Recorder(), Recorder()
    other.sync("/app")
    other.get("/app/config", watch=changed)
    other.get_children("/app", watch=children)
    assert other.exists("/app/later", watch=created) is None
    seq = zk.create("/app/member-", b"", ephemeral=True, sequence=True)
    set_zxid = zk.set("/app/config", b"v2").mzxid
    zk.create("/app/later")
    wait_until(lambda: changed.snapshot() and children.snapshot() and created.snapshot(), WAIT_S)
    # The event names the zxid of the change that fired it (ZooKeeper 3.9's WatchedEvent.getZxid()).
    assert changed.snapshot() == [WatchedEvent(EventType.CHANGED, changed.snapshot()[0].state, "/app/config", set_zxid)]
    assert [e.type for e in children.snapshot()] == [EventType.CHILD]
    assert [(e.type, e.zxid) for e in created.snapshot()] == [(EventType.CREATED, zk.exists("/app/later").czxid)]

    assert zk.get_ephemerals("/app") == [seq]
    assert sorted(zk.get_children("/app")) == sorted(["config", "later", seq.rsplit("/", 1)[1]])
    assert zk.get_all_children_number("/app") == 3

    t = zk.transaction()
    t.check("/app/config", 2)
    t.create("/app/tx", b"t")
    t.delete("/app/later")
    assert t.commit() == [True, "/app/tx", True]
    t = zk.transaction()
    t.create("/app/never")
    t.check("/app/config", 99)
    results = t.commit()
    assert [type(r).__name__ for r in results] == ["RolledBackError", "BadVersionError"]
    assert zk.exists("/app/never") is None

    deleted = Recorder()
    other.sync(seq)
    assert other.exists(seq, watch=deleted) is not None
    zk.stop()  # closing the session deletes its ephemerals at once
    wait_until(lambda: deleted.snapshot(), WAIT_S)
    assert deleted.snapshot()[0].type is EventType.DELETED
    other.delete("/app", recursive=True)
    assert other.exists("/app") is None


def test_session_survives_the_death_of_its_server(cluster: QuorumProcesses, clients: list[ZkClient]) -> None:
    leader_id, (follower_id, other_follower) = followers(cluster)
    addresses = cluster.addresses
    states = Recorder()
    zk = connect(clients, addresses[follower_id], addresses[other_follower], addresses[leader_id])
    zk.add_listener(states)
    observer = connect(clients, addresses[leader_id])
    session_id = (zk.client_id or (0, b""))[0]
    zk.create("/alive", ephemeral=True)
    zk.create("/watched", b"0")
    watched = Recorder()
    zk.get("/watched", watch=watched)

    cluster.kill(follower_id)
    observer.set("/watched", b"1")  # the watch, re-registered on the next server, reports it once
    wait_until(lambda: watched.snapshot(), WAIT_S)
    wait_until(lambda: zk.connected, WAIT_S)
    assert zk.server in (addresses[other_follower], addresses[leader_id])
    assert (zk.client_id or (0, b""))[0] == session_id
    assert [e.type for e in watched.snapshot()] == [EventType.CHANGED]
    wait_until(lambda: states.snapshot() == [ZkState.SUSPENDED, ZkState.CONNECTED], WAIT_S)
    observer.sync("/alive")
    assert observer.exists("/alive") is not None and zk.get("/watched")[0] == b"1"


def test_writes_resume_after_the_leader_dies(cluster: QuorumProcesses, clients: list[ZkClient]) -> None:
    leader_id, (follower_id, _) = followers(cluster)
    zk = connect(clients, cluster.addresses[follower_id], command_retry=ZkRetry(max_tries=-1, deadline=WAIT_S))
    session_id = (zk.client_id or (0, b""))[0]
    zk.create("/mine", ephemeral=True)
    cluster.kill(leader_id)
    assert zk.retry(zk.create, "/after-failover", b"x") == "/after-failover"
    run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S, exclude=[leader_id]))
    assert zk.connected and (zk.client_id or (0, b""))[0] == session_id
    assert zk.exists("/mine") is not None  # the new leader restarted the session clock; it lives on


def test_a_client_that_cannot_come_back_loses_its_session(cluster: QuorumProcesses, clients: list[ZkClient]) -> None:
    leader_id, (follower_id, _) = followers(cluster)
    states = Recorder()
    # Knows only the server that will die, and does not learn the others from /zookeeper/config.
    lonely = connect(clients, cluster.addresses[follower_id], ensemble_tracker=False)
    lonely.add_listener(states)
    lonely.create("/lonely", ephemeral=True)
    observer = connect(clients, cluster.addresses[leader_id])
    observer.sync("/lonely")
    gone = Recorder()
    assert observer.exists("/lonely", watch=gone) is not None

    cluster.kill(follower_id)
    wait_until(lambda: states.snapshot() == [ZkState.SUSPENDED, ZkState.LOST], WAIT_S)
    with pytest.raises(SessionExpiredError):
        lonely.exists("/")
    wait_until(lambda: gone.snapshot(), WAIT_S)  # the leader expired the session: its ephemeral is deleted
    assert gone.snapshot()[0].type is EventType.DELETED and observer.exists("/lonely") is None

    cluster.start(follower_id)
    lonely.start()  # a new session
    assert lonely.connected and lonely.exists("/lonely") is None
