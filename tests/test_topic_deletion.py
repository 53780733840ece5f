"""Topic deletion end to end on real processes (docs/research/kafka.md §2.12, Kafka's TopicDeletionManager).

`zkraft topics --delete` marks the topic; the controller stops and deletes
every replica (StopReplica delete=true), then removes the topic's znodes.
A replica on a dead broker makes the deletion wait until that broker is back.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Consumer, Producer, TopicPartition
from client.kafka.errors import UnknownTopicOrPartitionError
from client.kafka.znodes import delete_topic_path, topic_config_path, topic_path
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DELETE_S = 30.0
CLI_TIMEOUT_S = 60.0
MARKED = "Topic {t} is marked for deletion."
NOTE = "Note: This will have no impact if delete.topic.enable is not set to true."
# A producer to a deleted topic must not re-create it.
PROPERTIES = {"auto.create.topics.enable": "false"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("deletion"), brokers=3, broker_properties=PROPERTIES) as c:
        c.start()
        yield c


def topics_cli(cluster: KafkaCluster, *args: str) -> list[str]:
    command = [sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, *args]
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=CLI_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def exists(cluster: KafkaCluster, path: str) -> bool:
    return cluster.zk.exists(path) is not None


def topic_znodes(cluster: KafkaCluster, topic: str) -> dict[str, bool]:
    paths = (topic_path(topic), topic_config_path(topic), delete_topic_path(topic))
    return {p: exists(cluster, p) for p in paths}


def partition_dirs(cluster: KafkaCluster, topic: str, brokers: list[int] | None = None) -> list[Path]:
    found = []
    for broker_id in brokers or cluster.broker_ids:
        root = cluster.data_dir(broker_id)
        found += sorted(p for p in root.glob(f"{topic}-*") if p.is_dir()) if root.exists() else []
    return found


def wait_deleted(cluster: KafkaCluster, topic: str) -> None:
    def gone() -> bool:
        cluster.assert_alive()
        return not any(topic_znodes(cluster, topic).values()) and not partition_dirs(cluster, topic)

    wait_until(
        gone,
        DELETE_S,
        interval_s=0.1,
        message=f"{topic} not deleted: {topic_znodes(cluster, topic)}, dirs {partition_dirs(cluster, topic)}",
    )


def produce(cluster: KafkaCluster, topic: str, count: int) -> None:
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        futures = [producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(count)]
        producer.flush(DELETE_S)
        for future in futures:
            future.get(0)


# ---------------------------------------------------------------- tests


def test_cli_delete_removes_znodes_and_every_replica_directory(cluster: KafkaCluster) -> None:
    cluster.create_topic("gone", partitions=3, replication_factor=3, retention_ms="600000")
    produce(cluster, "gone", 20)
    assert len(partition_dirs(cluster, "gone")) == 9
    assert exists(cluster, topic_config_path("gone"))

    assert topics_cli(cluster, "--delete", "--topic", "gone") == [MARKED.format(t="gone"), NOTE]

    wait_deleted(cluster, "gone")
    assert "gone" not in topics_cli(cluster, "--list")
    assert "gone - marked for deletion" not in topics_cli(cluster, "--list")


def test_deletion_waits_for_a_dead_replica_then_the_name_can_be_reused(cluster: KafkaCluster) -> None:
    cluster.create_topic("waits", partitions=2, replication_factor=3)
    produce(cluster, "waits", 10)
    controller = cluster.wait_controller()
    dead = max(b for b in cluster.broker_ids if b != controller)
    live = [b for b in cluster.broker_ids if b != dead]
    cluster.kill_broker(dead)
    wait_until(lambda: dead not in cluster.registered_brokers(), DELETE_S, message=f"broker {dead} still registered")

    assert topics_cli(cluster, "--delete", "--topic", "waits") == [MARKED.format(t="waits"), NOTE]

    # The live replicas go; the dead one holds the topic and its marker back.
    wait_until(lambda: not partition_dirs(cluster, "waits", live), DELETE_S, message="live replicas not deleted")
    assert exists(cluster, topic_path("waits"))
    assert exists(cluster, delete_topic_path("waits"))
    assert len(partition_dirs(cluster, "waits", [dead])) == 2
    assert "waits - marked for deletion" in topics_cli(cluster, "--list")

    cluster.start_broker(dead)
    wait_deleted(cluster, "waits")

    # A topic created again under the same name is a new, working topic.
    cluster.create_topic("waits", partitions=2, replication_factor=3)
    produce(cluster, "waits", 10)
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition("waits", 0), TopicPartition("waits", 1)]
        consumer.assign(tps)
        got: list[bytes] = []

        def all_back() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            return len(got) >= 10

        wait_until(all_back, DELETE_S, message=f"re-created topic returned {len(got)} of 10 records")
    assert sorted(got) == sorted(b"v%d" % i for i in range(10))


def test_producing_to_a_topic_being_deleted_fails_with_unknown_topic(cluster: KafkaCluster) -> None:
    cluster.create_topic("busy", partitions=1, replication_factor=2)
    with Producer(cluster.bootstrap_servers, acks=1, retries=0, delivery_timeout_ms=10000) as producer:
        producer.send("busy", b"before", partition=0).get(DELETE_S)
        cluster.zk.create(delete_topic_path("busy"), b"", makepath=True)
        errors: list[Exception] = []

        def refused() -> bool:
            try:
                producer.send("busy", b"during", partition=0).get(DELETE_S)
            except Exception as e:  # any failure is recorded; the one expected ends the wait
                errors.append(e)
            return any(isinstance(e, UnknownTopicOrPartitionError) for e in errors)

        wait_until(refused, DELETE_S, interval_s=0.05, message="produce to a deleted topic never refused")
    wait_deleted(cluster, "busy")


def test_a_new_controller_resumes_a_deletion_in_progress(cluster: KafkaCluster) -> None:
    cluster.create_topic("resumed", partitions=2, replication_factor=3)
    controller = cluster.wait_controller()
    dead = max(b for b in cluster.broker_ids if b != controller)
    survivor = next(b for b in cluster.broker_ids if b not in (controller, dead))
    cluster.kill_broker(dead)
    wait_until(lambda: dead not in cluster.registered_brokers(), DELETE_S, message=f"broker {dead} still registered")
    cluster.zk.create(delete_topic_path("resumed"), b"", makepath=True)
    wait_until(
        lambda: not partition_dirs(cluster, "resumed", [controller, survivor]),
        DELETE_S,
        message="live replicas not deleted",
    )

    # The controller dies half-way: its successor finds the marker and finishes once the brokers are back.
    cluster.kill_broker(controller)
    wait_until(lambda: cluster.controller_id() == survivor, DELETE_S, message=f"broker {survivor} did not take over")
    assert exists(cluster, topic_path("resumed"))
    cluster.start_broker(dead)
    cluster.start_broker(controller)
    wait_deleted(cluster, "resumed")


def test_nothing_is_deleted_when_delete_topic_enable_is_false(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=1, broker_properties={"delete.topic.enable": "false"}) as cluster:
        cluster.start()
        cluster.create_topic("kept", partitions=2, replication_factor=1)

        assert topics_cli(cluster, "--delete", "--topic", "kept") == [MARKED.format(t="kept"), NOTE]

        # Kafka 2.x: the controller deletes the marker and nothing else.
        wait_until(lambda: not exists(cluster, delete_topic_path("kept")), DELETE_S, message="marker not removed")
        assert exists(cluster, topic_path("kept"))
        assert len(partition_dirs(cluster, "kept")) == 2
        assert topics_cli(cluster, "--list") == ["kept"]
        cluster.wait_leaders("kept", 2)
