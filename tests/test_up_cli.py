"""`zkraft up` and `zkraft quorum status` against real quorum node processes on loopback ports."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("quorum.server") is None, reason="quorum/server.py not written yet"),
]

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
STATUS_RUN_TIMEOUT_S = 30.0
PORT_SEARCH_ATTEMPTS = 50


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKRAFT_DEBUG", None)
    return env


def free_base_port(count: int = 3) -> int:
    """A port P such that P..P+count-1 are free on loopback now (bounded random search)."""
    rng = random.Random()
    for _ in range(PORT_SEARCH_ATTEMPTS):
        base = rng.randrange(20000, 60000)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise AssertionError(f"no {count} consecutive free loopback ports in {PORT_SEARCH_ATTEMPTS} attempts")


@dataclass
class UpProcess:
    process: subprocess.Popen[str]
    data_dir: Path
    lines: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def output(self) -> str:
        with self.lock:
            return "".join(self.lines)

    def cluster(self) -> dict:
        return json.loads((self.data_dir / "cluster.json").read_text(encoding="utf-8"))

    def addresses(self) -> list[str]:
        return [node["address"] for node in self.cluster()["quorum"]]


def _pump(up: UpProcess) -> None:
    assert up.process.stdout is not None
    for line in up.process.stdout:
        with up.lock:
            up.lines.append(line)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it has exited, so look at its state.
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _kill_recorded_nodes(data_dir: Path) -> None:
    """Last-resort cleanup of the node processes this test's `up` recorded (by pid)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        for node in json.loads((data_dir / "cluster.json").read_text(encoding="utf-8"))["quorum"]:
            pid = node.get("pid")
            if isinstance(pid, int) and pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def up_cluster(tmp_path: Path) -> Iterator[UpProcess]:
    data_dir = tmp_path / "cluster"
    process = subprocess.Popen(
        [sys.executable, "-m", "zkraft", "up", "--data-dir", str(data_dir), "--base-port", str(free_base_port())],
        cwd=REPO_ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    up = UpProcess(process=process, data_dir=data_dir)
    pump = threading.Thread(target=_pump, args=(up,), daemon=True)
    pump.start()
    try:
        wait_until(
            lambda: "quorum ready: leader is" in up.output() or process.poll() is not None,
            READY_TIMEOUT_S,
            interval_s=0.1,
            message="zkraft up never printed 'quorum ready'",
        )
        assert "quorum ready: leader is" in up.output(), up.output()
        yield up
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
        _kill_recorded_nodes(data_dir)
        pump.join(timeout=STOP_TIMEOUT_S)


def status_json(addresses: list[str]) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "quorum", "status", "--server", ",".join(addresses), "--json"],
        cwd=REPO_ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STATUS_RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def settled(rows: list[dict], expected_reachable: int) -> bool:
    """One leader, every reachable node a follower of it in the same term."""
    reachable = [row for row in rows if row["role"] != "unreachable"]
    leaders = [row for row in reachable if row["role"] == "leader"]
    if len(reachable) != expected_reachable or len(leaders) != 1:
        return False
    leader = leaders[0]
    return all(row["term"] == leader["term"] and row["leader"] == leader["id"] for row in reachable)


def test_up_elects_a_leader_status_agrees_and_sigterm_stops_every_node(up_cluster: UpProcess) -> None:
    cluster = up_cluster.cluster()
    assert cluster["brokers"] == []
    assert [node["id"] for node in cluster["quorum"]] == [1, 2, 3]
    addresses = up_cluster.addresses()

    rows = wait_until(
        lambda: (r := status_json(addresses)) and settled(r, 3) and r,
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="status never showed 3 nodes agreeing on one leader",
    )
    assert isinstance(rows, list)
    assert [row["address"] for row in rows] == addresses
    assert sorted(row["id"] for row in rows) == [1, 2, 3]
    for row in rows:
        for key in ("term", "leader", "commit_index", "applied_index", "last_index", "lag"):
            assert key in row
    announced = int(up_cluster.output().split("quorum ready: leader is", 1)[1].split()[0])
    assert announced in {1, 2, 3}

    pids = [node["pid"] for node in cluster["quorum"]]
    up_cluster.process.send_signal(signal.SIGTERM)
    assert up_cluster.process.wait(timeout=STOP_TIMEOUT_S) == 0
    wait_until(
        lambda: not any(pid_alive(pid) for pid in pids),
        STOP_TIMEOUT_S,
        interval_s=0.1,
        message="a quorum node outlived zkraft up",
    )


def test_a_killed_node_is_reported_once_and_restarts_by_hand(up_cluster: UpProcess) -> None:
    cluster = up_cluster.cluster()
    addresses = up_cluster.addresses()
    rows = wait_until(
        lambda: (r := status_json(addresses)) and settled(r, 3) and r,
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="status never showed 3 nodes agreeing on one leader",
    )
    assert isinstance(rows, list)
    victim = next(row for row in rows if row["role"] == "follower")
    node = next(n for n in cluster["quorum"] if n["id"] == victim["id"])
    os.kill(node["pid"], signal.SIGKILL)

    wait_until(
        lambda: f"quorum node {node['id']} (pid {node['pid']}) exited unexpectedly" in up_cluster.output(),
        STOP_TIMEOUT_S,
        interval_s=0.1,
        message="zkraft up did not report the killed node",
    )
    assert up_cluster.process.poll() is None  # the rest of the cluster keeps running
    wait_until(
        lambda: settled(status_json(addresses), 2),
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="the two remaining nodes do not agree on a leader",
    )

    with open(node["log"], "ab") as log:
        restarted = subprocess.Popen(
            node["cmd"], cwd=REPO_ROOT, env=_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_until(
            lambda: settled(status_json(addresses), 3),
            READY_TIMEOUT_S,
            interval_s=0.2,
            message="the restarted node did not rejoin",
        )
        assert up_cluster.output().count("exited unexpectedly") == 1
    finally:
        restarted.send_signal(signal.SIGTERM)
        try:
            restarted.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            restarted.kill()
            restarted.wait(timeout=STOP_TIMEOUT_S)
