"""The answer to a Kafka request the broker cannot serve: the API's own response, the error in every entity.

Kafka 2.8 answers a request whose handler failed with `request.body.getErrorResponse(throttle, e)`
(KafkaApis.handleError): each request class (ProduceRequest, MetadataRequest, ListOffsetsRequest, ...)
builds its API's response with one entity per topic, partition, group or resource the request named,
the error code (Errors.forException(e)) in each of them and in the top-level error code where the
version has one. The listener gives the same answer to a known API asked in a version it does not
serve (UNSUPPORTED_VERSION, 35), and to a served request whose handler raised (the exception's Kafka
code, or UNKNOWN_SERVER_ERROR, -1), instead of closing the connection.

`error_response` does it from the schemas, for every API at once: it walks kio's response dataclass
and the decoded request side by side. An array of entities in the response mirrors the request array
`_ARRAY_SOURCES` names for it (Metadata's `topics` mirrors `topics`, Produce's `responses` `topic_data`);
a request array of plain values (group ids, partition indexes) gives one entity per value, the value
in the entity's first field of its type (`group_id`, `partition_index`). Only key fields are copied
(`_KEY_FIELDS`: names, ids, indexes, resource types, Fetch's session id), never values such as
ListOffsets' query timestamp. Every `error_code` gets the error; every other field without a schema
default gets Kafka's "unknown" value (`_UNKNOWN_BY_FIELD`: base_offset -1, generation_id -1, ...) or
Java's zero value ("", 0, empty array). Where an API's getErrorResponse differs, its `ErrorShape` in
`_SHAPES` says how: which entities it leaves out (LeaveGroup, OffsetDelete and DescribeLogDirs mirror
nothing; Fetch v13+ and OffsetFetch v2+ keep only the top level), which error message it writes, which
field it sets to something else (JoinGroup v7+'s null protocol name), and that a Produce with acks=0
gets no answer (Kafka then closes the connection).

The error message (`error_message` fields) follows Kafka's ApiError.fromThrowable: the exception's
message, none for UNKNOWN_SERVER_ERROR (an internal failure's text is not sent to clients); FindCoordinator
and DescribeConfigs write the error's default message; DeleteTopics and DescribeGroups write none.

Only the error path runs this: the listener calls it when a request cannot be served, never for one it serves.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from client.kafka import errors as kafka_errors

UNSUPPORTED_VERSION = 35
_WIRE_CODES = frozenset(code.value for code in ErrorCode)  # a code kio cannot write is answered as unknown


@dataclass(frozen=True, slots=True)
class RequestError:
    """The error a request is answered with: Kafka's code and ApiError's message (None: no message)."""

    code: int
    message: str | None


def unsupported_version_error(api_name: str, api_version: int, min_version: int, max_version: int) -> RequestError:
    return RequestError(
        UNSUPPORTED_VERSION,
        f"{api_name} v{api_version} is not supported by this broker (it serves v{min_version}-v{max_version})",
    )


def error_for_exception(exc: BaseException) -> RequestError:
    """Kafka's Errors.forException and ApiError.fromThrowable: a Kafka error keeps its code and its message
    (none when it is the code's default one); a timeout is REQUEST_TIMED_OUT, as Kafka's TimeoutException (a
    retriable error: the client retries, as it did when the connection was closed); anything else is
    UNKNOWN_SERVER_ERROR without a message (an internal failure's text is not sent to clients)."""
    if isinstance(exc, kafka_errors.KafkaError) and exc.code in _WIRE_CODES and exc.code != -1:
        message = exc.message if exc.message != exc.default_message else None
        return RequestError(exc.code, message)
    if isinstance(exc, TimeoutError):
        return RequestError(kafka_errors.RequestTimedOutError.code, None)
    return RequestError(kafka_errors.UnknownServerError.code, None)


class Message(enum.Enum):
    """What an API's getErrorResponse writes in its `error_message` fields."""

    API_ERROR = "api_error"  # ApiError.message(): the exception's message, or none
    DEFAULT = "default"  # Errors.message(): the code's default text (FindCoordinator, DescribeConfigs)
    NONE = "none"  # nothing (DeleteTopics, DescribeGroups)


@dataclass(frozen=True, slots=True)
class ErrorShape:
    """How one API's error response departs from the generic mirror (Kafka 2.8's XxxRequest.getErrorResponse)."""

    message: Message = Message.API_ERROR
    # (request, version) -> True when the request's entities are mirrored (False: the top level only)
    mirrored: Callable[[Any, int], bool] = lambda request, version: True
    # version -> fields set to these values wherever they appear (instead of their empty value)
    overrides: Callable[[int], Mapping[str, Any]] = lambda version: {}
    # request -> False when Kafka sends no response at all (Produce with acks=0: the connection is closed)
    answered: Callable[[Any], bool] = lambda request: True
    # version -> request array fields whose entities are kept but not descended into (OffsetFetch v8+'s groups)
    shallow: Callable[[int], frozenset[str]] = lambda version: frozenset()
    # request -> what is mirrored in its place (AlterUserScramCredentials: the users its two arrays name)
    view: Callable[[Any], Any] = lambda request: request


@dataclass(frozen=True, slots=True)
class _NamedUsers:
    """AlterUserScramCredentialsRequest.getErrorResponse: one result per user its deletions and upsertions name."""

    users: tuple[str, ...]


def _named_users(request: Any) -> _NamedUsers:
    return _NamedUsers(tuple(dict.fromkeys(i.name for i in (*request.deletions, *request.upsertions))))


# Fields copied from a request entity into the response entity that mirrors it: the entity's identity only.
_KEY_FIELDS = frozenset(
    {
        "name",
        "topic",
        "topic_id",
        "index",
        "partition",
        "partition_index",
        "partition_id",
        "group_id",
        "resource_type",
        "resource_name",
        "key",
        "session_id",
    }
)
# A response key field and the request fields it is copied from, in order (Fetch names a partition `partition`).
_KEY_SOURCES: dict[str, tuple[str, ...]] = {"partition_index": ("partition_index", "partition")}
# The response arrays that mirror a request array, and the request arrays they mirror (the first the version has).
# Only these: other arrays (CreateTopics' configs, JoinGroup's members, LeaveGroup's members) stay empty.
_ARRAY_SOURCES: dict[str, tuple[str, ...]] = {
    "topics": ("topics",),  # Metadata, ListOffsets, OffsetCommit, OffsetFetch, CreateTopics, DeleteRecords, ...
    "partitions": ("partitions", "partition_indexes"),  # per topic; OffsetFetch v0-1 and ListPartitionReassignments
    "groups": ("groups",),  # DescribeGroups, OffsetFetch v8+
    "responses": ("topic_data", "topics", "topic_names", "resources"),  # Produce, Fetch, DeleteTopics, *AlterConfigs
    "partition_responses": ("partition_data",),  # Produce
    "results": ("resources", "topics", "groups_names", "users", "creations"),  # DescribeConfigs, CreatePartitions, ...
    "filter_results": ("filters",),  # DeleteAcls
    "replica_election_results": ("topic_partitions",),  # ElectLeaders
    "partition_result": ("partitions",),  # ElectLeaders
    "coordinators": ("coordinator_keys",),  # FindCoordinator v4+
}
# Kafka's "unknown" value of fields its getErrorResponse methods set (INVALID_OFFSET, UNKNOWN_GENERATION_ID,
# Node.noNode(), RecordBatch.NO_PRODUCER_ID, ...), used where kio's schema has no default for the field.
_UNKNOWN_BY_FIELD: dict[str, int] = {
    "base_offset": -1,
    "high_watermark": -1,
    "last_stable_offset": -1,
    "log_start_offset": -1,
    "offset": -1,
    "committed_offset": -1,
    "committed_leader_epoch": -1,
    "low_watermark": -1,
    "end_offset": -1,
    "leader_epoch": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "generation_id": -1,
    "node_id": -1,
    "port": -1,
    "controller_id": -1,
}
# Java's zero value of a field by its Kafka type (a generated message's field that nobody set).
_EMPTY_BY_KAFKA_TYPE: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "string": "",
    "float64": 0.0,
    "records": b"",
    "uuid": None,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": None,
}

PRODUCE, FETCH, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, LEAVE_GROUP = 0, 1, 9, 10, 11, 13
DESCRIBE_GROUPS, DELETE_TOPICS, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS, OFFSET_DELETE = 15, 20, 32, 35, 47
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51

_SHAPES: dict[int, ErrorShape] = {
    # acks=0: "the producer doesn't actually want any response"
    PRODUCE: ErrorShape(answered=lambda request: request.acks != 0),
    # v13+: "the client can handle a top level error code, so we don't need to send back partitions"
    FETCH: ErrorShape(
        mirrored=lambda request, version: version < 13, overrides=lambda v: {"aborted_transactions": None}
    ),
    # v0-1 answer per partition; v2-7 with the top-level error only; v8+ per group, without its topics
    OFFSET_FETCH: ErrorShape(
        mirrored=lambda request, version: version < 2 or version >= 8,
        shallow=lambda version: frozenset({"groups"}),
    ),
    FIND_COORDINATOR: ErrorShape(message=Message.DEFAULT),
    JOIN_GROUP: ErrorShape(overrides=lambda version: {"protocol_name": None} if version >= 7 else {}),
    LEAVE_GROUP: ErrorShape(mirrored=lambda request, version: False),
    DESCRIBE_GROUPS: ErrorShape(message=Message.NONE),
    DELETE_TOPICS: ErrorShape(message=Message.NONE),
    DESCRIBE_CONFIGS: ErrorShape(message=Message.DEFAULT),
    DESCRIBE_LOG_DIRS: ErrorShape(mirrored=lambda request, version: False),
    OFFSET_DELETE: ErrorShape(mirrored=lambda request, version: False),
    DESCRIBE_USER_SCRAM_CREDENTIALS: ErrorShape(mirrored=lambda request, version: False),
    ALTER_USER_SCRAM_CREDENTIALS: ErrorShape(view=_named_users),
}
_GENERIC = ErrorShape()


@dataclass(frozen=True, slots=True)
class _Fill:
    """What every entity of one error response gets."""

    error: ErrorCode
    message: str | None
    overrides: Mapping[str, Any]
    mirrored: bool
    shallow: frozenset[str] = field(default_factory=frozenset)


def error_response(api_key: int, api_version: int, request: Any, response_type: type, error: RequestError) -> Any:
    """`response_type` (kio's response of `api_key` v`api_version`) answering `request` with `error` in every
    entity, as Kafka's getErrorResponse builds it; None when Kafka sends no response (Produce with acks=0)."""
    shape = _SHAPES.get(api_key, _GENERIC)
    if not shape.answered(request):
        return None
    match shape.message:
        case Message.API_ERROR:
            message = error.message
        case Message.DEFAULT:
            message = kafka_errors.ERRORS.get(error.code, kafka_errors.UnknownServerError).default_message
        case Message.NONE:
            message = None
        case _:
            typing.assert_never(shape.message)
    fill = _Fill(
        ErrorCode(error.code),
        message,
        shape.overrides(api_version),
        shape.mirrored(request, api_version),
        shape.shallow(api_version),
    )
    return _mirror(response_type, shape.view(request), fill)


def _mirror(entity_type: type, source: Any, fill: _Fill) -> Any:
    """An `entity_type` for the request entity `source` (None: an entity with no request counterpart)."""
    values: dict[str, Any] = {}
    source_fields = _field_names(source)
    for f in dataclasses.fields(entity_type):
        kafka_type = f.metadata.get("kafka_type")
        nested = _nested_entity(f.type)
        if kafka_type == "error_code":
            values[f.name] = fill.error
        elif f.name == "error_message":
            values[f.name] = fill.message
        elif f.name in fill.overrides:
            values[f.name] = fill.overrides[f.name]
        elif nested is not None and _is_array(f.type):
            values[f.name] = _mirror_array(nested, _array_source(f.name, source, source_fields, fill), fill)
        elif f.name in _KEY_FIELDS and (key := _key_source(f.name, source_fields)) is not None:
            value = getattr(source, key)  # a null key (a topic named by id) stays null where the response allows it
            null_to_empty = value is None and not _nullable(f.type)
            values[f.name] = _EMPTY_BY_KAFKA_TYPE.get(kafka_type, 0) if null_to_empty else value
        elif _has_default(f):
            continue
        elif nested is not None:
            values[f.name] = _mirror(nested, None, fill)
        elif f.name in _UNKNOWN_BY_FIELD:
            values[f.name] = _UNKNOWN_BY_FIELD[f.name]
        elif _is_array(f.type):
            values[f.name] = ()
        else:
            values[f.name] = _EMPTY_BY_KAFKA_TYPE.get(kafka_type, 0)
    return entity_type(**values)


def _mirror_array(entity_type: type, items: tuple[Any, ...], fill: _Fill) -> tuple[Any, ...]:
    """One response entity per request item: a request entity, or a plain value (a group id, a partition index)
    that becomes the response entity's first field of its Kafka type."""
    mirrored = []
    for item in items:
        if isinstance(item, _Shallow) or dataclasses.is_dataclass(item):
            mirrored.append(_mirror(entity_type, item, fill))
        else:
            mirrored.append(_mirror(entity_type, _PlainKey(_first_field_for(entity_type, type(item)), item), fill))
    return tuple(mirrored)


def _array_source(name: str, source: Any, source_fields: frozenset[str], fill: _Fill) -> tuple[Any, ...]:
    """The request array the response array `name` mirrors; empty when there is none or the shape keeps none."""
    if source is None or not fill.mirrored:
        return ()
    for candidate in _ARRAY_SOURCES.get(name, ()):
        if candidate in source_fields:
            items = getattr(source, candidate)
            if items is None or not isinstance(items, tuple):
                return ()
            if candidate in fill.shallow:
                return tuple(_Shallow(item) for item in items)
            return items
    return ()


def _key_source(name: str, source_fields: frozenset[str]) -> str | None:
    for candidate in _KEY_SOURCES.get(name, (name,)):
        if candidate in source_fields:
            return candidate
    return None


class _PlainKey:
    """A plain request value (a group id, a partition index) seen as an entity with one key field."""

    def __init__(self, name: str, value: Any) -> None:
        self._name = name
        self._value = value
        self.field_names = frozenset({name})

    def __getattr__(self, name: str) -> Any:
        if name == self._name:
            return self._value
        raise AttributeError(name)


class _Shallow:
    """A request entity whose key fields are mirrored but whose arrays are not (OffsetFetch v8+'s groups)."""

    def __init__(self, entity: Any) -> None:
        self._entity = entity
        self.field_names = _dataclass_field_names(type(entity))

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._entity, name)
        return () if isinstance(value, tuple) else value


def _field_names(source: Any) -> frozenset[str]:
    if source is None:
        return frozenset()
    if isinstance(source, _PlainKey | _Shallow):
        return source.field_names
    return _dataclass_field_names(type(source))


@cache
def _dataclass_field_names(entity_type: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(entity_type))


@cache
def _first_field_for(entity_type: type, value_type: type) -> str:
    """The first field of `entity_type` whose Python type takes `value_type` values (str: group_id, int: index)."""
    for f in dataclasses.fields(entity_type):
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type == "error_code" or f.name == "error_message":
            continue
        if (value_type is str and kafka_type == "string") or (value_type is not str and kafka_type == "int32"):
            return f.name
    raise TypeError(f"{entity_type.__qualname__} has no field for a request value of type {value_type.__name__}")


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _nullable(annotation: Any) -> bool:
    is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return is_union and type(None) in typing.get_args(annotation)


def _is_array(annotation: Any) -> bool:
    if typing.get_origin(annotation) is tuple:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(typing.get_origin(arg) is tuple for arg in typing.get_args(annotation))
    return False


@cache
def _nested_entity(annotation: Any) -> type | None:
    """The dataclass inside `X`, `X | None`, `tuple[X, ...]` or `tuple[X, ...] | None`; None for a primitive."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    if typing.get_origin(annotation) in (tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None) and arg is not Ellipsis:
                found = _nested_entity(arg)
                if found is not None:
                    return found
    return None
