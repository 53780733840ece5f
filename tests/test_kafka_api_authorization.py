"""The Kafka handlers' authorization on one in-process broker: requests that mix allowed and refused topics get
each topic's own answer (Kafka 2.8 KafkaApis: refused topics TOPIC_AUTHORIZATION_FAILED, the rest served)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from broker.authorizer.decision import AclSnapshot, AuthorizerSettings, authorize
from broker.kafka_api.entities import build
from broker.kafka_api.registry import API_SPECS, EncodedResponse, KafkaRequestContext
from client.kafka import errors
from client.kafka.acls import AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern
from client.kafka.acls import ResourceType as Rt
from tests.test_kafka_api_data import TOPIC, Broker, _batch, _synchronous

SECRET = "secret"
ANONYMOUS = "User:ANONYMOUS"
DENIED = errors.TopicAuthorizationFailedError.code


class StubAuthorizer:
    """The real decision over a fixed set of ACLs (the ZooKeeper side is tested on real brokers)."""

    def __init__(self, *grants: tuple[str, AclOperation], cluster: tuple[AclOperation, ...] = ()) -> None:
        acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for name, operation in grants:
            pattern = ResourcePattern(Rt.TOPIC, name, PatternType.LITERAL)
            acls[pattern] = acls.get(pattern, frozenset()) | {
                AccessControlEntry(ANONYMOUS, "*", operation, AclPermissionType.ALLOW)
            }
        for operation in cluster:
            pattern = ResourcePattern(Rt.CLUSTER, "kafka-cluster", PatternType.LITERAL)
            acls[pattern] = acls.get(pattern, frozenset()) | {
                AccessControlEntry(ANONYMOUS, "*", operation, AclPermissionType.ALLOW)
            }
        self.snapshot = AclSnapshot.of(acls)

    def authorize(self, principal: str, host: str, operation: Any, resource_type: Any, name: str, log: bool = True):  # type: ignore[no-untyped-def]
        return authorize(self.snapshot, AuthorizerSettings(), principal, host, operation, resource_type, name)


async def call(broker: Broker, api_key: int, version: int, fields: dict[str, Any]) -> Any:
    request_type = load_request_schema(api_key, version)
    response_type = load_response_schema(api_key, version)
    buffer = io.BytesIO()
    entity_writer(request_type)(buffer, build(request_type, fields))
    request, _ = entity_reader(request_type)(buffer.getvalue(), 0)
    ctx = KafkaRequestContext(
        service=broker.service,
        api_key=api_key,
        api_version=version,
        correlation_id=1,
        client_id="test",
        client_host="127.0.0.1",
        listener_name="PLAINTEXT",
        response_type=response_type,
    )
    response = await API_SPECS[api_key].handler(request, ctx)
    if isinstance(response, EncodedResponse):
        response, _ = entity_reader(response_type)(b"".join(response.parts), 0)
    return response


def by_topic(topics: Any, name_field: str, partitions_field: str) -> dict[str, list[int]]:
    return {getattr(t, name_field): [int(p.error_code) for p in getattr(t, partitions_field)] for t in topics}


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return Broker(tmp_path)


@_synchronous
async def test_produce_and_fetch_serve_the_allowed_topic_and_refuse_the_other(broker: Broker) -> None:
    await broker.lead()
    broker.service.authorizer = StubAuthorizer((TOPIC, AclOperation.WRITE), (TOPIC, AclOperation.READ))
    produce = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 5000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": _batch([b"ok"])}]},
            {"name": SECRET, "partition_data": [{"index": 0, "records": _batch([b"no"])}]},
        ],
    }
    produced = await call(broker, 0, 9, produce)
    assert by_topic(produced.responses, "name", "partition_responses") == {TOPIC: [0], SECRET: [DENIED]}
    fetch = {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [
            {"topic": SECRET, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
            {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
        ],
    }  # fmt: skip
    fetched = await call(broker, 1, 12, fetch)
    assert by_topic(fetched.responses, "topic", "partitions") == {TOPIC: [0], SECRET: [DENIED]}
    [served] = [t for t in fetched.responses if t.topic == TOPIC]
    assert served.partitions[0].high_watermark == 1 and served.partitions[0].records


@_synchronous
async def test_an_idempotent_producer_needs_idempotent_write_on_the_cluster(broker: Broker) -> None:
    await broker.lead()
    broker.service.authorizer = StubAuthorizer((TOPIC, AclOperation.WRITE))
    request = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 5000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": _batch([b"x"], producer_id=5, sequence=0)}]}
        ],
    }
    refused = await call(broker, 0, 9, request)
    assert by_topic(refused.responses, "name", "partition_responses") == {
        TOPIC: [errors.ClusterAuthorizationFailedError.code]
    }
    init = await call(broker, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                      "producer_epoch": -1})  # fmt: skip
    assert int(init.error_code) == errors.ClusterAuthorizationFailedError.code
    broker.service.authorizer = StubAuthorizer((TOPIC, AclOperation.WRITE), cluster=(AclOperation.IDEMPOTENT_WRITE,))
    init = await call(broker, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                      "producer_epoch": -1})  # fmt: skip
    assert int(init.error_code) == 0


@_synchronous
async def test_list_offsets_and_metadata_answer_per_topic(broker: Broker) -> None:
    await broker.lead()
    broker.service.authorizer = StubAuthorizer((TOPIC, AclOperation.DESCRIBE))
    offsets = await call(broker, 2, 6, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": n, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}
                   for n in (SECRET, TOPIC)],
    })  # fmt: skip
    assert by_topic(offsets.topics, "name", "partitions") == {TOPIC: [0], SECRET: [DENIED]}
    every = await call(broker, 3, 9, {"topics": None, "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})  # fmt: skip
    assert [t.name for t in every.topics] == [TOPIC]
    broker.service.authorizer = StubAuthorizer()
    hidden = await call(broker, 3, 9, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_cluster_authorized_operations": False,
                                       "include_topic_authorized_operations": False})  # fmt: skip
    assert hidden.topics == ()
    named = await call(broker, 3, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})  # fmt: skip
    assert [(t.name, int(t.error_code), t.partitions) for t in named.topics] == [(TOPIC, DENIED, ())]


@_synchronous
async def test_scram_user_apis_need_describe_and_alter_on_the_cluster(broker: Broker) -> None:
    # Kafka 2.8: a client without Alter on the Cluster cannot change anyone's password (KIP-554).
    broker.service.authorizer = StubAuthorizer()
    refused = errors.ClusterAuthorizationFailedError.code
    described = await call(broker, 50, 0, {"users": [{"name": "alice"}]})
    assert (described.error_code, described.results) == (refused, ())
    altered = await call(
        broker,
        51,
        0,
        {
            "deletions": [{"name": "bob", "mechanism": 2}],
            "upsertions": [
                {"name": "alice", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"}
            ],
        },
    )
    assert [(r.user, r.error_code) for r in altered.results] == [("bob", refused), ("alice", refused)]
