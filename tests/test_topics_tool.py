"""`zkraft topics --zookeeper` against a real ZooKeeper-semantics quorum, with brokers registered by the test.

No broker runs here: the test writes `/brokers/ids/N` (Kafka's JSON) on its own session, runs
`python3 -m zkraft topics ...` as a subprocess, and checks the output lines and the znodes
(docs/research/kafka.md §1, §6.1). Partition state is written by the test where a controller would.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.kafka.znodes import (
    BrokerRegistration,
    EndPoint,
    PartitionState,
    broker_path,
    decode_topic,
    encode_broker,
    encode_partition_state,
    partition_state_path,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
BROKER_IDS = (1, 2, 3)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def zkraft(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    env.pop("ZKRAFT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def assert_error_line(result: subprocess.CompletedProcess[str], expected: str, exit_code: int = 1) -> None:
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.splitlines() == [f"zkraft: error: {expected}"], result.stderr
    assert result.returncode == exit_code


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.quorum_harness import QuorumProcesses, wait_for_leader

    root = tmp_path_factory.mktemp("topics-tool")
    with QuorumProcesses(root, 3, {"quorum.state.machine": "zookeeper", "tickTime": "200"}) as cluster:
        cluster.start_all()
        asyncio.run(wait_for_leader(cluster.addresses, timeout_s=30))
        yield ",".join(cluster.addresses.values())


@pytest.fixture(scope="module")
def zk(quorum: str) -> Iterator[Any]:
    """The test's own session; it holds the fake brokers' ephemeral registrations."""
    from client import ZkClient

    client = ZkClient(quorum, timeout=30)
    client.start()
    for broker_id in BROKER_IDS:
        registration = BrokerRegistration(
            broker_id, (EndPoint("127.0.0.1", 9090 + broker_id, "PLAINTEXT", "PLAINTEXT"),), timestamp_ms=1
        )
        client.create(broker_path(broker_id), encode_broker(registration), ephemeral=True, makepath=True)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def topics(quorum: str, *args: str) -> subprocess.CompletedProcess[str]:
    return zkraft("topics", "--zookeeper", quorum, *args)


def assignment(zk: Any, topic: str) -> dict[int, tuple[int, ...]]:
    data, _stat = zk.get(f"/brokers/topics/{topic}")
    return dict(decode_topic(topic, data).partitions)


def test_create_writes_kafkas_znodes(quorum: str, zk: Any) -> None:
    created = topics(quorum, "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2")
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created topic orders.\n", "")
    config, _ = zk.get("/config/topics/orders")
    assert config == b'{"version":1,"config":{}}'
    raw, _ = zk.get("/brokers/topics/orders")
    assert list(json.loads(raw)) == ["removing_replicas", "partitions", "topic_id", "adding_replicas", "version"]
    placed = assignment(zk, "orders")
    assert sorted(placed) == [0, 1, 2]
    for replicas in placed.values():
        assert len(replicas) == 2 and len(set(replicas)) == 2 and set(replicas) <= set(BROKER_IDS)
    assert sorted(r[0] for r in placed.values()) == [1, 2, 3]  # one leader per broker


def test_create_with_manual_assignment_and_configs(quorum: str, zk: Any) -> None:
    created = topics(
        quorum, "--create", "--topic", "manual", "--replica-assignment", "1:2,2:3,3:1",
        "--config", "retention.ms=1000", "--config", "cleanup.policy=compact",
    )  # fmt: skip
    assert (created.returncode, created.stdout) == (0, "Created topic manual.\n"), created.stderr
    assert assignment(zk, "manual") == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    config, _ = zk.get("/config/topics/manual")
    assert config == b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'


def test_list_describe_and_filters(quorum: str, zk: Any) -> None:
    assert topics(quorum, "--create", "--topic", "shown", "--replica-assignment", "1:2,2:3").returncode == 0
    listed = topics(quorum, "--list")
    assert listed.returncode == 0 and "shown" in listed.stdout.splitlines()
    assert listed.stdout.splitlines() == sorted(listed.stdout.splitlines())
    described = topics(quorum, "--describe", "--topic", "shown")
    assert described.stdout.splitlines() == [
        "Topic: shown\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: shown\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: ",
        "\tTopic: shown\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: ",
    ]
    # What a controller would write: partition 0 fully in sync on broker 1, partition 1 led by a dead broker 9.
    zk.create(partition_state_path("shown", 0), encode_partition_state(PartitionState(1, 0, (1, 2), 1)), makepath=True)
    zk.create(partition_state_path("shown", 1), encode_partition_state(PartitionState(9, 0, (9,), 1)), makepath=True)
    described = topics(quorum, "--describe", "--topic", "shown")
    assert described.stdout.splitlines()[1:] == [
        "\tTopic: shown\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: shown\tPartition: 1\tLeader: 9\tReplicas: 2,3\tIsr: 9",
    ]
    under = topics(quorum, "--describe", "--topic", "shown", "--under-replicated-partitions")
    assert under.stdout.splitlines() == ["\tTopic: shown\tPartition: 1\tLeader: 9\tReplicas: 2,3\tIsr: 9"]
    unavailable = topics(quorum, "--describe", "--topic", "shown", "--unavailable-partitions")
    assert unavailable.stdout.splitlines() == ["\tTopic: shown\tPartition: 1\tLeader: 9\tReplicas: 2,3\tIsr: 9"]


def test_alter_adds_partitions(quorum: str, zk: Any) -> None:
    assert (
        topics(quorum, "--create", "--topic", "grow", "--partitions", "2", "--replication-factor", "2").returncode == 0
    )
    before = assignment(zk, "grow")
    altered = topics(quorum, "--alter", "--topic", "grow", "--partitions", "4")
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.splitlines() == [
        "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of the "
        "messages will be affected",
        "Adding partitions succeeded!",
    ]
    after = assignment(zk, "grow")
    assert sorted(after) == [0, 1, 2, 3] and {p: after[p] for p in before} == before
    assert all(len(set(after[p])) == 2 for p in (2, 3))
    manual = topics(
        quorum, "--alter", "--topic", "grow", "--partitions", "5", "--replica-assignment", "1:2,1:2,1:2,1:2,3:1"
    )
    assert manual.returncode == 0, manual.stderr
    assert assignment(zk, "grow")[4] == (3, 1)
    assert_error_line(
        topics(quorum, "--alter", "--topic", "grow", "--partitions", "2"),
        "The number of partitions for a topic can only be increased. Topic grow currently has 5 partitions, "
        "2 would not be an increase.",
    )


def test_delete_marks_the_topic(quorum: str, zk: Any) -> None:
    assert (
        topics(quorum, "--create", "--topic", "doomed", "--partitions", "1", "--replication-factor", "1").returncode
        == 0
    )
    deleted = topics(quorum, "--delete", "--topic", "doomed")
    assert (deleted.returncode, deleted.stdout) == (
        0,
        "Topic doomed is marked for deletion.\n"
        "Note: This will have no impact if delete.topic.enable is not set to true.\n",
    )
    data, _ = zk.get("/admin/delete_topics/doomed")
    assert data == b""
    assert "doomed - marked for deletion" in topics(quorum, "--list").stdout.splitlines()
    again = topics(quorum, "--delete", "--topic", "doomed")
    assert again.stdout == "Topic doomed is already marked for deletion.\n"


def test_errors_are_one_line(quorum: str, zk: Any) -> None:
    assert (
        topics(quorum, "--create", "--topic", "taken", "--partitions", "1", "--replication-factor", "1").returncode == 0
    )
    assert_error_line(
        topics(quorum, "--create", "--topic", "big", "--partitions", "1", "--replication-factor", "4"),
        "Replication factor: 4 larger than available brokers: 3.",
    )
    assert_error_line(
        topics(quorum, "--create", "--topic", "taken", "--partitions", "1", "--replication-factor", "1"),
        "Topic 'taken' already exists.",
    )
    quiet = topics(
        quorum, "--create", "--topic", "taken", "--partitions", "1", "--replication-factor", "1", "--if-not-exists"
    )
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert_error_line(
        topics(quorum, "--create", "--topic", "bad/name", "--partitions", "1", "--replication-factor", "1"),
        "Topic name \"bad/name\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
    )
    assert_error_line(
        topics(quorum, "--create", "--topic", "ra", "--replica-assignment", "1:x"), 'For input string: "x"'
    )
    assert_error_line(
        topics(quorum, "--create", "--topic", "ra", "--replica-assignment", "1:1"),
        "Partition replica lists may not contain duplicate entries: 1",
    )
    assert_error_line(
        topics(
            quorum, "--create", "--topic", "cfg", "--partitions", "1", "--replication-factor", "1", "--config", "x=1"
        ),
        "Unknown topic config name: x",
    )
    assert_error_line(
        topics(quorum, "--create", "--topic", "cfg", "--partitions", "1", "--replication-factor", "1",
               "--config", "retention.ms=soon"),
        "Invalid value soon for configuration retention.ms: Not a number of type LONG",
    )  # fmt: skip
    assert (
        topics(quorum, "--create", "--topic", "dot.ted", "--partitions", "1", "--replication-factor", "1").returncode
        == 0
    )
    collided = topics(quorum, "--create", "--topic", "dot_ted", "--partitions", "1", "--replication-factor", "1")
    assert_error_line(collided, "Topic 'dot_ted' collides with existing topic: dot.ted")
    assert collided.stdout.startswith("WARNING: Due to limitations in metric names")
    assert_error_line(topics(quorum, "--describe", "--topic", "nope"), "Topic 'nope' does not exist as expected")
    assert_error_line(
        topics(quorum, "--create", "--topic", "t", "--replication-factor", "1"),
        'Missing required argument "[partitions]"',
        2,
    )
    assert zk.exists("/brokers/topics/big") is None and zk.exists("/config/topics/cfg") is None


def test_unreachable_quorum_is_one_line() -> None:
    from tests.quorum_harness import free_ports

    (port,) = free_ports(1)
    result = zkraft("topics", "--zookeeper", f"127.0.0.1:{port}", "--timeout", "1", "--list")
    assert "Traceback" not in result.stderr and result.stdout == "" and result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"zkraft: error: cannot connect to 127.0.0.1:{port} within 1s")
