"""What the quorum replicates into: the state-machine contract, and a small durable register map.

The quorum hands committed entries to `apply` in log order, exactly once per
node (an entry already covered by `applied_index` is never handed again), and
restores from a snapshot when it fell behind the leader's compacted log.
`apply`, `restore` and `snapshot_chunks` raise StateMachineDamagedError when
the storage underneath fails (quorum.state_check): the node stops, and its
next start rebuilds the state machine.
zkemu's znode tree implements the same protocol; `RegisterMap` is the
stand-in the bare quorum serves (and tests and benchmarks use): commands are
"set key to value", reads return the value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import lmdb
import structlog

from quorum.raft.types import Entry, EntryKind
from quorum.register_command import decode_set
from quorum.state_check import DamagedRecordError, is_damage, mark_damaged, open_read_only, set_aside_if_damaged

_APPLIED_KEY = b"applied_index"
_APPLIED_TERM_KEY = b"applied_term"
_RECORD_LENS = struct.Struct(">II")
_DB_NAMES = frozenset({b"data", b"meta"})
# The start-up check of the environment, run in a child process (quorum.state_check).
REGISTER_CHECKER = "quorum.state_machine:check_register_map"


class StateMachine(Protocol):
    """Everything the node's Ready loop (quorum.node) calls on the state machine, and nothing more."""

    # Whether `prepare` does any work: the loop's apply-ahead steps (NodeSettings.apply_ahead_*) are
    # skipped for a state machine whose `prepare` does nothing.
    prepares_ahead: bool
    # Whether opening found the database damaged and started it empty (quorum.state_check): the node
    # then restores it from a snapshot or a peer before it starts (quorum.state_restore).
    rebuilt: bool

    def applied_index(self) -> int: ...

    def applied_term(self) -> int | None:
        """The term of the entry at applied_index(), written in the same transaction as the index (0 before
        the first apply). None when the database predates the stored term and has applied something: the
        node then takes the term from its log, or refuses to start if the log no longer holds that entry.
        The node makes (applied_index, applied_term) its snapshot base when its log lost entries the state
        machine had applied (quorum.raft.recovery)."""
        ...

    def apply(self, entries: Sequence[Entry]) -> list[bytes]:
        """Apply committed entries in order; one result per entry (b"" for no-ops)."""
        ...

    def prepare(self, entries: Sequence[Entry]) -> None:
        """Apply entries not known committed yet in a way that stays invisible, so that `apply` of the same
        entries only has to make that work visible (and abandons it when it is given other entries: a new
        leader replaced them). The loop passes entries in log order, the first right after applied_index().
        An optimisation only; a state machine with nothing to prepare does nothing and says so with
        `prepares_ahead = False`."""
        ...

    def sync(self) -> None:
        """Make every applied entry's effect durable: the node calls it before its log forgets entries
        (after a snapshot), since `apply` itself need not fsync (the Raft log is the durable record)."""
        ...

    def snapshot_chunks(self) -> Iterator[bytes]:
        """The state as of applied_index() at the call, as bytes to write into a snapshot file. The state
        is fixed by the call itself (a read transaction opened then, not at the first chunk): the node
        consumes the iterator later, in another thread, while it goes on applying entries."""
        ...

    def restore(self, snapshot_path: Path, index: int, term: int | None = None) -> None:
        """Replace the whole state by the snapshot file taken at `index`, whose entry had `term`
        (None: unknown; the node always passes it)."""
        ...

    def read(self, key: bytes) -> bytes | None: ...

    def close(self) -> None: ...


class RegisterMap:
    """A durable key -> value map in its own LMDB environment.

    It is written without fsync: the Raft log is the durable record, and a
    process killed with SIGKILL keeps every LMDB commit (the OS page cache
    holds it). The node fsyncs this environment before it compacts the log
    (`sync()`), so entries are only dropped once their effect is on disk.
    """

    prepares_ahead = False  # `prepare` has nothing to do: each apply is one short LMDB transaction

    def __init__(self, path: Path, map_size_bytes: int = 4 << 30, log: Any = None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._path = path
        # A damaged environment is moved aside and the map starts empty (quorum.state_check).
        self.rebuilt = set_aside_if_damaged(path, REGISTER_CHECKER, log or structlog.get_logger("quorum.register"))
        self._env = lmdb.open(str(path), map_size=map_size_bytes, max_dbs=2, sync=False, metasync=False)
        self._data = self._env.open_db(b"data")
        self._meta = self._env.open_db(b"meta")
        with self._env.begin() as txn:
            raw = txn.get(_APPLIED_KEY, db=self._meta)
            raw_term = txn.get(_APPLIED_TERM_KEY, db=self._meta)
        self._applied = int(raw) if raw else 0
        self._applied_term: int | None = int(raw_term) if raw_term else (0 if self._applied == 0 else None)

    def applied_index(self) -> int:
        return self._applied

    def applied_term(self) -> int | None:
        return self._applied_term

    def apply(self, entries: Sequence[Entry]) -> list[bytes]:
        results: list[bytes] = []
        if not entries:
            return results
        try:
            with self._env.begin(write=True) as txn:
                for e in entries:
                    if e.index <= self._applied:
                        raise AssertionError(f"entry {e.index} applied twice (applied {self._applied})")
                    if e.kind is EntryKind.NORMAL and e.data:
                        key, value = decode_set(e.data)
                        txn.put(key, value, db=self._data)
                    results.append(b"")
                last = entries[-1].index
                txn.put(_APPLIED_KEY, str(last).encode(), db=self._meta)
                txn.put(_APPLIED_TERM_KEY, str(entries[-1].term).encode(), db=self._meta)
        except lmdb.Error as exc:
            raise (mark_damaged(self._path, exc) if is_damage(exc) else exc) from exc
        self._applied = last
        self._applied_term = entries[-1].term
        return results

    def prepare(self, entries: Sequence[Entry]) -> None:
        """Nothing to prepare (prepares_ahead is False)."""

    def read(self, key: bytes) -> bytes | None:
        with self._env.begin(db=self._data) as txn:
            return txn.get(key)

    def snapshot_chunks(self) -> Iterator[bytes]:
        return self._chunks(self._env.begin(db=self._data))  # the state as of now (StateMachine.snapshot_chunks)

    @staticmethod
    def _chunks(txn: lmdb.Transaction) -> Iterator[bytes]:
        with txn:  # py-lmdb's read transactions may move between threads (it opens environments MDB_NOTLS)
            batch: list[bytes] = []
            size = 0
            for key, value in txn.cursor():
                batch.append(_RECORD_LENS.pack(len(key), len(value)) + key + value)
                size += len(key) + len(value) + 8
                if size >= 1 << 20:
                    yield b"".join(batch)
                    batch, size = [], 0
            if batch:
                yield b"".join(batch)

    def restore(self, snapshot_path: Path, index: int, term: int | None = None) -> None:
        data = snapshot_path.read_bytes()
        try:
            with self._env.begin(write=True) as txn:
                txn.drop(self._data, delete=False)
                pos = 0
                while pos < len(data):
                    klen, vlen = _RECORD_LENS.unpack_from(data, pos)
                    pos += 8
                    txn.put(data[pos : pos + klen], data[pos + klen : pos + klen + vlen], db=self._data)
                    pos += klen + vlen
                txn.put(_APPLIED_KEY, str(index).encode(), db=self._meta)
                if term is None:
                    txn.delete(_APPLIED_TERM_KEY, db=self._meta)
                else:
                    txn.put(_APPLIED_TERM_KEY, str(term).encode(), db=self._meta)
            self._env.sync(True)
        except lmdb.Error as exc:
            raise (mark_damaged(self._path, exc) if is_damage(exc) else exc) from exc
        self._applied = index
        self._applied_term = term if term is not None or index else 0

    def sync(self) -> None:
        self._env.sync(True)

    def close(self) -> None:
        self._env.close()


def check_register_map(path: Path) -> None:
    """Read every record back (the values are opaque bytes) and decode the applied index; raise when damaged."""
    env = open_read_only(path, len(_DB_NAMES))
    try:
        with env.begin() as txn:
            names = {k for k, _ in txn.cursor()}
            if not names <= _DB_NAMES:
                raise DamagedRecordError(f"the main database names {sorted(names)}, expected {sorted(_DB_NAMES)}")
            for name in sorted(names):
                for _ in txn.cursor(db=env.open_db(name, txn=txn, create=False)):
                    pass  # every page read back: LMDB raises on a damaged one
            if b"meta" in names:
                raw = txn.get(_APPLIED_KEY, db=env.open_db(b"meta", txn=txn, create=False))
                if raw is not None and not raw.isdigit():
                    raise DamagedRecordError(f"meta: applied index {raw!r} is not a number")
    finally:
        env.close()
