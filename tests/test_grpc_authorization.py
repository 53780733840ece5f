"""The gRPC API's checks (broker/authorizer/grpc_checks.py) around stand-in handlers: refused entities answer their
Kafka error, the rest reach the handler, and a request with nothing refused reaches it untouched."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.authorizer.grpc_checks import guard
from broker.grpc_authentication import CALL_PRINCIPAL
from client.kafka import errors
from client.kafka.acls import AclOperation, ResourceType
from zkraft_proto import broker_pb2 as pb

ALLOWED = {("orders", AclOperation.WRITE), ("orders", AclOperation.DESCRIBE)}


class Authorizer:
    def authorize(self, principal: str, host: str, operation: Any, resource_type: Any, name: str, log: bool = True):  # type: ignore[no-untyped-def]
        assert principal == "User:ANONYMOUS"
        return resource_type == ResourceType.TOPIC and (name, operation) in ALLOWED


class Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"


def service(**known_topics: bool) -> Any:
    return SimpleNamespace(
        authorizer=Authorizer(), metadata_cache=SimpleNamespace(contains=lambda t: t in known_topics)
    )


def run(name: str, request: Any, handler: Any, svc: Any = None) -> Any:
    return asyncio.run(guard(svc or service(), name, handler)(request, Context()))


def test_produce_serves_the_allowed_topic_and_refuses_the_other() -> None:
    seen: list[list[str]] = []

    async def produce(request: pb.ProduceRequest, _context: Any) -> pb.ProduceResponse:
        seen.append([t.name for t in request.topics])
        return pb.ProduceResponse(
            responses=[
                pb.TopicProduceResponse(name=t.name, partitions=[pb.PartitionProduceResponse(index=0)])
                for t in request.topics
            ]  # fmt: skip
        )

    request = pb.ProduceRequest(
        acks=1,
        topics=[pb.TopicProduceData(name=n, partitions=[pb.PartitionProduceData(index=0)]) for n in ("orders", "x")],
    )
    response = run("Produce", request, produce)
    assert seen == [["orders"]]
    assert {t.name: [p.error_code for p in t.partitions] for t in response.responses} == {
        "orders": [0],
        "x": [errors.TopicAuthorizationFailedError.code],
    }


def test_metadata_hides_and_refuses_and_still_names_the_brokers() -> None:
    async def metadata(request: pb.MetadataRequest, _context: Any) -> pb.MetadataResponse:
        names = ["orders", "hidden"] if request.all_topics else list(request.topics)
        return pb.MetadataResponse(
            brokers=[pb.MetadataBroker(node_id=1)], topics=[pb.MetadataTopic(name=n) for n in names]
        )

    every = run("Metadata", pb.MetadataRequest(all_topics=True), metadata)
    assert [t.name for t in every.topics] == ["orders"]
    named = run("Metadata", pb.MetadataRequest(topics=["hidden"]), metadata)
    assert [(t.name, t.error_code) for t in named.topics] == [("hidden", errors.TopicAuthorizationFailedError.code)]
    assert [b.node_id for b in named.brokers] == [1]


def test_group_and_cluster_requests_answer_their_error() -> None:
    async def never(request: Any, _context: Any) -> Any:
        raise AssertionError("a refused request reached its handler")

    joined = run("JoinGroup", pb.JoinGroupRequest(group_id="g"), never)
    assert joined.error_code == errors.GroupAuthorizationFailedError.code
    elected = run("ElectLeaders", pb.ElectLeadersRequest(), never)
    assert elected.error_code == errors.ClusterAuthorizationFailedError.code
    init = run("InitProducerId", pb.InitProducerIdRequest(), never)
    assert (init.error_code, init.producer_id) == (errors.ClusterAuthorizationFailedError.code, -1)


INTER_BROKER = ("LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdown")


class ClusterActionFor:
    """Grants ClusterAction on the Cluster to one principal, nothing else."""

    def __init__(self, principal: str) -> None:
        self.principal = principal

    def authorize(self, principal: str, host: str, operation: Any, resource_type: Any, name: str, log: bool = True):  # type: ignore[no-untyped-def]
        return (principal, operation, resource_type) == (self.principal, AclOperation.CLUSTER_ACTION,
                                                         ResourceType.CLUSTER)  # fmt: skip


def as_principal(principal: str, name: str, request: Any, handler: Any, svc: Any) -> Any:
    async def call() -> Any:
        token = CALL_PRINCIPAL.set(principal)
        try:
            return await guard(svc, name, handler)(request, Context())
        finally:
            CALL_PRINCIPAL.reset(token)

    return asyncio.run(call())


def test_broker_to_broker_rpcs_need_cluster_action_where_callers_are_known() -> None:
    """Kafka 2.8 KafkaApis: LeaderAndIsr, UpdateMetadata, StopReplica and ControlledShutdown answer
    CLUSTER_AUTHORIZATION_FAILED without ClusterAction; a follower's Fetch answers TOPIC_AUTHORIZATION_FAILED for
    every partition. On a port that authenticates no one they reach their handlers (a broker is not known there)."""

    async def handler(request: Any, _context: Any) -> Any:
        return getattr(pb, f"{type(request).__name__[: -len('Request')]}Response")()

    broker = "User:CN=broker-1"
    known = SimpleNamespace(authorizer=ClusterActionFor(broker), authentication=SimpleNamespace(knows_callers=True))
    unknown = SimpleNamespace(authorizer=ClusterActionFor(broker), authentication=None)
    for name in INTER_BROKER:
        request = getattr(pb, f"{name}Request")()
        assert as_principal(broker, name, request, handler, known).error_code == 0
        refused = as_principal("User:alice", name, request, handler, known)
        assert refused.error_code == errors.ClusterAuthorizationFailedError.code, name
        assert as_principal("User:ANONYMOUS", name, request, handler, unknown).error_code == 0

    async def fetch(request: Any, _context: Any) -> bytes:
        return b"served"

    follower = pb.FetchRequest(
        replica_id=2, topics=[pb.FetchTopic(topic="t", partitions=[pb.FetchPartition(partition=0)])]
    )
    assert as_principal(broker, "Fetch", follower, fetch, known) == b"served"
    assert as_principal("User:ANONYMOUS", "Fetch", follower, fetch, unknown) == b"served"
    refused = pb.FetchResponse.FromString(as_principal("User:alice", "Fetch", follower, fetch, known))
    assert [(t.topic, [(p.partition, p.error_code) for p in t.partitions]) for t in refused.responses] == [
        ("t", [(0, errors.TopicAuthorizationFailedError.code)])
    ]
