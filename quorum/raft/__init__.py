"""The pure Raft core: no sockets, clocks, threads, files or module-level randomness."""

from quorum.raft.config import RaftConfig
from quorum.raft.core import Raft
from quorum.raft.errors import InvariantViolation, NotLeaderError, ProposalDroppedError, RaftError
from quorum.raft.membership import ChangeKind, ConfChange, ConfChangeError, MemberRole, Membership
from quorum.raft.types import (
    CAMPAIGN_TRANSFER,
    NO_VOTE,
    SENDABLE_BEFORE_PERSIST,
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

__all__ = [
    "CAMPAIGN_TRANSFER",
    "ChangeKind",
    "ConfChange",
    "ConfChangeError",
    "MemberRole",
    "Membership",
    "NO_VOTE",
    "SENDABLE_BEFORE_PERSIST",
    "Entry",
    "EntryKind",
    "HardState",
    "InvariantViolation",
    "Message",
    "MessageType",
    "NotLeaderError",
    "PersistentState",
    "ProposalDroppedError",
    "Raft",
    "RaftConfig",
    "RaftError",
    "ReadState",
    "Ready",
    "Role",
    "SnapshotMeta",
    "SoftState",
]
