"""The Kafka-style producer: `send()` appends to the accumulator, one sender thread talks to the brokers.

After Kafka's `KafkaProducer` and `Sender` (clients/…/producer). The sender
thread drains ready batches into ONE Produce request per leader broker (every
partition it leads, several batches per partition up to max_request_size),
keeps up to `max_in_flight_requests_per_connection` requests per broker in
flight with gRPC futures, and completes the batches' results from the
responses. A partition is in at most one request at a time (gRPC does not
order concurrent RPCs, so two in flight could land swapped): a partition's
records land in send order, retries included. Retriable errors refresh
metadata and retry after `retry_backoff_ms` until `delivery_timeout_ms`;
other errors fail the batch.

With acks=0 a batch's futures complete (offset -1) as soon as its request
leaves; the broker still answers the RPC, which only frees the in-flight slot.

Idempotence (`enable_idempotence=True`, KIP-98): acks must be all, retries
> 0 and max_in_flight_requests_per_connection <= 5 (Kafka's ConfigException
rules, raised here as KafkaConfigurationError, a ValueError). Before its first
send the sender asks any broker for a producer id (InitProducerId). Each
partition's batches carry consecutive base sequences, one batch per partition
per request, and a retry resends the same bytes, so a batch the broker wrote
but whose answer was lost is not written twice: the broker answers with the
original offset. A batch that fails for good after it got a sequence
(OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH,
retries or delivery timeout exhausted, any non-retriable error) fails to the
user and the producer takes a NEW producer id, sequences restarting at 0, as
Kafka 2.0-2.4's idempotent producer does (`TransactionManager.resetProducerId`):
the failed batch's fate is unknown, so later batches must not depend on it,
and no batch is ever re-sequenced and resent under a sequence it did not
first carry (which could write it twice).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

import grpc

from client.kafka import codec
from client.kafka.client_errors import IllegalStateError, KafkaConfigurationError, KafkaTimeoutError
from client.kafka.cluster import KafkaClusterClient, error_from_rpc
from client.kafka.errors import (
    NONE,
    CorruptRecordError,
    DuplicateSequenceNumberError,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
    error_for,
)
from client.kafka.partitioner import murmur2
from client.kafka.record_accumulator import FutureRecordMetadata, ProducerBatch, RecordAccumulator, record_size_estimate
from client.kafka.records import CompressionType
from client.kafka.types import RecordMetadata
from runtime.client_config import SaslCredentials
from runtime.tls import TlsConfig

log = logging.getLogger("zkraft.client.producer")

__all__ = ["FutureRecordMetadata", "Producer", "RecordMetadata"]

_ACKS = {0: 0, 1: 1, -1: -1, "all": -1, "0": 0, "1": 1, "-1": -1}
# Kafka's compression.type values (kafka-python's compression_type), None meaning none.
_COMPRESSION = {None: CompressionType.NONE} | {codec.name.lower(): codec for codec in CompressionType}
# Kafka's CorruptRecordException is retriable in Errors.java, but resending the same bytes cannot help.
_NEVER_RETRY = {CorruptRecordError.code}
# How long the sender sleeps at most when nothing is due (it is woken by sends and responses anyway).
_SENDER_IDLE_S = 0.1
# A closed producer waits this long for the sender thread to exit after failing what is left.
_FORCE_CLOSE_JOIN_S = 5.0
# The broker keeps a producer's last 5 batches per partition (KIP-98): Kafka's limit on in-flight requests.
_IDEMPOTENT_IN_FLIGHT_MAX = 5


def _positive(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise KafkaConfigurationError(f"{name} must be a number >= {minimum}, got {value!r}")
    return int(value)


class Producer:
    """kafka-python's KafkaProducer, on the zkraft broker service. Thread-safe; a context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        acks: int | str | None = None,
        linger_ms: float = 5,
        batch_size: int = 16384,
        key_serializer: Callable[[object], bytes | None] | None = None,
        value_serializer: Callable[[object], bytes | None] | None = None,
        compression_type: str | None = None,
        max_in_flight_requests_per_connection: int = 5,
        retries: int = 2147483647,
        retry_backoff_ms: float = 100,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        buffer_memory: int = 33554432,
        max_request_size: int = 1048576,
        client_id: str = "zkraft-producer",
        enable_idempotence: bool = False,
        tls: TlsConfig | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        """`acks` defaults to 1, or to all with `enable_idempotence` (which refuses acks 0 and 1)."""
        if acks is None:
            acks = -1 if enable_idempotence else 1
        if acks not in _ACKS or isinstance(acks, bool):
            raise KafkaConfigurationError(f"acks must be 0, 1, -1 or 'all', got {acks!r}")
        if compression_type not in _COMPRESSION:
            raise KafkaConfigurationError(
                f"compression_type must be None, 'none', 'gzip', 'snappy', 'lz4' or 'zstd', got {compression_type!r}"
            )
        self.acks = _ACKS[acks]
        self.linger_ms = _positive("linger_ms", linger_ms, 0)
        self.batch_size = _positive("batch_size", batch_size)
        self.max_in_flight = _positive("max_in_flight_requests_per_connection", max_in_flight_requests_per_connection)
        self.retries = _positive("retries", retries, 0)
        self.retry_backoff_s = _positive("retry_backoff_ms", retry_backoff_ms, 0) / 1000.0
        self.request_timeout_ms = _positive("request_timeout_ms", request_timeout_ms)
        self.delivery_timeout_ms = _positive("delivery_timeout_ms", delivery_timeout_ms)
        self.buffer_memory = _positive("buffer_memory", buffer_memory)
        self.max_request_size = _positive("max_request_size", max_request_size)
        self.enable_idempotence = bool(enable_idempotence)
        if self.enable_idempotence:
            _check_idempotence_config(self.acks, self.retries, self.max_in_flight)
        if key_serializer is not None and not callable(key_serializer):
            raise KafkaConfigurationError("key_serializer must be callable")
        if value_serializer is not None and not callable(value_serializer):
            raise KafkaConfigurationError("value_serializer must be callable")
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self.client_id = client_id
        self._cluster = KafkaClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=self.request_timeout_ms, tls=tls, sasl=sasl
        )
        self._num_partitions: dict[str, int] = {}
        self._closed = False
        self._sender = _Sender(self)
        self._accumulator = RecordAccumulator(
            batch_size=self.batch_size,
            linger_ms=self.linger_ms,
            compression=_COMPRESSION[compression_type],
            buffer_memory=self.buffer_memory,
            max_block_ms=self.request_timeout_ms,
            acks0=self.acks == 0,
            wakeup=self._sender.wakeup,
        )
        self._sender.start()

    # ------------------------------------------------------------------ public API

    def send(
        self,
        topic: str,
        value: object = None,
        key: object = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queues one record; returns its future. Raises at once for a closed producer or an oversized record."""
        if self._closed:
            raise IllegalStateError(f"send to {topic}: the producer is closed")
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        if not (value is None or type(value) is bytes or isinstance(value, bytes | bytearray | memoryview)):
            raise KafkaConfigurationError(f"send to {topic}: value must be bytes or None (or set a value_serializer)")
        if not (key is None or type(key) is bytes or isinstance(key, bytes | bytearray | memoryview)):
            raise KafkaConfigurationError(f"send to {topic}: key must be bytes or None (or set a key_serializer)")
        num_partitions = self._num_partitions.get(topic) or self._wait_on_metadata(topic)
        if partition is None:
            if key is not None:
                partition = (murmur2(key) & 0x7FFFFFFF) % num_partitions  # type: ignore[arg-type]
        elif not 0 <= partition < num_partitions:
            num_partitions = self._wait_on_metadata(topic, partition)
        size = record_size_estimate(key, value, headers)  # type: ignore[arg-type]
        if size > self.max_request_size or size > self.buffer_memory:
            raise MessageSizeTooLargeError(
                f"record for {topic} is {size} bytes serialized, more than max_request_size {self.max_request_size}"
                f" or buffer_memory {self.buffer_memory}"
            )
        return self._accumulator.append(topic, partition, key, value, headers, timestamp_ms, size)  # type: ignore[arg-type]

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued now and waits until it is acknowledged or failed.

        KafkaTimeoutError after `timeout` seconds (None: no limit but the delivery timeout).
        """
        results = self._accumulator.begin_flush()
        self._sender.wakeup()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for result in results:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not result.wait(remaining):
                    raise KafkaTimeoutError(f"flush: {len(results)} batch(es) not completed within {timeout} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Sends what is queued and stops; after `timeout` s, fails whatever is left and stops anyway."""
        if self._closed and not self._sender.is_alive():
            return
        self._closed = True
        self._accumulator.closing = True
        self._sender.closing = True
        self._sender.wakeup()
        if threading.current_thread() is self._sender:  # close() from a callback: the sender exits by itself
            return
        self._sender.join(timeout)
        if self._sender.is_alive():
            self._sender.force_close = True
            self._sender.wakeup()
            self._sender.join(_FORCE_CLOSE_JOIN_S)
        self._cluster.close()

    def partitions_for(self, topic: str) -> set[int]:
        """The partition ids of `topic` (fetched from the brokers if not cached)."""
        self._wait_on_metadata(topic)
        return self._cluster.partitions_for(topic) or set()

    def metrics(self) -> dict[str, int]:
        return dict(self._sender.counters)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata

    def _wait_on_metadata(self, topic: str, partition: int | None = None) -> int:
        """Refreshes until `topic` (and `partition`) is known; KafkaTimeoutError after request_timeout_ms."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        last: KafkaError | None = None
        while True:
            try:
                snapshot = self._cluster.refresh([topic], allow_auto_topic_creation=True)
                self._update_topics(snapshot)
                meta = snapshot.topics.get(topic)
                if meta is not None and meta.error_code != NONE:
                    last = error_for(meta.error_code, f"topic {topic}: metadata error")
                    if not last.retriable or isinstance(last, InvalidTopicError):
                        raise last
                elif meta is not None and meta.partitions:
                    count = len(meta.partitions)
                    if partition is None or partition < count:
                        return count
                    last = UnknownTopicOrPartitionError(f"partition {topic}-{partition} not in the metadata")
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last = exc
            if time.monotonic() + self.retry_backoff_s >= deadline:
                what = topic if partition is None else f"{topic}-{partition}"
                raise KafkaTimeoutError(
                    f"{what} not in the cluster metadata after {self.request_timeout_ms} ms (last: {last})"
                )
            time.sleep(self.retry_backoff_s or 0.01)

    def _update_topics(self, snapshot) -> None:
        for name, meta in snapshot.topics.items():
            if meta.error_code == NONE and meta.partitions:
                self._num_partitions[name] = len(meta.partitions)
                available = sorted(p for p, pm in meta.partitions.items() if pm.leader >= 0)
                self._accumulator.set_available_partitions(name, available or sorted(meta.partitions))


def _check_idempotence_config(acks: int, retries: int, max_in_flight: int) -> None:
    """Kafka's ProducerConfig checks for enable.idempotence (its ConfigException messages)."""
    if acks != -1:
        raise KafkaConfigurationError(
            f"Must set acks to all in order to use the idempotent producer (got acks={acks}). "
            "Otherwise we cannot guarantee idempotence."
        )
    if retries == 0:
        raise KafkaConfigurationError("Must set retries to non-zero when using the idempotent producer.")
    if max_in_flight > _IDEMPOTENT_IN_FLIGHT_MAX:
        raise KafkaConfigurationError(
            f"Must set max_in_flight_requests_per_connection to at most {_IDEMPOTENT_IN_FLIGHT_MAX} to use the "
            f"idempotent producer (got {max_in_flight})."
        )


class _Sender(threading.Thread):
    """The producer's one I/O thread (Kafka's `Sender.runOnce`): drain, send, complete, retry, expire."""

    def __init__(self, producer: Producer) -> None:
        super().__init__(name=f"{producer.client_id}-sender", daemon=True)
        self._p = producer
        self._wake = threading.Event()
        self._completions: collections.deque = collections.deque()
        self._in_flight: dict[int, int] = {}
        # Partitions with a request in flight. gRPC gives no order between concurrent RPCs (the broker
        # may run two Produce handlers at once), so a partition has at most one request in flight:
        # per-partition order holds even with retries. Each request carries all its ready batches.
        self._muted: set[tuple[str, int]] = set()
        self._metadata_wanted = False
        self._next_metadata_s = 0.0
        self.closing = False
        self.force_close = False
        self.counters: collections.Counter[str] = collections.Counter()
        # Idempotence: (producer id, epoch) from InitProducerId; None until granted or after a reset.
        self.producer_id_and_epoch: tuple[int, int] | None = None
        self._next_init_s = 0.0

    def wakeup(self) -> None:
        self._wake.set()

    def run(self) -> None:
        acc = self._p._accumulator
        try:
            while True:
                self._wake.clear()
                now = time.monotonic()
                self._process_completions()
                if self.force_close:
                    break
                if self.closing and not self._in_flight_total() and not acc.has_waiting():
                    break
                if self._metadata_wanted and now >= self._next_metadata_s:
                    self._refresh_metadata(now)
                self._expire(now)
                if self._p.enable_idempotence and self.producer_id_and_epoch is None:
                    if not self._init_producer_id(now):
                        self._wake.wait(max(0.0, self._next_init_s - time.monotonic()))
                        continue
                next_s = self._send_ready(now)
                if self._completions:
                    continue
                self._wake.wait(min(_SENDER_IDLE_S, max(0.0, next_s - time.monotonic())))
        except Exception:  # the loop boundary: fail everything loudly rather than hang the user
            log.exception("producer_sender_crashed")
        self._fail_all(KafkaTimeoutError("producer closed before the record was delivered"))

    # ------------------------------------------------------------------ sending

    def _in_flight_total(self) -> int:
        return sum(self._in_flight.values())

    def _send_ready(self, now: float) -> float:
        p = self._p
        snapshot = p._cluster.snapshot
        drained, next_s, unknown_leader = p._accumulator.drain(
            snapshot.leader_for,
            lambda node: self._in_flight.get(node, 0) < p.max_in_flight,
            p.max_request_size,
            now,
            self._muted,
            self.producer_id_and_epoch if p.enable_idempotence else None,
        )
        if unknown_leader:
            self._want_metadata()
            next_s = min(next_s, self._next_metadata_s)
        for node, batches in drained.items():
            self._send(node, batches)
        return next_s

    def _send(self, node: int, batches: list[ProducerBatch]) -> None:
        p = self._p
        by_topic: dict[str, dict[int, list[ProducerBatch]]] = {}
        for batch in batches:
            batch.attempts += 1
            by_topic.setdefault(batch.tp.topic, {}).setdefault(batch.tp.partition, []).append(batch)
        request = codec.produce_request(p.acks, p.request_timeout_ms, p.client_id, by_topic)
        try:
            stub = p._cluster.stub(node)
            future = stub.Produce.future(request, timeout=p.request_timeout_ms / 1000.0)
        except KafkaError as exc:
            self._handle_failure(batches, exc)
            return
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        self._muted.update((topic, index) for topic, parts in by_topic.items() for index in parts)
        self.counters["requests"] += 1
        self.counters["batches"] += len(batches)
        if p.acks == 0:
            for batch in batches:
                p._accumulator.complete(batch, -1, -1, None)
        future.add_done_callback(lambda f: self._on_done(node, by_topic, f))

    def _on_done(self, node: int, by_topic: dict, future: grpc.Future) -> None:
        # gRPC's thread: only hand over to the sender thread.
        self._completions.append((node, by_topic, future))
        self._wake.set()

    # ------------------------------------------------------------------ completing

    def _process_completions(self) -> None:
        while self._completions:
            node, by_topic, future = self._completions.popleft()
            self._in_flight[node] -= 1
            self._muted.difference_update((topic, index) for topic, parts in by_topic.items() for index in parts)
            if self._p.acks == 0:
                continue
            exc = future.exception()
            if exc is not None:
                what = f"Produce to broker {node}"
                error = error_from_rpc(exc, what) if isinstance(exc, grpc.RpcError) else KafkaError(f"{what}: {exc}")
                self._handle_failure([b for parts in by_topic.values() for g in parts.values() for b in g], error)
                continue
            self._handle_response(by_topic, future.result())

    def _handle_response(self, by_topic: dict[str, dict[int, list[ProducerBatch]]], response) -> None:
        acc = self._p._accumulator
        answered: set[tuple[str, int]] = set()
        for topic, index, error_code, error_message, base_offset, log_append_time_ms in codec.produce_results(response):
            group = by_topic.get(topic, {}).get(index)
            if group is None:
                continue
            answered.add((topic, index))
            if error_code == DuplicateSequenceNumberError.code:
                # Kafka's broker answered this for a batch it already has: written, offset unknown.
                for batch in group:
                    acc.complete(batch, -1, log_append_time_ms, None)
                continue
            if error_code != NONE:
                self._handle_failure(group, error_for(error_code, f"produce to {topic}-{index}: {error_message}"))
                continue
            offset = base_offset
            for batch in group:
                acc.complete(batch, offset, log_append_time_ms, None)
                offset += batch.record_count
        for topic, parts in by_topic.items():
            for index, group in parts.items():
                if (topic, index) not in answered:
                    self._handle_failure(group, KafkaError(f"produce to {topic}-{index}: no answer for the partition"))

    def _handle_failure(self, batches: list[ProducerBatch], error: KafkaError) -> None:
        p = self._p
        now = time.monotonic()
        retry: list[ProducerBatch] = []
        fail: list[ProducerBatch] = []
        for batch in batches:
            can_retry = (
                error.retriable
                and error.code not in _NEVER_RETRY
                and batch.attempts <= p.retries
                and now - batch.created_s < p.delivery_timeout_ms / 1000.0
                and not self.force_close
            )
            (retry if can_retry else fail).append(batch)
        if retry:
            self.counters["retries"] += len(retry)
            self._want_metadata()
            p._accumulator.reenqueue(retry, now + p.retry_backoff_s)
            log.info("produce_retry", extra={"error": str(error), "batches": len(retry)})
        for batch in fail:
            self.counters["failed_batches"] += 1
            self._maybe_reset_producer_id(batch, error)
            p._accumulator.complete(batch, -1, -1, error)

    def _expire(self, now: float) -> None:
        p = self._p
        timeout_s = p.delivery_timeout_ms / 1000.0
        for batch in p._accumulator.expired(now, timeout_s):
            tp = batch.tp
            error = KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {tp.topic}-{tp.partition}:"
                f" {p.delivery_timeout_ms} ms has passed since batch creation"
            )
            self._maybe_reset_producer_id(batch, error)
            p._accumulator.complete(batch, -1, -1, error)

    # ------------------------------------------------------------------ idempotence

    def _init_producer_id(self, now: float) -> bool:
        """Asks any broker for a producer id (InitProducerId, no transactional id); False: retry later."""
        p = self._p
        if now < self._next_init_s:
            return False
        self._next_init_s = now + max(p.retry_backoff_s, 0.01)
        try:
            reply = codec.init_producer_id_reply(
                p._cluster.call_any("InitProducerId", codec.init_producer_id_request())
            )
        except KafkaError as exc:
            log.info("producer_init_producer_id_failed", extra={"error": str(exc)})
            return False
        if reply.error_code != NONE:
            error = error_for(reply.error_code, f"InitProducerId: {reply.error_message}")
            log.info("producer_init_producer_id_failed", extra={"error": str(error)})
            return False
        self.producer_id_and_epoch = (reply.producer_id, reply.producer_epoch)
        self.counters["producer_ids"] += 1
        log.info("producer_id_granted", extra={"producer_id": reply.producer_id, "epoch": reply.producer_epoch})
        return True

    def _maybe_reset_producer_id(self, batch: ProducerBatch, error: KafkaError) -> None:
        """A batch that got a sequence under the current producer id failed for good: take a new producer id.

        Its records may or may not be in the log, so the partition's next
        sequence is unknown; a new producer id starts every partition at 0
        (Kafka 2.x resetProducerId). Batches already sealed under the old id
        keep it and are deduplicated under it.
        """
        current = self.producer_id_and_epoch
        if current is None or not batch.sealed or (batch.producer_id, batch.producer_epoch) != current:
            return
        log.warning(
            "producer_id_reset",
            extra={
                "producer_id": current[0],
                "topic_partition": f"{batch.tp.topic}-{batch.tp.partition}",
                "error": str(error),
            },
        )
        self.counters["producer_id_resets"] += 1
        self.producer_id_and_epoch = None

    def _fail_all(self, error: KafkaError) -> None:
        acc = self._p._accumulator
        for batch in acc.abort_all():
            acc.complete(batch, -1, -1, error)
        for result in acc.begin_flush():  # in-flight batches whose answers will never be read
            result.complete(-1, -1, error)
        acc.end_flush()

    # ------------------------------------------------------------------ metadata

    def _want_metadata(self) -> None:
        self._metadata_wanted = True

    def _refresh_metadata(self, now: float) -> None:
        p = self._p
        self._next_metadata_s = now + max(p.retry_backoff_s, 0.01)
        try:
            snapshot = p._cluster.refresh(list(p._num_partitions) or None, allow_auto_topic_creation=False)
        except KafkaError as exc:
            log.info("producer_metadata_refresh_failed", extra={"error": str(exc)})
            return
        self._metadata_wanted = False
        self.counters["metadata_refreshes"] += 1
        p._update_topics(snapshot)
