"""Batch and streaming sinks: `df.write.format("zkraft")` / `df.writeStream.format("zkraft")`, with the Producer.

Columns as Spark's Kafka sink takes them (docs/research/spark.md §2.7): `value`
(string or binary, required), `key` (string or binary, optional), `topic`
(string; required unless the `topic` option is set, which wins), `partition`
(int, optional: null lets the producer's partitioner choose) and `headers`
(array<struct<key string, value binary>>, optional, written with
`includeHeaders=true`). Other columns are ignored. Semantics are at least once,
as Kafka's sink: a task that fails after some sends were acknowledged is
retried by Spark and sends them again.

Each task writes its Arrow batches through one Producer kept per worker
process and bootstrap list, flushes, and fails if any record failed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from client import Producer
from client.kafka.security_config import client_security
from spark_connector.options import OptionError, SinkOptions

# A task waits this long at most for its records to be acknowledged.
FLUSH_TIMEOUT_S = 120.0

_producers: dict[SinkOptions, Producer] = {}
_producers_lock = threading.Lock()


@dataclass(frozen=True)
class SinkCommit(WriterCommitMessage):
    records: int


@dataclass(frozen=True, slots=True)
class SinkColumns:
    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool


def check_sink_schema(schema: StructType, options: SinkOptions) -> SinkColumns:
    """Kafka's `KafkaWriter.validateQuery`: OptionError naming the column that is missing or has the wrong type."""
    fields = {f.name: f.dataType for f in schema.fields}
    text_or_binary = (StringType, BinaryType)

    def check(name: str, types: tuple[type, ...], what: str) -> bool:
        if name not in fields:
            return False
        if not isinstance(fields[name], types):
            raise OptionError(f"column {name} must be {what}, got {fields[name].simpleString()}")
        return True

    if not check("value", text_or_binary, "string or binary"):
        raise OptionError("the DataFrame needs a value column (string or binary)")
    has_topic = check("topic", (StringType,), "string")
    if not has_topic and options.topic is None:
        raise OptionError("no topic: give the DataFrame a topic column or set the option topic")
    has_headers = check("headers", (ArrayType,), "array<struct<key: string, value: binary>>")
    if has_headers:
        element = fields["headers"].elementType  # type: ignore[attr-defined]
        names = [f.name for f in getattr(element, "fields", [])]
        if names != ["key", "value"]:
            raise OptionError(f"column headers must be array<struct<key string, value binary>>, got {element}")
    return SinkColumns(
        has_key=check("key", text_or_binary, "string or binary"),
        has_topic=has_topic,
        has_partition=check("partition", (IntegerType,), "int"),
        has_headers=has_headers and options.include_headers,
    )


def producer_for(options: SinkOptions) -> Producer:
    producer = _producers.get(options)
    if producer is None:
        with _producers_lock:
            producer = _producers.get(options)
            if producer is None:
                producer = Producer(
                    options.bootstrap_servers,
                    acks=-1 if options.acks == "all" else int(options.acks),
                    linger_ms=options.linger_ms,
                    batch_size=options.batch_size,
                    compression_type=options.compression_type,
                    client_id="zkraft-spark-sink",
                    **client_security(dict(options.client_properties)),
                )
                _producers[options] = producer
    return producer


def write_batches(options: SinkOptions, columns: SinkColumns, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    producer = producer_for(options)
    futures = []
    count = 0
    for batch in batches:
        futures.extend(_send_batch(producer, options, columns, batch))
        count += batch.num_rows
    producer.flush(FLUSH_TIMEOUT_S)
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return SinkCommit(count)


def _send_batch(producer: Producer, options: SinkOptions, columns: SinkColumns, batch: pa.RecordBatch) -> list:
    n = batch.num_rows
    values = _bytes_column(batch.column("value"))
    keys = _bytes_column(batch.column("key")) if columns.has_key else [None] * n
    if options.topic is not None:
        topics = [options.topic] * n
    else:
        topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist() if columns.has_partition else [None] * n
    headers = batch.column("headers").to_pylist() if columns.has_headers else [None] * n
    futures = []
    send = producer.send
    for topic, key, value, partition, hdrs in zip(topics, keys, values, partitions, headers, strict=True):
        if topic is None:
            raise OptionError("a row has a null topic and the option topic is not set")
        futures.append(
            send(
                topic,
                value=value,
                key=key,
                partition=partition,
                headers=[(h["key"], h["value"]) for h in hdrs] if hdrs else None,
            )
        )
    return futures


def _bytes_column(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


class ZkraftBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_batches(self.options, self.columns, iterator)

    def commit(self, messages) -> None:
        """Records are acknowledged by the brokers when write() returns; nothing left to commit."""

    def abort(self, messages) -> None:
        """Sent records cannot be taken back (at least once, as Kafka's sink)."""


class ZkraftStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_batches(self.options, self.columns, iterator)

    def commit(self, messages, batchId: int) -> None:  # noqa: N803 (Spark's parameter name)
        """Acknowledged already; see ZkraftBatchWriter.commit."""

    def abort(self, messages, batchId: int) -> None:  # noqa: N803
        """See ZkraftBatchWriter.abort."""
