"""The log of one partition: a directory `<topic>-<partition>` of segments (docs/research/kafka.md §4).

`PartitionLog` owns the segments (sorted by base offset, the last one
active), the log start and end offsets, the recovery point (everything below
it is fsynced) and the leader-epoch cache.

* Produce path (`append`): `validate_batches` (framing, magic, CRC-32C, counts:
  header-only work), the topic's rules (client.kafka.batch_rewrite: recompression
  when `compression.type` names another codec than a batch's, the
  LogAppendTime header stamp, `message.timestamp.difference.max.ms` on header
  timestamps; nothing unless the topic asks), `assign_offsets` (rewrites
  baseOffset and partitionLeaderEpoch in place, outside the CRC), roll if
  needed, one write. A compressed batch is not inflated to be validated:
  Kafka 2.8's LogValidator iterates a v2 batch's records (inflating it) to
  check offsets and timestamps, but the CRC-32C already proves the bytes are
  the producer's, offsets are assigned from the header, and readers reject a
  malformed records section with CORRUPT_MESSAGE; inflating every batch would
  put per-record work on the hot path that Kafka pays for in the JVM. What
  the frame tells without inflating is checked (broker/log/compressed_batches.py).
* Fetch path (`read_slice` / `read`): bisect of segment base offsets, bisect of
  the segment's sparse index, a short header scan; the answer is a byte range
  of a segment file made of whole batches, starting with the one holding the
  requested offset.
* Idempotent producers (`producer_state`): the leader checks each batch
  carrying a producer id against the partition's producer state before
  writing (a duplicate of one of a producer's last 5 batches is not written
  again: its original offsets are returned); every append records what it
  wrote. The state is built lazily from the segments' batch headers on first
  use and dropped by a truncation (rebuilt on next use).
* Start-up (`__init__`): segments are loaded in base-offset order; missing or
  insane indexes are rebuilt; after an unclean shutdown every segment that may
  hold offsets at or past the recovery point is re-validated and a torn or
  corrupt tail is cut (logged as `log_truncated`), and every later segment is
  deleted, as in K28 `Log.recoverLog` l.874-919.

Threading: one writer thread calls every mutating method; `read_slice` /
`read` may run concurrently (segments are replaced copy-on-write, never
mutated in place).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, TopicPartition
from broker.log.compressed_batches import check_compressed_batches
from broker.log.dir_failure import fsync_directory_or_fail
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.errors import (
    CheckpointFileError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    invariant,
)
from broker.log.producer_state import ProducerStateManager
from broker.log.segment import (
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    IndexProblem,
    LogSegment,
    filename_prefix,
)
from client.kafka.batch_rewrite import TOPIC_CODECS, needs_recompression, recompress, set_log_append_time
from client.kafka.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_CODEC_MASK,
    BatchesInfo,
    assign_offsets,
    read_batch_header,
    validate_batches,
)

GIB = 1024**3
LONG_MAX = 2**63 - 1  # Java's Long.MAX_VALUE, Kafka's "no limit"
DAY_MS = 24 * 3600 * 1000
# Files a crash may leave behind in a partition directory; removed at load.
_LEFTOVER_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-log settings, named after Kafka's topic configs (K28 LogConfig / KafkaConfig l.105-133)."""

    segment_bytes: int = GIB  # segment.bytes
    segment_ms: int = 7 * DAY_MS  # segment.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    max_message_bytes: int = 1048588  # max.message.bytes: the largest batch
    flush_interval_messages: int | None = None  # flush.messages; None: never by count (Kafka's Long.MAX)
    flush_interval_ms: int | None = None  # flush.ms; None: never by time
    retention_ms: int = 7 * DAY_MS  # retention.ms; -1: no time limit
    retention_bytes: int = -1  # retention.bytes; -1: no size limit
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy: delete, compact or both
    delete_retention_ms: int = DAY_MS  # delete.retention.ms: how long tombstones survive compaction
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    compression_type: str = "producer"  # compression.type: producer keeps each batch's codec
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime or LogAppendTime
    # message.timestamp.difference.max.ms: how far a CreateTime batch's timestamps may be from the append time
    message_timestamp_difference_max_ms: int = LONG_MAX

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def __post_init__(self) -> None:
        if not BATCH_HEADER_SIZE <= self.segment_bytes <= INT32_MAX:
            raise ValueError(f"segment.bytes {self.segment_bytes} outside {BATCH_HEADER_SIZE}..{INT32_MAX}")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms {self.segment_ms} must be >= 1")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes {self.index_interval_bytes} must be >= 0")
        if self.max_message_bytes < BATCH_HEADER_SIZE:
            raise ValueError(f"max.message.bytes {self.max_message_bytes} must be >= {BATCH_HEADER_SIZE}")
        if self.flush_interval_messages is not None and self.flush_interval_messages < 1:
            raise ValueError(f"flush.messages {self.flush_interval_messages} must be >= 1")
        if self.flush_interval_ms is not None and self.flush_interval_ms < 0:
            raise ValueError(f"flush.ms {self.flush_interval_ms} must be >= 0")
        if self.compression_type not in TOPIC_CODECS:
            raise ValueError(f"compression.type {self.compression_type!r} is not one of {', '.join(TOPIC_CODECS)}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(
                f"message.timestamp.type {self.message_timestamp_type!r} is not CreateTime or LogAppendTime"
            )
        if self.message_timestamp_difference_max_ms < 0:
            raise ValueError(
                f"message.timestamp.difference.max.ms {self.message_timestamp_difference_max_ms} must be >= 0"
            )


class LeaderAppend(NamedTuple):
    """What a leader's append answers a producer with (Kafka's LogAppendInfo, the fields Produce returns)."""

    first_offset: int
    last_offset: int
    # -1 (NO_TIMESTAMP) unless the topic uses LogAppendTime; for a duplicate, the original batch's max timestamp
    # whatever the timestamp type (K28 Log.append: `appendInfo.logAppendTime = duplicate.timestamp`).
    log_append_time_ms: int


class FetchSlice(NamedTuple):
    """A byte range of one segment's `.log` holding whole batches: pread or sendfile it."""

    segment: LogSegment
    position: int
    length: int

    def read(self) -> bytes:
        return self.segment.pread(self.position, self.length)


def parse_topic_partition(directory: Path) -> TopicPartition:
    """`<topic>-<partition>` -> TopicPartition (topics may contain '-', the partition is after the last one)."""
    topic, sep, partition = directory.name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"log directory name {directory.name!r} is not <topic>-<partition>")
    return TopicPartition(topic, int(partition))


def check_timestamp_difference(
    buf: bytearray, info: BatchesInfo, now_ms: int, difference_max_ms: int, tp: TopicPartition
) -> None:
    """K28 LogValidator.validateTimestamp, on headers only: each batch's first and max timestamps.

    Kafka checks every record; the header holds the first record's timestamp
    and the largest one, which bound what a producer stamping increasing
    times writes, without decoding records on the produce path.
    """
    for batch in info.batches:
        base_ms = read_batch_header(buf, batch.position).base_timestamp
        for timestamp_ms in (base_ms, batch.max_timestamp):
            if abs(timestamp_ms - now_ms) > difference_max_ms:
                raise InvalidTimestampError(
                    f"{tp.topic}-{tp.partition}: timestamp {timestamp_ms} of the batch at position {batch.position} "
                    f"is out of range: more than message.timestamp.difference.max.ms={difference_max_ms} "
                    f"from the append time {now_ms}"
                )


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    """Storage of one partition (Kafka's `Log`)."""

    def __init__(
        self,
        directory: Path | str,
        config: LogConfig,
        logger: Any,
        *,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        log_start_offset: int = 0,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.dir = Path(directory)
        self.topic_partition = parse_topic_partition(self.dir)
        self.config = config
        self._log = logger
        self._clock_ms = clock_ms
        self.dir.mkdir(parents=True, exist_ok=True)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._recovery_point = recovery_point
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        self._closed = False
        # Built from the batch headers on first use (`producer_state`); None after a truncation.
        self._producers: ProducerStateManager | None = None
        started = time.monotonic()
        try:
            self._epochs = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT, logger)
        except CheckpointFileError as exc:
            # Rebuilt from the batches' partitionLeaderEpoch by recovering every segment.
            self._log.warning("leader_epoch_checkpoint_corrupt", dir=str(self.dir), error=str(exc))
            (self.dir / LEADER_EPOCH_CHECKPOINT).unlink()
            self._epochs = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT, logger)
            recovery_point, had_clean_shutdown = 0, False
        # The log reached at least the latest checkpointed epoch's start offset (a leader assigns its epoch at
        # its log end offset): recovery cutting below it lost data the broker had (broker/damaged_logs.py).
        # Read before recovery re-assigns epochs.
        latest = self._epochs.entries[-1:]
        self.epoch_checkpoint_end_offset = latest[0].start_offset if latest else 0
        self.recovery_cut_bytes = 0  # what recovery cut from a segment's tail (`log_truncated`)
        recovered = self._load_segments(recovery_point, had_clean_shutdown, log_start_offset)
        self._leo = self._segments[-1].next_offset
        self._log_start_offset = min(max(log_start_offset, self._segments[0].base_offset), self._leo)
        self._epochs.truncate_from_end(self._leo)
        if recovery_point > self._leo:
            self._log.warning(
                "recovery_point_beyond_log_end",
                dir=str(self.dir),
                recovery_point=recovery_point,
                log_end_offset=self._leo,
            )
        for segment in recovered:
            segment.flush()  # what recovery validated is now durable: the recovery point may move to the end
        self._recovery_point = self._leo
        self._log.info(
            "log_loaded",
            dir=str(self.dir),
            segments=len(self._segments),
            log_start_offset=self._log_start_offset,
            log_end_offset=self._leo,
            recovered_segments=len(recovered),
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )

    # ------------------------------------------------------------------ loading

    def _load_segments(self, recovery_point: int, clean: bool, log_start_offset: int) -> list[LogSegment]:
        """Opens every segment; returns the ones that were recovered (rebuilt or re-validated)."""
        bases = self._scan_directory()
        recovered: list[LogSegment] = []
        for i, base in enumerate(bases):
            segment = LogSegment(
                self.dir, base, index_interval_bytes=self.config.index_interval_bytes, created_ms=self._clock_ms()
            )
            is_last = i == len(bases) - 1
            needs_recovery = not clean and (is_last or bases[i + 1] > recovery_point)
            if not needs_recovery:
                try:
                    segment.load(verify_tail_crc=is_last)
                except IndexProblem as exc:
                    self._log.warning(
                        "log_index_rebuilt", dir=str(self.dir), segment=segment.log_path.name, problem=str(exc)
                    )
                    needs_recovery = True
            if needs_recovery:
                recovered.append(segment)
                if self._recover_segment(segment):
                    self._segments.append(segment)
                    self._delete_segments_after(bases[i + 1 :])
                    break
            self._segments.append(segment)
        if not self._segments:
            self._segments.append(
                LogSegment(
                    self.dir,
                    log_start_offset,
                    created_ms=self._clock_ms(),
                    index_interval_bytes=self.config.index_interval_bytes,
                )
            )
        self._bases = [s.base_offset for s in self._segments]
        return recovered

    def _scan_directory(self) -> list[int]:
        """Base offsets of the `.log` files; removes leftovers and index files without a `.log`."""
        bases: set[int] = set()
        orphans: list[Path] = []
        for path in self.dir.iterdir():
            name = path.name
            if name.endswith(_LEFTOVER_SUFFIXES):
                path.unlink()
                continue
            stem, dot, suffix = name.partition(".")
            if not (len(stem) == 20 and stem.isdigit()):
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.add(int(stem))
            elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                orphans.append(path)
        for path in orphans:
            if int(path.name[:20]) not in bases:
                self._log.warning("log_orphan_index_deleted", dir=str(self.dir), file=path.name)
                path.unlink()
        return sorted(bases)

    def _recover_segment(self, segment: LogSegment) -> bool:
        """Re-validates `segment`; True if its tail was cut (later segments must then go)."""

        def on_batch(epoch: int, base_offset: int) -> None:
            if epoch > self._epochs.latest_epoch:
                self._epochs.assign(epoch, base_offset)

        size_before = segment.size
        # Bound a batch by the segment size, not max.message.bytes: lowering that config later must
        # not make recovery cut batches accepted earlier (a garbage length is caught by framing and CRC).
        bound = max(self.config.max_message_bytes, self.config.segment_bytes)
        result = segment.recover(bound, on_batch)
        if not result.truncated_bytes:
            return False
        self.recovery_cut_bytes += result.truncated_bytes
        self._log.warning(
            "log_truncated",
            dir=str(self.dir),
            segment=segment.log_path.name,
            reason=result.reason,
            cut_from_position=result.valid_bytes,
            cut_to_position=size_before,
            bytes_cut=result.truncated_bytes,
            log_end_offset=segment.next_offset,
        )
        return True

    def _delete_segments_after(self, bases: list[int]) -> None:
        for base in bases:
            prefix = filename_prefix(base)
            self._log.warning("log_segment_deleted_after_truncation", dir=str(self.dir), segment=prefix + LOG_SUFFIX)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (self.dir / (prefix + suffix)).unlink(missing_ok=True)
        if bases:
            fsync_directory_or_fail(self.dir)

    # ------------------------------------------------------------------ properties

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record gets."""
        return self._leo

    @property
    def recovery_point(self) -> int:
        """Every offset below it is fsynced (recovery-point-offset-checkpoint)."""
        return self._recovery_point

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epochs

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producers of this partition, rebuilt from every segment's batch headers if needed."""
        if self._producers is None:
            started = time.monotonic()
            self._producers = ProducerStateManager.rebuild(
                header for segment in self._segments for header in segment.batch_headers()
            )
            self._log.info(
                "producer_state_rebuilt",
                dir=str(self.dir),
                producers=len(self._producers),
                log_end_offset=self._leo,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )
        return self._producers

    # ------------------------------------------------------------------ append

    def append(self, batches: bytearray, leader_epoch: int, *, append_time_ms: int | None = None) -> tuple[int, int]:
        """Appends a produce request's batches as leader; returns (first offset, last offset) (see `append_leader`)."""
        appended = self.append_leader(batches, leader_epoch, append_time_ms=append_time_ms)
        return appended.first_offset, appended.last_offset

    def append_leader(
        self, batches: bytearray, leader_epoch: int, *, append_time_ms: int | None = None
    ) -> LeaderAppend:
        """Appends a produce request's batches as leader; returns the offsets and log append time to answer.

        The topic's `compression.type` and `message.timestamp.type` are applied
        first (client.kafka.batch_rewrite); `append_time_ms` (default: the log's
        clock) is the LogAppendTime the caller reports in its produce response.

        Raises client.kafka.records.CorruptRecordError, RecordTooLargeError,
        RecordBatchTooLargeError, and for batches with a producer id the
        producer-state errors (out of order sequence, old producer epoch,
        unknown producer id). A request whose batches were all written before
        (producer id retries) is not written again: the original (first, last)
        offsets and the original batch's max timestamp are returned. `batches` is rewritten in place (offsets, leader
        epoch, LogAppendTime), unless the topic's codec made a recompressed copy.
        An empty buffer appends nothing and returns (LEO, LEO - 1).
        """
        invariant(not self._closed, f"append to closed log {self.dir}")
        info = validate_batches(batches)
        first = self._leo
        if info.batch_count == 0:
            return LeaderAppend(first, first - 1, -1)
        if self.config.log_append_time and append_time_ms is None:
            append_time_ms = self._clock_ms()
        self._check_sizes(info.byte_size, max(b.length for b in info.batches))
        checked = info.byte_size
        batches, info = self._apply_topic_rules(batches, info, append_time_ms)
        if info.byte_size != checked:  # recompressed: Kafka checks the sizes again (K28 Log.append)
            self._check_sizes(info.byte_size, max(b.length for b in info.batches))
        # Header-only, per batch: the producer id decides whether sequences are checked.
        headers = [read_batch_header(batches, b.position) for b in info.batches]
        if any(h.attributes & COMPRESSION_CODEC_MASK for h in headers):
            check_compressed_batches(batches, info, headers)
        idempotent = any(h.producer_id >= 0 for h in headers)
        if idempotent:
            duplicate = self.producer_state.check_append(self.topic_partition, headers)
            if duplicate is not None:
                self._log.info(
                    "producer_batch_duplicate", dir=str(self.dir), first_offset=duplicate[0], last_offset=duplicate[1]
                )
                return LeaderAppend(duplicate.first_offset, duplicate.last_offset, duplicate.max_timestamp)
        next_offset = assign_offsets(batches, first, leader_epoch, info)
        segment = self._maybe_roll(info.byte_size, info.max_timestamp, next_offset - 1)
        segment.append(first, next_offset - 1, info.max_timestamp, batches)
        self._epochs.assign(leader_epoch, first)
        if idempotent:
            offset = first
            producers = self.producer_state
            for header in headers:
                producers.update(header._replace(base_offset=offset))
                offset += header.last_offset_delta + 1
        self._after_append(next_offset, info.record_count)
        stamped_ms = append_time_ms if self.config.log_append_time and append_time_ms is not None else -1
        return LeaderAppend(first, next_offset - 1, stamped_ms)

    def _apply_topic_rules(
        self, batches: bytearray, info: BatchesInfo, append_time_ms: int | None
    ) -> tuple[bytearray, BatchesInfo]:
        """compression.type, message.timestamp.type and its difference limit (K28 LogValidator)."""
        config = self.config
        codec = TOPIC_CODECS[config.compression_type]
        if needs_recompression(info, batches, codec):
            assert codec is not None
            batches, info = recompress(batches, info, codec)
        if config.log_append_time:
            now_ms = self._clock_ms() if append_time_ms is None else append_time_ms
            return batches, set_log_append_time(batches, info, now_ms)
        if config.message_timestamp_difference_max_ms < LONG_MAX:
            check_timestamp_difference(
                batches, info, self._clock_ms(), config.message_timestamp_difference_max_ms, self.topic_partition
            )
        return batches, info

    def append_as_follower(self, batches: bytes | bytearray) -> tuple[int, int]:
        """Appends batches fetched from the leader, offsets and epochs as they are; returns (first, last)."""
        invariant(not self._closed, f"append to closed log {self.dir}")
        info = validate_batches(batches, from_client=False)
        if info.batch_count == 0:
            return self._leo, self._leo - 1
        self._check_sizes(info.byte_size, max(b.length for b in info.batches))
        headers = [read_batch_header(batches, b.position) for b in info.batches]
        expected = self._leo
        for header in headers:
            if header.base_offset < expected:
                raise ValueError(
                    f"{self.topic_partition}: follower append at offset {header.base_offset} < expected {expected}"
                )
            expected = header.base_offset + header.last_offset_delta + 1
        first, last = headers[0].base_offset, headers[-1].base_offset + headers[-1].last_offset_delta
        segment = self._maybe_roll(info.byte_size, info.max_timestamp, last)
        segment.append(first, last, info.max_timestamp, batches)
        for header in headers:
            if header.partition_leader_epoch > self._epochs.latest_epoch:
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
        if self._producers is not None:  # else built from the segments, these batches included, on first use
            self._producers.update_all(headers)
        self._after_append(last + 1, info.record_count)
        return first, last

    def _check_sizes(self, byte_size: int, largest_batch: int) -> None:
        if largest_batch > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"{self.topic_partition}: a batch of {largest_batch} bytes exceeds max.message.bytes "
                f"{self.config.max_message_bytes}"
            )
        if byte_size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{self.topic_partition}: {byte_size} bytes in one request exceed segment.bytes "
                f"{self.config.segment_bytes}"
            )

    def _after_append(self, next_offset: int, records: int) -> None:
        self._leo = next_offset
        self._unflushed_messages += records
        limit = self.config.flush_interval_messages
        if limit is not None and self._unflushed_messages >= limit:
            self.flush()

    def _maybe_roll(self, size: int, max_timestamp: int, max_offset: int) -> LogSegment:
        active = self._segments[-1]
        config = self.config
        if active.should_roll(
            size, self._clock_ms(), config.segment_bytes, config.segment_ms, max_timestamp, max_offset
        ):
            return self.roll()
        return active

    def roll(self) -> LogSegment:
        """Starts a new active segment at the LEO (no-op if the active segment is empty)."""
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.seal()
        base = self._leo
        existing = self.dir / (filename_prefix(base) + LOG_SUFFIX)
        invariant(not existing.exists() or existing.stat().st_size == 0, f"rolling onto non-empty {existing}")
        segment = LogSegment(
            self.dir, base, index_interval_bytes=self.config.index_interval_bytes, created_ms=self._clock_ms()
        )
        self._segments = [*self._segments, segment]
        self._bases = [*self._bases, base]
        self._log.info("log_segment_rolled", dir=str(self.dir), base_offset=base, previous_size=active.size)
        return segment

    # ------------------------------------------------------------------ read

    def read_slice(
        self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None
    ) -> FetchSlice | None:
        """Whole batches from the one holding `offset`, within one segment; None at the LEO (or `max_offset`).

        `max_offset` (exclusive) caps the slice for a consumer at the high
        watermark, which always falls on a batch boundary (replicas copy whole
        batches). Raises OffsetOutOfRangeError below the log start offset or
        beyond the LEO.
        """
        segments, bases, leo, start = self._segments, self._bases, self._leo, self._log_start_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRangeError(str(self.topic_partition), offset, start, leo)
        if max_offset is not None and offset >= max_offset:
            return None
        i = bisect_right(bases, offset) - 1
        while 0 <= i < len(segments):
            segment = segments[i]
            found = segment.read_range(offset, max_bytes, min_one_batch)
            if found is not None:
                position, length = found
                if max_offset is not None and max_offset < segment.next_offset:
                    cap = segment.find_position(max_offset)
                    if cap is not None and cap.position < position + length:
                        length = cap.position - position
                        if length <= 0:
                            return None
                return FetchSlice(segment, position, length)
            i += 1  # `offset` is the next offset of segment i: the batch is at the start of a later one
        return None

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> bytes:
        """The bytes of `read_slice` (b"" at the LEO)."""
        found = self.read_slice(offset, max_bytes, min_one_batch)
        return b"" if found is None else found.read()

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first record with timestamp >= `timestamp_ms`, or None.

        Segments are skipped by their largest timestamp (Kafka `Log.fetchOffsetByTimestamp`).
        """
        for segment in self._segments:
            if segment.largest_timestamp >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------------------ truncate, flush, close

    def truncate_to(self, offset: int) -> None:
        """Removes every offset >= `offset` (a follower diverged; KIP-101). The batch holding it goes whole."""
        if offset >= self._leo:
            return
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        old_leo = self._leo
        doomed = [s for s in self._segments if s.base_offset > offset]
        keep = self._segments[: len(self._segments) - len(doomed)]
        self._segments, self._bases = keep, [s.base_offset for s in keep]
        for segment in doomed:
            segment.delete()
        keep[-1].truncate_to(offset)
        self._producers = None  # the cut batches may have moved sequences: rebuild on next use
        self._leo = keep[-1].next_offset
        self._log_start_offset = min(self._log_start_offset, self._leo)
        self._recovery_point = min(self._recovery_point, self._leo)
        self._epochs.truncate_from_end(self._leo)
        if doomed:
            fsync_directory_or_fail(self.dir)
        self._log.info(
            "log_truncated_to",
            dir=str(self.dir),
            target_offset=offset,
            old_log_end_offset=old_leo,
            log_end_offset=self._leo,
            segments_deleted=len(doomed),
        )

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Deletes every segment and starts empty at `offset` (a follower whose fetch offset is out of range)."""
        old = self._segments
        for segment in old:
            segment.delete()
        segment = LogSegment(
            self.dir, offset, index_interval_bytes=self.config.index_interval_bytes, created_ms=self._clock_ms()
        )
        self._segments, self._bases = [segment], [offset]
        self._leo = self._log_start_offset = self._recovery_point = offset
        self._epochs.clear()
        self._producers = ProducerStateManager()
        fsync_directory_or_fail(self.dir)
        self._log.info("log_truncated_fully", dir=str(self.dir), log_start_offset=offset, segments_deleted=len(old))

    def delete_oldest_segments(self, count: int, reason: str) -> None:
        """Deletes the `count` oldest segments (retention); the log start offset moves to the next one.

        Never the active segment. Kafka renames to `.deleted` and removes later;
        here the files go at once (reads run on the same thread, between calls).
        """
        if count <= 0:
            return
        invariant(count < len(self._segments), f"{self.dir}: retention may not delete the active segment")
        doomed, keep = self._segments[:count], self._segments[count:]
        self._segments, self._bases = keep, [s.base_offset for s in keep]
        self._log_start_offset = max(self._log_start_offset, keep[0].base_offset)
        self._epochs.truncate_from_start(self._log_start_offset)
        for segment in doomed:
            segment.delete()
        fsync_directory_or_fail(self.dir)
        self._log.info(
            "log_segments_deleted",
            dir=str(self.dir),
            reason=reason,
            segments=[filename_prefix(s.base_offset) for s in doomed],
            log_start_offset=self._log_start_offset,
        )

    def maybe_increment_log_start_offset(self, new_start: int, reason: str) -> bool:
        """Moves the log start offset up to `new_start` (DeleteRecords on the leader, the leader's start on a
        follower); False when it is already there. Kafka 2.8 `Log.maybeIncrementLogStartOffset`.

        Reads below it answer OFFSET_OUT_OF_RANGE at once; whole segments entirely below it are deleted now
        (Kafka's `deleteLogStartOffsetBreachedSegments`: a segment goes once the next one's base offset is at
        or below the start), never the active one. Callers check the bound (the high watermark) first.
        """
        invariant(new_start <= self._leo, f"{self.dir}: log start offset {new_start} beyond the LEO {self._leo}")
        if new_start <= self._log_start_offset:
            return False
        old_start = self._log_start_offset
        self._log_start_offset = new_start
        self._epochs.truncate_from_start(new_start)
        self._log.info(
            "log_start_offset_incremented",
            dir=str(self.dir),
            reason=reason,
            old_log_start_offset=old_start,
            log_start_offset=new_start,
        )
        breached = 0
        while breached + 1 < len(self._segments) and self._segments[breached + 1].base_offset <= new_start:
            breached += 1
        self.delete_oldest_segments(breached, reason)
        return True

    def replace_segment(self, old: LogSegment, new: LogSegment) -> bool:
        """Puts a cleaned copy in place of `old` (same base offset); False if `old` is no longer in the log."""
        for i, segment in enumerate(self._segments):
            if segment is old:
                invariant(i < len(self._segments) - 1, f"{self.dir}: the active segment is never cleaned")
                self._segments = [*self._segments[:i], new, *self._segments[i + 1 :]]
                return True
        return False

    def flush(self) -> None:
        """fsyncs every segment holding offsets at or past the recovery point; the recovery point becomes the LEO."""
        leo = self._leo
        self._epochs.flush()  # every batch below the new recovery point must find its epoch on disk
        first = max(0, bisect_right(self._bases, self._recovery_point) - 1)
        for segment in self._segments[first:]:
            segment.flush()
        if len(self._segments) - first > 1:
            fsync_directory_or_fail(self.dir)  # new segment files must survive too
        self._recovery_point = leo
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock_ms()

    def maybe_flush(self) -> bool:
        """Flushes if `flush.ms` has passed since the last flush with data pending; for the broker's scheduler."""
        interval = self.config.flush_interval_ms
        if interval is None or self._recovery_point == self._leo:
            return False
        if self._clock_ms() - self._last_flush_ms < interval:
            return False
        self.flush()
        return True

    def close(self) -> None:
        """Flushes and closes every file. The broker then writes its checkpoints and the clean-shutdown marker."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        for segment in self._segments:
            segment.close()

    def __repr__(self) -> str:
        return f"PartitionLog({self.dir.name}, start={self._log_start_offset}, leo={self._leo})"
