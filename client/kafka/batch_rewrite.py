"""What the leader may change in produced v2 batches before writing them (Kafka 2.8 `LogValidator`).

Two rewrites, each done only when a topic asks for it:

* `recompress`: a topic whose `compression.type` names a codec (not
  `producer`) stores every batch in that codec. Kafka's
  `buildRecordsAndAssignOffsets` rebuilds such a batch record by record; here
  the records section is inflated and deflated again unchanged (the offset and
  timestamp deltas, keys, values and headers stay byte-identical), so only the
  codec bits, the batch length and the CRC change. This is the one place the
  produce path touches records, as in Kafka.
* `set_log_append_time`: with `message.timestamp.type=LogAppendTime` the batch
  header gets the timestamp-type bit and maxTimestamp = the append time and a
  new CRC; records keep their own timestamps and readers report maxTimestamp
  for every record (Kafka's `DefaultRecordBatch.setMaxTimestamp`, used by
  `LogValidator` for in-place v2 batches).

Both run after `validate_batches` and before `assign_offsets`.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from client.kafka import compression as codecs
from client.kafka.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchesInfo,
    decompress_body,
    read_batch_header,
    validate_batches,
)

_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_OFFSET = 35
_CRC = struct.Struct(">I")
_BATCH_LENGTH = struct.Struct(">i")

# Topic compression.type values -> codec id; `producer` (None) keeps each batch's own codec.
TOPIC_CODECS: dict[str, int | None] = {
    "producer": None,
    "uncompressed": codecs.NONE,
    "gzip": codecs.GZIP,
    "snappy": codecs.SNAPPY,
    "lz4": codecs.LZ4,
    "zstd": codecs.ZSTD,
}


def needs_recompression(info: BatchesInfo, buf: bytes | bytearray | memoryview, codec: int | None) -> bool:
    """Whether any batch is stored in another codec than `codec` (None: the producer's, always kept)."""
    if codec is None:
        return False
    return any(buf[b.position + ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK != codec for b in info.batches)


def recompress(buf: bytes | bytearray | memoryview, info: BatchesInfo, codec: int) -> tuple[bytearray, BatchesInfo]:
    """The batches with every records section in `codec`, and their new summary."""
    out = bytearray()
    for batch in info.batches:
        raw = memoryview(buf)[batch.position : batch.position + batch.length]
        header = read_batch_header(raw)
        if header.compression == codec:
            out += raw
            continue
        records = codecs.compress(codec, decompress_body(header, raw[BATCH_HEADER_SIZE:], batch.position))
        start = len(out)
        out += raw[:BATCH_HEADER_SIZE]
        out += records
        _BATCH_LENGTH.pack_into(out, start + 8, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records))
        _ATTRIBUTES.pack_into(out, start + ATTRIBUTES_OFFSET, header.attributes & ~COMPRESSION_CODEC_MASK | codec)
        _CRC.pack_into(out, start + CRC_OFFSET, crc32c(memoryview(out)[start + ATTRIBUTES_OFFSET :]))
    return out, validate_batches(out)


def set_log_append_time(buf: bytearray, info: BatchesInfo, append_time_ms: int) -> BatchesInfo:
    """Marks every batch LogAppendTime with maxTimestamp `append_time_ms`, in place; the summary to use after."""
    view = memoryview(buf)
    for batch in info.batches:
        pos = batch.position
        (attributes,) = _ATTRIBUTES.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
        _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
        _MAX_TIMESTAMP.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, append_time_ms)
        _CRC.pack_into(buf, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET : pos + batch.length]))
    batches = [b._replace(max_timestamp=append_time_ms) for b in info.batches]
    return info._replace(max_timestamp=append_time_ms, batches=batches)
