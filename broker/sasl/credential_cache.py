"""The broker's SCRAM credentials, as Kafka's CredentialCache: `/config/users/<user>` kept in memory.

Filled at start-up from every child of `/config/users` and kept current by the `/config/changes`
notifications `zkraft configs` writes (broker/config_changes.py calls `update`). A user the cache does not
hold is read from the quorum at its login (not kept: only start-up and notifications fill the cache, so a
read racing a deletion's notification cannot put the deleted user back), so that a user created a moment
ago logs in before its notification has reached this broker; a deleted user leaves the cache with its
notification, and is refused from then on (its connections at their next re-authentication).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client.kafka.scram import (
    ScramCredential,
    ScramCredentialError,
    desanitize_user,
    sanitize_user,
    user_credentials,
)
from client.kafka.znodes import CONFIG_TYPE_USER, ZnodeDataError, config_entity_path, decode_config
from client.zk.exceptions import NoNodeError

USERS_PATH = f"/config/{CONFIG_TYPE_USER}"


class ScramCredentialCache:
    def __init__(self, zk: Any, logger: Any) -> None:
        self._zk = zk
        self._log = logger
        self._users: dict[str, dict[str, ScramCredential]] = {}
        # Called with a user whose last credential a notification removed (the gRPC port ends its sessions).
        self.on_user_deleted: list[Callable[[str], None]] = []

    async def start(self) -> None:
        try:
            users = await self._zk.get_children(USERS_PATH)
        except NoNodeError:
            users = []
        for entity_name in users:
            user = desanitize_user(entity_name)
            credentials = await self._load(user)
            if credentials:
                self._users[user] = credentials
        self._log.info("scram_credentials_loaded", users=len(self._users))

    async def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        credentials = self._users.get(user)
        if credentials is None:
            credentials = await self._load(user)
        return credentials.get(mechanism)

    def update(self, entity_name: str, config: dict[str, str]) -> None:
        """A `/config/changes` notification for `users/<entity_name>`: its configs as they now are."""
        user = desanitize_user(entity_name)
        credentials = self._decode(user, config)
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)
        self._log.info("scram_credentials_changed", user=user, mechanisms=sorted(credentials))
        if not credentials:
            for deleted in self.on_user_deleted:
                deleted(user)

    async def _load(self, user: str) -> dict[str, ScramCredential]:
        path = config_entity_path(CONFIG_TYPE_USER, sanitize_user(user))
        try:
            data, _ = await self._zk.get(path)
            config = decode_config(data, path)
        except NoNodeError:
            return {}
        except ZnodeDataError as exc:
            self._log.warning("scram_credentials_unreadable", user=user, error=str(exc))
            return {}
        return self._decode(user, config)

    def _decode(self, user: str, config: dict[str, str]) -> dict[str, ScramCredential]:
        try:
            return user_credentials(config)
        except ScramCredentialError as exc:
            self._log.warning("scram_credentials_unreadable", user=user, error=str(exc))
            return {}
