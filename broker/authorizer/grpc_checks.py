"""The authorizer's checks on the broker's gRPC API: the same operations on the same resources as the Kafka
listener's handlers (broker/kafka_api/), answered with the same error codes in the gRPC responses.

The principal is the call's (`grpc_principal`: broker/grpc_authentication.py sets it from the caller's SASL session
or certificate; User:ANONYMOUS on a port that authenticates no one). Broker-to-broker RPCs (a follower's Fetch,
LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown) need ClusterAction on the Cluster, as Kafka 2.8's
KafkaApis checks them, on a port that knows its callers (SASL or mutual TLS); on a port that does not, a broker
cannot be told from a client, and checking them as User:ANONYMOUS would stop replication, so they are left
unchecked there. `guard` wraps one servicer method; the broker installs guards only when it has an authorizer, so
without one nothing here runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.grpc_authentication import ANONYMOUS, CALL_PRINCIPAL
from client.kafka import errors
from client.kafka.acls import CLUSTER_NAME, AclOperation, ResourceType
from zkraft_proto import broker_pb2 as pb

__all__ = ["ANONYMOUS", "CHECKED_RPCS", "guard", "grpc_principal"]
TOPIC_DENIED = errors.TopicAuthorizationFailedError.code
GROUP_DENIED = errors.GroupAuthorizationFailedError.code
CLUSTER_DENIED = errors.ClusterAuthorizationFailedError.code
TRANSACTIONAL_ID_DENIED = errors.TransactionalIdAuthorizationFailedError.code
_CONFIG_TOPIC = 2  # ConfigResource.Type TOPIC; brokers and broker loggers are checked on the Cluster

Handler = Callable[[Any, Any], Awaitable[Any]]


def grpc_principal(context: Any) -> str:
    """Who called: the principal broker/grpc_authentication.py found for this call (User:ANONYMOUS when the
    port authenticates no one)."""
    return CALL_PRINCIPAL.get()


def grpc_client_host(context: Any) -> str:
    """The caller's address from gRPC's peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`)."""
    peer = str(context.peer() or "") if context is not None else ""
    _, _, address = peer.partition(":")
    host = address.rpartition(":")[0] or address
    return host.strip("[]")


@dataclass(frozen=True, slots=True)
class Check:
    authorizer: Any
    principal: str
    host: str

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str, log_denied: bool = True) -> bool:
        return bool(self.authorizer.authorize(self.principal, self.host, operation, resource_type, name, log_denied))

    def cluster(self, operation: AclOperation) -> bool:
        return self.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def refused(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        return {n for n in set(names) if not self.allows(operation, resource_type, n)}


@dataclass(frozen=True, slots=True)
class PerTopic:
    """An RPC whose topics each need `operation`; a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED."""

    operation: AclOperation
    request_field: str
    name_field: str
    partition_field: str
    response_field: str
    refusal: Callable[[int], dict[str, int]]


PER_TOPIC: dict[str, PerTopic] = {
    "Produce": PerTopic(AclOperation.WRITE, "topics", "name", "index", "responses",
                        lambda p: {"index": p, "error_code": TOPIC_DENIED, "base_offset": -1, "log_start_offset": -1,
                                   "log_append_time_ms": -1}),
    "ListOffsets": PerTopic(AclOperation.DESCRIBE, "topics", "name", "partition_index", "topics",
                            lambda p: {"partition_index": p, "error_code": TOPIC_DENIED, "timestamp": -1, "offset": -1,
                                       "leader_epoch": -1}),
    "OffsetForLeaderEpoch": PerTopic(AclOperation.DESCRIBE, "topics", "topic", "partition", "topics",
                                     lambda p: {"partition": p, "error_code": TOPIC_DENIED, "leader_epoch": -1,
                                                "end_offset": -1}),
    "DeleteRecords": PerTopic(AclOperation.DELETE, "topics", "name", "partition_index", "topics",
                              lambda p: {"partition_index": p, "error_code": TOPIC_DENIED, "low_watermark": -1}),
}  # fmt: skip


def _without(request: Any, field: str, keep: Callable[[Any], bool]) -> Any:
    kept = type(request)()
    kept.CopyFrom(request)
    items = [item for item in getattr(request, field) if keep(item)]
    del getattr(kept, field)[:]
    getattr(kept, field).extend(items)
    return kept


async def _per_topic(name: str, check: Check, request: Any, handler: Handler, context: Any) -> Any:
    spec = PER_TOPIC[name]
    topics = getattr(request, spec.request_field)
    refused = check.refused(spec.operation, ResourceType.TOPIC, (getattr(t, spec.name_field) for t in topics))
    if not refused:
        return await handler(request, context)
    kept = _without(request, spec.request_field, lambda t: getattr(t, spec.name_field) not in refused)
    response = await handler(kept, context) if getattr(kept, spec.request_field) else getattr(pb, f"{name}Response")()
    for topic in topics:
        if getattr(topic, spec.name_field) in refused:
            out = getattr(response, spec.response_field).add(**{spec.name_field: getattr(topic, spec.name_field)})
            for partition in topic.partitions:
                out.partitions.add(**spec.refusal(getattr(partition, spec.partition_field)))
    return response


def _knows_callers(service: Any) -> bool:
    authentication = getattr(service, "authentication", None)
    return authentication is not None and authentication.knows_callers


async def _fetch(service: Any, check: Check, request: pb.FetchRequest, handler: Handler, context: Any) -> Any:
    """A consumer's Fetch needs Read on each topic; a follower's ClusterAction, else every partition answers
    TOPIC_AUTHORIZATION_FAILED (Kafka 2.8 handleFetchRequest); see the module's note for ports that know no one."""
    if request.replica_id >= 0:
        if not _knows_callers(service) or check.cluster(AclOperation.CLUSTER_ACTION):
            return await handler(request, context)
        response = pb.FetchResponse()
        for topic in request.topics:
            out = response.responses.add(topic=topic.topic)
            for p in topic.partitions:
                out.partitions.add(partition=p.partition, error_code=TOPIC_DENIED, high_watermark=-1,
                                   last_stable_offset=-1, log_start_offset=-1)  # fmt: skip
        return response.SerializeToString()
    refused = check.refused(AclOperation.READ, ResourceType.TOPIC, (t.topic for t in request.topics))
    if not refused:
        return await handler(request, context)
    kept = _without(request, "topics", lambda t: t.topic not in refused)
    reply = await service.replicas.fetch(kept) if kept.topics else None
    response = reply.response if reply is not None else pb.FetchResponse()
    for topic in request.topics:
        if topic.topic in refused:
            out = response.responses.add(topic=topic.topic)
            for p in topic.partitions:
                out.partitions.add(partition=p.partition, error_code=TOPIC_DENIED, high_watermark=-1,
                                   last_stable_offset=-1, log_start_offset=-1)  # fmt: skip
    return reply.encode() if reply is not None else response.SerializeToString()


async def _metadata(service: Any, check: Check, request: pb.MetadataRequest, handler: Handler, context: Any) -> Any:
    """Topics one may not Describe: left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED when named; a
    missing one is auto-created only with Create on the Cluster or on it (else TOPIC_AUTHORIZATION_FAILED)."""
    refused = check.refused(AclOperation.DESCRIBE, ResourceType.TOPIC, request.topics)
    if request.allow_auto_topic_creation and not check.cluster(AclOperation.CREATE):
        missing = [t for t in request.topics if not service.metadata_cache.contains(t)]
        refused |= check.refused(AclOperation.CREATE, ResourceType.TOPIC, missing)
    kept = _without(request, "topics", lambda t: t not in refused) if refused else request
    response = await handler(kept, context)  # with no topic left it still answers the brokers and controller
    if request.all_topics:
        hidden = {
            t.name
            for t in response.topics
            if not check.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, False)
        }
        visible = [t for t in response.topics if t.name not in hidden]
        del response.topics[:]
        response.topics.extend(visible)
    for name in dict.fromkeys(t for t in request.topics if t in refused):
        response.topics.add(name=name, error_code=TOPIC_DENIED)
    return response


@dataclass(frozen=True, slots=True)
class Named:
    """An RPC naming resources (topics or groups) that each need `operation`; a refused one answers `error` in a
    response entry of its own."""

    operation: AclOperation
    resource_type: ResourceType
    request_field: str
    name_field: str | None  # None: the request lists plain names
    response_field: str
    response_name: str
    error: int


NAMED: dict[str, Named] = {
    "CreateTopics": Named(AclOperation.CREATE, ResourceType.TOPIC, "topics", "name", "topics", "name", TOPIC_DENIED),
    "DeleteTopics": Named(AclOperation.DELETE, ResourceType.TOPIC, "topic_names", None, "responses", "name",
                          TOPIC_DENIED),
    "CreatePartitions": Named(AclOperation.ALTER, ResourceType.TOPIC, "topics", "name", "results", "name",
                              TOPIC_DENIED),
    "DeleteGroups": Named(AclOperation.DELETE, ResourceType.GROUP, "groups_names", None, "results", "group_id",
                          GROUP_DENIED),
    "DescribeGroups": Named(AclOperation.DESCRIBE, ResourceType.GROUP, "groups", None, "groups", "group_id",
                            GROUP_DENIED),
}  # fmt: skip


async def _named(name: str, check: Check, request: Any, handler: Handler, context: Any) -> Any:
    spec = NAMED[name]
    if name == "CreateTopics" and check.cluster(AclOperation.CREATE):
        return await handler(request, context)

    def name_of(item: Any) -> str:
        return item if spec.name_field is None else getattr(item, spec.name_field)

    items = getattr(request, spec.request_field)
    refused = check.refused(spec.operation, spec.resource_type, (name_of(i) for i in items))
    if not refused:
        return await handler(request, context)
    kept = _without(request, spec.request_field, lambda i: name_of(i) not in refused)
    response = await handler(kept, context) if getattr(kept, spec.request_field) else getattr(pb, f"{name}Response")()
    for refused_name in dict.fromkeys(name_of(i) for i in items if name_of(i) in refused):
        getattr(response, spec.response_field).add(**{spec.response_name: refused_name, "error_code": spec.error})
    return response


# One group, one operation: the whole request answers GROUP_AUTHORIZATION_FAILED (Kafka 2.8 KafkaApis).
ONE_GROUP: dict[str, AclOperation] = {
    "JoinGroup": AclOperation.READ,
    "SyncGroup": AclOperation.READ,
    "Heartbeat": AclOperation.READ,
    "LeaveGroup": AclOperation.READ,
}
# Controller -> broker and broker -> controller: ClusterAction (Kafka 2.8 KafkaApis' authorizeClusterOperation in
# handleLeaderAndIsrRequest, handleUpdateMetadataRequest, handleStopReplicaRequest, handleControlledShutdownRequest).
INTER_BROKER = frozenset({"LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdown"})
# The Cluster, one operation: the request answers CLUSTER_AUTHORIZATION_FAILED.
ON_CLUSTER: dict[str, AclOperation] = {
    "ElectLeaders": AclOperation.ALTER,
    "AlterPartitionReassignments": AclOperation.ALTER,
    "ListPartitionReassignments": AclOperation.DESCRIBE,
}


async def _find_coordinator(check: Check, request: Any, handler: Handler, context: Any) -> Any:
    if check.allows(AclOperation.DESCRIBE, ResourceType.GROUP, request.key):
        return await handler(request, context)
    return pb.FindCoordinatorResponse(error_code=GROUP_DENIED, node_id=-1, port=-1)


async def _offset_commit(check: Check, request: Any, handler: Handler, context: Any) -> Any:
    """Read on the group (else every partition GROUP_AUTHORIZATION_FAILED), then Read on each topic."""
    group_ok = check.allows(AclOperation.READ, ResourceType.GROUP, request.group_id)
    refused = (
        {t.name for t in request.topics}
        if not group_ok
        else check.refused(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    )
    if not refused:
        return await handler(request, context)
    kept = _without(request, "topics", lambda t: t.name not in refused)
    response = await handler(kept, context) if kept.topics else pb.OffsetCommitResponse()
    for topic in request.topics:
        if topic.name in refused:
            out = response.topics.add(name=topic.name)
            for p in topic.partitions:
                out.partitions.add(
                    partition_index=p.partition_index, error_code=TOPIC_DENIED if group_ok else GROUP_DENIED
                )
    return response


async def _offset_fetch(check: Check, request: Any, handler: Handler, context: Any) -> Any:
    """Describe on the group, then on each topic (left out of an all-topics answer)."""
    if not check.allows(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return pb.OffsetFetchResponse(error_code=GROUP_DENIED)
    response = await handler(request, context)
    refused = check.refused(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in response.topics))
    if refused:
        visible = [t for t in response.topics if t.name not in refused]
        del response.topics[:]
        response.topics.extend(visible)
        for topic in request.topics if not request.all_topics else ():
            if topic.name in refused:
                out = response.topics.add(name=topic.name)
                for p in topic.partition_indexes:
                    out.partitions.add(partition_index=p, committed_offset=-1, error_code=TOPIC_DENIED)
    return response


async def _list_groups(check: Check, request: Any, handler: Handler, context: Any) -> Any:
    response = await handler(request, context)
    if check.cluster(AclOperation.DESCRIBE):
        return response
    visible = [g for g in response.groups if check.allows(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    del response.groups[:]
    response.groups.extend(visible)
    return response


async def _configs(name: str, check: Check, request: Any, handler: Handler, context: Any) -> Any:
    """A topic's configs need the operation on the topic, a broker's on the Cluster."""
    operation = AclOperation.DESCRIBE_CONFIGS if name == "DescribeConfigs" else AclOperation.ALTER_CONFIGS
    refused = {}
    for index, resource in enumerate(request.resources):
        if resource.resource_type == _CONFIG_TOPIC:
            if not check.allows(operation, ResourceType.TOPIC, resource.resource_name):
                refused[index] = TOPIC_DENIED
        elif not check.cluster(operation):
            refused[index] = CLUSTER_DENIED
    if not refused:
        return await handler(request, context)
    kept = type(request)()
    kept.CopyFrom(request)
    del kept.resources[:]
    kept.resources.extend(r for i, r in enumerate(request.resources) if i not in refused)
    response = await handler(kept, context) if kept.resources else getattr(pb, f"{name}Response")()
    answers = response.results if name == "DescribeConfigs" else response.responses
    for index, code in refused.items():
        resource = request.resources[index]
        answers.add(error_code=code, resource_type=resource.resource_type, resource_name=resource.resource_name)
    return response


async def _init_producer_id(check: Check, request: Any, handler: Handler, context: Any) -> Any:
    if request.transactional_id:
        if check.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return await handler(request, context)
        code = TRANSACTIONAL_ID_DENIED
    elif check.cluster(AclOperation.IDEMPOTENT_WRITE):
        return await handler(request, context)
    else:
        code = CLUSTER_DENIED
    return pb.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


async def _checked(service: Any, name: str, check: Check, request: Any, handler: Handler, context: Any) -> Any:
    """Dispatches one RPC to its check (one-line branches only)."""
    if name in INTER_BROKER:
        if not _knows_callers(service) or check.cluster(AclOperation.CLUSTER_ACTION):
            return await handler(request, context)
        return getattr(pb, f"{name}Response")(error_code=CLUSTER_DENIED)
    if name == "OffsetForLeaderEpoch" and check.allows(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                                       CLUSTER_NAME, False):  # fmt: skip
        return await handler(request, context)  # a follower (KIP-320: a consumer needs Describe on each topic)
    if name in PER_TOPIC:
        return await _per_topic(name, check, request, handler, context)
    if name in NAMED:
        return await _named(name, check, request, handler, context)
    if name in ONE_GROUP:
        if check.allows(ONE_GROUP[name], ResourceType.GROUP, request.group_id):
            return await handler(request, context)
        return getattr(pb, f"{name}Response")(error_code=GROUP_DENIED)
    if name in ON_CLUSTER:
        if check.cluster(ON_CLUSTER[name]):
            return await handler(request, context)
        return getattr(pb, f"{name}Response")(error_code=CLUSTER_DENIED)
    if name in ("DescribeConfigs", "AlterConfigs"):
        return await _configs(name, check, request, handler, context)
    special = {
        "Fetch": lambda: _fetch(service, check, request, handler, context),
        "Metadata": lambda: _metadata(service, check, request, handler, context),
        "FindCoordinator": lambda: _find_coordinator(check, request, handler, context),
        "OffsetCommit": lambda: _offset_commit(check, request, handler, context),
        "OffsetFetch": lambda: _offset_fetch(check, request, handler, context),
        "ListGroups": lambda: _list_groups(check, request, handler, context),
        "InitProducerId": lambda: _init_producer_id(check, request, handler, context),
    }
    return await special[name]()


CHECKED_RPCS = frozenset(
    {*PER_TOPIC, *NAMED, *ONE_GROUP, *ON_CLUSTER, *INTER_BROKER, "DescribeConfigs", "AlterConfigs", "Fetch", "Metadata",
     "FindCoordinator", "OffsetCommit", "OffsetFetch", "ListGroups", "InitProducerId"}
)  # fmt: skip


def guard(service: Any, name: str, handler: Handler) -> Handler:
    """`handler` (the servicer's method `name`) behind the authorizer's check, if the RPC is one it checks."""
    if name not in CHECKED_RPCS:
        return handler

    async def checked(request: Any, context: Any) -> Any:
        check = Check(service.authorizer, grpc_principal(context), grpc_client_host(context))
        return await _checked(service, name, check, request, handler, context)

    return checked
