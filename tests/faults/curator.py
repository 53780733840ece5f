"""The Curator lock workload: Apache Curator's InterProcessMutex, a Java worker in each client host.

tests/curator/CuratorLockWorker.java is compiled at test time with javac against the jars of
tests/curator/pom.xml (Curator 5.9.0 and the ZooKeeper 3.9 client it brings, resolved once from Maven
Central by tests/maven_jars.py into the git-ignored .cache/maven-jars). The classes are cached next to
them under a hash of the source and the jar folder's name, so a run compiles only after the source changed.
The worker writes the Python lock worker's history lines (tests/faults/locks.py), and the same checker
(tests/faults/locks_check.py) checks them: never two holders acting at once, in zxid order.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests import maven_jars
from tests.faults.workload import OP_TIMEOUT_S, SESSION_S
from tests.java_clients import CLIENT_JVM_OPTIONS
from tests.real_zookeeper import find_java, find_javac

CURATOR_DIR = maven_jars.REPO_ROOT / "tests" / "curator"
POM = CURATOR_DIR / "pom.xml"
SOURCE = CURATOR_DIR / "CuratorLockWorker.java"
MAIN_CLASS = "CuratorLockWorker"
CLASSES_ROOT = maven_jars.CACHE_ROOT.parent / "curator-classes"
COMPILE_TIMEOUT_S = 300.0
HASH_CHARS = 16


def unavailable_reason() -> str | None:
    """Why the Curator worker cannot run here (no mvn, java or javac), or None."""
    reason = maven_jars.unavailable_reason()
    if reason is not None:
        return reason
    if find_javac() is None:
        return "no javac: neither $JAVA_HOME/bin/javac nor javac on PATH (the Curator worker is compiled)"
    return None


def compiled(jars: Path) -> Path:
    """The folder of CuratorLockWorker's classes, compiled against `jars` once per source version."""
    digest = hashlib.sha256(SOURCE.read_bytes() + jars.name.encode()).hexdigest()[:HASH_CHARS]
    target = CLASSES_ROOT / digest
    CLASSES_ROOT.mkdir(parents=True, exist_ok=True)
    with (CLASSES_ROOT / f"{digest}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel runs compile once
        if target.is_dir():
            return target
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        argv = [find_javac() or "javac", "-nowarn", "-encoding", "UTF-8", "-d", str(partial),
                "-cp", str(jars / "*"), str(SOURCE)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac {SOURCE.name} failed: {done.stderr.strip()[-1000:]}")
        partial.rename(target)
    return target


_classpath: list[str] = []  # computed once per process: resolving and compiling take seconds


def classpath() -> str:
    if not _classpath:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"the curator workload cannot run here: {reason}")
        jars = maven_jars.resolve(POM)
        _classpath.append(os.pathsep.join([str(compiled(jars)), str(jars / "*")]))
    return _classpath[0]


def worker_argv(worker: int, seed: int, hosts: list[str], out: Path) -> list[str]:
    """The JVM of worker `worker` (the Python workers' arguments: tests/faults/workload.py)."""
    return [
        find_java() or "java", *CLIENT_JVM_OPTIONS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", classpath(), MAIN_CLASS,
        "--worker", str(worker), "--seed", str(seed), "--hosts", ",".join(hosts), "--out", str(out),
        "--session-s", str(SESSION_S), "--op-timeout-s", str(OP_TIMEOUT_S),
    ]  # fmt: skip
