"""The AclAuthorizer on real brokers with real clients (confluent-kafka, kafka-python) as User:ANONYMOUS.

With `allow.everyone.if.no.acl.found=false` and no ACL, a client is refused to produce, consume, create and
alter, each with its client's authorization error; `zkraft acls` then allows one operation at a time. ACLs are
added through one broker and checked on the other: the change notification carries them to every broker.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

from confluent_kafka import KafkaError as RdKafkaError  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers import wait_until  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import REPO_ROOT, subprocess_env  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "orders"
ANONYMOUS = "User:ANONYMOUS"
CLIENT_TIMEOUT_S = 15.0
PROPAGATION_S = 20.0
AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("acls"), brokers=2, broker_properties=AUTHORIZER) as kafka:
        kafka.start()
        kafka.create_topic(TOPIC, partitions=1, replication_factor=2)
        yield kafka


def acls_tool(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkraft", "acls", *args],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def leader_and_other(cluster: KafkaCluster) -> tuple[int, int]:
    leader = cluster.partition_state(TOPIC, 0).leader
    other = next(b for b in cluster.broker_ids if b != leader)
    return leader, other


def produce_error(bootstrap: str, value: bytes = b"v") -> str | None:
    """The delivery error's name of one record (None: delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000)})
    outcome: list[RdKafkaError | None] = []
    producer.produce(TOPIC, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(CLIENT_TIMEOUT_S + 5)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].name()


def consume_error(bootstrap: str, group: str) -> str | None:
    """kafka-python in a group from the earliest offset: the authorization error it raises, else None once a record
    arrives."""
    from kafka import KafkaConsumer
    from kafka.errors import AuthorizationError

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(CLIENT_TIMEOUT_S * 1000),
        api_version=(2, 5, 0),
    )
    try:
        records = consumer.poll(timeout_ms=int(CLIENT_TIMEOUT_S * 1000), max_records=1)
        while not records:
            records = consumer.poll(timeout_ms=int(CLIENT_TIMEOUT_S * 1000), max_records=1)
        return None
    except AuthorizationError as error:
        return type(error).__name__
    finally:
        consumer.close(autocommit=False)


def admin_error(future: object) -> str | None:
    try:
        future.result(timeout=CLIENT_TIMEOUT_S)  # type: ignore[attr-defined]
    except Exception as error:  # confluent-kafka raises KafkaException carrying a KafkaError
        return error.args[0].name() if error.args and hasattr(error.args[0], "name") else repr(error)
    return None


def test_refused_then_allowed_one_operation_at_a_time(cluster: KafkaCluster) -> None:
    leader, other = leader_and_other(cluster)
    on_leader = cluster.kafka_address(leader)
    on_other = cluster.kafka_address(other)
    admin = AdminClient({"bootstrap.servers": on_leader})

    # Nothing is allowed: each client gets its authorization error.
    assert produce_error(on_leader) == "TOPIC_AUTHORIZATION_FAILED"
    assert consume_error(on_leader, "billing") == "GroupAuthorizationFailedError"
    created = admin.create_topics([NewTopic("invoices", num_partitions=1, replication_factor=1)])
    assert admin_error(created["invoices"]) == "TOPIC_AUTHORIZATION_FAILED"
    altered = admin.alter_configs([ConfigResource("topic", TOPIC, set_config={"retention.ms": "60000"})])
    assert admin_error(next(iter(altered.values()))) == "TOPIC_AUTHORIZATION_FAILED"
    refused = acls_tool("--bootstrap-server", on_other, "--list")
    assert refused.returncode == 1 and "ClusterAuthorizationFailedError" in refused.stderr, refused.stderr

    # An administrator grants ANONYMOUS the right to manage ACLs, straight to the znodes as 2.8's tool could.
    granted = acls_tool("--authorizer-properties", f"zookeeper.connect={cluster.zookeeper}", "--add",
                        "--allow-principal", ANONYMOUS, "--operation", "Alter", "--operation", "Describe",
                        "--cluster")  # fmt: skip
    assert granted.returncode == 0, granted.stderr
    assert "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, " in granted.stdout
    assert "\t(principal=User:ANONYMOUS, host=*, operation=ALTER, permissionType=ALLOW)" in granted.stdout
    wait_until(lambda: acls_tool("--bootstrap-server", on_other, "--list").returncode == 0, PROPAGATION_S)

    # Produce: the ACL goes in through the broker that does not lead the partition, the leader enforces it.
    added = acls_tool("--bootstrap-server", on_other, "--add", "--allow-principal", ANONYMOUS, "--producer",
                      "--topic", TOPIC)  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=CREATE, permissionType=ALLOW)\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=DESCRIBE, permissionType=ALLOW) \n"
    ) in added.stdout
    wait_until(lambda: produce_error(on_leader, b"first") is None, PROPAGATION_S)
    assert consume_error(on_leader, "billing") == "GroupAuthorizationFailedError"  # still no consume

    # Consume: Read on the topic and on the group.
    added = acls_tool("--bootstrap-server", on_other, "--add", "--allow-principal", ANONYMOUS, "--consumer",
                      "--topic", TOPIC, "--group", "billing")  # fmt: skip
    assert added.returncode == 0, added.stderr
    wait_until(lambda: consume_error(on_leader, "billing") is None, PROPAGATION_S)

    # Create: one topic, by a prefixed ACL.
    added = acls_tool("--bootstrap-server", on_other, "--add", "--allow-principal", ANONYMOUS, "--operation",
                      "Create", "--topic", "inv", "--resource-pattern-type", "prefixed")  # fmt: skip
    assert added.returncode == 0, added.stderr
    wait_until(lambda: _created(admin, f"invoices-{uuid.uuid4().hex[:6]}"), PROPAGATION_S)
    assert admin_error(admin.create_topics([NewTopic("payments", 1, 1)])["payments"]) == "TOPIC_AUTHORIZATION_FAILED"

    # Alter configs, and only that: adding partitions (Alter) stays refused.
    added = acls_tool("--bootstrap-server", on_other, "--add", "--allow-principal", ANONYMOUS, "--operation",
                      "AlterConfigs", "--topic", TOPIC)  # fmt: skip
    assert added.returncode == 0, added.stderr
    wait_until(lambda: _altered(admin), PROPAGATION_S)
    grown = admin.create_partitions([NewPartitions(TOPIC, 2)])
    assert admin_error(grown[TOPIC]) == "TOPIC_AUTHORIZATION_FAILED"

    # DENY beats ALLOW: a deny on Write refuses the producer again, removing it lets it through.
    denied = acls_tool("--bootstrap-server", on_other, "--add", "--deny-principal", ANONYMOUS, "--operation",
                       "Write", "--topic", TOPIC)  # fmt: skip
    assert denied.returncode == 0, denied.stderr
    wait_until(lambda: produce_error(on_leader) == "TOPIC_AUTHORIZATION_FAILED", PROPAGATION_S)
    removed = acls_tool("--bootstrap-server", on_other, "--remove", "--force", "--deny-principal", ANONYMOUS,
                        "--operation", "Write", "--topic", TOPIC)  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert "DENY" not in removed.stdout
    wait_until(lambda: produce_error(on_leader) is None, PROPAGATION_S)
    cluster.assert_alive(*cluster.broker_ids)


def _created(admin: AdminClient, name: str) -> bool:
    return admin_error(admin.create_topics([NewTopic(name, 1, 1)])[name]) is None


def _altered(admin: AdminClient) -> bool:
    altered = admin.alter_configs([ConfigResource("topic", TOPIC, set_config={"retention.ms": "600000"})])
    return admin_error(next(iter(altered.values()))) is None


def test_kafka_admin_clients_manage_acls(cluster: KafkaCluster) -> None:
    """CreateAcls / DescribeAcls / DeleteAcls from librdkafka's and kafka-python's admin clients."""
    from kafka.admin import ACL, ACLFilter, ACLPermissionType, KafkaAdminClient, ResourcePattern
    from kafka.admin import ACLOperation as PyOperation
    from kafka.admin import ACLResourcePatternType as PyPatternType
    from kafka.admin import ResourceType as PyResourceType

    leader, other = leader_and_other(cluster)
    zk = f"zookeeper.connect={cluster.zookeeper}"
    assert acls_tool("--authorizer-properties", zk, "--add", "--allow-principal", "User:admin", "--operation",
                     "Alter", "--operation", "Describe", "--cluster").returncode == 0  # fmt: skip
    # ANONYMOUS may manage ACLs once allowed (the first test may have run, or not: add it again, it is a set).
    assert acls_tool("--authorizer-properties", zk, "--add", "--allow-principal", ANONYMOUS, "--operation",
                     "Alter", "--operation", "Describe", "--cluster").returncode == 0  # fmt: skip
    admin = AdminClient({"bootstrap.servers": cluster.kafka_address(leader)})
    binding = AclBinding(ResourceType.GROUP, "audit", ResourcePatternType.LITERAL, "User:carol", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    wait_until(lambda: admin_error(admin.create_acls([binding])[binding]) is None, PROPAGATION_S)

    python_admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_address(other), api_version=(2, 5, 0))
    try:

        def carol_seen() -> bool:
            found, error = python_admin.describe_acls(
                ACLFilter(
                    "User:carol",
                    "*",
                    PyOperation.ANY,
                    ACLPermissionType.ANY,
                    ResourcePattern(PyResourceType.GROUP, "audit", PyPatternType.LITERAL),
                )  # fmt: skip
            )
            return error.errno == 0 and [(a.resource_pattern.resource_name, a.operation) for a in found] == [
                ("audit", PyOperation.READ)
            ]

        wait_until(carol_seen, PROPAGATION_S)
        dave = ACL("User:dave", "*", PyOperation.DESCRIBE, ACLPermissionType.ALLOW,
                   ResourcePattern(PyResourceType.TOPIC, "audit-", PyPatternType.PREFIXED))  # fmt: skip
        result = python_admin.create_acls([dave])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        deleted = python_admin.delete_acls(
            [
                ACLFilter(
                    "User:dave",
                    "*",
                    PyOperation.ANY,
                    ACLPermissionType.ANY,
                    ResourcePattern(PyResourceType.TOPIC, "audit-", PyPatternType.PREFIXED),
                )
            ]  # fmt: skip
        )
        [(_, matched, error)] = deleted
        assert error.errno == 0 and [m.principal for m in matched] == ["User:dave"]
    finally:
        python_admin.close()

    listing = acls_tool("--bootstrap-server", cluster.kafka_address(other), "--list", "--group", "audit")
    assert listing.stdout == (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=audit, patternType=LITERAL)`: \n"
        " \t(principal=User:carol, host=*, operation=READ, permissionType=ALLOW) \n\n"
    )
    removed = admin.delete_acls([AclBindingFilter(ResourceType.GROUP, "audit", ResourcePatternType.LITERAL,
                                                  None, None, AclOperation.ANY, AclPermissionType.ANY)])  # fmt: skip
    [bindings] = [f.result(timeout=CLIENT_TIMEOUT_S) for f in removed.values()]
    assert [b.principal for b in bindings] == ["User:carol"]
    wait_until(lambda: "carol" not in acls_tool("--bootstrap-server", cluster.kafka_address(other), "--list").stdout,
               PROPAGATION_S)  # fmt: skip


def test_no_authorizer_answers_security_disabled(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=1) as kafka:
        kafka.start()
        listing = acls_tool("--bootstrap-server", kafka.kafka_address(1), "--list")
        assert listing.returncode == 1
        assert "SecurityDisabledError: No Authorizer is configured on the broker" in listing.stderr


def test_grpc_api_is_checked_as_anonymous(cluster: KafkaCluster) -> None:
    """The SDK goes through the brokers' gRPC port: the same checks, the principal User:ANONYMOUS; replication
    between the brokers (unchecked until gRPC authenticates them) goes on."""
    from client import Admin
    from client import Producer as SdkProducer
    from client.kafka.errors import TopicAuthorizationFailedError

    topic = "grpc-orders"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    with pytest.raises(TopicAuthorizationFailedError):
        with SdkProducer(
            cluster.bootstrap_servers, acks="all", request_timeout_ms=5000, delivery_timeout_ms=10000
        ) as producer:
            producer.send(topic, b"refused").get(timeout=CLIENT_TIMEOUT_S)
    admin = Admin(cluster.bootstrap_servers)
    try:
        assert topic not in admin.list_topics()  # Metadata leaves out what ANONYMOUS may not describe
    finally:
        admin.close()
    added = acls_tool("--authorizer-properties", f"zookeeper.connect={cluster.zookeeper}", "--add",
                      "--allow-principal", ANONYMOUS, "--producer", "--topic", topic)  # fmt: skip
    assert added.returncode == 0, added.stderr

    def delivered() -> bool:
        try:
            with SdkProducer(
                cluster.bootstrap_servers, acks="all", request_timeout_ms=5000, delivery_timeout_ms=10000
            ) as producer:
                producer.send(topic, b"allowed").get(timeout=CLIENT_TIMEOUT_S)
        except TopicAuthorizationFailedError:
            return False
        return True

    wait_until(delivered, PROPAGATION_S)
