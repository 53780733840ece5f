"""Fetched Kafka v2 record batches -> one Arrow RecordBatch in the Kafka source schema, vectorised with numpy.

The v2 record format (docs/research/kafka.md §3.8, `client/kafka/records.py`) is a
chain of varint-framed records, so where each record starts is inherently
sequential; everything after that is not. Decoding therefore runs in three
steps:

1. batch headers, in Python, by the client's one walk over a buffer of batches
   (`client.kafka.records.iter_batch_slices`: one struct unpack and one C
   CRC-32C per batch of hundreds of records);
2. where each record's body starts and ends, per batch: a producer writes runs
   of records of one length (same-size values; the length changes only when a
   varint grows), so from a record's length we predict the following starts
   at a fixed stride and confirm the whole run with one numpy comparison of
   the length bytes (which also gives every length of the run). Where lengths
   vary record by record we walk the length varints in Python;
3. every other field at once: the varints at the known positions are decoded
   by numpy a byte column at a time, keys and values are gathered into Arrow
   binary buffers with one masked copy each.

Only records with `start_offset <= offset < until_offset` are returned; the
broker returns whole batches, which may begin before the fetch offset.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from client.kafka import compression
from client.kafka.records import (
    BATCH_HEADER_SIZE,
    CorruptRecordError,
    RecordsError,
    decode_headers,
    decode_varint,
    iter_batch_slices,
)
from spark_connector.schema import ARROW_HEADER_TYPE, arrow_schema

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_CONTROL_MASK = 0x20
# Step 2 tuning: how many predicted starts are checked at once (grows while runs hold), and how many records are
# walked in Python after a run shorter than _RUN_MIN before predicting again.
_WINDOW_MIN = 16
_WINDOW_MAX = 1 << 16
_RUN_MIN = 4
_SCALAR_STRETCH = 64
# Arrow binary arrays use int32 offsets: one column of one fetched batch stays below 2 GiB.
_BINARY_BYTES_MAX = 2**31 - 1
_VARINT_BYTES_MAX = 10


class Decoded(NamedTuple):
    """One fetch response's rows (None when none fall in range) and where the next fetch should start."""

    batch: pa.RecordBatch | None
    next_offset: int


class _Framing(NamedTuple):
    """Where each record's body starts (after its length varint) and ends, in pieces (a run or a walk each)."""

    bodies: list[np.ndarray]
    ends: list[np.ndarray]


class _Batch(NamedTuple):
    body_start: int
    body_end: int
    records: int
    base_offset: int
    base_timestamp: int
    log_append_timestamp: int  # -1: CreateTime, the record's own timestamp counts
    timestamp_type: int


def decode_to_arrow(
    topic: str,
    partition: int,
    buf: bytes | memoryview,
    start_offset: int,
    until_offset: int,
    include_headers: bool,
    *,
    check_crc: bool = True,
) -> Decoded:
    """Rows of `buf` (whole v2 batches as fetched) with start_offset <= offset < until_offset."""
    data, batches, next_offset = _scan_batches(buf, start_offset, until_offset, check_crc)
    if not batches:
        return Decoded(None, next_offset)
    u8 = np.frombuffer(data, dtype=np.uint8)
    framing = _Framing([], [])
    window = _WINDOW_MIN
    for b in batches:
        window = _frame_batch(data, u8, b, framing, window)
    columns = _decode_records(
        data, u8, np.concatenate(framing.bodies), np.concatenate(framing.ends), batches, include_headers
    )
    offsets = columns["offset"]
    keep = (offsets >= start_offset) & (offsets < until_offset)
    if not keep.all():
        columns = {name: _take(col, keep) for name, col in columns.items()}
    if len(columns["offset"]) == 0:
        return Decoded(None, next_offset)
    return Decoded(_to_record_batch(topic, partition, u8, columns, include_headers), next_offset)


# --------------------------------------------------------------------------- step 1: batch headers


def _scan_batches(
    buf: bytes | memoryview, start_offset: int, until_offset: int, check_crc: bool
) -> tuple[bytes | memoryview, list[_Batch], int]:
    """(buffer holding every record section, the batches to decode, offset after the last whole batch in range)."""
    mv = memoryview(buf)
    next_offset = start_offset
    batches: list[_Batch] = []
    bodies: list[bytes | memoryview] = []  # each wanted batch's records, in order
    compressed = False
    # The batches wanted, CRC-checked; a truncated tail (the broker slices by bytes) ends the walk.
    for header, pos, size in iter_batch_slices(
        mv, start_offset=start_offset, until_offset=until_offset, check_crc=check_crc
    ):
        base = header.base_offset
        next_offset = max(next_offset, base + header.last_offset_delta + 1)
        attributes = header.attributes
        if attributes & _CONTROL_MASK or header.records_count <= 0:
            continue
        body: bytes | memoryview = mv[pos + BATCH_HEADER_SIZE : pos + size]
        codec = attributes & _CODEC_MASK
        if codec:
            body = _inflate(codec, body, base)
            compressed = True
        log_append = attributes & _TIMESTAMP_TYPE_MASK
        start = pos + BATCH_HEADER_SIZE
        log_append_ts = header.max_timestamp if log_append else -1
        batches.append(
            _Batch(
                start,
                start + len(body),
                header.records_count,
                base,
                header.base_timestamp,
                log_append_ts,
                log_append >> 3,
            )
        )
        bodies.append(body)
    if not compressed:
        return buf, batches, next_offset
    # Keys and values are gathered in buffer order, so the inflated records are laid out in batch order.
    relaid = []
    at = 0
    for b, body in zip(batches, bodies, strict=True):
        relaid.append(b._replace(body_start=at, body_end=at + len(body)))
        at += len(body)
    return b"".join(bodies), relaid, next_offset


def _inflate(codec: int, body: bytes | memoryview, base_offset: int) -> bytes:
    """Every codec of client.kafka.compression, bounded by its default limit on inflated bytes."""
    try:
        return compression.decompress(codec, body, decompressed_bytes_max=compression.DECOMPRESSED_BYTES_MAX_DEFAULT)
    except RecordsError as exc:
        raise CorruptRecordError(f"batch at offset {base_offset}: {exc}") from None


# --------------------------------------------------------------------------- step 2: framing


def _frame_batch(data: bytes | memoryview, u8: np.ndarray, batch: _Batch, out: _Framing, window: int) -> int:
    """Appends where each record of `batch` has its body and where it ends to `out`.

    A run's records all carry the first one's length bytes, so the lengths
    come with the starts and are not decoded again in step 3. `window` is
    how many starts to predict at first; the window the batch ended with is
    returned for the next one, because a fetch's batches come from the same
    producer: with same-size records every batch after the first few is
    framed in one step per run of equal lengths (two for a 16 KB batch of
    100-byte values, whose records grow a byte at offset delta 64), where a
    window restarting at 16 took three (an 8 MB fetch decoded in 0.70-0.89x
    the time).
    """
    p, end, remaining = batch.body_start, batch.body_end, batch.records
    while remaining > 0:
        length, body = _varint(data, p, end, batch)
        stride = body - p + length
        k = min(remaining, window, (end - p) // stride)
        if k > 1:
            candidates = np.arange(p, p + k * stride, stride, dtype=np.int64)
            same = u8[candidates] == u8[p]
            for j in range(1, body - p):
                same &= u8[candidates + j] == u8[p + j]
            run = k if same.all() else int(same.argmin())
            bodies = candidates[:run] + (body - p)
            out.bodies.append(bodies)
            out.ends.append(bodies + length)
            window = min(window * 4, _WINDOW_MAX) if run == k else max(_WINDOW_MIN, 2 * run)
        else:
            run = 1
            out.bodies.append(np.array([body], dtype=np.int64))
            out.ends.append(np.array([body + length], dtype=np.int64))
        p += run * stride
        remaining -= run
        if remaining and run < _RUN_MIN:
            p, remaining = _walk_scalar(data, p, end, min(remaining, _SCALAR_STRETCH), remaining, batch, out)
    if p != end:
        raise CorruptRecordError(
            f"batch at offset {batch.base_offset}: {end - p} bytes after its {batch.records} records"
        )
    return window


def _walk_scalar(
    data: bytes | memoryview, p: int, end: int, n: int, remaining: int, batch: _Batch, out: _Framing
) -> tuple[int, int]:
    bodies: list[int] = []
    ends: list[int] = []
    for _ in range(n):
        b = data[p]
        if b < 0x80 and b & 1 == 0 and b:  # one-byte positive length: the common case, inline
            bodies.append(p + 1)
            p += 1 + (b >> 1)
            if p > end:
                raise CorruptRecordError(f"batch at offset {batch.base_offset}: record overruns the batch")
        else:
            length, body = _varint(data, p, end, batch)
            bodies.append(body)
            p = body + length
        ends.append(p)
    out.bodies.append(np.array(bodies, dtype=np.int64))
    out.ends.append(np.array(ends, dtype=np.int64))
    return p, remaining - n


def _varint(data: bytes | memoryview, p: int, end: int, batch: _Batch) -> tuple[int, int]:
    """A record's length varint at `p`: (length, position of the record body); checks it fits the batch."""
    if p >= end:
        raise CorruptRecordError(f"batch at offset {batch.base_offset}: fewer records than its count {batch.records}")
    length, body = decode_varint(data, p)
    if length <= 0 or body + length > end:
        raise CorruptRecordError(f"batch at offset {batch.base_offset}: record length {length} overruns the batch")
    return length, body


# --------------------------------------------------------------------------- step 3: fields


def _vdecode(u8: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray | int]:
    """Zig-zag varints at each position: (values, widths in bytes), one byte column per round.

    Most fields of most records are one-byte varints (small deltas, null keys,
    no headers): then the width is the scalar 1 and the rest is skipped.
    While at least half the varints go on, a round reads the next byte of
    every record and masks (cheaper than indexing the subset); the last
    rounds work on the indices of the few that are still going. A varint
    that would run past the buffer reads its last byte again (`clip`) and
    fails the check that a record's fields add up to its length.
    """
    try:
        first = u8[pos]
    except IndexError:
        raise CorruptRecordError("varint runs past the end of the fetched records") from None
    going = first >= 0x80
    count = np.count_nonzero(going)
    if count == 0:
        value = first.astype(np.int64)
        return (value >> 1) ^ -(value & 1), 1
    value = (first & 0x7F).astype(np.int64)
    width = np.ones(len(pos), dtype=np.int64)
    shift = 7
    while 2 * count >= len(pos):
        _check_varint_shift(shift)
        b = u8.take(pos + width, mode="clip")
        low = b & 0x7F
        low *= going  # masked while still one byte wide: cheaper than masking the widened int64 column
        value |= low.astype(np.int64) << shift
        width += going
        going &= b >= 0x80
        count = np.count_nonzero(going)
        shift += 7
    more = np.flatnonzero(going)
    while len(more):
        _check_varint_shift(shift)
        b = u8.take(pos[more] + width[more], mode="clip").astype(np.int64)
        value[more] |= (b & 0x7F) << shift
        width[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return (value >> 1) ^ -(value & 1), width


def _check_varint_shift(shift: int) -> None:
    if shift >= 7 * _VARINT_BYTES_MAX:
        raise CorruptRecordError("varint longer than 10 bytes")


def _decode_records(
    data: bytes | memoryview,
    u8: np.ndarray,
    bodies: np.ndarray,
    record_end: np.ndarray,
    batches: list[_Batch],
    include_headers: bool,
) -> dict[str, Any]:
    p = bodies + 1  # + 1: the record attributes byte, unused
    ts_delta, width = _vdecode(u8, p)
    p += width
    offset_delta, width = _vdecode(u8, p)
    p += width
    key_len, width = _vdecode(u8, p)
    key_pos = p + width
    p = key_pos + np.maximum(key_len, 0)
    value_len, width = _vdecode(u8, p)
    value_pos = p + width
    p = value_pos + np.maximum(value_len, 0)
    header_count, width = _vdecode(u8, p)
    p += width
    headers: list[Any] | None = None
    with_headers = np.flatnonzero(header_count != 0)
    if len(with_headers):
        if include_headers:
            headers = [None] * len(bodies)
            text = bytes(data)  # header keys are decoded from bytes slices (a fetch arrives as a memoryview)
            for i in with_headers.tolist():
                headers[i], p[i] = _decode_headers(text, int(p[i]), int(header_count[i]))
        else:
            p[with_headers] = record_end[with_headers]  # not asked for: the CRC already vouched for their bytes
    elif include_headers:
        headers = [None] * len(bodies)
    if not np.array_equal(p, record_end):
        bad = int(np.flatnonzero(p != record_end)[0])
        raise CorruptRecordError(f"record at position {int(bodies[bad])}: fields do not add up to its length")
    # Batch fields repeated over their records (np.repeat: cheaper than gathering by a batch index).
    counts = [b.records for b in batches]
    ts_type = np.repeat(np.array([b.timestamp_type for b in batches], dtype=np.int32), counts)
    timestamp = np.repeat(np.array([b.base_timestamp for b in batches], dtype=np.int64), counts) + ts_delta
    if any(b.timestamp_type for b in batches):  # LogAppendTime: the batch's time, not the record's
        append_ts = np.repeat(np.array([b.log_append_timestamp for b in batches], dtype=np.int64), counts)
        timestamp = np.where(ts_type == 1, append_ts, timestamp)
    return {
        "offset": np.repeat(np.array([b.base_offset for b in batches], dtype=np.int64), counts) + offset_delta,
        "timestamp": timestamp,
        "timestampType": ts_type,
        "key_pos": key_pos,
        "key_len": key_len,
        "value_pos": value_pos,
        "value_len": value_len,
        "headers": headers,
    }


def _decode_headers(data: bytes, p: int, count: int) -> tuple[list[tuple[str, bytes | None]] | None, int]:
    """client.kafka.records.decode_headers as the list the Arrow column wants."""
    headers, p = decode_headers(data, p, count)
    return list(headers), p


def _take(column: Any, keep: np.ndarray) -> Any:
    if column is None:
        return None
    if isinstance(column, list):
        return [v for v, k in zip(column, keep.tolist(), strict=True) if k]
    return column[keep]  # type: ignore[index]


# --------------------------------------------------------------------------- Arrow


def _to_record_batch(
    topic: str, partition: int, u8: np.ndarray, columns: dict[str, Any], include_headers: bool
) -> pa.RecordBatch:
    offsets = columns["offset"]
    n = len(offsets)  # type: ignore[arg-type]
    arrays = [
        binary_from_positions(u8, columns["key_pos"], columns["key_len"]),  # type: ignore[arg-type]
        binary_from_positions(u8, columns["value_pos"], columns["value_len"]),  # type: ignore[arg-type]
        _repeated_string(topic, n),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, dtype=np.int32))]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.ascontiguousarray(offsets))]),
        pa.Array.from_buffers(
            pa.timestamp("us", tz="UTC"),
            n,
            [None, pa.py_buffer(np.ascontiguousarray(columns["timestamp"]) * 1000)],  # type: ignore[operator]
        ),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.ascontiguousarray(columns["timestampType"]))]),
    ]
    if include_headers:
        arrays.append(pa.array(columns["headers"], type=ARROW_HEADER_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def binary_from_positions(u8: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """An Arrow binary array of u8[pos[i] : pos[i] + lengths[i]] (null where the length is -1)."""
    n = len(pos)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total > _BINARY_BYTES_MAX:
        raise ValueError(f"{total} bytes of keys or values in one fetched batch: more than an Arrow binary array holds")
    data = _gather(u8, pos, sizes, total)
    null_count = n - int(np.count_nonzero(valid))
    validity = None if null_count == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], null_count=null_count
    )


def _gather(u8: np.ndarray, pos: np.ndarray, sizes: np.ndarray, total: int) -> np.ndarray | bytes:
    """The bytes u8[pos[i] : pos[i] + sizes[i]] one after another.

    Records of one run have one size at a fixed stride, so a run is one
    strided copy of fixed-size rows; only where sizes vary record by record
    (fewer than _RUN_MIN records per run on average) is it one slice per
    record. A row is one void item of `size` bytes (numpy copies it whole,
    where a 2-D uint8 view is copied byte by byte), and the views are made
    with the ndarray constructor (as_strided costs tens of microseconds a
    call, and a fetch has dozens of runs).
    """
    n = len(pos)
    if total == 0:
        return b""
    step = np.diff(pos)
    breaks = np.empty(n, dtype=np.bool_)
    breaks[0] = True
    if n > 1:
        breaks[1:] = sizes[1:] != sizes[:-1]
        breaks[2:] |= step[1:] != step[:-1]
    seg_starts = np.flatnonzero(breaks)
    if len(seg_starts) * _RUN_MIN > n:
        mv = u8.data
        ends = (pos + sizes).tolist()
        return b"".join([mv[a:b] for a, b in zip(pos.tolist(), ends, strict=True)])
    out = np.empty(total, dtype=np.uint8)
    counts = np.diff(seg_starts, append=n).tolist()
    strides = np.append(step, 0)[seg_starts].tolist()  # a run of one record has no step: any stride will do
    at = 0
    for first, size, stride, count in zip(
        pos[seg_starts].tolist(), sizes[seg_starts].tolist(), strides, counts, strict=True
    ):
        if size == 0:
            continue
        row = np.dtype((np.void, size))
        rows = np.ndarray((count,), row, buffer=u8, offset=first, strides=(stride,))
        np.ndarray((count,), row, buffer=out, offset=at)[...] = rows
        at += count * size
    return out


def _repeated_string(text: str, n: int) -> pa.Array:
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])
