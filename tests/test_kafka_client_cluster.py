"""Producer, Consumer and Admin against a real cluster: 3 quorum nodes and 3 brokers on loopback.

What a user would check: everything acknowledged with acks=all comes back, in
order per partition; seek/position and beginning/end offsets agree with what
was produced; topics created through Admin are listed and described; a user's
mistake is a typed error naming the topic. Waiting is on conditions with
deadlines.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client import Admin, Consumer, NewTopic, Producer, TopicDescription, TopicPartition
from client.kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
BROKERS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka"), brokers=BROKERS) as kafka:
        kafka.start()
        yield kafka


@pytest.fixture
def admin(cluster: KafkaCluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap_servers) as client:
        yield client


def described(admin: Admin, name: str, partitions: int) -> TopicDescription:
    """The topic's description once the answering broker knows it with a leader for every partition.

    Brokers learn metadata from the controller asynchronously, so a broker may
    not know a topic another broker just created (as in Kafka).
    """

    def led() -> TopicDescription | None:
        try:
            (desc,) = admin.describe_topics([name])
        except UnknownTopicOrPartitionError:
            return None
        ok = len(desc.partitions) == partitions and all(p.leader >= 0 for p in desc.partitions)
        return desc if ok else None

    return wait_until(led, TIMEOUT_S, interval_s=0.05, message=f"topic {name} has partitions without a leader")  # type: ignore[return-value]


def create_and_wait(admin: Admin, name: str, partitions: int, replication_factor: int) -> None:
    admin.create_topics([NewTopic(name, partitions, replication_factor)], timeout_ms=30000)
    described(admin, name, partitions)


def test_acks_all_records_come_back_in_order_per_partition(cluster: KafkaCluster, admin: Admin) -> None:
    create_and_wait(admin, "orders", partitions=3, replication_factor=3)
    count = 3000
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        futures = [producer.send("orders", b"value-%d" % i, key=b"key-%d" % (i % 17)) for i in range(count)]
        producer.flush(TIMEOUT_S)
        sent = [(f.get(0), i) for i, f in enumerate(futures)]
    expected: dict[int, list[tuple[int, bytes]]] = {}
    for metadata, i in sent:
        expected.setdefault(metadata.partition, []).append((metadata.offset, b"value-%d" % i))
    with Consumer("orders", bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                  consumer_timeout_ms=3000) as consumer:  # fmt: skip
        got: dict[int, list[tuple[int, bytes]]] = {}
        for record in consumer:
            got.setdefault(record.partition, []).append((record.offset, record.value))
            if sum(map(len, got.values())) == count:
                break
    assert {p: sorted(v) for p, v in expected.items()} == got
    for p, records in got.items():
        assert [offset for offset, _ in records] == list(range(len(records))), f"gap or reorder in orders-{p}"


def test_seek_position_and_offsets(cluster: KafkaCluster, admin: Admin) -> None:
    create_and_wait(admin, "seeks", partitions=1, replication_factor=2)
    with Producer(cluster.bootstrap_servers, acks=-1) as producer:
        for i in range(20):
            producer.send("seeks", b"%d" % i)
        producer.flush(TIMEOUT_S)
    tp = TopicPartition("seeks", 0)
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, value_deserializer=int) as consumer:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 20}
        assert consumer.position(tp) == 20
        consumer.seek(tp, 15)
        records = []

        def got_five() -> bool:
            records.extend(consumer.poll(timeout_ms=500).get(tp, []))
            return len(records) >= 5

        wait_until(got_five, TIMEOUT_S, message="records 15..19 not fetched")
        assert [r.value for r in records] == [15, 16, 17, 18, 19]
        assert consumer.position(tp) == 20
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        assert consumer.partitions_for_topic("seeks") == {0}


def test_admin_creates_lists_and_describes(cluster: KafkaCluster, admin: Admin) -> None:
    create_and_wait(admin, "described", partitions=2, replication_factor=3)
    desc = described(admin, "described", 2)
    wait_until(lambda: "described" in admin.list_topics(), TIMEOUT_S, message="topic not listed")
    for partition in desc.partitions:
        assert sorted(partition.replicas) == [1, 2, 3]
        assert partition.leader in partition.replicas
    description = admin.describe_cluster()
    assert [b.node_id for b in description.brokers] == [1, 2, 3]
    assert description.controller_id in (1, 2, 3)
    with pytest.raises(TopicAlreadyExistsError, match="described"):
        admin.create_topics([NewTopic("described", 1, 1)])


def test_replication_factor_above_live_brokers_is_rejected(admin: Admin) -> None:
    with pytest.raises(InvalidReplicationFactorError, match="too-wide"):
        admin.create_topics([NewTopic("too-wide", 1, BROKERS + 1)])
    assert "too-wide" not in admin.list_topics()


def test_describing_a_missing_topic_names_it(admin: Admin) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="no-such-topic"):
        admin.describe_topics(["no-such-topic"])


def test_acknowledged_records_survive_a_leader_kill(cluster: KafkaCluster, admin: Admin) -> None:
    """acks=all through a SIGKILL of the partition leader: every acknowledged record is there, at its offset."""
    create_and_wait(admin, "failover", partitions=1, replication_factor=3)
    desc = described(admin, "failover", 1)
    leader = desc.partitions[0].leader
    futures = []
    try:
        with Producer(cluster.bootstrap_servers, acks="all", retry_backoff_ms=50, linger_ms=1) as producer:
            for i in range(400):
                futures.append(producer.send("failover", b"%d" % i))
            producer.flush(TIMEOUT_S)
            cluster.kill_broker(leader)
            for i in range(400, 800):
                futures.append(producer.send("failover", b"%d" % i))
            producer.flush(TIMEOUT_S)
    finally:
        cluster.start_broker(leader)
    acked = {}
    for i, future in enumerate(futures):
        if future.succeeded():
            acked[future.get(0).offset] = b"%d" % i
    assert len(acked) >= 400
    tp = TopicPartition("failover", 0)
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        log: dict[int, bytes] = {}

        def caught_up() -> bool:
            for record in consumer.poll(timeout_ms=500).get(tp, []):
                log[record.offset] = record.value
            return consumer.position(tp) >= end

        wait_until(caught_up, TIMEOUT_S, message="could not read the failover topic to its end")
    missing = {offset: value for offset, value in acked.items() if log.get(offset) != value}
    assert not missing, f"acknowledged records lost or changed: {sorted(missing)[:10]}"
