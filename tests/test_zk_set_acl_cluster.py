"""Brokers with zookeeper.set.acl=true (Kafka 2.8's KafkaZkClient with ZkData.defaultAcls).

One shared cluster: a quorum whose JAAS Server section has the users `broker` and `admin` (zookeeper.superUser),
one broker logging in as `broker` with its JAAS Client section. A ZooKeeper client without the broker's
credentials reads what Kafka lets everyone read and changes nothing of Kafka's; a sensitive path is not even
readable; topic creation, produce and consume still work; the super user may change anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from tests.helpers import wait_until
from tests.kafka_harness import REPO_ROOT, KafkaCluster
from tests.quorum_harness import free_ports, subprocess_env

TIMEOUT_S = 30.0
TOPIC = "secured"
JAAS = """
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_admin="admin-secret"
    user_broker="broker-secret";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="broker"
    password="broker-secret";
};
"""


class SecuredCluster(KafkaCluster):
    """Brokers started with `--jaas-config`, as an operator passes the JAAS file."""

    jaas: Path

    def command(self, broker_id: int) -> list[str]:
        return [*super().command(broker_id), "--jaas-config", str(self.jaas)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    root = tmp_path_factory.mktemp("setacl")
    jaas = root / "jaas.conf"
    jaas.write_text(JAAS, encoding="utf-8")
    quorum = {"java.security.auth.login.config": str(jaas), "zookeeper.superUser": "admin"}
    with SecuredCluster(
        root, brokers=1, broker_properties={"zookeeper.set.acl": "true"}, quorum_properties=quorum
    ) as c:
        c.jaas = jaas
        c.start()
        admin = AdminClient({"bootstrap.servers": c.kafka_bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])[TOPIC].result(timeout=TIMEOUT_S)
        c.wait_leaders(TOPIC, 1)
        yield c


def _kazoo(cluster: KafkaCluster, user: str | None = None, password: str = "") -> KazooClient:
    options = {"mechanism": "DIGEST-MD5", "username": user, "password": password} if user else None
    zk = KazooClient(hosts=cluster.quorum.zk_connect_string, timeout=4.0, sasl_options=options)
    zk.start(timeout=TIMEOUT_S)
    return zk


def test_a_client_without_broker_credentials_changes_nothing_of_kafkas(cluster: SecuredCluster) -> None:
    zk = _kazoo(cluster)
    try:
        assert TOPIC in zk.get_children("/brokers/topics")  # world read
        state_path = f"/brokers/topics/{TOPIC}/partitions/0/state"
        for path in ("/controller", state_path, "/brokers/ids/1", f"/config/topics/{TOPIC}"):
            zk.get(path)  # world read
            with pytest.raises(NoAuthError):
                zk.set(path, b"garbage")
            if path != "/controller":  # a delete needs DELETE on the parent, and ZooKeeper's root stays open
                with pytest.raises(NoAuthError):
                    zk.delete(path)
        with pytest.raises(NoAuthError):
            zk.create("/brokers/topics/fake", b"{}")
        assert json.loads(zk.get(state_path)[0])["leader"] == 1  # still Kafka's
    finally:
        zk.stop()
        zk.close()


def test_a_sensitive_path_is_the_creators_alone_and_the_super_user_may_do_anything(cluster: SecuredCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw")
    admin.alter_user_scram_credentials([upsert])["carol"].result(timeout=TIMEOUT_S)  # the broker writes the znode
    anonymous, superuser = _kazoo(cluster), _kazoo(cluster, "admin", "admin-secret")
    try:
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/carol")
        assert b"SCRAM-SHA-512" in superuser.get("/config/users/carol")[0]
        acl, _ = superuser.get_acls("/config/users/carol")
        assert [(a.id.scheme, a.id.id, a.perms) for a in acl] == [("sasl", "broker", 31)]
        acl, _ = superuser.get_acls(f"/config/topics/{TOPIC}")
        assert sorted((a.id.scheme, a.id.id, a.perms) for a in acl) == [("sasl", "broker", 31), ("world", "anyone", 1)]
        superuser.set("/config/users/carol", superuser.get("/config/users/carol")[0])
    finally:
        for zk in (anonymous, superuser):
            zk.stop()
            zk.close()


def test_topics_produce_and_consume_still_work(cluster: SecuredCluster) -> None:
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    values = [f"v{i}".encode() for i in range(10)]
    for value in values:
        producer.produce(TOPIC, value)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": str(uuid.uuid4()),
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([TOPIC])
    got: list[bytes] = []

    def read() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
        return len(got) >= len(values)

    try:
        wait_until(read, TIMEOUT_S, interval_s=0.01, message="records not consumed")
    finally:
        consumer.close()
    assert got == values


def _broker_start(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "zkraft", "broker", "start", "--override", "zookeeper.set.acl=true", *args]
    env = {**subprocess_env(), "KAFKA_OPTS": ""}
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_set_acl_without_a_login_is_refused_in_one_line(cluster: SecuredCluster, tmp_path: Path) -> None:
    done = _broker_start()
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "zookeeper.set.acl is true, but no JAAS login for the quorum was given" in done.stderr
    jaas = tmp_path / "wrong.conf"
    jaas.write_text(JAAS.replace('password="broker-secret"', 'password="wrong"'), encoding="utf-8")
    grpc_port, kafka_port = free_ports(2)
    wrong = _broker_start("--override", f"zookeeper.connect={cluster.zookeeper}", "--override", "broker.id=9",
                          "--override", f"log.dirs={tmp_path / 'logs'}", "--override", f"port={grpc_port}",
                          "--override", f"listeners=PLAINTEXT://127.0.0.1:{kafka_port}",
                          "--jaas-config", str(jaas))  # fmt: skip
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    assert "refused the broker's login" in wrong.stderr


def test_kafkas_tools_write_into_the_quorum_only_with_the_brokers_login(cluster: SecuredCluster) -> None:
    """`zkraft topics --zookeeper` as kafka-topics.sh: refused without a login, and with KAFKA_OPTS naming the
    JAAS file it logs in and creates the topic with Kafka's ACLs (JaasUtils.isZkSaslEnabled)."""

    def topics(kafka_opts: str, topic: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "zkraft", "topics", "--zookeeper", cluster.zookeeper, "--create",
                   "--topic", topic, "--partitions", "1", "--replication-factor", "1"]  # fmt: skip
        env = {**subprocess_env(), "KAFKA_OPTS": kafka_opts}
        return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)

    refused = topics("", "tool-anonymous")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    made = topics(f"-Djava.security.auth.login.config={cluster.jaas}", "tool-made")
    assert made.returncode == 0, made.stderr
    zk = _kazoo(cluster, "admin", "admin-secret")
    try:
        acl, _ = zk.get_acls("/brokers/topics/tool-made")
        assert sorted((a.id.scheme, a.id.id, a.perms) for a in acl) == [("sasl", "broker", 31), ("world", "anyone", 1)]
    finally:
        zk.stop()
        zk.close()
