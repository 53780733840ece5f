"""Real quorum node processes on loopback ports, for cluster tests and benchmarks.

    with QuorumProcesses(tmp_path, properties={"raft.tick.ms": "20"}) as cluster:
        cluster.start_all()
        leader_id, leader_address = asyncio.run(wait_for_leader(cluster.addresses, timeout_s=20))
        cluster.kill(leader_id)

Every node is `python -m zkraft quorum start` with its data under
`root/node-N`, its stdout and stderr appended to `root/logs/node-N.log` (so a
restarted node's lines follow its earlier life's), one shared properties file
`root/quorum.properties`, cwd the repository root. Waiting is always polling
with a deadline; nothing here sleeps to let something happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import grpc

from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

REPO_ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
CLUSTER_ID = "zkraft-test"
# How long a SIGKILLed process may take to be reaped, and a Status RPC to answer.
KILL_WAIT_S = 10.0
STATUS_TIMEOUT_S = 1.0
POLL_INTERVAL_S = 0.02
# A loop that polls has both a deadline and this many rounds at most.
POLL_ROUNDS_MAX = 100_000
LOG_TAIL_LINES = 15

T = TypeVar("T")


# A ZooKeeper-mode quorum that elects within about a second and allows sessions of 1 to 10 s: what the
# cluster tests of znodes start with (ticks of 50 ms, elections after 10, heartbeats every 2).
ONE_NODE_START_TIMEOUT_S = 60.0  # one Python process starting and electing itself, on a loaded machine
FAST_ZK_PROPERTIES = {
    "quorum.state.machine": "zookeeper",
    "raft.tick.ms": "50",
    "raft.election.timeout.ticks": "10",
    "raft.heartbeat.interval.ticks": "2",
    "tickTime": "500",
}

# What the benchmarks add to a cluster's properties: loop threads placed by role, as `zkraft up` runs its
# nodes (runtime/cpu_placement.py); a node's default is off.
BENCH_QUORUM_PROPERTIES = {"quorum.cpu.placement": "auto"}


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports that were free a moment ago (the kernel picks them: bind to port 0).

    All `n` sockets are held open together so the kernel cannot hand out the same port twice.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(n):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOOPBACK, 0))
            ports.append(sock.getsockname()[1])
    return ports


def subprocess_env() -> dict[str, str]:
    """The environment of a node process: the repository importable, output unbuffered, no debug tracebacks."""
    env = dict(os.environ)
    paths = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("ZKRAFT_DEBUG", None)
    return env


def peers_text(addresses: Mapping[int, str]) -> str:
    return ",".join(f"{node_id}={addresses[node_id]}" for node_id in sorted(addresses))


class QuorumProcesses:
    """`n` quorum nodes as child processes; a context manager that SIGKILLs whatever is left on exit."""

    def __init__(self, root: Path, n: int = 3, properties: dict[str, str] | None = None) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.root = Path(root)
        self.n = n
        # These processes serve the bare register map (QuorumClient.set/read);
        # the ZooKeeper service has its own tests.
        self.properties = {"quorum.state.machine": "register", **(properties or {})}
        self.cluster_id = CLUSTER_ID
        ports = free_ports(2 * n)
        self.addresses: dict[int, str] = {
            node_id: f"{LOOPBACK}:{port}" for node_id, port in zip(range(1, n + 1), ports[:n], strict=True)
        }
        # Each node's ZooKeeper client port (clientPort): nodes on one machine cannot share 2181.
        self.client_ports: dict[int, int] = dict(zip(range(1, n + 1), ports[n:], strict=True))
        self.config_path = self.root / "quorum.properties"
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._log_files: dict[int, IO[bytes]] = {}
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{key}={value}\n" for key, value in sorted(self.properties.items())), encoding="utf-8"
        )

    # ---- context manager
    def __enter__(self) -> QuorumProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    # ---- paths and commands
    @property
    def peers(self) -> str:
        return peers_text(self.addresses)

    def data_dir(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}"

    def zk_address(self, node_id: int) -> str:
        """host:port where `node_id` serves ZooKeeper clients (the jute wire protocol)."""
        self._check_id(node_id)
        return f"{LOOPBACK}:{self.client_ports[node_id]}"

    @property
    def zk_connect_string(self) -> str:
        """Every node's client address, as kazoo's and zkCli's connect string."""
        return ",".join(self.zk_address(node_id) for node_id in sorted(self.addresses))

    def log_path(self, node_id: int) -> Path:
        return self.root / "logs" / f"node-{node_id}.log"

    def command(
        self,
        node_id: int,
        *,
        peers: str | None = None,
        cluster_id: str | None = None,
        data_dir: Path | None = None,
        listen: str | None = None,
    ) -> list[str]:
        """The command line that starts `node_id`; the keywords override what this cluster would pass."""
        self._check_id(node_id)
        return [
            sys.executable, "-m", "zkraft", "quorum", "start",
            "--id", str(node_id),
            "--data-dir", str(data_dir if data_dir is not None else self.data_dir(node_id)),
            "--listen", listen if listen is not None else self.addresses[node_id],
            "--peers", peers if peers is not None else self.peers,
            "--cluster-id", cluster_id if cluster_id is not None else self.cluster_id,
            "--client-port", str(self.client_ports[node_id]),
            "--client-port-address", LOOPBACK,
            "--config", str(self.config_path),
        ]  # fmt: skip

    # ---- process control
    def start(self, node_id: int) -> None:
        """Launch `node_id` (returns at once; wait for it with `wait_for_leader` or `wait_serving`)."""
        self._check_id(node_id)
        if self.alive(node_id):
            raise RuntimeError(f"node {node_id} is already running (pid {self._procs[node_id].pid})")
        self._close_log(node_id)
        log = self.log_path(node_id).open("ab")
        self._log_files[node_id] = log
        self._procs[node_id] = subprocess.Popen(
            self.command(node_id),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=subprocess_env(),
        )

    def start_all(self) -> None:
        for node_id in self.addresses:
            self.start(node_id)

    def kill(self, node_id: int) -> None:
        """SIGKILL `node_id` and reap it (a crash: nothing is flushed, nothing is handed over)."""
        proc = self._procs.get(node_id)
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait(timeout=KILL_WAIT_S)
        self._close_log(node_id)

    def terminate(self, node_id: int, timeout_s: float = 10) -> int:
        """SIGTERM `node_id`, wait for it to exit and return its exit code.

        A node that outlives `timeout_s` is SIGKILLed and reported by AssertionError.
        """
        proc = self._procs.get(node_id)
        if proc is None:
            raise RuntimeError(f"node {node_id} was never started")
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill(node_id)
                raise AssertionError(
                    f"node {node_id} did not exit within {timeout_s:g} s of SIGTERM\n{self.log_tail(node_id)}"
                ) from None
        self._close_log(node_id)
        return proc.returncode

    def pause(self, node_id: int) -> None:
        """SIGSTOP `node_id`: it keeps its sockets and state but runs nothing until `resume`."""
        proc = self._procs.get(node_id)
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"node {node_id} is not running")
        proc.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        """SIGCONT `node_id` after `pause`."""
        proc = self._procs.get(node_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)

    def restart(self, node_id: int) -> None:
        """SIGKILL `node_id` if it runs, then start it again on the same data dir and port."""
        self.kill(node_id)
        self.start(node_id)

    def alive(self, node_id: int) -> bool:
        proc = self._procs.get(node_id)
        return proc is not None and proc.poll() is None

    def returncode(self, node_id: int) -> int | None:
        proc = self._procs.get(node_id)
        return None if proc is None else proc.poll()

    def pid(self, node_id: int) -> int | None:
        proc = self._procs.get(node_id)
        return None if proc is None else proc.pid

    def stop_all(self) -> None:
        """SIGKILL every node still running (tests end with a crash: nothing depends on a clean stop)."""
        for node_id in list(self._procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.kill(node_id)
            self._close_log(node_id)

    def assert_alive(self, *node_ids: int) -> None:
        """Fail with the node's log tail if a node that should run has exited."""
        for node_id in node_ids or tuple(self._procs):
            if not self.alive(node_id):
                raise AssertionError(
                    f"node {node_id} exited with code {self.returncode(node_id)}\n{self.log_tail(node_id)}"
                )

    async def wait_serving(self, node_id: int, timeout_s: float) -> pb.StatusResponse:
        """Wait until `node_id` answers Status; fails at once, with its log, if the process exits instead."""
        address = self.addresses[node_id]
        async with StatusPoller() as poller:

            async def probe() -> pb.StatusResponse | None:
                self.assert_alive(node_id)
                return await poller.status(address)

            return await poll_until(probe, timeout_s, lambda: f"node {node_id} does not answer Status")

    async def wait_client_ports(self, timeout_s: float) -> None:
        """Wait until every running node accepts connections on its ZooKeeper client port.

        A node answers Status (its gRPC server) before it opens that port (quorum/server.py starts the
        ZooKeeper front end last), so a leader agreed on by a majority says nothing of the client ports."""
        for node_id in sorted(self.addresses):
            if not self.alive(node_id):
                continue

            async def probe(node_id: int = node_id) -> bool:
                self.assert_alive(node_id)
                try:
                    _, writer = await asyncio.open_connection(LOOPBACK, self.client_ports[node_id])
                except OSError:
                    return False
                writer.close()
                return True

            await poll_until(probe, timeout_s, f"node {node_id} does not accept ZooKeeper clients")

    # ---- logs
    def log_text(self, node_id: int) -> str:
        path = self.log_path(node_id)
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def log_events(self, node_id: int, event: str | None = None) -> list[dict[str, Any]]:
        """The node's JSON log lines (all lives), optionally only those whose `event` is `event`."""
        events = []
        for line in self.log_text(node_id).splitlines():
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by SIGKILL
            if event is None or record.get("event") == event:
                events.append(record)
        return events

    def log_tail(self, node_id: int, lines: int = LOG_TAIL_LINES) -> str:
        tail = self.log_text(node_id).splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path(node_id)}:\n" + "\n".join(tail)

    def logs_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_tail(node_id, lines) for node_id in self.addresses)

    # ---- internals
    def _check_id(self, node_id: int) -> None:
        if node_id not in self.addresses:
            raise ValueError(f"no node {node_id}; this cluster has nodes {sorted(self.addresses)}")

    def _close_log(self, node_id: int) -> None:
        log = self._log_files.pop(node_id, None)
        if log is not None:
            log.close()


# ---------------------------------------------------------------- polling


async def poll_until(
    probe: Callable[[], Awaitable[T | None]],
    timeout_s: float,
    message: str | Callable[[], str],
    interval_s: float = POLL_INTERVAL_S,
) -> T:
    """Await `probe()` until it returns something other than None/False; fail with `message` at the deadline.

    The probe runs at least once, and is bounded by the deadline and by POLL_ROUNDS_MAX rounds.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    deadline = time.monotonic() + timeout_s
    for _ in range(POLL_ROUNDS_MAX):
        result = await probe()
        if result is not None and result is not False:
            return result
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            break
        await asyncio.sleep(min(interval_s, remaining_s))
    text = message() if callable(message) else message
    raise AssertionError(f"{text} (waited {timeout_s:g} s)")


class StatusPoller:
    """Status RPCs to several nodes over channels kept open for the poller's life (cheap to poll often)."""

    def __init__(self, timeout_s: float = STATUS_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def __aenter__(self) -> StatusPoller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for channel in self._channels.values():
            await channel.close(grace=None)
        self._channels.clear()

    async def status(self, address: str) -> pb.StatusResponse | None:
        """The node's Status, or None when it does not answer in time."""
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc.aio.insecure_channel(address)
            self._channels[address] = channel
        try:
            return await pb_grpc.QuorumStub(channel).Status(pb.StatusRequest(), timeout=self._timeout_s)
        except grpc.aio.AioRpcError:
            return None

    async def statuses(self, addresses: Iterable[str]) -> dict[str, pb.StatusResponse | None]:
        wanted = list(addresses)
        answers = await asyncio.gather(*(self.status(a) for a in wanted))
        return dict(zip(wanted, answers, strict=True))


async def node_status(address: str, timeout_s: float = STATUS_TIMEOUT_S) -> pb.StatusResponse:
    """One Status RPC to `address` (raises grpc.aio.AioRpcError when the node does not answer)."""
    async with grpc.aio.insecure_channel(address) as channel:
        return await pb_grpc.QuorumStub(channel).Status(pb.StatusRequest(), timeout=timeout_s)


def _as_id_map(addresses: Mapping[int, str] | Sequence[str]) -> dict[int, str]:
    if isinstance(addresses, Mapping):
        return dict(addresses)
    return {k: a for k, a in enumerate(addresses, start=1)}


def _describe(answers: Mapping[str, pb.StatusResponse | None]) -> str:
    parts = []
    for address, s in answers.items():
        if s is None:
            parts.append(f"{address}: no answer")
        else:
            parts.append(
                f"{address}: id={s.id} role={s.role} term={s.term} leader={s.leader} "
                f"commit={s.commit_index} applied={s.applied_index} last={s.last_index}"
            )
    return "; ".join(parts) or "nobody asked"


@contextlib.contextmanager
def one_zookeeper_node(root: Path, properties: Mapping[str, str] = FAST_ZK_PROPERTIES) -> Iterator[QuorumProcesses]:
    """A one-node quorum serving the ZooKeeper service, leading once yielded; SIGKILLed on exit."""
    with QuorumProcesses(root, n=1, properties=dict(properties)) as cluster:
        cluster.start_all()
        asyncio.run(wait_for_leader(cluster.addresses, timeout_s=ONE_NODE_START_TIMEOUT_S))
        yield cluster


async def wait_for_leader(
    addresses: Mapping[int, str] | Sequence[str],
    timeout_s: float,
    exclude: Collection[int | str] = (),
) -> tuple[int, str]:
    """Poll every node's Status until exactly one answering node says it leads and a majority agrees.

    `addresses` maps node ids to host:port (a plain list counts as ids 1, 2, ...); `exclude` names nodes
    (by id or address) not to ask, e.g. ones just killed. The majority is of the whole cluster,
    `len(addresses)`: the leader itself and followers that name it, all in the leader's term.
    Returns (leader id, leader address).
    """
    members = _as_id_map(addresses)
    asked = {i: a for i, a in members.items() if i not in exclude and a not in exclude}
    majority = len(members) // 2 + 1
    last: dict[str, pb.StatusResponse | None] = {}

    async with StatusPoller() as poller:

        async def probe() -> tuple[int, str] | None:
            nonlocal last
            last = await poller.statuses(asked.values())
            live = [s for s in last.values() if s is not None]
            leaders = [s for s in live if s.role == "leader"]
            if len(leaders) != 1:
                return None
            leader = leaders[0]
            agree = [s for s in live if s.term == leader.term and s.leader == leader.id]
            if len(agree) < majority:
                return None
            return leader.id, members.get(leader.id, leader.address)

        return await poll_until(probe, timeout_s, lambda: f"no single leader agreed on: {_describe(last)}")


async def wait_serving(address: str, timeout_s: float) -> pb.StatusResponse:
    """Wait until the node at `address` answers Status."""
    async with StatusPoller() as poller:
        return await poll_until(lambda: poller.status(address), timeout_s, f"{address} does not answer Status")


async def wait_applied(addresses: Iterable[str], index: int, timeout_s: float) -> dict[str, pb.StatusResponse]:
    """Wait until every node at `addresses` has applied at least `index`; returns their last Status."""
    wanted = list(addresses)
    last: dict[str, pb.StatusResponse | None] = {}
    async with StatusPoller() as poller:

        async def probe() -> dict[str, pb.StatusResponse] | None:
            nonlocal last
            last = await poller.statuses(wanted)
            if all(s is not None and s.applied_index >= index for s in last.values()):
                return {a: s for a, s in last.items() if s is not None}
            return None

        return await poll_until(probe, timeout_s, lambda: f"not all applied index {index}: {_describe(last)}")


class MeteredQuorum(QuorumProcesses):
    """QuorumProcesses whose nodes each serve /metrics on a port of their own (metricsProvider.httpPort):
    each node's config file is the cluster's plus its port."""

    def __init__(self, root: Path, n: int = 3, properties: dict[str, str] | None = None) -> None:
        super().__init__(root, n, properties)
        self.metrics_ports = dict(zip(sorted(self.addresses), free_ports(n), strict=True))

    def metrics_url(self, node_id: int) -> str:
        return f"http://{LOOPBACK}:{self.metrics_ports[node_id]}/metrics"

    def command(self, node_id: int, **kwargs: Any) -> list[str]:
        path = self.root / f"quorum-{node_id}.properties"
        extra = f"metricsProvider.httpHost={LOOPBACK}\nmetricsProvider.httpPort={self.metrics_ports[node_id]}\n"
        path.write_text(self.config_path.read_text(encoding="utf-8") + extra, encoding="utf-8")
        cmd = super().command(node_id, **kwargs)
        cmd[cmd.index(str(self.config_path))] = str(path)
        return cmd
