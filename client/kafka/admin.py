"""The Kafka-style admin client: create/delete topics, add partitions, list and describe (kafka-python's names).

Any broker answers topic admin requests (it writes the znodes, as Kafka's
AdminManager does in ZooKeeper mode), so each call goes to the first broker
that answers. Group requests go to the group's coordinator (FindCoordinator,
retried while it is not available); ListGroups goes to every broker, each
listing the groups it coordinates, as Kafka's `listConsumerGroups`. A
per-topic error is raised as its typed KafkaError with the broker's message
and the topic's name (the first failing topic, in request order).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import grpc

from client.kafka import codec
from client.kafka.client_errors import IllegalStateError, KafkaConfigurationError, KafkaTimeoutError
from client.kafka.cluster import KafkaClusterClient, error_from_rpc
from client.kafka.config_resources import (
    ALTER_OPERATIONS,
    AlterConfigOp,
    ConfigDescription,
    ConfigResource,
    ConfigResourceType,
)
from client.kafka.consumer_coordinator import OffsetAndMetadata
from client.kafka.errors import NONE, KafkaError, error_for
from client.kafka.replica_admin import ReplicaAdminMixin
from client.kafka.structs import TopicPartition
from client.kafka.types import (
    BrokerMetadata,
    ClusterDescription,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from runtime.client_config import SaslCredentials
from runtime.tls import TlsConfig

__all__ = [
    "Admin",
    "AlterConfigOp",
    "ConfigResource",
    "ConfigResourceType",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
]

# The gRPC deadline of a request the broker may hold for `timeout_ms`: that plus this margin.
DEADLINE_MARGIN_S = 5.0
RETRY_BACKOFF_S = 0.1


class Admin(ReplicaAdminMixin):
    """kafka-python's KafkaAdminClient on the zkraft broker service; a context manager.

    Records deletion, leader election and reassignment are in `client.kafka.replica_admin`.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30000,
        client_id: str = "zkraft-admin",
        tls: TlsConfig | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        if isinstance(request_timeout_ms, bool) or not isinstance(request_timeout_ms, int) or request_timeout_ms < 1:
            raise KafkaConfigurationError(f"request_timeout_ms must be an int >= 1, got {request_timeout_ms!r}")
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id
        self._cluster = KafkaClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms, tls=tls, sasl=sasl
        )
        self._closed = False

    # ------------------------------------------------------------------ topics

    def create_topics(
        self, new_topics: Iterable[NewTopic], timeout_ms: int | None = None, validate_only: bool = False
    ) -> None:
        """Creates the topics; raises the first failing topic's error (TopicAlreadyExistsError, ...)."""
        topics = list(new_topics)
        if not topics:
            raise KafkaConfigurationError("create_topics needs at least one NewTopic")
        timeout = self._timeout(timeout_ms)
        for topic in topics:
            _check_new_topic(topic)
        request = codec.create_topics_request(topics, timeout, validate_only)
        response = self._call("CreateTopics", request, timeout)
        self._raise_first(codec.create_topics_results(response), "create topic")

    def create_partitions(
        self,
        topic_partitions: dict[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> None:
        """Raises each topic's partition count to `total_count` (with optional replica lists for new partitions)."""
        if not topic_partitions:
            raise KafkaConfigurationError("create_partitions needs at least one topic")
        timeout = self._timeout(timeout_ms)
        totals = {}
        for name, new in topic_partitions.items():
            if not isinstance(new, NewPartitions):
                raise KafkaConfigurationError(f"create_partitions: {name} needs a NewPartitions, got {new!r}")
            totals[name] = (new.total_count, new.new_assignments or ())
        request = codec.create_partitions_request(totals, timeout, validate_only)
        response = self._call("CreatePartitions", request, timeout)
        self._raise_first(codec.create_partitions_results(response), "create partitions for topic")

    def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None) -> None:
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise KafkaConfigurationError("delete_topics needs at least one topic name")
        timeout = self._timeout(timeout_ms)
        request = codec.delete_topics_request(names, timeout)
        response = self._call("DeleteTopics", request, timeout)
        self._raise_first(codec.delete_topics_results(response), "delete topic")

    def list_topics(self) -> list[str]:
        """Every topic name, sorted, internal ones included."""
        return sorted(self._metadata(None).topics)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """Partitions, leaders, replicas and ISR of `topics` (all when None).

        A missing topic raises UnknownTopicOrPartitionError naming it.
        """
        names = None if topics is None else ([topics] if isinstance(topics, str) else list(topics))
        snapshot = self._metadata(names)
        out = []
        for name in names if names is not None else sorted(snapshot.topics):
            meta = snapshot.topics.get(name)
            if meta is None:
                raise error_for(3, f"topic {name} does not exist")
            if meta.error_code != NONE:
                raise error_for(meta.error_code, f"describe topic {name}")
            partitions = [
                PartitionDescription(
                    p.partition,
                    p.leader,
                    list(p.replicas),
                    list(p.isr),
                    list(p.offline_replicas),
                    None if p.error_code == NONE else error_for(p.error_code, f"partition {name}-{p.partition}"),
                )
                for p in sorted(meta.partitions.values())
            ]
            out.append(TopicDescription(name, meta.is_internal, partitions))
        return out

    def describe_cluster(self) -> ClusterDescription:
        snapshot = self._metadata([])
        brokers = [snapshot.brokers[node] for node in sorted(snapshot.brokers)]
        return ClusterDescription(snapshot.cluster_id, snapshot.controller_id, brokers)

    # ------------------------------------------------------------------ consumer groups

    def list_consumer_groups(self) -> list[ConsumerGroupListing]:
        """Every group of every broker (ListGroups to each), sorted by id."""
        snapshot = self._metadata([])
        found: dict[str, ConsumerGroupListing] = {}
        for node in sorted(snapshot.brokers):
            response = self._group_rpc(
                lambda node=node: self._cluster.stub(node).ListGroups(
                    codec.list_groups_request(), timeout=self._cluster.request_timeout_s
                ),
                f"ListGroups to broker {node}",
            )
            error_code, groups = codec.list_groups_reply(response)
            if error_code != NONE:
                raise error_for(error_code, f"list groups on broker {node}")
            for group_id, protocol_type in groups:
                found[group_id] = ConsumerGroupListing(group_id, protocol_type)
        return [found[g] for g in sorted(found)]

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[ConsumerGroupDescription]:
        """State, assignor and members of each group (a group nobody knows is described as Dead)."""
        out = []
        for group_id in self._group_ids(group_ids):
            coordinator = self.find_coordinator(group_id)
            response = self._group_rpc(
                lambda c=coordinator, g=group_id: self._cluster.stub_for(c.host, c.port).DescribeGroups(
                    codec.describe_groups_request([g]), timeout=self._cluster.request_timeout_s
                ),
                f"DescribeGroups of {group_id}",
            )
            for group in codec.describe_groups_results(response, coordinator):
                if group.error_code != NONE:
                    raise error_for(group.error_code, f"describe group {group.group_id}")
                out.append(group.description)
        return out

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of `partitions`, or all), by partition."""
        (group_id,) = self._group_ids([group_id])
        request = codec.offset_fetch_request(group_id, partitions)
        response = self._coordinator_call(group_id, "OffsetFetch", request)
        error_code = codec.offset_fetch_error(response)
        if error_code != NONE:
            raise error_for(error_code, f"fetch offsets of group {group_id}")
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, partition_error, offset, metadata in codec.offset_fetch_results(response):
            if partition_error != NONE:
                raise error_for(partition_error, f"fetch offset of {tp.topic}-{tp.partition} in {group_id}")
            if offset >= 0:
                out[tp] = OffsetAndMetadata(offset, metadata)
        return dict(sorted(out.items()))

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any]) -> None:
        """Commits `offsets` for a group as a plain offset store (generation -1): Kafka refuses it
        (UNKNOWN_MEMBER_ID) while the group has members."""
        (group_id,) = self._group_ids([group_id])
        items = []
        for tp, value in sorted(offsets.items()):
            offset, metadata = (value.offset, value.metadata) if isinstance(value, OffsetAndMetadata) else (value, "")
            items.append((tp, int(offset), metadata))
        request = codec.offset_commit_request(group_id, -1, "", items)
        response = self._coordinator_call(group_id, "OffsetCommit", request)
        for tp, error_code in codec.offset_commit_errors(response):
            raise error_for(error_code, f"commit offset of {tp[0]}-{tp[1]} in {group_id}")

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> list[tuple[str, KafkaError | None]]:
        """Deletes each group (its offsets too); per group None or the error (NonEmptyGroupError, ...)."""
        out: list[tuple[str, KafkaError | None]] = []
        for group_id in self._group_ids(group_ids):
            try:
                response = self._coordinator_call(group_id, "DeleteGroups", codec.delete_groups_request([group_id]))
            except KafkaError as exc:
                if exc.retriable:
                    raise
                out.append((group_id, exc))
                continue
            for result in codec.delete_groups_results(response):
                error = None if result.error_code == NONE else error_for(result.error_code)
                out.append((result.name, error))
        return out

    def find_coordinator(self, group_id: str) -> BrokerMetadata:
        """The group's coordinator, retried while it is not available (e.g. __consumer_offsets being created)."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while True:
            response = codec.find_coordinator_reply(
                self._call("FindCoordinator", codec.find_coordinator_request(group_id), 0)
            )
            if response.error_code == NONE:
                return BrokerMetadata(response.node_id, response.host, response.port, None)
            error = error_for(response.error_code, f"find the coordinator of group {group_id}")
            if not error.retriable or time.monotonic() + RETRY_BACKOFF_S >= deadline:
                raise error
            time.sleep(RETRY_BACKOFF_S)

    def _coordinator_call(self, group_id: str, method: str, request: object) -> Any:
        """`method` on the group's coordinator; NOT_COORDINATOR, load in progress and lost connections retried."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000.0
        while True:
            coordinator = self.find_coordinator(group_id)
            stub = self._cluster.stub_for(coordinator.host, coordinator.port)
            try:
                response = self._group_rpc(
                    lambda stub=stub: getattr(stub, method)(request, timeout=self._cluster.request_timeout_s),
                    f"{method} of group {group_id}",
                )
                code = codec.first_group_error(method, response)
                if code != NONE and error_for(code).retriable:
                    raise error_for(code, f"{method} of group {group_id}")
                return response
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if time.monotonic() + RETRY_BACKOFF_S >= deadline:
                    raise KafkaTimeoutError(f"{method} of group {group_id} timed out (last: {exc})") from None
                time.sleep(RETRY_BACKOFF_S)

    def _group_rpc(self, call: Any, what: str) -> Any:
        self._check_open()
        try:
            return call()
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, what) from None

    @staticmethod
    def _group_ids(group_ids: Iterable[str]) -> list[str]:
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)
        if not ids or not all(isinstance(g, str) and g for g in ids):
            raise error_for(24, f"group ids must be non-empty strings, got {ids!r}")
        return ids

    # ------------------------------------------------------------------ configs

    def describe_configs(
        self, config_resources: Iterable[ConfigResource], include_synonyms: bool = False
    ) -> list[ConfigDescription]:
        """Every config of each topic or broker (or those named in its `configs`), with values and sources.

        A topic is described by any broker; a broker by itself (its static configs are its own). Raises the
        first failing resource's error (UnknownTopicOrPartitionError, ...)."""
        resources = _config_resources(config_resources, "describe_configs")
        out = []
        for target, batch in self._by_config_target(resources).items():
            request = codec.describe_configs_request(
                ((r.type_id, r.name, list(r.configs or ())) for r in batch), include_synonyms
            )
            response = self._config_call(target, "DescribeConfigs", request)
            self._raise_first_config_error(codec.describe_configs_results(response), "describe configs of")
            out.extend(codec.config_descriptions(response))
        return out

    def alter_configs(self, config_resources: Iterable[ConfigResource], validate_only: bool = False) -> None:
        """AlterConfigs: each resource's `configs` become its whole override set (configs left out revert)."""
        resources = _config_resources(config_resources, "alter_configs")
        for r in resources:
            if r.configs is None:
                raise KafkaConfigurationError(f"alter_configs needs the configs of {r.name!r}")
        ops = {id(r): [(k, v, 0) for k, v in r.configs.items()] for r in resources}
        self._alter(resources, ops, validate_only, incremental=False)

    def incremental_alter_configs(
        self, config_resources: Iterable[ConfigResource], validate_only: bool = False
    ) -> None:
        """IncrementalAlterConfigs: each resource's `operations` (SET, DELETE, APPEND, SUBTRACT) applied to it."""
        resources = _config_resources(config_resources, "incremental_alter_configs")
        ops: dict[int, list[tuple[str, str | None, int]]] = {}
        for r in resources:
            ops[id(r)] = []
            for op in r.operations:
                if op.op not in ALTER_OPERATIONS:
                    raise KafkaConfigurationError(
                        f"operation must be one of {', '.join(ALTER_OPERATIONS)}, got {op.op!r}"
                    )
                ops[id(r)].append((op.name, op.value, ALTER_OPERATIONS.index(op.op)))
        self._alter(resources, ops, validate_only, incremental=True)

    def _alter(
        self, resources: list[ConfigResource], ops: dict[int, list], validate_only: bool, incremental: bool
    ) -> None:
        for target, batch in self._by_config_target(resources).items():
            request = codec.alter_configs_request(
                ((r.type_id, r.name, ops[id(r)]) for r in batch), validate_only, incremental
            )
            response = self._config_call(target, "AlterConfigs", request)
            self._raise_first_config_error(codec.alter_configs_results(response), "alter configs of")

    @staticmethod
    def _by_config_target(resources: list[ConfigResource]) -> dict[int | None, list[ConfigResource]]:
        """A broker's configs go to that broker (KafkaAdminClient does the same); the rest to any broker."""
        targets: dict[int | None, list[ConfigResource]] = {}
        for r in resources:
            broker = int(r.name) if r.type_id == ConfigResourceType.BROKER and r.name.isdigit() else None
            targets.setdefault(broker, []).append(r)
        return targets

    def _config_call(self, broker_id: int | None, method: str, request: object) -> Any:
        if broker_id is None:
            return self._call(method, request, self.request_timeout_ms)
        self._metadata(None)
        stub = self._cluster.stub(broker_id)
        return self._group_rpc(
            lambda: getattr(stub, method)(request, timeout=self._cluster.request_timeout_s),
            f"{method} of broker {broker_id}",
        )

    @staticmethod
    def _raise_first_config_error(results: Iterable[codec.ConfigResult], what: str) -> None:
        for result in results:
            if result.error_code != NONE:
                kind = (
                    ConfigResourceType(result.resource_type).name.lower()
                    if result.resource_type in (2, 4)
                    else "resource"
                )
                detail = result.error_message or error_for(result.error_code).message
                raise error_for(result.error_code, f"{what} {kind} {result.resource_name!r}: {detail}")

    # ------------------------------------------------------------------ plumbing

    def _metadata(self, topics: list[str] | None):
        self._check_open()
        return self._cluster.refresh(topics)

    def _timeout(self, timeout_ms: int | None) -> int:
        if timeout_ms is None:
            return self.request_timeout_ms
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise KafkaConfigurationError(f"timeout_ms must be an int >= 0, got {timeout_ms!r}")
        return timeout_ms

    def _call(self, method: str, request: object, timeout_ms: int):
        self._check_open()
        deadline_s = max(timeout_ms, self.request_timeout_ms) / 1000.0 + DEADLINE_MARGIN_S
        return self._cluster.call_any(method, request, deadline_s)

    @staticmethod
    def _raise_first(results: Iterable[codec.ErrorResult], what: str) -> None:
        for result in results:
            if result.error_code != NONE:
                detail = result.error_message or error_for(result.error_code).message
                raise error_for(result.error_code, f"{what} {result.name}: {detail}")

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the admin client is closed")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._cluster.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _config_resources(resources: Iterable[ConfigResource], what: str) -> list[ConfigResource]:
    items = list(resources)
    if not items:
        raise KafkaConfigurationError(f"{what} needs at least one ConfigResource")
    for r in items:
        if not isinstance(r, ConfigResource):
            raise KafkaConfigurationError(f"{what} takes ConfigResource objects, got {r!r}")
        r.type_id  # noqa: B018  (raises KafkaConfigurationError naming a bad resource type)
    return items


def _check_new_topic(topic: NewTopic) -> None:
    if not isinstance(topic, NewTopic):
        raise KafkaConfigurationError(f"create_topics takes NewTopic objects, got {topic!r}")
    if not topic.name:
        raise KafkaConfigurationError("a NewTopic needs a name")
