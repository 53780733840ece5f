"""ACLs and auth against three real quorum processes, as a kazoo user checks them with our SDK.

Grants and denials for every op and scheme (digest, auth, ip, world), the
super digest, INVALIDACL and AUTHFAILED, getACL's masking, setACL's aversion;
then the ACLs on every node alike after a follower is brought back by a
snapshot and after the leader is SIGKILLed, with an authenticated session
that moves to another node and keeps its ids (auth re-sent on reconnect).
Every wait is a poll with a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from client import ZkClient
from client.zk.acl import (
    ACL,
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Id,
    Permissions,
    make_acl,
    make_digest_acl,
    make_digest_acl_credential,
)
from client.zk.client import _SharedLoop
from client.zk.exceptions import (
    AuthFailedError,
    BadVersionError,
    InvalidACLError,
    NoAuthError,
    NoNodeError,
)
from client.zk.states import ZkState
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_applied, wait_for_leader
from zkemu.tree import ZnodeTree

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

T = TypeVar("T")

SUPER_PASSWORD = "s3cret"
PROPERTIES = {
    **FAST_ZK_PROPERTIES,
    "zookeeper.DigestAuthenticationProvider.superDigest": make_digest_acl_credential("super", SUPER_PASSWORD),
}
SESSION_MS = 4000
LEADER_TIMEOUT_S = 20.0
WAIT_S = 30.0
ALICE = make_digest_acl("alice", "pw-a", all=True)
BOB = make_digest_acl("bob", "pw-b", all=True)


def run(coro: Coroutine[Any, Any, T]) -> T:
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(LEADER_TIMEOUT_S + 5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("acl"), n=3, properties=PROPERTIES) as processes:
        processes.start_all()
        run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        yield processes


@pytest.fixture
def clients() -> Iterator[list[ZkClient]]:
    made: list[ZkClient] = []
    yield made
    for zk in made:
        zk.close()


def connect(made: list[ZkClient], *addresses: str, auth: tuple[str, str] | None = None) -> ZkClient:
    zk = ZkClient(",".join(addresses), timeout=WAIT_S, session_timeout_ms=SESSION_MS, randomize_hosts=False)
    made.append(zk)
    zk.start()
    if auth is not None:
        zk.add_auth("digest", f"{auth[0]}:{auth[1]}")
    return zk


def test_digest_acl_denies_others_each_op_and_grants_its_user(cluster: QuorumProcesses, clients: list) -> None:
    a1, a2, a3 = (cluster.addresses[i] for i in (1, 2, 3))
    alice = connect(clients, a1, auth=("alice", "pw-a"))
    nobody = connect(clients, a2)
    bob = connect(clients, a3, auth=("bob", "pw-b"))
    alice.create("/d", b"secret", acl=[ALICE])
    alice.create("/d/child", b"c")  # the default ACL: world:anyone, every permission
    nobody.sync("/d")
    for zk in (nobody, bob):
        with pytest.raises(NoAuthError):
            zk.get("/d")
        with pytest.raises(NoAuthError):
            zk.exists("/d")
        with pytest.raises(NoAuthError):
            zk.get_children("/d")
        with pytest.raises(NoAuthError):
            zk.get_all_children_number("/d")
        with pytest.raises(NoAuthError):
            zk.set("/d", b"x")
        with pytest.raises(NoAuthError):
            zk.create("/d/other")
        with pytest.raises(NoAuthError):
            zk.delete("/d/child")  # DELETE is the parent's
        with pytest.raises(NoAuthError):
            zk.get_acls("/d")  # neither READ nor ADMIN
        with pytest.raises(NoAuthError):
            zk.set_acls("/d", OPEN_ACL_UNSAFE)
        t = zk.transaction()
        t.check("/d/child", 0)
        t.set_data("/d", b"x")
        assert [type(r).__name__ for r in t.commit()] == ["RolledBackError", "NoAuthError"]
        assert zk.get("/d/child")[0] == b"c"  # the child's own ACL is open: ACLs are not recursive
    assert alice.get("/d")[0] == b"secret"
    alice.set("/d", b"v2")
    alice.create("/d/other")
    alice.delete("/d/other")
    assert alice.get_acls("/d")[0] == [ALICE]
    nobody.add_auth("digest", "alice:pw-a")  # the same user on another session, another node
    assert nobody.get("/d")[0] == b"v2"
    assert ("digest", "alice") in nobody.whoami() and ("ip", "127.0.0.1") in nobody.whoami()


def test_get_acls_masks_digests_without_admin_and_set_acls_checks_aversion(
    cluster: QuorumProcesses, clients: list
) -> None:
    alice = connect(clients, cluster.addresses[1], auth=("alice", "pw-a"))
    reader = connect(clients, cluster.addresses[2])
    acl = [ALICE, *READ_ACL_UNSAFE]
    alice.create("/m", b"", acl=acl)
    reader.sync("/m")
    masked, stat = reader.get_acls("/m")
    assert masked == [ACL(Permissions.ALL, Id("digest", "alice:x")), *READ_ACL_UNSAFE]
    assert stat.aversion == 0
    assert alice.get_acls("/m")[0] == acl
    with pytest.raises(BadVersionError):
        alice.set_acls("/m", OPEN_ACL_UNSAFE, version=3)
    assert alice.set_acls("/m", [make_acl("world", "anyone", read=True, admin=True)], version=0).aversion == 1
    reader.sync("/m")
    acls, stat = reader.get_acls("/m")
    assert acls[0].acl_list == ["READ", "ADMIN"] and stat.aversion == 1
    assert reader.set_acls("/m", OPEN_ACL_UNSAFE, version=1).aversion == 2
    with pytest.raises(NoNodeError):
        reader.get_acls("/missing")
    assert reader.get_acls("/zookeeper/config")[0] == READ_ACL_UNSAFE


def test_auth_ip_and_invalid_acls(cluster: QuorumProcesses, clients: list) -> None:
    anon = connect(clients, cluster.addresses[3])
    with pytest.raises(InvalidACLError):
        anon.create("/auth-node", acl=CREATOR_ALL_ACL)  # no authenticated id to stand for `auth`
    for bad in (ACL(31, Id("digest", "alice")), ACL(31, Id("ip", "300.0.0.1")), ACL(31, Id("world", "me"))):
        with pytest.raises(InvalidACLError):
            anon.create("/bad", acl=[bad])
    with pytest.raises(InvalidACLError):
        anon.create("/bad", acl=[])
    anon.add_auth("digest", "carol:pw-c")
    anon.create("/auth-node", acl=CREATOR_ALL_ACL)
    assert anon.get_acls("/auth-node")[0] == [make_digest_acl("carol", "pw-c", all=True)]
    anon.create("/ip-local", b"here", acl=[make_acl("ip", "127.0.0.0/8", all=True)])
    anon.create("/ip-far", b"there", acl=[make_acl("ip", "10.0.0.0/8", all=True)])
    other = connect(clients, cluster.addresses[1])
    other.sync("/")
    assert other.get("/ip-local")[0] == b"here"  # every client here connects from 127.0.0.1
    with pytest.raises(NoAuthError):
        other.get("/ip-far")


def test_super_digest_passes_everything_and_a_bad_auth_fails_then_the_session_goes_on(
    cluster: QuorumProcesses, clients: list
) -> None:
    owner = connect(clients, cluster.addresses[1], auth=("dave", "pw-d"))
    owner.create("/locked", b"L", acl=[make_digest_acl("dave", "pw-d", all=True)])
    root = connect(clients, cluster.addresses[2], auth=("super", SUPER_PASSWORD))
    root.sync("/")
    assert root.get("/locked")[0] == b"L"
    assert ("super", "") in root.whoami()
    root.set_acls("/locked", [make_digest_acl("eve", "pw-e", all=True)])
    with pytest.raises(NoAuthError):
        owner.get("/locked")
    root.delete("/locked")
    with pytest.raises(NoAuthError):  # /zookeeper/config is read-only for all but super
        owner.create("/zookeeper/config/x")

    fails = connect(clients, cluster.addresses[3])
    session_id = fails.client_id
    states: list[ZkState] = []
    fails.add_listener(states.append)
    with pytest.raises(AuthFailedError):
        fails.add_auth("kerberos", "whatever")
    # ZooKeeper closes the connection after AUTHFAILED; the session goes on through a new one.
    wait_until(
        lambda: states[-2:] == [ZkState.SUSPENDED, ZkState.CONNECTED],
        WAIT_S,
        message="the connection ends after AUTHFAILED and the session reconnects",
    )
    fails.create("/after-authfailed")
    assert fails.client_id == session_id
    assert fails.whoami() == [("ip", "127.0.0.1")]


def test_watch_events_need_read_on_the_node(cluster: QuorumProcesses, clients: list) -> None:
    alice = connect(clients, cluster.addresses[1], auth=("alice", "pw-a"))
    stranger = connect(clients, cluster.addresses[2])
    seen_by_alice: list[Any] = []
    seen_by_stranger: list[Any] = []
    alice.exists("/w-secret", watch=seen_by_alice.append)
    stranger.exists("/w-secret", watch=seen_by_stranger.append)
    stranger.exists("/w-fence", watch=seen_by_stranger.append)
    alice.create("/w-secret", b"", acl=[ALICE])
    alice.create("/w-fence", b"")
    # Events reach a session in zxid order: once the fence's is in, the secret's would have been too.
    wait_until(lambda: seen_by_stranger, WAIT_S, message="the stranger sees the open node's event")
    wait_until(lambda: seen_by_alice, WAIT_S, message="alice sees her node's event")
    assert [e.path for e in seen_by_stranger] == ["/w-fence"]
    assert [e.path for e in seen_by_alice] == ["/w-secret"]


def _digests(cluster: QuorumProcesses) -> set[str]:
    trees = [ZnodeTree(cluster.data_dir(i) / "zk") for i in cluster.addresses]
    try:
        return {tree.digest() for tree in trees}
    finally:
        for tree in trees:
            tree.close()


def test_acls_are_the_same_on_every_node_after_a_snapshot_install_and_a_leader_kill(tmp_path: Path) -> None:
    properties = {**PROPERTIES, "snapshot.interval.entries": "30", "snapshot.trailing.entries": "5"}
    made: list[ZkClient] = []
    with QuorumProcesses(tmp_path, n=3, properties=properties) as cluster:
        cluster.start_all()
        leader, _ = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
        follower = next(i for i in cluster.addresses if i != leader)
        others = [cluster.addresses[i] for i in cluster.addresses if i != follower]
        try:
            alice = connect(made, cluster.addresses[leader], *others, auth=("alice", "pw-a"))
            cluster.kill(follower)
            for i in range(40):
                alice.create(f"/n{i}", str(i).encode(), acl=[ALICE] if i % 2 else None)
            alice.set_acls("/n0", [ALICE, *READ_ACL_UNSAFE])
            cluster.start(follower)
            wait_until(
                lambda: cluster.log_events(follower, "snapshot_installed"),
                WAIT_S,
                message="the follower installs a snapshot",
            )
            cluster.kill(leader)
            run(wait_for_leader({i: a for i, a in cluster.addresses.items() if i != leader}, LEADER_TIMEOUT_S))
            # alice's session moved to another node: her digest id came with it (auth re-sent on reconnect)
            alice.set("/n1", b"after the leader died")
            on_follower = connect(made, cluster.addresses[follower])
            on_follower.sync("/")
            with pytest.raises(NoAuthError):
                on_follower.get("/n1")
            assert on_follower.get_acls("/n0")[0] == [ACL(31, Id("digest", "alice:x")), *READ_ACL_UNSAFE]
            cluster.start(leader)
            for zk in made:
                zk.close()
            made.clear()
            statuses = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
            assert statuses
            applied = max(s.applied_index for s in run(wait_applied(cluster.addresses.values(), 0, WAIT_S)).values())
            run(wait_applied(cluster.addresses.values(), applied, WAIT_S))
        finally:
            for zk in made:
                zk.close()
        for node_id in cluster.addresses:
            cluster.terminate(node_id)
        assert len(_digests(cluster)) == 1
