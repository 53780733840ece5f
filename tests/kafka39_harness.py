"""Apache Kafka 3.9's own brokers and command-line tools as child processes on loopback.

Kafka 3.9 is the last release whose brokers keep their metadata in ZooKeeper (`zookeeper.connect`), so it
is the strongest test of zkraft's ZooKeeper front end: the brokers register under /brokers/ids, elect a
controller through /controller and keep topics under /brokers/topics without knowing what serves them.

    jars = maven_jars.resolve()                              # tests/kafka39/pom.xml, resolved once
    with Kafka39Brokers(tmp_path, jars, zookeeper_connect) as kafka:
        kafka.start_all()
        kafka.wait_started(timeout_s=120)
        kafka.topics("--create", "--topic", "t", "--replication-factor", "3")
        kafka.produce("t", ["a", "b"])
        assert kafka.consume("t", count=2, group="g") == ["a", "b"]
        kafka.kill(kafka.partition_leader("t"))

The release's shell scripts are not in the jars, so the tools run their main classes as the scripts do
(bin/kafka-topics.sh, kafka-console-producer.sh and kafka-console-consumer.sh of 3.9). Broker N writes
`root/kafka-N/server.properties`, keeps its log segments in `root/kafka-N/data` and logs (log4j through
slf4j-reload4j) to `root/logs/kafka-N.log`. Every wait polls with a deadline and every tool run has a
timeout; the end of the `with` SIGKILLs whatever still runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.helpers import wait_until
from tests.quorum_harness import LOOPBACK, free_ports
from tests.real_zookeeper import find_java

BROKER_MAIN = "kafka.Kafka"  # bin/kafka-server-start.sh
TOPICS_MAIN = "org.apache.kafka.tools.TopicCommand"  # bin/kafka-topics.sh
PRODUCER_MAIN = "kafka.tools.ConsoleProducer"  # bin/kafka-console-producer.sh (still in core in 3.9)
CONSUMER_MAIN = "org.apache.kafka.tools.consumer.ConsoleConsumer"  # bin/kafka-console-consumer.sh

# Quick to start on a small machine: the client JIT tier only, small serial-GC heaps.
COMMON_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")
BROKER_JVM_OPTIONS = ("-Xms64m", "-Xmx384m", *COMMON_JVM_OPTIONS)
TOOL_JVM_OPTIONS = ("-Xms16m", "-Xmx128m", "-Xshare:auto", *COMMON_JVM_OPTIONS)

# Kafka's session with ZooKeeper (KafkaConfig zookeeper.session.timeout.ms, default 18 s): a SIGKILLed
# broker's /brokers/ids znode goes, and the controller moves its leaderships, once this expires.
ZOOKEEPER_SESSION_TIMEOUT_MS = 6000

# server.properties (Kafka 3.9 KafkaConfig names) shared by every broker: one partition per internal
# topic, no waiting for a first rebalance, nothing the test does not use (log cleaner, auto-created topics).
BROKER_PROPERTIES: Mapping[str, str] = {
    "zookeeper.session.timeout.ms": str(ZOOKEEPER_SESSION_TIMEOUT_MS),
    "zookeeper.connection.timeout.ms": "60000",
    "controller.socket.timeout.ms": "5000",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "delete.topic.enable": "true",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "10000",
    "controlled.shutdown.enable": "false",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "false",
    "log.cleaner.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
}

BROKER_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=INFO
"""
# The tools print their records on stdout; their own logging goes to stderr, warnings and worse only.
TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

# ZooKeeper's client (ClientCnxn) logs this each time a session is opened or moved to another server.
SESSION_LINE = re.compile(r"Session establishment complete on server /?([\w.:-]+), session id = (0x[0-9a-f]+)")
STARTED_LINE = re.compile(r"\[KafkaServer id=(\d+)\] started")
# One partition line of `kafka-topics --describe` in 3.9:
#   Topic: t	Partition: 0	Leader: 2	Replicas: 2,3,1	Isr: 2,3,1	Elr: N/A	LastKnownElr: N/A
PARTITION_LINE = re.compile(r"Partition: (\d+)\s+Leader: (-?\d+|none)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)")

KILL_WAIT_S = 10.0
TOOL_TIMEOUT_S = 120.0
POLL_INTERVAL_S = 0.2
LOG_TAIL_LINES = 30
OUTPUT_TAIL_CHARS = 4000


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as `kafka-topics --describe` shows it; leader None when it has none."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def parse_describe(output: str) -> list[PartitionState]:
    """The partition lines of `kafka-topics --describe` output."""
    states = []
    for match in PARTITION_LINE.finditer(output):
        leader_text = match.group(2)
        leader = None if leader_text in ("none", "-1") else int(leader_text)
        states.append(
            PartitionState(
                partition=int(match.group(1)),
                leader=leader,
                replicas=tuple(int(r) for r in match.group(3).split(",") if r),
                isr=tuple(int(r) for r in match.group(4).split(",") if r),
            )
        )
    return states


class ToolError(AssertionError):
    """A Kafka tool exited non-zero or outlived its timeout; the message carries its output."""


class KafkaTools:
    """Apache Kafka's command-line tools (their main classes, as bin/*.sh run them) from a folder of jars.

    Against any cluster that speaks Kafka's protocol: Kafka39Brokers' own, or zkraft's Kafka listeners.
    """

    def __init__(self, root: Path, jars_dir: Path, jvm_options: Sequence[str] = TOOL_JVM_OPTIONS) -> None:
        self.java = find_java() or "java"
        self.jvm_options = tuple(jvm_options)
        self.root = Path(root)
        self.classpath = os.pathsep.join(str(jar) for jar in sorted(Path(jars_dir).glob("*.jar")))
        if not self.classpath:
            raise ValueError(f"no jars in {jars_dir}")
        self.root.mkdir(parents=True, exist_ok=True)
        self.log4j = self.root / "tools-log4j.properties"
        self.log4j.write_text(TOOLS_LOG4J, encoding="utf-8")

    def command(self, main_class: str, args: Sequence[str]) -> list[str]:
        return [self.java, *self.jvm_options, f"-Dlog4j.configuration=file:{self.log4j}", "-cp", self.classpath,
                main_class, *args]  # fmt: skip

    def run(
        self, main_class: str, args: Sequence[str], stdin_text: str | None = None, timeout_s: float = TOOL_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run a tool's main class to completion, whatever its exit status; ToolError if it outlives `timeout_s`."""
        try:
            return subprocess.run(
                self.command(main_class, args),
                input=stdin_text if stdin_text is not None else "",
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=self.root,
            )
        except subprocess.TimeoutExpired as exc:
            output = _text(exc.stdout) + _text(exc.stderr)
            raise ToolError(
                f"{main_class} {' '.join(args)} ran over {timeout_s:g} s\n{output[-OUTPUT_TAIL_CHARS:]}"
            ) from None

    def run_ok(
        self, main_class: str, args: Sequence[str], stdin_text: str | None = None, timeout_s: float = TOOL_TIMEOUT_S
    ) -> str:
        """Run a tool's main class to completion and return its stdout; ToolError if it fails."""
        done = self.run(main_class, args, stdin_text, timeout_s)
        if done.returncode != 0:
            output = done.stdout + done.stderr
            raise ToolError(f"{main_class} {' '.join(args)} exited {done.returncode}\n{output[-OUTPUT_TAIL_CHARS:]}")
        return done.stdout


class Kafka39Brokers:
    """`n` Kafka 3.9 brokers (ids 1..n) in ZooKeeper mode; a context manager that SIGKILLs them on exit."""

    def __init__(
        self,
        root: Path,
        jars_dir: Path,
        zookeeper_connect: str,
        n: int = 3,
        properties: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = BROKER_JVM_OPTIONS,
    ) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not zookeeper_connect:
            raise ValueError("zookeeper_connect must name at least one host:port")
        self.java = find_java() or "java"
        self.root = Path(root)
        self.classpath = os.pathsep.join(str(jar) for jar in sorted(Path(jars_dir).glob("*.jar")))
        if not self.classpath:
            raise ValueError(f"no jars in {jars_dir}")
        self.zookeeper_connect = zookeeper_connect
        self.properties = dict(properties or {})
        self.jvm_options = tuple(jvm_options)  # a benchmark gives the brokers Kafka's own JIT and GC settings
        self.addresses: dict[int, str] = {
            broker_id: f"{LOOPBACK}:{port}" for broker_id, port in zip(range(1, n + 1), free_ports(n), strict=True)
        }
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._log_files: dict[int, IO[bytes]] = {}
        self._life_starts: dict[int, int] = {}  # characters of the log written before the current life
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        self.broker_log4j = self.root / "log4j.properties"
        self.broker_log4j.write_text(BROKER_LOG4J, encoding="utf-8")
        self.tools = KafkaTools(self.root, jars_dir)
        for broker_id in self.addresses:
            self._write_config(broker_id)

    # ---- context manager
    def __enter__(self) -> Kafka39Brokers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    # ---- configuration
    def broker_dir(self, broker_id: int) -> Path:
        return self.root / f"kafka-{broker_id}"

    def log_path(self, broker_id: int) -> Path:
        return self.root / "logs" / f"kafka-{broker_id}.log"

    def config(self, broker_id: int) -> dict[str, str]:
        """server.properties of `broker_id`."""
        listener = f"PLAINTEXT://{self.addresses[broker_id]}"
        own = {
            "broker.id": str(broker_id),
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.broker_dir(broker_id) / "data"),
            "zookeeper.connect": self.zookeeper_connect,
        }
        return own | dict(BROKER_PROPERTIES) | self.properties

    def _write_config(self, broker_id: int) -> None:
        self.broker_dir(broker_id).mkdir(parents=True, exist_ok=True)
        text = "".join(f"{key}={value}\n" for key, value in self.config(broker_id).items())
        (self.broker_dir(broker_id) / "server.properties").write_text(text, encoding="utf-8")

    def bootstrap_servers(self, broker_ids: Iterable[int] | None = None) -> str:
        """host:port of the given brokers (default: those running), as the tools' --bootstrap-server."""
        ids = sorted(broker_ids) if broker_ids is not None else self.live_ids()
        return ",".join(self.addresses[broker_id] for broker_id in ids)

    # ---- process control
    def start(self, broker_id: int) -> None:
        """Launch `broker_id` (returns at once; `wait_started` waits for it)."""
        if self.alive(broker_id):
            raise RuntimeError(f"broker {broker_id} is already running (pid {self._procs[broker_id].pid})")
        self._close_log(broker_id)
        self._life_starts[broker_id] = len(self.log_text(broker_id))
        log = self.log_path(broker_id).open("ab")
        self._log_files[broker_id] = log
        command = [
            self.java,
            *self.jvm_options,
            f"-Dlog4j.configuration=file:{self.broker_log4j}",
            f"-Dkafka.logs.dir={self.root / 'logs'}",
            "-cp",
            self.classpath,
            BROKER_MAIN,
            str(self.broker_dir(broker_id) / "server.properties"),
        ]
        self._procs[broker_id] = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.broker_dir(broker_id)
        )

    def start_all(self) -> None:
        for broker_id in self.addresses:
            self.start(broker_id)

    def kill(self, broker_id: int) -> None:
        """SIGKILL `broker_id` and reap it (a crash: no controlled shutdown, its ZooKeeper session just ends)."""
        proc = self._procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)
        self._close_log(broker_id)

    def stop_all(self) -> None:
        for broker_id in list(self._procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.kill(broker_id)

    def alive(self, broker_id: int) -> bool:
        proc = self._procs.get(broker_id)
        return proc is not None and proc.poll() is None

    def pid(self, broker_id: int) -> int | None:
        """The process id of `broker_id` while it runs (a benchmark reads its CPU time from /proc), else None."""
        proc = self._procs.get(broker_id)
        return proc.pid if proc is not None and proc.poll() is None else None

    def live_ids(self) -> list[int]:
        return [broker_id for broker_id in sorted(self.addresses) if self.alive(broker_id)]

    def assert_alive(self, *broker_ids: int) -> None:
        for broker_id in broker_ids or tuple(self._procs):
            if not self.alive(broker_id):
                raise AssertionError(f"broker {broker_id} exited\n{self.log_tail(broker_id)}")

    def wait_started(self, timeout_s: float, broker_ids: Sequence[int] | None = None) -> None:
        """Poll the brokers' logs until each says `[KafkaServer id=N] started` in its current life.

        Fails at once, with the log tail, if a broker exits instead.
        """
        wanted = list(broker_ids if broker_ids is not None else self.addresses)
        offsets = {broker_id: self._life_offset(broker_id) for broker_id in wanted}
        waiting = wanted

        def all_started() -> bool:
            nonlocal waiting
            self.assert_alive(*wanted)
            waiting = [b for b in wanted if not STARTED_LINE.search(self.log_text(b)[offsets[b] :])]
            return not waiting

        try:
            wait_until(all_started, timeout_s, POLL_INTERVAL_S)
        except AssertionError:
            if not all(self.alive(b) for b in wanted):
                raise  # assert_alive's message: which broker exited, with its log
            logs = "\n".join(self.log_tail(broker_id) for broker_id in wanted)
            raise AssertionError(f"kafka brokers {waiting} not started after {timeout_s:g} s\n{logs}") from None

    def _life_offset(self, broker_id: int) -> int:
        """Where the current life of `broker_id` starts in its log (the file is appended across lives)."""
        return self._life_starts.get(broker_id, 0)

    def zookeeper_session(self, broker_id: int) -> tuple[str, str] | None:
        """(session id, server host:port) of the broker's ZooKeeper session in its current life, as last logged."""
        sessions = SESSION_LINE.findall(self.log_text(broker_id)[self._life_offset(broker_id) :])
        if not sessions:
            return None
        server, session_id = sessions[-1]
        return session_id, server

    # ---- the tools
    def run_tool(
        self, main_class: str, args: Sequence[str], stdin_text: str | None = None, timeout_s: float = TOOL_TIMEOUT_S
    ) -> str:
        """Run a Kafka tool's main class to completion and return its stdout; ToolError if it fails."""
        return self.tools.run_ok(main_class, args, stdin_text, timeout_s)

    def topics(self, *args: str, timeout_s: float = TOOL_TIMEOUT_S) -> str:
        """kafka-topics.sh --bootstrap-server <live brokers> ARGS."""
        return self.run_tool(TOPICS_MAIN, ["--bootstrap-server", self.bootstrap_servers(), *args], timeout_s=timeout_s)

    def describe(self, topic: str) -> list[PartitionState]:
        return parse_describe(self.topics("--describe", "--topic", topic))

    def produce(self, topic: str, records: Sequence[str], timeout_s: float = TOOL_TIMEOUT_S) -> None:
        """kafka-console-producer.sh with acks=all: one record per line of stdin, flushed at EOF."""
        args = [
            "--bootstrap-server", self.bootstrap_servers(), "--topic", topic,
            "--request-required-acks", "all",
        ]  # fmt: skip
        self.run_tool(PRODUCER_MAIN, args, stdin_text="".join(f"{record}\n" for record in records), timeout_s=timeout_s)

    def consume(self, topic: str, count: int, group: str, timeout_s: float = TOOL_TIMEOUT_S) -> list[str]:
        """kafka-console-consumer.sh --from-beginning in consumer group `group` until `count` records.

        Returns the records read (fewer than `count` when none came for most of `timeout_s`).
        """
        idle_ms = int(timeout_s * 1000 * 0.8)
        args = [
            "--bootstrap-server", self.bootstrap_servers(), "--topic", topic, "--group", group,
            "--from-beginning", "--max-messages", str(count), "--timeout-ms", str(idle_ms),
        ]  # fmt: skip
        return self.run_tool(CONSUMER_MAIN, args, timeout_s=timeout_s).splitlines()

    # ---- logs
    def log_text(self, broker_id: int) -> str:
        path = self.log_path(broker_id)
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def log_tail(self, broker_id: int, lines: int = LOG_TAIL_LINES) -> str:
        tail = self.log_text(broker_id).splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path(broker_id)}:\n" + "\n".join(tail)

    def _close_log(self, broker_id: int) -> None:
        log = self._log_files.pop(broker_id, None)
        if log is not None:
            log.close()


def _text(output: str | bytes | None) -> str:
    if output is None:
        return ""
    return output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
