"""Streaming word count over a zkraft topic, printed to the console: Spark's Kafka example with one word changed.

Against `zkraft up` (brokers on 127.0.0.1:9092-9094):

    zkraft topics --zookeeper 127.0.0.1:7001 --create --topic lines --partitions 4 --replication-factor 3
    python3 examples/streaming_word_count.py --bootstrap-servers 127.0.0.1:9092 --topic lines &
    zkraft console-producer --bootstrap-server 127.0.0.1:9092 --topic lines     # type some lines

On a Spark cluster, ship the connector with the job (see README.md, "Spark"):

    spark-submit --py-files zkraft-connector.zip examples/streaming_word_count.py \
        --bootstrap-servers broker1:9092 --topic lines

Only the format name (`zkraft` instead of `kafka`) differs from a job written for Spark's Kafka source.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Run from a checkout without installing: the repository root must be importable here and in Spark's Python
# workers (which inherit PYTHONPATH). With the wheel installed, or with --py-files, this is a no-op.
REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="lines")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest or Kafka's offsets JSON")
    parser.add_argument("--checkpoint", default=None, help="checkpoint directory (resume where the last run ended)")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--master", default=None, help="e.g. local[2]; spark-submit sets it otherwise")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import spark_connector

    builder = SparkSession.builder.appName("zkraft-word-count").config("spark.sql.shuffle.partitions", "4")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    spark_connector.register(spark)

    lines = (
        spark.readStream.format("zkraft")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .load()
        .selectExpr("CAST(value AS STRING) AS line")
    )
    counts = lines.select(F.explode(F.split(F.lower("line"), r"\W+")).alias("word")).where("word != ''")
    counts = counts.groupBy("word").count().orderBy(F.desc("count"))

    writer = counts.writeStream.outputMode("complete").format("console").option("truncate", "false")
    if args.checkpoint:
        writer = writer.option("checkpointLocation", args.checkpoint)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
