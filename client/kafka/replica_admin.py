"""The admin calls about replicas: records deletion, leader election, KIP-455 reassignment (kafka-python's shapes).

DeleteRecords goes to each partition's leader (the metadata's), ElectLeaders and the reassignment calls to the
controller the metadata names, as Kafka's AdminClient sends them. NOT_LEADER_OR_FOLLOWER and NOT_CONTROLLER
(the leadership moved since the metadata was read) refresh the metadata and retry until `request_timeout_ms`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from client.kafka import codec
from client.kafka.client_errors import KafkaConfigurationError, KafkaTimeoutError
from client.kafka.cluster import error_from_rpc
from client.kafka.errors import NONE, KafkaError, NotControllerError, error_for
from client.kafka.structs import TopicPartition

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1
RETRY_BACKOFF_S = 0.1
# The gRPC deadline of a request the broker may hold: the admin's timeout plus this margin.
DEADLINE_MARGIN_S = 5.0


class ReplicaAdminMixin:
    """Mixed into `client.kafka.admin.Admin`, whose `_cluster`, `_timeout` and `request_timeout_ms` it uses."""

    _cluster: Any
    request_timeout_ms: int
    _timeout: Any  # Admin._timeout(timeout_ms) -> int
    _check_open: Any  # Admin._check_open()

    # ------------------------------------------------------------------ records

    def delete_records(
        self, records_to_delete: Mapping[TopicPartition, int], timeout_ms: int | None = None, raise_errors: bool = True
    ) -> dict[TopicPartition, Any]:
        """Deletes the records below each partition's offset (-1: the high watermark).

        Returns {TopicPartition: {"low_watermark": n}}; raises the first partition's error (e.g.
        OffsetOutOfRangeError above the high watermark) naming it, or with `raise_errors` False puts the
        error in its place.
        """
        wanted = _checked_offsets(records_to_delete)
        timeout = self._timeout(timeout_ms)
        deadline = time.monotonic() + max(timeout, self.request_timeout_ms) / 1000.0
        done: dict[TopicPartition, dict[str, int]] = {}
        while True:
            snapshot = self._cluster.refresh(sorted({tp.topic for tp in wanted}))
            retry: dict[TopicPartition, int] = {}
            grouped, unknown = _by_leader(snapshot, wanted)
            for tp in unknown:
                error = error_for(3, f"{tp} does not exist")
                if raise_errors:
                    raise error
                done[tp] = error
            for leader, offsets in grouped.items():
                for tp, low_watermark, error in self._delete_on(leader, offsets, timeout):
                    if error is None:
                        done[tp] = {"low_watermark": low_watermark}
                    elif error.retriable and time.monotonic() + RETRY_BACKOFF_S < deadline:
                        retry[tp] = wanted[tp]
                    elif raise_errors:
                        raise error_for(error.code, f"delete records of {tp}: {error}")
                    else:
                        done[tp] = error
            if not retry:
                return done
            wanted = retry
            time.sleep(RETRY_BACKOFF_S)

    def _delete_on(
        self, leader: int, offsets: dict[TopicPartition, int], timeout_ms: int
    ) -> list[tuple[TopicPartition, int, KafkaError | None]]:
        if leader < 0:
            return [(tp, -1, error_for(5, f"{tp} has no leader")) for tp in offsets]
        request = codec.delete_records_request(offsets, timeout_ms)
        response = self._rpc(self._cluster.stub(leader), "DeleteRecords", request, timeout_ms)
        return [
            (r.tp, r.low_watermark, _error_or_none(r.error_code, r.error_message))
            for r in codec.delete_records_results(response)
        ]

    # ------------------------------------------------------------------ leader election

    def perform_leader_election(
        self,
        election_type: int,
        topic_partitions: Mapping[str, Iterable[int]] | Iterable[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elects leaders (0 preferred, 1 unclean) of `topic_partitions` ({topic: [partitions]} or TopicPartitions;
        None: every partition, answering only those elected or failed). Per partition, its error or None
        (ElectionNotNeededError when it already had the leader asked for)."""
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            raise KafkaConfigurationError(f"election_type must be 0 (preferred) or 1 (unclean), got {election_type!r}")
        timeout = self._timeout(timeout_ms)
        grouped = None if topic_partitions is None else _grouped_partitions(topic_partitions)
        request = codec.elect_leaders_request(election_type, grouped, timeout)
        response = self._controller_call("ElectLeaders", request, timeout)
        return {r.tp: _error_or_none(r.error_code, r.error_message) for r in codec.elect_leaders_results(response)}

    elect_leaders = perform_leader_election  # kafka-python 2.1+'s name

    # ------------------------------------------------------------------ reassignment (KIP-455)

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Iterable[int] | None], timeout_ms: int | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """Moves each partition to its replica list; None cancels its reassignment (back to the original replicas).
        Per partition, its error (e.g. NoReassignmentInProgressError) or None."""
        if not reassignments:
            raise KafkaConfigurationError("alter_partition_reassignments needs at least one partition")
        timeout = self._timeout(timeout_ms)
        targets = {
            tp: None if replicas is None else _broker_ids(tp, replicas) for tp, replicas in reassignments.items()
        }
        request = codec.alter_partition_reassignments_request(targets, timeout)
        response = self._controller_call("AlterPartitionReassignments", request, timeout)
        return {
            r.tp: _error_or_none(r.error_code, r.error_message)
            for r in codec.alter_partition_reassignments_results(response)
        }

    def list_partition_reassignments(
        self,
        topic_partitions: Mapping[str, Iterable[int]] | Iterable[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, dict[str, list[int]]]:
        """The ongoing reassignments: {TopicPartition: {"replicas", "adding_replicas", "removing_replicas"}}."""
        timeout = self._timeout(timeout_ms)
        grouped = None if topic_partitions is None else _grouped_partitions(topic_partitions)
        request = codec.list_partition_reassignments_request(grouped, timeout)
        response = self._controller_call("ListPartitionReassignments", request, timeout)
        return codec.list_partition_reassignments_reply(response)

    # ------------------------------------------------------------------ plumbing

    def _controller_call(self, method: str, request: Any, timeout_ms: int) -> Any:
        """`method` on the controller, found in the metadata; NOT_CONTROLLER and lost connections retried."""
        deadline = time.monotonic() + max(timeout_ms, self.request_timeout_ms) / 1000.0
        while True:
            controller = self._cluster.refresh([]).controller_id
            try:
                if controller < 0:
                    raise NotControllerError(f"{method}: the cluster has no controller right now")
                response = self._rpc(self._cluster.stub(controller), method, request, timeout_ms)
                error_code = codec.controller_error(response)
                if error_code != NONE:
                    raise error_for(error_code, f"{method} on broker {controller}")
                return response
            except KafkaError as exc:
                if not exc.retriable and not isinstance(exc, NotControllerError):
                    raise
                if time.monotonic() + RETRY_BACKOFF_S >= deadline:
                    raise KafkaTimeoutError(f"{method} timed out (last: {exc})") from None
                time.sleep(RETRY_BACKOFF_S)

    def _rpc(self, stub: Any, method: str, request: Any, timeout_ms: int) -> Any:
        self._check_open()
        try:
            return getattr(stub, method)(request, timeout=timeout_ms / 1000.0 + DEADLINE_MARGIN_S)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, method) from None


def _checked_offsets(records_to_delete: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    if not records_to_delete:
        raise KafkaConfigurationError("delete_records needs at least one partition")
    out = {}
    for tp, offset in records_to_delete.items():
        if not isinstance(tp, TopicPartition):
            raise KafkaConfigurationError(f"delete_records: {tp!r} is not a TopicPartition")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < -1:
            raise KafkaConfigurationError(f"delete_records: the offset of {tp} must be an int >= -1, got {offset!r}")
        out[tp] = offset
    return out


def _by_leader(
    snapshot: Any, offsets: dict[TopicPartition, int]
) -> tuple[dict[int, dict[TopicPartition, int]], list[TopicPartition]]:
    """The offsets grouped by the partition's leader (-1: none now), and the partitions the metadata lacks."""
    grouped: dict[int, dict[TopicPartition, int]] = {}
    unknown = []
    for tp, offset in offsets.items():
        meta = snapshot.topics.get(tp.topic)
        if meta is None or meta.error_code != NONE or tp.partition not in meta.partitions:
            unknown.append(tp)
            continue
        grouped.setdefault(snapshot.leader_for(tp.topic, tp.partition), {})[tp] = offset
    return grouped, unknown


def _grouped_partitions(
    topic_partitions: Mapping[str, Iterable[int]] | Iterable[TopicPartition],
) -> dict[str, list[int]]:
    """{topic: [partitions]} or TopicPartitions -> {topic: [partitions]}, checked."""
    grouped: dict[str, list[int]] = {}
    if isinstance(topic_partitions, Mapping):
        for topic, partitions in topic_partitions.items():
            grouped.setdefault(topic, []).extend(partitions)
    else:
        for tp in topic_partitions:
            if not isinstance(tp, TopicPartition):
                raise KafkaConfigurationError(f"{tp!r} is not a TopicPartition")
            grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def _broker_ids(tp: TopicPartition, replicas: Iterable[int]) -> list[int]:
    ids = list(replicas)
    if not all(isinstance(r, int) and not isinstance(r, bool) for r in ids):
        raise KafkaConfigurationError(f"the replicas of {tp} must be broker ids, got {ids!r}")
    return ids


def _error_or_none(code: int, message: str) -> KafkaError | None:
    return None if code == NONE else error_for(code, message or None)
