"""Broker access for the driver and the executors: one cluster client per process, partition discovery, offsets.

A Python worker is reused across tasks, so the `KafkaClusterClient` (the
metadata cache and one gRPC channel per broker) is kept per process and per
bootstrap list, as Spark's Kafka source caches its consumers. Offsets come
from ListOffsets sent to each partition's leader (-2 earliest, -1 latest =
the high watermark, or a timestamp), retried against refreshed metadata while
leaders move (docs/research/kafka.md §3.4).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

import grpc

from client import TopicPartition
from client.kafka.client_errors import KafkaConnectionError, NoBrokersAvailable
from client.kafka.cluster import ClusterSnapshot, KafkaClusterClient, error_from_rpc
from client.kafka.errors import NONE, KafkaError, LeaderNotAvailableError, UnknownTopicOrPartitionError, error_for
from client.kafka.security_config import client_security
from spark_connector.offsets import PartitionOffsets
from spark_connector.options import OffsetSpec, OptionError, StartKind, Subscription
from zkraft_proto import broker_pb2

log = logging.getLogger("zkraft.spark")

REQUEST_TIMEOUT_MS = 30_000
# ListOffsets and metadata keep retrying retriable errors (a leader election, a restarting broker) this long.
OFFSET_LOOKUP_DEADLINE_S = 30.0
RETRY_BACKOFF_S = 0.1

# Kafka's security properties of a query (SourceOptions.client_properties): part of what names a client.
ClientProperties = tuple[tuple[str, str], ...]
_clients: dict[tuple[str, ClientProperties], KafkaClusterClient] = {}
_clients_lock = threading.Lock()


class TopicGoneError(KafkaError):
    """A topic or partition the query was reading is no longer in the cluster metadata (deleted)."""


def cluster_client(bootstrap_servers: str, client_properties: ClientProperties = ()) -> KafkaClusterClient:
    """This process's client for `bootstrap_servers` with Kafka's security properties `client_properties`
    (created on first use, kept for the worker's life)."""
    key = (bootstrap_servers, client_properties)
    client = _clients.get(key)
    if client is None:
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = KafkaClusterClient(
                    bootstrap_servers,
                    client_id="zkraft-spark",
                    request_timeout_ms=REQUEST_TIMEOUT_MS,
                    **client_security(dict(client_properties)),
                )
                _clients[key] = client
    return client


def retriable(exc: Exception) -> bool:
    return isinstance(exc, KafkaConnectionError | NoBrokersAvailable) or (
        isinstance(exc, KafkaError) and exc.retriable and not isinstance(exc, TopicGoneError)
    )


class OffsetLookup:
    """Driver-side view of the subscribed partitions and their offsets."""

    def __init__(
        self,
        bootstrap_servers: str,
        client_properties: ClientProperties = (),
        deadline_s: float = OFFSET_LOOKUP_DEADLINE_S,
    ) -> None:
        self.client = cluster_client(bootstrap_servers, client_properties)
        self.deadline_s = deadline_s

    def partitions(self, subscription: Subscription) -> set[TopicPartition]:
        """The partitions the subscription covers now; `assign` is taken as given (Kafka does the same)."""
        if subscription.partitions:
            return set(subscription.partitions)
        snapshot = self._refresh(None if subscription.pattern is not None else subscription.topics)
        out: set[TopicPartition] = set()
        for name, meta in snapshot.topics.items():
            if meta.error_code == NONE and not meta.is_internal and subscription.matches(name):
                out.update(TopicPartition(name, p) for p in meta.partitions)
        return out

    def existing(self, tps: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of `tps` the cluster metadata still has."""
        wanted = set(tps)
        snapshot = self._refresh({tp.topic for tp in wanted})
        out: set[TopicPartition] = set()
        for tp in wanted:
            meta = snapshot.topics.get(tp.topic)
            if meta is not None and meta.error_code == NONE and tp.partition in meta.partitions:
                out.add(tp)
        return out

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(tps, -2))

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(tps, -1))

    def list_offsets(self, wanted: dict[TopicPartition, int]) -> PartitionOffsets:
        """{tp: offset} for {tp: -2 | -1 | timestamp}; -1 in the answer: no record at or after that timestamp.

        TopicGoneError for a partition that is not in the metadata after a refresh.
        """
        result: PartitionOffsets = {}
        pending = dict(wanted)
        deadline = time.monotonic() + self.deadline_s
        last: Exception | None = None
        refresh = False
        while pending:
            snapshot = self._refresh({tp.topic for tp in pending}) if refresh else self._snapshot_for(pending)
            by_leader = self._group_by_leader(snapshot, pending)
            for leader, tps in by_leader.items():
                try:
                    self._list_offsets_from(leader, tps, pending, result)
                except Exception as exc:
                    if not retriable(exc):
                        raise
                    last = exc
            if not pending:
                break
            if time.monotonic() + RETRY_BACKOFF_S > deadline:
                names = ", ".join(str(tp) for tp in sorted(pending))
                raise LeaderNotAvailableError(f"offsets of {names} not found in {self.deadline_s:g} s (last: {last})")
            refresh = True
            time.sleep(RETRY_BACKOFF_S)  # a backoff between retries, not synchronisation
        return result

    # ------------------------------------------------------------------ internals

    def _snapshot_for(self, pending: dict[TopicPartition, int]) -> ClusterSnapshot:
        snapshot = self.client.snapshot
        if any(snapshot.leader_for(tp.topic, tp.partition) < 0 for tp in pending):
            snapshot = self._refresh({tp.topic for tp in pending})
        return snapshot

    def _group_by_leader(
        self, snapshot: ClusterSnapshot, pending: dict[TopicPartition, int]
    ) -> dict[int, list[TopicPartition]]:
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(pending):
            meta = snapshot.topics.get(tp.topic)
            if (
                meta is None
                or meta.error_code == UnknownTopicOrPartitionError.code
                or tp.partition not in (meta.partitions if meta else {})
            ):
                raise TopicGoneError(f"partition {tp} does not exist (the topic was deleted or never existed)")
            leader = snapshot.leader_for(tp.topic, tp.partition)
            if leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        return by_leader

    def _list_offsets_from(
        self, leader: int, tps: list[TopicPartition], pending: dict[TopicPartition, int], result: PartitionOffsets
    ) -> None:
        by_topic: dict[str, list[broker_pb2.ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                broker_pb2.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=-1, timestamp=pending[tp]
                )
            )
        request = broker_pb2.ListOffsetsRequest(
            replica_id=-1, topics=[broker_pb2.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        )
        try:
            response = self.client.stub(leader).ListOffsets(request, timeout=REQUEST_TIMEOUT_MS / 1000.0)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"ListOffsets to broker {leader}") from None
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in pending:
                    continue
                if p.error_code != NONE:
                    error = error_for(p.error_code, f"ListOffsets for {tp}")
                    if not error.retriable:
                        raise error
                    continue
                result[tp] = p.offset
                del pending[tp]

    def _refresh(self, topics: Iterable[str] | None) -> ClusterSnapshot:
        deadline = time.monotonic() + self.deadline_s
        while True:
            try:
                return self.client.refresh(topics)
            except Exception as exc:
                if not retriable(exc) or time.monotonic() + RETRY_BACKOFF_S > deadline:
                    raise
                log.info("spark_metadata_refresh_failed: %s", exc)
                time.sleep(RETRY_BACKOFF_S)  # a backoff between retries, not synchronisation


def resolve_offsets(
    spec: OffsetSpec,
    tps: set[TopicPartition],
    lookup: OffsetLookup,
    option: str,
    timestamp_strategy: str,
    report_data_loss,
) -> PartitionOffsets:
    """Concrete offsets for `tps` from an option (`earliest`, `latest`, JSON with -2/-1, timestamps).

    JSON must name every partition of the subscription, as in Spark's Kafka
    source. A JSON offset outside [earliest, latest] is data loss.
    """
    if spec.kind is StartKind.EARLIEST:
        return lookup.earliest(tps)
    if spec.kind is StartKind.LATEST:
        return lookup.latest(tps)
    if spec.kind is StartKind.TIMESTAMP:
        return _by_timestamp(dict.fromkeys(tps, spec.timestamp_ms), lookup, option, timestamp_strategy)
    missing = sorted(str(tp) for tp in tps - set(spec.offsets))
    if missing:
        raise OptionError(
            f"option {option} must name every partition of the subscription (-2 earliest, -1 latest);"
            f" missing: {', '.join(missing)}"
        )
    wanted = {tp: spec.offsets[tp] for tp in sorted(tps)}
    if spec.kind is StartKind.TIMESTAMPS:
        return _by_timestamp(wanted, lookup, option, timestamp_strategy)
    special = {tp: o for tp, o in wanted.items() if o < 0}
    out = {**wanted, **lookup.list_offsets(special)} if special else dict(wanted)
    given = {tp: o for tp, o in wanted.items() if o >= 0}
    if given:
        earliest = lookup.earliest(given)
        latest = lookup.latest(given)
        for tp, offset in sorted(given.items()):
            if not earliest[tp] <= offset <= latest[tp]:
                report_data_loss(
                    f"option {option} asks for {tp} at offset {offset}, but the partition holds"
                    f" offsets {earliest[tp]}-{latest[tp]}"
                )
                out[tp] = min(max(offset, earliest[tp]), latest[tp])
    return out


def _by_timestamp(
    wanted: dict[TopicPartition, int], lookup: OffsetLookup, option: str, strategy: str
) -> PartitionOffsets:
    found = lookup.list_offsets(wanted)
    none = sorted(tp for tp, o in found.items() if o < 0)
    if none and strategy == "error":
        raise OptionError(
            f"option {option}: no record at or after the given timestamp in {', '.join(str(tp) for tp in none)}"
            " (set startingOffsetsByTimestampStrategy=latest to start at the latest offset instead)"
        )
    if none:
        found.update(lookup.latest(none))
    return found
