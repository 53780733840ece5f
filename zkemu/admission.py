"""What the session streams of one node may have in flight: ZooKeeper's globalOutstandingLimit, in
requests and in bytes, for the node and for each session; and the heap handed back after a burst.

A request is in flight from the moment its stream message is read until its
reply is handed to gRPC (SessionOutbox), so a client that does not read its
replies keeps them counted. Like ZooKeeper's connections
(ZooKeeperServer.shouldThrottle, NIOServerCnxn.incrOutstandingAndCheckThrottle),
a session stream stops reading while the node or the session is over a bound
*and* the session has requests of its own in flight: those finish without
help, so a paused stream always resumes, and a session with nothing in flight
is never starved by the others. The bounds are checked once per stream
message, so a node may go over by one message's requests (at most
jute.maxbuffer bytes).

Every count is O(1) per request; nothing here allocates per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from quorum.facade import NodeSettings
from runtime.heap_tuning import release_freed_memory

# Bytes read since the heap was last trimmed before a quiet period trims it again: a trim walks
# the whole heap (milliseconds), worth it only after a burst, not after a few small requests.
RELEASE_AFTER_BYTES = 8 << 20
# A node over its bounds under sustained load pauses streams many times a second: one log line per interval.
THROTTLE_LOG_INTERVAL_S = 10.0


class Admission:
    """The node's counts of requests and bytes in flight, and the session streams paused on them."""

    def __init__(
        self,
        settings: NodeSettings,
        release_memory: Callable[[], bool] = release_freed_memory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.requests_max = settings.global_outstanding_limit
        self.bytes_max = settings.global_outstanding_bytes_max
        self.session_requests_max = settings.session_outstanding_requests_max
        self.session_bytes_max = settings.session_outstanding_bytes_max
        self.quiet_s = settings.memory_release_quiet_ms / 1000
        self.requests = 0
        self.bytes = 0
        self._paused: set[asyncio.Event] = set()  # streams waiting for the node to go below its bounds
        self._bytes_since_release = 0
        self._idle_since_s = clock()
        self._release_memory = release_memory
        self._clock = clock
        self._releaser: asyncio.Task[None] | None = None
        self._throttle_logged_s = -THROTTLE_LOG_INTERVAL_S
        self.log = structlog.get_logger("zk").bind(node=settings.node_id)

    @property
    def over(self) -> bool:
        return self.requests > self.requests_max or self.bytes > self.bytes_max

    def take(self, count: int, size_bytes: int) -> None:
        self.requests += count
        self.bytes += size_bytes
        self._bytes_since_release += size_bytes

    def give_back(self, count: int, size_bytes: int) -> None:
        self.requests -= count
        self.bytes -= size_bytes
        if self.requests == 0:
            self._idle_since_s = self._clock()
        if self._paused and not self.over:
            for event in self._paused:
                event.set()
            self._paused.clear()

    def wait_below(self, event: asyncio.Event) -> None:
        """`event` is set once the node is below its bounds again."""
        self._paused.add(event)
        now_s = self._clock()
        if now_s - self._throttle_logged_s >= THROTTLE_LOG_INTERVAL_S:
            self._throttle_logged_s = now_s
            self.log.info(
                "requests_throttled",
                requests=self.requests,
                requests_max=self.requests_max,
                size_bytes=self.bytes,
                bytes_max=self.bytes_max,
                paused_streams=len(self._paused),
            )

    def forget(self, event: asyncio.Event) -> None:
        self._paused.discard(event)

    # ---- the heap after a burst
    def start(self) -> None:
        self._releaser = asyncio.get_running_loop().create_task(self._release_when_quiet(), name="zk-memory")

    async def stop(self) -> None:
        if self._releaser is not None:
            self._releaser.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._releaser

    async def _release_when_quiet(self) -> None:
        while True:
            await asyncio.sleep(self.quiet_s)
            try:
                self.release_if_quiet()
            except Exception as exc:  # loop boundary: a failed trim costs memory, not the node
                self.log.warning("memory_release_failed", error=repr(exc))

    def release_if_quiet(self) -> bool:
        """Trim the heap if a burst was read and nothing has been in flight for the quiet period."""
        if self._bytes_since_release < RELEASE_AFTER_BYTES or self.requests:
            return False
        if self._clock() - self._idle_since_s < self.quiet_s:
            return False
        burst_bytes, self._bytes_since_release = self._bytes_since_release, 0
        released = self._release_memory()
        self.log.info("memory_released", burst_bytes=burst_bytes, released=released)
        return True
