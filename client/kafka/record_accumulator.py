"""The producer's record accumulator: per-partition batches, shared batch results, light record futures.

After Kafka's `RecordAccumulator`, `ProducerBatch`, `ProduceRequestResult` and
`FutureRecordMetadata` (clients/…/producer/internals). `send()` costs one
lock, one `RecordBatchBuilder.append` and one small future per record: a
record's future holds only the batch's shared result and its offset delta
(offset = base offset + delta once the broker answers). The sender thread
drains ready batches (full, older than linger, or flushing/closing) grouped
by leader broker.

Idempotence (KIP-98): with a producer id, `drain` takes at most one batch per
partition per request and stamps a batch with the producer id, epoch and the
partition's next base sequence when it is sealed; a retry resends the sealed
bytes, so the broker recognises it. Sequences restart at 0 when the producer
id changes.

Null-key records follow the sticky partitioner (KIP-480, docs/research/kafka.md
§5.5): a topic's sticky partition changes only when a record would need a new
batch there, so a partition's batch fills up before the producer moves on.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable

from client.kafka.client_errors import KafkaTimeoutError
from client.kafka.errors import KafkaError
from client.kafka.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, CompressionType, RecordBatchBuilder
from client.kafka.structs import TopicPartition
from client.kafka.types import RecordMetadata

log = logging.getLogger("zkraft.client.producer")

# Bytes a record adds to a batch beyond key and value: length, attributes, deltas, key/value lengths, header count.
RECORD_OVERHEAD_BYTES_MAX = 21
SEQUENCE_MODULUS = 1 << 31  # base sequences are int32 >= 0, wrapping to 0 (Kafka's incrementSequence)


def record_size_estimate(key: bytes | None, value: bytes | None, headers: Iterable | None) -> int:
    size = RECORD_OVERHEAD_BYTES_MAX + (len(key) if key else 0) + (len(value) if value else 0)
    if headers:
        for hkey, hvalue in headers:
            size += len(hkey) + (len(hvalue) if hvalue else 0) + 10
    return size


# Guards callback registration against completion; callbacks are rare, so one lock for all results.
_CALLBACK_LOCK = threading.Lock()


class ProduceRequestResult:
    """The outcome of one batch, shared by the futures of all its records."""

    __slots__ = ("tp", "base_offset", "log_append_time_ms", "error", "_event", "_callbacks")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: KafkaError | None = None
        self._event = threading.Event()
        self._callbacks: list[tuple[FutureRecordMetadata, Callable, bool]] | None = None

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float | None) -> bool:
        return self._event.wait(timeout_s)

    def complete(self, base_offset: int, log_append_time_ms: int, error: KafkaError | None) -> None:
        """Sets the outcome once and runs the registered callbacks (on the caller's thread: the sender's)."""
        if self._event.is_set():
            return
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.error = error
        with _CALLBACK_LOCK:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, None
        for future, fn, on_error in callbacks or ():
            future._run_callback(fn, on_error)

    def _add_callback(self, future: FutureRecordMetadata, fn: Callable, on_error: bool) -> bool:
        """Registers `fn`; False if the result is already set (the caller then runs it itself)."""
        with _CALLBACK_LOCK:
            if self._event.is_set():
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append((future, fn, on_error))
            return True


class FutureRecordMetadata:
    """kafka-python's future of one sent record: `get`, callbacks, `is_done`, `succeeded`, `exception`."""

    __slots__ = ("_result", "_delta", "_timestamp_ms", "_acks0")

    def __init__(self, result: ProduceRequestResult, offset_delta: int, timestamp_ms: int, acks0: bool) -> None:
        self._result = result
        self._delta = offset_delta
        self._timestamp_ms = timestamp_ms
        self._acks0 = acks0

    @property
    def is_done(self) -> bool:
        return self._result.done

    def succeeded(self) -> bool:
        return self._result.done and self._result.error is None

    def failed(self) -> bool:
        return self._result.done and self._result.error is not None

    def exception(self) -> KafkaError | None:
        return self._result.error if self._result.done else None

    def _metadata(self) -> RecordMetadata:
        r = self._result
        offset = -1 if self._acks0 or r.base_offset < 0 else r.base_offset + self._delta
        timestamp = r.log_append_time_ms if r.log_append_time_ms > 0 else self._timestamp_ms  # 0: proto3 unset
        return RecordMetadata(r.tp.topic, r.tp.partition, offset, timestamp)

    @property
    def value(self) -> RecordMetadata | None:
        return self._metadata() if self.succeeded() else None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Waits up to `timeout` seconds (None: until the delivery timeout fails it) and returns the metadata."""
        if not self._result.wait(timeout):
            tp = self._result.tp
            raise KafkaTimeoutError(f"record for {tp.topic}-{tp.partition} not acknowledged within {timeout} s")
        if self._result.error is not None:
            raise self._result.error
        return self._metadata()

    def add_callback(self, fn: Callable[[RecordMetadata], object]) -> FutureRecordMetadata:
        """`fn(RecordMetadata)` on success, on the sender thread (or now, if already done)."""
        if not self._result._add_callback(self, fn, False):
            self._run_callback(fn, False)
        return self

    def add_errback(self, fn: Callable[[BaseException], object]) -> FutureRecordMetadata:
        """`fn(exception)` on failure, on the sender thread (or now, if already done)."""
        if not self._result._add_callback(self, fn, True):
            self._run_callback(fn, True)
        return self

    def add_both(self, fn: Callable[[object], object]) -> FutureRecordMetadata:
        return self.add_callback(fn).add_errback(fn)

    def _run_callback(self, fn: Callable, on_error: bool) -> None:
        error = self._result.error
        if on_error != (error is not None):
            return
        try:
            fn(error if on_error else self._metadata())
        except Exception:  # a user callback must not kill the sender thread
            log.exception("producer_callback_failed")


class ProducerBatch:
    """One partition's batch under construction or in flight."""

    __slots__ = (
        "tp",
        "builder",
        "result",
        "base_timestamp_ms",
        "created_s",
        "attempts",
        "retry_at_s",
        "payload",
        "reserved_bytes",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "_count",
    )

    def __init__(self, tp: TopicPartition, compression: CompressionType, now_s: float) -> None:
        self.tp = tp
        self.base_timestamp_ms = time.time_ns() // 1_000_000
        self.builder: RecordBatchBuilder | None = RecordBatchBuilder(self.base_timestamp_ms, compression)
        self.result = ProduceRequestResult(tp)
        self.created_s = now_s
        self.attempts = 0
        self.retry_at_s = 0.0
        self.payload: bytes | None = None  # built on first drain, reused by retries
        self.reserved_bytes = 0
        self.producer_id = NO_PRODUCER_ID  # set when sealed by an idempotent producer
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self._count = 0

    @property
    def record_count(self) -> int:
        return self.builder.record_count if self.builder is not None else self._count

    @property
    def sealed(self) -> bool:
        return self.payload is not None

    def close(
        self,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
    ) -> bytes:
        """Seals the batch (no more appends) and returns its bytes; a sealed batch keeps its bytes and sequence."""
        if self.payload is None:
            if self.builder is None:
                raise RuntimeError(f"batch for {self.tp} has neither a builder nor a payload")
            self._count = self.builder.record_count
            if producer_id >= 0:
                self.payload = self.builder.build(producer_id, producer_epoch, base_sequence)
                self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
            else:
                self.payload = self.builder.build()
            self.builder = None
        return self.payload


class RecordAccumulator:
    """Per-partition deques of batches under one lock; the sender drains them."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        compression: CompressionType,
        buffer_memory: int,
        max_block_ms: int,
        acks0: bool,
        wakeup: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000.0
        self.compression = compression
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000.0
        self._acks0 = acks0
        self._wakeup = wakeup
        self._clock = clock
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._space_waiters = 0
        self._batches: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self._open: dict[tuple[str, int], ProducerBatch] = {}  # the batch appends go to, per partition
        self._sticky: dict[str, int] = {}
        self._available: dict[str, list[int]] = {}  # partitions with a leader, per topic (for sticky choice)
        self._incomplete: set[ProducerBatch] = set()
        self._used_bytes = 0
        self._flushes = 0
        self.closing = False
        # Idempotence: the next base sequence per partition, for the producer id and epoch they belong to.
        self._sequences: dict[tuple[str, int], int] = {}
        self._sequences_producer: tuple[int, int] | None = None

    # ------------------------------------------------------------------ metadata

    def set_available_partitions(self, topic: str, partitions: list[int]) -> None:
        self._available[topic] = partitions

    def sticky_partition(self, topic: str) -> int | None:
        return self._sticky.get(topic)

    def _next_sticky(self, topic: str, previous: int | None) -> int:
        """Kafka's StickyPartitionCache.nextPartition: a random available partition other than `previous`."""
        available = self._available.get(topic) or [0]
        choice = available[0]
        if len(available) > 1:
            others = [p for p in available if p != previous]
            choice = others[random.randrange(len(others))]
        self._sticky[topic] = choice
        return choice

    # ------------------------------------------------------------------ append (user threads)

    def append(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp_ms: int | None,
        size: int,
    ) -> FutureRecordMetadata:
        """Appends a record; `partition` None means the topic's sticky partition. Blocks while the buffer is full."""
        batch_size = self.batch_size
        with self._lock:
            if self._used_bytes + size > self.buffer_memory and self._used_bytes > 0:
                self._wait_for_space(topic, size)
            if partition is None:
                sticky = self._sticky.get(topic)
                open_batch = self._open.get((topic, sticky)) if sticky is not None else None
                if (
                    sticky is None or open_batch is None or open_batch.builder.size_estimate + size > batch_size  # type: ignore[union-attr]
                ):
                    sticky = self._next_sticky(topic, sticky)
                tp_key = (topic, sticky)
            else:
                tp_key = (topic, partition)
            batch = self._open.get(tp_key)
            new_batch = batch is None or batch.builder.size_estimate + size > batch_size  # type: ignore[union-attr]
            if batch is None or new_batch:
                batch = self._new_batch(tp_key)
            try:
                offset_delta = batch.builder.append(key, value, headers or (), timestamp_ms)  # type: ignore[union-attr]
            except Exception:
                if new_batch:  # never leave an empty batch behind: the sender cannot build it
                    self._drop_empty_batch(tp_key, batch)
                raise
            self._used_bytes += size
            batch.reserved_bytes += size
        if new_batch:
            self._wakeup()
        return FutureRecordMetadata(
            batch.result,
            offset_delta,
            batch.base_timestamp_ms if timestamp_ms is None else timestamp_ms,
            self._acks0,
        )

    def _new_batch(self, tp_key: tuple[str, int]) -> ProducerBatch:
        batch = ProducerBatch(TopicPartition(*tp_key), self.compression, self._clock())
        dq = self._batches.get(tp_key)
        if dq is None:
            dq = self._batches[tp_key] = deque()
        dq.append(batch)
        self._open[tp_key] = batch
        self._incomplete.add(batch)
        return batch

    def _drop_empty_batch(self, tp_key: tuple[str, int], batch: ProducerBatch) -> None:
        self._batches[tp_key].remove(batch)
        if self._open.get(tp_key) is batch:
            del self._open[tp_key]
        self._incomplete.discard(batch)

    def _wait_for_space(self, topic: str, size: int) -> None:
        deadline = time.monotonic() + self.max_block_s  # a real wait: Condition.wait uses real time
        self._space_waiters += 1
        self._wakeup()
        try:
            while self._used_bytes + size > self.buffer_memory and self._used_bytes > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"send to {topic}: buffer_memory {self.buffer_memory} bytes full for {self.max_block_s:g} s"
                    )
                self._space.wait(remaining)
        finally:
            self._space_waiters -= 1

    # ------------------------------------------------------------------ sender side

    def drain(
        self,
        leader_of: Callable[[str, int], int],
        node_ready: Callable[[int], bool],
        max_request_size: int,
        now_s: float,
        muted: Collection[tuple[str, int]] = (),
        producer: tuple[int, int] | None = None,
    ) -> tuple[dict[int, list[ProducerBatch]], float, bool]:
        """Ready batches grouped by leader; also the next time something becomes ready and whether a leader is unknown.

        Each partition contributes its ready batches in order, as long as the
        request for that leader stays under `max_request_size` (one batch at least).
        Partitions in `muted` (those with a request in flight) are skipped.
        With `producer` (an idempotent producer's id and epoch) a partition
        gives one batch, sealed with the partition's next sequence: a request
        holds one batch per partition, so a retried request is always either
        wholly a duplicate or wholly new on the broker.
        """
        if producer is not None and producer != self._sequences_producer:
            self._sequences = {}
            self._sequences_producer = producer
        drained: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        next_s = now_s + 1.0
        unknown_leader = False
        with self._lock:
            force = self._flushes > 0 or self.closing or self._space_waiters > 0
            for tp_key, dq in self._batches.items():
                if not dq or tp_key in muted:
                    continue
                first = dq[0]
                if first.retry_at_s > now_s:
                    next_s = min(next_s, first.retry_at_s)
                    continue
                if not (force or len(dq) > 1 or self._full_or_lingered(first, now_s)):
                    next_s = min(next_s, first.created_s + self.linger_s)
                    continue
                leader = leader_of(*tp_key)
                if leader < 0:
                    unknown_leader = True
                    continue
                if not node_ready(leader):
                    continue
                out = drained.setdefault(leader, [])
                used = sizes.get(leader, 0)
                while dq:
                    batch = dq[0]
                    is_last = len(dq) == 1
                    if batch.retry_at_s > now_s or (is_last and not force and not self._full_or_lingered(batch, now_s)):
                        break
                    size = len(batch.payload) if batch.payload is not None else batch.builder.size_estimate  # type: ignore[union-attr]
                    if out and used + size > max_request_size:
                        break
                    dq.popleft()
                    if self._open.get(tp_key) is batch:
                        del self._open[tp_key]
                    if producer is None:
                        batch.close()
                    else:
                        self._seal_idempotent(tp_key, batch, producer)
                    out.append(batch)
                    used += size
                    if producer is not None:
                        break
                sizes[leader] = used
                if not out:
                    del drained[leader]
        return drained, next_s, unknown_leader

    def _seal_idempotent(self, tp_key: tuple[str, int], batch: ProducerBatch, producer: tuple[int, int]) -> None:
        if batch.sealed:
            return  # a retry: same bytes, same producer id and sequence as its first attempt
        sequence = self._sequences.get(tp_key, 0)
        batch.close(producer[0], producer[1], sequence)
        self._sequences[tp_key] = (sequence + batch.record_count) % SEQUENCE_MODULUS

    def _full_or_lingered(self, batch: ProducerBatch, now_s: float) -> bool:
        if batch.builder is None:  # sealed: a retry
            return True
        return batch.builder.size_estimate >= self.batch_size or now_s >= batch.created_s + self.linger_s

    def reenqueue(self, batches: list[ProducerBatch], retry_at_s: float) -> None:
        """Puts failed batches back at the front of their partitions, in their original order."""
        with self._lock:
            for batch in reversed(batches):
                batch.retry_at_s = retry_at_s
                tp_key = (batch.tp.topic, batch.tp.partition)
                dq = self._batches.get(tp_key)
                if dq is None:
                    dq = self._batches[tp_key] = deque()
                dq.appendleft(batch)

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int, error: KafkaError | None):
        """Completes a batch's result (callbacks run here) and frees its buffer bytes."""
        with self._lock:
            self._incomplete.discard(batch)
            self._used_bytes -= batch.reserved_bytes
            batch.reserved_bytes = 0
            if self._space_waiters:
                self._space.notify_all()
        batch.result.complete(base_offset, log_append_time_ms, error)

    def expired(self, now_s: float, delivery_timeout_s: float) -> list[ProducerBatch]:
        """Removes and returns waiting batches older than the delivery timeout (Kafka's `expiredBatches`)."""
        out = []
        with self._lock:
            for tp_key, dq in self._batches.items():
                while dq and now_s - dq[0].created_s >= delivery_timeout_s:
                    batch = dq.popleft()
                    if self._open.get(tp_key) is batch:
                        del self._open[tp_key]
                    out.append(batch)
        return out

    def abort_all(self) -> list[ProducerBatch]:
        with self._lock:
            out = [b for dq in self._batches.values() for b in dq]
            self._batches.clear()
            self._open.clear()
        return out

    # ------------------------------------------------------------------ flush / state

    def begin_flush(self) -> list[ProduceRequestResult]:
        with self._lock:
            self._flushes += 1
            return [b.result for b in self._incomplete]

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def has_waiting(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def incomplete_count(self) -> int:
        with self._lock:
            return len(self._incomplete)

    @property
    def used_bytes(self) -> int:
        return self._used_bytes
