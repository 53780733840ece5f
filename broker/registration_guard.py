"""A broker keeps its own `/brokers/ids/<id>` for as long as its ZooKeeper session lives.

A broker registers once per session (Kafka's `KafkaZkClient.registerBroker`,
from `KafkaServer.startup` and again after a new session): an ephemeral
znode that goes when the session goes. Anyone with write access can still
delete it while the session lives (`zkraft zk deleteall /brokers/ids`, a
mistaken script); the controller then takes a live broker for dead, and
nothing would ever register it again. So the broker watches its registration
(a data watch, re-armed by every read) and when it is deleted under a live
session creates it again: missing parents first (Kafka's
`makeSurePersistentPathExists`), the same bytes it registered, ephemeral of
the same session. The new znode's czxid is the broker's new epoch, so the
controller sees the broker come back (a new or bounced broker, research
kafka.md §2.4) and runs its start-up: its replicas come online and its
partitions get leaders again.

A registration held by another session -- another process started with this
broker id -- is not fought over: the guard logs it and stands down until the
broker's next session registers again (`guard()` is called after every
registration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from client.kafka.znodes import BROKER_IDS_PATH, broker_path
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import NodeExistsError, NoNodeError, SessionExpiredError, ZkException
from client.zk.states import ZkState

# A restore races whatever deleted the znode (a recursive delete may remove /brokers/ids again between our
# ensure_path and create) and the connection may be down for a moment: try again, this often, this far apart.
RESTORE_ATTEMPTS_MAX = 20
RESTORE_RETRY_BACKOFF_S = 0.25


class RegistrationGuard:
    """Re-creates this broker's registration when it is deleted while the session that made it lives."""

    def __init__(self, zk: AsyncZkClient, broker_id: int, on_restored: Callable[[int], None], logger: Any) -> None:
        self._zk = zk
        self._path = broker_path(broker_id)
        self._on_restored = on_restored  # called with the new broker epoch (the new znode's czxid)
        self._log = logger
        self._session_id: int | None = None  # the session whose registration is guarded; None: standing down
        self._data = b""
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def guard(self) -> int:
        """Guard the registration the current session has just made (call after each registration); its czxid
        (the broker epoch). NoNodeError: the current session has none (the session that made it was lost)."""
        data, stat = await self._zk.get(self._path, watch=self._on_event)
        client_id = self._zk.client_id
        if client_id is None or stat.ephemeralOwner != client_id[0]:
            raise NoNodeError(f"{self._path} is not this session's registration", self._path)
        self._data = data
        self._session_id = stat.ephemeralOwner
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="broker-registration-guard")
        return stat.czxid

    async def stop(self) -> None:
        """Stop guarding: before the broker closes its session, whose end deletes the registration."""
        self._session_id = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _on_event(self, _event: Any) -> None:
        self._wakeup.set()  # watch callbacks only signal; the work happens on the guard's task

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._check()
            except Exception as exc:  # loop boundary: the next event tries again
                self._log.warning("broker_registration_check_failed", path=self._path, error=str(exc))

    def _session_is_guarded(self) -> bool:
        client_id = self._zk.client_id
        return (
            self._session_id is not None
            and client_id is not None
            and client_id[0] == self._session_id
            and self._zk.state is not ZkState.LOST
        )

    async def _check(self) -> None:
        for attempt in range(1, RESTORE_ATTEMPTS_MAX + 1):
            if not self._session_is_guarded():
                return  # a lost session: the broker registers again with its next one and guards that
            try:
                await self._check_once()
                return
            except SessionExpiredError:
                return
            except ZkException as exc:
                self._log.info("broker_registration_restore_retry", path=self._path, attempt=attempt, error=str(exc))
                await asyncio.sleep(RESTORE_RETRY_BACKOFF_S)
        self._log.error("broker_registration_restore_gave_up", path=self._path, attempts=RESTORE_ATTEMPTS_MAX)

    async def _check_once(self) -> None:
        """Re-arm the watch; restore the registration if it is gone, stand down if another session holds it."""
        try:
            _, stat = await self._zk.get(self._path, watch=self._on_event)
        except NoNodeError:
            await self._restore()
            return
        if stat.ephemeralOwner != self._session_id:
            self._stand_down(stat.ephemeralOwner)

    async def _restore(self) -> None:
        await self._zk.ensure_path(BROKER_IDS_PATH)
        try:
            await self._zk.create(self._path, self._data, ephemeral=True)
        except NodeExistsError:  # made meanwhile: by this session (nothing to do) or by another one
            _, stat = await self._zk.get(self._path, watch=self._on_event)
            if stat.ephemeralOwner != self._session_id:
                self._stand_down(stat.ephemeralOwner)
            return
        _, stat = await self._zk.get(self._path, watch=self._on_event)
        self._log.warning(
            "broker_registration_restored",
            path=self._path,
            broker_epoch=stat.czxid,
            reason="the registration was deleted while the broker's session lived",
        )
        self._on_restored(stat.czxid)

    def _stand_down(self, owner: int) -> None:
        self._log.error(
            "broker_registration_held_by_another_session",
            path=self._path,
            owner_session=f"0x{owner:x}",
            own_session=f"0x{self._session_id or 0:x}",
            hint="another broker process was started with this broker.id; this one no longer restores it",
        )
        self._session_id = None
