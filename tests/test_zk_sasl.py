"""ZooKeeper SASL DIGEST-MD5 logins (ZooKeeperServer.processSasl), on both front ends.

Unit: the RFC 2831 exchange against pure-sasl's client (what kazoo runs) and our own, wrong passwords
and malformed tokens, the JAAS file. Cluster (one shared quorum whose JAAS Server section has `bob`
and the super user `admin`): kazoo with `sasl_options` logs in and owns a `sasl:bob` node nobody
else may change; a wrong password is AUTH_FAILED and the server keeps serving; the SDK's client logs
in the same way over the gRPC session stream.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import puresasl.client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, NoAuthError, SessionClosedRequireSaslError
from kazoo.protocol.states import KazooState
from kazoo.security import make_acl

from client.zk.acl import make_acl as sdk_make_acl
from client.zk.client import ZkClient
from client.zk.digest_md5 import DigestMd5Client, DigestMd5Server, SaslError
from client.zk.exceptions import AuthFailedError as SdkAuthFailedError
from client.zk.exceptions import NoAuthError as SdkNoAuthError
from quorum.settings import SettingsError, load_node_settings, properties_to_values
from runtime.jaas import (
    JaasError,
    digest_client_login,
    digest_server_users,
    login_config_from_jvm_flags,
    optional_client_login,
)
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader
from tests.real_zookeeper import find_java, pyspark_jars_dir
from zkemu import acl
from zkemu.sasl import SaslLogins

LEADER_TIMEOUT_S = 30.0
SASL_BOB = {"mechanism": "DIGEST-MD5", "username": "bob", "password": "bob-secret"}
JAAS = """
// users of the quorum (ZooKeeper's DigestLoginModule)
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_admin="admin-secret"
    user_bob="bob-secret";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="bob"
    password="bob-secret";
};
"""


DIRECTIVE_PIECES = [b'username="bob"', b'nonce="fixed-nonce"', b'cnonce="c"', b"nc=00000001", b"qop=auth",
                    b'digest-uri="zookeeper/zk-sasl-md5"', b"response=0123", b'realm="zk-sasl-md5"', b"charset=utf-8",
                    b'authzid="admin"', b'x="\\"', b"=", b'"', b"nc=2"]  # fmt: skip


def _puresasl_login(server: DigestMd5Server, password: str) -> puresasl.client.SASLClient:
    """kazoo's loop (KazooClient._authenticate_with_sasl), bounded."""
    client = puresasl.client.SASLClient(
        host="zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username="bob", password=password
    )
    challenge = None
    for _ in range(4):
        response = client.process(challenge)
        if client.complete and not response:
            break
        challenge = server.evaluate(response or b"")
    return client


def test_digest_md5_logs_in_kazoos_client_and_ours() -> None:
    server = DigestMd5Server({"bob": "bob-secret"})
    assert _puresasl_login(server, "bob-secret").complete
    assert (server.complete, server.authorization_id) == (True, "bob")

    server, ours = DigestMd5Server({"bob": "bob-secret"}), DigestMd5Client("bob", "bob-secret")
    token = ours.evaluate(b"")
    for _ in range(2):
        token = ours.evaluate(server.evaluate(token)) if not ours.complete else token
    assert ours.complete and server.authorization_id == "bob"


@pytest.mark.parametrize(
    ("users", "password"), [({"bob": "bob-secret"}, "wrong"), ({"alice": "bob-secret"}, "bob-secret")]
)
def test_a_wrong_password_or_unknown_user_fails_in_one_line(users: dict[str, str], password: str) -> None:
    with pytest.raises(SaslError, match="login of user 'bob' failed"):
        _puresasl_login(DigestMd5Server(users), password)


@pytest.mark.parametrize(
    "token",
    [b"", b"\xff\x00garbage", b'username="bob"', b'username="bob",nonce="x",cnonce="y",nc=00000001,digest-uri='
     b'"zookeeper/zk-sasl-md5",response=0', b"a=" + b"x" * 5000, b'username="unterminated'],
)  # fmt: skip
def test_a_malformed_response_is_a_sasl_error_not_a_crash(token: bytes) -> None:
    server = DigestMd5Server({"bob": "bob-secret"})
    server.evaluate(b"")
    with pytest.raises(SaslError):
        server.evaluate(token)
    with pytest.raises(SaslError, match="already finished"):
        server.evaluate(token)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600) | st.lists(st.sampled_from(DIRECTIVE_PIECES), max_size=12).map(b",".join))
def test_any_response_bytes_are_a_login_or_a_sasl_error(token: bytes) -> None:
    server = DigestMd5Server({"bob": "bob-secret"}, nonce=b"fixed-nonce")
    server.evaluate(b"")
    try:
        server.evaluate(token)
    except SaslError:
        return
    raise AssertionError(f"{token!r} logged in without the password")


def test_jaas_sections_and_jvm_flags(tmp_path: Path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(JAAS, encoding="utf-8")
    assert digest_server_users(path) == {"admin": "admin-secret", "bob": "bob-secret"}
    assert digest_client_login(path) == ("bob", "bob-secret")
    flags = f"-Xmx512m -Djava.security.auth.login.config={path} -Dzookeeper.superUser=admin"
    assert login_config_from_jvm_flags(flags) == path
    with pytest.raises(JaasError, match="no 'KafkaServer' section"):
        digest_server_users(path, "KafkaServer")
    kafka_only = tmp_path / "kafka.conf"  # a JAAS file for Kafka's own logins: no ZooKeeper login, no error
    kafka_only.write_text('KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required a="1"; };')
    assert optional_client_login(kafka_only) is None
    (tmp_path / "bad.conf").write_text("Server { Foo bogus a=1; };", encoding="utf-8")
    with pytest.raises(JaasError, match="control flag 'bogus'"):
        digest_server_users(tmp_path / "bad.conf")


def test_zoo_cfgs_auth_provider_lines_are_accepted() -> None:
    provider = {"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"}
    base = {"node_id": 1, "data_dir": "/tmp/unused", "peers": "1=127.0.0.1:7001"}
    load_node_settings({**base, **properties_to_values(provider, "")}, None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"java.security.auth.login.config": "/nonexistent/jaas.conf"}, "cannot read the JAAS file"),
        ({"enforce.auth.enabled": "true"}, "enforce.auth.schemes must be configured"),
        ({"enforce.auth.enabled": "true", "enforce.auth.schemes": "kerberos"}, "scheme 'kerberos' is not available"),
        ({"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"}, "needs a JAAS file with a Server section"),
        ({"authProvider.1": "com.example.LdapProvider"}, "'com.example.LdapProvider' is not served"),
    ],
)
def test_bad_sasl_settings_are_one_line(extra: dict[str, str], message: str) -> None:
    base = {"node_id": 1, "data_dir": "/tmp/unused", "peers": "1=127.0.0.1:7001"}
    with pytest.raises(SettingsError, match=message):
        load_node_settings({**base, **properties_to_values(extra, "")}, None)


def test_the_sasl_scheme_in_acls() -> None:
    owned = (acl.Acl(acl.ALL, acl.SASL, "bob"),)
    acl.check(owned, acl.WRITE, (acl.Id(acl.SASL, "bob"),), "/a")
    acl.check(owned, acl.WRITE, (acl.Id(acl.SASL, "super"),), "/a")  # SASLAuthenticationProvider.matches
    with pytest.raises(acl.NoAuthError):
        acl.check(owned, acl.WRITE, (acl.Id(acl.SASL, "alice"), acl.Id(acl.DIGEST, "bob:x")), "/a")
    assert acl.fixup("/a", (acl.Acl(acl.ALL, acl.AUTH, ""),), (acl.Id(acl.SASL, "bob"),)) == owned
    logins = SaslLogins({"bob": "x"}, enforce_schemes=frozenset({"sasl"}))
    assert not logins.allows((acl.Id(acl.IP, "127.0.0.1"),)) and logins.allows((acl.Id(acl.SASL, "bob"),))


# ---------------------------------------------------------------- a quorum with SASL users
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    root = tmp_path_factory.mktemp("sasl")
    jaas = root / "jaas.conf"
    jaas.write_text(JAAS, encoding="utf-8")
    properties = {
        **FAST_ZK_PROPERTIES,
        "java.security.auth.login.config": str(jaas),
        "zookeeper.superUser": "admin",
    }
    with QuorumProcesses(root, n=1, properties=properties) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        yield processes


def _kazoo(cluster: QuorumProcesses, user: str | None = None, password: str = "") -> KazooClient:
    options = {"mechanism": "DIGEST-MD5", "username": user, "password": password} if user else None
    return KazooClient(hosts=cluster.zk_address(1), timeout=4.0, sasl_options=options)


def test_kazoo_logs_in_and_its_sasl_acl_keeps_others_out(cluster: QuorumProcesses) -> None:
    bob, anonymous, admin = (
        _kazoo(cluster, "bob", "bob-secret"),
        _kazoo(cluster),
        _kazoo(cluster, "admin", "admin-secret"),
    )
    for zk in (bob, anonymous, admin):
        zk.start(timeout=30)
    try:
        bob.create("/bobs", b"v", acl=[make_acl("sasl", "bob", all=True), make_acl("world", "anyone", read=True)])
        assert anonymous.get("/bobs")[0] == b"v"
        with pytest.raises(NoAuthError):
            anonymous.set("/bobs", b"x")
        bob.set("/bobs", b"bob's")
        admin.set("/bobs", b"admin's")  # zookeeper.superUser passes every check
        assert bob.get("/bobs")[0] == b"admin's"
    finally:
        for zk in (bob, anonymous, admin):
            zk.stop()
            zk.close()


def test_a_wrong_password_is_auth_failed_and_the_server_keeps_serving(cluster: QuorumProcesses) -> None:
    zk = _kazoo(cluster, "bob", "wrong")
    states: list[KazooState] = []
    zk.add_listener(states.append)
    try:
        # kazoo reports CONNECTED before it logs in, so start() returns; AUTH_FAILED then ends the session.
        zk.start(timeout=30)
        wait_until(lambda: KazooState.LOST in states, timeout_s=10, message=f"session not lost: {states}")
        with pytest.raises(ConnectionClosedError):
            zk.exists("/")
    finally:
        zk.stop()
        zk.close()
    assert any(e["event"] == "sasl_auth_failed" for e in cluster.log_events(1))
    # Raw junk as a SASL token: AUTHFAILED (-115), then the connection closes.
    with socket.create_connection(_host_port(cluster.zk_address(1)), timeout=5) as sock:
        sock.sendall(_frame(struct.pack(">iqi16s", 0, 0, 4000, b"\0" * 16)))
        _read_frame(sock)
        sock.sendall(_frame(struct.pack(">ii", 1, 102) + struct.pack(">i", 3) + b"xyz"))
        _read_frame(sock)  # the challenge
        sock.sendall(_frame(struct.pack(">ii", 2, 102) + struct.pack(">i", 5) + b"\xff\x00=,"[:5].ljust(5, b"a")))
        xid, _zxid, err = struct.unpack_from(">iqi", _read_frame(sock))
        assert (xid, err) == (2, -115)
        assert wait_until(lambda: sock.recv(1) == b"", timeout_s=5)
    ok = _kazoo(cluster, "bob", "bob-secret")
    ok.start(timeout=30)
    assert ok.exists("/") is not None
    ok.stop()
    ok.close()


def test_the_sdk_logs_in_over_the_grpc_session_stream(cluster: QuorumProcesses) -> None:
    bob = ZkClient(cluster.addresses[1], timeout=30, sasl_options={"mechanism": "DIGEST-MD5", "username": "bob",
                                                                    "password": "bob-secret"})  # fmt: skip
    anonymous = ZkClient(cluster.addresses[1], timeout=30)
    bob.start()
    anonymous.start()
    try:
        bob.create("/sdk", b"v", acl=[sdk_make_acl("sasl", "bob", all=True)])
        bob.set("/sdk", b"w")
        with pytest.raises(SdkNoAuthError):
            anonymous.set("/sdk", b"x")
    finally:
        for zk in (bob, anonymous):
            zk.stop()
            zk.close()
    wrong = ZkClient(cluster.addresses[1], timeout=10, sasl_options={"mechanism": "DIGEST-MD5", "username": "bob",
                                                                      "password": "nope"})  # fmt: skip
    with pytest.raises(SdkAuthFailedError, match="SASL login of 'bob' refused"):
        wrong.start()
    wrong.close()
    with pytest.raises(ValueError, match="only DIGEST-MD5"):
        ZkClient(cluster.addresses[1], sasl_options={"mechanism": "GSSAPI"})


def test_enforce_auth_closes_a_session_that_did_not_log_in(tmp_path: Path) -> None:
    """ZooKeeper 3.7's enforce.auth.enabled / enforce.auth.schemes=sasl: kazoo without a login gets
    SESSIONCLOSEDREQUIRESASLAUTH on its first request; with one it works."""
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS, encoding="utf-8")
    enforced = {**FAST_ZK_PROPERTIES, "enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl",
                "java.security.auth.login.config": str(jaas)}  # fmt: skip
    with QuorumProcesses(tmp_path / "q", n=1, properties=enforced) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        anonymous = KazooClient(hosts=processes.zk_address(1), timeout=4.0)
        anonymous.start(timeout=30)
        try:
            with pytest.raises(SessionClosedRequireSaslError):
                anonymous.exists("/")
        finally:
            anonymous.stop()
            anonymous.close()
        bob = KazooClient(hosts=processes.zk_address(1), timeout=4.0, sasl_options=SASL_BOB)
        bob.start(timeout=30)
        assert bob.exists("/") is not None
        bob.stop()
        bob.close()


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def test_zkcli_logs_in_with_a_jaas_client_section(cluster: QuorumProcesses, tmp_path: Path) -> None:
    """ZooKeeper 3.9's own zkCli (Java's DigestMD5Client, which also sends an authzid) with the JAAS file."""
    java, jars = find_java(), pyspark_jars_dir()
    if java is None or jars is None:
        pytest.skip("zkCli needs java and pyspark's jars")
    jaas = tmp_path / "client-jaas.conf"
    jaas.write_text(JAAS, encoding="utf-8")
    script = "whoami\ncreate /zkcli-sasl v auth::cdrwa\ngetAcl /zkcli-sasl\nquit\n"
    command = [java, f"-Djava.security.auth.login.config={jaas}", "-Dzookeeper.fips-mode=false",
               "-cp", f"{jars}/*", "org.apache.zookeeper.ZooKeeperMain", "-server", cluster.zk_address(1)]  # fmt: skip
    done = subprocess.run(command, input=script, capture_output=True, text=True, timeout=120)
    assert "sasl: bob" in done.stdout, done.stdout + done.stderr
    assert "'sasl,'bob\n: cdrwa" in done.stdout, done.stdout
