"""The batch reader: `spark.read.format("zkraft")` between startingOffsets (default earliest) and endingOffsets.

Offsets are resolved once, on the driver, when Spark plans the read; the
ranges are read on the executors exactly as a micro-batch's are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_connector.brokers import OffsetLookup, resolve_offsets
from spark_connector.fetch_reader import read_range
from spark_connector.options import OffsetSpec, OptionError, SourceOptions, StartKind
from spark_connector.planning import OffsetRange, data_loss_reporter
from spark_connector.stream_reader import plan_partitions

log = logging.getLogger("zkraft.spark")


class ZkraftBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        lookup = OffsetLookup(options.bootstrap_servers, options.client_properties)
        tps = lookup.partitions(options.subscription)
        report = data_loss_reporter(options.fail_on_data_loss, log)
        start_spec = options.starting or OffsetSpec(StartKind.EARLIEST)
        start = resolve_offsets(start_spec, tps, lookup, "startingOffsets", options.starting_timestamp_strategy, report)
        end = resolve_offsets(options.ending, tps, lookup, "endingOffsets", "latest", report)
        backwards = sorted(f"{tp} ({start[tp]} > {end[tp]})" for tp in tps if end[tp] < start[tp])
        if backwards:
            raise OptionError(f"endingOffsets is before startingOffsets for {', '.join(backwards)}")
        return plan_partitions(start, end, options, lookup)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):
            yield from read_range(partition)
