"""Request bounds without processes: the znode-size arithmetic, the manual-assignment check, the byte budget of
requests in flight (queued.max.request.bytes) and the broker settings that name the limits."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from broker.config import BrokerConfig, BrokerConfigError, from_properties
from broker.request_bounds import BytesInFlight, RequestBytesExhausted
from client.kafka.assignment import BrokerMetadata
from client.kafka.assignment_bounds import (
    JUTE_MAXBUFFER_DEFAULT,
    check_manual_assignment_brokers,
    check_partitions_fit,
    decimal_digits_total,
    partitions_bytes_min,
)
from client.kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from client.kafka.topic_admin import plan_partition_addition, plan_topic_creation
from client.kafka.znodes import TopicAssignment, encode_topic
from tests.quorum_harness import poll_until
from zkemu.tree import DATA_BYTES_MAX


class _NoLog:
    def info(self, event: str, **fields: Any) -> None:
        pass


# ---------------------------------------------------------------- the znode-size arithmetic


def test_decimal_digits_total_counts_like_str() -> None:
    for start, count in [(0, 0), (0, 1), (0, 10), (0, 11), (7, 5), (95, 10), (0, 1234), (999, 2)]:
        assert decimal_digits_total(count, start) == sum(len(str(p)) for p in range(start, start + count))


@pytest.mark.parametrize(("partitions", "factor"), [(1, 1), (9, 1), (10, 3), (123, 2), (1001, 3)])
def test_the_lower_bound_is_the_encoded_size_for_one_digit_broker_ids(partitions: int, factor: int) -> None:
    assignment = {p: tuple(range(factor)) for p in range(partitions)}
    encoded = encode_topic(TopicAssignment("t", assignment))
    empty = encode_topic(TopicAssignment("t", {}))
    assert len(empty) + partitions_bytes_min(partitions, factor, 0, 0) == len(encoded)


def test_a_billion_partitions_are_refused_by_arithmetic_alone() -> None:
    started = time.monotonic()
    with pytest.raises(InvalidPartitionsError, match=r"jute.maxbuffer \(1048575 bytes\)") as refused:
        plan_topic_creation(
            "big",
            partitions=1_000_000_000,
            replication_factor=1,
            replica_assignment=None,
            configs={},
            brokers=[BrokerMetadata(1)],
        )
    assert time.monotonic() - started < 0.5
    assert "\n" not in str(refused.value) and "Number of partitions: 1000000000" in str(refused.value)


def test_the_largest_assignment_that_fits_is_accepted_and_one_more_partition_is_not() -> None:
    fits = 88298  # one-digit broker ids, replication factor 1, a topic id (KIP-516): 1048574 bytes
    brokers = [BrokerMetadata(1)]
    plan = plan_topic_creation(
        "t", partitions=fits, replication_factor=1, replica_assignment=None, configs={}, brokers=brokers
    )
    assert len(plan.znodes[1][1]) <= JUTE_MAXBUFFER_DEFAULT
    with pytest.raises(InvalidPartitionsError):
        plan_topic_creation(
            "t", partitions=fits + 1, replication_factor=1, replica_assignment=None, configs={}, brokers=brokers
        )


def test_longer_broker_ids_are_caught_on_the_encoded_znode() -> None:
    brokers = [BrokerMetadata(1000), BrokerMetadata(1001)]
    with pytest.raises(InvalidPartitionsError, match="jute.maxbuffer"):
        plan_topic_creation(
            "t", partitions=60000, replication_factor=2, replica_assignment=None, configs={}, brokers=brokers,
            rng=random.Random(1),
        )  # fmt: skip


def test_a_replication_factor_alone_too_large_is_invalid_replication_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="jute.maxbuffer"):
        check_partitions_fit("t", 1, 600_000, JUTE_MAXBUFFER_DEFAULT)


def test_adding_partitions_is_bounded_before_they_are_assigned() -> None:
    with pytest.raises(InvalidPartitionsError, match=r"Number of partitions: 2147483647 .* jute.maxbuffer"):
        plan_partition_addition("t", {0: (1,)}, 2**31 - 1, None, [BrokerMetadata(1)])
    full, _ = plan_partition_addition("t", {0: (1,)}, 3, None, [BrokerMetadata(1)])
    assert sorted(full) == [0, 1, 2]


def test_a_smaller_jute_maxbuffer_is_honoured() -> None:
    with pytest.raises(InvalidPartitionsError, match=r"jute.maxbuffer \(100 bytes\)"):
        plan_topic_creation(
            "t", partitions=20, replication_factor=1, replica_assignment=None, configs={},
            brokers=[BrokerMetadata(1)], znode_bytes_max=100,
        )  # fmt: skip


def test_topic_configs_too_large_for_their_znode_are_refused() -> None:
    throttled = ",".join(["1:2"] * 300_000)  # a legal value of 1.2 MB
    with pytest.raises(InvalidConfigurationError, match=r"/config/topics/t, more than jute.maxbuffer \(1048575"):
        plan_topic_creation(
            "t", partitions=1, replication_factor=1, replica_assignment=None,
            configs={"leader.replication.throttled.replicas": throttled}, brokers=[BrokerMetadata(1)],
        )  # fmt: skip


def test_manual_assignments_name_registered_brokers_only() -> None:
    check_manual_assignment_brokers([[1, 2], [2, 1]], {1, 2})
    with pytest.raises(InvalidReplicaAssignmentError) as refused:
        check_manual_assignment_brokers([[1, 999]], {1, 2})
    assert str(refused.value) == (
        "The manual partition assignment includes broker 999, but no such broker is registered."
    )
    with pytest.raises(InvalidReplicaAssignmentError, match="includes an empty replica list"):
        check_manual_assignment_brokers([[1], []], {1})


# ---------------------------------------------------------------- settings


def test_broker_limits_are_settings_with_kafkas_defaults() -> None:
    config = BrokerConfig()
    assert config.socket_request_max_bytes == 104857600
    assert config.jute_maxbuffer == 0xFFFFF == JUTE_MAXBUFFER_DEFAULT
    assert config.fetch_max_bytes == 57671680
    assert config.fetch_max_wait_ms_max == config.request_timeout_ms == 30000
    # What the broker may write must be what the quorum accepts.
    assert config.jute_maxbuffer <= DATA_BYTES_MAX
    custom = from_properties({"fetch.max.wait.ms.max": "500", "queued.max.request.bytes": "-1"})
    assert custom.fetch_max_wait_ms_max == 500 and custom.queued_max_request_bytes == -1


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"queued.max.request.bytes": "1000"}, "at least socket.request.max.bytes"),
        ({"queued.max.request.bytes": "0"}, "must be -1 (no limit) or positive"),
        ({"fetch.max.bytes": "10"}, "must be at least 1024"),
        ({"jute.maxbuffer": "0"}, "must be at least 1"),
        ({"max.concurrent.streams.per.connection": "0"}, "must be at least 1"),
    ],
)
def test_bad_limits_are_refused_in_one_line(properties: dict[str, str], message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        from_properties(properties)
    assert "\n" not in str(refused.value)


# ---------------------------------------------------------------- bytes in flight


def test_requests_beyond_the_budget_wait_in_arrival_order() -> None:
    async def scenario() -> list[str]:
        budget = BytesInFlight(100, _NoLog(), release_memory=lambda: True)
        order: list[str] = []
        await budget.acquire(80, 1.0)

        async def request(name: str, size: int) -> None:
            await budget.acquire(size, 5.0)
            order.append(name)

        big = asyncio.create_task(request("big", 60))
        await asyncio.sleep(0)  # let "big" queue first
        small = asyncio.create_task(request("small", 10))
        await asyncio.sleep(0)
        assert order == [] and budget.used_bytes == 80  # "small" would fit, but does not overtake "big"
        budget.release(80)
        await asyncio.wait_for(asyncio.gather(big, small), 5.0)
        assert budget.used_bytes == 70
        return order

    assert asyncio.run(scenario()) == ["big", "small"]


def test_a_request_that_finds_no_room_in_time_fails_naming_the_limit() -> None:
    async def scenario() -> None:
        budget = BytesInFlight(100, _NoLog(), release_memory=lambda: True)
        await budget.acquire(100, 1.0)
        with pytest.raises(RequestBytesExhausted, match=r"queued.max.request.bytes \(100\)"):
            await budget.acquire(1, 0.05)
        assert budget.used_bytes == 100 and not budget._waiters
        budget.release(100)
        await budget.acquire(100, 0.05)  # the timed-out waiter left nothing behind

    asyncio.run(scenario())


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    async def scenario() -> None:
        budget = BytesInFlight(100, _NoLog(), release_memory=lambda: True)
        await budget.acquire(100, 1.0)
        waiting = asyncio.create_task(budget.acquire(50, 5.0))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        budget.release(100)
        assert budget.used_bytes == 0 and not budget._waiters

    asyncio.run(scenario())


def test_no_limit_with_minus_one() -> None:
    async def scenario() -> None:
        budget = BytesInFlight(-1, _NoLog(), release_memory=lambda: True)
        for _ in range(10):
            await budget.acquire(10**9, 0.0)
        assert budget.used_bytes == 10**10

    asyncio.run(scenario())


async def _until(predicate: Any, timeout_s: float = 5.0) -> None:
    async def probe() -> bool:
        return bool(predicate())

    await poll_until(probe, timeout_s, "condition not reached in time")


def test_memory_is_handed_back_once_after_a_burst_and_not_after_small_requests() -> None:
    async def scenario() -> list[float]:
        calls: list[float] = []

        def release_memory() -> bool:
            calls.append(time.monotonic())
            return True

        budget = BytesInFlight(1000, _NoLog(), release_memory, quiet_period_s=0.05, burst_bytes_min=500)
        for size in (300, 300):  # one after the other: a burst is bytes arriving, not bytes at once
            await budget.acquire(size, 1.0)
            budget.release(size)
        ended = time.monotonic()
        await _until(lambda: calls)
        assert calls[0] - ended >= 0.05  # a busy period, then a quiet one, not at once
        await budget.acquire(100, 1.0)  # a small request after the burst: no second release
        budget.release(100)
        await _until(lambda: budget.bursts._timer is None)
        return calls

    assert len(asyncio.run(scenario())) == 1


def test_steady_small_requests_never_release_memory() -> None:
    async def scenario() -> int:
        budget = BytesInFlight(1000, _NoLog(), lambda: True, quiet_period_s=0.02, burst_bytes_min=500)
        for _ in range(200):  # 2000 bytes in all, more than a burst, but never 500 in one period
            await budget.acquire(10, 1.0)
            budget.release(10)
            await asyncio.sleep(0.005)  # the traffic's pace, not synchronisation
        await _until(lambda: budget.bursts._timer is None)
        return budget.bursts.releases

    assert asyncio.run(scenario()) == 0


def test_a_waiting_request_leaves_the_budget_so_the_requests_it_waits_for_get_in() -> None:
    """An acks=all produce waits for a follower's fetch: once appended it must not keep that fetch out."""
    from unittest import mock

    import grpc

    from broker.request_bounds import bounded_handler, release_request_bytes

    async def scenario() -> list[str]:
        budget = BytesInFlight(100, _NoLog(), lambda: True)
        followed = asyncio.Event()
        order: list[str] = []

        async def produce(request: bytes, context: object) -> str:
            order.append("appended")
            release_request_bytes()  # what ReplicaManager.produce does before its delayed wait
            await asyncio.wait_for(followed.wait(), 5.0)
            return "acknowledged"

        async def fetch(request: bytes, context: object) -> str:
            order.append("fetched")
            followed.set()
            return "records"

        context = mock.Mock(spec=grpc.aio.ServicerContext)
        context.time_remaining.return_value = 5.0
        bounded_produce = bounded_handler(produce, bytes, "ProduceRequest", budget, 5.0, _NoLog())
        bounded_fetch = bounded_handler(fetch, bytes, "FetchRequest", budget, 5.0, _NoLog())
        produced = asyncio.create_task(bounded_produce(b"p" * 100, context))  # the whole budget
        await asyncio.sleep(0)
        assert await asyncio.wait_for(bounded_fetch(b"f" * 10, context), 5.0) == "records"
        assert await produced == "acknowledged"
        assert budget.used_bytes == 0
        return order

    assert asyncio.run(scenario()) == ["appended", "fetched"]
