"""A real Apache ZooKeeper on loopback, started from the jars inside the installed pyspark package.

PySpark ships ZooKeeper's server (`pyspark/jars/zookeeper-3.x.jar`, `zookeeper-jute-3.x.jar`) and
everything it needs at run time, so with Java on the machine the conformance tests can compare zkraft
with the real thing:

    reason = unavailable_reason()            # None, or why it cannot run (no java, no pyspark, no jar)
    with RealZooKeeper(tmp_path) as server:  # n=1: ZooKeeperServerMain (standalone)
        server.start_all()
        server.wait_serving(timeout_s=30)
        KazooClient(server.connect_string)
    with RealZooKeeper(tmp_path, n=3) as ensemble:  # QuorumPeerMain, a 3-node ensemble on loopback
        ...

Each node gets `root/zk-N/zoo.cfg` (tickTime 200 ms, dataDir `root/zk-N/data`, a free loopback client
port, the AdminServer off, every four-letter word allowed) and logs to `root/logs/zk-N.log`.
"Serving" is `srvr` reporting a `Mode:` line: `ruok` answers `imok` before the database is loaded,
and keeps answering after the server failed to start. Every wait polls with a deadline; the end of
the `with` SIGKILLs whatever is still running (nothing here depends on a clean stop).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from tests.quorum_harness import LOOPBACK, free_ports

# The classpath, by file-name pattern in pyspark/jars (versions change with pyspark; the names do not).
# Required: what ZooKeeperServerMain and QuorumPeerMain load on a plain (NIO, no TLS, no SASL) start.
REQUIRED_JARS: Mapping[str, str] = {
    "zookeeper": r"zookeeper-\d[\w.-]*\.jar",
    "zookeeper-jute": r"zookeeper-jute-\d[\w.-]*\.jar",
    "slf4j-api": r"slf4j-api-\d[\w.-]*\.jar",
    "metrics-core": r"metrics-core-\d[\w.-]*\.jar",  # DefaultMetricsProvider (com.codahale.metrics)
    "snappy-java": r"snappy-java-\d[\w.-]*\.jar",  # snapshot names (SnapStream), even uncompressed
}
# Optional: logging goes to log4j2 through its slf4j binding when present (else slf4j's no-op logger);
# the rest are referenced by annotations or by code paths a plain start may touch.
OPTIONAL_JARS: Mapping[str, str] = {
    "log4j-slf4j2-impl": r"log4j-slf4j2-impl-\d[\w.-]*\.jar",
    "log4j-api": r"log4j-api-\d[\w.-]*\.jar",
    "log4j-core": r"log4j-core-\d[\w.-]*\.jar",
    "audience-annotations": r"audience-annotations-\d[\w.-]*\.jar",
    "commons-io": r"commons-io-\d[\w.-]*\.jar",
    "commons-cli": r"commons-cli-\d[\w.-]*\.jar",
}
STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Small and quick to start: the client JIT tier only, a small serial-GC heap.
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")
TICK_TIME_MS = 200
KILL_WAIT_S = 10.0
FOUR_LETTER_TIMEOUT_S = 1.0
FOUR_LETTER_BYTES_MAX = 1 << 16
POLL_INTERVAL_S = 0.05
POLL_ROUNDS_MAX = 100_000
LOG_TAIL_LINES = 20
SERVING_MODES = ("standalone", "leader", "follower")

LOG4J2_PROPERTIES = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} [myid:%X{myid}] %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""


class RealZooKeeperUnavailable(RuntimeError):
    """Java, pyspark or a jar ZooKeeper needs is missing; the message says which."""


# ---------------------------------------------------------------- finding java and the jars


def find_jdk_tool(name: str) -> str | None:
    """`$JAVA_HOME/bin/<name>` if it exists, else `name` on PATH, else None (java, javac)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def find_java() -> str | None:
    return find_jdk_tool("java")


def find_javac() -> str | None:
    return find_jdk_tool("javac")


def client_log4j2_properties(level: str) -> str:
    """log4j2 settings for a ZooKeeper client JVM: `level` and up to stderr, never to stdout (which
    carries the program's JSON lines)."""
    return f"""\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{ISO8601}} %-5p [%t] %c{{1}}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
"""


def pyspark_jars_dir() -> Path | None:
    """The installed pyspark's `jars` folder (found without importing pyspark), or None."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def _match(jars_dir: Path, pattern: str) -> Path | None:
    regex = re.compile(pattern)
    found = sorted(p for p in jars_dir.iterdir() if regex.fullmatch(p.name))
    return found[-1] if found else None


def zookeeper_classpath(jars_dir: Path) -> list[Path]:
    """The jars to start ZooKeeper with; RealZooKeeperUnavailable names any required one missing."""
    missing = [name for name, pattern in REQUIRED_JARS.items() if _match(jars_dir, pattern) is None]
    if missing:
        raise RealZooKeeperUnavailable(f"no {', '.join(missing)} jar in {jars_dir}")
    jars = [_match(jars_dir, pattern) for pattern in (*REQUIRED_JARS.values(), *OPTIONAL_JARS.values())]
    return [jar for jar in jars if jar is not None]


def zookeeper_version(jars_dir: Path) -> str:
    """The version in the server jar's name, e.g. "3.9.5"."""
    jar = _match(jars_dir, REQUIRED_JARS["zookeeper"])
    if jar is None:
        raise RealZooKeeperUnavailable(f"no zookeeper jar in {jars_dir}")
    return jar.name.removeprefix("zookeeper-").removesuffix(".jar")


def unavailable_reason() -> str | None:
    """Why a real ZooKeeper cannot be started here, or None when it can."""
    java = find_java()
    if java is None:
        return "no java: neither $JAVA_HOME/bin/java nor java on PATH (ZooKeeper needs Java 8+)"
    jars_dir = pyspark_jars_dir()
    if jars_dir is None:
        return "pyspark is not installed (it ships ZooKeeper's jars): python3 -m pip install -e '.[test]'"
    try:
        zookeeper_classpath(jars_dir)
    except RealZooKeeperUnavailable as exc:
        return str(exc)
    try:
        subprocess.run([java, "-version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{java} -version failed: {exc}"
    return None


# ---------------------------------------------------------------- the servers


def four_letter_word(address: str, word: str, timeout_s: float = FOUR_LETTER_TIMEOUT_S) -> str | None:
    """The server's answer to a four-letter word (it closes the connection after it), or None if none came."""
    host, port = address.rsplit(":", 1)
    chunks: list[bytes] = []
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(word.encode("ascii"))
            size = 0
            while size < FOUR_LETTER_BYTES_MAX:  # bounded: a 4lw answer is small, then EOF
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode("utf-8", errors="replace") if chunks else None


def server_mode(srvr_answer: str | None) -> str | None:
    """`standalone` / `leader` / `follower` from a `srvr` answer, None when it does not serve."""
    if not srvr_answer:
        return None
    match = re.search(r"^Mode: (\w+)", srvr_answer, re.MULTILINE)
    return match.group(1) if match else None


class RealZooKeeper:
    """`n` ZooKeeper servers as child processes: n=1 standalone, n>1 an ensemble of QuorumPeerMain peers."""

    def __init__(
        self,
        root: Path,
        n: int = 1,
        tick_time_ms: int = TICK_TIME_MS,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        reason = unavailable_reason()
        if reason is not None:
            raise RealZooKeeperUnavailable(reason)
        self.java = find_java() or "java"
        jars_dir = pyspark_jars_dir()
        assert jars_dir is not None  # unavailable_reason() checked it
        self.jars_dir = jars_dir
        self.classpath = zookeeper_classpath(jars_dir)
        self.version = zookeeper_version(jars_dir)
        self.root = Path(root)
        self.n = n
        self.tick_time_ms = tick_time_ms
        self.properties = dict(properties or {})
        ports = free_ports(3 * n)  # client, quorum and election port per node
        self.addresses: dict[int, str] = {i: f"{LOOPBACK}:{ports[i - 1]}" for i in range(1, n + 1)}
        self._peer_ports = {i: (ports[n + 2 * (i - 1)], ports[n + 2 * (i - 1) + 1]) for i in range(1, n + 1)}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._log_files: dict[int, IO[bytes]] = {}
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        self.log4j_config = self.root / "log4j2.properties"
        self.log4j_config.write_text(LOG4J2_PROPERTIES, encoding="utf-8")
        for node_id in self.addresses:
            self._write_config(node_id)

    # ---- context manager
    def __enter__(self) -> RealZooKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    # ---- configuration
    @property
    def connect_string(self) -> str:
        return ",".join(self.addresses[i] for i in sorted(self.addresses))

    @property
    def main_class(self) -> str:
        return STANDALONE_MAIN if self.n == 1 else QUORUM_MAIN

    def node_dir(self, node_id: int) -> Path:
        return self.root / f"zk-{node_id}"

    def config_path(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "zoo.cfg"

    def log_path(self, node_id: int) -> Path:
        return self.root / "logs" / f"zk-{node_id}.log"

    def config(self, node_id: int) -> dict[str, str]:
        """zoo.cfg of `node_id` (ZooKeeper's property names, zookeeperAdmin.md)."""
        port = self.addresses[node_id].rsplit(":", 1)[1]
        cfg = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.node_dir(node_id) / "data"),
            "clientPort": port,
            "clientPortAddress": LOOPBACK,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "preAllocSize": "1024",  # KB: the default preallocates 64 MB of txn log per file
        }
        if self.n > 1:
            cfg |= {"initLimit": "10", "syncLimit": "5", "standaloneEnabled": "false"}
            for peer, (quorum_port, election_port) in sorted(self._peer_ports.items()):
                cfg[f"server.{peer}"] = f"{LOOPBACK}:{quorum_port}:{election_port}"
        return cfg | self.properties

    def _write_config(self, node_id: int) -> None:
        data_dir = self.node_dir(node_id) / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        if self.n > 1:
            (data_dir / "myid").write_text(f"{node_id}\n", encoding="ascii")
        text = "".join(f"{key}={value}\n" for key, value in self.config(node_id).items())
        self.config_path(node_id).write_text(text, encoding="utf-8")

    def command(self, node_id: int) -> list[str]:
        return [
            self.java,
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.log4j_config}",
            "-Dzookeeper.admin.enableServer=false",
            # Durability is not under test here; fsync on every txn only slows the comparison down.
            "-Dzookeeper.forceSync=no",
            "-cp",
            os.pathsep.join(str(jar) for jar in self.classpath),
            self.main_class,
            str(self.config_path(node_id)),
        ]

    # ---- process control
    def start(self, node_id: int) -> None:
        """Launch `node_id` (returns at once; `wait_serving` waits for it)."""
        if self.alive(node_id):
            raise RuntimeError(f"zookeeper {node_id} is already running (pid {self._procs[node_id].pid})")
        self._close_log(node_id)
        log = self.log_path(node_id).open("ab")
        self._log_files[node_id] = log
        self._procs[node_id] = subprocess.Popen(
            self.command(node_id),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.node_dir(node_id),
        )

    def start_all(self) -> None:
        for node_id in self.addresses:
            self.start(node_id)

    def kill(self, node_id: int) -> None:
        """SIGKILL `node_id` and reap it."""
        proc = self._procs.get(node_id)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)
        self._close_log(node_id)

    def stop_all(self) -> None:
        for node_id in list(self._procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.kill(node_id)

    def alive(self, node_id: int) -> bool:
        proc = self._procs.get(node_id)
        return proc is not None and proc.poll() is None

    def pid(self, node_id: int) -> int | None:
        """The process id of `node_id` while it runs (a benchmark reads its CPU time from /proc), else None."""
        proc = self._procs.get(node_id)
        return proc.pid if proc is not None and proc.poll() is None else None

    # ---- state
    def four_letter(self, node_id: int, word: str) -> str | None:
        return four_letter_word(self.addresses[node_id], word)

    def mode(self, node_id: int) -> str | None:
        """`standalone`, `leader` or `follower` when `node_id` serves clients, else None."""
        return server_mode(self.four_letter(node_id, "srvr"))

    def wait_serving(self, timeout_s: float, node_ids: Sequence[int] | None = None) -> dict[int, str]:
        """Poll `srvr` until every node serves (an ensemble: with exactly one leader); returns the modes.

        Fails at once, with the log tail, if a process exits instead.
        """
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        wanted = list(node_ids if node_ids is not None else self.addresses)
        deadline = time.monotonic() + timeout_s
        modes: dict[int, str | None] = {}
        for _ in range(POLL_ROUNDS_MAX):
            for node_id in wanted:
                if not self.alive(node_id):
                    raise AssertionError(f"zookeeper {node_id} exited\n{self.log_tail(node_id)}")
            modes = {node_id: self.mode(node_id) for node_id in wanted}
            serving = all(mode in SERVING_MODES for mode in modes.values())
            leaders = sum(mode == "leader" for mode in modes.values())
            if serving and (self.n == 1 or node_ids is not None or leaders == 1):
                return {node_id: mode for node_id, mode in modes.items() if mode is not None}
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            time.sleep(min(POLL_INTERVAL_S, remaining_s))
        logs = "\n".join(self.log_tail(node_id) for node_id in wanted)
        raise AssertionError(f"zookeeper not serving after {timeout_s:g} s: modes {modes}\n{logs}")

    # ---- logs
    def log_text(self, node_id: int) -> str:
        path = self.log_path(node_id)
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def log_tail(self, node_id: int, lines: int = LOG_TAIL_LINES) -> str:
        tail = self.log_text(node_id).splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path(node_id)}:\n" + "\n".join(tail)

    def _close_log(self, node_id: int) -> None:
        log = self._log_files.pop(node_id, None)
        if log is not None:
            log.close()
