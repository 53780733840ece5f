"""The admin APIs: topics, partitions, configs, records deletion, leader election, reassignment, log dirs.

Each handler translates a Kafka request into the broker's own admin calls (broker/admin_manager.py,
broker/config_admin.py, broker/log_dirs_description.py: the same the gRPC front end uses) and the answer
back. Version ranges are Kafka 2.8's (clients/src/main/resources/common/message/*.json) intersected with
kio's schemas.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.config_admin import AlterOp, ConfigOp
from broker.config_describe import ConfigEntry, describe_topic_configs
from broker.kafka_api.authorization import allowed, authorizer_of, cluster_allowed, topics_refused
from broker.kafka_api.entities import build, millis
from broker.kafka_api.registry import KafkaRequestContext, kafka_api
from broker.log_dirs_description import describe_log_dirs
from client.kafka import errors
from client.kafka.acls import AclOperation, ResourceType
from client.kafka.znodes import topic_id_string, topic_id_uuid
from zkraft_proto import broker_pb2 as pb

UNKNOWN_TOPIC_ID = 100  # Kafka 2.8's Errors.UNKNOWN_TOPIC_ID (KIP-516)
TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.code
# DescribeConfigs / AlterConfigs resource types (ConfigResource.Type): topics are checked on the topic, brokers
# and broker loggers on the Cluster (Kafka 2.8 KafkaApis.authorizeConfigResource).
_CONFIG_TOPIC = 2

# ---------------------------------------------------------------- topics


def _duplicates(names: list[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


def _creatable(topic: Any) -> pb.CreatableTopic:
    return pb.CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments=[
            pb.CreatableReplicaAssignment(partition_index=a.partition_index, broker_ids=list(a.broker_ids))
            for a in topic.assignments
        ],
        configs={c.name: c.value for c in topic.configs},
    )


def _request_error(topic: Any, duplicates: set[str]) -> tuple[int, str] | None:
    """KafkaApis.handleCreateTopicsRequest's checks of the request itself, before AdminManager sees a topic."""
    if topic.name in duplicates:
        return errors.InvalidRequestError.code, "Found multiple entries for this topic."
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        return errors.InvalidRequestError.code, f"Null value not supported for topic configs : {','.join(nulls)}"
    if topic.assignments and (topic.num_partitions != -1 or topic.replication_factor != -1):
        return (
            errors.InvalidRequestError.code,
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time.",
        )
    return None


@kafka_api(19, "CreateTopics", 2, 7)
async def create_topics(request: Any, ctx: KafkaRequestContext) -> Any:
    admin = ctx.service.admin
    duplicates = _duplicates([t.name for t in request.topics])
    refused = {}
    for topic in request.topics:
        error = _request_error(topic, duplicates)
        if error is not None:
            refused[topic.name] = error
    # Kafka 2.8 handleCreateTopicsRequest: Create on the Cluster, else on each topic.
    if authorizer_of(ctx) is not None and not cluster_allowed(ctx, AclOperation.CREATE):
        for name in topics_refused(ctx, AclOperation.CREATE, (t.name for t in request.topics)) - set(refused):
            refused[name] = (TOPIC_AUTHORIZATION_FAILED, None)
    accepted = [_creatable(t) for t in request.topics if t.name not in refused]
    response, shapes = await admin.create_topics_detailed(
        pb.CreateTopicsRequest(topics=accepted, timeout_ms=millis(request.timeout), validate_only=request.validate_only)
    )
    results = {r.name: r for r in response.topics}
    layers = await _layers_or_none(admin) if ctx.api_version >= 5 and shapes else None
    topics = []
    for name in dict.fromkeys(t.name for t in request.topics):
        if name in refused:
            code, message = refused[name]
            topics.append({"name": name, "topic_id": None, "error_code": code, "error_message": message, "configs": []})
            continue
        result = results[name]
        entry: dict[str, Any] = {
            "name": name,
            "topic_id": None,  # KIP-516: the created topic's id below (2.8 reads it back from the topic znode)
            "error_code": result.error_code,
            "error_message": result.error_message or None,
            "configs": [],  # with num_partitions and replication_factor -1, as 2.8 answers a failed topic
        }
        shape = shapes.get(name)
        if shape is not None:
            entry["topic_id"] = topic_id_uuid(shape.topic_id)
        if shape is not None and layers is not None:  # KIP-525: the created topic as DescribeConfigs would show it
            entry["num_partitions"] = shape.num_partitions
            entry["replication_factor"] = shape.replication_factor
            entry["configs"] = [_creatable_config(e) for e in describe_topic_configs(shape.configs, layers)]
        topics.append(entry)
    return build(ctx.response_type, throttle_time=0, topics=topics)


async def _layers_or_none(admin: Any) -> Any:
    """The broker's config layers for a v5+ answer; None (configs left out, as for a failed topic) if the
    quorum cannot be read now: the topics are created, and a handler that raised would close the connection."""
    try:
        return await admin.configs.broker_layers()
    except Exception:  # the topic answers still go out; the next DescribeConfigs reads the configs again
        return None


def _creatable_config(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": int(entry.source),
        "is_sensitive": entry.is_sensitive,
    }


@kafka_api(20, "DeleteTopics", 1, 6)
async def delete_topics(request: Any, ctx: KafkaRequestContext) -> Any:
    by_id: dict[str, Any] = {}  # topic name -> the id a v6 request named it by
    unresolved = []
    if ctx.api_version >= 6:  # v6 names each topic by name or by id (KIP-516)
        names = []
        for state in request.topics:
            name = state.name if state.name is not None else _topic_named_by_id(ctx, state.topic_id)
            if name is None:
                unresolved.append(state)
                continue
            names.append(name)
            if state.name is None:
                by_id[name] = state.topic_id
    else:
        names = list(request.topic_names)
    unique = list(dict.fromkeys(names))
    refused = topics_refused(ctx, AclOperation.DELETE, unique)  # Kafka 2.8: Delete on each topic
    response = await ctx.service.admin.delete_topics(
        pb.DeleteTopicsRequest(topic_names=[n for n in unique if n not in refused], timeout_ms=millis(request.timeout))
    )
    results = [
        {
            "name": r.name,
            "topic_id": by_id.get(r.name),
            "error_code": r.error_code,
            "error_message": r.error_message or None,
        }
        for r in response.responses
    ]
    results += [
        {"name": n, "topic_id": by_id.get(n), "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": None}
        for n in unique
        if n in refused
    ]
    for state in unresolved:  # 2.8: an id the cluster does not know (controllerContext.topicName is empty)
        results.append(
            {
                "name": None,
                "topic_id": state.topic_id,
                "error_code": UNKNOWN_TOPIC_ID,
                "error_message": "This server does not host this topic ID.",
            }
        )
    return build(ctx.response_type, throttle_time=0, responses=results)


def _topic_named_by_id(ctx: KafkaRequestContext, topic_id: Any) -> str | None:
    """The topic a DeleteTopics v6 id names, from the ids the controller's UpdateMetadata carries."""
    if topic_id is None:
        return None
    return ctx.service.metadata_cache.topic_named_by_id(topic_id_string(topic_id))


@kafka_api(37, "CreatePartitions", 0, 3)
async def create_partitions(request: Any, ctx: KafkaRequestContext) -> Any:
    duplicates = _duplicates([t.name for t in request.topics])
    refused = topics_refused(ctx, AclOperation.ALTER, (t.name for t in request.topics)) - duplicates  # 2.8: Alter
    topics = [
        pb.CreatePartitionsTopic(
            name=t.name,
            count=t.count,
            assignments=[pb.CreatePartitionsAssignment(broker_ids=list(a.broker_ids)) for a in t.assignments or ()],
        )
        for t in request.topics
        if t.name not in duplicates and t.name not in refused
    ]
    response = await ctx.service.admin.create_partitions(
        pb.CreatePartitionsRequest(
            topics=topics, timeout_ms=millis(request.timeout), validate_only=request.validate_only
        )
    )
    results = [
        {"name": r.name, "error_code": r.error_code, "error_message": r.error_message or None} for r in response.results
    ]
    for name in sorted(refused):
        results.append({"name": name, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": None})
    for name in sorted(duplicates):  # KafkaApis: "Duplicate topic in request." for each repeated name
        results.append(
            {
                "name": name,
                "error_code": errors.InvalidRequestError.code,
                "error_message": "Duplicate topic in request.",
            }
        )
    return build(ctx.response_type, throttle_time=0, results=results)


# ---------------------------------------------------------------- configs


def _config_result(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": int(entry.source),
        "is_sensitive": entry.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": int(s.source)} for s in entry.synonyms],
        "config_type": int(entry.config_type),
        "documentation": entry.documentation,
    }


@kafka_api(32, "DescribeConfigs", 1, 4)
async def describe_configs(request: Any, ctx: KafkaRequestContext) -> Any:
    refused = _config_refusals(ctx, AclOperation.DESCRIBE_CONFIGS, request.resources)
    resources = [
        (r.resource_type, r.resource_name, r.configuration_keys)
        for i, r in enumerate(request.resources)
        if i not in refused
    ]
    described = await ctx.service.admin.configs.describe(
        resources,
        include_synonyms=request.include_synonyms,
        include_documentation=getattr(request, "include_documentation", False),
    )
    results = [
        {
            "error_code": d.error_code,
            "error_message": d.error_message,
            "resource_type": d.resource_type,
            "resource_name": d.resource_name,
            "configs": [_config_result(e) for e in d.entries],
        }
        for d in described
    ]
    results += [
        {
            "error_code": code,
            "error_message": None,
            "resource_type": request.resources[i].resource_type,
            "resource_name": request.resources[i].resource_name,
            "configs": [],
        }
        for i, code in refused.items()
    ]
    return build(ctx.response_type, throttle_time=0, results=results)


def _config_refusals(ctx: KafkaRequestContext, operation: AclOperation, resources: Any) -> dict[int, int]:
    """{index of a refused resource: its error}: a topic's configs need `operation` on the topic, a broker's (or
    its loggers') on the Cluster (Kafka 2.8 KafkaApis.authorizeConfigResource)."""
    if authorizer_of(ctx) is None:
        return {}
    refused = {}
    for index, resource in enumerate(resources):
        if resource.resource_type == _CONFIG_TOPIC:
            if not allowed(ctx, operation, ResourceType.TOPIC, resource.resource_name):
                refused[index] = TOPIC_AUTHORIZATION_FAILED
        elif not cluster_allowed(ctx, operation):
            refused[index] = CLUSTER_AUTHORIZATION_FAILED
    return refused


def _refused_config_responses(resources: Any, refused: dict[int, int]) -> list[dict[str, Any]]:
    return [
        {
            "error_code": code,
            "error_message": None,
            "resource_type": resources[i].resource_type,
            "resource_name": resources[i].resource_name,
        }
        for i, code in refused.items()
    ]


def _alter_responses(results: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "error_code": r.error_code,
            "error_message": r.error_message,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        for r in results
    ]


@kafka_api(33, "AlterConfigs", 0, 2)
async def alter_configs(request: Any, ctx: KafkaRequestContext) -> Any:
    refused = _config_refusals(ctx, AclOperation.ALTER_CONFIGS, request.resources)
    resources = [
        (r.resource_type, r.resource_name, [ConfigOp(c.name, c.value) for c in r.configs])
        for i, r in enumerate(request.resources)
        if i not in refused
    ]
    results = await ctx.service.admin.configs.alter(resources, validate_only=request.validate_only)
    responses = _alter_responses(results) + _refused_config_responses(request.resources, refused)
    return build(ctx.response_type, throttle_time=0, responses=responses)


@kafka_api(44, "IncrementalAlterConfigs", 0, 1)
async def incremental_alter_configs(request: Any, ctx: KafkaRequestContext) -> Any:
    resources = []
    refused = []
    unauthorized = _config_refusals(ctx, AclOperation.ALTER_CONFIGS, request.resources)
    for i, r in enumerate(request.resources):
        if i in unauthorized:
            continue
        try:
            ops = [ConfigOp(c.name, c.value, AlterOp(c.config_operation)) for c in r.configs]
        except ValueError:  # AlterConfigOp.OpType.forId: an id it does not know
            refused.append((r, "Unknown alter config operation type"))
            continue
        resources.append((r.resource_type, r.resource_name, ops))
    results = _alter_responses(
        await ctx.service.admin.configs.alter(resources, validate_only=request.validate_only, incremental=True)
    ) + _refused_config_responses(request.resources, unauthorized)
    for r, message in refused:
        results.append(
            {
                "error_code": errors.InvalidRequestError.code,
                "error_message": message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
        )
    return build(ctx.response_type, throttle_time=0, responses=results)


# ---------------------------------------------------------------- log dirs


@kafka_api(35, "DescribeLogDirs", 1, 2)
async def describe_log_dirs_api(request: Any, ctx: KafkaRequestContext) -> Any:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):  # Kafka 2.8 answers no log dir at all
        return build(ctx.response_type, throttle_time=0, results=[])
    replicas = ctx.service.replicas
    wanted = None if request.topics is None else {t.topic: set(t.partitions) for t in request.topics}
    described = describe_log_dirs(replicas.logs, replicas.partitions, wanted)
    results = [
        {
            "error_code": errors.NONE,
            "log_dir": d.path,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p.partition,
                            "partition_size": p.size_bytes,
                            "offset_lag": p.offset_lag,
                            "is_future_key": p.is_future,
                        }
                        for p in partitions
                    ],
                }
                for topic, partitions in d.topics.items()
            ],
        }
        for d in described
    ]
    return build(ctx.response_type, throttle_time=0, results=results)
