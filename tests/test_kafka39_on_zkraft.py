"""Apache Kafka 3.9's own brokers and tools on zkraft's quorum, through the ZooKeeper wire protocol.

The strongest test of the ZooKeeper front end: three unmodified Kafka 3.9 brokers (ZooKeeper mode,
`zookeeper.connect` on the quorum's client ports) register under /brokers/ids, elect a controller through
/controller, create a topic with kafka-topics (replication 3), carry records from the console producer
to the console consumer, move partition leadership when the leading broker is SIGKILLed, keep working
when the quorum's own leader is SIGKILLed (their sessions move to another node), take the killed broker
back and delete the topic (its znodes go). With ZKRAFT_CONTROL_RUNS=1 the same test also runs against a real
3-node ZooKeeper ensemble, which proves the test itself: whatever passes there and fails on zkraft is a gap in zkraft.

Kafka's jars come from tests/kafka39/pom.xml (tests/maven_jars.py resolves them once per checkout);
the test skips with one line when mvn or java is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE

from tests import maven_jars
from tests.helpers import wait_until
from tests.kafka39_harness import ZOOKEEPER_SESSION_TIMEOUT_MS, Kafka39Brokers, PartitionState
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader
from tests.real_zookeeper import RealZooKeeper
from tests.real_zookeeper import unavailable_reason as real_zookeeper_unavailable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TOPIC = "kafka39-on-quorum"
RECORDS_PER_BATCH = 200
BROKERS = 3
QUORUM_NODES = 3
QUORUM_START_TIMEOUT_S = 60.0
BROKER_START_TIMEOUT_S = 180.0
# A SIGKILLed broker's session must expire before the controller moves its leaderships.
LEADER_MOVE_TIMEOUT_S = ZOOKEEPER_SESSION_TIMEOUT_MS / 1000 + 90.0
CLUSTER_CHANGE_TIMEOUT_S = 120.0
KAZOO_TIMEOUT_S = 10.0
# kazoo's retry of one read while its session moves to another server (KazooRetry max_tries and deadline).
KAZOO_RETRY_TRIES_MAX = 200
KAZOO_RETRY_DEADLINE_S = 60.0


class Quorum(Protocol):
    """What the test needs of the ZooKeeper-protocol quorum under the brokers."""

    @property
    def connect_string(self) -> str: ...

    def client_address(self, node_id: int) -> str: ...

    def leader_id(self) -> int: ...

    def kill_and_wait_new_leader(self, node_id: int, timeout_s: float) -> int: ...

    def restart(self, node_id: int, timeout_s: float) -> None: ...


class RealZooKeeperQuorum:
    """A real ZooKeeper ensemble (QuorumPeerMain x3) from PySpark's jars."""

    def __init__(self, ensemble: RealZooKeeper) -> None:
        self.ensemble = ensemble

    @property
    def connect_string(self) -> str:
        return self.ensemble.connect_string

    def client_address(self, node_id: int) -> str:
        return self.ensemble.addresses[node_id]

    def _leaders(self) -> list[int]:
        return [i for i in self.ensemble.addresses if self.ensemble.alive(i) and self.ensemble.mode(i) == "leader"]

    def leader_id(self) -> int:
        leaders = wait_until(self._leaders, QUORUM_START_TIMEOUT_S, message="no zookeeper leader")
        assert isinstance(leaders, list)
        return leaders[0]

    def kill_and_wait_new_leader(self, node_id: int, timeout_s: float) -> int:
        self.ensemble.kill(node_id)
        leaders = wait_until(self._leaders, timeout_s, message=f"no new zookeeper leader after killing {node_id}")
        assert isinstance(leaders, list)
        return leaders[0]

    def restart(self, node_id: int, timeout_s: float) -> None:
        self.ensemble.start(node_id)
        self.ensemble.wait_serving(timeout_s, [node_id])


@contextlib.contextmanager
def real_zookeeper_quorum(root: Path) -> Iterator[Quorum]:
    reason = real_zookeeper_unavailable()
    if reason is not None:
        pytest.skip(reason)
    # maxSessionTimeout: the default (20 ticks of 200 ms) would cut Kafka's 6 s sessions to 4 s.
    with RealZooKeeper(root, n=QUORUM_NODES, properties={"maxSessionTimeout": "20000"}) as ensemble:
        ensemble.start_all()
        ensemble.wait_serving(QUORUM_START_TIMEOUT_S)
        yield RealZooKeeperQuorum(ensemble)


class ZkraftQuorum:
    """Three zkraft quorum nodes (`zkraft quorum start`), each serving ZooKeeper clients on its clientPort."""

    def __init__(self, cluster: QuorumProcesses) -> None:
        self.cluster = cluster

    @property
    def connect_string(self) -> str:
        return self.cluster.zk_connect_string

    def client_address(self, node_id: int) -> str:
        return self.cluster.zk_address(node_id)

    def _wait_leader(self, timeout_s: float) -> int:
        dead = [node_id for node_id in self.cluster.addresses if not self.cluster.alive(node_id)]
        leader_id, _ = asyncio.run(wait_for_leader(self.cluster.addresses, timeout_s=timeout_s, exclude=dead))
        return leader_id

    def leader_id(self) -> int:
        return self._wait_leader(QUORUM_START_TIMEOUT_S)

    def kill_and_wait_new_leader(self, node_id: int, timeout_s: float) -> int:
        self.cluster.kill(node_id)
        return self._wait_leader(timeout_s)

    def restart(self, node_id: int, timeout_s: float) -> None:
        self.cluster.start(node_id)
        asyncio.run(self.cluster.wait_serving(node_id, timeout_s))


@contextlib.contextmanager
def zkraft_quorum(root: Path) -> Iterator[Quorum]:
    with QuorumProcesses(root, n=QUORUM_NODES, properties=FAST_ZK_PROPERTIES) as cluster:
        cluster.start_all()
        quorum = ZkraftQuorum(cluster)
        quorum.leader_id()
        yield quorum


QUORUMS = {"zookeeper": real_zookeeper_quorum, "zkraft": zkraft_quorum}


# ---------------------------------------------------------------- znodes, as a ZooKeeper client sees them


@contextlib.contextmanager
def kazoo_client(connect_string: str) -> Iterator[KazooClient]:
    """A started kazoo client whose `retry` rides out a move to another server (bounded by a deadline)."""
    retry = {"max_tries": KAZOO_RETRY_TRIES_MAX, "delay": 0.1, "max_delay": 1.0, "deadline": KAZOO_RETRY_DEADLINE_S}
    client = KazooClient(hosts=connect_string, timeout=KAZOO_TIMEOUT_S, command_retry=retry)
    client.start(timeout=KAZOO_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def registered_brokers(zk: KazooClient) -> set[int]:
    """The broker ids under /brokers/ids."""
    return {int(child) for child in zk.retry(zk.get_children, "/brokers/ids")}


def controller_id(zk: KazooClient) -> int | None:
    """The broker id in /controller ({"version":2,"brokerid":N,...}), None when there is none."""
    try:
        data, _ = zk.retry(zk.get, "/controller")
    except NoNodeError:
        return None
    return int(json.loads(data)["brokerid"])


def topic_znodes(zk: KazooClient, topic: str) -> list[str]:
    """Which of the topic's znodes exist (the assignment, its config, a pending delete)."""
    paths = (f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}")
    return [path for path in paths if zk.retry(zk.exists, path) is not None]


# ---------------------------------------------------------------- Kafka, as its tools show it


def only_partition(kafka: Kafka39Brokers, topic: str) -> PartitionState | None:
    states = kafka.describe(topic)
    return states[0] if len(states) == 1 else None


def wait_partition(kafka: Kafka39Brokers, topic: str, leader_in: set[int], isr: set[int], message: str) -> int:
    """Poll `kafka-topics --describe` until the leader is one of `leader_in` and the ISR is `isr`."""

    def settled() -> int | None:
        state = only_partition(kafka, topic)
        if state is None or state.leader not in leader_in or set(state.isr) != isr:
            return None
        return state.leader

    leader = wait_until(settled, LEADER_MOVE_TIMEOUT_S, interval_s=0.5, message=message)
    assert isinstance(leader, int)
    return leader


def node_of_session(quorum: Quorum, kafka: Kafka39Brokers, broker_id: int) -> int:
    """The quorum node serving `broker_id`'s ZooKeeper session."""
    session = kafka.zookeeper_session(broker_id)
    assert session is not None, f"broker {broker_id} logged no zookeeper session"
    nodes = [node_id for node_id in range(1, QUORUM_NODES + 1) if quorum.client_address(node_id) == session[1]]
    assert len(nodes) == 1, f"broker {broker_id}'s session is on {session[1]}, not a quorum node"
    return nodes[0]


def kill_quorum_node(quorum: Quorum, kafka: Kafka39Brokers, brokers: set[int], node_id: int) -> list[int]:
    """SIGKILL quorum node `node_id`, wait for a leader and for the brokers' sessions on it to move.

    Returns the brokers whose sessions moved (were on that node).
    """
    sessions = {broker_id: kafka.zookeeper_session(broker_id) for broker_id in brokers}
    quorum.kill_and_wait_new_leader(node_id, CLUSTER_CHANGE_TIMEOUT_S)
    return wait_sessions_moved(kafka, sessions, quorum.client_address(node_id))


def wait_sessions_moved(
    kafka: Kafka39Brokers, before: dict[int, tuple[str, str] | None], dead_server: str
) -> list[int]:
    """Each broker whose session was on `dead_server` reconnects elsewhere with the same session id."""
    moving = {b: session for b, session in before.items() if session is not None and session[1] == dead_server}
    print(f"zookeeper sessions on the killed node {dead_server}: brokers {sorted(moving)}")

    def moved() -> bool:
        for broker_id, (session_id, _) in moving.items():
            now = kafka.zookeeper_session(broker_id)
            if now is None or now[0] != session_id or now[1] == dead_server:
                return False
        return True

    wait_until(moved, CLUSTER_CHANGE_TIMEOUT_S, interval_s=0.2, message=f"sessions of brokers {sorted(moving)} moved")
    return sorted(moving)


def batch(name: str) -> list[str]:
    return [f"{name}-{i:04d}" for i in range(RECORDS_PER_BATCH)]


def assert_reads_back(kafka: Kafka39Brokers, expected: list[str], group: str) -> None:
    """A new consumer group reads the whole topic from the beginning: every record, in order, once."""
    records = kafka.consume(TOPIC, count=len(expected), group=group)
    assert records == expected, f"group {group} read {len(records)} records, expected {len(expected)}"


# The control run on a real ZooKeeper ensemble proves the test itself; it takes a minute and a half of CI's
# 60, so it runs when asked: ZKRAFT_CONTROL_RUNS=1 python3 -m pytest tests/test_kafka39_on_zkraft.py
CONTROL_RUNS = os.environ.get("ZKRAFT_CONTROL_RUNS", "") == "1"
QUORUM_PARAMS = [
    pytest.param(
        "zookeeper",
        marks=pytest.mark.skipif(not CONTROL_RUNS, reason="the control run on real ZooKeeper: ZKRAFT_CONTROL_RUNS=1"),
    ),
    pytest.param("zkraft"),
]


@pytest.mark.parametrize("quorum_kind", QUORUM_PARAMS)
def test_kafka39_brokers_run_on_the_quorum(tmp_path: Path, quorum_kind: str) -> None:
    reason = maven_jars.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    jars = maven_jars.resolve()
    started = time.monotonic()
    with (
        QUORUMS[quorum_kind](tmp_path / "quorum") as quorum,
        Kafka39Brokers(tmp_path / "kafka", jars, quorum.connect_string, n=BROKERS) as kafka,
        kazoo_client(quorum.connect_string) as zk,
    ):
        all_ids = set(kafka.addresses)
        kafka.start_all()
        kafka.wait_started(BROKER_START_TIMEOUT_S)
        wait_until(lambda: registered_brokers(zk) == all_ids, CLUSTER_CHANGE_TIMEOUT_S, message="brokers registered")
        assert controller_id(zk) in all_ids

        kafka.topics("--create", "--topic", TOPIC, "--partitions", "1", "--replication-factor", str(BROKERS))
        leader = wait_partition(kafka, TOPIC, all_ids, all_ids, "topic with a leader and a full ISR")
        assert TOPIC in kafka.topics("--list").split()
        written = batch("before")
        kafka.produce(TOPIC, written)
        assert_reads_back(kafka, written, "g-before")

        # The broker leading the partition crashes: its session expires, the controller elects another.
        kafka.kill(leader)
        survivors = all_ids - {leader}
        wait_until(lambda: registered_brokers(zk) == survivors, LEADER_MOVE_TIMEOUT_S, message="dead broker gone")
        wait_partition(kafka, TOPIC, survivors, survivors, f"leadership moved off broker {leader}")
        wait_until(lambda: controller_id(zk) in survivors, LEADER_MOVE_TIMEOUT_S, message="a live controller")
        written += batch("after-broker-kill")
        kafka.produce(TOPIC, written[-RECORDS_PER_BATCH:])
        assert_reads_back(kafka, written, "g-after-broker-kill")

        # The quorum's leader crashes: the brokers' sessions move to the other nodes and stay alive.
        # Which node each broker's session is on is the ZooKeeper client's random pick: when none was on
        # the leader, the leader comes back and the node holding the controller's session crashes too.
        quorum_leader = quorum.leader_id()
        if not kill_quorum_node(quorum, kafka, survivors, quorum_leader):
            quorum.restart(quorum_leader, QUORUM_START_TIMEOUT_S)
            controller = controller_id(zk)
            assert controller is not None
            kill_quorum_node(quorum, kafka, survivors, node_of_session(quorum, kafka, controller))
        written += batch("after-quorum-kill")
        kafka.produce(TOPIC, written[-RECORDS_PER_BATCH:])
        assert_reads_back(kafka, written, "g-after-quorum-kill")
        assert registered_brokers(zk) == survivors, "a live broker lost its registration"
        assert controller_id(zk) in survivors

        # The crashed broker comes back and catches up; then the topic is deleted, znodes and all.
        kafka.start(leader)
        kafka.wait_started(BROKER_START_TIMEOUT_S, [leader])
        wait_until(lambda: registered_brokers(zk) == all_ids, CLUSTER_CHANGE_TIMEOUT_S, message="broker back")
        wait_partition(kafka, TOPIC, all_ids, all_ids, f"broker {leader} back in the ISR")
        kafka.topics("--delete", "--topic", TOPIC)
        wait_until(lambda: topic_znodes(zk, TOPIC) == [], CLUSTER_CHANGE_TIMEOUT_S, message="topic znodes gone")
        assert TOPIC not in kafka.topics("--list").split()
        kafka.assert_alive(*all_ids)
    print(f"kafka 3.9 on {quorum_kind}: {time.monotonic() - started:.1f} s")


@contextlib.contextmanager
def single_node_connect_string(root: Path, quorum_kind: str) -> Iterator[str]:
    """One server of `quorum_kind` (a standalone ZooKeeper, a one-node zkraft quorum); yields its connect string."""
    if quorum_kind == "zookeeper":
        reason = real_zookeeper_unavailable()
        if reason is not None:
            pytest.skip(reason)
        with RealZooKeeper(root, n=1) as server:
            server.start_all()
            server.wait_serving(QUORUM_START_TIMEOUT_S)
            yield server.connect_string
    else:
        with QuorumProcesses(root, n=1, properties=FAST_ZK_PROPERTIES) as cluster:
            cluster.start_all()
            ZkraftQuorum(cluster).leader_id()
            yield cluster.zk_connect_string


@pytest.mark.parametrize("quorum_kind", QUORUM_PARAMS)
def test_a_znode_created_with_null_data_reads_back_null(tmp_path: Path, quorum_kind: str) -> None:
    """What Kafka's createTopLevelPaths writes and ZkProducerIdManager reads, in seconds instead of minutes.

    ZooKeeper's Java client sends null data as a jute buffer of length -1 (Kafka's createRecursive(path, null));
    the server keeps the null, getData answers length -1 again and the client returns null, while an empty
    array stays empty. kazoo's create() accepts only bytes, so the null create goes through its request object.
    """
    with single_node_connect_string(tmp_path, quorum_kind) as connect_string, kazoo_client(connect_string) as zk:
        created = zk.handler.async_result()
        zk._call(Create("/latest_producer_id_block", None, OPEN_ACL_UNSAFE, 0), created)  # data None: length -1
        assert created.get(timeout=KAZOO_TIMEOUT_S) == "/latest_producer_id_block"
        zk.create("/empty", b"")
        data, stat = zk.get("/latest_producer_id_block")
        assert data is None and stat.dataLength == 0, f"null data read back as {data!r}"
        assert zk.get("/empty")[0] == b""
