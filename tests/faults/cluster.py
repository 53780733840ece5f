"""A quorum with one node per host, started as on separate machines: `zkraft quorum start` with a shared
properties file listing every node by address (server.N=host:port), each node listening on its own address
and serving ZooKeeper clients on the default port 2181 -- no 127.0.0.1 anywhere.

Each node's output goes to `root/logs/node-N.log` (a restarted node's lines follow its earlier ones).
Nodes are stopped, paused and killed by pid (`ip netns exec` execs the node: its pid is the node's).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from tests.faults.netns import Host, Network
from tests.helpers import poll_for
from tests.quorum_harness import REPO_ROOT, subprocess_env

QUORUM_PORT = 7000
CLIENT_PORT = 2181  # ZooKeeper's default: every node has an address of its own, so all can use it
CLUSTER_ID = "zkraft-faults"
KILL_WAIT_S = 10.0
# A node whose fsyncs fail stops at its next save; the register workload saves every few milliseconds.
DISK_STOP_WAIT_S = 10.0
FAILPOINTS_ENV = "ZKRAFT_FAILPOINTS"  # runtime.failpoints
EXIT_STORAGE_FAILED = 1  # runtime.halt: how a node whose disk failed stops
# A restarted node's recovery (replay, tail cut) and start-up, on a loaded machine.
RESTART_WAIT_S = 30.0
# Every node's first start. A start costs about 1.2 s of CPU (Python, gRPC, the stores) and took 23 s at a load
# of 26 on two cores; three nodes started beside a Kafka run took over 60 s, which ended runs as no_first_leader
# before any node had logged node_started. The leader's deadline starts once they have.
START_WAIT_S = 180.0
STARTED_POLL_S = 0.1
NODE_STARTED = '"event": "node_started"'
PROBE_TIMEOUT_S = 30.0

# Elections within about a second (ticks of 50 ms, elections after 10), sessions of 0.4 to 4 s.
PROPERTIES = {
    "quorum.state.machine": "zookeeper",
    "raft.tick.ms": "50",
    "raft.election.timeout.ticks": "10",
    "raft.heartbeat.interval.ticks": "2",
    "tickTime": "200",
}
ELECTION_TIMEOUT_S = 0.5

# Asks every node's Status from inside a client host; prints {"id": role or null, ...} as one JSON line.
PROBE = """
import asyncio, json, sys
from tests.quorum_harness import node_status

async def main(addresses):
    async def one(address):
        try:
            s = await node_status(address, timeout_s=1.0)
            return {"role": s.role, "term": s.term, "leader": s.leader}
        except Exception:
            return None
    answers = await asyncio.gather(*(one(a) for a in addresses.values()))
    print(json.dumps(dict(zip(addresses, answers))))

asyncio.run(main(json.loads(sys.argv[1])))
"""


class HostedQuorum:
    """`n` quorum nodes, node N on host `nN`; a context manager that SIGKILLs what is left on exit."""

    def __init__(self, network: Network, root: Path, n: int = 3, properties: dict[str, str] | None = None) -> None:
        self.network = network
        self.root = Path(root)
        self.hosts: dict[int, Host] = {node_id: network.add_host(f"n{node_id}") for node_id in range(1, n + 1)}
        self.addresses = {node_id: f"{host.address}:{QUORUM_PORT}" for node_id, host in self.hosts.items()}
        self.properties = {**PROPERTIES, **(properties or {})}
        self.config_path = self.root / "quorum.properties"
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in sorted(self.properties.items())]
        lines += [f"server.{node_id}={address}" for node_id, address in sorted(self.addresses.items())]
        lines.append(f"cluster.id={CLUSTER_ID}")
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, IO[bytes]] = {}

    def __enter__(self) -> HostedQuorum:
        return self

    def __exit__(self, *exc: object) -> None:
        for node_id in list(self._procs):
            self.kill(node_id)

    # ---- addresses and paths
    def zk_address(self, node_id: int) -> str:
        return f"{self.hosts[node_id].address}:{CLIENT_PORT}"

    def log_path(self, node_id: int) -> Path:
        return self.root / "logs" / f"node-{node_id}.log"

    def data_dir(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}"

    def disk_fault_path(self, node_id: int) -> Path:
        """While this file exists, node `node_id`'s fsyncs fail (ZKRAFT_FAILPOINTS=fsync=fail-if-exists:...)."""
        return self.root / "faults" / f"disk-n{node_id}"

    def command(self, node_id: int) -> list[str]:
        """What a user types on machine `node_id` (the peers come from server.N in the properties file)."""
        return [
            sys.executable, "-m", "zkraft", "quorum", "start",
            "--id", str(node_id),
            "--data-dir", str(self.data_dir(node_id)),
            "--listen", self.addresses[node_id],
            "--config", str(self.config_path),
        ]  # fmt: skip

    # ---- processes
    def start(self, node_id: int) -> None:
        if self.alive(node_id):
            raise RuntimeError(f"node {node_id} is already running")
        log = self.log_path(node_id).open("ab")
        self._logs[node_id] = log
        self._procs[node_id] = self.hosts[node_id].popen(
            self.command(node_id), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=REPO_ROOT, env=self._env(node_id),
        )  # fmt: skip

    def _env(self, node_id: int) -> dict[str, str]:
        """Every node can be made to fail its fsyncs at a chosen moment (fail_disk); until then its disk works."""
        return {**subprocess_env(), FAILPOINTS_ENV: f"fsync=fail-if-exists:{self.disk_fault_path(node_id)}"}

    def start_all(self) -> None:
        for node_id in self.hosts:
            self.start(node_id)

    def alive(self, node_id: int) -> bool:
        proc = self._procs.get(node_id)
        return proc is not None and proc.poll() is None

    def kill(self, node_id: int) -> None:
        """SIGKILL (a crash: nothing flushed, nothing handed over), reap, close its log."""
        proc = self._procs.get(node_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a paused node dies all the same; CONT lets it be reaped at once
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)
        log = self._logs.pop(node_id, None)
        if log is not None:
            log.close()

    def fail_disk(self, node_id: int) -> None:
        """From now on node `node_id`'s fsyncs fail: it must stop at its next save, acknowledging nothing."""
        path = self.disk_fault_path(node_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def restart_after_disk_failure(self, node_id: int) -> int | None:
        """Wait (bounded) for the node to stop on its failed fsync with exit code 1, then start it on a working
        disk. A node that did not stop so is SIGKILLed and left down: its exit code is then in exit_codes(),
        which the campaign reports as an anomaly. Returns the exit code (None: still running at the deadline)."""
        proc = self._procs[node_id]
        try:
            code: int | None = proc.wait(timeout=DISK_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        self.kill(node_id)
        self.disk_fault_path(node_id).unlink(missing_ok=True)
        if code == EXIT_STORAGE_FAILED:
            self.start_and_wait_started(node_id)
        return code

    def start_all_and_wait_started(self, timeout_s: float = START_WAIT_S) -> list[int]:
        """Start every node and wait (bounded) until each logged node_started or died; the nodes that did
        neither by the deadline (a node that died shows in exit_codes())."""
        self.start_all()

        def late() -> list[int]:
            return [n for n in self.hosts if self._started_count(n) == 0 and self.alive(n)]

        poll_for(lambda: not late(), timeout_s, STARTED_POLL_S)
        return late()

    def start_and_wait_started(self, node_id: int) -> bool:
        """Start the node and wait (bounded) until it logs node_started: its recovery of the data it left
        (a torn tail cut, the write-ahead log replayed) is done. False at the deadline; a node that died
        meanwhile shows in exit_codes()."""
        before = self._started_count(node_id)
        self.start(node_id)
        started = poll_for(lambda: self._started_count(node_id) > before or not self.alive(node_id),
                           RESTART_WAIT_S, STARTED_POLL_S)  # fmt: skip
        return bool(started) and self.alive(node_id)

    def _started_count(self, node_id: int) -> int:
        path = self.log_path(node_id)
        return path.read_text(encoding="utf-8", errors="replace").count(NODE_STARTED) if path.exists() else 0

    def pause(self, node_id: int) -> None:
        self._signal(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(node_id, signal.SIGCONT)

    def _signal(self, node_id: int, sig: signal.Signals) -> None:
        proc = self._procs.get(node_id)
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"node {node_id} is not running")
        proc.send_signal(sig)

    def exit_codes(self) -> dict[int, int | None]:
        return {node_id: proc.poll() for node_id, proc in self._procs.items()}

    # ---- what the nodes say
    def roles(self, from_host: Host) -> dict[int, dict[str, Any] | None]:
        """Every node's role, term and leader as seen from `from_host` (None: no answer)."""
        done = from_host.run(
            [sys.executable, "-c", PROBE, json.dumps(self.addresses)], timeout_s=PROBE_TIMEOUT_S,
            capture_output=True, text=True, cwd=REPO_ROOT, env=subprocess_env(),
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"status probe failed: {done.stderr.strip()[-500:]}")
        return {int(node_id): answer for node_id, answer in json.loads(done.stdout).items()}

    def leader(self, from_host: Host) -> int | None:
        """The node that leads with a majority agreeing on its term, else None."""
        return leader_of(self.roles(from_host))


def leader_of(roles: dict[int, dict[str, Any] | None]) -> int | None:
    """In one probe's answers: the node that leads with a majority agreeing on its term, else None."""
    leaders = [node_id for node_id, r in roles.items() if r is not None and r["role"] == "leader"]
    if len(leaders) != 1:
        return None
    term = roles[leaders[0]]["term"]  # type: ignore[index]
    agree = [r for r in roles.values() if r is not None and r["term"] == term]
    return leaders[0] if len(agree) > len(roles) // 2 else None
