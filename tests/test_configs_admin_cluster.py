"""Topic and broker configs through the SDK (`Admin.describe_configs` / `alter_configs` /
`incremental_alter_configs`) and the tools (`zkraft topics --bootstrap-server --describe`, `zkraft configs
--bootstrap-server`) against real brokers on a real quorum."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from client import Admin, AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic
from client.kafka.errors import InvalidRequestError, UnknownTopicOrPartitionError
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration
TOOL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    root = tmp_path_factory.mktemp("configs-cluster")
    with KafkaCluster(root, brokers=3, broker_properties={"log.segment.bytes": "5000000"}) as kafka:
        kafka.start()
        yield kafka


@pytest.fixture(scope="module")
def admin(cluster: KafkaCluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap_servers) as client:
        yield client


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
    )


def _topic_entries(admin: Admin, topic: str) -> dict[str, tuple[str | None, str]]:
    [description] = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    return {name: (e.value, e.source) for name, e in description.entries.items()}


def test_describe_and_alter_topic_configs(cluster: KafkaCluster, admin: Admin) -> None:
    admin.create_topics([NewTopic("cfg", 2, 2, topic_configs={"retention.ms": "100000"})])
    entries = _topic_entries(admin, "cfg")
    assert len(entries) == 26
    assert entries["retention.ms"] == ("100000", "DYNAMIC_TOPIC_CONFIG")
    assert entries["segment.bytes"] == ("5000000", "STATIC_BROKER_CONFIG")  # server.properties' log.segment.bytes
    assert entries["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")

    admin.alter_configs([ConfigResource("TOPIC", "cfg", configs={"cleanup.policy": "compact"})])
    entries = _topic_entries(admin, "cfg")
    assert entries["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG")
    assert entries["retention.ms"] == ("604800000", "DEFAULT_CONFIG")  # AlterConfigs replaced the whole set

    admin.incremental_alter_configs(
        [ConfigResource("TOPIC", "cfg", operations=[AlterConfigOp("cleanup.policy", "delete", "APPEND")])]
    )
    assert _topic_entries(admin, "cfg")["cleanup.policy"] == ("compact,delete", "DYNAMIC_TOPIC_CONFIG")

    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_configs([ConfigResource("TOPIC", "no-such-topic")])
    with pytest.raises(InvalidRequestError, match="Not a number of type LONG"):
        admin.alter_configs([ConfigResource("TOPIC", "cfg", configs={"retention.ms": "soon"})])


def test_broker_configs_go_to_that_broker(admin: Admin) -> None:
    [described] = admin.describe_configs([ConfigResource("BROKER", "2", configs={"broker.id": ""})])
    assert described.entries["broker.id"].value == "2"
    assert described.entries["broker.id"].source == "STATIC_BROKER_CONFIG"
    admin.alter_configs([ConfigResource("BROKER", "2", configs={"follower.replication.throttled.rate": "1000000"})])
    [described] = admin.describe_configs([ConfigResource("BROKER", "2")])
    rate = described.entries["follower.replication.throttled.rate"]
    assert (rate.value, rate.source, rate.read_only) == ("1000000", "DYNAMIC_BROKER_CONFIG", False)
    with pytest.raises(InvalidRequestError, match=r"Cannot update these configs dynamically: Set\(log.retention.ms\)"):
        admin.alter_configs([ConfigResource("BROKER", "2", configs={"log.retention.ms": "1"})])
    admin.alter_configs([ConfigResource("BROKER", "2", configs={})])


def test_topics_describe_shows_the_configs_column(cluster: KafkaCluster, admin: Admin) -> None:
    admin.create_topics([NewTopic("shown", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    done = _tool("topics", *bootstrap, "--describe", "--topic", "shown")
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    assert header == (
        "Topic: shown\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,segment.bytes=5000000"
    )
    overrides = _tool("topics", *bootstrap, "--describe", "--topics-with-overrides")
    assert overrides.returncode == 0, overrides.stderr
    lines = overrides.stdout.splitlines()
    assert any(line.startswith("Topic: shown\t") for line in lines)
    assert not any(line.startswith("\tTopic:") for line in lines)  # no partition lines with --topics-with-overrides


def test_configs_tool_with_bootstrap_server(cluster: KafkaCluster, admin: Admin) -> None:
    admin.create_topics([NewTopic("tooled", 1, 1)])
    bootstrap = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "topics"]
    done = _tool(*bootstrap, "--entity-name", "tooled", "--alter", "--add-config", "retention.ms=5000,flush.ms=100")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating config for topic tooled."
    described = _tool(*bootstrap, "--entity-name", "tooled", "--describe")
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines() == [
        "Dynamic configs for topic tooled are:",
        "  flush.ms=100 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:flush.ms=100}",
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}",
    ]
    done = _tool(*bootstrap, "--entity-name", "tooled", "--alter", "--delete-config", "flush.ms")
    assert done.returncode == 0, done.stderr
    assert _topic_entries(admin, "tooled")["flush.ms"][1] == "DEFAULT_CONFIG"
    every = _tool(*bootstrap, "--entity-name", "tooled", "--describe", "--all")
    assert every.stdout.splitlines()[0] == "All configs for topic tooled are:"
    assert "  segment.bytes=5000000 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.segment.bytes=5000000, " in (
        every.stdout
    )
    bad = _tool(*bootstrap, "--entity-name", "tooled", "--alter", "--add-config", "retention.ms=soon")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "Invalid value soon for configuration retention.ms: Not a number of type LONG" in bad.stderr
    missing = _tool(*bootstrap, "--entity-name", "tooled", "--alter", "--delete-config", "nope")
    assert missing.returncode != 0 and "Invalid config(s): nope" in missing.stderr


def test_configs_tool_broker_default_and_every_broker(cluster: KafkaCluster) -> None:
    brokers = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers"]
    done = _tool(*brokers, "--entity-default", "--alter", "--add-config", "leader.replication.throttled.rate=2000000")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating default config for brokers in the cluster."
    described = _tool(*brokers, "--describe")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    for broker_id in (1, 2, 3):
        assert f"Dynamic configs for broker {broker_id} are:" in lines
    default_at = lines.index("Default configs for brokers in the cluster are:")
    assert lines[default_at + 1] == (
        "  leader.replication.throttled.rate=2000000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=2000000}"
    )
    refused = _tool(*brokers, "--entity-default", "--alter", "--add-config", "log.retention.ms=1")
    assert (
        refused.returncode != 0 and "Cannot update these configs dynamically: Set(log.retention.ms)" in refused.stderr
    )
    done = _tool(*brokers, "--entity-default", "--alter", "--delete-config", "leader.replication.throttled.rate")
    assert done.returncode == 0, done.stderr
