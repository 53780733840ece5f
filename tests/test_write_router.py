"""The write router's one decision (zkemu.write_router): where a session's writes go, from the leadership
this server sees."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from zkemu.session_writes import NO_ROUTE
from zkemu.write_router import Way, WriteRouter, decide

ME = 1


@pytest.mark.parametrize(
    ("leading", "leader_id", "term", "way", "route"),
    [
        (True, ME, 5, Way.HERE, (ME, 5)),  # this server leads: propose here
        (False, 2, 5, Way.FORWARD, (2, 5)),  # another server leads: forward to it
        (False, 0, 6, Way.WAIT, NO_ROUTE),  # an election is under way: no leader known
        (False, ME, 5, Way.WAIT, (ME, 5)),  # named leader without leading (between roles): wait
    ],
)
def test_the_decision_table(leading: bool, leader_id: int, term: int, way: Way, route: tuple[int, int]) -> None:
    decision = decide(ME, leading, leader_id, term)
    assert (decision.way, decision.route) == (way, route)


@dataclass
class FakeQuorum:
    node_id: int = ME
    is_leader: bool = False
    leader_id: int = 0
    term: int = 1


def test_way_now_follows_each_change_of_leadership() -> None:
    quorum = FakeQuorum()
    quorum.settings = type("S", (), {"proposal_timeout_ms": 1000})()  # type: ignore[attr-defined]
    router = WriteRouter(quorum)  # type: ignore[arg-type]
    seen = []
    for leading, leader_id, term in [(False, 0, 1), (False, 2, 1), (False, 2, 1), (False, 0, 2), (True, ME, 2)]:
        quorum.is_leader, quorum.leader_id, quorum.term = leading, leader_id, term
        decision = router.way_now()
        seen.append((decision.way, decision.route))
    assert seen == [
        (Way.WAIT, NO_ROUTE),
        (Way.FORWARD, (2, 1)),
        (Way.FORWARD, (2, 1)),
        (Way.WAIT, NO_ROUTE),
        (Way.HERE, (ME, 2)),
    ]
