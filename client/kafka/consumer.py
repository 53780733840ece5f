"""The Kafka-style consumer: assign or subscribe (with or without a group), positions, prefetching fetches.

After Kafka's `KafkaConsumer` and `Fetcher` (clients/…/consumer). Without a
`group_id` (kafka-python's flavour) a consumer given topics consumes every
partition of them (new partitions are picked up on metadata refresh). With a
`group_id`, subscribing makes it a member of that consumer group: the
partitions come from the group's assignor, positions from the committed
offsets, and commits go to the group coordinator (client/kafka/consumer_coordinator.py,
docs/research/kafka.md §5). Fetches
go ONE request per leader broker for all the partitions it leads (replica_id
-1), at most one in flight per broker; a response is kept as raw bytes and
decoded only when its records are handed to the user, and the next fetch to
that broker goes out while the user works (prefetch). Start positions come
from ListOffsets (-2 earliest, -1 latest; docs/research/kafka.md §3.4).
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from client.kafka import codec
from client.kafka.assignors import resolve_assignors
from client.kafka.client_errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaConfigurationError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from client.kafka.cluster import KafkaClusterClient, error_from_rpc
from client.kafka.consumer_coordinator import (
    NO_GENERATION,
    ConsumerCoordinator,
    ConsumerRebalanceListener,
    Generation,
    GroupSettings,
    JoinResult,
    MemberState,
    OffsetAndMetadata,
)
from client.kafka.consumer_records import decode_fetched, deserialize, fetched_end_offset
from client.kafka.errors import (
    NONE,
    InvalidGroupIdError,
    KafkaError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    RebalanceInProgressError,
    UnknownTopicOrPartitionError,
    error_for,
)
from client.kafka.structs import TopicPartition
from client.kafka.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ConsumerRecord, OffsetAndTimestamp
from runtime.client_config import SaslCredentials
from runtime.tls import TlsConfig

log = logging.getLogger("zkraft.client.consumer")

__all__ = ["Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata", "TopicPartition"]

_RESETS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}
# Named limits: how long ListOffsets/metadata lookups retry, how often metadata is refreshed.
REQUEST_TIMEOUT_MS = 30000
RETRY_BACKOFF_S = 0.1
METADATA_MAX_AGE_S = 30.0
# The gRPC deadline of a Fetch: the broker's max wait plus this margin.
FETCH_DEADLINE_MARGIN_S = 30.0
# Iteration polls in slices of this many ms so that consumer_timeout_ms is honoured.
ITER_POLL_SLICE_MS = 1000
# Fetched-but-unconsumed responses kept per partition; below this a partition is prefetched.
BUFFERED_FETCHES_PER_PARTITION_MAX = 2


@dataclass(slots=True)
class _PartitionState:
    position: int | None = None  # the next offset to hand out; None: to be reset
    reset_to: int | None = None  # EARLIEST_TIMESTAMP / LATEST_TIMESTAMP for an explicit seek_to_*
    high_watermark: int = -1
    epoch: int = 0  # bumped by every seek or reset: fetches sent before it are discarded
    committed_pending: bool = False  # group-assigned: start from the committed offset, if there is one


class _CompletedFetch:
    """One partition's fetched bytes, decoded on first use (Kafka's `CompletedFetch`)."""

    __slots__ = ("tp", "epoch", "position", "buf", "records", "index", "next_offset", "fetch_end")

    def __init__(self, tp: TopicPartition, epoch: int, position: int, buf: bytes) -> None:
        self.tp = tp
        self.epoch = epoch
        self.position = position  # where the not-yet-handed-out remainder starts
        self.buf = buf
        self.records: list[ConsumerRecord] | None = None
        self.index = 0
        self.next_offset = position
        self.fetch_end = fetched_end_offset(buf, position)  # where the next fetch for the partition starts


class Consumer:
    """kafka-python's KafkaConsumer: poll, iterate, assign, seek, offsets, consumer groups. Not thread-safe."""

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str],
        auto_offset_reset: str = "latest",
        key_deserializer: Callable[[bytes], object] | None = None,
        value_deserializer: Callable[[bytes], object] | None = None,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        max_poll_records: int = 500,
        consumer_timeout_ms: float = float("inf"),
        client_id: str = "zkraft-consumer",
        group_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        partition_assignment_strategy: object = ("range",),
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        metadata_max_age_ms: int = 30000,
        tls: TlsConfig | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        if auto_offset_reset not in _RESETS:
            raise KafkaConfigurationError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', got {auto_offset_reset!r}"
            )
        for name, value, minimum in (
            ("fetch_min_bytes", fetch_min_bytes, 0),
            ("fetch_max_wait_ms", fetch_max_wait_ms, 0),
            ("fetch_max_bytes", fetch_max_bytes, 1),
            ("max_partition_fetch_bytes", max_partition_fetch_bytes, 1),
            ("max_poll_records", max_poll_records, 1),
            ("consumer_timeout_ms", consumer_timeout_ms, 0),
            ("auto_commit_interval_ms", auto_commit_interval_ms, 1),
            ("session_timeout_ms", session_timeout_ms, 1),
            ("heartbeat_interval_ms", heartbeat_interval_ms, 1),
            ("max_poll_interval_ms", max_poll_interval_ms, 1),
            ("metadata_max_age_ms", metadata_max_age_ms, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
                raise KafkaConfigurationError(f"{name} must be a number >= {minimum}, got {value!r}")
        for name, fn in (("key_deserializer", key_deserializer), ("value_deserializer", value_deserializer)):
            if fn is not None and not callable(fn):
                raise KafkaConfigurationError(f"{name} must be callable")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise KafkaConfigurationError(
                f"heartbeat_interval_ms ({heartbeat_interval_ms}) must be lower than session_timeout_ms"
                f" ({session_timeout_ms})"
            )
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise InvalidGroupIdError(f"group_id must be a non-empty string, got {group_id!r}")
        assignors = resolve_assignors(partition_assignment_strategy)
        self._reset = _RESETS[auto_offset_reset]
        self._reset_name = auto_offset_reset
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self.fetch_min_bytes = int(fetch_min_bytes)
        self.fetch_max_wait_ms = int(fetch_max_wait_ms)
        self.fetch_max_bytes = int(fetch_max_bytes)
        self.max_partition_fetch_bytes = int(max_partition_fetch_bytes)
        self.max_poll_records = int(max_poll_records)
        self.consumer_timeout_ms = consumer_timeout_ms
        self.client_id = client_id
        self.group_id = group_id
        self._cluster = KafkaClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=REQUEST_TIMEOUT_MS, tls=tls, sasl=sasl
        )
        self._subscription: set[str] | None = None
        self._assignment: dict[TopicPartition, _PartitionState] = {}
        self._completed: collections.deque[_CompletedFetch] = collections.deque()
        self._in_flight: dict[int, tuple[grpc.Future, dict[TopicPartition, tuple[int, int]]]] = {}
        self._fetch_done = threading.Event()
        self._metadata_wanted = False
        self._next_metadata_s = 0.0
        self._subscription_refreshed_s = float("-inf")
        self._iter_buffer: collections.deque[ConsumerRecord] = collections.deque()
        self._closed = False
        self._metadata_max_age_s = metadata_max_age_ms / 1000.0
        self._pattern: re.Pattern[str] | None = None
        self._pattern_matched_in: object = None  # the metadata snapshot the pattern was last matched against
        self._listener: Any = None
        self._auto_commit = bool(enable_auto_commit) and group_id is not None
        self._auto_commit_interval_s = auto_commit_interval_ms / 1000.0
        self._next_auto_commit_s = time.monotonic() + self._auto_commit_interval_s
        self._join_prepared = False
        self._group_checked: tuple[object, object] | None = None  # (snapshot, subscription) last checked
        self._group_result: JoinResult | None = None
        self._async_commits: collections.deque[tuple[concurrent.futures.Future, Any, dict]] = collections.deque()
        self._coordinator: ConsumerCoordinator | None = None
        if group_id is not None:
            self._coordinator = ConsumerCoordinator(
                self._cluster,
                GroupSettings(
                    group_id=group_id,
                    client_id=client_id,
                    assignors=assignors,
                    session_timeout_ms=int(session_timeout_ms),
                    heartbeat_interval_ms=int(heartbeat_interval_ms),
                    max_poll_interval_ms=int(max_poll_interval_ms),
                    request_timeout_ms=REQUEST_TIMEOUT_MS,
                ),
            )
        if topics:
            self.subscribe(list(topics))

    # ------------------------------------------------------------------ assignment

    def subscribe(
        self, topics: Iterable[str] | None = (), pattern: str | re.Pattern[str] | None = None, listener: Any = None
    ) -> None:
        """Subscribes to `topics` or to every topic whose whole name matches `pattern` (a regex).

        With a group the partitions come from the group's assignment, and `listener`
        (a ConsumerRebalanceListener) hears of every revocation and assignment; without
        one, every partition of the topics is consumed (kafka-python's behaviour).
        """
        names = [topics] if isinstance(topics, str) else list(topics or ())
        if names and pattern is not None:
            raise IllegalStateError("Subscription to topics and to a pattern are mutually exclusive")
        if not names and pattern is None:
            raise KafkaConfigurationError("subscribe needs at least one topic or a pattern")
        if self._subscription is None and self._assignment:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if listener is not None and not (
            callable(getattr(listener, "on_partitions_revoked", None))
            and callable(getattr(listener, "on_partitions_assigned", None))
        ):
            raise KafkaConfigurationError("listener must have on_partitions_revoked and on_partitions_assigned")
        if pattern is not None:
            try:
                self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            except re.error as exc:
                raise KafkaConfigurationError(f"bad subscription pattern {pattern!r}: {exc}") from None
            self._subscription = set()
            self._pattern_matched_in = None
        else:
            self._pattern = None
            self._subscription = set(names)
        self._listener = listener
        self._subscription_refreshed_s = float("-inf")
        self._next_metadata_s = 0.0
        self._metadata_wanted = True
        if self._coordinator is not None and self._coordinator.generation_if_stable() is not None:
            self._coordinator.request_rejoin("subscription changed")

    def unsubscribe(self) -> None:
        """Stops consuming; a group member gives its partitions up (revoke) and leaves the group at once."""
        if self._coordinator is not None and self._subscription is not None:
            self._revoke_all(commit=self._auto_commit)
            self._coordinator.leave_group("unsubscribe")
        self._subscription = None
        self._pattern = None
        self._set_assignment(set())

    def subscription(self) -> set[str] | None:
        return None if self._subscription is None else set(self._subscription)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assigns exactly these partitions (positions kept for those already assigned)."""
        if self._subscription is not None:
            raise IllegalStateError("assign() after subscribing to topics: call unsubscribe() first")
        self._set_assignment({TopicPartition(*tp) for tp in partitions})

    def _set_assignment(self, partitions: set[TopicPartition]) -> None:
        self._assignment = {tp: self._assignment.get(tp) or _PartitionState() for tp in partitions}
        self._completed = collections.deque(cf for cf in self._completed if cf.tp in self._assignment)
        self._iter_buffer = collections.deque(
            r for r in self._iter_buffer if (r.topic, r.partition) in self._assignment
        )

    def assignment(self) -> set[TopicPartition]:
        self._check_open()
        if self._subscription is not None:
            self._update_subscription(time.monotonic())
        return set(self._assignment)

    def _state(self, tp: TopicPartition) -> _PartitionState:
        state = self._assignment.get(tp)  # type: ignore[call-overload]
        if state is None:
            raise IllegalStateError(f"partition {tp[0]}-{tp[1]} is not assigned to this consumer")
        return state

    # ------------------------------------------------------------------ positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if not isinstance(offset, int) or offset < 0:
            raise KafkaConfigurationError(f"seek offset must be an int >= 0, got {offset!r}")
        state = self._state(partition)
        state.position = offset
        state.reset_to = None
        state.committed_pending = False
        state.epoch += 1
        self._drop_buffered(partition)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, LATEST_TIMESTAMP)

    def _seek_to(self, partitions: tuple[TopicPartition, ...], timestamp: int) -> None:
        if not partitions and self._subscription is not None:
            self._update_subscription(time.monotonic())
        for tp in partitions or tuple(self._assignment):
            state = self._state(tp)
            state.position = None
            state.reset_to = timestamp
            state.committed_pending = False
            state.epoch += 1
            self._drop_buffered(tp)

    def _drop_buffered(self, tp: TopicPartition) -> None:
        self._completed = collections.deque(cf for cf in self._completed if cf.tp != tp)
        self._iter_buffer = collections.deque(r for r in self._iter_buffer if (r.topic, r.partition) != tp)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record this consumer will hand out for `partition` (resolved now if needed)."""
        self._check_open()
        state = self._state(partition)
        if state.position is None:
            self._reset_positions([TopicPartition(*partition)])
        return state.position  # type: ignore[return-value]

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets({TopicPartition(*tp): EARLIEST_TIMESTAMP for tp in partitions})

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermarks: the offset the next acknowledged record will get."""
        return self._list_offsets({TopicPartition(*tp): LATEST_TIMESTAMP for tp in partitions})

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first offset whose record timestamp is >= the given one (ms since the epoch) and
        that record's timestamp, or None when no record has one that late (Kafka's `offsetsForTimes`)."""
        wanted = {}
        for tp, timestamp in timestamps.items():
            if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
                raise ValueError(f"offsets_for_times: the timestamp of {tp} must be an int >= 0, got {timestamp!r}")
            wanted[TopicPartition(*tp)] = timestamp
        found = self._list_offsets_and_timestamps(wanted)
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, timestamp, epoch if epoch >= 0 else None)
            for tp, (offset, timestamp, epoch) in found.items()
        }

    def highwater(self, partition: TopicPartition) -> int | None:
        hw = self._state(partition).high_watermark
        return None if hw < 0 else hw

    def _reset_positions(self, partitions: Sequence[TopicPartition]) -> None:
        """Positions from the group's committed offsets where pending, else from auto_offset_reset / seek_to_*."""
        if self._coordinator is not None and any(self._assignment[tp].committed_pending for tp in partitions):
            partitions = self._positions_from_committed(partitions)
            if not partitions:
                return
        wanted: dict[TopicPartition, int] = {}
        for tp in partitions:
            state = self._assignment[tp]
            timestamp = state.reset_to if state.reset_to is not None else self._reset
            if timestamp is None:
                raise NoOffsetForPartitionError(
                    f"partition {tp}: no position and auto_offset_reset is 'none' (seek first)"
                )
            wanted[tp] = timestamp
        for tp, offset in self._list_offsets(wanted).items():
            current = self._assignment.get(tp)
            if current is not None and current.position is None:
                current.position = offset
                current.reset_to = None

    def _list_offsets(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return {tp: offset for tp, (offset, _, _) in self._list_offsets_and_timestamps(wanted).items()}

    def _list_offsets_and_timestamps(
        self, wanted: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        """ListOffsets to each partition's leader: (offset, timestamp, leader epoch) by partition; retriable errors
        refresh metadata and retry until the deadline."""
        self._check_open()
        result: dict[TopicPartition, tuple[int, int, int]] = {}
        pending = dict(wanted)
        deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000.0
        last: KafkaError | None = None
        while pending:
            snapshot = self._ensure_metadata({tp.topic for tp in pending})
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                leader = snapshot.leader_for(tp.topic, tp.partition)
                if leader < 0:
                    last = self._missing_partition_error(tp)
                    continue
                by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                try:
                    last = self._list_offsets_from(leader, tps, pending, result) or last
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
            if not pending:
                break
            self._metadata_wanted = True
            self._next_metadata_s = 0.0
            if time.monotonic() + RETRY_BACKOFF_S >= deadline:
                raise KafkaTimeoutError(
                    f"offsets of {', '.join(str(tp) for tp in sorted(pending))} not found in"
                    f" {REQUEST_TIMEOUT_MS} ms (last: {last})"
                )
            time.sleep(RETRY_BACKOFF_S)
        return result

    def _list_offsets_from(
        self, leader: int, tps: list[TopicPartition], pending: dict[TopicPartition, int], result: dict
    ) -> KafkaError | None:
        request = codec.list_offsets_request({tp: pending[tp] for tp in tps})
        try:
            response = self._cluster.stub(leader).ListOffsets(request, timeout=REQUEST_TIMEOUT_MS / 1000.0)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"ListOffsets to broker {leader}") from None
        last = None
        for tp, error_code, offset, timestamp, leader_epoch in codec.list_offsets_results(response):
            if tp not in pending:
                continue
            if error_code == NONE:
                result[tp] = (offset, timestamp, leader_epoch)
                del pending[tp]
                continue
            error = error_for(error_code, f"ListOffsets for {tp}")
            if not error.retriable:
                raise error
            last = error
        return last

    def _missing_partition_error(self, tp: TopicPartition) -> KafkaError:
        meta = self._cluster.snapshot.topics.get(tp.topic)
        if meta is None or meta.error_code != NONE or tp.partition not in meta.partitions:
            return UnknownTopicOrPartitionError(f"partition {tp} is not in the cluster metadata")
        return error_for(5, f"partition {tp} has no leader")

    # ------------------------------------------------------------------ metadata

    def _ensure_metadata(self, topics: set[str]):
        snapshot = self._cluster.snapshot
        now = time.monotonic()
        missing = any(t not in snapshot.topics for t in topics)
        if (missing or self._metadata_wanted) and now >= self._next_metadata_s:
            self._next_metadata_s = now + RETRY_BACKOFF_S
            snapshot = self._cluster.refresh(topics | set(self._subscription or ()))
            self._metadata_wanted = False
        return snapshot

    def _refresh_assigned_metadata(self) -> None:
        """Metadata for manually assigned topics when missing or when a leader moved (rate-limited)."""
        try:
            self._ensure_metadata({tp.topic for tp in self._assignment})
        except KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("consumer_metadata_refresh_failed", extra={"error": str(exc)})

    def _update_subscription(self, now: float) -> None:
        """Refreshes metadata when due; without a group assigns every partition of the subscribed topics."""
        if self._subscription is None:
            return
        snapshot = self._cluster.snapshot
        stale = now - self._subscription_refreshed_s >= self._metadata_max_age_s
        missing = any(t not in snapshot.topics or not snapshot.topics[t].partitions for t in self._subscription)
        if (stale or missing or self._metadata_wanted) and now >= self._next_metadata_s:
            self._next_metadata_s = now + RETRY_BACKOFF_S
            try:
                snapshot = self._cluster.refresh(None if self._pattern is not None else self._metadata_topics())
                self._metadata_wanted = False
                self._subscription_refreshed_s = now
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("consumer_metadata_refresh_failed", extra={"error": str(exc)})
        if self._pattern is not None and snapshot is not self._pattern_matched_in:
            self._pattern_matched_in = snapshot
            matched = {
                name
                for name, meta in snapshot.topics.items()
                if not meta.is_internal and meta.error_code == NONE and self._pattern.fullmatch(name)
            }
            if matched != self._subscription:
                self._subscription = matched
        if self._coordinator is not None:
            self._check_group_metadata(snapshot)
            return
        partitions = {
            TopicPartition(t, p)
            for t in self._subscription
            if (meta := snapshot.topics.get(t)) is not None and meta.error_code == NONE
            for p in meta.partitions
        }
        if partitions != set(self._assignment):
            self._set_assignment(partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        self._check_open()
        parts = self._cluster.partitions_for(topic)
        if parts is None:
            self._cluster.refresh([topic])
            parts = self._cluster.partitions_for(topic)
        return parts

    def topics(self) -> set[str]:
        """Every non-internal topic of the cluster (kafka-python's `topics()`)."""
        self._check_open()
        snapshot = self._cluster.refresh(None)
        return {name for name, meta in snapshot.topics.items() if not meta.is_internal and meta.error_code == NONE}

    # ------------------------------------------------------------------ polling

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched for the assigned partitions, waiting up to `timeout_ms` for some to arrive."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for tp, chunk in self._poll_chunks(timeout_ms, max_records or self.max_poll_records):
            bucket = out.get(tp)
            if bucket is None:
                out[tp] = chunk
            else:
                bucket.extend(chunk)
        return out

    def _poll_records(self, timeout_ms: float, max_records: int) -> list[ConsumerRecord]:
        """The records of `_poll_chunks`, in one list (iteration hands them out one by one)."""
        chunks = self._poll_chunks(timeout_ms, max_records)
        if len(chunks) == 1:
            return chunks[0][1]
        return [record for _, chunk in chunks for record in chunk]

    def _poll_chunks(self, timeout_ms: float, max_records: int) -> list[tuple[TopicPartition, list[ConsumerRecord]]]:
        """Up to `max_records` records as (partition, its records in offset order) runs, one per completed fetch."""
        self._check_open()
        if max_records < 1:
            raise KafkaConfigurationError(f"max_records must be >= 1, got {max_records}")
        if self._iter_buffer:  # records an iteration fetched but did not hand out yet
            n = min(max_records, len(self._iter_buffer))
            buffered = [self._iter_buffer.popleft() for _ in range(n)]
            return [(TopicPartition(r.topic, r.partition), [r]) for r in buffered]
        deadline = time.monotonic() + max(0.0, timeout_ms) / 1000.0
        while True:
            self._fetch_done.clear()
            now = time.monotonic()
            if self._subscription is not None:
                self._update_subscription(now)
                if self._coordinator is not None and not self._group_poll(now, deadline):
                    if time.monotonic() >= deadline:
                        return []
                    continue
            elif self._assignment:
                self._refresh_assigned_metadata()
                if self._auto_commit and now >= self._next_auto_commit_s:
                    self._auto_commit_now(now)
            unpositioned = [tp for tp, s in self._assignment.items() if s.position is None]
            if unpositioned:
                self._reset_positions(unpositioned)
            self._collect_fetches()
            records = self._drain(max_records)
            self._send_fetches()
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._fetch_done.wait(min(remaining, RETRY_BACKOFF_S if not self._in_flight else remaining))

    def _drain(self, max_records: int) -> list[tuple[TopicPartition, list[ConsumerRecord]]]:
        taken: list[tuple[TopicPartition, list[ConsumerRecord]]] = []
        count = 0
        while self._completed and count < max_records:
            cf = self._completed[0]
            state = self._assignment.get(cf.tp)
            if state is None or state.epoch != cf.epoch or state.position != cf.position:  # seeked since
                self._completed.popleft()
                continue
            if cf.records is None:
                cf.records, cf.next_offset = self._decode(cf)
            want = max_records - count
            chunk = cf.records[cf.index : cf.index + want]
            cf.index += len(chunk)
            if chunk:
                taken.append((cf.tp, chunk))
                count += len(chunk)
                cf.position = state.position = chunk[-1].offset + 1
            if cf.index >= len(cf.records):
                state.position = max(state.position, cf.next_offset)
                self._completed.popleft()
        return taken

    def _decode(self, cf: _CompletedFetch) -> tuple[list[ConsumerRecord], int]:
        records, next_offset = decode_fetched(cf.tp.topic, cf.tp.partition, cf.buf, cf.position)
        cf.buf = b""
        if not records and next_offset == cf.position:
            raise MessageSizeTooLargeError(
                f"partition {cf.tp}: no whole record batch at offset {cf.position} within"
                f" max_partition_fetch_bytes {self.max_partition_fetch_bytes}"
            )
        return deserialize(records, self._key_deserializer, self._value_deserializer), next_offset

    def _send_fetches(self) -> None:
        """One Fetch per leader broker without one in flight, for its partitions with nothing buffered."""
        snapshot = self._cluster.snapshot
        buffered: dict[TopicPartition, list[_CompletedFetch]] = {}
        for cf in self._completed:
            buffered.setdefault(cf.tp, []).append(cf)
        busy = {tp for _, parts in self._in_flight.values() for tp in parts}
        by_leader: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        for tp, state in self._assignment.items():
            if state.position is None or tp in busy:
                continue
            offset = state.position
            pending = buffered.get(tp)
            if pending:  # prefetch from where the buffered data ends, while the user consumes it
                last = pending[-1]
                if len(pending) >= BUFFERED_FETCHES_PER_PARTITION_MAX or last.fetch_end == last.position:
                    continue
                offset = last.fetch_end
            leader = snapshot.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self._metadata_wanted = True
                continue
            if leader not in self._in_flight:
                by_leader.setdefault(leader, {})[tp] = (offset, state.epoch)
        for leader, parts in by_leader.items():
            self._send_fetch(leader, parts)

    def _send_fetch(self, leader: int, parts: dict[TopicPartition, tuple[int, int]]) -> None:
        request = codec.fetch_request(
            parts, self.fetch_max_wait_ms, self.fetch_min_bytes, self.fetch_max_bytes, self.max_partition_fetch_bytes
        )
        try:
            stub = self._cluster.stub(leader)
        except KafkaError:
            self._metadata_wanted = True
            return
        timeout_s = self.fetch_max_wait_ms / 1000.0 + FETCH_DEADLINE_MARGIN_S
        future = stub.Fetch.future(request, timeout=timeout_s)
        self._in_flight[leader] = (future, parts)
        future.add_done_callback(lambda _f: self._fetch_done.set())

    def _collect_fetches(self) -> None:
        for leader, (future, parts) in list(self._in_flight.items()):
            if not future.done():
                continue
            del self._in_flight[leader]
            exc = future.exception()
            if exc is not None:
                error = error_from_rpc(exc, f"Fetch from broker {leader}")
                if not error.retriable:
                    raise error
                log.info("consumer_fetch_failed", extra={"error": str(error)})
                self._metadata_wanted = True
                continue
            self._handle_fetch_response(parts, future.result())

    def _handle_fetch_response(self, parts: dict[TopicPartition, tuple[int, int]], response) -> None:
        fetch_error = codec.fetch_error(response)
        if fetch_error != NONE:
            error = error_for(fetch_error, "Fetch")
            if not error.retriable:
                raise error
            self._metadata_wanted = True
            return
        for tp, error_code, high_watermark, records in codec.fetch_partitions(response):
            sent = parts.get(tp)
            state = self._assignment.get(tp)
            if sent is None or state is None or state.epoch != sent[1] or state.position is None:
                continue
            fetch_offset = sent[0]
            if error_code == NONE:
                state.high_watermark = high_watermark
                if records:
                    self._completed.append(_CompletedFetch(tp, state.epoch, fetch_offset, records))
            elif error_code == OffsetOutOfRangeError.code:
                if self._reset is None:
                    raise OffsetOutOfRangeError(
                        f"partition {tp}: offset {fetch_offset} is out of range and auto_offset_reset is 'none'"
                    )
                log.info("consumer_offset_reset", extra={"partition": str(tp), "offset": fetch_offset})
                state.position = None
                state.epoch += 1
                self._drop_buffered(tp)
            else:
                error = error_for(error_code, f"Fetch for {tp} at offset {fetch_offset}")
                if not error.retriable:
                    raise error
                self._metadata_wanted = True

    # ------------------------------------------------------------------ iteration, groups, lifecycle

    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> ConsumerRecord:
        if self._iter_buffer:
            return self._iter_buffer.popleft()
        started = time.monotonic()
        while True:
            waited_ms = (time.monotonic() - started) * 1000.0
            remaining_ms = self.consumer_timeout_ms - waited_ms
            if remaining_ms <= 0:
                raise StopIteration
            records = self._poll_records(min(remaining_ms, ITER_POLL_SLICE_MS), self.max_poll_records)
            if records:
                self._iter_buffer.extend(records)
                return self._iter_buffer.popleft()

    # --------------------------------------------------------------- the group (client/kafka/consumer_coordinator.py)

    def _group_poll(self, now: float, deadline: float) -> bool:
        """Kafka's `ConsumerCoordinator.poll`: (re)join when needed, auto commit when due; False: not joined yet."""
        coordinator = self._coordinator
        assert coordinator is not None
        coordinator.note_poll(now)
        if self._async_commits:
            self._complete_async_commits()
        if coordinator.rejoin_needed():
            if not self._join_prepared:
                self._revoke_all(commit=self._auto_commit)
                self._join_prepared = True
            result = coordinator.ensure_active_group(sorted(self._subscription or ()), self._partition_counts, deadline)
            if result is None:
                return False
            self._join_prepared = False
            self._on_join_complete(result)
        elif coordinator.coordinator_unknown():
            coordinator.lookup_coordinator()
        if self._auto_commit and now >= self._next_auto_commit_s:
            self._auto_commit_now(now)
        return True

    def _revoke_all(self, commit: bool) -> None:
        """Kafka's `onJoinPrepare` (eager): commit the consumed positions while the generation is valid, tell the
        listener, drop every partition. A member thrown out of the group cannot commit: its partitions are lost."""
        coordinator = self._coordinator
        assert coordinator is not None
        generation = coordinator.generation_if_stable()
        revoked = set(self._assignment)
        if commit and generation is not None and revoked:
            try:
                self._commit_sync(self._consumed_offsets(), generation)
            except KafkaError as exc:
                log.warning("consumer_commit_before_rebalance_failed", extra={"error": str(exc)})
        if self._listener is not None and (revoked or generation is not None):
            if generation is None and hasattr(self._listener, "on_partitions_lost"):
                self._listener.on_partitions_lost(revoked)
            else:
                self._listener.on_partitions_revoked(revoked)
        self._set_assignment(set())
        self._group_result = None

    def _on_join_complete(self, result: JoinResult) -> None:
        subscribed = self._subscription or set()
        partitions = {tp for tp in result.assignment.partitions if tp.topic in subscribed}
        if len(partitions) != len(result.assignment.partitions):
            log.warning(
                "consumer_assigned_unsubscribed_partitions",
                extra={"ignored": [str(tp) for tp in result.assignment.partitions if tp.topic not in subscribed]},
            )
        self._set_assignment(partitions)
        for state in self._assignment.values():
            state.committed_pending = True
            state.position = None
        self._group_result = result
        self._group_checked = None
        if self._listener is not None:
            self._listener.on_partitions_assigned(set(partitions))

    def _metadata_topics(self) -> set[str]:
        """The topics whose metadata this consumer needs: its own, and as group leader every member's."""
        topics = set(self._subscription or ())
        if self._group_result is not None:
            topics |= self._group_result.leader_topics
        return topics

    def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        """The leader's view of the partition counts of every member's topics (fresh metadata)."""
        snapshot = self._cluster.refresh(topics | set(self._subscription or ()))
        return {
            name: len(meta.partitions)
            for name in topics
            if (meta := snapshot.topics.get(name)) is not None and meta.error_code == NONE and meta.partitions
        }

    def _check_group_metadata(self, snapshot: Any) -> None:
        """Rejoin when the subscription changed (a pattern matched a new topic) or, on the leader, when a
        member's topic changed its partition count since the assignment (Kafka's assignmentSnapshot)."""
        coordinator = self._coordinator
        result = self._group_result
        if coordinator is None or result is None or coordinator.rejoin_needed():
            return
        checked = self._group_checked
        if checked is not None and checked[0] is snapshot and checked[1] is self._subscription:
            return
        self._group_checked = (snapshot, self._subscription)
        if set(self._subscription or ()) != set(coordinator.joined_topics):
            coordinator.request_rejoin("subscription changed")
            return
        for topic in result.leader_topics:
            meta = snapshot.topics.get(topic)
            count = len(meta.partitions) if meta is not None and meta.error_code == NONE and meta.partitions else None
            if count != result.leader_partition_counts.get(topic):
                coordinator.request_rejoin(f"partitions of {topic} changed")
                return

    def _positions_from_committed(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """Sets positions from committed offsets for partitions waiting for them; returns those still unpositioned."""
        assert self._coordinator is not None
        pending = [tp for tp in partitions if self._assignment[tp].committed_pending]
        committed = self._coordinator.fetch_committed(pending, time.monotonic() + REQUEST_TIMEOUT_MS / 1000.0)
        for tp in pending:
            state = self._assignment.get(tp)
            if state is None or not state.committed_pending:
                continue
            state.committed_pending = False
            if tp in committed:
                state.position = committed[tp]
                state.reset_to = None
        return [tp for tp in partitions if (s := self._assignment.get(tp)) is not None and s.position is None]

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What was handed to the user: positions, less records an iteration holds back (at-least-once)."""
        out = {tp: OffsetAndMetadata(s.position) for tp, s in self._assignment.items() if s.position is not None}
        held: set[TopicPartition] = set()
        for record in self._iter_buffer:
            tp = TopicPartition(record.topic, record.partition)
            if tp not in held:
                held.add(tp)
                out[tp] = OffsetAndMetadata(record.offset)
        return out

    def _require_group(self) -> ConsumerCoordinator:
        self._check_open()
        if self._coordinator is None:
            raise InvalidGroupIdError(
                "To use the group management or offset commit APIs, you must provide a valid group_id"
                " in the consumer configuration."
            )
        return self._coordinator

    def _commit_generation(self) -> Generation:
        """The generation a commit carries: the stable one for a group member, none (-1) for manual assignment."""
        coordinator = self._require_group()
        if self._subscription is None:
            return NO_GENERATION
        generation = coordinator.generation_if_stable()
        if generation is None and coordinator.state is MemberState.REBALANCING:
            raise RebalanceInProgressError(
                f"group {self.group_id} is rebalancing: commit after the partitions are assigned again"
            )
        if generation is None:
            raise CommitFailedError(
                "Offset commit cannot be completed since the consumer is not part of an active group for auto"
                " partition assignment; it is likely that the consumer was kicked out of the group."
            )
        return generation

    @staticmethod
    def _normalize_offsets(offsets: Mapping[Any, Any]) -> dict[TopicPartition, OffsetAndMetadata]:
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if isinstance(value, OffsetAndMetadata):
                committed = value
            elif isinstance(value, int) and not isinstance(value, bool):
                committed = OffsetAndMetadata(value)
            elif hasattr(value, "offset"):
                committed = OffsetAndMetadata(int(value.offset), str(getattr(value, "metadata", "") or ""))
            elif isinstance(value, tuple) and len(value) == 2:
                committed = OffsetAndMetadata(int(value[0]), str(value[1] or ""))
            else:
                raise KafkaConfigurationError(f"commit: offset of {tp} must be an int or OffsetAndMetadata")
            if committed.offset < 0:
                raise KafkaConfigurationError(f"commit: offset of {tp} must be >= 0, got {committed.offset}")
            out[TopicPartition(*tp)] = committed
        return out

    def _commit_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata], generation: Generation) -> None:
        assert self._coordinator is not None
        self._coordinator.commit_offsets(offsets, generation, time.monotonic() + REQUEST_TIMEOUT_MS / 1000.0)

    def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commits `offsets` (the next offset to read, per partition) or, by default, the consumed positions.

        Synchronous; retried until the request timeout. A member whose generation is gone gets
        CommitFailedError; during a rebalance, RebalanceInProgressError.
        """
        self._require_group()
        committed = self._consumed_offsets() if offsets is None else self._normalize_offsets(offsets)
        if self._async_commits:
            self._complete_async_commits()
        self._commit_sync(committed, self._commit_generation())

    def commit_async(
        self, offsets: Mapping[TopicPartition, Any] | None = None, callback: Callable[[dict, Any], None] | None = None
    ) -> concurrent.futures.Future:
        """Sends an OffsetCommit without waiting; the future resolves when the coordinator answers, and
        `callback(offsets, exception_or_None)` runs on the thread that next calls poll(), commit() or close()."""
        coordinator = self._require_group()
        committed = self._consumed_offsets() if offsets is None else self._normalize_offsets(offsets)
        result: concurrent.futures.Future = concurrent.futures.Future()
        result.set_running_or_notify_cancel()
        try:
            generation = self._commit_generation()
            if not committed:
                result.set_result(committed)
            else:
                if not coordinator.lookup_coordinator():
                    raise error_for(15, f"group {self.group_id}: coordinator not available for commit")
                future = coordinator.commit_offsets_future(committed, generation)
                future.add_done_callback(lambda f: self._finish_async_commit(f, result, committed, generation))
        except KafkaError as exc:
            result.set_exception(exc)
        self._async_commits.append((result, callback, committed))
        return result

    def _finish_async_commit(
        self, future: Any, result: concurrent.futures.Future, offsets: dict, generation: Generation
    ) -> None:
        """On a gRPC thread: resolve the commit's future from the coordinator's answer."""
        assert self._coordinator is not None
        try:
            exc = future.exception()
            if exc is not None:
                error = error_from_rpc(exc, "OffsetCommit")
                if error.retriable:
                    self._coordinator.mark_coordinator_unknown(str(error))
                raise error
            self._coordinator.check_commit_response(future.result(), generation)
        except KafkaError as error:
            result.set_exception(error)
        except Exception as error:  # a cancelled future at close, a malformed answer: still resolve it
            result.set_exception(error)
        else:
            result.set_result(offsets)

    def _complete_async_commits(self, wait_s: float = 0.0) -> None:
        """Runs the callbacks of finished async commits, in the order the commits were made."""
        deadline = time.monotonic() + wait_s
        while self._async_commits:
            result, callback, offsets = self._async_commits[0]
            if not result.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                concurrent.futures.wait([result], timeout=remaining)
                continue
            self._async_commits.popleft()
            error = result.exception()
            if error is not None:
                log.info("consumer_async_commit_failed", extra={"error": str(error)})
            if callback is not None:
                callback(offsets, error)

    def _auto_commit_now(self, now: float) -> None:
        self._next_auto_commit_s = now + self._auto_commit_interval_s
        try:
            if self._subscription is not None and self._coordinator is not None:
                if self._coordinator.generation_if_stable() is None:
                    return
            self.commit_async()
        except KafkaError as exc:
            log.info("consumer_auto_commit_failed", extra={"error": str(exc)})

    def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset of `partition` (None when nothing is committed)."""
        coordinator = self._require_group()
        tp = TopicPartition(*partition)
        return coordinator.fetch_committed([tp], time.monotonic() + REQUEST_TIMEOUT_MS / 1000.0).get(tp)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commits the consumed positions (auto commit on), leaves the group at once, closes the connections."""
        if self._closed:
            return
        if self._coordinator is not None:
            try:
                self._close_group(autocommit)
            except KafkaError as exc:
                log.warning("consumer_close_group_failed", extra={"error": str(exc)})
        self._closed = True
        for future, _ in self._in_flight.values():
            future.cancel()
        self._in_flight.clear()
        self._completed.clear()
        self._cluster.close()

    def _close_group(self, autocommit: bool) -> None:
        coordinator = self._coordinator
        assert coordinator is not None
        commit = autocommit and self._auto_commit
        try:
            if self._subscription is not None:
                self._revoke_all(commit=commit)
            elif commit and self._assignment:
                self._commit_sync(self._consumed_offsets(), NO_GENERATION)
            self._complete_async_commits(wait_s=REQUEST_TIMEOUT_MS / 1000.0)
        finally:
            coordinator.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
