"""Value objects of the pure Raft core: entries, messages, hard state, Ready.

Everything here is immutable and free of I/O. The node runner translates
these to and from protobuf in `quorum.codec`; nothing else touches the wire
format (STYLE 8).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class EntryKind(enum.IntEnum):
    NORMAL = 0
    # The empty entry a new leader appends so that it can commit (and serve
    # ReadIndex) in its own term: Raft §8, etcd becomeLeader.
    NOOP = 1
    # A membership change (quorum.raft.membership): its data is the change and the whole new configuration.
    # Each node uses it as soon as it is in its log, committed or not (Raft dissertation §4.1).
    CONFIG = 2


# The values that move on every write (entries, messages, Readies and their states) are
# immutable by convention, not frozen: a frozen dataclass builds each field through
# object.__setattr__, several times slower per value, and a write builds a dozen of them
# on its way through three nodes. unsafe_hash keeps them hashable.


@dataclass(slots=True, unsafe_hash=True)
class Entry:
    index: int
    term: int
    data: bytes = b""
    kind: EntryKind = EntryKind.NORMAL


NO_VOTE = 0  # node ids start at 1


@dataclass(slots=True, unsafe_hash=True)
class HardState:
    """What must be durable before voting or acknowledging (Raft Fig. 2)."""

    term: int = 0
    vote: int = NO_VOTE
    commit: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """Describes a state-machine snapshot taken at `index` (whose entry had `term`).

    The snapshot bytes never enter the core; the runner streams them.
    """

    index: int
    term: int
    voters: tuple[int, ...]
    # The rest of the configuration in force at `index` (quorum.raft.membership), and the index of the
    # CONFIG entry that made it (0: the configuration the cluster started with).
    learners: tuple[int, ...] = ()
    observers: tuple[int, ...] = ()
    config_index: int = 0
    config_context: bytes = b""


class MessageType(enum.IntEnum):
    APPEND = 1
    APPEND_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    PRE_VOTE = 5
    PRE_VOTE_RESP = 6
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAPSHOT = 9  # the snapshot bytes travel beside it, in chunks
    TIMEOUT_NOW = 10  # leadership transfer: "campaign now"
    READ_INDEX = 11  # follower -> leader, forwarded ReadIndex request
    READ_INDEX_RESP = 12
    # Leader -> follower with nothing new to send: the commit index, checked
    # against the entry at `index`/`log_term` like an append, and answered by
    # nobody (ZooKeeper's COMMIT): an empty APPEND would cost each follower an
    # acknowledgement that tells the leader nothing it does not know.
    COMMIT = 13
    # Leader -> follower in a cluster where the leader and one follower make a
    # quorum: "my log is on my disk through `index`" (of this term), sent as the
    # leader's own fsync completes. A follower that holds the same entries on
    # its own disk then knows them committed (two copies of an entry of the
    # current term) and applies them without waiting for the leader to count
    # its acknowledgement and send a COMMIT: two network hops sooner for the
    # watches and reads of clients connected to it.
    DURABLE = 14


# Messages that promise nothing about the sender's durable state may leave
# before the Ready's entries and hard state are persisted: the leader writes
# its own log in parallel with its followers (Raft thesis §10.2.1). Votes,
# vote grants and append acknowledgements must wait for the fsync.
SENDABLE_BEFORE_PERSIST = frozenset(
    {
        MessageType.APPEND,
        MessageType.HEARTBEAT,
        MessageType.HEARTBEAT_RESP,
        MessageType.SNAPSHOT,
        MessageType.TIMEOUT_NOW,
        MessageType.READ_INDEX,
        MessageType.READ_INDEX_RESP,
        MessageType.PRE_VOTE,
        MessageType.PRE_VOTE_RESP,
        MessageType.COMMIT,
        # About entries the leader made durable in an earlier Ready (Raft.advance).
        MessageType.DURABLE,
    }
)


@dataclass(slots=True, unsafe_hash=True)
class Message:
    type: MessageType
    to: int
    frm: int
    term: int
    # APPEND: index/log_term of the entry preceding `entries`.
    # APPEND_RESP: index = last matching index (or rejected index), log_term = hint term.
    # VOTE/PRE_VOTE: index/log_term = candidate's last entry.
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: SnapshotMeta | None = None
    # ReadIndex request id (HEARTBEAT, READ_INDEX*), or b"transfer" on a VOTE
    # caused by leadership transfer (bypasses the leader lease, etcd campaignTransfer),
    # or the round of a pre-election on a broken leader stream (PRE_VOTE; Raft.leader_unreachable).
    # VOTE_RESP and PRE_VOTE_RESP echo their request's.
    context: bytes = b""
    # APPEND_RESP, HEARTBEAT_RESP: the follower does not need COMMIT messages
    # (Raft.set_lazy_commits); it learns the commit index from the next APPEND
    # or HEARTBEAT instead.
    lazy_commits: bool = False
    # VOTE_RESP, PRE_VOTE_RESP: the voter's log may lack entries it acknowledged before a damaged tail was
    # cut (quorum.raft.recovery): its grant counts toward a quorum only when every voter grants.
    log_incomplete: bool = False


CAMPAIGN_TRANSFER = b"transfer"


@dataclass(slots=True, unsafe_hash=True)
class ReadState:
    """A ReadIndex result: once applied >= index, a read tagged `context` is linearizable."""

    index: int
    context: bytes


@dataclass(slots=True, unsafe_hash=True)
class SoftState:
    role: Role
    leader: int  # 0 when unknown


@dataclass(slots=True, unsafe_hash=True)
class Ready:
    """Work the runner must do, in this order (etcd Ready contract):

    1. persist `snapshot` (if any), then `entries` (an entry at index i discards
       every persisted entry >= i), then `hard_state` (if any); fsync when
       `must_sync`;
    2. send `messages` (those in SENDABLE_BEFORE_PERSIST may go before step 1);
    3. install `snapshot` into the state machine, then apply `committed_entries`;
    4. call `Raft.advance(ready)`.
    """

    soft_state: SoftState
    hard_state: HardState | None = None
    entries: tuple[Entry, ...] = ()
    snapshot: SnapshotMeta | None = None
    committed_entries: tuple[Entry, ...] = ()
    messages: tuple[Message, ...] = ()
    read_states: tuple[ReadState, ...] = ()
    must_sync: bool = False


@dataclass(frozen=True, slots=True)
class PersistentState:
    """What a node restarts from: everything storage has made durable."""

    hard_state: HardState = field(default_factory=HardState)
    # Latest snapshot taken or installed, None before the first one.
    snapshot: SnapshotMeta | None = None
    # Entries <= compacted_index are gone from the log; compacted_term is
    # the term of entry compacted_index (0 when nothing was compacted).
    compacted_index: int = 0
    compacted_term: int = 0
    entries: tuple[Entry, ...] = ()
    # Nonzero after a damaged log tail was cut: this node may have acknowledged entries up to here that its
    # log no longer holds. Until its commit index reaches it, its votes count only in a unanimous election
    # (quorum.raft.recovery says why).
    repair_index: int = 0

    def term_at(self, index: int) -> int | None:
        """The term of the entry at `index` (the compaction point included), None when the log lacks it."""
        if index == self.compacted_index:
            return self.compacted_term
        k = index - self.compacted_index - 1
        return self.entries[k].term if 0 <= k < len(self.entries) else None
