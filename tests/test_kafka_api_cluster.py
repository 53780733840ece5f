"""ApiVersions, Metadata, DescribeCluster and SaslHandshake handlers, called directly in every served version.

What a client reads from them: the table of served versions; each broker by its endpoint on the listener the
request came in on; a partition whose leader is down (LEADER_NOT_AVAILABLE) or lacks that listener
(LISTENER_NOT_FOUND from v6); unknown and invalid topic names with their errors.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from broker import kafka_api  # noqa: F401  (registers the handlers)
from broker.kafka_api.entities import build
from broker.kafka_api.registry import API_SPECS, KafkaRequestContext
from broker.kafka_wire import codec_for, encode_response, frame_bytes
from broker.metadata_cache import MetadataCache
from zkraft_proto import broker_pb2 as pb

METADATA, API_VERSIONS, DESCRIBE_CLUSTER, SASL_HANDSHAKE = 3, 18, 60, 17


def endpoint(listener: str, port: int) -> pb.UpdateMetadataEndpoint:
    return pb.UpdateMetadataEndpoint(host="127.0.0.1", port=port, listener=listener, security_protocol="PLAINTEXT")


def cache() -> MetadataCache:
    """Brokers 1 and 2 with a Kafka listener, broker 3 with gRPC only; t-0 led by 1, t-1 by 3, t-2 by a dead 4."""
    metadata = MetadataCache(1, "cluster-x")
    brokers = [
        pb.UpdateMetadataBroker(
            id=b,
            host="127.0.0.1",
            port=9190 + b,
            endpoints=[endpoint("PLAINTEXT", 9090 + b), endpoint("GRPC", 9190 + b)],
        )
        for b in (1, 2)
    ]
    brokers.append(pb.UpdateMetadataBroker(id=3, host="127.0.0.1", port=9193, endpoints=[endpoint("GRPC", 9193)]))
    partitions = [
        pb.UpdateMetadataPartitionState(
            topic_name="t", partition_index=p, leader=leader, leader_epoch=5, isr=[leader], replicas=[leader, 2]
        )
        for p, leader in enumerate((1, 3, 4))
    ]
    metadata.update(
        pb.UpdateMetadataRequest(controller_id=2, controller_epoch=1, live_brokers=brokers, partition_states=partitions)
    )
    return metadata


def call(api_key: int, api_version: int, request: Any, listener: str = "PLAINTEXT") -> Any:
    """The handler's response, encoded by the listener's codec and decoded back by kio (what a client reads)."""
    codec = codec_for(api_key, api_version)
    assert codec is not None
    service = SimpleNamespace(metadata_cache=cache(), admin=None)
    context = KafkaRequestContext(service, api_key, api_version, 1, "test", "127.0.0.1", listener, codec.response_type)
    response = asyncio.run(codec.spec.handler(request, context))
    frame = frame_bytes(encode_response(codec, 1, response))
    header_bytes = 5 if codec.response_type.__flexible__ and api_key != API_VERSIONS else 4
    decoded, _ = entity_reader(load_response_schema(api_key, api_version))(frame, 4 + header_bytes)
    return decoded


def metadata_request(version: int, topics: list[str] | None) -> Any:
    return build(
        load_request_schema(METADATA, version),
        topics=None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.parametrize("version", range(12))
def test_metadata_in_every_version_names_brokers_by_the_requests_listener(version: int) -> None:
    response = call(METADATA, version, metadata_request(version, ["t"] if version == 0 else None))
    assert {(b.node_id, b.port) for b in response.brokers} == {(1, 9091), (2, 9092)}
    if version >= 1:
        assert response.controller_id == 2
    if version >= 2:
        assert response.cluster_id == "cluster-x"
    [topic] = response.topics
    by_index = {p.partition_index: p for p in topic.partitions}
    assert (int(by_index[0].error_code), by_index[0].leader_id) == (0, 1)
    assert list(by_index[0].replica_nodes) == [1, 2] and list(by_index[0].isr_nodes) == [1]
    not_found = 72 if version >= 6 else 5  # LISTENER_NOT_FOUND, else LEADER_NOT_AVAILABLE
    assert (int(by_index[1].error_code), by_index[1].leader_id) == (not_found, -1)
    assert (int(by_index[2].error_code), by_index[2].leader_id) == (5, -1)
    if version >= 5:
        assert list(by_index[2].offline_replicas) == [4]
    if version >= 7:
        assert by_index[0].leader_epoch == 5


def test_metadata_v1_with_an_empty_list_asks_for_no_topic_and_names_unknown_and_invalid_ones() -> None:
    assert call(METADATA, 1, metadata_request(1, [])).topics == ()
    response = call(METADATA, 9, metadata_request(9, ["absent", "bad name!"]))
    assert {t.name: int(t.error_code) for t in response.topics} == {"absent": 3, "bad name!": 17}


def test_a_listener_without_the_controller_answers_controller_minus_one() -> None:
    response = call(METADATA, 9, metadata_request(9, None), listener="GRPC")
    assert response.controller_id == 2
    assert {b.node_id for b in response.brokers} == {1, 2, 3}
    assert call(METADATA, 9, metadata_request(9, None), listener="ELSEWHERE").controller_id == -1


@pytest.mark.parametrize("version", range(4))
def test_api_versions_lists_every_registered_api(version: int) -> None:
    request = build(
        load_request_schema(API_VERSIONS, version), client_software_name="test", client_software_version="1.0"
    )
    response = call(API_VERSIONS, version, request)
    assert int(response.error_code) == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
        key: (spec.min_version, spec.max_version) for key, spec in API_SPECS.items()
    }


def test_api_versions_v3_refuses_an_invalid_client_software_name() -> None:
    request = build(load_request_schema(API_VERSIONS, 3), client_software_name="-bad", client_software_version="1")
    assert int(call(API_VERSIONS, 3, request).error_code) == 42  # INVALID_REQUEST


def test_describe_cluster_and_sasl_handshake() -> None:
    request = build(load_request_schema(DESCRIBE_CLUSTER, 0), include_cluster_authorized_operations=False)
    response = call(DESCRIBE_CLUSTER, 0, request)
    assert (response.cluster_id, response.controller_id) == ("cluster-x", 2)
    assert {(b.broker_id, b.port) for b in response.brokers} == {(1, 9091), (2, 9092)}
    for version in (0, 1):
        request = build(load_request_schema(SASL_HANDSHAKE, version), mechanism="PLAIN")
        handshake = call(SASL_HANDSHAKE, version, request)
        assert (int(handshake.error_code), handshake.mechanisms) == (33, ())  # UNSUPPORTED_SASL_MECHANISM
