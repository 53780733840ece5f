"""Pure planning: rate limits, offset ranges, splitting, data-loss checks (no I/O; table-tested).

Ported from Spark's Kafka source: `rate_limit` is `KafkaMicroBatchStream.rateLimit`
(a per-trigger limit shared across partitions in proportion to their backlog,
never starving a small partition), `offset_ranges` is the driver half of
`KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets` (what counts as
data loss between two offset maps), `split_ranges` is
`KafkaOffsetRangeCalculator.getRanges` (`minPartitions`,
`maxRecordsPerPartition`). See docs/research/spark.md §2.4-2.6.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from client import TopicPartition
from spark_connector.offsets import PartitionOffsets

INSTRUCTION_FAIL_ON_DATA_LOSS = (
    "Some data may have been lost because they are not available in the brokers any more; either the data was"
    " deleted by retention or the topic may have been deleted before all the data in the topic was processed."
    ' If you want your streaming query to continue in such cases, set the source option "failOnDataLoss" to "false".'
)
INT64_MAX = 2**63 - 1


class DataLossError(RuntimeError):
    """Records the query should have read are gone (failOnDataLoss=true)."""


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What an executor needs besides the range; small, pickled with every partition."""

    bootstrap_servers: str
    include_headers: bool
    fail_on_data_loss: bool
    fetch_timeout_ms: int
    fetch_max_bytes: int
    client_properties: tuple[tuple[str, str], ...] = ()  # Kafka's security properties (SourceOptions')


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark input partition: records [from_offset, until_offset) of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    settings: ReadSettings

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


@dataclass(frozen=True, slots=True)
class PlannedRange:
    tp: TopicPartition
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def rate_limit(
    start: Mapping[TopicPartition, int],
    new_from: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    limit: int,
) -> PartitionOffsets:
    """End offsets taking at most about `limit` records, shared in proportion to each partition's backlog.

    `new_from` holds the earliest offsets of partitions not in `start`. A
    partition's share below one record is rounded up (never starve a small
    partition), above one rounded down; the result never passes `latest`.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_from.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, new_from.get(tp))
        assert begin is not None
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, INT64_MAX if share > INT64_MAX - begin else begin + share)
    return out


def offset_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_from: Mapping[TopicPartition, int],
    report_data_loss,
) -> list[PlannedRange]:
    """The ranges between two offset maps, sorted; what cannot be read is passed to `report_data_loss(message)`.

    `new_from`: earliest offsets of partitions in `end` but not in `start`
    (missing when the partition vanished again before we could ask).
    """
    gone = sorted(set(start) - set(end))
    if gone:
        report_data_loss(f"partitions {', '.join(str(tp) for tp in gone)} are gone")
    ranges = []
    for tp in sorted(end):
        until = end[tp]
        if tp in start:
            begin = start[tp]
        elif tp in new_from:
            begin = new_from[tp]
            if begin != 0:
                report_data_loss(f"added partition {tp} starts from offset {begin} instead of 0")
        else:
            report_data_loss(f"cannot find the earliest offset of new partition {tp}: it was deleted")
            continue
        if until < begin:
            report_data_loss(f"partition {tp}'s offset was changed from {begin} to {until}")
            continue
        if until > begin:
            ranges.append(PlannedRange(tp, begin, until))
    return ranges


def split_ranges(
    ranges: list[PlannedRange], min_partitions: int | None, max_records_per_partition: int | None
) -> list[PlannedRange]:
    """One range per topic-partition, split further when `minPartitions` or `maxRecordsPerPartition` ask."""
    out = ranges
    if min_partitions is not None and len(out) < min_partitions:
        total = sum(r.size for r in out)
        split = []
        for r in out:
            parts = max(round(r.size / total * min_partitions), 1) if total else 1
            split.extend(_divide(r, parts))
        out = split
    if max_records_per_partition is not None:
        out = [piece for r in out for piece in _divide(r, math.ceil(r.size / max_records_per_partition))]
    return out


def _divide(r: PlannedRange, parts: int) -> list[PlannedRange]:
    """`parts` nearly equal consecutive pieces (the first ones one record longer)."""
    parts = max(1, min(parts, r.size))
    step, extra = divmod(r.size, parts)
    pieces = []
    begin = r.from_offset
    for i in range(parts):
        until = begin + step + (1 if i < extra else 0)
        pieces.append(PlannedRange(r.tp, begin, until))
        begin = until
    return pieces


def data_loss_reporter(fail_on_data_loss: bool, logger):
    """Kafka's `reportDataLoss`: raise with the instruction, or log a warning and carry on."""

    def report(message: str) -> None:
        if fail_on_data_loss:
            raise DataLossError(f"{message}. {INSTRUCTION_FAIL_ON_DATA_LOSS}")
        logger.warning("spark_data_loss: %s. Some data may have been lost; continuing (failOnDataLoss=false)", message)

    return report
