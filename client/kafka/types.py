"""Value objects of the Kafka-style client API (kafka-python names; STYLE 8: NamedTuples, frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition

# ListOffsets special timestamps (docs/research/kafka.md §3.4).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. `offset` is -1 with acks=0 (the producer never learns it)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # CreateTime given or chosen by the producer, or the broker's LogAppendTime


class OffsetAndTimestamp(NamedTuple):
    """Kafka's OffsetAndTimestamp: the first offset whose record timestamp is >= the one asked, and that timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class ConsumerRecord(NamedTuple):
    """One record handed to the user; `headers` is a tuple of (str key, bytes-or-None value)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: object
    value: object
    headers: tuple[tuple[str, bytes | None], ...]


class BrokerMetadata(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic for `Admin.create_topics`; -1 means the broker's default (num.partitions, default.replication.factor)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: dict[int, list[int]] | None = None
    topic_configs: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """The new total partition count of a topic, optionally with the replicas of each new partition."""

    total_count: int
    new_assignments: list[list[int]] | None = None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error: KafkaError | None  # e.g. LeaderNotAvailableError when the leader is down


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    is_internal: bool
    partitions: list[PartitionDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int  # -1 when unknown
    brokers: list[BrokerMetadata]


class ConsumerGroupListing(NamedTuple):
    """One group of `Admin.list_consumer_groups` (kafka-python returns (group_id, protocol_type) pairs)."""

    group_id: str
    protocol_type: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A group member as DescribeGroups tells it; `topics` and `assignment` decoded from the consumer protocol."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol: str  # the assignor chosen for the current generation ("" when none)
    members: tuple[MemberDescription, ...]
    coordinator: BrokerMetadata


# ---- cluster metadata (client.kafka.cluster keeps the current snapshot)


class PartitionMetadata(NamedTuple):
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


class TopicMetadata(NamedTuple):
    name: str
    error_code: int
    is_internal: bool
    partitions: dict[int, PartitionMetadata]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    cluster_id: str = ""
    controller_id: int = -1
    brokers: dict[int, BrokerMetadata] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)

    def leader_for(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        if meta is None:
            return -1
        p = meta.partitions.get(partition)
        return -1 if p is None else p.leader
