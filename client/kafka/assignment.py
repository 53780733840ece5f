"""Kafka's replica assignment for new topics and partitions (K28 `kafka/admin/AdminUtils.scala`).

Research/kafka.md §6.1. Goals, as Kafka states them: spread replicas evenly over brokers;
the other replicas of the partitions led by one broker are spread over the other brokers;
with racks on every broker, a partition's replicas go to different racks where possible.

Rack-unaware: the first replica of partition p is broker `(p + start) % n`; replica j >= 1
is `(first + 1 + (shift + j - 1) % (n - 1)) % n` (`replicaIndex`), and the shift grows by
one every n partitions. `start` and `shift` are random unless `fixed_start_index` is given
(then both are it). Rack-aware: the same walk over the rack-alternated broker list, skipping
a broker whose rack (or itself) already holds a replica while some rack (broker) holds none.

Brokers are taken in the order given; Kafka's callers pass them sorted by id
(`AdminZkClient.getBrokerMetadatas`), and so should ours. Randomness is injected (`rng`).

Also here: kafka-topics' `--replica-assignment 1:2,2:3` parser and the checks Kafka makes
on a manual assignment, each with Kafka's message.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import NamedTuple

from client.kafka.errors import (
    BrokerNotAvailableError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

Assignment = dict[int, list[int]]  # partition id -> replicas, preferred leader first


class AdminOperationError(ValueError):
    """Kafka's AdminOperationException: a request the tool refuses; it has no wire code of its own."""


class BrokerMetadata(NamedTuple):
    id: int
    rack: str | None = None


class RackAwareMode(Enum):
    """kafka-topics: `--disable-rack-aware` is DISABLED; ENFORCED is the default; SAFE is what the broker uses."""

    DISABLED = "disabled"
    ENFORCED = "enforced"
    SAFE = "safe"


def broker_metadatas(
    racks: Mapping[int, str | None], mode: RackAwareMode = RackAwareMode.ENFORCED
) -> list[BrokerMetadata]:
    """Brokers sorted by id, with racks kept per `mode` (AdminZkClient.getBrokerMetadatas)."""
    with_rack = sum(1 for r in racks.values() if r is not None)
    if mode is RackAwareMode.ENFORCED and 0 < with_rack < len(racks):
        raise AdminOperationError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line "
            "to make replica assignment without rack information."
        )
    keep = mode is RackAwareMode.ENFORCED or (mode is RackAwareMode.SAFE and with_rack == len(racks))
    return [BrokerMetadata(b, racks[b] if keep else None) for b in sorted(racks)]


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> Assignment:
    """AdminUtils.assignReplicasToBrokers: partition id -> replicas, for ids from max(0, start_partition_id)."""
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    chooser = rng if rng is not None else random.Random()
    if all(b.rack is None for b in brokers):
        ids = [b.id for b in brokers]
        return _assign_rack_unaware(
            ids, n_partitions, replication_factor, fixed_start_index, start_partition_id, chooser
        )
    if any(b.rack is None for b in brokers):
        raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")
    racks = {b.id: b.rack for b in brokers if b.rack is not None}
    return _assign_rack_aware(racks, n_partitions, replication_factor, fixed_start_index, start_partition_id, chooser)


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _start_and_shift(fixed_start_index: int, n_brokers: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    # Two draws, in Kafka's order: start index, then the replica shift.
    start = rng.randrange(n_brokers)
    return start, rng.randrange(n_brokers)


def _assign_rack_unaware(
    broker_ids: Sequence[int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> Assignment:
    n = len(broker_ids)
    start_index, shift = _start_and_shift(fixed_start_index, n, rng)
    partition = max(0, start_partition_id)
    out: Assignment = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [broker_ids[first]]
        replicas += [broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        out[partition] = replicas
        partition += 1
    return out


def _assign_rack_aware(
    broker_racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> Assignment:
    n_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    start_index, shift = _start_and_shift(fixed_start_index, n, rng)
    partition = max(0, start_partition_id)
    out: Assignment = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none,
                # or that already has a replica while some broker has none.
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[partition] = replicas
        partition += 1
    return out


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn, racks sorted by name, brokers by id: rack1 {0,1}, rack2 {3} -> 0, 3, 1."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(broker_racks):
        out += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return out


def assign_new_partitions(
    brokers: Sequence[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    partitions_to_add: int,
    rng: random.Random | None = None,
) -> Assignment:
    """AdminZkClient.createPartitionsMetadata: new partitions start after the existing ones and keep
    partition 0's replication factor; the walk starts at the broker that leads partition 0."""
    replicas0 = existing[0]
    ids = [b.id for b in brokers]
    start_index = next((i for i, b in enumerate(ids) if b >= replicas0[0]), 0)
    return assign_replicas_to_brokers(brokers, partitions_to_add, len(replicas0), start_index, len(existing), rng)


def check_partition_increase(topic: str, current: int, requested: int) -> int:
    """The number of partitions to add; InvalidPartitionsError with Kafka's message unless it grows."""
    if requested <= current:
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. Topic {topic} currently has "
            f"{current} partitions, {requested} would not be an increase."
        )
    return requested - current


# --- manual assignment -------------------------------------------------------------------


def parse_replica_assignment(text: str) -> Assignment:
    """kafka-topics `--replica-assignment "1:2,2:3"`: one comma-separated entry per partition, replicas by ':'.

    TopicCommand.parseReplicaAssignment: numbers must parse, no broker twice in an entry, every
    entry as long as the first. Empty trailing entries are dropped, as Java's `split` does.
    """
    entries = _java_split(text, ",")
    out: Assignment = {}
    for partition, entry in enumerate(entries):
        replicas = [_parse_int(s) for s in _java_split(entry, ":")]
        duplicates = _duplicates(replicas)
        if duplicates:
            raise InvalidReplicaAssignmentError(
                "Partition replica lists may not contain duplicate entries: " + ",".join(map(str, duplicates))
            )
        out[partition] = replicas
        if len(replicas) != len(out[0]):
            shown = ", ".join(map(str, replicas))
            raise InvalidReplicaAssignmentError(f"Partition {partition} has different replication factor: [{shown}]")
    return out


def _java_split(text: str, sep: str) -> list[str]:
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _parse_int(text: str) -> int:
    stripped = text.strip()
    if not stripped.lstrip("+-").isdigit() or not stripped.isascii():
        raise InvalidReplicaAssignmentError(f'For input string: "{stripped}"')
    return int(stripped)


def _duplicates(values: Sequence[int]) -> list[int]:
    seen: set[int] = set()
    dups: list[int] = []
    for v in values:
        if v in seen and v not in dups:
            dups.append(v)
        seen.add(v)
    return dups


def validate_topic_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """The checks AdminZkClient.validateTopicCreate makes on a manual assignment for a new topic."""
    if len({len(r) for r in assignment.values()}) != 1:
        raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            shown = ", ".join(f"{p} -> List({', '.join(map(str, r))})" for p, r in sorted(assignment.items()))
            raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: Map({shown})")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]], expected_replication_factor: int, available_brokers: set[int]
) -> None:
    """AdminZkClient.validateReplicaAssignment, used for new partitions with a manual assignment."""
    for partition, replicas in sorted(assignment.items()):
        shown = ", ".join(map(str, replicas))
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Duplicate brokers not allowed in replica assignment: {shown} for partition id {partition}."
            )
        if not set(replicas) <= available_brokers:
            raise BrokerNotAvailableError(
                f"Some brokers specified for partition id {partition} are not available. Specified brokers: "
                f"{shown}, available brokers: {', '.join(map(str, sorted(available_brokers)))}."
            )
        if len(replicas) != expected_replication_factor:
            raise InvalidReplicaAssignmentError(
                "Inconsistent replication factor between partitions, partition 0 has "
                f"{expected_replication_factor} while partition {partition} has {len(replicas)} replicas."
            )
