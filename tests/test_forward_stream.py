"""What a follower's forwarded writes learn from the leader's reply on the forward stream (zkemu.forward_stream)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from zkemu.forward_stream import NOT_APPLIED_CODES, ConnectionLossError, Pending, RetryElsewhere, _resolve
from zkraft_proto import zk_pb2


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()  # futures only: nothing runs on it
    yield loop
    loop.close()


def _batch(loop: asyncio.AbstractEventLoop, n: int) -> Pending:
    return [(zk_pb2.Txn(session_id=k + 1), loop.create_future()) for k in range(n)]


def test_an_applied_batch_gives_each_write_its_zxid_and_result(loop: asyncio.AbstractEventLoop) -> None:
    batch = _batch(loop, 2)
    results = [zk_pb2.TxnResult(path=f"/n{k}").SerializeToString() for k in range(2)]
    _resolve(batch, zk_pb2.ForwardResponse(zxids=[41, 42], results=results))
    assert [f.result() for _, f in batch] == [(41, results[0]), (42, results[1])]


@pytest.mark.parametrize("code", sorted(NOT_APPLIED_CODES))
def test_a_batch_the_leader_certainly_did_not_apply_may_be_retried(loop: asyncio.AbstractEventLoop, code: str) -> None:
    batch = _batch(loop, 2)
    _resolve(batch, zk_pb2.ForwardResponse(error_code=code, error_message="not the leader"))
    for _, f in batch:
        with pytest.raises(RetryElsewhere):
            f.result()


def test_a_batch_whose_outcome_is_unknown_is_a_connection_loss(loop: asyncio.AbstractEventLoop) -> None:
    batch = _batch(loop, 1)
    _resolve(batch, zk_pb2.ForwardResponse(error_code="TIMEOUT", error_message="not committed within 5.0s"))
    with pytest.raises(ConnectionLossError, match="not committed within"):
        batch[0][1].result()


def test_a_write_whose_caller_gave_up_is_left_alone(loop: asyncio.AbstractEventLoop) -> None:
    batch = _batch(loop, 2)
    batch[0][1].cancel()
    _resolve(batch, zk_pb2.ForwardResponse(zxids=[7, 8], results=[b"", b""]))
    assert batch[0][1].cancelled() and batch[1][1].result() == (8, b"")
