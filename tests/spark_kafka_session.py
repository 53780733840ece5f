"""A SparkSession with Spark's own Kafka source and sink (`format("kafka")`) on its classpath.

    reason = maven_jars.unavailable_reason()        # None, or why not (no mvn, no java): skip with it
    jars = spark_kafka_jars()                       # tests/spark_kafka/pom.xml, resolved once per checkout
    spark = start_spark_with_kafka("my-test", jars)
    spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "t").load()

The jars (spark-sql-kafka-0-10 and what it needs beyond PySpark's own jars) go in `spark.jars`, which Spark
reads only when its JVM starts: a session already running in this process (getOrCreate would hand it back)
does not get them, so `start_spark_with_kafka` refuses to run when one is active instead of returning a
session without the source, and shuts down the JVM a stopped session left behind before it starts its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests import maven_jars

REPO_ROOT = Path(__file__).resolve().parent.parent
SPARK_KAFKA_POM = REPO_ROOT / "tests" / "spark_kafka" / "pom.xml"
# The jar that registers the "kafka" short name (its META-INF/services DataSourceRegister).
SOURCE_JAR_PREFIX = "spark-sql-kafka-0-10_"

# `local[2]`, loopback only, no UI: the settings every Spark test and bench here shares.
BASE_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.stopTimeout": "30s",
}


class SparkKafkaUnavailable(RuntimeError):
    """The Kafka source's jars are missing or a SparkSession without them is already running."""


def spark_kafka_jars(jars_dir: Path | None = None) -> list[Path]:
    """The jars of tests/spark_kafka/pom.xml (resolving the pom first when `jars_dir` is None)."""
    folder = jars_dir if jars_dir is not None else maven_jars.resolve(SPARK_KAFKA_POM)
    jars = sorted(Path(folder).glob("*.jar"))
    if not any(jar.name.startswith(SOURCE_JAR_PREFIX) for jar in jars):
        raise SparkKafkaUnavailable(f"no {SOURCE_JAR_PREFIX}*.jar in {folder}")
    return jars


def start_spark_with_kafka(
    app: str, jars: list[Path], master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> Any:
    """A new SparkSession whose classpath holds `jars`, with the repository importable by Python workers."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        raise SparkKafkaUnavailable("a SparkSession is already running in this process: spark.jars would not apply")
    _shut_down_idle_jvm()
    paths = [str(REPO_ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    settings = {**BASE_CONF, "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"], **(conf or {})}
    if jars:
        settings["spark.jars"] = ",".join(str(jar) for jar in jars)
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except PySparkRuntimeError:
        # The JVM launch fails now and then on a loaded machine; a second launch is the documented remedy.
        return builder.getOrCreate()


def _shut_down_idle_jvm() -> None:
    """A JVM left by an earlier, stopped session (another test module's) would be reused without `spark.jars`,
    and the "kafka" source would be missing: shut it down, so that the next session launches its own."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
