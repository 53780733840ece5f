"""Kafka's checkpoint files (docs/research/kafka.md §4, K28 CheckpointFile.scala).

Format, byte for byte as Kafka writes it on Linux::

    0                 <- version
    2                 <- number of entries
    orders 0 1234     <- one entry per line
    orders 1 987

* `recovery-point-offset-checkpoint` and `replication-offset-checkpoint`
  (and `log-start-offset-checkpoint`) live in a log dir, one entry
  `topic partition offset` per partition.
* `leader-epoch-checkpoint` lives in a partition directory, one entry
  `epoch startOffset` per leader epoch (K28 LeaderEpochCheckpointFile.scala).

A write is atomic: the entries go to `<name>.tmp`, which is fsynced and renamed
over the file, and the directory is fsynced so that the rename survives a
power loss. A reader therefore sees either the old or the new file, never a
mix. A leftover `.tmp` (a crash between write and rename) is ignored.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from broker.log.dir_failure import storage_error
from broker.log.errors import CheckpointFileError
from client.kafka.structs import TopicPartition
from runtime.fsync import fsync_directory

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it (KIP-101)."""

    epoch: int
    start_offset: int


def write_checkpoint(path: Path, lines: Iterable[str], durable: bool = True) -> None:
    """Write version, count and `lines` to `path` atomically (tmp + fsync + rename + dir fsync).

    `durable=False` skips both fsyncs: the caller makes the file durable later
    (`fsync_file`) before anything depends on it surviving a crash. A failed
    write or fsync is a failure of the log directory (broker.log.dir_failure).
    """
    try:
        _write_checkpoint(path, lines, durable)
    except OSError as exc:
        raise storage_error(path.parent, f"checkpoint {path.name}", exc) from exc


def _write_checkpoint(path: Path, lines: Iterable[str], durable: bool) -> None:
    body = list(lines)
    text = f"{CHECKPOINT_VERSION}\n{len(body)}\n" + "".join(line + "\n" for line in body)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_directory(path.parent)


def fsync_file(path: Path) -> None:
    """Make a file written with `durable=False` durable: its data, then its directory entry."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(path.parent)
    except OSError as exc:
        raise storage_error(path.parent, f"fsync of {path.name}", exc) from exc


def read_checkpoint(path: Path, fields_per_line: int) -> list[list[str]]:
    """Entries of the checkpoint at `path`, each split into `fields_per_line` fields; [] if it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointFileError(f"checkpoint {path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointFileError(f"checkpoint {path}: unrecognised version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointFileError(f"checkpoint {path}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:]]
    if count != len(entries):
        raise CheckpointFileError(f"checkpoint {path}: expected {count} entries, found {len(entries)}")
    for fields in entries:
        if len(fields) != fields_per_line:
            raise CheckpointFileError(f"checkpoint {path}: malformed line {' '.join(fields)!r}")
    return entries


def _to_int(path: Path, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CheckpointFileError(f"checkpoint {path}: {text!r} is not an integer") from None


class OffsetCheckpointFile:
    """`topic partition offset` checkpoint of a log dir (recovery point, HW, log start offset)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        write_checkpoint(self.path, (f"{tp.topic} {tp.partition} {offset}" for tp, offset in offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for topic, partition, offset in read_checkpoint(self.path, 3):
            result[TopicPartition(topic, _to_int(self.path, partition))] = _to_int(self.path, offset)
        return result


class LeaderEpochCheckpointFile:
    """`epoch startOffset` checkpoint of one partition directory."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, entries: Iterable[EpochEntry], durable: bool = True) -> None:
        write_checkpoint(self.path, (f"{e.epoch} {e.start_offset}" for e in entries), durable)

    def read(self) -> list[EpochEntry]:
        return [
            EpochEntry(_to_int(self.path, epoch), _to_int(self.path, start))
            for epoch, start in read_checkpoint(self.path, 2)
        ]
