"""runtime.event_loop: our loops run on uvloop unless ZKRAFT_EVENT_LOOP says asyncio; a bad value is one line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
import uvloop

from runtime import event_loop
from tests.quorum_harness import REPO_ROOT


async def _running_loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_the_default_loop_is_uvloops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.EVENT_LOOP_ENV, raising=False)
    assert event_loop.run(_running_loop_type()) is uvloop.Loop


def test_asyncio_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_ENV, "asyncio")
    loop_type = event_loop.run(_running_loop_type())
    assert not issubclass(loop_type, uvloop.Loop)
    assert issubclass(loop_type, asyncio.BaseEventLoop)


def test_an_unknown_choice_names_the_variable_and_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_ENV, "trio")
    with pytest.raises(ValueError, match="ZKRAFT_EVENT_LOOP must be one of uvloop, asyncio, not 'trio'"):
        event_loop.run(_running_loop_type())


def test_the_blocking_zk_client_runs_its_loop_on_uvloop() -> None:
    probe = (
        "import asyncio\n"
        "from client.zk.client import _SharedLoop\n"
        "loop, _ = _SharedLoop.get()\n"
        "print(type(loop).__module__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != event_loop.EVENT_LOOP_ENV}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "uvloop"


def test_the_cli_refuses_an_unknown_choice_in_one_line_before_starting_anything(tmp_path) -> None:
    env = os.environ | {event_loop.EVENT_LOOP_ENV: "trio"}
    args = ["quorum", "start", "--id", "1", "--data-dir", str(tmp_path / "n1"), "--listen", "127.0.0.1:1",
            "--peers", "1=127.0.0.1:1"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "zkraft", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "zkraft: error: ZKRAFT_EVENT_LOOP must be one of uvloop, asyncio, not 'trio'"
    ]
    assert not (tmp_path / "n1").exists()
