"""`zkraft up`: a whole local cluster in the foreground, all data under one directory.

    zkraft up --data-dir ./zkraft-data [--brokers 3]

starts quorum nodes 1..3 on 127.0.0.1:7001..7003 as child processes (data in
DIR/quorum-N, output in DIR/logs/quorum-N.log), waits until they elect a
leader, then starts brokers 1..N (properties in DIR/broker-N.properties, data
in DIR/broker-N, output in DIR/logs/broker-N.log) and waits until each has
registered `/brokers/ids/<id>` and a controller holds `/controller`. Each
broker serves Kafka's binary protocol on its Kafka listener (127.0.0.1:9092..
when those ports are free, else the next free block) and its gRPC service on
127.0.0.1:9192..; the Kafka listeners are the bootstrap list `zkraft up`
prints, for Kafka's clients and zkraft's SDK and tools alike (a gRPC client
reaching a Kafka listener is handed to that broker's gRPC service). Every
process is recorded in DIR/cluster.json, each broker with its `address` (gRPC)
and `kafka_address`. It stays in the foreground until SIGINT or SIGTERM, then
stops the brokers first (while the quorum still serves their sessions) and
the quorum nodes last, each with SIGTERM and SIGKILL after a timeout.

A process that dies while the cluster runs is reported (how it ended, its
log's path and last lines) and restarted with the same command after a
back-off that doubles from 1 s to 30 s while it keeps failing
(zkraft/supervision.py); the others carry on, and cluster.json gets its new
pid. While the cluster starts, a process that refuses its configuration
(exit code 2) ends `zkraft up` with one line instead, as a restart would be
refused too. A stop stops everything, and a process in its back-off stays down.
Running `zkraft up` again on the same directory restarts the same cluster
(ids, ports, data) from cluster.json; more brokers than recorded adds new ones.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from broker import config as broker_config
from client import ZkClient
from client.kafka.znodes import BROKER_IDS_PATH, CONTROLLER_PATH, ZnodeDataError, decode_controller
from client.zk.exceptions import NoNodeError, ZkException
from quorum.settings import _FIELD_OF_PROPERTY as QUORUM_PROPERTY_NAMES  # for "did you mean" only
from quorum.settings import (
    NODE_IDENTITY_PROPERTIES,
    SettingsError,
    known_property,
    load_node_settings,
    parse_host_port,
    peers_string,
    properties_to_values,
)
from runtime.certificates import CertificateError
from runtime.tls import TlsConfig
from zkraft import secure_setup
from zkraft.cli import EXIT_USAGE
from zkraft.supervision import RestartBackoff, log_tail
from zkraft.tools.quorum_status import collect_status

LOCAL_CLUSTER_ID = "zkraft-local"
QUORUM_SIZE = 3
LISTEN_HOST = "127.0.0.1"
BASE_PORT_DEFAULT = 7001
# The nodes' ZooKeeper client ports (clientPort): ZooKeeper's 2181, then the next two.
ZK_BASE_PORT_DEFAULT = 2181
# The brokers' gRPC endpoints; their Kafka listeners take Kafka's 9092 and the next ports.
BROKER_BASE_PORT_DEFAULT = 9192
KAFKA_BASE_PORT_DEFAULT = 9092
# How far past the default base `zkraft up` looks for a block of free Kafka ports before letting the kernel choose.
KAFKA_PORT_SEARCH_MAX = 100
BROKERS_DEFAULT = 3
CLUSTER_FILE = "cluster.json"
READY_TIMEOUT_S = 30.0
# A broker opens its logs, connects to the quorum and registers; the first one also elects a controller.
BROKERS_READY_TIMEOUT_S = 60.0
# A node stopping on SIGTERM first hands leadership over; give it that long before SIGKILL.
STOP_TIMEOUT_S = 20.0
# A broker stopping on SIGTERM first asks the controller to move its leaderships away (controlled
# shutdown: by default 3 retries 5 s apart, each bounded by controller.socket.timeout.ms).
BROKER_STOP_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.2
STATUS_TIMEOUT_S = 1.0
ZK_REQUEST_TIMEOUT_S = 5.0
PORT_MAX = 65535
# The four-letter words a local cluster answers unless --override 4lw.commands.whitelist=... says
# otherwise: the monitoring ones (ruok, srvr, stat, mntr, conf, isro) and envi, whose
# zookeeper.version line kazoo's server_version() reads. ZooKeeper's own default is srvr alone.
FOUR_LETTER_WHITELIST_UP = "srvr,ruok,mntr,stat,conf,isro,envi"
# The three nodes of a local cluster share this machine: their loop threads are placed by role
# (runtime/cpu_placement.py) unless --override quorum.cpu.placement=off says otherwise.
CPU_PLACEMENT_UP = "auto"

QUORUM_NODE = "quorum node"
BROKER = "broker"
CONSOLE = "console"
# The web console (`zkraft console`): 8080 when free, else the next free port; recorded as cluster.json `console_url`.
CONSOLE_PORT_DEFAULT = 8080
CONSOLE_STOP_TIMEOUT_S = 10.0
# Broker properties `zkraft up` writes for each broker; `log.dir` too, as `log.dirs` would silently win over it.
BROKER_IDENTITY_PROPERTIES = frozenset(
    {"broker.id", "host.name", "port", "listeners", "log.dirs", "log.dir", "zookeeper.connect", "metrics.port"}
)
# Each child serves /metrics, /healthz and /readyz on its gRPC port plus this (quorum 7001 -> 8001, brokers
# 9192 -> 10192): derived from the recorded address, so a restarted cluster keeps its scrape targets.
METRICS_PORT_OFFSET = 1000


class UpError(Exception):
    """`zkraft up` cannot start or keep the cluster: one line for the user."""


class UpUsageError(UpError):
    """Bad arguments to `zkraft up` (exit 2)."""


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One child process of `zkraft up`, a quorum node or a broker: what it is, where it lives, how it starts."""

    role: str  # QUORUM_NODE or BROKER, as printed
    child_id: int
    address: str
    data_dir: Path
    config_path: Path
    log_path: Path
    cmd: tuple[str, ...]
    zk_address: str = ""  # a quorum node's ZooKeeper client address (clientPort), "" for a broker
    kafka_address: str = ""  # a broker's Kafka listener, "" for a quorum node

    @property
    def metrics_address(self) -> str:
        """host:port of /metrics, /healthz and /readyz (cluster.json `metrics_address`); "" past port 65535."""
        if self.role == CONSOLE:
            return ""
        host, port = parse_host_port(self.address, "address")
        port += METRICS_PORT_OFFSET
        return f"{host}:{port}" if port <= PORT_MAX else ""

    @property
    def name(self) -> str:
        return self.role if self.role == CONSOLE else f"{self.role} {self.child_id}"

    @property
    def url(self) -> str:
        """The console's address as a browser opens it (cluster.json `console_url`)."""
        return f"http://{self.address}/"

    @property
    def ports(self) -> list[tuple[str, int]]:
        """(host, port) of each port this child listens on."""
        addresses = [self.address, *(a for a in (self.zk_address, self.kafka_address, self.metrics_address) if a)]
        return [parse_host_port(address, "address") for address in addresses]


@dataclass(frozen=True, slots=True)
class Overrides:
    """`--override` properties, split by the process kind they belong to."""

    quorum: dict[str, str]
    broker: dict[str, str]


@dataclass(frozen=True, slots=True)
class RecordedCluster:
    """The (id, address) of each quorum node and broker in an existing cluster.json."""

    quorum: list[tuple[int, str]]
    brokers: list[tuple[int, str]]
    quorum_zk: list[tuple[int, str]]  # each node's `zk_address`; empty in a file from before there were any
    broker_kafka: dict[int, str]  # each broker's `kafka_address`; none in a file from before Kafka listeners
    console_address: str | None = None  # host:port of `console_url`; None in a file from before the console


@dataclass(frozen=True, slots=True)
class Plan:
    root: Path
    quorum: list[ChildSpec]
    brokers: list[ChildSpec]  # started by this run
    resting_brokers: list[ChildSpec]  # recorded in cluster.json but not asked for (--brokers below the record)
    security: secure_setup.SecurityFiles | None = None  # --secure: TLS everywhere (zkraft/secure_setup.py)
    console: ChildSpec | None = None  # the web console, when there are brokers to show

    @property
    def admin_tls(self) -> TlsConfig | None:
        """What `zkraft up` connects to its own quorum with: the admin certificate when --secure."""
        return self.security.admin_tls if self.security is not None else None

    def quorum_properties(self, spec: ChildSpec, overrides: dict[str, str]) -> dict[str, str]:
        """One node's properties file: its TLS when --secure, then the --override options."""
        if self.security is None:
            return overrides
        zk_port = parse_host_port(spec.zk_address, "zk_address")[1]
        tls = secure_setup.quorum_properties(self.security, spec, zk_port, secure_client_port_served())
        return {**tls, **overrides}

    def broker_overrides(self, spec: ChildSpec, overrides: dict[str, str]) -> dict[str, str]:
        """One broker's properties besides its identity: its TLS when --secure, then the --override options."""
        if self.security is None:
            return overrides
        every_broker: list[secure_setup.Child] = [*self.brokers, *self.resting_brokers]
        return {**secure_setup.broker_properties(self.security, spec, every_broker), **overrides}

    @property
    def consoles(self) -> list[ChildSpec]:
        return [self.console] if self.console is not None else []

    @property
    def zookeeper_connect(self) -> str:
        return ",".join(spec.address for spec in self.quorum)

    @property
    def zk_connect_string(self) -> str:
        """The nodes' ZooKeeper client addresses: kazoo's, zkCli's and Curator's connect string."""
        return ",".join(spec.zk_address for spec in self.quorum)


# ---- planning: arguments, cluster.json, ports ----


def parse_overrides(overrides: Sequence[str]) -> Overrides:
    """`key=value` items into quorum and broker properties; identities are `zkraft up`'s to set."""
    quorum: dict[str, str] = {}
    broker: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UpUsageError(f"--override: {item!r} is not key=value")
        target = broker if _is_broker_key(key) else quorum
        if key in target:
            raise UpUsageError(f"--override: {key!r} is given twice")
        target[key] = value.strip()
    return Overrides(quorum=quorum, broker=broker)


def _is_broker_key(key: str) -> bool:
    """True for a broker property, False for a quorum node property; UpUsageError for the rest."""
    if key in BROKER_IDENTITY_PROPERTIES:
        raise UpUsageError(f"--override: {key!r} is set by zkraft up for each broker and cannot be overridden")
    if key in NODE_IDENTITY_PROPERTIES or key.startswith("server."):
        raise UpUsageError(f"--override: {key!r} is set by zkraft up for each node and cannot be overridden")
    if known_property(key):
        return False
    try:
        broker_config.check_key(key)
    except broker_config.BrokerConfigError:
        raise UpUsageError(f"--override: unknown property {key!r}{_nearest_property_hint(key)}") from None
    return True


def _nearest_property_hint(key: str) -> str:
    """The nearest quorum node or broker property name, as both settings modules suggest their own."""
    names = [*QUORUM_PROPERTY_NAMES, *(prop.name for prop in broker_config.PROPERTIES)]
    close = difflib.get_close_matches(key, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _read_records(children: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return sorted((int(child["id"]), str(child["address"])) for child in children)


def _read_cluster_file(path: Path) -> RecordedCluster:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        # A cluster.json of a quorum-only `zkraft up` may lack "brokers".
        recorded = RecordedCluster(
            _read_records(document["quorum"]),
            _read_records(document.get("brokers") or []),
            sorted((int(node["id"]), str(node["zk_address"])) for node in document["quorum"] if "zk_address" in node),
            {int(b["id"]): str(b["kafka_address"]) for b in document.get("brokers") or [] if "kafka_address" in b},
            _console_address(document.get("console_url")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UpError(f"{path}: not a zkraft cluster file ({error}); move it away to start a new cluster") from None
    for what, children, expected in (
        ("quorum nodes", recorded.quorum, QUORUM_SIZE),
        ("brokers", recorded.brokers, len(recorded.brokers)),
        ("quorum nodes' zk_address", recorded.quorum_zk, QUORUM_SIZE if recorded.quorum_zk else 0),
    ):
        if [child_id for child_id, _ in children] != list(range(1, expected + 1)):
            raise UpError(f"{path}: expected {what} 1..{expected}; move it away to start a new cluster")
        for child_id, address in children:
            try:
                parse_host_port(address, f"{path}: {what} {child_id}")
            except SettingsError as error:
                raise UpError(str(error)) from None
    for broker_id, address in recorded.broker_kafka.items():
        try:
            parse_host_port(address, f"{path}: broker {broker_id} kafka_address")
        except SettingsError as error:
            raise UpError(str(error)) from None
    return recorded


def _console_address(url: object) -> str | None:
    """host:port of a recorded `console_url` (http://host:port/)."""
    if not isinstance(url, str) or not url.startswith("http://"):
        return None
    address = url.removeprefix("http://").rstrip("/")
    parse_host_port(address, "console_url")
    return address


def _consecutive_addresses(count: int, first_port: int, option: str) -> list[tuple[int, str]]:
    if not 1 <= first_port <= PORT_MAX - max(count - 1, 0):
        raise UpUsageError(f"{option}: {first_port} is out of range 1-{PORT_MAX - max(count - 1, 0)}")
    return [(index + 1, f"{LISTEN_HOST}:{first_port + index}") for index in range(count)]


def _check_recorded_base(option: str, given: int | None, recorded: list[tuple[int, str]], cluster_file: Path) -> int:
    """The first recorded port; a different `given` one is refused (the recorded cluster keeps its ports)."""
    if given is not None:
        _consecutive_addresses(len(recorded), given, option)  # out of range is the first thing to say
    recorded_base = parse_host_port(recorded[0][1], "address")[1]
    if given is not None and given != recorded_base:
        raise UpUsageError(
            f"{option} {given}: {cluster_file} records these on ports from {recorded_base}; "
            f"drop {option} or use another --data-dir"
        )
    return recorded_base


def _zk_addresses(recorded: RecordedCluster | None, zk_base_port: int | None, root: Path) -> dict[int, str]:
    """Each node's ZooKeeper client address: as recorded, else consecutive from --zk-base-port (2181)."""
    if recorded is not None and recorded.quorum_zk:
        _check_recorded_base("--zk-base-port", zk_base_port, recorded.quorum_zk, root / CLUSTER_FILE)
        return dict(recorded.quorum_zk)
    first = ZK_BASE_PORT_DEFAULT if zk_base_port is None else zk_base_port
    return dict(_consecutive_addresses(QUORUM_SIZE, first, "--zk-base-port"))


def plan_quorum(
    root: Path, recorded: RecordedCluster | None, base_port: int | None, zk_base_port: int | None = None
) -> list[ChildSpec]:
    if recorded is not None:
        _check_recorded_base("--base-port", base_port, recorded.quorum, root / CLUSTER_FILE)
        nodes = recorded.quorum
    else:
        first = BASE_PORT_DEFAULT if base_port is None else base_port
        nodes = _consecutive_addresses(QUORUM_SIZE, first, "--base-port")
    zk_addresses = _zk_addresses(recorded, zk_base_port, root)
    peers = peers_string(dict(nodes))
    specs = []
    for node_id, address in nodes:
        data_dir = root / f"quorum-{node_id}"
        config_path = root / f"quorum-{node_id}.properties"
        cmd = (
            sys.executable, "-m", "zkraft", "quorum", "start",
            "--id", str(node_id),
            "--data-dir", str(data_dir),
            "--listen", address,
            "--peers", peers,
            "--cluster-id", LOCAL_CLUSTER_ID,
            "--client-port", str(parse_host_port(zk_addresses[node_id], "zk_address")[1]),
            "--client-port-address", LISTEN_HOST,
            "--config", str(config_path),
        )  # fmt: skip
        log_path = root / "logs" / f"quorum-{node_id}.log"
        specs.append(
            ChildSpec(QUORUM_NODE, node_id, address, data_dir, config_path, log_path, cmd, zk_addresses[node_id])
        )
    return specs


def _broker_addresses(
    recorded: list[tuple[int, str]], count: int, base_port: int | None, root: Path
) -> list[tuple[int, str]]:
    """Recorded brokers keep their addresses; brokers beyond the record take the ports after the last one."""
    if recorded:
        first = _check_recorded_base("--broker-base-port", base_port, recorded, root / CLUSTER_FILE)
    else:
        first = BROKER_BASE_PORT_DEFAULT if base_port is None else base_port
    wanted = _consecutive_addresses(max(count, len(recorded)), first, "--broker-base-port")
    return [*recorded, *wanted[len(recorded) :]]


def _kafka_addresses(
    recorded: dict[int, str], broker_ids: list[int], base_port: int | None, taken: set[int], root: Path
) -> dict[int, str]:
    """Each broker's Kafka listener: as recorded; the others consecutive from --kafka-base-port, else (a new cluster,
    or a cluster.json from before Kafka listeners) the first free block from 9092 that no other child uses."""
    addresses = {b: recorded[b] for b in broker_ids if b in recorded}
    missing = [b for b in broker_ids if b not in recorded]
    if not missing:
        if base_port is not None and recorded:
            _check_recorded_base("--kafka-base-port", base_port, sorted(recorded.items()), root / CLUSTER_FILE)
        return addresses
    if recorded:
        first = _check_recorded_base("--kafka-base-port", base_port, sorted(recorded.items()), root / CLUSTER_FILE)
        first += max(recorded) - min(recorded) + 1  # after the recorded ones, as new brokers' gRPC ports
        ports = [port for _, port in (parse_host_port(a, "kafka_address") for a in recorded.values())]
        taken = taken | set(ports)
    elif base_port is not None:
        first = base_port
    else:
        first = _free_block(KAFKA_BASE_PORT_DEFAULT, len(missing), taken)
    wanted = _consecutive_addresses(len(missing), first, "--kafka-base-port")
    for broker_id, (_, address) in zip(missing, wanted, strict=True):
        addresses[broker_id] = address
    return addresses


def _free_block(start: int, count: int, taken: set[int]) -> int:
    """The first port from `start` (bounded search) beginning `count` consecutive ports that are free and not
    `taken`; past the bound, the kernel's choice."""
    for first in range(start, start + KAFKA_PORT_SEARCH_MAX):
        block = range(first, first + count)
        if not taken.intersection(block) and all(_port_free(LISTEN_HOST, port) for port in block):
            return first
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LISTEN_HOST, 0))
        return int(probe.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    if port > PORT_MAX:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def plan_brokers(
    root: Path,
    recorded: RecordedCluster | None,
    count: int,
    base_port: int | None,
    kafka_base_port: int | None = None,
    taken: set[int] | None = None,
) -> tuple[list[ChildSpec], list[ChildSpec]]:
    """(brokers to start, recorded brokers left stopped); `taken`: ports of the quorum's nodes."""
    grpc = _broker_addresses(recorded.brokers if recorded else [], count, base_port, root)
    taken = (taken or set()) | {parse_host_port(address, "address")[1] for _, address in grpc}
    kafka = _kafka_addresses(
        recorded.broker_kafka if recorded else {}, [b for b, _ in grpc], kafka_base_port, taken, root
    )
    specs = []
    for broker_id, address in grpc:
        config_path = root / f"broker-{broker_id}.properties"
        cmd = (sys.executable, "-m", "zkraft", "broker", "start", "--config", str(config_path))
        log_path = root / "logs" / f"broker-{broker_id}.log"
        data_dir = root / f"broker-{broker_id}"
        specs.append(
            ChildSpec(BROKER, broker_id, address, data_dir, config_path, log_path, cmd, kafka_address=kafka[broker_id])
        )
    return specs[:count], specs[count:]


def plan(
    root: Path,
    brokers: int,
    base_port: int | None,
    broker_base_port: int | None,
    zk_base_port: int | None = None,
    kafka_base_port: int | None = None,
) -> Plan:
    cluster_file = root / CLUSTER_FILE
    recorded = _read_cluster_file(cluster_file) if cluster_file.exists() else None
    if brokers > 0 and "," in str(root):
        raise UpUsageError(f"--data-dir: {root} contains a comma, which log.dirs cannot hold")
    quorum = plan_quorum(root, recorded, base_port, zk_base_port)
    quorum_ports = {port for spec in quorum for _, port in spec.ports}
    started, resting = plan_brokers(root, recorded, brokers, broker_base_port, kafka_base_port, quorum_ports)
    return Plan(root, quorum, started, resting)


def with_console(cluster_plan: Plan, console_port: int | None, recorded: RecordedCluster | None) -> Plan:
    """The plan with its web console (`zkraft console`) when it has brokers; `console_port` 0: none.

    Its port: --console-port, else the recorded console_url's, else 8080 or the next free one."""
    if not cluster_plan.brokers or console_port == 0:
        return cluster_plan
    if console_port is not None:
        _consecutive_addresses(1, console_port, "--console-port")
        address = f"{LISTEN_HOST}:{console_port}"
    elif recorded is not None and recorded.console_address is not None:
        address = recorded.console_address
    else:
        children = [*cluster_plan.quorum, *cluster_plan.brokers, *cluster_plan.resting_brokers]
        taken = {port for spec in children for _, port in spec.ports}
        address = f"{LISTEN_HOST}:{_free_block(CONSOLE_PORT_DEFAULT, 1, taken)}"
    root = cluster_plan.root
    spec = ChildSpec(
        CONSOLE,
        1,
        address,
        root,
        root / "console.properties",
        root / "logs" / "console.log",
        _console_cmd(cluster_plan, address),
    )
    return replace(cluster_plan, console=spec)


def _console_cmd(cluster_plan: Plan, address: str) -> tuple[str, ...]:
    """`zkraft console` on this cluster: the Kafka listeners (the brokers' gRPC ports with TLS, which the SDK
    reaches directly), the quorum, each broker's /metrics; --secure adds the client files and a login."""
    brokers = cluster_plan.brokers
    bootstrap = kafka_bootstrap(cluster_plan)
    security: tuple[str, ...] = ()
    if cluster_plan.security is not None:
        bootstrap = ",".join(spec.address for spec in brokers)
        security = (
            "--command-config", str(cluster_plan.security.client_properties),
            "--zk-tls-config-file", str(cluster_plan.security.zookeeper_client_properties),
            "--require-login",
        )  # fmt: skip
    metrics = ",".join(spec.metrics_address for spec in brokers if spec.metrics_address)
    host, port = parse_host_port(address, "console address")
    return (
        sys.executable, "-m", "zkraft", "console",
        "--bootstrap-server", bootstrap,
        "--zookeeper", cluster_plan.zookeeper_connect,
        *(("--metrics-server", metrics) if metrics else ()),
        "--host", host,
        "--port", str(port),
        *security,
    )  # fmt: skip


def secure_client_port_served() -> bool:
    """Whether this build's quorum nodes take ZooKeeper's secureClientPort (TLS on the wire port)."""
    return known_property("secureClientPort")


def kafka_listener_protocol(overrides: dict[str, str]) -> str:
    """SASL_SSL for a --secure broker (its properties enable SASL mechanisms), else PLAINTEXT."""
    if overrides.get("security.inter.broker.protocol") == "SSL" and overrides.get("sasl.enabled.mechanisms"):
        return "SASL_SSL"
    return "PLAINTEXT"


def broker_properties(spec: ChildSpec, zookeeper_connect: str, overrides: dict[str, str]) -> dict[str, str]:
    host, port = parse_host_port(spec.address, "address")
    return {
        "broker.id": str(spec.child_id),
        "host.name": host,
        "port": str(port),
        "listeners": f"{kafka_listener_protocol(overrides)}://{spec.kafka_address}",
        "log.dirs": str(spec.data_dir),
        "zookeeper.connect": zookeeper_connect,
        **_metrics_properties(spec, "metrics.host", "metrics.port"),
        **overrides,
    }


def _metrics_properties(spec: ChildSpec, host_key: str, port_key: str) -> dict[str, str]:
    if not spec.metrics_address:
        return {}
    host, port = parse_host_port(spec.metrics_address, "metrics_address")
    return {host_key: host, port_key: str(port)}


def validate_node_settings(
    specs: Sequence[ChildSpec], properties: dict[str, str], brokers: int, cluster_plan: Plan | None = None
) -> None:
    """Build each node's settings here, so a bad override fails before any process starts."""
    peers = {spec.child_id: spec.address for spec in specs}
    state_machines: set[str] = set()
    try:
        for spec in specs:
            node_properties = properties if cluster_plan is None else cluster_plan.quorum_properties(spec, properties)
            secure = cluster_plan is not None and cluster_plan.security is not None and secure_client_port_served()
            plain_client_port = bool(spec.zk_address) and not secure
            values = properties_to_values(node_properties, "--override ")
            settings = load_node_settings(
                {
                    **values,
                    "node_id": spec.child_id,
                    "data_dir": spec.data_dir,
                    "listen": spec.address,
                    # --secure: the wire port is the secureClientPort, with no plaintext clientPort beside it.
                    "client_port": parse_host_port(spec.zk_address, "zk_address")[1] if plain_client_port else 0,
                    "peers": peers,
                    "cluster_id": LOCAL_CLUSTER_ID,
                },
                None,
            )
            state_machines.add(settings.state_machine)
    except SettingsError as error:
        raise UpUsageError(str(error)) from None
    if brokers > 0 and state_machines != {"zookeeper"}:
        raise UpUsageError(
            f"--override: quorum.state.machine={','.join(sorted(state_machines))} cannot serve brokers; "
            "drop it or run with --brokers 0"
        )


def validate_broker_settings(plan: Plan, properties: dict[str, str]) -> None:
    for spec in plan.brokers:
        try:
            broker_config.from_properties(
                broker_properties(spec, plan.zookeeper_connect, plan.broker_overrides(spec, properties))
            )
        except broker_config.BrokerConfigError as error:
            raise UpUsageError(f"--override: {error}") from None


def check_ports_distinct(specs: Sequence[ChildSpec]) -> None:
    owners: dict[int, ChildSpec] = {}
    for spec in specs:
        for _, port in spec.ports:
            if port in owners:
                raise UpUsageError(
                    f"port {port} is both {owners[port].name}'s and {spec.name}'s; "
                    "choose --base-port, --zk-base-port, --broker-base-port and --kafka-base-port so that they do not "
                    "overlap"
                )
            owners[port] = spec


def check_ports_free(specs: Sequence[ChildSpec], cluster_file: Path) -> None:
    for spec in specs:
        for host, port in spec.ports:
            _check_port_free(spec, host, port, cluster_file)


def _check_port_free(spec: ChildSpec, host: str, port: int, cluster_file: Path) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR so that a previous run's TIME_WAIT connections do not
        # count; a listening socket still makes bind fail.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            hint = f" (is this cluster already running? see {cluster_file})" if cluster_file.exists() else ""
            raise UpError(f"port {port} for {spec.name} is already in use ({error.strerror or error}){hint}") from None


# ---- files ----


def _escape_property_value(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "\\" + escaped if escaped.startswith((" ", "\f")) else escaped


def _properties_text(header: Sequence[str], properties: dict[str, str]) -> str:
    lines = [*header, *(f"{key}={_escape_property_value(value)}" for key, value in properties.items())]
    return "\n".join(lines) + "\n"


def write_node_config(spec: ChildSpec, properties: dict[str, str]) -> None:
    header = (
        "# Written by `zkraft up` on every start from its --override options.",
        "# The node's id, dataDir, listen, peers and cluster.id are on its command line (cluster.json `cmd`).",
    )
    properties = (
        {
            "4lw.commands.whitelist": FOUR_LETTER_WHITELIST_UP,
            "quorum.cpu.placement": CPU_PLACEMENT_UP,
            # zkCli's and kazoo's reconfig against the local cluster (ZooKeeper's default is off).
            "reconfigEnabled": "true",
        }
        | _metrics_properties(spec, "metricsProvider.httpHost", "metricsProvider.httpPort")
        | properties
    )
    write_atomically(spec.config_path, _properties_text(header, dict(sorted(properties.items()))))


def write_broker_config(spec: ChildSpec, zookeeper_connect: str, overrides: dict[str, str]) -> None:
    header = ("# Written by `zkraft up` on every start: this broker's identity, then its --override options.",)
    properties = broker_properties(spec, zookeeper_connect, dict(sorted(overrides.items())))
    write_atomically(spec.config_path, _properties_text(header, properties))


def write_atomically(path: Path, text: str, mode: int = 0o666) -> None:
    """Write via a temporary file and rename, so a reader sees the old or the new file, never half of one.
    `mode` (less the umask) from the start: a file with a password is never readable by others."""
    temporary = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()  # a leftover of a crash would keep its old mode
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _child_record(spec: ChildSpec, pids: dict[str, int]) -> dict[str, Any]:
    record = {
        "id": spec.child_id,
        "address": spec.address,
        "pid": pids.get(spec.name),
        "cmd": list(spec.cmd),
        "data_dir": str(spec.data_dir),
        "log": str(spec.log_path),
        "config": str(spec.config_path),
    }
    if spec.zk_address:
        record["zk_address"] = spec.zk_address
    if spec.kafka_address:
        record["kafka_address"] = spec.kafka_address
    if spec.metrics_address:
        record["metrics_address"] = spec.metrics_address
    return record


def write_cluster_file(plan: Plan, pids: dict[str, int]) -> None:
    """cluster.json; `pids` by ChildSpec.name, null for a process not running."""
    brokers = sorted([*plan.brokers, *plan.resting_brokers], key=lambda spec: spec.child_id)
    document: dict[str, Any] = {
        "cluster_id": LOCAL_CLUSTER_ID,
        "data_dir": str(plan.root),
        "quorum": [_child_record(spec, pids) for spec in plan.quorum],
        "brokers": [_child_record(spec, pids) for spec in brokers],
    }
    if plan.console is not None:
        document["console_url"] = plan.console.url
        document["console"] = {
            "pid": pids.get(plan.console.name),
            "cmd": list(plan.console.cmd),
            "log": str(plan.console.log_path),
        }
    mode = 0o666
    if plan.security is not None:
        document["security"] = plan.security.cluster_record()
        mode = 0o600  # it holds the admin's password
    write_atomically(plan.root / CLUSTER_FILE, json.dumps(document, indent=2) + "\n", mode)


def prepare_files(plan: Plan, overrides: Overrides) -> None:
    try:
        (plan.root / "logs").mkdir(parents=True, exist_ok=True)
        for spec in plan.quorum:
            spec.data_dir.mkdir(exist_ok=True)
            write_node_config(spec, plan.quorum_properties(spec, overrides.quorum))
        for spec in plan.brokers:
            spec.data_dir.mkdir(exist_ok=True)
            write_broker_config(spec, plan.zookeeper_connect, plan.broker_overrides(spec, overrides.broker))
        write_cluster_file(plan, {})
    except OSError as error:
        raise UpError(
            f"cannot prepare {plan.root}: {error.strerror or error} ({error.filename or plan.root})"
        ) from None


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
    # A closed stdout (`zkraft up | head`) must not stop `zkraft up` from stopping its children.
    with contextlib.suppress(OSError, ValueError):
        print(line, flush=True)


def _plural(count: int, role: str) -> str:
    return f"{count} {role}(s)"


class LocalCluster:
    """The child processes of one `zkraft up`: their start, their supervision and their shutdown.

    A child that exits is reported with the end of its log and restarted with the same command after its
    back-off (zkraft/supervision.py); the others keep running. While the cluster starts, a child that
    refused its configuration (exit code 2, a usage error) ends `zkraft up` instead: a restart would repeat it.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.root = plan.root
        self.processes: dict[str, subprocess.Popen[bytes]] = {}  # by ChildSpec.name: the latest process of each
        self.reported_exits: set[str] = set()  # children whose latest process's exit was reported
        self.started_at_s: dict[str, float] = {}  # time.monotonic() of each child's latest start
        self.backoffs: dict[str, RestartBackoff] = {}
        self.restart_due_s: dict[str, float] = {}  # children waiting out their back-off: when to restart each
        self.stop_requested = threading.Event()
        self.signals_received = 0
        self.env = _child_env()

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signals_received += 1
        self.stop_requested.set()

    def pids(self) -> dict[str, int]:
        """The pid of each running child; one that exited (waiting to be restarted) has none."""
        return {name: process.pid for name, process in self.processes.items() if process.poll() is None}

    def start(self, specs: Sequence[ChildSpec]) -> None:
        for spec in specs:
            if self.stop_requested.is_set():
                return
            self._start_child(spec)

    def _start_child(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        self.started_at_s[spec.name] = time.monotonic()
        try:
            process = self._spawn(spec, self.env)
        except OSError as error:
            raise UpError(f"cannot start {spec.name}: {error.strerror or error}") from None
        self.processes[spec.name] = process
        self.reported_exits.discard(spec.name)
        return process

    def _spawn(self, spec: ChildSpec, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(spec.log_path, "ab") as log:
            return subprocess.Popen(
                spec.cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                close_fds=True,
                # Own process group: a terminal's Ctrl-C reaches only `zkraft up`,
                # which stops the children itself.
                process_group=0,
            )

    def _newly_exited(self, specs: Sequence[ChildSpec]) -> list[tuple[ChildSpec, subprocess.Popen[bytes], int]]:
        """Each child of `specs` whose latest process exited since the last call, with its exit code."""
        exited = []
        for spec in specs:
            process = self.processes.get(spec.name)
            if process is None or spec.name in self.reported_exits or (code := process.poll()) is None:
                continue
            self.reported_exits.add(spec.name)
            exited.append((spec, process, code))
        return exited

    def report_exits(self, specs: Sequence[ChildSpec]) -> None:
        """Report each child of `specs` that exited since the last call, once, without restarting it."""
        for spec, process, code in self._newly_exited(specs):
            _report_exit(spec, process, code)

    def tend(self, specs: Sequence[ChildSpec], starting_phase: str | None = None) -> None:
        """Report each child of `specs` that exited and schedule its restart; restart those whose back-off is over.

        `starting_phase` ("before registering", ...) while the cluster starts: then a child that refused its
        configuration raises UpError naming it.
        """
        now_s = time.monotonic()
        for spec, process, code in self._newly_exited(specs):
            _report_exit(spec, process, code)
            if starting_phase is not None and code == EXIT_USAGE:
                raise UpError(
                    f"{spec.name} (pid {process.pid}) exited {starting_phase} ({_describe_exit(code)}: "
                    f"its configuration was refused, and a restart would be refused too); log: {spec.log_path}"
                )
            self._schedule_restart(spec, now_s)
        for spec in specs:
            due_s = self.restart_due_s.get(spec.name)
            if due_s is not None and now_s >= due_s and not self.stop_requested.is_set():
                self._restart(spec)

    def _schedule_restart(self, spec: ChildSpec, now_s: float) -> None:
        backoff = self.backoffs.setdefault(spec.name, RestartBackoff())
        delay_s = backoff.delay_after_exit(up_for_s=now_s - self.started_at_s.get(spec.name, now_s))
        self.restart_due_s[spec.name] = now_s + delay_s
        _say(f"restarting {spec.name} in {delay_s:g} s (failure {backoff.failures_in_a_row} in a row)")
        self._record_pids()

    def _restart(self, spec: ChildSpec) -> None:
        del self.restart_due_s[spec.name]
        try:
            process = self._start_child(spec)
        except UpError as error:  # no process to run: wait longer and try again
            _say(str(error))
            self._schedule_restart(spec, time.monotonic())
            return
        _say(f"{spec.name} restarted (pid {process.pid}, log {spec.log_path})")
        self._record_pids()

    def _record_pids(self) -> None:
        """cluster.json with the running children's pids; a failed write is reported, the cluster runs on."""
        try:
            write_cluster_file(self.plan, self.pids())
        except OSError as error:
            _say(f"cannot update {self.root / CLUSTER_FILE}: {error.strerror or error}")

    def wait_for_leader(self, timeout_s: float) -> int | None:
        """Poll Status until a node of this cluster leads; None if stopped first. Raises UpError on failure."""
        addresses = [spec.address for spec in self.plan.quorum]
        ids = {spec.child_id for spec in self.plan.quorum}
        deadline = time.monotonic() + timeout_s
        while not self.stop_requested.is_set():
            self.tend(self.plan.quorum, "before the quorum elected a leader")
            rows = collect_status(addresses, STATUS_TIMEOUT_S, self.plan.admin_tls)
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

    def wait_for_brokers(self, timeout_s: float) -> int | None:
        """Poll the quorum until every started broker is registered and a controller is elected.

        Returns the controller's broker id; None if stopped first. Raises UpError on failure.
        """
        zk = ZkClient(self.plan.zookeeper_connect, timeout=ZK_REQUEST_TIMEOUT_S, tls=self.plan.admin_tls)
        try:
            return self._poll_brokers(zk, time.monotonic() + timeout_s, timeout_s)
        finally:
            with contextlib.suppress(Exception):  # the quorum may be gone; nothing left to close then
                zk.close()

    def _poll_brokers(self, zk: ZkClient, deadline: float, timeout_s: float) -> int | None:
        expected = {spec.child_id for spec in self.plan.brokers}
        while not self.stop_requested.is_set():
            self.tend(self.plan.quorum, "while the brokers were starting")
            self.tend(self.plan.brokers, "before registering")
            registered, controller = _broker_readiness(zk)
            if expected <= registered and controller is not None:
                return controller
            if time.monotonic() >= deadline:
                missing = ", ".join(str(b) for b in sorted(expected - registered)) or "none"
                raise UpError(
                    f"brokers not ready within {timeout_s:g} s (unregistered: {missing}; "
                    f"controller: {controller if controller is not None else 'none'}); "
                    f"see the logs in {self.root / 'logs'}"
                )
            self.stop_requested.wait(POLL_INTERVAL_S)
        return None

    def supervise(self) -> None:
        """Stay in the foreground until a signal; restart each child that exits, after its back-off."""
        children = [*self.plan.brokers, *self.plan.quorum, *self.plan.consoles]
        while not self.stop_requested.wait(POLL_INTERVAL_S):
            self.tend(children)

    def stop(self) -> None:
        """Brokers first, so that they shut down and close their sessions on a live quorum; then the quorum nodes."""
        if self.restart_due_s:  # a stop was asked for: a child in its back-off stays stopped
            _say(f"not restarting {', '.join(sorted(self.restart_due_s))}: the cluster is stopping")
            self.restart_due_s.clear()
        self._stop_group(self.plan.consoles, CONSOLE, "console stopped", CONSOLE_STOP_TIMEOUT_S)
        self._stop_group(self.plan.brokers, BROKER, "brokers stopped", BROKER_STOP_TIMEOUT_S)
        self._stop_group(self.plan.quorum, QUORUM_NODE, "quorum stopped", STOP_TIMEOUT_S)

    def _stop_group(self, specs: Sequence[ChildSpec], role: str, done: str, timeout_s: float) -> None:
        """SIGTERM each running child of `specs`, wait up to timeout_s (a further signal cuts it short), SIGKILL."""
        self.report_exits(specs)
        running = [
            (spec, process)
            for spec in specs
            if (process := self.processes.get(spec.name)) is not None and process.poll() is None
        ]
        if not running:
            return
        _say(f"stopping {_plural(len(running), role)}")
        signals_before = self.signals_received
        for _, process in running:
            _send(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for _, process in running:
            while process.poll() is None and time.monotonic() < deadline and self.signals_received == signals_before:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=POLL_INTERVAL_S)
        for spec, process in running:
            if process.poll() is None:
                _say(f"{spec.name} (pid {process.pid}) did not stop; sending SIGKILL")
                _send(process, signal.SIGKILL)
                process.wait()
        _say(done)


def _report_exit(spec: ChildSpec, process: subprocess.Popen[bytes], code: int) -> None:
    """One line naming the child, how it ended and its log; then the log's last lines, indented."""
    _say(f"{spec.name} (pid {process.pid}) exited unexpectedly ({_describe_exit(code)}); log: {spec.log_path}")
    tail = log_tail(spec.log_path)
    for line in tail:
        _say(f"  | {line}")
    if not tail:
        _say("  | (the log is empty)")


def _broker_readiness(zk: ZkClient) -> tuple[set[int], int | None]:
    """(registered broker ids, controller id or None); both empty while the quorum does not answer."""
    try:
        zk.start(timeout=ZK_REQUEST_TIMEOUT_S)  # no-op once connected
        try:
            registered = {int(child) for child in zk.get_children(BROKER_IDS_PATH) if child.isdigit()}
        except NoNodeError:
            registered = set()
        try:
            data, _ = zk.get(CONTROLLER_PATH)
        except NoNodeError:
            return registered, None
        return registered, decode_controller(data).broker_id
    except (ZkException, ZnodeDataError):
        return set(), None


def _send(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass


def run(
    data_dir: Path,
    brokers: int = BROKERS_DEFAULT,
    overrides: Sequence[str] = (),
    base_port: int | None = None,
    broker_base_port: int | None = None,
    zk_base_port: int | None = None,
    kafka_base_port: int | None = None,
    secure: bool = False,
    console_port: int | None = None,
) -> int:
    parsed = parse_overrides(overrides)
    root = Path(data_dir).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise UpUsageError(f"--data-dir: {root} exists and is not a directory")
    cluster_plan = plan(root, brokers, base_port, broker_base_port, zk_base_port, kafka_base_port)
    if secure:
        cluster_plan = _with_security(cluster_plan)
    recorded = _read_cluster_file(root / CLUSTER_FILE) if (root / CLUSTER_FILE).exists() else None
    cluster_plan = with_console(cluster_plan, console_port, recorded)
    validate_node_settings(cluster_plan.quorum, parsed.quorum, len(cluster_plan.brokers), cluster_plan)
    validate_broker_settings(cluster_plan, parsed.broker)
    children = [*cluster_plan.quorum, *cluster_plan.brokers, *cluster_plan.consoles]
    check_ports_distinct(children)
    check_ports_free(children, root / CLUSTER_FILE)
    prepare_files(cluster_plan, parsed)
    return _run_cluster(LocalCluster(cluster_plan))


def _with_security(cluster_plan: Plan) -> Plan:
    """The plan with its CA, certificates and client files made (kept from an earlier --secure run)."""
    children = [*cluster_plan.quorum, *cluster_plan.brokers, *cluster_plan.resting_brokers]
    try:
        files = secure_setup.prepare(cluster_plan.root, children, cluster_plan.root / CLUSTER_FILE)
    except CertificateError as error:
        raise UpError(f"--secure: {error}") from None
    except OSError as error:
        raise UpError(f"--secure: cannot write {error.filename or cluster_plan.root}: {error.strerror}") from None
    quorum = cluster_plan.quorum
    if secure_client_port_served():
        # ZooKeeper's secureClientPort takes the wire port: no plaintext clientPort beside it.
        quorum = [replace(spec, cmd=_without_plain_client_port(spec.cmd)) for spec in quorum]
    # zookeeper.set.acl: each broker logs in to the quorum with the JAAS file's Client section.
    jaas = ("--jaas-config", str(files.zookeeper_jaas)) if files.zookeeper_jaas is not None else ()
    brokers = [replace(spec, cmd=(*spec.cmd, *jaas)) for spec in cluster_plan.brokers]
    return replace(cluster_plan, quorum=quorum, brokers=brokers, security=files)


def _without_plain_client_port(cmd: tuple[str, ...]) -> tuple[str, ...]:
    at = cmd.index("--client-port") + 1
    return (*cmd[:at], "0", *cmd[at + 1 :])


def _run_cluster(cluster: LocalCluster) -> int:
    previous = {signum: signal.signal(signum, cluster.on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        if _start_quorum(cluster) and _start_brokers(cluster):
            if cluster.plan.security is not None:
                for line in _secure_usage(cluster.plan, cluster.plan.security):
                    _say(line)
            _say(_running_line(cluster.plan))
            cluster.supervise()
        return 0
    finally:
        cluster.stop()
        for signum, handler in previous.items():
            if handler is not None:  # None: installed outside Python, cannot be restored
                signal.signal(signum, handler)


def _start_quorum(cluster: LocalCluster) -> bool:
    """Start the quorum nodes and wait for a leader; False if a signal came first."""
    cluster.start(cluster.plan.quorum)
    pids = cluster.pids()
    write_cluster_file(cluster.plan, pids)
    _say(f"zkraft up: data dir {cluster.root}")
    for spec in cluster.plan.quorum:
        _say(f"{spec.name}: {spec.address} (pid {pids.get(spec.name, '-')}, log {spec.log_path})")
    _say(f"waiting for a quorum leader (up to {READY_TIMEOUT_S:g} s)")
    leader = cluster.wait_for_leader(READY_TIMEOUT_S)
    if leader is None:
        return False
    _say(f"quorum ready: leader is {leader}")
    _say(f"ZooKeeper connect string: {cluster.plan.zk_connect_string}")
    if cluster.plan.security is not None:
        secure_setup.store_admin_credential(cluster.plan.zookeeper_connect, cluster.plan.security, ZK_REQUEST_TIMEOUT_S)
    return True


def _start_brokers(cluster: LocalCluster) -> bool:
    """Start the brokers and wait until they are registered and one is controller; False if a signal came first."""
    specs = cluster.plan.brokers
    if not specs:
        return True
    cluster.start(specs)
    pids = cluster.pids()
    write_cluster_file(cluster.plan, pids)
    _say(f"waiting for {_plural(len(specs), BROKER)} to register (up to {BROKERS_READY_TIMEOUT_S:g} s)")
    controller = cluster.wait_for_brokers(BROKERS_READY_TIMEOUT_S)
    if controller is None:
        return False
    for spec in specs:
        _say(
            f"{spec.name}: {spec.kafka_address} (pid {pids.get(spec.name, '-')}, gRPC {spec.address}, "
            f"log {spec.log_path})"
        )
    _say(f"brokers ready: {len(specs)} registered, controller is broker {controller}")
    _say(f"Kafka bootstrap servers: {kafka_bootstrap(cluster.plan)}")
    _start_console(cluster)
    return True


def _start_console(cluster: LocalCluster) -> None:
    """Start the web console once the brokers serve; it is supervised and restarted like the others."""
    console = cluster.plan.console
    if console is None:
        return
    cluster.start([console])
    write_cluster_file(cluster.plan, cluster.pids())
    _say(f"console: {console.url} (log {console.log_path})")


def _tls_overrides(plan: Plan) -> dict[str, str]:
    return plan.broker_overrides(plan.brokers[0], {})


def _secure_usage(plan: Plan, files: secure_setup.SecurityFiles) -> list[str]:
    """How to reach a --secure cluster with the files it wrote."""
    grpc_bootstrap = ",".join(spec.address for spec in plan.brokers)
    plaintext = [
        what
        for what, served in (
            ("the Kafka listeners", not plan.brokers or kafka_listener_protocol(_tls_overrides(plan)) == "SASL_SSL"),
            ("the ZooKeeper client ports (clientPort)", secure_client_port_served()),
        )
        if not served
    ]
    warnings = [f"warning: {what} stay plaintext: this build does not serve TLS on them" for what in plaintext]
    kafka = [
        f"Kafka client properties: {files.client_properties}",
        f"  zkraft topics --bootstrap-server {grpc_bootstrap} --command-config {files.client_properties} --list",
        f"authorizer on: super users {secure_setup.super_users(files, [*plan.brokers, *plan.resting_brokers])}; "
        "allow others with",
        f"  zkraft acls --authorizer-properties zookeeper.connect={plan.zookeeper_connect} "
        f"--zk-tls-config-file {files.zookeeper_client_properties} --add --allow-principal User:alice ...",
    ]
    return [
        *warnings,
        f"TLS on: CA {files.ca_file}; admin user {files.username}, password in {plan.root / CLUSTER_FILE}",
        *(kafka if plan.brokers else []),
        f"ZooKeeper client configuration: {files.zookeeper_client_properties}",
        f"  zkraft zk --server {plan.zookeeper_connect} -client-configuration {files.zookeeper_client_properties} ls /",
        *(_zookeeper_sasl_usage(plan, files) if files.zookeeper_client_jaas is not None else []),
    ]


def _zookeeper_sasl_usage(plan: Plan, files: secure_setup.SecurityFiles) -> list[str]:
    """How zkCli and kazoo log in as the admin, the ZooKeeper super user (Kafka's znodes are the brokers')."""
    return [
        f"ZooKeeper SASL login (DIGEST-MD5, admin is a super user): {files.zookeeper_client_jaas}",
        # ZooKeeper 3.9's client refuses DIGEST-MD5 while zookeeper.fips-mode is true, its default.
        f'  zkCli: CLIENT_JVMFLAGS="-Djava.security.auth.login.config={files.zookeeper_client_jaas} '
        f'-Dzookeeper.fips-mode=false" zkCli.sh '
        f"-server {plan.zk_connect_string} -client-configuration {files.zookeeper_client_properties}",
        f"  kazoo: KazooClient(hosts, use_ssl=True, ca={str(files.ca_file)!r}, "
        f"certfile={str(files.admin_keystore)!r}, keyfile={str(files.admin_keystore)!r}, "
        f"sasl_options={{'mechanism': 'DIGEST-MD5', 'username': {files.username!r}, 'password': <in cluster.json>}})",
        # zookeeper.set.acl: a znode is its creator's, so what a tool writes for the brokers (a SCRAM user, an ACL)
        # must be written as the brokers, as Kafka's docs ask of kafka-configs.sh and kafka-acls.sh.
        f"Kafka's tools with --zookeeper write as the brokers: KAFKA_OPTS=-Djava.security.auth.login.config="
        f"{files.zookeeper_jaas}",
    ]


def kafka_bootstrap(plan: Plan) -> str:
    """The one bootstrap list for Kafka's clients and zkraft's SDK and tools: the brokers' Kafka listeners."""
    return ",".join(spec.kafka_address for spec in plan.brokers)


def _running_line(plan: Plan) -> str:
    if not plan.brokers:
        return "zkraft up: running; Ctrl-C stops the cluster"
    return f"zkraft up: running; bootstrap servers {kafka_bootstrap(plan)}; Ctrl-C stops the cluster"
