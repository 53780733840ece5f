"""Getting a ZooKeeper transaction into the log, from whichever server the session is on.

The leader stamps `time_ms` (ctime/mtime come from it, so every replica
agrees) and proposes. A follower forwards to the leader in batches on one
stream (zkemu.forward_stream), so that its sessions' writes keep their order,
and answers when it has applied the write itself, so that the session's next
read here sees it (ZooKeeper's per-session FIFO): its own apply, recognised by
the txn's forward tag (zkemu.forwarded_writes), or the leader's reply, then
the apply of the zxid it names, whichever comes first.
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
from runtime.eager_start import WriteInFlight
from zkemu.forward_stream import ConnectionLossError, LeaderStream, Pending, RetryElsewhere, fail_batch
from zkemu.forwarded_writes import ForwardedWrites
from zkemu.session_writes import NO_ROUTE, SessionWrite
from zkraft_proto import zk_pb2

__all__ = ["REFUSED_AFTER_A_LATER_WRITE", "ConnectionLossError", "RetryElsewhere", "TxnSubmitter"]

# How long a write may wait for a leader (elections take about one election timeout).
NO_LEADER_POLL_S = 0.02
FORWARD_BATCH_MAX = 2048
# Why a refused write is not submitted again (SessionWrite.may_retry): ConnectionLoss says it.
REFUSED_AFTER_A_LATER_WRITE = (
    "the leader refused the write after a later write of the session reached it; it was not applied"
)


class TxnSubmitter:
    def __init__(self, node: QuorumNode, now_ms: Callable[[], int] | None = None) -> None:
        self._node = node
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._queue: Pending = []
        self._queue_event = asyncio.Event()
        self._forwarder: asyncio.Task[None] | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stream: LeaderStream | None = None
        self._write = WriteInFlight()  # one forward batch in flight on the leader stream
        self.forwarded = ForwardedWrites()

    def start(self) -> None:
        self._forwarder = asyncio.get_running_loop().create_task(self._forward_loop(), name="zk-forwarder")

    async def stop(self) -> None:
        if self._forwarder is not None:
            self._forwarder.cancel()
            await asyncio.gather(self._forwarder, return_exceptions=True)
        self._write.close()
        if self._stream is not None:
            await self._stream.close()
        for _, fut in self._queue:
            if not fut.done():
                fut.set_exception(ConnectionLossError("server is shutting down"))
        for ch in self._channels.values():
            await ch.close(grace=None)

    async def submit(
        self, txn: zk_pb2.Txn, timeout_s: float, turn: SessionWrite | None = None
    ) -> tuple[int, zk_pb2.TxnResult]:
        """Commit `txn`; returns (zxid, result) once this server has applied it.

        `turn`: the write's place among its session's writes, which each
        attempt waits for, so that it reaches the log in the session's order
        (zkemu.session_writes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLossError("no leader accepted the write in time")
            if turn is not None and not turn.try_take(self.route() or NO_ROUTE):
                # Submitted below in the same step as it is marked submitted on the route.
                await turn.wait_turn(lambda: self.route() or NO_ROUTE)
            if self._node.core.role is Role.LEADER:
                try:
                    zxid, raw = await self._propose_here(txn, remaining)
                    break
                except qerrors.ProposalLostError:
                    # Certainly not applied, and neither is any later write proposed on the same route:
                    # try again through whoever leads now.
                    _not_taken(turn, lost=True)
                    continue
                except (qerrors.NotLeaderError, qerrors.ProposalDroppedError):
                    # Refused on the spot (a leadership transfer, too much uncommitted data): the
                    # refusal came without a pause, so let the loop move the leader on first.
                    _not_taken(turn, lost=False)
                    await asyncio.sleep(NO_LEADER_POLL_S)
                    continue
                except qerrors.QuorumError as exc:
                    raise ConnectionLossError(str(exc)) from None
            elif self._node.core.leader_id:
                [fut] = self.forward_nowait([txn])
                try:
                    zxid, raw = await await_owned(fut, remaining)
                    break
                except RetryElsewhere:
                    _not_taken(turn, lost=False)
                    await asyncio.sleep(NO_LEADER_POLL_S)  # let an election or a new leader's first append land
                    continue
                except TimeoutError:
                    raise ConnectionLossError("the leader did not answer in time; the write may be applied") from None
            else:
                _not_taken(turn, lost=True)
                await asyncio.sleep(NO_LEADER_POLL_S)  # an election is under way
        await self._node.wait_applied(zxid, max(deadline - time.monotonic(), 0.5))
        return zxid, zk_pb2.TxnResult.FromString(raw)

    def route(self) -> tuple[int, int] | None:
        """Where a write submitted now goes: (leader id, term), this node's own id when it leads; None while
        no leader is known (zkemu.session_writes)."""
        core = self._node.core
        return (core.leader_id, core.term) if core.leader_id else None

    async def _propose_here(self, txn: zk_pb2.Txn, timeout_s: float) -> tuple[int, bytes]:
        stamped = zk_pb2.Txn()
        stamped.CopyFrom(txn)
        stamped.time_ms = self._now_ms()
        stamped.forward_tag = 0  # a tag from an earlier attempt through a follower answers nothing here
        [(index, result)] = await self._node.propose_many([stamped.SerializeToString()], timeout_s)
        return index, result

    def propose_here_nowait(
        self, txns: list[zk_pb2.Txn]
    ) -> asyncio.Future[tuple[list[tuple[int, bytes]], BaseException | None]]:
        """On the leader: stamp and propose `txns` now, as consecutive entries; the future has the
        outcome of each (QuorumNode.propose_prefix_nowait). Raises QuorumError if nothing was appended."""
        now = self._now_ms()
        commands = []
        for txn in txns:
            txn.time_ms = now
            commands.append(txn.SerializeToString())
        return self._node.propose_prefix_nowait(commands)

    def forward_nowait(self, txns: list[zk_pb2.Txn]) -> list[asyncio.Future[tuple[int, bytes]]]:
        """On a follower that knows its leader: queue `txns` for the leader, in order, now; each future
        resolves with (zxid, result) when this node applies the write or the leader answers first
        (RetryElsewhere: certainly not proposed; ConnectionLossError: outcome unknown)."""
        loop = asyncio.get_running_loop()
        futures = []
        for txn in txns:
            fut: asyncio.Future[tuple[int, bytes]] = loop.create_future()
            txn.forward_tag = self.forwarded.tag(fut)
            self._queue.append((txn, fut))
            futures.append(fut)
        stream = self._stream
        if self._write.idle and stream is not None and not stream.broken:
            # The stream is idle: the batch goes to gRPC now, not after the forwarder's turn (_forward_loop).
            live = self._next_batch() if self._node.address_of(self._node.core.leader_id) == stream.address else []
            if live:
                self._write.start(stream.send(live))
        self._queue_event.set()
        return futures

    def propose_forwarded(self, raw_txns: list[bytes]) -> asyncio.Future[list[tuple[int, bytes]]]:
        """On the leader: stamp and propose, now, txns a follower forwarded (one Raft entry each)."""
        now = self._now_ms()
        stamped = []
        for raw in raw_txns:
            t = zk_pb2.Txn.FromString(raw)
            t.time_ms = now
            stamped.append(t.SerializeToString())
        return self._node.propose_nowait(stamped)

    # ---- follower side
    async def _leader_stream(self, address: str) -> LeaderStream:
        stream = self._stream
        if stream is not None and (stream.broken or stream.address != address):
            # A new leader, or a broken stream: what is in flight there fails
            # (with an honest outcome) as the old stream winds down.
            await stream.close()
            stream = None
        if stream is None:
            ch = self._channels.get(address)
            if ch is None:
                ch = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
                self._channels[address] = ch
            stream = self._stream = LeaderStream(ch, address)
        return stream

    def _next_batch(self) -> Pending:
        """The next queued writes to forward, those still waited for."""
        batch, self._queue = self._queue[:FORWARD_BATCH_MAX], self._queue[FORWARD_BATCH_MAX:]
        return [(t, f) for t, f in batch if not f.done()]

    async def _forward_loop(self) -> None:
        """Sends what forward_nowait queued, one write at a time, and finishes the writes it began."""
        while True:
            if not self._write.idle:
                await self._write.finish()
                continue
            if not self._queue:
                await self._queue_event.wait()
                self._queue_event.clear()
                continue
            live = self._next_batch()
            if not live:
                continue
            leader = self._node.core.leader_id
            address = self._node.address_of(leader)
            if not address or leader == self._node.node_id:
                fail_batch(live, RetryElsewhere())
                continue
            stream = await self._leader_stream(address)
            self._write.start(stream.send(live))


def _not_taken(turn: SessionWrite | None, lost: bool) -> None:
    """The write was certainly not applied where it went; it is submitted again, unless it was refused
    (not lost) after a later write of its session went the same way: that one may be applied, and a
    retry would land after it."""
    if turn is None:
        return
    if not lost and not turn.may_retry():
        raise ConnectionLossError(REFUSED_AFTER_A_LATER_WRITE)
    turn.unplace()
