"""ApiVersions, Metadata, DescribeCluster and SaslHandshake: what a client asks before anything else.

Versions: Kafka 2.8's (clients/src/main/resources/common/message/*.json, validVersions) intersected with
kio's schemas: ApiVersions 0-3, Metadata 0-11, DescribeCluster 0, SaslHandshake 0-1.
"""

from __future__ import annotations

import io
import re
from functools import cache
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_writer

from broker.kafka_api.authorization import cluster_allowed, topics_refused
from broker.kafka_api.entities import build
from broker.kafka_api.registry import API_SPECS, EncodedResponse, KafkaRequestContext, kafka_api
from client.kafka import errors
from client.kafka.acls import AclOperation
from client.kafka.znodes import INTERNAL_TOPICS, is_valid_topic_name, topic_id_uuid

API_VERSIONS_KEY = 18
METADATA_KEY = 3
SASL_HANDSHAKE_KEY = 17
DESCRIBE_CLUSTER_KEY = 60
# Kafka's "not requested" value of the authorized-operations fields (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# How long a Metadata request waits for the broker's first UpdateMetadata when it knows no broker yet (start-up).
FIRST_METADATA_WAIT_S = 2.0
# KIP-511: ApiVersionsRequest.isValid checks client_software_name and _version with this pattern.
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _api_keys() -> list[dict[str, int]]:
    return [
        {"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}
        for _, spec in sorted(API_SPECS.items())
    ]


def unsupported_api_versions_response() -> Any:
    """ApiVersions v0 with UNSUPPORTED_VERSION and the table: Kafka's answer to an ApiVersions request in a
    version it does not know (KIP-511), from which the client picks a version both sides speak."""
    return build(
        load_response_schema(API_VERSIONS_KEY, 0),
        error_code=errors.UnsupportedVersionError.code,
        api_keys=_api_keys(),
    )


@kafka_api(API_VERSIONS_KEY, "ApiVersions", 0, 3)
async def api_versions(request: Any, ctx: KafkaRequestContext) -> Any:
    """Every API this broker serves, with its version range (Kafka's ApiVersionsResponse)."""
    if ctx.api_version >= 3 and not (
        _SOFTWARE_NAME.fullmatch(request.client_software_name)
        and _SOFTWARE_NAME.fullmatch(request.client_software_version)
    ):
        return build(ctx.response_type, error_code=errors.InvalidRequestError.code, api_keys=[], throttle_time=0)
    return _encoded_api_versions(ctx.response_type)


@cache
def _encoded_api_versions(response_type: type) -> EncodedResponse:
    """The table, encoded once per version: every connection asks for it first, and it never changes once the
    API modules are imported (the first request comes after that)."""
    body = io.BytesIO()
    response = build(response_type, error_code=errors.NONE, api_keys=_api_keys(), throttle_time=0)
    entity_writer(response_type)(body, response)
    return EncodedResponse((body.getvalue(),))


@kafka_api(SASL_HANDSHAKE_KEY, "SaslHandshake", 0, 1)
async def sasl_handshake(request: Any, ctx: KafkaRequestContext) -> Any:
    """On a SASL_ listener, the connection's authenticator answers (broker/sasl/authenticator.py); elsewhere no
    mechanism is enabled (UNSUPPORTED_SASL_MECHANISM)."""
    authenticator = ctx.connection.authenticator
    if authenticator is not None:
        return authenticator.handshake(request, ctx)
    return build(ctx.response_type, error_code=errors.UnsupportedSaslMechanismError.code, mechanisms=())


@kafka_api(DESCRIBE_CLUSTER_KEY, "DescribeCluster", 0, 0)
async def describe_cluster(request: Any, ctx: KafkaRequestContext) -> Any:
    """The live brokers on this listener, the controller and the cluster id (KIP-700)."""
    cache = ctx.service.metadata_cache
    brokers = _brokers(cache, ctx.listener_name)
    return build(
        ctx.response_type,
        throttle_time=0,
        error_code=errors.NONE,
        error_message=None,
        cluster_id=cache.cluster_id,
        controller_id=_controller_id(cache, ctx.listener_name),
        brokers=[{"broker_id": b["node_id"], **{k: v for k, v in b.items() if k != "node_id"}} for b in brokers],
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


@kafka_api(METADATA_KEY, "Metadata", 0, 11)
async def metadata(request: Any, ctx: KafkaRequestContext) -> Any:
    """Brokers (their endpoints on the listener the request came in on), controller, cluster id and the
    topics asked for (Kafka 2.8 KafkaApis.handleTopicMetadataRequest)."""
    service = ctx.service
    cache = service.metadata_cache
    if not cache.brokers:
        # A broker that has not yet had its first UpdateMetadata from the controller knows no broker at all.
        # Kafka 2.8 answers that empty list, and a Java AdminClient then waits for a controller until its next
        # metadata refresh; a short wait here answers with the cluster instead.
        await cache.wait_for_update(FIRST_METADATA_WAIT_S)
    names = _requested_topics(request, ctx.api_version)
    # Kafka 2.8: topics the principal may not Describe are left out of an all-topics answer, and answer
    # TOPIC_AUTHORIZATION_FAILED when named (whether they exist or not: their existence is not disclosed).
    listed = cache.topics() if names is None else names
    hidden = topics_refused(ctx, AclOperation.DESCRIBE, listed, log_denied=names is not None)
    auto_created: set[str] = set()
    allow_auto_create = ctx.api_version < 4 or request.allow_auto_topic_creation
    if names and allow_auto_create and service.admin is not None:
        missing = [t for t in names if t not in hidden and not cache.contains(t) and is_valid_topic_name(t)]
        if missing and service.admin.config.auto_create_topics_enable:
            # Auto-creation needs Create on the Cluster, else on each topic (2.8 handleTopicMetadataRequest).
            if not cluster_allowed(ctx, AclOperation.CREATE):
                hidden |= topics_refused(ctx, AclOperation.CREATE, missing)
                missing = [t for t in missing if t not in hidden]
        if missing and service.admin.config.auto_create_topics_enable:
            await service.admin.auto_create(missing)
            auto_created = set(missing)
    topics = [
        _unauthorized_topic(name)
        if name in hidden
        else _topic(cache, name, ctx.listener_name, ctx.api_version, auto_created)
        for name in listed
        if names is not None or name not in hidden
    ]
    return build(
        ctx.response_type,
        throttle_time=0,
        brokers=_brokers(cache, ctx.listener_name),
        cluster_id=cache.cluster_id,
        controller_id=_controller_id(cache, ctx.listener_name),
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _requested_topics(request: Any, api_version: int) -> list[str] | None:
    """The names asked for, each once; None for all topics (v0: an empty list; v1+: a null list)."""
    if request.topics is None or (api_version == 0 and not request.topics):
        return None
    return list(dict.fromkeys(t.name for t in request.topics if t.name is not None))


def _brokers(cache: Any, listener: str) -> list[dict[str, Any]]:
    return [
        {"node_id": broker.id, "host": endpoint.host, "port": endpoint.port, "rack": broker.rack or None}
        for broker, endpoint in cache.listener_brokers(listener)
    ]


def _controller_id(cache: Any, listener: str) -> int:
    controller = cache.controller_id
    return controller if cache.listener_endpoint(controller, listener) is not None else -1


def _topic(cache: Any, name: str, listener: str, api_version: int, auto_created: set[str]) -> dict[str, Any]:
    partitions = cache.partitions.get(name)
    internal = name in INTERNAL_TOPICS
    if partitions is None:
        if not is_valid_topic_name(name):
            error = errors.InvalidTopicError.code
        elif name in auto_created:
            error = errors.LeaderNotAvailableError.code  # being created: the client asks again
        else:
            error = errors.UnknownTopicOrPartitionError.code
        return {"error_code": error, "name": name, "topic_id": None, "is_internal": internal, "partitions": ()}
    first = next(iter(partitions.values()), None)
    return {
        "error_code": errors.NONE,
        "name": name,
        "topic_id": topic_id_uuid(first.topic_id) if first is not None else None,  # KIP-516, Metadata v10+
        "is_internal": internal,
        "partitions": [
            _partition(cache, index, partitions[index], listener, api_version) for index in sorted(partitions)
        ],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _unauthorized_topic(name: str) -> dict[str, Any]:
    return {
        "error_code": errors.TopicAuthorizationFailedError.code,
        "name": name,
        "topic_id": None,
        "is_internal": False,
        "partitions": (),
    }


def _partition(cache: Any, index: int, state: Any, listener: str, api_version: int) -> dict[str, Any]:
    live = cache.brokers
    error = errors.NONE
    leader = state.leader
    if leader not in live:
        error, leader = errors.LeaderNotAvailableError.code, -1
    elif cache.listener_endpoint(leader, listener) is None:
        # The leader is alive but not on this listener (Kafka 2.8: LISTENER_NOT_FOUND from v6 on).
        error = errors.ListenerNotFoundError.code if api_version >= 6 else errors.LeaderNotAvailableError.code
        leader = -1
    replicas = list(state.replicas)
    return {
        "error_code": error,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": replicas,
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in replicas if r not in live],
    }
