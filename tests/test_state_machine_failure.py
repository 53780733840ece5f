"""A node whose state-machine database fails while it runs: it stops with one structured event, and its
next start rebuilds the database from its log and serves every acknowledged write.

A one-node quorum runs in this process (quorum.server.run_node) over a
register map whose write transactions start failing, as a damaged file makes
LMDB fail (MDB_CORRUPTED), after the first writes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import lmdb
import pytest
from structlog.testing import capture_logs

from quorum.register_client import QuorumClient, QuorumClientError
from quorum.server import run_node
from quorum.settings import NodeSettings
from quorum.state_check import DAMAGED_MARKER
from quorum.state_machine import RegisterMap
from tests.quorum_harness import free_ports

pytestmark = [pytest.mark.timeout(60)]

WRITES_BEFORE_FAILURE = 20
RUN_TIMEOUT_S = 20.0


class _FailingWrites:
    """An LMDB environment whose write transactions fail; reads and the rest go through."""

    def __init__(self, env: lmdb.Environment) -> None:
        self._env = env

    def begin(self, write: bool = False, **kwargs: Any) -> lmdb.Transaction:
        if write:
            raise lmdb.CorruptedError("mdb_txn_begin: MDB_CORRUPTED: Located page was wrong type")
        return self._env.begin(write=write, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class FailingMap(RegisterMap):
    """A register map whose database fails once `fail_after` entries were applied."""

    def __init__(self, path: Path, fail_after: int) -> None:
        super().__init__(path)
        self.fail_after = fail_after

    def apply(self, entries: Any) -> list[bytes]:
        if self.applied_index() + len(entries) > self.fail_after and not isinstance(self._env, _FailingWrites):
            self._env = _FailingWrites(self._env)  # type: ignore[assignment]
        return super().apply(entries)


def settings_for(root: Path) -> NodeSettings:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    return NodeSettings(
        node_id=1, data_dir=root, listen=address, peers={1: address}, state_machine="register", tick_ms=20
    )


async def write_until_refused(address: str) -> dict[bytes, bytes]:
    """Set keys one at a time until the node stops answering; returns the acknowledged ones."""
    acknowledged: dict[bytes, bytes] = {}
    async with QuorumClient([address], request_timeout_s=2.0) as client:
        for i in range(10 * WRITES_BEFORE_FAILURE):
            key, value = b"key-%03d" % i, b"value-%03d" % i
            try:
                await client.set(key, value)
            except QuorumClientError:
                return acknowledged
            acknowledged[key] = value
    raise AssertionError("the node kept acknowledging writes its database could not hold")


def test_an_lmdb_error_in_an_apply_stops_the_node_with_one_event_and_the_next_start_rebuilds(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "node")

    async def first_life() -> tuple[int, dict[bytes, bytes]]:
        state_machine = FailingMap(tmp_path / "node" / "state", WRITES_BEFORE_FAILURE)
        node = asyncio.create_task(run_node(settings, asyncio.Event(), state_machine=state_machine))
        acknowledged = await write_until_refused(settings.listen)
        return await asyncio.wait_for(node, RUN_TIMEOUT_S), acknowledged

    with capture_logs() as logs:
        code, acknowledged = asyncio.run(first_life())
    assert code == 1
    failures = [e for e in logs if e["log_level"] in ("error", "critical")]
    assert [(e["event"], e.get("phase")) for e in failures] == [("state_machine_damaged", "run")], failures
    assert "MDB_CORRUPTED" in failures[0]["error"]
    assert (tmp_path / "node" / "state" / DAMAGED_MARKER).exists()
    assert len(acknowledged) >= WRITES_BEFORE_FAILURE - 1

    async def second_life() -> dict[bytes, bytes | None]:
        stop = asyncio.Event()
        node = asyncio.create_task(run_node(settings, stop))
        async with QuorumClient([settings.listen], request_timeout_s=RUN_TIMEOUT_S) as client:
            await client.set(b"after", b"restart")
            found = {key: await client.read(key, linearizable=True) for key in acknowledged}
        stop.set()
        assert await asyncio.wait_for(node, RUN_TIMEOUT_S) == 0
        return found

    with capture_logs() as logs:
        found = asyncio.run(second_life())
    assert found == acknowledged
    assert [e["phase"] for e in logs if e["event"] == "state_machine_damaged"] == ["open"]
    [restored] = [e for e in logs if e["event"] == "state_machine_restored"]
    assert restored["source"] == "log", "nothing was compacted: the log replays every write"
