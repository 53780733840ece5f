"""A write-ahead log: durable, append-only records in preallocated segment files.

Why it exists: making one small save durable in LMDB (copy-on-write pages
scattered over the file, then fdatasync) took 250-370 µs on this 2-core
machine alone and 500-740 µs with three nodes syncing at once; appending the
same bytes to a preallocated file and fdatasync-ing it took 80-130 µs and
180-260 µs (measured alternating, same runs). ZooKeeper's transaction log is
preallocated for the same reason. So the Raft log store makes a save durable
here and copies the saves into LMDB now and then (a checkpoint), after which
the segment is dropped: see quorum.lmdb_log_store.

Format. A segment `<seq>.wal` (seq zero-padded, increasing) holds records
`>II` (payload length, crc32) + payload. The crc is seeded with the segment's
seq, so bytes that are not a record of this segment never pass. Reading stops
at the first record that is short, zero-length or fails its crc. When only
zeros follow, that is the unused preallocated space; otherwise the record was
damaged (or torn by a power loss), and `damage` says where and holds what was
cut, so that the log store can name the entries it lost.

Threading: one writer (the log store's); nothing here takes a lock.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from quorum.latency_metrics import WAL_FSYNC
from runtime import failpoints
from runtime.fsync import fsync_directory, start_writeback

SEGMENT_PREALLOCATE_BYTES = 4 << 20
# How much crc work start-up may spend looking for the records after a damaged one (to name what was cut):
# about 30 ms of zlib.crc32 on a slow core.
RESYNC_CRC_BYTES_MAX = 64 << 20
_RECORD_HEAD = struct.Struct(">II")  # payload length, crc32
# (bytes, offset) -> the length of the payload that starts there, by its own framing, or None.
PayloadMeasure = Callable[[bytes, int], "int | None"]
_SUFFIX = ".wal"


def _seq_of(path: Path) -> int | None:
    stem = path.name[: -len(_SUFFIX)]
    return int(stem) if path.name.endswith(_SUFFIX) and stem.isdigit() else None


@dataclass(frozen=True, slots=True)
class WalDamage:
    """Where reading a segment stopped before the end of its written bytes: damage, or a torn write.

    What was cut, for the log store to name the entries it held: `damaged`, the damaged record's payload
    as far as it can be delimited (its length field may be damaged too; its bytes are not verified), and
    `after`, the records after it that still pass their crc. Never replayed: a log is a prefix, and what
    follows a lost save may depend on it."""

    segment: str  # the segment file's name
    offset_bytes: int  # where the first bad record starts in it
    reason: str  # "crc_mismatch", "record_cut_short" or "zero_length_header"
    cut_bytes: int  # written bytes from the damage on, later segments included
    damaged: bytes
    after: tuple[bytes, ...]


def _written_end(data: bytes) -> int:
    """The end of the bytes ever written: the preallocated space after them is zeros."""
    return len(data.rstrip(b"\0"))


def _read_records(data: bytes, seq: int, offset: int = 0) -> tuple[list[bytes], int]:
    """The records from `offset` up to the first bad one, and where that one starts."""
    records: list[bytes] = []
    head = _RECORD_HEAD.size
    while offset + head <= len(data):
        length, crc = _RECORD_HEAD.unpack_from(data, offset)
        end = offset + head + length
        if length == 0 or end > len(data):
            break
        payload = data[offset + head : end]
        if zlib.crc32(payload, seq & 0xFFFFFFFF) != crc:
            break
        records.append(payload)
        offset = end
    return records, offset


def _damage_reason(data: bytes, offset: int) -> str:
    if offset + _RECORD_HEAD.size > len(data):
        return "record_cut_short"
    length, _ = _RECORD_HEAD.unpack_from(data, offset)
    if length == 0:
        return "zero_length_header"
    return "record_cut_short" if offset + _RECORD_HEAD.size + length > len(data) else "crc_mismatch"


def _records_after_damage(
    data: bytes, seq: int, offset: int, written_end: int, measure: PayloadMeasure | None
) -> tuple[bytes, list[bytes]]:
    """The damaged record's payload as far as it can be delimited, then the valid records after it.

    The damaged record ends where its length field says, when that is plausible, else where its payload's
    own framing says (`measure`); otherwise the next offset whose record passes its crc is searched for,
    within RESYNC_CRC_BYTES_MAX bytes of crc work."""
    head = _RECORD_HEAD.size
    length = _RECORD_HEAD.unpack_from(data, offset)[0] if offset + head <= len(data) else 0
    if not (0 < length and offset + head + length <= written_end) and measure is not None:
        length = measure(data, offset + head) or 0
    if 0 < length and offset + head + length <= written_end:
        damaged = data[offset + head : offset + head + length]
        start = offset + head + length
    else:
        damaged = data[offset + head : written_end]
        start = offset + 1
    budget = RESYNC_CRC_BYTES_MAX
    for candidate in range(start, max(start, written_end - head)):
        length, crc = _RECORD_HEAD.unpack_from(data, candidate)
        end = candidate + head + length
        if length == 0 or end > len(data):
            continue
        budget -= length
        if budget < 0:
            break
        if zlib.crc32(data[candidate + head : end], seq & 0xFFFFFFFF) == crc:
            return damaged, _read_records(data, seq, candidate)[0]
    return damaged, []


def _read_segments(
    segments: list[tuple[int, Path]], measure: PayloadMeasure | None
) -> tuple[list[bytes], WalDamage | None]:
    """Every record up to the first damage, across the segments in order, and the damage.

    A segment that ends cleanly (zeros after its last record) is followed by the next; after damage
    nothing more is recovered (the later segments' records count as cut)."""
    recovered: list[bytes] = []
    damage: WalDamage | None = None
    for seq, path in segments:
        data = path.read_bytes()
        written_end = _written_end(data)
        if damage is not None:
            records, _ = _read_records(data, seq)
            damage = replace(damage, cut_bytes=damage.cut_bytes + written_end, after=damage.after + tuple(records))
            continue
        records, stop = _read_records(data, seq)
        recovered += records
        if stop < written_end:
            damaged, after = _records_after_damage(data, seq, stop, written_end, measure)
            damage = WalDamage(
                segment=path.name,
                offset_bytes=stop,
                reason=_damage_reason(data, stop),
                cut_bytes=written_end - stop,
                damaged=damaged,
                after=tuple(after),
            )
    return recovered, damage


class WriteAheadLog:
    """The segments in `directory`; `recovered` holds the records earlier runs appended after their last reset,
    up to the first damaged one; `damage` says where that one was (None when every segment ends cleanly).
    `measure`: how long a payload starting at an offset is by its own framing (None: cannot tell), which
    delimits a damaged record whose length field is gone."""

    def __init__(
        self,
        directory: str | Path,
        preallocate_bytes: int = SEGMENT_PREALLOCATE_BYTES,
        measure: PayloadMeasure | None = None,
    ) -> None:
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._preallocate_bytes = preallocate_bytes
        segments = sorted((seq, p) for p in self._dir.iterdir() if (seq := _seq_of(p)) is not None)
        self.recovered: list[bytes]
        self.recovered, self.damage = _read_segments(segments, measure)
        self._seq = segments[-1][0] if segments else 0
        self._fd = -1  # no segment is open for appending until the first `reset`
        self._offset = 0

    @property
    def size_bytes(self) -> int:
        """Bytes appended to the current segment."""
        return self._offset

    def append(self, payload: bytes, sync: bool) -> None:
        """Append one record; with `sync`, return only once it (and every earlier one) is on stable storage."""
        self._write(payload)
        if sync:
            self.wait_durable()

    def append_started(self, payload: bytes) -> None:
        """Append one record and hand it to the device without waiting for it: the caller's work overlaps
        the disk's, and `wait_durable` then waits (a shorter fdatasync, the bytes being on their way)."""
        start = self._offset
        written = self._write(payload)
        start_writeback(self._fd, start, written)

    def wait_durable(self) -> None:
        """Return once every record appended so far is on stable storage. An OSError here leaves the records
        in an unknown state: the caller must not acknowledge them, nor retry (runtime.failpoints)."""
        if failpoints.ON:
            failpoints.check("fsync")
        started_ns = time.perf_counter_ns()
        os.fdatasync(self._fd)
        WAL_FSYNC.observe(time.perf_counter_ns() - started_ns)

    def _write(self, payload: bytes) -> int:
        if self._fd < 0:
            raise OSError("the write-ahead log has no open segment (reset it first)")
        record = _RECORD_HEAD.pack(len(payload), zlib.crc32(payload, self._seq & 0xFFFFFFFF)) + payload
        if failpoints.ON:
            failpoints.check("write")
        written = os.pwrite(self._fd, record, self._offset)
        if written != len(record):
            raise OSError(f"short write to the write-ahead log: {written} of {len(record)} bytes")
        self._offset += written
        return written

    def reset(self) -> None:
        """Start an empty segment and delete the older ones: call once everything appended (and
        everything recovered) is stored elsewhere. Appending needs a first reset."""
        self._open_next_segment()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _open_next_segment(self) -> None:
        """A new, durable, preallocated segment; only then do the older ones go (a crash between replays them)."""
        self._seq += 1
        path = self._dir / f"{self._seq:020d}{_SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.posix_fallocate(fd, 0, self._preallocate_bytes)
            if failpoints.ON:
                failpoints.check("fsync")
            os.fsync(fd)
            fsync_directory(self._dir)
        except BaseException:
            os.close(fd)
            raise
        self.close()
        self._fd, self._offset = fd, 0
        self.recovered = []
        self.damage = None
        old = [p for p in self._dir.iterdir() if (seq := _seq_of(p)) is not None and seq < self._seq]
        for p in old:
            p.unlink(missing_ok=True)
        if old:
            fsync_directory(self._dir)
