"""LogStore contract tests over both implementations, plus LMDB recovery and crash durability."""

from __future__ import annotations

import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import lmdb
import pytest
from structlog.testing import capture_logs

from quorum.lmdb_log_store import LmdbLogStore, LogStoreError, TailCut, _encode_save
from quorum.log_store import LogStore, MemoryLogStore
from quorum.raft.types import Entry, EntryKind, HardState, PersistentState, SnapshotMeta
from quorum.wal import WriteAheadLog
from tests.faults.torn import tear_quorum_log
from tests.lmdb_crash_writer import payload, term_of

REPO_ROOT = Path(__file__).resolve().parent.parent


def entries(first: int, last: int, term: int = 1) -> list[Entry]:
    return [Entry(index=i, term=term, data=b"e%d-t%d" % (i, term)) for i in range(first, last + 1)]


@pytest.fixture(params=["memory", "lmdb", "lmdb-checkpoint-every-save"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogStore]:
    s: LogStore
    if request.param == "memory":
        s = MemoryLogStore()
    elif request.param == "lmdb":
        s = LmdbLogStore(tmp_path / "log")
    else:
        s = LmdbLogStore(tmp_path / "log", checkpoint_bytes=1)
    yield s
    s.close()


# -- contract: both implementations ------------------------------------------


def test_fresh_store_is_empty(store: LogStore) -> None:
    assert store.load() == PersistentState()


def test_save_load_round_trip(store: LogStore) -> None:
    saved = [
        Entry(index=1, term=1, kind=EntryKind.NOOP),
        Entry(index=2, term=1, data=b"\x00\xffbinary"),
        Entry(index=3, term=2, data=b"x" * 10_000),
    ]
    store.save(HardState(term=2, vote=3, commit=2), saved, None, sync=True)
    assert store.load() == PersistentState(hard_state=HardState(term=2, vote=3, commit=2), entries=tuple(saved))


def test_a_begun_save_counts_once_waited_for_and_is_the_only_one(store: LogStore) -> None:
    """begin_save: the caller works between the write and the wait; a second save or a compaction
    before the wait is refused (one save at a time), and after it the save is stored like any."""
    store.save(HardState(1, 1, 0), entries(1, 2), None, sync=True)
    saving = store.begin_save(HardState(1, 1, 2), entries(3, 4), None)
    if isinstance(store, LmdbLogStore):
        with pytest.raises(LogStoreError, match="one save at a time"):
            store.save(None, entries(5, 5), None, sync=True)
        with pytest.raises(LogStoreError, match="wait_durable first"):
            store.compact(1, SnapshotMeta(1, 1, (1,)))
    saving.wait_durable()
    saving.wait_durable()  # idempotent
    store.save(None, entries(5, 5), None, sync=True)
    state = store.load()
    assert state.hard_state == HardState(1, 1, 2)
    assert [e.index for e in state.entries] == [1, 2, 3, 4, 5]


def test_a_begun_empty_save_has_nothing_to_wait_for(store: LogStore) -> None:
    store.begin_save(None, (), None).wait_durable()
    assert store.load() == PersistentState()


def test_hard_state_none_keeps_the_stored_one(store: LogStore) -> None:
    store.save(HardState(term=4, vote=1, commit=0), [], None, sync=True)
    store.save(None, entries(1, 2), None, sync=False)
    state = store.load()
    assert state.hard_state == HardState(term=4, vote=1, commit=0)
    assert state.entries == tuple(entries(1, 2))


def test_entries_overwrite_the_suffix(store: LogStore) -> None:
    store.save(None, entries(1, 5, term=1), None, sync=True)
    store.save(None, entries(3, 4, term=2), None, sync=True)
    assert store.load().entries == tuple(entries(1, 2, term=1) + entries(3, 4, term=2))
    store.save(None, entries(5, 6, term=2), None, sync=True)  # plain append after the overwrite
    assert store.load().entries == tuple(entries(1, 2, term=1) + entries(3, 6, term=2))
    store.save(None, entries(1, 1, term=3), None, sync=True)  # overwrite from the very first entry
    assert store.load().entries == tuple(entries(1, 1, term=3))


def test_snapshot_then_entries(store: LogStore) -> None:
    store.save(None, entries(1, 20), None, sync=True)
    snap = SnapshotMeta(index=10, term=3, voters=(1, 2, 3))
    store.save(HardState(term=3, vote=0, commit=10), entries(11, 12, term=3), snap, sync=True)
    state = store.load()
    # The snapshot drops every stored entry, even those after it (the contract).
    assert (state.snapshot, state.compacted_index, state.compacted_term) == (snap, 10, 3)
    assert state.entries == tuple(entries(11, 12, term=3))
    assert state.hard_state == HardState(term=3, vote=0, commit=10)


def test_compact(store: LogStore) -> None:
    store.save(None, entries(1, 4, term=1) + entries(5, 10, term=2), None, sync=True)
    snap = SnapshotMeta(index=5, term=2, voters=(1, 2, 3))
    store.compact(5, snap)
    state = store.load()
    assert (state.snapshot, state.compacted_index, state.compacted_term) == (snap, 5, 2)
    assert state.entries == tuple(entries(6, 10, term=2))
    # Compacting to an index already compacted only records the newer snapshot.
    older = SnapshotMeta(index=3, term=1, voters=(1,))
    store.compact(3, older)
    state = store.load()
    assert (state.snapshot, state.compacted_index, state.entries) == (older, 5, tuple(entries(6, 10, term=2)))
    # Compacting everything leaves an empty log that continues after the point.
    store.compact(10, SnapshotMeta(index=10, term=2, voters=(1, 2, 3)))
    store.save(None, entries(11, 11, term=2), None, sync=True)
    state = store.load()
    assert (state.compacted_index, state.compacted_term, state.entries) == (10, 2, tuple(entries(11, 11, term=2)))


def test_compact_beyond_the_log_is_an_error(store: LogStore) -> None:
    store.save(None, entries(1, 3), None, sync=True)
    with pytest.raises(ValueError):
        store.compact(4, SnapshotMeta(index=4, term=1, voters=(1,)))
    assert store.load().entries == tuple(entries(1, 3))


def test_entries_after_a_gap_are_an_error(store: LogStore) -> None:
    store.save(HardState(term=1, vote=1, commit=1), entries(1, 3), None, sync=True)
    before = store.load()
    with pytest.raises(ValueError):
        store.save(HardState(term=9, vote=9, commit=9), entries(5, 6), None, sync=True)
    assert store.load() == before


def test_entries_before_the_compaction_point_are_an_error(store: LogStore) -> None:
    store.save(None, entries(1, 10), None, sync=True)
    store.compact(5, SnapshotMeta(index=5, term=1, voters=(1,)))
    before = store.load()
    with pytest.raises(ValueError):
        store.save(None, entries(5, 6), None, sync=True)
    assert store.load() == before


# -- LMDB only ------------------------------------------------------------------


def test_lmdb_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "log"
    store = LmdbLogStore(path)
    snap = SnapshotMeta(index=4, term=2, voters=(3, 1, 2))
    store.save(None, entries(1, 6), None, sync=True)
    store.save(HardState(term=2, vote=3, commit=7), entries(5, 8, term=2), None, sync=True)
    store.compact(4, snap)
    store.set_identity("cluster-a", "1=127.0.0.1:9001,2=127.0.0.1:9002")
    expected = store.load()
    store.close()

    reopened = LmdbLogStore(path)
    try:
        assert reopened.load() == expected
        assert expected.snapshot == snap and expected.compacted_term == 1
        assert reopened.identity() == ("cluster-a", "1=127.0.0.1:9001,2=127.0.0.1:9002")
    finally:
        reopened.close()


def _as_a_crash_leaves_it(store_path: Path, copy_path: Path) -> Path:
    """The files of an open store copied as a SIGKILL would leave them (LMDB's lock file aside)."""
    shutil.copytree(store_path, copy_path, ignore=shutil.ignore_patterns("lock.mdb"))
    return copy_path


def _the_same_saves(stores: list[LogStore]) -> None:
    for s in stores:
        s.save(HardState(term=1, vote=1, commit=0), entries(1, 5), None, sync=True)
        s.save(None, entries(4, 7, term=2), None, sync=False)  # overwrites a suffix
        s.save(HardState(term=2, vote=1, commit=6), [], SnapshotMeta(index=9, term=2, voters=(1, 2, 3)), sync=True)
        s.save(HardState(term=3, vote=2, commit=9), entries(10, 12, term=3), None, sync=True)


def test_lmdb_saves_after_the_last_checkpoint_come_back_from_the_write_ahead_log(tmp_path: Path) -> None:
    twin = MemoryLogStore()
    store = LmdbLogStore(tmp_path / "log")  # no checkpoint in a few small saves
    _the_same_saves([twin, store])
    crashed = LmdbLogStore(_as_a_crash_leaves_it(tmp_path / "log", tmp_path / "crashed"))
    store.close()
    try:
        assert crashed.load() == twin.load()
        # Replayed into LMDB and the write-ahead log started over: a second reopen agrees.
        crashed.close()
        crashed = LmdbLogStore(tmp_path / "crashed")
        assert crashed.load() == twin.load()
    finally:
        crashed.close()


def test_lmdb_a_torn_last_write_ahead_record_is_not_replayed(tmp_path: Path) -> None:
    twin = MemoryLogStore()
    store = LmdbLogStore(tmp_path / "log")
    _the_same_saves([twin, store])
    expected = twin.load()
    store.save(None, [Entry(index=13, term=3, data=b"t" * 10_000)], None, sync=True)
    crashed_path = _as_a_crash_leaves_it(tmp_path / "log", tmp_path / "crashed")
    store.close()
    [segment] = (crashed_path / "wal").iterdir()
    with open(segment, "r+b") as f:
        data = f.read(1 << 20)
        torn_at = data.rindex(b"t" * 100)  # the end of the last record never reached the disk
        f.seek(torn_at)
        f.write(b"\0" * 100)
    crashed = LmdbLogStore(crashed_path)
    try:
        # Entry 13 may have been acknowledged: recorded with the cut (quorum.raft.recovery).
        assert crashed.load() == replace(expected, repair_index=13)
    finally:
        crashed.close()


def test_lmdb_a_save_torn_in_the_middle_of_its_entries_is_cut_up_to_its_last_entry(tmp_path: Path) -> None:
    """Regression (the ZooKeeper fault campaign, seed 1102): a save of entries 13-20 torn from the middle of
    its payload on (the campaign's torn fault, tests/faults/torn.py) still names its first entries; the rest
    read as zeros. The save held 13-20, which the node may have acknowledged: the repair index is 20, not
    the last entry still readable (else a node that applied past that entry thought its log complete, and
    the leader, which counted it as holding 20, ignored its rejections as stale forever)."""
    twin = MemoryLogStore()
    store = LmdbLogStore(tmp_path / "node" / "raft")
    _the_same_saves([twin, store])
    expected = twin.load()
    store.save(None, [Entry(index=i, term=3, data=b"z" * 200) for i in range(13, 21)], None, sync=True)
    _as_a_crash_leaves_it(tmp_path / "node", tmp_path / "crashed")
    store.close()
    tear = tear_quorum_log(tmp_path / "crashed", mode="cut")
    assert tear.mode == "cut"
    crashed = LmdbLogStore(tmp_path / "crashed" / "raft")
    try:
        [cut] = crashed.tail_cuts
        assert cut.first_index_cut == 13 and cut.last_index_cut == 20
        assert crashed.load() == replace(expected, repair_index=20)
    finally:
        crashed.close()


def test_lmdb_identity_is_none_on_a_fresh_store(tmp_path: Path) -> None:
    store = LmdbLogStore(tmp_path / "log")
    assert store.identity() is None
    store.close()
    with pytest.raises(LogStoreError):
        store.load()


def _raw_log_db(path: Path) -> tuple[lmdb.Environment, lmdb._Database]:
    env = lmdb.open(str(path), max_dbs=2)
    return env, env.open_db(b"log")


def _key(index: int) -> bytes:
    return struct.pack(">Q", index)


def _flip_a_data_byte(txn: lmdb.Transaction, db: lmdb._Database, index: int) -> None:
    value = bytearray(cast(bytes, txn.get(_key(index), db=db)))
    value[-1] ^= 0x01
    txn.put(_key(index), bytes(value), db=db)


def _delete(txn: lmdb.Transaction, db: lmdb._Database, index: int) -> None:
    txn.delete(_key(index), db=db)


def _shorten(txn: lmdb.Transaction, db: lmdb._Database, index: int) -> None:
    txn.put(_key(index), cast(bytes, txn.get(_key(index), db=db))[:5], db=db)


@pytest.mark.parametrize("damage", [_flip_a_data_byte, _delete, _shorten], ids=["bitflip", "missing", "short"])
def test_lmdb_damaged_entry_truncates_the_tail(
    tmp_path: Path, damage: Callable[[lmdb.Transaction, lmdb._Database, int], None]
) -> None:
    path = tmp_path / "log"
    store = LmdbLogStore(path)
    store.save(HardState(term=1, vote=1, commit=9), entries(1, 10), None, sync=True)
    store.close()
    env, db = _raw_log_db(path)
    with env.begin(write=True) as txn:
        damage(txn, db, 6)
    env.close()

    with capture_logs() as logs:
        store = LmdbLogStore(path)
        state = store.load()
    assert state.entries == tuple(entries(1, 5))
    assert state.hard_state == HardState(term=1, vote=1, commit=9)  # reported, not clamped
    assert [log for log in logs if log["event"] == "log_truncated_corrupt_tail"] == [
        {
            "event": "log_truncated_corrupt_tail",
            "log_level": "warning",
            "first_index_cut": 6,
            "last_index_cut": 10,
            "last_valid_index": 5,
            "commit": 9,
            "commit_beyond_log": True,
        }
    ]
    # The cut is durable: the next start sees the valid prefix and no damage,
    # and appending continues right after it.
    store.save(None, entries(6, 6, term=2), None, sync=True)
    store.close()
    with capture_logs() as logs:
        store = LmdbLogStore(path)
        assert store.load().entries == tuple(entries(1, 5) + entries(6, 6, term=2))
    store.close()
    assert logs == []


def test_lmdb_damage_after_a_compaction_point(tmp_path: Path) -> None:
    path = tmp_path / "log"
    store = LmdbLogStore(path)
    store.save(None, entries(1, 10), None, sync=True)
    store.compact(4, SnapshotMeta(index=4, term=1, voters=(1,)))
    store.close()
    env, db = _raw_log_db(path)
    with env.begin(write=True) as txn:
        _flip_a_data_byte(txn, db, 5)  # the very first entry after the compaction point
    env.close()
    store = LmdbLogStore(path)
    state = store.load()
    store.close()
    assert (state.compacted_index, state.entries) == (4, ())


# -- crash durability: a real process, SIGKILLed --------------------------------

ACKS_PER_ROUND = 20
ACK_TIMEOUT_S = 30.0
LINES_READ_MAX = 100_000


def _read_lines(proc: subprocess.Popen[bytes], buffer: bytearray, want: int | None, timeout_s: float) -> list[int]:
    """Acknowledged indexes from the child's stdout: `want` of them, or all until EOF when `want` is None."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    acks: list[int] = []
    deadline = time.monotonic() + timeout_s
    for _ in range(LINES_READ_MAX):
        if want is not None and len(acks) >= want:
            return acks
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            break
        readable, _, _ = select.select([fd], [], [], remaining_s)
        if not readable:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if want is None:
                return acks
            break
        buffer.extend(chunk)
        *lines, rest = bytes(buffer).split(b"\n")
        buffer[:] = rest
        acks.extend(int(line) for line in lines)
    raise AssertionError(
        f"child gave {len(acks)} acknowledgements, wanted {want}, in {timeout_s:g} s (rc={proc.poll()})"
    )


def _run_and_kill(path: Path, stderr_path: Path, checkpoint_bytes: int | None) -> int:
    """Start the writer, read some acknowledgements, SIGKILL it; the highest acknowledged index."""
    extra = [] if checkpoint_bytes is None else [str(checkpoint_bytes)]
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.lmdb_crash_writer", str(path), *extra],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    buffer = bytearray()
    try:
        acks = _read_lines(proc, buffer, ACKS_PER_ROUND, ACK_TIMEOUT_S)
    except AssertionError as exc:
        proc.kill()
        proc.wait(timeout=ACK_TIMEOUT_S)
        raise AssertionError(f"{exc}\nchild stderr:\n{stderr_path.read_text()}") from None
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=ACK_TIMEOUT_S)
    # Lines already in the pipe were printed after save() returned: acknowledged too.
    acks += _read_lines(proc, buffer, None, ACK_TIMEOUT_S)
    assert proc.stdout is not None
    proc.stdout.close()
    assert acks == sorted(acks)
    return acks[-1]


# A batch is about 8 KB: the small setting checkpoints every few saves, so
# the kill may land in a checkpoint (LMDB written, write-ahead log not reset yet).
@pytest.mark.parametrize("checkpoint_bytes", [None, 20_000], ids=["default-checkpoints", "frequent-checkpoints"])
def test_lmdb_acknowledged_entries_survive_sigkill(tmp_path: Path, checkpoint_bytes: int | None) -> None:
    path = tmp_path / "log"
    acked_index = 0
    for round_number in range(3):  # each round restarts from what the one before left
        acked_index_now = _run_and_kill(path, tmp_path / f"stderr-{round_number}", checkpoint_bytes)
        assert acked_index_now > acked_index
        acked_index = acked_index_now

        store = LmdbLogStore(path)
        state = store.load()
        store.close()
        assert state.compacted_index == 0
        assert len(state.entries) >= acked_index
        for i, entry in enumerate(state.entries, start=1):
            assert entry == Entry(index=i, term=term_of(i), data=payload(i)), f"entry {i}"
        assert state.hard_state.commit >= acked_index


# -- a damaged write-ahead log tail: cut, named, never fatal --------------------------


def test_repair_index_round_trip(store: LogStore) -> None:
    store.save(HardState(term=1, vote=1, commit=2), entries(1, 3), None, sync=True)
    store.set_repair_index(7)
    assert store.load().repair_index == 7


def _three_saves(path: Path) -> tuple[Path, list[int]]:
    """A store whose write-ahead log holds three saves (entries 1-5, 6-8, 9-10); its segment and the
    offset of each save's record."""
    store = LmdbLogStore(path)
    offsets = []
    for first, last in ((1, 5), (6, 8), (9, 10)):
        offsets.append(store._wal.size_bytes)
        store.save(HardState(term=1, vote=1, commit=first - 1), entries(first, last), None, sync=True)
    crashed = _as_a_crash_leaves_it(path, path.with_name("crashed"))
    store.close()
    [segment] = (crashed / "wal").iterdir()
    return segment, offsets


def _flip_in_record(segment: Path, offset: int) -> None:
    data = bytearray(segment.read_bytes())
    data[offset + 8 + 12] ^= 0x40  # inside the save's hard state: the payload fails its crc
    segment.write_bytes(bytes(data))


def _zero_header(segment: Path, offset: int) -> None:
    data = bytearray(segment.read_bytes())
    data[offset : offset + 8] = bytes(8)
    segment.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(_flip_in_record, "crc_mismatch"), (_zero_header, "zero_length_header")],
    ids=["flip", "zeroed"],
)
def test_lmdb_a_damaged_write_ahead_save_is_cut_with_everything_after_it_and_named(
    tmp_path: Path, damage: Callable[[Path, int], None], reason: str
) -> None:
    segment, offsets = _three_saves(tmp_path / "log")
    damage(segment, offsets[1])
    with capture_logs() as logs:
        store = LmdbLogStore(segment.parent.parent)
    try:
        state = store.load()
        assert state.entries == tuple(entries(1, 5)) and state.hard_state == HardState(term=1, vote=1, commit=0)
        assert store.tail_cuts == [TailCut(reason, 5, 6, 10, segment=segment.name, offset_bytes=offsets[1])]
        assert state.repair_index == 10  # what it may have acknowledged, recorded with the cut
        [event] = [log for log in logs if log["event"] == "write_ahead_log_tail_cut"]
        assert (event["first_index_cut"], event["last_index_cut"], event["last_valid_index"]) == (6, 10, 5)
        assert (event["segment"], event["offset_bytes"], event["saves_cut"]) == (segment.name, offsets[1], 2)
    finally:
        store.close()
    reopened = LmdbLogStore(segment.parent.parent)  # the cut is durable: the next start finds nothing to cut
    assert reopened.load().entries == tuple(entries(1, 5)) and reopened.tail_cuts == []
    reopened.close()


def test_lmdb_a_write_ahead_save_that_does_not_follow_the_stored_log_is_cut_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "log"
    store = LmdbLogStore(path)
    store.save(HardState(term=1, vote=1, commit=3), entries(1, 3), None, sync=True)
    store.close()  # checkpointed into LMDB
    wal = WriteAheadLog(path / "wal")
    wal.reset()
    wal.append(_encode_save(None, entries(7, 8), None), sync=True)  # a gap: 4-6 are nowhere
    wal.close()
    store = LmdbLogStore(path)
    try:
        assert store.load().entries == tuple(entries(1, 3))
        [cut] = store.tail_cuts
        assert (cut.reason, cut.first_index_cut, cut.last_index_cut, cut.last_valid_index) == (
            "save_does_not_follow_the_log",
            7,
            8,
            3,
        )
    finally:
        store.close()


def test_lmdb_a_flipped_bit_in_a_damaged_saves_index_names_no_wild_index(tmp_path: Path) -> None:
    segment, offsets = _three_saves(tmp_path / "log")
    data = bytearray(segment.read_bytes())
    data[offsets[1] + 8 + 29] ^= 0x80  # the high byte of the first entry's index (after the 29-byte save head)
    segment.write_bytes(bytes(data))
    store = LmdbLogStore(segment.parent.parent)
    try:
        [cut] = store.tail_cuts
        # The damaged save's own indexes are not believed; the intact save after it still names 9-10, and
        # 6-8, which none names, were in the damaged one.
        assert (cut.first_index_cut, cut.last_index_cut, cut.last_valid_index) == (6, 10, 5)
    finally:
        store.close()
