"""Kafka's own admin clients against a 3-broker zkraft cluster through the Kafka listener: confluent-kafka's
AdminClient (librdkafka) and kafka-python's KafkaAdminClient create, describe, alter and delete as they do
against Kafka 2.8, and get Kafka's errors."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from client.kafka.znodes import decode_topic, topic_path
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = pytest.mark.integration
REQUEST_TIMEOUT_S = 30.0
SEGMENT_BYTES = "5000000"  # in every broker's server.properties: describes as STATIC_BROKER_CONFIG


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    root = tmp_path_factory.mktemp("wire-admin")
    with KafkaCluster(root, brokers=3, broker_properties={"log.segment.bytes": SEGMENT_BYTES}) as kafka:
        kafka.start()
        yield kafka


def _metadata_complete(bootstrap: str) -> bool:
    """Every broker's Metadata names all three brokers and the controller. Until the controller's first
    UpdateMetadata reaches a broker, its answer has neither, and an AdminClient that saw it waits for a
    controller until its next periodic refresh (librdkafka: minutes)."""
    for address in bootstrap.split(","):
        probe = AdminClient({"bootstrap.servers": address})
        try:
            metadata = probe.list_topics(timeout=5.0)
        except KafkaException:
            return False
        if len(metadata.brokers) != 3 or metadata.controller_id < 1:
            return False
    return True


@pytest.fixture(scope="module")
def admin(cluster: KafkaCluster) -> AdminClient:
    bootstrap = cluster.kafka_bootstrap_servers
    wait_until(lambda: _metadata_complete(bootstrap), REQUEST_TIMEOUT_S, message="every broker's metadata is complete")
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 30000})


def _result(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(timeout=REQUEST_TIMEOUT_S) for key, future in futures.items()}


def _error(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=REQUEST_TIMEOUT_S)
    return raised.value.args[0]


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    [configs] = _result(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])).values()
    return configs


def test_create_with_configs_then_metadata_and_describe(admin: AdminClient) -> None:
    topic = NewTopic("wire", num_partitions=3, replication_factor=3, config={"retention.ms": "100000"})
    _result(admin.create_topics([topic], operation_timeout=REQUEST_TIMEOUT_S))

    def in_sync() -> bool:
        metadata = admin.list_topics(topic="wire", timeout=REQUEST_TIMEOUT_S).topics["wire"]
        partitions = metadata.partitions.values()
        return len(partitions) == 3 and all(len(p.isrs) == 3 and p.leader >= 1 for p in partitions)

    wait_until(in_sync, REQUEST_TIMEOUT_S, message="the new topic's partitions have leaders and a full ISR")
    configs = _topic_configs(admin, "wire")
    assert configs["retention.ms"].value == "100000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].value == SEGMENT_BYTES
    assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    assert len(configs) == 26


def _znode_topic_id(cluster: KafkaCluster, topic: str) -> bytes | None:
    """The topic znode's id (2.8 writes Uuid.toString: URL-safe base64) as its 16 bytes."""
    data, _ = cluster.zk.get(topic_path(topic))
    topic_id = decode_topic(topic, data).topic_id
    return None if topic_id is None else base64.urlsafe_b64decode(topic_id + "==")


def _described_topic_id(admin: AdminClient, topic: str) -> bytes | None:
    """librdkafka's DescribeTopics (Metadata v10+): the id's 16 bytes (librdkafka prints standard base64);
    None while the brokers do not know the topic yet."""
    [future] = admin.describe_topics(TopicCollection([topic])).values()
    try:
        description = future.result(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise
    return base64.b64decode(str(description.topic_id) + "==")


def test_topic_ids_from_creation_and_for_a_topic_written_without_one(cluster: KafkaCluster, admin: AdminClient) -> None:
    """KIP-516 (2.8): a created topic's id is written in its znode and served in Metadata v10+; a topic znode
    without one (written before 2.8) gets one from the controller, kept in the znode."""
    _result(admin.create_topics([NewTopic("with-id", 1, 1)], request_timeout=REQUEST_TIMEOUT_S))
    created_id = _znode_topic_id(cluster, "with-id")
    assert created_id is not None
    wait_until(lambda: _described_topic_id(admin, "with-id") == created_id, REQUEST_TIMEOUT_S,
               message="Metadata does not serve the znode's topic id")  # fmt: skip
    broker = cluster.broker_ids[0]
    cluster.zk.create(topic_path("legacy"), b'{"version":1,"partitions":{"0":[%d]}}' % broker)
    wait_until(lambda: _znode_topic_id(cluster, "legacy") is not None, REQUEST_TIMEOUT_S,
               message="the controller gave the topic no id")  # fmt: skip
    legacy_id = _znode_topic_id(cluster, "legacy")
    assert legacy_id != created_id
    wait_until(lambda: _described_topic_id(admin, "legacy") == legacy_id, REQUEST_TIMEOUT_S,
               message="Metadata does not serve the assigned topic id")  # fmt: skip
    assert cluster.assignment("legacy") == {0: (broker,)}


def test_alter_and_incremental_alter_then_describe(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("altered", 1, 1, config={"retention.ms": "100000"})]))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "altered", set_config={"cleanup.policy": "compact"})
    _result(admin.alter_configs([resource]))
    configs = _topic_configs(admin, "altered")
    assert configs["cleanup.policy"].value == "compact" and not configs["cleanup.policy"].is_default
    assert configs["retention.ms"].is_default  # AlterConfigs replaces the whole override set

    incremental = ConfigResource(
        ConfigResource.Type.TOPIC,
        "altered",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    _result(admin.incremental_alter_configs([incremental]))
    configs = _topic_configs(admin, "altered")
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["segment.ms"].value == "60000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.TOPIC, "altered", set_config={"retention.ms": "soon"})
    [future] = admin.alter_configs([bad]).values()
    error = _error(future)
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Invalid value soon for configuration retention.ms: Not a number of type LONG" in error.str()


def test_create_partitions_and_delete(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("grown", 1, 2)]))
    _result(admin.create_partitions([NewPartitions("grown", 4)]))
    wait_until(
        lambda: len(admin.list_topics(topic="grown", timeout=REQUEST_TIMEOUT_S).topics["grown"].partitions) == 4,
        REQUEST_TIMEOUT_S,
        message="four partitions in the metadata",
    )
    [future] = admin.create_partitions([NewPartitions("grown", 2)]).values()
    assert _error(future).code() == KafkaError.INVALID_PARTITIONS
    _result(admin.delete_topics(["grown"], operation_timeout=REQUEST_TIMEOUT_S))
    wait_until(
        lambda: "grown" not in admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics,
        REQUEST_TIMEOUT_S,
        message="the deleted topic gone from the metadata",
    )


def test_errors_are_kafkas(admin: AdminClient) -> None:
    [future] = admin.create_topics([NewTopic("too-wide", 1, 4)]).values()
    error = _error(future)
    assert error.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert error.str() == "Replication factor: 4 larger than available brokers: 3."
    _result(admin.create_topics([NewTopic("twice", 1, 1)]))
    [future] = admin.create_topics([NewTopic("twice", 1, 1)]).values()
    error = _error(future)
    assert (error.code(), error.str()) == (KafkaError.TOPIC_ALREADY_EXISTS, "Topic 'twice' already exists.")
    [future] = admin.create_topics([NewTopic("bad-name-config", 1, 1, config={"no.such.config": "1"})]).values()
    error = _error(future)
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, "Unknown topic config name: no.such.config")
    [future] = admin.create_topics([NewTopic("bad-value", 1, 1, config={"retention.ms": "soon"})]).values()
    assert _error(future).code() == KafkaError.INVALID_CONFIG
    [future] = admin.create_topics([NewTopic("dry-run", 2, 3)], validate_only=True).values()
    future.result(timeout=REQUEST_TIMEOUT_S)
    assert "dry-run" not in admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic")]).values()
    assert _error(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_admin_client(cluster: KafkaCluster) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.admin import NewTopic as KpNewTopic

    client = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
    try:
        client.create_topics([KpNewTopic("kp", 2, 2, topic_configs={"cleanup.policy": "compact"})])
        described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp")])
        [(kind, by_name)] = described.items()  # {"topic": {"kp": {config: {...}}}}, the non-default configs only
        assert set(by_name) == {"kp"}
        assert by_name["kp"]["cleanup.policy"]["value"] == "compact", by_name["kp"]["cleanup.policy"]
        assert "retention.ms" not in by_name["kp"]
        client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp", configs={"retention.ms": "5000"})])
        client.create_partitions({"kp": KpNewPartitions(total_count=3)})
        wait_until(
            lambda: len(client.describe_topics(["kp"])[0]["partitions"]) == 3,
            REQUEST_TIMEOUT_S,
            message="three partitions",
        )
        expected = sorted([(p, True, False) for p in range(3) for _ in range(2)])  # 3 partitions x 2 replicas
        wait_until(
            lambda: _kp_replicas(client.describe_log_dirs()) == expected,
            REQUEST_TIMEOUT_S,
            message="every replica of kp in its broker's log dir",
        )
        client.delete_topics(["kp"])
    finally:
        client.close()


def _kp_replicas(described_dirs: list[dict[str, Any]]) -> list[tuple[int, bool, bool]]:
    """(partition, size known, is future) of each replica of topic kp, from kafka-python's describe_log_dirs."""
    assert sorted(d["broker"] for d in described_dirs) == [1, 2, 3]
    replicas = []
    for answer in described_dirs:
        [log_dir] = answer["log_dirs"]  # one log.dirs entry per broker in the harness
        assert log_dir["error_code"] == 0 and log_dir["log_dir"].endswith(f"broker-{answer['broker']}")
        for topic in log_dir["topics"]:
            if topic["name"] == "kp":
                replicas += [
                    (p["partition_index"], p["partition_size"] >= 0, p["is_future_key"]) for p in topic["partitions"]
                ]
    return sorted(replicas)


def test_broker_configs(admin: AdminClient) -> None:
    broker = ConfigResource(ConfigResource.Type.BROKER, "2")
    [configs] = _result(admin.describe_configs([broker])).values()
    assert (configs["broker.id"].value, configs["broker.id"].source) == ("2", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["broker.id"].is_read_only
    throttle = ConfigResource(
        ConfigResource.Type.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry("follower.replication.throttled.rate", "1000000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    _result(admin.incremental_alter_configs([throttle]))
    [configs] = _result(admin.describe_configs([broker])).values()
    rate = configs["follower.replication.throttled.rate"]
    assert (rate.value, rate.source) == ("1000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    static = ConfigResource(
        ConfigResource.Type.BROKER,
        "2",
        incremental_configs=[ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    [future] = admin.incremental_alter_configs([static]).values()
    error = _error(future)
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.retention.ms)" in error.str()


def test_kafkas_java_tools(cluster: KafkaCluster, admin: AdminClient, tmp_path_factory: pytest.TempPathFactory) -> None:
    """kafka-topics.sh and kafka-configs.sh (Kafka 3.9's, from Maven Central) through the Kafka listener."""
    import os
    import subprocess
    from pathlib import Path

    from tests import maven_jars
    from tests.kafka39_harness import TOOL_JVM_OPTIONS
    from tests.real_zookeeper import find_java

    reason = maven_jars.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    classpath = os.pathsep.join(str(jar) for jar in sorted(Path(maven_jars.resolve()).glob("*.jar")))
    bootstrap = ["--bootstrap-server", cluster.kafka_bootstrap_servers]

    def tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [find_java() or "java", *TOOL_JVM_OPTIONS, "-cp", classpath, main_class, *bootstrap, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    created = tool(
        "org.apache.kafka.tools.TopicCommand", "--create", "--topic", "java", "--partitions", "2",
        "--replication-factor", "2", "--config", "retention.ms=100000",
    )  # fmt: skip
    assert (created.returncode, created.stdout.strip()) == (0, "Created topic java."), created.stderr
    described = tool("org.apache.kafka.tools.TopicCommand", "--describe", "--topic", "java")
    assert described.returncode == 0, described.stderr
    topic_id = decode_topic("java", cluster.zk.get(topic_path("java"))[0]).topic_id  # 2.8 prints it (KIP-516)
    assert described.stdout.splitlines()[0] == (
        f"Topic: java\tTopicId: {topic_id}\tPartitionCount: 2\tReplicationFactor: 2\t"
        f"Configs: retention.ms=100000,segment.bytes={SEGMENT_BYTES}"
    )
    refused = tool("org.apache.kafka.tools.TopicCommand", "--create", "--topic", "wide", "--replication-factor", "4")
    assert refused.returncode != 0
    assert "Replication factor: 4 larger than available brokers: 3." in refused.stdout + refused.stderr
    altered = tool(
        "kafka.admin.ConfigCommand", "--entity-type", "topics", "--entity-name", "java", "--alter",
        "--add-config", "cleanup.policy=compact",
    )  # fmt: skip
    assert (altered.returncode, altered.stdout.strip()) == (0, "Completed updating config for topic java.")
    configs = tool("kafka.admin.ConfigCommand", "--entity-type", "topics", "--entity-name", "java", "--describe")
    assert configs.stdout.splitlines() == [
        "Dynamic configs for topic java are:",
        "  cleanup.policy=compact sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=100000}",
    ]
