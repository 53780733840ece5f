"""The follower replication throttle's pure parts: config parsing, the token bucket, the quota decisions."""

from __future__ import annotations

import pytest
import structlog

from broker.controller.context import ReplicaAssignment
from broker.replication_throttle import (
    DEFAULT_BROKER_ENTITY,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    ReplicationThrottle,
    ThrottledReplicas,
    TokenBucket,
    parse_rate,
    parse_throttled_replicas,
)
from client.kafka.structs import TopicPartition


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ThrottledReplicas()),
        ("", ThrottledReplicas()),
        ("*", ThrottledReplicas(every_replica=True)),
        (" * ", ThrottledReplicas(every_replica=True)),
        ("0:4,0:5, 1:4", ThrottledReplicas(pairs=frozenset({(0, 4), (0, 5), (1, 4)}))),
    ],
)
def test_parse_throttled_replicas(value: str | None, expected: ThrottledReplicas) -> None:
    assert parse_throttled_replicas(value) == expected


@pytest.mark.parametrize("value", ["0", "0:x", "a:1", "0:1,", "0;1"])
def test_parse_throttled_replicas_rejects_bad_entries(value: str) -> None:
    with pytest.raises(ValueError, match="partition:broker"):
        parse_throttled_replicas(value)


def test_parse_rate() -> None:
    assert parse_rate(None) is None
    assert parse_rate("1000") == 1000.0
    with pytest.raises(ValueError):
        parse_rate("0")
    with pytest.raises(ValueError):
        parse_rate("fast")


def test_token_bucket_goes_into_debt_and_pays_it_back_at_the_rate() -> None:
    bucket = TokenBucket(1000.0, now_s=0.0, burst_s=1.0)
    assert bucket.delay_s(0.0) == 0.0
    bucket.consume(3000, 0.0)  # 1000 saved up, 2000 of debt
    assert bucket.delay_s(0.0) == pytest.approx(2.0)
    assert bucket.delay_s(1.5) == pytest.approx(0.5)
    assert bucket.delay_s(2.0) == 0.0
    assert bucket.delay_s(100.0) == 0.0  # saving up is capped at the burst
    bucket.consume(1500, 100.0)
    assert bucket.delay_s(100.0) == pytest.approx(0.5)


def test_throttle_applies_to_listed_follower_replicas_once_a_rate_is_set() -> None:
    now = [0.0]
    throttle = ReplicationThrottle(4, None, structlog.get_logger(), clock=lambda: now[0])
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    throttle.on_topic_config("t", {FOLLOWER_THROTTLED_REPLICAS: "0:4,1:5"})
    assert not throttle.is_throttled(tp0)  # no rate yet
    throttle.on_broker_config(DEFAULT_BROKER_ENTITY, {FOLLOWER_THROTTLED_RATE: "2000"})
    throttle.on_broker_config("5", {FOLLOWER_THROTTLED_RATE: "1"})  # another broker's: ignored
    assert throttle.rate_bytes_per_s == 2000.0
    assert throttle.is_throttled(tp0) and not throttle.is_throttled(tp1)
    throttle.on_broker_config("4", {FOLLOWER_THROTTLED_RATE: "1000"})  # own entity beats <default>
    assert throttle.rate_bytes_per_s == 1000.0
    assert throttle.fetch_bytes(1_048_576) == 1024  # one second of the rate, at least THROTTLED_FETCH_BYTES_MIN
    throttle.record(2500)
    assert throttle.delay_s() == pytest.approx(1.5)
    now[0] = 2.0
    assert throttle.delay_s() == 0.0
    throttle.on_broker_config("4", {})
    throttle.on_broker_config(DEFAULT_BROKER_ENTITY, {})
    assert throttle.rate_bytes_per_s is None and not throttle.is_throttled(tp0)
    assert throttle.fetch_bytes(1_048_576) == 1_048_576
    throttle.on_topic_config("t", {FOLLOWER_THROTTLED_REPLICAS: "bad"})  # logged, nothing throttled
    throttle.on_broker_config("4", {FOLLOWER_THROTTLED_RATE: "10"})
    assert not throttle.is_throttled(tp0)


def test_replica_assignment_of_a_reassignment() -> None:
    ra = ReplicaAssignment(original=(1, 2, 3), target=(4, 5, 6))
    assert ra.replicas == (4, 5, 6, 1, 2, 3)
    assert ra.adding == (4, 5, 6) and ra.removing == (1, 2, 3)
    assert ReplicaAssignment.from_znode(ra.replicas, ra.adding, ra.removing) == ra
    partial = ReplicaAssignment(original=(1, 2, 3), target=(3, 4, 1))
    assert partial.replicas == (3, 4, 1, 2) and partial.adding == (4,) and partial.removing == (2,)
    back = ReplicaAssignment.from_znode(partial.replicas, partial.adding, partial.removing)
    # As in Kafka, ORS read back from the znode is RS - adding: the same replicas, in RS order.
    assert back.target == partial.target and back.replicas == partial.replicas
    assert back.adding == partial.adding and back.removing == partial.removing
    assert str(partial) == "ReplicaAssignment(replicas=3,4,1,2, addingReplicas=4, removingReplicas=2)"
