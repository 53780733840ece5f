"""Retention and compaction of every log of a broker (Kafka's `LogManager` cleanup and `LogCleaner` threads).

* Retention, every `log.retention.check.interval.ms`: each log with
  `delete` in its cleanup.policy loses its oldest segments past `retention.ms`
  or `retention.bytes` (broker/log/retention.py), never beyond the HW.
* Compaction, every `log.cleaner.backoff.ms` when `log.cleaner.enable`: the
  compacted log with the highest dirty ratio above its
  `min.cleanable.dirty.ratio` is cleaned (broker/log/cleaner.py): the record
  work runs on a worker thread, so appends and fetches on the event loop go
  on; the swap is back on the loop. Where each log's clean part ends is kept
  in `cleaner-offset-checkpoint` of its log dir, as Kafka does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from broker.config import BrokerConfig
from broker.log import CheckpointFileError, OffsetCheckpointFile
from broker.log.cleaner import CleanTask, plan_clean
from broker.log.retention import deletable_count
from broker.log_manager import LogManager
from client.kafka.structs import TopicPartition

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogHousekeeper:
    def __init__(
        self,
        config: BrokerConfig,
        logs: LogManager,
        high_watermark: Callable[[TopicPartition], int | None],
        logger: Any,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.logs = logs
        self._high_watermark = high_watermark
        self._log = logger
        self._clock_ms = clock_ms
        self._first_dirty: dict[TopicPartition, int] = {}
        for directory in logs.directories:
            path = directory / CLEANER_CHECKPOINT
            if path.exists():
                try:
                    self._first_dirty.update(OffsetCheckpointFile(path).read())
                except CheckpointFileError as exc:  # costs a full re-clean, never data
                    self._log.warning("checkpoint_unreadable", path=str(path), error=str(exc))

    # ---------------------------------------------------------------- retention

    def enforce_retention(self) -> int:
        """One retention pass; returns how many segments were deleted."""
        deleted = 0
        now = self._clock_ms()
        for tp, log in self.logs:
            hw = self._high_watermark(tp)
            if hw is None or not log.config.delete:
                continue
            count, why = deletable_count(
                log.segments,
                high_watermark=hw,
                now_ms=now,
                retention_ms=log.config.retention_ms,
                retention_bytes=log.config.retention_bytes,
            )
            if count:
                log.delete_oldest_segments(count, why)
                deleted += count
        return deleted

    # ---------------------------------------------------------------- compaction

    def next_clean(self) -> tuple[TopicPartition, CleanTask] | None:
        """The dirtiest compacted log that needs cleaning, with its task (Kafka's grabFilthiestCompactedLog)."""
        best: tuple[float, TopicPartition, CleanTask] | None = None
        now = self._clock_ms()
        for tp, log in self.logs:
            hw = self._high_watermark(tp)
            if hw is None or not log.config.compact:
                continue
            first_dirty = self._first_dirty.get(tp, 0)
            if first_dirty > log.log_end_offset:  # the log was truncated below the clean point
                first_dirty = 0
            task = plan_clean(log, first_dirty, hw, now)
            if task is None:
                continue
            total = sum(s.size for s in task.segments) or 1
            ratio = sum(s.size for s in task.segments if s.next_offset > task.first_dirty) / total
            if best is None or ratio > best[0]:
                best = (ratio, tp, task)
        return None if best is None else (best[1], best[2])

    async def clean_once(self) -> bool:
        """Cleans one log if any needs it; True when something was cleaned."""
        found = self.next_clean()
        if found is None:
            return False
        tp, task = found
        try:
            await asyncio.to_thread(task.compute)
        except Exception:
            task.discard()
            raise
        if not task.swap(self._log):
            return False
        self._first_dirty[tp] = task.end_offset
        self._write_checkpoints()
        return True

    def _write_checkpoints(self) -> None:
        by_dir: dict[Any, dict[TopicPartition, int]] = {d: {} for d in self.logs.directories}
        for tp, offset in self._first_dirty.items():
            directory = self.logs.dir_of(tp)
            if directory is not None:
                by_dir[directory][tp] = offset
        for directory, offsets in by_dir.items():
            OffsetCheckpointFile(directory / CLEANER_CHECKPOINT).write(offsets)

    def forget(self, tp: TopicPartition) -> None:
        """A deleted partition's checkpoint entry goes with it."""
        self._first_dirty.pop(tp, None)
