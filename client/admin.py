"""The Kafka-style admin client: create/delete topics, add partitions, list and describe (kafka-python's names).

Any broker answers admin requests (it writes the znodes, as Kafka's
AdminManager does in ZooKeeper mode), so each call goes to the first broker
that answers. A per-topic error is raised as its typed KafkaError with the
broker's message and the topic's name (the first failing topic, in request
order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from client.kafka_client_errors import IllegalStateError, KafkaConfigurationError
from client.kafka_cluster import KafkaClusterClient
from client.kafka_errors import NONE, error_for
from client.kafka_types import (
    ClusterDescription,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from zkraft_proto import broker_pb2

__all__ = ["Admin", "NewPartitions", "NewTopic"]

# The gRPC deadline of a request the broker may hold for `timeout_ms`: that plus this margin.
DEADLINE_MARGIN_S = 5.0


class Admin:
    """kafka-python's KafkaAdminClient on the zkraft broker service; a context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30000,
        client_id: str = "zkraft-admin",
    ) -> None:
        if isinstance(request_timeout_ms, bool) or not isinstance(request_timeout_ms, int) or request_timeout_ms < 1:
            raise KafkaConfigurationError(f"request_timeout_ms must be an int >= 1, got {request_timeout_ms!r}")
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id
        self._cluster = KafkaClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms
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
        request = broker_pb2.CreateTopicsRequest(
            topics=[_creatable(t) for t in topics], timeout_ms=timeout, validate_only=validate_only
        )
        response = self._call("CreateTopics", request, timeout)
        self._raise_first(response.topics, "create topic")

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
        items = []
        for name, new in topic_partitions.items():
            if not isinstance(new, NewPartitions):
                raise KafkaConfigurationError(f"create_partitions: {name} needs a NewPartitions, got {new!r}")
            assignments = [
                broker_pb2.CreatePartitionsAssignment(broker_ids=list(replicas))
                for replicas in (new.new_assignments or ())
            ]
            items.append(broker_pb2.CreatePartitionsTopic(name=name, count=new.total_count, assignments=assignments))
        request = broker_pb2.CreatePartitionsRequest(topics=items, timeout_ms=timeout, validate_only=validate_only)
        response = self._call("CreatePartitions", request, timeout)
        self._raise_first(response.results, "create partitions for topic")

    def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None) -> None:
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise KafkaConfigurationError("delete_topics needs at least one topic name")
        timeout = self._timeout(timeout_ms)
        request = broker_pb2.DeleteTopicsRequest(topic_names=names, timeout_ms=timeout)
        response = self._call("DeleteTopics", request, timeout)
        self._raise_first(response.responses, "delete topic")

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
    def _raise_first(results: Iterable, what: str) -> None:
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


def _creatable(topic: NewTopic) -> broker_pb2.CreatableTopic:
    if not isinstance(topic, NewTopic):
        raise KafkaConfigurationError(f"create_topics takes NewTopic objects, got {topic!r}")
    if not topic.name:
        raise KafkaConfigurationError("a NewTopic needs a name")
    assignments = [
        broker_pb2.CreatableReplicaAssignment(partition_index=partition, broker_ids=list(replicas))
        for partition, replicas in sorted((topic.replica_assignments or {}).items())
    ]
    return broker_pb2.CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments=assignments,
        configs=dict(topic.topic_configs or {}),
    )
