"""A follower's writes on their way to the leader: one gRPC stream per leader, batches answered in order.

The leader proposes each batch as it arrives, so the stream's order is the
log's order, and a session's writes keep their order without waiting for one
another (a unary call per batch would both cost a new HTTP/2 stream each time,
about twice a stream message's round trip here, and allow one batch in flight).

What a failed batch means for the writes in it:
* the leader said NOT_LEADER, PROPOSAL_DROPPED, PROPOSAL_LOST or SHUTTING_DOWN,
  or the stream never connected: certainly not applied, so `RetryElsewhere`;
* anything else (the stream broke with batches in flight, a timeout): the
  outcome is unknown, so `ConnectionLossError`, as ZooKeeper reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

import grpc

from zkraft_proto import zk_pb2, zk_pb2_grpc

NOT_APPLIED_CODES = frozenset({"NOT_LEADER", "PROPOSAL_DROPPED", "PROPOSAL_LOST", "SHUTTING_DOWN"})
# A forward message holds at most this much (one larger write goes alone): a quarter of the gRPC
# receive limit the leader shares with its Raft peers (quorum.transport.GRPC_MESSAGE_BYTES_MAX).
FORWARD_MESSAGE_BYTES_MAX = 16 << 20

Pending = list[tuple[zk_pb2.Txn, "asyncio.Future[tuple[int, bytes]]"]]


class ConnectionLossError(Exception):
    """The write's outcome is unknown, or no leader could take it in time (ZooKeeper CONNECTIONLOSS)."""


class RetryElsewhere(Exception):
    """The write was certainly not proposed: it may be submitted again, to whoever leads now."""


class LeaderStream:
    """The stream to one leader address; `send` queues a batch, replies resolve the batch's futures."""

    def __init__(self, channel: grpc.aio.Channel, address: str) -> None:
        self.address = address
        self._call = zk_pb2_grpc.ZooKeeperStub(channel).Forward()
        self._in_flight: deque[Pending] = deque()
        self._answered_any = False
        self.broken = False
        self._reader = asyncio.get_running_loop().create_task(self._read_replies(), name=f"zk-forward-{address}")

    async def send(self, batch: Pending) -> None:
        raws = [t.SerializeToString() for t, _ in batch]
        parts = _parts_under(batch, raws, FORWARD_MESSAGE_BYTES_MAX)
        self._in_flight.extend(part for part, _ in parts)  # each part is one request, answered in order
        try:
            for _, part_raws in parts:
                await self._call.write(zk_pb2.ForwardRequest(txns=part_raws))
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            # A write error names the cause (a leader never reached can be
            # retried), so it fails what is in flight here; a bare state error
            # means the call already ended, and the reader fails them.
            self.broken = True
            self._call.cancel()
            if isinstance(exc, grpc.aio.AioRpcError):
                self._fail_in_flight(exc)

    async def _read_replies(self) -> None:
        failure: grpc.aio.AioRpcError | None = None
        try:
            while True:
                reply = await self._call.read()
                if reply is grpc.aio.EOF:
                    break
                self._answered_any = True
                if self._in_flight:
                    _resolve(self._in_flight.popleft(), reply)
        except grpc.aio.AioRpcError as exc:
            failure = exc
        except asyncio.CancelledError:
            pass
        finally:
            self.broken = True
            self._fail_in_flight(failure)

    def _fail_in_flight(self, failure: grpc.aio.AioRpcError | None) -> None:
        never_connected = (
            failure is not None
            and not self._answered_any
            and failure.code() is grpc.StatusCode.UNAVAILABLE
            and "failed to connect" in (failure.details() or "")
        )
        detail = failure.details() if failure is not None else "the stream to the leader ended"
        while self._in_flight:
            batch = self._in_flight.popleft()
            exc: Exception = (
                RetryElsewhere()
                if never_connected
                else ConnectionLossError(f"forwarding to the leader at {self.address} failed: {detail}")
            )
            fail_batch(batch, exc)

    async def close(self) -> None:
        """Stop: writes still in flight get ConnectionLossError (the leader may apply them yet)."""
        self.broken = True
        self._call.cancel()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def _resolve(batch: Pending, reply: zk_pb2.ForwardResponse) -> None:
    if reply.error_code in NOT_APPLIED_CODES:
        fail_batch(batch, RetryElsewhere())
    elif reply.error_code:
        fail_batch(batch, ConnectionLossError(f"the leader could not apply the write: {reply.error_message}"))
    else:
        for (_, fut), zxid, raw in zip(batch, reply.zxids, reply.results, strict=True):
            if not fut.done():
                fut.set_result((zxid, raw))


def _parts_under(batch: Pending, raws: list[bytes], limit_bytes: int) -> list[tuple[Pending, list[bytes]]]:
    """`batch` as one part, or, when its writes hold more than `limit_bytes`, as consecutive parts of at
    most that much each (a single larger write goes alone): pipelined large writes would otherwise make
    a message over the leader's gRPC receive limit, which ends the stream and fails every write on it."""
    if sum(len(raw) for raw in raws) <= limit_bytes:
        return [(batch, raws)]
    parts: list[tuple[Pending, list[bytes]]] = []
    start, part_bytes = 0, 0
    for k, raw in enumerate(raws):
        if k > start and part_bytes + len(raw) > limit_bytes:
            parts.append((batch[start:k], raws[start:k]))
            start, part_bytes = k, 0
        part_bytes += len(raw)
    parts.append((batch[start:], raws[start:]))
    return parts


def fail_batch(batch: Pending, exc: BaseException) -> None:
    for _, fut in batch:
        if not fut.done():
            fut.set_exception(exc)
