"""The controller's events (Kafka's `ControllerEvent` case objects, docs/research/kafka.md §2.1).

Watch callbacks and the session listener only build one of these and queue
it; the controller task consumes them one at a time. Events are frozen and
hashable so that a second identical event, queued while the first still
waits, is dropped: each one re-reads ZooKeeper when it runs, so one is enough.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from client.kafka.structs import TopicPartition


@dataclass(frozen=True, slots=True)
class Startup:
    """Elect at start-up (`processStartup`)."""


@dataclass(frozen=True, slots=True)
class ControllerChange:
    """`/controller` was created or changed: learn who leads, resign if it is no longer us."""


@dataclass(frozen=True, slots=True)
class Reelect:
    """`/controller` was deleted (or our session came back): resign if needed, then elect."""


@dataclass(frozen=True, slots=True)
class Expire:
    """The ZooKeeper session is lost: resign at once."""


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The children of `/brokers/ids` changed."""


@dataclass(frozen=True, slots=True)
class TopicChange:
    """The children of `/brokers/topics` changed."""


@dataclass(frozen=True, slots=True)
class PartitionModifications:
    """The assignment znode `/brokers/topics/<topic>` changed (partitions added)."""

    topic: str


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """New children under `/isr_change_notification`."""


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """The children of `/admin/delete_topics` changed (Kafka's `TopicDeletion` event, §2.12)."""


@dataclass(frozen=True, slots=True)
class TopicDeletionStopReplicaResponseReceived:
    """A broker answered a StopReplica that deleted partitions (Kafka's event of the same name).

    `error_code` is the request-level error (non-zero fails every partition);
    `partition_errors` holds only the partitions the request deleted.
    """

    replica_id: int
    error_code: int
    partition_errors: tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True, slots=True)
class TopicDeletionRetry:
    """The back-off after a failed replica deletion ran out: try the halted topics again."""


@dataclass(frozen=True, slots=True)
class ZkPartitionReassignment:
    """`/admin/reassign_partitions` was created or changed (Kafka's `ZkPartitionReassignment`, §2.13)."""


@dataclass(frozen=True, slots=True)
class PartitionReassignmentIsrChange:
    """The state znode of a partition being reassigned changed: maybe its target replicas joined the ISR."""

    partition: TopicPartition


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """`/admin/preferred_replica_election` was created (Kafka's `ReplicaLeaderElection(PREFERRED, ZkTriggered)`)."""


@dataclass(frozen=True, slots=True)
class AutoPreferredReplicaLeaderElection:
    """The `leader.imbalance.check.interval.seconds` timer fired (§2.14 `checkAndTriggerAutoLeaderRebalance`)."""


@dataclass(frozen=True, slots=True, eq=False)
class ControlledShutdown:
    """A broker asks to shut down cleanly (§2.15); answered through `reply`, never coalesced.

    `reply` gets the partitions the broker still leads, or the Kafka error
    code when the request is refused; a controller that resigns first
    answers NOT_CONTROLLER.
    """

    broker_id: int
    broker_epoch: int
    reply: asyncio.Future[tuple[int, tuple[TopicPartition, ...]]] = field(repr=False)


# What an admin request's event answers: (request-level Kafka error code, per-partition results).
AdminReply: TypeAlias = "asyncio.Future[tuple[int, dict[TopicPartition, Any]]]"


@dataclass(frozen=True, slots=True, eq=False)
class ElectLeaders:
    """The ElectLeaders API (KIP-460; K28 `ReplicaLeaderElection` with `AdminClientTriggered`), never coalesced.

    `partitions` None: every partition. `reply` gets, per partition, (error code, message).
    """

    partitions: tuple[TopicPartition, ...] | None
    election_type: int  # 0 preferred, 1 unclean (Kafka's ElectionType)
    reply: AdminReply = field(repr=False)


@dataclass(frozen=True, slots=True, eq=False)
class ApiPartitionReassignment:
    """AlterPartitionReassignments (KIP-455; K28 `ApiPartitionReassignment`): a target of None cancels.

    `reply` gets, per partition, (error code, message).
    """

    reassignments: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
    reply: AdminReply = field(repr=False)


@dataclass(frozen=True, slots=True, eq=False)
class ListPartitionReassignments:
    """ListPartitionReassignments (KIP-455): `reply` gets the ongoing ones' ReplicaAssignment by partition."""

    partitions: tuple[TopicPartition, ...] | None
    reply: AdminReply = field(repr=False)


ADMIN_EVENTS = (ElectLeaders, ApiPartitionReassignment, ListPartitionReassignments)

ControllerEvent: TypeAlias = (
    Startup
    | ControllerChange
    | Reelect
    | Expire
    | BrokerChange
    | TopicChange
    | PartitionModifications
    | IsrChangeNotification
    | TopicDeletion
    | TopicDeletionStopReplicaResponseReceived
    | TopicDeletionRetry
    | ZkPartitionReassignment
    | PartitionReassignmentIsrChange
    | PreferredReplicaElection
    | AutoPreferredReplicaLeaderElection
    | ControlledShutdown
    | ElectLeaders
    | ApiPartitionReassignment
    | ListPartitionReassignments
)
