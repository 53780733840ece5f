"""Value types of the ZooKeeper client, with kazoo's names (`kazoo/protocol/states.py`).

`ZnodeStat` keeps ZooKeeper's field names exactly (they match zkCli and
Kafka's tools); `ZkState` is kazoo's `KazooState`: CONNECTED, SUSPENDED
(connection lost, the session may still be alive) and LOST (session expired
or closed: its ephemeral nodes are gone).
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class ZkState(enum.StrEnum):
    """The connection state listeners see (kazoo's `KazooState`)."""

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


class KeeperState(enum.StrEnum):
    """ZooKeeper's own session state (kazoo's `KeeperState`), carried by watch events."""

    AUTH_FAILED = "AUTH_FAILED"
    CONNECTED = "CONNECTED"
    CONNECTED_RO = "CONNECTED_RO"
    CONNECTING = "CONNECTING"
    CLOSED = "CLOSED"
    EXPIRED_SESSION = "EXPIRED_SESSION"


class EventType(enum.StrEnum):
    """What a watch event reports (kazoo's `EventType`); NONE is a session event (the watch is gone)."""

    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"
    NONE = "NONE"


# Wire numbers (ZooKeeper's Watcher.Event.EventType / KeeperState) -> our enums.
EVENT_TYPES_BY_CODE: dict[int, EventType] = {
    -1: EventType.NONE,
    1: EventType.CREATED,
    2: EventType.DELETED,
    3: EventType.CHANGED,
    4: EventType.CHILD,
}
KEEPER_STATES_BY_CODE: dict[int, KeeperState] = {
    -112: KeeperState.EXPIRED_SESSION,
    0: KeeperState.CONNECTING,  # Disconnected
    3: KeeperState.CONNECTED,  # SyncConnected
    4: KeeperState.AUTH_FAILED,
    5: KeeperState.CONNECTED_RO,
    7: KeeperState.CLOSED,
}


class AddWatchMode(enum.IntEnum):
    """`add_watch` modes (ZooDefs.AddWatchModes)."""

    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatcherType(enum.IntEnum):
    """`remove_watches` watcher types (Watcher.WatcherType)."""

    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5


TTL_MS_MAX = (1 << 40) - 1  # the longest TTL a server takes (ZooKeeper's EphemeralType.TTL.maxValue())


class CreateMode(enum.IntEnum):
    """ZooKeeper's CreateMode numbers as the wire carries them."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @classmethod
    def of(cls, ephemeral: bool, sequence: bool, container: bool = False, ttl_ms: int = 0) -> CreateMode:
        """The mode of kazoo's flags plus Curator's two: a container, or a TTL in ms (0: none)."""
        if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0:
            raise ValueError(f"ttl_ms must be an int >= 0 (0: no TTL), got {ttl_ms!r}")
        if container:
            if ephemeral or sequence or ttl_ms:
                raise ValueError("a container node cannot be ephemeral, sequential or have a TTL")
            return cls.CONTAINER
        if ttl_ms:
            if ephemeral:
                raise ValueError("a TTL node cannot be ephemeral")
            return cls.PERSISTENT_SEQUENTIAL_WITH_TTL if sequence else cls.PERSISTENT_WITH_TTL
        return cls(int(ephemeral) | (int(sequence) << 1))


NO_ZXID = -1  # the zxid of an event no change caused (connection-state events), as ZooKeeper's WatchedEvent.NO_ZXID


class WatchedEvent(NamedTuple):
    """A watch callback's argument: `type` (EventType), `state` (KeeperState), `path` (None for NONE), and
    `zxid`, the change that fired it (ZooKeeper 3.9's `WatchedEvent.getZxid()`; NO_ZXID for state events).
    kazoo's event has the first three fields."""

    type: EventType
    state: KeeperState
    path: str | None
    zxid: int = NO_ZXID


class ZnodeStat(NamedTuple):
    """A znode's Stat, ZooKeeper's field names; times are epoch milliseconds."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int  # noqa: N815 (ZooKeeper's name)
    dataLength: int  # noqa: N815
    numChildren: int  # noqa: N815
    pzxid: int

    @property
    def acl_version(self) -> int:
        return self.aversion

    @property
    def children_version(self) -> int:
        return self.cversion

    @property
    def created(self) -> float:
        """Creation time, seconds since the epoch."""
        return self.ctime / 1000.0

    @property
    def last_modified(self) -> float:
        """Last modification time, seconds since the epoch."""
        return self.mtime / 1000.0

    @property
    def data_length(self) -> int:
        return self.dataLength

    @property
    def children_count(self) -> int:
        return self.numChildren

    @property
    def owner_session_id(self) -> int | None:
        """The session owning this ephemeral node, None for a persistent node."""
        return self.ephemeralOwner or None
