"""Fetched record batches -> ConsumerRecord tuples, the consumer's hot path (docs/research/kafka.md §3.8).

The records are decoded by the client's one record decoder
(`client.kafka.records.decode_rows`) straight into ConsumerRecords; records
below `start_offset` (a fetch returns whole batches, which may begin before
the fetch position) are skipped, and control batches are skipped while still
advancing the position past them.
"""

from __future__ import annotations

import struct

from client.kafka.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    decode_rows,
)
from client.kafka.types import ConsumerRecord


def decode_fetched(
    topic: str,
    partition: int,
    buf: bytes | bytearray | memoryview,
    start_offset: int,
    *,
    check_crc: bool = True,
) -> tuple[list[ConsumerRecord], int]:
    """(records with offset >= start_offset, the offset after the last whole batch seen, at least start_offset).

    Keys and values are raw bytes; deserialisation is the caller's (one pass, only when configured).
    """
    return decode_rows(topic, partition, buf, start_offset, ConsumerRecord, check_crc=check_crc)


def deserialize(records: list[ConsumerRecord], key_deserializer, value_deserializer) -> list[ConsumerRecord]:
    """Applies the configured deserialisers in one pass (no-op without them)."""
    if key_deserializer is None and value_deserializer is None:
        return records
    kd = key_deserializer or (lambda k: k)
    vd = value_deserializer or (lambda v: v)
    return [
        r._replace(key=None if r.key is None else kd(r.key), value=None if r.value is None else vd(r.value))
        for r in records
    ]


_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")


def fetched_end_offset(buf: bytes | bytearray | memoryview, start_offset: int) -> int:
    """The offset after the last whole batch of a fetched buffer (at least `start_offset`), from headers only.

    Equals `decode_fetched(...)[1]` without decoding a record: the consumer
    uses it to send the next fetch for a partition while the user is still
    working through the buffered one.
    """
    end = start_offset
    pos = 0
    total = len(buf)
    while total - pos >= BATCH_HEADER_SIZE:
        base_offset, batch_length = _BASE_AND_LENGTH.unpack_from(buf, pos)
        size = batch_length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or pos + size > total:
            break
        (last_delta,) = _LAST_OFFSET_DELTA.unpack_from(buf, pos + 23)
        if base_offset + last_delta + 1 > end:
            end = base_offset + last_delta + 1
        pos += size
    return end
