"""The client's table of registered watches (ZooKeeper's ZKWatchManager, docs/research/quorum.md §1.8).

Paths are server paths (chroot included). A watcher is any callable; the same
watcher registered for one path through several reads is called once per
event (ZooKeeper's "same watch object" rule), so each table keeps an ordered
set per path. One-shot tables are emptied by the event that fires them;
persistent ones stay. The table is what `SetWatches` re-registers after a
reconnect, and what gets the NONE event when the session is lost.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from client.zk.paths import parent_of
from client.zk.states import EventType, WatchedEvent, WatcherType

Watcher = Callable[[WatchedEvent], object]

# Paths per SetWatches request, counted in characters, as the Java client batches them
# (ClientCnxn SET_WATCHES_MAX_LENGTH = 128 KB).
SET_WATCHES_CHARS_MAX = 128 * 1024


class WatchTable(enum.Enum):
    DATA = "data"  # get(watch) and exists(watch) of an existing node
    EXIST = "exist"  # exists(watch) of a missing node
    CHILD = "child"  # get_children(watch)
    PERSISTENT = "persistent"  # add_watch(PERSISTENT)
    PERSISTENT_RECURSIVE = "persistent_recursive"  # add_watch(PERSISTENT_RECURSIVE)


# Which tables remove_watches(type) clears (ZooKeeper's WatcherType; ANY clears all).
_TABLES_BY_WATCHER_TYPE: dict[WatcherType, tuple[WatchTable, ...]] = {
    WatcherType.CHILDREN: (WatchTable.CHILD,),
    WatcherType.DATA: (WatchTable.DATA, WatchTable.EXIST),
    WatcherType.ANY: tuple(WatchTable),
    WatcherType.PERSISTENT: (WatchTable.PERSISTENT,),
    WatcherType.PERSISTENT_RECURSIVE: (WatchTable.PERSISTENT_RECURSIVE,),
}

# Which one-shot tables an event fires and empties (ZKWatchManager.materialize).
_ONE_SHOT_TABLES_BY_EVENT: dict[EventType, tuple[WatchTable, ...]] = {
    EventType.CREATED: (WatchTable.DATA, WatchTable.EXIST),
    EventType.CHANGED: (WatchTable.DATA, WatchTable.EXIST),
    EventType.DELETED: (WatchTable.DATA, WatchTable.EXIST, WatchTable.CHILD),
    EventType.CHILD: (WatchTable.CHILD,),
    EventType.NONE: (),
}


_SNAPSHOT_FIELDS = ("data", "exist", "child", "persistent", "persistent_recursive")


@dataclass(frozen=True, slots=True)
class WatchSnapshot:
    data: list[str]
    exist: list[str]
    child: list[str]
    persistent: list[str]
    persistent_recursive: list[str]

    def batches(self, chars_max: int = SET_WATCHES_CHARS_MAX) -> Iterator[WatchSnapshot]:
        """Split into snapshots of at most about `chars_max` path characters each (at least one path each)."""
        lists: dict[str, list[str]] = {name: [] for name in _SNAPSHOT_FIELDS}
        size = 0
        for name in _SNAPSHOT_FIELDS:
            for path in getattr(self, name):
                if size and size + len(path) > chars_max:
                    yield WatchSnapshot(**lists)
                    lists = {n: [] for n in _SNAPSHOT_FIELDS}
                    size = 0
                lists[name].append(path)
                size += len(path)
        if size:
            yield WatchSnapshot(**lists)


class WatchRegistry:
    def __init__(self) -> None:
        self._tables: dict[WatchTable, dict[str, dict[Watcher, None]]] = {t: {} for t in WatchTable}

    def add(self, table: WatchTable, path: str, watcher: Watcher) -> None:
        self._tables[table].setdefault(path, {})[watcher] = None

    def triggered(self, event_type: EventType, path: str) -> list[Watcher]:
        """The watchers an event for `path` fires; one-shot ones are removed."""
        fired: dict[Watcher, None] = {}
        for table in _ONE_SHOT_TABLES_BY_EVENT[event_type]:
            fired.update(self._tables[table].pop(path, {}))
        fired.update(self._tables[WatchTable.PERSISTENT].get(path, {}))
        if event_type in (EventType.CREATED, EventType.DELETED, EventType.CHANGED):
            recursive = self._tables[WatchTable.PERSISTENT_RECURSIVE]
            for ancestor in _self_and_ancestors(path):
                fired.update(recursive.get(ancestor, {}))
        return list(fired)

    def remove(self, path: str, watcher_type: WatcherType) -> list[Watcher]:
        removed: dict[Watcher, None] = {}
        for table in _TABLES_BY_WATCHER_TYPE[watcher_type]:
            removed.update(self._tables[table].pop(path, {}))
        return list(removed)

    def has(self, table: WatchTable, path: str, watcher: Watcher | None = None) -> bool:
        watchers = self._tables[table].get(path, {})
        return bool(watchers) if watcher is None else watcher in watchers

    def drain(self) -> list[Watcher]:
        """Every watcher, once; the registry is empty afterwards (the session is gone)."""
        every: dict[Watcher, None] = {}
        for table in self._tables.values():
            for watchers in table.values():
                every.update(watchers)
            table.clear()
        return list(every)

    def snapshot(self) -> WatchSnapshot:
        t = self._tables
        return WatchSnapshot(
            data=sorted(t[WatchTable.DATA]),
            exist=sorted(t[WatchTable.EXIST]),
            child=sorted(t[WatchTable.CHILD]),
            persistent=sorted(t[WatchTable.PERSISTENT]),
            persistent_recursive=sorted(t[WatchTable.PERSISTENT_RECURSIVE]),
        )

    def __len__(self) -> int:
        return sum(len(table) for table in self._tables.values())


def _self_and_ancestors(path: str) -> Iterator[str]:
    while True:
        yield path
        if path == "/":
            return
        path = parent_of(path)
