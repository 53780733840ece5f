"""Retention and compaction on running brokers, with configs changed at run time (issue 7's log tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from client.kafka import errors
from client.kafka.records import RecordBatchBuilder, iter_records
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env
from tests.test_broker_cluster import Wire

pytestmark = pytest.mark.integration

HOUSEKEEPING = {
    "log.retention.check.interval.ms": "200",
    "log.cleaner.backoff.ms": "200",
    "log.segment.bytes": "2048",
}


def keyed(pairs: list[tuple[bytes, bytes | None]]) -> bytes:
    builder = RecordBatchBuilder()
    for key, value in pairs:
        builder.append(key, value)
    return builder.build()


def alter_config(cluster: KafkaCluster, topic: str, *pairs: str) -> None:
    command = [
        sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, "--alter", "--topic", topic,
    ]  # fmt: skip
    for pair in pairs:
        command += ["--config", pair]
    done = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def read_log(wire: Wire, broker: int, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record a consumer can read, from the log start offset to the HW."""
    first = wire.fetch(broker, topic, 0, 0)
    offset = 0 if first.error_code == 0 else first.log_start_offset
    out = []
    for _ in range(10_000):
        data = wire.fetch(broker, topic, 0, offset)
        assert data.error_code == 0, errors.error_for(data.error_code, "")
        batch = [r for r in iter_records(data.records) if r.offset >= offset]
        if not batch:
            if offset >= data.high_watermark:
                return out
            offset += 1  # a batch emptied by compaction: step over its offsets
            continue
        out.extend((r.offset, r.key, r.value) for r in batch)
        offset = batch[-1].offset + 1
    raise AssertionError("read_log did not reach the HW")


def test_retention_deletes_old_segments_when_retention_ms_is_lowered_at_run_time(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=1, broker_properties=HOUSEKEEPING) as cluster:
        cluster.start()
        cluster.create_topic("old", partitions=1, replication_factor=1)
        wire = Wire(cluster)
        try:
            for i in range(60):
                assert wire.produce(1, "old", 0, keyed([(b"k", b"%03d-%s" % (i, b"x" * 80))]), acks=1).error_code == 0
            segments = sorted((cluster.data_dir(1) / "old-0").glob("*.log"))
            assert len(segments) > 2
            assert wire.fetch(1, "old", 0, 0).error_code == 0, "nothing is deleted under the default retention"
            alter_config(cluster, "old", "retention.ms=1")

            def start_moved() -> bool:
                return wire.fetch(1, "old", 0, 0).error_code == errors.OffsetOutOfRangeError.code

            wait_until(start_moved, 30, message="retention.ms=1 set at run time never deleted old segments")
            data = wire.fetch(1, "old", 0, 0)
            assert data.log_start_offset > 0
            remaining = sorted((cluster.data_dir(1) / "old-0").glob("*.log"))
            assert len(remaining) == 1, "every segment but the active one is past retention"
            assert int(remaining[0].stem) == data.log_start_offset
            assert read_log(wire, 1, "old")[-1][2].startswith(b"059-"), "the newest records stay readable"
        finally:
            wire.close()


def test_compaction_keeps_the_latest_value_per_key_and_drops_tombstones(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=1, broker_properties=HOUSEKEEPING) as cluster:
        cluster.start()
        cluster.create_topic(
            "table",
            partitions=1,
            replication_factor=1,
            cleanup_policy="compact",
            min_cleanable_dirty_ratio="0.01",
            delete_retention_ms="1",
        )
        wire = Wire(cluster)
        try:
            latest: dict[bytes, bytes | None] = {}
            for i in range(120):
                key = b"key-%d" % (i % 6)
                value = None if i in (100, 101) else b"v%03d-%s" % (i, b"y" * 60)
                assert wire.produce(1, "table", 0, keyed([(key, value)]), acks=1).error_code == 0
                latest[key] = value
            for _ in range(40):  # roll the records above into sealed (cleanable) segments
                assert wire.produce(1, "table", 0, keyed([(b"filler", b"f" * 80)]), acks=1).error_code == 0

            live = sorted(k for k, v in latest.items() if v is not None)

            def compacted() -> list[tuple[int, bytes | None, bytes | None]] | None:
                records = read_log(wire, 1, "table")
                table_keys = sorted(k for _, k, _ in records if k != b"filler")
                return records if table_keys == live else None

            # The cleaner runs every log.cleaner.backoff.ms while the dirty ratio is above 0.01.
            records = wait_until(compacted, 30, message="the log never got down to the latest record per live key")
            assert cluster.log_events(1, "log_cleaned"), "the cleaner logs each cleaning"
            for _, key, value in records:
                if key != b"filler":
                    assert value == latest[key]
            offsets = [o for o, _, _ in records]
            assert offsets == sorted(offsets), "compaction keeps offsets in order (gaps are fine)"
        finally:
            wire.close()
