"""PySpark Python Data Source (streaming and batch, and a sink) that reads through the broker Fetch API.

    import spark_connector
    spark_connector.register(spark)
    df = (spark.readStream.format("zkraft")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

Options, schema and semantics are those of Spark's built-in Kafka source
(docs/research/spark.md §2); see README.md, "Spark".
"""

from __future__ import annotations

import os
from typing import Any

# Before any module of this package imports grpc (brokers.py, fetch_reader.py):
# the `client` package sets up gRPC's poller on import (runtime/grpc_tuning.py).
import client  # noqa: F401

__all__ = ["FORMAT_NAME", "register"]

FORMAT_NAME = "zkraft"


def register(spark: Any) -> None:
    """Registers the `zkraft` format with this SparkSession (`spark.dataSource.register`).

    Spark's Python streaming source runner (a process the JVM starts on the
    driver) does not put `--py-files` on its path, only the environment of
    the registered function (`sc.environment`, the `spark.executorEnv.*`
    settings). So the place this package is imported from (a directory or the
    shipped zip) is added to that PYTHONPATH before registering.
    """
    from spark_connector.source import ZkraftDataSource

    _export_import_root(spark)
    spark.dataSource.register(ZkraftDataSource)


def _export_import_root(spark: Any) -> None:
    package_dir = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(package_dir)  # the directory or .zip holding spark_connector/
    try:
        environment = spark.sparkContext.environment
    except Exception:  # Spark Connect has no SparkContext: its server needs the package installed
        return
    paths = [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        environment["PYTHONPATH"] = os.pathsep.join([root, *paths])
