"""The streaming reader: offsets on the driver, ranges read on the executors (docs/research/spark.md §0, §2.4).

The driver-side instance lives in Spark's Python streaming runner for the
whole query: it resolves the starting offsets, answers `latestOffset(start,
limit)` (Kafka's admission control: `maxOffsetsPerTrigger` as `ReadMaxRows`,
shared across partitions by `rate_limit`; the AvailableNow snapshot caps
it), and plans one `OffsetRange` per topic-partition. Topics matching
`subscribePattern` and partitions added to a topic are found by a metadata
refresh on each `latestOffset`. When idle, Spark polls every 10 ms, and
each poll costs a metadata request and a ListOffsets per leader, so polls
are spaced at least `LATEST_OFFSETS_MIN_INTERVAL_S` apart: a poll that comes
sooner waits out the rest of the interval, then asks the brokers. (A cache
would be cheaper still but answers stale offsets, and then
`processAllAvailable()` returns before records produced just before it.)

Offsets are Kafka's JSON `{"topic":{"0":23}}` holding the next offset to
read, sorted, so a checkpoint reads like Kafka's. `read()` runs on the
executors on a pickled copy of this object, and depends only on the
partition it is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from client import TopicPartition
from spark_connector.brokers import OffsetLookup, TopicGoneError, resolve_offsets
from spark_connector.offsets import PartitionOffsets, from_offset_dict, to_offset_dict
from spark_connector.options import OffsetSpec, SourceOptions, StartKind
from spark_connector.planning import (
    OffsetRange,
    ReadSettings,
    data_loss_reporter,
    offset_ranges,
    rate_limit,
    split_ranges,
)

log = logging.getLogger("zkraft.spark")

LATEST_OFFSETS_MIN_INTERVAL_S = 0.2


def read_settings(options: SourceOptions) -> ReadSettings:
    return ReadSettings(
        bootstrap_servers=options.bootstrap_servers,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        fetch_timeout_ms=options.fetch_timeout_ms,
        fetch_max_bytes=options.fetch_max_bytes,
        client_properties=options.client_properties,
    )


def plan_partitions(
    ranges_start: PartitionOffsets, ranges_end: PartitionOffsets, options: SourceOptions, lookup: OffsetLookup
) -> list[OffsetRange]:
    """Input partitions for [start, end) (shared by the stream and batch readers)."""
    report = data_loss_reporter(options.fail_on_data_loss, log)
    new_from = earliest_of_new(lookup, set(ranges_end) - set(ranges_start))
    ranges = offset_ranges(ranges_start, ranges_end, new_from, report)
    ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    settings = read_settings(options)
    return [OffsetRange(r.tp.topic, r.tp.partition, r.from_offset, r.until_offset, settings) for r in ranges]


def earliest_of_new(lookup: OffsetLookup, new: set[TopicPartition]) -> PartitionOffsets:
    """Earliest offsets of newly seen partitions; a partition deleted since it was seen is left out."""
    if not new:
        return {}
    try:
        return lookup.earliest(new)
    except TopicGoneError:
        present = lookup.existing(new)
        return lookup.earliest(present) if present else {}


class ZkraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._lookup: OffsetLookup | None = None
        self._latest_at = float("-inf")
        self._latest: PartitionOffsets = {}
        self._available_now: PartitionOffsets | None = None
        self._initial: dict | None = None

    def __getstate__(self) -> dict:
        # Executors get a pickled copy: only the options travel, never channels or caches.
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.options.bootstrap_servers, self.options.client_properties)
        return self._lookup

    # ------------------------------------------------------------------ driver

    def initialOffset(self) -> dict:
        # Spark asks twice when a query starts; one answer keeps `latest` from moving between them.
        if self._initial is None:
            self._initial = self._resolve_initial()
        return self._initial

    def _resolve_initial(self) -> dict:
        tps = self.lookup.partitions(self.options.subscription)
        spec = self.options.starting or OffsetSpec(StartKind.LATEST)
        offsets = resolve_offsets(
            spec,
            tps,
            self.lookup,
            "startingOffsets",
            self.options.starting_timestamp_strategy,
            data_loss_reporter(self.options.fail_on_data_loss, log),
        )
        return to_offset_dict(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._fetch_latest(fresh=True)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_offsets = from_offset_dict(start, "start offsets")
        latest = self._available_now if self._available_now is not None else self._fetch_latest()
        if isinstance(limit, ReadMaxRows):
            new_from = earliest_of_new(self.lookup, set(latest) - set(start_offsets))
            end = rate_limit(start_offsets, new_from, latest, limit.max_rows)
        else:
            end = latest
        return to_offset_dict(end)

    def reportLatestOffset(self) -> dict | None:
        return to_offset_dict(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return plan_partitions(
            from_offset_dict(start, "start offsets"), from_offset_dict(end, "end offsets"), self.options, self.lookup
        )

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in the brokers (as Kafka's source)."""

    def _fetch_latest(self, fresh: bool = False) -> PartitionOffsets:
        wait_s = self._latest_at + LATEST_OFFSETS_MIN_INTERVAL_S - time.monotonic()
        if wait_s > 0 and not fresh:
            time.sleep(wait_s)  # spacing idle polls (rate limiting), not synchronisation
        self._latest_at = time.monotonic()
        self._latest = self._latest_of(self.lookup.partitions(self.options.subscription))
        return self._latest

    def _latest_of(self, tps: set[TopicPartition]) -> PartitionOffsets:
        try:
            return self.lookup.latest(tps)
        except TopicGoneError:
            present = self.lookup.existing(tps)
            return self.lookup.latest(present) if present else {}

    # ------------------------------------------------------------------ executors

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Imported here: the driver's streaming runner, a new process per query, never reads (numpy, the decoder).
        from spark_connector.fetch_reader import read_range

        if isinstance(partition, OffsetRange):
            yield from read_range(partition)
