"""Brokers as real processes on loopback: topic creation, ISR replication, acks, recovery (issue 4's tests).

Requests go over the broker's gRPC API as a client library would send them;
the cluster's view is checked where a user checks it (`zkraft topics
--describe`, the znodes, what a consumer reads back).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from client.kafka import errors
from client.kafka.records import RecordBatchBuilder, iter_records
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

pytestmark = pytest.mark.integration
RPC_TIMEOUT_S = 30.0


def records(values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(None, value)
    return builder.build()


class Wire:
    """Blocking gRPC calls to one cluster's brokers, as a client library makes them."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self._channels: dict[int, grpc.Channel] = {}

    def stub(self, broker_id: int) -> broker_pb2_grpc.BrokerStub:
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = self._channels[broker_id] = grpc.insecure_channel(self.cluster.broker_address(broker_id))
        return broker_pb2_grpc.BrokerStub(channel)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def produce(self, broker_id: int, topic: str, partition: int, data: bytes, acks: int = -1, timeout_ms: int = 10000):
        request = pb.ProduceRequest(
            acks=acks,
            timeout_ms=timeout_ms,
            topics=[
                pb.TopicProduceData(name=topic, partitions=[pb.PartitionProduceData(index=partition, records=data)])
            ],
        )
        response = self.stub(broker_id).Produce(request, timeout=RPC_TIMEOUT_S)
        return response.responses[0].partitions[0]

    def fetch(self, broker_id: int, topic: str, partition: int, offset: int, replica_id: int = -1):
        request = pb.FetchRequest(
            replica_id=replica_id,
            max_wait_ms=0,
            min_bytes=1,
            topics=[
                pb.FetchTopic(
                    topic=topic,
                    partitions=[
                        pb.FetchPartition(
                            partition=partition,
                            fetch_offset=offset,
                            current_leader_epoch=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
        )
        return self.stub(broker_id).Fetch(request, timeout=RPC_TIMEOUT_S).responses[0].partitions[0]

    def consume_all(self, broker_id: int, topic: str, partition: int) -> list[tuple[int, bytes]]:
        """Every record up to the HW, from offset 0, as (offset, value)."""
        out: list[tuple[int, bytes]] = []
        offset = 0
        for _ in range(10_000):
            data = self.fetch(broker_id, topic, partition, offset)
            assert data.error_code == 0, errors.error_for(data.error_code, "")
            batch = [(r.offset, r.value) for r in iter_records(data.records) if r.offset >= offset]
            if not batch:
                return out
            out.extend(batch)
            offset = batch[-1][0] + 1
        raise AssertionError("consume_all did not reach the end")


@pytest.fixture
def cluster(tmp_path: Path):
    with KafkaCluster(tmp_path, brokers=3, broker_properties={"replica.lag.time.max.ms": "2000"}) as cluster:
        cluster.start()
        yield cluster


@pytest.fixture
def wire(cluster: KafkaCluster):
    client = Wire(cluster)
    yield client
    client.close()


def topics_tool(cluster: KafkaCluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, *args]
    return subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60)


def test_eight_partitions_rf3_get_leaders_replicas_and_full_isr(cluster: KafkaCluster) -> None:
    cluster.create_topic("orders", partitions=8, replication_factor=3)

    def all_isr_full() -> bool:
        states = [cluster.partition_state("orders", p) for p in range(8)]
        return all(s is not None and len(s.isr) == 3 for s in states)

    wait_until(all_isr_full, 30, message="ISR of every partition should hold all 3 replicas")
    assignment = cluster.assignment("orders")
    assert sorted(assignment) == list(range(8))
    leaders = []
    for p, replicas in assignment.items():
        assert sorted(replicas) == [1, 2, 3]
        state = cluster.partition_state("orders", p)
        assert state.leader == replicas[0], "a new partition's leader is its first live assigned replica"
        assert state.leader_epoch == 0
        leaders.append(state.leader)
    assert set(leaders) == {1, 2, 3}, "leadership is spread over the brokers"

    described = topics_tool(cluster, "--describe", "--topic", "orders")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Topic: orders\tPartitionCount: 8\tReplicationFactor: 3")
    for p in range(8):
        replicas = ",".join(map(str, assignment[p]))
        assert f"\tTopic: orders\tPartition: {p}\tLeader: {assignment[p][0]}\tReplicas: {replicas}\t" in lines[p + 1]


def test_acks_all_records_are_on_every_replica_and_read_back_in_order(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("events", partitions=2, replication_factor=3)
    wait_until(lambda: len(cluster.partition_state("events", 0).isr) == 3, 30, message="ISR never filled")
    leader = cluster.partition_state("events", 0).leader
    sent = []
    for i in range(20):
        values = [b"r-%d-%d" % (i, j) for j in range(10)]
        result = wire.produce(leader, "events", 0, records(values), acks=-1)
        assert result.error_code == 0, errors.error_for(result.error_code, result.error_message)
        assert result.base_offset == i * 10
        sent.extend(values)
    got = wire.consume_all(leader, "events", 0)
    assert [offset for offset, _ in got] == list(range(200))
    assert [value for _, value in got] == sent
    # acks=all: every ISR member holds the records; the followers' LEO is the leader's.
    for follower in {1, 2, 3} - {leader}:
        data = wire.fetch(leader, "events", 0, 0, replica_id=-2)  # debug read on the leader gives its LEO
        assert data.log_end_offset == 200
        follower_view = wire.fetch(follower, "events", 0, 0, replica_id=-2)
        assert follower_view.log_end_offset == 200, f"broker {follower} should hold all 200 acknowledged records"


def test_a_stopped_follower_leaves_the_isr_and_rejoins_after_sigcont(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("lag", partitions=1, replication_factor=3)
    wait_until(lambda: len(cluster.partition_state("lag", 0).isr) == 3, 30, message="ISR never filled")
    state = cluster.partition_state("lag", 0)
    follower = state.isr[-1] if state.isr[-1] != state.leader else state.isr[0]
    cluster.pause_broker(follower)
    try:
        for i in range(5):
            assert wire.produce(state.leader, "lag", 0, records([b"x%d" % i]), acks=1).error_code == 0
        wait_until(
            lambda: follower not in cluster.partition_state("lag", 0).isr,
            20,
            message=f"broker {follower} stayed in the ISR while stopped",
        )
        # With the follower out, acks=all succeeds on the remaining ISR and the HW moves on.
        result = wire.produce(state.leader, "lag", 0, records([b"after"]), acks=-1)
        assert result.error_code == 0
        assert wire.fetch(state.leader, "lag", 0, 0).high_watermark == 6
    finally:
        cluster.resume_broker(follower)
    wait_until(
        lambda: follower in cluster.partition_state("lag", 0).isr,
        30,
        message=f"broker {follower} did not rejoin the ISR after SIGCONT",
    )


def test_hw_never_passes_what_the_isr_holds(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("hw", partitions=1, replication_factor=3)
    wait_until(lambda: len(cluster.partition_state("hw", 0).isr) == 3, 30, message="ISR never filled")
    state = cluster.partition_state("hw", 0)
    followers = [b for b in state.isr if b != state.leader]
    cluster.pause_broker(followers[0])
    try:
        assert wire.produce(state.leader, "hw", 0, records([b"a", b"b", b"c"]), acks=1).error_code == 0
        data = wire.fetch(state.leader, "hw", 0, 0)
        # The stopped follower is still in the ISR (lag time not yet passed) and has nothing: HW stays 0.
        if followers[0] in cluster.partition_state("hw", 0).isr:
            assert data.high_watermark == 0
            assert list(iter_records(data.records)) == [], "a consumer must not see records above the HW"
    finally:
        cluster.resume_broker(followers[0])
    wait_until(lambda: wire.fetch(state.leader, "hw", 0, 0).high_watermark == 3, 30, message="HW never reached 3")


def test_acks_all_fails_when_the_isr_is_below_min_insync_replicas(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("safe", partitions=1, replication_factor=3, min_insync_replicas="3")
    wait_until(lambda: len(cluster.partition_state("safe", 0).isr) == 3, 30, message="ISR never filled")
    state = cluster.partition_state("safe", 0)
    assert wire.produce(state.leader, "safe", 0, records([b"ok"]), acks=-1).error_code == 0
    follower = next(b for b in state.isr if b != state.leader)
    cluster.kill_broker(follower)
    wait_until(
        lambda: follower not in cluster.partition_state("safe", 0).isr,
        30,
        message="the dead follower stayed in the ISR",
    )

    # The leader learns of the smaller ISR from the controller a moment after the znode changes;
    # until then an acks=all write fails after its append (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    def refused_before_append() -> bool:
        answer = wire.produce(state.leader, "safe", 0, records([b"refused"]), acks=-1, timeout_ms=2000)
        assert answer.error_code in (
            errors.NotEnoughReplicasError.code,
            errors.NotEnoughReplicasAfterAppendError.code,
            errors.RequestTimedOutError.code,
        ), errors.error_for(answer.error_code, answer.error_message)
        return answer.error_code == errors.NotEnoughReplicasError.code

    wait_until(refused_before_append, 30, message="acks=all below min.insync.replicas was not refused")
    # acks=1 does not need the ISR; invalid acks are refused.
    assert wire.produce(state.leader, "safe", 0, records([b"one"]), acks=1).error_code == 0
    assert wire.produce(state.leader, "safe", 0, records([b"two"]), acks=2).error_code == (
        errors.InvalidRequiredAcksError.code
    )


def test_a_corrupt_batch_is_refused_and_nothing_is_appended(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("crc", partitions=1, replication_factor=1)
    leader = cluster.partition_state("crc", 0).leader
    assert wire.produce(leader, "crc", 0, records([b"good"]), acks=1).error_code == 0
    damaged = bytearray(records([b"payload-to-damage"]))
    damaged[-3] ^= 0xFF  # a flipped bit in the record data: the CRC no longer matches
    result = wire.produce(leader, "crc", 0, bytes(damaged), acks=1)
    assert result.error_code == errors.CorruptRecordError.code
    truncated = records([b"cut short"])[:-4]
    assert wire.produce(leader, "crc", 0, truncated, acks=1).error_code == errors.CorruptRecordError.code
    assert wire.fetch(leader, "crc", 0, 0, replica_id=-2).log_end_offset == 1
    assert [v for _, v in wire.consume_all(leader, "crc", 0)] == [b"good"]


def test_a_broker_killed_mid_append_recovers_and_cuts_a_torn_tail(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("torn", partitions=1, replication_factor=1)
    leader = cluster.partition_state("torn", 0).leader
    for i in range(10):
        assert wire.produce(leader, "torn", 0, records([b"v%d" % i] * 5), acks=1).error_code == 0
    cluster.kill_broker(leader)
    # What a crash in the middle of a write leaves: half a batch at the end of the segment.
    segment = cluster.data_dir(leader) / "torn-0" / ("0" * 20 + ".log")
    whole = segment.read_bytes()
    segment.write_bytes(whole + records([b"half-written"])[:30])
    cluster.start_broker(leader)
    wait_until(lambda: cluster.partition_state("torn", 0).leader == leader, 30, message="leader did not return")

    def recovered() -> bool:
        try:
            return wire.fetch(leader, "torn", 0, 0, replica_id=-2).log_end_offset == 50
        except grpc.RpcError:
            return False

    wait_until(recovered, 30, message="the restarted broker should hold the 50 whole records")
    assert segment.stat().st_size == len(whole), "the torn tail must be cut from the segment"
    cut = cluster.log_events(leader, "log_truncated")
    assert cut, "recovery must log what it cut"
    result = wire.produce(leader, "torn", 0, records([b"after"]), acks=1)
    assert result.error_code == 0 and result.base_offset == 50


def test_segments_roll_and_any_offset_is_found(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=1, broker_properties={"log.segment.bytes": "4096"}) as small:
        small.start()
        small.create_topic("roll", partitions=1, replication_factor=1)
        wire = Wire(small)
        try:
            for i in range(60):
                values = [b"%04d-%s" % (i * 5 + j, b"p" * 60) for j in range(5)]
                assert wire.produce(1, "roll", 0, records(values), acks=1).error_code == 0
            segments = sorted((small.data_dir(1) / "roll-0").glob("*.log"))
            assert len(segments) > 5, "4 KiB segments must have rolled"
            assert all(s.with_suffix(".index").exists() and s.with_suffix(".timeindex").exists() for s in segments)
            bases = [int(s.stem) for s in segments]
            assert bases == sorted(bases) and bases[0] == 0
            for offset in (0, 1, 4, 5, 123, bases[2], bases[2] - 1, bases[-1], 299):
                data = wire.fetch(1, "roll", 0, offset)
                first = next(r for r in iter_records(data.records) if r.offset >= offset)
                assert first.offset == offset
                assert first.value.startswith(b"%04d-" % offset)
            out_of_range = wire.fetch(1, "roll", 0, 301)
            assert out_of_range.error_code == errors.OffsetOutOfRangeError.code
        finally:
            wire.close()


def test_a_restarted_broker_gets_its_partitions_back_and_rejoins_the_isr(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("back", partitions=3, replication_factor=3)
    wait_until(
        lambda: all(len(cluster.partition_state("back", p).isr) == 3 for p in range(3)), 30, message="ISR never filled"
    )
    victim = cluster.partition_state("back", 0).isr[-1]
    if victim == cluster.partition_state("back", 0).leader:
        victim = cluster.partition_state("back", 0).isr[0]
    cluster.kill_broker(victim)
    wait_until(
        lambda: victim not in cluster.partition_state("back", 0).isr, 30, message="dead broker stayed in the ISR"
    )
    leader = cluster.partition_state("back", 0).leader
    assert wire.produce(leader, "back", 0, records([b"while-away"] * 7), acks=-1).error_code == 0
    cluster.start_broker(victim)
    wait_until(
        lambda: all(victim in cluster.partition_state("back", p).isr for p in range(3)),
        40,
        message=f"broker {victim} did not rejoin every ISR",
    )
    assert wire.fetch(victim, "back", 0, 0, replica_id=-2).log_end_offset == 7


def test_a_broker_whose_session_expired_registers_again_and_rejoins(cluster: KafkaCluster, wire: Wire) -> None:
    cluster.create_topic("expire", partitions=1, replication_factor=3)
    wait_until(lambda: len(cluster.partition_state("expire", 0).isr) == 3, 30, message="ISR never filled")
    state = cluster.partition_state("expire", 0)
    victim = next(b for b in state.isr if b != state.leader and b != cluster.controller_id())
    old_epoch = cluster.zk.get(f"/brokers/ids/{victim}")[1].czxid
    cluster.pause_broker(victim)
    try:
        # Frozen past the session timeout: the quorum expires the session and its registration goes.
        wait_until(
            lambda: victim not in cluster.registered_brokers(), 30, message="the frozen broker stayed registered"
        )
    finally:
        cluster.resume_broker(victim)
    wait_until(lambda: victim in cluster.registered_brokers(), 30, message="the broker did not register again")
    assert cluster.zk.get(f"/brokers/ids/{victim}")[1].czxid > old_epoch, "a new registration is a new broker epoch"
    assert wire.produce(state.leader, "expire", 0, records([b"after-expiry"]), acks=1).error_code == 0
    wait_until(
        lambda: victim in cluster.partition_state("expire", 0).isr, 30, message="the broker did not rejoin the ISR"
    )
    assert cluster.log_events(victim, "session_reestablished"), "the broker should log the new session"
