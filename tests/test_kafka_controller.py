"""The Kafka controller against a real ZooKeeper-semantics quorum (three `zkraft quorum start` processes).

Each "broker" here is a ZooKeeper session with its Kafka-JSON registration
under /brokers/ids, a recording gRPC Broker servicer and a KafkaController,
all in this process on the clients' shared loop. Checked as a Kafka operator
would: who won /controller and with which epoch, the state znodes' JSON, the
LeaderAndIsr / UpdateMetadata each broker received, the ISR after a broker
dies, and that a deposed controller's fenced write fails. Each test uses its
own chroot, so tests share one quorum. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
import structlog

from broker.config import BrokerConfig
from broker.controller.controller import KafkaController
from broker.controller.election import LeaderAndIsr
from broker.controller.zk_store import ControllerZkStore
from broker.state_change_log import StateChangeLogger
from client.kafka import znodes as kz
from client.kafka.errors import ControllerMovedError, KafkaStorageError
from client.kafka.structs import TopicPartition
from client.zk.aio import AsyncZkClient
from client.zk.client import _SharedLoop
from tests.quorum_harness import QuorumProcesses, poll_until, wait_for_leader
from zkraft_proto import broker_pb2, broker_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T = TypeVar("T")
PROPERTIES = {
    "quorum.state.machine": "zookeeper",
    "tickTime": "200",
    "raft.tick.ms": "50",
    "raft.election.timeout.ticks": "10",
    "raft.heartbeat.interval.ticks": "2",
}
SESSION_MS = 4000
WAIT_S = 20.0


def run(coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
    """Run on the clients' loop: gRPC's asyncio poller wants one loop per process."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout_s)


async def until(probe: Callable[[], Any], message: str, timeout_s: float = WAIT_S) -> Any:
    async def aprobe() -> Any:
        result = probe()
        return await result if isinstance(result, Awaitable) else result

    return await poll_until(aprobe, timeout_s, message)


class RecordingBroker(broker_pb2_grpc.BrokerServicer):
    """Answers the controller's requests with no error and keeps them, in arrival order."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        # Error codes for the next StopReplica requests that delete partitions, one per request.
        self.delete_errors: list[int] = []

    async def LeaderAndIsr(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.received.append(("LeaderAndIsr", request))
        return broker_pb2.LeaderAndIsrResponse()

    async def UpdateMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.received.append(("UpdateMetadata", request))
        return broker_pb2.UpdateMetadataResponse()

    async def StopReplica(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.received.append(("StopReplica", request))
        deleting = any(p.delete_partition for p in request.partitions)
        code = self.delete_errors.pop(0) if deleting and self.delete_errors else 0
        errors = [
            broker_pb2.PartitionError(topic_name=p.topic_name, partition_index=p.partition_index, error_code=code)
            for p in request.partitions
        ]
        return broker_pb2.StopReplicaResponse(partition_errors=errors)

    def of(self, kind: str) -> list[Any]:
        return [r for k, r in self.received if k == kind]


class Node:
    """One broker as the controller sees it: session, registration, gRPC endpoint, controller."""

    def __init__(self, broker_id: int, hosts: str, log_dir: Path) -> None:
        self.broker_id = broker_id
        self.hosts = hosts
        self.log_path = log_dir / f"state-change-{broker_id}.log"
        self.recorder = RecordingBroker()
        self.server: grpc.aio.Server | None = None
        self.zk: AsyncZkClient | None = None
        self.controller: KafkaController | None = None

    async def start(self) -> None:
        self.server = grpc.aio.server()
        broker_pb2_grpc.add_BrokerServicer_to_server(self.recorder, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.zk = AsyncZkClient(self.hosts, session_timeout_ms=SESSION_MS)
        await self.zk.start()
        await self.zk.ensure_path(kz.BROKER_IDS_PATH)
        registration = kz.BrokerRegistration(
            self.broker_id,
            (kz.EndPoint("127.0.0.1", port, "PLAINTEXT", "PLAINTEXT"),),
            timestamp_ms=int(time.time() * 1000),
        )
        created = await self.zk.create(
            kz.broker_path(self.broker_id), kz.encode_broker(registration), ephemeral=True, include_data=True
        )
        assert isinstance(created, tuple)
        config = BrokerConfig(broker_id=self.broker_id, port=port)
        self.controller = KafkaController(
            config,
            self.zk,
            created[1].czxid,
            StateChangeLogger(self.log_path, self.broker_id),
            structlog.get_logger().bind(broker=self.broker_id),
        )
        await self.controller.startup()

    async def kill_session(self) -> None:
        """Close the ZooKeeper session (ephemerals go at once), as a broker that dies does."""
        assert self.zk is not None and self.controller is not None
        await self.zk.close()
        await self.controller.shutdown()

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.shutdown()
        if self.zk is not None:
            await self.zk.close()
        if self.server is not None:
            await self.server.stop(None)

    @property
    def active(self) -> bool:
        return self.controller is not None and self.controller.is_active


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("quorum"), 3, PROPERTIES) as processes:
        processes.start_all()
        run(wait_for_leader(processes.addresses, timeout_s=30))
        yield processes


@pytest.fixture
def hosts(quorum: QuorumProcesses, request: pytest.FixtureRequest) -> str:
    """A connect string with a fresh chroot per test, created first as ZooKeeper requires."""
    connect = ",".join(quorum.addresses.values())
    chroot = "/" + request.node.name.replace("[", "_").replace("]", "")

    async def make() -> None:
        async with AsyncZkClient(connect) as zk:
            await zk.ensure_path(chroot)

    run(make())
    return connect + chroot


@pytest.fixture
def cluster(hosts: str, tmp_path: Path) -> Iterator[Callable[..., list[Node]]]:
    started: list[Node] = []

    def start(n: int, first_id: int = 1) -> list[Node]:
        """Start brokers first_id .. first_id + n - 1, in that order."""
        nodes = [Node(i, hosts, tmp_path) for i in range(first_id, first_id + n)]
        for node in nodes:
            run(node.start())
            started.append(node)
        return nodes

    yield start
    for node in started:
        run(node.stop())


@pytest.fixture
def admin(hosts: str) -> Iterator[AsyncZkClient]:
    zk = AsyncZkClient(hosts)
    run(zk.start())
    yield zk
    run(zk.close())


def wait_for_controller(nodes: list[Node], exclude: tuple[Node, ...] = ()) -> Node:
    async def probe() -> Node | None:
        active = [n for n in nodes if n.active]
        if len(active) != 1 or active[0] in exclude:
            return None
        return active[0]

    return run(poll_until(probe, WAIT_S, lambda: f"no single controller: {[n.active for n in nodes]}"))


async def read_state(zk: AsyncZkClient, tp: TopicPartition) -> tuple[dict[str, Any], int] | None:
    stat = await zk.exists(kz.partition_state_path(tp.topic, tp.partition))
    if stat is None:
        return None
    data, stat = await zk.get(kz.partition_state_path(tp.topic, tp.partition))
    return json.loads(data), stat.version


def create_topic(admin: AsyncZkClient, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
    data = kz.encode_topic(kz.TopicAssignment(topic, assignment), version=1)
    run(admin.create(kz.topic_path(topic), data, makepath=True))


def wait_states(admin: AsyncZkClient, tps: list[TopicPartition], ok: Callable[[dict[str, Any]], bool]) -> dict:
    async def probe() -> dict[TopicPartition, dict[str, Any]] | None:
        states = {tp: await read_state(admin, tp) for tp in tps}
        if all(s is not None and ok(s[0]) for s in states.values()):
            return {tp: s[0] for tp, s in states.items() if s is not None}
        return None

    return run(poll_until(probe, WAIT_S, "partition states not as expected"))


# ---------------------------------------------------------------- tests


def test_one_controller_wins_and_another_takes_over_when_its_session_dies(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(3)
    winner = wait_for_controller(nodes)
    assert winner.controller is not None and winner.controller.epoch == 1
    data, _ = run(admin.get(kz.CONTROLLER_EPOCH_PATH))
    assert data == b"1"
    data, _ = run(admin.get(kz.CONTROLLER_PATH))
    assert kz.decode_controller(data).broker_id == winner.broker_id
    # The losers learn who won through their /controller watch.
    run(
        until(
            lambda: all(n.controller and n.controller.active_controller_id == winner.broker_id for n in nodes),
            "losers do not know the controller",
        )
    )
    # Every live broker hears from the controller: UpdateMetadata naming all three brokers.
    run(until(lambda: all(_live_ids(n) == [1, 2, 3] for n in nodes), "no UpdateMetadata with 3 live brokers"))

    run(winner.kill_session())
    survivors = [n for n in nodes if n is not winner]
    successor = wait_for_controller(survivors)
    assert successor.controller is not None and successor.controller.epoch == 2
    data, _ = run(admin.get(kz.CONTROLLER_EPOCH_PATH))
    assert data == b"2"
    assert not winner.active
    run(until(lambda: all(_live_ids(n, epoch=2) == [n2.broker_id for n2 in survivors] for n in survivors), "no UM"))
    for node in survivors:  # once epoch 2 speaks, nothing from epoch 1 arrives any more
        epochs = [r.controller_epoch for _, r in node.recorder.received]
        assert 1 not in epochs[epochs.index(2) :]


def _live_ids(node: Node, epoch: int = 1) -> list[int] | None:
    ums = [r for r in node.recorder.of("UpdateMetadata") if r.controller_epoch == epoch]
    return sorted(b.id for b in ums[-1].live_brokers) if ums else None


def test_topic_creation_then_broker_failure(cluster: Callable[..., list[Node]], admin: AsyncZkClient) -> None:
    nodes = cluster(3)
    controller = wait_for_controller(nodes)
    # Failover is done when every broker has the UpdateMetadata naming all three live brokers.
    run(until(lambda: all(_live_ids(n) == [1, 2, 3] for n in nodes), "failover UpdateMetadata missing"))
    before = {n.broker_id: len(n.recorder.received) for n in nodes}

    assignment = {p: (p % 3 + 1, (p + 1) % 3 + 1) for p in range(8)}
    tps = [TopicPartition("t", p) for p in range(8)]
    create_topic(admin, "t", assignment)
    states = wait_states(admin, tps, lambda s: True)
    for tp, state in states.items():
        replicas = assignment[tp.partition]
        assert state == {
            "controller_epoch": 1,
            "leader": replicas[0],
            "version": 1,
            "leader_epoch": 0,
            "isr": list(replicas),
        }
    raw, _ = run(admin.get(kz.partition_state_path("t", 0)))
    assert raw == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'

    def got_all(node: Node) -> bool:
        ums = [r for k, r in node.recorder.received[before[node.broker_id] :] if k == "UpdateMetadata"]
        return any(len(r.partition_states) == 8 for r in ums)

    run(until(lambda: all(got_all(n) for n in nodes), "UpdateMetadata with the 8 partitions missing"))
    for node in nodes:
        new = node.recorder.received[before[node.broker_id] :]
        lais = [r for k, r in new if k == "LeaderAndIsr"]
        assert len(lais) == 1, f"broker {node.broker_id} got {len(lais)} LeaderAndIsr for one topic creation"
        hosted = sorted(p for p, r in assignment.items() if node.broker_id in r)
        assert sorted(s.partition_index for s in lais[0].partition_states) == hosted
        assert all(s.is_new and s.leader_epoch == 0 and s.controller_epoch == 1 for s in lais[0].partition_states)
        assert lais[0].controller_id == controller.broker_id
        # Of the requests about t, LeaderAndIsr comes first (a failover UpdateMetadata may still be arriving).
        about_t = [k for k, r in new if any(s.topic_name == "t" for s in r.partition_states)]
        assert about_t[0] == "LeaderAndIsr", f"broker {node.broker_id}: {about_t}"

    # A broker that is not the controller dies: new leaders from the ISR, leader epoch 1, ISR without it.
    victim = next(n for n in nodes if n is not controller)
    run(victim.kill_session())
    gone = victim.broker_id
    states = wait_states(admin, tps, lambda s: gone not in s["isr"])
    for tp, state in states.items():
        replicas = assignment[tp.partition]
        if gone not in replicas:
            assert state["leader_epoch"] == 0
            continue
        survivor = next(r for r in replicas if r != gone)
        assert state["leader"] == survivor
        assert state["isr"] == [survivor]
        assert state["leader_epoch"] == 1
        assert state["controller_epoch"] == 1
    log_text = controller.log_path.read_text()
    assert (
        f"] INFO [Controller id={controller.broker_id} epoch=1] Changed partition t-0 from NewPartition to "
        "OnlinePartition with state LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0) "
        "(state.change.logger)"
    ) in log_text
    assert "from OfflinePartition to OnlinePartition" in log_text


def test_isr_change_notification_reaches_every_broker(cluster: Callable[..., list[Node]], admin: AsyncZkClient) -> None:
    nodes = cluster(2)
    wait_for_controller(nodes)
    tp = TopicPartition("isr", 0)
    create_topic(admin, "isr", {0: (1, 2)})
    wait_states(admin, [tp], lambda s: s["isr"] == [1, 2])
    # The leader shrinks the ISR as a 2.x broker does: a conditional write, then a notification.
    found = run(read_state(admin, tp))
    assert found is not None
    state, version = found
    shrunk = kz.PartitionState(state["leader"], state["leader_epoch"], (1,), state["controller_epoch"])
    run(admin.set(kz.partition_state_path("isr", 0), kz.encode_partition_state(shrunk), version))
    run(admin.create(kz.isr_change_create_path(), kz.encode_isr_change([tp]), sequence=True))

    def shrunk_seen(node: Node) -> bool:
        ums = node.recorder.of("UpdateMetadata")
        return any(list(s.isr) == [1] for r in ums for s in r.partition_states)

    run(until(lambda: all(shrunk_seen(n) for n in nodes), "UpdateMetadata with the shrunk ISR missing"))
    run(until(lambda: _no_children(admin, kz.ISR_CHANGE_NOTIFICATION_PATH), "notification not deleted"))


async def _no_children(zk: AsyncZkClient, path: str) -> bool:
    return not await zk.get_children(path)


def test_deposed_controller_write_is_fenced(cluster: Callable[..., list[Node]], admin: AsyncZkClient) -> None:
    nodes = cluster(2)
    first = wait_for_controller(nodes)
    tp = TopicPartition("fenced", 0)
    create_topic(admin, "fenced", {0: (1, 2)})
    wait_states(admin, [tp], lambda s: True)
    _, epoch_stat = run(admin.get(kz.CONTROLLER_EPOCH_PATH))
    old_epoch_zk_version = epoch_stat.version

    run(first.kill_session())
    second = wait_for_controller(nodes, exclude=(first,))
    assert second.controller is not None and second.controller.epoch == 2

    # The new controller handles the old one's death first (it leads, alone in the ISR), then nothing moves.
    wait_states(admin, [tp], lambda s: s["controller_epoch"] == 2 and s["leader"] == second.broker_id)
    found = run(read_state(admin, tp))
    assert found is not None
    state, version = found
    stale = LeaderAndIsr(first.broker_id, state["leader_epoch"] + 1, (first.broker_id,), 1, version)
    with pytest.raises(ControllerMovedError):
        run(ControllerZkStore(admin).update_partition_state(tp, stale, old_epoch_zk_version))
    after = run(read_state(admin, tp))
    assert after is not None and after[1] == version  # nothing was written
    # The deposed controller sent nothing with its old epoch after the new one took over.
    first_new_epoch = [r for n in nodes for r in n.recorder.of("UpdateMetadata") if r.controller_epoch == 2]
    assert first_new_epoch


def test_partition_without_live_replica_waits_for_its_broker_and_partitions_can_be_added(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(2)
    controller = wait_for_controller(nodes)
    create_topic(admin, "late", {0: (1, 2), 1: (3,)})
    wait_states(admin, [TopicPartition("late", 0)], lambda s: s["leader"] == 1)
    assert run(read_state(admin, TopicPartition("late", 1))) is None  # no live replica: stays offline
    assert "No assigned replica is alive" in controller.log_path.read_text()

    (third,) = cluster(1, first_id=3)
    wait_states(admin, [TopicPartition("late", 1)], lambda s: s["leader"] == 3 and s["isr"] == [3])
    run(
        until(
            lambda: any(s.partition_index == 1 for r in third.recorder.of("LeaderAndIsr") for s in r.partition_states),
            "no LeaderAndIsr",
        )
    )

    # Partition addition: the topic znode gains partition 2.
    grown = kz.encode_topic(kz.TopicAssignment("late", {0: (1, 2), 1: (3,), 2: (2, 3)}), version=1)
    run(admin.set(kz.topic_path("late"), grown))
    states = wait_states(admin, [TopicPartition("late", 2)], lambda s: True)
    assert states[TopicPartition("late", 2)] == {
        "controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 0, "isr": [2, 3]
    }  # fmt: skip


def test_brokers_ids_deleted_by_hand_and_created_again_is_followed(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(2)
    wait_for_controller(nodes)
    tp = TopicPartition("ids", 0)
    create_topic(admin, "ids", {0: (1,)})
    wait_states(admin, [tp], lambda s: s["leader"] == 1)
    registrations = {n.broker_id: run(admin.get(kz.broker_path(n.broker_id)))[0] for n in nodes}

    # `/brokers/ids` itself goes: the controller's children watch fires and its re-read finds no node.
    t = admin.transaction()
    for broker_id in sorted(registrations):
        t.delete(kz.broker_path(broker_id))
    t.delete(kz.BROKER_IDS_PATH)
    run(t.commit())
    wait_states(admin, [tp], lambda s: s["leader"] == -1)  # every broker taken for dead: no leader

    # The brokers register again, creating the parent: the controller must see it (an exists watch).
    for node in nodes:
        assert node.zk is not None
        path = kz.broker_path(node.broker_id)
        run(node.zk.create(path, registrations[node.broker_id], ephemeral=True, makepath=True))
    wait_states(admin, [tp], lambda s: s["leader"] == 1)


def test_topic_deletion_retries_a_replica_whose_broker_answered_with_an_error(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(2)
    wait_for_controller(nodes)
    create_topic(admin, "doomed", {0: (1, 2), 1: (2, 1)})
    tps = [TopicPartition("doomed", 0), TopicPartition("doomed", 1)]
    wait_states(admin, tps, lambda s: s["leader"] >= 0)
    nodes[1].recorder.delete_errors.append(KafkaStorageError.code)  # broker 2 fails its first deletion

    run(admin.create(kz.delete_topic_path("doomed"), b"", makepath=True))

    async def gone() -> bool:
        paths = (kz.topic_path("doomed"), kz.delete_topic_path("doomed"))
        return all([await admin.exists(p) is None for p in paths])

    run(until(gone, "topic not deleted after the failed StopReplica was retried"))
    for node in nodes:
        deletes = [
            p
            for r in node.recorder.of("StopReplica")
            for p in r.partitions
            if p.delete_partition and p.topic_name == "doomed"
        ]
        assert {p.leader_epoch for p in deletes} == {-2}
        assert len(deletes) == (4 if node is nodes[1] else 2)  # broker 2: both partitions, twice
        leaders = {
            s.leader for r in node.recorder.of("UpdateMetadata") for s in r.partition_states if s.topic_name == "doomed"
        }
        assert -2 in leaders  # kz.LEADER_DURING_DELETE: the broker stops serving the topic


def test_channel_retries_an_unreachable_broker_until_it_answers() -> None:
    from broker.controller.channel import ControllerChannelManager
    from broker.controller.context import LiveBroker
    from tests.quorum_harness import free_ports

    (port,) = free_ports(1)
    recorder = RecordingBroker()

    async def scenario() -> None:
        manager = ControllerChannelManager(structlog.get_logger(), request_timeout_s=2.0)
        registration = kz.BrokerRegistration(7, (kz.EndPoint("127.0.0.1", port, "PLAINTEXT", "PLAINTEXT"),))
        manager.add_broker(LiveBroker(registration, epoch=42))
        for epoch in (1, 2, 3):  # in order, even though the first attempts fail
            manager.send(7, broker_pb2.UpdateMetadataRequest(controller_id=1, controller_epoch=epoch))
        server = grpc.aio.server()
        broker_pb2_grpc.add_BrokerServicer_to_server(recorder, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        try:
            await until(lambda: len(recorder.received) == 3, "requests not delivered after the broker came up")
        finally:
            await manager.shutdown()
            await server.stop(None)

    run(scenario())
    assert [r.controller_epoch for r in recorder.of("UpdateMetadata")] == [1, 2, 3]


def test_bounced_broker_is_failed_then_started(cluster: Callable[..., list[Node]], admin: AsyncZkClient) -> None:
    nodes = cluster(2)
    controller = wait_for_controller(nodes)
    other = next(n for n in nodes if n is not controller)
    tp = TopicPartition("bounce", 0)
    create_topic(admin, "bounce", {0: (other.broker_id, controller.broker_id)})
    wait_states(admin, [tp], lambda s: s["leader"] == other.broker_id)
    # The znode is written before the LeaderAndIsr is sent: wait for it, so it is not taken for a later one.
    run(until(lambda: any(k == "LeaderAndIsr" for k, _ in other.recorder.received) or None, "no first LeaderAndIsr"))
    before = len(other.recorder.received)

    # Same id, new registration (greater czxid) in one step: the controller sees a bounce, not a death.
    path = kz.broker_path(other.broker_id)
    data, _ = run(admin.get(path))
    t = admin.transaction()
    t.delete(path)
    t.create(path, data, ephemeral=True)
    run(t.commit())

    state = wait_states(admin, [tp], lambda s: s["leader"] == controller.broker_id)[tp]
    assert state["isr"] == [controller.broker_id] and state["leader_epoch"] == 1

    def stop_then_lead() -> list[str] | None:
        kinds = [k for k, r in other.recorder.received[before:] if k in ("StopReplica", "LeaderAndIsr")]
        return kinds if "LeaderAndIsr" in kinds else None

    kinds = run(until(stop_then_lead, "the bounced broker got no LeaderAndIsr"))
    assert kinds[0] == "StopReplica"  # the old incarnation's replica is stopped before the new one is told
    lai = [r for k, r in other.recorder.received[before:] if k == "LeaderAndIsr"][-1]
    assert [(s.leader, list(s.isr)) for s in lai.partition_states] == [(controller.broker_id, [controller.broker_id])]


def test_controlled_shutdown_moves_leadership_and_isr_away(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(2)
    controller = wait_for_controller(nodes)
    leaving = next(n for n in nodes if n is not controller)
    me, other = controller.broker_id, leaving.broker_id
    tps = [TopicPartition("cs", 0), TopicPartition("cs", 1), TopicPartition("cs", 2)]
    create_topic(admin, "cs", {0: (other, me), 1: (me, other), 2: (other,)})
    wait_states(admin, tps, lambda s: True)
    assert controller.controller is not None and leaving.controller is not None
    _, stat = run(admin.get(kz.broker_path(other)))

    def ask(broker_id: int, epoch: int, at: KafkaController) -> Any:
        request = broker_pb2.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch)
        return run(at.controlled_shutdown(request))

    assert ask(other, stat.czxid, leaving.controller).error_code == 41  # NOT_CONTROLLER
    assert ask(99, 1, controller.controller).error_code == 8  # BROKER_NOT_AVAILABLE
    assert ask(other, stat.czxid - 1, controller.controller).error_code == 77  # STALE_BROKER_EPOCH
    response = ask(other, stat.czxid, controller.controller)
    assert response.error_code == 0 and list(response.remaining_partitions) == []  # cs-2 has one replica: not moved
    states = wait_states(admin, tps[:2], lambda s: True)
    assert states[tps[0]] == {"controller_epoch": 1, "leader": me, "version": 1, "leader_epoch": 1, "isr": [me]}
    assert states[tps[1]] == {"controller_epoch": 1, "leader": me, "version": 1, "leader_epoch": 1, "isr": [me]}
    log_text = controller.log_path.read_text()
    assert "Changed partition cs-0 from OnlinePartition to OnlinePartition with state LeaderAndIsr(leader=" in log_text
