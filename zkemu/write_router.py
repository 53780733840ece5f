"""Where a session's writes go, decided once: applied here, forwarded to the leader, or held for an election.

`WriteRouter.way_now` is the one decision, from the quorum's leadership as
this server sees it (quorum.facade):
* HERE: this server leads. It stamps `time_ms` (ctime/mtime come from it, so
  every replica agrees) and proposes.
* FORWARD: another server leads. The write is forwarded in batches on one
  stream (zkemu.forward_stream), so that the server's sessions' writes keep
  their order, and answered when this server has applied it itself, so that
  the session's next read here sees it (ZooKeeper's per-session FIFO): its
  own apply, recognised by the txn's forward tag (zkemu.forwarded_writes), or
  the leader's reply, then the apply of the zxid it names, whichever comes
  first.
* WAIT: no leader is known (an election is under way), or this server is
  named leader without leading (between roles): the write waits and tries
  again.

A write that was certainly not applied where it went is submitted again,
through whoever leads then, in its session's place (zkemu.session_writes).
Two entry points use it: `submit`, one write at a time, awaited; and
`send_group`, a run of consecutive writes of one session sent at once (the
leader proposes them as consecutive entries, a follower forwards them as one
batch) and answered each in turn through the session's `GroupReplies`.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import grpc

from quorum.facade import (
    GRPC_OPTIONS,
    NotLeaderError,
    ProposalDroppedError,
    ProposalLostError,
    QuorumError,
    QuorumFacade,
    QuorumTimeoutError,
    await_owned,
)
from runtime import grpc_channels
from runtime.eager_start import WriteInFlight
from zkemu.forward_stream import ConnectionLossError, LeaderStream, Pending, RetryElsewhere, fail_batch
from zkemu.forwarded_writes import ForwardedWrites
from zkemu.session_writes import NO_ROUTE, Route, SessionWrite
from zkraft_proto import zk_pb2

__all__ = [
    "REFUSED_AFTER_A_LATER_WRITE",
    "ConnectionLossError",
    "Decision",
    "GroupReplies",
    "GroupWrite",
    "RetryElsewhere",
    "Way",
    "WriteRouter",
]

# How long a write waits for the leadership this server sees to change (QuorumFacade.leadership_changed:
# an election decided, a new leader's first append) before it decides again where to go.
NO_LEADER_POLL_S = 0.02
FORWARD_BATCH_MAX = 2048
# Why a refused write is not submitted again (SessionWrite.may_retry): ConnectionLoss says it.
REFUSED_AFTER_A_LATER_WRITE = (
    "the leader refused the write after a later write of the session reached it; it was not applied"
)
LEADER_DID_NOT_ANSWER = "the leader did not answer in time; the write may be applied"


class Way(enum.Enum):
    HERE = "here"  # this server leads: propose
    FORWARD = "forward"  # another server leads: forward to it
    WAIT = "wait"  # no leader to take it now: wait, then decide again


@dataclass(frozen=True, slots=True)
class Decision:
    """Where writes go now, and the route they take (zkemu.session_writes): (leader id, term), this
    server's own id while it leads; NO_ROUTE while no leader is known."""

    way: Way
    route: Route
    leading: bool


def decide(node_id: int, leading: bool, leader_id: int, term: int) -> Decision:
    """The one routing decision (a pure function of the leadership this server sees)."""
    route = (leader_id, term) if leader_id else NO_ROUTE
    if leading:
        return Decision(Way.HERE, route, True)
    if leader_id and leader_id != node_id:
        return Decision(Way.FORWARD, route, False)
    return Decision(Way.WAIT, route, False)


class GroupWrite(Protocol):
    """One write of a group sent together: its txn and its place among its session's writes."""

    txn: zk_pb2.Txn
    write: SessionWrite


W = TypeVar("W", bound=GroupWrite)


class GroupReplies(Protocol[W]):
    """How a session answers the writes of a group: each in its slot, then the ready replies leave."""

    def applied(self, item: W, result: zk_pb2.TxnResult) -> None: ...

    def failed(self, item: W, message: str) -> None: ...

    def flush(self) -> None: ...


class WriteRouter:
    def __init__(self, quorum: QuorumFacade, now_ms: Callable[[], int] | None = None) -> None:
        self._quorum = quorum
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._timeout_s = quorum.settings.proposal_timeout_ms / 1000
        self._node_id = quorum.node_id
        self._decision = decide(quorum.node_id, False, 0, 0)
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

    # ---- the decision
    def way_now(self) -> Decision:
        """Where a write submitted now goes (`decide`); every write asks, so the last decision is kept
        while leadership holds: this server still leading in the same term, or still not leading with
        the same leader (none) in the same term."""
        quorum = self._quorum
        leading, term = quorum.is_leader, quorum.term
        last = self._decision
        if leading:
            if last.leading and last.route[1] == term:
                return last
            leader_id = self._node_id
        else:
            leader_id = quorum.leader_id
            if not last.leading and last.route[0] == leader_id and (last.route[1] == term or not leader_id):
                return last
        self._decision = decision = decide(self._node_id, leading, leader_id, term)
        return decision

    def route(self) -> Route:
        """The route of a write submitted now (zkemu.session_writes)."""
        return self.way_now().route

    # ---- one write at a time
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
            decision = self.way_now()
            if turn is not None and not turn.try_take(decision.route):
                # Submitted below in the same step as it is marked submitted on the route.
                await turn.wait_turn(self.route)
                decision = self.way_now()
            if decision.way is Way.HERE:
                try:
                    zxid, raw = await self._propose_here(txn, remaining)
                    break
                except ProposalLostError:
                    # Certainly not applied, and neither is any later write proposed on the same route:
                    # try again through whoever leads now.
                    _not_taken(turn, lost=True)
                    continue
                except (NotLeaderError, ProposalDroppedError):
                    # Refused on the spot (a leadership transfer, too much uncommitted data): the
                    # refusal came without a pause, so let the loop move the leader on first.
                    _not_taken(turn, lost=False)
                    await self._quorum.leadership_changed(NO_LEADER_POLL_S)
                    continue
                except QuorumError as exc:
                    raise ConnectionLossError(str(exc)) from None
            elif decision.way is Way.FORWARD:
                [fut] = self.forward_nowait([txn])
                try:
                    zxid, raw = await await_owned(fut, remaining)
                    break
                except RetryElsewhere:
                    _not_taken(turn, lost=False)
                    # Let an election or a new leader's first append land.
                    await self._quorum.leadership_changed(NO_LEADER_POLL_S)
                    continue
                except TimeoutError:
                    raise ConnectionLossError(LEADER_DID_NOT_ANSWER) from None
            else:
                _not_taken(turn, lost=True)
                await self._quorum.leadership_changed(NO_LEADER_POLL_S)  # an election is under way
        await self._quorum.wait_applied(zxid, max(deadline - time.monotonic(), 0.5))
        return zxid, zk_pb2.TxnResult.FromString(raw)

    async def propose_as_leader(self, txn: zk_pb2.Txn, timeout_s: float) -> tuple[int, zk_pb2.TxnResult]:
        """Commit `txn`, a decision this leader made in its term (a session's expiry), through this node only:
        never forwarded, never retried through another leader. A QuorumError (not leader, lost, dropped, timed
        out) means this leadership could not commit it; the caller drops the decision, since a deposed
        leader's view (a session it stopped hearing from) is not the next leader's, which restarts every
        session clock (ZooKeeper's SessionTrackerImpl on a new leader)."""
        zxid, raw = await self._propose_here(txn, timeout_s)
        return zxid, zk_pb2.TxnResult.FromString(raw)

    async def _propose_here(self, txn: zk_pb2.Txn, timeout_s: float) -> tuple[int, bytes]:
        stamped = zk_pb2.Txn()
        stamped.CopyFrom(txn)
        stamped.time_ms = self._now_ms()
        stamped.forward_tag = 0  # a tag from an earlier attempt through a follower answers nothing here
        [(index, result)] = await self._quorum.propose([stamped.SerializeToString()], timeout_s)
        return index, result

    # ---- a group of one session's writes
    def send_group(
        self, decision: Decision, group: Sequence[W], replies: GroupReplies[W]
    ) -> Coroutine[Any, Any, None] | None:
        """Send `group` (each already taken on `decision.route`) the way `decision` says, HERE or FORWARD;
        returns the coroutine that answers each write through `replies` and settles it, or None when the
        leader appended none of them (a leadership transfer, too much uncommitted data, shutting down):
        they are then back among the unsubmitted, for `submit` to retry or answer CONNECTIONLOSS."""
        txns = [item.txn for item in group]
        if decision.way is Way.FORWARD:
            # A follower forwards them as one batch and answers each when it has applied it.
            return self._complete_forwarded(group, self.forward_nowait(txns), replies)
        try:
            proposed = self.propose_here_nowait(txns)
        except QuorumError:
            for item in group:
                item.write.unplace()
            return None
        return self._complete_proposed(group, proposed, replies)

    async def _complete_proposed(
        self,
        group: Sequence[W],
        proposed: asyncio.Future[tuple[list[tuple[int, bytes]], BaseException | None]],
        replies: GroupReplies[W],
    ) -> None:
        timeout_s = self._timeout_s
        try:
            applied, error = await await_owned(proposed, timeout_s)
        except TimeoutError:
            applied = []
            error = QuorumTimeoutError(f"not committed within {timeout_s:.1f}s; it may still be applied later")
        if applied and self._quorum.applied_index < applied[-1][0]:
            await self._quorum.wait_applied(applied[-1][0], timeout_s)
        for item, (_, raw) in zip(group, applied, strict=False):
            item.write.settle()
            replies.applied(item, zk_pb2.TxnResult.FromString(raw))
        replies.flush()
        rest = group[len(applied) :]
        if not rest:
            return
        if isinstance(error, ProposalLostError):
            # Certainly not applied, and neither is any later write proposed on the same route:
            # each goes again through whoever leads now, in the session's order (SessionWrites).
            await self._submit_again(rest, replies)
            return
        for item in rest:
            item.write.settle()
            replies.failed(item, str(error))
        replies.flush()

    async def _complete_forwarded(
        self, group: Sequence[W], futures: list[asyncio.Future[tuple[int, bytes]]], replies: GroupReplies[W]
    ) -> None:
        """Answer a follower's group of forwarded writes in order, each once this node has applied it."""
        deadline = time.monotonic() + self._timeout_s
        k = 0
        while k < len(group):
            item = group[k]
            try:
                zxid, raw = await await_owned(futures[k], max(deadline - time.monotonic(), 0.0))
                await self._quorum.wait_applied(zxid, max(deadline - time.monotonic(), 0.5))
            except RetryElsewhere:
                # Refused with the rest of its batch (a leader change): this write and the later ones
                # refused with it go again, in the session's order, through whoever leads now.
                refused = k + 1
                while refused < len(group) and _refused(futures[refused]):
                    refused += 1
                await self._forward_again(group[k:refused], replies)
                k = refused
                continue
            except TimeoutError:
                replies.failed(item, LEADER_DID_NOT_ANSWER)
            except (ConnectionLossError, QuorumError) as exc:
                replies.failed(item, str(exc))
            else:
                replies.applied(item, zk_pb2.TxnResult.FromString(raw))
            item.write.settle()
            replies.flush()
            k += 1

    async def _forward_again(self, refused: Sequence[W], replies: GroupReplies[W]) -> None:
        """Writes the leader refused (certainly not applied) submitted again, in order; unless a later
        write of the session already went that way (it could be applied before them)."""
        if not refused[-1].write.may_retry():
            for item in refused:
                item.write.settle()
                replies.failed(item, REFUSED_AFTER_A_LATER_WRITE)
            replies.flush()
            return
        # A refusal comes at once: let an election or a new leader's first append land first.
        await self._submit_again(refused, replies, pause_s=NO_LEADER_POLL_S)

    async def _submit_again(self, items: Sequence[W], replies: GroupReplies[W], pause_s: float = 0.0) -> None:
        """Writes of a group certainly not applied, submitted again each on its own (`submit`), in the
        session's order (SessionWrites), and answered in their slots."""
        for item in items:
            item.write.unplace()
        if pause_s:
            await self._quorum.leadership_changed(pause_s)
        outcomes = await asyncio.gather(*(self._submit_alone(item) for item in items))
        for item, outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, ConnectionLossError):
                replies.failed(item, str(outcome))
            else:
                replies.applied(item, outcome)
        replies.flush()

    async def _submit_alone(self, item: GroupWrite) -> zk_pb2.TxnResult | ConnectionLossError:
        try:
            _, result = await self.submit(item.txn, self._timeout_s, item.write)
        except ConnectionLossError as exc:
            return exc
        finally:
            item.write.settle()
        return result

    # ---- the leader's side
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
        return self._quorum.propose_prefix_nowait(commands)

    def propose_forwarded(
        self, raw_txns: list[bytes], touch: Callable[[int], None]
    ) -> asyncio.Future[list[tuple[int, bytes]]]:
        """On the leader: stamp and propose, now, txns a follower forwarded (one Raft entry each).

        Each write's session is touched (`touch`, the session tracker's): its client is being served. The
        follower's own touches travel on another call, which can lag after a healed partition (a connection
        in TCP's backoff) while writes flow; a session would then expire with its writes still being
        acknowledged (found by the fault campaign, seed 1041: two sessions on one follower expired at once).
        """
        now = self._now_ms()
        stamped = []
        sessions = set()
        for raw in raw_txns:
            t = zk_pb2.Txn.FromString(raw)
            t.time_ms = now
            sessions.add(t.session_id)
            stamped.append(t.SerializeToString())
        for session_id in sessions:  # once per session in the batch: one clock read each, not one per write
            touch(session_id)
        return self._quorum.propose_nowait(stamped)

    # ---- the follower's side
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
            live = self._next_batch() if self._quorum.leader_address() == stream.address else []
            if live:
                self._write.start(stream.send(live))
        self._queue_event.set()
        return futures

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
                ch = grpc_channels.aio_channel(address, self._quorum.settings.peer_tls, GRPC_OPTIONS)
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
            leader = self._quorum.leader_id
            address = self._quorum.address_of(leader)
            if not address or leader == self._quorum.node_id:
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


def _refused(future: asyncio.Future[Any]) -> bool:
    return future.done() and not future.cancelled() and isinstance(future.exception(), RetryElsewhere)
