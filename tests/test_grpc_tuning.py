"""runtime.grpc_tuning: zkraft processes and SDK users get gRPC's older poller, unless the user chose otherwise."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

from runtime.grpc_tuning import CHECKED_GRPC_RELEASES, LEGACY_POLLER_EXPERIMENTS, installed_grpcio_release
from tests.quorum_harness import REPO_ROOT

REPORT = "import json, os, sys\nprint(json.dumps([os.environ.get('GRPC_EXPERIMENTS'), 'grpc' in sys.modules]))\n"


def _run(code: str, extra_env: dict[str, str]) -> list[object]:
    """[GRPC_EXPERIMENTS, whether grpc is imported] in a fresh process after `code`."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"} | extra_env
    out = subprocess.run(
        [sys.executable, "-c", code + "\n" + REPORT],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return json.loads(out)


def _grpcio_release() -> tuple[int, int]:
    major, minor = importlib.metadata.version("grpcio").split(".")[:2]
    return int(major), int(minor)


def _expected_setting() -> str | None:
    return LEGACY_POLLER_EXPERIMENTS if _grpcio_release() in CHECKED_GRPC_RELEASES else None


def test_the_release_is_read_without_importing_grpc() -> None:
    assert installed_grpcio_release() == _grpcio_release()
    assert _run("from runtime.grpc_tuning import installed_grpcio_release; installed_grpcio_release()", {})[1] is False


def test_importing_the_sdk_asks_for_the_legacy_poller_on_a_checked_release() -> None:
    expected = _expected_setting()
    # and `import client` itself does not import grpc, or the setting would come too late
    assert _run("import client", {}) == [expected, False]
    assert _run("from client import ZkClient", {}) == [expected, True]


def test_the_users_own_grpc_experiments_win() -> None:
    assert _run("import client", {"GRPC_EXPERIMENTS": ""}) == ["", False]
    assert _run("import client", {"GRPC_EXPERIMENTS": "-event_engine_dns"}) == ["-event_engine_dns", False]


def test_nothing_changes_once_grpc_is_imported() -> None:
    # gRPC reads the variable when it loads: setting it afterwards would only mislead
    assert _run("import grpc\nimport client", {}) == [None, True]


def test_the_spark_connector_sets_it_before_its_modules_import_grpc() -> None:
    # batch_reader imports the broker lookups (grpc) first thing; the package import comes before them.
    expected = _expected_setting()
    assert _run("import spark_connector.batch_reader", {}) == [expected, True]


def test_the_zkraft_command_sets_it_before_parsing() -> None:
    # The servers run under `zkraft`, which asks for the poller itself (runtime.grpc_tuning) before anything it
    # parses or runs can import grpc.
    expected = _expected_setting()
    code = "import contextlib, io\nfrom zkraft.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
    code += "    main(['--help'])"
    assert _run(code, {}) == [expected, False]
