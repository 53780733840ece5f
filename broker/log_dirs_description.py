"""DescribeLogDirs as Kafka 2.8's `ReplicaManager.describeLogDirs` answers it (KIP-113).

Every log dir of this broker with each partition it holds: its size on disk and its offset lag, which for a
current (non-future) replica is `max(high watermark - log end offset, 0)` (`getLogEndOffsetLag`); zkraft
moves no replica between dirs, so there are no future replicas. A partition whose log is open but which
has no replica state yet reports the lag as -1 (`INVALID_OFFSET_LAG`), as Kafka does for a log it has not
created a replica for.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from client.kafka.structs import TopicPartition

INVALID_OFFSET_LAG = -1


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    partition: int
    size_bytes: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    topics: dict[str, list[LogDirPartition]]


def describe_log_dirs(
    logs: Any, partitions: Mapping[TopicPartition, Any], wanted: Mapping[str, Collection[int]] | None
) -> list[LogDirDescription]:
    """`logs` is the LogManager, `partitions` the replica manager's; `wanted` topic -> partitions, None for all.
    Each dir is named by its absolute path, as `new File(logDir).getAbsolutePath`."""
    by_dir: dict[str, dict[str, list[LogDirPartition]]] = {str(d.absolute()): {} for d in logs.directories}
    for tp, log in logs:
        if wanted is not None and tp.partition not in wanted.get(tp.topic, ()):
            continue
        directory = logs.dir_of(tp)
        if directory is None:
            continue
        partition = partitions.get(tp)
        lag = INVALID_OFFSET_LAG if partition is None else max(partition.high_watermark - log.log_end_offset, 0)
        topics = by_dir.setdefault(str(directory.absolute()), {})
        topics.setdefault(tp.topic, []).append(LogDirPartition(tp.partition, log.size_bytes, lag))
    return [
        LogDirDescription(path, {t: sorted(ps, key=lambda p: p.partition) for t, ps in sorted(topics.items())})
        for path, topics in by_dir.items()
    ]
