"""The production LogStore: Raft log, hard state and snapshot metadata in LMDB.

Layout: one LMDB environment (a directory) with two named databases.

* `log`: key = entry index as 8-byte big-endian (so LMDB's byte order is
  index order), value = header `>QBI` (term u64, kind u8, crc32 u32) + data.
  The CRC covers term, kind and data (zlib.crc32) and is checked on load.
* `meta`: hard state, compaction point, latest snapshot metadata and the
  node's identity; each value is prefixed with a crc32 of the rest.

Durability. The environment is opened with sync=False and metasync=False, so
a commit only writes to the page cache; a save that must be durable is one
write transaction followed by one `env.sync(True)` (fdatasync), however many
entries it carries: group commit. A process crash never loses a committed
transaction. After a save with sync=False, a power loss may lose that save,
and on a file system that reorders writes it may damage the file (the LMDB
MDB_NOSYNC caveat): the Raft core only asks for sync=False when nothing it
has promised depends on the save (etcd MustSync).

Threading. `save`, `compact` and `set_identity` are called from ONE writer
thread (the node runner's storage executor); `load` and `identity` run at
start-up before that thread starts. Nothing here takes a lock. LMDB itself
serialises write transactions, so a misuse is slow, not corrupting.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import lmdb
import structlog

from quorum.raft.types import Entry, EntryKind, HardState, PersistentState, SnapshotMeta

MAP_SIZE_BYTES_DEFAULT = 8 * 1024**3  # address space only: the file grows as used

_KEY = struct.Struct(">Q")
_TERM_KIND = struct.Struct(">QB")
_CRC = struct.Struct(">I")
_ENTRY_HEADER_BYTES = _TERM_KIND.size + _CRC.size  # 13
_HARD_STATE = struct.Struct(">QQQ")  # term, vote, commit
_COMPACTION = struct.Struct(">QQ")  # index, term
_SNAPSHOT_HEAD = struct.Struct(">QQI")  # index, term, voter count; voters follow as >Q each

_META_HARD_STATE = b"hard_state"
_META_COMPACTION = b"compaction"
_META_SNAPSHOT = b"snapshot"
_META_IDENTITY = b"identity"

_KINDS = {kind.value: kind for kind in EntryKind}

# The environment is opened without buffers=True, so LMDB hands out bytes, never
# memoryviews; `cast` tells the type checker (the lmdb stubs allow both).


class LogStoreError(Exception):
    """Storage found something it cannot repair by truncating the log tail."""


class LogStoreCorruptError(LogStoreError):
    """A metadata record (hard state, compaction point, snapshot, identity) failed its CRC."""


def encode_entry(entry: Entry) -> bytes:
    head = _TERM_KIND.pack(entry.term, entry.kind)
    return head + _CRC.pack(zlib.crc32(entry.data, zlib.crc32(head))) + entry.data


def decode_entry(index: int, value: bytes) -> Entry | None:
    """The entry stored as `value`, or None when the value is damaged (short, bad CRC)."""
    if len(value) < _ENTRY_HEADER_BYTES:
        return None
    (crc,) = _CRC.unpack_from(value, _TERM_KIND.size)
    data = value[_ENTRY_HEADER_BYTES:]
    if zlib.crc32(data, zlib.crc32(value[: _TERM_KIND.size])) != crc:
        return None
    term, kind_value = _TERM_KIND.unpack_from(value)
    kind = _KINDS.get(kind_value)
    if kind is None:
        # The CRC is good, so this is not disk damage but an entry kind this
        # version does not know: refuse to start rather than drop it.
        raise LogStoreError(f"entry {index} has unknown kind {kind_value}")
    return Entry(index=index, term=term, data=data, kind=kind)


def _seal(payload: bytes) -> bytes:
    return _CRC.pack(zlib.crc32(payload)) + payload


def _unseal(key: bytes, value: bytes) -> bytes:
    if len(value) < _CRC.size or _CRC.unpack_from(value)[0] != zlib.crc32(value[_CRC.size :]):
        raise LogStoreCorruptError(f"meta record {key.decode()!r} failed its CRC check")
    return value[_CRC.size :]


def _encode_snapshot(meta: SnapshotMeta) -> bytes:
    voters = struct.pack(f">{len(meta.voters)}Q", *meta.voters)
    return _SNAPSHOT_HEAD.pack(meta.index, meta.term, len(meta.voters)) + voters


def _decode_snapshot(payload: bytes) -> SnapshotMeta:
    index, term, voter_count = _SNAPSHOT_HEAD.unpack_from(payload)
    voters = struct.unpack_from(f">{voter_count}Q", payload, _SNAPSHOT_HEAD.size)
    return SnapshotMeta(index=index, term=term, voters=tuple(voters))


class LmdbLogStore:
    """LogStore on LMDB; the contract is in `quorum.log_store` (threading: module doc)."""

    def __init__(
        self,
        path: str | Path,
        map_size_bytes: int = MAP_SIZE_BYTES_DEFAULT,
        logger: Any = None,
    ) -> None:
        self._path = Path(path)
        self._path.mkdir(parents=True, exist_ok=True)
        self._log = logger if logger is not None else structlog.get_logger("quorum.lmdb_log_store")
        self._env: lmdb.Environment | None = lmdb.open(
            str(self._path),
            map_size=map_size_bytes,
            max_dbs=2,
            sync=False,
            metasync=False,
        )
        self._log_db = self._env.open_db(b"log")
        self._meta_db = self._env.open_db(b"meta")

    # -- reading ------------------------------------------------------------

    def load(self) -> PersistentState:
        """Everything stored; a damaged or non-contiguous log tail is cut off first (and durably)."""
        env = self._live_env()
        with env.begin() as txn:
            hard_state = self._read_hard_state(txn)
            snapshot = self._read_snapshot(txn)
            compacted_index, compacted_term = self._read_compaction(txn)
            entries, bad_index = self._read_valid_prefix(txn, compacted_index)
            last_stored_index = self._last_index(txn, compacted_index)
        if bad_index is not None:
            self._truncate_tail(bad_index)
            last_valid_index = entries[-1].index if entries else compacted_index
            # The commit index is left as stored: the core decides what a commit
            # beyond the log means. We only report it.
            self._log.warning(
                "log_truncated_corrupt_tail",
                first_index_cut=bad_index,
                last_index_cut=last_stored_index,
                last_valid_index=last_valid_index,
                commit=hard_state.commit,
                commit_beyond_log=hard_state.commit > last_valid_index,
            )
        return PersistentState(
            hard_state=hard_state,
            snapshot=snapshot,
            compacted_index=compacted_index,
            compacted_term=compacted_term,
            entries=tuple(entries),
        )

    def identity(self) -> tuple[str, str] | None:
        """(cluster_id, peers) recorded by `set_identity`, None on a fresh store."""
        with self._live_env().begin() as txn:
            value = txn.get(_META_IDENTITY, db=self._meta_db)
        if value is None:
            return None
        cluster_id, peers = json.loads(_unseal(_META_IDENTITY, value))
        return cluster_id, peers

    # -- writing (one writer thread) -----------------------------------------

    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None,
        sync: bool,
    ) -> None:
        """Snapshot, then entries, then hard state, in one transaction; one fsync when `sync`."""
        env = self._live_env()
        with env.begin(write=True) as txn:  # aborts on exception: all or nothing
            if snapshot is not None:
                txn.drop(self._log_db, delete=False)
                self._put_meta(txn, _META_COMPACTION, _COMPACTION.pack(snapshot.index, snapshot.term))
                self._put_meta(txn, _META_SNAPSHOT, _encode_snapshot(snapshot))
            if entries:
                self._append(txn, entries)
            if hard_state is not None:
                self._put_meta(
                    txn, _META_HARD_STATE, _HARD_STATE.pack(hard_state.term, hard_state.vote, hard_state.commit)
                )
        if sync:
            env.sync(True)

    def compact(self, index: int, snapshot: SnapshotMeta) -> None:
        """Drop entries <= index and record `snapshot`; atomic and durable."""
        env = self._live_env()
        with env.begin(write=True) as txn:
            compacted_index, _ = self._read_compaction(txn)
            if index > compacted_index:
                value = txn.get(_KEY.pack(index), db=self._log_db)
                if value is None:
                    last_index = self._last_index(txn, compacted_index)
                    raise ValueError(f"cannot compact to {index}: log ends at {last_index}")
                entry = decode_entry(index, value)
                if entry is None:
                    raise LogStoreCorruptError(f"entry {index} failed its CRC check during compaction")
                self._delete_through(txn, index)
                self._put_meta(txn, _META_COMPACTION, _COMPACTION.pack(index, entry.term))
            self._put_meta(txn, _META_SNAPSHOT, _encode_snapshot(snapshot))
        env.sync(True)

    def set_identity(self, cluster_id: str, peers: str) -> None:
        env = self._live_env()
        with env.begin(write=True) as txn:
            self._put_meta(txn, _META_IDENTITY, json.dumps([cluster_id, peers]).encode())
        env.sync(True)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    # -- internals ------------------------------------------------------------

    def _live_env(self) -> lmdb.Environment:
        if self._env is None:
            raise LogStoreError(f"log store {self._path} is closed")
        return self._env

    def _append(self, txn: lmdb.Transaction, entries: Sequence[Entry]) -> None:
        first = entries[0].index
        count = len(entries)
        if entries[-1].index != first + count - 1:
            raise ValueError(f"entries {first}..{entries[-1].index} are not contiguous ({count} given)")
        compacted_index, _ = self._read_compaction(txn)
        last_index = self._last_index(txn, compacted_index)
        if first <= compacted_index or first > last_index + 1:
            raise ValueError(
                f"entries starting at {first} do not follow the stored log ({compacted_index + 1}..{last_index})"
            )
        cursor = txn.cursor(db=self._log_db)
        if first <= last_index:
            self._delete_from(cursor, first)
        # append=True: keys must be strictly increasing and above every stored
        # key, which the suffix delete guarantees; LMDB then skips the search.
        items = [(_KEY.pack(e.index), encode_entry(e)) for e in entries]
        _, added = cursor.putmulti(items, dupdata=False, overwrite=True, append=True)
        if added != count:
            raise ValueError(f"entries {first}..{entries[-1].index} are not strictly increasing")

    @staticmethod
    def _delete_from(cursor: lmdb.Cursor, index: int) -> None:
        """Delete every entry >= index (Cursor.delete moves to the next item)."""
        if not cursor.set_range(_KEY.pack(index)):
            return
        while cursor.delete():
            pass

    def _delete_through(self, txn: lmdb.Transaction, index: int) -> None:
        """Delete every entry <= index."""
        cursor = txn.cursor(db=self._log_db)
        limit = _KEY.pack(index)
        if not cursor.first():
            return
        while cast(bytes, cursor.key()) <= limit and cursor.delete():
            pass

    def _truncate_tail(self, index: int) -> None:
        env = self._live_env()
        with env.begin(write=True) as txn:
            self._delete_from(txn.cursor(db=self._log_db), index)
        env.sync(True)

    def _read_valid_prefix(self, txn: lmdb.Transaction, compacted_index: int) -> tuple[list[Entry], int | None]:
        """Entries after the compaction point up to the first bad or missing one, and that one's index."""
        entries: list[Entry] = []
        expected = compacted_index + 1
        cursor = txn.cursor(db=self._log_db)
        if not cursor.set_range(_KEY.pack(expected)):
            return entries, None
        for key, value in cursor.iternext():
            index = _KEY.unpack(key)[0]
            entry = decode_entry(index, cast(bytes, value)) if index == expected else None
            if entry is None:  # damaged, or `expected` is missing (index > expected)
                return entries, expected
            entries.append(entry)
            expected += 1
        return entries, None

    def _last_index(self, txn: lmdb.Transaction, compacted_index: int) -> int:
        cursor = txn.cursor(db=self._log_db)
        return _KEY.unpack(cursor.key())[0] if cursor.last() else compacted_index

    def _read_hard_state(self, txn: lmdb.Transaction) -> HardState:
        payload = self._get_meta(txn, _META_HARD_STATE)
        if payload is None:
            return HardState()
        term, vote, commit = _HARD_STATE.unpack(payload)
        return HardState(term=term, vote=vote, commit=commit)

    def _read_compaction(self, txn: lmdb.Transaction) -> tuple[int, int]:
        payload = self._get_meta(txn, _META_COMPACTION)
        if payload is None:
            return 0, 0
        index, term = _COMPACTION.unpack(payload)
        return index, term

    def _read_snapshot(self, txn: lmdb.Transaction) -> SnapshotMeta | None:
        payload = self._get_meta(txn, _META_SNAPSHOT)
        return None if payload is None else _decode_snapshot(payload)

    def _get_meta(self, txn: lmdb.Transaction, key: bytes) -> bytes | None:
        value = txn.get(key, db=self._meta_db)
        return None if value is None else _unseal(key, cast(bytes, value))

    def _put_meta(self, txn: lmdb.Transaction, key: bytes, payload: bytes) -> None:
        txn.put(key, _seal(payload), db=self._meta_db)
