"""zkraft.grpc_tuning: quorum node processes ask gRPC for its older poller, unless the user chose otherwise."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

from tests.quorum_harness import REPO_ROOT
from zkraft.grpc_tuning import CHECKED_GRPC_RELEASES, LEGACY_POLLER_EXPERIMENTS

PROBE = (
    "import json, os\n"
    "from zkraft.grpc_tuning import prefer_legacy_poller\n"
    "done = prefer_legacy_poller()\n"
    "print(json.dumps([done, os.environ.get('GRPC_EXPERIMENTS')]))\n"
)


def _run_probe(extra_env: dict[str, str]) -> list[object]:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"} | extra_env
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return json.loads(out)


def test_a_fresh_process_on_a_checked_grpc_release_gets_the_legacy_poller() -> None:
    release = tuple(int(p) for p in importlib.metadata.version("grpcio").split(".")[:2])
    done, value = _run_probe({})
    if release in CHECKED_GRPC_RELEASES:
        assert (done, value) == (True, LEGACY_POLLER_EXPERIMENTS)
    else:
        assert (done, value) == (False, None)


def test_the_users_own_grpc_experiments_win() -> None:
    assert _run_probe({"GRPC_EXPERIMENTS": ""}) == [False, ""]
    assert _run_probe({"GRPC_EXPERIMENTS": "-event_engine_dns"}) == [False, "-event_engine_dns"]


def test_too_late_once_grpc_is_imported() -> None:
    import grpc  # noqa: F401  (the test process has it already; the call must then change nothing)

    from zkraft.grpc_tuning import prefer_legacy_poller

    before = os.environ.get("GRPC_EXPERIMENTS")
    assert prefer_legacy_poller() is False
    assert os.environ.get("GRPC_EXPERIMENTS") == before
