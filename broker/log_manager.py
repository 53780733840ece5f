"""Every partition log of a broker, across its `log.dirs` (Kafka's `LogManager`).

At start-up each log dir is scanned for `<topic>-<partition>` directories; a
log is opened with its recovery point from `recovery-point-offset-checkpoint`
and its log start offset from `log-start-offset-checkpoint`. The marker file
`.kafka_cleanshutdown`, written by a clean close and removed at start, says
whether recovery may trust the recovery point (Kafka's behaviour: after a
crash every segment past the recovery point is re-validated).

A log whose recovery cut it below what a checkpoint says it held (high
watermark, recovery point, latest leader epoch's start) lost data the broker
had: it is logged once (`log_recovered_below_checkpoint`) and listed in
`lost_data`, which the broker publishes before it registers
(broker/damaged_logs.py).

A new log goes to the log dir holding the fewest partitions. Checkpoints are
written per log dir: recovery points by `flush_checkpoints`, high watermarks by
`write_high_watermarks` (the replica manager owns the HW values).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from broker.damaged_logs import RECOVERY_CUT, LostData, find_lost_data
from broker.log import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointFileError,
    LogConfig,
    OffsetCheckpointFile,
    PartitionLog,
)
from broker.log.log import parse_topic_partition
from client.kafka.structs import TopicPartition

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class LogManager:
    def __init__(self, directories: tuple[Path, ...], default_config: LogConfig, logger: Any) -> None:
        self._dirs = tuple(Path(d) for d in directories)
        self._default_config = default_config
        self._log = logger
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        # Partitions whose recovery cut the log below a checkpointed offset (broker/damaged_logs.py).
        self.lost_data: list[LostData] = []
        for directory in self._dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._load_dir(directory)

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        if not path.exists():
            return {}
        try:
            return OffsetCheckpointFile(path).read()
        except CheckpointFileError as exc:
            # A broken checkpoint costs a full recovery, never data: treat every log as unclean.
            self._log.warning("checkpoint_unreadable", path=str(path), error=str(exc))
            return {}

    def _load_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(directory / RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(directory / REPLICATION_OFFSET_CHECKPOINT)
        self.high_watermarks.update(high_watermarks)
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            try:
                tp = parse_topic_partition(child)
            except ValueError:
                continue  # not a partition directory (Kafka skips these too)
            if tp in self._logs:
                raise RuntimeError(f"partition {tp} is in two log dirs: {self._dir_of[tp]} and {directory}")
            self._logs[tp] = PartitionLog(
                child,
                self._default_config,
                self._log,
                recovery_point=recovery_points.get(tp, 0),
                had_clean_shutdown=clean,
                log_start_offset=start_offsets.get(tp, 0),
            )
            self._dir_of[tp] = directory
            self._check_lost_data(tp, directory, high_watermarks.get(tp, 0), recovery_points.get(tp, 0))
        if clean:
            marker.unlink()  # from now until a clean close, a crash means recovery

    def _check_lost_data(self, tp: TopicPartition, directory: Path, high_watermark: int, recovery_point: int) -> None:
        """Once per partition and start: did recovery cut data the broker had? (broker/damaged_logs.py)"""
        log = self._logs[tp]
        checkpointed = {
            REPLICATION_OFFSET_CHECKPOINT: high_watermark,
            RECOVERY_POINT_CHECKPOINT: recovery_point,
            LEADER_EPOCH_CHECKPOINT: log.epoch_checkpoint_end_offset,
            RECOVERY_CUT: log.log_end_offset + 1 if log.recovery_cut_bytes else 0,
        }
        lost = find_lost_data(tp, log.log_end_offset, checkpointed)
        if lost is None:
            return
        self.lost_data.append(lost)
        self._log.error(
            "log_recovered_below_checkpoint",
            topic=lost.topic,
            partition=lost.partition,
            log_end_offset=lost.log_end_offset,
            checkpointed_offset=lost.checkpointed_offset,
            checkpoint=lost.checkpoint,
            dir=str(directory),
        )

    # ---------------------------------------------------------------- lookup

    def get(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def dir_of(self, tp: TopicPartition) -> Path | None:
        """The log dir holding the partition."""
        return self._dir_of.get(tp)

    @property
    def directories(self) -> tuple[Path, ...]:
        return self._dirs

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    def get_or_create(self, tp: TopicPartition, config: LogConfig | None = None) -> PartitionLog:
        log = self._logs.get(tp)
        if log is not None:
            return log
        counts = {d: 0 for d in self._dirs}
        for directory in self._dir_of.values():
            counts[directory] += 1
        directory = min(self._dirs, key=lambda d: (counts[d], str(d)))
        log = PartitionLog(directory / f"{tp.topic}-{tp.partition}", config or self._default_config, self._log)
        self._logs[tp] = log
        self._dir_of[tp] = directory
        self._log.info("log_created", topic=tp.topic, partition=tp.partition, dir=str(directory))
        return log

    def delete(self, tp: TopicPartition) -> None:
        """Closes and removes a partition's directory (StopReplica with delete)."""
        log = self._logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        self.high_watermarks.pop(tp, None)
        if log is None or directory is None:
            return
        log.close()
        for segment in log.segments:
            segment.delete()
        for leftover in sorted(log.dir.iterdir()) if log.dir.exists() else []:
            leftover.unlink()
        if log.dir.exists():
            log.dir.rmdir()
        self._log.info("log_deleted", topic=tp.topic, partition=tp.partition, dir=str(log.dir))

    # ---------------------------------------------------------------- checkpoints

    def _by_dir(self, values: Mapping[TopicPartition, int]) -> dict[Path, dict[TopicPartition, int]]:
        grouped: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self._dirs}
        for tp, value in values.items():
            directory = self._dir_of.get(tp)
            if directory is not None:
                grouped[directory][tp] = value
        return grouped

    def flush_checkpoints(self) -> None:
        """Writes recovery points and log start offsets of every log dir."""
        recovery = {tp: log.recovery_point for tp, log in self._logs.items()}
        starts = {tp: log.log_start_offset for tp, log in self._logs.items()}
        for directory, offsets in self._by_dir(recovery).items():
            OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT).write(offsets)
        for directory, offsets in self._by_dir(starts).items():
            OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT).write(offsets)

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self.high_watermarks.update(high_watermarks)
        for directory, offsets in self._by_dir(self.high_watermarks).items():
            OffsetCheckpointFile(directory / REPLICATION_OFFSET_CHECKPOINT).write(offsets)

    def flush_all(self) -> None:
        for _, log in self:
            log.flush()

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write checkpoints, then the marker."""
        for _, log in self:
            log.close()
        self.flush_checkpoints()
        for directory in self._dirs:
            (directory / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
