"""The idempotent producer (KIP-98) against real processes: 3 quorum nodes and 3 brokers on loopback.

* A batch sent twice by a raw gRPC client with the same producer id and
  sequence is stored once; the second answer carries the first's offset.
* An idempotent `Producer` whose request times out after the leader wrote
  the batch (both followers paused): the retry is recognised, the batch is in
  the log once and its offset is the first attempt's.
* An idempotent `Producer` through a SIGKILL of a partition leader (RF 3,
  min.insync.replicas 2, acks all): reading every partition back, each record
  is there at most once, every acknowledged one is there, in send order.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import grpc
import pytest

from client import Consumer, Producer, TopicPartition
from client.kafka.errors import NONE, OutOfOrderSequenceNumberError, UnknownProducerIdError
from client.kafka.records import RecordBatchBuilder
from client.kafka.znodes import PRODUCER_ID_BLOCK_PATH
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("idempotence"), brokers=3) as kafka:
        kafka.start()
        yield kafka


def stub(cluster: KafkaCluster, broker_id: int) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.broker_address(broker_id)))


def batch(producer_id: int, sequence: int, count: int, tag: str) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(None, f"{tag}-{sequence + i}".encode())
    return builder.build(producer_id, 0, sequence)


def produce(leader: broker_pb2_grpc.BrokerStub, topic: str, records: bytes) -> pb.PartitionProduceResponse:
    request = pb.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topics=[pb.TopicProduceData(name=topic, partitions=[pb.PartitionProduceData(index=0, records=records)])],
    )
    response = leader.Produce(request, timeout=TIMEOUT_S)
    return response.responses[0].partitions[0]


def read_all(cluster: KafkaCluster, topic: str, partitions: int) -> dict[int, list[bytes]]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        end = consumer.end_offsets(tps)

        def caught_up() -> bool:
            for tp, records in consumer.poll(timeout_ms=500).items():
                out[tp.partition] += [r.value for r in records]
            return all(consumer.position(tp) >= end[tp] for tp in tps)

        wait_until(caught_up, TIMEOUT_S, message=f"could not read {topic} to its end")
    return out


def test_a_resent_batch_is_stored_once_with_the_first_offset(cluster: KafkaCluster) -> None:
    cluster.create_topic("dup", partitions=1, replication_factor=3, min_insync_replicas="2")
    granted = stub(cluster, 1).InitProducerId(pb.InitProducerIdRequest(), timeout=TIMEOUT_S)
    assert granted.error_code == NONE and granted.producer_id >= 0 and granted.producer_epoch == 0
    block = json.loads(cluster.zk.get(PRODUCER_ID_BLOCK_PATH)[0])
    assert block["version"] == 1 and int(block["block_start"]) <= granted.producer_id <= int(block["block_end"])
    pid = granted.producer_id
    leader = stub(cluster, cluster.partition_state("dup", 0).leader)

    first = produce(leader, "dup", batch(pid, 0, 3, "a"))
    again = produce(leader, "dup", batch(pid, 0, 3, "a"))
    assert (first.error_code, again.error_code) == (NONE, NONE)
    assert again.base_offset == first.base_offset
    nxt = produce(leader, "dup", batch(pid, 3, 2, "a"))
    assert nxt.error_code == NONE and nxt.base_offset == first.base_offset + 3
    gap = produce(leader, "dup", batch(pid, 9, 1, "a"))
    assert gap.error_code == OutOfOrderSequenceNumberError.code
    stranger = produce(leader, "dup", batch(pid + 1, 5, 1, "b"))
    assert stranger.error_code == UnknownProducerIdError.code

    values = read_all(cluster, "dup", 1)[0]
    assert values == [b"a-0", b"a-1", b"a-2", b"a-3", b"a-4"]
    assert cluster.log_events(cluster.partition_state("dup", 0).leader, "producer_batch_duplicate")


def test_a_retry_after_a_lost_answer_is_not_written_twice(cluster: KafkaCluster) -> None:
    cluster.create_topic("lost", partitions=1, replication_factor=3, min_insync_replicas="2")
    wait_until(lambda: len(cluster.partition_state("lost", 0).isr) == 3, TIMEOUT_S, message="ISR never filled")
    state = cluster.partition_state("lost", 0)
    followers = [b for b in state.isr if b != state.leader]
    with Producer(
        cluster.bootstrap_servers, enable_idempotence=True, linger_ms=0, request_timeout_ms=800, retry_backoff_ms=100
    ) as producer:
        producer.send("lost", b"warm-up").get(TIMEOUT_S)  # producer id granted, partition leader known
        for follower in followers:
            cluster.pause_broker(follower)
        try:
            # The leader writes the batch, the ISR cannot acknowledge it: the request times out and is retried.
            future = producer.send("lost", b"once")
            wait_until(lambda: producer.metrics().get("retries", 0) >= 2, TIMEOUT_S, message="no retry happened")
        finally:
            for follower in followers:
                cluster.resume_broker(follower)
        metadata = future.get(TIMEOUT_S)
    assert read_all(cluster, "lost", 1)[0] == [b"warm-up", b"once"]
    assert metadata.offset == 1
    assert cluster.log_events(state.leader, "producer_batch_duplicate")


def test_idempotent_producer_through_a_leader_kill_writes_each_record_once_in_order(cluster: KafkaCluster) -> None:
    topic, partitions, total = "idem", 3, 6000
    cluster.create_topic(topic, partitions=partitions, replication_factor=3, min_insync_replicas="2")
    victim = cluster.partition_state(topic, 0).leader
    futures = []
    killed = threading.Event()
    try:
        with Producer(
            cluster.bootstrap_servers,
            enable_idempotence=True,
            linger_ms=2,
            batch_size=2048,
            retry_backoff_ms=50,
            request_timeout_ms=10_000,
        ) as producer:
            for i in range(total):
                futures.append(producer.send(topic, b"%d" % i, partition=i % partitions))
                if i == total // 3:
                    cluster.kill_broker(victim)  # requests to it are in flight now
                    killed.set()
            producer.flush(TIMEOUT_S * 2)
            metrics = producer.metrics()
    finally:
        cluster.start_broker(victim)
    assert killed.is_set()
    acked = {i for i, f in enumerate(futures) if f.succeeded()}
    assert len(acked) >= total * 2 // 3, f"only {len(acked)} of {total} acknowledged; metrics {metrics}"

    log = read_all(cluster, topic, partitions)
    for p, values in log.items():
        counters = [int(v) for v in values]
        assert len(counters) == len(set(counters)), f"partition {p}: duplicates {_dupes(counters)[:10]}"
        assert counters == sorted(counters), f"partition {p}: records out of send order"
        assert all(c % partitions == p for c in counters)
        missing = sorted(i for i in acked if i % partitions == p and i not in set(counters))
        assert not missing, f"partition {p}: acknowledged records missing: {missing[:10]}"
    # Acknowledged offsets agree with where the records are.
    for i in acked:
        metadata = futures[i].get(0)
        assert metadata.offset >= 0
        assert log[metadata.partition][metadata.offset] == b"%d" % i


def _dupes(values: list[int]) -> list[int]:
    seen: set[int] = set()
    return [v for v in values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
