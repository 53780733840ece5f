"""Membership changes in the pure Raft core (quorum.raft.membership; Raft dissertation §4.1-4.3).

Scenario tests on the core test harness (tests/test_raft_core.py `Net`), with
nodes added as learners or observers, promoted and removed, and the simulator
with random membership changes interleaved with its faults.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from quorum.codec import snapshot_meta_from_pb, snapshot_meta_to_pb
from quorum.lmdb_log_store import _SNAPSHOT_HEAD, LmdbLogStore, _decode_snapshot, _encode_snapshot
from quorum.log_store import MemoryLogStore
from quorum.raft.config import RaftConfig
from quorum.raft.core import Raft
from quorum.raft.membership import (
    ChangeKind,
    ConfChange,
    ConfChangeError,
    MemberRole,
    Membership,
    decode_config,
    encode_config,
)
from quorum.raft.recovery import reconcile
from quorum.raft.types import Entry, EntryKind, HardState, MessageType, PersistentState, Role, SnapshotMeta
from quorum.snapshot_store import SnapshotStore
from tests.sim.cluster import MEMBERSHIP_CHANGES, SimulationError, run_seed
from tests.test_raft_core import ELECTION_TICKS, Net, applied_data

pytestmark = pytest.mark.sim

MT = MessageType
# Seeds of the simulator with random membership changes in CI (more: python3 -m tests.sim.run
# --seeds 0:2000 --option membership_changes=on).
MEMBERSHIP_SEEDS = 200
MEMBERSHIP_STEPS = 1500


class MemberNet(Net):
    """The core harness with nodes that join later, as `zkraft quorum start --join` does: no configuration."""

    def __init__(self, n: int, **knobs: object) -> None:
        self.bootstrap = tuple(range(1, n + 1))
        super().__init__(n, **knobs)

    def _new_core(self, i: int, state: PersistentState, applied: int) -> Raft:
        voters = self.bootstrap if i in self.bootstrap else ()
        config = RaftConfig(node_id=i, voters=voters, **self.knobs)  # type: ignore[arg-type]
        return Raft(config, state, random.Random(self.rng.randrange(1 << 30)), applied=applied)

    def add_node(self, i: int) -> None:
        self.voters = (*self.voters, i)
        self.stores[i] = MemoryLogStore()
        self.machines[i], self.snapshots[i], self.incoming[i] = [], {}, {}
        self.read_states[i], self.readies[i] = [], []
        self.nodes[i] = self._new_core(i, PersistentState(), 0)

    def change(self, leader: int, kind: ChangeKind, node: int) -> int:
        if kind in (ChangeKind.ADD_LEARNER, ChangeKind.ADD_OBSERVER) and node not in self.nodes:
            self.add_node(node)
        index = self.nodes[leader].propose_conf_change(ConfChange(kind, node, b"127.0.0.1:%d" % (7000 + node)))
        self.process(leader)
        return index


def _grown(n: int = 3, learner: int = 4, **knobs: object) -> MemberNet:
    net = MemberNet(n, **knobs)
    net.elect(1)
    net.change(1, ChangeKind.ADD_LEARNER, learner)
    net.tick_all(2)
    return net


# ------------------------------------------------------------ configuration values


def test_a_configuration_entry_round_trips_with_its_opaque_context() -> None:
    m = Membership((1, 2, 3), (4,), (5,), b"\x00any bytes")
    change = ConfChange(ChangeKind.ADD_OBSERVER, 5, m.context)
    assert decode_config(encode_config(change, m)) == (change, m)
    with pytest.raises(ValueError, match="shorter than its header"):
        decode_config(b"\x01")


@pytest.mark.parametrize(
    ("kind", "node", "error"),
    [
        (ChangeKind.ADD_LEARNER, 2, "node 2 is already a member \\(voter\\)"),
        (ChangeKind.PROMOTE, 9, "unknown node id 9"),
        (ChangeKind.REMOVE, 9, "unknown node id 9"),
        (ChangeKind.PROMOTE, 1, "node 1 is already a voter"),
        (ChangeKind.PROMOTE, 5, "node 5 is an observer"),
        (ChangeKind.ADD_LEARNER, 0, "node id must be >= 1"),
    ],
)
def test_a_configuration_refuses_a_change_that_makes_no_sense(kind: ChangeKind, node: int, error: str) -> None:
    with pytest.raises(ConfChangeError, match=error):
        Membership((1, 2, 3), (4,), (5,)).changed(ConfChange(kind, node))


def test_the_only_voter_cannot_be_removed() -> None:
    with pytest.raises(ConfChangeError, match="only voter"):
        Membership((1,), (2,)).changed(ConfChange(ChangeKind.REMOVE, 1))


# ------------------------------------------------------------------- learners


def test_a_learner_is_replicated_to_but_never_counts_for_a_commit() -> None:
    net = _grown()
    leader, learner = net.nodes[1], net.nodes[4]
    assert leader.membership == Membership((1, 2, 3), (4,), (), b"127.0.0.1:7004")
    assert learner.membership == leader.membership, "the learner learns the configuration from the log"
    net.propose(1, b"a")
    net.tick_all(2)
    assert applied_data(net.machines[4]) == [b"a"]
    # Two voters down: the leader and the learner hold the entry, which is no majority of the voters.
    net.crash(2)
    net.crash(3)
    before = leader.commit_index
    net.propose(1, b"b")
    net.tick_all(1)
    assert learner.last_index == leader.last_index
    assert leader.commit_index == before


def test_a_learner_never_campaigns_and_its_grant_elects_nobody() -> None:
    net = _grown()
    net.crash(1)
    sent = len(net.sent)
    net.tick(4, 4 * ELECTION_TICKS)
    assert net.nodes[4].role is Role.FOLLOWER
    assert not [m for m in net.sent[sent:] if m.frm == 4 and m.type in (MT.VOTE, MT.PRE_VOTE)]
    # Node 2 alone with the learner: the learner's grant does not make a majority of {1, 2, 3}.
    net.crash(3)
    net.tick(2, 4 * ELECTION_TICKS)
    net.tick_all(2)
    assert net.leaders() == []


def test_a_learner_is_promoted_only_when_caught_up() -> None:
    net = _grown(learner_lag_entries_max=5)
    net.isolate(4)
    for k in range(10):
        net.propose(1, b"w%d" % k)
    net.stabilize()
    with pytest.raises(ConfChangeError, match="node 4 is not caught up: it holds the log through 2, .* ends at 12"):
        net.change(1, ChangeKind.PROMOTE, 4)
    net.heal()
    net.tick_all(3)
    net.change(1, ChangeKind.PROMOTE, 4)
    net.tick_all(2)
    assert net.nodes[1].membership.voters == (1, 2, 3, 4)
    assert net.nodes[4].membership.role_of(4) is MemberRole.VOTER
    # Four voters: three make the quorum, so two down stop commits.
    net.crash(2)
    net.crash(3)
    before = net.nodes[1].commit_index
    net.propose(1, b"x")
    net.tick_all(1)
    assert net.nodes[1].commit_index == before


def test_a_learner_that_never_answered_is_not_promoted_even_on_a_short_log() -> None:
    # The log (a few entries) is shorter than the lag allowed: only the learner's silence can refuse it.
    net = MemberNet(3)
    net.elect(1)
    net.change(1, ChangeKind.ADD_LEARNER, 4)
    net.isolate(4)  # a mistyped address: nothing ever comes back from it
    net.tick_all(5)
    assert net.nodes[1].log.last_index < net.nodes[1].config.learner_lag_entries_max
    with pytest.raises(ConfChangeError, match="node 4 is not caught up: it has not answered this leader yet"):
        net.change(1, ChangeKind.PROMOTE, 4)
    net.change(1, ChangeKind.REMOVE, 4)  # what a join that never catches up ends with
    net.tick_all(2)
    assert net.nodes[1].membership.voters == (1, 2, 3) and net.nodes[1].membership.learners == ()


def test_one_change_at_a_time_and_none_before_the_leader_commits_in_its_term() -> None:
    net = MemberNet(3)
    net.elect(1)
    net.isolate(2)
    net.isolate(3)
    net.add_node(4)
    net.change(1, ChangeKind.ADD_LEARNER, 4)
    with pytest.raises(ConfChangeError, match="a membership change is in progress \\(entry 2 is not committed yet\\)"):
        net.change(1, ChangeKind.ADD_OBSERVER, 5)
    net.heal()
    net.tick_all(2)
    net.change(1, ChangeKind.ADD_OBSERVER, 5)
    net.tick_all(2)
    assert net.nodes[3].membership == Membership((1, 2, 3), (4,), (5,), b"127.0.0.1:7005")


def test_an_uncommitted_change_cut_by_a_new_leader_is_forgotten() -> None:
    net = MemberNet(3)
    net.elect(1)
    net.isolate(1)
    net.add_node(4)
    net.change(1, ChangeKind.ADD_LEARNER, 4)
    # Only node 1, cut off, holds the change; it uses it at once. Nodes 2 and 3 elect a leader without it.
    assert net.nodes[1].membership.learners == (4,)
    for _ in range(4 * ELECTION_TICKS):
        net.tick(2)
        net.tick(3)
        net.stabilize()
        if net.leaders() != [1]:
            break
    new = next(i for i in net.leaders() if i != 1)
    net.propose(new, b"new history")
    net.heal()
    net.tick_all(3)
    assert net.nodes[1].role is Role.FOLLOWER
    assert net.nodes[1].membership == Membership((1, 2, 3))
    assert applied_data(net.machines[1]) == [b"new history"]


def test_removing_a_voter_that_leaves_too_few_reachable_is_refused() -> None:
    net = MemberNet(3)
    net.elect(1)
    net.crash(3)
    net.tick_all(ELECTION_TICKS + 1)  # node 3's progress is no longer recently active
    net.nodes[1].report_unreachable(3)
    with pytest.raises(ConfChangeError, match="removing node 2 would lose the quorum: 1 of the remaining voters"):
        net.change(1, ChangeKind.REMOVE, 2)


# ------------------------------------------------------------------- removals


def test_a_removed_leader_leads_until_its_removal_commits_then_hands_over() -> None:
    net = MemberNet(3)
    net.elect(1)
    net.propose(1, b"before")
    net.stabilize()
    index = net.change(1, ChangeKind.REMOVE, 1)
    # Until the removal commits, it still leads (and does not count itself).
    assert net.nodes[1].role is Role.LEADER
    assert net.nodes[1].membership.voters == (2, 3)
    net.stabilize()
    assert net.nodes[1].role is Role.FOLLOWER
    assert net.nodes[2].commit_index >= index or net.nodes[3].commit_index >= index
    assert len(net.leaders()) == 1 and net.leaders()[0] in (2, 3), "TIMEOUT_NOW elects a successor at once"
    new = net.leaders()[0]
    net.propose(new, b"after")
    net.tick_all(2)
    assert applied_data(net.machines[5 - new]) == [b"before", b"after"]
    # The removed node never campaigns, however long it hears nothing.
    net.isolate(1)
    net.tick(1, 4 * ELECTION_TICKS)
    assert net.nodes[1].role is Role.FOLLOWER


# ------------------------------------------------------- snapshots and restarts


def test_the_configuration_travels_in_snapshots_and_survives_restarts() -> None:
    net = _grown()
    net.change(1, ChangeKind.PROMOTE, 4)
    net.tick_all(2)
    net.change(1, ChangeKind.ADD_OBSERVER, 5)
    net.tick_all(2)
    for k in range(5):
        net.propose(1, b"s%d" % k)
    net.stabilize()
    s1 = net.nodes[1]
    applied = s1.applied_index
    meta = s1.snapshot_meta(applied)
    assert (meta.voters, meta.observers, meta.config_index) == ((1, 2, 3, 4), (5,), 4)
    net.snapshots[1][(meta.index, meta.term)] = tuple(net.machines[1][:applied])
    s1.snapshot_taken(meta, applied)
    net.stores[1].compact(applied, meta)
    # A learner that joins now catches up by the snapshot, which names every member.
    net.change(1, ChangeKind.ADD_LEARNER, 6)
    for _ in range(3 * ELECTION_TICKS):
        net.tick_all()
        if net.nodes[6].last_index == s1.last_index:
            break
    assert net.count(MT.SNAPSHOT, 1, 6) >= 1
    assert net.nodes[6].membership == s1.membership == Membership((1, 2, 3, 4), (6,), (5,), b"127.0.0.1:7006")
    config_index = s1.config_index
    for i in (1, 6):
        net.crash(i)
        net.restart(i)
        assert net.nodes[i].membership == Membership((1, 2, 3, 4), (6,), (5,), b"127.0.0.1:7006")
        assert net.nodes[i].config_index == config_index


_CONFIGURED = SnapshotMeta(40, 3, (1, 2, 4), (5,), (6, 7), 33, b'{"4": "127.0.0.1:7004"}')


def test_the_log_store_keeps_the_snapshot_configuration_across_a_restart(tmp_path: Path) -> None:
    store = LmdbLogStore(tmp_path / "log")
    store.save(HardState(3, 1, 40), [Entry(i, 3) for i in range(1, 41)], None, sync=True)
    store.compact(40, _CONFIGURED)
    store.close()
    reopened = LmdbLogStore(tmp_path / "log")
    assert reopened.load().snapshot == _CONFIGURED
    reopened.close()


def test_a_snapshot_record_of_voters_only_still_reads() -> None:
    old = _SNAPSHOT_HEAD.pack(9, 2, 3) + struct.pack(">3Q", 1, 2, 3)
    assert _decode_snapshot(old) == SnapshotMeta(9, 2, (1, 2, 3))
    assert _decode_snapshot(_encode_snapshot(_CONFIGURED)) == _CONFIGURED


def test_the_snapshot_store_and_the_wire_carry_the_configuration(tmp_path: Path) -> None:
    snapshots = SnapshotStore(tmp_path)
    with snapshots.create(_CONFIGURED) as writer:
        writer.write(b"tree")
    assert SnapshotStore(tmp_path).latest() == _CONFIGURED
    assert snapshot_meta_from_pb(snapshot_meta_to_pb(_CONFIGURED)) == _CONFIGURED


def test_config_entries_are_a_kind_of_their_own() -> None:
    net = _grown()
    kinds = [e.kind for e in net.machines[4]]
    assert EntryKind.CONFIG in kinds


# ------------------------------------------------------------------ simulator


@pytest.mark.parametrize("nodes", [3, 5])
def test_simulated_membership_changes_keep_every_invariant(nodes: int) -> None:
    failures = []
    changes = 0
    for seed in range(MEMBERSHIP_SEEDS // 2):
        try:
            result = run_seed(20_000 + seed, nodes, MEMBERSHIP_STEPS, forced={MEMBERSHIP_CHANGES: True})
        except SimulationError as e:
            failures.append(str(e))
        else:
            changes += result.changes
    assert not failures, f"{len(failures)} seeds failed:\n" + "\n".join(failures)
    assert changes >= MEMBERSHIP_SEEDS // 2, f"only {changes} membership changes in {MEMBERSHIP_SEEDS // 2} seeds"


def test_a_log_rebased_on_the_applied_state_keeps_the_configuration_it_held() -> None:
    change = ConfChange(ChangeKind.ADD_OBSERVER, 5, b"ctx")
    config = Membership((1, 2, 3), (), (5,), b"ctx")
    entries = (Entry(1, 1), Entry(2, 1, encode_config(change, config), EntryKind.CONFIG), Entry(3, 1))
    state = PersistentState(hard_state=HardState(1, 1, 3), entries=entries)
    # The state machine applied entry 5 of term 1; the log (its tail cut) ends at 3.
    recovery = reconcile(state, 5, 1, (1, 2, 3), 1, cut=True)
    assert recovery.rebase is not None
    assert recovery.rebase.observers == (5,) and recovery.rebase.config_index == 2
