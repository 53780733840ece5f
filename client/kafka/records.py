"""Kafka's v2 record batch (magic 2): build, validate, re-offset and decode.

The record format lives in the client, as in Kafka where it is in the clients
jar; the broker imports it from here (docs/research/kafka.md §3.8, after Kafka
2.8 `DefaultRecordBatch.java` and `DefaultRecord.java`).

Batch header, 61 bytes, big-endian::

    0  baseOffset int64         27 baseTimestamp int64     53 baseSequence int32
    8  batchLength int32        35 maxTimestamp int64      57 recordsCount int32
    12 partitionLeaderEpoch     43 producerId int64        61 records...
    16 magic int8 (= 2)         51 producerEpoch int16
    17 crc uint32: CRC-32C of bytes [21, end)
    21 attributes int16: bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    23 lastOffsetDelta int32

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta
varint, key (varint length, -1 = null), value (likewise), header count varint,
then per header a UTF-8 key and a nullable value. Varints are zig-zag, 7 bits
per byte, least significant group first (protobuf sint64).

Three users, three cost models:

* the producer builds a batch with `RecordBatchBuilder` (per-record Python,
  kept to one `join` per record and one for the batch);
* the broker calls `validate_batches` and `assign_offsets`, which touch only
  batch headers (struct + the C CRC-32C), never records: baseOffset and
  partitionLeaderEpoch lie outside the CRC, so re-offsetting keeps it valid;
* the consumer decodes with `iter_records` or, column-wise, `decode_columns`.

Every reader finds its batches with one walk, `iter_batch_slices` (header,
magic, length, truncated tail, CRC-32C), and then decodes records its own way:
the Consumer into ConsumerRecords (`client.kafka.consumer_records`), the Spark
reader into Arrow columns with numpy (`spark_connector.arrow_decode`), the
broker's log cleaner into record spans and keys (`broker.log.cleaner`).

A batch's records section may be compressed with any of Kafka's codecs;
client.kafka.compression holds them, and inflating one is bounded by
`decompressed_bytes_max` (a CorruptRecordError beyond it, never an allocation).
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from crc32c import crc32c

from client.kafka import compression as codecs
from client.kafka.compression import DECOMPRESSED_BYTES_MAX_DEFAULT
from client.kafka.records_errors import CorruptRecordError as CorruptRecordError
from client.kafka.records_errors import RecordsError as RecordsError
from client.kafka.records_errors import UnsupportedCompressionError as UnsupportedCompressionError

# --------------------------------------------------------------------------- constants

MAGIC = 2
BATCH_HEADER_SIZE = 61  # Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # baseOffset + batchLength: batchLength counts the bytes after these
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [ATTRIBUTES_OFFSET, end)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_new = tuple.__new__
_NO_HEADERS: tuple = ()
assert _HEADER.size == BATCH_HEADER_SIZE


class CompressionType(enum.IntEnum):
    """Attributes bits 0-2 (Kafka's `CompressionType`)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    """Attributes bit 3 (Kafka's `TimestampType`)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# --------------------------------------------------------------------------- errors

# Kept under the name the brief and callers use.
UnsupportedCompression = UnsupportedCompressionError


# --------------------------------------------------------------------------- value objects


class BatchHeader(NamedTuple):
    """The 61-byte header of one v2 batch, fields in wire order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)


class BatchInfo(NamedTuple):
    """Where one batch lies in a validated buffer and what the broker needs to know of it."""

    position: int
    length: int
    last_offset_delta: int
    records_count: int
    max_timestamp: int


class BatchesInfo(NamedTuple):
    """`validate_batches`' summary of a buffer of whole batches."""

    batch_count: int
    record_count: int
    offset_count: int  # sum of lastOffsetDelta + 1: the offsets `assign_offsets` will use
    max_timestamp: int  # -1 when no batch carries a timestamp
    byte_size: int
    batches: list[BatchInfo]


class BatchSlice(NamedTuple):
    """One whole batch found by `iter_batch_slices`: its header, where it starts and its size in bytes."""

    header: BatchHeader
    position: int
    size_bytes: int  # LOG_OVERHEAD + batchLength: the batch is buf[position : position + size_bytes]


class Record(NamedTuple):
    """One decoded record. Header keys are str (Kafka's are UTF-8 Strings), values bytes or None."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch starting at `pos`; CorruptRecordError if fewer than 61 bytes remain."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"batch at position {pos}: {len(buf) - pos} bytes left, a header needs 61")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


# --------------------------------------------------------------------------- varints


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (Kafka's `ByteUtils.writeVarlong`; for int32 values it equals `writeVarint`)."""
    z = (value << 1) ^ (value >> 63)
    if z < 0x80:
        return bytes((z,))
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Encodings of -1 .. _SMALL_MAX: null lengths, offset deltas and lengths of small payloads.
_SMALL_MAX = 8191
_SMALL = tuple(encode_varint(v) for v in range(-1, _SMALL_MAX + 1))
_NULL = _SMALL[0]


def _varint(value: int) -> bytes:
    if -1 <= value <= _SMALL_MAX:
        return _SMALL[value + 1]
    return encode_varint(value)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it); CorruptRecordError past the end or beyond 10 bytes."""
    try:
        z = buf[pos]
        if z < 0x80:  # the common case: one byte
            return (z >> 1) ^ -(z & 1), pos + 1
        z = 0
        shift = 0
        while True:
            b = buf[pos]
            pos += 1
            z |= (b & 0x7F) << shift
            if b < 0x80:
                return (z >> 1) ^ -(z & 1), pos
            shift += 7
            if shift > 63:
                raise CorruptRecordError(f"varint longer than 10 bytes before position {pos}")
    except IndexError:
        raise CorruptRecordError(f"varint runs past the end of the records at position {pos}") from None


# --------------------------------------------------------------------------- producer side


class RecordBatchBuilder:
    """Accumulates records into one v2 batch for the producer (Kafka's `MemoryRecordsBuilder`).

    The batch's base timestamp is `base_timestamp_ms`, or the wall clock when the
    builder is made; a record appended without a timestamp gets the base
    timestamp. Offsets in the built batch start at 0: the broker assigns them.
    """

    def __init__(
        self,
        base_timestamp_ms: int | None = None,
        compression: CompressionType | int = CompressionType.NONE,
    ) -> None:
        self._compression = CompressionType(compression)
        self._base_timestamp_ms = time.time_ns() // 1_000_000 if base_timestamp_ms is None else base_timestamp_ms
        self._max_timestamp_ms = -1
        self._parts: list[bytes] = []
        self._count = 0
        self._size = BATCH_HEADER_SIZE

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size_estimate(self) -> int:
        """Bytes of the uncompressed batch so far (exact when uncompressed)."""
        return self._size

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str | bytes, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> int:
        """Adds one record and returns its offset delta within the batch."""
        offset_delta = self._count
        if timestamp_ms is None:
            timestamp_ms = self._base_timestamp_ms
        if timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = timestamp_ms
        small = _SMALL
        key_len = small[0] if key is None else _varint(len(key))
        value_len = small[0] if value is None else _varint(len(value))
        body = b"".join(
            (
                b"\x00",  # record attributes, unused
                _varint(timestamp_ms - self._base_timestamp_ms),
                _varint(offset_delta),
                key_len,
                key or b"",
                value_len,
                value or b"",
                _encode_headers(headers) if headers else b"\x00",
            )
        )
        prefix = _varint(len(body))
        self._parts.append(prefix)
        self._parts.append(body)
        self._count = offset_delta + 1
        self._size += len(prefix) + len(body)
        return offset_delta

    def build(
        self,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
    ) -> bytes:
        """The batch: base offset 0, no leader epoch, CreateTime timestamps.

        Without arguments it carries no producer id; an idempotent producer
        passes its producer id, epoch and the partition's next sequence.
        """
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        records = codecs.compress(self._compression, b"".join(self._parts))
        return _frame_batch(
            records,
            attributes=int(self._compression),
            last_offset_delta=self._count - 1,
            base_timestamp=self._base_timestamp_ms,
            max_timestamp=self._max_timestamp_ms,
            records_count=self._count,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )


def _encode_headers(headers: Iterable[tuple[str | bytes, bytes | None]]) -> bytes:
    parts = []
    count = 0
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else hkey
        parts.append(_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_NULL)
        else:
            parts.append(_varint(len(hvalue)))
            parts.append(hvalue)
        count += 1
    return _varint(count) + b"".join(parts)


def _frame_batch(
    records: bytes,
    *,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    records_count: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """Header + records, CRC computed over attributes..end."""
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    crc = crc32c(records, crc32c(tail))
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records)
    head = struct.pack(">qiibI", 0, batch_length, NO_PARTITION_LEADER_EPOCH, MAGIC, crc)
    return b"".join((head, tail, records))


# --------------------------------------------------------------------------- broker side


def validate_batches(buf: bytes | bytearray | memoryview, *, from_client: bool = True) -> BatchesInfo:
    """Checks a buffer of whole v2 batches without decoding records.

    Framing must add up exactly to the buffer; each batch must have magic 2,
    a batchLength covering at least the header, a known codec and a matching
    CRC-32C. With `from_client` (a produce request) the count rules of Kafka's
    `LogValidator.validateBatch` apply too: recordsCount > 0 and equal to
    lastOffsetDelta + 1, and no control batches. Recovery and replication pass
    `from_client=False`, which allows compacted batches (fewer records than
    offsets, possibly none).
    """
    mv = memoryview(buf)
    total = len(mv)
    pos = 0
    batches: list[BatchInfo] = []
    record_count = 0
    offset_count = 0
    max_timestamp = -1
    unpack = _HEADER.unpack_from
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"batch at position {pos}: {total - pos} bytes left, a header needs 61")
        (_, batch_length, _, magic, crc, attributes, last_delta, _, max_ts, _, _, _, count) = unpack(mv, pos)
        size = batch_length + LOG_OVERHEAD
        if magic != MAGIC:
            raise CorruptRecordError(f"batch at position {pos}: magic {magic}, expected 2")
        if size < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"batch at position {pos}: batchLength {batch_length} is shorter than a header")
        if pos + size > total:
            raise CorruptRecordError(f"batch at position {pos}: {size} bytes declared, {total - pos} present")
        if crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != crc:
            raise CorruptRecordError(f"batch at position {pos}: CRC-32C mismatch")
        _check_counts(pos, attributes, last_delta, count, from_client)
        batches.append(BatchInfo(pos, size, last_delta, count, max_ts))
        record_count += count
        offset_count += last_delta + 1
        if max_ts > max_timestamp:
            max_timestamp = max_ts
        pos += size
    return BatchesInfo(len(batches), record_count, offset_count, max_timestamp, total, batches)


def _check_counts(pos: int, attributes: int, last_delta: int, count: int, from_client: bool) -> None:
    if attributes & COMPRESSION_CODEC_MASK > CompressionType.ZSTD:
        raise CorruptRecordError(f"batch at position {pos}: unknown compression codec {attributes & 7}")
    if last_delta < 0:
        raise CorruptRecordError(f"batch at position {pos}: negative lastOffsetDelta {last_delta}")
    if from_client:
        if count <= 0:
            raise CorruptRecordError(f"batch at position {pos}: recordsCount {count}, a produced batch needs >= 1")
        if count != last_delta + 1:
            raise CorruptRecordError(
                f"batch at position {pos}: recordsCount {count} != lastOffsetDelta + 1 = {last_delta + 1}"
            )
        if attributes & CONTROL_FLAG_MASK:
            raise CorruptRecordError(f"batch at position {pos}: clients may not write control batches")
    elif not 0 <= count <= last_delta + 1:
        raise CorruptRecordError(f"batch at position {pos}: recordsCount {count} outside 0..{last_delta + 1}")


def assign_offsets(
    buf: bytearray | memoryview, base_offset: int, leader_epoch: int, info: BatchesInfo | None = None
) -> int:
    """Rewrites each batch's baseOffset (consecutive from `base_offset`) and partitionLeaderEpoch in place.

    Both fields precede the CRC'd range, so each batch stays valid. The buffer
    must already have passed `validate_batches` (pass its result as `info` to
    skip re-walking the framing). Returns the next offset after the last batch.
    """
    offset = base_offset
    if info is not None:
        for position, _, last_delta, _, _ in info.batches:
            _BASE_OFFSET.pack_into(buf, position, offset)
            _LEADER_EPOCH.pack_into(buf, position + 12, leader_epoch)
            offset += last_delta + 1
        return offset
    total = len(buf)
    pos = 0
    while pos < total:
        _, batch_length = _BASE_OFFSET_AND_LENGTH.unpack_from(buf, pos)
        (last_delta,) = _LAST_OFFSET_DELTA.unpack_from(buf, pos + 23)
        _BASE_OFFSET.pack_into(buf, pos, offset)
        _LEADER_EPOCH.pack_into(buf, pos + 12, leader_epoch)
        offset += last_delta + 1
        pos += batch_length + LOG_OVERHEAD
    return offset


# --------------------------------------------------------------------------- consumer side


def iter_batch_slices(
    buf: bytes | bytearray | memoryview,
    *,
    start_offset: int | None = None,
    until_offset: int | None = None,
    check_crc: bool = True,
) -> Iterator[BatchSlice]:
    """Every whole batch of `buf`: the one walk over a buffer of v2 batches (Kafka's `DefaultRecordBatch`).

    The consumer (`iter_batches`), the broker's log cleaner and the Spark
    reader all find their batches here; each then decodes the records its own
    way. A fetch response may end with a partial batch (the broker slices
    segment files by bytes), so a tail shorter than its declared size ends the
    walk quietly, as Kafka's consumer does; a bad magic or length raises.
    Batches whose last offset is below `start_offset` are stepped over
    unchecked (a fetch returns whole batches, which may begin before the fetch
    position); the walk stops at the first batch starting at `until_offset` or
    later. The CRC-32C is checked on every batch returned when `check_crc`.
    """
    mv = memoryview(buf)
    total = len(mv)
    pos = 0
    while total - pos >= BATCH_HEADER_SIZE:
        header = _new(BatchHeader, _HEADER.unpack_from(mv, pos))  # tuple.__new__: _make's cost, per batch, shows
        size = header.batch_length + LOG_OVERHEAD
        if header.magic != MAGIC:
            raise CorruptRecordError(f"batch at position {pos}: magic {header.magic}, expected 2")
        if size < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"batch at position {pos}: batchLength {header.batch_length} too short")
        if pos + size > total or (until_offset is not None and header.base_offset >= until_offset):
            return
        if start_offset is None or header.base_offset + header.last_offset_delta >= start_offset:
            if check_crc and crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != header.crc:
                raise CorruptRecordError(f"batch at position {pos}: CRC-32C mismatch")
            yield _new(BatchSlice, (header, pos, size))
        pos += size


def iter_batches(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, uncompressed record bytes) for each whole batch (`iter_batch_slices`); a truncated last batch is
    ignored, a compressed batch that would inflate beyond `decompressed_bytes_max` raises."""
    mv = memoryview(buf)
    for header, pos, size in iter_batch_slices(mv, check_crc=check_crc):
        body = mv[pos + BATCH_HEADER_SIZE : pos + size]
        yield header, decompress_body(header, body, pos, decompressed_bytes_max)


def decompress_body(
    header: BatchHeader,
    body: bytes | memoryview,
    pos: int = 0,
    decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
) -> bytes:
    """A batch's records section inflated; errors name the batch's position."""
    codec = header.attributes & COMPRESSION_CODEC_MASK
    try:
        return codecs.decompress(codec, body, decompressed_bytes_max=decompressed_bytes_max)
    except RecordsError as exc:
        raise type(exc)(f"batch at position {pos}: {exc}") from None


def iter_records(
    buf: bytes | bytearray | memoryview, start_offset: int = 0, *, check_crc: bool = True
) -> Iterator[Record]:
    """Decodes data records with offset >= `start_offset` (`decode_rows`); control batches are skipped.

    With LogAppendTime every record carries the batch's maxTimestamp (Kafka's rule).
    """
    mv = memoryview(buf)
    for _, pos, size in iter_batch_slices(mv, check_crc=check_crc):  # a batch at a time: a segment may be large
        rows, _ = decode_rows("records", 0, mv[pos : pos + size], start_offset, tuple, check_crc=False)
        for _, _, offset, timestamp_ms, _, key, value, headers in rows:
            yield Record(offset, timestamp_ms, key, value, headers)


def decode_rows(
    topic: str,
    partition: int,
    buf: bytes | bytearray | memoryview,
    start_offset: int,
    row: type[tuple],
    *,
    check_crc: bool = True,
) -> tuple[list[Any], int]:
    """The one Python decoder of records: (rows of the records with offset >= start_offset, the offset after the
    last whole batch seen, at least start_offset).

    Each row is a `row` built from (topic, partition, offset, timestamp, timestamp type, key, value, headers),
    ConsumerRecord's fields, so that the Consumer gets its records without a second object each. Control batches
    are skipped while the position still moves past them. The one- and two-byte varints (every varint of a
    100-byte record is one of those) are decoded inline. Keys and values are raw bytes.
    """
    out: list[Any] = []
    append = out.append
    next_offset = start_offset
    dv = decode_varint
    cls = row
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


def decode_headers(data: bytes, p: int, count: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers = []
    for _ in range(count):
        klen, p = decode_varint(data, p)
        if klen < 0:
            raise CorruptRecordError("null header key")
        hkey = data[p : p + klen].decode("utf-8", errors="replace")
        p += klen
        vlen, p = decode_varint(data, p)
        if vlen < 0:
            hvalue = None
        else:
            hvalue = data[p : p + vlen]
            p += vlen
        headers.append((hkey, hvalue))
    return tuple(headers), p


def decode_columns(buf: bytes | bytearray | memoryview, start_offset: int = 0) -> dict[str, list]:
    """Column-wise decode for the Spark reader: {"offsets", "timestamps", "keys", "values"}.

    One function on purpose, so it can later be replaced by a vectorised or
    native version without touching callers. Headers are not returned.
    """
    rows, _ = decode_rows("records", 0, buf, start_offset, tuple)
    return {
        "offsets": [row[2] for row in rows],
        "timestamps": [row[3] for row in rows],
        "keys": [row[5] for row in rows],
        "values": [row[6] for row in rows],
    }
