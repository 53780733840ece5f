"""A broker's registration deleted by hand while it lives comes back (issue 25), against real processes.

What a user checks after `zkraft zk delete /brokers/ids/2` or `deleteall /brokers/ids` on a live
cluster: every broker is registered again with the endpoint JSON it had, `zkraft topics --describe`
shows a leader for every partition of a topic created before, and records produced with acks=all
through the SDK are read back. A registration that another session holds is not fought over; a
`/controller` deleted by hand is won again.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from client import Consumer, Producer, ZkClient
from client.zk.exceptions import NoNodeError
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration

BROKERS = 3
RESTORE_TIMEOUT_S = 30.0
LEADERS_TIMEOUT_S = 60.0
TOOL_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_MS = 5000
SDK_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("registration"), brokers=BROKERS) as kafka:
        kafka.start()
        yield kafka


def registrations(cluster: KafkaCluster) -> dict[int, tuple[bytes, int]]:
    """Each registered broker's (znode bytes, czxid)."""
    found = {}
    for broker_id in cluster.registered_brokers():
        try:
            data, stat = cluster.zk.get(f"/brokers/ids/{broker_id}")
        except NoNodeError:
            continue
        found[broker_id] = (data, stat.czxid)
    return found


def wait_registered_again(cluster: KafkaCluster, before: dict[int, tuple[bytes, int]], victims: list[int]) -> None:
    """Every broker registered, the victims with a new czxid, all with the bytes they had before."""

    def restored() -> bool:
        now = registrations(cluster)
        if set(now) != set(before):
            return False
        return all(now[b][0] == before[b][0] for b in now) and all(now[b][1] > before[b][1] for b in victims)

    wait_until(restored, RESTORE_TIMEOUT_S, interval_s=0.05, message=f"brokers {victims} did not register again")


def described_leaders(cluster: KafkaCluster, topic: str) -> dict[int, str]:
    """Partition -> `Leader:` field of `zkraft topics --describe`."""
    command = [sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, "--describe"]
    done = subprocess.run(
        [*command, "--topic", topic],
        cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    leaders = {}
    for line in done.stdout.splitlines()[1:]:
        fields = dict(field.split(": ", 1) for field in line.strip().split("\t"))
        leaders[int(fields["Partition"])] = fields["Leader"]
    return leaders


def wait_every_partition_led(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    live = {str(b) for b in cluster.broker_ids}

    def led() -> bool:
        leaders = described_leaders(cluster, topic)
        return len(leaders) == partitions and set(leaders.values()) <= live

    wait_until(led, LEADERS_TIMEOUT_S, interval_s=0.2, message=f"{topic} has partitions without a live leader")


def produce_and_consume(cluster: KafkaCluster, topic: str, count: int) -> None:
    """acks=all records through the SDK, each acknowledged, all read back from the beginning."""
    values = [b"%s-%d" % (topic.encode(), i) for i in range(count)]
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        futures = [producer.send(topic, value) for value in values]
        producer.flush(SDK_TIMEOUT_S)
        for future in futures:
            future.get(SDK_TIMEOUT_S)
    got = []
    with Consumer(
        topic, bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
        consumer_timeout_ms=CONSUME_TIMEOUT_MS,
    ) as consumer:  # fmt: skip
        for record in consumer:
            got.append(record.value)
            if len(got) == count:
                break
    assert sorted(got) == sorted(values)


def controller_log_events(cluster: KafkaCluster, event: str) -> list[dict]:
    return [record for b in cluster.broker_ids for record in cluster.log_events(b, event)]


def leaders_on(cluster: KafkaCluster, topic: str, partitions: int, broker_id: int) -> list[int]:
    return [p for p in range(partitions) if cluster.partition_state(topic, p).leader == broker_id]


def test_a_deleted_registration_comes_back_and_its_partitions_get_leaders(cluster: KafkaCluster) -> None:
    # RF 1: a partition on the victim has no other replica, so it gets a leader only when the victim is back.
    cluster.create_topic("single", partitions=BROKERS, replication_factor=1)
    cluster.create_topic("triple", partitions=BROKERS, replication_factor=3)
    produce_and_consume(cluster, "single", 30)
    victim = next(b for b in cluster.broker_ids if b != cluster.controller_id())
    assert leaders_on(cluster, "single", BROKERS, victim), "the victim leads a partition of `single`"
    before = registrations(cluster)

    cluster.zk.delete(f"/brokers/ids/{victim}")

    wait_registered_again(cluster, before, [victim])
    [restored] = cluster.log_events(victim, "broker_registration_restored")
    assert restored["broker_epoch"] == registrations(cluster)[victim][1]
    # The controller handles the znode's deletion as an event of its own, possibly after the broker has
    # registered again: wait for its line rather than reading its log once.
    wait_until(
        lambda: any(
            e["target_broker"] == victim
            for name in ("broker_registration_gone", "broker_registered_again")
            for e in controller_log_events(cluster, name)
        ),
        RESTORE_TIMEOUT_S,
        message="the controller never logged the broker's disappearance",
    )
    wait_every_partition_led(cluster, "single", BROKERS)
    wait_every_partition_led(cluster, "triple", BROKERS)
    produce_and_consume(cluster, "single", 30)
    produce_and_consume(cluster, "triple", 30)
    cluster.assert_alive()


def test_every_registration_comes_back_after_brokers_ids_is_deleted(cluster: KafkaCluster) -> None:
    cluster.create_topic("spread", partitions=BROKERS, replication_factor=2)
    before = registrations(cluster)
    assert set(before) == set(cluster.broker_ids)

    # One multi removes every registration and `/brokers/ids` itself, as `deleteall /brokers/ids` ends
    # when no broker re-registers between its deletes: the brokers must re-create the parent too.
    transaction = cluster.zk.transaction()
    for broker_id in sorted(before):
        transaction.delete(f"/brokers/ids/{broker_id}")
    transaction.delete("/brokers/ids")
    results = transaction.commit()
    assert not any(isinstance(result, Exception) for result in results), results

    wait_registered_again(cluster, before, sorted(before))
    wait_every_partition_led(cluster, "spread", BROKERS)
    wait_every_partition_led(cluster, "single", BROKERS)
    produce_and_consume(cluster, "spread", 30)
    produce_and_consume(cluster, "single", 30)
    cluster.assert_alive()

    # The restored registration is the broker's new epoch: its controlled shutdown is not refused as stale.
    leaver = next(b for b in cluster.broker_ids if b != cluster.controller_id())
    assert cluster.stop_broker(leaver) == 0
    assert cluster.log_events(leaver, "controlled_shutdown_succeeded"), cluster.log_tail(leaver)
    cluster.start_broker(leaver)
    wait_every_partition_led(cluster, "spread", BROKERS)


def test_a_deleted_controller_znode_is_won_again(cluster: KafkaCluster) -> None:
    epoch_before = int(cluster.zk.get("/controller_epoch")[0])
    cluster.zk.delete("/controller")

    def new_controller() -> bool:
        controller = cluster.controller_id()
        return controller is not None and int(cluster.zk.get("/controller_epoch")[0]) > epoch_before

    wait_until(new_controller, RESTORE_TIMEOUT_S, interval_s=0.05, message="no controller elected again")
    cluster.create_topic("after-controller", partitions=BROKERS, replication_factor=2)
    produce_and_consume(cluster, "after-controller", 30)
    cluster.assert_alive()


def test_a_registration_held_by_another_session_is_not_fought_over(cluster: KafkaCluster) -> None:
    victim = next(b for b in cluster.broker_ids if b != cluster.controller_id())
    path = f"/brokers/ids/{victim}"
    data, _ = cluster.zk.get(path)
    impostor = ZkClient(cluster.zookeeper, timeout=30)
    impostor.start()
    try:
        # Frozen, the victim cannot restore its registration before the other session takes it.
        cluster.pause_broker(victim)
        try:
            cluster.zk.delete(path)
            impostor.create(path, data, ephemeral=True)
        finally:
            cluster.resume_broker(victim)
        wait_until(
            lambda: cluster.log_events(victim, "broker_registration_held_by_another_session"),
            RESTORE_TIMEOUT_S,
            interval_s=0.05,
            message="the broker did not notice that another session holds its registration",
        )
        _, stat = cluster.zk.get(path)
        assert stat.ephemeralOwner == impostor.client_id[0], "the broker took the other session's registration over"
        restored = cluster.log_events(victim, "broker_registration_restored")
        assert all(event["broker_epoch"] != stat.czxid for event in restored)
    finally:
        impostor.stop()
        impostor.close()
    # The stood-down broker stays unregistered once the other session ends: a restart registers it again.
    cluster.kill_broker(victim)
    cluster.start_broker(victim)
    wait_every_partition_led(cluster, "triple", BROKERS)
