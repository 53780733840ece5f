"""Retrying a call on connection trouble, as kazoo's `KazooRetry`.

    zk.retry(zk.get, "/brokers/ids/1")          # sync
    await zk.retry(zk.get, "/brokers/ids/1")    # AsyncZkClient

Retried: errors whose class is `retriable` (ConnectionLoss,
OperationTimeoutError, RequestTimeoutError, ThrottledError), and
SessionExpiredError when `ignore_expire=True`. Anything else is raised at
once. `max_tries` bounds the retries (-1: unbounded), `deadline` (seconds)
bounds the whole call; when either runs out, RetryFailedError is raised with
the last error as its cause. The pause starts at `delay`, is multiplied by
`backoff` after every retry up to `max_delay`, and each pause is jittered by
a factor in [1 - max_jitter, 1 + max_jitter].

Unlike kazoo, `ignore_expire` defaults to False: this client does not make a
new session by itself after expiry (state LOST until `start()`), so retrying
a SessionExpiredError would only wait for nothing.

A write retried after ConnectionLoss may have been applied the first time
(the connection broke before the reply): make retried writes idempotent
(conditional on a version, or tolerant of NodeExistsError / NoNodeError).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from client.zk.exceptions import RetryFailedError, SessionExpiredError, ZkException

T = TypeVar("T")


class _RetryPolicy:
    def __init__(
        self,
        max_tries: int = 3,
        delay: float = 0.1,
        backoff: float = 2.0,
        max_jitter: float = 0.4,
        max_delay: float = 60.0,
        ignore_expire: bool = False,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if max_tries < -1:
            raise ValueError(f"max_tries must be >= -1, got {max_tries}")
        if delay < 0 or max_delay < 0 or backoff < 1:
            raise ValueError("delay and max_delay must be >= 0 and backoff >= 1")
        if not 0 <= max_jitter < 1:
            raise ValueError(f"max_jitter must be in [0, 1), got {max_jitter}")
        self.max_tries = max_tries
        self.delay = delay
        self.backoff = backoff
        self.max_jitter = max_jitter
        self.max_delay = max_delay
        self.ignore_expire = ignore_expire
        self.deadline = deadline
        self._clock = clock
        self._rng = rng or random.Random()
        self._attempts = 0
        self._cur_delay = delay
        self._stop_at: float | None = None

    def _settings(self) -> dict[str, Any]:
        return dict(
            max_tries=self.max_tries,
            delay=self.delay,
            backoff=self.backoff,
            max_jitter=self.max_jitter,
            max_delay=self.max_delay,
            ignore_expire=self.ignore_expire,
            deadline=self.deadline,
            clock=self._clock,
            rng=self._rng,
        )

    def reset(self) -> None:
        self._attempts = 0
        self._cur_delay = self.delay
        self._stop_at = None if self.deadline is None else self._clock() + self.deadline

    @property
    def attempts(self) -> int:
        """Retries made so far by the current call."""
        return self._attempts

    def _should_retry(self, exc: Exception) -> bool:
        if isinstance(exc, SessionExpiredError):
            return self.ignore_expire
        return isinstance(exc, ZkException) and exc.retriable

    def _next_pause(self, exc: Exception) -> float:
        """The pause before the next try; RetryFailedError (from `exc`) when no try is left."""
        if self.max_tries != -1 and self._attempts >= self.max_tries:
            raise RetryFailedError(f"too many retry attempts ({self._attempts + 1} calls); last error: {exc}") from exc
        jitter = self._rng.uniform(1.0 - self.max_jitter, 1.0 + self.max_jitter)
        pause = min(self._cur_delay * jitter, self.max_delay)
        if self._stop_at is not None and self._clock() + pause >= self._stop_at:
            raise RetryFailedError(f"exceeded the retry deadline of {self.deadline:g} s; last error: {exc}") from exc
        self._attempts += 1
        self._cur_delay = min(self._cur_delay * self.backoff, self.max_delay)
        return pause


class ZkRetry(_RetryPolicy):
    """Blocking retry: `ZkRetry(max_tries=5)(zk.get, "/p")`."""

    def __init__(self, *args: Any, sleep_func: Callable[[float], object] = time.sleep, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sleep_func = sleep_func

    def copy(self) -> ZkRetry:
        """A fresh retry with the same settings (one per call, so concurrent calls do not share attempts)."""
        return ZkRetry(sleep_func=self.sleep_func, **self._settings())

    def __call__(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.reset()
        while True:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if not self._should_retry(exc):
                    raise
                self.sleep_func(self._next_pause(exc))


class AsyncZkRetry(_RetryPolicy):
    """Retry of coroutine functions: `await AsyncZkRetry(max_tries=5)(zk.get, "/p")`."""

    def __init__(
        self, *args: Any, sleep_func: Callable[[float], Awaitable[object]] = asyncio.sleep, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.sleep_func = sleep_func

    def copy(self) -> AsyncZkRetry:
        return AsyncZkRetry(sleep_func=self.sleep_func, **self._settings())

    async def __call__(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        self.reset()
        while True:
            try:
                return await func(*args, **kwargs)
            except Exception as exc:
                if not self._should_retry(exc):
                    raise
                await self.sleep_func(self._next_pause(exc))
