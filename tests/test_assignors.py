"""Range and round-robin exactly as Kafka's (docs/research/kafka.md §5.4), with Kafka's documented examples."""

from __future__ import annotations

import pytest

from client.kafka.assignors import RangeAssignor, RoundRobinAssignor, resolve_assignors
from client.kafka.client_errors import KafkaConfigurationError
from client.kafka.consumer_protocol import Subscription
from client.kafka.structs import TopicPartition as TP


def subs(**topics_by_member: tuple[str, ...]) -> dict[str, Subscription]:
    return {member: Subscription(tuple(topics)) for member, topics in topics_by_member.items()}


def counts(assignment: dict[str, list[TP]]) -> dict[str, int]:
    return {m: len(ps) for m, ps in assignment.items()}


def test_range_ten_partitions_over_three_consumers_is_4_3_3() -> None:
    result = RangeAssignor().assign({"t": 10}, subs(c0=("t",), c1=("t",), c2=("t",)))
    assert result == {
        "c0": [TP("t", p) for p in (0, 1, 2, 3)],
        "c1": [TP("t", p) for p in (4, 5, 6)],
        "c2": [TP("t", p) for p in (7, 8, 9)],
    }


def test_range_javadoc_example_two_topics_three_partitions() -> None:
    # RangeAssignor javadoc: C0: [t0p0, t0p1, t1p0, t1p1], C1: [t0p2, t1p2]
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, subs(C0=("t0", "t1"), C1=("t0", "t1")))
    assert sorted(result["C0"]) == [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)]
    assert sorted(result["C1"]) == [TP("t0", 2), TP("t1", 2)]


def test_range_orders_members_by_id_not_by_arrival() -> None:
    result = RangeAssignor().assign({"t": 5}, {"b": Subscription(("t",)), "a": Subscription(("t",))})
    assert result["a"] == [TP("t", 0), TP("t", 1), TP("t", 2)]
    assert result["b"] == [TP("t", 3), TP("t", 4)]


def test_range_static_members_sort_first() -> None:
    members = {
        "a": Subscription(("t",)),
        "z": Subscription(("t",), group_instance_id="i1"),
    }
    result = RangeAssignor().assign({"t": 3}, members)
    assert result["z"] == [TP("t", 0), TP("t", 1)]
    assert result["a"] == [TP("t", 2)]


def test_range_more_consumers_than_partitions_and_unknown_topics() -> None:
    result = RangeAssignor().assign({"t": 2}, subs(c0=("t", "gone"), c1=("t",), c2=("t",)))
    assert result == {"c0": [TP("t", 0)], "c1": [TP("t", 1)], "c2": []}


def test_range_per_topic_subscribers_only() -> None:
    result = RangeAssignor().assign({"t0": 2, "t1": 4}, subs(c0=("t0",), c1=("t0", "t1"), c2=("t1",)))
    assert sorted(result["c0"]) == [TP("t0", 0)]
    assert sorted(result["c1"]) == [TP("t0", 1), TP("t1", 0), TP("t1", 1)]
    assert sorted(result["c2"]) == [TP("t1", 2), TP("t1", 3)]


def test_roundrobin_javadoc_example_identical_subscriptions() -> None:
    # RoundRobinAssignor javadoc: C0: [t0p0, t0p2, t1p1], C1: [t0p1, t1p0, t1p2]
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs(C0=("t0", "t1"), C1=("t0", "t1")))
    assert result == {
        "C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
        "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)],
    }


def test_roundrobin_javadoc_example_different_subscriptions() -> None:
    # javadoc: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2]; t0: 1, t1: 2, t2: 3 partitions
    # -> C0: [t0p0], C1: [t1p0], C2: [t1p1, t2p0, t2p1, t2p2]
    result = RoundRobinAssignor().assign(
        {"t0": 1, "t1": 2, "t2": 3}, subs(C0=("t0",), C1=("t0", "t1"), C2=("t0", "t1", "t2"))
    )
    assert result == {
        "C0": [TP("t0", 0)],
        "C1": [TP("t1", 0)],
        "C2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)],
    }


def test_roundrobin_ten_partitions_over_three_consumers() -> None:
    result = RoundRobinAssignor().assign({"t": 10}, subs(c2=("t",), c0=("t",), c1=("t",)))
    assert result == {
        "c0": [TP("t", p) for p in (0, 3, 6, 9)],
        "c1": [TP("t", p) for p in (1, 4, 7)],
        "c2": [TP("t", p) for p in (2, 5, 8)],
    }
    assert counts(result) == {"c0": 4, "c1": 3, "c2": 3}


def test_roundrobin_topics_in_lexicographic_order() -> None:
    result = RoundRobinAssignor().assign({"b": 1, "a": 2}, subs(x=("b", "a"), y=("a", "b")))
    assert result == {"x": [TP("a", 0), TP("b", 0)], "y": [TP("a", 1)]}


def test_empty_group() -> None:
    assert RoundRobinAssignor().assign({"t": 3}, {}) == {}
    assert RangeAssignor().assign({"t": 3}, {}) == {}


def test_resolve_assignors() -> None:
    assert [a.name for a in resolve_assignors("range")] == ["range"]
    assert [a.name for a in resolve_assignors(("roundrobin", RangeAssignor))] == ["roundrobin", "range"]
    assert [a.name for a in resolve_assignors(["org.apache.kafka.clients.consumer.RoundRobinAssignor"])] == [
        "roundrobin"
    ]
    with pytest.raises(KafkaConfigurationError, match="unknown partition assignment strategy 'sticky'"):
        resolve_assignors(["sticky"])
    with pytest.raises(KafkaConfigurationError, match="unique"):
        resolve_assignors(["range", "range"])
    with pytest.raises(KafkaConfigurationError, match="at least one"):
        resolve_assignors([])
