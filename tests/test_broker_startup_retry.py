"""A broker's start-up rides out a lost connection to one quorum node (found by the Kafka fault campaign: under
load a broker that lost its server between registering and reading /controller exited with "unexpected
ConnectionLoss" instead of moving to another node within its session, as Kafka's KafkaZkClient does)."""

from __future__ import annotations

import asyncio

import pytest

from broker.config import BrokerConfig
from broker.server import startup_retry_policy
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import ConnectionLoss, NoNodeError, RetryFailedError


def test_start_up_calls_are_retried_on_connection_loss_until_the_connection_timeout() -> None:
    config = BrokerConfig(zookeeper_connection_timeout_ms=3000)
    zk = AsyncZkClient("127.0.0.1:1", command_retry=startup_retry_policy(config))
    calls = []

    async def read_controller_id() -> int:
        calls.append(1)
        if len(calls) < 4:
            raise ConnectionLoss("connection to a quorum node lost before the reply")
        return 2

    assert asyncio.run(zk.retry(read_controller_id)) == 2
    assert len(calls) == 4


def test_start_up_retries_stop_at_the_connection_timeout_and_never_retry_other_errors() -> None:
    zk = AsyncZkClient(
        "127.0.0.1:1", command_retry=startup_retry_policy(BrokerConfig(zookeeper_connection_timeout_ms=300))
    )

    async def always_lost() -> None:
        raise ConnectionLoss("lost")

    with pytest.raises(RetryFailedError, match="deadline"):
        asyncio.run(zk.retry(always_lost))
    calls = []

    async def missing() -> None:
        calls.append(1)
        raise NoNodeError("/controller")

    with pytest.raises(NoNodeError):
        asyncio.run(zk.retry(missing))
    assert calls == [1]
