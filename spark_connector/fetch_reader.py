"""Executor side: read one offset range from its partition's leader with the Fetch API, yield Arrow batches.

`read_range` is a pure function of its `OffsetRange` (docs/research/spark.md §0.4):
it fetches from the leader named by this worker's cached metadata, keeps the
next Fetch in flight while it decodes the current response (one gRPC future),
and yields one RecordBatch per response. Retriable errors (NOT_LEADER,
LEADER_NOT_AVAILABLE, a broker that went away) refresh the metadata and
retry until `fetch_timeout_ms` passes without progress. Data loss
(OFFSET_OUT_OF_RANGE, a deleted topic) follows Spark's Kafka source: with
failOnDataLoss the task fails naming what was lost; without, a warning is
logged and reading resumes at the earliest offset still available inside the
range, or the range ends (`KafkaDataConsumer.getEarliestAvailableOffsetBetween`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import grpc
import pyarrow as pa

from client import TopicPartition
from client.kafka.cluster import KafkaClusterClient, error_from_rpc
from client.kafka.consumer_records import fetched_end_offset
from client.kafka.errors import NONE, KafkaError, OffsetOutOfRangeError, UnknownTopicOrPartitionError, error_for
from runtime.heap_tuning import retain_freed_buffers
from spark_connector.arrow_decode import decode_to_arrow
from spark_connector.brokers import OffsetLookup, TopicGoneError, cluster_client, retriable
from spark_connector.fetch_wire import FETCH_METHOD, fetched_partition
from spark_connector.planning import OffsetRange, data_loss_reporter
from zkraft_proto import broker_pb2

log = logging.getLogger("zkraft.spark")

# The broker answers at once when it has data; when it has none below the range end (a new leader whose high
# watermark is still catching up) it holds the fetch this long.
FETCH_MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.1


class FetchTimeoutError(KafkaError):
    """A range could not be read to its end within kafkaConsumer.pollTimeoutMs of no progress."""

    retriable = True


def read_range(r: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Every record of [r.from_offset, r.until_offset) as Arrow RecordBatches in the Kafka source schema."""
    retain_freed_buffers()  # each fetch is megabytes: reuse freed heap instead of faulting it in again
    reader = _RangeReader(r)
    yield from reader.batches()


class _RangeReader:
    def __init__(self, r: OffsetRange) -> None:
        self.r = r
        self.tp = TopicPartition(r.topic, r.partition)
        self.client: KafkaClusterClient = cluster_client(r.settings.bootstrap_servers, r.settings.client_properties)
        self.report = data_loss_reporter(r.settings.fail_on_data_loss, log)
        self.timeout_s = r.settings.fetch_timeout_ms / 1000.0
        self._fetch_calls: dict[grpc.Channel, grpc.UnaryUnaryMultiCallable] = {}
        self._learn_topic()

    def _learn_topic(self) -> None:
        """Metadata for a topic this worker has not read yet, now: not after a failed first fetch and a backoff."""
        if self.client.snapshot.leader_for(self.r.topic, self.r.partition) >= 0:
            return
        try:
            self.client.refresh([self.r.topic])
        except Exception as exc:
            if not retriable(exc):
                raise  # otherwise the first fetch fails and _recover retries as for any leader change

    def batches(self) -> Iterator[pa.RecordBatch]:
        position = self.r.from_offset
        until = self.r.until_offset
        settings = self.r.settings
        progress_deadline = time.monotonic() + self.timeout_s
        in_flight = None  # (offset, future) of the fetch sent ahead
        while position < until:
            if in_flight is not None and in_flight[0] == position:
                response = in_flight[1]
            else:
                if in_flight is not None and in_flight[1] is not None:
                    in_flight[1].cancel()
                response = self._send(position)
            in_flight = None
            try:
                data = self._await(response, position)
            except KafkaError as exc:
                resume = self._recover(exc, position, progress_deadline)
                if resume is None:
                    return
                position = resume
                continue
            if data is None:  # nothing below `until` yet (see FETCH_MAX_WAIT_MS)
                if time.monotonic() > progress_deadline:
                    raise FetchTimeoutError(
                        f"{self.tp}: no records at offset {position} within {self.timeout_s:g} s"
                        f" (range ends at {until})"
                    )
                continue
            records, high_watermark = data
            decoded_next = fetched_end_offset(records, position)
            if decoded_next < until and decoded_next > position:
                in_flight = (decoded_next, self._send(decoded_next))  # overlap the next round trip with this decode
            decoded = decode_to_arrow(
                self.r.topic, self.r.partition, records, position, until, settings.include_headers
            )
            if decoded.batch is not None:
                yield decoded.batch
            if decoded.next_offset > position:
                position = decoded.next_offset
                progress_deadline = time.monotonic() + self.timeout_s
            elif high_watermark <= position < until and time.monotonic() > progress_deadline:
                raise FetchTimeoutError(f"{self.tp}: high watermark {high_watermark} stays below {until}")
        if in_flight is not None and in_flight[1] is not None:
            in_flight[1].cancel()

    # ------------------------------------------------------------------ one fetch

    def _send(self, position: int):
        leader = self.client.snapshot.leader_for(self.r.topic, self.r.partition)
        if leader < 0:
            return None
        request = broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=FETCH_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=self.r.settings.fetch_max_bytes,
            topics=[
                broker_pb2.FetchTopic(
                    topic=self.r.topic,
                    partitions=[
                        broker_pb2.FetchPartition(
                            partition=self.r.partition,
                            current_leader_epoch=-1,
                            fetch_offset=position,
                            log_start_offset=-1,
                            partition_max_bytes=self.r.settings.fetch_max_bytes,
                        )
                    ],
                )
            ],
        )
        try:
            fetch = self._fetch_call(leader)
        except KafkaError:
            return None
        future = fetch.future(request, timeout=FETCH_MAX_WAIT_MS / 1000.0 + 30.0)
        future.zkraft_leader = leader  # type: ignore[attr-defined]
        return future

    def _fetch_call(self, leader: int) -> grpc.UnaryUnaryMultiCallable:
        """Fetch on the leader's channel, answering the encoded response (read by fetch_wire, records not copied)."""
        channel = self.client.channel(leader)  # by address: a restarted broker may listen elsewhere
        call = self._fetch_calls.get(channel)
        if call is None:
            call = channel.unary_unary(
                FETCH_METHOD, request_serializer=broker_pb2.FetchRequest.SerializeToString, response_deserializer=None
            )
            self._fetch_calls[channel] = call
        return call

    def _await(self, future, position: int) -> tuple[memoryview, int] | None:
        """(records, high watermark), None when the leader had nothing; KafkaError for a failed fetch."""
        if future is None:
            raise error_for(5, f"Fetch for {self.tp}: no leader known")
        try:
            raw = future.result()
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"Fetch for {self.tp} from broker {future.zkraft_leader}") from None
        response = fetched_partition(raw, self.r.topic, self.r.partition)
        if response.error_code != NONE:
            raise error_for(response.error_code, f"Fetch for {self.tp}")
        p = response.partition
        if p is None:
            return None
        if p.error_code != NONE:
            raise error_for(p.error_code, f"Fetch for {self.tp} at offset {position}")
        return (p.records, p.high_watermark) if len(p.records) else None

    # ------------------------------------------------------------------ errors

    def _recover(self, exc: KafkaError, position: int, deadline: float) -> int | None:
        """Where to continue after a failed fetch, None to end the range; raises what cannot be retried."""
        until = self.r.until_offset
        if isinstance(exc, OffsetOutOfRangeError):
            return self._skip_lost(position)
        if isinstance(exc, UnknownTopicOrPartitionError) and not self._exists():
            self.report(f"cannot fetch {self.tp} at offset {position}: the topic was deleted")
            return None
        if not retriable(exc) or time.monotonic() > deadline:
            raise exc
        log.info("spark_fetch_retry: %s", exc)
        time.sleep(RETRY_BACKOFF_S)  # a backoff before asking for new metadata, not synchronisation
        try:
            self.client.refresh([self.r.topic])
        except Exception as refresh_exc:
            if not retriable(refresh_exc):
                raise
        return position if position < until else None

    def _exists(self) -> bool:
        try:
            return bool(
                OffsetLookup(self.r.settings.bootstrap_servers, self.r.settings.client_properties).existing([self.tp])
            )
        except Exception as exc:
            if retriable(exc):
                return True  # cannot tell yet: retry the fetch
            raise

    def _skip_lost(self, position: int) -> int | None:
        """OFFSET_OUT_OF_RANGE at `position`: report, then the earliest available offset inside the range."""
        until = self.r.until_offset
        lookup = OffsetLookup(self.r.settings.bootstrap_servers, self.r.settings.client_properties)
        try:
            earliest = lookup.earliest([self.tp])[self.tp]
            latest = lookup.latest([self.tp])[self.tp]
        except TopicGoneError:
            self.report(f"cannot fetch {self.tp} at offset {position}: the topic was deleted")
            return None
        if earliest <= position < latest:
            return position  # a transient answer (a leader change): fetch again
        if position < earliest:
            self.report(
                f"cannot fetch {self.tp} at offset {position}: the earliest available offset is {earliest};"
                f" records {position}-{min(earliest, until) - 1} are lost"
            )
            return earliest if earliest < until else None
        self.report(
            f"cannot fetch {self.tp} at offset {position}: the latest offset is {latest};"
            f" records {position}-{until - 1} are lost"
        )
        return None
