"""Consumer groups through the Kafka listener, with Kafka's own clients: a 3-broker cluster of real processes.

What a user of librdkafka (confluent-kafka), kafka-python or aiokafka checks: consumers in one group split a
4-partition topic (two partitions each), commit, and a new consumer of the group resumes after the committed
offsets; a group mixes our SDK's consumer (gRPC) with a librdkafka consumer and they share the partitions;
the admin clients list, describe, alter, delete offsets of and delete groups; a static member
(group.instance.id, KIP-345) restarted within its session timeout gets its partitions back without a rebalance.
Records are written by our SDK's producer (gRPC), so these tests need the group APIs and Fetch only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import grpc
import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kafka_errors

from client import Consumer, Producer, TopicPartition
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

pytestmark = pytest.mark.integration

TIMEOUT_S = 90.0
PARTITIONS = 4
RECORDS = 40
SESSION_TIMEOUT_MS = 6000
BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("wire-groups"), brokers=3, broker_properties=BROKER_PROPERTIES) as kafka:
        kafka.start()
        yield kafka


def new_topic(cluster: KafkaCluster, records: int = RECORDS) -> str:
    """A fresh 4-partition topic (RF 3) holding `records` records, values b"v<i>", written by the SDK.

    It is returned once every broker's metadata has it: a group leader that assigns from metadata lacking the
    topic assigns it to nobody until its next metadata refresh (kafka-python's range assignor logs
    "No partition metadata for topic"), the same race a just-created topic has on Kafka.
    """
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    for broker_id in cluster.broker_ids:
        with grpc.insecure_channel(cluster.broker_address(broker_id)) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)

            def known(stub: broker_pb2_grpc.BrokerStub = stub) -> bool:
                [found] = stub.Metadata(pb.MetadataRequest(topics=[topic]), timeout=10).topics
                return found.error_code == 0 and len(found.partitions) == PARTITIONS

            wait_until(known, TIMEOUT_S, 0.05, f"broker {broker_id} never learnt of {topic}")
    produce(cluster, topic, 0, records)
    return topic


def produce(cluster: KafkaCluster, topic: str, start: int, count: int) -> None:
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        for i in range(start, start + count):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i)
        producer.flush(TIMEOUT_S)


def values(start: int, count: int) -> set[bytes]:
    return {b"v%d" % i for i in range(start, start + count)}


def rd_consumer(cluster: KafkaCluster, group: str, **overrides: object) -> RdConsumer:
    return RdConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 300,
            **overrides,
        }
    )


def rd_poll(consumers: list[RdConsumer], seen: dict[int, set[bytes]]) -> None:
    """One short poll of each consumer; every record it got is added to seen[consumer index]."""
    for index, consumer in enumerate(consumers):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            seen.setdefault(index, set()).add(message.value())


def partitions_of(consumer: RdConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


# ---------------------------------------------------------------- librdkafka


def test_librdkafka_consumers_split_commit_and_resume(cluster: KafkaCluster) -> None:
    topic, group = new_topic(cluster, records=0), f"rd-{uuid.uuid4().hex[:6]}"
    consumers = [rd_consumer(cluster, group, **{"client.id": f"rd-{i}"}) for i in range(2)]
    for consumer in consumers:
        consumer.subscribe([topic])
    seen: dict[int, set[bytes]] = {}

    # The records are written once the group has settled: before that, the first member to join may hold
    # every partition, and what it read would be read again by the other after the split (at-least-once).
    def split() -> bool:
        rd_poll(consumers, seen)
        return [len(partitions_of(c)) for c in consumers] == [2, 2]

    wait_until(split, TIMEOUT_S, 0.01, "two librdkafka consumers never split the topic")
    assert partitions_of(consumers[0]) | partitions_of(consumers[1]) == set(range(PARTITIONS))
    produce(cluster, topic, 0, RECORDS)

    def consumed() -> bool:
        rd_poll(consumers, seen)
        return set().union(set(), *seen.values()) == values(0, RECORDS)

    wait_until(consumed, TIMEOUT_S, 0.01, "two librdkafka consumers never read the topic")
    assert seen[0] and seen[1] and not seen[0] & seen[1]  # both read, each record by one member only
    for consumer in consumers:
        consumer.commit(asynchronous=False)
        consumer.close()

    produce(cluster, topic, RECORDS, 8)
    resumed = rd_consumer(cluster, group)
    committed = resumed.committed([RdTopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    assert sum(tp.offset for tp in committed) == RECORDS  # every partition committed at its end
    resumed.subscribe([topic])
    after: dict[int, set[bytes]] = {}
    try:
        wait_until(
            lambda: rd_poll([resumed], after) or after.get(0, set()) >= values(RECORDS, 8),
            TIMEOUT_S,
            0.01,
            "the restarted consumer never read the new records",
        )
        assert after[0] == values(RECORDS, 8)  # nothing before the committed offsets is read again
    finally:
        resumed.close()


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(cluster: KafkaCluster) -> None:
    topic, group = new_topic(cluster, records=0), f"static-{uuid.uuid4().hex[:6]}"
    events: list[str] = []

    def static(instance: str, record: bool) -> RdConsumer:
        consumer = rd_consumer(cluster, group, **{"group.instance.id": instance, "session.timeout.ms": 30000})
        consumer.subscribe(
            [topic],
            on_assign=lambda c, ps: events.append(f"{instance}:assign") if record else None,
            on_revoke=lambda c, ps: events.append(f"{instance}:revoke") if record else None,
        )
        return consumer

    a, b = static("host-a", record=False), static("host-b", record=True)
    wait_until(
        lambda: rd_poll([a, b], {}) or [len(partitions_of(a)), len(partitions_of(b))] == [2, 2],
        TIMEOUT_S,
        0.01,
        "the static members never split the topic",
    )
    before_a, before_b = partitions_of(a), partitions_of(b)
    events.clear()
    a.close()  # a static member does not leave the group on close (KIP-345)
    restarted = static("host-a", record=False)
    try:
        wait_until(
            lambda: rd_poll([restarted, b], {}) or len(partitions_of(restarted)) == 2,
            TIMEOUT_S,
            0.01,
            "the restarted static member never got partitions",
        )
        assert partitions_of(restarted) == before_a
        for _ in range(20):  # b keeps polling through the restart (a bounded number of rounds)
            rd_poll([restarted, b], {})
        assert partitions_of(b) == before_b and events == []  # b saw no revocation and no new assignment
        replaced = [e for bid in cluster.broker_ids for e in cluster.log_events(bid, "static_member_replaced")]
        assert any(e["group"] == group and e["group_instance_id"] == "host-a" for e in replaced)
    finally:
        restarted.close()
        b.close()


# ---------------------------------------------------------------- kafka-python and aiokafka


def test_kafka_python_group_consumer_commits_and_resumes(cluster: KafkaCluster) -> None:
    topic, group = new_topic(cluster), f"kp-{uuid.uuid4().hex[:6]}"

    def consumer() -> KafkaConsumer:
        c = KafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=300,
        )
        # The topic's metadata first: a kafka-python leader that joins before its metadata response assigns
        # nothing ("No partition metadata for topic") and, rejoining, kafka-python 3.0.12 was seen to stall.
        wait_until(lambda: c.partitions_for_topic(topic), TIMEOUT_S, 0.05, "kafka-python never saw the topic")
        c.subscribe([topic])
        return c

    def read(c: KafkaConsumer, want: set[bytes]) -> set[bytes]:
        got: set[bytes] = set()

        def done() -> bool:
            for records in c.poll(timeout_ms=100).values():
                got.update(r.value for r in records)
            return got >= want

        wait_until(done, TIMEOUT_S, 0.01, "kafka-python never read the records")
        return got

    first = consumer()
    assert read(first, values(0, RECORDS)) == values(0, RECORDS)
    first.commit()
    assert sum(first.committed(KpTopicPartition(topic, p)) for p in range(PARTITIONS)) == RECORDS
    first.close()
    produce(cluster, topic, RECORDS, 5)
    second = consumer()
    try:
        assert read(second, values(RECORDS, 5)) == values(RECORDS, 5)
    finally:
        second.close()


def test_aiokafka_group_consumer_commits_and_resumes(cluster: KafkaCluster) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = new_topic(cluster), f"aio-{uuid.uuid4().hex[:6]}"

    async def read(want: set[bytes], commit: bool) -> set[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.kafka_bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=300,
        )
        await consumer.start()
        got: set[bytes] = set()
        try:
            async with asyncio.timeout(TIMEOUT_S):
                while not got >= want:
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        got.update(r.value for r in records)
            if commit:
                await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(read(values(0, RECORDS), commit=True)) == values(0, RECORDS)
    produce(cluster, topic, RECORDS, 5)
    assert asyncio.run(read(values(RECORDS, 5), commit=False)) == values(RECORDS, 5)


# ---------------------------------------------------------------- both front ends in one group


def test_sdk_and_librdkafka_consumers_share_one_group(cluster: KafkaCluster) -> None:
    topic, group = new_topic(cluster, records=0), f"mixed-{uuid.uuid4().hex[:6]}"
    sdk = Consumer(
        topic,
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=300,
    )
    rd = rd_consumer(cluster, group, **{"partition.assignment.strategy": "range"})
    rd.subscribe([topic])
    sdk_seen: set[bytes] = set()
    rd_seen: dict[int, set[bytes]] = {}

    def poll_both() -> None:
        for records in sdk.poll(100).values():
            sdk_seen.update(r.value for r in records)
        rd_poll([rd], rd_seen)

    def split() -> bool:
        poll_both()
        mine, theirs = {tp.partition for tp in sdk.assignment()}, partitions_of(rd)
        return len(mine) == len(theirs) == 2 and mine | theirs == set(range(PARTITIONS))

    try:
        wait_until(split, TIMEOUT_S, 0.01, "the SDK and librdkafka consumers never split the topic")
        produce(cluster, topic, 0, RECORDS)
        wait_until(
            lambda: poll_both() or sdk_seen | rd_seen.get(0, set()) == values(0, RECORDS),
            TIMEOUT_S,
            0.01,
            "the two consumers never read every record",
        )
        assert sdk_seen and rd_seen[0] and not sdk_seen & rd_seen[0]  # both read, no record twice
        admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
        members = admin.describe_consumer_groups([group])[group].result().members
        assert len(members) == 2
        sdk.commit()
        rd.commit(asynchronous=False)
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
        assert sum(tp.offset for tp in offsets.topic_partitions if tp.topic == topic) == RECORDS
        assert sum(sdk.committed(TopicPartition(topic, p)) or 0 for p in range(PARTITIONS)) == RECORDS
    finally:
        sdk.close(autocommit=False)
        rd.close()


# ---------------------------------------------------------------- admin clients


def test_confluent_admin_lists_describes_alters_and_deletes_groups(cluster: KafkaCluster) -> None:
    topic, group = new_topic(cluster, records=0), f"adm-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    member = rd_consumer(cluster, group, **{"client.id": "admin-test-member"})
    member.subscribe([topic])
    wait_until(lambda: member.poll(0.1) or len(partitions_of(member)) == PARTITIONS, TIMEOUT_S, 0.01, "never joined")

    listed = admin.list_consumer_groups().result()
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result()
    assert str(described.state).endswith("STABLE") and described.partition_assignor == "range"
    [m] = described.members
    assert m.client_id == "admin-test-member" and m.host.endswith("127.0.0.1")
    assert {tp.partition for tp in m.assignment.topic_partitions} == set(range(PARTITIONS))
    with pytest.raises(KafkaException):  # NON_EMPTY_GROUP while the member is in it
        admin.delete_consumer_groups([group])[group].result()
    member.close()

    wanted = [RdTopicPartition(topic, p, 10 + p) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])[group].result()
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(p, 10 + p) for p in range(4)]
    admin.delete_consumer_groups([group])[group].result()
    assert group not in {g.group_id for g in admin.list_consumer_groups().result().valid}


def test_kafka_python_admin_groups_and_offset_delete(cluster: KafkaCluster) -> None:
    topic, group = new_topic(cluster, records=0), f"kpa-{uuid.uuid4().hex[:6]}"
    confluent = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    wanted = [RdTopicPartition(topic, p, 5) for p in range(PARTITIONS)]
    confluent.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])[group].result()
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
    try:
        assert group in {g["group_id"] for g in admin.list_groups()}
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: meta.offset for tp, meta in offsets.items()} == dict.fromkeys(range(PARTITIONS), 5)
        results = admin.delete_group_offsets(group, [KpTopicPartition(topic, 0)])  # OffsetDelete (KIP-496)
        assert results == {KpTopicPartition(topic, 0): kafka_errors.NoError}
        assert sorted(tp.partition for tp in admin.list_group_offsets({group: None})[group]) == [1, 2, 3]
        assert dict(admin.delete_groups([group]))[group] == "OK"  # kafka-python names a code 0 "OK"
        assert group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
