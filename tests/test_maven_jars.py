"""tests/maven_jars.py: a pom resolves once into its own cache folder, never half-filled, one process at a time.

A stand-in `mvn` on PATH (a shell script writing fake jars and counting its runs) keeps these tests off
the network; the real resolution is exercised by test_kafka39_on_zkraft.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import maven_jars

# Appends a line to $FAKE_MVN_RUNS per run, then writes one jar into -DoutputDirectory=..., or fails
# with FAKE_MVN_FAIL set, or writes nothing with FAKE_MVN_EMPTY set.
FAKE_MVN = """#!/bin/sh
echo run >> "$FAKE_MVN_RUNS"
if [ -n "$FAKE_MVN_FAIL" ]; then echo "[ERROR] Could not resolve dependencies"; exit 1; fi
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac
done
mkdir -p "$out"
if [ -z "$FAKE_MVN_EMPTY" ]; then echo jar > "$out/kafka_2.13-3.9.1.jar"; fi
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN, encoding="utf-8")
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    runs = tmp_path / "mvn-runs"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MVN_RUNS", str(runs))
    monkeypatch.setattr(maven_jars, "CACHE_ROOT", tmp_path / "cache")
    return runs


def make_pom(tmp_path: Path, text: str = "<project/>") -> Path:
    pom = tmp_path / "kafka39" / "pom.xml"
    pom.parent.mkdir(parents=True, exist_ok=True)
    pom.write_text(text, encoding="utf-8")
    return pom


def run_count(runs: Path) -> int:
    return len(runs.read_text(encoding="utf-8").splitlines()) if runs.exists() else 0


def test_a_pom_resolves_once_then_comes_from_the_cache(tmp_path: Path, fake_mvn: Path) -> None:
    pom = make_pom(tmp_path)
    first = maven_jars.resolve(pom)
    assert first.name.startswith("kafka39-")
    assert [jar.name for jar in first.glob("*.jar")] == ["kafka_2.13-3.9.1.jar"]
    assert maven_jars.resolve(pom) == first
    assert run_count(fake_mvn) == 1


def test_an_edited_pom_resolves_into_a_new_folder(tmp_path: Path, fake_mvn: Path) -> None:
    first = maven_jars.resolve(make_pom(tmp_path, "<project>a</project>"))
    second = maven_jars.resolve(make_pom(tmp_path, "<project>b</project>"))
    assert first != second
    assert run_count(fake_mvn) == 2


def test_a_failed_resolution_names_mvn_output_and_leaves_no_cache(
    tmp_path: Path, fake_mvn: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pom = make_pom(tmp_path)
    monkeypatch.setenv("FAKE_MVN_FAIL", "1")
    with pytest.raises(maven_jars.MavenResolveError, match="Could not resolve dependencies"):
        maven_jars.resolve(pom)
    assert not maven_jars.jars_dir_for(pom).exists()
    monkeypatch.delenv("FAKE_MVN_FAIL")
    assert any(maven_jars.resolve(pom).glob("*.jar"))


def test_a_resolution_with_no_jars_is_an_error(tmp_path: Path, fake_mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MVN_EMPTY", "1")
    with pytest.raises(maven_jars.MavenResolveError, match="no jars"):
        maven_jars.resolve(make_pom(tmp_path))


def test_a_missing_pom_is_named(tmp_path: Path) -> None:
    with pytest.raises(maven_jars.MavenResolveError, match="no pom at"):
        maven_jars.resolve(tmp_path / "absent" / "pom.xml")


def test_no_mvn_is_a_one_line_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = maven_jars.unavailable_reason()
    assert reason is not None and "no mvn" in reason and "\n" not in reason


def test_parallel_processes_resolve_a_pom_once(tmp_path: Path, fake_mvn: Path) -> None:
    """Four processes asking at once: the lock lets one run mvn, the others find its folder."""
    pom = make_pom(tmp_path)
    code = (
        "import sys; from pathlib import Path; from tests import maven_jars; "
        f"maven_jars.CACHE_ROOT = Path({str(maven_jars.CACHE_ROOT)!r}); "
        f"print(maven_jars.resolve(Path({str(pom)!r})))"
    )
    env = dict(os.environ, PYTHONPATH=str(maven_jars.REPO_ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)
    ]
    outputs = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert outputs == {str(maven_jars.jars_dir_for(pom))}
    assert run_count(fake_mvn) == 1
