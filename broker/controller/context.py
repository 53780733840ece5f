"""What the active controller knows (Kafka's `ControllerContext`, docs/research/kafka.md §2.3).

Touched only by the controller's event task. Built from the znodes at
failover, then kept current by the events; reset when the controller
resigns. Values are plain caches of ZooKeeper: the znodes stay the truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from broker.controller.election import LeaderAndIsr
from broker.controller.states import INITIAL_PARTITION_STATE, INITIAL_REPLICA_STATE, PartitionState, ReplicaState
from client.kafka.structs import TopicPartition
from client.kafka.znodes import BrokerRegistration, EndPoint


class PartitionReplica(NamedTuple):
    """One replica of one partition (Kafka's `PartitionAndReplica`)."""

    partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        # Kafka's PartitionAndReplica.toString, as the state-change log prints it.
        return f"[Topic={self.partition.topic},Partition={self.partition.partition},Replica={self.replica}]"


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker and its epoch: the czxid of its `/brokers/ids/<id>` znode (KIP-380)."""

    registration: BrokerRegistration
    epoch: int

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id

    @property
    def endpoint(self) -> EndPoint:
        """The endpoint the controller and the other brokers use: the broker's gRPC one."""
        endpoint = self.registration.grpc_endpoint()
        if endpoint is None:
            raise ValueError(f"broker {self.broker_id} registered no endpoint")
        return endpoint

    @property
    def host(self) -> str:
        return self.endpoint.host or "127.0.0.1"

    @property
    def port(self) -> int:
        return self.endpoint.port


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """An in-flight reassignment of one partition (Kafka 2.4+'s `ReplicaAssignment`, docs/research/kafka.md §2.13).

    `original` is ORS (OAR), `target` TRS (RAR). The replica set written to
    the topic znode while it runs is `replicas` = TRS followed by ORS - TRS,
    with `adding` = TRS - ORS and `removing` = ORS - TRS beside it, so that a
    controller taking over reads back both ORS and TRS exactly.
    """

    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.target + tuple(r for r in self.original if r not in self.target)

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)

    @classmethod
    def from_znode(
        cls, replicas: tuple[int, ...], adding: tuple[int, ...], removing: tuple[int, ...]
    ) -> ReplicaAssignment:
        """Back from the topic znode's replicas, adding_replicas and removing_replicas."""
        return cls(
            original=tuple(r for r in replicas if r not in adding),
            target=tuple(r for r in replicas if r not in removing),
        )

    def __str__(self) -> str:
        # K28 ReplicaAssignment.toString
        return (
            f"ReplicaAssignment(replicas={_csv(self.replicas)}, addingReplicas={_csv(self.adding)}, "
            f"removingReplicas={_csv(self.removing)})"
        )


def _csv(values: Iterable[int]) -> str:
    return ",".join(map(str, values))


def tp_text(tp: TopicPartition) -> str:
    """`t-0`: Kafka's TopicPartition.toString."""
    return f"{tp.topic}-{tp.partition}"


class ControllerContext:
    def __init__(self) -> None:
        self.epoch = 0
        self.epoch_zk_version = 0
        self.live_brokers: dict[int, LiveBroker] = {}
        # Brokers in controlled shutdown: still sent requests, no longer candidates (Kafka's shuttingDownBrokerIds).
        self.shutting_down: set[int] = set()
        # topic -> partition -> replicas in assignment order (the first is the preferred leader)
        self.assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self.topic_ids: dict[str, str] = {}  # KIP-516, from the topic znode (Kafka's ControllerContext.topicIds)
        self.leadership: dict[TopicPartition, LeaderAndIsr] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionReplica, ReplicaState] = {}
        # Partitions whose topic znode lists adding/removing replicas (Kafka's partitionsBeingReassigned),
        # and what each one's reassignment is (kept in step with the set by the reassignment manager).
        self.partitions_being_reassigned: set[TopicPartition] = set()
        self.reassignments: dict[TopicPartition, ReplicaAssignment] = {}
        # Topic deletion (§2.12): queued, past onTopicDeletion's partition transitions, and halted.
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        # Replicas this controller moved out of the ISR because they lost acknowledged data
        # (damaged_replicas): never an unclean leader until they are back in the ISR.
        self.damaged_replicas: set[PartitionReplica] = set()

    def unclean_excluded(self, tp: TopicPartition, isr: Iterable[int]) -> frozenset[int]:
        """Replicas of `tp` that lost data and have not rejoined the ISR since (forgotten once they have)."""
        in_isr = set(isr)
        rejoined = {pr for pr in self.damaged_replicas if pr.partition == tp and pr.replica in in_isr}
        self.damaged_replicas -= rejoined
        return frozenset(pr.replica for pr in self.damaged_replicas if pr.partition == tp)

    # ---- brokers

    @property
    def live_broker_ids(self) -> frozenset[int]:
        """Registered brokers, shutting down or not: who receives requests (Kafka's liveOrShuttingDownBrokerIds)."""
        return frozenset(self.live_brokers)

    @property
    def online_broker_ids(self) -> frozenset[int]:
        """Brokers that may lead or join an ISR: registered and not shutting down (Kafka's isReplicaOnline)."""
        return frozenset(self.live_brokers) - self.shutting_down

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def is_online(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers and broker_id not in self.shutting_down

    def broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    def add_live_brokers(self, brokers: Iterable[LiveBroker]) -> None:
        for broker in brokers:
            self.live_brokers[broker.broker_id] = broker

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.shutting_down.discard(broker_id)

    # ---- topics and assignments

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self.assignments)

    def set_assignment(self, topic: str, partitions: Mapping[int, tuple[int, ...]]) -> None:
        self.assignments.setdefault(topic, {}).update(partitions)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp.topic, {}).get(tp.partition, ())

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in sorted(self.assignments) for p in sorted(self.assignments[t])]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
            self.reassignments.pop(tp, None)
        for pr in [pr for pr in self.replica_states if pr.partition.topic == topic]:
            del self.replica_states[pr]  # also replicas already dropped from the assignment
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def replicas_of(self, partitions: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica(tp, r) for tp in partitions for r in self.replicas(tp)]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionReplica]:
        wanted = set(broker_ids)
        return [pr for pr in self.replicas_of(self.all_partitions()) if pr.replica in wanted]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def offline_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(r for r in self.replicas(tp) if r not in self.live_brokers)

    # ---- partition and replica states

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, INITIAL_PARTITION_STATE)

    def replica_state(self, pr: PartitionReplica) -> ReplicaState:
        return self.replica_states.get(pr, INITIAL_REPLICA_STATE)

    def partitions_in(self, *states: PartitionState) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if self.partition_state(tp) in states]

    def partitions_led_by(self, broker_ids: Iterable[int]) -> list[TopicPartition]:
        wanted = set(broker_ids)
        return [tp for tp in self.all_partitions() if (s := self.leadership.get(tp)) and s.leader in wanted]

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if tp in self.leadership]

    # ---- topic deletion (Kafka's ControllerContext deletion helpers)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        return self.replicas_of(self.partitions_of(topic))

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [pr for pr in self.replicas_for_topic(topic) if self.replica_state(pr) is state]

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_state(pr) is state for pr in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.replica_state(pr) is state for pr in self.replicas_for_topic(topic))

    def is_topic_being_reassigned(self, topic: str) -> bool:
        return any(tp.topic == topic for tp in self.partitions_being_reassigned)

    def reset(self) -> None:
        """Forget everything (Kafka's `resetContext` on resignation)."""
        self.__init__()  # type: ignore[misc]
