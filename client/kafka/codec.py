"""The protobuf edge of the Kafka SDK: the one module that builds and reads `broker_pb2` messages.

One function per RPC builds its request from SDK values (`<rpc>_request`), and one reads its response
into SDK values or plain tuples (`<rpc>_reply` / `<rpc>_results`); the SDK modules call the stub with what
these return and never touch a message's fields. Error codes come back as ints: the SDK module that asked
turns them into its typed KafkaError, with the context only it knows. The messages are Kafka's request
schemas as gRPC messages (proto/zkraft_proto/broker.proto).

Produce and Fetch are per-batch paths: their builders and readers make no copy of record bytes beyond what
protobuf itself does and no per-record work.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeAlias

import grpc

from client.kafka.config_resources import (
    CONFIG_SOURCE_NAMES,
    ConfigDescription,
    ConfigEntry,
    ConfigResourceType,
    ConfigSynonym,
)
from client.kafka.consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, decode_assignment, decode_subscription
from client.kafka.structs import TopicPartition
from client.kafka.types import (
    BrokerMetadata,
    ClusterSnapshot,
    ConsumerGroupDescription,
    MemberDescription,
    NewTopic,
    PartitionMetadata,
    TopicMetadata,
)
from zkraft_proto import broker_pb2, broker_pb2_grpc

BrokerStub: TypeAlias = broker_pb2_grpc.BrokerStub
# A response whose fields only this module reads; the SDK passes it from the stub to a reader here.
Response: TypeAlias = Any


def broker_stub(channel: grpc.Channel) -> BrokerStub:
    return broker_pb2_grpc.BrokerStub(channel)


class _HasPayload(Protocol):
    payload: bytes


class ErrorResult(NamedTuple):
    """One named item's outcome in an admin response (a topic, a group): Kafka's code and message."""

    name: str
    error_code: int
    error_message: str


class ConfigResult(NamedTuple):
    """One config resource's outcome in a DescribeConfigs or AlterConfigs response."""

    error_code: int
    error_message: str
    resource_type: int
    resource_name: str


class PartitionResult(NamedTuple):
    """One partition's outcome in an admin response (DeleteRecords' low watermark, -1 elsewhere)."""

    tp: TopicPartition
    error_code: int
    error_message: str
    low_watermark: int = -1


class CoordinatorReply(NamedTuple):
    error_code: int
    node_id: int
    host: str
    port: int


class ProducerIdReply(NamedTuple):
    error_code: int
    error_message: str
    producer_id: int
    producer_epoch: int


class JoinMember(NamedTuple):
    member_id: str
    group_instance_id: str
    metadata: bytes


class JoinGroupReply(NamedTuple):
    error_code: int
    generation_id: int
    member_id: str
    protocol_name: str
    leader: str
    members: tuple[JoinMember, ...]  # the leader's reply only


class SyncGroupReply(NamedTuple):
    error_code: int
    assignment: bytes


class CommittedOffset(NamedTuple):
    tp: TopicPartition
    error_code: int
    offset: int  # -1: none committed
    metadata: str


class ListedOffset(NamedTuple):
    tp: TopicPartition
    error_code: int
    offset: int
    timestamp: int
    leader_epoch: int


class DescribedGroup(NamedTuple):
    error_code: int
    group_id: str
    description: ConsumerGroupDescription


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp[0], []).append(tp[1])
    return grouped


# ---- data plane: Produce, Fetch, ListOffsets, InitProducerId


def produce_request(
    acks: int, timeout_ms: int, client_id: str, by_topic: Mapping[str, Mapping[int, Sequence[_HasPayload]]]
) -> broker_pb2.ProduceRequest:
    """One Produce for every ready batch bound to one broker; a partition's batches travel concatenated."""
    return broker_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        client_id=client_id,
        topics=[
            broker_pb2.TopicProduceData(
                name=topic,
                partitions=[
                    broker_pb2.PartitionProduceData(index=index, records=b"".join(b.payload for b in group))  # type: ignore[misc]
                    for index, group in parts.items()
                ],
            )
            for topic, parts in by_topic.items()
        ],
    )


def produce_results(response: Response) -> Iterator[tuple[str, int, int, str, int, int]]:
    """(topic, partition, error_code, error_message, base_offset, log_append_time_ms) per answered partition."""
    for topic in response.responses:
        name = topic.name
        for p in topic.partitions:
            yield name, p.index, p.error_code, p.error_message, p.base_offset, p.log_append_time_ms


def init_producer_id_request() -> broker_pb2.InitProducerIdRequest:
    """Idempotence only (no transactional id): any broker answers (KIP-98)."""
    return broker_pb2.InitProducerIdRequest()


def init_producer_id_reply(response: Response) -> ProducerIdReply:
    return ProducerIdReply(response.error_code, response.error_message, response.producer_id, response.producer_epoch)


def fetch_request(
    offsets: Mapping[TopicPartition, tuple[int, int]],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
) -> broker_pb2.FetchRequest:
    """A consumer's Fetch (replica_id -1) from each partition's (offset, _) in `offsets`."""
    by_topic: dict[str, list[broker_pb2.FetchPartition]] = {}
    for tp, (offset, _) in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            broker_pb2.FetchPartition(
                partition=tp.partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
        )
    return broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=[broker_pb2.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def fetch_error(response: Response) -> int:
    """The whole Fetch's error code (0: read the partitions)."""
    return response.error_code


def fetch_partitions(response: Response) -> Iterator[tuple[TopicPartition, int, int, bytes]]:
    """(partition, error_code, high_watermark, records) per answered partition; records as the broker sent them."""
    for topic in response.responses:
        name = topic.topic
        for p in topic.partitions:
            yield TopicPartition(name, p.partition), p.error_code, p.high_watermark, p.records


def list_offsets_request(timestamps: Mapping[TopicPartition, int]) -> broker_pb2.ListOffsetsRequest:
    """A consumer's ListOffsets: per partition a timestamp, or LATEST (-1) / EARLIEST (-2)."""
    by_topic: dict[str, list[broker_pb2.ListOffsetsPartition]] = {}
    for tp, timestamp in timestamps.items():
        by_topic.setdefault(tp.topic, []).append(
            broker_pb2.ListOffsetsPartition(partition_index=tp.partition, current_leader_epoch=-1, timestamp=timestamp)
        )
    return broker_pb2.ListOffsetsRequest(
        replica_id=-1,
        topics=[broker_pb2.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def list_offsets_results(response: Response) -> Iterator[ListedOffset]:
    for topic in response.topics:
        for p in topic.partitions:
            yield ListedOffset(
                TopicPartition(topic.name, p.partition_index), p.error_code, p.offset, p.timestamp, p.leader_epoch
            )


# ---- metadata


def metadata_request(topics: Sequence[str] | None, allow_auto_topic_creation: bool) -> broker_pb2.MetadataRequest:
    """`topics` None: every topic (Kafka's null topic array)."""
    return broker_pb2.MetadataRequest(
        topics=topics or [], all_topics=topics is None, allow_auto_topic_creation=allow_auto_topic_creation
    )


def metadata_reply(response: Response) -> ClusterSnapshot:
    """The answer as a snapshot holding only the topics it names."""
    brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack or None) for b in response.brokers}
    topics = {t.name: _topic_metadata(t) for t in response.topics}
    return ClusterSnapshot(response.cluster_id, response.controller_id, brokers, topics)


def _topic_metadata(t: broker_pb2.MetadataTopic) -> TopicMetadata:
    partitions = {
        p.partition_index: PartitionMetadata(
            p.partition_index,
            p.leader_id,
            p.leader_epoch,
            tuple(p.replica_nodes),
            tuple(p.isr_nodes),
            tuple(p.offline_replicas),
            p.error_code,
        )
        for p in t.partitions
    }
    return TopicMetadata(t.name, t.error_code, t.is_internal, partitions)


# ---- topic admin


def create_topics_request(
    topics: Sequence[NewTopic], timeout_ms: int, validate_only: bool
) -> broker_pb2.CreateTopicsRequest:
    return broker_pb2.CreateTopicsRequest(
        topics=[_creatable(t) for t in topics], timeout_ms=timeout_ms, validate_only=validate_only
    )


def _creatable(topic: NewTopic) -> broker_pb2.CreatableTopic:
    assignments = [
        broker_pb2.CreatableReplicaAssignment(partition_index=partition, broker_ids=list(replicas))
        for partition, replicas in sorted((topic.replica_assignments or {}).items())
    ]
    return broker_pb2.CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments=assignments,
        configs=dict(topic.topic_configs or {}),
    )


def create_topics_results(response: Response) -> list[ErrorResult]:
    return [ErrorResult(t.name, t.error_code, t.error_message) for t in response.topics]


def create_partitions_request(
    totals: Mapping[str, tuple[int, Sequence[Sequence[int]]]], timeout_ms: int, validate_only: bool
) -> broker_pb2.CreatePartitionsRequest:
    """`totals`: per topic its new partition count and the replicas of each new partition (or none)."""
    items = [
        broker_pb2.CreatePartitionsTopic(
            name=name,
            count=count,
            assignments=[broker_pb2.CreatePartitionsAssignment(broker_ids=list(r)) for r in assignments],
        )
        for name, (count, assignments) in totals.items()
    ]
    return broker_pb2.CreatePartitionsRequest(topics=items, timeout_ms=timeout_ms, validate_only=validate_only)


def create_partitions_results(response: Response) -> list[ErrorResult]:
    return [ErrorResult(t.name, t.error_code, t.error_message) for t in response.results]


def delete_topics_request(names: Sequence[str], timeout_ms: int) -> broker_pb2.DeleteTopicsRequest:
    return broker_pb2.DeleteTopicsRequest(topic_names=names, timeout_ms=timeout_ms)


def delete_topics_results(response: Response) -> list[ErrorResult]:
    return [ErrorResult(t.name, t.error_code, t.error_message) for t in response.responses]


# ---- consumer groups


def find_coordinator_request(group_id: str) -> broker_pb2.FindCoordinatorRequest:
    return broker_pb2.FindCoordinatorRequest(key=group_id, key_type=0)  # key_type 0: a group


def find_coordinator_reply(response: Response) -> CoordinatorReply:
    return CoordinatorReply(response.error_code, response.node_id, response.host, response.port)


def join_group_request(
    group_id: str,
    member_id: str,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    protocols: Sequence[tuple[str, bytes]],
    client_id: str,
    client_host: str,
) -> broker_pb2.JoinGroupRequest:
    """`protocols`: (assignor name, encoded subscription) in order of preference."""
    return broker_pb2.JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        protocol_type=PROTOCOL_TYPE,
        protocols=[broker_pb2.JoinGroupProtocol(name=name, metadata=metadata) for name, metadata in protocols],
        client_id=client_id,
        client_host=client_host,
    )


def join_group_reply(response: Response) -> JoinGroupReply:
    members = tuple(JoinMember(m.member_id, m.group_instance_id, m.metadata) for m in response.members)
    return JoinGroupReply(
        response.error_code,
        response.generation_id,
        response.member_id,
        response.protocol_name,
        response.leader,
        members,
    )


def sync_group_request(
    group_id: str, generation_id: int, member_id: str, protocol_name: str, assignments: Mapping[str, bytes]
) -> broker_pb2.SyncGroupRequest:
    """`assignments` (member id -> encoded assignment) from the leader only; empty from the others."""
    return broker_pb2.SyncGroupRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol_name,
        assignments=[broker_pb2.SyncGroupAssignment(member_id=m, assignment=a) for m, a in assignments.items()],
    )


def sync_group_reply(response: Response) -> SyncGroupReply:
    return SyncGroupReply(response.error_code, response.assignment)


def heartbeat_request(group_id: str, generation_id: int, member_id: str) -> broker_pb2.HeartbeatRequest:
    return broker_pb2.HeartbeatRequest(group_id=group_id, generation_id=generation_id, member_id=member_id)


def heartbeat_error(response: Response) -> int:
    return response.error_code


def leave_group_request(group_id: str, member_id: str) -> broker_pb2.LeaveGroupRequest:
    return broker_pb2.LeaveGroupRequest(group_id=group_id, members=[broker_pb2.LeaveGroupMember(member_id=member_id)])


def offset_commit_request(
    group_id: str, generation_id: int, member_id: str, offsets: Iterable[tuple[TopicPartition, int, str]]
) -> broker_pb2.OffsetCommitRequest:
    """`offsets`: (partition, offset, metadata); generation -1 and member "" commit as a plain offset store."""
    by_topic: dict[str, list[broker_pb2.OffsetCommitPartition]] = {}
    for tp, offset, metadata in offsets:
        by_topic.setdefault(tp[0], []).append(
            broker_pb2.OffsetCommitPartition(
                partition_index=tp[1], committed_offset=offset, committed_leader_epoch=-1, committed_metadata=metadata
            )
        )
    return broker_pb2.OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        topics=[broker_pb2.OffsetCommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def offset_commit_errors(response: Response) -> list[tuple[TopicPartition, int]]:
    """The partitions the coordinator did not commit, with their error codes, in response order."""
    return [
        (TopicPartition(t.name, p.partition_index), p.error_code)
        for t in response.topics
        for p in t.partitions
        if p.error_code
    ]


def offset_fetch_request(group_id: str, partitions: Iterable[TopicPartition] | None) -> broker_pb2.OffsetFetchRequest:
    """`partitions` None: every partition the group has committed (Kafka's null topic array)."""
    return broker_pb2.OffsetFetchRequest(
        group_id=group_id,
        topics=[
            broker_pb2.OffsetFetchTopic(name=t, partition_indexes=ps) for t, ps in _by_topic(partitions or ()).items()
        ],
        all_topics=partitions is None,
    )


def offset_fetch_error(response: Response) -> int:
    return response.error_code


def offset_fetch_results(response: Response) -> Iterator[CommittedOffset]:
    for t in response.topics:
        for p in t.partitions:
            yield CommittedOffset(
                TopicPartition(t.name, p.partition_index), p.error_code, p.committed_offset, p.metadata
            )


def list_groups_request() -> broker_pb2.ListGroupsRequest:
    return broker_pb2.ListGroupsRequest()


def list_groups_reply(response: Response) -> tuple[int, list[tuple[str, str]]]:
    """(error_code, [(group id, protocol type)])."""
    return response.error_code, [(g.group_id, g.protocol_type) for g in response.groups]


def describe_groups_request(group_ids: Sequence[str]) -> broker_pb2.DescribeGroupsRequest:
    return broker_pb2.DescribeGroupsRequest(groups=group_ids)


def describe_groups_results(response: Response, coordinator: BrokerMetadata) -> list[DescribedGroup]:
    return [DescribedGroup(g.error_code, g.group_id, _group_description(g, coordinator)) for g in response.groups]


def _group_description(group: Any, coordinator: BrokerMetadata) -> ConsumerGroupDescription:
    members = []
    for m in group.members:
        topics: tuple[str, ...] = ()
        assignment: tuple[TopicPartition, ...] = ()
        if group.protocol_type == PROTOCOL_TYPE:
            try:
                topics = decode_subscription(m.member_metadata).topics if m.member_metadata else ()
                assignment = decode_assignment(m.member_assignment).partitions if m.member_assignment else ()
            except ConsumerProtocolError:
                pass  # a member of another protocol's shape: shown without topics, as Kafka's tool does
        members.append(
            MemberDescription(m.member_id, m.group_instance_id or None, m.client_id, m.client_host, topics, assignment)
        )
    return ConsumerGroupDescription(
        group.group_id, group.group_state, group.protocol_type, group.protocol_data, tuple(members), coordinator
    )


def delete_groups_request(group_ids: Sequence[str]) -> broker_pb2.DeleteGroupsRequest:
    return broker_pb2.DeleteGroupsRequest(groups_names=group_ids)


def delete_groups_results(response: Response) -> list[ErrorResult]:
    return [ErrorResult(r.group_id, r.error_code, "") for r in response.results]


def first_group_error(method: str, response: Response) -> int:
    """The error code a coordinator call's retry decision reads: the response's own, or for OffsetCommit and
    DeleteGroups (which have none) the first failing item's."""
    if method == "OffsetCommit":
        codes = [code for _, code in offset_commit_errors(response)]
    elif method == "DeleteGroups":
        codes = [r.error_code for r in delete_groups_results(response) if r.error_code]
    else:
        codes = [getattr(response, "error_code", 0)]
    return codes[0] if codes else 0


# ---- configs


def describe_configs_request(
    resources: Iterable[tuple[int, str, Sequence[str]]], include_synonyms: bool
) -> broker_pb2.DescribeConfigsRequest:
    """`resources`: (resource type, name, config keys; none: every config)."""
    return broker_pb2.DescribeConfigsRequest(
        resources=[
            broker_pb2.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=list(keys))
            for t, n, keys in resources
        ],
        include_synonyms=include_synonyms,
    )


def describe_configs_results(response: Response) -> list[ConfigResult]:
    return [ConfigResult(r.error_code, r.error_message, r.resource_type, r.resource_name) for r in response.results]


def config_descriptions(response: Response) -> list[ConfigDescription]:
    """Every resource's configs of a DescribeConfigs response whose results all succeeded."""
    return [_config_description(r) for r in response.results]


def _config_description(result: Any) -> ConfigDescription:
    entries = {}
    for c in result.configs:
        source = CONFIG_SOURCE_NAMES.get(c.config_source, "UNKNOWN")
        entries[c.name] = ConfigEntry(
            name=c.name,
            value=c.value if c.HasField("value") else None,
            source=source,
            is_default=source == "DEFAULT_CONFIG",
            read_only=c.read_only,
            is_sensitive=c.is_sensitive,
            synonyms=tuple(
                ConfigSynonym(
                    s.name, s.value if s.HasField("value") else None, CONFIG_SOURCE_NAMES.get(s.source, "UNKNOWN")
                )
                for s in c.synonyms
            ),
            documentation=c.documentation if c.HasField("documentation") else None,
        )
    return ConfigDescription(ConfigResourceType(result.resource_type), result.resource_name, entries)


def alter_configs_request(
    resources: Iterable[tuple[int, str, Sequence[tuple[str, str | None, int]]]], validate_only: bool, incremental: bool
) -> broker_pb2.AlterConfigsRequest:
    """`resources`: (resource type, name, [(config, value, operation index)]); the operation is read only when
    `incremental` (IncrementalAlterConfigs; 0 otherwise), else the configs are the resource's whole override set."""
    return broker_pb2.AlterConfigsRequest(
        resources=[
            broker_pb2.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=[broker_pb2.AlterableConfig(name=k, value=v, config_operation=op) for k, v, op in configs],
            )
            for t, n, configs in resources
        ],
        validate_only=validate_only,
        incremental=incremental,
    )


def alter_configs_results(response: Response) -> list[ConfigResult]:
    return [ConfigResult(r.error_code, r.error_message, r.resource_type, r.resource_name) for r in response.responses]


# ---- records deletion, leader election, reassignment (KIP-455)


def controller_error(response: Response) -> int:
    """The error code of a request for the controller (NOT_CONTROLLER when it went to another broker)."""
    return response.error_code


def delete_records_request(offsets: Mapping[TopicPartition, int], timeout_ms: int) -> broker_pb2.DeleteRecordsRequest:
    topics: dict[str, list[broker_pb2.DeleteRecordsPartition]] = {}
    for tp, offset in offsets.items():
        topics.setdefault(tp.topic, []).append(
            broker_pb2.DeleteRecordsPartition(partition_index=tp.partition, offset=offset)
        )
    return broker_pb2.DeleteRecordsRequest(
        topics=[broker_pb2.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in topics.items()],
        timeout_ms=timeout_ms,
    )


def delete_records_results(response: Response) -> list[PartitionResult]:
    return [
        PartitionResult(TopicPartition(t.name, p.partition_index), p.error_code, p.error_message, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    ]


def _topic_partitions(grouped: Mapping[str, Sequence[int]]) -> list[broker_pb2.TopicPartitions]:
    return [broker_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in grouped.items()]


def elect_leaders_request(
    election_type: int, partitions: Mapping[str, Sequence[int]] | None, timeout_ms: int
) -> broker_pb2.ElectLeadersRequest:
    """`partitions` None: every partition (Kafka's null topic_partitions)."""
    request = broker_pb2.ElectLeadersRequest(election_type=election_type, timeout_ms=timeout_ms)
    if partitions is None:
        request.all_partitions = True
    else:
        request.topic_partitions.extend(_topic_partitions(partitions))
    return request


def elect_leaders_results(response: Response) -> list[PartitionResult]:
    return [
        PartitionResult(TopicPartition(r.topic, p.partition_id), p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    ]


def alter_partition_reassignments_request(
    reassignments: Mapping[TopicPartition, Sequence[int] | None], timeout_ms: int
) -> broker_pb2.AlterPartitionReassignmentsRequest:
    """Per partition its new replicas, or None to cancel its reassignment."""
    topics: dict[str, list[broker_pb2.ReassignablePartition]] = {}
    for tp, replicas in reassignments.items():
        item = broker_pb2.ReassignablePartition(partition_index=tp.partition, cancel=replicas is None)
        if replicas is not None:
            item.replicas.extend(replicas)
        topics.setdefault(tp.topic, []).append(item)
    return broker_pb2.AlterPartitionReassignmentsRequest(
        topics=[broker_pb2.ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()],
        timeout_ms=timeout_ms,
    )


def alter_partition_reassignments_results(response: Response) -> list[PartitionResult]:
    return [
        PartitionResult(TopicPartition(t.name, p.partition_index), p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    ]


def list_partition_reassignments_request(
    partitions: Mapping[str, Sequence[int]] | None, timeout_ms: int
) -> broker_pb2.ListPartitionReassignmentsRequest:
    request = broker_pb2.ListPartitionReassignmentsRequest(timeout_ms=timeout_ms)
    if partitions is None:
        request.all_partitions = True
    else:
        request.topics.extend(_topic_partitions(partitions))
    return request


def list_partition_reassignments_reply(response: Response) -> dict[TopicPartition, dict[str, list[int]]]:
    """{partition: {"replicas", "adding_replicas", "removing_replicas"}} of the ongoing reassignments."""
    return {
        TopicPartition(t.name, p.partition_index): {
            "replicas": list(p.replicas),
            "adding_replicas": list(p.adding_replicas),
            "removing_replicas": list(p.removing_replicas),
        }
        for t in response.topics
        for p in t.partitions
    }


# ---------------------------------------------------------------- SaslAuthenticate (the gRPC port's login)


class SaslStep(NamedTuple):
    """One step's answer: Kafka's code and message, the broker's SASL message, and what to carry on with."""

    error_code: int
    error_message: str
    auth_bytes: bytes
    exchange_id: str
    session_token: str
    session_lifetime_ms: int


def sasl_authenticate_request(
    mechanism: str, auth_bytes: bytes, exchange_id: str
) -> broker_pb2.SaslAuthenticateRequest:
    return broker_pb2.SaslAuthenticateRequest(mechanism=mechanism, auth_bytes=auth_bytes, exchange_id=exchange_id)


def sasl_authenticate_reply(response: broker_pb2.SaslAuthenticateResponse) -> SaslStep:
    return SaslStep(
        response.error_code,
        response.error_message,
        bytes(response.auth_bytes),
        response.exchange_id,
        response.session_token,
        response.session_lifetime_ms,
    )
