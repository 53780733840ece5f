"""Watches held by the server a session is connected to (ZooKeeper's WatchManager).

Which write fires which event, and to whom (docs/research/quorum.md §1.8):

| trigger                  | one-shot tables notified        | persistent | persistent-recursive |
|--------------------------|---------------------------------|------------|----------------------|
| NodeCreated P            | data[P] (exists watches live there) | P      | P and its ancestors  |
| NodeDeleted P            | data[P], child[P]               | P          | P and its ancestors  |
| NodeDataChanged P        | data[P]                         | P          | P and its ancestors  |
| NodeChildrenChanged P    | child[P]                        | P          | never                |

One-shot watches are removed when they fire; each watcher gets one event
per trigger however many of its watches match, if it may READ the node the
event is about (ZooKeeper 3.9's ServerCnxn.process(event, znodeAcl): a
watcher without READ loses the watch and gets nothing).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from zkemu import acl
from zkemu.errors import NoAuthError
from zkemu.events import EventType


class Watcher(Protocol):
    """A connected session; `send_event` queues the event on its stream before any later reply."""

    auth_ids: Sequence[acl.Id]  # the session's ids on its connection: an event needs READ on its node

    def send_event(self, event_type: int, path: str, zxid: int) -> None: ...


class WatcherType(enum.IntEnum):
    """ZooKeeper's WatcherType numbers (removeWatches)."""

    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5


class AddWatchMode(enum.IntEnum):
    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


Table = dict[str, set[Watcher]]


def _ancestors_and_self(path: str) -> Iterable[str]:
    yield path
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        yield path


class WatchManager:
    def __init__(self) -> None:
        self._data: Table = {}
        self._child: Table = {}
        self._persistent: Table = {}
        self._recursive: Table = {}

    # ---- registration
    def add_data_watch(self, watcher: Watcher, path: str) -> None:
        self._data.setdefault(path, set()).add(watcher)

    def add_child_watch(self, watcher: Watcher, path: str) -> None:
        self._child.setdefault(path, set()).add(watcher)

    def add_persistent(self, watcher: Watcher, path: str, mode: AddWatchMode) -> None:
        table = self._recursive if mode is AddWatchMode.PERSISTENT_RECURSIVE else self._persistent
        table.setdefault(path, set()).add(watcher)

    def contains(self, watcher: Watcher, path: str, watcher_type: WatcherType) -> bool:
        """checkWatches: whether `watcher` has a watch of that type on `path` (ZKDatabase.containsWatcher)."""
        return any(watcher in table.get(path, ()) for table in self._tables(watcher_type))

    def remove(self, watcher: Watcher, path: str, watcher_type: WatcherType) -> bool:
        """removeWatches: True if a matching watch was found (else the caller answers NOWATCHER)."""
        found = False
        for table in self._tables(watcher_type):
            found |= _discard(table, path, watcher)
        return found

    def _tables(self, watcher_type: WatcherType) -> list[Table]:
        return {
            WatcherType.CHILDREN: [self._child],
            WatcherType.DATA: [self._data],
            WatcherType.ANY: [self._child, self._data, self._persistent, self._recursive],
            WatcherType.PERSISTENT: [self._persistent],
            WatcherType.PERSISTENT_RECURSIVE: [self._recursive],
        }[watcher_type]

    def remove_watcher(self, watcher: Watcher) -> None:
        """The connection closed: its watches go with it (DataTree.removeCnxn)."""
        for table in (self._data, self._child, self._persistent, self._recursive):
            for path in [p for p, ws in table.items() if watcher in ws]:
                _discard(table, path, watcher)

    def count(self) -> int:
        return sum(len(ws) for t in (self._data, self._child, self._persistent, self._recursive) for ws in t.values())

    # ---- reads for the four-letter words (wchs, wchc, wchp, mntr's zk_watch_count)
    def data_watches(self) -> Table:
        """ZooKeeper's dataWatches, path -> watchers: one-shot data and exists watches and every
        persistent watch, recursive or not (DataTree.addWatch registers both kinds there). A copy."""
        return _union(self._data, self._persistent, self._recursive)

    def child_watches(self) -> Table:
        """ZooKeeper's childWatches: one-shot child watches and non-recursive persistent ones. A copy."""
        return _union(self._child, self._persistent)

    def zookeeper_count(self) -> int:
        """DataTree.getWatchCount: ZooKeeper's data watches plus its child watches, where a persistent
        watch sits in both tables and a recursive one in the data table only. Without persistent
        watches no table is copied."""
        if not (self._persistent or self._recursive):
            return sum(len(ws) for t in (self._data, self._child) for ws in t.values())
        tables = (self.data_watches(), self.child_watches())
        return sum(len(ws) for t in tables for ws in t.values())

    # ---- firing
    def trigger(self, event_type: EventType, path: str, zxid: int, node_acl: bytes | None = None) -> None:
        """Notify the watchers of `path` for `event_type`; `node_acl`: the node's stored ACL (None: open)."""
        if not (self._data or self._child or self._persistent or self._recursive):
            return
        notify: set[Watcher] = set()
        if event_type is EventType.NODE_CHILDREN_CHANGED:
            notify |= self._child.pop(path, set())
        else:
            notify |= self._data.pop(path, set())
            if event_type is EventType.NODE_DELETED:
                notify |= self._child.pop(path, set())
            if self._recursive:
                for p in _ancestors_and_self(path):
                    notify |= self._recursive.get(p, set())
        notify |= self._persistent.get(path, set())
        entries = acl.decode(node_acl) if node_acl is not None and notify else None
        for w in notify:
            if entries is not None and not _may_read(entries, w, path):
                continue
            w.send_event(event_type, path, zxid)

    def set_watches(
        self,
        watcher: Watcher,
        relative_zxid: int,
        data: Iterable[str],
        exist: Iterable[str],
        child: Iterable[str],
        persistent: Iterable[str],
        recursive: Iterable[str],
        stat_of: Callable[[str], tuple[int, int] | None],
    ) -> None:
        """Re-register after a reconnect, firing at once what the client missed (DataTree.setWatches).

        `stat_of(path)` gives (mzxid, pzxid) of a node, or None when it does not exist.
        Catch-up events carry zxid -1; persistent watches are re-armed with no catch-up.
        """
        for path in data:
            st = stat_of(path)
            if st is None:
                watcher.send_event(EventType.NODE_DELETED, path, -1)
            elif st[0] > relative_zxid:
                watcher.send_event(EventType.NODE_DATA_CHANGED, path, -1)
            else:
                self.add_data_watch(watcher, path)
        for path in exist:
            if stat_of(path) is not None:
                watcher.send_event(EventType.NODE_CREATED, path, -1)
            else:
                self.add_data_watch(watcher, path)
        for path in child:
            st = stat_of(path)
            if st is None:
                watcher.send_event(EventType.NODE_DELETED, path, -1)
            elif st[1] > relative_zxid:
                watcher.send_event(EventType.NODE_CHILDREN_CHANGED, path, -1)
            else:
                self.add_child_watch(watcher, path)
        for path in persistent:
            self.add_persistent(watcher, path, AddWatchMode.PERSISTENT)
        for path in recursive:
            self.add_persistent(watcher, path, AddWatchMode.PERSISTENT_RECURSIVE)


def _may_read(entries: Sequence[acl.Acl], watcher: Watcher, path: str) -> bool:
    try:
        acl.check(entries, acl.READ, watcher.auth_ids, path)
    except NoAuthError:
        return False
    return True


def _union(*tables: Table) -> Table:
    merged: Table = {}
    for table in tables:
        for path, watchers in table.items():
            merged.setdefault(path, set()).update(watchers)
    return merged


def _discard(table: Table, path: str, watcher: Watcher) -> bool:
    ws = table.get(path)
    if ws is None or watcher not in ws:
        return False
    ws.discard(watcher)
    if not ws:
        del table[path]
    return True
