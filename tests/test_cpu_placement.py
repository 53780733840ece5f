"""Where the nodes of a cluster that shares one machine run their event loops (runtime.cpu_placement)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from quorum.settings import NodeSettings, SettingsError, load_node_settings
from runtime.cpu_placement import LoopPlacement, loop_cpus, shares_machine
from tests.quorum_harness import QuorumProcesses, poll_until, wait_for_leader

REPO_ROOT = Path(__file__).resolve().parents[1]
MULTI_CPU = hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) >= 2
ELECTION_TIMEOUT_S = 20


def test_the_leader_gets_one_cpu_and_the_followers_all_the_others() -> None:
    for allowed in ({0, 1}, {2, 5, 7}, set(range(16))):
        leader = loop_cpus(allowed, "zkraft", leader=True)
        followers = loop_cpus(allowed, "zkraft", leader=False)
        assert leader is not None and followers is not None
        assert len(leader) == 1
        assert leader | followers == allowed
        assert not leader & followers


def test_the_leaders_cpu_follows_the_cluster_id_and_one_cpu_means_no_placement() -> None:
    assert loop_cpus({0, 1}, "a", leader=True) == loop_cpus({0, 1}, "a", leader=True)
    leaders = {next(iter(loop_cpus(range(8), f"cluster-{k}", leader=True) or {-1})) for k in range(40)}
    assert len(leaders) > 1  # clusters spread their leaders over the CPUs
    assert loop_cpus({3}, "zkraft", leader=True) is None
    assert loop_cpus({3}, "zkraft", leader=False) is None


def test_only_loopback_hosts_share_the_machine() -> None:
    assert shares_machine(["127.0.0.1", "127.0.0.2", "localhost", "LOCALHOST", "::1", "[::1]"])
    assert not shares_machine(["127.0.0.1", "10.0.0.2"])
    assert not shares_machine(["127.0.0.1", "zk2.example.com"])


def _settings(tmp_path: Path, extra: str) -> NodeSettings:
    config = tmp_path / "node.properties"
    config.write_text(f"id=1\ndataDir={tmp_path}/data\nserver.1=127.0.0.1:7001\n{extra}", encoding="utf-8")
    return load_node_settings(None, config)


def test_placement_is_off_unless_asked_for_and_a_bad_setting_is_one_line_naming_the_key(tmp_path: Path) -> None:
    assert _settings(tmp_path, "").cpu_placement == "off"
    assert _settings(tmp_path, "quorum.cpu.placement=auto\n").cpu_placement == "auto"
    assert load_node_settings({"cpu_placement": "auto"}, tmp_path / "node.properties").cpu_placement == "auto"
    with pytest.raises(SettingsError, match=r"^quorum\.cpu\.placement: must be one of auto, off, got 'on'$"):
        _settings(tmp_path, "quorum.cpu.placement=on\n")


def test_placing_the_loop_frees_the_threads_it_started_meanwhile() -> None:
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("placement needs at least two CPUs")
    placement = LoopPlacement("zkraft", allowed)
    seen: dict[str, set[int]] = {}
    started = threading.Event()
    release = threading.Event()

    def started_by_the_loop() -> None:
        seen["child_at_start"] = os.sched_getaffinity(0)
        started.set()
        release.wait(timeout=10)
        seen["child_later"] = os.sched_getaffinity(0)

    def loop_thread() -> None:
        placement.place(leader=True)
        seen["loop_as_leader"] = os.sched_getaffinity(0)
        child = threading.Thread(target=started_by_the_loop)
        child.start()
        started.wait(timeout=10)
        placement.place(leader=False)  # a new role: the child, pinned by inheritance, is freed
        seen["loop_as_follower"] = os.sched_getaffinity(0)
        release.set()
        child.join(timeout=10)
        placement.release()  # the node stopped
        seen["loop_released"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=loop_thread)
    thread.start()
    thread.join(timeout=20)
    leader_cpus = loop_cpus(allowed, "zkraft", leader=True)
    assert seen["loop_as_leader"] == leader_cpus
    assert seen["child_at_start"] == leader_cpus
    assert seen["loop_as_follower"] == allowed - (leader_cpus or set())
    assert seen["child_later"] == allowed
    assert seen["loop_released"] == allowed
    assert os.sched_getaffinity(0) == allowed  # this thread was never moved


@pytest.mark.skipif(not MULTI_CPU, reason="placement needs at least two CPUs")
def test_only_the_first_local_node_of_a_process_is_placed() -> None:
    script = (
        "from runtime.cpu_placement import LoopPlacement as P\n"
        "local = ['127.0.0.1', 'localhost', '127.0.0.1']\n"
        "first = P.for_node('auto', 'c', local)\n"
        "print(P.for_node('off', 'c', local) is None, P.for_node('auto', 'c', ['127.0.0.1', '10.1.1.1']) is None,\n"
        "      P.for_node('auto', 'c', ['127.0.0.1']) is None, first is not None,\n"
        "      P.for_node('auto', 'c', local) is None)\n"
        "first.release()\n"
        "print(P.for_node('auto', 'c', local) is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    # off, another machine in the cluster, a 1-node cluster: none; the first local node, and no
    # second until the first is released.
    assert out.stdout.split() == ["True"] * 6


def _cpus_allowed(pid: int, tid: int) -> set[int] | None:
    try:
        return os.sched_getaffinity(tid) if Path(f"/proc/{pid}/task/{tid}").exists() else None
    except OSError:
        return None


def _other_threads(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]


@pytest.mark.skipif(not MULTI_CPU, reason="placement needs at least two CPUs")
def test_a_local_clusters_leader_loop_runs_alone_on_one_cpu_and_a_new_leader_takes_it(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    with QuorumProcesses(tmp_path, n=3, properties={"quorum.cpu.placement": "auto"}) as cluster:
        cluster.start_all()
        leader_id, _ = asyncio.run(wait_for_leader(cluster.addresses, timeout_s=ELECTION_TIMEOUT_S))

        def placed(leader: int, nodes: list[int]) -> bool:
            # The main thread runs the event loop: the leader's on one CPU, the followers' on all the others.
            loops = {node: _cpus_allowed(cluster.pid(node) or 0, cluster.pid(node) or 0) for node in nodes}
            leader_cpus = loops[leader]
            if leader_cpus is None or len(leader_cpus) != 1:
                return False
            return all(cpus == allowed - leader_cpus for node, cpus in loops.items() if node != leader)

        async def wait_placed(leader: int, nodes: list[int]) -> None:
            async def probe() -> bool:
                return placed(leader, nodes)

            await poll_until(
                probe,
                ELECTION_TIMEOUT_S,
                lambda: (
                    "loop threads not placed: "
                    + ", ".join(f"node {n}: {_cpus_allowed(cluster.pid(n) or 0, cluster.pid(n) or 0)}" for n in nodes)
                ),
            )

        asyncio.run(wait_placed(leader_id, [1, 2, 3]))
        leader_pid = cluster.pid(leader_id)
        assert leader_pid is not None
        # Only the loop thread: gRPC's threads and the log writer may run on any CPU.
        others = [_cpus_allowed(leader_pid, t) for t in _other_threads(leader_pid)]
        assert others and all(cpus in (allowed, None) for cpus in others), others

        cluster.kill(leader_id)
        new_leader, _ = asyncio.run(
            wait_for_leader(cluster.addresses, timeout_s=ELECTION_TIMEOUT_S, exclude=[leader_id])
        )
        survivors = [n for n in (1, 2, 3) if n != leader_id]
        asyncio.run(wait_placed(new_leader, survivors))


@pytest.mark.skipif(not MULTI_CPU, reason="placement needs at least two CPUs")
def test_placement_off_by_default_leaves_every_loop_free(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    with QuorumProcesses(tmp_path, n=3) as cluster:
        cluster.start_all()
        leader_id, _ = asyncio.run(wait_for_leader(cluster.addresses, timeout_s=ELECTION_TIMEOUT_S))
        for node in (1, 2, 3):
            pid = cluster.pid(node)
            assert pid is not None
            assert _cpus_allowed(pid, pid) == allowed, f"node {node} (leader {leader_id})"
