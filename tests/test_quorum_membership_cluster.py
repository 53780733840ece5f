"""Membership changes on real quorum node processes (issue 32): `zkraft quorum start --join`, `zkraft quorum
add/remove/transfer-leadership/status`, under a steady write load, with SIGKILL.

One cluster for the module (ids 1-3 start it, 4-6 join later); each test leaves it with three voters.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from quorum.register_client import QuorumClient, QuorumClientError
from tests.quorum_harness import REPO_ROOT, QuorumProcesses, peers_text, subprocess_env, wait_for_leader, wait_serving

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

BOOTSTRAP = (1, 2, 3)
SPARE = (4, 5, 6)
TIMEOUT_S = 90.0
WRITE_TIMEOUT_S = 5.0


class MemberProcesses(QuorumProcesses):
    """Nodes 1-3 start with --peers; the others with --join (no peer list) through a running member."""

    join_via = 1

    def command(self, node_id: int, **kw: object) -> list[str]:
        cmd = super().command(node_id, peers=peers_text({i: self.addresses[i] for i in BOOTSTRAP}))
        if node_id in BOOTSTRAP:
            return cmd
        at = cmd.index("--peers")
        cmd[at : at + 2] = ["--join", self.addresses[self.join_via]]
        return cmd


def zkraft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkraft", "quorum", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S * 4, cwd=REPO_ROOT, env=subprocess_env(),
    )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemberProcesses]:
    with MemberProcesses(tmp_path_factory.mktemp("membership"), n=6, properties={"raft.tick.ms": "20"}) as c:
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
            done = zkraft("add", "--server", servers(c, BOOTSTRAP), "--id", str(i), "--address", c.addresses[i])
            assert done.returncode == 0, done.stderr + c.log_tail(i)
            assert f"promoted node {i} to voter" in done.stdout
        assert "configuration (index" in status_of(c, BOOTSTRAP) and "voters 1,2,3,4,5" in status_of(c, BOOTSTRAP)
        for i in (4, 5):
            done = zkraft("remove", "--server", servers(c, BOOTSTRAP), "--id", str(i))
            assert done.returncode == 0, done.stderr
    assert len(writer.acked) > 20
    await assert_all_readable(c, BOOTSTRAP, writer.acked)
    for i in (4, 5):
        c.kill(i)
    assert "voters 1,2,3, learners -, observers -" in status_of(c, BOOTSTRAP)


def test_grow_from_three_to_five_and_back_under_writes_loses_nothing(cluster: MemberProcesses) -> None:
    asyncio.run(_grow_and_shrink(cluster))


def test_a_bad_change_is_one_line_and_exit_1(cluster: MemberProcesses) -> None:
    done = zkraft("remove", "--server", servers(cluster, BOOTSTRAP), "--id", "9")
    assert done.returncode == 1
    assert done.stderr.strip() == "zkraft: error: unknown node id 9: not a member of the quorum"
    done = zkraft("transfer-leadership", "--server", servers(cluster, BOOTSTRAP), "--to", "9")
    assert done.returncode == 1 and "node 9 is not a voter" in done.stderr
