"""The core's campaign on a broken leader stream (Raft.leader_unreachable, RaftConfig.campaign_on_leader_loss).

A follower told that its stream to the leader broke starts a pre-election at
once; the followers of a dead leader elect one of them without waiting out an
election timeout (no tick passes in these tests), and the best candidate (the
more up-to-date log, then the higher id) wins in one election. A report about
a leader that is alive changes no term. The cluster harness is
tests/test_raft_core.py's `Net`.
"""

from __future__ import annotations

import pytest

from quorum.raft.types import MessageType, Role
from tests.test_raft_core import ELECTION_TICKS, Net, applied_data

pytestmark = pytest.mark.sim

MT = MessageType


def elected(n: int, **knobs: object) -> Net:
    """A cluster of `n` with node 1 leading and its no-op committed everywhere."""
    net = Net(n, pre_vote=True, check_quorum=True, **knobs)
    net.elect(1)
    net.tick(1)
    net.stabilize()
    return net


def test_the_followers_of_a_dead_leader_elect_the_best_of_them_at_once() -> None:
    net = elected(3)
    term = net.nodes[1].term
    net.crash(1)
    for i in (2, 3):
        assert net.nodes[i].leader_unreachable(1) is True
        net.process(i)
    net.stabilize()
    # Equal logs: the higher id ranks first (ZooKeeper's totalOrderPredicate); one election, no tick.
    assert net.leaders() == [3]
    assert net.nodes[3].term == net.nodes[2].term == term + 1
    assert net.nodes[2].leader_id == 3


@pytest.mark.parametrize("first", [2, 3])
def test_a_follower_that_learns_of_the_loss_later_still_ends_the_election_at_once(first: int) -> None:
    """The first pre-vote reaches a follower that still hears from the old leader and is ignored; the
    later report settles it without a tick, whichever of the two is the better candidate."""
    net = elected(3)
    term = net.nodes[1].term
    net.crash(1)
    later = 5 - first
    assert net.nodes[first].leader_unreachable(1)
    net.process(first)
    net.stabilize()
    assert net.nodes[later].role is Role.FOLLOWER and net.nodes[later].leader_id == 1  # in its lease
    assert net.nodes[later].leader_unreachable(1)
    net.process(later)
    net.stabilize()
    assert net.leaders() == [3]
    assert net.nodes[3].term == term + 1


def test_the_more_up_to_date_log_wins_over_the_higher_id() -> None:
    net = elected(3)
    net.cut |= {(1, 3)}
    index = net.propose(1, b"only-on-1-and-2")
    net.stabilize()
    assert net.nodes[2].last_index == index > net.nodes[3].last_index
    net.crash(1)
    net.heal()
    for i in (3, 2):
        net.nodes[i].leader_unreachable(1)
        net.process(i)
    net.stabilize()
    assert net.leaders() == [2]
    assert applied_data(net.machines[3]) == [b"only-on-1-and-2"]


def test_five_nodes_elect_once_when_every_follower_loses_the_leader() -> None:
    net = elected(5)
    term = net.nodes[1].term
    since = len(net.sent)
    net.crash(1)
    for i in (2, 3, 4, 5):
        net.nodes[i].leader_unreachable(1)
        net.process(i)
    net.stabilize()
    assert net.leaders() == [5]
    assert all(net.nodes[i].term == term + 1 for i in (2, 3, 4, 5))
    votes = {m.frm for m in net.sent[since:] if m.type is MT.VOTE}
    assert votes == {5}  # one candidate, one real election


@pytest.mark.parametrize(("n", "flapping"), [(3, (2,)), (5, (2,)), (5, (2, 4))])
def test_a_report_about_a_live_leader_that_a_majority_still_hears_changes_no_term(
    n: int, flapping: tuple[int, ...]
) -> None:
    net = elected(n)
    term = net.nodes[1].term
    since = len(net.sent)
    for i in flapping:
        assert net.nodes[i].leader_unreachable(1) is True
        net.process(i)
    net.stabilize()
    assert net.leaders() == [1]
    assert all(c.term == term for c in net.nodes.values())
    assert not any(m.type is MT.VOTE for m in net.sent[since:])
    # The leader's next heartbeat brings the flapping followers back, in the same term.
    net.tick(1, net.nodes[1].config.heartbeat_interval_ticks)
    net.stabilize()
    for i in flapping:
        assert net.nodes[i].role is Role.FOLLOWER and net.nodes[i].leader_id == 1
    index = net.propose(1, b"after-the-flap")
    net.stabilize()
    assert all(c.commit_index >= index for c in net.nodes.values())


@pytest.mark.parametrize(
    "knobs",
    [{"campaign_on_leader_loss": False}, {"pre_vote": False}, {"check_quorum": False}],
    ids=["option-off", "no-pre-vote", "no-check-quorum"],
)
def test_the_report_is_ignored_without_the_option_pre_vote_or_check_quorum(knobs: dict[str, bool]) -> None:
    net = Net(3, **{"pre_vote": True, "check_quorum": True, **knobs})
    net.elect(1)
    net.crash(1)
    assert net.nodes[2].leader_unreachable(1) is False
    assert net.nodes[2].role is Role.FOLLOWER and net.nodes[2].leader_id == 1


def test_the_report_is_ignored_unless_it_names_this_followers_leader() -> None:
    net = elected(3)
    assert net.nodes[2].leader_unreachable(3) is False  # another follower
    assert net.nodes[1].leader_unreachable(2) is False  # the leader about a follower
    net.nodes[2].leader_unreachable(1)
    net.process(2)
    assert net.nodes[2].role is Role.PRE_CANDIDATE
    assert net.nodes[2].leader_unreachable(1) is False  # already campaigning


def test_when_the_best_candidate_dies_before_it_wins_the_election_timeout_still_elects() -> None:
    """The rank holds only until the election timeout: past it the usual rules elect whoever can win."""
    net = elected(5)
    term = net.nodes[1].term
    net.crash(1)
    net.drop = lambda m: m.type is MT.PRE_VOTE_RESP and m.to == 5  # node 5 never hears its grants
    for i in (5, 2, 3, 4):
        net.nodes[i].leader_unreachable(1)
        net.process(i)
    net.stabilize()
    assert net.leaders() == []
    assert all(net.nodes[i].role is Role.FOLLOWER for i in (2, 3, 4))  # each stepped back for node 5
    net.crash(5)
    net.drop = None
    for _ in range(3 * 2 * ELECTION_TICKS):
        net.tick_all()
        if net.leaders():
            break
    assert len(net.leaders()) == 1 and net.leaders()[0] in (2, 3, 4)
    assert net.nodes[net.leaders()[0]].term > term
