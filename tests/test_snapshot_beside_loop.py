"""A node goes on committing writes while it writes a snapshot (quorum.node._begin_snapshot).

Serializing the whole state on the event loop stalled every write on the node for as long as the
snapshot took (0.15-0.45 s a snapshot under load, about once a second per node). Here a real one-node
quorum snapshots a register map whose chunks wait until the test lets them go: writes proposed while
the snapshot is held must commit and be applied, and the snapshot must then finish and compact the log
with the state as of the index it began at.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

from quorum.node import QuorumNode
from quorum.raft import Role
from quorum.register_command import encode_set
from quorum.settings import NodeSettings
from quorum.state_machine import RegisterMap
from tests.quorum_harness import free_ports, poll_until

DEADLINE_S = 20.0
SNAPSHOT_EVERY = 40  # entries: rolled per node between half and all of it (QuorumNode._roll_snapshot_scale)


class HeldSnapshots(RegisterMap):
    """A register map whose snapshot chunks wait for `release` once they are asked for (in the snapshot
    thread), so that a snapshot takes as long as the test wants."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.began = threading.Event()
        self.release = threading.Event()
        self.points: list[int] = []  # the applied index each snapshot's state was fixed at

    def snapshot_chunks(self) -> Iterator[bytes]:
        chunks = super().snapshot_chunks()  # the state is fixed here, at the call
        self.points.append(self.applied_index())

        def held() -> Iterator[bytes]:
            self.began.set()
            if not self.release.wait(DEADLINE_S):
                raise TimeoutError("the test never released the snapshot")
            yield from chunks

        return held()


def test_writes_commit_while_a_snapshot_is_being_written(tmp_path: Path) -> None:
    [port] = free_ports(1)
    address = f"127.0.0.1:{port}"
    settings = NodeSettings(
        node_id=1,
        data_dir=tmp_path,
        listen=address,
        peers={1: address},
        cpu_placement="off",
        snapshot_interval_entries=SNAPSHOT_EVERY,
        snapshot_trailing_entries=5,
    )
    state = HeldSnapshots(tmp_path / "state")

    async def body() -> None:
        node = QuorumNode(settings, state)
        await node.start()
        try:

            async def leading() -> bool:
                return node.core.role is Role.LEADER

            await poll_until(leading, DEADLINE_S, "the one-node quorum elected no leader")
            written = 0
            while not state.began.is_set() and written < 4 * SNAPSHOT_EVERY:
                await node.propose_many([encode_set(f"k{written}".encode(), b"before")], DEADLINE_S)
                written += 1
            assert state.began.is_set(), f"no snapshot began after {written} writes"
            compacted_before = node.status().snapshot_index

            # The snapshot is held in its thread: writes must still commit and be applied meanwhile.
            for i in range(SNAPSHOT_EVERY):
                [(index, _)] = await asyncio.wait_for(
                    node.propose_many([encode_set(f"during{i}".encode(), b"x")], DEADLINE_S), 5.0
                )
            assert state.read(f"during{SNAPSHOT_EVERY - 1}".encode()) == b"x"
            assert state.applied_index() >= index
            assert node.status().snapshot_index == compacted_before, "the held snapshot finished before its release"
            [held_at] = state.points  # one snapshot at a time
            assert held_at < index

            state.release.set()

            async def compacted() -> bool:
                return node.status().snapshot_index >= held_at

            await poll_until(compacted, DEADLINE_S, "the snapshot did not finish once released")
            # Each snapshot compacts the log at the index its state was fixed at (a second one may follow at once).
            assert node.status().snapshot_index in state.points
        finally:
            state.release.set()
            await node.stop()

    asyncio.run(body())
