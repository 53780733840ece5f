"""ACLs and auth through kazoo on the quorum's client ports (the ZooKeeper wire protocol), as a
kazoo user checks them: add_auth, make_digest_acl, get_acls / set_acls, NoAuth, InvalidACL,
AuthFailed, the super digest, kazoo re-sending its credentials when its server is SIGKILLed, and
kazoo and our SDK seeing the same ACLs. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError, BadVersionError, InvalidACLError, NoAuthError
from kazoo.security import (
    ACL,
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Id,
    make_acl,
    make_digest_acl,
    make_digest_acl_credential,
)

from client import ZkClient
from client.zk import acl as zk_acl
from client.zk.exceptions import NoAuthError as SdkNoAuthError
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0
KAZOO_TIMEOUT_S = 4.0
SUPER_PASSWORD = "s3cret"
PROPERTIES = {
    **FAST_ZK_PROPERTIES,
    "zookeeper.DigestAuthenticationProvider.superDigest": make_digest_acl_credential("super", SUPER_PASSWORD),
}
ALICE = make_digest_acl("alice", "pw-a", all=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("acl-kazoo"), n=3, properties=PROPERTIES) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        asyncio.run(processes.wait_client_ports(timeout_s=LEADER_TIMEOUT_S))
        yield processes


@pytest.fixture
def kazoos() -> Iterator[list[KazooClient]]:
    made: list[KazooClient] = []
    yield made
    for zk in made:
        zk.stop()
        zk.close()


def kazoo(made: list[KazooClient], hosts: str, auth: str | None = None, **kwargs: Any) -> KazooClient:
    kwargs.setdefault("timeout", KAZOO_TIMEOUT_S)
    zk = KazooClient(hosts=hosts, randomize_hosts=False, **kwargs)
    made.append(zk)
    zk.start(timeout=WAIT_S)
    if auth is not None:
        zk.add_auth("digest", auth)
    return zk


def test_kazoo_digest_acls_grants_denials_and_masking(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    alice = kazoo(kazoos, cluster.zk_address(1), auth="alice:pw-a")
    stranger = kazoo(kazoos, cluster.zk_address(2))
    alice.create("/kz-acl", b"secret", acl=[ALICE, *READ_ACL_UNSAFE])
    alice.create("/kz-acl/child", b"c")
    stranger.sync("/kz-acl")
    assert stranger.get("/kz-acl")[0] == b"secret"  # world READ
    with pytest.raises(NoAuthError):
        stranger.set("/kz-acl", b"x")
    with pytest.raises(NoAuthError):
        stranger.create("/kz-acl/other")
    with pytest.raises(NoAuthError):
        stranger.delete("/kz-acl/child")
    masked, stat = stranger.get_acls("/kz-acl")
    assert masked == [ACL(31, Id("digest", "alice:x")), *READ_ACL_UNSAFE] and stat.aversion == 0
    assert alice.get_acls("/kz-acl")[0] == [ALICE, *READ_ACL_UNSAFE]
    with pytest.raises(NoAuthError):
        stranger.set_acls("/kz-acl", OPEN_ACL_UNSAFE)
    with pytest.raises(BadVersionError):
        alice.set_acls("/kz-acl", [ALICE], version=5)
    assert alice.set_acls("/kz-acl", [ALICE], version=0).aversion == 1
    stranger.sync("/kz-acl")
    with pytest.raises(NoAuthError):
        stranger.get("/kz-acl")
    with pytest.raises(NoAuthError):
        stranger.get_children("/kz-acl")
    with pytest.raises(NoAuthError):
        stranger.exists("/kz-acl")
    alice.set("/kz-acl", b"v2")
    alice.delete("/kz-acl/child")


def test_kazoo_auth_scheme_ip_and_invalid_acls(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    zk = kazoo(kazoos, cluster.zk_address(3))
    with pytest.raises(InvalidACLError):
        zk.create("/kz-creator", acl=CREATOR_ALL_ACL)
    with pytest.raises(InvalidACLError):
        zk.create("/kz-bad", acl=[make_acl("ip", "300.1.1.1", all=True)])
    zk.add_auth("digest", "carol:pw-c")
    zk.create("/kz-creator", acl=CREATOR_ALL_ACL)
    assert zk.get_acls("/kz-creator")[0] == [make_digest_acl("carol", "pw-c", all=True)]
    zk.create("/kz-ip", b"near", acl=[make_acl("ip", "127.0.0.1", read=True)])
    other = kazoo(kazoos, cluster.zk_address(1))
    other.sync("/")
    assert other.get("/kz-ip")[0] == b"near"
    with pytest.raises(NoAuthError):
        other.set("/kz-ip", b"x")


def test_kazoo_super_digest_and_auth_failed(cluster: QuorumProcesses, kazoos: list[KazooClient]) -> None:
    owner = kazoo(kazoos, cluster.zk_address(1), auth="dave:pw-d")
    owner.create("/kz-locked", b"L", acl=[make_digest_acl("dave", "pw-d", all=True)])
    root = kazoo(kazoos, cluster.zk_address(2), auth=f"super:{SUPER_PASSWORD}")
    root.sync("/")
    assert root.get("/kz-locked")[0] == b"L"
    root.delete("/kz-locked")

    failing = kazoo(kazoos, cluster.zk_address(3))
    states: list[KazooState] = []
    failing.add_listener(states.append)
    with pytest.raises(AuthFailedError):
        failing.add_auth("kerberos", "whatever")
    wait_until(lambda: KazooState.LOST in states, WAIT_S, message="kazoo gives the session up after AUTHFAILED")


def test_kazoo_resends_its_auth_after_its_server_dies_and_sees_the_sdks_acls(tmp_path: Path) -> None:
    made: list[KazooClient] = []
    with QuorumProcesses(tmp_path, n=3, properties=PROPERTIES) as cluster:
        cluster.start_all()
        leader, _ = asyncio.run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        first = next(i for i in cluster.addresses if i != leader)
        hosts = ",".join(cluster.zk_address(i) for i in (first, *(i for i in cluster.addresses if i != first)))
        sdk = ZkClient(cluster.addresses[leader], timeout=WAIT_S, session_timeout_ms=4000)
        try:
            sdk.start()
            sdk.add_auth("digest", "alice:pw-a")
            sdk.create("/shared", b"from the sdk", acl=[zk_acl.make_digest_acl("alice", "pw-a", all=True)])
            alice = kazoo(made, hosts, auth="alice:pw-a")
            assert alice.get("/shared")[0] == b"from the sdk"
            assert alice.get_acls("/shared")[0] == [ALICE]
            states: list[KazooState] = []
            alice.add_listener(states.append)
            cluster.kill(first)
            wait_until(
                lambda: states[-2:] == [KazooState.SUSPENDED, KazooState.CONNECTED],
                WAIT_S,
                message="kazoo reconnects to another node",
            )
            # kazoo re-sent its digest on the new connection: the alice-only node is still hers
            alice.set("/shared", b"from kazoo")
            assert sdk.get("/shared")[0] == b"from kazoo"
            alice.create("/shared/k", acl=[ALICE])
            stranger = ZkClient(cluster.addresses[leader], timeout=WAIT_S, session_timeout_ms=4000)
            stranger.start()
            try:
                with pytest.raises(SdkNoAuthError):
                    stranger.get("/shared/k")
            finally:
                stranger.close()
        finally:
            sdk.close()
            for zk in made:
                zk.stop()
                zk.close()
