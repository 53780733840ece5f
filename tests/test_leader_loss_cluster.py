"""Failover on a broken leader stream, with real node processes (RaftConfig.campaign_on_leader_loss).

One 3-node cluster for the module, with an election timeout of 3 to 6 s: an
election that the broken-stream path did not start could only come after that
long, so the new leader's log tells which path started it. Times are never
asserted (bench/quorum_bench.py --failovers measures them): the tests check
that the new leader's election began with the report of its stream to the
killed leader breaking, that it took one election, that nothing acknowledged
was lost, and that a follower's restart changes no term.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.quorum_harness import QuorumProcesses, node_status, poll_until, wait_for_leader
from tests.test_quorum_cluster import (
    WriteLog,
    assert_all_present,
    final_commit_everywhere,
    read_everywhere,
    run,
    writer,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PROPERTIES = {
    "raft.tick.ms": "50",
    "raft.election.timeout.ticks": "60",
    "raft.heartbeat.interval.ticks": "2",
}
LEADER_TIMEOUT_S = 30.0
WRITE_TIMEOUT_S = 15.0
WRITERS = 2
WRITES_BEFORE_FAULT = 100
WRITES_AFTER_FAULT = 100


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("leader-loss"), n=3, properties=PROPERTIES) as processes:
        processes.start_all()
        yield processes


class Writers:
    """WRITERS clients writing unique keys one after another until stopped; what each saw is in `log`."""

    def __init__(self, cluster: QuorumProcesses) -> None:
        self.log = WriteLog()
        self._stop = asyncio.Event()
        servers = list(cluster.addresses.values())
        self._tasks = [asyncio.create_task(writer(servers, w, self._stop, self.log)) for w in range(WRITERS)]

    async def acked_at_least(self, n: int, what: str) -> None:
        async def enough() -> bool | None:
            for task in self._tasks:
                if task.done():
                    task.result()  # a writer that crashed fails the test here
            return True if len(self.log.acked) >= n else None

        await poll_until(enough, WRITE_TIMEOUT_S, lambda: f"{what}: {len(self.log.acked)} acknowledged, wanted {n}")

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)


async def check_nothing_lost(cluster: QuorumProcesses, log: WriteLog) -> None:
    """Every node (all running) holds every acknowledged write."""
    _, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
    await final_commit_everywhere(cluster, leader_address)
    found = await read_everywhere(cluster, dict(log.acked), list(cluster.addresses))
    assert_all_present(found, dict(log.acked))


def test_a_restarted_follower_changes_no_term(cluster: QuorumProcesses) -> None:
    """The leader's stream to the follower breaks, and the follower's to it: with the leader alive and
    the other follower hearing it, nobody campaigns."""

    async def body() -> None:
        leader, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        term = (await node_status(leader_address)).term
        follower, other = [i for i in sorted(cluster.addresses) if i != leader]
        writers = Writers(cluster)
        try:
            await writers.acked_at_least(WRITES_BEFORE_FAULT, "writers got no acknowledgements")
            cluster.restart(follower)
            await cluster.wait_serving(follower, LEADER_TIMEOUT_S)
            acked = len(writers.log.acked)
            await writers.acked_at_least(acked + WRITES_AFTER_FAULT, "writes stalled after a follower restarted")
        finally:
            await writers.stop()

        async def settled() -> dict[int, tuple[int, int]] | None:
            """Every node's (term, leader) once the restarted one follows too; at once if a term moved."""
            views = {i: await node_status(a) for i, a in cluster.addresses.items()}
            seen = {i: (v.term, v.leader) for i, v in views.items()}
            moved = any(t != term for t, _ in seen.values())
            return seen if moved or all(lead == leader for _, lead in seen.values()) else None

        seen = await poll_until(settled, LEADER_TIMEOUT_S, "the restarted follower never followed the leader")
        assert set(seen.values()) == {(term, leader)}, f"a follower's restart changed the leadership: {seen}"
        for node_id in (leader, other):
            assert not cluster.log_events(node_id, "leader_stream_broken")
        await check_nothing_lost(cluster, writers.log)

    run(cluster, body)


def test_sigkill_of_the_leader_elects_a_new_one_from_the_broken_stream_and_loses_nothing(
    cluster: QuorumProcesses,
) -> None:
    async def body() -> None:
        old_leader, old_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        old_term = (await node_status(old_address)).term
        writers = Writers(cluster)
        try:
            await writers.acked_at_least(WRITES_BEFORE_FAULT, "writers got no acknowledgements")
            cluster.kill(old_leader)
            acked = len(writers.log.acked)
            new_leader, new_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S, exclude=[old_leader])
            await writers.acked_at_least(acked + WRITES_AFTER_FAULT, "writes stalled after the leader died")
        finally:
            await writers.stop()
        assert (await node_status(new_address)).term == old_term + 1, "more than one election"
        broke = [e for e in cluster.log_events(new_leader, "leader_stream_broken") if e["term"] == old_term]
        assert broke and broke[0]["leader"] == old_leader, (
            f"node {new_leader} did not start its election from its broken stream to node {old_leader}"
        )
        won = [e for e in cluster.log_events(new_leader, "role_changed") if e["role"] == "leader"]
        assert won[-1]["term"] == old_term + 1
        cluster.restart(old_leader)
        await cluster.wait_serving(old_leader, LEADER_TIMEOUT_S)
        await check_nothing_lost(cluster, writers.log)

    run(cluster, body)
