"""The asyncio event loop zkraft runs its own loops on: uvloop's where it is installed.

Every quorum node, broker and blocking `ZkClient` spends much of a request in
the event loop itself: waking on gRPC's completion queue, running callbacks,
creating futures and tasks. uvloop (libuv, MagicStack; a required dependency
on platforms it supports) does that work in C. Measured on this project's
2-core machine with alternating runs of a 3-node quorum: CPU per sequential
create fell from 1.01-1.10 to 0.91-0.92 ms on the leader and from 0.60 to
0.52 ms on each follower, and the create's p50 from 1.76-1.86 to 1.56-1.60 ms.

`ZKRAFT_EVENT_LOOP=asyncio` selects the standard library's loop (to compare,
or to rule uvloop out while debugging); `uvloop` is the default. Code that
runs on a loop the user made (`AsyncZkClient`) keeps the user's loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EVENT_LOOP_ENV = "ZKRAFT_EVENT_LOOP"
EVENT_LOOP_CHOICES = ("uvloop", "asyncio")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a new event loop for this process, as ZKRAFT_EVENT_LOOP and the installed packages allow."""
    choice = os.environ.get(EVENT_LOOP_ENV, "uvloop").strip().lower() or "uvloop"
    if choice not in EVENT_LOOP_CHOICES:
        raise ValueError(f"{EVENT_LOOP_ENV} must be one of {', '.join(EVENT_LOOP_CHOICES)}, not {choice!r}")
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:  # a platform uvloop does not support (Windows): the standard loop works, slower
            return asyncio.new_event_loop
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    return loop_factory()()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    try:
        factory = loop_factory()
    except ValueError:
        main.close()  # never awaited: say nothing about it, the error says what is wrong
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
