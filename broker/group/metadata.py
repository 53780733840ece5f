"""A consumer group and its members (K28 `GroupMetadata.scala`, `MemberMetadata.scala`; docs/research/kafka.md §5.2).

Pure bookkeeping: the state table, generations, the leader (the first member
to join, re-chosen when it leaves), protocol selection and the callbacks of
members parked in JoinGroup or SyncGroup. No I/O, no clock, no asyncio: the
coordinator drives it and owns the timers.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.group.records import OffsetAndMetadata, StoredGroup, StoredMember
from client.kafka import errors
from client.kafka.consumer_protocol import ConsumerProtocolError, decode_subscription
from client.kafka.structs import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Valid previous states of each state (K28 GroupMetadata.scala l.36-118).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(Exception):
    """An invariant broke: the coordinator asked for a transition the table forbids."""


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a parked JoinGroup answers (Kafka's JoinGroupResult)."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str = ""
    protocol_name: str = ""
    leader_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()  # (member id, metadata): the leader's answer only
    member_instance_ids: tuple[str | None, ...] = ()  # each member's group.instance.id, in `members`' order


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str = ""
    protocol_name: str = ""


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's order of preference
    assignment: bytes = b""
    awaiting_join: Callable[[JoinResult], None] | None = None
    awaiting_sync: Callable[[SyncResult], None] | None = None
    is_new: bool = False
    group_instance_id: str | None = None  # KIP-345: a static member keeps its place across restarts
    # Bumped on each heartbeat, join or sync: an expiry timer armed for an older value is stale.
    heartbeat_epoch: int = 0

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise IllegalStateTransition(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata (Kafka's MemberMetadata.matches)."""
        return self.protocols == protocols


def select_protocol(members: list[MemberMetadata]) -> str:
    """The protocol every member supports that gets the most votes, each member voting for
    its most preferred candidate; ties go to the earlier candidate in the first member's
    list order (Kafka's `selectProtocol`: candidates in the order of `candidateProtocols`,
    `maxBy` keeps the first maximum)."""
    if not members:
        raise IllegalStateTransition("cannot select a protocol for an empty group")
    candidates = candidate_protocols(members)
    if not candidates:
        raise IllegalStateTransition("no protocol is supported by every member")
    votes = {name: 0 for name in candidates}
    for member in members:
        vote = next(name for name in member.protocol_names() if name in votes)
        votes[vote] += 1
    return max(candidates, key=lambda name: votes[name])


def candidate_protocols(members: list[MemberMetadata]) -> list[str]:
    """Protocols every member supports, in the first member's order."""
    if not members:
        return []
    common = set(members[0].protocol_names())
    for member in members[1:]:
        common &= set(member.protocol_names())
    return [name for name in members[0].protocol_names() if name in common]


@dataclass(slots=True)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    new_member_added: bool = False  # InitialDelayedJoin extends its delay while members keep arriving
    state_timestamp_ms: int = -1
    # KIP-394: member ids handed out with MEMBER_ID_REQUIRED that have not joined yet.
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id (KIP-345)

    # ------------------------------------------------------------ states

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int = -1) -> GroupState:
        """Moves to `target`, checking the table; returns the old state (for the one log line)."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not a legal transition"
            )
        old, self.state = self.state, target
        self.state_timestamp_ms = now_ms
        return old

    # ------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if member_id == self.leader_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A known group.instance.id whose member id is another one: a duplicate instance (FENCED_INSTANCE_ID)."""
        known = self.static_member_id(group_instance_id)
        return known is not None and known != member_id

    def replace_static_member(self, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """The static member `old_member_id` rejoined without its id: it carries on as `new_member_id`
        with its assignment (K28 GroupMetadata.replaceGroupInstance); the old id's parked calls are fenced."""
        member = self.members.pop(old_member_id)
        fenced = errors.FencedInstanceIdError.code
        join, member.awaiting_join = member.awaiting_join, None
        if join is not None:
            join(JoinResult(fenced, old_member_id))
        sync, member.awaiting_sync = member.awaiting_sync, None
        if sync is not None:
            sync(SyncResult(fenced))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(set(protocols) & set(candidate_protocols(self.all())))

    def all(self) -> list[MemberMetadata]:
        return list(self.members.values())

    def has_all_members_joined(self) -> bool:
        """Every member parked in JoinGroup and no member id handed out still to come back (K28)."""
        return not self.pending_members and all(m.awaiting_join is not None for m in self.members.values())

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        """Dynamic members that did not rejoin: a static member keeps its place until its session expires."""
        return [m for m in self.members.values() if m.awaiting_join is None and m.group_instance_id is None]

    def elect_joined_leader(self) -> bool:
        """Keeps a leader that rejoined, else makes any member that rejoined the leader; False if none did
        (K28 maybeElectNewJoinedLeader: a static member that did not rejoin cannot lead the next generation)."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group's members subscribe to, or None if unknown (not a consumer group, or
        metadata that does not parse), as K28 GroupMetadata.computeSubscribedTopics."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.protocol_name or not self.members:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata_for(self.protocol_name)).topics)
        except (ConsumerProtocolError, IllegalStateTransition):
            return None
        return topics

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------ generations

    def init_next_generation(self, now_ms: int) -> None:
        """generation += 1; a protocol is chosen and the group awaits the leader's sync, or is Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = select_protocol(self.all())
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        for member in self.members.values():
            member.is_new = False

    def join_result_for(self, member: MemberMetadata) -> JoinResult:
        """The current generation's JoinGroup answer for `member`: the leader gets every member's metadata."""
        protocol = self.protocol_name or ""
        members: tuple[tuple[str, bytes], ...] = ()
        instance_ids: tuple[str | None, ...] = ()
        if member.member_id == self.leader_id:
            members = tuple((m.member_id, m.metadata_for(protocol)) for m in self.members.values())
            instance_ids = tuple(m.group_instance_id for m in self.members.values())
        return JoinResult(
            error_code=errors.NONE,
            member_id=member.member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type or "",
            protocol_name=protocol,
            leader_id=self.leader_id or "",
            members=members,
            member_instance_ids=instance_ids,
        )

    def set_and_propagate_assignment(self, assignment: dict[str, bytes]) -> None:
        for member in self.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_sync(errors.NONE)

    def reset_and_propagate_assignment_error(self, error_code: int) -> None:
        for member in self.members.values():
            member.assignment = b""
        self._propagate_sync(error_code)

    def _propagate_sync(self, error_code: int) -> None:
        for member in self.members.values():
            callback, member.awaiting_sync = member.awaiting_sync, None
            if callback is not None:
                assignment = member.assignment if error_code == errors.NONE else b""
                callback(SyncResult(error_code, assignment, self.protocol_type or "", self.protocol_name or ""))

    # ------------------------------------------------------------ offset expiration

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past `offsets.retention.minutes` (K28 GroupMetadata.removeExpiredOffsets, KIP-211).

        A consumer group's offsets expire together, `retention_ms` after it became
        Empty; a group used only as an offset store (no protocol type) expires each
        offset `retention_ms` after its commit; an explicit (v1) expire timestamp wins.
        Offsets of a group with members never expire here.
        """
        if self.protocol_type is not None and not self.is_(GroupState.EMPTY):
            return []
        expired = []
        for tp, value in self.offsets.items():
            if value.expire_timestamp_ms is not None:
                due = value.expire_timestamp_ms <= now_ms
            elif self.protocol_type is not None:
                base = self.state_timestamp_ms if self.state_timestamp_ms >= 0 else value.commit_timestamp_ms
                due = base + retention_ms <= now_ms
            else:
                due = value.commit_timestamp_ms + retention_ms <= now_ms
            if due:
                expired.append(tp)
        return sorted(expired)

    # ------------------------------------------------------------ persistence

    def to_stored(self, now_ms: int) -> StoredGroup:
        protocol = self.protocol_name
        return StoredGroup(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp_ms=now_ms,
            members=tuple(
                StoredMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol else b"",
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_stored(cls, group_id: str, stored: StoredGroup) -> GroupMetadata:
        """A loaded group: Stable with its members, or Empty (K28 GroupMetadata.loadGroup)."""
        group = cls(
            group_id,
            state=GroupState.STABLE if stored.members else GroupState.EMPTY,
            generation_id=stored.generation,
            protocol_type=stored.protocol_type or None,
            protocol_name=stored.protocol,
            leader_id=stored.leader,
            state_timestamp_ms=stored.current_state_timestamp_ms,
        )
        for m in stored.members:
            group.members[m.member_id] = MemberMetadata(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=stored.protocol_type,
                protocols=[(stored.protocol or "", m.subscription)],
                assignment=m.assignment,
                group_instance_id=m.group_instance_id,
            )
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group
