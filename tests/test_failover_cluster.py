"""Broker and controller failover, unclean election, controlled shutdown (issue 5's tests).

Real processes on loopback (3 quorum nodes, 3 brokers), SIGKILL and SIGTERM.
What is checked is what a user checks: the state znodes (leader, leader
epoch, ISR), the controller's logs, and — the point of it all — that every
record acknowledged with acks=all (RF 3, min.insync.replicas 2, clean
elections) is read back exactly once per partition, in send order
(tests/delivery_checker.py; docs/research/kafka.md §7.3).

Waiting is `wait_until` with deadlines; every loop is bounded in count and
time. The nemesis's dwell times are the only sleeps: they are the fault
schedule, not synchronisation.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from client import Consumer, Producer, TopicPartition
from client.kafka import errors
from client.kafka.errors import KafkaError
from tests.delivery_checker import check, make_value
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env
from tests.test_broker_cluster import Wire, records
from zkraft_proto import broker_pb2 as pb

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 4.0  # the harness's zookeeper.session.timeout.ms
ELECTION_DEADLINE_S = 30.0
SETTLE_DEADLINE_S = 60.0
# New controller within session timeout + one election; generous for a loaded 2-CPU CI box.
CONTROLLER_FAILOVER_DEADLINE_S = 20.0
NEMESIS_DURATION_S = 40.0
NEMESIS_ROUNDS_MAX = 30
PRODUCER_IN_FLIGHT_MAX = 200  # outstanding futures before the load thread waits for the oldest
PRODUCE_WAIT_S = 150.0  # longer than the producer's delivery timeout: a future always completes by then
STALE = errors.StaleControllerEpochError.code  # 11


def producer_supports_idempotence() -> bool:
    return "enable_idempotence" in inspect.signature(Producer.__init__).parameters


# ---------------------------------------------------------------- workload


class ProduceLoad:
    """One producer thread sending unique values round-robin over partitions, acks=all, until stopped.

    Keeps at most PRODUCER_IN_FLIGHT_MAX futures outstanding; records every
    acknowledgement (partition, offset, value, time) and every failure.
    """

    def __init__(self, cluster: KafkaCluster, topic: str, partitions: int, name: str = "p") -> None:
        self.topic, self.partitions, self.name = topic, partitions, name
        options: dict[str, Any] = {"acks": "all", "linger_ms": 2, "retry_backoff_ms": 50, "delivery_timeout_ms": 120000}
        if producer_supports_idempotence():
            options["enable_idempotence"] = True
        self.idempotent = "enable_idempotence" in options
        self.producer = Producer(cluster.bootstrap_servers, **options)
        self.acked: list[tuple[int, int, bytes]] = []
        self.ack_times: dict[int, float] = {}  # partition -> monotonic time of its last acknowledgement
        self.failed: list[tuple[int, bytes, str]] = []
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-{name}", daemon=True)

    def __enter__(self) -> ProduceLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        pending: collections.deque[Any] = collections.deque()
        seq = 0
        while not self._stop.is_set():
            partition = seq % self.partitions
            value = make_value(self.name, seq)
            future = self.producer.send(self.topic, value=value, partition=partition)
            future.add_both(lambda result, p=partition, v=value: self._done(p, v, result))
            pending.append(future)
            seq += 1
            self.sent = seq
            while len(pending) >= PRODUCER_IN_FLIGHT_MAX and not self._stop.is_set():
                oldest = pending[0]
                with contextlib.suppress(KafkaError):  # a failure is recorded by _done; a timeout: wait on
                    oldest.get(timeout=0.5)
                if oldest.is_done:
                    pending.popleft()

    def _done(self, partition: int, value: bytes, result: object) -> None:
        with self._lock:
            if isinstance(result, BaseException):
                self.failed.append((partition, value, repr(result)))
            else:
                self.acked.append((partition, result.offset, value))
                self.ack_times[partition] = time.monotonic()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def acked_since(self, when: float) -> set[int]:
        with self._lock:
            return {p for p, t in self.ack_times.items() if t > when}

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self.producer.flush(timeout=PRODUCE_WAIT_S)
        self.producer.close(timeout=30)

    def history(self) -> tuple[list[tuple[int, int, bytes]], list[tuple[int, bytes, str]]]:
        with self._lock:
            return list(self.acked), list(self.failed)


def read_back(cluster: KafkaCluster, topic: str, partitions: int, timeout_s: float = 60.0) -> dict[int, list]:
    """What a consumer reads from offset 0 up to each partition's end (the HW), as (offset, value)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                positions = {tp.partition: consumer.position(tp) for tp in tps}
                raise AssertionError(f"read_back did not reach the end: positions {positions}, ends {ends}")
            for tp, batch in consumer.poll(timeout_ms=500).items():
                out[tp.partition].extend((r.offset, r.value) for r in batch)
    return out


# ---------------------------------------------------------------- cluster views


def states(cluster: KafkaCluster, topic: str, partitions: int) -> dict[int, Any]:
    return {p: cluster.partition_state(topic, p) for p in range(partitions)}


def wait_full_isr(cluster: KafkaCluster, topic: str, partitions: int, size: int, timeout_s: float = SETTLE_DEADLINE_S):
    def full() -> bool:
        return all(
            s is not None and s.leader >= 0 and len(s.isr) == size for s in states(cluster, topic, partitions).values()
        )

    wait_until(full, timeout_s, interval_s=0.1, message=f"ISRs of {topic} did not fill to {size}")


def controller_epoch(cluster: KafkaCluster) -> int:
    data, _ = cluster.zk.get("/controller_epoch")
    return int(data)


def topics_tool(cluster: KafkaCluster, *args: str) -> None:
    command = [sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, *args]
    done = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def state_change_lines(cluster: KafkaCluster, broker_id: int) -> list[str]:
    path = cluster.data_dir(broker_id) / "state-change.log"
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path, brokers=3, broker_properties={"replica.lag.time.max.ms": "2000"}) as kafka:
        kafka.start()
        yield kafka


@pytest.fixture
def wire(cluster: KafkaCluster) -> Iterator[Wire]:
    client = Wire(cluster)
    yield client
    client.close()


# ---------------------------------------------------------------- broker failover


def test_killing_the_busiest_leader_moves_every_partition_to_its_isr_and_loses_nothing(cluster: KafkaCluster) -> None:
    topic, n = "failover", 6
    cluster.create_topic(topic, partitions=n, replication_factor=3, min_insync_replicas="2")
    wait_full_isr(cluster, topic, n, 3)
    with ProduceLoad(cluster, topic, n) as load:
        wait_until(lambda: load.acked_count() >= 300, 60, message="production never got going")
        before = states(cluster, topic, n)
        led = collections.Counter(s.leader for s in before.values())
        controller = cluster.controller_id()
        # The busiest leader; among equals, not the controller, so this is a broker failover only.
        victim = max(led, key=lambda b: (led[b], b != controller))
        moved = [p for p, s in before.items() if s.leader == victim]
        cluster.kill_broker(victim)

        def new_leaders() -> bool:
            now = states(cluster, topic, n)
            return all(now[p].leader not in (victim, -1) for p in moved)

        wait_until(new_leaders, ELECTION_DEADLINE_S, interval_s=0.05, message=f"partitions {moved} kept no leader")
        elected_at = time.monotonic()
        after = states(cluster, topic, n)
        for p in moved:
            assert after[p].leader in before[p].isr, f"partition {p}: leader {after[p].leader} not from the old ISR"
            assert after[p].leader_epoch == before[p].leader_epoch + 1, (p, before[p], after[p])
            assert victim not in after[p].isr
        wait_until(
            lambda: load.acked_since(elected_at) >= set(range(n)),
            ELECTION_DEADLINE_S,
            message=f"production did not resume on every partition (acked since: {load.acked_since(elected_at)})",
        )
        cluster.start_broker(victim)
        wait_full_isr(cluster, topic, n, 3)
        acked_before_stop = load.acked_count()
    assert acked_before_stop > 300
    acked, failed = load.history()
    report = check(acked, read_back(cluster, topic, n))
    print(f"broker failover idempotent={load.idempotent} failed={len(failed)}: {report.summary()}")
    assert report.ok, f"idempotent={load.idempotent}: {report.summary()}"
    assert report.acked == len(acked) and not report.unexpected


def test_nemesis_kills_and_restarts_brokers_and_the_controller_without_losing_acknowledged_records(
    cluster: KafkaCluster,
) -> None:
    topic, n = "nemesis", 6
    seed = int(os.environ.get("NEMESIS_SEED", time.time()))  # the fault schedule; timing is not replayable
    rng = random.Random(seed)
    cluster.create_topic(topic, partitions=n, replication_factor=3, min_insync_replicas="2")
    wait_full_isr(cluster, topic, n, 3)
    actions: list[str] = []
    epochs_before = sum(s.leader_epoch for s in states(cluster, topic, n).values())
    with ProduceLoad(cluster, topic, n) as load:
        wait_until(lambda: load.acked_count() >= 100, 60, message="production never got going")
        started = time.monotonic()
        for _ in range(NEMESIS_ROUNDS_MAX):
            if time.monotonic() - started > NEMESIS_DURATION_S:
                break
            # One broker down at a time, and only once every ISR is full again: min.insync=2 holds throughout.
            target = cluster.controller_id() if rng.random() < 0.4 else rng.choice(cluster.broker_ids)
            assert target is not None
            actions.append(f"t={time.monotonic() - started:.1f} kill {target} (controller={cluster.controller_id()})")
            cluster.kill_broker(target)
            time.sleep(rng.uniform(0.2, 3.0))  # the fault's dwell time (a schedule, not synchronisation)
            cluster.start_broker(target)
            wait_full_isr(cluster, topic, n, 3)
            cluster.wait_controller(ELECTION_DEADLINE_S)
        acked_during = load.acked_count()
    acked, failed = load.history()
    report = check(acked, read_back(cluster, topic, n))
    context = f"seed={seed} idempotent={load.idempotent} actions={actions} failed={len(failed)}"
    assert len(actions) >= 3, context
    assert sum(s.leader_epoch for s in states(cluster, topic, n).values()) > epochs_before, "no leadership moved"
    assert acked_during > 100, context
    print(f"nemesis {context}: {report.summary()}")
    assert report.ok, f"{context}: {report.summary()}"


# ---------------------------------------------------------------- unclean election


def test_whole_isr_dead_goes_offline_unless_unclean_election_is_enabled(tmp_path: Path) -> None:
    props = {"replica.lag.time.max.ms": "1000"}
    with KafkaCluster(tmp_path, brokers=3, broker_properties=props) as cluster:
        cluster.start()
        controller = cluster.wait_controller()
        leader, follower = (b for b in cluster.broker_ids if b != controller)
        # Both topics on the same two replicas, neither on the controller (which must survive).
        for topic, configs in (("clean", []), ("dirty", ["--config", "unclean.leader.election.enable=true"])):
            topics_tool(cluster, "--create", "--topic", topic, "--replica-assignment", f"{leader}:{follower}", *configs)
            cluster.wait_leaders(topic, 1)
            wait_full_isr(cluster, topic, 1, 2)
        wire = Wire(cluster)
        try:
            for topic in ("clean", "dirty"):
                assert cluster.partition_state(topic, 0).leader == leader
                assert wire.produce(leader, topic, 0, records([b"both-0", b"both-1"]), acks=-1).error_code == 0
            cluster.pause_broker(follower)
            try:
                for topic in ("clean", "dirty"):
                    assert wire.produce(leader, topic, 0, records([b"leader-only"]), acks=1).error_code == 0
                wait_until(
                    lambda: all(cluster.partition_state(t, 0).isr == (leader,) for t in ("clean", "dirty")),
                    20,
                    interval_s=0.05,
                    message=f"stopped follower {follower} stayed in the ISR",
                )
                cluster.kill_broker(leader)  # the whole ISR is dead; the follower is out of sync
            finally:
                cluster.resume_broker(follower)
            before = {t: cluster.partition_state(t, 0) for t in ("clean", "dirty")}

            # unclean.leader.election.enable=true: the out-of-sync replica takes over, ISR = itself.
            wait_until(
                lambda: cluster.partition_state("dirty", 0).leader == follower,
                ELECTION_DEADLINE_S,
                message="the out-of-sync replica did not take over with unclean election enabled",
            )
            dirty = cluster.partition_state("dirty", 0)
            assert dirty.isr == (follower,) and dirty.leader_epoch > before["dirty"].leader_epoch
            events = [e for e in cluster.log_events(controller, "unclean_leader_election") if e.get("topic") == "dirty"]
            assert events and events[0]["leader"] == follower, "the controller logs the unclean election"

            # Disabled (the default): no live ISR member, so the partition is offline.
            wait_until(
                lambda: cluster.partition_state("clean", 0).leader == -1,
                ELECTION_DEADLINE_S,
                message="partition stayed led by the dead broker's id",
            )
            wait_until(lambda: follower in cluster.registered_brokers(), 30, message="follower did not come back")
            cluster.wait_leaders("dirty", 1)  # the controller has seen the follower alive ...
            assert cluster.partition_state("clean", 0).leader == -1, "... and still elects no unclean leader"
            assert not cluster.log_events(controller, "unclean_leader_election")[1:], "only 'dirty' went unclean"

            # An ISR member returns: the clean partition is back, with its leader-only record.
            cluster.start_broker(leader)
            wait_until(
                lambda: cluster.partition_state("clean", 0).leader == leader,
                ELECTION_DEADLINE_S,
                message="the clean partition did not come back when its ISR member returned",
            )
            assert cluster.partition_state("clean", 0).leader_epoch > before["clean"].leader_epoch
            values = wait_until(lambda: _values_or_none(wire, leader, "clean"), 20, message="clean unreadable")
            assert values == [b"both-0", b"both-1", b"leader-only"]

            # The state-change log of the controller records the out-of-sync pick.
            lines = state_change_lines(cluster, controller)
            took_over = [
                line for line in lines
                if "Changed partition dirty-0 from OfflinePartition to OnlinePartition" in line
                and f"LeaderAndIsr(leader={follower}," in line
            ]  # fmt: skip
            assert took_over, "state-change.log has no OfflinePartition -> OnlinePartition line for dirty-0"
            unclean_lines = [line for line in lines if "unclean" in line.lower() and "dirty" in line]
            assert unclean_lines, (
                "state-change.log does not say the election of dirty-0 was unclean; lines about dirty-0:\n"
                + "\n".join(line for line in lines if "dirty" in line)
            )
        finally:
            wire.close()


def _values_or_none(wire: Wire, broker_id: int, topic: str) -> list[bytes] | None:
    try:
        got = [value for _, value in wire.consume_all(broker_id, topic, 0)]
    except (grpc.RpcError, AssertionError):
        return None
    return got if len(got) >= 3 else None


# ---------------------------------------------------------------- controller failover


def test_a_new_controller_takes_over_with_a_higher_epoch_and_stale_requests_are_rejected(
    cluster: KafkaCluster, wire: Wire
) -> None:
    topic, n = "ctl", 6
    cluster.create_topic(topic, partitions=n, replication_factor=3)
    wait_full_isr(cluster, topic, n, 3)
    old_controller = cluster.wait_controller()
    old_epoch = controller_epoch(cluster)
    cluster.kill_broker(old_controller)
    killed_at = time.monotonic()

    def new_controller() -> int | None:
        current = cluster.controller_id()
        return current if current not in (None, old_controller) and controller_epoch(cluster) > old_epoch else None

    successor = int(
        wait_until(new_controller, CONTROLLER_FAILOVER_DEADLINE_S, interval_s=0.02, message="no new controller")
    )
    took_s = time.monotonic() - killed_at
    new_epoch = controller_epoch(cluster)
    assert new_epoch == old_epoch + 1
    print(f"controller {old_controller} -> {successor}, epoch {old_epoch} -> {new_epoch} in {took_s:.2f} s")
    assert took_s < CONTROLLER_FAILOVER_DEADLINE_S

    # A live broker that leads a partition the new controller moved has seen the new epoch: it accepts writes
    # as that partition's leader only after applying the new controller's LeaderAndIsr.
    def moved_and_writable() -> tuple[int, int] | None:
        for p, s in states(cluster, topic, n).items():
            if s.controller_epoch == new_epoch and s.leader not in (-1, old_controller):
                if wire.produce(s.leader, topic, p, records([b"probe"]), acks=-1).error_code == 0:
                    return s.leader, p
        return None

    found = wait_until(moved_and_writable, ELECTION_DEADLINE_S, interval_s=0.1, message="no moved partition writable")
    target, partition = found  # type: ignore[misc]
    state = cluster.partition_state(topic, partition)
    other = next(b for b in state.isr if b != target)
    stale_lai = pb.LeaderAndIsrRequest(
        controller_id=old_controller,
        controller_epoch=old_epoch,
        partition_states=[
            pb.LeaderAndIsrPartitionState(
                topic_name=topic,
                partition_index=partition,
                controller_epoch=old_epoch,
                leader=other,
                leader_epoch=state.leader_epoch + 10,  # would be applied if the controller epoch were not checked
                isr=list(state.isr),
                zk_version=0,
                replicas=list(cluster.assignment(topic)[partition]),
            )
        ],
    )
    assert wire.stub(target).LeaderAndIsr(stale_lai, timeout=30).error_code == STALE
    stale_um = pb.UpdateMetadataRequest(
        controller_id=old_controller,
        controller_epoch=old_epoch,
        partition_states=[
            pb.UpdateMetadataPartitionState(
                topic_name=topic,
                partition_index=partition,
                controller_epoch=old_epoch,
                leader=other,
                leader_epoch=state.leader_epoch + 10,
                isr=list(state.isr),
                replicas=list(cluster.assignment(topic)[partition]),
            )
        ],
        live_brokers=[],
    )
    assert wire.stub(target).UpdateMetadata(stale_um, timeout=30).error_code == STALE
    stale_stop = pb.StopReplicaRequest(
        controller_id=old_controller,
        controller_epoch=old_epoch,
        partitions=[pb.StopReplicaPartition(topic_name=topic, partition_index=partition, delete_partition=True)],
    )
    assert wire.stub(target).StopReplica(stale_stop, timeout=30).error_code == STALE

    # Nothing changed: the target still leads and accepts writes, its metadata names it, the znode is as it was.
    assert wire.produce(target, topic, partition, records([b"after-stale"]), acks=-1).error_code == 0
    metadata = wire.stub(target).Metadata(pb.MetadataRequest(topics=[topic]), timeout=30)
    described = next(p for p in metadata.topics[0].partitions if p.partition_index == partition)
    assert described.leader_id == target and described.leader_epoch == state.leader_epoch
    assert cluster.partition_state(topic, partition) == state
    assert (cluster.data_dir(target) / f"{topic}-{partition}").is_dir()


# ---------------------------------------------------------------- controlled shutdown


def test_controlled_shutdown_of_each_broker_in_turn_fails_no_produce_request(cluster: KafkaCluster) -> None:
    topic, n = "rolling", 6
    cluster.create_topic(topic, partitions=n, replication_factor=3, min_insync_replicas="2")
    wait_full_isr(cluster, topic, n, 3)
    with ProduceLoad(cluster, topic, n) as load:
        wait_until(lambda: load.acked_count() >= 100, 60, message="production never got going")
        for broker_id in cluster.broker_ids:
            led_before = [p for p, s in states(cluster, topic, n).items() if s.leader == broker_id]
            code = cluster.stop_broker(broker_id)
            assert code == 0, cluster.log_tail(broker_id)
            succeeded = cluster.log_events(broker_id, "controlled_shutdown_succeeded")
            assert succeeded, (
                f"broker {broker_id} exited without a successful controlled shutdown\n{cluster.log_tail(broker_id)}"
            )
            now = states(cluster, topic, n)
            assert all(s.leader != broker_id for s in now.values()), (broker_id, now)
            assert all(s.leader >= 0 for s in now.values()), f"a partition went offline: {now}"
            # Moved by the controller (a leader epoch bump), not by the broker's session expiring.
            assert all(now[p].leader_epoch > 0 for p in led_before)
            cluster.start_broker(broker_id)
            wait_full_isr(cluster, topic, n, 3)
            acked_since = load.acked_count()
            wait_until(lambda n0=acked_since: load.acked_count() > n0 + 50, 30, message="production stalled")
    acked, failed = load.history()
    report = check(acked, read_back(cluster, topic, n))
    print(f"controlled shutdown failed={len(failed)}: {report.summary()}")
    assert failed == [], f"{len(failed)} produce requests failed, e.g. {failed[:5]}"
    assert report.ok, report.summary()
