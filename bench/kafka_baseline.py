"""The real-Kafka baseline of the benchmarks: three Apache Kafka brokers on a real ZooKeeper, on this machine.

    with RealKafka(root) as kafka:                  # ZooKeeper (standalone), then 3 brokers; waits for both
        kafka.bootstrap_servers                     # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        kafka.create_topic("t", partitions=3, replication_factor=3)
        kafka.broker_pids()                         # for the brokers' CPU time (/proc/<pid>/stat)

The same shape zkraft's benchmarks run (3 brokers), from the jars of tests/kafka39/pom.xml (Apache Kafka
3.9, the last release with ZooKeeper mode; resolved from Maven Central once per checkout) and PySpark's
ZooKeeper jars, through the test harnesses (tests/kafka39_harness.py, tests/real_zookeeper.py). Unlike the
tests, the brokers run with the JVM settings Kafka's own start scripts give them (kafka-server-start.sh's
heap, kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS), with a smaller heap for a small machine: a baseline
slowed by test-sized JVM options would flatter whatever is compared with it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tests import maven_jars
from tests.kafka39_harness import Kafka39Brokers
from tests.real_zookeeper import RealZooKeeper

BROKERS = 3
ZOOKEEPER_START_TIMEOUT_S = 60.0
BROKER_START_TIMEOUT_S = 240.0
TOPIC_TIMEOUT_S = 120.0
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (3.9) and kafka-server-start.sh's equal -Xms/-Xmx (1G there).
KAFKA_JVM_OPTIONS = (
    "-Xms512m", "-Xmx512m",
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
)  # fmt: skip
# Kafka's defaults where the test harness shortens them for quick tests; the rest of the harness's
# server.properties (no log cleaner, no auto-created topics, internal topics of one partition) stays.
BENCH_BROKER_PROPERTIES = {
    "num.network.threads": "3",
    "num.io.threads": "8",
    "replica.lag.time.max.ms": "30000",
}


class BaselineUnavailable(RuntimeError):
    """java, mvn or PySpark's ZooKeeper jars are missing; the message says which."""


def unavailable_reason() -> str | None:
    """Why the real-Kafka baseline cannot run here, or None when it can."""
    from tests.real_zookeeper import unavailable_reason as zookeeper_unavailable

    return maven_jars.unavailable_reason() or zookeeper_unavailable()


class RealKafka:
    """A standalone ZooKeeper and `BROKERS` Kafka 3.9 brokers, SIGKILLed when the `with` ends."""

    def __init__(self, root: Path) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise BaselineUnavailable(reason)
        self.root = Path(root)
        self._stack = contextlib.ExitStack()
        self.zookeeper = RealZooKeeper(self.root / "zookeeper", n=1)
        self.brokers = Kafka39Brokers(
            self.root / "kafka",
            maven_jars.resolve(),
            self.zookeeper.connect_string,
            n=BROKERS,
            properties=BENCH_BROKER_PROPERTIES,
            jvm_options=KAFKA_JVM_OPTIONS,
        )

    def __enter__(self) -> RealKafka:
        self._stack.enter_context(self.zookeeper)
        self._stack.enter_context(self.brokers)
        try:
            self.zookeeper.start_all()
            self.zookeeper.wait_serving(ZOOKEEPER_START_TIMEOUT_S)
            self.brokers.start_all()
            self.brokers.wait_started(BROKER_START_TIMEOUT_S)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def bootstrap_servers(self) -> str:
        return self.brokers.bootstrap_servers(range(1, BROKERS + 1))

    def broker_pids(self) -> list[int]:
        return [pid for broker_id in range(1, BROKERS + 1) if (pid := self.brokers.pid(broker_id)) is not None]

    def coordination_pids(self) -> list[int]:
        """ZooKeeper's process: what Kafka leans on as zkraft's brokers lean on the quorum."""
        return [pid for node_id in self.zookeeper.addresses if (pid := self.zookeeper.pid(node_id)) is not None]

    def create_topic(self, topic: str, partitions: int, replication_factor: int, **configs: str) -> None:
        """kafka-topics.sh --create, as a Kafka user creates one; `configs` with "_" for "." (retention_ms="-1")."""
        overrides = [arg for key, value in configs.items() for arg in ("--config", f"{key.replace('_', '.')}={value}")]
        self.brokers.topics(
            "--create", "--topic", topic, "--partitions", str(partitions),
            "--replication-factor", str(replication_factor), *overrides, timeout_s=TOPIC_TIMEOUT_S,
        )  # fmt: skip
