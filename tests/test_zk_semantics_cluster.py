"""ZooKeeper semantics, checked the way a ZooKeeper user would, against three real quorum processes.

What tests/test_zk_client_cluster.py does not already cover: every row of the
watch-event table (docs/research/quorum.md §1.8) with the watch on a follower and the
change made through another node; every Stat field after each kind of change,
identical on all three nodes (§1.2); when ephemerals vanish after their owner
is SIGKILLed or closes (§1.7); sequential names under concurrency; multi
atomicity (§1.6); version-conditional writes racing from three nodes; live
sessions across a leader change; and a linearizability check of a register
under leader crashes (tests/linearizability.py).

Tests that kill nodes get a fresh cluster each and come first in this file,
so that the module's shared cluster (for the tests that kill nothing) is only
started after them and never runs alongside another cluster. Every wait is a
poll with a deadline; "nothing else fired" is shown by a later fence event
on the same session stream, never by sleeping.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import random
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from client import AddWatchMode, EventType, WatchedEvent, ZkClient, ZkState, ZnodeStat
from client.zk.aio import AsyncZkClient
from client.zk.client import _SharedLoop
from client.zk.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    OperationTimeoutError,
    RequestTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from quorum.register_client import QuorumClient
from tests.helpers import wait_until
from tests.linearizability import History, Kind, Operation, RegisterState, check
from tests.quorum_harness import REPO_ROOT, QuorumProcesses, node_status, subprocess_env, wait_for_leader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

T = TypeVar("T")

TICK_TIME_MS = 200
PROPERTIES = {
    "quorum.state.machine": "zookeeper",
    "raft.tick.ms": "50",
    "raft.election.timeout.ticks": "10",
    "raft.heartbeat.interval.ticks": "2",
    "tickTime": str(TICK_TIME_MS),  # sessions of 0.4 to 4 s
}
# Sessions on the shared cluster, where nothing dies: long enough that a loaded machine does not drop them.
SESSION_MS = 4000
# Sessions of the clients that see a leader die: ~1-2 s, so a wrong expiry would show within the test.
SHORT_SESSION_MS = 1500
LEADER_TIMEOUT_S = 20.0
WAIT_S = 20.0
# Time the test machine may add on top of the protocol's own bound (process scheduling on 2 cores, the
# callback thread, the watch's trip from the server): the measured figure is in every assertion message.
SCHEDULING_MARGIN_S = 0.5


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a harness coroutine on the clients' loop (one gRPC asyncio loop per process)."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(LEADER_TIMEOUT_S + 5)


class Recorder:
    """A watcher / listener that keeps what it was called with, and when (monotonic seconds)."""

    def __init__(self) -> None:
        self._items: list[tuple[float, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        with self._lock:
            self._items.append((time.monotonic(), item))

    def items(self) -> list[Any]:
        with self._lock:
            return [item for _, item in self._items]

    def times(self) -> list[float]:
        with self._lock:
            return [t for t, _ in self._items]

    def events(self) -> list[tuple[EventType, str | None]]:
        return [(e.type, e.path) for e in self.items() if isinstance(e, WatchedEvent)]


class Clients:
    """Started clients, closed at the end of the test."""

    def __init__(self) -> None:
        self.made: list[ZkClient] = []

    def connect(self, *addresses: str, session_timeout_ms: int = SESSION_MS, **kwargs: Any) -> ZkClient:
        """A client that tries `addresses` in the order given (the first one, while it lives)."""
        zk = ZkClient(
            ",".join(addresses), timeout=WAIT_S, session_timeout_ms=session_timeout_ms, randomize_hosts=False, **kwargs
        )
        self.made.append(zk)
        zk.start()
        return zk

    def close_all(self) -> None:
        for zk in self.made:
            zk.close()


@pytest.fixture
def clients() -> Iterator[Clients]:
    made = Clients()
    yield made
    made.close_all()


@dataclass(frozen=True)
class Roles:
    leader: int
    followers: tuple[int, int]


def roles(cluster: QuorumProcesses, exclude: tuple[int, ...] = ()) -> Roles:
    """Who leads (asking only the nodes not in `exclude`); with one node excluded both followers are the same."""
    leader, _ = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S, exclude=exclude))
    others = [n for n in cluster.addresses if n != leader and n not in exclude]
    return Roles(leader, (others[0], others[-1]))


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[QuorumProcesses]:
    """Three nodes with a leader; every process is SIGKILLed on the way out, whatever happened."""
    with QuorumProcesses(root, n=3, properties=PROPERTIES) as cluster:
        cluster.start_all()
        run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        yield cluster


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[QuorumProcesses]:
    with running_cluster(tmp_path) as cluster:
        yield cluster


def synced_stat(zk: ZkClient, path: str) -> ZnodeStat | None:
    zk.sync(path)
    return zk.exists(path)


def stats_everywhere(readers: list[ZkClient], path: str) -> ZnodeStat | None:
    """The node's Stat as each reader's server holds it after `sync`; asserts they are all the same."""
    stats = [synced_stat(zk, path) for zk in readers]
    assert all(s == stats[0] for s in stats), f"{path}: servers disagree: " + "; ".join(
        f"{zk.server}: {s}" for zk, s in zip(readers, stats, strict=True)
    )
    return stats[0]


def stat_everywhere(readers: list[ZkClient], path: str) -> ZnodeStat:
    """`stats_everywhere` of a node that must exist."""
    stat = stats_everywhere(readers, path)
    assert stat is not None, f"{path} does not exist"
    return stat


# ====================================================================== fresh clusters: nodes die here


def _live_clients(cluster: QuorumProcesses, clients: Clients) -> tuple[Roles, list[ZkClient], list[Recorder]]:
    """Three clients, each first connected to a different node, each owning one ephemeral under /live."""
    r = roles(cluster)
    a = cluster.addresses
    leader, (f1, f2) = r.leader, r.followers
    orders = [(leader, f1, f2), (f1, f2, leader), (f2, leader, f1)]
    made, states = [], []
    for i, order in enumerate(orders):
        zk = clients.connect(*(a[n] for n in order), session_timeout_ms=SHORT_SESSION_MS)
        listener = Recorder()
        zk.add_listener(listener)
        zk.create(f"/live/c{i}", str(i).encode(), ephemeral=True, makepath=True)
        made.append(zk)
        states.append(listener)
    assert made[0].server == a[r.leader]
    return r, made, states


def _assert_sessions_live_after_leader_change(
    cluster: QuorumProcesses, old_leader: int, made: list[ZkClient], states: list[Recorder], session_ids: list[int]
) -> None:
    run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S, exclude=[old_leader]))
    wait_until(lambda: all(zk.connected for zk in made), WAIT_S, message="clients reconnected")
    for i, zk in enumerate(made):
        assert zk.server != cluster.addresses[old_leader]
        assert (zk.client_id or (0, b""))[0] == session_ids[i], f"client {i} got a new session"
        assert zk.get_ephemerals("/live") == [f"/live/c{i}"]
    # Live sessions must outlast a full session timeout under the new leader (it restarted their clocks).
    session_s = max(zk.session_timeout_ms for zk in made) / 1000
    until = time.monotonic() + 2 * session_s

    def still_alive_and_past_two_timeouts() -> bool:
        for zk in made:
            assert zk.state is not ZkState.LOST, f"session {(zk.client_id or (0, b''))[0]:#x} lost"
        return time.monotonic() >= until

    wait_until(still_alive_and_past_two_timeouts, 2 * session_s + WAIT_S, interval_s=0.05)
    for i, zk in enumerate(made):
        zk.sync("/live")
        assert sorted(zk.get_children("/live")) == ["c0", "c1", "c2"]
        assert (zk.client_id or (0, b""))[0] == session_ids[i]
    for i, listener in enumerate(states):
        assert ZkState.LOST not in listener.items(), f"client {i}: {listener.items()}"


def test_a_graceful_leader_stop_expires_no_session(fresh_cluster: QuorumProcesses, clients: Clients) -> None:
    r, made, states = _live_clients(fresh_cluster, clients)
    session_ids = [(zk.client_id or (0, b""))[0] for zk in made]
    assert fresh_cluster.terminate(r.leader) == 0
    _assert_sessions_live_after_leader_change(fresh_cluster, r.leader, made, states, session_ids)


def test_a_leader_crash_expires_no_session(fresh_cluster: QuorumProcesses, clients: Clients) -> None:
    r, made, states = _live_clients(fresh_cluster, clients)
    session_ids = [(zk.client_id or (0, b""))[0] for zk in made]
    fresh_cluster.kill(r.leader)
    _assert_sessions_live_after_leader_change(fresh_cluster, r.leader, made, states, session_ids)
    # The crashed node comes back with every session and ephemeral in its tree.
    fresh_cluster.start(r.leader)
    back = clients.connect(fresh_cluster.addresses[r.leader])
    back.sync("/live")
    assert sorted(back.get_children("/live")) == ["c0", "c1", "c2"]
    owners = {back.exists(f"/live/c{i}").ephemeralOwner for i in range(3)}  # type: ignore[union-attr]
    assert owners == set(session_ids)


# Writes one session keeps in flight on the leader while leadership moves away from it.
IN_FLIGHT_WRITES = 16
# > the election timeout (0.5-1 s) with room for followers whose ticks run late under the write load
# (1.2 s left 0.2 s: no election in 2 of about 35 runs), < the client's read timeout (2/3 of 4 s).
DEPOSED_PAUSE_S = 1.8
TRANSFER_TIMEOUT_S = 5.0


def _writes_across_a_leader_change(
    cluster: QuorumProcesses, change_leader: Callable[[Roles], None], session_on_leader: bool = True
) -> None:
    """A session on the leader (or on the follower that stays one) keeps 16 sequential creates in
    flight while `change_leader` moves leadership to another node; it stays connected to its server,
    whose pending proposals (or forwarded writes) are refused or lost and go on through the new
    leader. Every acknowledged create exists once, with the data it was sent with, and the sequence
    numbers follow the order the session sent them in (ZooKeeper's per-session FIFO), across the
    change."""
    r = roles(cluster)
    address = cluster.addresses[r.leader if session_on_leader else r.followers[-1]]
    outcomes: dict[int, str | BaseException] = {}
    writing = threading.Event()
    changed = threading.Event()

    async def write_through_the_change() -> str | None:
        zk = AsyncZkClient(address, timeout=WAIT_S, session_timeout_ms=SESSION_MS, randomize_hosts=False)
        await zk.start()
        try:
            await zk.create("/order")
            pending: dict[asyncio.Future[Any], int] = {}
            sent = after_change = 0
            deadline = time.monotonic() + 4 * WAIT_S
            while (after_change < 200 or pending) and time.monotonic() < deadline:
                while len(pending) < IN_FLIGHT_WRITES and after_change < 200:
                    # Each task enqueues its request in its first step: tasks start in creation order.
                    pending[asyncio.ensure_future(zk.create("/order/n-", str(sent).encode(), sequence=True))] = sent
                    sent += 1
                    if changed.is_set():
                        after_change += 1
                    elif sent == 300:
                        writing.set()  # the test thread changes the leader now
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    outcomes[i] = fut.exception() or fut.result()
            return zk.server
        finally:
            await zk.close()

    loop, _ = _SharedLoop.get()
    writer = asyncio.run_coroutine_threadsafe(write_through_the_change(), loop)
    assert writing.wait(WAIT_S), "the writer did not get going"
    change_leader(r)
    new = roles(cluster, exclude=(r.leader,))
    assert new.leader != r.leader
    changed.set()
    server = writer.result(5 * WAIT_S)

    assert server == address, "the session left the old leader: the test did not exercise what it names"
    failed = {i: o for i, o in outcomes.items() if isinstance(o, BaseException)}
    assert all(isinstance(o, ConnectionLoss) for o in failed.values()), failed
    created = sorted(((o, i) for i, o in outcomes.items() if isinstance(o, str)), key=lambda p: int(p[0][-10:]))
    assert len(created) >= 400, f"only {len(created)} of {len(outcomes)} creates succeeded"
    sent_order = [i for _, i in created]
    assert sent_order == sorted(sent_order), "sequence numbers out of the session's order: " + str(
        [(name[-10:], i) for (name, i), (_, j) in zip(created, created[1:], strict=False) if j < i][:5]
    )
    with ZkClient(cluster.addresses[new.leader], timeout=WAIT_S) as reader:
        reader.sync("/order")
        children = reader.get_children("/order")
        data = {f"/order/{c}": reader.get(f"/order/{c}")[0].decode() for c in children}
    assert all(data.get(name) == str(i) for name, i in created), "an acknowledged create is missing or changed"
    assert len(set(data.values())) == len(data), "a create was applied twice"


def _depose_leader(cluster: QuorumProcesses) -> Callable[[Roles], None]:
    """The leader is SIGSTOPped until the others elect a new one, then SIGCONTed."""

    def depose(r: Roles) -> None:
        cluster.pause(r.leader)
        try:
            time.sleep(DEPOSED_PAUSE_S)  # the fault itself lasts this long; nothing waits on it
        finally:
            cluster.resume(r.leader)

    return depose


def _transfer_to_first_follower(cluster: QuorumProcesses) -> Callable[[Roles], None]:
    """Leadership is handed to the first follower (`TransferLeadership`, what a graceful stop does)."""

    def transfer(r: Roles) -> None:
        async def hand_over() -> int:
            async with QuorumClient([cluster_address], request_timeout_s=TRANSFER_TIMEOUT_S) as client:
                return await client.transfer_leadership(cluster_address, r.followers[0], TRANSFER_TIMEOUT_S)

        cluster_address = cluster.addresses[r.leader]
        assert run(hand_over()) == r.followers[0]

    return transfer


def test_writes_in_flight_on_a_deposed_leader_keep_their_session_order(fresh_cluster: QuorumProcesses) -> None:
    """The proposals the SIGSTOPped leader still holds are lost when it learns of the new term, while
    the session's next writes already arrive."""
    _writes_across_a_leader_change(fresh_cluster, _depose_leader(fresh_cluster))


def test_writes_in_flight_during_a_leadership_transfer_keep_their_session_order(
    fresh_cluster: QuorumProcesses,
) -> None:
    """The leader refuses new proposals while the transfer runs, and the transfer completes on time
    meanwhile."""
    _writes_across_a_leader_change(fresh_cluster, _transfer_to_first_follower(fresh_cluster))


def test_a_followers_forwarded_writes_keep_their_session_order_through_a_leadership_transfer(
    fresh_cluster: QuorumProcesses,
) -> None:
    """The session is on the follower that stays one: its writes are forwarded in batches, and those
    the old leader refuses during the transfer go again through the new one, in the session's order."""
    _writes_across_a_leader_change(fresh_cluster, _transfer_to_first_follower(fresh_cluster), session_on_leader=False)


def test_a_followers_forwarded_writes_keep_their_session_order_when_the_leader_is_deposed(
    fresh_cluster: QuorumProcesses,
) -> None:
    """The session is on a follower while the leader is SIGSTOPped until the others elect a new one."""
    _writes_across_a_leader_change(fresh_cluster, _depose_leader(fresh_cluster), session_on_leader=False)


# Sequential creates a follower's client sends at once just before the leader is SIGKILLed, so that some are
# on their way to it (forwarded) when it dies.
KILLED_BURST = 200


def test_a_write_lost_with_its_leader_ends_the_followers_client_connection(fresh_cluster: QuorumProcesses) -> None:
    """Regression, found by the long fault campaign (run 51: the election recipe under a leader's disk
    failure). A follower answered the writes it had forwarded to a leader that died with them with
    CONNECTIONLOSS on a connection it kept open. kazoo's Lock then looked for its lock node at once, before
    the new leader had committed it, created a second one, and waited on its own first node for ever.
    ZooKeeper's follower closes its clients' connections when it loses its leader; now a write of unknown
    outcome ends the connection, and the client's reconnect attaches its session through the log after the
    lost write. kazoo (the wire protocol) shows it: every ConnectionLoss comes with SUSPENDED."""
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import ConnectionLoss as KazooConnectionLoss

    r = roles(fresh_cluster)
    states: list[str] = []
    zk = KazooClient(hosts=fresh_cluster.zk_address(r.followers[0]), timeout=SESSION_MS / 1000)
    zk.add_listener(states.append)
    zk.start(timeout=WAIT_S)
    try:
        zk.ensure_path("/killed")
        burst = [zk.create_async("/killed/n-", b"x", sequence=True) for _ in range(KILLED_BURST)]
        fresh_cluster.kill(r.leader)
        lost = []
        for pending in burst:
            try:
                pending.get(timeout=WAIT_S)
            except KazooConnectionLoss as exc:
                lost.append(exc)
        # The cluster takes the session's writes again (its reconnect, if any, attached it anew).
        wait_until(lambda: _created(zk), WAIT_S, message="a create after the leader died")
        if not lost:
            pytest.skip("every create of the burst was answered before the leader died: nothing was lost")
        assert KazooState.SUSPENDED in states, f"{len(lost)} creates got ConnectionLoss on a connection kept open"
    finally:
        zk.stop()
        zk.close()


def _created(zk: Any) -> bool:
    from kazoo.exceptions import ConnectionLoss as KazooConnectionLoss

    try:
        zk.create("/killed/after-", b"x", sequence=True)
    except KazooConnectionLoss:
        return False
    return True


# Sequential creates one session sends at once to a leader that cannot commit them.
LOST_BURST = 40
# Sessions long enough to outlast the old leader's pause below (two node starts and an election).
LOST_TICK_TIME_MS = 1000
LOST_SESSION_MS = 15_000


def test_writes_lost_with_a_deposed_leader_go_again_in_the_session_order(tmp_path: Path) -> None:
    """Both followers are SIGKILLed, then a session on the leader sends a burst of sequential creates
    (in one stream message: the leader proposes them together), which cannot commit. The leader is
    SIGSTOPped, the followers restarted, and once they have elected a new leader the old one is
    resumed: its proposals are lost when it learns the new term, and its server sends the writes
    again through the new leader. Every create succeeds exactly once, with its data, in the order the
    session sent them."""
    with QuorumProcesses(tmp_path, n=3, properties={**PROPERTIES, "tickTime": str(LOST_TICK_TIME_MS)}) as cluster:
        cluster.start_all()
        r = roles(cluster)
        address = cluster.addresses[r.leader]
        zk = AsyncZkClient(
            address, timeout=WAIT_S, session_timeout_ms=LOST_SESSION_MS, randomize_hosts=False, ensemble_tracker=False
        )  # on the old leader only: a reconnect must not move it to a member it learned
        run(zk.start())
        try:
            run(zk.create("/lost"))
            before = run(node_status(address))
            for follower in r.followers:
                cluster.kill(follower)

            async def send_burst() -> list[asyncio.Future[str]]:
                return [
                    asyncio.ensure_future(zk.create("/lost/n-", str(i).encode(), sequence=True))
                    for i in range(LOST_BURST)
                ]

            creates = run(send_burst())
            try:
                wait_until(
                    lambda: run(node_status(address)).last_index >= before.last_index + LOST_BURST,
                    WAIT_S,
                    message="the leader did not append the burst",
                )
            finally:
                cluster.pause(r.leader)  # before the followers are back: they must not learn the burst
            try:
                for follower in r.followers:
                    cluster.start(follower)
                new = roles(cluster, exclude=(r.leader,))
            finally:
                cluster.resume(r.leader)

            async def outcomes() -> list[str | BaseException]:
                return await asyncio.gather(*creates, return_exceptions=True)

            results = run(outcomes())
            assert zk.server == address, "the session left the old leader: the test did not exercise what it names"
        finally:
            run(zk.close())

        failed = [o for o in results if not isinstance(o, str)]
        assert not failed, failed[:3]
        names = [str(o) for o in results]
        sequence = [int(name[-10:]) for name in names]
        assert sequence == sorted(sequence), f"sequence numbers out of the session's order: {sequence}"
        with ZkClient(cluster.addresses[new.leader], timeout=WAIT_S) as reader:
            reader.sync("/lost")
            children = reader.get_children("/lost")
            data = {f"/lost/{c}": reader.get(f"/lost/{c}")[0].decode() for c in children}
        assert len(children) == LOST_BURST, f"{len(children)} nodes for {LOST_BURST} creates"
        assert all(data[name] == str(i) for i, name in enumerate(names)), "a create's data does not match"


# ---------------------------------------------------------------------- linearizability under leader crashes

REGISTER = "/register"
LIN_PROCESSES = 4
LIN_SESSION_MS = 2000
# Ops between faults; with the pacing below the whole run takes about 5 s and a few hundred operations.
LIN_OPS_BEFORE_FIRST_KILL = 100
LIN_OPS_BETWEEN_FAULTS = 150
LIN_PACING_MAX_S = 0.03
# After a failed call: while followers still forward to a dead leader, writes fail at once, again and again.
LIN_FAILURE_PAUSE_S = 0.05
UNKNOWN_OUTCOME = (ConnectionLoss, OperationTimeoutError, RequestTimeoutError, SessionExpiredError)


class RegisterWorker(threading.Thread):
    """One process of the history: random reads, writes and version-CAS on one znode until told to stop."""

    def __init__(self, process: int, zk: ZkClient, sync_reads: bool, history: History, stop: threading.Event) -> None:
        super().__init__(name=f"register-worker-{process}", daemon=True)
        self.process = process
        self.zk = zk
        self.sync_reads = sync_reads  # else the client was made with linearizable_reads=True
        self.history = history
        self.stop = stop
        self.rng = random.Random(process)
        self.known_version = 0
        self.expired = 0
        self.unknown_causes: collections.Counter[str] = collections.Counter()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                kind = self.rng.choices([Kind.READ, Kind.WRITE, Kind.CAS], weights=[4, 3, 3])[0]
                self.one(kind, f"p{self.process}-{n}".encode())
                self.stop.wait(self.rng.uniform(0, LIN_PACING_MAX_S))  # pacing only: keeps the history small
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def one(self, kind: Kind, value: bytes) -> None:
        zk, h = self.zk, self.history
        if kind is Kind.READ:
            op = h.invoke(self.process, kind)
            try:
                if self.sync_reads:
                    zk.sync(REGISTER)
                data, stat = zk.get(REGISTER)
            except UNKNOWN_OUTCOME as exc:
                h.drop(op)  # a read that failed had no effect
                self.recover(exc)
                return
            h.complete(op, value=data, version=stat.version)
            self.known_version = stat.version
            return
        expected = self.known_version if kind is Kind.CAS else None
        op = h.invoke(self.process, kind, value=value, expected_version=expected)
        try:
            stat = zk.set(REGISTER, value, version=-1 if expected is None else expected)
        except BadVersionError:
            h.complete(op, succeeded=False)
            return
        except UNKNOWN_OUTCOME as exc:
            h.unknown(op)
            self.recover(exc)
            return
        h.complete(op, version=stat.version, succeeded=True if kind is Kind.CAS else None)
        self.known_version = stat.version

    def recover(self, exc: BaseException) -> None:
        self.unknown_causes[type(exc).__name__] += 1
        self.stop.wait(LIN_FAILURE_PAUSE_S)  # pacing only, as above
        if isinstance(exc, SessionExpiredError) and self.zk.state is ZkState.LOST and not self.stop.is_set():
            self.expired += 1
            self.zk.start()


def test_register_history_is_linearizable_across_leader_crashes(
    fresh_cluster: QuorumProcesses, clients: Clients
) -> None:
    cluster = fresh_cluster
    addresses = list(cluster.addresses.values())
    setup = clients.connect(*addresses)
    setup.create(REGISTER, b"init")
    history, stop = History(), threading.Event()
    workers = []
    for p in range(LIN_PROCESSES):
        order = addresses[p % 3 :] + addresses[: p % 3]
        linearizable = p % 2 == 0
        zk = clients.connect(*order, session_timeout_ms=LIN_SESSION_MS, linearizable_reads=linearizable)
        workers.append(RegisterWorker(p, zk, not linearizable, history, stop))
    for w in workers:
        w.start()

    def progressed(ops: int) -> None:
        target = len(history) + ops
        wait_until(lambda: len(history) >= target or any(not w.is_alive() for w in workers), WAIT_S,
                   message=f"{ops} more operations")  # fmt: skip

    killed = []
    run_started = time.monotonic()
    try:
        progressed(LIN_OPS_BEFORE_FIRST_KILL)
        for _ in range(2):
            leader = roles(cluster).leader
            cluster.kill(leader)
            killed.append(leader)
            roles(cluster, exclude=(leader,))
            cluster.start(leader)
            progressed(LIN_OPS_BETWEEN_FAULTS)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=WAIT_S)
    run_s = time.monotonic() - run_started
    for w in workers:
        assert not w.is_alive(), f"{w.name} is stuck"
        if w.error is not None:
            raise AssertionError(f"{w.name} failed") from w.error

    ops = history.operations()
    started = time.monotonic()
    result = check(ops, RegisterState(b"init", 0))
    check_s = time.monotonic() - started
    kinds = {k.value: sum(1 for op in ops if op.kind is k) for k in Kind}
    summary = (
        f"{len(ops)} operations {kinds} in {run_s:.1f} s, {result.unknown} of unknown outcome, "
        f"failed calls {dict(sum((w.unknown_causes for w in workers), collections.Counter()))}, "
        f"leaders killed {killed}, sessions re-made after expiry {sum(w.expired for w in workers)}, "
        f"checked in {check_s:.2f} s ({result.explored} states)"
    )
    assert result.linearizable, summary + "\n" + result.explain()
    assert kinds["read"] > 20 and kinds["write"] + kinds["cas"] > 20, summary
    print(summary)
    # The history can tell: moving one read to a value written only after that read returned is caught.
    read, later = _read_and_a_later_write(ops)
    forged = [dataclasses.replace(op, value=later.value, version=later.version) if op is read else op for op in ops]
    assert not check(forged, RegisterState(b"init", 0)).linearizable, f"{read} made to see {later}"


def _read_and_a_later_write(ops: list[Operation]) -> tuple[Operation, Operation]:
    writes = [op for op in ops if op.kind is not Kind.READ and op.known and op.version is not None]
    for read in ops:
        if read.kind is Kind.READ and read.complete_s is not None:
            for write in writes:
                if write.invoke_s > read.complete_s:
                    return read, write
    raise AssertionError("no read is followed by a completed write in the history")


# ====================================================================== the shared cluster: nothing dies here


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with running_cluster(tmp_path_factory.mktemp("zk-semantics")) as processes:
        yield processes


@pytest.fixture
def topology(cluster: QuorumProcesses) -> Roles:
    return roles(cluster)


_fence_ids = itertools.count()


def fence(watcher: ZkClient, writer: ZkClient) -> None:
    """Return once `watcher` has received every event of `writer`'s writes so far.

    An exists-watch on a fresh path, then a create by the writer: its NodeCreated follows, on the
    watcher's one ordered stream, every event of the writer's earlier writes (their zxids are lower).
    """
    path = f"/fences/f{next(_fence_ids)}"
    created = Recorder()
    assert watcher.exists(path, watch=created) is None
    writer.create(path, makepath=True)
    wait_until(lambda: created.events(), WAIT_S, message=f"fence {path} event")
    assert created.events() == [(EventType.CREATED, path)]


@dataclass
class WatchPair:
    watcher: ZkClient  # on a follower
    writer: ZkClient  # on another node

    def settle(self) -> None:
        fence(self.watcher, self.writer)


@pytest.fixture
def pair(cluster: QuorumProcesses, topology: Roles, clients: Clients) -> WatchPair:
    a = cluster.addresses
    return WatchPair(clients.connect(a[topology.followers[0]]), clients.connect(a[topology.leader]))


@pytest.fixture
def follower_pair(cluster: QuorumProcesses, topology: Roles, clients: Clients) -> WatchPair:
    """Watcher and writer on the two different followers (the write is forwarded, the event comes from apply)."""
    a = cluster.addresses
    return WatchPair(clients.connect(a[topology.followers[0]]), clients.connect(a[topology.followers[1]]))


# ---------------------------------------------------------------------- 1. the watch-event table


def test_exists_watch_on_a_missing_node_fires_created(pair: WatchPair) -> None:
    w, zk = pair.watcher, pair.writer
    created = Recorder()
    assert w.exists("/t1/node", watch=created) is None
    zk.create("/t1/node", b"x", makepath=True)
    zk.set("/t1/node", b"y")  # the watch is spent: nothing more
    pair.settle()
    assert created.events() == [(EventType.CREATED, "/t1/node")]


def test_get_watch_fires_changed_on_set_and_deleted_on_delete(pair: WatchPair) -> None:
    w, zk = pair.watcher, pair.writer
    zk.create("/t2/a", b"0", makepath=True)
    zk.create("/t2/b", b"0")
    w.sync("/t2")
    changed, deleted = Recorder(), Recorder()
    w.get("/t2/a", watch=changed)
    w.get("/t2/b", watch=deleted)
    zk.set("/t2/a", b"1")
    zk.delete("/t2/b")
    pair.settle()
    assert changed.events() == [(EventType.CHANGED, "/t2/a")]
    assert deleted.events() == [(EventType.DELETED, "/t2/b")]


def test_exists_watch_on_an_existing_node_fires_changed_and_deleted(follower_pair: WatchPair) -> None:
    w, zk = follower_pair.watcher, follower_pair.writer
    zk.create("/t3/a", b"0", makepath=True)
    zk.create("/t3/b", b"0")
    w.sync("/t3")
    changed, deleted = Recorder(), Recorder()
    assert w.exists("/t3/a", watch=changed) is not None
    assert w.exists("/t3/b", watch=deleted) is not None
    zk.set("/t3/a", b"1")
    zk.delete("/t3/b")
    follower_pair.settle()
    assert changed.events() == [(EventType.CHANGED, "/t3/a")]
    assert deleted.events() == [(EventType.DELETED, "/t3/b")]


def test_child_watch_rows(pair: WatchPair) -> None:
    """Child create and child delete fire NodeChildrenChanged; deleting the node itself fires NodeDeleted;
    setData on a child fires nothing on the parent's child watch."""
    w, zk = pair.watcher, pair.writer
    zk.create("/t4/p/old", makepath=True)
    w.sync("/t4/p")

    on_create, on_delete, on_child_set, on_self_delete = Recorder(), Recorder(), Recorder(), Recorder()
    assert w.get_children("/t4/p", watch=on_child_set) == ["old"]
    zk.set("/t4/p/old", b"new data")  # not a children change
    pair.settle()
    assert on_child_set.events() == []

    w.get_children("/t4/p", watch=on_create)
    zk.create("/t4/p/new")
    pair.settle()
    assert on_create.events() == [(EventType.CHILD, "/t4/p")]

    w.get_children("/t4/p", watch=on_delete)
    zk.delete("/t4/p/new")
    pair.settle()
    assert on_delete.events() == [(EventType.CHILD, "/t4/p")]

    zk.delete("/t4/p/old")
    w.sync("/t4/p")
    assert w.get_children("/t4/p", watch=on_self_delete) == []
    w.get("/t4/p", watch=on_self_delete)  # the same watcher on the data table too: still one event
    zk.delete("/t4/p")
    pair.settle()
    assert on_self_delete.events() == [(EventType.DELETED, "/t4/p")]
    # the watch that saw the child's setData was never spent, so it fired for the first children change
    assert on_child_set.events() == [(EventType.CHILD, "/t4/p")]


def test_watches_are_one_shot(pair: WatchPair) -> None:
    w, zk = pair.watcher, pair.writer
    zk.create("/t5/data", b"0", makepath=True)
    zk.create("/t5/kids")
    w.sync("/t5")
    data, kids, exist = Recorder(), Recorder(), Recorder()
    w.get("/t5/data", watch=data)
    w.get_children("/t5/kids", watch=kids)
    w.exists("/t5/later", watch=exist)
    for i in range(3):
        zk.set("/t5/data", str(i).encode())
        zk.create(f"/t5/kids/k{i}")
    zk.create("/t5/later")
    zk.delete("/t5/later")
    zk.create("/t5/later")
    # A fresh watch on another path, changed last: once its event is in, any second event would be too.
    last = Recorder()
    w.exists("/t5/last", watch=last)
    zk.create("/t5/last")
    wait_until(lambda: last.events(), WAIT_S, message="the last watch's event")
    assert last.events() == [(EventType.CREATED, "/t5/last")]
    assert data.events() == [(EventType.CHANGED, "/t5/data")]
    assert kids.events() == [(EventType.CHILD, "/t5/kids")]
    assert exist.events() == [(EventType.CREATED, "/t5/later")]


def test_persistent_watch_fires_every_time(pair: WatchPair) -> None:
    w, zk = pair.watcher, pair.writer
    events = Recorder()
    w.add_watch("/t6/p", events, AddWatchMode.PERSISTENT)
    zk.create("/t6/p", b"0", makepath=True)
    zk.set("/t6/p", b"1")
    zk.set("/t6/p", b"2")
    zk.create("/t6/p/c")
    zk.set("/t6/p/c", b"x")  # a child's data: not this watch's business
    zk.create("/t6/p/c/grandchild")  # below a child: neither
    zk.delete("/t6/p/c/grandchild")
    zk.delete("/t6/p/c")
    zk.delete("/t6/p")
    zk.create("/t6/p")  # still there after the node was deleted
    pair.settle()
    assert events.events() == [
        (EventType.CREATED, "/t6/p"),
        (EventType.CHANGED, "/t6/p"),
        (EventType.CHANGED, "/t6/p"),
        (EventType.CHILD, "/t6/p"),
        (EventType.CHILD, "/t6/p"),
        (EventType.DELETED, "/t6/p"),
        (EventType.CREATED, "/t6/p"),
    ]


def test_persistent_recursive_watch_covers_descendants_without_child_events(pair: WatchPair) -> None:
    w, zk = pair.watcher, pair.writer
    events = Recorder()
    w.add_watch("/t7/r", events, AddWatchMode.PERSISTENT_RECURSIVE)
    zk.create("/t7/r", makepath=True)
    zk.create("/t7/r/a", b"0")
    zk.set("/t7/r/a", b"1")
    zk.create("/t7/r/a/b")
    zk.set("/t7/r/a/b", b"deep")
    zk.delete("/t7/r/a/b")
    zk.set("/t7/r", b"top")
    zk.create("/t7/other")  # a sibling outside the subtree
    zk.create("/t7/rx")  # a path that only shares the prefix string
    pair.settle()
    assert events.events() == [
        (EventType.CREATED, "/t7/r"),
        (EventType.CREATED, "/t7/r/a"),
        (EventType.CHANGED, "/t7/r/a"),
        (EventType.CREATED, "/t7/r/a/b"),
        (EventType.CHANGED, "/t7/r/a/b"),
        (EventType.DELETED, "/t7/r/a/b"),
        (EventType.CHANGED, "/t7/r"),
    ]


# ---------------------------------------------------------------------- 2. Stat fields on every node


def test_every_stat_field_after_each_kind_of_change(
    cluster: QuorumProcesses, topology: Roles, clients: Clients
) -> None:
    c1, c2, c3 = (clients.connect(cluster.addresses[n]) for n in (1, 2, 3))
    readers = [c1, c2, c3]
    before_ms = int(time.time() * 1000)

    # create
    path, created = c2.create("/st", b"abc", include_data=True)
    z = created.czxid
    assert path == "/st" and z > 0
    parent = stat_everywhere(readers, "/st")
    assert parent == created
    assert (parent.czxid, parent.mzxid, parent.pzxid) == (z, z, z)
    assert parent.ctime == parent.mtime and abs(parent.ctime - before_ms) < 60_000
    assert (parent.version, parent.cversion, parent.aversion, parent.ephemeralOwner) == (0, 0, 0, 0)
    assert (parent.dataLength, parent.numChildren) == (3, 0)

    # set
    set_stat = c3.set("/st", b"longer data")
    after_set = stat_everywhere(readers, "/st")
    assert after_set == set_stat
    assert after_set.mzxid > z and after_set.mtime >= parent.ctime
    assert after_set._replace(mzxid=z, mtime=parent.mtime, version=0, dataLength=3) == parent
    assert (after_set.version, after_set.dataLength) == (1, 11)

    # child create
    _, child = c1.create("/st/a", b"", include_data=True)
    after_child = stat_everywhere(readers, "/st")
    assert child == stat_everywhere(readers, "/st/a")
    assert (child.czxid, child.mzxid, child.pzxid, child.ephemeralOwner) == (child.czxid,) * 3 + (0,)
    assert (after_child.cversion, after_child.numChildren, after_child.pzxid) == (1, 1, child.czxid)
    assert after_child._replace(cversion=0, numChildren=0, pzxid=after_set.pzxid) == after_set  # nothing else

    # setData on the child: the parent does not change
    c2.set("/st/a", b"child data")
    assert stat_everywhere(readers, "/st") == after_child

    # child delete
    c3.delete("/st/a")
    after_delete = stat_everywhere(readers, "/st")
    assert (after_delete.cversion, after_delete.numChildren) == (2, 0)
    assert child.czxid < after_delete.pzxid <= c3.last_zxid
    assert after_delete._replace(cversion=1, numChildren=1, pzxid=child.czxid) == after_child
    assert stats_everywhere(readers, "/st/a") is None

    # ephemeral create
    owner = clients.connect(cluster.addresses[2])
    owner_id = (owner.client_id or (0, b""))[0]
    _, eph = owner.create("/st/e", b"mine", ephemeral=True, include_data=True)
    assert stat_everywhere(readers, "/st/e") == eph
    assert eph.ephemeralOwner == owner_id != 0 and eph.owner_session_id == owner_id
    assert (eph.czxid, eph.mzxid, eph.pzxid, eph.version, eph.dataLength) == (eph.czxid,) * 3 + (0, 4)
    after_eph = stat_everywhere(readers, "/st")
    assert (after_eph.cversion, after_eph.numChildren, after_eph.pzxid) == (3, 1, eph.czxid)

    # session close: the ephemeral goes (NodeDeleted, and NodeChildrenChanged on the parent); the parent
    # counts a child delete
    watcher = readers[topology.followers[0] - 1]
    node_gone, children_changed = Recorder(), Recorder()
    assert watcher.exists("/st/e", watch=node_gone) is not None
    watcher.get_children("/st", watch=children_changed)
    owner.stop()
    fence(watcher, c1)
    assert node_gone.events() == [(EventType.DELETED, "/st/e")]
    assert children_changed.events() == [(EventType.CHILD, "/st")]
    after_close = stat_everywhere(readers, "/st")
    assert stats_everywhere(readers, "/st/e") is None
    assert (after_close.cversion, after_close.numChildren) == (4, 0)
    assert eph.czxid < after_close.pzxid <= owner.last_zxid
    assert after_close._replace(cversion=3, numChildren=1, pzxid=eph.czxid) == after_eph
    assert (after_close.mzxid, after_close.version, after_close.mtime) == (after_set.mzxid, 1, after_set.mtime)


# ---------------------------------------------------------------------- 3. ephemerals and their owner's end

OWNER_SCRIPT = """
import sys
from client import ZkClient
address, timeout_ms, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
zk = ZkClient(address, timeout=30, session_timeout_ms=timeout_ms, randomize_hosts=False)
zk.start()
zk.create(path, b"", ephemeral=True)
print(zk.client_id[0], zk.session_timeout_ms, flush=True)
sys.stdin.read()  # until killed
"""
OWNER_SESSION_MS = 1200


def _start_owner(address: str, path: str) -> tuple[subprocess.Popen[str], int, int]:
    """A separate client process that creates an ephemeral `path`; returns it, its session id and timeout (ms)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, address, str(OWNER_SESSION_MS), path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        env=subprocess_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            session_id, timeout_ms = (int(x) for x in line.split())
            return proc, session_id, timeout_ms
    proc.kill()
    _, err = proc.communicate(timeout=WAIT_S)
    raise AssertionError(f"the owner process of {path} did not start: {err[-2000:]}")


def test_ephemerals_vanish_within_the_session_timeout_after_their_owner_is_killed(
    cluster: QuorumProcesses, topology: Roles, clients: Clients
) -> None:
    a = cluster.addresses
    observer = clients.connect(a[topology.followers[1]])
    owners = {"on-leader": topology.leader, "on-follower": topology.followers[0]}
    procs: dict[str, tuple[subprocess.Popen[str], int, int]] = {}
    gone: dict[str, Recorder] = {}
    try:
        for name, node in owners.items():
            path = f"/eph/{name}"
            observer.ensure_path("/eph")
            procs[name] = _start_owner(a[node], path)
            observer.sync(path)
            stat = observer.exists(path, watch=gone.setdefault(name, Recorder()))
            assert stat is not None and stat.ephemeralOwner == procs[name][1]
        killed_at = time.monotonic()
        for proc, _, _ in procs.values():
            proc.send_signal(signal.SIGKILL)
        wait_until(lambda: all(r.events() for r in gone.values()), WAIT_S, message="ephemerals deleted")
    finally:
        for proc, _, _ in procs.values():
            proc.kill()
            proc.communicate(timeout=WAIT_S)
    measured = {name: gone[name].times()[0] - killed_at for name in owners}
    for name in owners:
        _, _, timeout_ms = procs[name]
        bound_s = (timeout_ms + TICK_TIME_MS) / 1000
        figure = f"{name}: ephemeral gone {measured[name]:.3f} s after SIGKILL (session {timeout_ms} ms, tickTime " \
                 f"{TICK_TIME_MS} ms, bound {bound_s:.2f} s + {SCHEDULING_MARGIN_S} s margin)"  # fmt: skip
        print(figure)
        assert gone[name].events() == [(EventType.DELETED, f"/eph/{name}")], figure
        assert measured[name] <= bound_s + SCHEDULING_MARGIN_S, figure
        # A dropped connection is not a closed session: it lives until its timeout.
        assert measured[name] >= timeout_ms / 1000 / 2, figure
        assert observer.exists(f"/eph/{name}") is None


def test_ephemerals_vanish_at_once_on_close(cluster: QuorumProcesses, clients: Clients) -> None:
    a = cluster.addresses
    owner = clients.connect(a[1])
    synced = clients.connect(a[2])
    linearizable = clients.connect(a[3], linearizable_reads=True)
    owner.create("/close/e", makepath=True, ephemeral=True)
    owner.create("/close/seq-", ephemeral=True, sequence=True)
    synced.sync("/close")
    assert len(synced.get_children("/close")) == 2
    assert len(linearizable.get_children("/close")) == 2
    owner.stop()
    synced.sync("/close")
    assert synced.get_children("/close") == []
    assert linearizable.get_children("/close") == []
    assert linearizable.exists("/close/e") is None


# ---------------------------------------------------------------------- 4. sequential names


def test_concurrent_sequential_creates_get_distinct_gap_free_names(cluster: QuorumProcesses, clients: Clients) -> None:
    per_client = 30
    makers = [clients.connect(cluster.addresses[n]) for n in (1, 2, 3)]
    makers[0].create("/seq")
    barrier = threading.Barrier(len(makers))

    def make(i: int) -> list[str]:
        zk = makers[i]
        barrier.wait(timeout=WAIT_S)
        return [zk.create("/seq/n-", str(i).encode(), sequence=True, ephemeral=i == 2) for _ in range(per_client)]

    with ThreadPoolExecutor(len(makers)) as pool:
        made = list(pool.map(make, range(len(makers))))
    for names in made:
        suffixes = [int(name.rsplit("-", 1)[1]) for name in names]
        assert suffixes == sorted(suffixes), "one session's creates are numbered in its order"
    every = [name for names in made for name in names]
    assert all(re.fullmatch(r"/seq/n-\d{10}", name) for name in every), every[:5]
    assert sorted(int(name[-10:]) for name in every) == list(range(len(makers) * per_client))
    for zk in makers:
        zk.sync("/seq")
        assert sorted(zk.get_children("/seq")) == sorted(name.rsplit("/", 1)[1] for name in every)


# ---------------------------------------------------------------------- 5. multi


def test_a_transaction_whose_last_op_fails_changes_nothing_anywhere(
    cluster: QuorumProcesses, topology: Roles, clients: Clients
) -> None:
    a = cluster.addresses
    zk = clients.connect(a[topology.leader])
    readers = [clients.connect(a[n]) for n in (1, 2, 3)]
    watcher = readers[topology.followers[0] - 1]
    zk.create("/m/x", b"x0", makepath=True)
    zk.create("/m/y", b"y0")
    paths = ["/m", "/m/x", "/m/y", "/m/new"]
    before = {p: stats_everywhere(readers, p) for p in paths}
    data_seen, children_seen = Recorder(), Recorder()
    watcher.get("/m/x", watch=data_seen)
    watcher.get_children("/m", watch=children_seen)

    for last_op in ("check", "create"):
        t = zk.transaction()
        t.create("/m/new", b"n")
        t.set_data("/m/x", b"x1")
        t.delete("/m/y")
        if last_op == "check":
            t.check("/m/x", 99)
        else:
            t.create("/m/x")  # exists
        results = t.commit()
        assert [type(r) for r in results] == [RolledBackError] * 3 + [
            BadVersionError if last_op == "check" else NodeExistsError
        ]
        t = zk.transaction()
        t.set_data("/m/x", b"x1")
        t.check("/m/y", 5)
        t.create("/m/new")
        assert [type(r) for r in t.commit()] == [RolledBackError, BadVersionError, RuntimeInconsistency]

    assert {p: stats_everywhere(readers, p) for p in paths} == before
    for r in readers:
        assert r.get("/m/x")[0] == b"x0" and sorted(r.get_children("/m")) == ["x", "y"]
    fence(watcher, zk)
    assert data_seen.events() == [] and children_seen.events() == []


# Requests one session sends in one burst: several stream messages' worth of server-side chunks.
PIPELINED_ROUNDS = 80
PIPELINED_WRITES_PER_ROUND = 5


@pytest.mark.parametrize("server", ["leader", "follower"])
def test_pipelined_requests_are_answered_in_order_and_reads_see_earlier_writes(
    cluster: QuorumProcesses, topology: Roles, server: str
) -> None:
    """One session queues 480 requests before the first answer (the client sends them in one stream
    message): rounds of 5 conditional setData, then a getData. The server takes such a burst in
    chunks and proposes runs of writes together; still every conditional set finds the version the
    one before it made, and every read sees the write just before it (ZooKeeper's per-session FIFO)."""
    node = topology.leader if server == "leader" else topology.followers[0]
    path = f"/pipelined-{server}"

    async def burst() -> list[Any]:
        zk = AsyncZkClient(cluster.addresses[node], timeout=WAIT_S, session_timeout_ms=SESSION_MS)
        await zk.start()
        try:
            await zk.create(path, b"-1")
            calls: list[Coroutine[Any, Any, Any]] = []
            for r in range(PIPELINED_ROUNDS):
                for w in range(PIPELINED_WRITES_PER_ROUND):
                    n = r * PIPELINED_WRITES_PER_ROUND + w
                    calls.append(zk.set(path, str(n).encode(), version=n))
                calls.append(zk.get(path))
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await zk.close()

    results = run(burst())
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, f"{len(failed)} of {len(results)} failed, first: {failed[:3]}"
    per_round = PIPELINED_WRITES_PER_ROUND + 1
    for r in range(PIPELINED_ROUNDS):
        last = (r + 1) * PIPELINED_WRITES_PER_ROUND - 1
        sets = results[r * per_round : r * per_round + PIPELINED_WRITES_PER_ROUND]
        assert [stat.version for stat in sets] == list(range(last - PIPELINED_WRITES_PER_ROUND + 2, last + 2))
        data, stat = results[r * per_round + PIPELINED_WRITES_PER_ROUND]
        assert (data, stat.version) == (str(last).encode(), last + 1), f"round {r}: the read missed a write"


def test_concurrent_transactions_never_interleave(cluster: QuorumProcesses, topology: Roles, clients: Clients) -> None:
    a = cluster.addresses
    rounds = 25
    keys = ["/mt/k1", "/mt/k2", "/mt/k3"]
    setup = clients.connect(a[topology.leader])
    for k in keys:
        setup.create(k, b"start", makepath=True)
    observer = clients.connect(a[topology.followers[0]])
    events = Recorder()
    observer.add_watch("/mt", events, AddWatchMode.PERSISTENT_RECURSIVE)
    writers = [clients.connect(a[n]) for n in (1, 2, 3)]
    barrier = threading.Barrier(len(writers))

    def write(i: int) -> tuple[int, int]:
        zk, won, lost = writers[i], 0, 0
        barrier.wait(timeout=WAIT_S)
        for n in range(rounds):
            _, stat = zk.get("/mt/k1")
            tag = f"w{i}-{n}".encode()
            t = zk.transaction()
            t.set_data("/mt/k2", tag)
            t.set_data("/mt/k3", tag)
            t.set_data("/mt/k1", tag, version=stat.version)  # fails when another writer got there first
            results = t.commit()
            if all(isinstance(r, ZnodeStat) for r in results):
                assert len({r.mzxid for r in results}) == 1, "one zxid for the whole transaction"
                won += 1
            else:
                assert [type(r) for r in results] == [RolledBackError, RolledBackError, BadVersionError]
                lost += 1
        return won, lost

    with ThreadPoolExecutor(len(writers)) as pool:
        outcomes = list(pool.map(write, range(len(writers))))
    won = sum(w for w, _ in outcomes)
    assert sum(w + lost for w, lost in outcomes) == rounds * len(writers) and won >= rounds

    finals = {}
    for k in keys:
        stat = stats_everywhere(writers, k)
        assert stat is not None and stat.version == won, f"{k}: version {stat}, {won} transactions won"
        finals[k] = (writers[0].get(k)[0], stat.mzxid)
    assert len(set(finals.values())) == 1, finals  # same tag, same zxid: the last transaction, whole

    fence(observer, setup)
    changed = [path for kind, path in events.events() if kind is EventType.CHANGED]
    assert [kind for kind, _ in events.events()] == [EventType.CHANGED] * len(changed)
    assert len(changed) == 3 * won
    triples = [changed[i : i + 3] for i in range(0, len(changed), 3)]
    assert all(t == ["/mt/k2", "/mt/k3", "/mt/k1"] for t in triples), triples


# ---------------------------------------------------------------------- 6. conditional setData races


def test_one_conditional_set_wins_per_version(cluster: QuorumProcesses, clients: Clients) -> None:
    rounds = 30
    racers = [clients.connect(cluster.addresses[n]) for n in (1, 2, 3)]
    racers[0].create("/cas", b"0")
    barrier = threading.Barrier(len(racers))

    def race(i: int, expected: int, n: int) -> ZnodeStat | BadVersionError:
        zk = racers[i]
        zk.sync("/cas")
        _, stat = zk.get("/cas")
        assert stat.version == expected, f"round {n}: client {i} read version {stat.version} after sync"
        barrier.wait(timeout=WAIT_S)
        try:
            return zk.set("/cas", f"{n}:{i}".encode(), version=stat.version)
        except BadVersionError as exc:
            return exc

    winners = []
    with ThreadPoolExecutor(len(racers)) as pool:
        for n in range(rounds):
            outcomes = list(pool.map(race, range(len(racers)), [n] * len(racers), [n] * len(racers)))
            won = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, ZnodeStat)]
            assert len(won) == 1, f"round {n}: {outcomes}"
            assert sum(isinstance(o, BadVersionError) for o in outcomes) == len(racers) - 1
            i, stat = won[0]
            assert stat.version == n + 1
            winners.append(i)
    data, stat = racers[0].get("/cas")
    assert stat.version == rounds and data == f"{rounds - 1}:{winners[-1]}".encode()


def test_a_session_moving_to_a_follower_without_clients_is_taken_there(
    cluster: QuorumProcesses, topology: Roles, clients: Clients
) -> None:
    """A follower nobody is connected to learns commits late (QuorumNode.set_commit_interest): it may
    hold a write the client has seen without having applied it yet. The client's session must still
    be taken there, showing that write, not refused as "behind the client"."""
    import grpc

    from client.zk.codec import connect_message
    from zkraft_proto import zk_pb2_grpc

    writer = clients.connect(cluster.addresses[topology.leader])
    stat = writer.exists(writer.create("/moving-session", b"seen"))
    assert stat is not None
    seen_zxid = stat.mzxid
    session_id, password = writer.client_id  # type: ignore[misc]
    connected = threading.Event()

    def requests() -> Iterator[Any]:
        yield connect_message(session_id, password, SESSION_MS, seen_zxid, False)
        connected.wait(WAIT_S)  # keep the stream open until the answer is read

    channel = grpc.insecure_channel(cluster.addresses[topology.followers[0]])
    try:
        answers = zk_pb2_grpc.ZooKeeperStub(channel).Session(requests(), timeout=WAIT_S)
        first = next(answers)
        connected.set()
        assert first.WhichOneof("kind") == "connect", first
        assert first.connect.session_id == session_id
        assert first.connect.last_zxid >= seen_zxid
    finally:
        connected.set()
        channel.close()
