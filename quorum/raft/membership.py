"""Cluster membership as log entries: single-server changes (Raft dissertation §4.1-4.3).

A configuration names the voters, the learners and the observers. Learners
and observers are both non-voting members (etcd tracker/ calls them learners):
the leader replicates to them, but they never count toward a commit or an
election and never campaign. A learner is on its way to becoming a voter
(dissertation §4.2.1: a new server catches up before it counts); an observer
stays non-voting for good (ZooKeeper's `peerType=observer`).

A change adds or removes one server at a time, so that any majority of the
old voters and any majority of the new ones overlap (§4.1); the new
configuration is a log entry (EntryKind.CONFIG) that each node uses as soon as
it is appended, committed or not (§4.1). Each configuration carries an opaque
`context` the core never reads: the node runner keeps in it how to reach every
member (their addresses), so that a member that joins learns them from the log
or from a snapshot.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from quorum.raft.errors import RaftError


class ConfChangeError(RaftError):
    """A membership change the leader refuses; the message says why, in one line."""


class ChangeKind(enum.IntEnum):
    ADD_LEARNER = 1
    ADD_OBSERVER = 2
    PROMOTE = 3  # a caught-up learner becomes a voter
    REMOVE = 4


class MemberRole(enum.Enum):
    VOTER = "voter"
    LEARNER = "learner"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class ConfChange:
    kind: ChangeKind
    node_id: int
    # Opaque to the core: the runner's address book of the new configuration.
    context: bytes = b""


@dataclass(frozen=True, slots=True)
class Membership:
    voters: tuple[int, ...]
    learners: tuple[int, ...] = ()
    observers: tuple[int, ...] = ()
    context: bytes = b""

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def members(self) -> tuple[int, ...]:
        return self.voters + self.learners + self.observers

    def role_of(self, node_id: int) -> MemberRole | None:
        if node_id in self.voters:
            return MemberRole.VOTER
        if node_id in self.learners:
            return MemberRole.LEARNER
        if node_id in self.observers:
            return MemberRole.OBSERVER
        return None

    def changed(self, change: ConfChange) -> Membership:
        """The configuration after `change`, or ConfChangeError naming what is wrong with it."""
        n = change.node_id
        role = self.role_of(n)
        kind = change.kind
        if n < 1:
            raise ConfChangeError(f"node id must be >= 1, got {n}")
        if kind in (ChangeKind.ADD_LEARNER, ChangeKind.ADD_OBSERVER):
            if role is not None:
                raise ConfChangeError(f"node {n} is already a member ({role.value})")
            if kind is ChangeKind.ADD_LEARNER:
                return Membership(self.voters, self.learners + (n,), self.observers, change.context)
            return Membership(self.voters, self.learners, self.observers + (n,), change.context)
        if role is None:
            raise ConfChangeError(f"unknown node id {n}: not a member of the quorum")
        if kind is ChangeKind.PROMOTE:
            if role is MemberRole.VOTER:
                raise ConfChangeError(f"node {n} is already a voter")
            if role is MemberRole.OBSERVER:
                raise ConfChangeError(f"node {n} is an observer: remove it and add it again to make it a voter")
            learners = tuple(x for x in self.learners if x != n)
            return Membership(self.voters + (n,), learners, self.observers, change.context)
        if role is MemberRole.VOTER and len(self.voters) == 1:
            raise ConfChangeError(f"node {n} is the only voter: removing it would leave no quorum")
        return Membership(
            tuple(x for x in self.voters if x != n),
            tuple(x for x in self.learners if x != n),
            tuple(x for x in self.observers if x != n),
            change.context,
        )


# A configuration entry's data: version, change kind, changed id, counts of voters/learners/observers, the ids,
# the context's length and the context.
_HEAD = struct.Struct(">BBQHHHI")
_VERSION = 1


def encode_config(change: ConfChange, membership: Membership) -> bytes:
    ids = membership.voters + membership.learners + membership.observers
    head = _HEAD.pack(
        _VERSION,
        change.kind,
        change.node_id,
        len(membership.voters),
        len(membership.learners),
        len(membership.observers),
        len(membership.context),
    )
    return head + struct.pack(f">{len(ids)}Q", *ids) + membership.context


def decode_config(data: bytes) -> tuple[ConfChange, Membership]:
    """The change and the configuration it made, from a CONFIG entry's data (ValueError when malformed)."""
    if len(data) < _HEAD.size:
        raise ValueError(f"configuration entry of {len(data)} bytes is shorter than its header")
    version, kind, node_id, nv, nl, no, nc = _HEAD.unpack_from(data)
    if version != _VERSION:
        raise ValueError(f"configuration entry version {version} unknown")
    count = nv + nl + no
    end = _HEAD.size + 8 * count
    if len(data) != end + nc:
        raise ValueError(f"configuration entry of {len(data)} bytes, its header says {end + nc}")
    ids = struct.unpack_from(f">{count}Q", data, _HEAD.size)
    membership = Membership(ids[:nv], ids[nv : nv + nl], ids[nv + nl :], bytes(data[end:]))
    context = membership.context
    return ConfChange(ChangeKind(kind), node_id, context), membership
