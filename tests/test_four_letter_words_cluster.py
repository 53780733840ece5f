"""The four-letter words over the client port of live quorum node processes, as monitoring scripts
and kazoo send them: a fresh connection, 4 bytes, the answer, then the server closes.

A 3-node quorum with every word enabled answers each word on every node (one leader, two followers,
the leader's follower figures, a kazoo session's connection, watches and ephemeral), keeps answering
on the survivors when the leader is SIGKILLed; a 1-node quorum with ZooKeeper's default whitelist
refuses the other words with ZooKeeper's text and says it is standalone.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from quorum.settings import FOUR_LETTER_WORDS
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader
from tests.real_zookeeper import four_letter_word, server_mode
from zkemu.four_letter_words import FULL_VERSION, ZOOKEEPER_VERSION

pytestmark = pytest.mark.integration

LEADER_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 10.0
KAZOO_TIMEOUT_S = 10.0


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def word(cluster: QuorumProcesses, node_id: int, name: str | bytes) -> str:
    """The node's answer (it must answer and close within the timeout)."""
    if isinstance(name, bytes):
        return raw_answer(cluster.zk_address(node_id), name)
    answer = four_letter_word(cluster.zk_address(node_id), name, timeout_s=ANSWER_TIMEOUT_S)
    assert answer is not None, f"node {node_id} did not answer {name}\n{cluster.log_tail(node_id)}"
    return answer


def raw_answer(address: str, payload: bytes) -> str:
    host, port = address.rsplit(":", 1)
    chunks = []
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(payload)
        for _ in range(1000):  # bounded: an answer is a few kB, then the server closes
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode()


def modes(cluster: QuorumProcesses, node_ids: list[int]) -> dict[int, str | None]:
    return {node_id: server_mode(four_letter_word(cluster.zk_address(node_id), "srvr")) for node_id in node_ids}


def mntr(cluster: QuorumProcesses, node_id: int) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in word(cluster, node_id, "mntr").splitlines())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    """One 3-node quorum for the tests below (a start costs tens of seconds on a loaded machine); the
    test that SIGKILLs its leader comes last in this file."""
    properties = FAST_ZK_PROPERTIES | {"4lw.commands.whitelist": "*"}
    with QuorumProcesses(tmp_path_factory.mktemp("quorum"), n=3, properties=properties) as processes:
        processes.start_all()
        run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        yield processes


@pytest.fixture
def kazoo_client(cluster: QuorumProcesses) -> Iterator[KazooClient]:
    client = KazooClient(cluster.zk_address(1), timeout=KAZOO_TIMEOUT_S)
    client.start(timeout=KAZOO_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_every_node_answers_every_word(cluster: QuorumProcesses) -> None:
    # A follower answers "not currently serving" until it has heard from the new leader, so wait for
    # all three roles, not only for the leader's.
    def roles_settled() -> dict[int, str | None] | None:
        found = modes(cluster, [1, 2, 3])
        return found if sorted(str(m) for m in found.values()) == ["follower", "follower", "leader"] else None

    settled = wait_until(
        roles_settled,
        LEADER_TIMEOUT_S,
        message="the nodes never said Mode: leader, follower, follower",
    )
    leader = [n for n, m in settled.items() if m == "leader"]
    for node_id in (1, 2, 3):
        for name in FOUR_LETTER_WORDS:
            answer = word(cluster, node_id, name)
            assert "not executed" not in answer and "not currently serving" not in answer, (node_id, name)
        assert word(cluster, node_id, "ruok") == "imok"
        assert word(cluster, node_id, "isro") == "rw"
        assert word(cluster, node_id, "srvr").startswith(f"Zookeeper version: {FULL_VERSION}\n")
        assert f"zookeeper.version={FULL_VERSION}\n" in word(cluster, node_id, "envi")
        conf = word(cluster, node_id, "conf")
        assert f"clientPort={cluster.zk_address(node_id).rsplit(':', 1)[1]}\n" in conf
        assert f"serverId={node_id}\n" in conf
        assert re.fullmatch(r"datadir_size: \d+\nlogdir_size: \d+\n", word(cluster, node_id, "dirs"))
    # The leader reports its two followers once both replicate from it.
    [leader_id] = leader
    wait_until(
        lambda: mntr(cluster, leader_id).get("zk_synced_followers") == "2",
        LEADER_TIMEOUT_S,
        message="the leader's mntr never showed 2 synced followers",
    )
    figures = mntr(cluster, leader_id)
    assert (figures["zk_server_state"], figures["zk_learners"], figures["zk_quorum_size"]) == ("leader", "2", "3")
    assert int(figures["zk_leader_uptime"]) > 0 and int(figures["zk_uptime"]) >= int(figures["zk_leader_uptime"])


def test_a_kazoo_session_shows_in_cons_wchs_dump_and_kazoos_own_commands(
    cluster: QuorumProcesses, kazoo_client: KazooClient
) -> None:
    kazoo_client.create("/a", b"x")
    kazoo_client.create("/e", b"", ephemeral=True)
    kazoo_client.get("/a", watch=lambda _event: None)
    kazoo_client.exists("/nope", watch=lambda _event: None)
    session = f"0x{kazoo_client.client_id[0] & ((1 << 64) - 1):x}"
    cons = word(cluster, 1, "cons")
    assert re.search(rf"\(queued=\d+,recved=\d+,sent=\d+,sid={session},lop=\w+,est=\d+,to=\d+,", cons), cons
    assert word(cluster, 1, "wchs") == "1 connections watching 2 paths\nTotal watches:2\n"
    assert word(cluster, 1, "wchc") == f"{session}\n\t/a\n\t/nope\n\n"
    assert word(cluster, 1, "wchp") == f"/a\n\t{session}\n/nope\n\t{session}\n\n"
    assert f"{session}:\n\t/e\n" in word(cluster, 1, "dump")
    assert "Clients:\n /127.0.0.1:" in word(cluster, 1, "stat")
    # Every node holds the tree and the session; watches live where the session is connected.
    for node_id in (2, 3):
        wait_until(
            lambda n=node_id: mntr(cluster, n)["zk_ephemerals_count"] == "1",
            ANSWER_TIMEOUT_S,
            message=f"node {node_id} never counted the ephemeral",
        )
        assert word(cluster, node_id, "wchs") == "0 connections watching 0 paths\nTotal watches:0\n"
    figures = mntr(cluster, 1)
    assert figures["zk_watch_count"] == "2" and figures["zk_global_sessions"] == "1"
    assert int(figures["zk_packets_received"]) > 0
    # kazoo's own commands open their own connection to the session's server.
    assert kazoo_client.command(b"ruok") == "imok"
    assert kazoo_client.server_version() == tuple(int(part) for part in ZOOKEEPER_VERSION.split("."))
    assert word(cluster, 1, "crst") == "Connection stats reset.\n"
    assert word(cluster, 1, "srst") == "Server stats reset.\n"


def test_a_single_node_with_the_default_whitelist(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, n=1, properties=dict(FAST_ZK_PROPERTIES)) as single:
        single.start_all()
        run(wait_for_leader(single.addresses, timeout_s=LEADER_TIMEOUT_S))
        wait_until(lambda: modes(single, [1])[1] == "standalone", LEADER_TIMEOUT_S, message="not standalone")
        for name in ("ruok", "mntr", "stat", "envi", "gtmk", "hash"):
            assert word(single, 1, name) == f"{name} is not executed because it is not in the whitelist.\n"
        # The telnet close sequence is a "word" ZooKeeper knows too.
        assert (
            word(single, 1, b"\xff\xf4\xff\xfd") == "telnet close is not executed because it is not in the whitelist.\n"
        )
        # ZooKeeper's stmk sends 8 bytes of mask after the word; the refusal comes all the same.
        assert word(single, 1, b"stmk" + bytes(8)) == "stmk is not executed because it is not in the whitelist.\n"
        assert "Mode: standalone\n" in word(single, 1, "srvr")


def test_the_survivors_answer_after_the_leader_is_killed(cluster: QuorumProcesses) -> None:
    leader_id, _ = run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S))
    cluster.kill(leader_id)
    survivors = [n for n in (1, 2, 3) if n != leader_id]
    wait_until(
        lambda: sorted(str(m) for m in modes(cluster, survivors).values()) == ["follower", "leader"],
        LEADER_TIMEOUT_S,
        message="the survivors never reported a new leader and a follower",
    )
    for node_id in survivors:
        assert word(cluster, node_id, "ruok") == "imok"
        assert mntr(cluster, node_id)["zk_server_state"] in ("leader", "follower")
