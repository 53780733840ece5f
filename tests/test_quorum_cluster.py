"""The quorum as users run it: real node processes on loopback ports, killed with SIGKILL and restarted.

Each test owns a temporary directory and freshly picked ports. Timeouts are
short (50 ms ticks, elections after 10 ticks) so that a test takes seconds,
yet long enough that a loaded two-core machine does not see spurious
elections. Every wait is a poll with a deadline (`tests.quorum_harness`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from quorum.register_client import QuorumClient, QuorumClientError
from tests.quorum_harness import (
    REPO_ROOT,
    QuorumProcesses,
    StatusPoller,
    free_ports,
    node_status,
    peers_text,
    poll_until,
    subprocess_env,
    wait_applied,
    wait_for_leader,
    wait_serving,
)
from zkraft_proto import quorum_pb2 as pb

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T = TypeVar("T")

FAST = {
    "raft.tick.ms": "50",
    "raft.election.timeout.ticks": "10",
    "raft.heartbeat.interval.ticks": "2",
}
LEADER_TIMEOUT_S = 20.0
CATCH_UP_TIMEOUT_S = 20.0
WRITE_TIMEOUT_S = 10.0
CLI_TIMEOUT_S = 30.0
# Concurrent reads when checking that thousands of keys are present on a node.
READS_IN_FLIGHT_MAX = 64


# Every protocol extension (RaftConfig) and every departure of the Ready loop (quorum.loop_options)
# turned off, and every save made by the writer thread: the plain etcd-style loop.
EXTENSIONS_OFF = {
    "raft.durable.notice": "false",
    "raft.lazy.follower.commits": "false",
    "raft.deferred.replication": "false",
    "quorum.loop.inline.persist.entries.max": "0",
    "quorum.loop.apply.ahead.during.save": "false",
    "quorum.loop.prepare.while.committing": "false",
    "quorum.loop.leader.sends.before.apply": "false",
    "quorum.loop.ready.in.handler": "false",
    "quorum.loop.idle.leader.inline.path": "false",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path, n=3, properties=FAST) as processes:
        yield processes


@pytest.fixture(params=["extensions-on", "extensions-off"])
def cluster_either_loop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QuorumProcesses]:
    """A cluster with the loop's options as deployed (all on), or all off."""
    properties = FAST if request.param == "extensions-on" else {**FAST, **EXTENSIONS_OFF}
    with QuorumProcesses(tmp_path, n=3, properties=properties) as processes:
        yield processes


def run(cluster: QuorumProcesses, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the async test body; a failure carries the tail of every node's log."""
    try:
        return asyncio.run(body())
    except Exception as exc:
        exc.add_note(cluster.logs_tail())
        raise


def others(cluster: QuorumProcesses, *node_ids: int) -> list[int]:
    return [node_id for node_id in cluster.addresses if node_id not in node_ids]


async def read_everywhere(
    cluster: QuorumProcesses, expected: Mapping[bytes, bytes | None], node_ids: list[int]
) -> dict[int, dict[bytes, bytes | None]]:
    """Read every key of `expected` from each node (local reads, `server=`); returns node -> key -> value."""
    gate = asyncio.Semaphore(READS_IN_FLIGHT_MAX)
    found: dict[int, dict[bytes, bytes | None]] = {}
    async with QuorumClient(list(cluster.addresses.values()), request_timeout_s=WRITE_TIMEOUT_S) as client:

        async def one(address: str, key: bytes) -> bytes | None:
            async with gate:
                return await client.read(key, server=address)

        for node_id in node_ids:
            keys = list(expected)
            values = await asyncio.gather(*(one(cluster.addresses[node_id], k) for k in keys))
            found[node_id] = dict(zip(keys, values, strict=True))
    return found


def assert_all_present(found: dict[int, dict[bytes, bytes | None]], expected: Mapping[bytes, bytes | None]) -> None:
    for node_id, values in found.items():
        wrong = {k: (v, values[k]) for k, v in expected.items() if values[k] != v}
        assert not wrong, (
            f"node {node_id}: {len(wrong)} of {len(expected)} keys differ (key: (acknowledged, read)), "
            f"e.g. {dict(list(wrong.items())[:5])}"
        )


async def final_commit_everywhere(cluster: QuorumProcesses, leader_address: str) -> int:
    """Wait until every node has applied the leader's current commit index; returns that index."""
    commit = (await node_status(leader_address)).commit_index
    await wait_applied(cluster.addresses.values(), commit, CATCH_UP_TIMEOUT_S)
    return commit


# ------------------------------------------------- a. SIGKILL of the leader under writes


@dataclass
class WriteLog:
    """What a set of writers saw: keys acknowledged (with the value), and keys whose outcome is unknown."""

    acked: dict[bytes, bytes] = field(default_factory=dict)
    unknown: dict[bytes, tuple[bytes, str]] = field(default_factory=dict)


WRITERS = 4
WRITES_PER_WRITER_MAX = 100_000  # a bound, never reached: writers stop on an event


async def writer(servers: list[str], writer_id: int, stop: asyncio.Event, log: WriteLog) -> None:
    """Write unique keys one after another until `stop`, recording each outcome."""
    token = secrets.token_hex(4)
    async with QuorumClient(servers, request_timeout_s=WRITE_TIMEOUT_S) as client:
        for i in range(WRITES_PER_WRITER_MAX):
            if stop.is_set():
                return
            key = f"w{writer_id}-{i:06d}".encode()
            value = f"{writer_id}:{i}:{token}".encode()
            try:
                await client.set(key, value)
            except QuorumClientError as exc:
                log.unknown[key] = (value, exc.code)
                continue
            log.acked[key] = value


def test_sigkill_leader_under_writes_loses_no_acknowledged_write(cluster_either_loop: QuorumProcesses) -> None:
    cluster = cluster_either_loop

    async def body() -> None:
        cluster.start_all()
        old_leader, old_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        old_term = (await node_status(old_address)).term
        log = WriteLog()
        stop = asyncio.Event()
        servers = list(cluster.addresses.values())
        writers = [asyncio.create_task(writer(servers, w, stop, log)) for w in range(WRITERS)]
        try:

            async def acked_at_least(n: int) -> bool:
                for task in writers:
                    if task.done():
                        task.result()  # a writer that crashed fails the test here
                return len(log.acked) >= n

            await poll_until(lambda: acked_at_least(200), WRITE_TIMEOUT_S, "writers got no acknowledgements")
            cluster.kill(old_leader)
            acked_at_kill = len(log.acked)
            new_leader, new_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S, exclude=[old_leader])
            await poll_until(
                lambda: acked_at_least(acked_at_kill + 200),
                WRITE_TIMEOUT_S,
                lambda: f"writes stalled after the leader died: {len(log.acked)} acknowledged, {acked_at_kill} at kill",
            )
        finally:
            stop.set()
            await asyncio.gather(*writers)
        assert new_leader != old_leader
        assert (await node_status(new_address)).term > old_term

        cluster.restart(old_leader)
        await cluster.wait_serving(old_leader, LEADER_TIMEOUT_S)
        await final_commit_everywhere(cluster, new_address)
        found = await read_everywhere(cluster, dict(log.acked), list(cluster.addresses))
        assert_all_present(found, dict(log.acked))
        # A write whose outcome the client never learned may be there or not, but the same everywhere.
        unknown = await read_everywhere(cluster, {k: v for k, (v, _) in log.unknown.items()}, list(cluster.addresses))
        for key, (value, _code) in log.unknown.items():
            seen = {node_id: unknown[node_id][key] for node_id in unknown}
            assert len(set(seen.values())) == 1 and set(seen.values()) <= {None, value}, (key, seen)

    run(cluster, body)


# ----------------------------------------------------- b. no majority, no commit


def test_no_write_is_acknowledged_without_a_majority(cluster: QuorumProcesses) -> None:
    async def body() -> None:
        cluster.start_all()
        leader, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        async with QuorumClient([leader_address], request_timeout_s=WRITE_TIMEOUT_S) as client:
            await client.set(b"before", b"1")
        followers = others(cluster, leader)
        for node_id in followers:
            cluster.kill(node_id)
        commit_before = (await node_status(leader_address)).commit_index

        async with QuorumClient([leader_address], request_timeout_s=1.0) as lonely:
            with pytest.raises((QuorumClientError, TimeoutError)):
                await asyncio.wait_for(lonely.set(b"orphan", b"x"), 5.0)
        survivor = await node_status(leader_address)
        assert survivor.commit_index == commit_before, "the lone survivor committed without a majority"
        async with QuorumClient([leader_address]) as reader:
            assert await reader.read(b"orphan", server=leader_address) is None

        cluster.start(followers[0])
        async with QuorumClient(list(cluster.addresses.values()), request_timeout_s=WRITE_TIMEOUT_S) as client:
            after = await client.set(b"after", b"2")
        assert after.index > commit_before
        cluster.start(followers[1])
        _, new_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        await final_commit_everywhere(cluster, new_address)
        found = await read_everywhere(
            cluster, {b"before": b"1", b"after": b"2", b"orphan": None}, list(cluster.addresses)
        )
        orphan = found[leader][b"orphan"]
        assert orphan in (None, b"x")
        expected: dict[bytes, bytes | None] = {b"before": b"1", b"after": b"2", b"orphan": orphan}
        assert_all_present(found, expected)

    run(cluster, body)


# -------------------------------------------------------- c. catch-up by snapshot


SNAPSHOT_KEYS = 1000
SNAPSHOT_PROPERTIES = {**FAST, "snapshot.interval.entries": "200", "snapshot.trailing.entries": "10"}


def test_follower_far_behind_catches_up_from_a_snapshot(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, n=3, properties=SNAPSHOT_PROPERTIES) as cluster:

        async def body() -> None:
            cluster.start_all()
            leader, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
            lagger = others(cluster, leader)[0]
            lagger_address = cluster.addresses[lagger]
            servers = list(cluster.addresses.values())
            async with QuorumClient(servers, request_timeout_s=WRITE_TIMEOUT_S) as client:
                await client.set(b"early", b"0")
                await final_commit_everywhere(cluster, leader_address)
                lagger_last = (await node_status(lagger_address)).last_index
                cluster.kill(lagger)
                expected = {f"snap-{i:05d}".encode(): f"v{i}".encode() for i in range(SNAPSHOT_KEYS)}
                items = list(expected.items())
                for start in range(0, len(items), 100):
                    await asyncio.gather(*(client.set(k, v) for k, v in items[start : start + 100]))

            async with StatusPoller() as poller:

                async def compacted() -> pb.StatusResponse | None:
                    s = await poller.status(leader_address)
                    return s if s is not None and s.snapshot_index > 0 and s.first_index > lagger_last else None

                status = await poll_until(
                    compacted, CATCH_UP_TIMEOUT_S, f"leader never compacted its log past index {lagger_last}"
                )
            assert status.role == "leader"

            cluster.start(lagger)
            commit = (await node_status(leader_address)).commit_index
            await wait_applied([lagger_address], commit, CATCH_UP_TIMEOUT_S)
            installed = cluster.log_events(lagger, "snapshot_installed")
            assert installed, "the lagging follower caught up without installing a snapshot"
            assert max(e["index"] for e in installed) > lagger_last
            found = await read_everywhere(cluster, expected | {b"early": b"0"}, [lagger])
            assert_all_present(found, expected | {b"early": b"0"})

        run(cluster, body)


# ------------------------------------------------------------ d. graceful shutdown


def test_sigterm_leader_hands_over_without_an_election_timeout(cluster: QuorumProcesses) -> None:
    async def body() -> None:
        cluster.start_all()
        old_leader, old_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        servers = list(cluster.addresses.values())
        async with QuorumClient(servers, request_timeout_s=WRITE_TIMEOUT_S) as client:
            await client.set(b"before", b"1")
        old_term = (await node_status(old_address)).term

        assert cluster.terminate(old_leader) == 0
        new_leader, new_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S, exclude=[old_leader])
        new_term = (await node_status(new_address)).term
        assert new_term == old_term + 1, f"term went from {old_term} to {new_term}: more than one election"
        # Leadership transfer (Raft thesis 3.10) makes the target campaign at once; an
        # expired election timeout would first show a pre-candidate (pre-vote) in this term.
        for node_id in others(cluster, old_leader):
            timed_out = [
                e for e in cluster.log_events(node_id, "role_changed")
                if e["role"] == "pre-candidate" and e["term"] >= old_term
            ]  # fmt: skip
            assert not timed_out, f"node {node_id} had an election timeout: {timed_out}"

        async with QuorumClient(servers, request_timeout_s=WRITE_TIMEOUT_S) as client:
            after = await client.set(b"after", b"2")
            assert await client.read(b"after", linearizable=True, server=new_address) == b"2"
        assert after.index > 0

        handed = [e["new_leader"] for e in cluster.log_events(old_leader, "leadership_transferred_on_shutdown")]
        assert handed == [new_leader], f"old leader logged {handed}, but node {new_leader} leads"

    run(cluster, body)


# ------------------------------------------------- e. refusing a mismatched configuration


def run_refused(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=CLI_TIMEOUT_S
    )


def assert_refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Non-zero exit, exactly one stderr line `zkraft: error: ...` naming `words`, no traceback."""
    lines = result.stderr.splitlines()
    assert result.returncode != 0, f"started anyway: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith("zkraft: error:"), result.stderr
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    return lines[0]


def test_another_cluster_or_peer_list_is_refused_and_a_restart_keeps_its_config(cluster: QuorumProcesses) -> None:
    async def body() -> None:
        cluster.start(1)
        cluster.start(2)
        await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S, exclude=[3])

        # Node 3 with a fresh data dir each time, so only the running peers can object.
        line = assert_refused(
            run_refused(cluster.command(3, cluster_id="other-cluster", data_dir=cluster.root / "fresh-a")),
            "cluster",
            "other-cluster",
        )
        assert cluster.cluster_id in line
        moved = {**cluster.addresses, 2: f"127.0.0.1:{free_ports(1)[0]}"}
        assert_refused(
            run_refused(cluster.command(3, peers=peers_text(moved), data_dir=cluster.root / "fresh-b")), "peers"
        )

        cluster.start(3)
        _, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        await final_commit_everywhere(cluster, leader_address)

        # A data dir remembers the cluster it was created with, and its configuration: a restart with a stale
        # peer list uses the stored one and says so (issue 32: the configuration lives in the log).
        cluster.kill(1)
        assert_refused(run_refused(cluster.command(1, cluster_id="other-cluster")), "cluster", "data dir")
        moved = {**cluster.addresses, 3: f"127.0.0.1:{free_ports(1)[0]}"}
        stale_log = cluster.root / "logs" / "node-1-stale-peers.log"
        with stale_log.open("wb") as log:
            stale = subprocess.Popen(
                cluster.command(1, peers=peers_text(moved)), cwd=REPO_ROOT, env=subprocess_env(), stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                await wait_serving(cluster.addresses[1], LEADER_TIMEOUT_S)
                _, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
                await final_commit_everywhere(cluster, leader_address)
            finally:
                stale.terminate()
                stale.wait(timeout=CLI_TIMEOUT_S)
        output = stale_log.read_text(encoding="utf-8", errors="replace")
        assert '"event": "stored_configuration_used"' in output, output[-2000:]

        cluster.start(1)
        async with QuorumClient(list(cluster.addresses.values()), request_timeout_s=WRITE_TIMEOUT_S) as client:
            await client.set(b"still", b"works")
        _, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        await final_commit_everywhere(cluster, leader_address)

    run(cluster, body)


def test_refused_start_leaves_a_new_data_dir_usable(cluster: QuorumProcesses) -> None:
    async def body() -> None:
        cluster.start(1)
        cluster.start(2)
        await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S, exclude=[3])
        assert_refused(run_refused(cluster.command(3, cluster_id="other-cluster")), "cluster")
        cluster.start(3)  # the operator fixed the typo; same (new) data dir
        await cluster.wait_serving(3, LEADER_TIMEOUT_S)
        _, leader_address = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)
        await final_commit_everywhere(cluster, leader_address)
        cluster.assert_alive(3)

    run(cluster, body)


# --------------------------------------------------------- f. zkraft quorum status


STATUS_KEYS = ("id", "address", "role", "term", "leader", "commit_index", "applied_index", "last_index")


def quorum_status_json(cluster: QuorumProcesses, expected_exit: int = 0) -> list[dict[str, object]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "zkraft",
            "quorum",
            "status",
            "--json",
            "--server",
            ",".join(cluster.addresses.values()),
        ],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert result.returncode == expected_exit, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    rows = json.loads(result.stdout)
    assert [row["address"] for row in rows] == list(cluster.addresses.values())
    for row in rows:
        missing = [key for key in STATUS_KEYS if key not in row]
        assert not missing, f"row {row} lacks {missing}"
    return rows


def quorum_status_run(cluster: QuorumProcesses) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "zkraft",
        "quorum",
        "status",
        "--json",
        "--server",
        ",".join(cluster.addresses.values()),
    ]
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=CLI_TIMEOUT_S
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_quorum_status_command_shows_leader_terms_and_unreachable_nodes(cluster: QuorumProcesses) -> None:
    async def body() -> None:
        cluster.start_all()
        leader, _ = await wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S)

        async def settled() -> list[dict[str, object]] | None:
            # One run of the tool; an election between our wait and the tool's poll is legitimate, so look again.
            rows = await asyncio.to_thread(quorum_status_json, cluster)
            leaders = [row for row in rows if row["role"] == "leader"]
            one_term = len({row["term"] for row in rows}) == 1
            return rows if len(leaders) == 1 and one_term else None

        rows = await poll_until(settled, LEADER_TIMEOUT_S, "status never showed one leader and one term")
        by_address = {row["address"]: row for row in rows}
        for node_id, address in cluster.addresses.items():
            row = by_address[address]
            assert row["id"] == node_id
            assert row["role"] in ("leader", "follower")
            assert row["leader"] == next(r["id"] for r in rows if r["role"] == "leader")

        victim = others(cluster, leader)[0]
        cluster.kill(victim)
        rows = await asyncio.to_thread(quorum_status_json, cluster)
        by_address = {row["address"]: row for row in rows}
        assert by_address[cluster.addresses[victim]]["role"] == "unreachable"
        assert by_address[cluster.addresses[victim]]["id"] == victim  # named by the id its peers know
        for node_id in others(cluster, victim):
            assert by_address[cluster.addresses[node_id]]["role"] != "unreachable"

        # A majority down: no leader, and the tool says so with a non-zero exit (an orchestrator's probe fails).
        second = others(cluster, victim)[0]
        cluster.kill(second)

        async def leaderless() -> list[dict[str, object]] | None:
            done = await asyncio.to_thread(quorum_status_run, cluster)
            return json.loads(done.stdout) if done.returncode == 1 else None

        rows = await poll_until(leaderless, LEADER_TIMEOUT_S, "status kept exiting 0 without a majority")
        assert sorted(row["id"] for row in rows if row["role"] == "unreachable") == sorted([victim, second])

    run(cluster, body)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5
    with contextlib.ExitStack() as stack:
        for port in ports:
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)).bind(("127.0.0.1", port))
