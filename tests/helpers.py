"""Shared test helpers. Import as `from tests.helpers import wait_until`."""

from __future__ import annotations

import time
from collections.abc import Callable


def poll_for(predicate: Callable[[], object], timeout_s: float, interval_s: float = 0.02) -> object | None:
    """Poll `predicate` until it returns a truthy value and return that value; None once `timeout_s` passes.

    For callers to whom a deadline passing is an outcome to report (a fault campaign's convergence),
    not a failure. The predicate is always called at least once, and once more at the deadline.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if interval_s <= 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s}")
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            return None
        time.sleep(min(interval_s, remaining_s))


def wait_until(
    predicate: Callable[[], object],
    timeout_s: float,
    interval_s: float = 0.02,
    message: str = "condition not met",
) -> object:
    """Poll `predicate` until it returns a truthy value and return that value.

    Raises AssertionError naming `message` and the timeout when the deadline
    passes. Use this instead of sleeping: a sleep is a guess at how long
    something takes, a deadline is an upper bound on how long we wait for it.
    The predicate is always called at least once, and once more at the deadline.
    """
    result = poll_for(predicate, timeout_s, interval_s)
    if not result:
        raise AssertionError(f"{message} (waited {timeout_s:g} s)")
    return result


def resident_bytes(pid: int) -> int:
    """A live process's resident memory (VmRSS of /proc/<pid>/status), in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")
