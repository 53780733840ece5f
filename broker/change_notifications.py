"""Kafka's ZkNodeChangeNotificationListener: a broker follows a store of sequential change notifications.

A tool that changes something brokers cache (an entity's config, a resource's ACLs) writes the change and
then a persistent-sequential `<root>/<prefix><seq>` naming what changed. Every broker watches the
children of `<root>` (a one-shot watch, re-armed at each read), handles each notification newer than the
last one it handled, in sequence order, and purges notifications older than `changeExpirationMs` once
handled (Kafka's purgeObsoleteNotifications: 15 minutes). Notifications already there when the listener
is armed are skipped: the owner loads everything fresh at start.

Watch callbacks only signal; the work happens on the listener's one task, so notifications are handled one
at a time and in order. A failure (the quorum briefly unreachable) is logged and retried a second later.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from client.zk.exceptions import NoNodeError

if TYPE_CHECKING:  # the client's gRPC is loaded only where a session runs (a tool's --help loads none)
    from client.zk.aio import AsyncZkClient

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener.changeExpirationMs
RETRY_AFTER_FAILURE_S = 1.0


class ChangeNotificationListener:
    """Follows `root`'s `prefix<seq>` children; `on_notification(path)` handles one (awaited, in order)."""

    def __init__(
        self,
        zk: AsyncZkClient,
        root: str,
        prefix: str,
        on_notification: Callable[[str], Awaitable[None]],
        logger: Any,
        failure_event: str,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._zk = zk
        self.root = root
        self._prefix = prefix
        self._on_notification = on_notification
        self._log = logger
        self._failure_event = failure_event  # the log line's name, e.g. config_change_processing_failed
        self._wall_clock_ms = wall_clock_ms  # znode ctimes are the leader's wall clock
        self._last_seen = -1
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def arm(self) -> None:
        """Creates the store if needed, watches it and skips the notifications already there."""
        await self._zk.ensure_path(self.root)
        children = await self._children()
        self._last_seen = max((self._sequence(c) for c in children), default=-1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _sequence(self, child: str) -> int:
        return int(child[len(self._prefix) :])

    def _on_event(self, _event: Any) -> None:
        self._wakeup.set()

    async def _children(self) -> list[str]:
        try:
            children = await self._zk.get_children(self.root, watch=self._on_event)
        except NoNodeError:
            return []
        return sorted((c for c in children if c.startswith(self._prefix)), key=self._sequence)

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._handle_new()
            except Exception as exc:  # the quorum may be briefly unreachable: try again shortly
                self._log.warning(self._failure_event, error=str(exc))
                self._wakeup.set()
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)

    async def _handle_new(self) -> None:
        for child in await self._children():
            path = f"{self.root}/{child}"
            if self._sequence(child) > self._last_seen:
                await self._on_notification(path)
                self._last_seen = self._sequence(child)
            else:
                await self._purge_if_expired(path)

    async def _purge_if_expired(self, path: str) -> None:
        """purgeObsoleteNotifications, for a notification already handled."""
        stat = await self._zk.exists(path)
        if stat is not None and stat.ctime < self._wall_clock_ms() - CHANGE_EXPIRATION_MS:
            with contextlib.suppress(NoNodeError):  # another broker purged it first
                await self._zk.delete(path, version=stat.version)
