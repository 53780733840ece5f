"""Configuration of the pure core, every limit named and validated (STYLE 10)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    node_id: int
    voters: tuple[int, ...]
    # A follower that hears nothing from a leader for a random number of
    # ticks in [election_timeout_ticks, 2 * election_timeout_ticks) campaigns.
    election_timeout_ticks: int = 10
    heartbeat_interval_ticks: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    # Flow control: appends in flight to one follower in replicate state, and
    # how much one append carries.
    inflight_appends_max: int = 64
    append_entries_max: int = 4096
    append_bytes_max: int = 4 * 1024 * 1024
    # Proposals beyond this many uncommitted bytes are refused (etcd MaxUncommittedEntriesSize).
    uncommitted_bytes_max: int = 64 * 1024 * 1024
    # ---- Extensions beyond etcd's protocol, each on by default and safe off (Raft.__doc__ states each).
    # Where the leader and one follower make a quorum (3 voters), the leader tells a follower that its own
    # log is durable through an index (MessageType.DURABLE), and the follower commits by itself once it
    # holds the entries durably too. Followers act on a notice whatever their own setting.
    durable_notice: bool = True
    # A follower that serves no clients (Raft.set_lazy_commits) learns commits from the leader's next APPEND
    # or HEARTBEAT, instead of a COMMIT message of its own. Off: every follower gets each commit at once.
    lazy_follower_commits: bool = True
    # While the leader and enough followers streaming without trouble make a quorum, the others get new
    # entries late (Raft._deferred_followers). Off: every follower gets each entry at once, as in etcd.
    deferred_replication: bool = True
    # A follower told that its stream to the leader broke (Raft.leader_unreachable: refused or reset, not a
    # silence) starts a pre-election at once instead of waiting out its election timeout; while it looks
    # for a new leader it grants pre-votes to the best candidate only. Acts only with pre_vote and
    # check_quorum on, which keep it from disturbing a leader that is alive. Off: such reports are ignored.
    campaign_on_leader_loss: bool = True
    # A learner is promoted to voter only when its log is at most this many entries behind the leader's
    # (Raft dissertation §4.2.1: a new voter that must first catch up leaves the cluster unavailable meanwhile).
    learner_lag_entries_max: int = 1000

    def __post_init__(self) -> None:
        if self.node_id < 1:
            raise ValueError(f"node id must be >= 1, got {self.node_id}")
        if len(set(self.voters)) != len(self.voters) or any(v < 1 for v in self.voters):
            raise ValueError(f"voters must be distinct ids >= 1, got {self.voters}")
        # `voters` is the configuration the cluster started with; a node outside it is a member added since
        # (the log or a snapshot names it), or one joining that has no configuration yet (voters empty).
        if self.heartbeat_interval_ticks < 1:
            raise ValueError("heartbeat_interval_ticks must be >= 1")
        if self.election_timeout_ticks <= self.heartbeat_interval_ticks:
            raise ValueError("election_timeout_ticks must exceed heartbeat_interval_ticks")
        if self.learner_lag_entries_max < 0:
            raise ValueError("learner_lag_entries_max must be >= 0")
        if self.inflight_appends_max < 1 or self.append_entries_max < 1 or self.append_bytes_max < 1:
            raise ValueError("flow-control limits must be >= 1")

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1
