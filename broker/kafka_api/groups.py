"""The group coordinator's APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.

Each handler turns the Kafka request into a call on the group coordinator the gRPC front end uses
(`context.service.groups`: broker/group/api.py over broker/group/coordinator.py) and its answer into the
response of the negotiated version; Kafka 2.8's KafkaApis.scala is the specification of what each version
carries. The version ranges are Kafka 2.8's `validVersions` intersected with kio's schemas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from broker.group.coordinator import wall_clock_ms
from broker.group.metadata import GroupState
from broker.group.records import NO_LEADER_EPOCH, OffsetAndMetadata
from broker.kafka_api.authorization import allowed, authorizer_of, cluster_allowed, topics_refused
from broker.kafka_api.entities import build, millis
from broker.kafka_api.registry import KafkaRequestContext, kafka_api
from client.kafka import errors
from client.kafka.acls import AclOperation, ResourceType
from client.kafka.structs import TopicPartition

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# DescribeGroups v3+ with include_authorized_operations false: Kafka's "not requested" marker (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Without an authorizer every operation a group supports is allowed: READ (3), DELETE (6), DESCRIBE (8),
# as bits of AclOperation codes (K28 KafkaApis.handleDescribeGroupRequest, Utils.to32BitField).
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
# OffsetCommit v2-v4's "use the broker's retention" marker (OffsetCommitRequest.DEFAULT_RETENTION_TIME).
DEFAULT_RETENTION_TIME_MS = -1
GROUP_AUTHORIZATION_FAILED = errors.GroupAuthorizationFailedError.code
TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code


def _group_allowed(context: KafkaRequestContext, operation: AclOperation, group_id: str) -> bool:
    return allowed(context, operation, ResourceType.GROUP, group_id)


def _client_host(context: KafkaRequestContext) -> str:
    """Kafka records a member's host as InetAddress.toString(): "/127.0.0.1"."""
    return "/" + context.client_host


def _by_topic(results: Mapping[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    """{topic: [(partition, value)]} in first-seen topic order, as Kafka's responses group partitions."""
    topics: dict[str, list[tuple[int, Any]]] = {}
    for tp, value in results.items():
        topics.setdefault(tp.topic, []).append((tp.partition, value))
    return topics


# ---------------------------------------------------------------- FindCoordinator


@kafka_api(10, "FindCoordinator", 0, 3)
async def find_coordinator(request: Any, context: KafkaRequestContext) -> Any:
    """The group's coordinator on the listener the request came in on (K28 handleFindCoordinatorRequest).

    This broker has no transaction coordinator: key type 1 answers COORDINATOR_NOT_AVAILABLE (a transactional
    producer retries until its own timeout and reports it), any other key type INVALID_REQUEST, as Kafka does.
    """
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if key_type == GROUP_KEY_TYPE and not _group_allowed(context, AclOperation.DESCRIBE, request.key):
        error, message, broker_id = GROUP_AUTHORIZATION_FAILED, "", -1
    elif key_type == TRANSACTION_KEY_TYPE and not allowed(
        context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key
    ):
        error, message, broker_id = errors.TransactionalIdAuthorizationFailedError.code, "", -1
    elif key_type == GROUP_KEY_TYPE:
        error, message, broker_id = await context.service.groups.group_coordinator_id(request.key)
    elif key_type == TRANSACTION_KEY_TYPE:
        error, message, broker_id = (
            errors.CoordinatorNotAvailableError.code,
            "transactions are not served by this cluster",
            -1,
        )
    else:
        error, message, broker_id = errors.InvalidRequestError.code, f"unknown coordinator key type {key_type}", -1
    endpoint = None
    if error == errors.NONE:
        endpoint = context.service.metadata_cache.listener_endpoint(broker_id, context.listener_name)
        if endpoint is None:
            error = errors.CoordinatorNotAvailableError.code
            message = f"broker {broker_id} has no endpoint on listener {context.listener_name}"
    if endpoint is None:
        return build(
            context.response_type,
            throttle_time=0,
            error_code=error,
            error_message=message or None,
            node_id=-1,
            host="",
            port=-1,
        )
    return build(
        context.response_type,
        throttle_time=0,
        error_code=errors.NONE,
        error_message=None,
        node_id=broker_id,
        host=endpoint.host,
        port=endpoint.port,
    )


# ---------------------------------------------------------------- membership


@kafka_api(11, "JoinGroup", 0, 7)
async def join_group(request: Any, context: KafkaRequestContext) -> Any:
    """JoinGroup; v4+ asks a new dynamic member to come back with its id first (KIP-394), v5+ carries
    group.instance.id (KIP-345), v7 answers the protocol type and a nullable protocol name."""
    version = context.api_version
    nullable = version >= 7  # v7 made protocol type and name nullable: Kafka sends null, not "", on an error
    if not _group_allowed(context, AclOperation.READ, request.group_id):
        return build(
            context.response_type,
            throttle_time=0,
            error_code=GROUP_AUTHORIZATION_FAILED,
            generation_id=-1,
            protocol_type=None if nullable else "",
            protocol_name=None if nullable else "",
            leader="",
            member_id=request.member_id,
            members=[],
        )
    rebalance_timeout = getattr(request, "rebalance_timeout", None)
    result = await context.service.groups.coordinator.join_group(
        request.group_id,
        request.member_id,
        context.client_id or "",
        _client_host(context),
        millis(request.session_timeout),
        -1 if rebalance_timeout is None else millis(rebalance_timeout),
        request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        group_instance_id=getattr(request, "group_instance_id", None),
        require_known_member_id=version >= 4,
    )
    instance_ids = result.member_instance_ids or (None,) * len(result.members)
    return build(
        context.response_type,
        throttle_time=0,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=(result.protocol_type or None) if nullable else result.protocol_type,
        protocol_name=(result.protocol_name or None) if nullable else result.protocol_name,
        leader=result.leader_id,
        member_id=result.member_id,
        members=[
            {"member_id": m, "group_instance_id": instance, "metadata": metadata}
            for (m, metadata), instance in zip(result.members, instance_ids, strict=True)
        ],
    )


@kafka_api(14, "SyncGroup", 0, 5)
async def sync_group(request: Any, context: KafkaRequestContext) -> Any:
    if not _group_allowed(context, AclOperation.READ, request.group_id):
        return build(context.response_type, throttle_time=0, error_code=GROUP_AUTHORIZATION_FAILED, assignment=b"")
    result = await context.service.groups.coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "protocol_type", None) or "",
        getattr(request, "protocol_name", None) or "",
        {a.member_id: a.assignment for a in request.assignments},
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    ok = result.error_code == errors.NONE
    return build(
        context.response_type,
        throttle_time=0,
        error_code=result.error_code,
        protocol_type=result.protocol_type if ok and result.protocol_type else None,
        protocol_name=result.protocol_name if ok and result.protocol_name else None,
        assignment=result.assignment,
    )


@kafka_api(12, "Heartbeat", 0, 4)
async def heartbeat(request: Any, context: KafkaRequestContext) -> Any:
    if not _group_allowed(context, AclOperation.READ, request.group_id):
        return build(context.response_type, throttle_time=0, error_code=GROUP_AUTHORIZATION_FAILED)
    error = context.service.groups.coordinator.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return build(context.response_type, throttle_time=0, error_code=error)


@kafka_api(13, "LeaveGroup", 0, 4)
async def leave_group(request: Any, context: KafkaRequestContext) -> Any:
    """v0-v2 name one member and answer one error; v3+ a batch of (member id, group.instance.id) (KIP-345)."""
    if not _group_allowed(context, AclOperation.READ, request.group_id):
        return build(context.response_type, throttle_time=0, error_code=GROUP_AUTHORIZATION_FAILED, members=[])
    if context.api_version < 3:
        identities: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        identities = [(m.member_id, m.group_instance_id) for m in request.members]
    error, results = context.service.groups.coordinator.leave_group(request.group_id, identities)
    if context.api_version < 3:
        # LeaveGroupResponse.getError: the top-level error, else the one member's (K28 LeaveGroupResponse).
        member_error = results[0][1] if results else errors.NONE
        return build(context.response_type, throttle_time=0, error_code=error or member_error)
    return build(
        context.response_type,
        throttle_time=0,
        error_code=error,
        members=[
            {"member_id": member_id, "group_instance_id": instance, "error_code": code}
            for (member_id, code), (_, instance) in zip(results, identities, strict=False)
        ],
    )


# ---------------------------------------------------------------- offsets


@kafka_api(8, "OffsetCommit", 2, 8)
async def offset_commit(request: Any, context: KafkaRequestContext) -> Any:
    """v2-v4 may ask a retention time (an expire timestamp, K28 KafkaApis); v6+ carry the leader epoch."""
    now_ms = wall_clock_ms()
    retention = getattr(request, "retention_time", None)
    retention_ms = DEFAULT_RETENTION_TIME_MS if retention is None else millis(retention)
    expire_ms = None if retention_ms == DEFAULT_RETENTION_TIME_MS else now_ms + retention_ms
    offsets = {
        TopicPartition(topic.name, p.partition_index): OffsetAndMetadata(
            offset=p.committed_offset,
            leader_epoch=getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
            metadata=p.committed_metadata or "",
            commit_timestamp_ms=now_ms,
            expire_timestamp_ms=expire_ms,
        )
        for topic in request.topics
        for p in topic.partitions
    }
    refusals = _commit_refusals(context, request.group_id, offsets)
    results: dict[TopicPartition, int] = {}
    if len(refusals) < len(offsets):
        results = await context.service.groups.commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            getattr(request, "group_instance_id", None),
            {tp: value for tp, value in offsets.items() if tp not in refusals},
        )
    results = {**results, **refusals}
    return build(
        context.response_type,
        throttle_time=0,
        topics=[
            {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in partitions]}
            for name, partitions in _by_topic(results).items()
        ],
    )


def _commit_refusals(
    context: KafkaRequestContext, group_id: str, offsets: Mapping[TopicPartition, Any]
) -> dict[TopicPartition, int]:
    """Kafka 2.8 handleOffsetCommitRequest: Read on the group (else every partition GROUP_AUTHORIZATION_FAILED),
    then Read on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED)."""
    if authorizer_of(context) is None:
        return {}
    if not _group_allowed(context, AclOperation.READ, group_id):
        return dict.fromkeys(offsets, GROUP_AUTHORIZATION_FAILED)
    refused = topics_refused(context, AclOperation.READ, (tp.topic for tp in offsets))
    return {tp: TOPIC_AUTHORIZATION_FAILED for tp in offsets if tp.topic in refused}


@kafka_api(9, "OffsetFetch", 1, 7)
async def offset_fetch(request: Any, context: KafkaRequestContext) -> Any:
    """v2+ may ask every committed offset (null topics) and answer a group error at the top level; v1 repeats
    it on each partition asked (OffsetFetchRequest.getErrorResponse). v5+ carry the committed leader epoch.

    require_stable (v7, KIP-447) waits for pending transactional offsets; this cluster has no transactions,
    so every committed offset is stable and it changes nothing.
    """
    wanted = (
        None
        if request.topics is None
        else [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    )
    # Kafka 2.8 handleOffsetFetchRequest: Describe on the group, then on each topic (refused topics answer
    # TOPIC_AUTHORIZATION_FAILED when named, and are left out of an all-topics answer).
    if not _group_allowed(context, AclOperation.DESCRIBE, request.group_id):
        error, offsets = GROUP_AUTHORIZATION_FAILED, {}
    else:
        error, offsets = context.service.groups.coordinator.fetch_offsets(request.group_id, wanted)
    refused = topics_refused(context, AclOperation.DESCRIBE, (tp.topic for tp in offsets)) if offsets else set()
    if refused and wanted is None:
        offsets = {tp: value for tp, value in offsets.items() if tp.topic not in refused}
    if error != errors.NONE:
        partition_error = error if context.api_version < 2 else errors.NONE
        offsets = dict.fromkeys(wanted or []) if context.api_version < 2 else {}
    else:
        partition_error = errors.NONE
    return build(
        context.response_type,
        throttle_time=0,
        error_code=error,
        topics=[
            {
                "name": name,
                "partitions": [
                    _fetched_partition(p, None, TOPIC_AUTHORIZATION_FAILED)
                    if name in refused
                    else _fetched_partition(p, value, partition_error)
                    for p, value in partitions
                ],
            }
            for name, partitions in _by_topic(offsets).items()
        ],
    )


def _fetched_partition(partition: int, value: OffsetAndMetadata | None, error: int) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "committed_offset": -1 if value is None else value.offset,
        "committed_leader_epoch": NO_LEADER_EPOCH if value is None else value.leader_epoch,
        "metadata": "" if value is None else value.metadata,
        "error_code": error,
    }


@kafka_api(47, "OffsetDelete", 0, 0)
async def offset_delete(request: Any, context: KafkaRequestContext) -> Any:
    partitions = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    # Kafka 2.8 handleDeleteOffsetsRequest: Delete on the group, then Read on each topic.
    if not _group_allowed(context, AclOperation.DELETE, request.group_id):
        return build(context.response_type, throttle_time=0, error_code=GROUP_AUTHORIZATION_FAILED, topics=[])
    refused = topics_refused(context, AclOperation.READ, (tp.topic for tp in partitions))
    error, results = await context.service.groups.coordinator.delete_offsets(
        request.group_id, [tp for tp in partitions if tp.topic not in refused]
    )
    if refused:
        results = {**results, **{tp: TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp.topic in refused}}
    return build(
        context.response_type,
        throttle_time=0,
        error_code=error,
        topics=[
            {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in parts]}
            for name, parts in _by_topic(results).items()
        ],
    )


# ---------------------------------------------------------------- describe / list / delete


@kafka_api(15, "DescribeGroups", 0, 5)
async def describe_groups(request: Any, context: KafkaRequestContext) -> Any:
    include_operations = getattr(request, "include_authorized_operations", False)
    described = [_described_group(context, group_id, include_operations) for group_id in request.groups]
    return build(context.response_type, throttle_time=0, groups=described)


def _described_group(context: KafkaRequestContext, group_id: str, include_operations: bool) -> dict[str, Any]:
    """K28 GroupCoordinator.handleDescribeGroup: an unknown group is Dead without members; members carry their
    metadata and assignment only while the group is Stable."""
    if not _group_allowed(context, AclOperation.DESCRIBE, group_id):  # Kafka 2.8 handleDescribeGroupRequest
        error, group = GROUP_AUTHORIZATION_FAILED, None
    else:
        error, group = context.service.groups.coordinator.describe_group(group_id)
    operations = GROUP_AUTHORIZED_OPERATIONS if include_operations else AUTHORIZED_OPERATIONS_OMITTED
    described: dict[str, Any] = {
        "error_code": error,
        "group_id": group_id,
        "group_state": GroupState.DEAD.value if error == errors.NONE else "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": operations,
    }
    if error != errors.NONE or group is None:
        return described
    stable = group.is_(GroupState.STABLE)
    protocol = group.protocol_name or ""
    described.update(
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=protocol if stable else "",
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(protocol) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.all()
        ],
    )
    return described


@kafka_api(16, "ListGroups", 0, 4)
async def list_groups(request: Any, context: KafkaRequestContext) -> Any:
    """The groups this broker coordinates; v4 filters by state names as Kafka spells them (KIP-518)."""
    states = set(getattr(request, "states_filter", ()) or ())
    error, groups = context.service.groups.coordinator.list_groups()
    # Kafka 2.8 handleListGroupsRequest: Describe on the Cluster lists every group, else those one may Describe.
    if authorizer_of(context) is not None and not cluster_allowed(context, AclOperation.DESCRIBE):
        groups = [g for g in groups if _group_allowed(context, AclOperation.DESCRIBE, g.group_id)]
    return build(
        context.response_type,
        throttle_time=0,
        error_code=error,
        groups=[
            {"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value}
            for g in groups
            if not states or g.state.value in states
        ],
    )


@kafka_api(42, "DeleteGroups", 0, 2)
async def delete_groups(request: Any, context: KafkaRequestContext) -> Any:
    names: Iterable[str] = dict.fromkeys(request.groups_names)  # each group once, however often it is named
    refused = [g for g in names if not _group_allowed(context, AclOperation.DELETE, g)]  # 2.8: Delete on each
    results = await context.service.groups.coordinator.delete_groups([g for g in names if g not in refused])
    return build(
        context.response_type,
        throttle_time=0,
        results=[{"group_id": g, "error_code": code} for g, code in results.items()]
        + [{"group_id": g, "error_code": GROUP_AUTHORIZATION_FAILED} for g in refused],
    )
