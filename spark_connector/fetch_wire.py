"""One partition's part of an encoded FetchResponse, its records a view into the received bytes (no copy).

Parsing a FetchResponse with protobuf copies the records twice (into the
message, then out of it as a new bytes object) for a reader that only
wants to hand them to numpy. The executors therefore call Fetch with the
response left as the bytes gRPC received and read the few fields they
need from the wire format here (proto/zkraft_proto/broker.proto:
FetchResponse, FetchableTopicResponse, FetchPartitionData). Fields may
come in any order and unknown fields are skipped, as protobuf parsers do.
"""

from __future__ import annotations

from typing import NamedTuple

from client.kafka.records import CorruptRecordError
from zkraft_proto import broker_pb2

_SERVICE = broker_pb2.DESCRIPTOR.services_by_name["Broker"]
FETCH_METHOD = f"/{_SERVICE.full_name}/Fetch"

# Field numbers in broker.proto.
_RESPONSE_ERROR_CODE = 1
_RESPONSE_TOPICS = 2
_TOPIC_NAME = 1
_TOPIC_PARTITIONS = 2
_PARTITION_INDEX = 1
_PARTITION_ERROR_CODE = 2
_PARTITION_HIGH_WATERMARK = 3
_PARTITION_RECORDS = 6

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_FIXED_BYTES = {_FIXED64: 8, _FIXED32: 4}
_UINT64_SPAN = 1 << 64
_INT64_MAX = (1 << 63) - 1


class FetchedPartition(NamedTuple):
    error_code: int
    high_watermark: int
    records: memoryview


class FetchedResponse(NamedTuple):
    error_code: int
    partition: FetchedPartition | None  # None: the response does not mention the partition


def fetched_partition(raw: bytes, topic: str, partition: int) -> FetchedResponse:
    """The response's error code and `topic`/`partition`'s data from an encoded FetchResponse."""
    view = memoryview(raw)
    wanted_topic = topic.encode("utf-8")
    error_code = 0
    found = None
    for number, value in _fields(view, 0, len(view)):
        if number == _RESPONSE_ERROR_CODE:
            error_code = _signed(value)
        elif number == _RESPONSE_TOPICS and isinstance(value, tuple):
            found = _topic_partition(view, value, wanted_topic, partition) or found
    return FetchedResponse(error_code, found)


def _topic_partition(
    view: memoryview, span: tuple[int, int], wanted_topic: bytes, partition: int
) -> FetchedPartition | None:
    name = b""
    partitions = []
    for number, value in _fields(view, *span):
        if number == _TOPIC_NAME and isinstance(value, tuple):
            name = view[value[0] : value[1]].tobytes()
        elif number == _TOPIC_PARTITIONS and isinstance(value, tuple):
            partitions.append(value)
    if name != wanted_topic:
        return None
    for part in partitions:
        index = error_code = 0
        high_watermark = 0
        records = view[0:0]
        for number, value in _fields(view, *part):
            if number == _PARTITION_INDEX:
                index = _signed(value)
            elif number == _PARTITION_ERROR_CODE:
                error_code = _signed(value)
            elif number == _PARTITION_HIGH_WATERMARK:
                high_watermark = _signed(value)
            elif number == _PARTITION_RECORDS and isinstance(value, tuple):
                records = view[value[0] : value[1]]
        if index == partition:
            return FetchedPartition(error_code, high_watermark, records)
    return None


def _fields(view: memoryview, pos: int, end: int):
    """(field number, varint value or (start, end) of a length-delimited value) for each field in [pos, end)."""
    while pos < end:
        key, pos = _varint(view, pos, end)
        wire_type = key & 0x07
        if wire_type == _VARINT:
            value, pos = _varint(view, pos, end)
            yield key >> 3, value
        elif wire_type == _LENGTH:
            length, pos = _varint(view, pos, end)
            if pos + length > end:
                raise CorruptRecordError(f"Fetch response: field {key >> 3} overruns its message")
            yield key >> 3, (pos, pos + length)
            pos += length
        elif wire_type in _FIXED_BYTES:
            pos += _FIXED_BYTES[wire_type]
        else:
            raise CorruptRecordError(f"Fetch response: wire type {wire_type} of field {key >> 3} is not supported")
    if pos != end:
        raise CorruptRecordError("Fetch response: a field overruns its message")


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 70:
        b = view[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise CorruptRecordError("Fetch response: truncated or overlong varint")


def _signed(value: int | tuple[int, int]) -> int:
    """A protobuf int32/int64 from its varint (negative numbers are sign-extended to 64 bits)."""
    if isinstance(value, tuple):
        raise CorruptRecordError("Fetch response: a number field holds a length-delimited value")
    return value - _UINT64_SPAN if value > _INT64_MAX else value
