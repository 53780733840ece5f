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
every config fresh when it first needs it. The store is followed as Kafka's
ZkNodeChangeNotificationListener follows it (broker/change_notifications.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from broker.change_notifications import ChangeNotificationListener
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
        self._notifications = ChangeNotificationListener(
            zk, CONFIG_CHANGES_PATH, CONFIG_CHANGE_PREFIX, self._process, logger, "config_change_processing_failed"
        )

    async def start(self) -> None:
        await self._notifications.arm()
        self._notifications.start()

    async def stop(self) -> None:
        await self._notifications.stop()

    async def _process(self, path: str) -> None:
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
