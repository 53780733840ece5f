"""Building kio response entities from plain Python values, whatever the negotiated version.

kio generates one frozen dataclass per (API, version, nested structure) with Kafka's wire types
(`i32Timedelta` for `throttle_time_ms`, `TZAware` for timestamps, `ErrorCode` for error codes). A
handler describes its answer once, in plain values (ints in milliseconds, nested dicts or tuples of
dicts) and `build` fits it to the version's classes: fields the version lacks are dropped, fields the
caller leaves out take the schema's default, nested entities are built from the field's own type.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def build(entity_type: type, values: Mapping[str, Any] | None = None, /, **fields: Any) -> Any:
    """An instance of kio's `entity_type` from `values` and `fields` (plain ints, strings, bytes, dicts).

    Raises TypeError naming the entity and field when a field without a default is missing.
    """
    given = {**values, **fields} if values else fields
    kwargs = {}
    for name, (kafka_type, nested_type, has_default) in _field_plan(entity_type).items():
        if name not in given:
            if not has_default:
                raise TypeError(f"{entity_type.__qualname__} v{entity_type.__version__}: field {name!r} is required")
            continue
        kwargs[name] = _convert(given[name], kafka_type, nested_type)
    return entity_type(**kwargs)


def _convert(value: Any, kafka_type: str | None, nested_type: type | None) -> Any:
    # Exact-type tests first: this runs for every field of every response (Produce and Fetch included), and
    # isinstance against the Mapping ABC costs more than the rest of the conversion.
    if value is None:
        return None
    if nested_type is not None:  # a nested entity or a tuple of them
        if type(value) is dict or isinstance(value, Mapping):
            return build(nested_type, value)
        if dataclasses.is_dataclass(value):
            return value
        return tuple(build(nested_type, v) if type(v) is dict else _entity_or_build(nested_type, v) for v in value)
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def _entity_or_build(nested_type: type, value: Any) -> Any:
    return value if dataclasses.is_dataclass(value) else build(nested_type, value)


@cache
def _field_plan(entity_type: type) -> dict[str, tuple[str | None, type | None, bool]]:
    """name -> (kafka_type, nested entity type or None, has a default) for each field of `entity_type`."""
    plan = {}
    for f in dataclasses.fields(entity_type):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        plan[f.name] = (f.metadata.get("kafka_type"), _nested_entity(f.type), has_default)
    return plan


def _nested_entity(annotation: Any) -> type | None:
    """The dataclass inside `X`, `X | None` or `tuple[X, ...]`, or None for a primitive field."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None) and arg is not Ellipsis:
                found = _nested_entity(arg)
                if found is not None:
                    return found
    return None


def millis(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """A kio timedelta or timestamp field as Kafka's milliseconds (-1 for a null timestamp)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    return int(value)
