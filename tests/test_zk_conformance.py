"""Conformance: the same operation scripts against a real ZooKeeper and against zkraft, compared step by step.

The reference is Apache ZooKeeper itself (the server in pyspark's jars, tests/real_zookeeper.py) driven by
kazoo; the subject is a 3-node zkraft quorum driven by our `ZkClient`. Each script is a small function of
operations on its own subtree (shown as `R`), run once per backend by a `Run` that records, per step, the
return value or the ZooKeeper code name of the error, every Stat field, sequential names, and the watch
events each session received (type, path, which of its watchers, in order). The transcripts must be equal;
a difference fails with a table of both.

Absolute zxids and times differ by design (a zkraft zxid is a Raft log index; times are wall clocks), so
they are compared relative to the script's own: every zxid a run observed is replaced by its rank among
them (`z1 < z2 < ...`, 0 stays 0), every ctime/mtime likewise (`t1 < t2 < ...`). Equal stays equal
(czxid == mzxid after a create; pzxid == the zxid of the last child create or delete, which every
successful write shows from its reply header as `@zN`), and order stays order (mzxid grows on set).
Writes are paced into distinct milliseconds so that a set is seen to change mtime. Session ids show as
s1, s2, ... Stat columns: czxid mzxid pzxid ctime mtime version cversion aversion ephemeralOwner
dataLength numChildren.

Most scripts also run against a 3-node ZooKeeper ensemble with their sessions spread over the servers
(s1 on the first, s2 on the second, ...; reads sync first), the zkraft sessions likewise over its nodes:
watches fire on the server a session is connected to, writes are forwarded to the leader.

Where zkraft differs from ZooKeeper, the script is marked xfail(strict=True) with the difference as its
reason (KNOWN_DIFFERENCES): the suite stays green and the difference stays written down.

`KazooSession` hands kazoo's request records to kazoo's connection itself rather than calling
`KazooClient.create` & co: those normalise paths first (`R//b` becomes `R/b`, `R/` becomes `R`, `a`
becomes `/a`, `R/.` raises ValueError), which would hide what the server does with such paths. kazoo
2.11 also has no addWatch, removeWatches, getEphemerals or getAllChildrenNumber: `KazooSession` sends
those requests too (ZooDefs.OpCode 106, 18, 103, 104) and keeps the persistent-watch table kazoo lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.real_zookeeper import RealZooKeeper, unavailable_reason

pytest.importorskip("kazoo", reason="kazoo drives the real ZooKeeper: python3 -m pip install -e '.[test]'")
_UNAVAILABLE = unavailable_reason()
if _UNAVAILABLE is not None:
    pytest.skip(f"cannot start a real ZooKeeper: {_UNAVAILABLE}", allow_module_level=True)

from kazoo.client import KazooClient  # noqa: E402
from kazoo.protocol.serialization import (  # noqa: E402
    CheckVersion,
    Create,
    Create2,
    Delete,
    Exists,
    GetChildren,
    GetChildren2,
    GetData,
    SetData,
    Sync,
    Transaction,
    Watch,
    int_struct,
    read_string,
    write_string,
)
from kazoo.protocol.states import EVENT_TYPE_MAP, Callback, WatchedEvent  # noqa: E402
from kazoo.security import OPEN_ACL_UNSAFE  # noqa: E402

from client import AddWatchMode, WatcherType, ZkClient  # noqa: E402
from client.zk import codec  # noqa: E402
from client.zk.client import _SharedLoop  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.quorum_harness import QuorumProcesses, wait_for_leader  # noqa: E402
from zkraft_proto import zk_pb2  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ZKRAFT_PROPERTIES = {"quorum.state.machine": "zookeeper", "tickTime": "200"}
START_TIMEOUT_S = 60.0  # a cold JVM, or three Python processes electing a leader
OP_TIMEOUT_S = 15.0  # one request, or one settle of the callback threads
SESSION_TIMEOUT_S = 10.0  # both servers clamp it to 20 * tickTime = 4 s
PACE_ROUNDS_MAX = 10_000

# ZooKeeper's KeeperException.Code names (docs/research/quorum.md §1.4).
CODE_NAMES = {
    0: "OK",
    -1: "SYSTEMERROR",
    -2: "RUNTIMEINCONSISTENCY",
    -3: "DATAINCONSISTENCY",
    -4: "CONNECTIONLOSS",
    -5: "MARSHALLINGERROR",
    -6: "UNIMPLEMENTED",
    -7: "OPERATIONTIMEOUT",
    -8: "BADARGUMENTS",
    -12: "UNKNOWNSESSION",
    -101: "NONODE",
    -102: "NOAUTH",
    -103: "BADVERSION",
    -108: "NOCHILDRENFOREPHEMERALS",
    -110: "NODEEXISTS",
    -111: "NOTEMPTY",
    -112: "SESSIONEXPIRED",
    -114: "INVALIDACL",
    -118: "SESSIONMOVED",
    -120: "EPHEMERALONLOCALSESSION",
    -121: "NOWATCHER",
    -122: "REQUESTTIMEOUT",
}


def code_name(exc: BaseException) -> str:
    """`NONODE` for a ZooKeeper error of either library; the class name for a client-side error."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return CODE_NAMES.get(code, str(code))
    return f"client-side {type(exc).__name__}"


# ---------------------------------------------------------------- kazoo: the requests kazoo 2.11 lacks


class _NoOperation:
    """A multi op of a type no multi takes: MultiOperationRecord.deserialize throws "Invalid type of op"."""

    type = 99

    def serialize(self) -> bytes:
        return b""


class _AddWatch(namedtuple("_AddWatch", "path mode")):
    type = 106  # AddWatchRequest{ustring path, int mode}

    def serialize(self) -> bytes:
        return write_string(self.path) + int_struct.pack(self.mode)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> None:
        return None


class _RemoveWatches(namedtuple("_RemoveWatches", "path watcher_type")):
    type = 18  # RemoveWatchesRequest{ustring path, int type}

    def serialize(self) -> bytes:
        return write_string(self.path) + int_struct.pack(self.watcher_type)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> None:
        return None


class _GetEphemerals(namedtuple("_GetEphemerals", "prefix")):
    type = 103  # GetEphemeralsRequest{ustring prefixPath} -> {vector<ustring> ephemerals}

    def serialize(self) -> bytes:
        return write_string(self.prefix)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[str]:
        count = int_struct.unpack_from(buffer, offset)[0]
        offset += int_struct.size
        paths = []
        for _ in range(max(count, 0)):
            path, offset = read_string(buffer, offset)
            paths.append(path)
        return paths


class _GetAllChildrenNumber(namedtuple("_GetAllChildrenNumber", "path")):
    type = 104  # GetAllChildrenNumberRequest{ustring path} -> {int totalNumber}

    def serialize(self) -> bytes:
        return write_string(self.path)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> int:
        return struct.unpack_from("!i", buffer, offset)[0]


# ---------------------------------------------------------------- sessions: one client each


Watcher = Callable[[Any], None]
Op = tuple[str, tuple[Any, ...], dict[str, Any]]  # a transaction op: (builder method, args, flags)
Rows = list[tuple[str, str]]  # a rendered transcript: (step, outcome)


class Session:
    """One client session with kazoo's API (`client` is a KazooClient or a ZkClient)."""

    name: str
    client: Any

    @property
    def session_id(self) -> int:
        return int(self.client.client_id[0])

    @property
    def last_zxid(self) -> int:
        return int(self.client.last_zxid)

    # kazoo's API, with transactions as a list of ops
    def create(self, path: str, value: bytes, ephemeral: bool, sequence: bool, include_data: bool) -> Any:
        raise NotImplementedError

    def get(self, path: str, watch: Watcher | None) -> tuple[bytes, Any]:
        raise NotImplementedError

    def exists(self, path: str, watch: Watcher | None) -> Any:
        raise NotImplementedError

    def get_children(self, path: str, watch: Watcher | None, include_data: bool) -> Any:
        raise NotImplementedError

    def set(self, path: str, value: bytes, version: int) -> Any:
        raise NotImplementedError

    def delete(self, path: str, version: int) -> Any:
        raise NotImplementedError

    def commit(self, ops: list[Op]) -> list[Any]:
        raise NotImplementedError

    def sync(self, path: str) -> Any:
        raise NotImplementedError

    def add_watch(self, path: str, watcher: Watcher, mode: AddWatchMode) -> None:
        raise NotImplementedError

    def remove_watches(self, path: str, watcher_type: WatcherType) -> None:
        raise NotImplementedError

    def get_ephemerals(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def get_all_children_number(self, path: str) -> int:
        raise NotImplementedError

    def run_callback(self, func: Callable[[], None]) -> None:
        """Queue `func` on the client's callback thread, behind every watch callback queued before it."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def settle(self) -> None:
        """Return once every watch event for writes that completed before the call has run its callback.

        A server sends a watch event before its reply to any later request of the session (sync and a
        read here), and each client runs callbacks in order on one thread: a marker queued after the
        read's reply runs after them.
        """
        self.sync("/")
        self.exists("/", None)
        done = threading.Event()
        self.run_callback(done.set)
        if not done.wait(OP_TIMEOUT_S):
            raise AssertionError(f"{self.name}: callback thread did not run a marker in {OP_TIMEOUT_S:g} s")


class KazooSession(Session):
    """kazoo against the real ZooKeeper, plus the ZooKeeper 3.6+ requests kazoo 2.11 lacks."""

    def __init__(self, name: str, hosts: str) -> None:
        self.name = name
        self.client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S, randomize_hosts=False)
        self._persistent: dict[str, list[Watcher]] = {}
        self._recursive: dict[str, list[Watcher]] = {}
        self.frames: list[tuple[int, str]] = []  # every watch event the server sent: (type code, path)
        # kazoo pops one-shot watchers per event; persistent ones must also see every event: look first.
        connection = self.client._connection
        kazoo_read_watch_event = connection._read_watch_event

        def read_watch_event(buffer: bytes, offset: int) -> Any:
            event, _ = Watch.deserialize(buffer, offset)
            self.frames.append((event.type, event.path))
            self._fire_persistent(event.type, event.path)
            return kazoo_read_watch_event(buffer, offset)

        connection._read_watch_event = read_watch_event
        self.client.start(timeout=START_TIMEOUT_S)

    def _fire_persistent(self, event_type: int, path: str) -> None:
        watchers = list(self._persistent.get(path, ()))
        if event_type != 4:  # a persistent-recursive watch never sees NodeChildrenChanged (§1.8)
            node = path
            for _ in range(path.count("/") + 1):  # path, then each ancestor up to "/"
                watchers.extend(self._recursive.get(node, ()))
                node = node.rsplit("/", 1)[0] or "/"
        event = WatchedEvent(EVENT_TYPE_MAP[event_type], self.client.client_state, path)
        for watcher in dict.fromkeys(watchers):
            self.client.handler.dispatch_callback(Callback("watch", watcher, (event,)))

    def _request(self, request: Any) -> Any:
        result = self.client.handler.async_result()
        self.client._call(request, result)
        return result.get(timeout=OP_TIMEOUT_S)

    def create(self, path: str, value: bytes, ephemeral: bool, sequence: bool, include_data: bool) -> Any:
        flags = int(ephemeral) | int(sequence) << 1  # CreateMode
        return self._request((Create2 if include_data else Create)(path, value, OPEN_ACL_UNSAFE, flags))

    def get(self, path: str, watch: Watcher | None) -> tuple[bytes, Any]:
        return self._request(GetData(path, watch))

    def exists(self, path: str, watch: Watcher | None) -> Any:
        return self._request(Exists(path, watch))

    def get_children(self, path: str, watch: Watcher | None, include_data: bool) -> Any:
        return self._request((GetChildren2 if include_data else GetChildren)(path, watch))

    def set(self, path: str, value: bytes, version: int) -> Any:
        return self._request(SetData(path, value, version))

    def delete(self, path: str, version: int) -> Any:
        self._request(Delete(path, version))
        return True

    def commit(self, ops: list[Op]) -> list[Any]:
        records: list[Any] = []
        for name, args, flags in ops:
            if name == "create":
                mode = int(flags.get("ephemeral", False)) | int(flags.get("sequence", False)) << 1
                records.append(Create(args[0], args[1], OPEN_ACL_UNSAFE, mode))
            elif name == "delete":
                records.append(Delete(*args))
            elif name == "set_data":
                records.append(SetData(*args))
            elif name == "no_operation":
                records.append(_NoOperation())
            else:
                records.append(CheckVersion(*args))
        return list(self._request(Transaction(records)))

    def sync(self, path: str) -> Any:
        return self._request(Sync(path))

    def add_watch(self, path: str, watcher: Watcher, mode: AddWatchMode) -> None:
        self._request(_AddWatch(path, int(mode)))
        table = self._recursive if mode is AddWatchMode.PERSISTENT_RECURSIVE else self._persistent
        table.setdefault(path, []).append(watcher)

    def remove_watches(self, path: str, watcher_type: WatcherType) -> None:
        self._request(_RemoveWatches(path, int(watcher_type)))
        if watcher_type in (WatcherType.CHILDREN, WatcherType.ANY):
            self.client._child_watchers.pop(path, None)
        if watcher_type in (WatcherType.DATA, WatcherType.ANY):
            self.client._data_watchers.pop(path, None)
        if watcher_type in (WatcherType.PERSISTENT, WatcherType.ANY):
            self._persistent.pop(path, None)
        if watcher_type in (WatcherType.PERSISTENT_RECURSIVE, WatcherType.ANY):
            self._recursive.pop(path, None)

    def get_ephemerals(self, prefix: str) -> list[str]:
        return sorted(self._request(_GetEphemerals(prefix)))

    def get_all_children_number(self, path: str) -> int:
        return int(self._request(_GetAllChildrenNumber(path)))

    def run_callback(self, func: Callable[[], None]) -> None:
        self.client.handler.dispatch_callback(Callback("watch", func, ()))

    def close(self) -> None:
        self.client.stop()
        self.client.close()


class ZkraftSession(Session):
    """Our ZkClient against the zkraft quorum."""

    def __init__(self, name: str, hosts: str) -> None:
        self.name = name
        self.client = ZkClient(
            hosts,
            timeout=START_TIMEOUT_S,
            session_timeout_ms=int(SESSION_TIMEOUT_S * 1000),
            randomize_hosts=False,
        )
        self.client.start()

    def create(self, path: str, value: bytes, ephemeral: bool, sequence: bool, include_data: bool) -> Any:
        return self.client.create(path, value, ephemeral=ephemeral, sequence=sequence, include_data=include_data)

    def get(self, path: str, watch: Watcher | None) -> tuple[bytes, Any]:
        return self.client.get(path, watch=watch)

    def exists(self, path: str, watch: Watcher | None) -> Any:
        return self.client.exists(path, watch=watch)

    def get_children(self, path: str, watch: Watcher | None, include_data: bool) -> Any:
        return self.client.get_children(path, watch=watch, include_data=include_data)

    def set(self, path: str, value: bytes, version: int) -> Any:
        return self.client.set(path, value, version=version)

    def delete(self, path: str, version: int) -> Any:
        return self.client.delete(path, version=version)

    def commit(self, ops: list[Op]) -> list[Any]:
        if any(name == "no_operation" for name, _, _ in ops):
            return self._commit_raw(ops)
        t = self.client.transaction()
        for name, args, flags in ops:
            getattr(t, name)(*args, **flags)
        return list(t.commit())

    def _commit_raw(self, ops: list[Op]) -> list[Any]:
        """A multi the SDK's builder cannot make (an op with no operation set), sent as the SDK sends one."""
        wire = []
        for name, args, _ in ops:
            assert name in ("create", "no_operation"), f"{name} is not supported next to no_operation"
            wire.append(zk_pb2.Op(create=zk_pb2.CreateOp(path=args[0], data=args[1])) if args else zk_pb2.Op())
        request = zk_pb2.Request(multi=zk_pb2.MultiOp(ops=wire))
        return codec.reply_op_outcomes(self.client._run(self.client._aio._call(request, None)))

    def sync(self, path: str) -> Any:
        return self.client.sync(path)

    def add_watch(self, path: str, watcher: Watcher, mode: AddWatchMode) -> None:
        self.client.add_watch(path, watcher, mode)

    def remove_watches(self, path: str, watcher_type: WatcherType) -> None:
        self.client.remove_watches(path, watcher_type)

    def get_ephemerals(self, prefix: str) -> list[str]:
        return sorted(self.client.get_ephemerals(prefix))

    def get_all_children_number(self, path: str) -> int:
        return int(self.client.get_all_children_number(path))

    def run_callback(self, func: Callable[[], None]) -> None:
        self.client._dispatch(func, ())  # the callback thread's queue, as watch events use it

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------- backends


@dataclass
class Backend:
    """Servers of one kind and how to open a session on one of them."""

    label: str
    hosts: list[str]
    open_session: Callable[[str, str], Session]
    fresh: dict[str, Rows] = field(default_factory=dict)  # FRESH_SCRIPTS, run first

    def connect(self, name: str, index: int, spread: bool) -> Session:
        """Session number `index` (from 0): on the first server, or with `spread` on server index mod n."""
        host = self.hosts[index % len(self.hosts)] if spread else self.hosts[0]
        return self.open_session(name, host)


# ---------------------------------------------------------------- one run of a script: steps and rendering


@dataclass(frozen=True)
class Zxid:
    value: int


@dataclass(frozen=True)
class Millis:
    value: int


@dataclass(frozen=True)
class Owner:
    value: int


@dataclass(frozen=True)
class StatView:
    czxid: Zxid
    mzxid: Zxid
    pzxid: Zxid
    ctime: Millis
    mtime: Millis
    version: int
    cversion: int
    aversion: int
    owner: Owner
    data_length: int
    num_children: int


@dataclass(frozen=True)
class Written:
    """A successful write's result and the zxid its reply carried."""

    value: Any
    zxid: Zxid


@dataclass(frozen=True)
class Raised:
    code: str


def stat_view(stat: Any) -> StatView:
    return StatView(
        Zxid(stat.czxid),
        Zxid(stat.mzxid),
        Zxid(stat.pzxid),
        Millis(stat.ctime),
        Millis(stat.mtime),
        stat.version,
        stat.cversion,
        stat.aversion,
        Owner(stat.ephemeralOwner),
        stat.dataLength,
        stat.numChildren,
    )


def normalize(value: Any) -> Any:
    """Either library's result as plain values, with stats as StatView and errors as Raised."""
    if hasattr(value, "czxid") and hasattr(value, "pzxid"):
        return stat_view(value)
    if isinstance(value, BaseException):
        return Raised(code_name(value))
    if isinstance(value, list | tuple):
        return type(value)(normalize(v) for v in value)
    return value


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, list | tuple):
        for v in value:
            yield from _walk(v)
    elif isinstance(value, StatView):
        yield from (value.czxid, value.mzxid, value.pzxid, value.ctime, value.mtime)
    elif isinstance(value, Written):
        yield from _walk(value.value)
        yield value.zxid


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def t_create(path: str, value: bytes = b"", **flags: bool) -> Op:
    return ("create", (path, value), flags)


def t_delete(path: str, version: int = -1) -> Op:
    return ("delete", (path, version), {})


def t_set(path: str, value: bytes, version: int = -1) -> Op:
    return ("set_data", (path, value, version), {})


def t_check(path: str, version: int) -> Op:
    return ("check", (path, version), {})


def t_no_operation() -> Op:
    """An op with no operation: zkraft's Op message with nothing set, ZooKeeper's MultiHeader of an unknown type."""
    return ("no_operation", (), {})


class Run:
    """One script on one backend: its sessions (`s1` opened at once), its rows, its watch events."""

    def __init__(self, backend: Backend, root: str, spread: bool = False) -> None:
        self.backend = backend
        self.root = root
        self.spread = spread
        self.sessions: list[Session] = []
        self.session_ids: dict[int, str] = {}
        self.rows: list[tuple[str, Any]] = []
        self._closed: set[str] = set()
        self._events: dict[str, list[tuple[str, str, str]]] = {}
        self._shown: dict[str, int] = {}
        self._watchers: dict[tuple[str, str], Watcher] = {}
        self._lock = threading.Lock()
        self._recording = True
        self._last_write_ms = 0
        self.s1 = self.connect()

    # ---- sessions, paths, watchers
    def connect(self) -> Session:
        name = f"s{len(self.sessions) + 1}"
        session = self.backend.connect(name, len(self.sessions), self.spread)
        self.sessions.append(session)
        self.session_ids[session.session_id] = name
        self._events[name] = []
        return session

    def p(self, *names: str) -> str:
        return "/".join((self.root, *names))

    def show(self, path: str) -> str:
        if path == self.root or path.startswith(self.root + "/"):
            return "R" + path[len(self.root) :]
        return path

    def watcher(self, name: str, s: Session) -> Watcher:
        """The callback `name` of session `s` (the same object each time: one watcher, several reads)."""
        key = (s.name, name)
        if key not in self._watchers:

            def record(event: Any) -> None:
                with self._lock:
                    if self._recording:
                        self._events[s.name].append((name, str(event.type), event.path))

            self._watchers[key] = record
        return self._watchers[key]

    # ---- steps
    def _step(
        self, s: Session | None, op: str, args: Sequence[Any], call: Callable[[Session], Any], **opts: Any
    ) -> Any:
        session = s or self.s1
        label = " ".join([op, *(self._arg(a) for a in args), *(f"{k}={self._arg(v)}" for k, v in opts.items())])
        if session is not self.s1:
            label = f"{session.name}: {label}"
        write = op in ("create", "set", "delete", "multi")
        if write:
            self._pace()
        elif self.spread:
            session.sync("/")  # sessions on different servers: catch up before reading
        value: Any = None
        try:
            value = call(session)
        except Exception as exc:  # an error is a result to compare
            outcome: Any = Raised(code_name(exc))
        else:
            outcome = normalize(value)
            if write:
                outcome = Written(outcome, Zxid(session.last_zxid))
        if write:
            self._last_write_ms = now_ms()
        self.rows.append((label, outcome))
        return value

    def _arg(self, value: Any) -> str:
        if isinstance(value, str):
            return self.show(value) if value.startswith("/") else repr(value)
        if isinstance(value, bytes):
            return repr(value) if len(value) <= 16 else f"<{len(value)} bytes>"
        if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str):  # a multi op
            name, args, flags = value
            return " ".join([name, *(self._arg(a) for a in args), *(k for k, on in flags.items() if on)])
        if isinstance(value, list):
            return "[" + "; ".join(self._arg(v) for v in value) + "]"
        if isinstance(value, AddWatchMode | WatcherType):
            return value.name
        return str(value)

    def _pace(self) -> None:
        """Wait for the wall clock to pass the last write's millisecond: each write gets its own ctime/mtime."""
        for _ in range(PACE_ROUNDS_MAX):
            if now_ms() > self._last_write_ms:
                return
            time.sleep(0.0002)
        raise AssertionError("the wall clock did not advance")

    def _watch(self, s: Session | None, name: str | None) -> Watcher | None:
        return None if name is None else self.watcher(name, s or self.s1)

    def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        include_data: bool = False,
        s: Session | None = None,
    ) -> Any:
        flags = {"ephemeral": ephemeral, "sequence": sequence}
        opts = {k: v for k, v in (*flags.items(), ("include_data", include_data)) if v}
        return self._step(
            s,
            "create",
            [path, value] if value else [path],
            lambda c: c.create(path, value, include_data=include_data, **flags),
            **opts,
        )

    def get(self, path: str, watch: str | None = None, *, s: Session | None = None) -> Any:
        w = self._watch(s, watch)
        return self._step(s, "get", [path], lambda c: c.get(path, w), **({"watch": watch} if watch else {}))

    def exists(self, path: str, watch: str | None = None, *, s: Session | None = None) -> Any:
        w = self._watch(s, watch)
        return self._step(s, "exists", [path], lambda c: c.exists(path, w), **({"watch": watch} if watch else {}))

    def children(
        self, path: str, watch: str | None = None, *, include_data: bool = False, s: Session | None = None
    ) -> Any:
        w = self._watch(s, watch)

        def call(c: Session) -> Any:
            result = c.get_children(path, w, include_data)
            return (sorted(result[0]), result[1]) if include_data else sorted(result)  # ZooKeeper: no order

        opts: dict[str, Any] = {"watch": watch} if watch else {}
        if include_data:
            opts["include_data"] = True
        return self._step(s, "children", [path], call, **opts)

    def set(self, path: str, value: bytes, version: int = -1, *, s: Session | None = None) -> Any:
        opts = {"version": version} if version != -1 else {}
        return self._step(s, "set", [path, value], lambda c: c.set(path, value, version), **opts)

    def delete(self, path: str, version: int = -1, *, s: Session | None = None) -> Any:
        opts = {"version": version} if version != -1 else {}
        return self._step(s, "delete", [path], lambda c: c.delete(path, version), **opts)

    def multi(self, ops: list[Op], *, s: Session | None = None) -> Any:
        return self._step(s, "multi", [ops], lambda c: c.commit(ops))

    def add_watch(self, path: str, watch: str, mode: AddWatchMode, *, s: Session | None = None) -> Any:
        w = self.watcher(watch, s or self.s1)
        return self._step(s, "add_watch", [path, mode], lambda c: c.add_watch(path, w, mode), watch=watch)

    def remove_watches(self, path: str, watcher_type: WatcherType, *, s: Session | None = None) -> Any:
        return self._step(s, "remove_watches", [path, watcher_type], lambda c: c.remove_watches(path, watcher_type))

    def ephemerals(self, prefix: str, *, s: Session | None = None) -> Any:
        return self._step(s, "get_ephemerals", [prefix], lambda c: c.get_ephemerals(prefix))

    def all_children_number(self, path: str, *, s: Session | None = None) -> Any:
        return self._step(s, "get_all_children_number", [path], lambda c: c.get_all_children_number(path))

    def sync(self, path: str, *, s: Session | None = None) -> Any:
        return self._step(s, "sync", [path], lambda c: c.sync(path))

    def last_zxid(self, *, s: Session | None = None) -> None:
        """A row with the session's lastZxidSeen (after a failed write: did it consume a zxid?)."""
        session = s or self.s1
        self.rows.append((f"{session.name}: last zxid seen", Zxid(session.last_zxid)))

    def close(self, s: Session) -> None:
        """Close session `s`: the server deletes its ephemerals in one closeSession txn."""
        self._pace()
        s.close()
        self._closed.add(s.name)
        self._last_write_ms = now_ms()
        self.rows.append((f"{s.name}: close session", "closed"))

    def events(self, when: str) -> None:
        """A row with the events each watching session got since the last such row, in arrival order."""
        live = [s for s in self.sessions if s.name not in self._closed]
        for s in live:
            s.settle()
        watching = sorted({name for name, _ in self._watchers})
        with self._lock:
            parts = []
            for name in watching:
                new = self._events[name][self._shown.get(name, 0) :]
                self._shown[name] = len(self._events[name])
                parts.append(f"{name}: {self._render_events(new)}")
        self.rows.append((f"events {when}", " | ".join(parts)))

    def _render_events(self, events: list[tuple[str, str, str]]) -> str:
        # One server event reaches several callbacks of a session one after the other; show it once with
        # the set of watchers it reached (kazoo calls them in set order). A watcher seen again starts a new event.
        groups: list[tuple[str, str, list[str]]] = []
        for watcher, event_type, path in events:
            last = groups[-1] if groups else None
            if last is not None and (last[0], last[1]) == (event_type, path) and watcher not in last[2]:
                last[2].append(watcher)
            else:
                groups.append((event_type, path, [watcher]))
        if not groups:
            return "none"
        return "; ".join(f"{t} {self.show(p)} {{{','.join(sorted(w))}}}" for t, p, w in groups)

    def finish(self) -> Rows:
        """Show the last events, close every session, and render the rows (zxids and times as ranks)."""
        try:
            if self._watchers:
                self.events("at end")
        finally:
            with self._lock:
                self._recording = False
            for s in self.sessions:
                if s.name not in self._closed:
                    with contextlib.suppress(Exception):  # closing is cleanup; the rows are the result
                        s.close()
        return self.render()

    # ---- rendering
    def render(self) -> Rows:
        zxids = sorted({v.value for _, o in self.rows for v in _walk(o) if isinstance(v, Zxid) and v.value})
        times = sorted({v.value for _, o in self.rows for v in _walk(o) if isinstance(v, Millis) and v.value})
        zxid_rank = {z: i for i, z in enumerate(zxids, start=1)}
        time_rank = {t: i for i, t in enumerate(times, start=1)}

        def text(value: Any) -> str:
            match value:
                case Zxid(z):
                    return f"z{zxid_rank[z]}" if z else "0"
                case Millis(t):
                    return f"t{time_rank[t]}" if t else "0"
                case Owner(o):
                    return self.session_ids.get(o, "another session") if o else "0"
                case StatView():
                    return (
                        f"{text(value.czxid)} {text(value.mzxid)} {text(value.pzxid)} {text(value.ctime)} "
                        f"{text(value.mtime)} v{value.version} cv{value.cversion} av{value.aversion} "
                        f"owner={text(value.owner)} len={value.data_length} kids={value.num_children}"
                    )
                case Written(v, z):
                    return f"{text(v)} @{text(z)}"
                case Raised(code):
                    return f"!{code}"  # a transaction's result for one op
                case str():
                    return repr(self.show(value)) if value.startswith("/") else value
                case list():
                    return "[" + ", ".join(text(v) for v in value) + "]"
                case tuple():
                    return "(" + ", ".join(text(v) for v in value) + ")"
                case _:
                    return repr(value)

        return [(label, f"raises {o.code}" if isinstance(o, Raised) else text(o)) for label, o in self.rows]


def run_script(backend: Backend, script: Callable[[Run], None], root: str, spread: bool = False) -> Rows:
    run = Run(backend, root, spread)
    try:
        script(run)
    finally:
        rows = run.finish()
    return rows


def difference_table(name: str, expected: Rows, actual: Rows, ref: str, sub: str) -> str:
    """Both transcripts side by side, differing rows marked `!=`."""
    header = ("", "step", ref, sub)
    lines: list[tuple[str, str, str, str]] = []
    differing = 0
    for i in range(max(len(expected), len(actual))):
        label_e, out_e = expected[i] if i < len(expected) else ("", "(no row)")
        label_a, out_a = actual[i] if i < len(actual) else ("", "(no row)")
        same = (label_e, out_e) == (label_a, out_a)
        differing += not same
        label = label_e if label_e == label_a else f"{label_e} / {label_a}"
        lines.append(("  " if same else "!=", label, out_e, out_a))
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(3)]
    text = [
        f"script {name}: {differing} of {len(lines)} rows differ",
        "stat: czxid mzxid pzxid ctime mtime v=version cv=cversion av=aversion owner len=dataLength kids=numChildren",
        "zN / tN: rank among the zxids / times this run saw (0 stays 0); @zN: the zxid of a write's reply",
    ]
    for row in [header, *lines]:
        text.append(" | ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)).rstrip())
    return "\n".join(text)


def assert_same_transcript(name: str, reference: Backend, subject: Backend, expected: Rows, actual: Rows) -> None:
    if expected != actual:
        raise AssertionError("\n" + difference_table(name, expected, actual, reference.label, subject.label))


# ---------------------------------------------------------------- the scripts (docs/research/quorum.md §1)

SCRIPTS: dict[str, Callable[[Run], None]] = {}


def script(func: Callable[[Run], None]) -> Callable[[Run], None]:
    SCRIPTS[func.__name__] = func
    return func


@script
def fresh_tree(r: Run) -> None:
    """§1.1: the built-in nodes of a server nobody has written to; all-zero stats, `stat /` cversion -1."""
    r.exists("/")
    r.children("/")
    r.exists("/zookeeper")
    r.children("/zookeeper")
    r.get("/zookeeper/quota")
    r.children("/zookeeper/quota")
    r.children("/zookeeper/config")
    r.all_children_number("/")
    r.all_children_number("/zookeeper")
    r.ephemerals("/")


@script
def fresh_config_node(r: Run) -> None:
    """§1.1: /zookeeper/config on a server nobody has written to."""
    r.get("/zookeeper/config")


# Run on each backend as soon as it serves, before any other script writes (Backend.fresh).
FRESH_SCRIPTS = ("fresh_tree", "fresh_config_node")


@script
def create_stats(r: Run) -> None:
    """§1.2 at create: czxid == mzxid == pzxid, ctime == mtime, the parent's cversion/pzxid/numChildren."""
    r.create(r.root)
    r.exists(r.root)
    r.create(r.p("a"), b"abc")
    r.exists(r.p("a"))
    r.exists(r.root)
    r.create(r.p("b"), include_data=True)
    r.get(r.root)
    r.get(r.p("a"))
    r.children(r.root, include_data=True)


@script
def set_stats(r: Run) -> None:
    """§1.2 setData: mzxid, mtime and version change; czxid, ctime, pzxid and the parent do not."""
    r.create(r.root)
    r.create(r.p("a"), b"v0")
    r.set(r.p("a"), b"v1")
    r.set(r.p("a"), b"v2", version=1)
    r.set(r.p("a"), b"x" * 100_000)
    r.set(r.p("a"), b"", version=-1)
    r.get(r.p("a"))
    r.exists(r.root)
    r.set(r.root, b"parent")
    r.exists(r.p("a"))
    r.exists(r.root)


@script
def delete_stats(r: Run) -> None:
    """§1.2: a child delete bumps the parent's visible cversion and sets its pzxid to the delete's zxid."""
    r.create(r.root)
    r.create(r.p("a"))
    r.create(r.p("b"))
    r.create(r.p("c"))
    r.delete(r.p("a"))
    r.exists(r.root)
    r.delete(r.p("b"), version=0)
    r.exists(r.root)
    r.create(r.p("d"))
    r.exists(r.root)
    r.children(r.root)


@script
def sequential_names(r: Run) -> None:
    """§1.2: the suffix is the parent's stored cversion, %010d: every child create counts, deletes do not."""
    r.create(r.root)
    r.create(r.p("n-"), sequence=True)
    r.create(r.p("n-"), sequence=True)
    r.create(r.p("plain"))
    r.create(r.p("n-"), sequence=True)
    r.create(r.p(""), sequence=True)  # "R/" + suffix: the path is validated after the suffix is added
    r.delete(r.p("n-0000000000"))
    r.create(r.p("n-"), sequence=True)
    r.create(r.p("e-"), ephemeral=True, sequence=True)
    r.create(r.p("sub"))
    r.create(r.p("sub", "x-"), b"data", sequence=True)
    r.children(r.root)
    r.exists(r.root)


@script
def ephemerals(r: Run) -> None:
    """§1.3: ephemeralOwner, NOCHILDRENFOREPHEMERALS, getEphemerals by string prefix, deletion at close."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("e"), b"mine", ephemeral=True)
    r.exists(r.p("e"))
    r.create(r.p("e", "child"))
    r.create(r.p("e", "child"), ephemeral=True)
    r.create(r.p("e", "seq-"), sequence=True)
    r.multi([t_create(r.p("e", "in-multi"))])
    r.exists(r.p("e"), s=s2)
    r.create(r.p("e2"), ephemeral=True, s=s2)
    r.create(r.p("p"))
    r.ephemerals("/")
    r.ephemerals(r.root)
    r.ephemerals(r.p("e"))  # a string prefix: R/e2 would match, but it is s2's
    r.ephemerals(r.p("e"), s=s2)
    r.ephemerals(r.p("p"))
    r.ephemerals("/no-such-prefix")
    r.close(r.s1)
    r.exists(r.p("e"), s=s2)
    r.exists(r.root, s=s2)
    r.children(r.root, s=s2)


@script
def session_close_is_one_txn(r: Run) -> None:
    """§1.7 closeSession deletes every ephemeral of the session under one zxid (each parent's pzxid)."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("a"))
    r.create(r.p("b"))
    r.create(r.p("a", "e"), ephemeral=True, s=s2)
    r.create(r.p("b", "e"), ephemeral=True, s=s2)
    r.create(r.p("b", "f-"), ephemeral=True, sequence=True, s=s2)
    r.close(s2)
    r.exists(r.p("a"))
    r.exists(r.p("b"))
    r.children(r.p("b"))
    r.ephemerals("/")


@script
def errors(r: Run) -> None:
    """§1.4: NONODE, NODEEXISTS, BADVERSION, NOTEMPTY from each operation."""
    r.create(r.root)
    r.create(r.p("a"), b"x")
    r.get(r.p("missing"))
    r.exists(r.p("missing"))
    r.children(r.p("missing"))
    r.set(r.p("missing"), b"x")
    r.delete(r.p("missing"))
    r.create(r.p("missing", "child"))
    r.create(r.p("a"))
    r.create(r.root)
    r.set(r.p("a"), b"y", version=5)
    r.set(r.p("a"), b"y", version=-2)
    r.delete(r.p("a"), version=5)
    r.create(r.p("a", "c"))
    r.delete(r.p("a"))
    r.delete(r.p("a"), version=5)  # NOTEMPTY or BADVERSION: which check comes first
    r.exists(r.p("a"))


@script
def failed_writes_consume_zxids(r: Run) -> None:
    """§1.5: a failed write is still a txn; its zxid comes back in the reply header."""
    r.create(r.root)
    r.create(r.root)
    r.last_zxid()
    r.set(r.root, b"x", version=9)
    r.last_zxid()
    r.delete(r.p("missing"))
    r.last_zxid()
    r.multi([t_create(r.p("x")), t_check(r.root, 7)])
    r.last_zxid()
    r.create(r.p("x"))
    r.exists(r.p("x"))


@script
def special_paths(r: Run) -> None:
    """§1.1: `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config` cannot be deleted (BADARGUMENTS)."""
    r.delete("/")
    r.delete("/zookeeper")
    r.delete("/zookeeper/quota")
    r.delete("/zookeeper/config")
    r.create("/zookeeper")
    r.create("/")
    r.get("/zookeeper")


@script
def zookeeper_config_is_read_only(r: Run) -> None:
    """§1.1: /zookeeper/config has ACL world:anyone READ (ZOOKEEPER-2014): no write, no child."""
    r.set("/zookeeper/config", b"x")
    r.create("/zookeeper/config/conformance-x")
    r.delete("/zookeeper/config/conformance-x")
    r.exists("/zookeeper/config")


@script
def writes_under_zookeeper(r: Run) -> None:
    """§1.1: "the token zookeeper is reserved", but what does the server do with a write under it?"""
    r.create("/zookeeper/conformance-x")
    r.delete("/zookeeper/conformance-x")
    r.set("/zookeeper/quota", b"q")
    r.set("/zookeeper/quota", b"", version=1)


@script
def invalid_paths_create(r: Run) -> None:
    """§1.1 path rules on create: the parent is looked up before the whole path is validated."""
    r.create(r.root)
    r.create(r.p("a"))
    r.create(r.root + "/")
    r.create(r.p("."))
    r.create(r.p(".."))
    r.create(r.p("a", "."))
    r.create(r.p("a", ".."))
    r.create(r.p("", "b"))  # R//b: the parent "R/" does not exist
    r.create(r.p(".", "b"))  # R/./b: parent "R/."
    r.create(r.p("a", "", "b"))
    r.create(r.p("nul\x00x"))
    r.create(r.p("ctl\x01x"))
    r.create(r.p("del\x7fx"))
    r.create(r.p("a.b"))  # '.' inside a name is fine
    r.create(r.p(".hidden"))
    r.create(r.p("..."))
    r.children(r.root)


@script
def invalid_paths_other_writes(r: Run) -> None:
    """§1.1 path rules on setData and delete (they validate differently from create)."""
    r.create(r.root)
    r.create(r.p("a"))
    r.set(r.root + "/", b"x")
    r.set(r.p("a", "."), b"x")
    r.set(r.p("", "a"), b"x")
    r.delete(r.root + "/")
    r.delete(r.p("a", "."))
    r.delete(r.p("", "a"))
    r.delete(r.p("nul\x00x"))
    r.multi([t_create(r.root + "/")])
    r.multi([t_create(r.p("", "b"))])


@script
def invalid_paths_reads(r: Run) -> None:
    """Reads of invalid paths: the server answers without validating (the Java client checks locally)."""
    r.create(r.root)
    r.get(r.root + "/")
    r.exists(r.p("", "a"))
    r.children(r.p(".", "a"))
    r.exists(r.p("a", ".."))


@script
def relative_paths(r: Run) -> None:
    """Writes of a path without a leading '/': BADARGUMENTS (no '/' at all: no parent to look up)."""
    r.create("a")
    r.set("a", b"x")
    r.delete("a")


@script
def relative_paths_looked_up(r: Run) -> None:
    """Paths without a leading '/' that the server looks up instead of validating, and a multi's result."""
    r.create("a/b")  # the parent "a" is looked up first
    r.get("a")
    r.exists("a")
    r.children("a")
    r.multi([t_create("a")])  # the error is the op's result, not the call's


@script
def multi_success(r: Run) -> None:
    """§1.6: one zxid for every op, later ops see earlier ones, results per op."""
    r.create(r.root)
    r.create(r.p("a"), b"0")
    r.multi(
        [
            t_create(r.p("b"), b"1"),
            t_create(r.p("s-"), sequence=True),
            t_set(r.p("a"), b"2", version=0),
            t_check(r.p("a"), 1),
            t_delete(r.p("b")),
            t_create(r.p("c"), ephemeral=True),
        ]
    )
    r.exists(r.p("a"))
    r.exists(r.p("c"))
    r.exists(r.root)
    r.children(r.root)
    r.multi([])


@script
def multi_failure(r: Run) -> None:
    """§1.6: ops before the failing one report OK, after it RUNTIMEINCONSISTENCY; nothing is applied."""
    r.create(r.root)
    r.create(r.p("a"))
    r.multi([t_create(r.p("x")), t_check(r.p("a"), 3), t_create(r.p("y"))])
    r.multi([t_delete(r.p("missing")), t_create(r.p("z"))])
    r.multi([t_create(r.p("p")), t_create(r.p("p"))])
    r.multi([t_create(r.p("e"), ephemeral=True), t_create(r.p("e", "c"))])
    r.multi([t_set(r.p("a"), b"x"), t_delete(r.p("a"), version=0), t_delete(r.root)])
    r.multi([t_create(r.p("q")), t_create(r.p("q", "r")), t_create(r.p("a"))])
    r.multi([t_create(r.root + "/")])
    r.multi([t_check(r.p("missing"), 0)])
    r.multi([t_check(r.p("a"), -1), t_delete(r.p("a")), t_check(r.p("a"), -1)])
    r.exists(r.root)
    r.exists(r.p("a"))
    r.children(r.root)


@script
def multi_with_an_op_of_no_operation(r: Run) -> None:
    """§1.6: a multi holding an op of no known type fails whole with MARSHALLINGERROR (the call's error, no
    per-op results: PrepRequestProcessor turns the failed MultiOperationRecord read into an error txn)."""
    r.create(r.root)
    r.multi([t_create(r.p("x")), t_no_operation()])
    r.multi([t_no_operation()])
    r.exists(r.p("x"))
    r.children(r.root)


@script
def counts(r: Run) -> None:
    """getAllChildrenNumber counts every descendant; getChildren with the node's stat."""
    r.create(r.root)
    r.create(r.p("a"))
    r.create(r.p("a", "b"))
    r.create(r.p("a", "b", "c"))
    r.create(r.p("d"), ephemeral=True)
    r.all_children_number(r.root)
    r.all_children_number(r.p("a"))
    r.all_children_number(r.p("d"))
    r.all_children_number(r.p("missing"))
    r.children(r.p("a"), include_data=True)
    r.children(r.p("d"))
    r.sync(r.root)
    r.sync(r.p("missing"))


@script
def watch_node_created(r: Run) -> None:
    """§1.8 create P: exists watches on P get NodeCreated, child watches on the parent NodeChildrenChanged."""
    s2 = r.connect()
    r.create(r.root)
    r.exists(r.p("p"), watch="exists", s=s2)
    r.children(r.root, watch="children", s=s2)
    r.create(r.p("p"), b"x")
    r.events("after create R/p")
    r.create(r.p("q"))  # one-shot: both watches are gone
    r.delete(r.p("p"))
    r.events("after create R/q, delete R/p")


@script
def watch_node_deleted(r: Run) -> None:
    """§1.8 delete P: data and child watches on P get one NodeDeleted each, the parent's NodeChildrenChanged."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("p"))
    r.get(r.p("p"), watch="get", s=s2)
    r.exists(r.p("p"), watch="exists", s=s2)
    r.children(r.p("p"), watch="p-children", s=s2)
    r.children(r.root, watch="r-children", s=s2)
    r.delete(r.p("p"))
    r.events("after delete R/p")
    r.create(r.p("p"))
    r.events("after create R/p again")


@script
def watch_node_data_changed(r: Run) -> None:
    """§1.8 setData P: data watches (get, exists) get NodeDataChanged; child watches on P do not."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("p"))
    r.get(r.p("p"), watch="get", s=s2)
    r.exists(r.p("p"), watch="exists", s=s2)
    r.children(r.p("p"), watch="children", s=s2)
    r.set(r.p("p"), b"1")
    r.events("after set R/p")
    r.set(r.p("p"), b"2")  # one-shot: no second NodeDataChanged
    r.create(r.p("p", "c"))
    r.events("after set R/p again, create R/p/c")
    r.set(r.p("p"), b"3")
    r.delete(r.p("p", "c"))
    r.events("after everything fired once")


@script
def watch_not_fired(r: Run) -> None:
    """§1.8: changes a watch does not cover (grandchildren, a child's data, the parent's data)."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("a"))
    r.create(r.p("a", "b"))
    r.children(r.root, watch="r-children", s=s2)
    r.get(r.p("a"), watch="a-data", s=s2)
    r.set(r.p("a", "b"), b"x")
    r.create(r.p("a", "b", "c"))
    r.create(r.p("a", "d"))
    r.set(r.root, b"x")
    r.events("after changes no watch covers")
    r.set(r.p("a"), b"y")
    r.create(r.p("z"))
    r.events("after changes they cover")


@script
def watch_not_set_on_missing_node(r: Run) -> None:
    """§1.8: get and get_children on a missing node raise NONODE and leave no watch; exists leaves one."""
    s2 = r.connect()
    r.create(r.root)
    r.get(r.p("m"), watch="get", s=s2)
    r.children(r.p("m"), watch="children", s=s2)
    r.exists(r.p("n"), watch="exists", s=s2)
    r.create(r.p("m"))
    r.create(r.p("m", "c"))
    r.set(r.p("m"), b"x")
    r.delete(r.p("m", "c"))
    r.delete(r.p("m"))
    r.create(r.p("n"))
    r.events("after create/set/delete")


@script
def watch_own_writes(r: Run) -> None:
    """A session's own write fires its own watches (the event comes before the write's reply)."""
    r.create(r.root)
    r.exists(r.p("p"), watch="exists")
    r.children(r.root, watch="children")
    r.create(r.p("p"))
    r.get(r.p("p"), watch="get")
    r.set(r.p("p"), b"x")
    r.exists(r.p("p"), watch="exists")
    r.delete(r.p("p"))
    r.events("after own writes")


@script
def watch_session_close(r: Run) -> None:
    """§1.7 closeSession deletes the ephemerals: NodeDeleted, then the parent's NodeChildrenChanged."""
    s2 = r.connect()
    s3 = r.connect()
    r.create(r.root)
    r.create(r.p("e"), ephemeral=True, s=s2)
    r.exists(r.p("e"), watch="exists", s=s3)
    r.children(r.root, watch="children", s=s3)
    r.close(s2)
    r.events("after s2 closed")
    r.exists(r.p("e"), s=s3)
    r.exists(r.root, s=s3)


@script
def watch_multi(r: Run) -> None:
    """§1.6/§1.8: a multi fires the events of each op, in op order; a failed multi fires none."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("a"))
    r.children(r.root, watch="children", s=s2)
    r.get(r.p("a"), watch="a-data", s=s2)
    r.exists(r.p("b"), watch="b-exists", s=s2)
    r.multi([t_create(r.p("x")), t_set(r.p("a"), b"x"), t_check(r.p("a"), 0)])
    r.events("after a failed multi")
    r.multi([t_create(r.p("b")), t_set(r.p("a"), b"x"), t_delete(r.p("b"))])
    r.events("after a multi")


@script
def watch_persistent(r: Run) -> None:
    """§1.8 addWatch PERSISTENT: Created/Deleted/DataChanged/ChildrenChanged for the path, kept after firing."""
    s2 = r.connect()
    r.create(r.root)
    r.add_watch(r.p("p"), "persistent", AddWatchMode.PERSISTENT, s=s2)
    r.create(r.p("p"))
    r.set(r.p("p"), b"1")
    r.set(r.p("p"), b"2")
    r.create(r.p("p", "c"))
    r.set(r.p("p", "c"), b"x")
    r.delete(r.p("p", "c"))
    r.delete(r.p("p"))
    r.create(r.p("p"))
    r.create(r.p("q"))
    r.events("after changes")


@script
def watch_persistent_recursive(r: Run) -> None:
    """§1.8 PERSISTENT_RECURSIVE: Created/Deleted/DataChanged for the subtree, never NodeChildrenChanged."""
    s2 = r.connect()
    r.create(r.root)
    r.add_watch(r.root, "recursive", AddWatchMode.PERSISTENT_RECURSIVE, s=s2)
    r.create(r.p("a"))
    r.create(r.p("a", "b"))
    r.set(r.p("a", "b"), b"x")
    r.set(r.root, b"y")
    r.delete(r.p("a", "b"))
    r.delete(r.p("a"))
    r.multi([t_create(r.p("m")), t_create(r.p("m", "n"))])
    r.events("after changes")


@script
def watch_persistent_and_one_shot(r: Run) -> None:
    """A persistent and a one-shot watch on one path: the first change reaches both, the second one."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("p"))
    r.add_watch(r.p("p"), "persistent", AddWatchMode.PERSISTENT, s=s2)
    r.get(r.p("p"), watch="get", s=s2)
    r.children(r.p("p"), watch="children", s=s2)
    r.set(r.p("p"), b"1")
    r.set(r.p("p"), b"2")
    r.create(r.p("p", "c"))
    r.create(r.p("p", "d"))
    r.events("after changes")


@script
def remove_watches(r: Run) -> None:
    """§1.8 removeWatches: the removed watch fires no more; nothing to remove is NOWATCHER."""
    s2 = r.connect()
    r.create(r.root)
    r.create(r.p("p"))
    r.add_watch(r.p("p"), "persistent", AddWatchMode.PERSISTENT, s=s2)
    r.remove_watches(r.p("p"), WatcherType.PERSISTENT, s=s2)
    r.remove_watches(r.p("p"), WatcherType.PERSISTENT, s=s2)
    r.get(r.p("p"), watch="get", s=s2)
    r.remove_watches(r.p("p"), WatcherType.DATA, s=s2)
    r.children(r.p("p"), watch="children", s=s2)
    r.remove_watches(r.p("p"), WatcherType.CHILDREN, s=s2)
    r.add_watch(r.root, "recursive", AddWatchMode.PERSISTENT_RECURSIVE, s=s2)
    r.remove_watches(r.root, WatcherType.PERSISTENT_RECURSIVE, s=s2)
    r.remove_watches(r.p("missing"), WatcherType.ANY, s=s2)
    r.remove_watches(r.p("p"), WatcherType.CHILDREN, s=s2)
    r.set(r.p("p"), b"x")
    r.create(r.p("p", "c"))
    r.create(r.p("q"))
    r.events("after changes")
    r.get(r.p("p"), watch="get", s=s2)
    r.children(r.p("p"), watch="children", s=s2)
    r.remove_watches(r.p("p"), WatcherType.ANY, s=s2)
    r.set(r.p("p"), b"y")
    r.delete(r.p("p", "c"))
    r.events("after ANY removed both")


# Scripts that also run with their sessions spread over the servers (s1 on server 1, s2 on 2, s3 on 3)
# against a 3-node ZooKeeper ensemble; the rest touch shared paths or repeat nothing new.
SPREAD_SCRIPTS = (
    "fresh_tree",
    "fresh_config_node",
    "create_stats",
    "delete_stats",
    "sequential_names",
    "ephemerals",
    "session_close_is_one_txn",
    "multi_success",
    "multi_failure",
    "watch_node_created",
    "watch_node_deleted",
    "watch_node_data_changed",
    "watch_session_close",
    "watch_multi",
    "watch_persistent",
    "watch_persistent_recursive",
)

# script -> how zkraft differs from ZooKeeper 3.9 (found by these runs); each makes its script xfail(strict=True).
_CONFIG_ACL = (
    "/zookeeper/config: ZooKeeper gives it ACL world:anyone READ at start (DataTree constructor, setACL with "
    "version -1, which is also why its aversion reads -1)"
)
# zkraft's conformance cluster has three nodes, the reference ZooKeeper one: an ensemble's /zookeeper/config holds
# its dynamic configuration, where a standalone server's is empty (the ensemble comparison covers it).
_ENSEMBLE_CONFIG = (
    "/zookeeper/config of zkraft's 3 nodes holds the ensemble's configuration (server.N lines, version=0; "
    "dataVersion -1, mtime set); a standalone ZooKeeper's is empty with an all-zero stat"
)
KNOWN_DIFFERENCES: dict[str, str] = {
    "fresh_config_node": _ENSEMBLE_CONFIG,
    "zookeeper_config_is_read_only": _ENSEMBLE_CONFIG,
    "relative_paths_looked_up": (
        "paths without a leading '/': the ZooKeeper server answers create 'a/b', getData/getChildren 'a' with "
        "NONODE, exists 'a' with null, and a multi creating 'a' with the op result BADARGUMENTS; ZkClient, like "
        "ZooKeeper's Java client (PathUtils.validatePath), rejects them client-side with BadArgumentsError"
    ),
}
# The same through kazoo on zkraft's client ports (no client-side path checks in between).
KNOWN_WIRE_DIFFERENCES: dict[str, str] = {
    "fresh_config_node": _ENSEMBLE_CONFIG,
    "zookeeper_config_is_read_only": _ENSEMBLE_CONFIG,
}
KNOWN_SPREAD_DIFFERENCES: dict[str, str] = {
    "fresh_config_node": (
        "/zookeeper/config's server lines: each ensemble's own ports; zkraft's electionPort is 0 (one port "
        "carries Raft; ZooKeeper's parser refuses it twice) and its lines end with ';host:clientPort', which "
        "ZooKeeper leaves out for a clientPort given in the static configuration"
    ),
}


def script_params(names: Sequence[str], known: dict[str, str]) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=known[name])) if name in known else name
        for name in names
    ]


# ---------------------------------------------------------------- fixtures and tests


def _on_client_loop(coro: Any, timeout_s: float) -> Any:
    """Run a harness coroutine on the ZkClients' loop (one gRPC asyncio loop per process)."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout_s)


def _wait_config_announced(cluster: QuorumProcesses) -> None:
    """Until /zookeeper/config shows every member's client address.

    Each member announces its own once it serves (zkemu.config_announcer), so a quorum that has just elected a
    leader may still read an empty /zookeeper/config; the fresh state of an ensemble is the one after.
    """
    zk = KazooClient(hosts=cluster.zk_address(1), timeout=START_TIMEOUT_S)
    zk.start(START_TIMEOUT_S)
    try:

        def announced() -> bool:
            zk.sync("/zookeeper/config")
            lines = zk.get("/zookeeper/config")[0].decode().splitlines()
            servers = [line for line in lines if line.startswith("server.")]
            return len(servers) == len(cluster.addresses) and all(";" in line for line in servers)

        wait_until(
            announced, START_TIMEOUT_S, interval_s=0.1, message="/zookeeper/config lacks a member's client address"
        )
    finally:
        zk.stop()
        zk.close()


def _with_fresh_tree(backend: Backend) -> Backend:
    for name in FRESH_SCRIPTS:
        backend.fresh[name] = run_script(backend, SCRIPTS[name], root=f"/unused-{name}")
    return backend


def _transcripts(name: str, reference: Backend, subject: Backend, root: str, spread: bool) -> tuple[Rows, Rows]:
    if name in FRESH_SCRIPTS:
        return reference.fresh[name], subject.fresh[name]
    expected = run_script(reference, SCRIPTS[name], root=root, spread=spread)
    return expected, run_script(subject, SCRIPTS[name], root=root, spread=spread)


@pytest.fixture(scope="module")
def zkraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """A 3-node zkraft quorum serving the ZooKeeper service; sessions go to node 1 (unless spread)."""
    with QuorumProcesses(tmp_path_factory.mktemp("zkraft"), n=3, properties=ZKRAFT_PROPERTIES) as cluster:
        cluster.start_all()
        _on_client_loop(wait_for_leader(cluster.addresses, timeout_s=START_TIMEOUT_S), START_TIMEOUT_S + 5)
        _wait_config_announced(cluster)
        hosts = [cluster.addresses[node_id] for node_id in sorted(cluster.addresses)]
        yield _with_fresh_tree(Backend("zkraft 3 nodes + ZkClient", hosts, ZkraftSession))


@pytest.fixture(scope="module")
def zkraft_kazoo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """A 3-node zkraft quorum driven by kazoo through its ZooKeeper client ports (the jute wire protocol)."""
    with QuorumProcesses(tmp_path_factory.mktemp("zkraft-kazoo"), n=3, properties=ZKRAFT_PROPERTIES) as cluster:
        cluster.start_all()
        _on_client_loop(wait_for_leader(cluster.addresses, timeout_s=START_TIMEOUT_S), START_TIMEOUT_S + 5)
        _wait_config_announced(cluster)
        hosts = [cluster.zk_address(node_id) for node_id in sorted(cluster.addresses)]
        yield _with_fresh_tree(Backend("zkraft 3 nodes + kazoo (ZooKeeper wire)", hosts, KazooSession))


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Apache ZooKeeper standalone, from pyspark's jars."""
    with RealZooKeeper(tmp_path_factory.mktemp("zookeeper")) as server:
        server.start_all()
        server.wait_serving(START_TIMEOUT_S)
        label = f"ZooKeeper {server.version} standalone + kazoo"
        yield _with_fresh_tree(Backend(label, list(server.addresses.values()), KazooSession))


@pytest.fixture(scope="module")
def zookeeper_for_wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Another standalone ZooKeeper for the kazoo-on-zkraft runs: some scripts change /zookeeper, which
    every script shares, so each subject is compared with a ZooKeeper that saw the same scripts only."""
    with RealZooKeeper(tmp_path_factory.mktemp("zookeeper-wire")) as server:
        server.start_all()
        server.wait_serving(START_TIMEOUT_S)
        label = f"ZooKeeper {server.version} standalone + kazoo"
        yield _with_fresh_tree(Backend(label, list(server.addresses.values()), KazooSession))


@pytest.fixture(scope="module")
def zookeeper_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Apache ZooKeeper, 3 QuorumPeerMain peers on loopback."""
    with RealZooKeeper(tmp_path_factory.mktemp("zookeeper-ensemble"), n=3) as ensemble:
        ensemble.start_all()
        ensemble.wait_serving(START_TIMEOUT_S)
        hosts = [ensemble.addresses[node_id] for node_id in sorted(ensemble.addresses)]
        yield _with_fresh_tree(Backend(f"ZooKeeper {ensemble.version} 3 nodes + kazoo", hosts, KazooSession))


@pytest.mark.parametrize("name", script_params(list(SCRIPTS), KNOWN_DIFFERENCES))
def test_script_matches_zookeeper(name: str, zookeeper: Backend, zkraft: Backend) -> None:
    expected, actual = _transcripts(name, zookeeper, zkraft, root=f"/c-{name}", spread=False)
    assert_same_transcript(name, zookeeper, zkraft, expected, actual)


@pytest.mark.parametrize("name", script_params(list(SCRIPTS), KNOWN_WIRE_DIFFERENCES))
def test_script_through_kazoo_on_the_wire_matches_zookeeper(
    name: str, zookeeper_for_wire: Backend, zkraft_kazoo: Backend
) -> None:
    """The same scripts with kazoo on zkraft's client ports: the wire protocol answers as ZooKeeper's."""
    expected, actual = _transcripts(name, zookeeper_for_wire, zkraft_kazoo, root=f"/k-{name}", spread=False)
    assert_same_transcript(name, zookeeper_for_wire, zkraft_kazoo, expected, actual)


@pytest.mark.parametrize("name", script_params(SPREAD_SCRIPTS, KNOWN_SPREAD_DIFFERENCES))
def test_script_matches_zookeeper_ensemble_with_sessions_on_different_servers(
    name: str, zookeeper_ensemble: Backend, zkraft: Backend
) -> None:
    expected, actual = _transcripts(name, zookeeper_ensemble, zkraft, root=f"/spread-{name}", spread=True)
    assert_same_transcript(name, zookeeper_ensemble, zkraft, expected, actual)


def _delete_with_one_callback_on_both_tables(backend: Backend, root: str) -> tuple[str, list[tuple[int, str]]]:
    """s2 watches `root` through get and get_children with one callback; s1 deletes it.

    Returns s2's events row and, for kazoo, the watch events the server actually sent to s2.
    """
    r = Run(backend, root)
    s2 = r.connect()
    try:
        r.create(root)
        r.get(root, watch="w", s=s2)
        r.children(root, watch="w", s=s2)
        r.delete(root)
        r.events("after delete")
    finally:
        rows = r.finish()
    frames = [frame for frame in getattr(s2, "frames", []) if frame[1] == root]
    return rows[-2][1], frames


def test_one_callback_on_data_and_child_watch_is_called_once_per_event(zookeeper: Backend, zkraft: Backend) -> None:
    """§1.8 delete P: the server sends one NodeDeleted per connection and a watcher is called once.

    DataTree.deleteNode hands the watchers the data table notified to the child table as `processed`, so
    ZooKeeper sends one frame; the Java client calls a Watcher object once per event (ZKWatchManager
    collects a Set), and so does ZkClient. kazoo 2.11 is not the reference here: it calls a callback once
    per table it sits in (twice), so this compares ZkClient with the frames the real server sent.
    """
    root = "/c-one-callback"
    kazoo_events, frames = _delete_with_one_callback_on_both_tables(zookeeper, root)
    ours, _ = _delete_with_one_callback_on_both_tables(zkraft, root)
    assert frames == [(2, root)], f"ZooKeeper sent {frames} (kazoo called back: {kazoo_events})"
    assert ours == "s2: DELETED R {w}", f"ZkClient called back: {ours}; ZooKeeper sent one NodeDeleted"
