"""The Kafka-style consumer without groups: assign or subscribe-all, positions, prefetching fetches.

After Kafka's `KafkaConsumer` and `Fetcher` (clients/…/consumer) in the
kafka-python `group_id=None` flavour: a consumer given topics consumes every
partition of them (new partitions are picked up on metadata refresh). Fetches
go ONE request per leader broker for all the partitions it leads (replica_id
-1), at most one in flight per broker; a response is kept as raw bytes and
decoded only when its records are handed to the user, and the next fetch to
that broker goes out while the user works (prefetch). Start positions come
from ListOffsets (-2 earliest, -1 latest; research/kafka.md §3.4).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import grpc

from client.consumer_records import decode_fetched, deserialize, fetched_end_offset
from client.kafka_client_errors import (
    GroupFeatureNotImplementedError,
    IllegalStateError,
    KafkaConfigurationError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from client.kafka_cluster import KafkaClusterClient, error_from_rpc
from client.kafka_errors import (
    NONE,
    KafkaError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    error_for,
)
from client.kafka_types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ConsumerRecord
from client.structs import TopicPartition
from zkraft_proto import broker_pb2

log = logging.getLogger("zkraft.client.consumer")

__all__ = ["Consumer", "ConsumerRecord", "TopicPartition"]

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
    """kafka-python's KafkaConsumer (no groups yet): poll, iterate, assign, seek, offsets. Not thread-safe."""

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
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
                raise KafkaConfigurationError(f"{name} must be a number >= {minimum}, got {value!r}")
        for name, fn in (("key_deserializer", key_deserializer), ("value_deserializer", value_deserializer)):
            if fn is not None and not callable(fn):
                raise KafkaConfigurationError(f"{name} must be callable")
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
            bootstrap_servers, client_id=client_id, request_timeout_ms=REQUEST_TIMEOUT_MS
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
        if group_id is not None:
            log.warning("consumer_groups_not_implemented", extra={"group_id": group_id})
        if topics:
            self.subscribe(list(topics))

    # ------------------------------------------------------------------ assignment

    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None) -> None:
        """Consumes every partition of `topics` (kafka-python's behaviour without a group)."""
        if pattern is not None:
            raise GroupFeatureNotImplementedError("subscribe(pattern=...) is not implemented yet")
        names = [topics] if isinstance(topics, str) else list(topics or ())
        if not names:
            raise KafkaConfigurationError("subscribe needs at least one topic")
        self._subscription = set(names)
        self._next_metadata_s = 0.0
        self._metadata_wanted = True

    def unsubscribe(self) -> None:
        self._subscription = None
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

    def highwater(self, partition: TopicPartition) -> int | None:
        hw = self._state(partition).high_watermark
        return None if hw < 0 else hw

    def _reset_positions(self, partitions: Sequence[TopicPartition]) -> None:
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
        """ListOffsets to each partition's leader; retriable errors refresh metadata and retry until the deadline."""
        self._check_open()
        result: dict[TopicPartition, int] = {}
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
        by_topic: dict[str, list[broker_pb2.ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                broker_pb2.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=-1, timestamp=pending[tp]
                )
            )
        request = broker_pb2.ListOffsetsRequest(
            replica_id=-1,
            topics=[broker_pb2.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        try:
            response = self._cluster.stub(leader).ListOffsets(request, timeout=REQUEST_TIMEOUT_MS / 1000.0)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"ListOffsets to broker {leader}") from None
        last = None
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in pending:
                    continue
                if p.error_code == NONE:
                    result[tp] = p.offset
                    del pending[tp]
                    continue
                error = error_for(p.error_code, f"ListOffsets for {tp}")
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
        """Assigns every partition of the subscribed topics, refreshing metadata when due."""
        if self._subscription is None:
            return
        snapshot = self._cluster.snapshot
        stale = now - self._subscription_refreshed_s >= METADATA_MAX_AGE_S
        missing = any(t not in snapshot.topics or not snapshot.topics[t].partitions for t in self._subscription)
        if (stale or missing or self._metadata_wanted) and now >= self._next_metadata_s:
            self._next_metadata_s = now + RETRY_BACKOFF_S
            try:
                snapshot = self._cluster.refresh(self._subscription)
                self._metadata_wanted = False
                self._subscription_refreshed_s = now
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("consumer_metadata_refresh_failed", extra={"error": str(exc)})
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
            elif self._assignment:
                self._refresh_assigned_metadata()
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
        by_topic: dict[str, list[broker_pb2.FetchPartition]] = {}
        for tp, (offset, _) in parts.items():
            by_topic.setdefault(tp.topic, []).append(
                broker_pb2.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=offset,
                    log_start_offset=-1,
                    partition_max_bytes=self.max_partition_fetch_bytes,
                )
            )
        request = broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=self.fetch_max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            topics=[broker_pb2.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
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
        if response.error_code != NONE:
            error = error_for(response.error_code, "Fetch")
            if not error.retriable:
                raise error
            self._metadata_wanted = True
            return
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                sent = parts.get(tp)
                state = self._assignment.get(tp)
                if sent is None or state is None or state.epoch != sent[1] or state.position is None:
                    continue
                fetch_offset = sent[0]
                if p.error_code == NONE:
                    state.high_watermark = p.high_watermark
                    if p.records:
                        self._completed.append(_CompletedFetch(tp, state.epoch, fetch_offset, p.records))
                elif p.error_code == OffsetOutOfRangeError.code:
                    if self._reset is None:
                        raise OffsetOutOfRangeError(
                            f"partition {tp}: offset {fetch_offset} is out of range and auto_offset_reset is 'none'"
                        )
                    log.info("consumer_offset_reset", extra={"partition": str(tp), "offset": fetch_offset})
                    state.position = None
                    state.epoch += 1
                    self._drop_buffered(tp)
                else:
                    error = error_for(p.error_code, f"Fetch for {tp} at offset {fetch_offset}")
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

    def commit(self, offsets: object = None) -> None:
        raise GroupFeatureNotImplementedError("commit(): consumer groups are not implemented yet")

    def commit_async(self, offsets: object = None, callback: object = None) -> None:
        raise GroupFeatureNotImplementedError("commit_async(): consumer groups are not implemented yet")

    def committed(self, partition: TopicPartition) -> int | None:
        raise GroupFeatureNotImplementedError("committed(): consumer groups are not implemented yet")

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        for future, _ in self._in_flight.values():
            future.cancel()
        self._in_flight.clear()
        self._completed.clear()
        self._cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
