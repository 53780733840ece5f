"""`python3 -m zkraft ...` on bad input: one `zkraft: error:` line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 60
PEERS3 = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"


def zkraft(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("ZKRAFT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def assert_one_error_line(result: subprocess.CompletedProcess[str], exit_code: int) -> str:
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("zkraft: error: "), lines[0]
    assert result.returncode == exit_code, (result.returncode, result.stderr)
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "missing command"),
        (("bogus",), "invalid choice: 'bogus'"),
        (("quorum",), "missing command after 'zkraft quorum'"),
        (("quorum", "start", "--id", "x"), "argument --id: invalid int value: 'x'"),
        (("quorum", "start", "--no-such-flag"), "unrecognized arguments: --no-such-flag"),
        (("quorum", "start"), "id: missing"),
        (("quorum", "start", "--id", "1"), "data dir: missing"),
        (("quorum", "start", "--id", "1", "--data-dir", "/tmp/zkraft-cli-test"), "peers: missing"),
        (("quorum", "start", "--id", "4", "--data-dir", "/d", "--peers", PEERS3), "id: node 4 is not in the peer list"),
        (
            ("quorum", "start", "--id", "1", "--data-dir", "/d", "--peers", "1=127.0.0.1:7001,2=127.0.0.1:7002"),
            "static membership of 1, 3, 5 or 7 nodes",
        ),
        (
            ("quorum", "start", "--id", "1", "--data-dir", "/d", "--peers", PEERS3, "--listen", "0.0.0.0:9999"),
            "listen: port 9999 differs from port 7001",
        ),
        (("quorum", "start", "--id", "1", "--data-dir", "/d", "--peers", "1=host"), "is not host:port"),
        (("quorum", "start", "--config", "/nonexistent/zkraft.properties"), "not found"),
        (
            ("quorum", "start", "--id", "1", "--data-dir", "/d", "--peers", PEERS3, "--cpu-placement", "on"),
            "quorum.cpu.placement: must be one of auto, off, got 'on'",
        ),
        (("quorum", "status"), "the following arguments are required: --server"),
        (("quorum", "status", "--server", "nohostport"), "--server: 'nohostport' is not host:port"),
        (("quorum", "status", "--server", "127.0.0.1:1", "--timeout", "0"), "must be > 0 seconds"),
        (("up",), "the following arguments are required: --data-dir"),
        (
            ("up", "--data-dir", "/tmp/zkraft-cli-test-up", "--override", "broker.id=5"),
            "set by zkraft up for each broker",
        ),
        (("up", "--data-dir", "/tmp/zkraft-cli-test-up", "--override", "nokey"), "is not key=value"),
        (("up", "--data-dir", "/tmp/zkraft-cli-test-up", "--override", "raft.tik.ms=5"), "unknown property"),
        (("up", "--data-dir", "/tmp/zkraft-cli-test-up", "--override", "listen=1.2.3.4:5"), "set by zkraft up"),
        (("up", "--data-dir", "/tmp/zkraft-cli-test-up", "--override", "raft.tick.ms=x"), "expected an integer"),
        (("up", "--data-dir", "/tmp/zkraft-cli-test-up", "--base-port", "65535"), "out of range"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: tuple[str, ...], expected: str) -> None:
    line = assert_one_error_line(zkraft(*args), exit_code=2)
    assert expected in line


def test_unknown_property_in_config_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "q.properties"
    config.write_text(f"id=1\ndataDir={tmp_path}\npeers={PEERS3}\nraft.electon.timeout.ticks=3\n", encoding="utf-8")
    line = assert_one_error_line(zkraft("quorum", "start", "--config", str(config)), exit_code=2)
    assert f"{config}:4: unknown property 'raft.electon.timeout.ticks'" in line


def test_status_of_unreachable_server_exits_1_with_one_line() -> None:
    line = assert_one_error_line(zkraft("quorum", "status", "--server", "127.0.0.1:1"), exit_code=1)
    assert "127.0.0.1:1" in line
    assert "no quorum server answered" in line


def test_status_of_several_unreachable_servers_names_each() -> None:
    result = zkraft("quorum", "status", "--server", "127.0.0.1:1,127.0.0.1:2", "--json", "--timeout", "1")
    line = assert_one_error_line(result, exit_code=1)
    assert "127.0.0.1:1" in line
    assert "127.0.0.1:2" in line


def test_up_refuses_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x", encoding="utf-8")
    line = assert_one_error_line(zkraft("up", "--data-dir", str(not_a_dir)), exit_code=2)
    assert "is not a directory" in line


def test_up_refuses_a_corrupt_cluster_file(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text("{not json", encoding="utf-8")
    line = assert_one_error_line(zkraft("up", "--data-dir", str(tmp_path)), exit_code=1)
    assert "not a zkraft cluster file" in line


def test_up_refuses_a_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        if port > 65533:
            pytest.skip("ephemeral port too high to be a base port")
        line = assert_one_error_line(zkraft("up", "--data-dir", str(tmp_path), "--base-port", str(port)), exit_code=1)
    assert f"port {port} for quorum node 1 is already in use" in line


def test_works_from_another_directory(tmp_path: Path) -> None:
    line = assert_one_error_line(zkraft("quorum", "start", cwd=tmp_path), exit_code=2)
    assert "id: missing" in line


def test_help_exits_0() -> None:
    result = zkraft("--help")
    assert result.returncode == 0
    assert "quorum" in result.stdout
    assert result.stderr == ""
