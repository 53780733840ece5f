"""The gRPC API's checks (broker/authorizer/grpc_checks.py) around stand-in handlers: refused entities answer their
Kafka error, the rest reach the handler, and a request with nothing refused reaches it untouched."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.authorizer.grpc_checks import guard
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


def test_broker_to_broker_rpcs_are_not_wrapped() -> None:
    async def handler(request: Any, _context: Any) -> Any:
        return request

    for name in ("LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdown"):
        assert guard(service(), name, handler) is handler
