"""Membership changes on real quorum node processes (issue 32): `zkraft quorum start --join`, `zkraft quorum
add/remove/transfer-leadership/status`, under a steady write load, with SIGKILL.

One cluster for the module (ids 1-3 start it, 4-7 join later); the tests run in order, each starting
from the configuration the one before left (the last one breaks the quorum on purpose).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from quorum.register_client import QuorumClient, QuorumClientError
from tests.quorum_harness import (
    REPO_ROOT,
    QuorumProcesses,
    node_status,
    peers_text,
    poll_until,
    subprocess_env,
    wait_for_leader,
    wait_serving,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

BOOTSTRAP = (1, 2, 3)
NODES = 7
TIMEOUT_S = 90.0
WRITE_TIMEOUT_S = 5.0


class MemberProcesses(QuorumProcesses):
    """Nodes 1-3 start with --peers; the others with --join (no peer list) through a running node."""

    def command(self, node_id: int, **kw: object) -> list[str]:
        cmd = super().command(node_id, peers=peers_text({i: self.addresses[i] for i in BOOTSTRAP}))
        if node_id in BOOTSTRAP:
            return cmd
        via = next(i for i in sorted(self.addresses) if i != node_id and self.alive(i))
        at = cmd.index("--peers")
        cmd[at : at + 2] = ["--join", self.addresses[via]]
        return cmd


def zkraft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkraft", "quorum", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S * 4, cwd=REPO_ROOT, env=subprocess_env(),
    )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemberProcesses]:
    with MemberProcesses(tmp_path_factory.mktemp("membership"), n=NODES, properties={"raft.tick.ms": "20"}) as c:
        for i in BOOTSTRAP:
            c.start(i)
        asyncio.run(wait_for_leader({i: c.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S))
        yield c


def servers(c: MemberProcesses, ids: tuple[int, ...]) -> str:
    return ",".join(c.addresses[i] for i in ids)


class Writer:
    """A steady writer: one key after another; every acknowledged one must be readable at the end."""

    def __init__(self, client: QuorumClient) -> None:
        self.client = client
        self.acked: list[bytes] = []
        self.errors = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        k = 0
        while not self._stop.is_set():
            key = b"w%d" % k
            k += 1
            try:
                await self.client.set(key, key)
            except QuorumClientError:
                self.errors += 1  # an outcome unknown: not counted as acknowledged
                continue
            self.acked.append(key)

    def stop(self) -> None:
        self._stop.set()


@contextlib.asynccontextmanager
async def steady_writes(c: MemberProcesses, ids: tuple[int, ...]) -> AsyncIterator[Writer]:
    async with QuorumClient([c.addresses[i] for i in ids], request_timeout_s=WRITE_TIMEOUT_S) as client:
        writer = Writer(client)
        task = asyncio.get_running_loop().create_task(writer.run())
        try:
            yield writer
        finally:
            writer.stop()
            await asyncio.wait_for(task, TIMEOUT_S)


async def assert_all_readable(c: MemberProcesses, ids: tuple[int, ...], keys: list[bytes]) -> None:
    async with QuorumClient([c.addresses[i] for i in ids], request_timeout_s=WRITE_TIMEOUT_S) as client:
        for key in keys:
            assert await client.read(key, linearizable=True) == key, f"acknowledged {key!r} lost"


def status_of(c: MemberProcesses, ids: tuple[int, ...]) -> str:
    done = zkraft("status", "--server", servers(c, ids))
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _grow_and_shrink(c: MemberProcesses) -> None:
    async with steady_writes(c, BOOTSTRAP) as writer:
        for i in (4, 5):
            c.start(i)
            await wait_serving(c.addresses[i], TIMEOUT_S)
            done = await asyncio.to_thread(
                zkraft, "add", "--server", servers(c, BOOTSTRAP), "--id", str(i), "--address", c.addresses[i]
            )
            assert done.returncode == 0, done.stderr + c.log_tail(i)
            assert f"promoted node {i} to voter" in done.stdout
        status = await asyncio.to_thread(status_of, c, BOOTSTRAP)
        assert "voters 1,2,3,4,5, learners -, observers -" in status
        writes_during_changes = len(writer.acked)
        for i in (4, 5):
            done = await asyncio.to_thread(zkraft, "remove", "--server", servers(c, BOOTSTRAP), "--id", str(i))
            assert done.returncode == 0, done.stderr
    assert writes_during_changes > 20
    await assert_all_readable(c, BOOTSTRAP, writer.acked)
    for i in (4, 5):
        c.kill(i)
    assert "voters 1,2,3, learners -, observers -" in status_of(c, BOOTSTRAP)


def test_grow_from_three_to_five_and_back_under_writes_loses_nothing(cluster: MemberProcesses) -> None:
    asyncio.run(_grow_and_shrink(cluster))


def live(c: MemberProcesses) -> tuple[int, ...]:
    return tuple(i for i in c.addresses if c.alive(i))


def configuration(c: MemberProcesses) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader, voters, observers) as the leader reports them."""
    leader_id, address = asyncio.run(wait_for_leader({i: c.addresses[i] for i in live(c)}, TIMEOUT_S))
    status = asyncio.run(node_status(address))
    return leader_id, tuple(status.voters), tuple(status.observers)


def test_a_bad_change_is_one_line_and_exit_1(cluster: MemberProcesses) -> None:
    done = zkraft("remove", "--server", servers(cluster, BOOTSTRAP), "--id", "9")
    assert done.returncode == 1
    assert done.stderr.strip() == "zkraft: error: unknown node id 9: not a member of the quorum"
    done = zkraft("transfer-leadership", "--server", servers(cluster, BOOTSTRAP), "--to", "9")
    assert done.returncode == 1 and "node 9 is not a voter" in done.stderr


def test_transfer_leadership_to_a_named_node(cluster: MemberProcesses) -> None:
    leader, voters, _ = configuration(cluster)
    target = next(v for v in voters if v != leader)
    done = zkraft("transfer-leadership", "--server", servers(cluster, live(cluster)), "--to", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"node {target} leads"
    assert configuration(cluster)[0] == target


async def _replace(c: MemberProcesses, dead: int, new: int) -> None:
    async with steady_writes(c, live(c)) as writer:
        c.kill(dead)
        shutil.rmtree(c.data_dir(dead))
        done = await asyncio.to_thread(zkraft, "remove", "--server", servers(c, live(c)), "--id", str(dead))
        assert done.returncode == 0, done.stderr
        c.start(new)
        await wait_serving(c.addresses[new], TIMEOUT_S)
        done = await asyncio.to_thread(
            zkraft, "add", "--server", servers(c, live(c)), "--id", str(new), "--address", c.addresses[new]
        )
        assert done.returncode == 0, done.stderr + c.log_tail(new)
    await assert_all_readable(c, live(c), writer.acked)


def test_replace_a_killed_node_whose_disk_is_gone_by_a_new_one(cluster: MemberProcesses) -> None:
    _, voters, _ = configuration(cluster)
    asyncio.run(_replace(cluster, voters[-1], 6))
    _, voters, _ = configuration(cluster)
    assert 6 in voters and len(voters) == 3
    # The new node learned the configuration from the cluster and keeps it across a restart.
    cluster.kill(6)
    cluster.start(6)
    asyncio.run(wait_serving(cluster.addresses[6], TIMEOUT_S))
    assert asyncio.run(node_status(cluster.addresses[6])).voters == list(voters)


async def _remove_leader(c: MemberProcesses, leader: int) -> None:
    async with steady_writes(c, live(c)) as writer:
        done = await asyncio.to_thread(zkraft, "remove", "--server", servers(c, live(c)), "--id", str(leader))
        assert done.returncode == 0, done.stderr
        before = len(writer.acked)
        # Writes continue under the new leader.

        async def acknowledged() -> bool:
            return len(writer.acked) > before + 10

        await poll_until(acknowledged, TIMEOUT_S, "no write acknowledged after the leader's removal", 0.1)
    c.kill(leader)
    await assert_all_readable(c, live(c), writer.acked)


def test_removing_the_leader_hands_over_and_writes_continue(cluster: MemberProcesses) -> None:
    leader, voters, _ = configuration(cluster)
    asyncio.run(_remove_leader(cluster, leader))
    new_leader, new_voters, _ = configuration(cluster)
    assert new_leader != leader and new_voters == tuple(v for v in voters if v != leader)


async def _observer_serves_and_never_counts(c: MemberProcesses, observer: int, voters: tuple[int, ...]) -> None:
    async with QuorumClient([c.addresses[observer]], request_timeout_s=4 * WRITE_TIMEOUT_S) as client:
        await client.set(b"through-the-observer", b"x")  # the observer names the leader, the client follows
        assert await client.read(b"through-the-observer", linearizable=True, server=c.addresses[observer]) == b"x"
    for v in voters[1:]:
        c.kill(v)
    # One voter of two and the observer: no quorum, so no write commits.
    async with QuorumClient([c.addresses[i] for i in live(c)], request_timeout_s=2.0) as client:
        with pytest.raises(QuorumClientError):
            await client.set(b"without-a-quorum", b"y")
    status = await node_status(c.addresses[observer])
    assert status.role == "follower" and list(status.observers) == [observer]


def test_an_observer_serves_reads_forwards_writes_and_makes_no_quorum(cluster: MemberProcesses) -> None:
    _, voters, _ = configuration(cluster)
    cluster.start(7)
    asyncio.run(wait_serving(cluster.addresses[7], TIMEOUT_S))
    done = zkraft("add", "--server", servers(cluster, live(cluster)), "--id", "7", "--address",
                  cluster.addresses[7], "--observer")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "observers 7" in status_of(cluster, live(cluster))
    asyncio.run(_observer_serves_and_never_counts(cluster, 7, voters))
