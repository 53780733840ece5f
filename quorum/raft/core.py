"""The Raft state machine of one node: pure, deterministic, single-threaded.

It is given ticks, messages and proposals, and hands back what to persist,
send and apply as a `Ready` (the etcd-raft contract, see types.Ready). The
protocol follows the Raft paper and thesis with etcd's refinements:
pre-vote (§9.6), check-quorum with leader stickiness, flow control by
progress state, fast back-off by term hints, ReadIndex (§6.4), leadership
transfer (§3.10) and snapshots for followers behind the compacted log.

Extensions beyond etcd's protocol, each a RaftConfig option (on by default),
none of which changes what is committed, only when a node learns it:

* `durable_notice`: where the leader and one follower make a quorum, the
  leader sends a follower MessageType.DURABLE(index) once its own log is on
  its disk through `index` (`_notify_durable`), and `persisted(rd)` hands
  those notices out right after the leader's save, before `advance`. A
  follower that holds the leader's entries of the current term durably
  through that index commits them by itself (`_commit_durable_pair`): two
  durable copies of a current-term entry are a majority of three (Raft
  §5.4.2). The leader then sends no COMMIT for them, and a ReadIndex it
  serves waits for what such a follower may have committed (`_read_floor`).
* `lazy_follower_commits`: a follower that serves no clients asks
  (`set_lazy_commits`, carried on its answers as Message.lazy_commits) to
  learn commits from the leader's next APPEND or HEARTBEAT instead of a
  COMMIT message (a commit-only broadcast: MessageType.COMMIT, sent where
  etcd sends an empty append). Only when it applies changes, never what.
* `deferred_replication`: while the leader and enough followers streaming
  without trouble make a quorum, the others get new entries late
  (`_deferred_followers`): lazy ones at the next heartbeat, those that serve
  clients once the entries commit (a ZooKeeper observer's INFORM). A commit
  still needs a quorum's acknowledgements.

`ready(withhold_committed=True)` lets the runner send a Ready's messages a
loop turn before it applies the Ready's committed entries (they come with the
next Ready); the protocol is unchanged by it.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from quorum.raft.config import RaftConfig
from quorum.raft.errors import InvariantViolation, NotLeaderError, ProposalDroppedError, invariant
from quorum.raft.log import RaftLog
from quorum.raft.membership import (
    ChangeKind,
    ConfChange,
    ConfChangeError,
    MemberRole,
    Membership,
    decode_config,
    encode_config,
)
from quorum.raft.progress import Progress, ProgressState
from quorum.raft.read_only import ReadOnlyTracker
from quorum.raft.types import (
    CAMPAIGN_TRANSFER,
    NO_VOTE,
    Entry,
    EntryKind,
    HardState,
    Message,
    MessageType,
    PersistentState,
    ReadState,
    Ready,
    Role,
    SnapshotMeta,
    SoftState,
)

MT = MessageType
NO_LEADER = 0
_KIND = operator.attrgetter("kind")
# A follower's answers to its leader, which carry its lazy_commits wish.
_FOLLOWER_ANSWERS = frozenset({MessageType.APPEND_RESP, MessageType.HEARTBEAT_RESP})
# Committed entries handed out per Ready: bounds the apply latency of one loop turn.
COMMITTED_ENTRIES_PER_READY_MAX = 8192


class Random(Protocol):
    def randrange(self, start: int, stop: int) -> int: ...


class _Campaign(enum.Enum):
    PRE_ELECTION = "pre-election"
    ELECTION = "election"
    TRANSFER = "transfer"


class Raft:
    def __init__(self, config: RaftConfig, state: PersistentState, rng: Random, applied: int = 0) -> None:
        self.config = config
        self.node_id = config.node_id
        self._rng = rng
        hs = state.hard_state
        if state.snapshot is not None:
            applied = max(applied, state.snapshot.index)
        self.log = RaftLog(state.compacted_index, state.compacted_term, state.entries, hs.commit, applied)
        self.snapshot: SnapshotMeta | None = state.snapshot
        self.term = hs.term
        self.vote = hs.vote
        self.role = Role.FOLLOWER
        self.leader_id = NO_LEADER
        self._prev_hard_state = HardState(self.term, self.vote, self.log.committed)
        self._msgs: list[Message] = []
        self._read_states: list[ReadState] = []
        self._votes: dict[int, bool] = {}
        self._incomplete_votes: set[int] = set()  # grants of voters whose logs may lack what they acknowledged
        self._repair_index = state.repair_index
        self._progress: dict[int, Progress] = {}
        self._read_only = ReadOnlyTracker()
        self._pending_reads: list[Message] = []  # waiting for a commit in this term
        self._lead_transferee = NO_LEADER
        self._leader_durable = 0  # as a follower: the leader's log is on its disk through here (DURABLE)
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_election_timeout = 0
        self._uncommitted_bytes = 0
        self._bcast_pending = False
        self._ready_outstanding = False
        self._persisted: Ready | None = None  # the outstanding Ready, once persisted() took note of it
        self._lazy_commits = False
        # While this node looks for a new leader after its stream to the old one broke (leader_unreachable):
        # the best candidate it has seen, as (last log term, last index, id); None otherwise.
        self._leader_lost: tuple[int, int, int] | None = None
        self._lost_round = b""  # the context of that pre-election's PRE_VOTEs, which their answers echo
        # Membership (quorum.raft.membership): the configuration in force at the log's start (the snapshot's,
        # else the one the cluster started with), then every CONFIG entry in the log as (index, term, config).
        self._base_config = (0, Membership(config.voters))
        if state.snapshot is not None:
            self._base_config = (state.snapshot.config_index, membership_of(state.snapshot))
        self._configs: list[tuple[int, int, Membership]] = []
        self._note_configs(state.entries)
        self._apply_membership()
        self._become_follower(self.term, NO_LEADER)

    # --------------------------------------------------------------- settings
    def set_lazy_commits(self, lazy: bool) -> None:
        """Whether this node, as a follower, may learn commits late: from the leader's next APPEND or
        HEARTBEAT rather than from a COMMIT message of their own.

        A COMMIT costs the leader one message per follower and each follower a
        message and an apply of its own; a follower that serves no reads has
        no use for knowing the commit at once. Its answers carry the wish
        (Message.lazy_commits), so the leader learns a change with the next
        answer; until then commits reach it at the latest with the next
        heartbeat. Safety does not depend on it: only when a follower applies,
        never what. While the leader has a quorum without it, such a follower
        also gets new entries late (`_deferred_followers`). Without
        RaftConfig.lazy_follower_commits the wish is not passed on.
        """
        self._lazy_commits = lazy and self.config.lazy_follower_commits

    # ------------------------------------------------------------------ views
    @property
    def lazy_commits(self) -> bool:
        """Whether this node asked to learn commits late (set_lazy_commits)."""
        return self._lazy_commits

    @property
    def log_incomplete(self) -> bool:
        """Whether this node's log may lack entries it acknowledged: it cut a damaged tail and its commit
        index has not reached what it may have acknowledged (PersistentState.repair_index)."""
        return self._repair_index > self.log.committed

    @property
    def commit_index(self) -> int:
        return self.log.committed

    @property
    def applied_index(self) -> int:
        return self.log.applied

    @property
    def last_index(self) -> int:
        return self.log.last_index

    @property
    def first_index(self) -> int:
        return self.log.first_index

    def entry(self, index: int) -> Entry:
        return self.log.entry(index)

    def durable_uncommitted(self, max_count: int) -> list[Entry]:
        """Entries on this node's disk that it does not know committed, oldest first, at most `max_count`."""
        first = self.log.committed + 1
        if self.log.stable_index < first:
            return []
        return self.log.slice(first, self.log.stable_index + 1, max_count, 1 << 62)

    def term_at(self, index: int) -> int | None:
        return self.log.term(index)

    def progress(self) -> dict[int, tuple[int, int, str]]:
        if self.role is not Role.LEADER:
            return {}
        return {p: (pr.match, pr.next, pr.state.value) for p, pr in self._progress.items() if p != self.node_id}

    @property
    def lead_transferee(self) -> int:
        return self._lead_transferee

    @property
    def membership(self) -> Membership:
        """The configuration this node uses: the latest in its log, committed or not (dissertation §4.1)."""
        return self._membership

    @property
    def config_index(self) -> int:
        """The index of the CONFIG entry that made `membership` (0: the configuration the cluster started with)."""
        return self._config_index

    def snapshot_meta(self, index: int) -> SnapshotMeta:
        """The metadata of a snapshot of the state machine at `index`: its term and the configuration in force
        there, which the snapshot carries to a follower that installs it and to this node's next start."""
        term = self.log.term(index)
        invariant(term is not None, f"snapshot at {index} outside the log {self.first_index - 1}..{self.last_index}")
        assert term is not None
        config_index, m = self._base_config
        for i, _, c in self._configs:
            if i > index:
                break
            config_index, m = i, c
        return SnapshotMeta(index, term, m.voters, m.learners, m.observers, config_index, m.context)

    # ------------------------------------------------------------- membership
    def _note_configs(self, entries: Sequence[Entry]) -> None:
        """Record the CONFIG entries among `entries`, which were just added to the log after every known one."""
        for e in entries:
            if e.kind is EntryKind.CONFIG:
                self._configs.append((e.index, e.term, decode_membership(e.data)))

    def _apply_membership(self) -> None:
        """Use the latest configuration in the log: who is replicated to, who votes, who counts."""
        self._config_index, self._membership = (
            (self._configs[-1][0], self._configs[-1][2]) if self._configs else self._base_config
        )
        m = self._membership
        self._quorum = m.quorum
        self._peers = tuple(p for p in m.members if p != self.node_id)
        self._voter_peers = tuple(p for p in m.voters if p != self.node_id)
        self._is_voter = self.node_id in m.voters
        if self.role is not Role.LEADER:
            return
        for p in self._peers:
            if p not in self._progress:
                # A new member: probe from our log's end, as for any follower after an election (etcd confchange).
                self._progress[p] = Progress(self.log.last_index + 1, self.config.inflight_appends_max)
                self._progress[p].recent_active = True
        for p in [p for p in self._progress if p != self.node_id and p not in m.members]:
            # A removed follower may have committed on our DURABLE notice and shown it to its clients: reads
            # must still wait for that (_read_floor).
            self._removed_durable = max(self._removed_durable, self._progress.pop(p).durable_sent)
        self._voter_progress = tuple(self._progress[v] for v in m.voters)
        if self._lead_transferee not in m.voters:
            self._lead_transferee = NO_LEADER

    def _configs_after_append(self, prev_index: int, entries: Sequence[Entry]) -> None:
        """A follower's log took `entries` after `prev_index`: forget configurations a conflict cut away, then
        record the new ones (a server uses the latest configuration in its log, and falls back to the one
        before when an uncommitted change is cut: dissertation §4.1)."""
        configs = self._configs
        changed = False
        while configs and configs[-1][0] > prev_index and self.log.term(configs[-1][0]) != configs[-1][1]:
            configs.pop()
            changed = True
        last_known = configs[-1][0] if configs else 0
        for e in entries:
            if e.kind is EntryKind.CONFIG and e.index > last_known:
                configs.append((e.index, e.term, decode_membership(e.data)))
                changed = True
        if changed:
            self._apply_membership()

    def _may_campaign(self) -> bool:
        """Voters campaign; learners, observers and removed nodes do not (etcd promotable), with one exception.

        A voter whose removal is in its log but not committed may be the only one holding that entry, so that
        no voter of the configuration it leaves would vote for another (their logs are behind); the entry
        would never commit. It campaigns, needs a majority of the new configuration (its own vote does not
        count), leads a cluster that does not include itself until the entry commits, then steps down
        (dissertation §4.2.2)."""
        if self._is_voter:
            return True
        if self._config_index <= self.log.committed:
            return False
        before = self._configs[-2][2] if len(self._configs) > 1 else self._base_config[1]
        return self.node_id in before.voters

    def _removed_leader_done(self) -> bool:
        """A leader outside its own configuration leads until that configuration commits (§4.2.2)."""
        return not self._is_voter and self._config_index <= self.log.committed

    def _step_down_removed(self) -> None:
        """Our removal committed: hand the commit out, ask the most up-to-date voter to campaign at once
        (leadership transfer, §3.10, instead of waiting out an election timeout), and stop leading."""
        self._bcast_append()
        best = max(self._voter_peers, key=lambda p: self._progress[p].match, default=NO_LEADER)
        if best != NO_LEADER and self._progress[best].match == self.log.last_index:
            self._send(Message(MT.TIMEOUT_NOW, best, self.node_id, self.term))
        self._become_follower(self.term, NO_LEADER)

    # ----------------------------------------------------------- role changes
    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = NO_VOTE
        self.leader_id = NO_LEADER
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_election_timeout = self.config.election_timeout_ticks + self._rng.randrange(
            0, self.config.election_timeout_ticks
        )
        self._lead_transferee = NO_LEADER
        self._votes = {}
        self._incomplete_votes = set()
        self._progress = {}
        self._read_only = ReadOnlyTracker()
        self._pending_reads = []
        self._uncommitted_bytes = 0
        self._bcast_pending = False
        self._leader_durable = 0
        self._leader_lost = None
        self._removed_durable = 0  # as a leader: the highest DURABLE sent to a follower since removed

    def _become_follower(self, term: int, leader: int) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader_id = leader

    def _become_pre_candidate(self) -> None:
        invariant(self.role is not Role.LEADER, "leader cannot become pre-candidate")
        # Neither the term nor the vote changes: a pre-election is harmless
        # to the cluster it may not be able to reach (thesis §9.6).
        self._votes = {}
        self._incomplete_votes = set()
        self.leader_id = NO_LEADER
        self.role = Role.PRE_CANDIDATE

    def _become_candidate(self) -> None:
        invariant(self.role is not Role.LEADER, "leader cannot become candidate")
        self._reset(self.term + 1)
        self.vote = self.node_id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        invariant(self.role is Role.CANDIDATE, "only a candidate becomes leader")
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader_id = self.node_id
        nxt = self.log.last_index + 1
        for v in (self.node_id, *self._peers):
            pr = Progress(nxt, self.config.inflight_appends_max)
            pr.recent_active = True
            self._progress[v] = pr
        self._progress[self.node_id].match = self.log.stable_index
        self._voter_progress = tuple(self._progress[v] for v in self._membership.voters)
        # Raft §8: commit an entry of our own term before serving reads or
        # counting replicas of older entries.
        self.log.append([Entry(nxt, self.term, b"", EntryKind.NOOP)])
        self._bcast_pending = True

    # ------------------------------------------------------------------ ticks
    def tick(self) -> None:
        if self.role is Role.LEADER:
            self._tick_heartbeat()
        else:
            self._tick_election()

    def _tick_election(self) -> None:
        self._election_elapsed += 1
        if self._election_elapsed >= self._randomized_election_timeout and self._may_campaign():
            self._election_elapsed = 0
            self._leader_lost = None  # from here on, the plain rules (_rank_pre_vote)
            self._campaign(_Campaign.PRE_ELECTION if self.config.pre_vote else _Campaign.ELECTION)

    def _tick_heartbeat(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= self.config.election_timeout_ticks:
            self._election_elapsed = 0
            if self.config.check_quorum and not self._quorum_recently_active():
                # A leader cut off from a majority steps down, so that clients
                # look elsewhere instead of waiting on it.
                self._become_follower(self.term, NO_LEADER)
                return
            if self._lead_transferee != NO_LEADER:
                self._lead_transferee = NO_LEADER  # the transfer took too long: give up
        if self._heartbeat_elapsed >= self.config.heartbeat_interval_ticks:
            self._heartbeat_elapsed = 0
            for p in self._peers:
                self._progress[p].heartbeat_passed()
            self._bcast_heartbeat()

    def _quorum_recently_active(self) -> bool:
        voters = self._membership.voters
        # A leader outside its configuration (its removal uncommitted, §4.2.2) counts itself too: else it would
        # need every voter of a two-voter configuration to answer within each timeout, and step down at the
        # first late answer, leaving its removal to a new election. Only the lease is at stake, never a commit.
        active = 0 if self._is_voter else 1
        for v, pr in self._progress.items():
            if v in voters and (v == self.node_id or pr.recent_active):
                active += 1
            if v != self.node_id:
                pr.recent_active = False
        return active >= self._quorum

    # --------------------------------------------------------------- campaign
    def _campaign(self, kind: _Campaign, round_tag: bytes = b"") -> None:
        if not self._may_campaign():
            return
        if kind is _Campaign.PRE_ELECTION:
            self._become_pre_candidate()
            vote_type = MT.PRE_VOTE
            term = self.term + 1  # the term we would campaign in; ours is unchanged
        else:
            self._become_candidate()
            vote_type = MT.VOTE
            term = self.term
        if self._poll(self.node_id, True, self.log_incomplete):
            self._won_vote(kind)
            return
        context = CAMPAIGN_TRANSFER if kind is _Campaign.TRANSFER else round_tag
        for p in self._voter_peers:
            self._send(
                Message(
                    vote_type,
                    p,
                    self.node_id,
                    term,
                    log_term=self.log.last_term,
                    index=self.log.last_index,
                    context=context,
                )
            )

    def _poll(self, voter: int, granted: bool, log_incomplete: bool = False) -> bool:
        """Record a vote; True once the election is won.

        Raft §5.4.3 proves a winner holds every committed entry because some
        voter of its quorum holds each and grants only to a log at least as
        up to date as its own. A voter that cut a damaged tail may have lost
        entries it acknowledged, so it cannot vouch for them: the election is
        won by a quorum of the other voters' grants, or by every voter's (then
        each entry that still exists on any node was vouched for: what a whole
        cluster that lost its tails can still do, quorum.raft.recovery)."""
        voters = self._membership.voters
        if voter not in self._votes and voter in voters:  # a non-voter's answer decides nothing
            self._votes[voter] = granted
            if granted and log_incomplete:
                self._incomplete_votes.add(voter)
        granted_count = sum(1 for g in self._votes.values() if g)
        complete_count = granted_count - len(self._incomplete_votes)
        return complete_count >= self._quorum or granted_count == len(voters)

    def _lost_vote(self) -> bool:
        """Whether the election can no longer be won (_poll): a rejection rules out every voter's grant,
        and the voters yet to answer cannot bring the other grants to a quorum."""
        voter_count, quorum = len(self._membership.voters), self._quorum
        rejected = sum(1 for g in self._votes.values() if not g)
        if rejected > voter_count - quorum:
            return True
        complete = sum(1 for v, g in self._votes.items() if g and v not in self._incomplete_votes)
        unanswered = voter_count - len(self._votes)
        return rejected > 0 and complete + unanswered < quorum

    def _won_vote(self, kind: _Campaign) -> None:
        if kind is _Campaign.PRE_ELECTION:
            self._campaign(_Campaign.ELECTION)
        else:
            self._become_leader()

    # ------------------------------------------------------------- local API
    def propose(self, data: bytes) -> int:
        self._check_can_propose(len(data))
        index = self.log.last_index + 1
        self.log.append([Entry(index, self.term, data)])
        self._uncommitted_bytes += len(data)
        self._bcast_pending = True
        return index

    def propose_many(self, datas: Sequence[bytes]) -> int:
        """Append several proposals at once; returns the index of the first."""
        size = sum(len(d) for d in datas)
        self._check_can_propose(size)
        first = self.log.last_index + 1
        term = self.term
        self.log.append([Entry(first + k, term, d) for k, d in enumerate(datas)])
        self._uncommitted_bytes += size
        self._bcast_pending = True
        return first

    def _check_can_propose(self, size: int) -> None:
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id)
        if self._lead_transferee != NO_LEADER:
            raise ProposalDroppedError(f"leadership is being transferred to node {self._lead_transferee}")
        if self._uncommitted_bytes > 0 and self._uncommitted_bytes + size > self.config.uncommitted_bytes_max:
            raise ProposalDroppedError(
                f"too much uncommitted data ({self._uncommitted_bytes} bytes, limit "
                f"{self.config.uncommitted_bytes_max})"
            )

    def propose_conf_change(self, change: ConfChange) -> int:
        """Append a single-server membership change (dissertation §4.1); returns its index.

        Refused with ConfChangeError, in one line: while another change is uncommitted (one at a time, §4.1),
        before this leader has committed an entry of its own term (the fix to the single-server bug the
        dissertation's errata describe: a change may not follow an uncommitted one from an older term), a
        promotion of a learner not caught up or not answering (§4.2.1), a removal that leaves fewer reachable
        voters than a quorum of the new configuration, and any change the configuration itself refuses
        (Membership.changed).
        """
        self._check_can_propose(0)
        if self._config_index > self.log.committed:
            raise ConfChangeError(
                f"a membership change is in progress (entry {self._config_index} is not committed yet)"
            )
        if not self._committed_in_current_term():
            raise ConfChangeError("the leader has not committed an entry of its term yet; retry")
        new = self._membership.changed(change)
        n = change.node_id
        if change.kind is ChangeKind.PROMOTE:
            match, last = self._progress[n].match, self.log.last_index
            if match == 0:
                # A log shorter than the allowed lag would let a learner that never answered pass the test below:
                # a mistyped address, promoted, would be a voter that never votes. (A new member counts as
                # recently active until the next quorum check, so it is the match that tells.)
                raise ConfChangeError(f"node {n} is not caught up: it has not answered this leader yet")
            if match + self.config.learner_lag_entries_max < last:
                raise ConfChangeError(
                    f"node {n} is not caught up: it holds the log through {match}, the leader's ends at {last} "
                    f"(at most {self.config.learner_lag_entries_max} entries behind to be promoted)"
                )
        elif change.kind is ChangeKind.REMOVE and self._membership.role_of(n) is MemberRole.VOTER:
            reachable = [v for v in new.voters if v == self.node_id or self._reachable(v)]
            if len(reachable) < new.quorum:
                raise ConfChangeError(
                    f"removing node {n} would lose the quorum: {len(reachable)} of the remaining voters "
                    f"{list(new.voters)} are reachable, {new.quorum} needed"
                )
        index = self.log.last_index + 1
        data = encode_config(change, new)
        self.log.append([Entry(index, self.term, data, EntryKind.CONFIG)])
        self._uncommitted_bytes += len(data)
        self._configs.append((index, self.term, new))
        self._apply_membership()
        self._bcast_pending = True
        return index

    def _reachable(self, peer: int) -> bool:
        pr = self._progress.get(peer)
        return pr is not None and (pr.recent_active or pr.state is ProgressState.REPLICATE)

    def read_index(self, context: bytes) -> None:
        m = Message(MT.READ_INDEX, self.node_id, self.node_id, self.term, context=context)
        if self.role is Role.LEADER:
            self._leader_read_index(m)
        elif self.role is Role.FOLLOWER and self.leader_id != NO_LEADER:
            self._send(Message(MT.READ_INDEX, self.leader_id, self.node_id, self.term, context=context))
        # otherwise dropped: there is no leader to confirm the read; the caller times out

    def transfer_leadership(self, target: int) -> None:
        if self.role is not Role.LEADER or target == self.node_id or target not in self._membership.voters:
            return
        if self._lead_transferee == target:
            return
        self._lead_transferee = target
        # The transfer must finish within one election timeout or is abandoned.
        self._election_elapsed = 0
        if self._progress[target].match == self.log.last_index:
            self._send(Message(MT.TIMEOUT_NOW, target, self.node_id, self.term))
        else:
            self._send_append(target)

    def report_unreachable(self, peer: int) -> None:
        pr = self._progress.get(peer) if self.role is Role.LEADER else None
        if pr is not None and pr.state is ProgressState.REPLICATE:
            pr.become_probe()
            self._bcast_pending = True  # deferred followers may be needed for the quorum now

    def leader_unreachable(self, peer: int) -> bool:
        """The runner's transport saw its stream to `peer` break hard: the connection refused or reset
        right after it carried messages, not a mere silence. If `peer` is this follower's leader, start
        a pre-election now instead of waiting out the election timeout (RaftConfig.campaign_on_leader_loss);
        returns whether it did.

        A ZooKeeper follower does the same: when its connection to the
        leader drops it goes LOOKING at once (Follower.followLeader, then
        FastLeaderElection), which is why its failover takes well under an
        election timeout. Safety does not depend on the report's truth: a
        pre-election changes no term and no vote (thesis §9.6). What keeps it
        from disturbing a leader that is alive is check-quorum's leader
        stickiness: a node that still hears from its leader ignores the
        pre-vote, so a follower whose own link flapped gets no grant while the
        leader and the others make a majority, and follows the leader again
        at its next heartbeat, in the same term. When the leader is dead, every
        follower's stream to it breaks, so each has lost its lease too and
        grants (with 3 voters one grant wins, with 5 two): `_rank_pre_vote`
        has them grant the best candidate only, so that two such followers do
        not win pre-elections at once and split the real votes. The election
        timer keeps running meanwhile: at its timeout the usual rules return.
        """
        config = self.config
        if not (config.campaign_on_leader_loss and config.pre_vote and config.check_quorum):
            return False
        if self.role is not Role.FOLLOWER or peer == NO_LEADER or peer != self.leader_id:
            return False
        if not self._may_campaign():  # a learner or an observer waits for the voters to elect
            return False
        # A tag of this round, which the answers echo: a grant to an earlier round of ours, given while
        # its voter too had lost the leader, must not count once that voter follows the leader again.
        self._lost_round = b"leader-lost:%d" % self._rng.randrange(0, 1 << 62)
        self._campaign(_Campaign.PRE_ELECTION, self._lost_round)
        self._leader_lost = self._candidate_key()
        return True

    def report_snapshot(self, peer: int, ok: bool) -> None:
        pr = self._progress.get(peer) if self.role is Role.LEADER else None
        if pr is None or pr.state is not ProgressState.SNAPSHOT:
            return
        if not ok:
            pr.pending_snapshot = 0
        pr.become_probe()
        # Wait for the follower's next answer (heartbeat response) before probing.
        pr.probe_sent = True

    def snapshot_taken(self, meta: SnapshotMeta, compact_to: int) -> int:
        """Record a snapshot the runner took; compacts the log and returns the new compaction point."""
        invariant(meta.index <= self.log.applied, f"snapshot at {meta.index} beyond applied {self.log.applied}")
        invariant(compact_to <= meta.index, "compaction beyond the snapshot")
        invariant(self.log.term(meta.index) in (meta.term, None), "snapshot term does not match the log")
        if self.snapshot is None or meta.index > self.snapshot.index:
            self.snapshot = meta
        self.log.compact(min(compact_to, self.log.stable_index))
        # Configurations in the compacted part: the latest of them is the log start's configuration now.
        while self._configs and self._configs[0][0] <= self.log.compacted_index:
            index, _, m = self._configs.pop(0)
            self._base_config = (index, m)
        return self.log.compacted_index

    # --------------------------------------------------------------- messages
    def step(self, m: Message) -> None:
        invariant(m.to == self.node_id, f"message for {m.to} stepped into {self.node_id}")
        if m.term > self.term:
            if m.type in (MT.VOTE, MT.PRE_VOTE):
                force = m.context == CAMPAIGN_TRANSFER
                in_lease = (
                    self.config.check_quorum
                    and self.leader_id != NO_LEADER
                    and self._election_elapsed < self.config.election_timeout_ticks
                )
                if in_lease and not force:
                    # Leader stickiness: while we hear from a leader, a
                    # disruptive candidate gets no answer at all.
                    return
            if m.type is MT.PRE_VOTE or (m.type is MT.PRE_VOTE_RESP and not m.reject):
                pass  # pre-votes carry a future term; they change nothing here
            elif m.type in (MT.APPEND, MT.HEARTBEAT, MT.SNAPSHOT, MT.COMMIT, MT.DURABLE):
                self._become_follower(m.term, m.frm)
            else:
                self._become_follower(m.term, NO_LEADER)
        elif m.term < self.term:
            if (self.config.check_quorum or self.config.pre_vote) and m.type in (MT.HEARTBEAT, MT.APPEND):
                # A stale leader (partitioned, now back) learns our term from
                # this answer and steps down; otherwise, with pre-vote, nobody
                # would ever raise the term it sees.
                self._send(Message(MT.APPEND_RESP, m.frm, self.node_id, self.term))
            elif m.type is MT.PRE_VOTE:
                self._send(Message(MT.PRE_VOTE_RESP, m.frm, self.node_id, self.term, reject=True))
            return

        if m.type in (MT.VOTE, MT.PRE_VOTE):
            self._handle_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role is Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    def _handle_vote_request(self, m: Message) -> None:
        if m.type is MT.PRE_VOTE and self._leader_lost is not None and self._rank_pre_vote(m):
            return
        can_vote = (
            self.vote == m.frm
            or (self.vote == NO_VOTE and self.leader_id == NO_LEADER)
            or (m.type is MT.PRE_VOTE and m.term > self.term)
        )
        resp_type = MT.VOTE_RESP if m.type is MT.VOTE else MT.PRE_VOTE_RESP
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            # A grant answers in the candidate's term (for a pre-vote, the future term).
            self._send(
                Message(resp_type, m.frm, self.node_id, m.term, log_incomplete=self.log_incomplete, context=m.context)
            )
            if m.type is MT.VOTE:
                self._election_elapsed = 0
                self.vote = m.frm
        else:
            self._send(Message(resp_type, m.frm, self.node_id, self.term, reject=True, context=m.context))

    def _candidate_key(self) -> tuple[int, int, int]:
        return (self.log.last_term, self.log.last_index, self.node_id)

    def _rank_pre_vote(self, m: Message) -> bool:
        """A pre-vote while this node looks for a new leader after its stream to the old one broke
        (`leader_unreachable`): granted only to the best candidate seen since, ranked as ZooKeeper's
        FastLeaderElection.totalOrderPredicate ranks votes (the more up-to-date log, then the higher id).
        Returns whether `m` was answered here (refused); a grant follows the usual rules.

        Every follower of a dead leader campaigns at once, so without a rank
        each would grant the others' pre-votes, all would win, and the real
        votes would split until an election timeout. A pre-candidate that
        meets a better candidate steps back; one that refuses a worse rival
        sends its own pre-vote to it again: the rival campaigns, so it has
        lost its leader too and grants now, though it may have ignored the
        first one while it still heard from the old leader.
        """
        best = self._leader_lost
        assert best is not None
        rival = (m.log_term, m.index, m.frm)
        if rival >= best:
            if self.role is Role.PRE_CANDIDATE:
                self._become_follower(self.term, NO_LEADER)  # steps back: the rival's campaign wins sooner
            self._leader_lost = rival
            return False
        self._send(Message(MT.PRE_VOTE_RESP, m.frm, self.node_id, self.term, reject=True, context=m.context))
        if self.role is Role.PRE_CANDIDATE:
            last_term, last_index, _ = self._candidate_key()
            self._send(Message(MT.PRE_VOTE, m.frm, self.node_id, self.term + 1, log_term=last_term, index=last_index,
                               context=self._lost_round))  # fmt: skip
        return True

    # ---- follower
    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t is MT.APPEND:
            self._election_elapsed = 0
            self.leader_id = m.frm
            self._handle_append(m)
        elif t is MT.HEARTBEAT:
            self._election_elapsed = 0
            self.leader_id = m.frm
            self._handle_heartbeat(m)
        elif t is MT.COMMIT:
            self._election_elapsed = 0
            self.leader_id = m.frm
            self._handle_commit(m)
        elif t is MT.DURABLE:
            self._election_elapsed = 0
            self.leader_id = m.frm
            self._leader_durable = max(self._leader_durable, m.index)
            self._commit_durable_pair()
        elif t is MT.SNAPSHOT:
            self._election_elapsed = 0
            self.leader_id = m.frm
            self._handle_snapshot(m)
        elif t is MT.TIMEOUT_NOW:
            self._campaign(_Campaign.TRANSFER)  # nothing when this node is no voter
        elif t is MT.READ_INDEX_RESP:
            self._read_states.append(ReadState(m.index, m.context))
        elif t is MT.READ_INDEX:
            if self.leader_id != NO_LEADER:
                self._send(Message(MT.READ_INDEX, self.leader_id, self.node_id, self.term, context=m.context))

    def _handle_append(self, m: Message) -> None:
        if m.index < self.log.committed:
            self._send(Message(MT.APPEND_RESP, m.frm, self.node_id, self.term, index=self.log.committed))
            return
        last_new = self.log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            if m.entries and (self._configs or EntryKind.CONFIG in map(_KIND, m.entries)):
                self._configs_after_append(m.index, m.entries)
            self._send(Message(MT.APPEND_RESP, m.frm, self.node_id, self.term, index=last_new))
            return
        # Reject with a hint: the last index whose term is <= the leader's
        # previous term, so that the leader can skip a whole term at once.
        hint = self.log.find_conflict_by_term(min(m.index, self.log.last_index), m.log_term)
        hint_term = self.log.term(hint) or 0
        self._send(
            Message(
                MT.APPEND_RESP,
                m.frm,
                self.node_id,
                self.term,
                index=m.index,
                reject=True,
                reject_hint=hint,
                log_term=hint_term,
                # The leader's record of what this node holds may be too high (it lost acknowledged entries):
                # it must start over from the hint (Progress.regressed).
                log_incomplete=self.log_incomplete,
            )
        )

    def _handle_commit(self, m: Message) -> None:
        # Log matching (Raft §5.3): holding the leader's entry at m.index means
        # holding everything before it, so the commit may advance that far.
        if self.log.match_term(m.index, m.log_term):
            self.log.commit_to(min(m.commit, m.index))

    def _commit_durable_pair(self) -> None:
        """As a follower: commit what both the leader (DURABLE) and this node hold on disk, when two
        copies are a quorum.

        Raft §5.4.2: an entry of the current term stored on a majority is
        committed. An entry of this term here is the leader's own entry at that
        index (Log Matching), so holding it durably here and the leader holding
        its log durably through that index makes two copies.
        """
        if self._quorum != 2 or not self._is_voter or self._config_index > self.log.committed:
            return  # two copies are a majority only of a settled configuration of 3 voters that counts us
        index = min(self._leader_durable, self.log.stable_index)
        if index > self.log.committed and self.log.term(index) == self.term:
            self.log.commit_to(index)

    def _handle_heartbeat(self, m: Message) -> None:
        self.log.commit_to(min(m.commit, self.log.last_index))
        self._send(Message(MT.HEARTBEAT_RESP, m.frm, self.node_id, self.term, context=m.context))

    def _handle_snapshot(self, m: Message) -> None:
        s = m.snapshot
        invariant(s is not None, "SNAPSHOT message without metadata")
        assert s is not None
        if s.index <= self.log.committed:
            self._send(Message(MT.APPEND_RESP, m.frm, self.node_id, self.term, index=self.log.committed))
            return
        if self.log.match_term(s.index, s.term):
            # We already have the snapshot's last entry: just fast-forward the commit.
            self.log.commit_to(s.index)
            self._send(Message(MT.APPEND_RESP, m.frm, self.node_id, self.term, index=self.log.last_index))
            return
        self.log.restore(s)
        self.snapshot = s
        self._base_config = (s.config_index, membership_of(s))
        self._configs = []
        self._apply_membership()
        self._send(Message(MT.APPEND_RESP, m.frm, self.node_id, self.term, index=s.index))

    # ---- candidate (pre or real)
    def _step_candidate(self, m: Message) -> None:
        t = m.type
        if t is MT.APPEND:
            self._become_follower(m.term, m.frm)
            self._handle_append(m)
        elif t is MT.HEARTBEAT:
            self._become_follower(m.term, m.frm)
            self._handle_heartbeat(m)
        elif t is MT.COMMIT:
            self._become_follower(m.term, m.frm)
            self._handle_commit(m)
        elif t is MT.SNAPSHOT:
            self._become_follower(m.term, m.frm)
            self._handle_snapshot(m)
        elif t is MT.PRE_VOTE_RESP and self._leader_lost is not None and m.context != self._lost_round:
            pass  # an answer to an earlier round of ours (leader_unreachable says why it must not count)
        elif (t is MT.PRE_VOTE_RESP and self.role is Role.PRE_CANDIDATE) or (
            t is MT.VOTE_RESP and self.role is Role.CANDIDATE
        ):
            kind = _Campaign.PRE_ELECTION if self.role is Role.PRE_CANDIDATE else _Campaign.ELECTION
            if self._poll(m.frm, not m.reject, m.log_incomplete):
                self._won_vote(kind)
            elif self._lost_vote():
                self._become_follower(self.term, NO_LEADER)

    # ---- leader
    def _step_leader(self, m: Message) -> None:
        t = m.type
        if t is MT.READ_INDEX:
            self._leader_read_index(m)
            return
        pr = self._progress.get(m.frm)
        if pr is None:
            return
        pr.recent_active = True
        if t is MT.APPEND_RESP or t is MT.HEARTBEAT_RESP:
            now_eager = pr.lazy_commits and not m.lazy_commits
            pr.lazy_commits = m.lazy_commits
            if t is MT.APPEND_RESP:
                self._handle_append_response(m, pr)
            else:
                self._handle_heartbeat_response(m, pr)
            if now_eager and not self._bcast_pending:
                # It wants commits again (a client connected there): the
                # commits (and entries) it was spared go out now, not with the
                # next write. A pending broadcast includes it already.
                self._send_append(m.frm, commit_only=True)

    def _handle_append_response(self, m: Message, pr: Progress) -> None:
        if m.reject:
            hint = m.reject_hint
            if m.log_term > 0:
                hint = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
            if m.log_incomplete and hint < pr.match:
                # The follower cut a torn or damaged tail it had acknowledged (quorum.raft.recovery): the
                # match recorded for it is gone, and a rejection at or below it would otherwise be ignored
                # as stale forever. Lowering a match only delays commits; it never commits anything.
                pr.regressed(hint)
                self._send_append(m.frm)
                return
            if pr.maybe_decrease_to(m.index, hint):
                if pr.state is ProgressState.REPLICATE:
                    pr.become_probe()
                    self._bcast_pending = True  # deferred followers may be needed for the quorum now
                self._send_append(m.frm)
            return
        was_paused = pr.is_paused()
        if not pr.maybe_update(m.index):
            return
        if pr.state is ProgressState.PROBE:
            pr.become_replicate()
        elif pr.state is ProgressState.SNAPSHOT:
            if pr.match >= pr.pending_snapshot:
                pr.become_probe()
                pr.become_replicate()
        else:
            pr.free_acknowledged(m.index)
        if self._maybe_commit():
            self._bcast_pending = True
        elif (was_paused or pr.state is ProgressState.REPLICATE) and m.frm not in self._deferred_followers():
            # Keep the pipe full: send what the follower does not have yet.
            while pr.next <= self.log.last_index and self._send_append(m.frm, send_if_empty=False):
                pass
        if m.frm == self._lead_transferee and pr.match == self.log.last_index:
            self._send(Message(MT.TIMEOUT_NOW, m.frm, self.node_id, self.term))

    def _handle_heartbeat_response(self, m: Message, pr: Progress) -> None:
        pr.probe_sent = False
        if pr.state is ProgressState.REPLICATE and pr.inflight_full():
            pr.free_first()  # an ack was lost; let one more append out
        if pr.match < self.log.last_index:
            # Even an empty append helps: if an earlier append was lost, the
            # follower rejects this one and the leader goes back to probing.
            self._send_append(m.frm)
        voters = self._membership.voters
        if m.context and m.frm in voters and self._read_only.ack(m.frm, m.context, voters) >= self._quorum:
            for req in self._read_only.release_through(m.context):
                self._answer_read(req.requester, req.index, req.context)

    def _leader_read_index(self, m: Message) -> None:
        if self._membership.voters == (self.node_id,):
            if self._committed_in_current_term():
                self._answer_read(m.frm, self.log.committed, m.context)
            else:
                self._pending_reads.append(m)
            return
        if not self._committed_in_current_term():
            # A new leader's commit index may be stale until its own no-op
            # commits (etcd committedEntryInCurrentTerm).
            self._pending_reads.append(m)
            return
        if self._read_only.add(self._read_floor(), m.context, m.frm):
            self._read_only.ack(self.node_id, m.context, self._membership.voters)
            self._bcast_heartbeat()

    def _read_floor(self) -> int:
        """The index a read issued now must see: our commit index, or further where a follower may
        have committed entries by itself on our DURABLE notice (and shown them to its clients)
        before their acknowledgement reached us. The read then waits for them to commit here."""
        floor = max(self.log.committed, self._removed_durable)
        for p in self._peers:
            floor = max(floor, self._progress[p].durable_sent)
        return floor

    def _answer_read(self, requester: int, index: int, context: bytes) -> None:
        if requester == self.node_id:
            self._read_states.append(ReadState(index, context))
        else:
            self._send(Message(MT.READ_INDEX_RESP, requester, self.node_id, self.term, index=index, context=context))

    def _committed_in_current_term(self) -> bool:
        return self.log.term(self.log.committed) == self.term

    def _maybe_commit(self) -> bool:
        # Only the voters of the latest configuration count, this leader too only when it is one (§4.2.2).
        matches = sorted([pr.match for pr in self._voter_progress], reverse=True)
        candidate = matches[self._quorum - 1]
        # Raft §5.4.2: only entries of the current term commit by counting.
        if candidate <= self.log.committed or self.log.term(candidate) != self.term:
            return False
        old = self.log.committed
        self.log.commit_to(candidate)
        if self._uncommitted_bytes:
            for i in range(old + 1, candidate + 1):
                self._uncommitted_bytes -= len(self.log.entry(i).data)
            self._uncommitted_bytes = max(self._uncommitted_bytes, 0)
        if self._pending_reads and self._committed_in_current_term():
            pending, self._pending_reads = self._pending_reads, []
            for r in pending:
                self._leader_read_index(r)
        return True

    # ---------------------------------------------------------------- sending
    def _send(self, m: Message) -> None:
        if self._lazy_commits and m.type in _FOLLOWER_ANSWERS:
            m = replace(m, lazy_commits=True)
        self._msgs.append(m)

    def _send_append(
        self, to: int, send_if_empty: bool = True, commit_only: bool = False, through: int | None = None
    ) -> bool:
        """`commit_only`: with nothing to replicate, send a COMMIT rather than an empty APPEND (a
        broadcast of the commit index; an empty APPEND also probes for lost appends, by its rejection).
        `through`: send no entry beyond this index."""
        pr = self._progress[to]
        if pr.is_paused():
            return False
        prev = pr.next - 1
        prev_term = self.log.term(prev)
        if prev_term is None or pr.next < self.log.first_index:
            return self._send_snapshot(to, pr)
        end = self.log.last_index + 1 if through is None else min(through, self.log.last_index) + 1
        entries = self.log.slice(pr.next, end, self.config.append_entries_max, self.config.append_bytes_max)
        if not entries and not send_if_empty:
            return False
        if not entries and commit_only and pr.state is ProgressState.REPLICATE:
            if pr.lazy_commits or max(pr.commit_sent, min(pr.durable_sent, pr.match)) >= self.log.committed:
                # The next APPEND or HEARTBEAT carries it (set_lazy_commits), or it has it, or it
                # commits it by itself: it acknowledged the entries and had our DURABLE for them.
                return False
            # Nothing to replicate: only the commit index is news.
            self._send(Message(MT.COMMIT, to, self.node_id, self.term, log_term=prev_term, index=prev,
                               commit=self.log.committed))  # fmt: skip
            pr.commit_sent = self.log.committed
            return True
        self._send(
            Message(
                MT.APPEND,
                to,
                self.node_id,
                self.term,
                log_term=prev_term,
                index=prev,
                entries=tuple(entries),
                commit=self.log.committed,
            )
        )
        pr.commit_sent = self.log.committed
        if entries:
            pr.sent_entries(entries[-1].index)
        elif pr.state is ProgressState.PROBE:
            pr.probe_sent = True
        return True

    def _send_snapshot(self, to: int, pr: Progress) -> bool:
        if not pr.recent_active or self.snapshot is None:
            return False
        invariant(self.snapshot.index >= self.log.compacted_index, "latest snapshot behind the compaction point")
        self._send(Message(MT.SNAPSHOT, to, self.node_id, self.term, snapshot=self.snapshot))
        pr.become_snapshot(self.snapshot.index)
        return True

    def _bcast_append(self) -> None:
        deferred = self._deferred_followers()
        for p in self._peers:
            if p not in deferred:
                self._send_append(p, commit_only=True)
            elif not self._progress[p].lazy_commits:
                # It serves clients, so it gets each entry once the entry commits,
                # together with the commit index (a ZooKeeper observer's INFORM).
                self._send_append(p, commit_only=True, through=self.log.committed)

    def _notify_durable(self) -> None:
        """Tell the followers that wait for commits (they have clients) and have been sent entries they
        have not acknowledged yet that our log is on disk through them (MessageType.DURABLE).

        Only where the leader and one follower make a quorum (RaftConfig.durable_notice): there such a
        follower commits by itself once it holds the entries too, instead of
        acknowledging and waiting for our COMMIT (`_send_append` then sends
        none): its clients learn the commit two network hops sooner.
        """
        stable = self.log.stable_index
        if not self.config.durable_notice or self._quorum != 2 or self.log.term(stable) != self.term:
            return
        if not self._is_voter or self._config_index > self.log.committed:
            return  # while the configuration changes, commits go by counting only
        for p in self._voter_peers:
            pr = self._progress[p]
            if pr.state is not ProgressState.REPLICATE or pr.lazy_commits or pr.match >= stable:
                continue
            index = min(stable, pr.next - 1)
            # Only an entry of this term can commit this way; at or below the commit index it is COMMIT's business.
            if index > max(pr.match, pr.durable_sent, self.log.committed) and self.log.term(index) == self.term:
                self._send(Message(MT.DURABLE, p, self.node_id, self.term, index=index))
                pr.durable_sent = index

    def _deferred_followers(self) -> list[int]:
        """Followers that do not get new entries at once while the others make a quorum (deferred replication).

        Each entry sent to a follower costs the leader a write and a read, and
        the follower a read, an fsync and an answer. A commit needs only a
        quorum's answers, so while the leader and enough followers streaming
        without trouble make one, the others are spared (RaftConfig.deferred_replication):

        * a follower that asked for lazy commits serves no reads, so it has no
          use for an entry until the leader fails or it is needed to commit: it
          is brought up to date once per heartbeat interval
          (`_handle_heartbeat_response`), in one append;
        * a follower that serves clients gets each entry once it commits,
          together with the commit index (`_bcast_append`), as a ZooKeeper
          observer does: its clients see a write one fsync later, and the
          followers that vote see it sooner, with one fsync fewer competing.

        Followers that serve clients are kept streaming before lazy ones, the
        lowest ids first. Only followers streaming without trouble count: one
        that is probing, or `stalled` (an append sent before the previous
        heartbeat still unanswered at this one), does not, and the next in line
        streams instead. Safety does not depend on any of this: a commit still
        needs a quorum's acknowledgements.
        """
        if not self.config.deferred_replication:
            return []
        serving: list[int] = []
        lazy: list[int] = []
        # Learners and observers are never deferred: they do not count, and a learner must catch up.
        streaming = 1 if self._is_voter else 0  # the leader itself
        for p in self._voter_peers:
            pr = self._progress[p]
            if pr.state is not ProgressState.REPLICATE or pr.stalled:
                continue
            if p == self._lead_transferee:
                streaming += 1
            elif pr.lazy_commits:
                lazy.append(p)
            else:
                serving.append(p)
        return (serving + lazy)[max(0, self._quorum - streaming) :]

    def _bcast_heartbeat(self) -> None:
        context = self._read_only.last_context()
        for p in self._peers:
            pr = self._progress[p]
            # Never let a heartbeat commit beyond what the follower is known to hold.
            self._send(
                Message(
                    MT.HEARTBEAT, p, self.node_id, self.term, commit=min(pr.match, self.log.committed), context=context
                )
            )

    # ------------------------------------------------------------------ Ready
    def _hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed)

    def has_ready(self) -> bool:
        return bool(
            self._bcast_pending
            or self._msgs
            or self._read_states
            or self.log.has_unstable()
            or self.log.pending_snapshot is not None
            or self.log.has_next_committed()
            or self._hard_state() != self._prev_hard_state
        )

    def unstable_entry_count(self) -> int:
        """How many entries the next Ready will ask to persist (the runner picks where to fsync by it)."""
        return self.log.last_index - self.log.stable_index

    def has_pending_snapshot(self) -> bool:
        return self.log.pending_snapshot is not None

    def ready(self, withhold_committed: bool = False) -> Ready:
        """What to persist, send and apply now. `withhold_committed`: when there are messages, leave the
        committed entries to the next Ready (the runner sends the messages before it applies them);
        without messages there is nothing to send first, and a second Ready would only cost time."""
        invariant(not self._ready_outstanding, "ready() called twice without advance()")
        if not self._is_voter and self.role is Role.LEADER and self._removed_leader_done():
            self._step_down_removed()
        if self._bcast_pending and self.role is Role.LEADER:
            self._bcast_append()
        self._bcast_pending = False
        hs = self._hard_state()
        prev = self._prev_hard_state
        entries = self.log.unstable_entries()
        snapshot = self.log.pending_snapshot
        withhold = withhold_committed and bool(self._msgs)
        committed = () if withhold else self.log.next_committed(COMMITTED_ENTRIES_PER_READY_MAX)
        rd = Ready(
            soft_state=SoftState(self.role, self.leader_id),
            hard_state=hs if hs != prev else None,
            entries=entries,
            snapshot=snapshot,
            committed_entries=committed,
            messages=tuple(self._msgs),
            read_states=tuple(self._read_states),
            must_sync=bool(entries) or snapshot is not None or hs.term != prev.term or hs.vote != prev.vote,
        )
        self._msgs = []
        self._read_states = []
        self._ready_outstanding = True
        return rd

    def persisted(self, rd: Ready) -> tuple[Message, ...]:
        """The runner has persisted `rd` and not yet called `advance(rd)`: take note of it now and return
        the messages that allows, to send at once (a leader's DURABLE notices, RaftConfig.durable_notice).
        Optional: `advance` does the same for a Ready it was not called for.

        A follower that commits on the leader's DURABLE notice waits for it once
        its own fsync is done; with the next Ready, the notice would leave only
        after this Ready's apply and advance and the next one's making."""
        invariant(self._ready_outstanding, "persisted() without ready()")
        if self._persisted is rd:
            return ()
        self._persisted = rd
        queued = len(self._msgs)
        self._mark_persisted(rd)
        sendable = tuple(self._msgs[queued:])
        del self._msgs[queued:]
        return sendable

    def advance(self, rd: Ready) -> None:
        invariant(self._ready_outstanding, "advance() without ready()")
        self._ready_outstanding = False
        if self._persisted is not rd:
            self._mark_persisted(rd)
        self._persisted = None
        if rd.committed_entries:
            self.log.applied_to(rd.committed_entries[-1].index)

    def _mark_persisted(self, rd: Ready) -> None:
        if rd.hard_state is not None:
            self._prev_hard_state = rd.hard_state
        if rd.snapshot is not None:
            self.log.snapshot_persisted(rd.snapshot)
        if rd.entries:
            last = rd.entries[-1]
            self.log.stable_to(last.index, last.term)
            if self.role is Role.LEADER:
                # The leader counts its own entry only once it is on its disk.
                me = self._progress[self.node_id]
                if me.maybe_update(self.log.stable_index):
                    self._notify_durable()
                    if self._maybe_commit():
                        self._bcast_pending = True
            else:
                self._commit_durable_pair()


def membership_of(meta: SnapshotMeta) -> Membership:
    """The configuration a snapshot carries."""
    return Membership(meta.voters, meta.learners, meta.observers, meta.config_context)


def decode_membership(data: bytes) -> Membership:
    """The configuration a CONFIG entry made; a malformed one is a bug (every node wrote it with encode_config)."""
    try:
        return decode_config(data)[1]
    except ValueError as e:
        raise InvariantViolation(f"malformed configuration entry: {e}") from e
