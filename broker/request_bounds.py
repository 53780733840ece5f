"""Bytes of requests in flight: Kafka's `queued.max.request.bytes`, and the memory handed back after a burst.

Kafka's network threads stop reading from sockets while the request queue
holds `queued.max.request.bytes` (KIP-72, `SocketServer`'s memory pool); a
request larger than `socket.request.max.bytes` is refused before it is read.
Here gRPC reads a message whole (up to the server's max receive message
length, set to `socket.request.max.bytes`), and the broker's handlers take
it undecoded: a request waits, in arrival order, until its bytes fit in the
budget, and only then is it parsed and worked on. It waits at most until its
gRPC deadline (or `request.timeout.ms` without one) and then fails with
RESOURCE_EXHAUSTED, naming the limit: backpressure instead of allocation.

When a burst ends (at least `BURST_BYTES_MIN` of requests arrived, then a
period of `QUIET_PERIOD_S` in which less than `QUIET_BYTES_PER_PERIOD` did:
followers' and consumers' long polls never stop, so "nothing in flight" would
never come), the heap's free pages go back to the kernel
(`runtime.heap_tuning.release_freed_memory`). Not sooner: the broker keeps
freed buffers on purpose while it serves (`retain_freed_buffers`, the fetch
path's speed), and a trim walks the whole heap. glibc's malloc_trim leaves
the free top of a thread's arena in place (only the main arena's is cut), so
what gRPC's own threads held may stay resident (measured: 61-140 MB after a
300 MB burst, against 425 MB without the trim).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc

from runtime.heap_tuning import release_freed_memory

# A burst worth handing back: fewer request bytes leave little to return.
BURST_BYTES_MIN = 4 * 1024 * 1024
# A period with less than this arriving ends a burst (long polls are a few hundred bytes each).
QUIET_PERIOD_S = 1.0
QUIET_BYTES_PER_PERIOD = 1024 * 1024


# The current request's "leave the budget" callback (each gRPC handler runs in its own task and context).
_RELEASE_CURRENT: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "release_request_bytes", default=None
)


def release_request_bytes() -> None:
    """Called by a handler before it waits (a delayed produce or fetch, a topic's leaders): its bytes leave the
    budget. Kafka frees a request's buffer once it has been read, before purgatory; so must we, or acks=all
    produces waiting for followers would keep out the very follower fetches they wait for."""
    release = _RELEASE_CURRENT.get()
    if release is not None:
        release()


class RequestBytesExhausted(Exception):
    """A request waited for room in `queued.max.request.bytes` until its deadline."""


class BytesInFlight:
    """A FIFO byte budget over the requests being worked on; `limit_bytes` -1 means no limit (Kafka's -1).

    One event loop owns it (the broker's); no locks. `acquire` is O(1) when
    there is room and no one waits; a request never overtakes an earlier one,
    so a large request is not starved by a stream of small ones.
    """

    def __init__(
        self,
        limit_bytes: int,
        logger: Any,
        release_memory: Callable[[], bool] = release_freed_memory,
        quiet_period_s: float = QUIET_PERIOD_S,
        burst_bytes_min: int = BURST_BYTES_MIN,
    ) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self.bursts = BurstMemoryRelease(logger, release_memory, quiet_period_s, burst_bytes_min)

    def _fits(self, size_bytes: int) -> bool:
        return self.limit_bytes < 0 or self.used_bytes == 0 or self.used_bytes + size_bytes <= self.limit_bytes

    async def acquire(self, size_bytes: int, timeout_s: float) -> None:
        """Take `size_bytes` of the budget, waiting in line up to `timeout_s`; RequestBytesExhausted after."""
        self.bursts.arrived(size_bytes)
        if not self._waiters and self._fits(size_bytes):
            self._take(size_bytes)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size_bytes, waiter)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), max(timeout_s, 0.0))
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return  # granted just as the wait ended: the bytes are ours
            self._remove(entry)
            raise RequestBytesExhausted(
                f"queued.max.request.bytes ({self.limit_bytes}) are in use by other requests: "
                f"this request of {size_bytes} bytes waited {timeout_s:.1f} s for room"
            ) from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(size_bytes)
            else:
                self._remove(entry)
            raise

    def _remove(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        try:
            self._waiters.remove(entry)
        except ValueError:
            pass
        entry[1].cancel()
        self._grant_waiters()  # the head may have been what blocked the others

    def _take(self, size_bytes: int) -> None:
        self.used_bytes += size_bytes
        self.bursts.in_flight(self.used_bytes)

    def release(self, size_bytes: int) -> None:
        self.used_bytes -= size_bytes
        self._grant_waiters()

    def _grant_waiters(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            size_bytes, waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self._take(size_bytes)
            waiter.set_result(None)


class BurstMemoryRelease:
    """Hands the heap's free pages back once a burst of request bytes is over (see the module's docstring).

    O(1) per request: a counter, and a timer armed by the first request after a quiet spell; while requests
    keep coming the timer re-arms once per `quiet_period_s`.
    """

    def __init__(
        self, logger: Any, release_memory: Callable[[], bool], quiet_period_s: float, burst_bytes_min: int
    ) -> None:
        self._log = logger
        self._release_memory = release_memory
        self._quiet_period_s = quiet_period_s
        self._burst_bytes_min = burst_bytes_min
        self._quiet_bytes = min(QUIET_BYTES_PER_PERIOD, burst_bytes_min)
        self._period_bytes = 0  # arrived in the current period
        self._burst_bytes = 0  # arrived since the last quiet period
        self._peak_in_flight_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self.releases = 0  # how many times memory was handed back (tests and logs)

    def arrived(self, size_bytes: int) -> None:
        self._period_bytes += size_bytes
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._quiet_period_s, self._period_ended)

    def in_flight(self, used_bytes: int) -> None:
        if used_bytes > self._peak_in_flight_bytes:
            self._peak_in_flight_bytes = used_bytes

    def _period_ended(self) -> None:
        self._timer = None
        arrived, self._period_bytes = self._period_bytes, 0
        self._burst_bytes += arrived
        if arrived >= self._quiet_bytes:
            self._timer = asyncio.get_running_loop().call_later(self._quiet_period_s, self._period_ended)
            return  # still busy: look again after the next period
        burst, peak = self._burst_bytes, self._peak_in_flight_bytes
        self._burst_bytes = self._peak_in_flight_bytes = 0
        if burst < self._burst_bytes_min:
            return
        released = self._release_memory()
        self.releases += 1
        self._log.info("request_burst_memory_released", burst_bytes=burst, peak_in_flight_bytes=peak, released=released)


@contextlib.contextmanager
def holding_request_bytes(budget: BytesInFlight, size_bytes: int) -> Iterator[None]:
    """Runs a request already admitted to `budget` with `size_bytes`: they are released when it ends, or before if
    the handler calls `release_request_bytes` (the Kafka listener's requests, as `bounded_handler`'s)."""
    released = False

    def release_once() -> None:
        nonlocal released
        if not released:
            released = True
            budget.release(size_bytes)

    token = _RELEASE_CURRENT.set(release_once)
    try:
        yield
    finally:
        release_once()
        _RELEASE_CURRENT.reset(token)


Handler = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]


def bounded_handler(
    handler: Handler,
    parse: Callable[[bytes], Any],
    type_name: str,
    budget: BytesInFlight,
    default_timeout_s: float,
    logger: Any,
) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[Any]]:
    """`handler` behind the budget: the raw request waits for room, then is parsed (a malformed one is refused
    with INVALID_ARGUMENT and one line) and handled; its bytes are returned to the budget when it is answered.
    A handler's unexpected exception is logged with its traceback and answered INTERNAL in one line
    (Kafka's UNKNOWN_SERVER_ERROR)."""

    async def bounded(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        size_bytes = len(raw)
        remaining_s = context.time_remaining()
        timeout_s = default_timeout_s if remaining_s is None else min(remaining_s, default_timeout_s)
        try:
            await budget.acquire(size_bytes, timeout_s)
        except RequestBytesExhausted as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        with holding_request_bytes(budget, size_bytes):
            try:
                request = parse(raw)
            except Exception as exc:  # protobuf's DecodeError and friends: the client sent bytes we cannot read
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {type_name}: {exc}")
            try:
                return await handler(request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # the loop boundary of one request: log it, answer it, serve the next
                logger.exception("request_failed", request=type_name, error=str(exc))
                await context.abort(grpc.StatusCode.INTERNAL, f"UNKNOWN_SERVER_ERROR: {type(exc).__name__}: {exc}")

    return bounded
