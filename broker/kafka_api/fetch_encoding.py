"""A Fetch response put on the wire around the record bytes read from the log, which are never copied here.

kio writes every field of the response; only the records would cost a copy of every fetched byte into its
buffer. Kafka's encoding has no byte-length prefixes on structures, only counts on arrays and a length on
each bytes field, and in every Fetch version the last field of the response is its topics array, the last
field of a topic its partitions array and the last field of a partition its records (tagged fields, v12+,
come after them). So each level is written by kio with that last field empty, the empty marker (a 4-byte
zero, or the compact encoding's 0x01 before the empty tagged-field section) is cut off, and the count or
length is written in its place, followed by the items: the topics, the partitions, the record bytes as the
log gave them (a `bytes` or `memoryview` part of the frame, written to the socket as it is).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

from kio.serial import entity_writer

from broker.kafka_api.entities import build
from broker.kafka_api.registry import EncodedResponse

_INT32 = struct.Struct(">i")
# The encodings of an empty last field (array of no items, or empty bytes) and, in flexible versions, of the
# empty tagged-field section after it.
_EMPTY_LEGACY = b"\x00\x00\x00\x00"
_EMPTY_COMPACT = b"\x01"
_NO_TAGGED_FIELDS = b"\x00"
# Encoded topic heads kept (name and version): a broker's hot topics, bounded whatever names clients send.
TOPIC_HEADS_CACHED = 4096


class FetchEncodingError(Exception):
    """kio's encoding of a level did not end as the Fetch schema says it must (a kio change): not spliced."""


def encode_fetch_response(
    response_type: type,
    response_fields: dict[str, Any],
    topics: Sequence[tuple[str, Sequence[tuple[dict[str, Any], bytes | memoryview]]]],
) -> EncodedResponse:
    """The body of a FetchResponse of kio's `response_type`: `response_fields` at the top, then each topic's
    name and partitions, each partition's fields (without records) followed by its record bytes."""
    topic_type, partition_type = _nested_types(response_type)
    flexible = bool(response_type.__flexible__)
    parts: list[bytes | memoryview] = []
    pending = bytearray()
    head, top_tail = _top_level(response_type, tuple(sorted(response_fields.items())))
    pending += head
    pending += _count(len(topics), flexible)
    for name, partitions in topics:
        head, topic_tail = _topic_level(topic_type, name)
        pending += head
        pending += _count(len(partitions), flexible)
        for fields, records in partitions:
            entity = build(partition_type, fields, records=b"")
            if not records:  # nothing to splice: kio writes it whole (tagged fields such as a diverging epoch too)
                pending += _encode(partition_type, entity)
                continue
            head, partition_tail = _split(partition_type, entity, flexible)
            pending += head
            pending += _count(len(records), flexible)
            parts.append(bytes(pending))
            parts.append(records)
            pending = bytearray(partition_tail)
        pending += topic_tail
    pending += top_tail
    parts.append(bytes(pending))
    return EncodedResponse(parts)


# The top level and a topic's name encode the same in every response: kept, so that a fetch of one partition
# runs kio's writer once, not three times.
@lru_cache(maxsize=64)
def _top_level(response_type: type, fields: tuple[tuple[str, Any], ...]) -> tuple[bytes, bytes]:
    return _split(response_type, build(response_type, dict(fields), responses=()), bool(response_type.__flexible__))


@lru_cache(maxsize=TOPIC_HEADS_CACHED)
def _topic_level(topic_type: type, name: str) -> tuple[bytes, bytes]:
    return _split(topic_type, build(topic_type, topic=name, partitions=()), bool(topic_type.__flexible__))


def _split(entity_type: type, entity: Any, flexible: bool) -> tuple[bytes, bytes]:
    """kio's encoding of `entity` (last field empty) cut before the empty marker: (head, tagged-field tail)."""
    encoded = _encode(entity_type, entity)
    if flexible:
        if not encoded.endswith(_EMPTY_COMPACT + _NO_TAGGED_FIELDS):
            raise FetchEncodingError(f"{entity_type.__qualname__} v{entity_type.__version__}: unexpected ending")
        return encoded[:-2], _NO_TAGGED_FIELDS
    if not encoded.endswith(_EMPTY_LEGACY):
        raise FetchEncodingError(f"{entity_type.__qualname__} v{entity_type.__version__}: unexpected ending")
    return encoded[:-4], b""


def _encode(entity_type: type, entity: Any) -> bytes:
    buffer = io.BytesIO()
    _writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def _count(n: int, flexible: bool) -> bytes:
    """An array's count or a bytes field's length: int32, or in flexible versions an unsigned varint of n + 1."""
    if not flexible:
        return _INT32.pack(n)
    n += 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@cache
def _writer(entity_type: type) -> Any:
    return entity_writer(entity_type)


@cache
def _nested_types(response_type: type) -> tuple[type, type]:
    """(FetchableTopicResponse, PartitionData) of the response's version."""
    module = __import__(response_type.__module__, fromlist=["FetchableTopicResponse", "PartitionData"])
    return module.FetchableTopicResponse, module.PartitionData
