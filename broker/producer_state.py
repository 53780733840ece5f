"""Idempotent-producer state per partition: see `broker.log.producer_state`.

It lives in `broker.log` because the partition log owns it (as Kafka's `Log`
owns its `ProducerStateManager`): every append, follower append, recovery and
truncation goes through `PartitionLog`, which keeps the state in step.
"""

from broker.log.producer_state import (
    BATCHES_RETAINED,
    BatchMetadata,
    Duplicate,
    DuplicateMixedError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    ProducerStateManager,
    UnknownProducerIdError,
    in_sequence,
    last_sequence,
)

__all__ = [
    "BATCHES_RETAINED",
    "BatchMetadata",
    "Duplicate",
    "DuplicateMixedError",
    "InvalidProducerEpochError",
    "OutOfOrderSequenceError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "UnknownProducerIdError",
    "in_sequence",
    "last_sequence",
]
