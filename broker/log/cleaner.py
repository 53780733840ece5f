"""Log compaction: keep the latest record per key (Kafka's `LogCleaner`, docs/research/kafka.md §4).

The cleanable part of a log is every sealed segment below the first
uncleanable offset: the active segment's base, the high watermark, and
segments younger than `min.compaction.lag.ms`. The part from the cleaner
checkpoint (first dirty offset) to there is dirty. When dirty bytes / cleanable
bytes reach `min.cleanable.dirty.ratio`:

1. an offset map key -> latest offset is built from the dirty records;
2. every cleanable segment is rewritten keeping a record unless its key has a
   later offset in the map, or it is a tombstone (null value) whose batch is
   older than `delete.retention.ms`; offsets are kept (gaps are fine). A batch
   keeps its base offset, lastOffsetDelta (so its last offset, as Kafka does for
   producer state), timestamps and producer fields; its kept records are
   copied byte for byte (their offset deltas stay valid) and compressed again
   with the batch's own codec; only the count, length and CRC are new. A batch
   that keeps nothing goes;
3. the cleaned file replaces the segment (atomic rename over the `.log`, then
   indexes rebuilt from it), and the checkpoint moves to the end of the
   cleaned range.

`CleanTask.compute` reads only sealed segments and writes new files, so it
runs on a worker thread while appends and fetches go on; `CleanTask.swap`
puts the results in place and must run on the log's own thread.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crc32c import crc32c

from broker.log.log import PartitionLog
from broker.log.segment import LogSegment, filename_prefix
from client.kafka import compression
from client.kafka.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    CompressionType,
    decode_varint,
    decompress_body,
    iter_batch_slices,
)

CLEANED_SUFFIX = ".cleaned"
_COUNT = struct.Struct(">i")
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_COMPRESSION_MASK = 0x07


@dataclass
class CleanStats:
    segments: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    seconds: float = 0.0


@dataclass
class CleanTask:
    """One cleaning of one log: what to clean, computed off-thread, swapped in on the log's thread."""

    log: PartitionLog
    segments: list[LogSegment]
    first_dirty: int
    end_offset: int  # first uncleanable offset: the checkpoint after this clean
    delete_horizon_ms: int
    cleaned: list[tuple[LogSegment, Path]] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)

    def compute(self) -> None:
        started = time.monotonic()
        offsets = build_offset_map(self.segments, self.first_dirty)
        for segment in self.segments:
            data = segment.pread(0, segment.size)
            kept = filter_segment(data, offsets, self.delete_horizon_ms, self.stats)
            target = segment.directory / (filename_prefix(segment.base_offset) + ".log" + CLEANED_SUFFIX)
            with open(target, "wb") as out:
                out.write(kept)
                out.flush()
                os.fsync(out.fileno())
            self.cleaned.append((segment, target))
            self.stats.segments += 1
            self.stats.bytes_read += len(data)
            self.stats.bytes_written += len(kept)
        self.stats.seconds = time.monotonic() - started

    def swap(self, logger: Any) -> bool:
        """Replaces each segment by its cleaned copy; False (nothing changed) if the log moved on meanwhile."""
        log = self.log
        if any(s not in log.segments for s, _ in self.cleaned):  # truncated or deleted while we cleaned
            self.discard()
            return False
        for old, path in self.cleaned:
            old.close()
            for index in (old.index_path, old.time_index_path):
                index.unlink(missing_ok=True)
            os.replace(path, old.log_path)
            new = LogSegment(
                old.directory,
                old.base_offset,
                index_interval_bytes=old.index_interval_bytes,
                created_ms=old.created_ms,
            )
            new.recover(max(log.config.max_message_bytes, log.config.segment_bytes))
            new.seal()
            log.replace_segment(old, new)
        logger.info(
            "log_cleaned",
            dir=str(log.dir),
            first_dirty=self.first_dirty,
            cleaned_to=self.end_offset,
            segments=self.stats.segments,
            mb_read=round(self.stats.bytes_read / 1e6, 3),
            mb_written=round(self.stats.bytes_written / 1e6, 3),
            records_removed=self.stats.records_removed,
            tombstones_removed=self.stats.tombstones_removed,
            seconds=round(self.stats.seconds, 3),
        )
        return True

    def discard(self) -> None:
        for _, path in self.cleaned:
            path.unlink(missing_ok=True)
        self.cleaned = []


def plan_clean(log: PartitionLog, first_dirty: int, high_watermark: int, now_ms: int) -> CleanTask | None:
    """A CleanTask when the log's dirty ratio reaches min.cleanable.dirty.ratio; None otherwise."""
    config = log.config
    segments = log.segments[:-1]  # never the active segment
    first_uncleanable = min(high_watermark, log.segments[-1].base_offset)
    lag = config.min_compaction_lag_ms
    cleanable = []
    for segment in segments:
        if segment.next_offset > first_uncleanable:
            break
        if lag > 0 and segment.largest_timestamp > now_ms - lag:
            break
        cleanable.append(segment)
    if not cleanable:
        return None
    end = cleanable[-1].next_offset
    first_dirty = max(first_dirty, log.log_start_offset)
    if first_dirty >= end:
        return None
    total = sum(s.size for s in cleanable)
    dirty = sum(s.size for s in cleanable if s.next_offset > first_dirty)
    if total == 0 or dirty / total < config.min_cleanable_dirty_ratio:
        return None
    return CleanTask(log, cleanable, first_dirty, end, now_ms - config.delete_retention_ms)


# ---------------------------------------------------------------- record-level work (worker thread)


def _raw_batches(data: bytes) -> list[tuple[Any, bytes]]:
    """(header, the batch's bytes) of each whole batch of a segment (CRC checked when it was appended)."""
    return [(header, data[pos : pos + size]) for header, pos, size in iter_batch_slices(data, check_crc=False)]


def _records_body(header: Any, data: bytes) -> bytes:
    """The records section of a batch, decompressed (every codec; CorruptRecordError past the size limit)."""
    body = data[BATCH_HEADER_SIZE:]
    if header.attributes & _COMPRESSION_MASK == CompressionType.NONE:
        return body
    return decompress_body(header, body)


def _record_spans(body: bytes, count: int) -> list[tuple[int, int, int, bytes | None, bool]]:
    """(start, end, offset delta, key, is tombstone) of each record in a batch body.

    The hot loop of the cleaner: one- and two-byte varints (nearly every length and delta) are decoded
    inline, the rest by decode_varint.
    """
    spans = []
    append = spans.append
    varint = decode_varint
    p = 0
    for _ in range(count):
        b = body[p]
        if b < 0x80:
            length, q = (b >> 1) ^ -(b & 1), p + 1
        elif body[p + 1] < 0x80:
            z = (b & 0x7F) | (body[p + 1] << 7)
            length, q = (z >> 1) ^ -(z & 1), p + 2
        else:
            length, q = varint(body, p)
        end = q + length
        q += 1  # attributes
        if body[q] < 0x80:  # timestamp delta
            q += 1
        else:
            _, q = varint(body, q)
        b = body[q]
        if b < 0x80:
            offset_delta, q = (b >> 1) ^ -(b & 1), q + 1
        else:
            offset_delta, q = varint(body, q)
        b = body[q]
        if b < 0x80:
            key_length, q = (b >> 1) ^ -(b & 1), q + 1
        else:
            key_length, q = varint(body, q)
        if key_length < 0:
            key = None
        else:
            key = body[q : q + key_length]
            q += key_length
        # A null value is the zig-zag varint -1: the single byte 0x01.
        append((p, end, offset_delta, key, body[q] == 1))
        p = end
    return spans


def build_offset_map(segments: list[LogSegment], first_dirty: int) -> dict[bytes, int]:
    """key -> latest offset among the dirty records (offset >= first_dirty)."""
    latest: dict[bytes, int] = {}
    for segment in segments:
        if segment.next_offset <= first_dirty:
            continue
        for header, batch in _raw_batches(segment.pread(0, segment.size)):
            if header.base_offset + header.last_offset_delta < first_dirty:
                continue
            body = _records_body(header, batch)
            for _, _, delta, key, _ in _record_spans(body, header.records_count):
                offset = header.base_offset + delta
                if key is not None and offset >= first_dirty:
                    latest[key] = offset
    return latest


def filter_segment(data: bytes, latest: dict[bytes, int], delete_horizon_ms: int, stats: CleanStats) -> bytes:
    """The segment's bytes with superseded records and expired tombstones removed."""
    out = []
    for header, batch in _raw_batches(data):
        body = _records_body(header, batch)
        spans = _record_spans(body, header.records_count)
        expired = header.max_timestamp < delete_horizon_ms
        keep = []
        for start, end, delta, key, tombstone in spans:
            superseded = key is not None and latest.get(key, -1) > header.base_offset + delta
            if superseded or (tombstone and expired):
                stats.records_removed += 1
                stats.tombstones_removed += tombstone and not superseded
            else:
                keep.append((start, end))
        stats.records_kept += len(keep)
        if len(keep) == len(spans):
            out.append(batch)
        elif keep:
            out.append(_rebuild_batch(header, batch, b"".join(body[s:e] for s, e in keep), len(keep)))
    return b"".join(out)


def _rebuild_batch(header: Any, batch: bytes, records: bytes, count: int) -> bytes:
    """The batch with only `records` (already encoded), in the batch's own codec; header fields kept."""
    records = compression.compress(header.attributes & _COMPRESSION_MASK, records)
    new = bytearray(batch[:BATCH_HEADER_SIZE]) + records
    _LENGTH.pack_into(new, 8, len(new) - LOG_OVERHEAD)
    _COUNT.pack_into(new, 57, count)
    _CRC.pack_into(new, 17, crc32c(bytes(new[ATTRIBUTES_OFFSET:])))
    return bytes(new)
