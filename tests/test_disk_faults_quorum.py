"""Disk faults of a quorum node, with real processes on loopback (no root needed).

* A failed fsync or write (runtime.failpoints, armed while the node runs): the node stops at once with
  exit code 1 and one `storage_failed` line, the write in flight is never acknowledged, and the node
  restarted on a working disk holds every write it acknowledged.
* A torn last write (tests/faults/torn.py): SIGKILL, the last write-ahead record cut in its middle or
  followed by garbage, restart: the node cuts the tail (`write_ahead_log_tail_cut`), rejoins, and every
  acknowledged write is read back from it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from quorum.register_client import QuorumClient, QuorumClientError
from runtime.failpoints import ENV_VAR
from tests.faults.torn import tear_quorum_log
from tests.helpers import wait_until
from tests.quorum_harness import QuorumProcesses, poll_until, wait_applied, wait_for_leader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LEADER_DEADLINE_S = 30.0
STOP_DEADLINE_S = 20.0
APPLY_DEADLINE_S = 60.0
READ_DEADLINE_S = 30.0
# Short, so the write the failed node never answers ends within the test; the client retries until then.
UNANSWERED_TIMEOUT_S = 3.0
KEYS = 200


def key(i: int) -> bytes:
    return b"k%04d" % i


async def write_keys(q: QuorumProcesses, first: int, last: int) -> int:
    """Set keys first..last-1 (value = key), all acknowledged; returns the highest index acknowledged."""
    async with QuorumClient(list(q.addresses.values())) as client:
        proposals = await asyncio.gather(*(client.set(key(i), key(i)) for i in range(first, last)))
    return max(p.index for p in proposals)


async def read_keys(address: str, count: int) -> dict[bytes, bytes | None]:
    """Every key as the node at `address` holds it; retried while the node cannot be reached yet (this
    process's gRPC may still be backing off from the connections the node refused while it was down)."""
    async with QuorumClient([address]) as client:

        async def probe() -> dict[bytes, bytes | None] | None:
            try:
                return {key(i): await client.read(key(i), server=address) for i in range(count)}
            except QuorumClientError as exc:
                if not exc.retriable:
                    raise
                return None

        return await poll_until(probe, READ_DEADLINE_S, f"{address} answers no read")


async def unanswered_write(q: QuorumProcesses) -> None:
    async with QuorumClient(list(q.addresses.values()), request_timeout_s=UNANSWERED_TIMEOUT_S) as client:
        with pytest.raises(QuorumClientError):
            await client.set(b"after-the-failure", b"never acknowledged")


@pytest.mark.parametrize("point", ["fsync", "write"])
def test_a_node_whose_disk_fails_stops_and_acknowledges_nothing_more(
    point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trigger = tmp_path / "disk-fault"
    monkeypatch.setenv(ENV_VAR, f"{point}=fail-if-exists:{trigger}")  # the node inherits it
    with QuorumProcesses(tmp_path / "quorum", n=1) as q:
        q.start_all()
        asyncio.run(wait_for_leader(q.addresses, LEADER_DEADLINE_S))
        asyncio.run(write_keys(q, 0, KEYS))
        trigger.touch()
        asyncio.run(unanswered_write(q))
        wait_until(lambda: not q.alive(1), STOP_DEADLINE_S, message="the node stops on its failed disk")
        assert q.returncode(1) == 1, q.log_tail(1)
        [stopped] = q.log_events(1, "storage_failed")
        assert f"{point} failed" in stopped["error"] and stopped["level"] == "critical", stopped
        assert "Traceback" not in q.log_text(1), q.log_tail(1)

        monkeypatch.delenv(ENV_VAR)
        trigger.unlink()
        q.start(1)
        asyncio.run(wait_for_leader(q.addresses, LEADER_DEADLINE_S))
        found = asyncio.run(read_keys(q.addresses[1], KEYS))
        assert found == {key(i): key(i) for i in range(KEYS)}


@pytest.mark.parametrize(("mode", "whom"), [("cut", "leader"), ("garbage", "follower"), ("cut", "follower")])
def test_a_torn_last_write_is_cut_and_the_node_rejoins_with_every_acknowledged_write(
    mode: str, whom: str, tmp_path: Path
) -> None:
    with QuorumProcesses(tmp_path, n=3) as q:
        q.start_all()
        leader, _ = asyncio.run(wait_for_leader(q.addresses, LEADER_DEADLINE_S))
        asyncio.run(write_keys(q, 0, KEYS))
        target = leader if whom == "leader" else next(n for n in q.addresses if n != leader)
        q.kill(target)
        tear = tear_quorum_log(q.data_dir(target), mode)
        assert tear.mode == mode and tear.record_start_bytes >= 0, tear  # there was a last record to tear
        q.start(target)
        asyncio.run(q.wait_serving(target, LEADER_DEADLINE_S))
        last = asyncio.run(write_keys(q, KEYS, KEYS + 20))  # the cluster takes writes with the node back
        asyncio.run(wait_applied([q.addresses[target]], last, APPLY_DEADLINE_S))
        q.assert_alive()
        found = asyncio.run(read_keys(q.addresses[target], KEYS + 20))
        assert found == {key(i): key(i) for i in range(KEYS + 20)}
        [cut] = q.log_events(target, "write_ahead_log_tail_cut")
        # A cut record is damaged from its start; garbage starts right after the last whole record.
        damaged_at = tear.record_start_bytes if mode == "cut" else tear.offset_bytes
        assert (cut["segment"], cut["offset_bytes"]) == (tear.path.name, damaged_at), cut
