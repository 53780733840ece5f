"""Partition assignors run by the group leader (docs/research/kafka.md §5.4, exact).

The group leader gets every member's `Subscription` in its JoinGroup response
and the partition count of each subscribed topic from its own metadata, and
computes `member id -> partitions` with the assignor the coordinator chose
(the protocol `name`). Pure functions of their inputs.

* `RangeAssignor` ("range", Kafka's default, K28 `RangeAssignor.java`): per
  topic, its subscribers sorted (static `group.instance.id` first, then member
  id); consumer i gets `n*i + min(i, extra)` onward, `n + (i < extra)` of them.
* `RoundRobinAssignor` ("roundrobin", K28 `RoundRobinAssignor.java`): all
  members sorted the same way, used as a circular iterator; all partitions laid
  out by topic in lexicographic order, partition 0..n-1 within a topic; each
  goes to the next member subscribed to its topic.

A sticky assignor is not provided.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from client.kafka.client_errors import KafkaConfigurationError
from client.kafka.consumer_protocol import Subscription
from client.kafka.structs import TopicPartition

__all__ = [
    "AbstractPartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "member_order",
    "resolve_assignors",
]

Assignments = dict[str, list[TopicPartition]]


class AbstractPartitionAssignor:
    """Kafka's `ConsumerPartitionAssignor`: a `name` (the group protocol), optional user data, `assign`."""

    name: str = ""

    def subscription_user_data(self, topics: Sequence[str]) -> bytes | None:
        """The `UserData` of this member's subscription (None for range and round-robin)."""
        return None

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        """member id -> its partitions. Topics missing from `partitions_per_topic` are not assigned."""
        raise NotImplementedError

    def on_assignment(self, partitions: Sequence[TopicPartition], user_data: bytes | None, generation: int) -> None:
        """Told the member's own assignment after every SyncGroup (for stateful assignors)."""


def member_order(member_id: str, subscription: Subscription) -> tuple[int, str, str]:
    """K28 `MemberInfo.compareTo`: members with a group.instance.id first, by it; then by member id."""
    instance = subscription.group_instance_id
    return (0, instance, member_id) if instance else (1, "", member_id)


def _sorted_members(subscriptions: Mapping[str, Subscription], members: Sequence[str]) -> list[str]:
    return sorted(members, key=lambda m: member_order(m, subscriptions[m]))


class RangeAssignor(AbstractPartitionAssignor):
    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        assignment: Assignments = {member: [] for member in subscriptions}
        consumers_per_topic: dict[str, list[str]] = {}
        for member, subscription in subscriptions.items():
            for topic in subscription.topics:
                consumers_per_topic.setdefault(topic, []).append(member)
        for topic in sorted(consumers_per_topic):
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            consumers = _sorted_members(subscriptions, consumers_per_topic[topic])
            per_consumer, extra = divmod(count, len(consumers))
            for i, member in enumerate(consumers):
                start = per_consumer * i + min(i, extra)
                length = per_consumer + (1 if i < extra else 0)
                assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return assignment


class RoundRobinAssignor(AbstractPartitionAssignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        assignment: Assignments = {member: [] for member in subscriptions}
        if not subscriptions:
            return assignment
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        members = itertools.cycle(_sorted_members(subscriptions, list(subscriptions)))
        subscribed = {m: set(s.topics) for m, s in subscriptions.items()}
        current = next(members)
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                # Some member is subscribed to `topic` (it came from a subscription), so this ends.
                while topic not in subscribed[current]:
                    current = next(members)
                assignment[current].append(TopicPartition(topic, partition))
                current = next(members)
        return assignment


ASSIGNORS: dict[str, type[AbstractPartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
}
# Kafka's class names, accepted in `partition.assignment.strategy` as in the Java client.
_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
}


def resolve_assignors(strategy: object) -> tuple[AbstractPartitionAssignor, ...]:
    """`partition_assignment_strategy` (names, classes or instances, in preference order) -> assignor objects."""
    items = (strategy,) if isinstance(strategy, str | AbstractPartitionAssignor | type) else tuple(strategy)  # type: ignore[arg-type]
    if not items:
        raise KafkaConfigurationError("partition_assignment_strategy needs at least one assignor")
    out: list[AbstractPartitionAssignor] = []
    for item in items:
        if isinstance(item, AbstractPartitionAssignor):
            out.append(item)
        elif isinstance(item, type) and issubclass(item, AbstractPartitionAssignor):
            out.append(item())
        elif isinstance(item, str) and _CLASS_NAMES.get(item.strip(), item.strip().lower()) in ASSIGNORS:
            out.append(ASSIGNORS[_CLASS_NAMES.get(item.strip(), item.strip().lower())]())
        else:
            raise KafkaConfigurationError(
                f"unknown partition assignment strategy {item!r}: use {', '.join(sorted(ASSIGNORS))} or an assignor"
            )
    names = [a.name for a in out]
    if len(set(names)) != len(names) or not all(names):
        raise KafkaConfigurationError(f"partition_assignment_strategy names must be unique and non-empty: {names}")
    return tuple(out)
