"""The output schema of Spark's Kafka source, as a Spark StructType and as the Arrow schema read() must yield.

`key binary, value binary, topic string, partition int, offset long, timestamp
timestamp, timestampType int` and, with `includeHeaders`, `headers
array<struct<key string, value binary>>` (docs/research/spark.md §2.2). Every field
is nullable, as in Spark's `KafkaRecordToRowConverter`. The Arrow schema is
what `pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")`
produces for it (docs/research/spark.md §1.6); it is written out here so that the
executors do not import pyspark's pandas helpers, and a unit test checks the
two agree.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

SCHEMA_WITHOUT_HEADERS = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
SCHEMA_WITH_HEADERS = StructType([*SCHEMA_WITHOUT_HEADERS.fields, StructField("headers", HEADERS_TYPE)])

ARROW_HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
ARROW_SCHEMA_WITHOUT_HEADERS = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA_WITHOUT_HEADERS.append(pa.field("headers", ARROW_HEADER_TYPE))


def spark_schema(include_headers: bool) -> StructType:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA_WITHOUT_HEADERS


def arrow_schema(include_headers: bool) -> pa.Schema:
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA_WITHOUT_HEADERS
