"""Jars from Maven Central for tests that run real Java programs (Apache Kafka 3.9's brokers and tools).

A test names a pom.xml kept in the repository; `resolve` copies that pom's dependencies once into a
git-ignored cache inside the checkout and returns the folder, so only the first test run on a machine
downloads anything:

    reason = unavailable_reason()       # None, or why not (no mvn, no java): the test skips with it
    jars = resolve(KAFKA39_POM)         # <repo>/.cache/maven-jars/kafka39-<hash of the pom>/*.jar

The folder's name carries a hash of the pom, so editing the pom resolves again into a new folder. An
exclusive file lock serialises resolutions (pytest-xdist workers or parallel runs must not download
into one folder together), and the folder appears under its final name only once complete (a killed
run leaves a temporary folder that the next run removes, never a half-filled cache).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.real_zookeeper import find_java

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = REPO_ROOT / ".cache" / "maven-jars"
KAFKA39_POM = REPO_ROOT / "tests" / "kafka39" / "pom.xml"
# The first resolution downloads about 47 MB; later ones only copy from ~/.m2.
RESOLVE_TIMEOUT_S = 900.0
POM_HASH_CHARS = 16
ERROR_TAIL_LINES = 15


class MavenResolveError(RuntimeError):
    """mvn could not resolve a pom's dependencies; the message carries the end of its output."""


def find_mvn() -> str | None:
    return shutil.which("mvn")


def unavailable_reason() -> str | None:
    """Why jars cannot be resolved and run here (no mvn, no java), or None when they can."""
    if find_mvn() is None:
        return "no mvn on PATH (Apache Maven resolves the Kafka 3.9 jars from Maven Central)"
    if find_java() is None:
        return "no java: neither $JAVA_HOME/bin/java nor java on PATH (Kafka 3.9 needs Java 8+)"
    return None


def jars_dir_for(pom: Path) -> Path:
    """The cache folder of `pom`'s jars: named after the pom's folder and a hash of its bytes."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:POM_HASH_CHARS]
    return CACHE_ROOT / f"{pom.parent.name}-{digest}"


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # blocks until the process holding it is done or dead
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def resolve(pom: Path = KAFKA39_POM, timeout_s: float = RESOLVE_TIMEOUT_S) -> Path:
    """The folder holding every jar `pom` depends on (transitively), resolving it first if needed."""
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if not pom.is_file():
        raise MavenResolveError(f"no pom at {pom}")
    target = jars_dir_for(pom)
    with _exclusive_lock(target.with_name(target.name + ".lock")):
        if target.is_dir():
            return target
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)  # left by a run killed mid-resolution
        _copy_dependencies(pom, partial, timeout_s)
        if not any(partial.glob("*.jar")):
            raise MavenResolveError(f"mvn resolved no jars from {pom}")
        partial.rename(target)
    return target


def _copy_dependencies(pom: Path, output_dir: Path, timeout_s: float) -> None:
    mvn = find_mvn()
    if mvn is None:
        raise MavenResolveError(unavailable_reason() or "no mvn")
    command = [
        mvn, "-q", "-B", "-f", str(pom),
        "dependency:copy-dependencies", f"-DoutputDirectory={output_dir}",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise MavenResolveError(f"mvn did not resolve {pom} within {timeout_s:g} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-ERROR_TAIL_LINES:])
        raise MavenResolveError(f"mvn exited {done.returncode} resolving {pom}:\n{tail}")
