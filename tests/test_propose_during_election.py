"""A proposal that reaches a node while no leader is known waits for the election (quorum.service).

It is proposed as soon as the node learns of a leader (and leads), or answered
with the new leader's name; only if no leader appears within two election
timeouts does the client hear "leader unknown". The node is a stand-in with the
two calls the service makes: `propose_many` and `leadership_changed`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from quorum import errors
from quorum.service import QuorumService

ELECTION_TICKS = 4
TICK_MS = 10


class ElectingNode:
    """No leader until `decide(leader)`; then this node (id 1) takes proposals if it leads."""

    def __init__(self) -> None:
        self.settings = SimpleNamespace(election_timeout_ticks=ELECTION_TICKS, tick_ms=TICK_MS)
        self.leader = 0
        self.waits = 0
        self._changed = asyncio.Event()

    def decide(self, leader: int) -> None:
        self.leader = leader
        self._changed.set()

    async def propose_many(self, commands: Sequence[bytes], timeout_s: float) -> list[tuple[int, bytes]]:
        if self.leader != 1:
            raise errors.NotLeaderError(self.leader, f"127.0.0.1:{7000 + self.leader}" if self.leader else "")
        return [(k + 1, c) for k, c in enumerate(commands)]

    async def leadership_changed(self, timeout_s: float) -> None:
        self.waits += 1
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except TimeoutError:
            return
        self._changed.clear()


def propose(node: ElectingNode, decide: int | None) -> list[tuple[int, bytes]]:
    async def body() -> list[tuple[int, bytes]]:
        service = QuorumService(node)  # type: ignore[arg-type]
        if decide is not None:
            asyncio.get_running_loop().call_later(0.005, node.decide, decide)
        return await service._propose([b"x"], timeout_s=5.0)  # noqa: SLF001

    return asyncio.run(body())


def test_a_proposal_is_taken_once_the_node_it_reached_wins_the_election() -> None:
    node = ElectingNode()
    assert propose(node, decide=1) == [(1, b"x")]
    assert node.waits == 1


def test_a_proposal_is_answered_with_the_new_leader_once_another_node_wins() -> None:
    node = ElectingNode()
    with pytest.raises(errors.NotLeaderError) as refused:
        propose(node, decide=2)
    assert refused.value.leader_id == 2 and refused.value.leader_address == "127.0.0.1:7002"


def test_without_a_leader_the_proposal_is_refused_after_two_election_timeouts() -> None:
    node = ElectingNode()
    with pytest.raises(errors.NotLeaderError) as refused:
        propose(node, decide=None)
    assert refused.value.leader_id == 0 and node.waits >= 1
