"""The replicated znode tree: ZooKeeper's DataTree as a deterministic state machine in LMDB.

Each committed log entry carries one serialized `zk_pb2.Txn`; its zxid is the
entry's index and its time the leader's stamp (`Txn.time_ms`), never the local
clock, so every replica that applies the same entries holds the same state
(`digest()` is equal). Checks follow `PrepRequestProcessor` (order of errors
included) and effects follow `DataTree` (research §1.2-§1.8). A failed write
still consumes its zxid and changes nothing.

Storage, one LMDB environment written without fsync like `RegisterMap` (the
Raft log is the durable record; `sync()` runs before the log is compacted):

* `nodes`: path -> persisted stat (`_NODE`) + data. `num_children` is kept as a
  counter, `cversion` is the *stored* count of child creates;
* `children`: parent + b"\\0" + name -> b"": sorted child listings by prefix
  scan (NUL cannot occur in a valid path, so parents never interleave);
* `ephemerals`: session id (8 bytes) + path -> b"";
* `sessions`: session id -> timeout (ms), then the id of the client connection that owns the session
  (8 bytes, absent in records written before owners were kept: such a session fences nothing until
  its next attach);
* `containers`: path -> b"" for every container and TTL node (DataTree's containers and
  ttls sets), so that the leader's sweep (zkemu.container_manager) never scans the tree;
* `acls`: path -> the node's ACL (zkemu.acl.encode) when it is not the default
  (`acl.default_acl`): a node without a record is open to everyone, so trees
  written before ACLs existed need no migration and a default create writes
  nothing more. The checks run here, at apply, from the ids the write carries
  (`Txn.auth`), as ZooKeeper's leader runs them in PrepRequestProcessor, so every
  replica decides alike;
* `nulls`: path -> b"" for every node whose data is null rather than empty
  (ZooKeeper keeps the two apart: a ZooKeeper-wire client that created a node
  with a null buffer reads null back, and Kafka takes null as "never
  written"); only ever touched for nodes with no data;
* `meta`: format version, applied index and the term of its entry.

Single operations check everything before their first write; a multi runs
in a nested LMDB transaction that is aborted when one of its ops fails.
Entries not committed yet may be applied ahead (`prepare`) in a write
transaction that `apply` commits if it gets exactly those entries, and aborts
otherwise.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, BinaryIO, cast

import lmdb
import structlog
from google.protobuf.message import DecodeError

from quorum.facade import (
    Entry,
    EntryKind,
    entry_configuration,
    invariant,
    is_damage,
    mark_damaged,
    set_aside_if_damaged,
)
from zkemu import acl as acls
from zkemu.config_text import ConfigTextError, configuration_text, parse_config, render
from zkemu.ephemeral_type import CONTAINER_OWNER, TTL_MS_MAX, NodeKind, client_owner, kind_of, ttl_of, ttl_owner
from zkemu.errors import (
    BadArgumentsError,
    BadVersionError,
    Code,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SessionMovedError,
    UnimplementedError,
    ZkError,
    message_for,
)
from zkemu.events import EventType, WatchTrigger
from zkemu.paths import CONFIG_PATH, QUOTA_PATH, ROOT, SPECIAL_PATHS, ZOOKEEPER_PATH, parent_of, validate_path
from zkemu.stat import Stat
from zkraft_proto import zk_pb2

__all__ = [
    "DATA_BYTES_MAX",
    "PATH_BYTES_MAX",
    "AppliedTxn",
    "TreeFormatError",
    "TreeSnapshotError",
    "WatchTrigger",
    "ZnodeTree",
    "check_data_length",
]

FORMAT_VERSION = 1
DATA_BYTES_MAX = 1 << 20  # ZooKeeper's jute.maxbuffer order of magnitude: 1 MiB per znode
_LMDB_KEY_BYTES_MAX = 511
_SESSION_KEY_BYTES = 8
# The longest key is an ephemerals-index key: 8 bytes of session id + the path.
PATH_BYTES_MAX = _LMDB_KEY_BYTES_MAX - _SESSION_KEY_BYTES
SNAPSHOT_CHUNK_BYTES = 1 << 20
# The start-up check of the environment, run in a child process (quorum.state_check).
TREE_CHECKER = "zkemu.tree_check:check_tree"

_INT32_MAX = 2**31 - 1

# Persisted stat: czxid, mzxid, ctime, mtime, version, cversion (stored), aversion,
# ephemeral_owner, pzxid, num_children. Data follows.
_NODE = struct.Struct(">qqqqiiiqqi")
_HDR = _NODE.size
_CZXID, _MZXID, _CTIME, _MTIME, _VERSION, _CVERSION, _AVERSION, _OWNER, _PZXID, _NCHILDREN = range(10)
_SID = struct.Struct(">q")
_TIMEOUT = struct.Struct(">i")
_SESSION_RECORD = struct.Struct(">iQ")  # timeout (ms), owning connection (Txn.connection)
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")

_META_FORMAT = b"format"
_META_APPLIED = b"applied_index"
# The term of the entry at the applied index, in the same transaction (StateMachine.applied_term); absent
# in a tree written before it was stored.
_META_APPLIED_TERM = b"applied_term"

# Snapshot framing: header, records (tag, key length, value length, key, value), end record with a
# count and a crc32 of every record byte before it.
_SNAP_MAGIC = b"ZKTREE\x00\x00"
_SNAP_HEADER = struct.Struct(">8sIQ")
_SNAP_RECORD = struct.Struct(">BHI")
_SNAP_END = struct.Struct(">QI")
_TAG_END = 0
_TAG_NODES, _TAG_CHILDREN, _TAG_EPHEMERALS, _TAG_SESSIONS = 1, 2, 3, 4
_TAG_ACLS = 5
_TAG_CONTAINERS = 6
_TAG_NULLS = 7

# CreateMode -> (ephemeral, sequential): PERSISTENT, EPHEMERAL, PERSISTENT_SEQUENTIAL, EPHEMERAL_SEQUENTIAL,
# CONTAINER, PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL.
_CREATE_MODES = {0: (0, 0), 1: (1, 0), 2: (0, 2), 3: (1, 2), 4: (0, 0), 5: (0, 0), 6: (0, 2)}
_MODE_CONTAINER = 4
_TTL_MODES = frozenset({5, 6})
_SESSION_BODIES = frozenset({"create_session", "close_session"})
_NO_IDS: tuple[acls.Id, ...] = ()


class TreeFormatError(ValueError):
    """The LMDB environment holds a tree of another format version."""


class TreeSnapshotError(ValueError):
    """A snapshot file is not a tree snapshot of this format, is truncated, or fails its checksum."""


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: quorum/raft/types.py says why
class AppliedTxn:
    """What one applied log entry did, for the session layer (watches, session tracking, forwarded writes).

    `result` is the same TxnResult whose serialized form `apply` returned; treat it as read-only.
    """

    zxid: int
    session_id: int
    triggers: tuple[WatchTrigger, ...]
    created_session: int | None
    closed_session: int | None
    result: zk_pb2.TxnResult
    forward_tag: int = 0  # Txn.forward_tag: the follower that forwarded it answers its client (forwarded_writes.py)


def check_data_length(path: str, data: bytes) -> None:
    """Raise BadArgumentsError, naming the size, for data over 1 MiB."""
    if len(data) > DATA_BYTES_MAX:
        raise BadArgumentsError(f"data of {len(data)} bytes for {path} exceeds the limit of {DATA_BYTES_MAX} bytes")


_CONFIG_KEY = CONFIG_PATH.encode()


def _server_lines(text: str) -> str:
    """/zookeeper/config's text without its `version=` line: the members it shows."""
    return text.rpartition("version=")[0]


def _config_clients(text: str) -> dict[int, str]:
    """The client addresses /zookeeper/config's text shows ({} for an empty or unreadable text)."""
    try:
        return parse_config(text).clients()
    except ConfigTextError:
        return {}


def _i32(value: int) -> int:
    """Java int arithmetic: wrap to a signed 32-bit value."""
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def _child_key(key: bytes) -> bytes:
    """children-index key of a node: its parent's path, NUL, its name."""
    slash = key.rfind(b"/")
    return (key[:slash] or b"/") + b"\0" + key[slash + 1 :]


def _stat_pb(h: tuple[int, ...], data_length: int) -> zk_pb2.Stat:
    return zk_pb2.Stat(
        czxid=h[_CZXID],
        mzxid=h[_MZXID],
        ctime=h[_CTIME],
        mtime=h[_MTIME],
        version=h[_VERSION],
        cversion=_i32(2 * h[_CVERSION] - h[_NCHILDREN]),  # DataNode.copyStat
        aversion=h[_AVERSION],
        ephemeral_owner=h[_OWNER] if h[_OWNER] >= 0 else client_owner(h[_OWNER]),  # no call on the common path
        data_length=data_length,
        num_children=h[_NCHILDREN],
        pzxid=h[_PZXID],
    )


def _stat(h: tuple[int, ...], data_length: int) -> Stat:
    return Stat(
        h[_CZXID],
        h[_MZXID],
        h[_CTIME],
        h[_MTIME],
        h[_VERSION],
        _i32(2 * h[_CVERSION] - h[_NCHILDREN]),
        h[_AVERSION],
        h[_OWNER] if h[_OWNER] >= 0 else client_owner(h[_OWNER]),
        data_length,
        h[_NCHILDREN],
        h[_PZXID],
    )


def _path_key(path: str) -> bytes:
    key = path.encode()
    if len(key) > PATH_BYTES_MAX:
        raise BadArgumentsError(f"path too long: {len(key)} bytes in UTF-8, at most {PATH_BYTES_MAX} allowed")
    return key


def _acl_of_op(entries: Sequence[zk_pb2.Acl]) -> tuple[acls.Acl, ...]:
    return tuple(acls.Acl(e.perms, e.id.scheme, e.id.id) for e in entries)


def _check_version(expected: int, current: int, path: str) -> None:
    if expected != -1 and expected != current:
        raise BadVersionError(message_for(Code.BADVERSION, path))


class _Write:
    """The state of one transaction being applied."""

    __slots__ = (
        "txn",
        "zxid",
        "time_ms",
        "session_id",
        "triggers",
        "created_session",
        "closed_session",
        "dirty",
        "auth",
    )

    def __init__(self, txn: lmdb.Transaction, zxid: int, time_ms: int, session_id: int) -> None:
        self.txn = txn
        self.zxid = zxid
        self.time_ms = time_ms
        self.session_id = session_id
        self.triggers: list[WatchTrigger] = []
        self.created_session: int | None = None
        self.closed_session: int | None = None
        self.dirty = False  # set by the first write of a single op: a ZkError after it would be a bug
        self.auth: Sequence[zk_pb2.Id] = ()  # Txn.auth: the session's ids when it sent the write

    def ids(self) -> tuple[acls.Id, ...]:
        """The writer's ids, decoded only when a node's ACL is not the default."""
        return tuple(acls.Id(i.scheme, i.id) for i in self.auth)


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: quorum/raft/types.py says why
class _Prepared:
    """Entries applied in a write transaction not committed yet (ZnodeTree.prepare)."""

    entries: tuple[Entry, ...]
    txn: lmdb.Transaction
    results: list[bytes]
    done: list[AppliedTxn]


class ZnodeTree:
    """The znode tree as the quorum's state machine (quorum.state_machine.StateMachine).

    Threading: `apply`, `restore` and the reads run on one thread (the node's
    event loop); reads see the state as of the last `apply` batch.
    `on_applied` is called once per applied NORMAL entry, in log order, after
    the batch is committed and before `apply` returns, so a callback that reads
    the tree sees at least that entry's effect.
    """

    prepares_ahead = True  # `prepare` applies entries in a write transaction left open

    def __init__(
        self,
        path: Path,
        on_applied: Callable[[AppliedTxn], None] | None = None,
        map_size_bytes: int = 4 << 30,
        log: Any = None,
    ) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._path = path
        # A damaged environment is moved aside and this tree starts empty: the node restores it
        # from a snapshot and its log (quorum.state_check, QuorumNode._open_state_machine).
        self.rebuilt = set_aside_if_damaged(path, TREE_CHECKER, log or structlog.get_logger("zkemu.tree"))
        self._env = lmdb.open(str(path), map_size=map_size_bytes, max_dbs=10, sync=False, metasync=False)
        invariant(self._env.max_key_size() >= _LMDB_KEY_BYTES_MAX, "LMDB built with keys shorter than 511 bytes")
        self._on_applied = on_applied
        self._prepared: _Prepared | None = None  # entries applied ahead of their commit (prepare)
        self._nodes = self._env.open_db(b"nodes")
        self._children = self._env.open_db(b"children")
        self._ephemerals = self._env.open_db(b"ephemerals")
        self._sessions = self._env.open_db(b"sessions")
        self._containers = self._env.open_db(b"containers")  # absent in a tree written before it: created empty
        self._meta = self._env.open_db(b"meta")
        self._acls = self._env.open_db(b"acls")
        self._nulls = self._env.open_db(b"nulls")  # absent in a tree written before it: created empty
        self._tagged_dbs = (
            (_TAG_NODES, self._nodes),
            (_TAG_CHILDREN, self._children),
            (_TAG_EPHEMERALS, self._ephemerals),
            (_TAG_SESSIONS, self._sessions),
            (_TAG_CONTAINERS, self._containers),
            (_TAG_ACLS, self._acls),
            (_TAG_NULLS, self._nulls),
        )
        with self._env.begin(write=True) as txn:
            fmt = txn.get(_META_FORMAT, db=self._meta)
            if fmt is None:
                self._init_empty(txn, applied=0)
            elif (stored := _U32.unpack(fmt)[0]) != FORMAT_VERSION:
                raise TreeFormatError(f"{path}: tree format {stored}, this version reads {FORMAT_VERSION}")
            self._applied = self._applied_in(txn)
            self._applied_term = self._applied_term_in(txn, self._applied)
            self._acls_present = self._any_acl_in(txn)
            self._nulls_present = self._any_null_in(txn)

    def _init_empty(self, txn: lmdb.Transaction, applied: int) -> None:
        """The built-in nodes, all-zero stats, identical on every replica (DataTree constructor)."""
        children = {ROOT: 1, ZOOKEEPER_PATH: 2, QUOTA_PATH: 0, CONFIG_PATH: 0}
        for p, n in children.items():
            key = p.encode()
            # ZooKeeper gives /zookeeper/config a read-only ACL at start-up, which
            # leaves its stored ACL version at -1 (ZOOKEEPER-2014).
            aversion = -1 if p == CONFIG_PATH else 0
            txn.put(key, _NODE.pack(0, 0, 0, 0, 0, 0, aversion, 0, 0, n), db=self._nodes)
            if p != ROOT:
                txn.put(_child_key(key), b"", db=self._children)
        txn.put(_META_FORMAT, _U32.pack(FORMAT_VERSION), db=self._meta)
        txn.put(_META_APPLIED, _U64.pack(applied), db=self._meta)
        txn.put(_META_APPLIED_TERM, _U64.pack(0), db=self._meta)

    # ------------------------------------------------------------ state machine
    def applied_index(self) -> int:
        return self._applied

    def applied_term(self) -> int | None:
        return self._applied_term

    def apply(self, entries: Sequence[Entry]) -> list[bytes]:
        """Apply committed entries in order; one serialized TxnResult per entry (b"" for no-ops)."""
        if not entries:
            return []
        results: list[bytes] = []
        try:
            prepared = self._take_prepared(entries)
            if prepared is not None:
                prepared.txn.commit()
                results = self._applied_now(prepared.entries[-1], prepared.done, prepared.results)
                entries = entries[len(prepared.entries) :]
                if not entries:
                    return results
            with self._env.begin(write=True) as txn:
                more, done, _ = self._apply_in(txn, entries)
        except lmdb.Error as exc:
            raise self._failed(exc) from exc
        return results + self._applied_now(entries[-1], done, more)

    def _failed(self, exc: lmdb.Error) -> Exception:
        """What an LMDB error while running becomes: StateMachineDamagedError (marked for the next start) when
        it says the file is damaged, else the error itself (a full map is not mended by a rebuild)."""
        return mark_damaged(self._path, exc) if is_damage(exc) else exc

    def prepare(self, entries: Sequence[Entry]) -> None:
        """Apply entries that are not committed yet in a write transaction left open, so that `apply`
        of the same entries only commits it.

        A node calls this for entries while it waits for them to commit: the
        leader for its own new entries while its followers persist them, a
        follower that serves clients while its own disk writes them
        (NodeSettings.apply_ahead_during_save), others after acknowledging them. Applying
        a create costs 150-250 µs on a machine where other processes ran
        meanwhile; committing the prepared transaction a tenth of that, so
        the wait absorbs the apply. Nothing of it is visible before `apply`:
        reads use their own transactions, watches fire in `apply`. Entries
        that do not commit as prepared (a new leader replaced them, or others
        commit first) are applied afresh: `apply` aborts the transaction when
        what it is given does not begin with exactly the prepared entries.
        """
        if self._prepared is not None or not entries or entries[0].index != self._applied + 1:
            return
        try:
            txn = self._env.begin(write=True)
        except lmdb.Error:
            return  # the same entries' `apply` meets it again, where the node handles it
        try:
            results, done, _ = self._apply_in(txn, entries)
        except Exception:  # the same entries' `apply` raises it again, where the node handles it
            txn.abort()
            return
        self._prepared = _Prepared(tuple(entries), txn, results, done)

    def _take_prepared(self, entries: Sequence[Entry]) -> _Prepared | None:
        """The prepared transaction if `entries` begin with exactly its entries; else it is abandoned."""
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return None
        if tuple(entries[: len(prepared.entries)]) == prepared.entries:
            return prepared
        prepared.txn.abort()
        return None

    def _abandon_prepared(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.txn.abort()

    def _any_acl_in(self, txn: lmdb.Transaction) -> bool:
        return int(txn.stat(self._acls)["entries"]) > 0

    def _any_null_in(self, txn: lmdb.Transaction) -> bool:
        return int(txn.stat(self._nulls)["entries"]) > 0

    def _mark_null(self, txn: lmdb.Transaction, key: bytes) -> None:
        txn.put(key, b"", db=self._nulls)
        self._nulls_present = True

    def _apply_in(self, txn: lmdb.Transaction, entries: Sequence[Entry]) -> tuple[list[bytes], list[AppliedTxn], int]:
        # While no node has an ACL of its own (most trees), the checks and the reads skip the acls lookups.
        # The flag only turns true within a batch (when an ACL is stored), and is recomputed from the state
        # at open and restore, so it is never false while a stored ACL exists. A true flag is checked
        # again at each batch's start, so that it falls back once the last ACL is gone (or the batch that
        # stored one was abandoned); a false one needs no check: reading the database's entry count
        # (LMDB's stat) cost each write a tenth of its apply when done for both flags on every batch.
        if self._acls_present:
            self._acls_present = self._any_acl_in(txn)
        if self._nulls_present:
            self._nulls_present = self._any_null_in(txn)  # the same, for the nulls lookups of deletes
        results: list[bytes] = []
        done: list[AppliedTxn] = []
        last = self._applied
        for e in entries:
            invariant(e.index > last, f"entry {e.index} applied twice or out of order (applied {last})")
            last = e.index
            if e.kind is not EntryKind.NORMAL:  # a new leader's no-op, a membership change
                if e.kind is EntryKind.CONFIG:
                    config_changed = self._apply_config(txn, e)
                    if config_changed is not None:
                        done.append(config_changed)
                results.append(b"")
                continue
            applied = self._apply_one(txn, e)
            results.append(applied.result.SerializeToString())
            done.append(applied)
        txn.put(_META_APPLIED, _U64.pack(last), db=self._meta)
        # In the same transaction as the index: what the node rebases its log on if the log lost entries
        # applied here (quorum.raft.recovery). A prepared transaction commits it only with its entries.
        txn.put(_META_APPLIED_TERM, _U64.pack(entries[-1].term), db=self._meta)
        return results, done, last

    def _applied_now(self, last: Entry, done: list[AppliedTxn], results: list[bytes]) -> list[bytes]:
        """After a commit: the new applied index and term, and the watches and sessions of what was applied."""
        self._applied = last.index
        self._applied_term = last.term
        if self._on_applied is not None:
            for applied in done:
                self._on_applied(applied)
        return results

    def _apply_one(self, txn: lmdb.Transaction, e: Entry) -> AppliedTxn:
        try:
            t = zk_pb2.Txn.FromString(e.data)
        except DecodeError:
            return AppliedTxn(e.index, 0, (), None, None, zk_pb2.TxnResult(err=Code.MARSHALLINGERROR))
        w = _Write(txn, e.index, t.time_ms, t.session_id)
        w.auth = t.auth
        body = t.WhichOneof("body")
        try:
            if w.session_id and body not in _SESSION_BODIES:
                self._check_session(txn, w.session_id, t.connection, body)
            result = self._execute(w, t, body)
        except ZkError as exc:
            invariant(not w.dirty, f"zxid {e.index}: {body} failed with {exc.code!r} after writing")
            return AppliedTxn(e.index, w.session_id, (), None, None, zk_pb2.TxnResult(err=exc.code), t.forward_tag)
        triggers = tuple(w.triggers)
        return AppliedTxn(e.index, w.session_id, triggers, w.created_session, w.closed_session, result, t.forward_tag)

    def _execute(self, w: _Write, t: zk_pb2.Txn, body: str | None) -> zk_pb2.TxnResult:
        match body:
            case "create" | "delete" | "set_data" | "check":
                path, stat = self._write_op(w, body, getattr(t, body))
                return zk_pb2.TxnResult(path=path, stat=stat)
            case "multi":
                return self._multi(w, t.multi)
            case "set_acl":
                return zk_pb2.TxnResult(stat=self._set_acl(w, t.set_acl))
            case "create_session":
                self._create_session(w, t.create_session, t.connection)
                return zk_pb2.TxnResult()
            case "close_session":
                self._close_session(w, t.close_session)
                return zk_pb2.TxnResult()
            case "delete_container":
                self._delete_container(w, t.delete_container)
                return zk_pb2.TxnResult()
            case "attach_session":
                self._attach_session(w, t.connection)
                return zk_pb2.TxnResult()
            case "member_client":
                return zk_pb2.TxnResult(path=CONFIG_PATH, stat=self._member_client(w, t.member_client))
            case _:
                raise UnimplementedError(f"unknown transaction type {body!r}")

    # ---- /zookeeper/config: ZooKeeper's dynamic configuration text (zkemu.config_text)
    def _apply_config(self, txn: lmdb.Transaction, e: Entry) -> AppliedTxn | None:
        """A configuration entry makes /zookeeper/config's new text on every node alike, from the entry alone
        and the client addresses the text already showed (ZooKeeper's leader writes it as the reconfig's
        SetDataTxn: PrepRequestProcessor, DataTree.processTxn). None for an entry this version cannot read."""
        try:
            configuration = entry_configuration(e)
        except ValueError:
            return None
        raw = self._node(txn, _CONFIG_KEY)
        invariant(raw is not None, f"zxid {e.index}: {CONFIG_PATH} missing")
        assert raw is not None  # for mypy
        shown = bytes(raw[_HDR:]).decode(errors="replace")  # read once: the lines it shows, their clients
        text = configuration_text(configuration, _config_clients(shown))
        if shown and _server_lines(shown) == _server_lines(text):
            # Only a learner came or went (no line shows it): ZooKeeper shows a joining server once its reconfig
            # commits, here its promotion, and a failed join changes nothing a client sees, not even the version.
            return AppliedTxn(e.index, 0, (), None, None, zk_pb2.TxnResult())
        # A configuration entry carries no leader's time: the mtime stays that of the last change of the text.
        w = _Write(txn, e.index, _NODE.unpack_from(raw)[_MTIME], 0)
        self._put_config(w, raw, text.encode(), configuration.version)
        return AppliedTxn(e.index, 0, tuple(w.triggers), None, None, zk_pb2.TxnResult())

    def _member_client(self, w: _Write, op: zk_pb2.MemberClientTxn) -> zk_pb2.Stat:
        """A member's client address into its line of /zookeeper/config (nothing changes when the text already
        shows it, or when the server has no line: a learner gets one when it is promoted)."""
        raw = self._node(w.txn, _CONFIG_KEY)
        invariant(raw is not None, f"zxid {w.zxid}: {CONFIG_PATH} missing")
        assert raw is not None  # for mypy
        current = bytes(raw[_HDR:]) or op.base_config.encode()
        try:
            config = parse_config(current.decode())
        except (ConfigTextError, UnicodeDecodeError) as exc:
            raise BadArgumentsError(f"{CONFIG_PATH} does not parse: {exc}") from None
        text = render(config.with_client(op.server_id, op.client_address)).encode()
        if text == raw[_HDR:]:
            return _stat_pb(_NODE.unpack_from(raw), len(raw) - _HDR)
        return self._put_config(w, raw, text, config.version)

    def _put_config(self, w: _Write, raw: bytes, text: bytes, version: int) -> zk_pb2.Stat:
        """/zookeeper/config's new text. Its data version stays -1 and its mzxid is the configuration's version,
        as ZooKeeper's (DataTree.setData with the version -1 and the configuration's zxid that its reconfig and
        initConfigInZKDatabase pass), also when only a client address changed: getConfig's Stat agrees with
        the `version=` line and what `reconfig -v` takes. The watch event carries the change's zxid."""
        w.dirty = True
        h = _NODE.unpack_from(raw)
        hdr = (h[0], version, h[2], w.time_ms, -1, h[5], h[6], h[7], h[8], h[9])
        w.txn.put(_CONFIG_KEY, _NODE.pack(*hdr) + text, db=self._nodes)
        acl = cast("bytes | None", w.txn.get(_CONFIG_KEY, db=self._acls)) if self._acls_present else None
        w.triggers.append(WatchTrigger(EventType.NODE_DATA_CHANGED, CONFIG_PATH, acl))
        return _stat_pb(hdr, len(text))

    def _check_session(self, txn: lmdb.Transaction, session_id: int, connection: int, body: str | None) -> None:
        """A session's write applies only while the session lives and, when the write names the connection
        it came on, while that connection owns the session (ZooKeeper's PrepRequestProcessor checkSession:
        SESSIONEXPIRED, SESSIONMOVED). An attach makes its connection the owner, so it is not fenced."""
        raw = txn.get(_SID.pack(session_id), db=self._sessions)
        if raw is None:
            raise SessionExpiredError(message_for(Code.SESSIONEXPIRED))
        if connection and body != "attach_session" and len(raw) == _SESSION_RECORD.size:
            owner = _SESSION_RECORD.unpack(raw)[1]
            if owner and owner != connection:
                raise SessionMovedError(message_for(Code.SESSIONMOVED))

    # ------------------------------------------------------------ writes
    def _create(self, w: _Write, op: zk_pb2.CreateOp) -> tuple[str, zk_pb2.Stat]:
        """PrepRequestProcessor.pRequest2TxnCreate, then DataTree.createNode."""
        path, data, mode = op.path, op.data, op.mode
        check_data_length(path, data)
        flags = _CREATE_MODES.get(mode)
        if flags is None:
            raise BadArgumentsError(f"Received an invalid flag value: {mode} to convert to a CreateMode")
        ephemeral, sequential = flags
        if ephemeral and w.session_id == 0:
            raise BadArgumentsError("ephemeral nodes need a session")
        owner = self._owner_of_new(w, mode, op.ttl_ms, path) if ephemeral or mode >= _MODE_CONTAINER else 0
        slash = path.rfind("/")
        if slash < 0 or "\0" in path:  # validatePathForCreate
            raise BadArgumentsError(message_for(Code.BADARGUMENTS, path))
        _path_key(path)  # the parent's key is shorter: safe to look up
        parent = path[:slash] or ROOT
        # fixupACL before the parent is looked up (PrepRequestProcessor's order); an empty list is the default.
        acl = acls.fixup(path, _acl_of_op(op.acl), w.ids()) if op.acl else acls.OPEN_ACL_UNSAFE
        txn = w.txn
        pkey = parent.encode()
        praw = self._node(txn, pkey)
        if praw is None:
            if not op.make_parents:
                raise NoNodeError(message_for(Code.NONODE, path))
            return self._create_with_parents(w, path, parent, data, owner, sequential, acl, op.null_data)
        parent_acl = self._require(w, pkey, parent, acls.CREATE, path)
        phdr = _NODE.unpack_from(praw)
        if sequential:
            path = f"{path}{phdr[_CVERSION]:010d}"
        validate_path(path)
        key = _path_key(path)
        if self._node(txn, key) is not None:
            raise NodeExistsError(message_for(Code.NODEEXISTS, path))
        if phdr[_OWNER] and kind_of(phdr[_OWNER]) is NodeKind.EPHEMERAL:  # containers and TTL nodes may have children
            raise NoChildrenForEphemeralsError(message_for(Code.NOCHILDRENFOREPHEMERALS, path))
        hdr = self._add_node(w, parent, praw, path, key, data, owner, self._store_acl(w, key, acl), parent_acl)
        if op.null_data:
            self._mark_null(w.txn, key)
        return path, _stat_pb(hdr, len(data))

    @staticmethod
    def _owner_of_new(w: _Write, mode: int, ttl_ms: int, path: str) -> int:
        """The stored ephemeralOwner of a node created in `mode` (pRequest2TxnCreate), after
        EphemeralType.validateTTL: a TTL within 0 < ttl <= 2^40-1 ms for the TTL modes, none for the rest."""
        if mode in _TTL_MODES:
            if not 0 < ttl_ms <= TTL_MS_MAX:
                raise BadArgumentsError(f"{path}: ttl of {ttl_ms} ms is outside 1..{TTL_MS_MAX} (2^40-1) ms")
            return ttl_owner(ttl_ms)
        if ttl_ms:
            raise BadArgumentsError(f"{path}: a ttl of {ttl_ms} ms is not valid for create mode {mode}")
        return CONTAINER_OWNER if mode == _MODE_CONTAINER else w.session_id

    def _create_with_parents(
        self,
        w: _Write,
        path: str,
        parent: str,
        data: bytes,
        owner: int,
        sequential: int,
        acl: tuple[acls.Acl, ...],
        null_data: bool,
    ) -> tuple[str, zk_pb2.Stat]:
        """kazoo's makepath in one zxid: missing ancestors become empty persistent nodes, top down, with
        the node's ACL (kazoo's ensure_path(parent, acl)); CREATE is checked on the nearest existing one."""
        validate_path(parent)
        missing = [parent]
        ancestor = parent_of(parent)
        while (araw := self._node(w.txn, ancestor.encode())) is None:
            missing.append(ancestor)
            ancestor = parent_of(ancestor)
        parent_acl = self._require(w, ancestor.encode(), ancestor, acls.CREATE, path)
        if kind_of(_NODE.unpack_from(araw)[_OWNER]) is NodeKind.EPHEMERAL:
            raise NoChildrenForEphemeralsError(message_for(Code.NOCHILDRENFOREPHEMERALS, path))
        if sequential:
            path = f"{path}{0:010d}"  # the parent is new: its stored cversion is 0
        validate_path(path)
        key = _path_key(path)
        for p in reversed(missing):
            stored = self._store_acl(w, p.encode(), acl)
            self._add_node(w, parent_of(p), None, p, p.encode(), b"", 0, stored, parent_acl)
            parent_acl = stored
        hdr = self._add_node(w, parent, None, path, key, data, owner, self._store_acl(w, key, acl), parent_acl)
        if null_data:
            self._mark_null(w.txn, key)
        return path, _stat_pb(hdr, len(data))

    def _add_node(
        self,
        w: _Write,
        parent: str,
        praw: bytes | None,
        path: str,
        key: bytes,
        data: bytes,
        owner: int,
        acl: bytes | None,
        parent_acl: bytes | None,
    ) -> tuple[int, ...]:
        """Write a new node and bump its parent (stored cversion +1, pzxid, child count).

        `praw`: the parent's record if the caller holds it, else it is read here. `acl`, `parent_acl`:
        the stored ACLs of the node and its parent (None: the default), for the watch triggers.
        """
        txn, z, t = w.txn, w.zxid, w.time_ms
        pkey = parent.encode()
        if praw is None:
            praw = self._node(txn, pkey)
            invariant(praw is not None, f"zxid {z}: parent of {path} missing")
            assert praw is not None  # for mypy
        w.dirty = True
        hdr = (z, z, t, t, 0, 0, 0, owner, z, 0)
        txn.put(key, _NODE.pack(*hdr) + data, db=self._nodes)
        txn.put(_child_key(key), b"", db=self._children)
        if owner:
            self._index_owner(txn, key, owner, add=True)
        p = _NODE.unpack_from(praw)
        txn.put(
            pkey,
            _NODE.pack(p[0], p[1], p[2], p[3], p[4], _i32(p[_CVERSION] + 1), p[6], p[7], z, p[_NCHILDREN] + 1)
            + praw[_HDR:],
            db=self._nodes,
        )
        w.triggers.append(WatchTrigger(EventType.NODE_CREATED, path, acl))
        w.triggers.append(WatchTrigger(EventType.NODE_CHILDREN_CHANGED, parent, parent_acl))
        return hdr

    def _delete(self, w: _Write, op: zk_pb2.DeleteOp) -> None:
        """PrepRequestProcessor delete (no full path validation there), then DataTree.deleteNode."""
        path = op.path
        slash = path.rfind("/")
        if slash < 0 or "\0" in path or path in SPECIAL_PATHS:  # getParentPathAndValidate
            raise BadArgumentsError(message_for(Code.BADARGUMENTS, path))
        key = _path_key(path)
        parent = path[:slash] or ROOT
        txn = w.txn
        pkey = parent.encode()
        praw = self._node(txn, pkey)
        if praw is None:
            raise NoNodeError(message_for(Code.NONODE, path))
        parent_acl = self._require(w, pkey, parent, acls.DELETE, path)
        raw = self._node(txn, key)
        if raw is None:
            raise NoNodeError(message_for(Code.NONODE, path))
        hdr = _NODE.unpack_from(raw)
        _check_version(op.version, hdr[_VERSION], path)
        if hdr[_NCHILDREN]:
            raise NotEmptyError(message_for(Code.NOTEMPTY, path))
        self._remove_node(w, path, key, hdr[_OWNER], praw, parent_acl)

    def _remove_node(
        self,
        w: _Write,
        path: str,
        key: bytes,
        owner: int,
        praw: bytes | None,
        parent_acl: bytes | None | EllipsisType = ...,
    ) -> None:
        """Delete a childless node and update its parent (child count, pzxid; the stored cversion stays).

        `parent_acl`: the parent's stored ACL if the caller looked it up (None: the default), for the
        watch trigger; `...`: look it up here."""
        txn, z = w.txn, w.zxid
        parent = parent_of(path)
        pkey = parent.encode()
        if praw is None:
            praw = self._node(txn, pkey)
            invariant(praw is not None, f"zxid {z}: parent of {path} missing")
            assert praw is not None  # for mypy
        w.dirty = True
        txn.delete(key, db=self._nodes)
        txn.delete(_child_key(key), db=self._children)
        acl = txn.pop(key, db=self._acls) if self._acls_present else None
        if self._nulls_present:
            txn.delete(key, db=self._nulls)
        if parent_acl is ...:
            parent_acl = txn.get(pkey, db=self._acls) if self._acls_present else None
        if owner:
            self._index_owner(txn, key, owner, add=False)
        p = _NODE.unpack_from(praw)
        # The stored cversion does not change on delete (ZOOKEEPER-1046); the visible one does, by the count.
        txn.put(
            pkey,
            _NODE.pack(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], max(z, p[_PZXID]), p[_NCHILDREN] - 1)
            + praw[_HDR:],
            db=self._nodes,
        )
        w.triggers.append(WatchTrigger(EventType.NODE_DELETED, path, acl))
        w.triggers.append(WatchTrigger(EventType.NODE_CHILDREN_CHANGED, parent, parent_acl))

    def _index_owner(self, txn: lmdb.Transaction, key: bytes, owner: int, add: bool) -> None:
        """Keep a node with an owner in its index: ephemerals under their session, containers and TTL nodes
        in `containers`."""
        if kind_of(owner) is NodeKind.EPHEMERAL:
            db, index_key = self._ephemerals, _SID.pack(owner) + key
        else:
            db, index_key = self._containers, key
        if add:
            txn.put(index_key, b"", db=db)
        else:
            txn.delete(index_key, db=db)

    def _delete_container(self, w: _Write, body: zk_pb2.DeleteContainerTxn) -> None:
        """The leader's sweep (ContainerManager; PrepRequestProcessor deleteContainer, opcode 20), decided
        again here with the state and time of this zxid, so every replica agrees: NONODE if the node is
        gone, NOTEMPTY if it has children, BADVERSION if it is no longer a candidate (not a container or
        TTL node, ZooKeeper's answer; a container never used, a TTL node modified within its TTL).
        Fires the watches of a delete."""
        path = body.path
        slash = path.rfind("/")
        if slash < 0 or "\0" in path or path in SPECIAL_PATHS:  # getParentPathAndValidate
            raise BadArgumentsError(message_for(Code.BADARGUMENTS, path))
        key = _path_key(path)
        raw = self._node(w.txn, key)
        if raw is None:
            raise NoNodeError(message_for(Code.NONODE, path))
        hdr = _NODE.unpack_from(raw)
        if hdr[_NCHILDREN]:
            raise NotEmptyError(message_for(Code.NOTEMPTY, path))
        if not _sweep_due(hdr, w.time_ms, body.never_used_ms):
            raise BadVersionError(message_for(Code.BADVERSION, path))
        self._remove_node(w, path, key, hdr[_OWNER], None)

    def _set_data(self, w: _Write, op: zk_pb2.SetDataOp) -> zk_pb2.Stat:
        path, data = op.path, op.data
        check_data_length(path, data)
        validate_path(path)
        key = _path_key(path)
        txn = w.txn
        raw = self._node(txn, key)
        if raw is None:
            raise NoNodeError(message_for(Code.NONODE, path))
        acl = self._require(w, key, path, acls.WRITE, path)
        h = _NODE.unpack_from(raw)
        _check_version(op.version, h[_VERSION], path)
        version = _i32(h[_VERSION] + 1)
        if version == -1:  # -1 means "any version": skip it (ZOOKEEPER-4743)
            version = 0
        w.dirty = True
        hdr = (h[0], w.zxid, h[2], w.time_ms, version, h[5], h[6], h[7], h[8], h[9])
        txn.put(key, _NODE.pack(*hdr) + data, db=self._nodes)
        if op.null_data:
            self._mark_null(txn, key)
        elif len(raw) == _HDR and self._nulls_present:  # it had no data: it may have been null
            txn.delete(key, db=self._nulls)
        w.triggers.append(WatchTrigger(EventType.NODE_DATA_CHANGED, path, acl))
        return _stat_pb(hdr, len(data))

    def _check(self, w: _Write, op: zk_pb2.CheckOp) -> None:
        validate_path(op.path)
        key = _path_key(op.path)
        raw = self._node(w.txn, key)
        if raw is None:
            raise NoNodeError(message_for(Code.NONODE, op.path))
        self._require(w, key, op.path, acls.READ, op.path)
        _check_version(op.version, _NODE.unpack_from(raw)[_VERSION], op.path)

    def _multi(self, w: _Write, multi: zk_pb2.MultiOp) -> zk_pb2.TxnResult:
        """All or nothing under one zxid; on failure of op k: OK before k, its code at k, -2 after."""
        outer = w.txn
        inner = self._env.begin(write=True, parent=outer)
        w.txn = inner
        results: list[zk_pb2.OpResult] = []
        try:
            for k, op in enumerate(multi.ops):
                try:
                    results.append(self._multi_op(w, op))
                except ZkError as exc:
                    inner.abort()
                    w.triggers.clear()
                    w.dirty = False
                    n = len(multi.ops)
                    return zk_pb2.TxnResult(
                        results=[zk_pb2.OpResult(err=Code.OK)] * k
                        + [zk_pb2.OpResult(err=exc.code)]
                        + [zk_pb2.OpResult(err=Code.RUNTIMEINCONSISTENCY)] * (n - k - 1)
                    )
        except BaseException:
            inner.abort()
            raise
        finally:
            w.txn = outer
        inner.commit()
        w.dirty = True
        return zk_pb2.TxnResult(results=results)

    def _multi_op(self, w: _Write, op: zk_pb2.Op) -> zk_pb2.OpResult:
        kind = op.WhichOneof("op")
        if kind is None:
            raise UnimplementedError("empty op in multi")
        path, stat = self._write_op(w, kind, getattr(op, kind))
        return zk_pb2.OpResult(path=path, stat=stat)

    def _write_op(self, w: _Write, kind: str, op: Any) -> tuple[str, zk_pb2.Stat | None]:
        """One write, alone or inside a multi: (created path, new Stat) where the op has them."""
        match kind:
            case "create":
                return self._create(w, op)
            case "delete":
                self._delete(w, op)
                return "", None
            case "set_data":
                return "", self._set_data(w, op)
            case "check":
                self._check(w, op)
                return "", None
            case "set_acl":
                return "", self._set_acl(w, op)
            case _:
                raise UnimplementedError(f"unknown op {kind!r}")

    def _set_acl(self, w: _Write, op: zk_pb2.SetAclOp) -> zk_pb2.Stat:
        """PrepRequestProcessor setACL (fixupACL, NONODE, ADMIN, aversion), then DataTree.setACL."""
        path = op.path
        validate_path(path)
        key = _path_key(path)
        acl = acls.fixup(path, _acl_of_op(op.acl), w.ids())
        raw = self._node(w.txn, key)
        if raw is None:
            raise NoNodeError(message_for(Code.NONODE, path))
        self._require(w, key, path, acls.ADMIN, path)
        h = _NODE.unpack_from(raw)
        _check_version(op.version, h[_AVERSION], path)
        w.dirty = True
        hdr = (*h[:_AVERSION], _i32(h[_AVERSION] + 1), *h[_AVERSION + 1 :])
        w.txn.put(key, _NODE.pack(*hdr) + raw[_HDR:], db=self._nodes)
        if acl == acls.default_acl(path):
            w.txn.delete(key, db=self._acls)
        else:
            w.txn.put(key, acls.encode(acl), db=self._acls)
            self._acls_present = True
        return _stat_pb(hdr, len(raw) - _HDR)

    def _require(self, w: _Write, key: bytes, node_path: str, perm: int, path: str) -> bytes | None:
        """checkACL of `node_path` (whose key is `key`) for the writer: NoAuthError names `path`. A node
        with the default open ACL costs one lookup and nothing more. Returns the stored ACL (None: none)."""
        raw = cast("bytes | None", w.txn.get(key, db=self._acls)) if self._acls_present else None
        if raw is None and node_path != CONFIG_PATH:
            return None
        acl = acls.default_acl(node_path) if raw is None else acls.decode(raw)
        acls.check(acl, perm, w.ids(), path)
        return raw

    def _store_acl(self, w: _Write, key: bytes, acl: tuple[acls.Acl, ...]) -> bytes | None:
        """Store a new node's ACL unless it is the default; what was stored (None: nothing)."""
        if acl == acls.OPEN_ACL_UNSAFE:
            return None
        raw = acls.encode(acl)
        w.txn.put(key, raw, db=self._acls)
        self._acls_present = True
        return raw

    def _create_session(self, w: _Write, body: zk_pb2.CreateSessionTxn, connection: int) -> None:
        """Recorded on every replica (ZooKeeper createSession), owned by the connection that asked for it;
        re-creating a live session updates its timeout and owner."""
        sid = body.session_id or w.session_id
        if sid == 0:
            raise BadArgumentsError("session id 0 is reserved")
        if body.timeout_ms <= 0:
            raise BadArgumentsError(f"session timeout must be > 0 ms, got {body.timeout_ms}")
        w.dirty = True
        w.txn.put(_SID.pack(sid), _SESSION_RECORD.pack(body.timeout_ms, connection), db=self._sessions)
        w.created_session = sid

    def _attach_session(self, w: _Write, connection: int) -> None:
        """The session (live: `_check_session` saw it) is owned by `connection` from this entry on."""
        if connection == 0:
            raise BadArgumentsError("attaching a session needs the connection")
        key = _SID.pack(w.session_id)
        timeout_ms = _TIMEOUT.unpack_from(w.txn.get(key, db=self._sessions))[0]
        w.dirty = True
        w.txn.put(key, _SESSION_RECORD.pack(timeout_ms, connection), db=self._sessions)

    def _close_session(self, w: _Write, body: zk_pb2.CloseSessionTxn) -> None:
        """DataTree.killSession: every ephemeral of the session goes under this one zxid, in path order.

        Closing a session that is not live (already closed or expired) changes nothing and is not an error:
        a client's close and the leader's expiry may both reach the log.
        """
        sid = body.session_id or w.session_id
        skey = _SID.pack(sid)
        txn = w.txn
        if txn.get(skey, db=self._sessions) is None:
            return
        for key in self._ephemeral_keys(txn, sid):
            raw = self._node(txn, key)
            invariant(
                raw is not None and _NODE.unpack_from(raw)[_OWNER] == sid,
                f"zxid {w.zxid}: ephemerals index of session {sid:#x} names {key!r}",
            )
            self._remove_node(w, key.decode(), key, sid, None)
        w.dirty = True
        txn.delete(skey, db=self._sessions)
        w.closed_session = sid

    def _ephemeral_keys(self, txn: lmdb.Transaction, session_id: int) -> list[bytes]:
        """The session's ephemeral paths (UTF-8), in byte order."""
        return [k[_SESSION_KEY_BYTES:] for k in _keys_with_prefix(txn, self._ephemerals, _SID.pack(session_id))]

    # ------------------------------------------------------------ storage helpers
    def _node(self, txn: lmdb.Transaction, key: bytes) -> bytes | None:
        return cast("bytes | None", txn.get(key, db=self._nodes))

    def _applied_in(self, txn: lmdb.Transaction) -> int:
        raw = cast("bytes | None", txn.get(_META_APPLIED, db=self._meta))
        invariant(raw is not None, "tree without an applied index")
        return int(_U64.unpack(cast(bytes, raw))[0])

    def _applied_term_in(self, txn: lmdb.Transaction, applied: int) -> int | None:
        raw = cast("bytes | None", txn.get(_META_APPLIED_TERM, db=self._meta))
        if raw is None:
            return 0 if applied == 0 else None  # a tree written before the term was stored
        return int(_U64.unpack(raw)[0])

    # ------------------------------------------------------------ reads (local state, no log)
    def _raw(self, txn: lmdb.Transaction, path: str) -> bytes | None:
        key = path.encode()
        if not key or len(key) > PATH_BYTES_MAX:
            return None  # cannot exist
        return self._node(txn, key)

    def _check_read(self, txn: lmdb.Transaction, path: str, ids: Sequence[acls.Id] | None) -> None:
        """READ on an existing node for a reader with `ids` (None: a caller inside the server, unchecked)."""
        if ids is None or not self._acls_present:
            return  # /zookeeper/config's default ACL lets everyone READ
        raw = txn.get(path.encode(), db=self._acls)
        if raw is None and path != CONFIG_PATH:
            return
        acls.check(acls.default_acl(path) if raw is None else acls.decode(raw), acls.READ, ids, path)

    def get_acl(self, path: str) -> tuple[tuple[acls.Acl, ...], Stat]:
        """The node's ACL and Stat (DataTree.getACL); NoNodeError when it is missing."""
        with self._env.begin() as txn:
            raw = self._raw(txn, path)
            if raw is None:
                raise NoNodeError(message_for(Code.NONODE, path))
            stored = txn.get(path.encode(), db=self._acls)
        acl = acls.default_acl(path) if stored is None else acls.decode(stored)
        return acl, _stat(_NODE.unpack_from(raw), len(raw) - _HDR)

    def get_data(self, path: str, ids: Sequence[acls.Id] | None = None) -> tuple[bytes, Stat]:
        data, stat, _ = self.get_data_or_null(path, ids)
        return data, stat

    def get_data_or_null(self, path: str, ids: Sequence[acls.Id] | None = None) -> tuple[bytes, Stat, bool]:
        """getData: the data, the Stat, and whether the (then empty) data is null (the `nulls` database,
        looked up in the same read only for a node without data)."""
        with self._env.begin() as txn:
            raw = self._raw(txn, path)
            if raw is None:
                raise NoNodeError(message_for(Code.NONODE, path))
            self._check_read(txn, path, ids)
            null = len(raw) == _HDR and self._nulls_present and txn.get(path.encode(), db=self._nulls) is not None
        data = raw[_HDR:]
        return data, _stat(_NODE.unpack_from(raw), len(data)), null

    def stat(self, path: str, ids: Sequence[acls.Id] | None = None) -> Stat | None:
        """The node's Stat, None when it is missing; with `ids`, NoAuthError without READ (exists, 3.9.2)."""
        with self._env.begin() as txn:
            raw = self._raw(txn, path)
            if raw is not None:
                self._check_read(txn, path, ids)
        if raw is None:
            return None
        return _stat(_NODE.unpack_from(raw), len(raw) - _HDR)

    def get_children(self, path: str, ids: Sequence[acls.Id] | None = None) -> tuple[list[str], Stat]:
        """Child names in code-point order, and the node's Stat."""
        with self._env.begin() as txn:
            raw = self._raw(txn, path)
            if raw is None:
                raise NoNodeError(message_for(Code.NONODE, path))
            self._check_read(txn, path, ids)
            prefix = path.encode() + b"\0"
            names = [k[len(prefix) :].decode() for k in _keys_with_prefix(txn, self._children, prefix)]
        return names, _stat(_NODE.unpack_from(raw), len(raw) - _HDR)

    def ephemerals(self, session_id: int, prefix: str = "/") -> list[str]:
        """The session's ephemeral paths, sorted; `prefix` filters by plain string prefix (getEphemerals)."""
        with self._env.begin() as txn:
            paths = [k.decode() for k in self._ephemeral_keys(txn, session_id)]
        if prefix and prefix != ROOT:
            paths = [p for p in paths if p.startswith(prefix)]
        return paths

    def all_children_number(self, path: str, ids: Sequence[acls.Id] | None = None) -> int:
        """Number of all descendants (DataTree.getAllChildrenNumber; for "/" every node but the root)."""
        with self._env.begin() as txn:
            if self._raw(txn, path) is None:
                raise NoNodeError(message_for(Code.NONODE, path))
            self._check_read(txn, path, ids)
            if path == ROOT:
                return int(txn.stat(self._nodes)["entries"]) - 1
            return sum(1 for _ in _keys_with_prefix(txn, self._nodes, path.encode() + b"/"))

    def node_count(self) -> int:
        """Znodes in the tree, built-ins included (ZooKeeper's `Node count` adds one: it counts the root twice)."""
        with self._env.begin() as txn:
            return int(txn.stat(self._nodes)["entries"])

    def ephemerals_count(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._ephemerals)["entries"])

    def approximate_data_size(self, scan_nodes_max: int) -> int:
        """ZooKeeper's zk_approximate_data_size: the sum of every znode's path and data length.

        Exact up to `scan_nodes_max` znodes; a larger tree is scanned that far and the rest
        extrapolated from it, so that a monitoring poll never holds the event loop for long (the
        scan costs about 0.6 us a znode; ZooKeeper keeps a running sum instead, DataTree.nodeDataSize).
        """
        with self._env.begin() as txn:
            total_nodes = int(txn.stat(self._nodes)["entries"])
            size_bytes = scanned = 0
            for key, value in txn.cursor(db=self._nodes).iternext():
                if scanned >= scan_nodes_max:
                    break
                size_bytes += len(key) + len(value) - _HDR
                scanned += 1
        if scanned < total_nodes and scanned:
            size_bytes = size_bytes * total_nodes // scanned
        return size_bytes

    def sessions(self) -> dict[int, int]:
        """Live sessions: id -> timeout (ms)."""
        with self._env.begin(db=self._sessions) as txn:
            return {_SID.unpack(k)[0]: _TIMEOUT.unpack_from(v)[0] for k, v in txn.cursor()}

    def session_timeout_ms(self, session_id: int) -> int | None:
        """The negotiated timeout of a live session, None if it is not live."""
        with self._env.begin(db=self._sessions) as txn:
            raw = txn.get(_SID.pack(session_id))
        return None if raw is None else _TIMEOUT.unpack_from(raw)[0]

    def has_session(self, session_id: int) -> bool:
        with self._env.begin() as txn:
            return txn.get(_SID.pack(session_id), db=self._sessions) is not None

    def sweep_candidates(self, now_ms: int, never_used_ms: int, limit: int) -> list[str]:
        """Up to `limit` containers and TTL nodes due for the sweep at `now_ms` (ContainerManager.getCandidates),
        in path order, read from the containers index, never from the whole tree."""
        found: list[str] = []
        with self._env.begin() as txn:
            for key in txn.cursor(db=self._containers).iternext(keys=True, values=False):
                raw = self._node(txn, key)
                invariant(raw is not None, f"containers index names {bytes(key)!r}, which is not a node")
                hdr = _NODE.unpack_from(cast(bytes, raw))
                if hdr[_NCHILDREN] == 0 and _sweep_due(hdr, now_ms, never_used_ms):
                    found.append(bytes(key).decode())
                    if len(found) >= limit:
                        break
        return found

    def read(self, key: bytes) -> bytes | None:
        """StateMachine.read: the data of the znode whose path is `key` (UTF-8)."""
        if not key or len(key) > PATH_BYTES_MAX:
            return None
        with self._env.begin() as txn:
            raw = self._node(txn, key)
        return None if raw is None else raw[_HDR:]

    def digest(self) -> str:
        """sha256 of the whole logical state (the snapshot stream): equal on replicas that applied the same log."""
        h = hashlib.sha256()
        for chunk in self.snapshot_chunks():
            h.update(chunk)
        return h.hexdigest()

    # ------------------------------------------------------------ snapshots
    def snapshot_chunks(self) -> Iterator[bytes]:
        """Every database in key order, framed, as of applied_index() at the call (the read transaction is
        opened here: StateMachine.snapshot_chunks); about 1 MiB per chunk."""
        try:
            txn = self._env.begin()
        except lmdb.Error as exc:
            raise self._failed(exc) from exc
        return self._snapshot_chunks(txn)

    def _snapshot_chunks(self, txn: lmdb.Transaction) -> Iterator[bytes]:
        try:
            with txn:  # py-lmdb's read transactions may move between threads (it opens environments MDB_NOTLS)
                applied = self._applied_in(txn)
                header = _SNAP_HEADER.pack(_SNAP_MAGIC, FORMAT_VERSION, applied)
                batch: list[bytes] = [header]
                size = len(header)
                crc = 0
                count = 0
                for tag, db in self._tagged_dbs:
                    for key, value in txn.cursor(db=db):
                        record = _SNAP_RECORD.pack(tag, len(key), len(value)) + key + value
                        crc = zlib.crc32(record, crc)
                        count += 1
                        batch.append(record)
                        size += len(record)
                        if size >= SNAPSHOT_CHUNK_BYTES:
                            yield b"".join(batch)
                            batch, size = [], 0
                batch.append(_SNAP_RECORD.pack(_TAG_END, 0, _SNAP_END.size) + _SNAP_END.pack(count, crc))
                yield b"".join(batch)
        except lmdb.Error as exc:
            raise self._failed(exc) from exc

    def restore(self, snapshot_path: Path, index: int, term: int | None = None) -> None:
        """Replace the whole state by the snapshot file taken at `index`, whose entry had `term` (None:
        unknown), atomically: one LMDB transaction."""
        try:
            self._restore(snapshot_path, index, term)
        except lmdb.Error as exc:
            raise self._failed(exc) from exc

    def _restore(self, snapshot_path: Path, index: int, term: int | None) -> None:
        self._abandon_prepared()
        dbs = dict(self._tagged_dbs)
        with open(snapshot_path, "rb") as f, self._env.begin(write=True) as txn:
            magic, version, applied = _SNAP_HEADER.unpack(_read_exactly(f, _SNAP_HEADER.size))
            if magic != _SNAP_MAGIC or version != FORMAT_VERSION:
                raise TreeSnapshotError(f"{snapshot_path}: not a tree snapshot of format {FORMAT_VERSION}")
            if applied != index:
                raise TreeSnapshotError(f"{snapshot_path}: taken at index {applied}, expected {index}")
            for emptied in dbs.values():
                txn.drop(emptied, delete=False)
            crc = 0
            count = 0
            while True:
                head = _read_exactly(f, _SNAP_RECORD.size)
                tag, klen, vlen = _SNAP_RECORD.unpack(head)
                if tag == _TAG_END:
                    break
                body = _read_exactly(f, klen + vlen)
                crc = zlib.crc32(body, zlib.crc32(head, crc))
                count += 1
                db = dbs.get(tag)
                if db is None:
                    raise TreeSnapshotError(f"{snapshot_path}: unknown record tag {tag}")
                try:
                    txn.put(body[:klen], body[klen:], db=db, append=True)
                except lmdb.Error as exc:  # a key out of order or of a bad size: damaged
                    raise TreeSnapshotError(f"{snapshot_path}: record {count}: {exc}") from exc
            end_count, end_crc = _SNAP_END.unpack(_read_exactly(f, _SNAP_END.size))
            if f.read(1):
                raise TreeSnapshotError(f"{snapshot_path}: bytes after the end record")
            if (end_count, end_crc) != (count, crc):
                raise TreeSnapshotError(
                    f"{snapshot_path}: {count} records with crc {crc:#x}, "
                    f"the end record says {end_count} with crc {end_crc:#x}"
                )
            txn.put(_META_APPLIED, _U64.pack(index), db=self._meta)
            acls_present = self._any_acl_in(txn)
            nulls_present = self._any_null_in(txn)
            if term is None:
                txn.delete(_META_APPLIED_TERM, db=self._meta)
            else:
                txn.put(_META_APPLIED_TERM, _U64.pack(term), db=self._meta)
        self._env.sync(True)
        self._acls_present = acls_present
        self._nulls_present = nulls_present
        self._applied = index
        self._applied_term = term if term is not None or index else 0

    def sync(self) -> None:
        # Runs in the node's writer thread: a prepared transaction (the event loop's thread) stays as it is;
        # LMDB's sync flushes committed pages only.
        self._env.sync(True)

    def close(self) -> None:
        self._abandon_prepared()
        self._env.close()


def _sweep_due(h: tuple[int, ...], now_ms: int, never_used_ms: int) -> bool:
    """Whether a childless node is due for the sweep at `now_ms` (ContainerManager.getCandidates): a container
    that has had a child (stored cversion > 0), or never had one and is unmodified for over `never_used_ms`
    (0: kept); a TTL node unmodified for over its TTL. Elapsed time is measured from mtime, as ZooKeeper's."""
    owner = h[_OWNER]
    match kind_of(owner):
        case NodeKind.CONTAINER:
            return h[_CVERSION] > 0 or (never_used_ms > 0 and now_ms - h[_MTIME] > never_used_ms)
        case NodeKind.TTL:
            return now_ms - h[_MTIME] > ttl_of(owner)
        case _:
            return False


def _keys_with_prefix(txn: lmdb.Transaction, db: lmdb._Database, prefix: bytes) -> Iterator[bytes]:
    """Keys of `db` that start with `prefix`, in order (a range scan)."""
    cur = txn.cursor(db=db)
    if not cur.set_range(prefix):
        return
    for k in cur.iternext(keys=True, values=False):
        key = cast(bytes, k)
        if not key.startswith(prefix):
            return
        yield key


def _read_exactly(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise TreeSnapshotError(f"snapshot truncated: wanted {n} bytes, got {len(data)}")
    return data
