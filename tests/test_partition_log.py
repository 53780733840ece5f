"""Partition log storage (broker/log): segments, indexes, recovery, checkpoints, leader epochs.

The SIGKILL test runs this module as a child process:

    python3 -m tests.test_partition_log child <partition-dir>

which appends batches, flushes, and prints each batch's last offset only after
the flush returned (a printed offset is an acknowledged one), until killed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.log import (
    CheckpointFileError,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
    LogConfig,
    OffsetCheckpointFile,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    TopicPartition,
)
from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from client.kafka.records import (
    CorruptRecordError,
    RecordBatchBuilder,
    iter_records,
    read_batch_header,
    validate_batches,
)

SMALL = LogConfig(segment_bytes=8192, index_interval_bytes=512)


class RecordingLogger:
    """A structlog-shaped logger that keeps (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def _record(self, level: str, event: str, **fields: Any) -> None:
        self.lines.append((level, event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self._record("info", event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._record("warning", event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        self._record("error", event, **fields)

    def bind(self, **_: Any) -> RecordingLogger:
        return self

    def events(self, name: str) -> list[dict[str, Any]]:
        return [fields for _, event, fields in self.lines if event == name]


def value_of(offset: int) -> bytes:
    """Record value for `offset`: distinct per offset, so a misplaced record is caught."""
    return b"v%d|" % offset + bytes([offset % 251]) * (offset % 37)


def make_batch(first_offset: int, count: int, timestamp_ms: int = 1_000) -> bytearray:
    """A client batch whose values name the offsets the broker will give them (the caller knows the LEO)."""
    builder = RecordBatchBuilder(base_timestamp_ms=timestamp_ms)
    for i in range(count):
        builder.append(b"k%d" % (first_offset + i), value_of(first_offset + i), timestamp_ms=timestamp_ms + i)
    return bytearray(builder.build())


def fill(log: PartitionLog, batches: int, seed: int = 1, leader_epoch: int = 0) -> list[tuple[int, int]]:
    """Appends `batches` batches of 1..20 records; returns their (first, last) offsets."""
    rng = random.Random(seed)
    ranges = []
    for _ in range(batches):
        count = rng.randint(1, 20)
        first = log.log_end_offset
        ranges.append(log.append(make_batch(first, count, timestamp_ms=10_000 + first), leader_epoch))
    return ranges


def batches_in(data: bytes) -> Iterator[tuple[int, int]]:
    """(base offset, last offset) of each whole batch in `data`; fails if `data` is not whole valid batches."""
    info = validate_batches(data, from_client=False)
    for b in info.batches:
        header = read_batch_header(data, b.position)
        yield header.base_offset, header.last_offset


def check_records(data: bytes, start_offset: int) -> list[int]:
    offsets = []
    for record in iter_records(data, start_offset):
        assert record.value == value_of(record.offset)
        offsets.append(record.offset)
    return offsets


def open_log(path: Path, config: LogConfig = SMALL, **kwargs: Any) -> tuple[PartitionLog, RecordingLogger]:
    logger = RecordingLogger()
    return PartitionLog(path, config, logger, **kwargs), logger


def read_everything(log: PartitionLog, max_bytes: int = 3000) -> list[int]:
    """Walks the whole log with fetches of `max_bytes`, checking every record; returns the offsets seen."""
    offsets: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        assert data, f"empty read at {offset} below LEO {log.log_end_offset}"
        seen = check_records(data, offset)
        offsets.extend(seen)
        offset = seen[-1] + 1
    return offsets


def lookups(log: PartitionLog) -> dict[int, tuple[int, int]]:
    """For every offset, the (base, last) of the first batch a 1-byte fetch returns."""
    result = {}
    for offset in range(log.log_start_offset, log.log_end_offset):
        result[offset] = next(batches_in(log.read(offset, 1)))
    return result


# ---------------------------------------------------------------------------- append and read


def test_append_read_round_trip_across_rolls(tmp_path: Path) -> None:
    log, logger = open_log(tmp_path / "orders-0")
    ranges = fill(log, 300)
    assert ranges[0][0] == 0
    assert all(prev[1] + 1 == cur[0] for prev, cur in zip(ranges, ranges[1:], strict=False))
    assert log.log_end_offset == ranges[-1][1] + 1
    assert len(log.segments) > 5, "small segment.bytes must roll"
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert len(logger.events("log_segment_rolled")) == len(log.segments) - 1
    assert read_everything(log) == list(range(log.log_end_offset))
    # Segment files are named by base offset, 20 digits.
    names = sorted(p.name for p in (tmp_path / "orders-0").iterdir() if p.suffix == LOG_SUFFIX)
    assert names[0] == "00000000000000000000.log"
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    log.close()


def test_every_offset_returns_the_batch_holding_it(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path / "t-3")
    ranges = fill(log, 250, seed=7)
    holding = {o: r for r in ranges for o in range(r[0], r[1] + 1)}
    assert lookups(log) == holding
    for offset in range(0, log.log_end_offset, 7):  # bigger fetches: whole batches from the holding one
        data = log.read(offset, 2000)
        found = list(batches_in(data))
        assert found[0] == holding[offset]
        assert len(data) <= 2000 or len(found) == 1  # only a single batch may exceed max_bytes
        assert all(a[1] + 1 == b[0] for a, b in zip(found, found[1:], strict=False))
    log.close()


def test_read_respects_max_bytes_but_returns_at_least_one_batch(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    for _ in range(50):
        log.append(make_batch(log.log_end_offset, 10), 0)
    everything = log.read(0, 10**9)
    ends = [b.position + b.length for b in validate_batches(everything, from_client=False).batches]
    size = len(log.read(0, 1))
    assert size == ends[0] and len(list(batches_in(log.read(0, 1)))) == 1
    for max_bytes in (size, size + 1, size * 3 + 5, size * 10, ends[-1] - 1):
        data = log.read(0, max_bytes)
        assert len(data) == max(end for end in ends if end <= max_bytes)
        assert data == everything[: len(data)]
    assert log.read(0, 1, min_one_batch=False) == b""
    log.close()


def test_reads_outside_the_log(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path / "t-0")
    assert log.read(0, 100) == b""  # empty log: offset 0 is the LEO
    fill(log, 10)
    leo = log.log_end_offset
    assert log.read(leo, 100) == b""
    with pytest.raises(OffsetOutOfRangeError, match=r"offset .* out of range for t-0"):
        log.read(leo + 1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(999, 100)
    assert info.value.error_code == 1
    first, _ = log.append(make_batch(1000, 3), 0)
    assert first == 1000 and check_records(log.read(1000, 10_000), 1000) == [1000, 1001, 1002]
    log.close()


def test_append_rejects_bad_batches(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=2000))
    batch = make_batch(0, 3)
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(batch, 0)
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(0, 3)[:-4], 0)
    big = RecordBatchBuilder()
    big.append(None, b"x" * 3000)
    with pytest.raises(RecordTooLargeError):
        log.append(bytearray(big.build()), 0)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    log.close()


def test_roll_by_segment_ms_uses_message_timestamps(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path / "t-0", LogConfig(segment_ms=60_000))
    log.append(make_batch(0, 2, timestamp_ms=1_000_000), 0)
    log.append(make_batch(2, 2, timestamp_ms=1_030_000), 0)
    assert len(log.segments) == 1
    log.append(make_batch(4, 2, timestamp_ms=1_070_000), 0)
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.close()


def test_flush_policy_moves_the_recovery_point(tmp_path: Path) -> None:
    now_ms = [0]
    config = LogConfig(flush_interval_messages=25, flush_interval_ms=1000)
    log, _ = open_log(tmp_path / "t-0", config, clock_ms=lambda: now_ms[0])
    log.append(make_batch(0, 10), 0)
    assert log.recovery_point == 0 and not log.maybe_flush()
    log.append(make_batch(10, 20), 0)  # 30 unflushed records >= flush.messages
    assert log.recovery_point == 30
    log.append(make_batch(30, 5), 0)
    now_ms[0] = 999
    assert not log.maybe_flush() and log.recovery_point == 30
    now_ms[0] = 1000
    assert log.maybe_flush() and log.recovery_point == 35
    assert not log.maybe_flush()  # nothing pending
    log.close()


# ---------------------------------------------------------------------------- indexes


def _index_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX))


def test_deleted_indexes_are_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 200, seed=3)
    before = lookups(log)
    leo = log.log_end_offset
    log.close()
    offset_indexes = {p.name: p.read_bytes() for p in _index_files(directory) if p.suffix == INDEX_SUFFIX}
    assert any(offset_indexes.values()), "the test needs non-empty indexes"
    for path in _index_files(directory):
        path.unlink()
    log, logger = open_log(directory, recovery_point=leo, had_clean_shutdown=True)
    assert len(logger.events("log_index_rebuilt")) == len(log.segments) - 1 + (log.active_segment.size > 0)
    assert not logger.events("log_truncated")
    assert log.log_end_offset == leo and lookups(log) == before
    assert {p.name: p.read_bytes() for p in _index_files(directory) if p.suffix == INDEX_SUFFIX} == offset_indexes
    log.close()


@pytest.mark.parametrize(
    "damage",
    ["odd_size", "shuffled", "wrong_position", "timeindex_garbage", "index_past_end"],
)
def test_corrupt_index_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 200, seed=5)
    before, leo = lookups(log), log.log_end_offset
    target = log.segments[1]
    index, time_index = target.index_path, target.time_index_path
    log.close()
    data = index.read_bytes()
    assert len(data) >= 24
    if damage == "odd_size":
        index.write_bytes(data + b"\x01\x02\x03")
    elif damage == "shuffled":
        index.write_bytes(data[8:16] + data[:8] + data[16:])
    elif damage == "wrong_position":  # the last entry points into the middle of a batch
        index.write_bytes(data[:-4] + (int.from_bytes(data[-4:], "big") + 5).to_bytes(4, "big"))
    elif damage == "timeindex_garbage":
        time_index.write_bytes(os.urandom(12 * 5))
    elif damage == "index_past_end":
        index.write_bytes(data + (10**6).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    log, logger = open_log(directory, recovery_point=leo, had_clean_shutdown=True)
    rebuilt = logger.events("log_index_rebuilt")
    assert [e["segment"] for e in rebuilt] == [target.log_path.name]
    assert log.log_end_offset == leo and lookups(log) == before
    assert index.read_bytes() == data
    log.close()


# ---------------------------------------------------------------------------- recovery


def _last_segment_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


@pytest.mark.parametrize("damage", ["half_batch", "garbage", "flipped_crc", "zeros", "short_header"])
def test_recovery_cuts_a_torn_or_corrupt_tail(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 120, seed=9)
    log.flush()
    kept_leo, recovery_point = log.log_end_offset, log.recovery_point
    extra = make_batch(kept_leo, 5)
    log.close()
    path = _last_segment_file(directory)
    size = path.stat().st_size
    with path.open("ab") as f:
        if damage == "half_batch":
            extra[:8] = kept_leo.to_bytes(8, "big")
            f.write(extra[: len(extra) // 2])
        elif damage == "garbage":
            f.write(os.urandom(333))
        elif damage == "flipped_crc":
            extra[:8] = kept_leo.to_bytes(8, "big")
            extra[len(extra) - 3] ^= 0x40
            f.write(extra)
        elif damage == "zeros":  # what a file system may show after a crash: length grew, data did not land
            f.write(bytes(4096))
        elif damage == "short_header":
            f.write(extra[:30])
    cut = path.stat().st_size - size
    log, logger = open_log(directory, recovery_point=recovery_point)
    assert log.log_end_offset == kept_leo
    assert path.stat().st_size == size
    (line,) = logger.events("log_truncated")
    assert line["segment"] == path.name and line["bytes_cut"] == cut
    assert (line["cut_from_position"], line["cut_to_position"]) == (size, size + cut)
    assert line["reason"]
    assert read_everything(log) == list(range(kept_leo))
    assert log.append(make_batch(kept_leo, 3), 0) == (kept_leo, kept_leo + 2)  # appends resume at the cut
    log.close()


def test_corrupt_batch_in_an_earlier_segment_cuts_there_and_deletes_later_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 200, seed=11)
    segments = log.segments
    victim = segments[2]
    found = victim.find_position(victim.base_offset + 1)
    assert found is not None
    later = [s.log_path.name for s in segments[3:]]
    log.close()
    with victim.log_path.open("r+b") as f:  # flip a byte inside the records of the segment's first batch
        f.seek(found.position + found.size_bytes - 2)
        byte = f.read(1)
        f.seek(found.position + found.size_bytes - 2)
        f.write(bytes([byte[0] ^ 1]))
    log, logger = open_log(directory, recovery_point=victim.base_offset)
    assert log.log_end_offset == found.base_offset
    (line,) = logger.events("log_truncated")
    assert line["segment"] == victim.log_path.name and "CRC" in line["reason"]
    assert [e["segment"] for e in logger.events("log_segment_deleted_after_truncation")] == later
    assert not any((directory / name).exists() for name in later)
    assert read_everything(log) == list(range(found.base_offset))
    log.close()


@pytest.mark.parametrize("seed", range(8))
def test_a_flipped_byte_anywhere_in_a_batch_cuts_the_log_at_that_batch(tmp_path: Path, seed: int) -> None:
    """Every byte from the magic on is covered by framing or CRC (baseOffset and leader epoch are not, as in Kafka)."""
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    ranges = fill(log, 60, seed=seed)
    rng = random.Random(seed)
    first, _ = ranges[rng.randrange(len(ranges))]
    segment = next(s for s in reversed(log.segments) if s.base_offset <= first)
    found = segment.find_position(first)
    assert found is not None and found.base_offset == first
    log.close()
    where = found.position + rng.randrange(16, found.size_bytes)
    with segment.log_path.open("r+b") as f:
        f.seek(where)
        byte = f.read(1)[0]
        f.seek(where)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))
    log, logger = open_log(directory, recovery_point=segment.base_offset)
    assert log.log_end_offset == first
    (line,) = logger.events("log_truncated")
    assert line["cut_from_position"] == found.position
    assert read_everything(log) == list(range(first))
    log.close()


def test_segments_below_the_recovery_point_are_not_revalidated(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 200, seed=13)
    log.flush()
    leo, segment_count = log.log_end_offset, len(log.segments)
    log.close()
    log, logger = open_log(directory, recovery_point=leo)
    assert (log.log_end_offset, len(log.segments)) == (leo, segment_count)
    assert logger.events("log_loaded")[0]["recovered_segments"] == 1  # only the segment holding the recovery point
    log.close()


CHILD_CONFIG = LogConfig(segment_bytes=16384, index_interval_bytes=1024)


def child_main(directory: str) -> None:
    """Appends batches until killed; prints each batch's last offset after its flush returned."""
    logger = RecordingLogger()
    log = PartitionLog(directory, CHILD_CONFIG, logger)
    rng = random.Random(os.getpid())
    while True:
        first = log.log_end_offset
        _, last = log.append(make_batch(first, rng.randint(1, 30)), 1)
        log.flush()
        print(last, flush=True)


def _run_child_until(directory: Path, acks_min: int) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.test_partition_log", "child", str(directory)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stdout is not None
    acked = -1
    try:
        for _ in range(acks_min):
            line = proc.stdout.readline()
            assert line, "child exited early"
            acked = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for line in proc.stdout.read().split():  # acknowledged between our last read and the kill
            acked = int(line)
    return acked


def test_sigkill_keeps_every_flushed_offset(tmp_path: Path) -> None:
    directory = tmp_path / "crash-0"
    acked = -1
    for round_ in range(3):
        acked = max(acked, _run_child_until(directory, 150 + 50 * round_))
        log, logger = open_log(directory, CHILD_CONFIG)
        assert log.log_end_offset > acked
        assert read_everything(log, max_bytes=10_000) == list(range(log.log_end_offset))
        assert log.leader_epoch_cache.entries == [EpochEntry(1, 0)]
        assert len(log.segments) > 1
        log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path / "t-0")
    fill(log, 200, seed=19)  # record at offset o has timestamp 10_000 + (batch first offset) + index in batch
    expected: dict[int, tuple[int, int]] = {}
    for record in iter_records(log.read(0, 10**9)):
        expected.setdefault(record.timestamp_ms, (record.offset, record.timestamp_ms))
    stamps = sorted(expected)
    for target in range(0, stamps[-1] + 2, 13):
        later = [t for t in stamps if t >= target]
        assert log.offset_for_timestamp(target) == (expected[later[0]] if later else None)
    log.close()


# ---------------------------------------------------------------------------- truncation and leader epochs


def test_truncate_to_drops_whole_batches_across_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    ranges = fill(log, 200, seed=17)
    mid = ranges[len(ranges) // 2]
    log.truncate_to(mid[0] + (mid[1] > mid[0]))  # inside the batch when it has > 1 record: the batch goes whole
    assert log.log_end_offset == mid[0]
    assert all(s.base_offset <= mid[0] for s in log.segments)
    assert read_everything(log) == list(range(mid[0]))
    assert log.append(make_batch(mid[0], 4), 0) == (mid[0], mid[0] + 3)
    before = lookups(log)
    log.close()
    log, logger = open_log(directory, recovery_point=0)
    assert not logger.events("log_truncated") and lookups(log) == before
    log.close()


def test_leader_epoch_cache_end_offsets(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", RecordingLogger())
    assert cache.end_offset_for(0, 10) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(1, 50)  # same epoch, later offset: no change
    cache.assign(2, 100)
    cache.assign(4, 250)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 100), EpochEntry(4, 250)]
    assert cache.end_offset_for(4, 400) == (4, 400)  # latest epoch: the LEO
    assert cache.end_offset_for(2, 400) == (2, 250)
    assert cache.end_offset_for(3, 400) == (2, 250)  # unknown epoch: largest known below it
    assert cache.end_offset_for(1, 400) == (1, 100)
    assert cache.end_offset_for(0, 400) == (0, 0)  # before the first epoch
    assert cache.end_offset_for(5, 400) == (-1, -1)
    assert cache.end_offset_for(-1, 400) == (-1, -1)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 100\n4 250\n"
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", RecordingLogger()).entries == cache.entries
    cache.truncate_from_end(100)
    assert cache.entries == [EpochEntry(1, 0)]
    cache.assign(3, 80)
    cache.assign(2, 60)  # an older epoch at a lower offset replaces what followed (diverged history)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 60)]
    cache.truncate_from_start(70)
    assert cache.entries == [EpochEntry(2, 70)]


def test_partition_log_tracks_leader_epochs(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 20, leader_epoch=1)
    start2 = log.log_end_offset
    fill(log, 20, leader_epoch=2)
    start5 = log.log_end_offset
    fill(log, 20, leader_epoch=5)
    cache = log.leader_epoch_cache
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, start2), EpochEntry(5, start5)]
    assert cache.end_offset_for(3, log.log_end_offset) == (2, start5)
    header = read_batch_header(log.read(start2, 1))
    assert header.partition_leader_epoch == 2 and header.base_offset == start2
    log.truncate_to(start5)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, start2)]
    log.close()
    (directory / "leader-epoch-checkpoint").unlink()  # rebuilt from the batches on recovery
    log, _ = open_log(directory)
    assert log.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, start2)]
    log.close()


# ---------------------------------------------------------------------------- checkpoint files


def test_offset_checkpoint_exact_format_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    offsets = {TopicPartition("orders", 0): 1234, TopicPartition("my-topic.v2", 11): 0}
    OffsetCheckpointFile(path).write(offsets)
    assert path.read_bytes() == b"0\n2\norders 0 1234\nmy-topic.v2 11 0\n"
    assert OffsetCheckpointFile(path).read() == offsets
    assert not list(tmp_path.glob("*.tmp"))
    OffsetCheckpointFile(path).write({})
    assert path.read_bytes() == b"0\n0\n"
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}


def test_reads_a_kafka_written_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n3\n__consumer_offsets 49 0\ntest 0 5\ntest 1 17\n")
    assert OffsetCheckpointFile(path).read() == {
        TopicPartition("__consumer_offsets", 49): 0,
        TopicPartition("test", 0): 5,
        TopicPartition("test", 1): 17,
    }
    epochs = tmp_path / "leader-epoch-checkpoint"
    epochs.write_text("0\n2\n0 0\n3 120\n")
    assert LeaderEpochCheckpointFile(epochs).read() == [EpochEntry(0, 0), EpochEntry(3, 120)]


@pytest.mark.parametrize(
    "text",
    ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "", "0\n"],
)
def test_malformed_checkpoints_are_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointFileError, match="replication-offset-checkpoint"):
        OffsetCheckpointFile(path).read()


def test_corrupt_leader_epoch_checkpoint_is_rebuilt_from_batches(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 10, leader_epoch=3)
    log.close()
    (directory / "leader-epoch-checkpoint").write_text("0\n5\n1 0\n")
    log, logger = open_log(directory, had_clean_shutdown=True)
    assert logger.events("leader_epoch_checkpoint_corrupt")
    assert log.leader_epoch_cache.entries == [EpochEntry(3, 0)]
    log.close()


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child_main(sys.argv[2])


# ---------------------------------------------------------------------------- records deletion (DeleteRecords)


def test_log_start_offset_moves_up_only_and_whole_segments_below_it_go(tmp_path: Path) -> None:
    log, logger = open_log(tmp_path / "t-0")
    fill(log, 60)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3, "the test needs several segments"
    target = bases[2] + 1  # inside the third segment
    assert log.maybe_increment_log_start_offset(target, "client_records_deletion")
    assert log.log_start_offset == target
    # The two segments wholly below the start are deleted; the one holding it stays (reads start inside it).
    assert [s.base_offset for s in log.segments][0] == bases[2]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    assert read_everything(log)[0] >= target - 20  # the batch holding the start offset is returned whole
    assert not log.maybe_increment_log_start_offset(target - 1, "client_records_deletion")  # never backwards
    assert log.log_start_offset == target
    assert logger.events("log_start_offset_incremented")[0]["log_start_offset"] == target
    # By time: a record below the start is never answered, the first one at or after it is (Kafka's
    # findOffsetByTimestamp(timestamp, startingOffset)); `fill` stamps offset o with 10_000 + o.
    assert log.offset_for_timestamp(0) == (target, 10_000 + target)
    assert log.offset_for_timestamp(10_000 + target + 1) == (target + 1, 10_000 + target + 1)
    # The start survives a reopen through the checkpointed value, as the broker passes it back.
    log.close()
    reopened, _ = open_log(tmp_path / "t-0", log_start_offset=target)
    assert reopened.log_start_offset == target
    reopened.close()
