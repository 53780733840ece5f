"""ACLs in ZooKeeper as Kafka 2.8 keeps them (ZkAclStore, ZkAclChangeStore, AclAuthorizer.updateResourceAcls).

Writers (a broker answering CreateAcls/DeleteAcls, `zkraft acls --authorizer-properties zookeeper.connect=...`)
change one resource's znode by a conditional write (its version read just before; a concurrent writer makes
it retry), then add a change notification naming the resource. Every broker's `AclChangeListener` follows the
notifications and re-reads the named resource, so an ACL added through one broker takes effect on all.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from broker.change_notifications import ChangeNotificationListener
from client.kafka.acls import (
    CHANGE_PREFIX,
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    STORED_PATTERN_TYPES,
    STORED_RESOURCE_TYPES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    PatternType,
    ResourcePattern,
    acl_znode_path,
    changes_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    store_path,
)
from client.zk.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

if TYPE_CHECKING:  # the client's gRPC is loaded only where a session runs (a tool's --help loads none)
    from client.zk.aio import AsyncZkClient

# Conditional writes lost to concurrent writers before giving up (Kafka retries without a bound; we name one).
UPDATE_ATTEMPTS_MAX = 50
_NOTIFICATION_STORES = ((PatternType.LITERAL, LITERAL_CHANGES_PATH), (PatternType.PREFIXED, EXTENDED_CHANGES_PATH))

Entries = frozenset[AccessControlEntry]


class AclStoreError(Exception):
    """A write that could not be made (the message says which resource and why)."""


async def read_resource_acls(zk: AsyncZkClient, pattern: ResourcePattern) -> tuple[Entries, int | None]:
    """(entries, znode version; None when the znode does not exist). An unreadable znode holds no ACL for the
    authorizer (logged by the caller); writers refuse to overwrite it."""
    path = acl_znode_path(pattern)
    try:
        data, stat = await zk.get(path)
    except NoNodeError:
        return frozenset(), None
    return decode_acls(data, path), stat.version


async def load_all_acls(zk: AsyncZkClient, on_unreadable: Callable[[str, str], None]) -> dict[ResourcePattern, Entries]:
    """AclAuthorizer.loadCache: every resource of both stores."""
    acls: dict[ResourcePattern, Entries] = {}
    for pattern_type in STORED_PATTERN_TYPES:
        for resource_type in STORED_RESOURCE_TYPES:
            try:
                names = await zk.get_children(store_path(pattern_type, resource_type))
            except NoNodeError:
                continue
            for name in names:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                try:
                    entries, _ = await read_resource_acls(zk, pattern)
                except AclError as exc:
                    on_unreadable(acl_znode_path(pattern), str(exc))
                    continue
                if entries:
                    acls[pattern] = entries
    return acls


async def update_resource_acls(
    zk: AsyncZkClient, pattern: ResourcePattern, change: Callable[[Entries], Entries]
) -> tuple[Entries, Entries]:
    """(before, after) of one resource's ACLs changed by `change`, written conditionally, then notified."""
    path = acl_znode_path(pattern)
    for _ in range(UPDATE_ATTEMPTS_MAX):
        try:
            current, version = await read_resource_acls(zk, pattern)
        except AclError as exc:
            raise AclStoreError(f"cannot change the ACLs of {pattern}: {exc}") from None
        wanted = change(current)
        if wanted == current:
            return current, current
        try:
            if not wanted:
                await zk.delete(path, version=version if version is not None else -1)
            elif version is None:
                await zk.create(path, encode_acls(wanted), makepath=True)
            else:
                await zk.set(path, encode_acls(wanted), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
            continue  # another writer won: read again
        await zk.create(f"{changes_path(pattern.pattern_type)}/{CHANGE_PREFIX}", encode_change(pattern),
                        sequence=True, makepath=True)  # fmt: skip
        return current, wanted
    raise AclStoreError(f"cannot change the ACLs of {pattern}: {UPDATE_ATTEMPTS_MAX} concurrent writes won first")


async def add_bindings(zk: AsyncZkClient, bindings: Iterable[AclBinding]) -> None:
    """Adds each binding to its resource's znode (one write per resource)."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, entry in bindings:
        by_pattern.setdefault(pattern, set()).add(entry)
    for pattern, entries in by_pattern.items():
        await update_resource_acls(zk, pattern, lambda current, new=frozenset(entries): current | new)


async def remove_bindings(
    zk: AsyncZkClient, known: Iterable[tuple[ResourcePattern, Entries]], filters: list[AclBindingFilter]
) -> list[list[AclBinding]]:
    """Removes what each filter matches among the resources in `known` (re-read before writing, so a binding
    added since is judged too); the bindings each filter removed, in filter order."""
    removed: list[list[AclBinding]] = [[] for _ in filters]
    patterns = [p for p, _ in known if any(f.matches_pattern(p) for f in filters)]
    for pattern in patterns:

        def without_matches(current: Entries, pattern: ResourcePattern = pattern) -> Entries:
            return frozenset(e for e in current if not any(f.matches(AclBinding(pattern, e)) for f in filters))

        before, after = await update_resource_acls(zk, pattern, without_matches)
        for entry in sorted(before - after):
            for index, f in enumerate(filters):
                if f.matches(AclBinding(pattern, entry)):
                    removed[index].append(AclBinding(pattern, entry))
    return removed


class AclChangeListener:
    """Kafka's ZkNodeChangeNotificationListener on both change stores (broker/change_notifications.py): each
    new notification re-reads the ACLs of the resource it names and hands them to `on_change`."""

    def __init__(
        self,
        zk: AsyncZkClient,
        on_change: Callable[[ResourcePattern, Entries], None],
        logger: Any,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._zk = zk
        self._on_change = on_change
        self._log = logger
        self._stores = [
            ChangeNotificationListener(
                zk,
                path,
                CHANGE_PREFIX,
                functools.partial(self._process, pattern_type),
                logger,
                "acl_change_processing_failed",
                wall_clock_ms,
            )
            for pattern_type, path in _NOTIFICATION_STORES
        ]

    async def arm(self) -> None:
        """Watches both stores and skips the notifications already there (the caller loads every ACL next)."""
        for store in self._stores:
            await store.arm()

    def start(self) -> None:
        for store in self._stores:
            store.start()

    async def stop(self) -> None:
        for store in self._stores:
            await store.stop()

    async def _process(self, pattern_type: PatternType, path: str) -> None:
        try:
            data, _ = await self._zk.get(path)
            pattern = decode_change(data, pattern_type, path)
            entries, _ = await read_resource_acls(self._zk, pattern)
        except NoNodeError:
            return  # purged meanwhile: a later notification or the next load carries the change
        except AclError as exc:
            self._log.warning("acl_change_unreadable", path=path, error=str(exc))
            return
        self._log.info("acls_changed", resource=str(pattern), acls=len(entries))
        self._on_change(pattern, entries)
