"""Partition and replica states with Kafka's tables of legal previous states.

docs/research/kafka.md §2.5 and §2.6 (K28 `PartitionStateMachine.scala`,
`ReplicaStateMachine.scala`). Each enum value is Kafka's state byte and
`str()` gives Kafka's name (`OnlinePartition`), as the state-change log
prints it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType


class _KafkaNamedState(enum.Enum):
    # Not IntEnum: OnlinePartition (1) must never compare equal to NewReplica (1).

    @property
    def state_byte(self) -> int:
        """Kafka's `state: Byte` of this state."""
        return int(self.value)

    def __str__(self) -> str:
        # NON_EXISTENT_PARTITION -> NonExistentPartition, Kafka's case-object name.
        return "".join(word.capitalize() for word in self.name.split("_"))


class PartitionState(_KafkaNamedState):
    NEW_PARTITION = 0
    ONLINE_PARTITION = 1
    OFFLINE_PARTITION = 2
    NON_EXISTENT_PARTITION = 3


class ReplicaState(_KafkaNamedState):
    NEW_REPLICA = 1
    ONLINE_REPLICA = 2
    OFFLINE_REPLICA = 3
    REPLICA_DELETION_STARTED = 4
    REPLICA_DELETION_SUCCESSFUL = 5
    REPLICA_DELETION_INELIGIBLE = 6
    NON_EXISTENT_REPLICA = 7


_P = PartitionState
_R = ReplicaState

# Target state -> legal previous states, in Kafka's declaration order (it shows in the error message).
PARTITION_VALID_PREVIOUS_STATES: Mapping[PartitionState, tuple[PartitionState, ...]] = MappingProxyType(
    {
        _P.NEW_PARTITION: (_P.NON_EXISTENT_PARTITION,),
        _P.ONLINE_PARTITION: (_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION),
        _P.OFFLINE_PARTITION: (_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION),
        _P.NON_EXISTENT_PARTITION: (_P.OFFLINE_PARTITION,),
    }
)

REPLICA_VALID_PREVIOUS_STATES: Mapping[ReplicaState, tuple[ReplicaState, ...]] = MappingProxyType(
    {
        _R.NEW_REPLICA: (_R.NON_EXISTENT_REPLICA,),
        _R.ONLINE_REPLICA: (_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE),
        _R.OFFLINE_REPLICA: (_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE),
        _R.REPLICA_DELETION_STARTED: (_R.OFFLINE_REPLICA,),
        _R.REPLICA_DELETION_SUCCESSFUL: (_R.REPLICA_DELETION_STARTED,),
        _R.REPLICA_DELETION_INELIGIBLE: (_R.OFFLINE_REPLICA, _R.REPLICA_DELETION_STARTED),
        _R.NON_EXISTENT_REPLICA: (_R.REPLICA_DELETION_SUCCESSFUL,),
    }
)

# A partition or replica the controller has never seen is in this state (Kafka's `getOrElse` default).
INITIAL_PARTITION_STATE = PartitionState.NON_EXISTENT_PARTITION
INITIAL_REPLICA_STATE = ReplicaState.NON_EXISTENT_REPLICA


class IllegalStateTransition(Exception):
    """A state machine was asked for a transition its table forbids.

    Kafka logs this as a failed state change and leaves the partition or
    replica where it was (`logInvalidTransition`); the controller does the same.
    """

    def __init__(
        self,
        current: PartitionState | ReplicaState,
        target: PartitionState | ReplicaState,
        subject: str = "",
    ) -> None:
        self.current = current
        self.target = target
        self.subject = subject
        super().__init__(_invalid_transition_message(current, target, subject))


def valid_previous_states(
    target: PartitionState | ReplicaState,
) -> tuple[PartitionState, ...] | tuple[ReplicaState, ...]:
    """The states from which `target` may be entered."""
    if isinstance(target, PartitionState):
        return PARTITION_VALID_PREVIOUS_STATES[target]
    return REPLICA_VALID_PREVIOUS_STATES[target]


def is_valid_transition(current: PartitionState | ReplicaState, target: PartitionState | ReplicaState) -> bool:
    if type(current) is not type(target):
        return False
    return current in valid_previous_states(target)


def check_transition(
    current: PartitionState | ReplicaState,
    target: PartitionState | ReplicaState,
    subject: str = "",
) -> None:
    """Raises `IllegalStateTransition` unless `current -> target` is in the table.

    `subject` names the partition (`t-0`) or replica (`[Topic=t,Partition=0,Replica=1]`) for the message.
    """
    if not is_valid_transition(current, target):
        raise IllegalStateTransition(current, target, subject)


def _invalid_transition_message(
    current: PartitionState | ReplicaState,
    target: PartitionState | ReplicaState,
    subject: str,
) -> str:
    # Kafka's wording: PartitionStateMachine / ReplicaStateMachine `logInvalidTransition` (K28).
    name = f" {subject}" if subject else ""
    if isinstance(target, PartitionState):
        previous = ",".join(str(s) for s in PARTITION_VALID_PREVIOUS_STATES[target])
        return (
            f"Partition{name} should be in one of {previous} states before moving to {target} state. "
            f"Instead it is in {current} state"
        )
    previous = ",".join(str(s) for s in REPLICA_VALID_PREVIOUS_STATES[target])
    return (
        f"Replica{name} should be in the {previous} states before moving to {target} state. "
        f"Instead it is in {current} state"
    )
