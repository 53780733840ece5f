"""kazoo, zkCli and Kafka 3.9's broker over ZooKeeper's secure client port (secureClientPort, TLS) of a quorum node.

What a kazoo user with `use_ssl=True` checks: every basic operation and watches work over TLS, beside the
plaintext clientPort, which sees the same tree; with ZooKeeper's default `ssl.clientAuth=need`, a client
without a certificate is refused, as are a client that does not trust the node's CA and a plaintext client on
the secure port; each refusal is one `zk_tls_handshake_failed` line on the node, which serves on. ZooKeeper's
own Java client (zkCli, Netty, PEM stores) and Kafka 3.9's own broker (`zookeeper.ssl.client.enable`) work
over it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from runtime.tls import TlsConfig
from tests import maven_jars
from tests.helpers import wait_until
from tests.kafka39_harness import Kafka39Brokers
from tests.quorum_harness import FAST_ZK_PROPERTIES, LOOPBACK, QuorumProcesses, free_ports, wait_for_leader
from tests.real_zookeeper import find_java, pyspark_jars_dir, unavailable_reason
from tests.tls_material import TlsMaterial, make_tls_material

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0
KAZOO_TIMEOUT_S = 4.0
# A refused client's start() gives up after this long (kazoo retries until its timeout; the node refused it at once).
REFUSED_START_S = 5.0


@dataclass
class SecureNode:
    processes: QuorumProcesses
    material: TlsMaterial
    secure_address: str

    def handshake_failures(self) -> list[dict[str, Any]]:
        return self.processes.log_events(1, "zk_tls_handshake_failed")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    root = tmp_path_factory.mktemp("zk-tls")
    material = make_tls_material(root / "tls")
    [secure_port] = free_ports(1)
    properties = {
        **FAST_ZK_PROPERTIES,
        "secureClientPort": str(secure_port),
        "secureClientPortAddress": LOOPBACK,
        "ssl.keyStore.location": str(material.server_keystore),
        "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": str(material.ca_file),
        "ssl.trustStore.type": "PEM",
        "4lw.commands.whitelist": "conf",
    }
    with QuorumProcesses(root / "quorum", n=1, properties=properties) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        asyncio.run(processes.wait_client_ports(timeout_s=LEADER_TIMEOUT_S))
        yield SecureNode(processes, material, f"{LOOPBACK}:{secure_port}")
        processes.assert_alive(1)


@pytest.fixture
def kazoos() -> Iterator[list[KazooClient]]:
    made: list[KazooClient] = []
    yield made
    for zk in made:
        zk.stop()
        zk.close()


def tls_kazoo(made: list[KazooClient], node: SecureNode, **overrides: Any) -> KazooClient:
    options: dict[str, Any] = {
        "use_ssl": True,
        "ca": str(node.material.ca_file),
        "certfile": str(node.material.client_cert),
        "keyfile": str(node.material.client_key),
        "verify_certs": True,
        "check_hostname": True,
        **overrides,
    }
    zk = KazooClient(hosts=node.secure_address, timeout=KAZOO_TIMEOUT_S, **options)
    made.append(zk)
    return zk


def test_kazoo_over_tls_does_every_basic_operation(node: SecureNode, kazoos: list[KazooClient]) -> None:
    zk = tls_kazoo(kazoos, node)
    zk.start(timeout=WAIT_S)
    zk.create("/tls", b"v0")
    assert zk.get("/tls")[0] == b"v0"
    stat = zk.set("/tls", b"v1")
    assert stat.version == 1
    assert zk.exists("/tls") is not None
    sequential = zk.create("/tls/seq-", b"", sequence=True)
    assert sequential.startswith("/tls/seq-")
    zk.create("/tls/ephemeral", b"", ephemeral=True)
    transaction = zk.transaction()
    transaction.create("/tls/in-txn", b"t")
    transaction.set_data("/tls", b"v2", version=1)
    created, updated = transaction.commit()
    assert (created, updated.version) == ("/tls/in-txn", 2)
    assert sorted(zk.get_children("/tls")) == sorted(["ephemeral", "in-txn", sequential.rsplit("/", 1)[1]])
    # The plaintext clientPort serves the same tree.
    plain = KazooClient(hosts=node.processes.zk_address(1), timeout=KAZOO_TIMEOUT_S)
    kazoos.append(plain)
    plain.start(timeout=WAIT_S)
    assert plain.get("/tls")[0] == b"v2"
    zk.delete("/tls", recursive=True)
    assert plain.exists("/tls") is None


def test_watches_fire_over_tls(node: SecureNode, kazoos: list[KazooClient]) -> None:
    zk = tls_kazoo(kazoos, node)
    zk.start(timeout=WAIT_S)
    zk.create("/tls-watch", b"")
    events: list[Any] = []
    lock = threading.Lock()

    def record(event: Any) -> None:
        with lock:
            events.append(event)

    zk.get("/tls-watch", watch=record)
    zk.get_children("/tls-watch", watch=record)
    zk.set("/tls-watch", b"changed")
    zk.create("/tls-watch/child", b"")
    wait_until(lambda: len(events) >= 2, WAIT_S, message="the data and child watches did not both fire")
    with lock:
        assert {e.type for e in events} == {EventType.CHANGED, EventType.CHILD}
    zk.delete("/tls-watch", recursive=True)


def four_letter_word(address: str, word: bytes, context: ssl.SSLContext | None = None) -> str:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as raw:
        with context.wrap_socket(raw, server_hostname=host) if context else contextlib.nullcontext(raw) as sock:
            sock.sendall(word)
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    return b"".join(chunks).decode()


def test_four_letter_words_answer_on_both_ports_and_conf_names_the_secure_one(node: SecureNode) -> None:
    port = node.secure_address.rsplit(":", 1)[1]
    assert f"secureClientPort={port}" in four_letter_word(node.processes.zk_address(1), b"conf")
    material = node.material
    context = TlsConfig(material.client_keystore, material.ca_file).client_ssl_context()
    assert f"secureClientPort={port}" in four_letter_word(node.secure_address, b"conf", context)


def refused(zk: KazooClient) -> float:
    """Seconds until kazoo's start() gave up."""
    started = time.monotonic()
    with pytest.raises(KazooTimeoutError):
        zk.start(timeout=REFUSED_START_S)
    return time.monotonic() - started


@pytest.mark.parametrize(
    ("case", "overrides", "reason"),
    [
        ("plaintext", {"use_ssl": False}, ("plaintext client",)),
        ("no certificate", {"certfile": None, "keyfile": None}, ("sent no certificate",)),
        # The client's alert, or its close when the alert did not arrive first.
        ("another CA", {"ca": "other"}, ("does not trust this server's CA", "the client ended the connection")),
    ],
)
def test_a_client_the_secure_port_cannot_trust_is_refused_and_logged(
    node: SecureNode, kazoos: list[KazooClient], case: str, overrides: dict[str, Any], reason: tuple[str, ...]
) -> None:
    if overrides.get("ca") == "other":
        overrides = {**overrides, "ca": str(node.material.other_ca_file)}
    before = len(node.handshake_failures())
    zk = tls_kazoo(kazoos, node, **overrides)
    assert refused(zk) <= REFUSED_START_S + 2, case
    wait_until(lambda: len(node.handshake_failures()) > before, WAIT_S, message=f"{case}: no zk_tls_handshake_failed")
    logged = node.handshake_failures()[before]["reason"]
    assert any(text in logged for text in reason), logged
    node.processes.assert_alive(1)


ZKCLI_TIMEOUT_S = 90.0  # one JVM start and one command


def zkcli_over_tls(node: SecureNode, *command: str) -> subprocess.CompletedProcess[str]:
    """ZooKeeper's zkCli (the Java client) on the secure port: Netty, `zookeeper.client.secure`, PEM stores."""
    java, jars = find_java(), pyspark_jars_dir()
    assert java is not None and jars is not None
    material = node.material
    properties = {
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.client.secure": "true",
        "zookeeper.ssl.keyStore.location": material.client_keystore,
        "zookeeper.ssl.keyStore.type": "PEM",
        "zookeeper.ssl.trustStore.location": material.ca_file,
        "zookeeper.ssl.trustStore.type": "PEM",
        "zookeeper.ssl.hostnameVerification": "true",
    }
    return subprocess.run(
        [
            java,
            *(f"-D{key}={value}" for key, value in properties.items()),
            "-cp",
            str(Path(jars) / "*"),
            "org.apache.zookeeper.ZooKeeperMain",
            "-server",
            node.secure_address,
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=ZKCLI_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"no ZooKeeper jars to run zkCli: {unavailable_reason()}")
def test_zkcli_reads_and_writes_over_tls_with_pem_stores(node: SecureNode) -> None:
    created = zkcli_over_tls(node, "create", "/zkcli-tls", "hello")
    assert created.returncode == 0 and "Created /zkcli-tls" in created.stdout + created.stderr, created.stderr[-2000:]
    got = zkcli_over_tls(node, "get", "/zkcli-tls")
    assert got.returncode == 0 and "hello" in got.stdout, got.stderr[-2000:]


KAFKA39_START_TIMEOUT_S = 240.0


@pytest.mark.skipif(maven_jars.unavailable_reason() is not None, reason=f"{maven_jars.unavailable_reason()}")
def test_kafka39s_broker_registers_over_the_secure_client_port(node: SecureNode, tmp_path: Path) -> None:
    """Kafka 3.9's own broker with `zookeeper.ssl.client.enable` (KIP-515), PEM stores, Netty: it registers."""
    material = node.material
    properties = {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(material.client_keystore),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(material.ca_file),
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.ssl.endpoint.identification.algorithm": "HTTPS",
    }
    jars = maven_jars.resolve()
    with Kafka39Brokers(tmp_path, jars, node.secure_address, n=1, properties=properties) as kafka:
        kafka.start_all()
        kafka.wait_started(timeout_s=KAFKA39_START_TIMEOUT_S)
        plain = KazooClient(hosts=node.processes.zk_address(1), timeout=KAZOO_TIMEOUT_S)
        plain.start(timeout=WAIT_S)
        try:
            assert "1" in plain.get_children("/brokers/ids")
            assert plain.exists("/controller") is not None
        finally:
            plain.stop()
            plain.close()
