"""Torn last writes, made while the process is stopped: the files as a crash in the middle of a write leaves them.

A save is made durable by a write and then an fsync; a crash between the two (or a power loss during
the write) can leave only part of the last record on disk, or bytes that never formed a record. Both
servers write the record whole before they fsync it, and acknowledge (answer a client, vote, tell the
leader an entry is stored, answer a produce) only after the fsync returned, so a torn record is one
that nobody was told about -- except here, where the tear is made after a SIGKILL and may hit a record
that was already synced and acknowledged: a stricter case, which the quorum survives by taking the cut
entries back from the majority (quorum.raft.recovery) and the broker by fetching them from the leader.

Both helpers use only the standard library: the non-root tests and the fault campaign share them.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

WAL_RECORD_HEAD = struct.Struct(">II")  # quorum.wal: payload length, crc32
KAFKA_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (the bytes after this field)
GARBAGE_BYTES = 37  # not a whole record head plus payload, and not zeros: a write that never formed a record


@dataclass(frozen=True)
class Tear:
    """What was done to which file: `cut` zeroed a record from its middle on, `garbage` wrote bytes after it."""

    path: Path
    mode: str  # "cut" or "garbage"
    offset_bytes: int  # where the damage starts
    record_start_bytes: int  # where the last whole record started (-1: the file held none)


def _wal_records(data: bytes) -> list[int]:
    """The start offsets of the write-ahead log segment's records (its framing only; crcs unchecked)."""
    starts: list[int] = []
    offset = 0
    while offset + WAL_RECORD_HEAD.size <= len(data):
        length, _ = WAL_RECORD_HEAD.unpack_from(data, offset)
        end = offset + WAL_RECORD_HEAD.size + length
        if length == 0 or end > len(data):
            break
        starts.append(offset)
        offset = end
    return starts


def latest_wal_segment(data_dir: Path) -> Path:
    """The quorum node's newest write-ahead log segment (`<data-dir>/raft/wal/<seq>.wal`)."""
    segments = sorted((data_dir / "raft" / "wal").glob("*.wal"))
    if not segments:
        raise FileNotFoundError(f"no write-ahead log segment under {data_dir}")
    return segments[-1]


def tear_quorum_log(data_dir: Path, mode: str = "cut") -> Tear:
    """Tear the last record of a stopped quorum node's write-ahead log.

    `cut`: zero the record from the middle of its payload on (the segment is preallocated: zeros are what
    a write that never reached the disk leaves); with no record to cut, `garbage` is done instead.
    `garbage`: write bytes after the last whole record."""
    path = latest_wal_segment(data_dir)
    data = path.read_bytes()
    starts = _wal_records(data)
    if mode == "cut" and starts:
        last = starts[-1]
        length, _ = WAL_RECORD_HEAD.unpack_from(data, last)
        cut = last + WAL_RECORD_HEAD.size + max(1, length // 2)
        end = last + WAL_RECORD_HEAD.size + length
        _overwrite(path, cut, bytes(end - cut))
        return Tear(path, "cut", cut, last)
    end = _wal_end(data, starts)
    _overwrite(path, end, _garbage())
    return Tear(path, "garbage", end, starts[-1] if starts else -1)


def _wal_end(data: bytes, starts: list[int]) -> int:
    if not starts:
        return 0
    length, _ = WAL_RECORD_HEAD.unpack_from(data, starts[-1])
    return starts[-1] + WAL_RECORD_HEAD.size + length


def tear_kafka_segment(partition_dir: Path, mode: str = "cut") -> Tear:
    """Tear the last batch of a stopped broker's partition log (its newest `.log` segment).

    `cut`: truncate the file in the middle of the last batch (segments are not preallocated: a write cut
    short leaves a shorter file). `garbage`: append bytes after the last whole batch."""
    segments = sorted(partition_dir.glob("*.log"))
    if not segments:
        raise FileNotFoundError(f"no log segment in {partition_dir}")
    path = segments[-1]
    data = path.read_bytes()
    starts = _batch_starts(data)
    if mode == "cut" and starts:
        last = starts[-1]
        _, length = KAFKA_BATCH_HEAD.unpack_from(data, last)
        cut = last + (KAFKA_BATCH_HEAD.size + length) // 2
        os.truncate(path, cut)
        return Tear(path, "cut", cut, last)
    _overwrite(path, len(data), _garbage())
    return Tear(path, "garbage", len(data), starts[-1] if starts else -1)


def _batch_starts(data: bytes) -> list[int]:
    starts: list[int] = []
    offset = 0
    while offset + KAFKA_BATCH_HEAD.size <= len(data):
        _, length = KAFKA_BATCH_HEAD.unpack_from(data, offset)
        end = offset + KAFKA_BATCH_HEAD.size + length
        if length <= 0 or end > len(data):
            break
        starts.append(offset)
        offset = end
    return starts


def _garbage() -> bytes:
    # Fixed, so a replayed run tears the same way; no zero byte, so it is not mistaken for unused space.
    return bytes((7 * i + 0x5A) % 255 + 1 for i in range(GARBAGE_BYTES))


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)
