"""Start a coroutine in the caller, up to its first wait, as Python 3.12's eager tasks do (we run on 3.11).

A gRPC write (`call.write(message)`) hands the message to the socket in its
first step and then waits for gRPC to report the write complete. Written from
a sender task, the message waits for a turn of the event loop first, behind
whatever else the loop has queued: in a timestamp trace of sequential creates
a follower's acknowledgement left 63 µs after its fsync (the servicer that
received the append re-arming its read came first) and the leader's append
54 µs after its Ready began. `begin` runs that first step on the spot and
gives back the rest, for the sender to await.

The rest follows asyncio's protocol for a coroutine waiting on a future: the
future the coroutine yielded is handed to the awaiting task as if the
coroutine had been awaited directly, so cancellation reaches it the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def begin(coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """Run `coro` until it first waits; returns a coroutine that finishes it (await it once).

    An exception raised before the first wait propagates from here."""
    try:
        waiting_on = coro.send(None)
    except StopIteration as stop:
        return _finished(stop.value)
    return _rest(coro, waiting_on)


async def raising(exc: BaseException) -> None:
    """A coroutine that raises `exc` when awaited: what a caller of `begin` hands to the awaiter of the
    rest when the coroutine failed before its first wait, so that the failure surfaces in one place."""
    raise exc


class WriteInFlight:
    """At most one write in flight on a stream: `start` runs a write's first step in the caller
    (`begin`), the one task that drains the stream `finish`es it. The peer lanes, the follower's
    forward stream and the session outbox share it. A write that failed before its first wait
    raises in `finish`, where the task handles a write's failures."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest: Coroutine[Any, Any, Any] | None = None

    @property
    def idle(self) -> bool:
        return self._rest is None

    def start(self, write: Coroutine[Any, Any, Any]) -> None:
        try:
            self._rest = begin(write)
        except Exception as exc:  # the stream broke: `finish` raises it
            self._rest = raising(exc)

    async def finish(self) -> None:
        """Wait for the write in flight, if any, to complete; raises what it raised."""
        rest = self._rest
        if rest is None:
            return
        try:
            await rest
        finally:
            self._rest = None

    def close(self) -> None:
        """Forget the write in flight (its stream is gone)."""
        if self._rest is not None:
            self._rest.close()
            self._rest = None


async def _finished(value: T) -> T:
    return value


async def _rest(coro: Coroutine[Any, Any, T], waiting_on: Any) -> T:
    while True:
        try:
            if waiting_on is None:
                await asyncio.sleep(0)  # a bare yield asks for one loop turn, as it would in a task
            else:
                await _Settled(waiting_on)
        except BaseException as exc:  # cancelled while waiting: the coroutine decides what that means
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            continue
        try:
            waiting_on = coro.send(None)  # the coroutine reads the future's outcome itself
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class _Settled:
    """Waits until a future is done without taking its outcome (the coroutine that yielded it does)."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, None]:
        if not self.future.done():
            self.future._asyncio_future_blocking = True  # what Future.__await__ sets before it yields
            yield self.future
