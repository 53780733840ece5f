"""Retention deletes whole old segments; compaction keeps the latest value per key (Kafka 2.x semantics)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from broker.config import load_broker_config
from broker.log import LogConfig, OffsetOutOfRangeError, PartitionLog
from broker.log.cleaner import plan_clean
from broker.log.retention import deletable_count
from broker.log_housekeeping import LogHousekeeper
from broker.log_manager import LogManager
from client.kafka.records import RecordBatchBuilder, iter_records
from client.kafka.structs import TopicPartition

T0 = 1_700_000_000_000
LOG = structlog.get_logger()


def batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int = T0) -> bytearray:
    builder = RecordBatchBuilder(base_timestamp_ms=timestamp_ms)
    for key, value in records:
        builder.append(key, value)
    return bytearray(builder.build())


def read_all(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = log.log_start_offset
    for _ in range(100_000):
        data = log.read(offset, 1 << 20)
        if not data:
            return out
        records = [r for r in iter_records(data) if r.offset >= offset]
        out.extend((r.offset, r.key, r.value) for r in records)
        last = max(r.offset for r in records) if records else offset
        offset = max(last + 1, offset + 1)
        while offset < log.log_end_offset and not log.read(offset, 1):
            offset += 1
    raise AssertionError("read_all did not finish")


def small_log(tmp_path: Path, **config: object) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=1024, **config), LOG)


# ---------------------------------------------------------------- retention


def test_retention_by_time_deletes_old_segments_but_not_the_active_one(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    for i in range(40):
        log.append(batch([(None, b"v" * 50)], timestamp_ms=T0 + i * 1000), 0)
    assert len(log.segments) > 3
    now = T0 + 40_000
    count, why = deletable_count(
        log.segments, high_watermark=log.log_end_offset, now_ms=now, retention_ms=20_000, retention_bytes=-1
    )
    assert why == "retention.ms" and 0 < count < len(log.segments)
    kept_base = log.segments[count].base_offset
    log.delete_oldest_segments(count, why)
    assert log.log_start_offset == kept_base
    assert all(s.largest_timestamp >= now - 20_000 for s in log.segments[:-1][:1])
    try:
        log.read(0, 100)
        raise AssertionError("a read below the log start offset must fail")
    except OffsetOutOfRangeError:
        pass
    # Everything old: all but the active segment may go, never the active one.
    count, _ = deletable_count(
        log.segments, high_watermark=log.log_end_offset, now_ms=now + 10**9, retention_ms=1, retention_bytes=-1
    )
    assert count == len(log.segments) - 1


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    for _ in range(40):
        log.append(batch([(None, b"v" * 50)]), 0)
    count, _ = deletable_count(log.segments, high_watermark=0, now_ms=T0 * 2, retention_ms=1, retention_bytes=-1)
    assert count == 0, "nothing above the HW may be deleted (a follower or consumer may still need it)"


def test_retention_by_bytes_keeps_at_least_the_limit(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    for _ in range(40):
        log.append(batch([(None, b"v" * 50)]), 0)
    total = log.size_bytes
    count, why = deletable_count(
        log.segments, high_watermark=log.log_end_offset, now_ms=T0, retention_ms=-1, retention_bytes=2048
    )
    assert why == "retention.bytes"
    remaining = total - sum(s.size for s in log.segments[:count])
    assert remaining >= 2048
    assert remaining - log.segments[count].size < 2048, "one more deletion would go under the limit"


# ---------------------------------------------------------------- compaction


def test_compaction_keeps_the_latest_value_per_key_and_keeps_offsets(tmp_path: Path) -> None:
    log = small_log(tmp_path, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    expected: dict[bytes, tuple[int, bytes]] = {}
    for i in range(200):
        key = b"k%d" % (i % 7)
        value = b"value-%d" % i
        first, _ = log.append(batch([(key, value)], timestamp_ms=T0 + i), 0)
        expected[key] = (first, value)
    log.roll()
    task = plan_clean(log, first_dirty=0, high_watermark=log.log_end_offset, now_ms=T0 + 10_000)
    assert task is not None
    task.compute()
    assert task.swap(LOG)
    got = read_all(log)
    assert sorted((o, k, v) for o, k, v in got) == sorted((o, k, v) for k, (o, v) in expected.items())
    assert log.log_end_offset == 200, "compaction never changes the log end offset"


def test_tombstones_go_only_after_delete_retention(tmp_path: Path) -> None:
    log = small_log(tmp_path, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0, delete_retention_ms=5_000)
    log.append(batch([(b"a", b"1"), (b"b", b"1")], timestamp_ms=T0), 0)
    log.append(batch([(b"a", None)], timestamp_ms=T0 + 1), 0)
    log.roll()
    early = plan_clean(log, 0, log.log_end_offset, now_ms=T0 + 1_000)
    assert early is not None
    early.compute()
    early.swap(LOG)
    assert [(k, v) for _, k, v in read_all(log)] == [(b"b", b"1"), (b"a", None)], "the tombstone stays for now"
    log.append(batch([(b"c", b"1")], timestamp_ms=T0 + 2), 0)
    log.roll()
    late = plan_clean(log, 0, log.log_end_offset, now_ms=T0 + 60_000)
    assert late is not None
    late.compute()
    late.swap(LOG)
    assert [(k, v) for _, k, v in read_all(log)] == [(b"b", b"1"), (b"c", b"1")]


def test_a_compacted_log_reloads_after_restart(tmp_path: Path) -> None:
    log = small_log(tmp_path, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    for i in range(50):
        log.append(batch([(b"k%d" % (i % 3), b"%d" % i)]), 0)
    log.roll()
    task = plan_clean(log, 0, log.log_end_offset, now_ms=T0 * 2)
    assert task is not None
    task.compute()
    task.swap(LOG)
    before = read_all(log)
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=1024), LOG, had_clean_shutdown=False)
    assert read_all(reopened) == before
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


def test_housekeeper_cleans_and_checkpoints(tmp_path: Path) -> None:
    config = load_broker_config(None, [f"log.dirs={tmp_path}", "log.segment.bytes=1024"])
    logs = LogManager(config.directories, LogConfig(segment_bytes=1024), LOG)
    tp = TopicPartition("c", 0)
    log = logs.get_or_create(tp, LogConfig(segment_bytes=1024, cleanup_policy=("compact",)))
    for i in range(300):
        log.append(batch([(b"k%d" % (i % 5), b"x" * 20)]), 0)
    keeper = LogHousekeeper(config, logs, lambda _tp: log.log_end_offset, LOG, clock_ms=lambda: T0 * 2)
    assert asyncio.run(keeper.clean_once())
    assert (tmp_path / "cleaner-offset-checkpoint").exists()
    active_base = log.segments[-1].base_offset
    cleaned_keys = [k for offset, k, _ in read_all(log) if offset < active_base]
    assert sorted(cleaned_keys) == sorted(set(cleaned_keys)), "the cleaned part holds each key once"
    assert len(cleaned_keys) <= 5
    assert not asyncio.run(keeper.clean_once()), "nothing dirty is left below the active segment"
