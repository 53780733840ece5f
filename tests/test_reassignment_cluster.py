"""Partition reassignment on real processes: the worked example of docs/research/kafka.md §2.13.

OAR = {1,2,3}, RAR = {4,5,6} on six brokers. A watcher thread polls the topic
znode and the partition state znode and records every distinct (AR, leader,
ISR) it sees; the controller's steps must appear in Kafka's order, AR = RAR
last. Every record produced before, during and after is read back, and the
old replicas' directories are gone. A second test kills the controller while
AR = OAR + RAR (the catch-up is slowed by a replication throttle) and checks
that the new controller finishes the job from the znodes.

The znodes are written directly (Kafka's JSON, client/kafka/znodes.py), so
these tests do not depend on the command-line tools.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from client import Consumer, Producer, TopicPartition, ZkClient
from client.kafka import znodes as kz
from client.zk.exceptions import NoNodeError
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration

TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)
OAR = (1, 2, 3)
RAR = (4, 5, 6)
BROKER_PROPERTIES = {"replica.lag.time.max.ms": "3000", "num.partitions": "1"}
OBSERVE_POLLS_MAX = 200_000
DONE_TIMEOUT_S = 90.0


def create_topic(cluster: KafkaCluster, topic: str, replica_assignment: str, **configs: str) -> None:
    """`zkraft topics --create --replica-assignment`, then wait for a leader."""
    command = [
        sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, "--create",
        "--topic", topic, "--replica-assignment", replica_assignment,
    ]  # fmt: skip
    for key, value in configs.items():
        command += ["--config", f"{key}={value}"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    cluster.wait_leaders(topic, len(replica_assignment.split(",")))


def znode_view(zk: ZkClient) -> tuple[tuple[int, ...], int, tuple[int, ...]] | None:
    """(AR, leader, ISR) of the partition, None while a znode is missing."""
    try:
        topic_data, _ = zk.get(kz.topic_path(TOPIC))
        state_data, _ = zk.get(kz.partition_state_path(TOPIC, 0))
    except NoNodeError:
        return None
    ar = kz.decode_topic(TOPIC, topic_data).partitions[0]
    state = kz.decode_partition_state(TOPIC, 0, state_data)
    return ar, state.leader, state.isr


class Observer:
    """Polls the znodes on its own session and records each distinct (AR set, leader, ISR set)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self._zk = ZkClient(cluster.zookeeper, timeout=30)
        self.seen: list[tuple[frozenset[int], int, frozenset[int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="znode-observer", daemon=True)

    def __enter__(self) -> Observer:
        self._zk.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._zk.stop()

    def _run(self) -> None:
        for _ in range(OBSERVE_POLLS_MAX):
            if self._stop.is_set():
                return
            try:
                view = znode_view(self._zk)
            except Exception:  # a quorum hiccup: poll again
                continue
            if view is None:
                continue
            entry = (frozenset(view[0]), view[1], frozenset(view[2]))
            if not self.seen or self.seen[-1] != entry:
                self.seen.append(entry)


def reassignment_done(cluster: KafkaCluster) -> bool:
    view = znode_view(cluster.zk)
    return (
        cluster.zk.exists(kz.REASSIGN_PARTITIONS_PATH) is None
        and view is not None
        and view[0] == RAR
        and view[1] == 4
        and set(view[2]) == set(RAR)
    )


def produce(producer: Producer, prefix: str, count: int, size: int = 0) -> list[bytes]:
    values = [f"{prefix}-{i:06d}".encode().ljust(size, b".") for i in range(count)]
    futures = [producer.send(TOPIC, value=v, partition=0) for v in values]
    for future in futures:
        future.get(timeout=60)
    return values


def read_back(cluster: KafkaCluster, timeout_s: float = 60.0) -> list[bytes]:
    """Every value a consumer reads from offset 0 up to the partition's end (the HW)."""
    values: list[bytes] = []
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        consumer.seek_to_beginning(TP)
        end = consumer.end_offsets([TP])[TP]
        deadline = time.monotonic() + timeout_s
        while consumer.position(TP) < end:
            assert time.monotonic() < deadline, f"read_back stuck at {consumer.position(TP)} of {end}"
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in batch)
    return values


def partition_dir(cluster: KafkaCluster, broker_id: int) -> Path:
    return cluster.data_dir(broker_id) / f"{TOPIC}-0"


def assert_moved(cluster: KafkaCluster, expected: list[bytes]) -> None:
    read = read_back(cluster)
    assert read == expected, f"read {len(read)} records, expected {len(expected)}"
    wait_until(
        lambda: not any(partition_dir(cluster, b).exists() for b in OAR),
        30,
        message="the old replicas' directories were not deleted",
    )
    assert all(partition_dir(cluster, b).exists() for b in RAR)


def test_reassignment_worked_example(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=6, broker_properties=BROKER_PROPERTIES) as cluster:
        cluster.start()
        create_topic(cluster, TOPIC, "1:2:3")
        wait_until(lambda: znode_view(cluster.zk) == (OAR, 1, OAR), 30, message="initial state not 1/{1,2,3}")
        producer = Producer(cluster.bootstrap_servers, acks="all", linger_ms=2, retry_backoff_ms=50)
        try:
            expected = produce(producer, "before", 300)
            with Observer(cluster) as observer:
                cluster.zk.create(kz.REASSIGN_PARTITIONS_PATH, kz.encode_reassignment({TP: RAR}), makepath=True)
                expected += produce(producer, "during", 300)
                wait_until(lambda: reassignment_done(cluster), DONE_TIMEOUT_S, message="reassignment did not finish")
            expected += produce(producer, "after", 300)
        finally:
            producer.close(timeout=30)
        seen = observer.seen
        old, new, union = frozenset(OAR), frozenset(RAR), frozenset(OAR + RAR)
        # Kafka's sequence: {1,2,3} 1/{1,2,3} -> {1..6} 1/{1,2,3} -> {1..6} 1/{1..6} -> {1..6} 4/{1..6}
        # -> {1..6} 4/{4,5,6} -> {4,5,6} 4/{4,5,6} (the ISR shrinks one replica at a time in between).
        # A poller can miss short-lived states, so the ones asserted unconditionally are those that last.
        assert seen[0] == (old, 1, old), seen
        assert seen[-1] == (new, 4, new), seen
        ars = [ar for i, (ar, _, _) in enumerate(seen) if i == 0 or seen[i - 1][0] != ar]
        assert ars == [old, union, new], seen  # AR grows to OAR + RAR, and becomes RAR once, last
        for ar, leader, isr in seen:
            assert leader in isr and isr <= ar, seen
            if ar == new:  # AR = RAR only once the leader is in RAR and OAR is out of the ISR
                assert (leader, isr) == (4, new), seen
            if isr == union:  # RAR joins the ISR while AR = OAR + RAR (under leader 1, then 4 takes over)
                assert ar == union and leader in (1, 4), seen
            if leader == 4:  # the leader moves into RAR only once RAR is in the ISR
                assert new <= isr, seen
        assert any(ar == union and leader == 1 for ar, leader, _ in seen), seen
        controller = cluster.controller_id()
        log_text = (cluster.data_dir(int(controller or 0)) / "state-change.log").read_text(encoding="utf-8")
        steps = [
            f"with new assignment ReplicaAssignment(replicas=4,5,6,1,2,3, addingReplicas=4,5,6, "
            f"removingReplicas=1,2,3) to brokers 4,5,6,1,2,3 for partition being reassigned {TOPIC}-0",
            f"Leader 1 for partition {TOPIC}-0 being reassigned, is not in the new list of replicas 4,5,6",
            f"Changed state of replica 1 for partition {TOPIC}-0 from OnlineReplica to OfflineReplica",
            f"Completed reassignment of partition {TOPIC}-0 to replicas 4,5,6",
        ]
        positions = [log_text.find(step) for step in steps]
        assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
        assert_moved(cluster, expected)


# ---------------------------------------------------------------- controller failover in the middle

THROTTLE_RATE_BYTES = 10_000  # the throttled catch-up of ~300 kB would take half a minute
RECORD_BYTES = 1_000


def set_config(zk: ZkClient, entity_type: str, entity_name: str, updates: dict[str, str | None]) -> None:
    """Merge `updates` into `/config/<type>/<name>` (None deletes a key) and announce it, as the tools do."""
    path = kz.config_entity_path(entity_type, entity_name)
    try:
        data, _ = zk.get(path)
        config = kz.decode_config(data, path)
    except NoNodeError:
        config = {}
    for key, value in updates.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    if zk.exists(path) is None:
        zk.create(path, kz.encode_config(config), makepath=True)
    else:
        zk.set(path, kz.encode_config(config))
    zk.create(
        kz.config_change_create_path(), kz.encode_config_change(entity_type, entity_name), sequence=True, makepath=True
    )


def set_follower_throttle(zk: ZkClient, rate: int | None) -> None:
    for broker in RAR:
        value = None if rate is None else str(rate)
        set_config(zk, kz.CONFIG_TYPE_BROKER, str(broker), {"follower.replication.throttled.rate": value})


def test_controller_killed_mid_reassignment_new_controller_finishes(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=6, broker_properties=BROKER_PROPERTIES) as cluster:
        cluster.start()
        create_topic(cluster, TOPIC, "1:2:3")
        zk = cluster.zk
        set_follower_throttle(zk, THROTTLE_RATE_BYTES)
        throttled = ",".join(f"0:{b}" for b in RAR)
        set_config(zk, kz.CONFIG_TYPE_TOPIC, TOPIC, {"follower.replication.throttled.replicas": throttled})
        producer = Producer(cluster.bootstrap_servers, acks="all", linger_ms=5, retry_backoff_ms=50)
        try:
            expected = produce(producer, "before", 300, RECORD_BYTES)
            zk.create(kz.REASSIGN_PARTITIONS_PATH, kz.encode_reassignment({TP: RAR}), makepath=True)
            union = wait_until(
                lambda: (v := znode_view(zk)) is not None and set(v[0]) == set(OAR + RAR) and v,
                30,
                message="AR never became OAR + RAR",
            )
            assert not set(RAR) <= set(union[2]), f"the throttled replicas caught up at once: {union}"
            old_controller = cluster.controller_id()
            assert old_controller is not None
            cluster.kill_broker(old_controller)
            new_controller = wait_until(
                lambda: (c := cluster.controller_id()) not in (None, old_controller) and c,
                30,
                message="no new controller",
            )
            expected += produce(producer, "during", 50, RECORD_BYTES)
            view = znode_view(zk)
            assert view is not None and set(view[0]) == set(OAR + RAR), view  # still in flight
            assert zk.exists(kz.REASSIGN_PARTITIONS_PATH) is not None
            cluster.start_broker(old_controller)
            set_follower_throttle(zk, None)  # lift the throttle: the catch-up completes
            wait_until(lambda: reassignment_done(cluster), DONE_TIMEOUT_S, message="new controller did not finish")
            expected += produce(producer, "after", 50, RECORD_BYTES)
        finally:
            producer.close(timeout=30)
        state_change = (cluster.data_dir(int(new_controller)) / "state-change.log").read_text(encoding="utf-8")
        assert f"Completed reassignment of partition {TOPIC}-0 to replicas 4,5,6" in state_change
        assert_moved(cluster, expected)
