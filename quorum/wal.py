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
at the first record that is short, zero-length or fails its crc: the torn
tail of a write that was never acknowledged, or the unused preallocated space.

Threading: one writer (the log store's); nothing here takes a lock.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from client.fsync import fsync_directory, start_writeback

SEGMENT_PREALLOCATE_BYTES = 4 << 20
_RECORD_HEAD = struct.Struct(">II")  # payload length, crc32
_SUFFIX = ".wal"


def _seq_of(path: Path) -> int | None:
    stem = path.name[: -len(_SUFFIX)]
    return int(stem) if path.name.endswith(_SUFFIX) and stem.isdigit() else None


def _read_records(path: Path, seq: int) -> list[bytes]:
    data = path.read_bytes()
    records: list[bytes] = []
    offset = 0
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
    return records


class WriteAheadLog:
    """The segments in `directory`; `recovered` holds the records earlier runs appended after their last reset."""

    def __init__(self, directory: str | Path, preallocate_bytes: int = SEGMENT_PREALLOCATE_BYTES) -> None:
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._preallocate_bytes = preallocate_bytes
        segments = sorted((seq, p) for p in self._dir.iterdir() if (seq := _seq_of(p)) is not None)
        self.recovered: list[bytes] = [r for seq, p in segments for r in _read_records(p, seq)]
        self._seq = segments[-1][0] if segments else 0
        self._fd = -1  # no segment is open for appending until the first `reset`
        self._offset = 0

    @property
    def size_bytes(self) -> int:
        """Bytes appended to the current segment."""
        return self._offset

    def append(self, payload: bytes, sync: bool, meanwhile: Callable[[], None] | None = None) -> None:
        """Append one record; with `sync`, return only once it (and every earlier one) is on stable storage.

        `meanwhile`: work to run while the record is on its way to the disk (with `sync`: after the
        write has been handed to the device, before the fdatasync waits for it)."""
        if self._fd < 0:
            raise OSError("the write-ahead log has no open segment (reset it first)")
        record = _RECORD_HEAD.pack(len(payload), zlib.crc32(payload, self._seq & 0xFFFFFFFF)) + payload
        written = os.pwrite(self._fd, record, self._offset)
        if written != len(record):
            raise OSError(f"short write to the write-ahead log: {written} of {len(record)} bytes")
        self._offset += written
        if sync and meanwhile is not None:
            start_writeback(self._fd, self._offset - written, written)
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            if sync:
                os.fdatasync(self._fd)

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
            os.fsync(fd)
            fsync_directory(self._dir)
        except BaseException:
            os.close(fd)
            raise
        self.close()
        self._fd, self._offset = fd, 0
        self.recovered = []
        old = [p for p in self._dir.iterdir() if (seq := _seq_of(p)) is not None and seq < self._seq]
        for p in old:
            p.unlink(missing_ok=True)
        if old:
            fsync_directory(self._dir)
