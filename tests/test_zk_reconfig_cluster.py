"""ZooKeeper's reconfiguration as kazoo and `zkraft zk` see it, on real processes (issue 32): /zookeeper/config in
ZooKeeper's dynamic-configuration format on every node, getConfig's watch, kazoo's reconfig -add of a node
started with --join and `zkraft zk reconfig -remove` of it, a join that never catches up, and reconfig's refusals
(BADVERSION, NOAUTH, BADARGUMENTS).

One cluster for the module (ids 1-3 start it, 4-6 join later); the tests run in order.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadArgumentsError, BadVersionError, NewConfigNoQuorumError, NoAuthError

from tests.helpers import wait_until
from tests.quorum_harness import (
    FAST_ZK_PROPERTIES,
    LOOPBACK,
    REPO_ROOT,
    free_ports,
    subprocess_env,
    wait_for_leader,
    wait_serving,
)
from tests.real_zookeeper import four_letter_word
from tests.test_quorum_membership_cluster import BOOTSTRAP, TIMEOUT_S, MemberProcesses

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CONFIG = "/zookeeper/config"
JOINER = 4
GROWERS = (5, 6)  # join, then leave, under a writer's load
NODES = 6
WRITES_MAX = 100_000  # the writer's bound; it stops when the changes are done
SUPER_PASSWORD = "reconfig-secret"
SUPER_DIGEST = "super:" + base64.b64encode(hashlib.sha1(f"super:{SUPER_PASSWORD}".encode()).digest()).decode()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemberProcesses]:
    properties = {
        **FAST_ZK_PROPERTIES,
        "reconfigEnabled": "true",
        "zookeeper.DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
        "4lw.commands.whitelist": "conf,mntr",
    }
    with MemberProcesses(tmp_path_factory.mktemp("reconfig"), n=NODES, properties=properties) as c:
        for i in BOOTSTRAP:
            c.start(i)
        asyncio.run(wait_for_leader({i: c.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S))
        asyncio.run(c.wait_client_ports(TIMEOUT_S))
        yield c


def client(c: MemberProcesses, node_id: int, superuser: bool = False) -> KazooClient:
    auth = [("digest", f"super:{SUPER_PASSWORD}")] if superuser else None
    zk = KazooClient(hosts=c.zk_address(node_id), timeout=10.0, auth_data=auth)
    zk.start(timeout=TIMEOUT_S)
    return zk


@pytest.fixture(scope="module")
def admin(cluster: MemberProcesses) -> Iterator[KazooClient]:
    zk = client(cluster, 1, superuser=True)
    yield zk
    zk.stop()
    zk.close()


def line(c: MemberProcesses, node_id: int) -> str:
    port = c.addresses[node_id].rpartition(":")[2]
    return f"server.{node_id}=127.0.0.1:{port}:0:participant;{c.zk_address(node_id)}"


def expected(c: MemberProcesses, ids: tuple[int, ...], version: int) -> bytes:
    return ("".join(line(c, i) + "\n" for i in ids) + f"version={version:x}").encode()


def config_on(c: MemberProcesses, node_id: int) -> tuple[bytes, int, int]:
    """/zookeeper/config as a session on `node_id` reads it after a sync: data, mzxid, dataVersion."""
    zk = client(c, node_id)
    try:
        zk.sync(CONFIG)
        data, stat = zk.get(CONFIG)
        return data, stat.mzxid, stat.version
    finally:
        zk.stop()
        zk.close()


def zkraft_zk(c: MemberProcesses, node_id: int, script: str) -> list[str]:
    """The lines `zkraft zk` prints for `script`, run against `node_id`'s gRPC session service."""
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "zk", "--server", c.addresses[node_id]],
        input=script, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO_ROOT, env=subprocess_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_config_shows_every_participant_with_its_client_address(cluster: MemberProcesses) -> None:
    want = expected(cluster, BOOTSTRAP, 0)
    for node_id in BOOTSTRAP:
        wait_until(lambda n=node_id: config_on(cluster, n)[0] == want, TIMEOUT_S, interval_s=0.2,
                   message=f"node {node_id}: {config_on(cluster, node_id)[0]!r}, want {want!r}")  # fmt: skip
    # As ZooKeeper's: dataVersion -1 (DataTree.setData with -1), mzxid the configuration's version.
    assert {config_on(cluster, n)[1:] for n in BOOTSTRAP} == {(0, -1)}


def test_reconfig_refusals(cluster: MemberProcesses, admin: KazooClient) -> None:
    nobody = client(cluster, 2)
    try:
        with pytest.raises(NoAuthError):  # WRITE on /zookeeper/config: only super by default
            nobody.reconfig(joining=None, leaving="3", new_members=None)
    finally:
        nobody.stop()
        nobody.close()
    with pytest.raises(BadVersionError):
        admin.reconfig(joining=None, leaving="3", new_members=None, from_config=0x7FFF)
    with pytest.raises(BadArgumentsError):
        admin.reconfig(joining="server.9=127.0.0.1:1", leaving=None, new_members=None)
    with pytest.raises(BadArgumentsError):  # two servers at once: Raft changes one at a time
        admin.reconfig(joining=None, leaving=None, new_members=line(cluster, 1))
    assert config_on(cluster, 1)[0] == expected(cluster, BOOTSTRAP, 0)


def test_a_join_that_never_catches_up_changes_nothing_a_client_sees(
    cluster: MemberProcesses, admin: KazooClient
) -> None:
    """The server named is not running: its learner entry and its removal leave /zookeeper/config as it was,
    version and all, as a failed reconfig leaves ZooKeeper's, so `-v` with that version still holds."""
    before = config_on(cluster, 1)
    [nobody_port] = free_ports(1)
    with pytest.raises(NewConfigNoQuorumError):
        admin.reconfig(joining=f"server.9={LOOPBACK}:{nobody_port}:0", leaving=None, new_members=None, from_config=0)
    for node_id in BOOTSTRAP:
        assert config_on(cluster, node_id) == before


def test_add_a_joined_node_then_remove_it(cluster: MemberProcesses, admin: KazooClient) -> None:
    cluster.start(JOINER)
    asyncio.run(wait_serving(cluster.addresses[JOINER], TIMEOUT_S))
    watcher = client(cluster, 2)
    fired = threading.Event()
    try:
        watcher.get(CONFIG, watch=lambda event: fired.set())
        # The line as getConfig shows it: electionPort 0 (the peer port given twice is taken too).
        data, stat = admin.reconfig(joining=line(cluster, JOINER), leaving=None, new_members=None, from_config=0)
        version = int(data.decode().rpartition("version=")[2], 16)
        assert data == expected(cluster, (*BOOTSTRAP, JOINER), version)
        assert version > 0 and stat.mzxid == version
        assert fired.wait(TIMEOUT_S), "getConfig's watch did not fire"
        for node_id in (*BOOTSTRAP, JOINER):
            wait_until(lambda n=node_id: config_on(cluster, n)[:2] == (data, stat.mzxid), TIMEOUT_S, interval_s=0.2,
                       message=f"node {node_id} shows {config_on(cluster, node_id)}")  # fmt: skip
        # The four-letter words read the live configuration, also on the joined node (started without --peers).
        conf = four_letter_word(cluster.zk_address(JOINER), "conf") or ""
        assert conf.endswith("membership: \n" + data.decode()), conf
        mntr = four_letter_word(cluster.zk_address(JOINER), "mntr") or ""
        assert "zk_quorum_size\t4\n" in mntr, mntr
        # The removal through `zkraft zk` (our zkCli, on the gRPC session service of a node that may follow).
        script = f"addauth digest super:{SUPER_PASSWORD}\nreconfig -remove {JOINER} -v {version:x}\nconfig -c\n"
        shell = zkraft_zk(cluster, 2, script)
        at = shell.index("Committed new configuration:")
        data = "\n".join(shell[at + 1 : at + 5]).encode()
        removed = int(data.decode().rpartition("version=")[2], 16)
        assert data == expected(cluster, BOOTSTRAP, removed)
        assert removed > version
        assert shell[at + 5] == f"{removed:x} " + ",".join(cluster.zk_address(i) for i in BOOTSTRAP)
        for node_id in BOOTSTRAP:
            wait_until(lambda n=node_id: config_on(cluster, n)[0] == data, TIMEOUT_S, interval_s=0.2,
                       message=f"node {node_id} still shows node {JOINER}")  # fmt: skip
    finally:
        watcher.stop()
        watcher.close()


class SessionWriter:
    """One kazoo session holding an ephemeral and writing a znode after another, in a thread; records every
    acknowledged write and every state its session went through."""

    def __init__(self, c: MemberProcesses) -> None:
        self.zk = KazooClient(hosts=",".join(c.zk_address(i) for i in BOOTSTRAP), timeout=10.0)
        self.states: list[str] = []
        self.zk.add_listener(lambda state: self.states.append(str(state)))
        self.zk.start(TIMEOUT_S)
        self.session_id = self.zk.client_id[0]
        self.zk.create("/grow/ephemeral", ephemeral=True, makepath=True)
        self.acked: list[str] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="session-writer")
        self._thread.start()

    def _run(self) -> None:
        for k in range(WRITES_MAX):
            if self._stop.is_set():
                return
            path = f"/grow/w{k}"
            try:
                self.zk.create(path, b"x")
            except Exception:  # an outcome unknown (connection loss): not counted as acknowledged
                self.failed += 1
                continue
            self.acked.append(path)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S)
        assert not self._thread.is_alive(), "the writer did not stop"


def test_grow_to_five_and_back_under_writes_no_session_expires(cluster: MemberProcesses, admin: KazooClient) -> None:
    for i in GROWERS:
        cluster.start(i)
    for i in GROWERS:
        asyncio.run(wait_serving(cluster.addresses[i], TIMEOUT_S))
    writer = SessionWriter(cluster)
    try:
        for i in GROWERS:
            admin.reconfig(joining=line(cluster, i), leaving=None, new_members=None)
        data, _ = admin.get(CONFIG)
        assert all(f"server.{i}=" in data.decode() for i in (*BOOTSTRAP, *GROWERS)), data
        during = len(writer.acked)
        for i in GROWERS:
            admin.reconfig(joining=None, leaving=str(i), new_members=None)
    finally:
        writer.stop()
    try:
        assert during > 20 and len(writer.acked) > during, (during, len(writer.acked))
        assert "LOST" not in writer.states, writer.states
        assert writer.zk.client_id[0] == writer.session_id
        stat = writer.zk.exists("/grow/ephemeral")
        assert stat is not None and stat.ephemeralOwner == writer.session_id
        children = set(writer.zk.get_children("/grow"))
        lost = [p for p in writer.acked if p.rpartition("/")[2] not in children]
        assert not lost, f"{len(lost)} acknowledged writes lost, first {lost[:3]}"
    finally:
        writer.zk.stop()
        writer.zk.close()
    final = admin.get(CONFIG)[0]
    assert final == expected(cluster, BOOTSTRAP, int(final.decode().rpartition("version=")[2], 16))
    for i in GROWERS:
        cluster.kill(i)
