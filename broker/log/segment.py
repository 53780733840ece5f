"""One log segment: `<base>.log`, its sparse `.index` and its `.timeindex` (docs/research/kafka.md §4).

* `.log` holds Kafka v2 record batches exactly as they were appended. It is
  opened O_APPEND and kept open; reads are `os.pread`, so readers never move a
  file position that the writer depends on.
* `.index` holds 8-byte entries (relative offset int32, position int32,
  big-endian). An entry is added when more than `index_interval_bytes` were
  appended since the last one; like Kafka's `LogSegment.append` (K28
  l.~165-170) it pairs the **largest** offset of an append with the position
  where that append starts, so a lookup for offset `o` starts at the entry
  with the greatest offset <= `o` and scans batch headers forward from there.
* `.timeindex` holds 12-byte entries (timestamp int64, relative offset
  int32): the largest timestamp seen so far and the offset that carried it,
  added alongside an offset-index entry when the timestamp grew.

Both indexes are mirrored in memory (two lists each) and appended to their
files as entries are made. They are not checksummed: at load they are
sanity-checked, and a missing or insane index is rebuilt from the `.log` by
`recover` (Kafka OffsetIndex.scala doc: "in the event of a crash it is
rebuilt").

Durability contract: `append` only writes to the page cache; data is durable
once `flush` (fdatasync of the `.log`, then the indexes) returned. After a
crash, bytes past the last flush may be missing, torn or garbage;
`recover` keeps the longest prefix of valid batches and cuts the rest.

Threading: one writer (append, truncate_to, recover, flush, close); reads may
run concurrently with appends because they only pread below the size they
observed.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from broker.log.dir_failure import storage_error
from broker.log.errors import invariant
from client.kafka.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    CorruptRecordError,
    iter_records,
    read_batch_header,
    validate_batches,
)
from runtime import failpoints

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INDEX_ENTRY_BYTES = 8
TIME_INDEX_ENTRY_BYTES = 12
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
RECOVERY_READ_BYTES = 8 * 1024 * 1024  # recovery reads the .log in chunks of this size
HEADER_SCAN_READ_BYTES = 1024 * 1024  # a header-only scan (producer state rebuild) reads this much at a time

_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")


def filename_prefix(offset: int) -> str:
    """Kafka's `filenamePrefixFromOffset`: the offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


class BatchPosition(NamedTuple):
    """Where a batch lies in a segment's `.log`."""

    position: int
    base_offset: int
    last_offset: int
    size_bytes: int


class RecoveryResult(NamedTuple):
    """What `LogSegment.recover` kept and cut."""

    valid_bytes: int
    truncated_bytes: int
    reason: str | None  # why the tail was cut; None when nothing was cut
    batches: int


class IndexProblem(Exception):
    """An index file is missing or fails the sanity check; the segment needs `recover`."""


class LogSegment:
    """One segment of a partition log (Kafka's `LogSegment`)."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, created_ms: int) -> None:
        """Opens (creating if absent) the segment's three files; call `load` or `recover` next."""
        invariant(base_offset >= 0, f"segment base offset {base_offset} < 0")
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        prefix = filename_prefix(base_offset)
        self.log_path = self.directory / (prefix + LOG_SUFFIX)
        self.index_path = self.directory / (prefix + INDEX_SUFFIX)
        self.time_index_path = self.directory / (prefix + TIME_INDEX_SUFFIX)
        self._index_existed = self.index_path.exists()
        self._time_index_existed = self.time_index_path.exists()
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self._fd = os.open(self.log_path, flags, 0o644)
        self._index_fd = os.open(self.index_path, flags, 0o644)
        self._time_index_fd = os.open(self.time_index_path, flags, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._index_offsets: list[int] = []  # relative offsets, strictly increasing
        self._index_positions: list[int] = []  # positions, strictly increasing
        self._time_index_timestamps: list[int] = []
        self._time_index_offsets: list[int] = []  # relative offsets
        self._next_offset = base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._closed = False

    # ------------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        """Bytes in the `.log`."""
        return self._size

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (its base offset when empty)."""
        return self._next_offset

    @property
    def largest_timestamp(self) -> int:
        """The largest batch max timestamp in the segment, -1 if none (Kafka's `largestTimestamp`)."""
        return self._max_timestamp

    @property
    def index_entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) of each offset-index entry (for tools and tests)."""
        return [(self.base_offset + o, p) for o, p in zip(self._index_offsets, self._index_positions, strict=True)]

    @property
    def time_index_entries(self) -> list[tuple[int, int]]:
        """(timestamp, absolute offset) of each time-index entry."""
        return [
            (t, self.base_offset + o)
            for t, o in zip(self._time_index_timestamps, self._time_index_offsets, strict=True)
        ]

    # ------------------------------------------------------------------ load

    def load(self, verify_tail_crc: bool = False) -> None:
        """Loads and sanity-checks the indexes, then scans the tail after the last index entry.

        Raises IndexProblem when an index is missing (for a non-empty `.log`) or
        insane, or the tail's framing is broken: the caller then runs `recover`.
        `verify_tail_crc` also checks the CRC-32C of every batch after the last
        index entry (at most `index.interval.bytes` plus one append): the
        active segment's tail is where a disk that lost or garbled a last write
        shows it, also after a clean shutdown, which skips recovery.
        """
        if self._size > 0 and not (self._index_existed and self._time_index_existed):
            missing = [
                p.name
                for p, e in ((self.index_path, self._index_existed), (self.time_index_path, self._time_index_existed))
                if not e
            ]
            raise IndexProblem(f"missing {', '.join(missing)}")
        self._load_index()
        self._load_time_index()
        self._scan_tail()
        if verify_tail_crc:
            self._verify_tail_crc()
        self._check_index_entries()
        self._check_time_index()

    def _verify_tail_crc(self) -> None:
        position = self._index_positions[-1] if self._index_positions else 0
        if position >= self._size:
            return
        try:
            validate_batches(os.pread(self._fd, self._size - position, position), from_client=False)
        except CorruptRecordError as exc:
            raise IndexProblem(
                f"{self.log_path.name}: tail after position {position} fails validation: {exc}"
            ) from None

    def _load_index(self) -> None:
        data = _read_all(self._index_fd)
        if len(data) % INDEX_ENTRY_BYTES:
            raise IndexProblem(f"{self.index_path.name}: size {len(data)} is not a multiple of {INDEX_ENTRY_BYTES}")
        values = _int32_array(data)
        offsets, positions = values[0::2].tolist(), values[1::2].tolist()
        if not _strictly_increasing(offsets) or not _strictly_increasing(positions):
            raise IndexProblem(f"{self.index_path.name}: entries are not strictly increasing")
        if positions and (positions[0] < 0 or positions[-1] >= self._size or offsets[0] < 0):
            raise IndexProblem(f"{self.index_path.name}: entry outside the segment (log size {self._size})")
        self._index_offsets, self._index_positions = offsets, positions

    def _load_time_index(self) -> None:
        data = _read_all(self._time_index_fd)
        if len(data) % TIME_INDEX_ENTRY_BYTES:
            raise IndexProblem(
                f"{self.time_index_path.name}: size {len(data)} is not a multiple of {TIME_INDEX_ENTRY_BYTES}"
            )
        entries = list(_TIME_INDEX_ENTRY.iter_unpack(data))
        timestamps = [t for t, _ in entries]
        offsets = [o for _, o in entries]
        if not _non_decreasing(timestamps) or not _non_decreasing(offsets) or (offsets and offsets[0] < 0):
            raise IndexProblem(f"{self.time_index_path.name}: entries are not monotonic")
        self._time_index_timestamps, self._time_index_offsets = timestamps, offsets

    def _check_index_entries(self) -> None:
        """Spot-checks the first, middle and last offset-index entries against the batch headers they name."""
        count = len(self._index_offsets)
        for i in sorted({0, count // 2, count - 1} if count else set()):
            rel, position = self._index_offsets[i], self._index_positions[i]
            header = self._header_at(position)
            if header is None or header.magic != MAGIC:
                raise IndexProblem(f"{self.index_path.name}: entry {i} points at no batch (position {position})")
            first_rel = header.base_offset - self.base_offset
            previous_rel = self._index_offsets[i - 1] if i > 0 else -1
            if not previous_rel < first_rel <= rel or self.base_offset + rel >= self._next_offset:
                raise IndexProblem(
                    f"{self.index_path.name}: entry {i} (offset {self.base_offset + rel}, position {position})"
                    f" does not match the batch there (base offset {header.base_offset})"
                )

    def _check_time_index(self) -> None:
        if self._time_index_offsets and self.base_offset + self._time_index_offsets[-1] >= self._next_offset:
            raise IndexProblem(f"{self.time_index_path.name}: last entry is past the segment's last offset")
        if self._time_index_timestamps and self._time_index_timestamps[-1] > self._max_timestamp:
            self._max_timestamp = self._time_index_timestamps[-1]
            self._offset_of_max_timestamp = self.base_offset + self._time_index_offsets[-1]

    def _scan_tail(self) -> None:
        """Walks batch headers from the last index entry to the end: next offset, max timestamp, framing."""
        position = self._index_positions[-1] if self._index_positions else 0
        next_offset = self.base_offset
        max_ts, offset_of_max = NO_TIMESTAMP, self.base_offset
        if self._time_index_timestamps:
            max_ts = self._time_index_timestamps[-1]
            offset_of_max = self.base_offset + self._time_index_offsets[-1]
        since_index = 0
        while position < self._size:
            header = self._header_at(position)
            if header is None or header.magic != MAGIC or header.batch_length + LOG_OVERHEAD < BATCH_HEADER_SIZE:
                raise IndexProblem(f"{self.log_path.name}: no valid batch header at position {position}")
            size = header.batch_length + LOG_OVERHEAD
            if position + size > self._size:
                raise IndexProblem(f"{self.log_path.name}: batch at position {position} runs past the end")
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.base_offset + header.last_offset_delta
            next_offset = header.base_offset + header.last_offset_delta + 1
            since_index += size
            position += size
        # Bytes since the last entry include the indexed append itself, as Kafka counts them.
        self._next_offset = next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._bytes_since_last_index_entry = since_index

    # ------------------------------------------------------------------ recovery

    def recover(
        self,
        max_message_bytes: int,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> RecoveryResult:
        """Re-validates every batch (framing, magic, CRC-32C, offsets), rebuilds both indexes and cuts a bad tail.

        Kafka `LogSegment.recover` (K28 l.335-384). `on_batch(leader_epoch,
        base_offset)` is called for each valid batch so the caller can rebuild
        its leader-epoch cache. Returns how many bytes were kept and cut.
        """
        self._index_offsets, self._index_positions = [], []
        self._time_index_timestamps, self._time_index_offsets = [], []
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        position, next_offset, batches, reason = 0, self.base_offset, 0, None
        chunk, chunk_start = b"", 0
        while position < self._size:
            if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self._fd, RECOVERY_READ_BYTES, position), position
            if self._size - position < BATCH_HEADER_SIZE:
                reason = f"torn batch header: {self._size - position} bytes at position {position}"
                break
            header = read_batch_header(chunk, position - chunk_start)
            size = header.batch_length + LOG_OVERHEAD
            reason = self._header_problem(header, size, position, next_offset, max_message_bytes)
            if reason is not None:
                break
            if position + size > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self._fd, max(RECOVERY_READ_BYTES, size), position), position
            start = position - chunk_start
            try:
                validate_batches(memoryview(chunk)[start : start + size], from_client=False)
            except CorruptRecordError as exc:
                reason = f"corrupt batch at position {position}: {exc}"
                break
            last_offset = header.base_offset + header.last_offset_delta
            self._note_append(position, size, last_offset, header.max_timestamp, last_offset)
            if on_batch is not None:
                on_batch(header.partition_leader_epoch, header.base_offset)
            next_offset = last_offset + 1
            position += size
            batches += 1
        self._maybe_append_time_index(write=False)  # the final max timestamp, as `seal` records it
        truncated = self._size - position
        if truncated:
            os.ftruncate(self._fd, position)
            self._size = position
        self._next_offset = next_offset
        self._rewrite_indexes()
        return RecoveryResult(position, truncated, reason if truncated else None, batches)

    def _header_problem(
        self, header: BatchHeader, size: int, position: int, next_offset: int, max_message_bytes: int
    ) -> str | None:
        if header.magic != MAGIC:
            return f"bad magic {header.magic} at position {position}"
        if size < BATCH_HEADER_SIZE:
            return f"batchLength {header.batch_length} shorter than a header at position {position}"
        if size > max_message_bytes + LOG_OVERHEAD:
            return f"batch of {size} bytes at position {position} exceeds max.message.bytes {max_message_bytes}"
        if position + size > self._size:
            return f"torn batch at position {position}: {size} bytes declared, {self._size - position} present"
        if header.base_offset < next_offset:
            return f"batch at position {position} has base offset {header.base_offset} < expected {next_offset}"
        if header.base_offset + header.last_offset_delta - self.base_offset > INT32_MAX:
            return f"batch at position {position}: offset does not fit the segment's 32-bit relative offsets"
        return None

    # ------------------------------------------------------------------ append

    def append(
        self, base_offset: int, last_offset: int, max_timestamp: int, batch_bytes: bytes | bytearray | memoryview
    ) -> None:
        """Appends whole, already offset-assigned batches (offsets `base_offset..last_offset`)."""
        invariant(not self._closed, f"append to closed segment {self.log_path}")
        invariant(base_offset >= self._next_offset, f"append at {base_offset} below next offset {self._next_offset}")
        invariant(
            last_offset - self.base_offset <= INT32_MAX, f"offset {last_offset} overflows segment {self.base_offset}"
        )
        invariant(self._size + len(batch_bytes) <= INT32_MAX, f"segment {self.log_path} would exceed 2 GiB")
        position = self._size
        try:
            if failpoints.ON:
                failpoints.check("write")
            _write_all(self._fd, batch_bytes)
        except OSError as exc:
            raise storage_error(self.directory, f"append to {self.log_path.name}", exc) from exc
        if self._size == 0 and self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = max_timestamp
        self._note_append(position, len(batch_bytes), last_offset, max_timestamp, last_offset, write=True)
        self._size = position + len(batch_bytes)
        self._next_offset = last_offset + 1

    def _note_append(
        self, position: int, size: int, last_offset: int, max_timestamp: int, offset_of_max: int, write: bool = False
    ) -> None:
        """Index bookkeeping of one append (or of one recovered batch)."""
        if max_timestamp > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, offset_of_max
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self._index_offsets.append(last_offset - self.base_offset)
            self._index_positions.append(position)
            if write:
                _write_all(self._index_fd, _INDEX_ENTRY.pack(last_offset - self.base_offset, position))
            self._maybe_append_time_index(write)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def _maybe_append_time_index(self, write: bool) -> None:
        if self._max_timestamp == NO_TIMESTAMP:
            return
        if self._time_index_timestamps and self._max_timestamp <= self._time_index_timestamps[-1]:
            return
        rel = self._offset_of_max_timestamp - self.base_offset
        if self._time_index_offsets and rel < self._time_index_offsets[-1]:
            return
        self._time_index_timestamps.append(self._max_timestamp)
        self._time_index_offsets.append(rel)
        if write:
            _write_all(self._time_index_fd, _TIME_INDEX_ENTRY.pack(self._max_timestamp, rel))

    def seal(self) -> None:
        """The segment stops being active: record its final max timestamp (Kafka `onBecomeInactiveSegment`)."""
        self._maybe_append_time_index(write=True)

    def _rewrite_indexes(self) -> None:
        index = b"".join(
            _INDEX_ENTRY.pack(o, p) for o, p in zip(self._index_offsets, self._index_positions, strict=True)
        )
        times = b"".join(
            _TIME_INDEX_ENTRY.pack(t, o)
            for t, o in zip(self._time_index_timestamps, self._time_index_offsets, strict=True)
        )
        for fd, data in ((self._index_fd, index), (self._time_index_fd, times)):
            os.ftruncate(fd, 0)
            _write_all(fd, data)

    # ------------------------------------------------------------------ roll

    def should_roll(
        self,
        batch_size: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
        max_timestamp_ms: int = NO_TIMESTAMP,
        max_offset: int | None = None,
    ) -> bool:
        """Kafka `LogSegment.shouldRoll` (K28): full, too old, or offsets no longer fit 32 bits relative to the base."""
        if self._size == 0:
            return False
        if self._size > segment_bytes - batch_size:
            return True
        if max_offset is not None and max_offset - self.base_offset > INT32_MAX:
            return True
        return self.time_waited_for_roll_ms(now_ms, max_timestamp_ms) > segment_ms

    def time_waited_for_roll_ms(self, now_ms: int, max_timestamp_ms: int) -> int:
        """Age for `segment.ms`: by message timestamps when both exist, else by wall clock since creation."""
        first = self._first_batch_timestamp()
        if first >= 0 and max_timestamp_ms >= 0:
            return max_timestamp_ms - first
        return now_ms - self.created_ms

    def _first_batch_timestamp(self) -> int:
        if self._rolling_based_timestamp is None:
            header = self._header_at(0) if self._size else None
            self._rolling_based_timestamp = header.max_timestamp if header is not None else NO_TIMESTAMP
        return self._rolling_based_timestamp

    # ------------------------------------------------------------------ lookup and read

    def find_position(self, offset: int) -> BatchPosition | None:
        """The first batch whose last offset is >= `offset` (the batch holding it); None past the segment's end.

        Bisect of the sparse index for the greatest entry <= `offset`, then a
        forward scan of batch headers (at most about `index_interval_bytes`).
        """
        if offset >= self._next_offset:
            return None
        i = bisect_right(self._index_offsets, offset - self.base_offset) - 1
        return self._scan_for(offset, self._index_positions[i] if i >= 0 else 0)

    def _scan_for(self, offset: int, position: int) -> BatchPosition | None:
        size_limit = self._size
        while position < size_limit:
            header = self._header_at(position)
            invariant(header is not None, f"{self.log_path}: no batch header at position {position}")
            assert header is not None
            size = header.batch_length + LOG_OVERHEAD
            last = header.base_offset + header.last_offset_delta
            if last >= offset:
                return BatchPosition(position, header.base_offset, last, size)
            position += size
        return None

    def find_offset_by_timestamp(self, timestamp_ms: int, min_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `min_offset` (the log start offset) with timestamp
        >= `timestamp_ms`; None if no such record here.

        Kafka `LogSegment.findOffsetByTimestamp(timestamp, startingOffset)`: the time index names an offset
        up to which every timestamp is < the target, the offset index gives a
        position at or before it (or before `min_offset`, whichever is later), batch headers are scanned for
        the first batch whose max timestamp reaches the target, and only that batch's records are decoded.
        """
        if self._max_timestamp < timestamp_ms:
            return None
        i = bisect_left(self._time_index_timestamps, timestamp_ms) - 1
        from_offset = max(self.base_offset + self._time_index_offsets[i] if i >= 0 else 0, min_offset)
        found = self.find_position(from_offset) if from_offset > self.base_offset else None
        position, size_limit = (found.position if found is not None else 0), self._size
        while position < size_limit:
            header = self._header_at(position)
            assert header is not None
            size = header.batch_length + LOG_OVERHEAD
            if header.max_timestamp >= timestamp_ms:
                for record in iter_records(self.pread(position, size)):
                    if record.timestamp_ms >= timestamp_ms and record.offset >= min_offset:
                        return record.offset, record.timestamp_ms
            position += size
        return None

    def read_range(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> tuple[int, int] | None:
        """(position, length) of whole batches from the one holding `offset`, at most `max_bytes`.

        With `min_one_batch` the first batch is returned whole even if larger
        than `max_bytes` (KIP-74), so a consumer always makes progress. None
        when `offset` is past this segment. The end is found by bisecting the
        index by position and scanning headers from there, so the cost does
        not grow with `max_bytes`.
        """
        found = self.find_position(offset)
        if found is None:
            return None
        start, size_limit = found.position, self._size
        limit = start + max_bytes
        if limit >= size_limit:
            return start, size_limit - start
        j = bisect_right(self._index_positions, limit) - 1
        position = max(start, self._index_positions[j]) if j >= 0 else start
        while position < size_limit:
            header = self._header_at(position)
            assert header is not None
            end = position + header.batch_length + LOG_OVERHEAD
            if end > limit:
                break
            position = end
        length = position - start
        if length == 0 and min_one_batch:
            length = found.size_bytes
        return start, length

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> bytes:
        """The bytes of `read_range` (b"" past the end of the segment)."""
        found = self.read_range(offset, max_bytes, min_one_batch)
        if found is None:
            return b""
        return self.pread(*found)

    def pread(self, position: int, length: int) -> bytes:
        data = os.pread(self._fd, length, position)
        invariant(len(data) == length, f"{self.log_path}: short read {len(data)} < {length} at {position}")
        return data

    def fileno(self) -> int:
        """The `.log` descriptor, for `os.sendfile` of a `read_range`."""
        return self._fd

    def batch_headers(self) -> Iterator[BatchHeader]:
        """Every batch header in file order, read in chunks (header-only: records are never decoded)."""
        position, size = 0, self._size
        chunk, chunk_start = b"", 0
        while size - position >= BATCH_HEADER_SIZE:
            if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self._fd, HEADER_SCAN_READ_BYTES, position), position
                if len(chunk) < BATCH_HEADER_SIZE:
                    return
            header = read_batch_header(chunk, position - chunk_start)
            batch_size = header.batch_length + LOG_OVERHEAD
            if batch_size < BATCH_HEADER_SIZE:
                return  # cannot happen in a loaded segment; never loop forever on it
            yield header
            position += batch_size

    def _header_at(self, position: int) -> BatchHeader | None:
        data = os.pread(self._fd, BATCH_HEADER_SIZE, position)
        if len(data) < BATCH_HEADER_SIZE:
            return None
        return read_batch_header(data, 0)

    # ------------------------------------------------------------------ truncate, flush, close

    def truncate_to(self, offset: int) -> int:
        """Removes every batch whose last offset is >= `offset` (the batch holding it goes whole); returns bytes cut."""
        found = self.find_position(max(offset, self.base_offset))
        if found is None:
            return 0
        cut = found.position
        removed = self._size - cut
        os.ftruncate(self._fd, cut)
        self._size = cut
        # Entries name an append's largest offset: keep those wholly below the cut batch.
        keep = bisect_right(self._index_offsets, found.base_offset - 1 - self.base_offset)
        del self._index_offsets[keep:], self._index_positions[keep:]
        keep_t = bisect_right(self._time_index_offsets, found.base_offset - 1 - self.base_offset)
        del self._time_index_timestamps[keep_t:], self._time_index_offsets[keep_t:]
        os.ftruncate(self._index_fd, keep * INDEX_ENTRY_BYTES)
        os.ftruncate(self._time_index_fd, keep_t * TIME_INDEX_ENTRY_BYTES)
        self._scan_tail()
        if self._size == 0:
            self._rolling_based_timestamp = None
        return removed

    def flush(self) -> None:
        """Makes everything appended so far durable (data first, then the rebuildable indexes)."""
        try:
            if failpoints.ON:
                failpoints.check("fsync")
            os.fdatasync(self._fd)
            os.fdatasync(self._index_fd)
            os.fdatasync(self._time_index_fd)
        except OSError as exc:
            raise storage_error(self.directory, f"fsync of {self.log_path.name}", exc) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in (self._fd, self._index_fd, self._time_index_fd):
            os.close(fd)

    def delete(self) -> None:
        """Closes and removes the segment's files."""
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self._next_offset}, size={self._size})"


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _int32_array(data: bytes) -> array[int]:
    values = array("i")
    invariant(values.itemsize == 4, "array('i') is not 4 bytes on this platform")
    values.frombytes(data)
    if struct.pack("=i", 1) != struct.pack(">i", 1):
        values.byteswap()
    return values


def _strictly_increasing(values: list[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


def _non_decreasing(values: list[int]) -> bool:
    return all(a <= b for a, b in pairwise(values))
