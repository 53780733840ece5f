"""Storage of one partition's log as Kafka 2.x lays it out (docs/research/kafka.md §4).

`PartitionLog` (log.py) over `LogSegment`s (segment.py), the leader-epoch
cache (epoch_cache.py) and Kafka's checkpoint files (checkpoints.py).
"""

from broker.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    TopicPartition,
)
from broker.log.epoch_cache import EpochEndOffset, LeaderEpochCache
from broker.log.errors import (
    CheckpointFileError,
    LogError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from broker.log.log import FetchSlice, LogConfig, PartitionLog
from broker.log.segment import LogSegment

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointFileError",
    "EpochEndOffset",
    "EpochEntry",
    "FetchSlice",
    "LeaderEpochCache",
    "LeaderEpochCheckpointFile",
    "LogConfig",
    "LogError",
    "LogSegment",
    "OffsetCheckpointFile",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "TopicPartition",
]
