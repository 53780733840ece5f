"""Session ids, passwords and expiry (ZooKeeper's SessionTracker, docs/research/quorum.md §1.7).

Sessions are replicated state (created and closed by log entries); only the
leader decides expiry, by committing a close-session entry. Every server
touches the sessions connected to it; followers pass their touches to the
leader. A new leader gives every live session a fresh full timeout, so a
leader change never expires a live session.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import time
from collections.abc import Callable

import grpc
import structlog

from quorum.facade import QuorumError, QuorumFacade
from runtime import grpc_channels
from zkemu.write_router import WriteRouter
from zkraft_proto import zk_pb2, zk_pb2_grpc

PASSWORD_BYTES = 16


def session_password(cluster_id: str, session_id: int) -> bytes:
    """Any server can check a password without shared state: a MAC of the id under the cluster id."""
    return hmac.new(cluster_id.encode(), session_id.to_bytes(8, "big", signed=True), hashlib.sha256).digest()[
        :PASSWORD_BYTES
    ]


class SessionIds:
    """ZooKeeper's layout: server id in the top byte, the millisecond clock below, a counter in the low bits."""

    def __init__(self, server_id: int, now_ms: Callable[[], int]) -> None:
        base = ((server_id & 0xFF) << 56) | ((now_ms() & 0xFFFFFFFFFF) << 16)
        if base >= 1 << 63:
            base -= 1 << 64  # ids are signed 64-bit, as in ZooKeeper
        self._counter = itertools.count(base + 1)

    def next(self) -> int:
        return next(self._counter)


class SessionTracker:
    def __init__(
        self,
        quorum: QuorumFacade,
        sessions_of_tree: Callable[[], dict[int, int]],
        router: WriteRouter,
        tick_time_ms: int,
    ) -> None:
        self._quorum = quorum
        self._sessions_of_tree = sessions_of_tree
        self._router = router
        self._check_interval_s = max(tick_time_ms / 2000, 0.02)
        self._deadlines: dict[int, float] = {}  # leader only: session id -> monotonic expiry time
        self._timeouts: dict[int, int] = {}
        self._last_lead_s = 0.0  # when the leader's clock last ran (monotonic)
        self._closing: set[int] = set()
        self._touched: set[int] = set()  # follower: touches to pass to the leader
        self._was_leader = False
        self._task: asyncio.Task[None] | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.log = structlog.get_logger("zk.sessions").bind(node=quorum.node_id)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="zk-session-tracker")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for ch in self._channels.values():
            await ch.close(grace=None)

    # ---- events
    def touch(self, session_id: int) -> None:
        if self._quorum.is_leader:
            timeout_ms = self._timeouts.get(session_id)
            if timeout_ms is not None and session_id not in self._closing:
                self._deadlines[session_id] = time.monotonic() + timeout_ms / 1000
        else:
            self._touched.add(session_id)

    def touch_many(self, session_ids: list[int]) -> list[int]:
        """Touches a follower passed on; returns the ids this leader does not know (expired)."""
        unknown = []
        for sid in session_ids:
            if sid in self._timeouts:
                self.touch(sid)
            else:
                unknown.append(sid)
        return unknown

    def session_created(self, session_id: int, timeout_ms: int) -> None:
        self._timeouts[session_id] = timeout_ms
        self._deadlines[session_id] = time.monotonic() + timeout_ms / 1000

    def session_closed(self, session_id: int) -> None:
        self._timeouts.pop(session_id, None)
        self._deadlines.pop(session_id, None)
        self._closing.discard(session_id)

    # ---- the clock
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval_s)
            try:
                if self._quorum.is_leader:
                    self._lead()
                else:
                    self._was_leader = False
                    await self._pass_touches()
            except Exception as exc:  # loop boundary
                self.log.warning("session_tracker_error", error=repr(exc))

    def _lead(self) -> None:
        now = time.monotonic()
        stalled_s = now - self._last_lead_s - self._check_interval_s
        self._last_lead_s = now
        if self._was_leader and stalled_s > self._check_interval_s:
            # This leader did not run meanwhile (SIGSTOP, a VM or GC pause): the touches sent to it then are
            # still unread, so that time counts against no session. Without this a leader resumed after more
            # than a session timeout expired every session before learning it had been deposed, and the
            # next leader committed those expiries (found by the fault campaign: seed 1002, pause,pause).
            self._deadlines = {sid: deadline + stalled_s for sid, deadline in self._deadlines.items()}
        if not self._was_leader:
            # A new leader restarts every session clock (SessionTrackerImpl).
            self._was_leader = True
            self._timeouts = dict(self._sessions_of_tree())
            self._deadlines = {sid: now + t / 1000 for sid, t in self._timeouts.items()}
            self._closing.clear()
            self._touched.clear()
        for sid, deadline in list(self._deadlines.items()):
            if deadline <= now and sid not in self._closing:
                self._closing.add(sid)
                del self._deadlines[sid]
                asyncio.get_running_loop().create_task(self._expire(sid))

    async def _expire(self, session_id: int) -> None:
        self.log.info("session_expired", session_id=hex(session_id & (2**64 - 1)))
        txn = zk_pb2.Txn(
            session_id=session_id, close_session=zk_pb2.CloseSessionTxn(session_id=session_id, expired=True)
        )
        try:
            # Only through this leader: a deposed leader's expiry, retried through the next leader, would end
            # a session its clients kept alive through the majority (found by the fault campaign, tests/faults).
            await self._router.propose_as_leader(txn, self._quorum.settings.proposal_timeout_ms / 1000)
        except QuorumError as exc:
            self._closing.discard(session_id)
            if self._quorum.is_leader:
                self._deadlines[session_id] = time.monotonic()  # still leading: try again at the next check
            self.log.warning("session_expiry_not_committed", session_id=session_id, error=str(exc))

    async def _pass_touches(self) -> None:
        if not self._touched:
            return
        leader = self._quorum.leader_id
        address = self._quorum.address_of(leader)
        if not address or leader == self._quorum.node_id:
            return
        touched, self._touched = list(self._touched), set()
        ch = self._channels.get(address)
        if ch is None:
            ch = self._channels[address] = grpc_channels.aio_channel(address, self._quorum.settings.peer_tls)
        try:
            await zk_pb2_grpc.ZooKeeperStub(ch).TouchSessions(
                zk_pb2.TouchSessionsRequest(session_ids=touched), timeout=self._check_interval_s * 4
            )
        except grpc.aio.AioRpcError:
            self._touched.update(touched)  # the next round tries again
            # ... on a new connection: after a cut link heals, the old one may sit in TCP's retransmission
            # backoff for seconds (seen: rto 3.2 s) while the writes' connection works again, and sessions
            # served by this follower would expire meanwhile (found by the fault campaign, tests/faults).
            del self._channels[address]
            await ch.close(grace=None)
