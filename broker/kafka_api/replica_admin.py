"""DeleteRecords, ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments over Kafka's protocol.

Translation only: DeleteRecords goes to the replica manager (the partition's leader moves its log start
offset), the other three to the controller's admin calls (answered NOT_CONTROLLER on any other broker, as
Kafka 2.8's ZooKeeper-mode brokers do: the clients send them to the controller named in Metadata). Versions:
Kafka 2.8's validVersions intersected with kio's (DeleteRecords 0-2, ElectLeaders 0-2, both reassignment
APIs 0).
"""

from __future__ import annotations

from typing import Any

from broker.kafka_api.authorization import cluster_allowed, topics_refused
from broker.kafka_api.entities import build, millis
from broker.kafka_api.registry import KafkaRequestContext, kafka_api
from client.kafka import errors
from client.kafka.acls import AclOperation
from client.kafka.structs import TopicPartition
from zkraft_proto import broker_pb2 as pb

TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.code


@kafka_api(21, "DeleteRecords", 0, 2)
async def delete_records(request: Any, ctx: KafkaRequestContext) -> Any:
    refused = topics_refused(ctx, AclOperation.DELETE, (t.name for t in request.topics))  # 2.8: Delete on each
    internal = pb.DeleteRecordsRequest(
        topics=[
            pb.DeleteRecordsTopic(
                name=t.name,
                partitions=[
                    pb.DeleteRecordsPartition(partition_index=p.partition_index, offset=p.offset) for p in t.partitions
                ],
            )
            for t in request.topics
            if t.name not in refused
        ],
        timeout_ms=millis(request.timeout),
    )
    answer = await ctx.service.replicas.delete_records(internal)
    topics = [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p.partition_index, "low_watermark": p.low_watermark, "error_code": p.error_code}
                for p in t.partitions
            ],
        }
        for t in answer.topics
    ]
    topics += [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p.partition_index, "low_watermark": -1, "error_code": TOPIC_AUTHORIZATION_FAILED}
                for p in t.partitions
            ],
        }
        for t in request.topics
        if t.name in refused
    ]
    return build(ctx.response_type, throttle_time=0, topics=topics)


@kafka_api(43, "ElectLeaders", 0, 2)
async def elect_leaders(request: Any, ctx: KafkaRequestContext) -> Any:
    election_type = getattr(request, "election_type", 0)  # v0 knows only the preferred election
    requested = None
    if request.topic_partitions is not None:
        requested = tuple(TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions)
    if cluster_allowed(ctx, AclOperation.ALTER):  # Kafka 2.8 handleElectReplicaLeader: Alter on the Cluster
        error_code, results = await ctx.service.controller_admin_call("elect_leaders", requested, election_type)
    else:
        error_code, results = CLUSTER_AUTHORIZATION_FAILED, {}
    if error_code != 0:
        # Kafka's ElectLeadersRequest.getErrorResponse: the error for every partition asked about as well.
        results = {tp: (error_code, None) for tp in requested or ()}
    by_topic = _by_topic(results)
    return build(
        ctx.response_type,
        throttle_time=0,
        error_code=error_code,
        replica_election_results=[
            {
                "topic": topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message or None}
                    for p, (code, message) in items
                ],
            }
            for topic, items in by_topic.items()
        ],
    )


@kafka_api(45, "AlterPartitionReassignments", 0, 0)
async def alter_partition_reassignments(request: Any, ctx: KafkaRequestContext) -> Any:
    reassignments = tuple(
        (TopicPartition(t.name, p.partition_index), None if p.replicas is None else tuple(p.replicas))
        for t in request.topics
        for p in t.partitions
    )
    if cluster_allowed(ctx, AclOperation.ALTER):  # Kafka 2.8 handleAlterPartitionReassignmentsRequest
        error_code, results = await ctx.service.controller_admin_call("alter_partition_reassignments", reassignments)
    else:
        error_code, results = CLUSTER_AUTHORIZATION_FAILED, {}
    return build(
        ctx.response_type,
        throttle_time=0,
        error_code=error_code,
        error_message=None,
        responses=[
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "error_code": code, "error_message": message or None}
                    for p, (code, message) in items
                ],
            }
            for topic, items in _by_topic(results).items()
        ],
    )


@kafka_api(46, "ListPartitionReassignments", 0, 0)
async def list_partition_reassignments(request: Any, ctx: KafkaRequestContext) -> Any:
    requested = None
    if request.topics is not None:
        requested = tuple(TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes)
    if cluster_allowed(ctx, AclOperation.DESCRIBE):  # Kafka 2.8 handleListPartitionReassignmentsRequest
        error_code, ongoing = await ctx.service.controller_admin_call("list_partition_reassignments", requested)
    else:
        error_code, ongoing = CLUSTER_AUTHORIZATION_FAILED, {}
    return build(
        ctx.response_type,
        throttle_time=0,
        error_code=error_code,
        error_message=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "replicas": ra.replicas,
                        "adding_replicas": ra.adding,
                        "removing_replicas": ra.removing,
                    }
                    for p, ra in items
                ],
            }
            for topic, items in _by_topic(ongoing).items()
        ],
    )


def _by_topic(results: dict[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    grouped: dict[str, list[tuple[int, Any]]] = {}
    for tp in sorted(results):
        grouped.setdefault(tp.topic, []).append((tp.partition, results[tp]))
    return grouped
