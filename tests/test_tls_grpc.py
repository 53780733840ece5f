"""TLS on the gRPC ports: certificates, the settings that turn it on, and `zkraft up --secure` with real processes.

The unit half checks the pieces a user configures (certificates, Kafka's and ZooKeeper's property names, one-line
errors) and what gRPC itself does with them in-process; the cluster half runs `zkraft up --secure` (3 quorum
nodes, 3 brokers) and checks what a user would: the SDK and the tools work with the files it wrote, and a
plaintext client, a client without the CA, a ZooKeeper client without a certificate and a process posing as a
peer are each refused at once with one line, the cluster serving on unharmed. On the brokers' gRPC ports the SDK
logs in with SCRAM and the authorizer decides (a wrong password refused, a user without ACLs refused until
`zkraft acls` allows it, a caller that is not a broker refused the replica RPCs).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as KafkaNewTopic
from cryptography import x509

from broker.config import BrokerConfigError, from_properties
from client import Admin, Consumer, NewTopic, Producer, ZkClient
from client.kafka import errors
from client.kafka.client_errors import SslAuthenticationError
from client.kafka.errors import (
    GroupAuthorizationFailedError,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
)
from client.kafka.sasl_session import GrpcSaslSession
from client.zk.exceptions import NoAuthError, ZkTlsError
from quorum.register_client import QuorumClient
from quorum.settings import SettingsError, load_node_settings
from runtime import certificates, grpc_channels
from runtime.client_config import (
    kafka_client_sasl,
    kafka_client_tls,
    read_config_file,
    zookeeper_client_tls,
    zookeeper_client_tls_file,
)
from runtime.jaas import digest_client_login
from runtime.tls import TlsConfig, TlsConfigError
from tests.helpers import wait_until
from tests.quorum_harness import QuorumProcesses, poll_until, subprocess_env
from tests.test_up_cli import REPO_ROOT, _env, broker_ports, running_up
from zkraft_proto import broker_pb2, broker_pb2_grpc, quorum_pb2, quorum_pb2_grpc

TOOL_TIMEOUT_S = 60.0
# A refusal is "at once": well under any connect or request timeout of the clients (10 s and more).
REFUSAL_WITHIN_S = 8.0
RECORDS = 50
CLUSTER_WAIT_S = 30.0
WRITES = 20
PLAINTEXT_REFUSED = "is a TLS port and this client connects in plaintext"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


# ---------------------------------------------------------------- certificates


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA with a server and a client keystore, and a second, unrelated CA with a keystore of its own."""
    root = tmp_path_factory.mktemp("pki")
    ca = certificates.create_authority("test CA")
    certificates.write_authority(root, ca)
    other = certificates.create_authority("another CA")
    certificates.write_authority(root / "other", other)
    return {
        "ca": root / "ca.pem",
        "server": certificates.issue_keystore(ca, root / "server.pem", "node-1", ["127.0.0.1", "localhost"]),
        "client": certificates.issue_keystore(ca, root / "client.pem", "admin", []),
        "other_ca": root / "other" / "ca.pem",
        "other": certificates.issue_keystore(other, root / "other.pem", "intruder", ["127.0.0.1"]),
    }


def test_node_certificate_names_its_addresses_chains_to_the_ca_and_its_key_is_private(pki: dict[str, Path]) -> None:
    ca = x509.load_pem_x509_certificate(pki["ca"].read_bytes())
    leaf = x509.load_pem_x509_certificates(pki["server"].read_bytes())[0]
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert leaf.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(days=365)
    for secret in (pki["server"], pki["client"], pki["ca"].parent / "ca-key.pem"):
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600, secret
    assert b"PRIVATE KEY" not in pki["ca"].read_bytes()


# ---------------------------------------------------------------- property names and one-line errors


def test_kafka_client_properties_give_tls_only_for_ssl_protocols(pki: dict[str, Path]) -> None:
    assert kafka_client_tls({}) is None
    assert kafka_client_tls({"security.protocol": "SASL_PLAINTEXT"}) is None
    tls = kafka_client_tls(
        {"security.protocol": "SSL", "ssl.truststore.location": str(pki["ca"]), "ssl.truststore.type": "PEM"}
    )
    assert tls == TlsConfig(None, pki["ca"], verify_hostname=True)
    with pytest.raises(TlsConfigError, match=r"^security.protocol: 'TLS' is not one of"):
        kafka_client_tls({"security.protocol": "TLS"})
    with pytest.raises(TlsConfigError, match=r"^ssl.truststore.location is not set"):
        kafka_client_tls({"security.protocol": "SSL"})
    with pytest.raises(TlsConfigError, match=r"ssl.truststore.type: JKS stores are not read"):
        kafka_client_tls({"security.protocol": "SSL", "ssl.truststore.location": "x", "ssl.truststore.type": "JKS"})


def test_zookeeper_client_configuration_reads_zookeepers_names(pki: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "zk-client.properties"
    config.write_text(
        "zookeeper.client.secure=true\n"
        f"zookeeper.ssl.keyStore.location={pki['client']}\n"
        f"zookeeper.ssl.trustStore.location={pki['ca']}\n"
    )
    assert zookeeper_client_tls(read_config_file(config)) == TlsConfig(pki["client"], pki["ca"])
    assert zookeeper_client_tls({"zookeeper.client.secure": "false"}) is None
    with pytest.raises(TlsConfigError, match=r"^zookeeper.client.secure: 'yes' is not true or false$"):
        zookeeper_client_tls({"zookeeper.client.secure": "yes"})


def _node_settings(**values: object) -> None:
    base = {"node_id": 1, "data_dir": "/nonexistent", "peers": "1=127.0.0.1:7001", "ssl_quorum": True}
    load_node_settings({**base, **values}, None)


def test_ssl_quorum_settings_are_checked_with_zookeepers_names(pki: dict[str, Path]) -> None:
    keystore, truststore = str(pki["server"]), str(pki["ca"])
    _node_settings(ssl_quorum_keystore_location=keystore, ssl_quorum_truststore_location=truststore)
    with pytest.raises(SettingsError, match=r"^ssl.quorum.trustStore.location is not set"):
        _node_settings(ssl_quorum_keystore_location=keystore)
    with pytest.raises(SettingsError, match=r"^ssl.quorum.keyStore.location: sslQuorum=true needs"):
        _node_settings(ssl_quorum_truststore_location=truststore)
    with pytest.raises(SettingsError, match=r"^ssl.quorum.clientAuth: 'want' is not served; only need"):
        _node_settings(
            ssl_quorum_keystore_location=keystore,
            ssl_quorum_truststore_location=truststore,
            ssl_quorum_client_auth="want",
        )
    with pytest.raises(SettingsError, match=r"/missing.pem: no such file \(sslQuorum=true\)$"):
        _node_settings(ssl_quorum_keystore_location="/missing.pem", ssl_quorum_truststore_location=truststore)


def test_broker_tls_settings_use_kafkas_names_and_fail_in_one_line(pki: dict[str, Path]) -> None:
    ssl = {
        "security.inter.broker.protocol": "SSL",
        "ssl.keystore.location": str(pki["server"]),
        "ssl.truststore.location": str(pki["ca"]),
    }
    from_properties(ssl)
    with pytest.raises(BrokerConfigError, match=r"^ssl.truststore.location is not set"):
        from_properties({"security.inter.broker.protocol": "SSL"})
    with pytest.raises(BrokerConfigError, match=r"^ssl.client.auth: requested is not served on the gRPC port"):
        from_properties({**ssl, "ssl.client.auth": "requested"})
    with pytest.raises(BrokerConfigError, match=r"security.inter.broker.protocol='TLS': not a valid value"):
        from_properties({"security.inter.broker.protocol": "TLS"})


# ---------------------------------------------------------------- what gRPC does with them, in-process


def _status(request: quorum_pb2.StatusRequest, context: grpc.ServicerContext) -> quorum_pb2.StatusResponse:
    return quorum_pb2.StatusResponse()


@pytest.fixture(scope="module")
def mutual_tls_port(pki: dict[str, Path]) -> Iterator[str]:
    """A gRPC server requiring a client certificate from the CA, as a quorum node's port with sslQuorum."""
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler(
        "zkraft.quorum.Quorum",
        {
            "Status": grpc.unary_unary_rpc_method_handler(
                _status,
                request_deserializer=quorum_pb2.StatusRequest.FromString,
                response_serializer=quorum_pb2.StatusResponse.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers([handler])
    port = grpc_channels.add_port(server, "127.0.0.1:0", TlsConfig(pki["server"], pki["ca"], client_auth="required"))
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


def _status_call(address: str, tls: TlsConfig | None) -> str:
    """'ok', or the one line explain_failure gives for the failure."""
    with grpc_channels.sync_channel(address, tls) as channel:
        try:
            quorum_pb2_grpc.QuorumStub(channel).Status(quorum_pb2.StatusRequest(), timeout=5)
            return "ok"
        except grpc.RpcError as error:
            return grpc_channels.explain_failure(address, tls, error.details() or "") or f"other: {error.details()}"


def test_mutual_tls_admits_only_a_certificate_from_the_ca(mutual_tls_port: str, pki: dict[str, Path]) -> None:
    address = mutual_tls_port
    assert _status_call(address, TlsConfig(pki["client"], pki["ca"])) == "ok"
    assert _status_call(address, None).startswith(f"{address} is a TLS port and this client connects in plaintext")
    assert _status_call(address, TlsConfig(None, pki["ca"])).startswith(
        f"{address} closed the connection after the TLS handshake: it requires a client certificate"
    )
    assert _status_call(address, TlsConfig(pki["other"], pki["ca"])).startswith(f"{address} closed the connection")
    assert _status_call(address, TlsConfig(pki["client"], pki["other_ca"])) == (
        f"{address} presented a certificate not signed by a CA in {pki['other_ca']} (ssl.truststore.location)"
    )
    assert _status_call(address, TlsConfig(pki["client"], pki["ca"])) == "ok"  # unharmed


# ---------------------------------------------------------------- zkraft up --secure


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    quorum_base, broker_base = broker_ports(brokers=3)
    data_dir = tmp_path_factory.mktemp("secure") / "cluster"
    args = ("--secure", "--brokers", "3", "--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
    with running_up(data_dir, *args, ready_line="zkraft up: running") as up:
        cluster = up.cluster()
        yield {
            "up": up,
            "dir": data_dir,
            "security": cluster["security"],
            "quorum": ",".join(node["address"] for node in cluster["quorum"]),
            "brokers": ",".join(broker["address"] for broker in cluster["brokers"]),
            "kafka": ",".join(broker["kafka_address"] for broker in cluster["brokers"]),
        }


def _zkraft(*args: str, jaas: str | None = None) -> subprocess.CompletedProcess[str]:
    """A zkraft tool; `jaas`: the JAAS file it logs in to the quorum with, passed as Kafka's tools take it."""
    env = _env() if jaas is None else {**_env(), "KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def test_up_secure_writes_the_ca_the_client_files_and_a_private_cluster_json(secure_cluster: dict) -> None:
    security, data_dir = secure_cluster["security"], secure_cluster["dir"]
    assert security["username"] == "admin" and len(security["password"]) >= 20
    assert Path(security["ca_file"]).is_file()
    client = read_config_file(Path(security["client_properties"]))
    assert client["security.protocol"] == "SASL_SSL" and client["ssl.truststore.location"] == security["ca_file"]
    assert client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert f'password="{security["password"]}"' in client["sasl.jaas.config"]
    zk_client = read_config_file(Path(security["zookeeper_client_properties"]))
    assert zk_client["zookeeper.client.secure"] == "true"
    assert stat.S_IMODE(os.stat(data_dir / "cluster.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(data_dir / "security").st_mode) == 0o700
    node = read_config_file(data_dir / "quorum-1.properties")
    assert node["sslQuorum"] == "true" and node["ssl.quorum.trustStore.location"] == security["ca_file"]
    broker = read_config_file(data_dir / "broker-1.properties")
    assert broker["security.inter.broker.protocol"] == "SSL" and broker["zookeeper.ssl.client.enable"] == "true"
    assert broker["listeners"].startswith("SASL_SSL://")
    assert broker["listener.security.protocol.map"].endswith(",GRPC:SASL_SSL")
    assert broker["listener.name.grpc.ssl.client.auth"] == "required"
    assert broker["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["super.users"] == "User:admin;User:CN=broker-1;User:CN=broker-2;User:CN=broker-3"
    output = secure_cluster["up"].output()
    assert f"--command-config {security['client_properties']}" in output
    assert f"-client-configuration {security['zookeeper_client_properties']}" in output


def _client_security(secure_cluster: dict, **changes: str) -> dict[str, object]:
    """The SDK's `tls` and `sasl` keywords from client.properties (with `changes`), as the tools read them."""
    properties = {**read_config_file(Path(secure_cluster["security"]["client_properties"])), **changes}
    return {"tls": kafka_client_tls(properties), "sasl": kafka_client_sasl(properties)}


def test_sdk_produces_and_consumes_as_the_admin_with_client_properties(secure_cluster: dict) -> None:
    """RF 3, acks=all: every record reaches all three brokers, whose replica fetches pass ClusterAction by their
    certificates (User:CN=broker-N in super.users), so the ISR stays whole."""
    security = _client_security(secure_cluster)
    bootstrap = secure_cluster["brokers"]
    with Admin(bootstrap, **security) as admin:
        admin.create_topics([NewTopic("secure-sdk", num_partitions=2, replication_factor=3)])
    with Producer(bootstrap, **security, acks="all") as producer:
        futures = [producer.send("secure-sdk", f"record-{i}".encode()) for i in range(RECORDS)]
        producer.flush()
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    with Admin(bootstrap, **security) as admin:
        (topic,) = admin.describe_topics(["secure-sdk"])
        assert [sorted(p.isr) for p in topic.partitions] == [[1, 2, 3], [1, 2, 3]]
    consumer = Consumer(
        "secure-sdk", bootstrap_servers=bootstrap, **security, auto_offset_reset="earliest", consumer_timeout_ms=20000
    )
    try:
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(seen) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                seen.update(record.value for record in records)
    finally:
        consumer.close()
    assert seen == {f"record-{i}".encode() for i in range(RECORDS)}


def _librdkafka_config(client_properties: dict[str, str], **changes: str) -> dict[str, str]:
    """confluent-kafka's settings from Kafka's client.properties (librdkafka takes the SCRAM user and password as
    sasl.username / sasl.password rather than a JAAS line, and the CA file as ssl.ca.location)."""
    jaas = dict(re.findall(r'(\w+)="([^"]*)"', client_properties["sasl.jaas.config"]))
    config = {
        "security.protocol": client_properties["security.protocol"],
        "sasl.mechanism": client_properties["sasl.mechanism"],
        "sasl.username": jaas["username"],
        "sasl.password": jaas["password"],
        "ssl.ca.location": client_properties["ssl.truststore.location"],
    }
    return {**config, **changes}


def test_kafka_clients_log_in_over_sasl_ssl_with_client_properties(secure_cluster: dict) -> None:
    """What a Kafka user does with `zkraft up --secure`: librdkafka through the Kafka bootstrap list with the
    admin's SCRAM login and the CA from client.properties; a wrong password and a plaintext client refused."""
    client = _librdkafka_config(read_config_file(Path(secure_cluster["security"]["client_properties"])))
    bootstrap = {"bootstrap.servers": secure_cluster["kafka"]}
    admin = AdminClient({**bootstrap, **client})
    admin.create_topics([KafkaNewTopic("secure-librdkafka", num_partitions=2, replication_factor=2)])[
        "secure-librdkafka"
    ].result(timeout=TOOL_TIMEOUT_S)
    producer = KafkaProducer({**bootstrap, **client, "acks": "all"})
    for i in range(RECORDS):
        producer.produce("secure-librdkafka", f"record-{i}".encode())
    assert producer.flush(TOOL_TIMEOUT_S) == 0
    consumer = KafkaConsumer({**bootstrap, **client, "group.id": "secure", "auto.offset.reset": "earliest"})
    consumer.subscribe(["secure-librdkafka"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + TOOL_TIMEOUT_S
    try:
        while len(seen) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.add(message.value())
    finally:
        consumer.close()
    assert seen == {f"record-{i}".encode() for i in range(RECORDS)}
    for refused in (
        {**client, "sasl.password": "not-the-password"},  # authentication fails
        {"security.protocol": "PLAINTEXT"},  # the listener speaks TLS
    ):
        with pytest.raises(KafkaException):
            AdminClient({**bootstrap, **refused}).list_topics(timeout=REFUSAL_WITHIN_S)


def test_kafka_python_reads_what_librdkafka_wrote_over_sasl_ssl(secure_cluster: dict) -> None:
    """kafka-python, the other client the issue names, with the same client.properties: SASL_SSL, SCRAM-SHA-512,
    the CA; it produces and reads back through the Kafka bootstrap list as the admin."""
    import kafka

    client = _librdkafka_config(read_config_file(Path(secure_cluster["security"]["client_properties"])))
    auth = {
        "bootstrap_servers": secure_cluster["kafka"].split(","),
        "security_protocol": client["security.protocol"],
        "sasl_mechanism": client["sasl.mechanism"],
        "sasl_plain_username": client["sasl.username"],
        "sasl_plain_password": client["sasl.password"],
        "ssl_cafile": client["ssl.ca.location"],
    }
    producer = kafka.KafkaProducer(acks="all", **auth)
    try:
        for i in range(RECORDS):
            producer.send("secure-kafka-python", f"kp-{i}".encode())
        producer.flush(TOOL_TIMEOUT_S)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(
        "secure-kafka-python", auto_offset_reset="earliest", consumer_timeout_ms=int(TOOL_TIMEOUT_S * 1000), **auth
    )
    try:
        seen = {record.value for _, record in zip(range(RECORDS), consumer, strict=False)}
    finally:
        consumer.close()
    assert seen == {f"kp-{i}".encode() for i in range(RECORDS)}


def test_tools_work_with_the_files_up_wrote(secure_cluster: dict) -> None:
    security = secure_cluster["security"]
    config = ("--command-config", security["client_properties"])
    create = ("--create", "--topic", "tool-t", "--partitions", "2", "--replication-factor", "2")
    created = _zkraft("topics", "--bootstrap-server", secure_cluster["brokers"], *config, *create)
    assert created.returncode == 0, created.stderr
    described = _zkraft("topics", "--bootstrap-server", secure_cluster["brokers"], *config, "--describe")
    assert described.returncode == 0 and "Topic: tool-t\tPartitionCount: 2" in described.stdout, described.stderr
    zk_config = ("-client-configuration", security["zookeeper_client_properties"])
    ids = _zkraft("zk", "--server", secure_cluster["quorum"], *zk_config, "ls", "/brokers/ids")
    assert ids.returncode == 0 and ids.stdout.strip() == "[1, 2, 3]", ids.stderr
    zk_tls = ("--zk-tls-config-file", security["zookeeper_client_properties"])
    listed = _zkraft("topics", "--zookeeper", secure_cluster["quorum"], *zk_tls, "--list")
    assert listed.returncode == 0 and "tool-t" in listed.stdout.split(), listed.stderr
    status = _zkraft("quorum", "status", "--server", secure_cluster["quorum"], *zk_config)
    assert status.returncode == 0 and status.stdout.count("follower") == 2, status.stderr


def test_kafkas_znodes_are_the_brokers_and_the_admin_logs_in_with_the_jaas_file_up_wrote(secure_cluster: dict) -> None:
    """zookeeper.set.acl on --secure brokers: a ZooKeeper client with the admin certificate but no SASL login reads
    Kafka's znodes and changes none; with the JAAS file `up` wrote for clients it is the ZooKeeper super user."""
    security = secure_cluster["security"]
    jaas = Path(security["zookeeper_jaas_config"])
    assert stat.S_IMODE(os.stat(jaas).st_mode) == 0o600
    username, password = digest_client_login(jaas)
    assert (
        username == "admin"
        and f'CLIENT_JVMFLAGS="-Djava.security.auth.login.config={jaas} -Dzookeeper.fips-mode=false"'
        in secure_cluster["up"].output()
    )
    tls = zookeeper_client_tls_file(Path(security["zookeeper_client_properties"]))
    sasl = {"mechanism": "DIGEST-MD5", "username": username, "password": password}
    with ZkClient(secure_cluster["quorum"], timeout=30, tls=tls) as anonymous:
        assert anonymous.get_children("/brokers/ids") == ["1", "2", "3"]
        with pytest.raises(NoAuthError):
            anonymous.set("/controller", b"garbage")
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/admin")  # the SCRAM credentials: the brokers' alone
    with ZkClient(secure_cluster["quorum"], timeout=30, tls=tls, sasl_options=sasl) as admin:
        assert b"SCRAM-SHA-512" in admin.get("/config/users/admin")[0]


def _assert_refused_in_one_line(result: subprocess.CompletedProcess[str], took_s: float, expected: str) -> None:
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert expected in result.stderr, result.stderr
    assert took_s < REFUSAL_WITHIN_S, f"refused after {took_s:.1f} s: {result.stderr}"


def test_plaintext_tools_are_refused_at_once_with_one_line(secure_cluster: dict) -> None:
    started = time.monotonic()
    topics = _zkraft("topics", "--bootstrap-server", secure_cluster["brokers"], "--list")
    _assert_refused_in_one_line(
        topics, time.monotonic() - started, "is a TLS port and this client connects in plaintext"
    )
    started = time.monotonic()
    shell = _zkraft("zk", "--server", secure_cluster["quorum"], "ls", "/")
    _assert_refused_in_one_line(
        shell, time.monotonic() - started, "is a TLS port and this client connects in plaintext"
    )


def test_clients_without_the_ca_or_without_a_certificate_are_refused(
    secure_cluster: dict, pki: dict[str, Path]
) -> None:
    started = time.monotonic()
    with pytest.raises(SslAuthenticationError, match=r"presented a certificate not signed by a CA in .*other"):
        with Admin(secure_cluster["brokers"], tls=TlsConfig(None, pki["other_ca"])) as admin:
            admin.list_topics()
    assert time.monotonic() - started < REFUSAL_WITHIN_S
    # The quorum port needs a client certificate from the cluster's CA: the CA alone is not enough.
    ca_only = TlsConfig(None, Path(secure_cluster["security"]["ca_file"]))
    zk = ZkClient(secure_cluster["quorum"], timeout=10, tls=ca_only)
    try:
        started = time.monotonic()
        with pytest.raises(ZkTlsError, match=r"requires a client certificate signed by its CA"):
            zk.start()
        assert time.monotonic() - started < REFUSAL_WITHIN_S
    finally:
        zk.close()
    _assert_cluster_unharmed(secure_cluster)


async def _hello(address: str, tls: TlsConfig) -> str:
    async with grpc_channels.aio_channel(address, tls) as channel:
        try:
            reply = await quorum_pb2_grpc.RaftPeerStub(channel).Hello(
                quorum_pb2.HelloRequest(cluster_id="zkraft-local", peers_digest="x", **{"from": 9}), timeout=5
            )
        except grpc.aio.AioRpcError as error:
            return f"{error.code().name}: {grpc_channels.explain_failure(address, tls, error.details() or '')}"
    return f"node {reply.node_id}"


def test_a_process_without_a_certificate_from_the_ca_cannot_reach_the_peer_rpcs(
    secure_cluster: dict, pki: dict[str, Path]
) -> None:
    security = secure_cluster["security"]
    ca = Path(security["ca_file"])
    first = secure_cluster["quorum"].split(",")[0]
    node_keystore = Path(security["ca_file"]).parent / "quorum-2.pem"
    # With node 2's certificate the peer RPC answers: the refusals below are the certificates' doing.
    assert asyncio.run(_hello(first, TlsConfig(node_keystore, ca))) == "node 1"
    no_certificate = asyncio.run(_hello(first, TlsConfig(None, ca)))
    assert no_certificate.startswith("UNAVAILABLE:") and "requires a client certificate" in no_certificate
    other_ca = asyncio.run(_hello(first, TlsConfig(pki["other"], ca)))
    assert other_ca.startswith("UNAVAILABLE:"), other_ca
    _assert_cluster_unharmed(secure_cluster)


def _assert_cluster_unharmed(secure_cluster: dict) -> None:
    """Every node still answers with the admin certificate, and a write still commits."""
    security = secure_cluster["security"]
    zk_tls = zookeeper_client_tls(read_config_file(Path(security["zookeeper_client_properties"])))
    zk = ZkClient(secure_cluster["quorum"], timeout=10, tls=zk_tls)
    zk.start()
    try:
        path = zk.create("/unharmed-", b"ok", sequence=True)
        assert zk.get(path)[0] == b"ok"
    finally:
        zk.stop()
        zk.close()
    for address in secure_cluster["quorum"].split(","):
        assert asyncio.run(_hello(address, zk_tls)).startswith("node "), address


# ---------------------------------------------------------------- SASL and the authorizer on the gRPC ports

INVALID_CREDENTIALS = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
)
ACL_PROPAGATION_S = 30.0
ALICE_PASSWORD = "alice-secret"


def test_a_wrong_password_or_an_unknown_user_is_refused_on_the_grpc_port_in_one_line(
    secure_cluster: dict, tmp_path: Path
) -> None:
    bootstrap = secure_cluster["brokers"]
    for changes in (
        {"sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="not-the-password";'},
        {"sasl.jaas.config": f'{SCRAM_MODULE} required username="nobody" password="x";'},
    ):
        started = time.monotonic()
        with pytest.raises(SaslAuthenticationFailedError, match=f"^{INVALID_CREDENTIALS}$"):
            with Admin(bootstrap, **_client_security(secure_cluster, **changes)) as admin:
                admin.list_topics()
        assert time.monotonic() - started < REFUSAL_WITHIN_S
    # The tools print Kafka's line and exit 1.
    wrong = tmp_path / "wrong.properties"
    properties = read_config_file(Path(secure_cluster["security"]["client_properties"]))
    properties["sasl.jaas.config"] = f'{SCRAM_MODULE} required username="admin" password="wrong";'
    wrong.write_text("".join(f"{k}={v}\n" for k, v in properties.items()), encoding="utf-8")
    started = time.monotonic()
    listed = _zkraft("topics", "--bootstrap-server", bootstrap, "--command-config", str(wrong), "--list")
    _assert_refused_in_one_line(listed, time.monotonic() - started, INVALID_CREDENTIALS)
    started = time.monotonic()  # the same file on a SASL_SSL Kafka listener (kafka-acls.sh's --command-config)
    acls = _zkraft("acls", "--bootstrap-server", secure_cluster["kafka"], "--command-config", str(wrong), "--list")
    _assert_refused_in_one_line(acls, time.monotonic() - started, INVALID_CREDENTIALS)
    # A client with the admin's certificate and no login calls as User:CN=admin, who may do nothing.
    certificate_only = {"tls": _client_security(secure_cluster)["tls"]}
    with Admin(bootstrap, **certificate_only) as admin:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics([NewTopic("no-login", num_partitions=1, replication_factor=1)])
    with Admin(bootstrap, **_client_security(secure_cluster)) as admin:  # the brokers serve on, unharmed
        assert "no-login" not in admin.list_topics() and "secure-sdk" in admin.list_topics()


def _acls(secure_cluster: dict, *args: str, kafka_protocol: bool = False) -> None:
    """`zkraft acls --add` as a user runs it on a --secure cluster: through the quorum with the ZooKeeper client
    file, or (`kafka_protocol`) through a SASL_SSL Kafka listener with client.properties, as the admin."""
    security = secure_cluster["security"]
    if kafka_protocol:
        where = ("--bootstrap-server", secure_cluster["kafka"], "--command-config", security["client_properties"])
    else:
        where = ("--authorizer-properties", f"zookeeper.connect={secure_cluster['quorum']}",
                 "--zk-tls-config-file", security["zookeeper_client_properties"])  # fmt: skip
    jaas = None if kafka_protocol else security["broker_jaas_config"]  # set.acl: /kafka-acl is the brokers'
    added = _zkraft("acls", *where, "--add", "--allow-principal", "User:alice", *args, jaas=jaas)
    assert added.returncode == 0, added.stderr
    assert "Current ACLs for resource" in added.stdout and "principal=User:alice" in added.stdout


def _eventually(attempt: object, refused: type[Exception] | tuple[type[Exception], ...]) -> None:
    """`attempt()` refused with `refused` until the new ACL reaches the brokers, then done (bounded)."""

    def allowed() -> bool:
        try:
            attempt()  # type: ignore[operator]
        except refused:
            return False
        return True

    wait_until(allowed, ACL_PROPAGATION_S, interval_s=0.5, message=f"still refused ({refused})")


def _alice(secure_cluster: dict) -> dict[str, object]:
    """The SCRAM user alice (stored as a user does, with `zkraft configs` logged in to the quorum as the brokers:
    zookeeper.set.acl keeps /config/users the brokers'; again is harmless) and her SDK keywords: the admin's
    certificate for the port's mutual TLS, her own login."""
    security = secure_cluster["security"]
    zk_tls = ("--zk-tls-config-file", security["zookeeper_client_properties"])
    user = _zkraft("configs", "--zookeeper", secure_cluster["quorum"], *zk_tls, "--alter", "--entity-type", "users",
                   "--entity-name", "alice", "--add-config", f"SCRAM-SHA-512=[password={ALICE_PASSWORD}]",
                   jaas=security["broker_jaas_config"])  # fmt: skip
    assert user.returncode == 0, user.stderr
    jaas = f'{SCRAM_MODULE} required username="alice" password="{ALICE_PASSWORD}";'
    return _client_security(secure_cluster, **{"sasl.jaas.config": jaas})


def test_a_user_without_acls_is_refused_then_allowed_one_operation_at_a_time(secure_cluster: dict) -> None:
    """As the Kafka-protocol ACL test does for librdkafka, through the SDK on the gRPC ports: alice logs in, is
    refused to create, produce and consume, and `zkraft acls` allows each in turn."""
    alice = _alice(secure_cluster)
    bootstrap, topic = secure_cluster["brokers"], "alice-orders"

    def create() -> None:
        with Admin(bootstrap, **alice) as admin:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])

    def produce() -> None:
        with Producer(bootstrap, **alice, acks="all", request_timeout_ms=5000, delivery_timeout_ms=10000) as p:
            p.send(topic, b"from alice").get(timeout=30)

    def consume() -> None:
        consumer = Consumer(topic, bootstrap_servers=bootstrap, **alice, group_id="alice-group",
                            auto_offset_reset="earliest")  # fmt: skip
        try:
            values = [r.value for records in consumer.poll(timeout_ms=5000).values() for r in records]
        finally:
            consumer.close()
        assert values == [b"from alice"], values

    for attempt, refused, acl, kafka_protocol in (
        (create, TopicAuthorizationFailedError, ("--operation", "Create", "--topic", topic), False),
        (produce, TopicAuthorizationFailedError, ("--operation", "Write", "--topic", topic), True),
        (consume, (TopicAuthorizationFailedError, GroupAuthorizationFailedError),
         ("--consumer", "--topic", topic, "--group", "alice-group"), False),
    ):  # fmt: skip
        with pytest.raises(refused):
            attempt()
        _acls(secure_cluster, *acl, kafka_protocol=kafka_protocol)
        _eventually(attempt, refused)


def _replica_rpcs(address: str, tls: TlsConfig, metadata: tuple[tuple[str, str], ...] = ()) -> tuple[int, list[int]]:
    """(LeaderAndIsr's error code, a follower Fetch's partition error codes) of a call with `tls`'s certificate."""
    with grpc_channels.sync_channel(address, tls) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        leader_and_isr = stub.LeaderAndIsr(broker_pb2.LeaderAndIsrRequest(controller_epoch=-1), timeout=10,
                                           metadata=metadata)  # fmt: skip
        topics = [broker_pb2.FetchTopic(topic="secure-sdk", partitions=[broker_pb2.FetchPartition(partition=0)])]
        fetch = stub.Fetch(broker_pb2.FetchRequest(replica_id=2, max_wait_ms=0, topics=topics), timeout=10,
                           metadata=metadata)  # fmt: skip
    return leader_and_isr.error_code, [p.error_code for t in fetch.responses for p in t.partitions]


def test_only_brokers_may_call_the_replica_rpcs(secure_cluster: dict) -> None:
    """ClusterAction, checked as Kafka 2.8's KafkaApis does: a broker's certificate passes; the admin's
    certificate without a login (User:CN=admin) and alice's login do not."""
    ca = Path(secure_cluster["security"]["ca_file"])
    first = secure_cluster["brokers"].split(",")[0]
    broker_code, broker_fetch = _replica_rpcs(first, TlsConfig(ca.parent / "broker-2.pem", ca))
    assert broker_code != errors.ClusterAuthorizationFailedError.code
    assert errors.TopicAuthorizationFailedError.code not in broker_fetch
    admin_tls = TlsConfig(ca.parent / "admin.pem", ca)
    refused = (errors.ClusterAuthorizationFailedError.code, [errors.TopicAuthorizationFailedError.code])
    assert _replica_rpcs(first, admin_tls) == refused
    alice = _alice(secure_cluster)
    with grpc_channels.sync_channel(first, admin_tls) as channel:
        session = GrpcSaslSession(first, channel, alice["sasl"], 10.0)  # type: ignore[arg-type]
        session.ensure()
        assert _replica_rpcs(first, admin_tls, (("authorization", f"Bearer {session.token}"),)) == refused
    with pytest.raises(grpc.RpcError) as unauthenticated:
        _replica_rpcs(first, admin_tls, (("authorization", "Bearer made-up"),))
    assert unauthenticated.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "not known to this broker" in (unauthenticated.value.details() or "")


def test_a_deleted_user_is_refused_at_once_on_the_grpc_ports(secure_cluster: dict) -> None:
    """A gRPC session is not a connection the broker can close: deleting alice's credential ends her sessions as
    the /config/changes notification reaches each broker, and her next login is refused."""
    alice = _alice(secure_cluster)
    ca = Path(secure_cluster["security"]["ca_file"])
    first = secure_cluster["brokers"].split(",")[0]
    admin_tls = TlsConfig(ca.parent / "admin.pem", ca)
    with grpc_channels.sync_channel(first, admin_tls) as channel:
        session = GrpcSaslSession(first, channel, alice["sasl"], 10.0)  # type: ignore[arg-type]
        session.ensure()
        metadata = (("authorization", f"Bearer {session.token}"),)
        stub = broker_pb2_grpc.BrokerStub(channel)
        stub.Metadata(broker_pb2.MetadataRequest(all_topics=True), timeout=10, metadata=metadata)  # served
        zk_tls = ("--zk-tls-config-file", secure_cluster["security"]["zookeeper_client_properties"])
        deleted = _zkraft("configs", "--zookeeper", secure_cluster["quorum"], *zk_tls, "--alter", "--entity-type",
                          "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-512",
                          jaas=secure_cluster["security"]["broker_jaas_config"])  # fmt: skip
        assert deleted.returncode == 0, deleted.stderr

        def refused() -> bool:
            try:
                stub.Metadata(broker_pb2.MetadataRequest(all_topics=True), timeout=10, metadata=metadata)
            except grpc.RpcError as error:
                return error.code() == grpc.StatusCode.UNAUTHENTICATED
            return False

        wait_until(refused, ACL_PROPAGATION_S, interval_s=0.2, message="alice's session outlived her credential")
        with pytest.raises(SaslAuthenticationFailedError, match=f"^{INVALID_CREDENTIALS}$"):
            GrpcSaslSession(first, channel, alice["sasl"], 10.0).ensure()  # type: ignore[arg-type]


# ---------------------------------------------------------------- a node with another CA's certificate


async def _node_status(address: str, tls: TlsConfig) -> quorum_pb2.StatusResponse | None:
    async with grpc_channels.aio_channel(address, tls) as channel:
        try:
            return await quorum_pb2_grpc.QuorumStub(channel).Status(quorum_pb2.StatusRequest(), timeout=2)
        except grpc.aio.AioRpcError:
            return None


async def _leader_status(
    cluster: QuorumProcesses, node_ids: tuple[int, ...], tls: TlsConfig
) -> quorum_pb2.StatusResponse:
    async def probe() -> quorum_pb2.StatusResponse | None:
        for node_id in node_ids:
            status = await _node_status(cluster.addresses[node_id], tls)
            if status is not None and status.role == "leader":
                return status
        return None

    return await poll_until(probe, CLUSTER_WAIT_S, "no leader among the nodes with the cluster's certificates")


def _match_index(leader: quorum_pb2.StatusResponse, node_id: int) -> int:
    return next((f.match_index for f in leader.followers if f.id == node_id), 0)


def test_a_node_with_another_cas_certificate_cannot_join_and_the_real_one_then_does(
    tmp_path: Path, pki: dict[str, Path]
) -> None:
    node_tls = {
        "sslQuorum": "true",
        "ssl.quorum.keyStore.location": str(pki["server"]),
        "ssl.quorum.trustStore.location": str(pki["ca"]),
    }
    tls = TlsConfig(pki["server"], pki["ca"])
    with QuorumProcesses(tmp_path, n=3, properties=node_tls) as cluster:
        cluster.start(1)
        cluster.start(2)
        # The intruder trusts the cluster's CA but holds a certificate of another CA.
        intruder_config = tmp_path / "intruder.properties"
        intruder_config.write_text(
            cluster.config_path.read_text().replace(str(pki["server"]), str(pki["other"])), encoding="utf-8"
        )
        intruder = subprocess.Popen(
            [*cluster.command(3)[:-1], str(intruder_config)],
            stdin=subprocess.DEVNULL,
            stdout=(tmp_path / "intruder.log").open("wb"),
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=subprocess_env(),
        )
        try:
            asyncio.run(_refused_then_joined(cluster, tls, intruder, tmp_path / "intruder.log"))
        finally:
            intruder.kill()
            intruder.wait(timeout=10)


async def _refused_then_joined(
    cluster: QuorumProcesses, tls: TlsConfig, intruder: subprocess.Popen[bytes], intruder_log: Path
) -> None:
    leader = await _leader_status(cluster, (1, 2), tls)
    async with QuorumClient(
        [cluster.addresses[1], cluster.addresses[2]], request_timeout_s=CLUSTER_WAIT_S, tls=tls
    ) as client:
        for i in range(WRITES):
            await client.set(b"k%d" % i, b"v")

        # Proof that the intruder ran and tried: it reports the peers unreachable (its handshakes are refused).
        async def intruder_tried() -> bool:
            return "peer_unreachable" in intruder_log.read_text(errors="replace")

        await poll_until(intruder_tried, CLUSTER_WAIT_S, "the intruder never tried its peers")
        assert intruder.poll() is None, intruder_log.read_text(errors="replace")
        for i in range(WRITES):
            await client.set(b"after-%d" % i, b"v")  # the two real nodes commit on, undisturbed
        now = await _leader_status(cluster, (1, 2), tls)
        assert now.term == leader.term and now.id == leader.id  # the intruder forced no election
        assert _match_index(now, 3) == 0 and now.commit_index >= 2 * WRITES
        # The real node 3, with the cluster's certificate, joins and catches up.
        intruder.kill()
        intruder.wait(timeout=10)
        cluster.start(3)
        await client.set(b"last", b"v")

        async def caught_up() -> bool:
            status = await _leader_status(cluster, (1, 2, 3), tls)
            return _match_index(status, 3) >= status.commit_index > 0

        await poll_until(caught_up, CLUSTER_WAIT_S, "the real node 3 did not catch up")


def test_only_certain_tls_failures_end_a_clients_retries(pki: dict[str, Path]) -> None:
    """A client gives up at once only when retrying cannot help; a TLS connection closed after the handshake may be
    a server stopping (a broker restarting), so a Kafka client keeps trying then."""
    ca_only, with_key = TlsConfig(None, pki["ca"]), TlsConfig(pki["client"], pki["ca"])
    closed, handshake = "ipv4:127.0.0.1:1: Socket closed", "Tls handshake failed (TSI_PROTOCOL_FAILURE): ..."
    assert grpc_channels.is_permanent(None, closed)  # a plaintext client on a port that speaks TLS
    assert grpc_channels.is_permanent(with_key, handshake)
    assert not grpc_channels.is_permanent(ca_only, closed)
    assert grpc_channels.is_permanent(ca_only, closed, certificate_required=True)
    assert not grpc_channels.is_permanent(with_key, closed, certificate_required=True)


def test_turning_host_name_verification_off_is_refused_by_name(pki: dict[str, Path]) -> None:
    ssl = {"security.protocol": "SSL", "ssl.truststore.location": str(pki["ca"])}
    with pytest.raises(TlsConfigError, match=r"^ssl.endpoint.identification.algorithm: host name verification cannot"):
        kafka_client_tls({**ssl, "ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(SettingsError, match=r"^ssl.quorum.hostnameVerification: cannot be turned off"):
        _node_settings(
            ssl_quorum_keystore_location=str(pki["server"]),
            ssl_quorum_truststore_location=str(pki["ca"]),
            ssl_quorum_hostname_verification=False,
        )


def test_a_second_secure_setup_keeps_the_ca_the_keystores_and_the_password(tmp_path: Path) -> None:
    from zkraft import secure_setup
    from zkraft.up import BROKER, QUORUM_NODE, ChildSpec

    def child(role: str, address: str, name: str) -> ChildSpec:
        return ChildSpec(role, 1, address, tmp_path / name, tmp_path / f"{name}.properties", tmp_path / "x.log", ())

    children = [child(QUORUM_NODE, "127.0.0.1:7001", "q1"), child(BROKER, "127.0.0.1:9192", "b1")]
    cluster_file = tmp_path / "cluster.json"
    first = secure_setup.prepare(tmp_path, children, cluster_file)
    cluster_file.write_text(json.dumps({"security": first.cluster_record()}))
    keystore = first.keystore(children[0]).read_bytes()
    second = secure_setup.prepare(tmp_path, children, cluster_file)
    assert second.password == first.password and second.ca_file.read_bytes() == first.ca_file.read_bytes()
    assert second.keystore(children[0]).read_bytes() == keystore
    assert first.keystore(children[0]).name == "quorum-1.pem" and first.keystore(children[1]).name == "broker-1.pem"
    node = x509.load_pem_x509_certificates(keystore)[0]
    assert node.subject.rfc4514_string() == "CN=quorum-1"
    assert stat.S_IMODE(os.stat(first.client_properties).st_mode) == 0o600


def test_up_secure_console_asks_for_a_scram_login_and_then_reads_over_tls(secure_cluster: dict) -> None:
    """The console `zkraft up --secure` starts: every page asks for a login; a wrong password is refused; the
    admin's SCRAM password (checked against /config/users) opens the overview, read over TLS."""
    from tests.helpers import wait_until
    from tests.test_console_units import _open  # a urllib opener that does not follow redirects

    url = secure_cluster["up"].cluster()["console_url"].rstrip("/")

    def answers() -> bool:
        try:
            return _open(f"{url}/")[0] == 303
        except OSError:  # not listening yet
            return False

    wait_until(answers, CLUSTER_WAIT_S, interval_s=0.1, message="the console never answered")
    assert _open(f"{url}/")[1]["location"] == "/login?next=%2F"
    security = secure_cluster["security"]
    status, _, body = _open(f"{url}/login", f"user={security['username']}&password=wrong".encode())
    assert status == 401 and "Wrong user or password" in body
    form = f"user={security['username']}&password={security['password']}&next=/".encode()
    status, headers, _ = _open(f"{url}/login", form)
    assert (status, headers["location"]) == (303, "/")
    status, _, body = _open(f"{url}/", cookie=headers["set-cookie"].split(";", 1)[0])
    assert status == 200 and 'id="brokers"' in body and "Controller: broker" in body and "leader" in body
