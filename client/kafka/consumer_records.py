"""Fetched record batches -> ConsumerRecord tuples, the consumer's hot path (research/kafka.md §3.8).

`client.kafka.records.iter_records` builds `Record` tuples with a general varint
decoder (~0.3 M records/s); the consumer needs ConsumerRecords, so this module
decodes straight into them with the one- and two-byte varint cases inline
(every varint of a 100-byte record is one of those). Batches are located and
CRC-checked by `iter_batches`; records below `start_offset` (a fetch returns
whole batches, which may begin before the fetch position) are skipped, and
control batches are skipped while still advancing the position past them.
"""

from __future__ import annotations

import struct

from client.kafka.records import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    decode_headers,
    decode_varint,
    iter_batches,
)
from client.kafka.types import ConsumerRecord

_new = tuple.__new__
_NO_HEADERS: tuple = ()


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
    out: list[ConsumerRecord] = []
    append = out.append
    next_offset = start_offset
    dv = decode_varint
    cls = ConsumerRecord
    for header, data in iter_batches(buf, check_crc=check_crc):
        base_offset = header.base_offset
        last_offset = base_offset + header.last_offset_delta
        if last_offset < start_offset:
            continue
        if last_offset + 1 > next_offset:
            next_offset = last_offset + 1
        attributes = header.attributes
        if attributes & CONTROL_FLAG_MASK:
            continue
        if attributes & TIMESTAMP_TYPE_MASK:
            timestamp_type, log_append_ts = 1, header.max_timestamp
        else:
            timestamp_type, log_append_ts = 0, None
        base_ts = header.base_timestamp
        end = len(data)
        p = 0
        for _ in range(header.records_count):
            # length (varint), then attributes (1 byte, unused)
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                z = (b & 0x7F) | (data[p + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                length, p = dv(data, p)
            record_end = p + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(f"{topic}-{partition}: record length {length} overruns batch {base_offset}")
            p += 1
            # timestampDelta
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = dv(data, p)
            # offsetDelta
            b = data[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                z = (b & 0x7F) | (data[p + 1] << 7)
                offset_delta = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                offset_delta, p = dv(data, p)
            # key
            b = data[p]
            if b == 1:  # zig-zag -1: null
                key = None
                p += 1
            else:
                klen, p = dv(data, p)
                key = data[p : p + klen]
                p += klen
            # value
            b = data[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                z = (b & 0x7F) | (data[p + 1] << 7)
                vlen = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                vlen, p = dv(data, p)
            if vlen < 0:
                value = None
            else:
                value = data[p : p + vlen]
                p += vlen
            # headers
            if data[p] == 0:
                headers = _NO_HEADERS
                p += 1
            else:
                headers, p = _decode_headers(data, p)
            if p != record_end:
                raise CorruptRecordError(f"{topic}-{partition}: record at offset delta {offset_delta} length mismatch")
            offset = base_offset + offset_delta
            if offset >= start_offset:
                append(
                    _new(
                        cls,
                        (
                            topic,
                            partition,
                            offset,
                            base_ts + ts_delta if log_append_ts is None else log_append_ts,
                            timestamp_type,
                            key,
                            value,
                            headers,
                        ),
                    )
                )
        if p != end:
            raise CorruptRecordError(f"{topic}-{partition}: batch {base_offset} has {end - p} bytes after its records")
    return out, next_offset


def _decode_headers(data: bytes, p: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, p = decode_varint(data, p)
    return decode_headers(data, p, count)


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
