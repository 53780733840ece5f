"""A consumer's group membership: coordinator discovery, join/sync, heartbeats, offset commit and fetch.

After Kafka's `AbstractCoordinator` + `ConsumerCoordinator` (K28
clients/…/consumer/internals) with the eager rebalance protocol, and the group
coordinator's rules in docs/research/kafka.md §5.2-5.3:

* The coordinator is found with FindCoordinator (any broker); COORDINATOR_NOT_AVAILABLE,
  COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and a dead connection make the client
  back off and look it up again.
* Joining runs on the poll thread but never blocks past the caller's deadline: the
  JoinGroup and SyncGroup calls are gRPC futures that later polls pick up (Kafka 2.x's
  `poll(Duration)`), so several consumers can share one thread. MEMBER_ID_REQUIRED
  is answered by rejoining with the given member id; the leader computes the
  assignment with the assignor the coordinator chose, from all members' subscriptions
  and its own metadata.
* A daemon heartbeat thread sends Heartbeat every `heartbeat_interval_ms` while the
  member is stable. REBALANCE_IN_PROGRESS asks for a rejoin at the next poll;
  UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION reset the generation (the partitions are
  then lost, not committed); if poll() is not called within `max_poll_interval_ms`
  the member leaves the group, as Kafka's does.

State shared by the two threads (coordinator node, generation, member state, the
rejoin flag, the last poll time) lives under one lock; RPCs are never made under it.
"""

from __future__ import annotations

import enum
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from client.kafka import codec
from client.kafka.assignors import AbstractPartitionAssignor
from client.kafka.client_errors import CommitFailedError, KafkaConnectionError, KafkaTimeoutError
from client.kafka.cluster import KafkaClusterClient, error_from_rpc
from client.kafka.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from client.kafka.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    error_for,
)
from client.kafka.structs import TopicPartition

log = logging.getLogger("zkraft.client.consumer.coordinator")

RETRY_BACKOFF_S = 0.1
# A JoinGroup is parked by the coordinator for up to the rebalance timeout: its deadline is that plus this.
JOIN_DEADLINE_MARGIN_S = 5.0
LEAVE_TIMEOUT_S = 5.0
HEARTBEAT_TICK_S = 0.05  # how often the heartbeat thread looks at the clock

# Errors after which the coordinator must be looked up again.
_COORDINATOR_GONE = (NotCoordinatorError, CoordinatorNotAvailableError, KafkaConnectionError, RequestTimedOutError)
# Errors after which the member starts again with no generation.
_GENERATION_GONE = (UnknownMemberIdError, IllegalGenerationError, FencedInstanceIdError)
# JoinGroup/SyncGroup errors answered by joining again straight away.
_REJOIN_AT_ONCE = (*_GENERATION_GONE, RebalanceInProgressError, MemberIdRequiredError)


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # no member state, or it was lost
    REBALANCING = "rebalancing"  # a JoinGroup or SyncGroup is under way
    STABLE = "stable"  # has an assignment for the current generation; heartbeats run


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class GroupSettings:
    group_id: str
    client_id: str
    assignors: tuple[AbstractPartitionAssignor, ...]
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int  # sent as the rebalance timeout
    request_timeout_ms: int


class JoinResult(NamedTuple):
    generation: Generation
    assignment: Assignment
    leader_topics: frozenset[str]  # what the leader assigned from (all members' topics); empty for followers
    leader_partition_counts: Mapping[str, int]


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to consume, and free-form metadata."""

    offset: int
    metadata: str = ""


class ConsumerRebalanceListener:
    """Kafka's ConsumerRebalanceListener, called on the poll thread (eager protocol: all partitions are
    revoked before every rebalance and the new assignment is handed over after it)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before a rebalance: commit what was processed here (the generation is still valid)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After a rebalance; a seek() here decides where consumption starts."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """The member was thrown out of the group (its generation is gone): the partitions may already be
        another member's, so a commit would fail. Kafka's default calls on_partitions_revoked."""
        self.on_partitions_revoked(lost)


def _client_host() -> str:
    """This host as Kafka's coordinator records it (`InetAddress.toString`: "/10.0.0.5")."""
    try:
        return "/" + socket.gethostbyname(socket.gethostname())
    except OSError:
        return "/127.0.0.1"


class ConsumerCoordinator:
    """Group membership of one consumer; the methods without `_hb` run on the consumer's (poll) thread."""

    def __init__(self, cluster: KafkaClusterClient, settings: GroupSettings) -> None:
        self._cluster = cluster
        self.settings = settings
        self._lock = threading.Lock()
        self._coordinator: Coordinator | None = None
        self._generation = NO_GENERATION
        self._state = MemberState.UNJOINED
        self._rejoin_needed = True
        self._last_poll_s = time.monotonic()
        self._last_heartbeat_ok_s = time.monotonic()
        self._join_future: Any = None
        self._sync_future: Any = None
        self._joined_topics: tuple[str, ...] = ()
        self._leader_topics: frozenset[str] = frozenset()
        self._leader_counts: Mapping[str, int] = {}
        self._client_host = _client_host()
        self._closed = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._lookup_backoff_until_s = 0.0
        self._next_heartbeat_s = 0.0

    # ------------------------------------------------------------------ shared state

    @property
    def generation(self) -> Generation:
        return self._generation

    @property
    def state(self) -> MemberState:
        return self._state

    def rejoin_needed(self) -> bool:
        return self._rejoin_needed or self._state is not MemberState.STABLE

    def coordinator_unknown(self) -> bool:
        return self._coordinator is None

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            log.info("group_rejoin_requested", extra={"group": self.settings.group_id, "reason": reason})
        self._rejoin_needed = True

    def note_poll(self, now_s: float) -> None:
        self._last_poll_s = now_s

    def generation_if_stable(self) -> Generation | None:
        with self._lock:
            return self._generation if self._state is MemberState.STABLE else None

    def _reset_generation(self, reason: str, keep_member_id: bool = False) -> None:
        with self._lock:
            old = self._generation
            member = old.member_id if keep_member_id else ""
            self._generation = Generation(-1, member, None)
            self._state = MemberState.UNJOINED
            self._rejoin_needed = True
        log.info(
            "group_generation_reset",
            extra={"group": self.settings.group_id, "generation": old.generation_id, "reason": reason},
        )

    def mark_coordinator_unknown(self, reason: str) -> None:
        with self._lock:
            old, self._coordinator = self._coordinator, None
        if old is not None:
            log.info(
                "group_coordinator_unknown",
                extra={"group": self.settings.group_id, "coordinator": old.node_id, "reason": reason},
            )

    # ------------------------------------------------------------------ coordinator discovery

    def _stub(self) -> Any:
        node = self._coordinator
        if node is None:
            raise CoordinatorNotAvailableError(f"group {self.settings.group_id}: coordinator not known")
        return self._cluster.stub_for(node.host, node.port)

    def lookup_coordinator(self) -> bool:
        """One FindCoordinator to any broker; False (and a back-off) on a retriable failure."""
        if self._coordinator is not None:
            return True
        now = time.monotonic()
        if now < self._lookup_backoff_until_s:
            return False
        request = codec.find_coordinator_request(self.settings.group_id)
        try:
            response = codec.find_coordinator_reply(self._cluster.call_any("FindCoordinator", request))
            if response.error_code != NONE:
                raise error_for(response.error_code, f"FindCoordinator for group {self.settings.group_id}")
        except KafkaError as exc:
            if not exc.retriable:
                raise
            self._lookup_backoff_until_s = time.monotonic() + RETRY_BACKOFF_S
            log.info("group_coordinator_lookup_failed", extra={"group": self.settings.group_id, "error": str(exc)})
            return False
        with self._lock:
            self._coordinator = Coordinator(response.node_id, response.host, response.port)
        log.info("group_coordinator_found", extra={"group": self.settings.group_id, "node": response.node_id})
        return True

    def ensure_coordinator(self, deadline_s: float) -> bool:
        while not self.lookup_coordinator():
            remaining = deadline_s - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(RETRY_BACKOFF_S, remaining))
        return True

    # ------------------------------------------------------------------ join and sync

    def ensure_active_group(
        self,
        topics: Sequence[str],
        partition_counts: Callable[[set[str]], Mapping[str, int]],
        deadline_s: float,
    ) -> JoinResult | None:
        """Drives JoinGroup/SyncGroup until this member has an assignment (returned) or `deadline_s` passes (None).

        `partition_counts(topics)` gives current partition counts (the leader's metadata).
        """
        self._start_heartbeat_thread()
        while True:
            if not self.ensure_coordinator(deadline_s):
                return None
            if self._join_future is None and self._sync_future is None:
                try:
                    self._send_join(topics)
                except KafkaError as exc:  # e.g. the heartbeat thread forgot the coordinator meanwhile
                    if not exc.retriable:
                        raise
                    self.mark_coordinator_unknown(str(exc))
                    remaining = deadline_s - time.monotonic()
                    if remaining <= 0:
                        return None
                    time.sleep(min(RETRY_BACKOFF_S, remaining))
                    continue
            future = self._sync_future if self._sync_future is not None else self._join_future
            remaining = max(0.0, deadline_s - time.monotonic())
            try:
                future.exception(timeout=remaining)
            except grpc.FutureTimeoutError:
                return None
            except grpc.FutureCancelledError:
                self._join_future = self._sync_future = None
                return None
            try:
                if future is self._join_future:
                    self._join_future = None
                    self._handle_join(future, partition_counts)
                    continue
                self._sync_future = None
                return self._handle_sync(future)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, _REJOIN_AT_ONCE)):
                    raise
                remaining = deadline_s - time.monotonic()
                if remaining <= 0:
                    return None
                if isinstance(exc, (CoordinatorLoadInProgressError, *_COORDINATOR_GONE)):
                    time.sleep(min(RETRY_BACKOFF_S, remaining))

    def _send_join(self, topics: Sequence[str]) -> None:
        s = self.settings
        self._joined_topics = tuple(sorted(topics))
        protocols = [
            (
                a.name,
                encode_subscription(Subscription(self._joined_topics, a.subscription_user_data(self._joined_topics))),
            )
            for a in s.assignors
        ]
        with self._lock:
            self._state = MemberState.REBALANCING
            member_id = self._generation.member_id
        request = codec.join_group_request(
            s.group_id,
            member_id,
            s.session_timeout_ms,
            s.max_poll_interval_ms,
            protocols,
            s.client_id,
            self._client_host,
        )
        timeout_s = max(s.request_timeout_ms, s.max_poll_interval_ms) / 1000.0 + JOIN_DEADLINE_MARGIN_S
        log.info("group_join", extra={"group": s.group_id, "member": member_id, "topics": list(self._joined_topics)})
        self._join_future = self._stub().JoinGroup.future(request, timeout=timeout_s)

    def _rpc_result(self, future: Any, what: str) -> Any:
        exc = future.exception()
        if exc is not None:
            error = error_from_rpc(exc, what)
            if isinstance(error, _COORDINATOR_GONE):
                self.mark_coordinator_unknown(str(error))
            raise error
        return future.result()

    def _response_error(self, code: int, what: str) -> KafkaError:
        error = error_for(code, f"{what} for group {self.settings.group_id}")
        if isinstance(error, _COORDINATOR_GONE):
            self.mark_coordinator_unknown(str(error))
        elif isinstance(error, UnknownMemberIdError | FencedInstanceIdError):
            self._reset_generation(error.name)
        elif isinstance(error, IllegalGenerationError):
            self._reset_generation(error.name, keep_member_id=True)
        return error

    def _handle_join(self, future: Any, partition_counts: Callable[[set[str]], Mapping[str, int]]) -> None:
        response = codec.join_group_reply(self._rpc_result(future, "JoinGroup"))
        if response.error_code == MemberIdRequiredError.code:  # KIP-394: rejoin with the id the coordinator gave
            with self._lock:
                self._generation = Generation(-1, response.member_id, None)
            raise MemberIdRequiredError(f"group {self.settings.group_id}: rejoin as {response.member_id}")
        if response.error_code != NONE:
            raise self._response_error(response.error_code, "JoinGroup")
        generation = Generation(response.generation_id, response.member_id, response.protocol_name)
        with self._lock:
            self._generation = generation
        assignments: dict[str, bytes] = {}
        self._leader_topics, self._leader_counts = frozenset(), {}
        if response.leader == response.member_id:
            assignments = self._leader_assign(response, partition_counts)
        log.info(
            "group_joined",
            extra={
                "group": self.settings.group_id,
                "generation": generation.generation_id,
                "member": generation.member_id,
                "leader": response.leader == response.member_id,
                "protocol": generation.protocol,
            },
        )
        request = codec.sync_group_request(
            self.settings.group_id,
            generation.generation_id,
            generation.member_id,
            generation.protocol or "",
            assignments,
        )
        timeout_s = max(self.settings.request_timeout_ms, self.settings.max_poll_interval_ms) / 1000.0
        self._sync_future = self._stub().SyncGroup.future(request, timeout=timeout_s + JOIN_DEADLINE_MARGIN_S)

    def _assignor(self, name: str) -> AbstractPartitionAssignor:
        for assignor in self.settings.assignors:
            if assignor.name == name:
                return assignor
        raise error_for(23, f"group {self.settings.group_id}: coordinator chose unknown assignor {name!r}")

    def _leader_assign(
        self, response: codec.JoinGroupReply, partition_counts: Callable[[set[str]], Mapping[str, int]]
    ) -> dict[str, bytes]:
        assignor = self._assignor(response.protocol_name)
        subscriptions: dict[str, Subscription] = {}
        for member in response.members:
            sub = decode_subscription(member.metadata)
            if member.group_instance_id:
                sub = Subscription(sub.topics, sub.user_data, sub.owned_partitions, member.group_instance_id)
            subscriptions[member.member_id] = sub
        topics = {t for sub in subscriptions.values() for t in sub.topics}
        counts = dict(partition_counts(topics))
        self._leader_topics, self._leader_counts = frozenset(topics), counts
        result = assignor.assign(counts, subscriptions)
        log.info(
            "group_assignment_computed",
            extra={
                "group": self.settings.group_id,
                "assignor": assignor.name,
                "assignment": {m: [str(tp) for tp in ps] for m, ps in result.items()},
            },
        )
        return {member: encode_assignment(Assignment(tuple(result.get(member, ())))) for member in subscriptions}

    def _handle_sync(self, future: Any) -> JoinResult:
        response = codec.sync_group_reply(self._rpc_result(future, "SyncGroup"))
        if response.error_code != NONE:
            error = self._response_error(response.error_code, "SyncGroup")
            if isinstance(error, RebalanceInProgressError):
                with self._lock:
                    self._state = MemberState.UNJOINED
            raise error
        assignment = decode_assignment(response.assignment) if response.assignment else Assignment()
        with self._lock:
            generation = self._generation
            self._state = MemberState.STABLE
            self._rejoin_needed = False
            self._last_heartbeat_ok_s = time.monotonic()
            self._next_heartbeat_s = 0.0
        assignor = self._assignor(generation.protocol or "")
        assignor.on_assignment(assignment.partitions, assignment.user_data, generation.generation_id)
        log.info(
            "group_synced",
            extra={
                "group": self.settings.group_id,
                "generation": generation.generation_id,
                "partitions": [str(tp) for tp in assignment.partitions],
            },
        )
        return JoinResult(generation, assignment, self._leader_topics, self._leader_counts)

    @property
    def joined_topics(self) -> tuple[str, ...]:
        return self._joined_topics

    # ------------------------------------------------------------------ heartbeats

    def _start_heartbeat_thread(self) -> None:
        if self._heartbeat_thread is None and not self._closed.is_set():
            self._next_heartbeat_s = 0.0
            thread = threading.Thread(
                target=self._heartbeat_loop, name=f"zkraft-heartbeat-{self.settings.group_id}", daemon=True
            )
            self._heartbeat_thread = thread
            thread.start()

    def _heartbeat_loop(self) -> None:
        interval_s = self.settings.heartbeat_interval_ms / 1000.0
        tick_s = min(HEARTBEAT_TICK_S, interval_s)
        while not self._closed.wait(tick_s):
            try:
                self._heartbeat_once(interval_s)
            except Exception:  # the loop boundary: log what failed, keep heartbeating
                log.exception("group_heartbeat_failed", extra={"group": self.settings.group_id})

    def _heartbeat_once(self, interval_s: float) -> None:
        now = time.monotonic()
        with self._lock:
            if self._state is not MemberState.STABLE:
                return
            generation = self._generation
            poll_idle_s = now - self._last_poll_s
            due = now >= self._next_heartbeat_s
        if poll_idle_s * 1000.0 > self.settings.max_poll_interval_ms:
            log.warning(
                "group_poll_timeout",
                extra={"group": self.settings.group_id, "idle_ms": int(poll_idle_s * 1000), "leaving": True},
            )
            self.leave_group("consumer poll timeout has expired")
            return
        if self._coordinator is None:
            self.lookup_coordinator()
            return
        if not due:
            return
        self._next_heartbeat_s = now + interval_s
        request = codec.heartbeat_request(self.settings.group_id, generation.generation_id, generation.member_id)
        try:
            response = self._stub().Heartbeat(request, timeout=self.settings.session_timeout_ms / 1000.0)
        except grpc.RpcError as exc:
            self._heartbeat_failed(error_from_rpc(exc, "Heartbeat"), now)
            return
        except KafkaError as exc:
            self._heartbeat_failed(exc, now)
            return
        error_code = codec.heartbeat_error(response)
        if error_code == NONE:
            self._last_heartbeat_ok_s = now
            return
        if self._generation != generation or self._state is not MemberState.STABLE:
            return  # the poll thread moved on (a rejoin) while the heartbeat was out
        error = error_for(error_code, f"Heartbeat for group {self.settings.group_id}")
        if isinstance(error, RebalanceInProgressError):
            self.request_rejoin("heartbeat: REBALANCE_IN_PROGRESS")
        elif isinstance(error, _GENERATION_GONE):
            self._reset_generation(f"heartbeat: {error.name}", keep_member_id=isinstance(error, IllegalGenerationError))
        else:
            self._heartbeat_failed(error, now)

    def _heartbeat_failed(self, error: KafkaError, now: float) -> None:
        log.info("group_heartbeat_error", extra={"group": self.settings.group_id, "error": str(error)})
        self._next_heartbeat_s = now + RETRY_BACKOFF_S
        if isinstance(error, (*_COORDINATOR_GONE, CoordinatorLoadInProgressError)):
            self.mark_coordinator_unknown(str(error))
        if (now - self._last_heartbeat_ok_s) * 1000.0 > self.settings.session_timeout_ms:
            self.mark_coordinator_unknown("session timeout without a successful heartbeat")

    # ------------------------------------------------------------------ offsets

    def commit_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], generation: Generation, deadline_s: float
    ) -> None:
        """Synchronous OffsetCommit, retried on coordinator errors until `deadline_s` (KafkaTimeoutError then)."""
        if not offsets:
            return
        last: KafkaError | None = None
        while True:
            if self.ensure_coordinator(deadline_s):
                try:
                    response = self._stub().OffsetCommit(
                        self._commit_request(offsets, generation), timeout=self.settings.request_timeout_ms / 1000.0
                    )
                    self.check_commit_response(response, generation)
                    return
                except grpc.RpcError as exc:
                    last = error_from_rpc(exc, "OffsetCommit")
                    if not last.retriable:
                        raise last from None
                    if isinstance(last, _COORDINATOR_GONE):
                        self.mark_coordinator_unknown(str(last))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
            remaining = deadline_s - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"offset commit for group {self.settings.group_id} timed out (last: {last})")
            time.sleep(min(RETRY_BACKOFF_S, remaining))

    def commit_offsets_future(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], generation: Generation) -> Any:
        """An OffsetCommit in flight (for commit_async and auto commit); check it with `check_commit_response`."""
        return self._stub().OffsetCommit.future(
            self._commit_request(offsets, generation), timeout=self.settings.request_timeout_ms / 1000.0
        )

    def _commit_request(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], generation: Generation) -> Any:
        return codec.offset_commit_request(
            self.settings.group_id,
            generation.generation_id,
            generation.member_id,
            ((tp, committed.offset, committed.metadata) for tp, committed in sorted(offsets.items())),
        )

    def check_commit_response(self, response: Any, generation: Generation) -> None:
        """Raises the first partition error: CommitFailedError for a lost generation, else the typed error."""
        for tp, error_code in codec.offset_commit_errors(response):
            error = error_for(
                error_code,
                f"OffsetCommit for {tp} in group {self.settings.group_id} (generation {generation.generation_id})",
            )
            if isinstance(error, _COORDINATOR_GONE):
                self.mark_coordinator_unknown(str(error))
                raise error
            if isinstance(error, _GENERATION_GONE):
                if self._generation == generation:
                    self._reset_generation(
                        f"commit: {error.name}", keep_member_id=isinstance(error, IllegalGenerationError)
                    )
                raise CommitFailedError(
                    f"Commit cannot be completed since the group {self.settings.group_id} has already "
                    f"rebalanced and assigned the partitions to another member ({error.name}, generation "
                    f"{generation.generation_id}); the time between subsequent calls to poll() was probably "
                    "longer than max.poll.interval.ms"
                ) from error
            if isinstance(error, RebalanceInProgressError):
                self.request_rejoin("commit: REBALANCE_IN_PROGRESS")
            raise error

    def fetch_committed(self, partitions: Sequence[TopicPartition], deadline_s: float) -> dict[TopicPartition, int]:
        """Committed offsets of `partitions` (missing: none committed), retried until `deadline_s`."""
        request = codec.offset_fetch_request(self.settings.group_id, partitions)
        last: KafkaError | None = None
        while True:
            if self.ensure_coordinator(deadline_s):
                try:
                    response = self._stub().OffsetFetch(request, timeout=self.settings.request_timeout_ms / 1000.0)
                    return self._offsets_from(response)
                except grpc.RpcError as exc:
                    last = error_from_rpc(exc, "OffsetFetch")
                    if not last.retriable:
                        raise last from None
                    if isinstance(last, _COORDINATOR_GONE):
                        self.mark_coordinator_unknown(str(last))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
            remaining = deadline_s - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"fetching committed offsets of group {self.settings.group_id} timed out (last: {last})"
                )
            time.sleep(min(RETRY_BACKOFF_S, remaining))

    def _offsets_from(self, response: Any) -> dict[TopicPartition, int]:
        error_code = codec.offset_fetch_error(response)
        if error_code != NONE:
            raise self._response_error(error_code, "OffsetFetch")
        out: dict[TopicPartition, int] = {}
        for tp, partition_error, offset, _ in codec.offset_fetch_results(response):
            if partition_error == UnknownTopicOrPartitionError.code:
                log.warning("group_offset_fetch_unknown_partition", extra={"partition": str(tp)})
                continue
            if partition_error != NONE:
                raise self._response_error(partition_error, f"OffsetFetch of {tp}")
            if offset >= 0:
                out[tp] = offset
        return out

    # ------------------------------------------------------------------ leaving

    def leave_group(self, reason: str) -> None:
        """Forget the generation, then LeaveGroup (best effort), so that the group rebalances at once.

        The generation goes first, as Kafka's AbstractCoordinator.maybeLeaveGroup resets it without
        waiting for the answer: once the coordinator has the member gone, the member knows it too (a
        commit in between would otherwise reach the coordinator and fail as UNKNOWN_MEMBER_ID)."""
        with self._lock:
            generation = self._generation
            node = self._coordinator
        self._cancel_pending()
        self._reset_generation(f"left: {reason}")
        if node is not None and generation.member_id:
            request = codec.leave_group_request(self.settings.group_id, generation.member_id)
            try:
                self._cluster.stub_for(node.host, node.port).LeaveGroup(request, timeout=LEAVE_TIMEOUT_S)
                log.info(
                    "group_left",
                    extra={"group": self.settings.group_id, "member": generation.member_id, "reason": reason},
                )
            except (grpc.RpcError, KafkaError) as exc:
                log.info("group_leave_failed", extra={"group": self.settings.group_id, "error": str(exc)})

    def _cancel_pending(self) -> None:
        for future in (self._join_future, self._sync_future):
            if future is not None:
                future.cancel()
        self._join_future = self._sync_future = None

    def close(self) -> None:
        """Stops the heartbeat thread and leaves the group."""
        self._closed.set()
        thread = self._heartbeat_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.settings.session_timeout_ms / 1000.0)
        self.leave_group("consumer closed")
