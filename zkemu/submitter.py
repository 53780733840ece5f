"""Getting a ZooKeeper transaction into the log, from whichever server the session is on.

The leader stamps `time_ms` (ctime/mtime come from it, so every replica
agrees) and proposes. A follower forwards to the leader in batches, one
Forward RPC at a time so that its sessions' writes keep their order, then
waits until it has applied the write itself, so that the session's next
read here sees it (ZooKeeper's per-session FIFO).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import grpc

from quorum import errors as qerrors
from quorum.deadline import await_owned
from quorum.node import QuorumNode
from quorum.raft import Role
from quorum.transport import GRPC_OPTIONS
from zkraft_proto import zk_pb2, zk_pb2_grpc

# How long a write may wait for a leader (elections take about one election timeout).
NO_LEADER_POLL_S = 0.02
FORWARD_BATCH_MAX = 2048


class ConnectionLossError(Exception):
    """The write's outcome is unknown, or no leader could take it in time (ZooKeeper CONNECTIONLOSS)."""


class TxnSubmitter:
    def __init__(self, node: QuorumNode, now_ms: Callable[[], int] | None = None) -> None:
        self._node = node
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._queue: list[tuple[zk_pb2.Txn, asyncio.Future[tuple[int, bytes]]]] = []
        self._queue_event = asyncio.Event()
        self._forwarder: asyncio.Task[None] | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}

    def start(self) -> None:
        self._forwarder = asyncio.get_running_loop().create_task(self._forward_loop(), name="zk-forwarder")

    async def stop(self) -> None:
        if self._forwarder is not None:
            self._forwarder.cancel()
            await asyncio.gather(self._forwarder, return_exceptions=True)
        for _, fut in self._queue:
            if not fut.done():
                fut.set_exception(ConnectionLossError("server is shutting down"))
        for ch in self._channels.values():
            await ch.close(grace=None)

    async def submit(self, txn: zk_pb2.Txn, timeout_s: float) -> tuple[int, zk_pb2.TxnResult]:
        """Commit `txn`; returns (zxid, result) once this server has applied it."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLossError("no leader accepted the write in time")
            if self._node.core.role is Role.LEADER:
                try:
                    zxid, raw = await self._propose_here(txn, remaining)
                    break
                except (qerrors.NotLeaderError, qerrors.ProposalDroppedError, qerrors.ProposalLostError):
                    continue  # certainly not applied: try again through whoever leads now
                except qerrors.QuorumError as exc:
                    raise ConnectionLossError(str(exc)) from None
            elif self._node.core.leader_id:
                fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
                self._queue.append((txn, fut))
                self._queue_event.set()
                try:
                    zxid, raw = await await_owned(fut, remaining)
                    break
                except _RetryElsewhere:
                    await asyncio.sleep(NO_LEADER_POLL_S)  # let an election or a new leader's first append land
                    continue
                except TimeoutError:
                    raise ConnectionLossError("the leader did not answer in time; the write may be applied") from None
            else:
                await asyncio.sleep(NO_LEADER_POLL_S)  # an election is under way
        await self._node.wait_applied(zxid, max(deadline - time.monotonic(), 0.5))
        return zxid, zk_pb2.TxnResult.FromString(raw)

    async def _propose_here(self, txn: zk_pb2.Txn, timeout_s: float) -> tuple[int, bytes]:
        stamped = zk_pb2.Txn()
        stamped.CopyFrom(txn)
        stamped.time_ms = self._now_ms()
        [(index, result)] = await self._node.propose_many([stamped.SerializeToString()], timeout_s)
        return index, result

    async def propose_forwarded(self, raw_txns: list[bytes], timeout_s: float) -> list[tuple[int, bytes]]:
        """On the leader: stamp and propose txns a follower forwarded (one Raft entry each)."""
        now = self._now_ms()
        stamped = []
        for raw in raw_txns:
            t = zk_pb2.Txn.FromString(raw)
            t.time_ms = now
            stamped.append(t.SerializeToString())
        return await self._node.propose_many(stamped, timeout_s)

    # ---- follower side
    def _stub(self, address: str) -> zk_pb2_grpc.ZooKeeperStub:
        ch = self._channels.get(address)
        if ch is None:
            ch = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
            self._channels[address] = ch
        return zk_pb2_grpc.ZooKeeperStub(ch)

    async def _forward_loop(self) -> None:
        while True:
            await self._queue_event.wait()
            self._queue_event.clear()
            while self._queue:
                batch, self._queue = self._queue[:FORWARD_BATCH_MAX], self._queue[FORWARD_BATCH_MAX:]
                live = [(t, f) for t, f in batch if not f.done()]
                if live:
                    await self._forward(live)

    async def _forward(self, batch: list[tuple[zk_pb2.Txn, asyncio.Future[tuple[int, bytes]]]]) -> None:
        leader = self._node.core.leader_id
        address = self._node.address_of(leader)
        timeout_s = self._node.settings.proposal_timeout_ms / 1000
        try:
            if not address or leader == self._node.node_id:
                raise _RetryElsewhere()
            reply = await self._stub(address).Forward(
                zk_pb2.ForwardRequest(txns=[t.SerializeToString() for t, _ in batch]), timeout=timeout_s
            )
        except _RetryElsewhere as exc:
            _fail_all(batch, exc)
            return
        except grpc.aio.AioRpcError as exc:
            md = dict(exc.trailing_metadata() or ())
            code = md.get("error-code", "")
            never_sent = exc.code() is grpc.StatusCode.UNAVAILABLE and "failed to connect" in (exc.details() or "")
            if never_sent or code in ("NOT_LEADER", "PROPOSAL_DROPPED", "PROPOSAL_LOST", "SHUTTING_DOWN"):
                # Not proposed (the leader said so, or we never reached it, as
                # while a dead leader's successor is being elected): safe to retry.
                _fail_all(batch, _RetryElsewhere())
            else:
                _fail_all(batch, ConnectionLossError(f"forwarding to the leader failed: {exc.details()}"))
            return
        for (_, fut), zxid, raw in zip(batch, reply.zxids, reply.results, strict=True):
            if not fut.done():
                fut.set_result((zxid, raw))


class _RetryElsewhere(Exception):
    """Internal: the write was certainly not proposed; submit() tries again."""


def _fail_all(batch: list[tuple[zk_pb2.Txn, asyncio.Future[tuple[int, bytes]]]], exc: BaseException) -> None:
    for _, fut in batch:
        if not fut.done():
            fut.set_exception(exc)
