"""Dynamic configs: brokers follow `/config/changes` (Kafka's `ZkConfigManager` / `ConfigChangeListener`).

A tool that changes an entity's config writes `/config/<type>/<name>` and then
a persistent-sequential `/config/changes/config_change_<seq>` naming the
entity. Every broker watches the children of `/config/changes` (a one-shot
watch, re-armed after each event), processes each notification newer than
the last one it handled, in sequence order, re-reads the entity's config and
hands it to the owner (topics: the replica manager, which updates the logs'
configs; brokers, when a handler is given: the replication throttle; users, when a
handler is given: the SCRAM credential cache of a broker with SASL listeners).
Notifications that exist at start-up are skipped: the broker reads
every config fresh when it first needs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from client.kafka.znodes import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONFIG_TYPE_BROKER,
    CONFIG_TYPE_TOPIC,
    CONFIG_TYPE_USER,
    ZnodeDataError,
    config_entity_path,
    decode_config,
    decode_config_change,
)
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import NoNodeError

TopicConfigHandler = Callable[[str, dict[str, str]], Awaitable[None] | None]
BrokerConfigHandler = Callable[[str, dict[str, str]], Awaitable[None] | None]
UserConfigHandler = Callable[[str, dict[str, str]], Awaitable[None] | None]


def _sequence(child: str) -> int:
    return int(child[len(CONFIG_CHANGE_PREFIX) :])


class ConfigChangeListener:
    def __init__(
        self,
        zk: AsyncZkClient,
        on_topic_config: TopicConfigHandler,
        logger: Any,
        *,
        on_broker_config: BrokerConfigHandler | None = None,
        on_user_config: UserConfigHandler | None = None,
    ) -> None:
        self._zk = zk
        self._on_topic_config = on_topic_config
        self._on_broker_config = on_broker_config  # entity name ("1" or "<default>") and its overrides
        self._on_user_config = on_user_config  # user name and its configs (SCRAM credentials)
        self._log = logger
        self._last_seen = -1
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._zk.ensure_path(CONFIG_CHANGES_PATH)
        children = await self._children(watch=True)
        self._last_seen = max((_sequence(c) for c in children), default=-1)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _on_event(self, _event: Any) -> None:
        self._wakeup.set()  # watch callbacks only signal; the work happens on the listener task

    async def _children(self, watch: bool) -> list[str]:
        try:
            children = await self._zk.get_children(CONFIG_CHANGES_PATH, watch=self._on_event if watch else None)
        except NoNodeError:
            return []
        return sorted((c for c in children if c.startswith(CONFIG_CHANGE_PREFIX)), key=_sequence)

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                for child in await self._children(watch=True):
                    if _sequence(child) > self._last_seen:
                        await self._process(child)
                        self._last_seen = _sequence(child)
            except Exception as exc:  # the quorum may be briefly unreachable: try again on the next event
                self._log.warning("config_change_processing_failed", error=str(exc))
                self._wakeup.set()
                await asyncio.sleep(1.0)

    async def _process(self, child: str) -> None:
        path = f"{CONFIG_CHANGES_PATH}/{child}"
        try:
            data, _ = await self._zk.get(path)
            change = decode_config_change(data, path)
        except (NoNodeError, ZnodeDataError) as exc:
            self._log.warning("config_change_unreadable", path=path, error=str(exc))
            return
        if change.entity_type == CONFIG_TYPE_TOPIC:
            handler = self._on_topic_config
        elif change.entity_type == CONFIG_TYPE_BROKER and self._on_broker_config is not None:
            handler = self._on_broker_config
        elif change.entity_type == CONFIG_TYPE_USER and self._on_user_config is not None:
            handler = self._on_user_config
        else:
            self._log.info("config_change_ignored", entity=change.entity_path)
            return
        try:
            data, _ = await self._zk.get(config_entity_path(change.entity_type, change.entity_name))
            overrides = decode_config(data)
        except NoNodeError:
            overrides = {}
        if change.entity_type == CONFIG_TYPE_TOPIC:
            self._log.info("topic_config_changed", topic=change.entity_name, config=overrides)
        elif change.entity_type == CONFIG_TYPE_USER:  # credentials stay out of the log
            self._log.info("user_config_changed", user=change.entity_name, keys=sorted(overrides))
        else:
            self._log.info("broker_config_changed", broker=change.entity_name, config=overrides)
        result = handler(change.entity_name, overrides)
        if asyncio.iscoroutine(result):
            await result
