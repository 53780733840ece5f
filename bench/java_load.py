"""ZooKeeper's own Java client as a zk_bench worker: `bench/java/ZkLoad.java`, compiled on first use.

The program is compiled with javac against the ZooKeeper jars inside the installed pyspark package (the
jars `tests/real_zookeeper.py` starts real ZooKeeper from) into a cache directory keyed by the source and
the jars' names, so a second run starts at once and a new pyspark or an edited source compiles afresh:

    reason = unavailable_reason()   # None, or why not (no javac, no pyspark, no jar)
    argv = worker_command()         # ["java", ..., "ZkLoad"]: a worker speaking zk_bench's JSON lines
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.real_zookeeper import client_log4j2_properties, find_java, find_javac, pyspark_jars_dir, zookeeper_classpath
from tests.real_zookeeper import unavailable_reason as real_zookeeper_unavailable

SOURCE = Path(__file__).resolve().parent / "java" / "ZkLoad.java"
MAIN_CLASS = "ZkLoad"
# Beyond the server's jars, ZooKeeper's client loads netty's TLS classes when it reads its configuration
# (X509Util), even on a plain connection: these netty jars from the same folder go on its classpath.
CLIENT_JARS = (r"netty-(handler|common|buffer|transport|codec|codec-base|resolver|transport-native-unix-common)"
               r"-\d[\w.-]*\.jar")  # fmt: skip
COMPILE_TIMEOUT_S = 300.0
# A client process: the full JIT (it is measured), a heap far above what 200 requests in flight need.
# zookeeper.request.timeout bounds the client's synchronous calls (setup, and close() waiting for its
# closeSession reply); asynchronous requests, the measured ones, are not subject to it.
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
               "-Dzookeeper.request.timeout=10000")  # fmt: skip
# ZooKeeper's client logs through slf4j -> log4j2: to stderr (the worker's log file), never to stdout, which
# carries the JSON lines. INFO, because ClientCnxn logs a lost or refused connection at INFO (a
# SocketException), and those are what explains a window's CONNECTIONLOSS errors.
LOG4J2_PROPERTIES = client_log4j2_properties("info")


def unavailable_reason() -> str | None:
    """Why the Java load cannot run here, or None when it can."""
    reason = real_zookeeper_unavailable()
    if reason is not None:
        return reason
    if find_javac() is None:
        return "no javac: neither $JAVA_HOME/bin/javac nor javac on PATH (the Java load is compiled at run time)"
    return None


def cache_dir() -> Path:
    """Where compiled classes are kept: $XDG_CACHE_HOME (default ~/.cache) / zkraft-bench."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zkraft-bench"


def _classpath() -> list[Path]:
    jars_dir = pyspark_jars_dir()
    if jars_dir is None:
        raise RuntimeError("pyspark is not installed (it ships ZooKeeper's jars): python3 -m pip install -e '.[test]'")
    netty = re.compile(CLIENT_JARS)
    return [*zookeeper_classpath(jars_dir), *sorted(p for p in jars_dir.iterdir() if netty.fullmatch(p.name))]


def compiled_dir() -> Path:
    """The directory holding ZkLoad's classes and its log4j2 configuration, compiling them if needed."""
    jars = _classpath()
    source = SOURCE.read_bytes()
    names = "\0".join([LOG4J2_PROPERTIES, *(jar.name for jar in jars)])
    key = hashlib.sha256(source + names.encode()).hexdigest()[:16]
    target = cache_dir() / f"zkload-{key}"
    if (target / f"{MAIN_CLASS}.class").is_file():
        return target
    javac = find_javac()
    if javac is None:
        raise RuntimeError("no javac: neither $JAVA_HOME/bin/javac nor javac on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compiled into a fresh directory, then renamed: two benchmarks starting at once never see half a build.
    staging = Path(tempfile.mkdtemp(prefix="zkload-", dir=target.parent))
    try:
        argv = [javac, "-nowarn", "-d", str(staging), "-cp", os.pathsep.join(map(str, jars)), str(SOURCE)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac {SOURCE.name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        (staging / "log4j2.properties").write_text(LOG4J2_PROPERTIES, encoding="utf-8")
        try:
            staging.rename(target)
        except OSError:  # another benchmark won the race: its build is the same
            if not (target / f"{MAIN_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def worker_command() -> list[str]:
    """The argv of one Java worker process (compiles ZkLoad on first use)."""
    classes = compiled_dir()
    classpath = os.pathsep.join([str(classes), *map(str, _classpath())])
    java = find_java() or "java"
    return [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}", "-cp", classpath,
            MAIN_CLASS]  # fmt: skip
