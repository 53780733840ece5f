"""Periodic duties of a broker (ISR expiry, HW checkpoints, retention, cleaning): one loop shape for all."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def every(interval_s: float, action: Callable[[], Any], log: Any) -> None:
    """Runs `action` (plain or coroutine function) every `interval_s` until cancelled.

    A failure is logged with its traceback and the duty goes on: one bad round
    (a znode write refused, a full disk for a moment) must not stop it for good.
    """
    while True:
        await asyncio.sleep(interval_s)
        try:
            result = action()
            if asyncio.iscoroutine(result):
                await result
        except Exception as exc:
            log.exception("periodic_task_failed", task=getattr(action, "__name__", str(action)), error=str(exc))
