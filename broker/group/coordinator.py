"""The group coordinator (K28 `GroupCoordinator.scala` + the cache side of `GroupMetadataManager.scala`).

It owns the groups of the `__consumer_offsets` partitions this broker leads
(docs/research/kafka.md §5.1-5.3). Everything runs on the broker's event loop;
a group's state only changes in code between two awaits, so no locks. The
only awaits are the store's appends (acks=all) and parked requests:

* JoinGroup parks until the rebalance completes: every known member rejoined
  (Kafka's DelayedJoin, bounded by the largest rebalance timeout) or, for a
  group that was Empty, `group.initial.rebalance.delay.ms` passed without a
  new member arriving (InitialDelayedJoin, extended up to the rebalance
  timeout). Then the generation moves on and every parked join is answered;
  the leader gets every member's metadata.
* SyncGroup of a follower parks until the leader's assignment is stored.
* A member whose session timeout passes without a heartbeat (and that is not
  parked in a join or sync) is removed, which triggers a rebalance.

* Offsets expire `offsets.retention.minutes` after their Empty group emptied
  (or after their commit, for a group used only as an offset store); an Empty
  group without offsets is then removed (tombstones, KIP-211).

Member ids are `<client_id>-<uuid4>` (`<group.instance.id>-<uuid4>` for a static
member). A caller that asks `require_known_member_id` (Kafka's JoinGroup v4+,
KIP-394) gets MEMBER_ID_REQUIRED and a pending id to join with; otherwise the
first join is answered at once (JoinGroup v3 behaviour, our gRPC front end).
Static members (KIP-345, `group_instance_id`) survive a restart within their
session timeout: the instance id's new member id takes over the old one's place
and, in a Stable group, its assignment without a rebalance; a duplicate instance
is FENCED_INSTANCE_ID. Heartbeat in CompletingRebalance answers NONE, as Kafka
2.8 does.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from broker.group.metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
    select_protocol,
)
from broker.group.partitioner import partition_for
from broker.group.records import (
    GroupRecordError,
    OffsetAndMetadata,
    OffsetKey,
    StoredGroup,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    fits_kafka_string,
)
from broker.group.store import KeyValue, OffsetsStore
from broker.log.errors import invariant
from broker.periodic import every
from client.kafka import errors
from client.kafka.structs import TopicPartition

NONE = errors.NONE
COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code
NOT_COORDINATOR = errors.NotCoordinatorError.code
UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.code
ILLEGAL_GENERATION = errors.IllegalGenerationError.code
REBALANCE_IN_PROGRESS = errors.RebalanceInProgressError.code

# Store errors as a group write reports them (K28 GroupMetadataManager.storeGroup) ...
_GROUP_STORE_ERRORS = {
    errors.UnknownTopicOrPartitionError.code: COORDINATOR_NOT_AVAILABLE,
    errors.NotEnoughReplicasError.code: COORDINATOR_NOT_AVAILABLE,
    errors.NotEnoughReplicasAfterAppendError.code: COORDINATOR_NOT_AVAILABLE,
    errors.RequestTimedOutError.code: COORDINATOR_NOT_AVAILABLE,
    errors.NotLeaderForPartitionError.code: NOT_COORDINATOR,
    errors.KafkaStorageError.code: NOT_COORDINATOR,
    errors.MessageSizeTooLargeError.code: errors.UnknownServerError.code,
    errors.RecordListTooLargeError.code: errors.UnknownServerError.code,
    errors.InvalidFetchSizeError.code: errors.UnknownServerError.code,
}
# ... and as an offset commit reports them (storeOffsets).
_OFFSET_STORE_ERRORS = {
    **_GROUP_STORE_ERRORS,
    errors.MessageSizeTooLargeError.code: errors.InvalidCommitOffsetSizeError.code,
    errors.RecordListTooLargeError.code: errors.InvalidCommitOffsetSizeError.code,
    errors.InvalidFetchSizeError.code: errors.InvalidCommitOffsetSizeError.code,
}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's names: offsets.topic.num.partitions, group.{min,max}.session.timeout.ms, ..."""

    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10080 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600000


class _Api:
    """Which request is validated: empty group ids are allowed for offsets and describe (Kafka's isValidGroupId)."""

    JOIN = "join"
    SYNC = "sync"
    HEARTBEAT = "heartbeat"
    LEAVE = "leave"
    COMMIT = "commit"
    FETCH = "fetch"
    DESCRIBE = "describe"
    DELETE = "delete"


_EMPTY_ID_ALLOWED = frozenset({_Api.COMMIT, _Api.FETCH, _Api.DESCRIBE})


JoinCallback = Callable[[JoinResult], None]


@dataclass(frozen=True, slots=True)
class _Joining:
    """One JoinGroup request's member fields, as the join paths pass them on."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]

    def member(self, member_id: str) -> MemberMetadata:
        return MemberMetadata(
            member_id=member_id,
            client_id=self.client_id,
            client_host=self.client_host,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            session_timeout_ms=self.session_timeout_ms,
            protocol_type=self.protocol_type,
            protocols=list(self.protocols),
            is_new=True,
            group_instance_id=self.group_instance_id,
        )


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Timer(Protocol):
    def cancel(self) -> None: ...


# call_later(delay_s, action) -> Timer: the event loop's by default, a fake clock's in tests.
Scheduler = Callable[[float, Callable[[], None]], Timer]


def loop_scheduler(delay_s: float, action: Callable[[], None]) -> Timer:
    return asyncio.get_running_loop().call_later(delay_s, action)


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        store: OffsetsStore,
        logger: Any,
        now_ms: Callable[[], int] = wall_clock_ms,
        new_member_suffix: Callable[[], str] = lambda: str(uuid.uuid4()),
        call_later: Scheduler = loop_scheduler,
    ) -> None:
        self.config = config
        self._store = store
        self._log = logger
        self._now_ms = now_ms
        self._new_member_suffix = new_member_suffix
        self._call_later = call_later
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        # Bumped on every election and resignation of a partition: a load of an older one is void.
        self._partition_epochs: dict[int, int] = {}
        self._rebalance_timers: dict[str, tuple[Timer, bool]] = {}  # group -> (timer, initial)
        self._heartbeat_timers: dict[tuple[str, str], Timer] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.active = True

    # ---------------------------------------------------------------- lifecycle

    async def stop(self) -> None:
        self.active = False
        for partition in list(self.owned | self.loading):
            self.on_resignation(partition)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Any, what: str) -> None:
        """A background task tracked until done; its failure is logged (never silently lost)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self._log.error("group_task_failed", task=what, error=repr(t.exception()))

        task.add_done_callback(done)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def _validate(self, group_id: str, api: str) -> int:
        """Kafka's validateGroupStatus: INVALID_GROUP_ID,
        COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR."""
        if (not group_id and api not in _EMPTY_ID_ALLOWED) or not fits_kafka_string(group_id):
            return errors.InvalidGroupIdError.code
        if not self.active:
            return COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return errors.CoordinatorLoadInProgressError.code
        if partition not in self.owned:
            return NOT_COORDINATOR
        return NONE

    def _transition(self, group: GroupMetadata, target: GroupState) -> None:
        old = group.transition_to(target, self._now_ms())
        self._log.info(
            "group_state_changed",
            group=group.group_id,
            old_state=old.value,
            new_state=target.value,
            generation=group.generation_id,
        )

    # ---------------------------------------------------------------- JoinGroup

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        *,
        group_instance_id: str | None = None,
        require_known_member_id: bool = False,
    ) -> JoinResult:
        """K28 handleJoinGroup. `group_instance_id` makes a static member (KIP-345, JoinGroup v5+);
        `require_known_member_id` (JoinGroup v4+, KIP-394) answers a dynamic member's first join with
        MEMBER_ID_REQUIRED and the id it must come back with."""
        error = self._validate(group_id, _Api.JOIN)
        if error != NONE:
            return JoinResult(error, member_id)
        texts = (member_id, client_id, protocol_type, group_instance_id or "", *(n for n, _ in protocols))
        if not all(fits_kafka_string(s) for s in texts):
            return JoinResult(errors.InvalidRequestError.code, member_id)  # they could not be stored (records.py)
        config = self.config
        if not config.group_min_session_timeout_ms <= session_timeout_ms <= config.group_max_session_timeout_ms:
            return JoinResult(errors.InvalidSessionTimeoutError.code, member_id)
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 had none: Kafka uses the session timeout
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = GroupMetadata(group_id)
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

        def respond(result: JoinResult) -> None:
            if not future.done():
                future.set_result(result)

        joining = _Joining(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            list(protocols),
        )
        if group.is_(GroupState.DEAD):
            respond(JoinResult(COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            respond(JoinResult(errors.InconsistentGroupProtocolError.code, member_id))
        elif not member_id:
            self._join_unknown_member(group, joining, require_known_member_id, respond)
        else:
            self._join_member(group, joining, respond)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join_complete(group)
        return await future

    def _join_unknown_member(
        self, group: GroupMetadata, joining: _Joining, require_known_member_id: bool, respond: JoinCallback
    ) -> None:
        """K28 doUnknownJoinGroup: a known static member takes a fresh id; a dynamic one is told its id first."""
        prefix = joining.group_instance_id if joining.group_instance_id is not None else joining.client_id
        new_member_id = f"{prefix}-{self._new_member_suffix()}"
        if group.static_member_id(joining.group_instance_id) is not None:
            self._update_static_member(group, new_member_id, joining, respond)
        elif require_known_member_id and joining.group_instance_id is None:
            group.pending_members.add(new_member_id)
            self._expire_pending_member_after(group, new_member_id, joining.session_timeout_ms)
            respond(JoinResult(errors.MemberIdRequiredError.code, new_member_id))
        else:
            self._add_member_and_rebalance(group, joining.member(new_member_id), respond)

    def _join_member(self, group: GroupMetadata, joining: _Joining, respond: JoinCallback) -> None:
        """K28 doJoinGroup: a pending member enters; a known one rejoins; a duplicate static instance is fenced."""
        member_id = joining.member_id
        if member_id in group.pending_members and joining.group_instance_id is None:
            self._add_member_and_rebalance(group, joining.member(member_id), respond)
        elif group.is_static_member_fenced(member_id, joining.group_instance_id):
            respond(JoinResult(errors.FencedInstanceIdError.code, member_id))
        elif not group.has(member_id) or (
            joining.group_instance_id is not None and group.static_member_id(joining.group_instance_id) is None
        ):
            respond(JoinResult(UNKNOWN_MEMBER_ID, member_id))
        else:
            member = group.members[member_id]
            member.session_timeout_ms = joining.session_timeout_ms
            member.rebalance_timeout_ms = joining.rebalance_timeout_ms
            self._join_known_member(group, member, joining.protocols, respond)

    def _update_static_member(
        self, group: GroupMetadata, new_member_id: str, joining: _Joining, respond: JoinCallback
    ) -> None:
        """K28 updateStaticMemberAndRebalance: a static member restarted within its session timeout takes a new
        member id and, in a Stable group whose protocol stays, its old assignment without a rebalance."""
        old_member_id = group.static_member_id(joining.group_instance_id)
        invariant(old_member_id is not None, "a static member to update is known")
        leader_before = group.leader_id
        self._cancel_heartbeat(group.group_id, old_member_id)
        member = group.replace_static_member(old_member_id, new_member_id)
        old_protocols = member.protocols
        member.protocols = joining.protocols
        self._reset_heartbeat(group, member)
        self._log.info(
            "static_member_replaced",
            group=group.group_id,
            group_instance_id=joining.group_instance_id,
            old_member=old_member_id,
            new_member=new_member_id,
            state=group.state.value,
        )
        if group.is_(GroupState.STABLE):
            if group.protocol_name == select_protocol(group.all()):
                member.awaiting_join = respond  # answered once stored, or by a rebalance that overtakes the write
                self._spawn(
                    self._store_static_member(group, member, old_member_id, old_protocols, leader_before, respond),
                    f"store static member of {group.group_id}",
                )
            else:
                member.awaiting_join = respond
                self._maybe_prepare_rebalance(group)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            member.awaiting_join = respond
            self._prepare_rebalance(group)
        else:  # PreparingRebalance: it answers with the others when the join completes
            member.awaiting_join = respond

    async def _store_static_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old_member_id: str,
        old_protocols: list[tuple[str, bytes]],
        leader_before: str | None,
        respond: JoinCallback,
    ) -> None:
        new_member_id = member.member_id
        error = await self._store_group(group, {m.member_id: m.assignment for m in group.all()})
        if member.awaiting_join is not respond or group.members.get(new_member_id) is not member:
            return  # a rebalance, a leave or an unload answered it meanwhile
        member.awaiting_join = None
        if error != NONE:
            # Not stored: the old member id stays the one the group knows (K28 reverts the update).
            self._cancel_heartbeat(group.group_id, new_member_id)
            member.protocols = old_protocols
            self._reset_heartbeat(group, group.replace_static_member(new_member_id, old_member_id))
            respond(JoinResult(error, ""))
            return
        # The old leader id is answered so that this member does not run a trivial assignment a Stable group
        # would not broadcast anyway (K28's comment in updateStaticMemberAndRebalance).
        respond(
            JoinResult(
                error_code=NONE,
                member_id=new_member_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type or "",
                protocol_name=group.protocol_name or "",
                leader_id=leader_before or "",
            )
        )

    def _expire_pending_member_after(self, group: GroupMetadata, member_id: str, session_timeout_ms: int) -> None:
        """A member id handed out with MEMBER_ID_REQUIRED is forgotten if it does not join within the session."""

        def expire() -> None:
            self._heartbeat_timers.pop((group.group_id, member_id), None)
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._log.info("pending_member_expired", group=group.group_id, member=member_id)
                if group.is_(GroupState.PREPARING_REBALANCE):
                    self._check_join_complete(group)

        key = (group.group_id, member_id)
        self._heartbeat_timers[key] = self._call_later(session_timeout_ms / 1000, expire)

    def _join_known_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        respond: Callable[[JoinResult], None],
    ) -> None:
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, respond)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                respond(group.join_result_for(member))  # a retried join of this generation
            else:
                self._update_member_and_rebalance(group, member, protocols, respond)
        elif state is GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, respond)
            else:
                respond(group.join_result_for(member))
        else:  # Empty or Dead: no members
            respond(JoinResult(UNKNOWN_MEMBER_ID, member.member_id))

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, respond: Callable[[JoinResult], None]
    ) -> None:
        member.awaiting_join = respond
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._log.info("member_joined", group=group.group_id, member=member.member_id, state=group.state.value)
        self._reset_heartbeat(group, member)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        respond: Callable[[JoinResult], None],
    ) -> None:
        member.protocols = protocols
        previous, member.awaiting_join = member.awaiting_join, respond
        if previous is not None:  # a second join replaces the parked one, whose client gave up on it
            previous(JoinResult(REBALANCE_IN_PROGRESS, member.member_id))
        self._reset_heartbeat(group, member)
        self._maybe_prepare_rebalance(group)

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            group.reset_and_propagate_assignment_error(REBALANCE_IN_PROGRESS)
        was_empty = group.is_(GroupState.EMPTY)
        self._transition(group, GroupState.PREPARING_REBALANCE)
        self._cancel_rebalance_timer(group.group_id)
        if was_empty:
            delay_ms = self.config.group_initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            self._arm_initial_delayed_join(group, delay_ms, remaining_ms)
        else:
            self._arm_rebalance_timer(group, group.rebalance_timeout_ms(), self._on_complete_join, initial=False)
            self._check_join_complete(group)

    def _arm_rebalance_timer(
        self, group: GroupMetadata, delay_ms: int, action: Callable[[GroupMetadata], None], initial: bool
    ) -> None:
        def fire() -> None:
            current = self._rebalance_timers.get(group.group_id)
            if current is not None and current[0] is handle:
                del self._rebalance_timers[group.group_id]
                action(group)

        handle = self._call_later(delay_ms / 1000, fire)
        self._rebalance_timers[group.group_id] = (handle, initial)

    def _arm_initial_delayed_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        """InitialDelayedJoin: wait `delay_ms`; while new members keep arriving, wait again,
        up to the rebalance timeout."""

        def expire(g: GroupMetadata) -> None:
            if g.new_member_added and remaining_ms > 0:
                g.new_member_added = False
                step = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                self._arm_initial_delayed_join(g, step, remaining_ms - step)
            else:
                self._on_complete_join(g)

        self._arm_rebalance_timer(group, delay_ms, expire, initial=True)

    def _cancel_rebalance_timer(self, group_id: str) -> None:
        timer = self._rebalance_timers.pop(group_id, None)
        if timer is not None:
            timer[0].cancel()

    def _check_join_complete(self, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete: done as soon as every known member rejoined (not during the initial delay)."""
        timer = self._rebalance_timers.get(group.group_id)
        initial = timer is not None and timer[1]
        if group.is_(GroupState.PREPARING_REBALANCE) and not initial and group.has_all_members_joined():
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        self._cancel_rebalance_timer(group.group_id)
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            self._log.info("member_removed_not_rejoined", group=group.group_id, member=member.member_id)
            group.remove(member.member_id)
            self._cancel_heartbeat(group.group_id, member.member_id)
        if group.members and not group.elect_joined_leader():
            # Only static members that did not rejoin are left: wait again until they do or their sessions
            # expire (K28 onCompleteJoin re-arms its DelayedJoin).
            self._arm_rebalance_timer(group, group.rebalance_timeout_ms(), self._on_complete_join, initial=False)
            return
        group.init_next_generation(self._now_ms())
        self._log.info(
            "group_state_changed",
            group=group.group_id,
            old_state=GroupState.PREPARING_REBALANCE.value,
            new_state=group.state.value,
            generation=group.generation_id,
            protocol=group.protocol_name,
            members=len(group.members),
        )
        if group.is_(GroupState.EMPTY):
            self._spawn(self._store_empty_group(group), f"store empty group {group.group_id}")
            return
        for member in group.all():
            respond, member.awaiting_join = member.awaiting_join, None
            if respond is not None:
                respond(group.join_result_for(member))
            self._reset_heartbeat(group, member)

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self._store_group(group, {})
        if error != NONE:
            self._log.warning("empty_group_store_failed", group=group.group_id, error_code=error)

    async def _store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        stored = group.to_stored(self._now_ms())
        if assignment:
            members = tuple(replace(m, assignment=assignment.get(m.member_id, b"")) for m in stored.members)
            stored = replace(stored, members=members)
        record = (encode_group_key(group.group_id), encode_group_value(stored))
        return await self._append(group.group_id, [record], _GROUP_STORE_ERRORS)

    async def _append(self, group_id: str, records: list[KeyValue], mapping: dict[int, int]) -> int:
        try:
            await self._store.append(self.partition_for(group_id), records)
        except errors.KafkaError as exc:
            self._log.warning("group_append_failed", group=group_id, error=str(exc))
            return mapping.get(exc.code, exc.code)
        return NONE

    # ---------------------------------------------------------------- SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str,
        protocol_name: str,
        assignments: dict[str, bytes],
        *,
        group_instance_id: str | None = None,
    ) -> SyncResult:
        error = self._validate(group_id, _Api.SYNC)
        if error != NONE:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return SyncResult(errors.FencedInstanceIdError.code)
        if not group.has(member_id):
            return SyncResult(UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncResult(ILLEGAL_GENERATION)
        if (protocol_type and protocol_type != group.protocol_type) or (
            protocol_name and protocol_name != group.protocol_name
        ):
            return SyncResult(errors.InconsistentGroupProtocolError.code)
        if group.is_(GroupState.EMPTY):
            return SyncResult(UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        self._reset_heartbeat(group, member)
        if group.is_(GroupState.STABLE):
            return SyncResult(NONE, member.assignment, group.protocol_type or "", group.protocol_name or "")
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

        def respond(result: SyncResult) -> None:
            if not future.done():
                future.set_result(result)

        member.awaiting_sync = respond
        if member_id == group.leader_id:
            self._spawn(self._complete_sync(group, dict(assignments)), f"store assignment of {group_id}")
        return await future

    async def _complete_sync(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        """The leader's assignment is stored (acks=all), then every parked sync is answered and the group is Stable."""
        generation = group.generation_id
        assignment = {m: assignments.get(m, b"") for m in group.members}
        error = await self._store_group(group, assignment)
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
            return  # a rebalance or an unload overtook the write; its callbacks were answered there
        if error != NONE:
            group.reset_and_propagate_assignment_error(error)
            self._maybe_prepare_rebalance(group)
            return
        group.set_and_propagate_assignment(assignment)
        self._transition(group, GroupState.STABLE)

    # ---------------------------------------------------------------- Heartbeat / LeaveGroup

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, *, group_instance_id: str | None = None
    ) -> int:
        error = self._validate(group_id, _Api.HEARTBEAT)
        if error != NONE:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return errors.FencedInstanceIdError.code
        if not group.has(member_id):
            return UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return UNKNOWN_MEMBER_ID
        self._reset_heartbeat(group, group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave_group(
        self, group_id: str, members: list[str] | list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, int]]]:
        """(top-level error, [(member id, error)]), as LeaveGroup v3+ answers (K28 handleLeaveGroup).

        `members` are member ids or (member id, group.instance.id) pairs; a static member may leave by
        its instance id alone (an empty member id), as kafka-consumer-groups' --delete does (KIP-345).
        """
        identities = [(m, None) if isinstance(m, str) else m for m in members]
        error = self._validate(group_id, _Api.LEAVE)
        if error != NONE:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [(m, UNKNOWN_MEMBER_ID) for m, _ in identities]
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE, []
        return NONE, [(m, self._leave_one(group, m, instance)) for m, instance in identities]

    def _leave_one(self, group: GroupMetadata, member_id: str, group_instance_id: str | None) -> int:
        if member_id and group.is_static_member_fenced(member_id, group_instance_id):
            return errors.FencedInstanceIdError.code
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel_heartbeat(group.group_id, member_id)
            if group.is_(GroupState.PREPARING_REBALANCE):
                self._check_join_complete(group)
            return NONE
        static_id = group.static_member_id(group_instance_id)
        member = group.members.get(static_id if static_id is not None else member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        self._log.info(
            "member_left", group=group.group_id, member=member.member_id, group_instance_id=group_instance_id
        )
        self._remove_member_and_update_group(group, member)
        return NONE

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        respond, member.awaiting_join = member.awaiting_join, None
        if respond is not None:
            respond(JoinResult(UNKNOWN_MEMBER_ID, member.member_id))
        sync, member.awaiting_sync = member.awaiting_sync, None
        if sync is not None:
            sync(SyncResult(UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._cancel_heartbeat(group.group_id, member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join_complete(group)

    # ---------------------------------------------------------------- session expiry

    def _reset_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        key = (group.group_id, member.member_id)
        old = self._heartbeat_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._heartbeat_timers[key] = self._call_later(
            member.session_timeout_ms / 1000, lambda: self._on_heartbeat_expired(group, member)
        )

    def _cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        timer = self._heartbeat_timers.pop((group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._heartbeat_timers.pop((group.group_id, member.member_id), None)
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join is not None or member.awaiting_sync is not None:
            self._reset_heartbeat(group, member)  # parked in a join or sync: alive (shouldKeepMemberAlive)
            return
        self._log.info(
            "member_session_expired",
            group=group.group_id,
            member=member.member_id,
            session_timeout_ms=member.session_timeout_ms,
            state=group.state.value,
        )
        self._remove_member_and_update_group(group, member)

    # ---------------------------------------------------------------- offsets

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        *,
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, int]:
        def all_(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(offsets, code)

        error = self._validate(group_id, _Api.COMMIT)
        if error != NONE:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(ILLEGAL_GENERATION)
            group = self.groups[group_id] = GroupMetadata(group_id)  # Kafka used as an offset store only
        if group.is_(GroupState.DEAD):
            return all_(COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return all_(errors.FencedInstanceIdError.code)
        if not (generation_id < 0 and group.is_(GroupState.EMPTY)):
            if not group.has(member_id):
                return all_(UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return all_(ILLEGAL_GENERATION)
            if group.is_(GroupState.COMPLETING_REBALANCE):
                return all_(REBALANCE_IN_PROGRESS)
            self._reset_heartbeat(group, group.members[member_id])
        return await self._store_offsets(group, offsets)

    async def _store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, int]:
        results: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if not fits_kafka_string(tp.topic):  # no topic has such a name (Kafka's 249 characters at most)
                results[tp] = errors.UnknownTopicOrPartitionError.code
            elif len(value.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = errors.OffsetMetadataTooLargeError.code
            else:
                valid[tp] = value
        if valid:
            records: list[KeyValue] = [
                (encode_offset_key(group.group_id, tp), encode_offset_value(value)) for tp, value in valid.items()
            ]
            error = await self._append(group.group_id, records, _OFFSET_STORE_ERRORS)
            if error == NONE and self.groups.get(group.group_id) is group:
                group.offsets.update(valid)
            for tp in valid:
                results[tp] = error
        return {tp: results[tp] for tp in offsets}

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(error, offsets); `partitions` None: every committed offset of the group. None: nothing committed."""
        error = self._validate(group_id, _Api.FETCH)
        if error != NONE:
            return error, {}
        group = self.groups.get(group_id)
        offsets = {} if group is None else group.offsets
        if partitions is None:
            return NONE, dict(sorted(offsets.items()))
        return NONE, {tp: offsets.get(tp) for tp in partitions}

    # ---------------------------------------------------------------- describe / list / delete

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        """(error, group); an unknown group is described as Dead with no error, as Kafka does."""
        error = self._validate(group_id, _Api.DESCRIBE)
        if error != NONE:
            return error, None
        return NONE, self.groups.get(group_id)

    def list_groups(self) -> tuple[int, list[GroupMetadata]]:
        error = errors.CoordinatorLoadInProgressError.code if self.loading else NONE
        return error, [g for _, g in sorted(self.groups.items()) if not g.is_(GroupState.DEAD)]

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            error = self._validate(group_id, _Api.DELETE)
            group = self.groups.get(group_id)
            if error != NONE:
                results[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                results[group_id] = errors.GroupIdNotFoundError.code
            elif not group.is_(GroupState.EMPTY):
                results[group_id] = errors.NonEmptyGroupError.code
            else:
                self._transition(group, GroupState.DEAD)
                del self.groups[group_id]
                self._cancel_rebalance_timer(group_id)
                tombstones: list[KeyValue] = [(encode_group_key(group_id), None)]
                tombstones += [(encode_offset_key(group_id, tp), None) for tp in sorted(group.offsets)]
                results[group_id] = await self._append(group_id, tombstones, _GROUP_STORE_ERRORS)
                self._log.info("group_deleted", group=group_id, offsets=len(group.offsets))
        return results

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete (KIP-496, K28 handleDeleteOffsets): (group error, per-partition errors).

        An Empty group loses the offsets; a consumer group with members keeps those of topics it still
        subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); any other group with members answers NON_EMPTY_GROUP.
        """
        error = self._validate(group_id, _Api.DELETE)
        if error != NONE:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return errors.GroupIdNotFoundError.code, {}
        results: dict[TopicPartition, int] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return errors.NonEmptyGroupError.code, {}
            eligible = [tp for tp in partitions if subscribed is not None and tp.topic not in subscribed]
            results = {tp: errors.GroupSubscribedToTopicError.code for tp in partitions if tp not in eligible}
        if eligible:
            tombstones: list[KeyValue] = [
                (encode_offset_key(group_id, tp), None) for tp in sorted(set(eligible)) if tp in group.offsets
            ]
            code = await self._append(group_id, tombstones, _GROUP_STORE_ERRORS) if tombstones else NONE
            if code == NONE:
                for tp in eligible:
                    group.offsets.pop(tp, None)
                self._log.info("offsets_deleted", group=group_id, offsets=len(tombstones))
            results.update(dict.fromkeys(eligible, code))
        return NONE, {tp: results[tp] for tp in partitions}

    # ---------------------------------------------------------------- offset expiration

    def start(self) -> None:
        """The periodic offset expiration (`offsets.retention.check.interval.ms`)."""
        interval_s = self.config.offsets_retention_check_interval_ms / 1000
        self._spawn(every(interval_s, self.expire_offsets, self._log), "offset expiration")

    async def expire_offsets(self) -> int:
        """Tombstones expired offsets of the groups this broker owns; an Empty group left with no
        offsets becomes Dead and its metadata is tombstoned too (K28 cleanupGroupMetadata)."""
        removed = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) not in self.owned:
                continue
            expired = group.expired_offsets(self._now_ms(), self.config.offsets_retention_ms)
            drop_group = group.is_(GroupState.EMPTY) and len(expired) == len(group.offsets)
            if not expired and not drop_group:
                continue
            tombstones: list[KeyValue] = [(encode_offset_key(group_id, tp), None) for tp in expired]
            if drop_group:
                tombstones.append((encode_group_key(group_id), None))
            before = {tp: group.offsets[tp] for tp in expired}
            if await self._append(group_id, tombstones, _GROUP_STORE_ERRORS) != NONE:
                continue  # tried again at the next check
            for tp, value in before.items():
                if group.offsets.get(tp) is value:  # not re-committed meanwhile
                    del group.offsets[tp]
                    removed += 1
            if drop_group and group.is_(GroupState.EMPTY) and not group.offsets and self.groups.get(group_id) is group:
                self._transition(group, GroupState.DEAD)
                del self.groups[group_id]
            self._log.info("offsets_expired", group=group_id, offsets=len(expired), group_removed=drop_group)
        return removed

    # ---------------------------------------------------------------- partition leadership

    def on_leadership_change(self, partition: int, is_leader: bool) -> None:
        if is_leader:
            self.on_election(partition)
        else:
            self.on_resignation(partition)

    def on_election(self, partition: int) -> None:
        """This broker leads `partition` now: load its groups (COORDINATOR_LOAD_IN_PROGRESS until done)."""
        if partition in self.owned or partition in self.loading or not self.active:
            return
        epoch = self._partition_epochs.get(partition, 0) + 1
        self._partition_epochs[partition] = epoch
        self.loading.add(partition)
        self._log.info("group_partition_loading", partition=partition)
        self._spawn(self._load(partition, epoch), f"load __consumer_offsets-{partition}")

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            offsets, stored, records = await self._read_partition(partition)
        finally:
            if self._partition_epochs.get(partition) == epoch:
                self.loading.discard(partition)
        if self._partition_epochs.get(partition) != epoch:
            return  # resigned while loading
        loaded = 0
        for group_id in sorted(set(offsets) | {g for g, v in stored.items() if v is not None}):
            if group_id in self.groups:
                continue
            value = stored.get(group_id)
            group = GroupMetadata.from_stored(group_id, value) if value is not None else GroupMetadata(group_id)
            group.offsets = offsets.get(group_id, {})
            if value is None and not group.offsets:
                continue
            self.groups[group_id] = group
            loaded += 1
            for member in group.all():
                self._reset_heartbeat(group, member)
        self.owned.add(partition)
        self._log.info(
            "group_partition_loaded",
            partition=partition,
            groups=loaded,
            records=records,
            elapsed_ms=int((time.monotonic() - started) * 1000),
        )

    async def _read_partition(
        self, partition: int
    ) -> tuple[dict[str, dict[TopicPartition, OffsetAndMetadata]], dict[str, StoredGroup | None], int]:
        """Every record of the partition in order: the last value per key wins, a tombstone deletes."""
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        stored: dict[str, StoredGroup | None] = {}
        records = 0
        async for key_bytes, value in self._store.read(partition):
            records += 1
            try:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetKey):
                    tp = TopicPartition(key.topic, key.partition)
                    group_offsets = offsets.setdefault(key.group, {})
                    if value is None:
                        group_offsets.pop(tp, None)
                    else:
                        group_offsets[tp] = decode_offset_value(value)
                else:
                    stored[key.group] = None if value is None else decode_group_value(value)
            except GroupRecordError as exc:
                self._log.warning("group_record_skipped", partition=partition, error=str(exc))
        return offsets, stored, records

    def on_resignation(self, partition: int) -> None:
        """Another broker leads `partition`: its groups are dropped; parked requests get NOT_COORDINATOR."""
        if partition not in self.owned and partition not in self.loading:
            return
        self._partition_epochs[partition] = self._partition_epochs.get(partition, 0) + 1
        self.owned.discard(partition)
        self.loading.discard(partition)
        unloaded = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) != partition:
                continue
            self._unload(group)
            unloaded += 1
        self._log.info("group_partition_unloaded", partition=partition, groups=unloaded)

    def _unload(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self._now_ms())
        del self.groups[group.group_id]
        self._cancel_rebalance_timer(group.group_id)
        for member in group.all():
            self._cancel_heartbeat(group.group_id, member.member_id)
            respond, member.awaiting_join = member.awaiting_join, None
            if respond is not None:
                respond(JoinResult(NOT_COORDINATOR, member.member_id))
            sync, member.awaiting_sync = member.awaiting_sync, None
            if sync is not None:
                sync(SyncResult(NOT_COORDINATOR))
        self._log.info("group_unloaded", group=group.group_id, old_state=previous.value)
