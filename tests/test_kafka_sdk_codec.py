"""client/kafka/codec.py: SDK values in, broker.proto messages out, and back, without a broker.

The request paths are exercised end to end by tests/test_kafka_client_unit.py (FakeKafka) and the cluster
tests; these pin what the codec alone promises: the shape each request takes on the wire and what each
reader hands back.
"""

from __future__ import annotations

from typing import NamedTuple

from client.kafka import codec
from client.kafka.structs import TopicPartition
from client.kafka.types import BrokerMetadata, NewTopic, PartitionMetadata, TopicMetadata
from zkraft_proto import broker_pb2


class _Batch(NamedTuple):
    payload: bytes


def test_produce_request_concatenates_each_partitions_batches_in_order() -> None:
    request = codec.produce_request(
        -1, 3000, "p1", {"t": {0: [_Batch(b"a1"), _Batch(b"a2")], 2: [_Batch(b"c")]}, "u": {1: [_Batch(b"u")]}}
    )
    wire = broker_pb2.ProduceRequest.FromString(request.SerializeToString())
    assert (wire.acks, wire.timeout_ms, wire.client_id) == (-1, 3000, "p1")
    sent = {(t.name, p.index): p.records for t in wire.topics for p in t.partitions}
    assert sent == {("t", 0): b"a1a2", ("t", 2): b"c", ("u", 1): b"u"}


def test_produce_results_name_each_partition() -> None:
    response = broker_pb2.ProduceResponse(
        responses=[
            broker_pb2.TopicProduceResponse(
                name="t",
                partitions=[
                    broker_pb2.PartitionProduceResponse(index=0, base_offset=7, log_append_time_ms=-1),
                    broker_pb2.PartitionProduceResponse(index=1, error_code=6, error_message="not leader"),
                ],
            )
        ]
    )
    assert list(codec.produce_results(response)) == [("t", 0, 0, "", 7, -1), ("t", 1, 6, "not leader", 0, 0)]


def test_fetch_request_and_partitions() -> None:
    request = codec.fetch_request(
        {TopicPartition("t", 0): (5, 1), TopicPartition("t", 3): (9, 1)}, 500, 1, 1 << 20, 1024
    )
    assert (request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes) == (-1, 500, 1, 1 << 20)
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in request.topics[0].partitions] == [
        (0, 5, 1024),
        (3, 9, 1024),
    ]
    response = broker_pb2.FetchResponse(
        responses=[
            broker_pb2.FetchableTopicResponse(
                topic="t",
                partitions=[
                    broker_pb2.FetchPartitionData(partition=0, high_watermark=12, records=b"batch"),
                    broker_pb2.FetchPartitionData(partition=3, error_code=1),
                ],
            )
        ]
    )
    assert codec.fetch_error(response) == 0
    assert list(codec.fetch_partitions(response)) == [
        (TopicPartition("t", 0), 0, 12, b"batch"),
        (TopicPartition("t", 3), 1, 0, b""),
    ]


def test_metadata_request_and_reply() -> None:
    assert codec.metadata_request(None, False).all_topics
    named = codec.metadata_request(["a", "b"], True)
    assert (list(named.topics), named.all_topics, named.allow_auto_topic_creation) == (["a", "b"], False, True)
    response = broker_pb2.MetadataResponse(
        cluster_id="c",
        controller_id=2,
        brokers=[broker_pb2.MetadataBroker(node_id=2, host="127.0.0.1", port=9092)],
        topics=[
            broker_pb2.MetadataTopic(
                name="t",
                partitions=[
                    broker_pb2.MetadataPartition(
                        partition_index=0, leader_id=2, leader_epoch=3, replica_nodes=[2], isr_nodes=[2]
                    )
                ],
            )
        ],
    )
    snapshot = codec.metadata_reply(response)
    assert (snapshot.cluster_id, snapshot.controller_id) == ("c", 2)
    assert snapshot.brokers == {2: BrokerMetadata(2, "127.0.0.1", 9092, None)}
    assert snapshot.topics == {"t": TopicMetadata("t", 0, False, {0: PartitionMetadata(0, 2, 3, (2,), (2,), (), 0)})}


def test_create_topics_request_carries_assignments_and_configs() -> None:
    topic = NewTopic(
        "t", -1, -1, replica_assignments={1: [3, 1], 0: [1, 2]}, topic_configs={"cleanup.policy": "compact"}
    )
    (wire,) = codec.create_topics_request([topic], 1000, True).topics
    assert [(a.partition_index, list(a.broker_ids)) for a in wire.assignments] == [(0, [1, 2]), (1, [3, 1])]
    assert dict(wire.configs) == {"cleanup.policy": "compact"}


def test_offset_commit_and_fetch() -> None:
    request = codec.offset_commit_request("g", 4, "m", [(TopicPartition("t", 1), 10, "meta")])
    assert (request.group_id, request.generation_id, request.member_id) == ("g", 4, "m")
    assert request.topics[0].partitions[0].committed_leader_epoch == -1
    response = broker_pb2.OffsetCommitResponse(
        topics=[
            broker_pb2.OffsetCommitTopicResponse(
                name="t",
                partitions=[
                    broker_pb2.OffsetCommitPartitionResponse(partition_index=0),
                    broker_pb2.OffsetCommitPartitionResponse(partition_index=1, error_code=22),
                ],
            )
        ]
    )
    assert codec.offset_commit_errors(response) == [(TopicPartition("t", 1), 22)]
    assert codec.first_group_error("OffsetCommit", response) == 22
    assert codec.offset_fetch_request("g", None).all_topics
    some = codec.offset_fetch_request("g", [TopicPartition("t", 0), TopicPartition("t", 2)])
    assert [(t.name, list(t.partition_indexes)) for t in some.topics] == [("t", [0, 2])]


def test_reassignment_request_cancels_with_none() -> None:
    request = codec.alter_partition_reassignments_request(
        {TopicPartition("t", 0): [1, 2], TopicPartition("t", 1): None}, 5000
    )
    parts = request.topics[0].partitions
    assert [(p.partition_index, p.cancel, list(p.replicas)) for p in parts] == [(0, False, [1, 2]), (1, True, [])]
    assert codec.elect_leaders_request(0, None, 100).all_partitions
    assert not codec.list_partition_reassignments_request({"t": [0]}, 100).all_partitions
