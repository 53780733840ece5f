"""The `zkraft` data source: Spark's Kafka source and sink contract over the zkraft brokers.

Named `zkraft`, not `kafka`: Spark resolves `kafka` to its JVM connector
before it looks at Python data sources (docs/research/spark.md §0.6). Options are
validated when Spark asks for the schema, i.e. at `load()`; the checks that
depend on batch versus streaming (`latest` as a batch start, `endingOffsets`
in a stream) run when Spark asks for the reader.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_connector.options import (
    SourceOptions,
    check_for_batch,
    check_for_stream,
    parse_sink_options,
    parse_source_options,
)
from spark_connector.schema import spark_schema

FORMAT_NAME = "zkraft"


class ZkraftDataSource(DataSource):
    """Read (batch and streaming) and write zkraft topics; options as Spark's Kafka connector."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _source_options(self) -> SourceOptions:
        return parse_source_options(self.options)

    def schema(self) -> StructType:
        return spark_schema(self._source_options().include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        from spark_connector.batch_reader import ZkraftBatchReader

        options = self._source_options()
        check_for_batch(options)
        return ZkraftBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from spark_connector.stream_reader import ZkraftStreamReader

        options = self._source_options()
        check_for_stream(options)
        return ZkraftStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from spark_connector.sink import ZkraftBatchWriter, check_sink_schema

        options = parse_sink_options(self.options)
        return ZkraftBatchWriter(options, check_sink_schema(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from spark_connector.sink import ZkraftStreamWriter, check_sink_schema

        options = parse_sink_options(self.options)
        return ZkraftStreamWriter(options, check_sink_schema(schema, options))
