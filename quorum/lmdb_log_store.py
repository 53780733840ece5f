"""The production LogStore: Raft log, hard state and snapshot metadata in LMDB.

Layout: one LMDB environment (a directory) with two named databases.

* `log`: key = entry index as 8-byte big-endian (so LMDB's byte order is
  index order), value = header `>QBI` (term u64, kind u8, crc32 u32) + data.
  The CRC covers term, kind and data (zlib.crc32) and is checked on load.
* `meta`: hard state, compaction point, latest snapshot metadata and the
  node's identity; each value is prefixed with a crc32 of the rest.

Durability. A save is durable once it is in the write-ahead log
(quorum.wal: one append, and one fdatasync when `sync`, however many entries
it carries: group commit), which costs a fraction of an LMDB commit. The
saves since the last checkpoint are also merged in memory (`_Pending`: the
latest snapshot, one run of entries, the latest hard state) and written to
LMDB in one transaction when the log grows past `checkpoint_bytes`, before a
compaction, on load and on close; the write-ahead log then starts over.
LMDB is opened with its default durability (data synced before the meta
page that points at it), so a power loss leaves it consistent, and opening
the store replays whatever the write-ahead log still holds. A damaged record
(or a save that does not follow the stored log) ends the replay: it and every
later save are cut, with one `write_ahead_log_tail_cut` warning naming the
indexes they held, the segment and the offset, and noted in `tail_cuts`, from
which the node decides what else the cut costs (quorum.raft.recovery). A save with
sync=False may be lost by a power loss, never by a process crash: the Raft
core asks for it only when nothing it has promised depends on it.

Threading. `save`, `compact` and `set_identity` are called from one thread
at a time (the node runner's loop thread for small saves, its writer thread
for the rest, never both at once); `load` and `identity` run at start-up.
Nothing here takes a lock: two saves at once would interleave their
write-ahead records and their merge into `_Pending`.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import lmdb
import structlog

from quorum.latency_metrics import BACKEND_COMMIT
from quorum.log_store import SAVED, SaveHandle
from quorum.raft.types import Entry, EntryKind, HardState, PersistentState, SnapshotMeta
from quorum.wal import WalDamage, WriteAheadLog

MAP_SIZE_BYTES_DEFAULT = 8 * 1024**3  # address space only: the file grows as used
# How much write-ahead log makes a checkpoint into LMDB. The checkpoint runs in
# the save that crosses it, which then takes longer: 1 MB of 150-byte entries
# is about 5,000 entries, 15-20 ms on this 2-core machine on a slow day.
CHECKPOINT_BYTES_DEFAULT = 1 << 20
WAL_DIRECTORY = "wal"

_KEY = struct.Struct(">Q")
_TERM_KIND = struct.Struct(">QB")
_CRC = struct.Struct(">I")
_ENTRY_HEADER_BYTES = _TERM_KIND.size + _CRC.size  # 13
_HARD_STATE = struct.Struct(">QQQ")  # term, vote, commit
_COMPACTION = struct.Struct(">QQ")  # index, term
_SNAPSHOT_HEAD = struct.Struct(">QQI")  # index, term, voter count; voters follow as >Q each
# Then the rest of the configuration (quorum.raft.membership): learner and observer counts, the configuration's
# index and its context's length; learners, observers (>Q each) and the context follow. A record written before
# membership changes existed ends after the voters.
_SNAPSHOT_CONFIG = struct.Struct(">IIQI")

_META_HARD_STATE = b"hard_state"
_META_COMPACTION = b"compaction"
_META_SNAPSHOT = b"snapshot"
_META_IDENTITY = b"identity"
_META_REPAIR = b"repair_index"  # PersistentState.repair_index, >Q
_INDEX = struct.Struct(">Q")

_KINDS = {kind.value: kind for kind in EntryKind}

# A save in the write-ahead log: flags, hard state, entry count; then the
# snapshot (length-prefixed) when flagged; then per entry its head and data.
_SAVE_HEAD = struct.Struct(">BQQQI")
_SAVE_HAS_HARD_STATE = 1
_SAVE_HAS_SNAPSHOT = 2
_SAVE_ENTRY = struct.Struct(">QQBI")  # index, term, kind, data length
_LENGTH = struct.Struct(">I")

# The environment is opened without buffers=True, so LMDB hands out bytes, never
# memoryviews; `cast` tells the type checker (the lmdb stubs allow both).


class LogStoreError(Exception):
    """Storage found something it cannot repair by truncating the log tail."""


class LogStoreIOError(LogStoreError):
    """A write or fsync of the log failed (the disk, or a failpoint: runtime.failpoints). What it wrote is
    in an unknown state: the node must acknowledge nothing more and stop (quorum.server halts the process)."""


def _io_failed(operation: str, path: Path, exc: BaseException) -> LogStoreIOError:
    return LogStoreIOError(f"{operation} of the Raft log in {path} failed: {exc}")


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


@dataclass(frozen=True, slots=True)
class TailCut:
    """What recovery cut off the end of the stored log because it was damaged, and where the damage was.

    The indexes are those of the entries the cut bytes still name (a damaged record's may be unreadable);
    None when none could be read. The node adds what its state machine applied (quorum.raft.recovery)."""

    reason: str
    last_valid_index: int
    first_index_cut: int | None
    last_index_cut: int | None
    segment: str = ""  # the write-ahead log segment with the damage; "" when the damage was in LMDB
    offset_bytes: int = 0


def _indexes_in_save(payload: bytes) -> list[int]:
    """The entry indexes a write-ahead save names, as far as it can be read (reading stops at the first
    field that does not fit: a damaged save may end early)."""
    indexes: list[int] = []
    try:
        flags, _, _, _, count = _SAVE_HEAD.unpack_from(payload)
        offset = _SAVE_HEAD.size
        if flags & _SAVE_HAS_SNAPSHOT:
            offset += _LENGTH.size + _LENGTH.unpack_from(payload, offset)[0]
        for _ in range(min(count, len(payload))):
            index, _, _, length = _SAVE_ENTRY.unpack_from(payload, offset)
            indexes.append(index)
            offset += _SAVE_ENTRY.size + length
            if offset > len(payload):
                break
    except struct.error:
        pass
    return indexes


def _plausible_indexes(damaged: bytes, last_valid_index: int) -> list[int]:
    """The indexes a damaged save names, as far as they look like a save's: contiguous, and starting
    where a save may start (at most right after the log it follows). A flipped bit in an index yields
    none or fewer, and one in the count at most as many as the payload could hold, never a wild index.

    A save's entries are consecutive, so its head's count names them all even when the entries after the
    first few are unreadable (a write torn in the middle of the payload: the node may have acknowledged
    every one of them before the tear). The count is taken when it fits the payload's length (each entry
    needs its fixed fields at least); else only the readable run counts."""
    indexes = _indexes_in_save(damaged)
    if not indexes or not 0 < indexes[0] <= last_valid_index + 1:
        return []
    run = 1
    while run < len(indexes) and indexes[run] == indexes[0] + run:
        run += 1
    try:
        flags, _, _, _, count = _SAVE_HEAD.unpack_from(damaged)
    except struct.error:
        return indexes[:run]
    room = len(damaged) - _SAVE_HEAD.size
    if flags & _SAVE_HAS_SNAPSHOT or not run <= count <= room // _SAVE_ENTRY.size:
        return indexes[:run]
    return list(range(indexes[0], indexes[0] + count))


def _save_length(data: bytes, offset: int) -> int | None:
    """The length of the save encoded at `offset` by its own framing (WriteAheadLog's PayloadMeasure), None
    when it does not fit in `data`."""
    try:
        flags, _, _, _, count = _SAVE_HEAD.unpack_from(data, offset)
        at = offset + _SAVE_HEAD.size
        if flags & ~(_SAVE_HAS_HARD_STATE | _SAVE_HAS_SNAPSHOT) or count > (len(data) - at) // _SAVE_ENTRY.size:
            return None
        if flags & _SAVE_HAS_SNAPSHOT:
            at += _LENGTH.size + _LENGTH.unpack_from(data, at)[0]
        for _ in range(count):
            at += _SAVE_ENTRY.size + _SAVE_ENTRY.unpack_from(data, at)[3]
    except struct.error:
        return None
    return at - offset if at <= len(data) else None


def _seal(payload: bytes) -> bytes:
    return _CRC.pack(zlib.crc32(payload)) + payload


def _unseal(key: bytes, value: bytes) -> bytes:
    if len(value) < _CRC.size or _CRC.unpack_from(value)[0] != zlib.crc32(value[_CRC.size :]):
        raise LogStoreCorruptError(f"meta record {key.decode()!r} failed its CRC check")
    return value[_CRC.size :]


def _encode_snapshot(meta: SnapshotMeta) -> bytes:
    voters = struct.pack(f">{len(meta.voters)}Q", *meta.voters)
    others = meta.learners + meta.observers
    config = _SNAPSHOT_CONFIG.pack(len(meta.learners), len(meta.observers), meta.config_index, len(meta.config_context))
    return (
        _SNAPSHOT_HEAD.pack(meta.index, meta.term, len(meta.voters))
        + voters
        + config
        + struct.pack(f">{len(others)}Q", *others)
        + meta.config_context
    )


def _decode_snapshot(payload: bytes) -> SnapshotMeta:
    index, term, voter_count = _SNAPSHOT_HEAD.unpack_from(payload)
    voters = struct.unpack_from(f">{voter_count}Q", payload, _SNAPSHOT_HEAD.size)
    at = _SNAPSHOT_HEAD.size + 8 * voter_count
    if len(payload) <= at:
        return SnapshotMeta(index=index, term=term, voters=tuple(voters))
    learner_count, observer_count, config_index, context_bytes = _SNAPSHOT_CONFIG.unpack_from(payload, at)
    at += _SNAPSHOT_CONFIG.size
    others = struct.unpack_from(f">{learner_count + observer_count}Q", payload, at)
    at += 8 * len(others)
    context = bytes(payload[at : at + context_bytes])
    if len(context) != context_bytes:
        raise LogStoreCorruptError(
            f"snapshot record holds {len(context)} context bytes, its header says {context_bytes}"
        )
    return SnapshotMeta(
        index, term, tuple(voters), others[:learner_count], others[learner_count:], config_index, context
    )


def _encode_save(hard_state: HardState | None, entries: Sequence[Entry], snapshot: SnapshotMeta | None) -> bytes:
    flags = (_SAVE_HAS_HARD_STATE if hard_state is not None else 0) | (_SAVE_HAS_SNAPSHOT if snapshot else 0)
    hs = hard_state or HardState()
    parts = [_SAVE_HEAD.pack(flags, hs.term, hs.vote, hs.commit, len(entries))]
    if snapshot is not None:
        encoded = _encode_snapshot(snapshot)
        parts += (_LENGTH.pack(len(encoded)), encoded)
    pack = _SAVE_ENTRY.pack
    for e in entries:
        parts += (pack(e.index, e.term, e.kind, len(e.data)), e.data)
    return b"".join(parts)


def _decode_save(payload: bytes) -> tuple[HardState | None, list[Entry], SnapshotMeta | None]:
    flags, term, vote, commit, count = _SAVE_HEAD.unpack_from(payload)
    offset = _SAVE_HEAD.size
    snapshot = None
    if flags & _SAVE_HAS_SNAPSHOT:
        (length,) = _LENGTH.unpack_from(payload, offset)
        offset += _LENGTH.size
        snapshot = _decode_snapshot(payload[offset : offset + length])
        offset += length
    entries = []
    for _ in range(count):
        index, entry_term, kind_value, length = _SAVE_ENTRY.unpack_from(payload, offset)
        offset += _SAVE_ENTRY.size
        kind = _KINDS.get(kind_value)
        if kind is None:
            raise LogStoreError(f"write-ahead log entry {index} has unknown kind {kind_value}")
        entries.append(Entry(index=index, term=entry_term, data=payload[offset : offset + length], kind=kind))
        offset += length
    hard_state = HardState(term=term, vote=vote, commit=commit) if flags & _SAVE_HAS_HARD_STATE else None
    return hard_state, entries, snapshot


class _Pending:
    """The net effect of the saves since the last checkpoint: what one LMDB transaction must write."""

    __slots__ = ("entries", "hard_state", "snapshot")

    def __init__(self) -> None:
        self.snapshot: SnapshotMeta | None = None
        # One contiguous run: stored entries >= entries[0].index are replaced by it.
        self.entries: list[Entry] = []
        self.hard_state: HardState | None = None

    def __bool__(self) -> bool:
        return self.snapshot is not None or bool(self.entries) or self.hard_state is not None

    def merge(self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: SnapshotMeta | None) -> None:
        if snapshot is not None:
            self.snapshot = snapshot
            self.entries = []
        if entries:
            run = self.entries
            first = entries[0].index
            if run and run[0].index <= first <= run[-1].index + 1:
                del run[first - run[0].index :]
                run.extend(entries)
            else:
                self.entries = list(entries)
        if hard_state is not None:
            self.hard_state = hard_state


class _LmdbSave:
    """A begun save (LmdbLogStore.begin_save): durable, and booked, once `wait_durable` returns."""

    __slots__ = ("_store", "_save")

    def __init__(
        self,
        store: LmdbLogStore,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None,
        compacted_index: int,
        last_index: int,
    ) -> None:
        self._store: LmdbLogStore | None = store
        self._save = (hard_state, entries, snapshot, compacted_index, last_index)

    def wait_durable(self) -> None:
        store, self._store = self._store, None
        if store is None:
            return  # waited for already
        try:
            store._wal.wait_durable()
        except OSError as exc:
            raise _io_failed("fsync", store._path, exc) from exc
        finally:
            store._save_in_flight = False
        try:
            store._saved(*self._save)
        except (OSError, lmdb.Error) as exc:
            raise _io_failed("a checkpoint", store._path, exc) from exc


class LmdbLogStore:
    """LogStore on LMDB; the contract is in `quorum.log_store` (threading: module doc)."""

    def __init__(
        self,
        path: str | Path,
        map_size_bytes: int = MAP_SIZE_BYTES_DEFAULT,
        logger: Any = None,
        checkpoint_bytes: int = CHECKPOINT_BYTES_DEFAULT,
    ) -> None:
        self._path = Path(path)
        self._path.mkdir(parents=True, exist_ok=True)
        self._log = logger if logger is not None else structlog.get_logger("quorum.lmdb_log_store")
        self._checkpoint_bytes = checkpoint_bytes
        self._env: lmdb.Environment | None = lmdb.open(str(self._path), map_size=map_size_bytes, max_dbs=2)
        self._log_db = self._env.open_db(b"log")
        self._meta_db = self._env.open_db(b"meta")
        self._pending = _Pending()
        self._save_in_flight = False  # begin_save wrote a record whose wait_durable has not returned
        # What recovery cut off the log's end (the write-ahead log's tail, then damaged LMDB entries).
        self.tail_cuts: list[TailCut] = []
        with self._env.begin() as txn:
            # What `save` checks new entries against, kept here so a save needs no LMDB read.
            self._compacted_index, _ = self._read_compaction(txn)
            self._last_index = self._last_index_in(txn, self._compacted_index)
        # Preallocated beyond the checkpoint size, so the save that crosses it still fits.
        self._wal = WriteAheadLog(
            self._path / WAL_DIRECTORY, preallocate_bytes=max(4 * checkpoint_bytes, 1 << 16), measure=_save_length
        )
        # The cut becomes durable with this checkpoint (the damaged segment goes), and so, in the same
        # transaction, does the last index the node may have acknowledged before it.
        self._checkpoint(repair_index=self._replay_write_ahead_log())

    def _replay_write_ahead_log(self) -> int:
        """Merge the saves the write-ahead log still holds, up to its damage or the first save that does not
        follow the stored log (what follows a lost save may depend on it); report what was cut. Returns
        the last index the cut saves held (PersistentState.repair_index), 0 when nothing was cut."""
        recovered = self._wal.recovered
        replayed = 0
        unfit: ValueError | None = None
        for payload in recovered:
            save = _decode_save(payload)
            try:
                self._compacted_index, self._last_index = self._check_follows(save[1], save[2])
            except ValueError as exc:
                unfit = exc
                break
            self._pending.merge(*save)
            replayed += 1
        if recovered:
            self._log.debug("write_ahead_log_replayed", saves=replayed)
        damage = self._wal.damage
        if unfit is None and damage is None:
            return 0
        cut = self._report_write_ahead_cut(recovered[replayed:], damage, unfit)
        # When no cut save could be read, at least the entry after the log kept may have been in one.
        return cut.last_index_cut if cut.last_index_cut is not None else self._last_index + 1

    def _report_write_ahead_cut(
        self, unfit_saves: list[bytes], damage: WalDamage | None, unfit: ValueError | None
    ) -> TailCut:
        """One warning naming the entries cut off the write-ahead log's tail and where the damage was."""
        cut_indexes = [i for save in unfit_saves for i in _indexes_in_save(save)]
        if damage is not None:
            cut_indexes += _plausible_indexes(damage.damaged, self._last_index)
            cut_indexes += [i for save in damage.after for i in _indexes_in_save(save)]
        # The damaged save followed the log kept: what the readable saves do not name from the log's end on
        # was in it.
        first_cut = min(*cut_indexes, self._last_index + 1) if cut_indexes else None
        cut = TailCut(
            reason=damage.reason if unfit is None and damage is not None else "save_does_not_follow_the_log",
            last_valid_index=self._last_index,
            first_index_cut=min(cut_indexes, default=None) if unfit is not None else first_cut,
            last_index_cut=max(cut_indexes) if cut_indexes else None,
            segment=damage.segment if damage is not None else "",
            offset_bytes=damage.offset_bytes if damage is not None else 0,
        )
        self.tail_cuts.append(cut)
        self._log.warning(
            "write_ahead_log_tail_cut",
            reason=cut.reason,
            first_index_cut=cut.first_index_cut,
            last_index_cut=cut.last_index_cut,
            last_valid_index=cut.last_valid_index,
            segment=cut.segment,
            offset_bytes=cut.offset_bytes,
            cut_bytes=damage.cut_bytes if damage is not None else 0,
            saves_cut=len(unfit_saves) + (1 + len(damage.after) if damage is not None else 0),
            unfit=str(unfit) if unfit is not None else "",
            path=str(self._path),
        )
        return cut

    # -- reading ------------------------------------------------------------

    def load(self) -> PersistentState:
        """Everything stored; a damaged or non-contiguous log tail is cut off first (and durably)."""
        self._checkpoint()
        env = self._live_env()
        with env.begin() as txn:
            hard_state = self._read_hard_state(txn)
            snapshot = self._read_snapshot(txn)
            compacted_index, compacted_term = self._read_compaction(txn)
            entries, bad_index = self._read_valid_prefix(txn, compacted_index)
            last_stored_index = self._last_index_in(txn, compacted_index)
            repair = self._get_meta(txn, _META_REPAIR)
        repair_index = _INDEX.unpack(repair)[0] if repair is not None else 0
        if bad_index is not None:
            repair_index = max(repair_index, last_stored_index)
            self._truncate_tail(bad_index, repair_index)
            last_valid_index = entries[-1].index if entries else compacted_index
            self._last_index = last_valid_index
            self.tail_cuts.append(
                TailCut(
                    "lmdb_entry_damaged", last_valid_index, bad_index, last_stored_index, segment="", offset_bytes=0
                )
            )
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
            repair_index=repair_index,
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
        """Snapshot, then entries, then hard state, as one write-ahead record; one fdatasync when `sync`."""
        record = self._record(hard_state, entries, snapshot)
        if record is None:
            return
        payload, compacted_index, last_index = record
        try:
            self._wal.append(payload, sync)
            self._saved(hard_state, entries, snapshot, compacted_index, last_index)
        except (OSError, lmdb.Error) as exc:
            raise _io_failed("a save", self._path, exc) from exc

    def begin_save(
        self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: SnapshotMeta | None
    ) -> SaveHandle:
        """Like `save` with `sync`, in two halves: the record is written and handed to the device now, and
        the returned handle's `wait_durable` waits for the fdatasync. The caller's work in between overlaps
        the disk's (LogStore.begin_save); nothing may rely on the save before `wait_durable` returns."""
        record = self._record(hard_state, entries, snapshot)
        if record is None:
            return SAVED
        payload, compacted_index, last_index = record
        try:
            self._wal.append_started(payload)
        except OSError as exc:
            raise _io_failed("a write", self._path, exc) from exc
        self._save_in_flight = True
        return _LmdbSave(self, hard_state, entries, snapshot, compacted_index, last_index)

    def _record(
        self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: SnapshotMeta | None
    ) -> tuple[bytes, int, int] | None:
        """The write-ahead record of a save and the (compaction point, last index) after it; None: nothing to save."""
        self._live_env()
        if self._save_in_flight:
            raise LogStoreError("a save was begun and not waited for (begin_save: one save at a time)")
        if snapshot is None and not entries and hard_state is None:
            return None
        compacted_index, last_index = self._check_follows(entries, snapshot)
        return _encode_save(hard_state, entries, snapshot), compacted_index, last_index

    def _saved(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None,
        compacted_index: int,
        last_index: int,
    ) -> None:
        """Book a save whose record is written (and synced, if asked): a checkpoint when the WAL is full."""
        self._compacted_index, self._last_index = compacted_index, last_index
        self._pending.merge(hard_state, entries, snapshot)
        if self._wal.size_bytes >= self._checkpoint_bytes:
            self._checkpoint()

    def _check_follows(self, entries: Sequence[Entry], snapshot: SnapshotMeta | None) -> tuple[int, int]:
        """(compaction point, last index) after the save; ValueError when its entries do not follow the log."""
        compacted_index, last_index = self._compacted_index, self._last_index
        if snapshot is not None:
            compacted_index = last_index = snapshot.index
        if entries:
            first = entries[0].index
            if entries[-1].index != first + len(entries) - 1:
                raise ValueError(f"entries {first}..{entries[-1].index} are not contiguous ({len(entries)} given)")
            if first <= compacted_index or first > last_index + 1:
                raise ValueError(
                    f"entries starting at {first} do not follow the stored log ({compacted_index + 1}..{last_index})"
                )
            last_index = entries[-1].index
        return compacted_index, last_index

    def _checkpoint(self, repair_index: int = 0) -> None:
        """Write the saves since the last checkpoint to LMDB (one durable transaction); the WAL starts over.
        `repair_index`: raise the stored PersistentState.repair_index to it in the same transaction."""
        pending = self._pending
        if pending or repair_index:
            env = self._live_env()
            started_ns = time.perf_counter_ns()
            with env.begin(write=True) as txn:  # aborts on exception: all or nothing
                if pending.snapshot is not None:
                    snapshot = pending.snapshot
                    txn.drop(self._log_db, delete=False)
                    self._put_meta(txn, _META_COMPACTION, _COMPACTION.pack(snapshot.index, snapshot.term))
                    self._put_meta(txn, _META_SNAPSHOT, _encode_snapshot(snapshot))
                if pending.entries:
                    self._append(txn, pending.entries)
                if pending.hard_state is not None:
                    hs = pending.hard_state
                    self._put_meta(txn, _META_HARD_STATE, _HARD_STATE.pack(hs.term, hs.vote, hs.commit))
                if repair_index:
                    self._raise_repair_index(txn, repair_index)
            BACKEND_COMMIT.observe(time.perf_counter_ns() - started_ns)
            self._pending = _Pending()
        self._wal.reset()

    def compact(self, index: int, snapshot: SnapshotMeta) -> None:
        """Drop entries <= index and record `snapshot`; atomic and durable."""
        if self._save_in_flight:
            raise LogStoreError("compact during a begun save (begin_save: wait_durable first)")
        try:
            self._compact(index, snapshot)
        except (OSError, lmdb.Error) as exc:
            raise _io_failed("a compaction", self._path, exc) from exc

    def _compact(self, index: int, snapshot: SnapshotMeta) -> None:
        self._checkpoint()
        env = self._live_env()
        with env.begin(write=True) as txn:
            compacted_index, _ = self._read_compaction(txn)
            if index > compacted_index:
                value = txn.get(_KEY.pack(index), db=self._log_db)
                if value is None:
                    last_index = self._last_index_in(txn, compacted_index)
                    raise ValueError(f"cannot compact to {index}: log ends at {last_index}")
                entry = decode_entry(index, value)
                if entry is None:
                    raise LogStoreCorruptError(f"entry {index} failed its CRC check during compaction")
                self._delete_through(txn, index)
                self._put_meta(txn, _META_COMPACTION, _COMPACTION.pack(index, entry.term))
                self._compacted_index = index
            self._put_meta(txn, _META_SNAPSHOT, _encode_snapshot(snapshot))

    def set_repair_index(self, index: int) -> None:
        """Record PersistentState.repair_index, durably (after the saves before it). The store records it
        itself with every cut it makes; this is for tools and tests."""
        self._checkpoint()
        with self._live_env().begin(write=True) as txn:
            self._put_meta(txn, _META_REPAIR, _INDEX.pack(index))

    def _raise_repair_index(self, txn: lmdb.Transaction, index: int) -> None:
        stored = self._get_meta(txn, _META_REPAIR)
        if stored is None or _INDEX.unpack(stored)[0] < index:
            self._put_meta(txn, _META_REPAIR, _INDEX.pack(index))

    def set_identity(self, cluster_id: str, peers: str) -> None:
        env = self._live_env()
        with env.begin(write=True) as txn:
            self._put_meta(txn, _META_IDENTITY, json.dumps([cluster_id, peers]).encode())

    def close(self) -> None:
        if self._env is not None:
            self._checkpoint()
            self._wal.close()
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
        last_index = self._last_index_in(txn, compacted_index)
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

    def _truncate_tail(self, index: int, repair_index: int) -> None:
        env = self._live_env()
        with env.begin(write=True) as txn:
            self._delete_from(txn.cursor(db=self._log_db), index)
            self._raise_repair_index(txn, repair_index)

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

    def _last_index_in(self, txn: lmdb.Transaction, compacted_index: int) -> int:
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
