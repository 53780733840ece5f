"""Preferred replica election and automatic leader rebalance on real processes (docs/research/kafka.md §2.14).

The worked example of the Kafka documentation: 8 brokers, a topic of 8
partitions with replication factor 3 assigned so that broker b is the
preferred leader (first replica) of exactly one partition. Brokers 1, 2 and 4
stop (SIGTERM, controlled shutdown): their leaderships move to ISR members.
Broker 1 comes back and leads nothing until a preferred election runs; the
election gives back the partitions whose preferred replica is alive and in
the ISR, and leaves the others. When 2 and 4 are back too, a second election
gives every partition its preferred leader: one leader per broker. The same
story again with `auto.leader.rebalance.enable` doing the elections.

The election znode is written directly (Kafka's JSON, client/kafka/znodes.py),
so these tests do not depend on the command-line tool.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from client import TopicPartition
from client.kafka import znodes as kz
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration

TOPIC = "balanced"
BROKERS = 8
PARTITIONS = 8
# Partition p: replicas p+1, p+2, p+3 (mod 8, ids 1..8): broker p+1 is its preferred leader.
ASSIGNMENT = {p: tuple((p + i) % BROKERS + 1 for i in range(3)) for p in range(PARTITIONS)}
STOPPED = (1, 2, 4)
# Lean brokers: 11 processes share the machine.
BROKER_PROPERTIES = {"replica.lag.time.max.ms": "3000", "log.cleaner.enable": "false"}
TIMEOUT_S = 60.0


def create_topic(cluster: KafkaCluster) -> None:
    replica_assignment = ",".join(":".join(map(str, ASSIGNMENT[p])) for p in range(PARTITIONS))
    command = [
        sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, "--create",
        "--topic", TOPIC, "--replica-assignment", replica_assignment,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    cluster.wait_leaders(TOPIC, PARTITIONS)


def leaders(cluster: KafkaCluster) -> dict[int, int]:
    out = {}
    for p in range(PARTITIONS):
        state = cluster.partition_state(TOPIC, p)
        out[p] = -1 if state is None else state.leader
    return out


def isrs(cluster: KafkaCluster) -> dict[int, set[int]]:
    out = {}
    for p in range(PARTITIONS):
        state = cluster.partition_state(TOPIC, p)
        out[p] = set() if state is None else set(state.isr)
    return out


def all_preferred(cluster: KafkaCluster) -> bool:
    return leaders(cluster) == {p: ASSIGNMENT[p][0] for p in range(PARTITIONS)}


def expected_leaders(down: set[int]) -> dict[int, int]:
    """What a clean election gives: the preferred replica if up, else the first live replica of the ISR."""
    return {p: next(r for r in ASSIGNMENT[p] if r not in down) for p in range(PARTITIONS)}


def wait_in_isr(cluster: KafkaCluster, broker: int) -> None:
    """Until `broker` is back in the ISR of every partition it replicates."""
    hosted = [p for p in range(PARTITIONS) if broker in ASSIGNMENT[p]]
    wait_until(
        lambda: all(broker in isrs(cluster)[p] for p in hosted),
        TIMEOUT_S,
        interval_s=0.1,
        message=f"broker {broker} did not rejoin the ISRs",
    )


def stop_brokers_and_check_leaders_moved(cluster: KafkaCluster) -> None:
    for broker in STOPPED:
        cluster.stop_broker(broker)
    moved = expected_leaders(set(STOPPED))
    wait_until(lambda: leaders(cluster) == moved, TIMEOUT_S, interval_s=0.1, message="leaders did not move")
    # Every new leader came from the ISR. (The ISRs are not checked for the stopped brokers: a follower's
    # last fetch, in flight while it shut down, can put it back into an idle partition's ISR, where no
    # lag ever evicts it. Elections do not care: a dead broker is never a candidate.)
    assert all(moved[p] in isr for p, isr in isrs(cluster).items()), isrs(cluster)


def run_preferred_election(cluster: KafkaCluster) -> None:
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    cluster.zk.create(
        kz.PREFERRED_REPLICA_ELECTION_PATH, kz.encode_preferred_replica_election(partitions), makepath=True
    )
    wait_until(
        lambda: cluster.zk.exists(kz.PREFERRED_REPLICA_ELECTION_PATH) is None,
        TIMEOUT_S,
        interval_s=0.05,
        message="the controller did not delete /admin/preferred_replica_election",
    )


def test_preferred_replica_election_worked_example(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=BROKERS, broker_properties=BROKER_PROPERTIES) as cluster:
        cluster.start()
        create_topic(cluster)
        wait_until(lambda: all_preferred(cluster), TIMEOUT_S, message="initial leaders are not the preferred ones")
        stop_brokers_and_check_leaders_moved(cluster)

        cluster.start_broker(1)
        wait_in_isr(cluster, 1)
        assert 1 not in leaders(cluster).values(), leaders(cluster)  # back, caught up, leads nothing

        run_preferred_election(cluster)
        # Broker 1 got its partition back; 2 and 4 are down, so partitions 1 and 3 keep their leaders.
        assert leaders(cluster) == expected_leaders({2, 4}), leaders(cluster)

        cluster.start_broker(2)
        cluster.start_broker(4)
        wait_in_isr(cluster, 2)
        wait_in_isr(cluster, 4)
        run_preferred_election(cluster)
        assert all_preferred(cluster), leaders(cluster)
        assert sorted(leaders(cluster).values()) == list(range(1, BROKERS + 1))  # one leader per broker


def test_auto_leader_rebalance_worked_example(tmp_path: Path) -> None:
    properties = {
        **BROKER_PROPERTIES,
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "1",
    }
    with KafkaCluster(tmp_path, brokers=BROKERS, broker_properties=properties) as cluster:
        cluster.start()
        create_topic(cluster)
        wait_until(lambda: all_preferred(cluster), TIMEOUT_S, message="initial leaders are not the preferred ones")
        stop_brokers_and_check_leaders_moved(cluster)

        cluster.start_broker(1)
        # The rebalance gives broker 1 its partition back once it is in the ISR; 2 and 4 are still down.
        back = expected_leaders({2, 4})
        wait_until(lambda: leaders(cluster) == back, TIMEOUT_S, interval_s=0.1, message="broker 1 not rebalanced")

        cluster.start_broker(2)
        cluster.start_broker(4)
        wait_until(lambda: all_preferred(cluster), TIMEOUT_S, interval_s=0.1, message="leaders not rebalanced")
        assert sorted(leaders(cluster).values()) == list(range(1, BROKERS + 1))
