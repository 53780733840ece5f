"""Apache Kafka's own Java tools, unchanged, against zkraft's Kafka listeners (issue 27).

What a Kafka user runs from Kafka's bin/ folder, pointed at a 3-broker zkraft cluster's Kafka bootstrap list:
kafka-topics.sh --bootstrap-server (create with configs, --describe with ISR and Configs, --list, --delete,
and the error Kafka gives for a replication factor above the broker count), kafka-producer-perf-test.sh with
acks=all and each compression codec, kafka-console-consumer.sh reading those records back in a group, and
kafka-consumer-groups.sh --list / --describe showing that group's committed offsets with no lag.

The tools are Apache Kafka 3.9's (tests/kafka39/pom.xml, resolved from Maven Central once per checkout),
run as their scripts run them: `java -cp <jars> <main class>`. A 3.9 client negotiates every API down to
what the broker advertises in ApiVersions (Kafka 2.8's versions), as it does against a 2.8 broker. The test
skips with one line when java or mvn is missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import maven_jars
from tests.helpers import wait_until
from tests.kafka39_harness import KafkaTools, parse_describe

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TOPICS_MAIN = "org.apache.kafka.tools.TopicCommand"  # bin/kafka-topics.sh
PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"  # bin/kafka-producer-perf-test.sh
CONSUMER_MAIN = "org.apache.kafka.tools.consumer.ConsoleConsumer"  # bin/kafka-console-consumer.sh
GROUPS_MAIN = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # bin/kafka-consumer-groups.sh

BROKERS = 3
# A loaded 2-core machine can take most of a minute to start three brokers and a quorum.
CLUSTER_START_TIMEOUT_S = 180.0
PERF_RECORDS = 3000
RECORD_BYTES = 100
TOOL_TIMEOUT_S = 180.0
TOPIC_GONE_TIMEOUT_S = 60.0
# kafka-producer-perf-test's last line: "3000 records sent, 1234.5 records/sec (0.12 MB/sec), ..."
PERF_TOTAL = re.compile(r"^(\d+) records sent, [\d.]+ records/sec", re.MULTILINE)
# kafka-consumer-groups --describe: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
GROUP_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\d+|-)\s+(\d+|-)\s+(\d+|-)\s", re.MULTILINE)


@pytest.fixture(scope="module")
def jars() -> Path:
    reason = maven_jars.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return maven_jars.resolve()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("kafka"), brokers=BROKERS) as kafka:
        kafka.start(timeout_s=CLUSTER_START_TIMEOUT_S)
        yield kafka


@pytest.fixture(scope="module")
def tools(jars: Path, tmp_path_factory: pytest.TempPathFactory) -> KafkaTools:
    return KafkaTools(tmp_path_factory.mktemp("tools"), jars)


def topics_tool(tools: KafkaTools, cluster, *args: str) -> str:
    return tools.run_ok(TOPICS_MAIN, ["--bootstrap-server", cluster.kafka_bootstrap_servers, *args], None,
                        TOOL_TIMEOUT_S)  # fmt: skip


def test_topics_tool_creates_with_configs_describes_lists_and_deletes(tools: KafkaTools, cluster) -> None:
    topic = "java-topics"
    topics_tool(
        tools, cluster, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3",
        "--config", "retention.ms=3600000", "--config", "max.message.bytes=200000",
    )  # fmt: skip
    assert topic in topics_tool(tools, cluster, "--list").split()

    described = topics_tool(tools, cluster, "--describe", "--topic", topic)
    partitions = parse_describe(described)
    assert [p.partition for p in partitions] == [0, 1, 2]
    for p in partitions:
        assert sorted(p.replicas) == [1, 2, 3], described
        assert sorted(p.isr) == [1, 2, 3], described
        assert p.leader in p.replicas, described
    configs_line = next(line for line in described.splitlines() if "PartitionCount" in line)
    assert "retention.ms=3600000" in configs_line and "max.message.bytes=200000" in configs_line, described

    topics_tool(tools, cluster, "--delete", "--topic", topic)
    wait_until(
        lambda: topic not in topics_tool(tools, cluster, "--list").split(),
        TOPIC_GONE_TIMEOUT_S,
        message=f"{topic} still listed after --delete",
    )


def test_topics_tool_reports_a_replication_factor_above_the_broker_count(tools: KafkaTools, cluster) -> None:
    done = tools.run(
        TOPICS_MAIN,
        ["--bootstrap-server", cluster.kafka_bootstrap_servers, "--create", "--topic", "java-too-many-replicas",
         "--partitions", "1", "--replication-factor", str(BROKERS + 1)],
        timeout_s=TOOL_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode != 0
    assert "InvalidReplicationFactorException" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "java-too-many-replicas" not in topics_tool(tools, cluster, "--list").split()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_producer_perf_test_then_console_consumer_and_consumer_groups(tools: KafkaTools, cluster, codec: str) -> None:
    """kafka-producer-perf-test (acks=all, `codec`) writes; kafka-console-consumer reads every record back in a
    group; kafka-consumer-groups lists the group and describes its offsets at the log end."""
    topic, group = f"java-perf-{codec}", f"java-console-{codec}"
    topics_tool(tools, cluster, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3")
    perf = tools.run_ok(
        PERF_MAIN,
        ["--topic", topic, "--num-records", str(PERF_RECORDS), "--record-size", str(RECORD_BYTES),
         "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.kafka_bootstrap_servers}",
         "acks=all", f"compression.type={codec}", "linger.ms=5"],
        timeout_s=TOOL_TIMEOUT_S,
    )  # fmt: skip
    totals = PERF_TOTAL.findall(perf)
    assert totals and int(totals[-1]) == PERF_RECORDS, perf

    consumed = tools.run_ok(
        CONSUMER_MAIN,
        ["--bootstrap-server", cluster.kafka_bootstrap_servers, "--topic", topic, "--group", group,
         "--from-beginning", "--max-messages", str(PERF_RECORDS), "--timeout-ms", "60000"],
        timeout_s=TOOL_TIMEOUT_S,
    ).splitlines()  # fmt: skip
    assert len(consumed) == PERF_RECORDS
    assert all(len(value) == RECORD_BYTES for value in consumed)  # perf-test's payload: 100 letters a record

    groups = ["--bootstrap-server", cluster.kafka_bootstrap_servers]
    assert group in tools.run_ok(GROUPS_MAIN, [*groups, "--list"], timeout_s=TOOL_TIMEOUT_S).split()
    described = tools.run_ok(GROUPS_MAIN, [*groups, "--describe", "--group", group], timeout_s=TOOL_TIMEOUT_S)
    rows = [row for row in GROUP_ROW.findall(described) if row[0] == group and row[1] == topic]
    assert sorted(int(row[2]) for row in rows) == [0, 1, 2], described
    assert sum(int(row[3]) for row in rows) == PERF_RECORDS, described  # committed offsets
    assert all(row[3] == row[4] and row[5] == "0" for row in rows), described  # at the log end, no lag
