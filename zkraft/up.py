"""`zkraft up`: a whole local cluster in the foreground, all data under one directory.

    zkraft up --data-dir ./zkraft-data

starts quorum nodes 1..3 on 127.0.0.1:7001..7003 as child processes (data in
DIR/quorum-N, output in DIR/logs/quorum-N.log), records them in
DIR/cluster.json, waits until they elect a leader and stays in the foreground
until SIGINT or SIGTERM, which it passes on to the nodes as SIGTERM.

A node that dies is reported once and left dead: a test restarts it by hand
with the `cmd` recorded in cluster.json, and the other nodes carry on. Running
`zkraft up` again on the same directory restarts the same cluster (ids, ports,
data) from cluster.json.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from client.tools.quorum_status import collect_status
from quorum.settings import (
    NODE_IDENTITY_PROPERTIES,
    SettingsError,
    check_property_key,
    load_node_settings,
    parse_host_port,
    peers_string,
    properties_to_values,
)

LOCAL_CLUSTER_ID = "zkraft-local"
QUORUM_SIZE = 3
LISTEN_HOST = "127.0.0.1"
BASE_PORT_DEFAULT = 7001
CLUSTER_FILE = "cluster.json"
READY_TIMEOUT_S = 30.0
# A node stopping on SIGTERM first hands leadership over; give it that long before SIGKILL.
STOP_TIMEOUT_S = 20.0
POLL_INTERVAL_S = 0.2
STATUS_TIMEOUT_S = 1.0


class UpError(Exception):
    """`zkraft up` cannot start or keep the cluster: one line for the user."""


class UpUsageError(UpError):
    """Bad arguments to `zkraft up` (exit 2)."""


@dataclass(frozen=True, slots=True)
class QuorumNodeSpec:
    node_id: int
    address: str
    data_dir: Path
    config_path: Path
    log_path: Path

    def cmd(self, peers: str) -> list[str]:
        """The argument list that starts this node by itself (recorded in cluster.json)."""
        return [
            sys.executable, "-m", "zkraft", "quorum", "start",
            "--id", str(self.node_id),
            "--data-dir", str(self.data_dir),
            "--listen", self.address,
            "--peers", peers,
            "--cluster-id", LOCAL_CLUSTER_ID,
            "--config", str(self.config_path),
        ]  # fmt: skip


# ---- planning: arguments, cluster.json, ports ----


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    """`key=value` items into properties; node identity is `zkraft up`'s to set, not the user's."""
    properties: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UpUsageError(f"--override: {item!r} is not key=value")
        try:
            check_property_key(key, "--override: ")
        except SettingsError as error:
            raise UpUsageError(str(error)) from None
        if key in NODE_IDENTITY_PROPERTIES or key.startswith("server."):
            raise UpUsageError(f"--override: {key!r} is set by zkraft up for each node and cannot be overridden")
        if key in properties:
            raise UpUsageError(f"--override: {key!r} is given twice")
        properties[key] = value.strip()
    return properties


def _read_cluster_file(path: Path) -> list[tuple[int, str]]:
    """The (id, address) of each recorded quorum node."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        nodes = [(int(node["id"]), str(node["address"])) for node in document["quorum"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UpError(f"{path}: not a zkraft cluster file ({error}); move it away to start a new cluster") from None
    if sorted(node_id for node_id, _ in nodes) != list(range(1, QUORUM_SIZE + 1)):
        raise UpError(f"{path}: expected quorum nodes 1..{QUORUM_SIZE}; move it away to start a new cluster")
    for node_id, address in nodes:
        try:
            parse_host_port(address, f"{path}: node {node_id}")
        except SettingsError as error:
            raise UpError(str(error)) from None
    return sorted(nodes)


def plan_quorum(root: Path, base_port: int | None) -> list[QuorumNodeSpec]:
    cluster_file = root / CLUSTER_FILE
    if cluster_file.exists():
        nodes = _read_cluster_file(cluster_file)
        recorded_base = parse_host_port(nodes[0][1], "address")[1]
        if base_port is not None and base_port != recorded_base:
            raise UpUsageError(
                f"--base-port {base_port}: {cluster_file} records this cluster on ports from {recorded_base}; "
                "drop --base-port or use another --data-dir"
            )
    else:
        first = BASE_PORT_DEFAULT if base_port is None else base_port
        if not 1 <= first <= 65535 - (QUORUM_SIZE - 1):
            raise UpUsageError(f"--base-port: {first} is out of range 1-{65535 - (QUORUM_SIZE - 1)}")
        nodes = [(index + 1, f"{LISTEN_HOST}:{first + index}") for index in range(QUORUM_SIZE)]
    return [
        QuorumNodeSpec(
            node_id=node_id,
            address=address,
            data_dir=root / f"quorum-{node_id}",
            config_path=root / f"quorum-{node_id}.properties",
            log_path=root / "logs" / f"quorum-{node_id}.log",
        )
        for node_id, address in nodes
    ]


def validate_node_settings(specs: Sequence[QuorumNodeSpec], properties: dict[str, str]) -> None:
    """Build each node's settings here, so a bad override fails before any process starts."""
    peers = {spec.node_id: spec.address for spec in specs}
    try:
        values = properties_to_values(properties, "--override ")
        for spec in specs:
            load_node_settings(
                {
                    **values,
                    "node_id": spec.node_id,
                    "data_dir": spec.data_dir,
                    "listen": spec.address,
                    "peers": peers,
                    "cluster_id": LOCAL_CLUSTER_ID,
                },
                None,
            )
    except SettingsError as error:
        raise UpUsageError(str(error)) from None


def check_ports_free(specs: Sequence[QuorumNodeSpec], cluster_file: Path) -> None:
    for spec in specs:
        host, port = parse_host_port(spec.address, "address")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # SO_REUSEADDR so that a previous run's TIME_WAIT connections do not
            # count; a listening socket still makes bind fail.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as error:
                hint = f" (is this cluster already running? see {cluster_file})" if cluster_file.exists() else ""
                raise UpError(
                    f"port {port} for quorum node {spec.node_id} is already in use ({error.strerror or error}){hint}"
                ) from None


# ---- files ----


def _escape_property_value(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "\\" + escaped if escaped.startswith((" ", "\f")) else escaped


def write_node_config(spec: QuorumNodeSpec, properties: dict[str, str]) -> None:
    lines = [
        "# Written by `zkraft up` on every start from its --override options.",
        "# The node's id, dataDir, listen, peers and cluster.id are on its command line (cluster.json `cmd`).",
        *(f"{key}={_escape_property_value(value)}" for key, value in sorted(properties.items())),
    ]
    write_atomically(spec.config_path, "\n".join(lines) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader sees the old or the new file, never half of one."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_cluster_file(root: Path, specs: Sequence[QuorumNodeSpec], pids: dict[int, int]) -> None:
    peers = peers_string({spec.node_id: spec.address for spec in specs})
    document: dict[str, Any] = {
        "cluster_id": LOCAL_CLUSTER_ID,
        "data_dir": str(root),
        "quorum": [
            {
                "id": spec.node_id,
                "address": spec.address,
                "pid": pids.get(spec.node_id),
                "cmd": spec.cmd(peers),
                "data_dir": str(spec.data_dir),
                "log": str(spec.log_path),
            }
            for spec in specs
        ],
        "brokers": [],
    }
    write_atomically(root / CLUSTER_FILE, json.dumps(document, indent=2) + "\n")


# ---- the running cluster ----


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # logs reach the log file as they happen
    # `python -m zkraft` must find this source tree even when run from another directory uninstalled.
    source_root = str(Path(__file__).resolve().parent.parent)
    paths = [source_root, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != source_root)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _say(line: str) -> None:
    print(line, flush=True)


class LocalCluster:
    """The child processes of one `zkraft up`, their supervision and their shutdown."""

    def __init__(self, root: Path, specs: Sequence[QuorumNodeSpec]) -> None:
        self.root = root
        self.specs = list(specs)
        self.peers = peers_string({spec.node_id: spec.address for spec in specs})
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.reported_exits: set[int] = set()
        self.stop_requested = threading.Event()
        self.signals_received = 0

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signals_received += 1
        self.stop_requested.set()

    def start(self) -> None:
        env = _child_env()
        for spec in self.specs:
            if self.stop_requested.is_set():
                return
            try:
                self.processes[spec.node_id] = self._spawn(spec, env)
            except OSError as error:
                raise UpError(f"cannot start quorum node {spec.node_id}: {error.strerror or error}") from None

    def _spawn(self, spec: QuorumNodeSpec, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(spec.log_path, "ab") as log:
            return subprocess.Popen(
                spec.cmd(self.peers),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                close_fds=True,
                # Own process group: a terminal's Ctrl-C reaches only `zkraft up`,
                # which stops the nodes itself.
                process_group=0,
            )

    def report_exits(self) -> int:
        """Report each child that exited since the last call, once; return how many are still running."""
        running = 0
        for spec in self.specs:
            process = self.processes.get(spec.node_id)
            if process is None:
                continue
            code = process.poll()
            if code is None:
                running += 1
            elif spec.node_id not in self.reported_exits:
                self.reported_exits.add(spec.node_id)
                _say(
                    f"quorum node {spec.node_id} (pid {process.pid}) exited unexpectedly ({_describe_exit(code)}); "
                    f"log: {spec.log_path}"
                )
        return running

    def wait_for_leader(self, timeout_s: float) -> int | None:
        """Poll Status until a node of this cluster leads; None if stopped first. Raises UpError on failure."""
        addresses = [spec.address for spec in self.specs]
        ids = {spec.node_id for spec in self.specs}
        deadline = time.monotonic() + timeout_s
        while not self.stop_requested.is_set():
            if self.report_exits() == 0:
                logs = self.root / "logs"
                raise UpError(f"every quorum node exited before electing a leader; see the logs in {logs}")
            rows = collect_status(addresses, STATUS_TIMEOUT_S)
            leaders = [row for row in rows if row.role == "leader" and row.id in ids]
            if leaders:
                leader = max(leaders, key=lambda row: row.term or 0)
                return leader.id
            if time.monotonic() >= deadline:
                raise UpError(
                    f"the quorum elected no leader within {timeout_s:g} s; see the logs in {self.root / 'logs'}"
                )
            self.stop_requested.wait(POLL_INTERVAL_S)
        return None

    def supervise(self) -> None:
        """Stay in the foreground until a signal; report (do not restart) nodes that die."""
        while not self.stop_requested.wait(POLL_INTERVAL_S):
            self.report_exits()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every running child, wait up to timeout_s (a second signal cuts it short), then SIGKILL."""
        self.report_exits()
        running = [p for p in self.processes.values() if p.poll() is None]
        if not running:
            return
        _say(f"stopping {len(running)} quorum node(s)")
        signals_before = self.signals_received
        for process in running:
            _send(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in running:
            while process.poll() is None and time.monotonic() < deadline and self.signals_received == signals_before:
                try:
                    process.wait(timeout=POLL_INTERVAL_S)
                except subprocess.TimeoutExpired:
                    pass
        for process in running:
            if process.poll() is None:
                _say(f"quorum node pid {process.pid} did not stop; sending SIGKILL")
                _send(process, signal.SIGKILL)
                process.wait()
        _say("quorum stopped")


def _send(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass


def run(data_dir: Path, brokers: int = 0, overrides: Sequence[str] = (), base_port: int | None = None) -> int:
    if brokers > 0:
        raise UpUsageError("--brokers: brokers are not available yet; run with --brokers 0 (the default)")
    properties = parse_overrides(overrides)
    root = Path(data_dir).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise UpUsageError(f"--data-dir: {root} exists and is not a directory")
    specs = plan_quorum(root, base_port)
    validate_node_settings(specs, properties)
    check_ports_free(specs, root / CLUSTER_FILE)
    try:
        (root / "logs").mkdir(parents=True, exist_ok=True)
        for spec in specs:
            spec.data_dir.mkdir(exist_ok=True)
            write_node_config(spec, properties)
        write_cluster_file(root, specs, {})
    except OSError as error:
        raise UpError(f"cannot prepare {root}: {error.strerror or error} ({error.filename or root})") from None
    return _run_cluster(LocalCluster(root, specs))


def _run_cluster(cluster: LocalCluster) -> int:
    previous = {signum: signal.signal(signum, cluster.on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        cluster.start()
        pids = {node_id: process.pid for node_id, process in cluster.processes.items()}
        write_cluster_file(cluster.root, cluster.specs, pids)
        _say(f"zkraft up: data dir {cluster.root}")
        for spec in cluster.specs:
            pid = pids.get(spec.node_id, "-")
            _say(f"quorum node {spec.node_id}: {spec.address} (pid {pid}, log {spec.log_path})")
        _say(f"waiting for a quorum leader (up to {READY_TIMEOUT_S:g} s)")
        leader = cluster.wait_for_leader(READY_TIMEOUT_S)
        if leader is not None:
            _say(f"quorum ready: leader is {leader}")
            _say("zkraft up: running; Ctrl-C stops the cluster")
            cluster.supervise()
        return 0
    finally:
        cluster.stop()
        for signum, handler in previous.items():
            if handler is not None:  # None: installed outside Python, cannot be restored
                signal.signal(signum, handler)
