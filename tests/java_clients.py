"""ZooKeeper's own Java clients, from the jars inside the installed pyspark package: zkCli and test programs.

PySpark ships ZooKeeper's client (`zookeeper-3.x.jar`), Apache Curator (framework, client, recipes) and
what they load (guava, slf4j, commons-cli, netty's handler), so with a JDK on the machine the tests can
drive zkraft's client port with the clients users actually run:

    reason = unavailable_reason()                 # None, or why not (no java/javac, no pyspark, a jar)
    java = JavaClients(tmp_dir)
    java.zkcli("127.0.0.1:2181", "create", "/a", "x")   # `zkCli.sh -server ... create /a x`, one JVM
    java.zkcli_script("127.0.0.1:2181", ["addauth digest u:p", "get /a"])  # one session, on stdin
    java.compile_programs()                       # javac tests/java/*.java into a jar, once
    java.run_program("ZkClientScenarios", "crud", connect).result()       # its final JSON line

The classpath reuses tests/real_zookeeper.py's jar lookup and adds Curator's jars. Logging goes to stderr
(log4j2 at WARN), so a program's stdout holds only what it prints: zkCli's answers, or the JSON lines
the test programs write. JVMs start with the client JIT tier only, a small serial-GC heap and (JDK 13+)
a class archive made by the first JVM of each kind: CI has two cores and runs dozens of them.
`normalise` and `split_watch_events` make zkCli's output comparable between two servers;
`ReferenceZooKeeper` and `ClientPortCluster` are the real ZooKeeper and the shape both servers take.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.real_zookeeper import (
    RealZooKeeper,
    RealZooKeeperUnavailable,
    client_log4j2_properties,
    find_java,
    find_javac,
    pyspark_jars_dir,
    zookeeper_classpath,
)
from tests.real_zookeeper import _match as match_jar
from tests.real_zookeeper import unavailable_reason as server_unavailable_reason

JAVA_SOURCES_DIR = Path(__file__).resolve().parent / "java"
# Curator 5 on top of the ZooKeeper client jars: it uses guava (with failureaccess) at run time.
CURATOR_JARS: Mapping[str, str] = {
    "curator-client": r"curator-client-\d[\w.-]*\.jar",
    "curator-framework": r"curator-framework-\d[\w.-]*\.jar",
    "curator-recipes": r"curator-recipes-\d[\w.-]*\.jar",
    "guava": r"guava-\d[\w.-]*\.jar",
    "failureaccess": r"failureaccess-\d[\w.-]*\.jar",
    # The client's configuration (ZKClientConfig -> ClientX509Util) loads netty's SslContext even
    # without TLS, so the plain NIO client needs netty's handler and what it links against.
    "netty-handler": r"netty-handler-\d[\w.-]*\.jar",
    "netty-common": r"netty-common-\d[\w.-]*\.jar",
    "netty-buffer": r"netty-buffer-\d[\w.-]*\.jar",
    "netty-transport": r"netty-transport-\d[\w.-]*\.jar",
    "netty-codec": r"netty-codec-\d[\w.-]*\.jar",
    "netty-codec-base": r"netty-codec-base-\d[\w.-]*\.jar",
    "netty-resolver": r"netty-resolver-\d[\w.-]*\.jar",
}
ZKCLI_MAIN = "org.apache.zookeeper.ZooKeeperMain"
CLIENT_JVM_OPTIONS = (
    "-Xms16m",
    "-Xmx128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Djava.net.preferIPv4Stack=true",
)
# zkCli's own default session timeout is 30 s; a command that cannot connect fails within this.
ZKCLI_TIMEOUT_S = 60.0
PROGRAM_TIMEOUT_S = 180.0
JAVAC_TIMEOUT_S = 180.0
LINE_POLL_S = 0.5
# Dynamic AppCDS (JDK 13+): the first JVM of each kind archives the classes it loaded, later ones map
# that archive instead of parsing and verifying the jars again (about a third less CPU per JVM).
DYNAMIC_CDS_MIN_JAVA = 13
LOG4J2_CLIENT_PROPERTIES = client_log4j2_properties("warn")


def java_feature_version(java: str) -> int:
    """The JDK's feature release (8 for "1.8.0_x", 17 for "17.0.x"), 0 when `java -version` says none."""
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return 0
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if match is None:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def client_classpath() -> list[Path]:
    """ZooKeeper's jars plus Curator's; RealZooKeeperUnavailable names any jar missing."""
    jars_dir = pyspark_jars_dir()
    if jars_dir is None:
        raise RealZooKeeperUnavailable("pyspark is not installed (it ships ZooKeeper's and Curator's jars)")
    jars = zookeeper_classpath(jars_dir)
    for name, pattern in CURATOR_JARS.items():
        jar = match_jar(jars_dir, pattern)
        if jar is None and name == "netty-codec-base":
            continue  # netty before 4.2 has no separate codec-base jar
        if jar is None:
            raise RealZooKeeperUnavailable(f"no {name} jar in {jars_dir}")
        jars.append(jar)
    return jars


def unavailable_reason() -> str | None:
    """Why the Java clients cannot run here (no java, javac, pyspark or a jar), or None when they can."""
    reason = server_unavailable_reason()
    if reason is not None:
        return reason
    if find_javac() is None:
        return "no javac: neither $JAVA_HOME/bin/javac nor javac on PATH (the test programs need a JDK)"
    try:
        client_classpath()
    except RealZooKeeperUnavailable as exc:
        return str(exc)
    return None


class JavaClients:
    """The JVM command lines for zkCli and for the compiled test programs, sharing one classpath."""

    def __init__(self, work_dir: Path) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise RealZooKeeperUnavailable(reason)
        self.java = find_java() or "java"
        self.javac = find_javac() or "javac"
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.classes_dir = self.work_dir / "classes"
        # The compiled programs as a jar: a class archive (CDS) cannot cover a non-empty directory.
        self.programs_jar = self.work_dir / "programs.jar"
        self.jars = client_classpath()
        self.log4j_config = self.work_dir / "log4j2-runtime.properties"
        self.log4j_config.write_text(LOG4J2_CLIENT_PROPERTIES, encoding="utf-8")
        self.dynamic_cds = java_feature_version(self.java) >= DYNAMIC_CDS_MIN_JAVA

    def classpath(self, with_programs: bool = False) -> str:
        entries = [str(jar) for jar in self.jars]
        if with_programs:
            entries.insert(0, str(self.programs_jar))
        return os.pathsep.join(entries)

    def class_archive(self, with_programs: bool) -> Path:
        return self.work_dir / ("programs.jsa" if with_programs else "zkcli.jsa")

    def class_archive_options(self, with_programs: bool, make: bool = False) -> list[str]:
        """Map this classpath's class archive if there is one (or `make` it at this JVM's exit); JVM
        logging off, so a CDS warning never lands in the output a test compares."""
        if not self.dynamic_cds:
            return []
        archive = self.class_archive(with_programs)
        if make:
            return ["-Xlog:disable", f"-XX:ArchiveClassesAtExit={archive}"]
        return ["-Xlog:disable", f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []

    def _make_zkcli_archive(self, connect: str) -> None:
        """One throwaway `ls /` that archives zkCli's classes: the archiving JVM exits slowly enough for
        zkCli to print a Disconnected event, so its output is not one a test compares."""
        if not self.dynamic_cds or self.class_archive(with_programs=False).exists():
            return
        argv = self.jvm(ZKCLI_MAIN, ["-server", connect, "ls", "/"], make_archive=True)
        subprocess.run(argv, capture_output=True, timeout=ZKCLI_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def jvm(
        self, main_class: str, args: Sequence[str], with_programs: bool = False, make_archive: bool = False
    ) -> list[str]:
        return [
            self.java,
            *CLIENT_JVM_OPTIONS,
            *self.class_archive_options(with_programs, make_archive),
            f"-Dlog4j2.configurationFile={self.log4j_config}",
            "-cp",
            self.classpath(with_programs),
            main_class,
            *args,
        ]

    # ---- zkCli
    def zkcli(
        self, connect: str, *command: str, timeout_s: float = ZKCLI_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """`zkCli.sh -server <connect> <command...>`: one command, one JVM, as users script it."""
        self._make_zkcli_archive(connect)
        argv = self.jvm(ZKCLI_MAIN, ["-server", connect, *command])
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)

    def zkcli_script(
        self, connect: str, lines: Sequence[str], timeout_s: float = ZKCLI_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """zkCli with commands on stdin, one session for all of them (as `zkCli.sh < script`): for what
        lives in a session, like `addauth` or a watch. stderr is merged into stdout, in order."""
        self._make_zkcli_archive(connect)
        argv = self.jvm(ZKCLI_MAIN, ["-server", connect])
        script = "".join(f"{line}\n" for line in lines)
        return subprocess.run(
            argv, input=script, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s
        )

    # ---- test programs
    def compile_programs(self, sources_dir: Path = JAVA_SOURCES_DIR) -> Path:
        """javac every `*.java` in `sources_dir` into programs_jar (once; a later call reuses it)."""
        sources = sorted(sources_dir.glob("*.java"))
        if not sources:
            raise FileNotFoundError(f"no .java files in {sources_dir}")
        if self.programs_jar.exists():
            return self.programs_jar
        self.classes_dir.mkdir(parents=True, exist_ok=True)
        argv = [self.javac, "-nowarn", "-encoding", "UTF-8", "-d", str(self.classes_dir)]
        argv += ["-cp", self.classpath(), *map(str, sources)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S)
        if done.returncode != 0:
            raise AssertionError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        partial = self.programs_jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as jar:  # a jar is a zip; no manifest is needed on -cp
            for class_file in sorted(self.classes_dir.rglob("*.class")):
                jar.write(class_file, class_file.relative_to(self.classes_dir).as_posix())
        partial.replace(self.programs_jar)
        return self.programs_jar

    def program(self, main_class: str, *args: str) -> list[str]:
        """A program's JVM; the first one archives the classes it loads (its JSON lines are unaffected)."""
        make_archive = self.dynamic_cds and not self.class_archive(with_programs=True).exists()
        return self.jvm(main_class, args, with_programs=True, make_archive=make_archive)

    def run_program(self, main_class: str, *args: str, timeout_s: float = PROGRAM_TIMEOUT_S) -> ProgramResult:
        """Run a compiled test program to its end; its stdout JSON lines parsed."""
        argv = self.program(main_class, *args)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        return ProgramResult(done.returncode, parse_json_lines(done.stdout), done.stdout, done.stderr)

    @contextlib.contextmanager
    def start_program(self, main_class: str, *args: str) -> Iterator[RunningProgram]:
        """A test program running in the background (for steps the test takes between its lines)."""
        proc = subprocess.Popen(
            self.program(main_class, *args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=(self.work_dir / f"{main_class}-{time.monotonic_ns()}.stderr").open("wb"),
        )
        try:
            yield RunningProgram(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


class ProgramResult:
    """A finished test program: exit code, its JSON lines, raw stdout and stderr."""

    def __init__(self, returncode: int, lines: list[dict[str, Any]], stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.lines = lines
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-30:])
        return f"ProgramResult(rc={self.returncode})\n--- stdout:\n{self.stdout}\n--- stderr tail:\n{tail}"

    def result(self) -> dict[str, Any]:
        """The program's last line, which every scenario ends with: {"result": ..., ...}."""
        finals = [line for line in self.lines if "result" in line]
        if self.returncode != 0 or not finals:
            raise AssertionError(f"scenario did not finish cleanly: {self!r}")
        return finals[-1]


class RunningProgram:
    """A background test program whose stdout JSON lines the test reads one at a time, with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._buffer = b""

    def read_until(self, key: str, timeout_s: float) -> dict[str, Any]:
        """Wait for the next JSON line that has `key`; AssertionError on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        stdout = self.proc.stdout
        assert stdout is not None
        while time.monotonic() < deadline:
            for line in self._take_lines():
                if key in line:
                    return line
            ready, _, _ = select.select([stdout], [], [], min(LINE_POLL_S, max(deadline - time.monotonic(), 0)))
            if ready:
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    break
                self._buffer += chunk
        for line in self._take_lines():
            if key in line:
                return line
        raise AssertionError(f"no line with {key!r} within {timeout_s:g} s (rc {self.proc.poll()}): {self.lines}")

    def _take_lines(self) -> list[dict[str, Any]]:
        *complete, self._buffer = self._buffer.split(b"\n")
        parsed = parse_json_lines(b"\n".join(complete).decode("utf-8", errors="replace"))
        self.lines.extend(parsed)
        return parsed

    def wait(self, timeout_s: float) -> int:
        return self.proc.wait(timeout=timeout_s)


def parse_json_lines(text: str) -> list[dict[str, Any]]:
    """The lines of `text` that are JSON objects (anything else a program prints is ignored)."""
    lines = []
    for raw in text.splitlines():
        raw = raw.strip()
        if raw.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                lines.append(json.loads(raw))
    return lines


# ---------------------------------------------------------------- normalising zkCli's output

# What differs between two servers by design: zxids (a zkraft zxid is a Raft log index), wall-clock
# times, session ids, ports. Each is replaced by a placeholder named after its field.
_STAT_ZXID_FIELDS = ("cZxid", "mZxid", "pZxid")
_STAT_TIME_FIELDS = ("ctime", "mtime")
_NORMALISERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"^({'|'.join(_STAT_ZXID_FIELDS)}) = 0x[0-9a-f]+$", re.MULTILINE), r"\1 = <zxid>"),
    (re.compile(rf"^({'|'.join(_STAT_TIME_FIELDS)}) = .+$", re.MULTILINE), r"\1 = <time>"),
    # An ephemeral's owner is a session id; 0x0 (persistent, container, TTL) stays.
    (re.compile(r"^ephemeralOwner = 0x(?!0$)[0-9a-f]+$", re.MULTILINE), "ephemeralOwner = <sid>"),
    (re.compile(r"(WatchedEvent state:\w+ type:\w+ path:\S+ zxid: )(?!-1\b)\d+"), r"\1<zxid>"),
    (re.compile(r"\b0x[0-9a-f]{9,16}\b"), "<sid>"),
    (re.compile(r"\b127\.0\.0\.1:\d+\b"), "127.0.0.1:<port>"),
    # /zookeeper/config of an ensemble names each server's quorum and election ports.
    (re.compile(r"^(server\.\d+=127\.0\.0\.1:<port>):\d+", re.MULTILINE), r"\1:<port>"),
    (re.compile(r"^version=[0-9a-f]+$", re.MULTILINE), "version=<zxid>"),
)
# The client's own log lines (log4j2 pattern) are not zkCli's answers.
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+ .*$\n?", re.MULTILINE)
# The default watcher prints each event as two lines of its own ("\nWATCHER::" and "\nWatchedEvent ...")
# from the event thread, which races the main thread's output even between those two lines; so the
# events are compared as their own ordered list, and the rest without the markers and blank lines.
# The connection event itself says nothing.
_WATCHER_MARKER = "WATCHER::"
_EVENT_PREFIX = "WatchedEvent "
_CONNECTED_EVENT = "WatchedEvent state:SyncConnected type:None path:null zxid: -1"


def normalise(text: str) -> str:
    """zkCli output with log lines dropped and zxids, times, session ids and ports as placeholders."""
    text = _LOG_LINE.sub("", text)
    for pattern, replacement in _NORMALISERS:
        text = pattern.sub(replacement, text)
    return text


def split_watch_events(text: str) -> tuple[str, list[str]]:
    """(the output without the default watcher's lines and blank lines, the events it printed, in order)."""
    output, events = [], []
    for line in text.splitlines():
        if line.startswith(_EVENT_PREFIX):
            if line != _CONNECTED_EVENT:
                events.append(line)
        elif line and line != _WATCHER_MARKER:
            output.append(line)
    return "".join(f"{line}\n" for line in output), events


# ---------------------------------------------------------------- the reference server, as the clients need it

# Seconds, not ZooKeeper's default minute, between the leader's container checks; TTL nodes enabled.
REFERENCE_CONTAINER_CHECK_INTERVAL_MS = 500
REFERENCE_SYSTEM_PROPERTIES: Mapping[str, str] = {
    "znode.container.checkIntervalMs": str(REFERENCE_CONTAINER_CHECK_INTERVAL_MS),
    "zookeeper.extendedTypesEnabled": "true",
}


class ReferenceZooKeeper(RealZooKeeper):
    """A real ZooKeeper whose JVMs also get REFERENCE_SYSTEM_PROPERTIES (ZooKeeper reads these only as
    system properties, not from zoo.cfg)."""

    def command(self, node_id: int) -> list[str]:
        argv = super().command(node_id)
        flags = [f"-D{key}={value}" for key, value in REFERENCE_SYSTEM_PROPERTIES.items()]
        return [argv[0], *flags, *argv[1:]]


# ---------------------------------------------------------------- the servers the clients talk to

# zkraft's settings for the client tests beyond the harness's fast elections: the container check
# interval and extended types (TTL nodes) as the reference has them (tests/zkraft_clients.py passes
# only those a node knows).
ZKRAFT_CLIENT_PROPERTIES: Mapping[str, str] = {
    "znode.container.checkIntervalMs": str(REFERENCE_CONTAINER_CHECK_INTERVAL_MS),
    "zookeeper.extendedTypesEnabled": "true",
}
START_TIMEOUT_S = 90.0  # cold JVMs or Python processes electing a leader on two busy cores


class ClientPortCluster:
    """What the client tests need of a server ensemble: client addresses, which node leads, kill and restart."""

    label = ""

    def client_addresses(self) -> list[str]:
        raise NotImplementedError

    def leader_index(self) -> int:
        """The position in client_addresses() of the node that leads now."""
        raise NotImplementedError

    def kill(self, index: int) -> None:
        raise NotImplementedError

    def restart(self, index: int) -> None:
        """Start a killed node again and wait until it serves clients."""
        raise NotImplementedError

    def connect_string(self) -> str:
        return ",".join(self.client_addresses())


class ReferenceCluster(ClientPortCluster):
    """A running ReferenceZooKeeper (standalone or ensemble)."""

    def __init__(self, server: ReferenceZooKeeper) -> None:
        self.server = server
        self.ids = sorted(server.addresses)
        kind = "standalone" if server.n == 1 else f"{server.n} nodes"
        self.label = f"ZooKeeper {server.version} {kind}"

    def client_addresses(self) -> list[str]:
        return [self.server.addresses[node_id] for node_id in self.ids]

    def leader_index(self) -> int:
        modes = [self.server.mode(node_id) for node_id in self.ids]
        return modes.index("leader") if "leader" in modes else 0

    def kill(self, index: int) -> None:
        self.server.kill(self.ids[index])

    def restart(self, index: int) -> None:
        self.server.start(self.ids[index])
        self.server.wait_serving(START_TIMEOUT_S)


@contextlib.contextmanager
def reference_cluster(root: Path, n: int) -> Iterator[ReferenceCluster]:
    with ReferenceZooKeeper(root, n=n) as server:
        server.start_all()
        server.wait_serving(START_TIMEOUT_S)
        yield ReferenceCluster(server)
