"""Every Kafka request gets an answer: a version the broker does not serve, or a handler that fails.

What a Kafka client relies on (issue 27; Kafka 2.8's AbstractRequest.getErrorResponse of each request class,
KafkaApis.handleError): a request the broker cannot serve is answered in the API's own response for the
version asked, with the error (UNSUPPORTED_VERSION, or the failure's code) in each topic, partition, group or
resource the request named, and the connection goes on serving; it is never silently dropped.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from broker import kafka_wire
from broker.kafka_api.registry import API_SPECS, KafkaRequestContext
from broker.kafka_error_response import RequestError, error_for_exception, error_response
from broker.request_bounds import BytesInFlight
from client.kafka import errors as kafka_errors
from tests.kafka_harness import KafkaCluster
from tests.test_kafka_listener_unit import exchange, frame, run
from tests.test_kafka_wire_frames import (
    API_VERSIONS,
    METADATA,
    connected,
    metadata_request,
    read_response,
    request_frame,
)

UNSUPPORTED_VERSION = 35
UNKNOWN_SERVER_ERROR = -1
SOCKET_TIMEOUT_S = 15.0
PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 0, 1, 2, 9, 10, 11
LEAVE_GROUP, DESCRIBE_GROUPS, CREATE_TOPICS, DESCRIBE_CONFIGS, DELETE_GROUPS, ELECT_LEADERS = 13, 15, 19, 32, 42, 43
DESCRIBE_LOG_DIRS, OFFSET_DELETE = 35, 47
NOT_CONTROLLER = 41
REQUEST_TIMED_OUT = 7


# --- requests as a client writes them: two of each entity (topics t0 t1, partitions 0 1, groups g0 g1) ---


def sample_request(api_key: int, api_version: int) -> Any:
    """kio's request of `api_key` v`api_version`, every array holding two entries, every required field set."""
    return _sample(load_request_schema(api_key, api_version), 0)


_NAMES = {"name": "t", "topic": "t", "group_id": "g", "resource_name": "r", "key": "k", "member_id": "m"}


def _sample(entity_type: type, index: int) -> Any:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(entity_type):
        kafka_type = f.metadata.get("kafka_type")
        nested = _nested(f.type)
        is_array = _is_array(f.type)
        if f.name == "acks":
            values[f.name] = -1
        elif nested is not None:
            values[f.name] = tuple(_sample(nested, i) for i in range(2)) if is_array else _sample(nested, index)
        elif is_array:
            values[f.name] = ("g0", "g1") if kafka_type == "string" else (0, 1) if kafka_type == "int32" else ()
        elif f.name in _NAMES:
            values[f.name] = f"{_NAMES[f.name]}{index}"
        elif f.name in ("index", "partition", "partition_index"):
            values[f.name] = index
        else:
            values[f.name] = _VALUE_BY_KAFKA_TYPE.get(kafka_type, 0)
    return entity_type(**values)


_VALUE_BY_KAFKA_TYPE: dict[str | None, Any] = {
    "string": "x",
    "bool": False,
    "bytes": b"",
    "records": b"",
    "uuid": uuid.UUID(int=7),
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": None,
    "float64": 0.0,
}


def _nested(annotation: Any) -> type | None:
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    for arg in typing.get_args(annotation):
        if arg is not type(None) and arg is not Ellipsis and (found := _nested(arg)) is not None:
            return found
    return None


def _is_array(annotation: Any) -> bool:
    return typing.get_origin(annotation) is tuple or any(
        typing.get_origin(a) is tuple for a in typing.get_args(annotation)
    )


def error_codes(entity: Any) -> list[int]:
    """Every error_code in `entity` and the entities inside it, depth first."""
    codes = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            codes.append(int(value))
        elif dataclasses.is_dataclass(value):
            codes.extend(error_codes(value))
        elif isinstance(value, tuple):
            codes.extend(c for item in value if dataclasses.is_dataclass(item) for c in error_codes(item))
    return codes


def kio_versions(api_key: int) -> list[int]:
    versions = []
    for version in range(20):
        try:
            load_request_schema(api_key, version)
            load_response_schema(api_key, version)
        except (KioIndexError, KeyError):
            continue
        versions.append(version)
    return versions


def round_trip(entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    decoded, _ = entity_reader(type(entity))(buffer.getvalue(), 0)
    return decoded


# --- the builder, API by API, against what Kafka 2.8's getErrorResponse gives ---


@pytest.mark.parametrize("api_key", sorted(API_SPECS))
def test_every_version_kio_knows_gets_an_error_response_that_kio_writes(api_key: int) -> None:
    for version in kio_versions(api_key):
        request = sample_request(api_key, version)
        response = error_response(
            api_key, version, request, load_response_schema(api_key, version), RequestError(UNSUPPORTED_VERSION, "m")
        )
        assert response is not None, (api_key, version)
        assert round_trip(response) == response
        codes = error_codes(response)
        if api_key == DESCRIBE_LOG_DIRS and version < 3:  # Kafka's answer: no results, and no error code to set
            assert (codes, response.results) == ([], ())
            continue
        assert codes and set(codes) == {UNSUPPORTED_VERSION}, (API_SPECS[api_key].name, version, codes)


# kio's hypothesis strategies cover its primitives but Records (a Produce request's record bytes).
st.register_type_strategy(Records, st.binary(max_size=16).map(Records))


@pytest.mark.parametrize(
    ("api_key", "api_version"),
    [pytest.param(k, v, id=f"{API_SPECS[k].name}-v{v}") for k in sorted(API_SPECS) for v in kio_versions(k)],
)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_any_request_kio_can_hold_gets_an_error_response_kio_writes(
    api_key: int, api_version: int, data: st.DataObject
) -> None:
    """Whatever a client put in a request (null names, empty or long arrays), its error answer is written: a
    failure here would end the connection the answer was for."""
    request = data.draw(st.from_type(load_request_schema(api_key, api_version)))
    response_type = load_response_schema(api_key, api_version)
    response = error_response(api_key, api_version, request, response_type, RequestError(UNKNOWN_SERVER_ERROR, None))
    if response is not None:  # None: a Produce with acks=0
        assert round_trip(response) == response


def build(api_key: int, version: int, request: Any = None, error: RequestError | None = None) -> Any:
    request = sample_request(api_key, version) if request is None else request
    error = error or RequestError(UNSUPPORTED_VERSION, "Produce v10 is not supported")
    return error_response(api_key, version, request, load_response_schema(api_key, version), error)


def test_produce_answers_each_partition_with_an_invalid_offset_and_the_message() -> None:
    response = build(PRODUCE, 9)
    assert [t.name for t in response.responses] == ["t0", "t1"]
    [partition, _] = response.responses[0].partition_responses
    assert (partition.index, int(partition.error_code), partition.base_offset) == (0, UNSUPPORTED_VERSION, -1)
    assert (partition.log_start_offset, partition.log_append_time) == (-1, None)  # None is written as -1
    assert partition.error_message == "Produce v10 is not supported"


def test_produce_with_acks_0_gets_no_answer() -> None:
    request = dataclasses.replace(sample_request(PRODUCE, 9), acks=0)
    assert build(PRODUCE, 9, request) is None


def test_fetch_answers_each_partition_below_v13_and_only_the_top_level_from_v13() -> None:
    request = dataclasses.replace(sample_request(FETCH, 12), session_id=42)
    response = build(FETCH, 12, request)
    assert (int(response.error_code), response.session_id) == (UNSUPPORTED_VERSION, 42)
    [partition, second] = response.responses[1].partitions
    assert (response.responses[1].topic, partition.partition_index, second.partition_index) == ("t1", 0, 1)
    assert (partition.high_watermark, partition.last_stable_offset, partition.log_start_offset) == (-1, -1, -1)
    assert (partition.records, partition.aborted_transactions) == (b"", None)
    assert build(FETCH, 13).responses == ()


def test_list_offsets_does_not_echo_the_query_timestamp() -> None:
    request = sample_request(LIST_OFFSETS, 6)
    topics = tuple(
        dataclasses.replace(t, partitions=tuple(dataclasses.replace(p, timestamp=-2) for p in t.partitions))
        for t in request.topics
    )
    partition = build(LIST_OFFSETS, 6, dataclasses.replace(request, topics=topics)).topics[0].partitions[1]
    assert (partition.partition_index, partition.offset, partition.timestamp) == (1, -1, -1)


def test_metadata_for_all_topics_answers_no_topic() -> None:
    assert build(METADATA, 9, metadata_request(9)).topics == ()
    assert [(t.name, int(t.error_code)) for t in build(METADATA, 9).topics] == [("t0", 35), ("t1", 35)]


def test_a_topic_named_by_id_keeps_a_null_name_only_where_the_response_allows_one() -> None:
    def by_id(api_key: int, version: int) -> Any:
        request = sample_request(api_key, version)
        return dataclasses.replace(request, topics=tuple(dataclasses.replace(t, name=None) for t in request.topics))

    assert [t.name for t in build(METADATA, 10, by_id(METADATA, 10)).topics] == ["", ""]  # not nullable in v10
    assert [t.name for t in build(20, 6, by_id(20, 6)).responses] == [None, None]  # DeleteTopics v6: nullable


def test_offset_fetch_by_version() -> None:
    v1 = build(OFFSET_FETCH, 1)
    assert [(p.partition_index, p.committed_offset) for p in v1.topics[0].partitions] == [(0, -1), (1, -1)]
    v7 = build(OFFSET_FETCH, 7)
    assert (v7.topics, int(v7.error_code)) == ((), UNSUPPORTED_VERSION)
    v8 = build(OFFSET_FETCH, 8)
    assert [(g.group_id, g.topics, int(g.error_code)) for g in v8.groups] == [("g0", (), 35), ("g1", (), 35)]


def test_group_ids_and_partition_indexes_become_their_entities() -> None:
    assert [(g.group_id, g.group_state) for g in build(DESCRIBE_GROUPS, 5).groups] == [("g0", ""), ("g1", "")]
    assert [g.group_id for g in build(DELETE_GROUPS, 2).results] == ["g0", "g1"]
    election = build(ELECT_LEADERS, 2).replica_election_results[0]
    assert [(p.partition_id, p.error_message) for p in election.partition_result] == [
        (0, "Produce v10 is not supported"),
        (1, "Produce v10 is not supported"),
    ]


def test_messages_follow_each_api() -> None:
    default = kafka_errors.UnsupportedVersionError.default_message
    assert build(FIND_COORDINATOR, 3).error_message == default
    assert [c.key for c in build(FIND_COORDINATOR, 4).coordinators] == ["g0", "g1"]
    assert build(DESCRIBE_CONFIGS, 4).results[0].error_message == default
    assert build(CREATE_TOPICS, 7).topics[0].error_message == "Produce v10 is not supported"
    assert build(DESCRIBE_GROUPS, 6).groups[0].error_message is None


def test_apis_whose_kafka_answer_mirrors_nothing() -> None:
    join = build(JOIN_GROUP, 7)
    assert (join.generation_id, join.protocol_name, join.member_id, join.members) == (-1, None, "", ())
    assert build(JOIN_GROUP, 6).protocol_name == ""
    assert build(LEAVE_GROUP, 4).members == ()
    assert build(DESCRIBE_LOG_DIRS, 2).results == ()
    assert build(OFFSET_DELETE, 0).topics == ()
    assert build(CREATE_TOPICS, 7).topics[0].configs == ()


def test_an_exception_maps_to_its_kafka_code_and_message() -> None:
    assert error_for_exception(RuntimeError("secret detail")) == RequestError(UNKNOWN_SERVER_ERROR, None)
    assert error_for_exception(kafka_errors.NotControllerError()) == RequestError(NOT_CONTROLLER, None)
    assert error_for_exception(kafka_errors.NotControllerError("broker 2 is")) == RequestError(
        NOT_CONTROLLER, "broker 2 is"
    )


# --- the listener: a handler that fails is answered, and the connection goes on ---


def decode_answer(answer: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    response_type = load_response_schema(api_key, api_version)
    (correlation_id,) = struct.unpack_from(">i", answer)
    body, _ = entity_reader(response_type)(answer, 5 if response_type.__flexible__ else 4)
    return correlation_id, body


@pytest.mark.parametrize(
    ("raised", "code"),
    [(RuntimeError("a bug"), UNKNOWN_SERVER_ERROR), (kafka_errors.NotControllerError(), NOT_CONTROLLER)],
    ids=["unexpected", "kafka-error"],
)
def test_a_failing_handler_is_answered_in_each_entity_and_the_connection_serves_on(
    monkeypatch: pytest.MonkeyPatch, raised: Exception, code: int
) -> None:
    async def fails(request: object, context: KafkaRequestContext) -> object:
        raise raised

    real = API_SPECS[DELETE_GROUPS]
    monkeypatch.setitem(API_SPECS, DELETE_GROUPS, dataclasses.replace(real, handler=fails))
    monkeypatch.setattr(kafka_wire, "_CODECS", {})

    async def scenario(server: Any, budget: BytesInFlight, address: str) -> None:
        delete = request_frame(DELETE_GROUPS, 2, 1, sample_request(DELETE_GROUPS, 2))
        versions = frame(struct.pack(">hhih", API_VERSIONS, 0, 2, -1))
        first, second = await exchange(address, delete + versions, answers=2)
        correlation_id, response = decode_answer(first, DELETE_GROUPS, 2)
        assert correlation_id == 1
        assert [(g.group_id, int(g.error_code)) for g in response.results] == [("g0", code), ("g1", code)]
        assert struct.unpack_from(">ih", second) == (2, 0)  # ApiVersions answered on the same connection
        assert budget.used_bytes == 0

    run(scenario)


def test_a_failing_produce_with_acks_0_closes_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fails(request: object, context: KafkaRequestContext) -> object:
        raise RuntimeError("a bug")

    real = API_SPECS[PRODUCE]
    monkeypatch.setitem(API_SPECS, PRODUCE, dataclasses.replace(real, handler=fails))
    monkeypatch.setattr(kafka_wire, "_CODECS", {})

    async def scenario(server: Any, budget: BytesInFlight, address: str) -> None:
        produce = request_frame(PRODUCE, 9, 1, dataclasses.replace(sample_request(PRODUCE, 9), acks=0))
        versions = frame(struct.pack(">hhih", API_VERSIONS, 0, 2, -1))
        assert await exchange(address, produce + versions, answers=2) == []
        assert budget.used_bytes == 0

    run(scenario)


# --- a real broker: each API asked in the version just above what it advertises ---

# API key -> how many error codes Kafka's answer carries for a request naming two of everything (two topics of
# two partitions, two groups, two coordinator keys), by its getErrorResponse.
EXPECTED_ERROR_CODES = {
    0: 4,  # Produce: each partition
    1: 1,  # Fetch v13+: the top level only
    2: 4,  # ListOffsets: each partition
    3: 2,  # Metadata: each topic
    8: 4,  # OffsetCommit: each partition
    9: 2,  # OffsetFetch v8+: each group
    10: 2,  # FindCoordinator v4+: each key
    11: 1,  # JoinGroup
    13: 1,  # LeaveGroup: the top level only
    15: 2,  # DescribeGroups: each group
    16: 1,  # ListGroups
    22: 1,  # InitProducerId
    35: 1,  # DescribeLogDirs v3+: the top level only
    45: 5,  # AlterPartitionReassignments: the top level and each partition
    60: 1,  # DescribeCluster
}


def versions_above_the_advertised() -> list[Any]:
    """(API key, version) for each API in the listener's table that kio can encode a version above."""
    cases = []
    for key, spec in sorted(API_SPECS.items()):
        if key != API_VERSIONS and spec.max_version + 1 in kio_versions(key):
            cases.append(pytest.param(key, spec.max_version + 1, id=f"{spec.name}-v{spec.max_version + 1}"))
    return cases


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-versions"), brokers=1) as kafka:
        kafka.start()
        yield kafka


def test_the_table_leaves_no_api_without_a_newer_version_untested() -> None:
    assert {case.values[0] for case in versions_above_the_advertised()} == set(EXPECTED_ERROR_CODES)


@pytest.mark.integration
@pytest.mark.parametrize(("api_key", "api_version"), versions_above_the_advertised())
def test_a_version_above_the_advertised_is_answered_and_the_connection_serves_on(
    cluster: KafkaCluster, api_key: int, api_version: int
) -> None:
    request = sample_request(api_key, api_version)
    with connected(cluster) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.sendall(request_frame(api_key, api_version, 31, request))
        correlation_id, response = read_response(sock, api_key, api_version)
        assert correlation_id == 31
        assert error_codes(response) == [UNSUPPORTED_VERSION] * EXPECTED_ERROR_CODES[api_key]
        spec = API_SPECS[api_key]
        expected = error_response(
            api_key,
            api_version,
            request,
            type(response),
            RequestError(
                UNSUPPORTED_VERSION,
                f"{spec.name} v{api_version} is not supported by this broker "
                f"(it serves v{spec.min_version}-v{spec.max_version})",
            ),
        )
        assert response == expected
        sock.sendall(request_frame(API_VERSIONS, 2, 32))
        assert read_response(sock, API_VERSIONS, 2)[0] == 32
        sock.sendall(request_frame(METADATA, 9, 33, metadata_request(9)))
        correlation_id, metadata = read_response(sock, METADATA, 9)
        assert (correlation_id, [b.node_id for b in metadata.brokers]) == (33, [1])  # type: ignore[attr-defined]
