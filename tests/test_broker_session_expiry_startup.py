"""A broker's start-up outlives the loss of its ZooKeeper session at any of its calls.

Found by the Kafka fault campaign (seed 295): a partition expired a starting broker's session, and the broker
exited, because its start-up calls did not expect a new session and the listener that makes one was added only
at the end of start-up. Kafka's ZooKeeperClient makes a new session by itself and its KafkaZkClient retries.

Each case starts a broker in this process against a real quorum node and ends its session from outside just
before its k-th request, as Curator's KillSession does: a second client attaches to the session (its id and
password) and closes it. The broker must still come up registered under its new session and, alone, become
the controller, acting as one (it answers its own controlled shutdown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

import broker.server
from broker.config import from_properties
from broker.server import Broker
from client.kafka.znodes import CONTROLLER_PATH, broker_path
from client.zk.aio import AsyncZkClient
from client.zk.states import ZkState
from tests.quorum_harness import LOOPBACK, QuorumProcesses, free_ports, one_zookeeper_node, poll_until

BROKER_ID = 1
START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 30.0
CHECK_INTERVAL_S = 0.05
KILL_ATTEMPTS = 10
THIEF_TIMEOUT_S = 2.0
MIN_START_UP_REQUESTS = 8  # cluster id, damage claim, registration, its guard, /controller, config changes...
KILL_SEEN_WITHIN_S = 2.0  # a closed session: the owner's stream ends and its reconnect is refused, in milliseconds


def kill_session(zk_address: str, client_id: tuple[int, bytes]) -> None:
    """Attach to the session with its id and password, then close it: the owner's session has ended.
    The owner may take its session back first (a reconnect moves it again): then nothing is closed."""
    thief = KazooClient(
        hosts=zk_address, client_id=client_id, timeout=THIEF_TIMEOUT_S, connection_retry={"max_tries": 0}
    )
    try:
        thief.start(THIEF_TIMEOUT_S)
    except KazooTimeoutError:
        return
    finally:
        thief.stop()
        thief.close()


class SessionKilledBeforeCall(AsyncZkClient):
    """The broker's own client, whose session is ended from outside just before the `kill_before`-th request of
    its start-up (requests after `start()` returns are not counted)."""

    kill_before = 0  # 1-based; 0: never
    zk_address = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starting = True
        self.calls = 0
        self.killing: asyncio.Task[None] | None = None
        self.killed_session: int | None = None

    async def _call(self, *args: Any, **kwargs: Any) -> Any:
        if self.starting:
            self.calls += 1
            if self.calls == self.kill_before:
                self.killing = asyncio.ensure_future(self._kill_session())
                await self.killing
        return await super()._call(*args, **kwargs)

    async def _kill_session(self) -> None:
        """Until this client has seen its session end. The thief's attach moves the session to the thief; the
        thief runs with this event loop held (as a paused process), so this client cannot take the session
        back before the thief closes it. A thief that still loses it tries again."""
        client_id = self.client_id
        assert client_id is not None
        for _ in range(KILL_ATTEMPTS):
            kill_session(self.zk_address, client_id)
            deadline = asyncio.get_running_loop().time() + KILL_SEEN_WITHIN_S
            while asyncio.get_running_loop().time() < deadline:
                if self.state is ZkState.LOST or self.client_id != client_id:
                    self.killed_session = client_id[0]
                    return
                await asyncio.sleep(CHECK_INTERVAL_S)
        raise AssertionError(f"session {client_id[0]:#x} outlived {KILL_ATTEMPTS} closes from outside")


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with one_zookeeper_node(tmp_path_factory.mktemp("quorum")) as cluster:
        yield cluster


def broker_config(quorum: QuorumProcesses, log_dir: Path) -> Any:
    grpc_port, kafka_port = free_ports(2)
    return from_properties(
        {
            "broker.id": str(BROKER_ID),
            "host.name": LOOPBACK,
            "port": str(grpc_port),
            "listeners": f"PLAINTEXT://{LOOPBACK}:{kafka_port}",
            "log.dirs": str(log_dir),
            "zookeeper.connect": quorum.addresses[1],
            "zookeeper.session.timeout.ms": "4000",
        }
    )


async def wait_for(predicate: Any, what: str) -> None:
    """Until `predicate()` (a coroutine function) is truthy, within SETTLE_TIMEOUT_S."""
    await poll_until(predicate, SETTLE_TIMEOUT_S, what, CHECK_INTERVAL_S)


async def start_with_session_killed(
    quorum: QuorumProcesses, log_dir: Path, kill_before: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, int | None]:
    """Start a broker whose session ends before its `kill_before`-th request; once it is registered and the
    controller, stop it. (requests its start-up made, the session ended or None)"""
    monkeypatch.setattr(SessionKilledBeforeCall, "kill_before", kill_before)
    monkeypatch.setattr(SessionKilledBeforeCall, "zk_address", quorum.zk_address(1))
    monkeypatch.setattr(broker.server, "AsyncZkClient", SessionKilledBeforeCall)
    node = Broker(broker_config(quorum, log_dir))
    try:
        await asyncio.wait_for(node.start(), START_TIMEOUT_S)
        zk = node.zk
        assert isinstance(zk, SessionKilledBeforeCall)
        zk.starting = False
        if zk.killing is not None:  # begun by a background task of start-up's: let it end the session first
            await asyncio.wait_for(asyncio.shield(zk.killing), START_TIMEOUT_S)

        async def held_by_this_session(path: str) -> bool:
            stat = await zk.exists(path)
            client_id = zk.client_id
            return stat is not None and client_id is not None and stat.ephemeralOwner == client_id[0]

        await wait_for(lambda: held_by_this_session(broker_path(BROKER_ID)), "the registration of this session")
        await wait_for(lambda: held_by_this_session(CONTROLLER_PATH), "/controller held by this session")

        async def acting_controller() -> bool:
            return node.controller.is_active and await held_by_this_session(CONTROLLER_PATH)

        await wait_for(acting_controller, "a controller acting on its /controller")
        assert zk.client_id is not None and zk.client_id[0] != zk.killed_session
        registration = await zk.exists(broker_path(BROKER_ID))
        assert registration is not None and node.broker_epoch == registration.czxid
        return zk.calls, zk.killed_session
    finally:
        await node.stop()


def test_a_session_lost_before_each_start_up_request_in_turn_leaves_the_broker_registered_and_controller(
    quorum: QuorumProcesses, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(start_with_session_killed(quorum, tmp_path, 0, monkeypatch))  # makes the cluster's paths
    calls, killed = asyncio.run(start_with_session_killed(quorum, tmp_path, 0, monkeypatch))
    assert killed is None and calls >= MIN_START_UP_REQUESTS, calls
    for kill_before in range(1, calls + 1):
        _, killed = asyncio.run(start_with_session_killed(quorum, tmp_path, kill_before, monkeypatch))
        assert killed is not None, f"start-up made fewer than {kill_before} requests this time"
