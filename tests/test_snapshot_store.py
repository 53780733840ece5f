"""SnapshotStore: atomic create, latest/prune, chunked reads, crash leftovers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quorum.raft.types import SnapshotMeta
from quorum.snapshot_store import SnapshotCorruptError, SnapshotStore, SnapshotStoreError


def meta(index: int, term: int = 1, voters: tuple[int, ...] = (1, 2, 3)) -> SnapshotMeta:
    return SnapshotMeta(index=index, term=term, voters=voters)


def write(store: SnapshotStore, m: SnapshotMeta, data: bytes) -> Path:
    with store.create(m) as writer:
        writer.write(data)
    return writer.path


def test_empty_store_has_no_latest(tmp_path: Path) -> None:
    assert SnapshotStore(tmp_path).latest() is None


def test_create_publishes_the_bytes_and_the_meta(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    m = meta(100, 7, voters=(3, 1, 2))
    path = write(store, m, b"state-machine-bytes")
    assert path == store.path(m) == tmp_path / f"snapshot-{100:020d}-{7:020d}.snap"
    assert path.read_bytes() == b"state-machine-bytes"
    assert store.latest() == m  # voters round-trip exactly, order included
    assert SnapshotStore(tmp_path).latest() == m
    assert not list(tmp_path.glob("*.tmp"))


def test_exception_inside_the_writer_leaves_nothing(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    with pytest.raises(RuntimeError, match="transfer broke"), store.create(meta(5)) as writer:
        writer.write(b"partial")
        raise RuntimeError("transfer broke")
    assert store.latest() is None
    assert os.listdir(tmp_path) == []
    with pytest.raises(SnapshotStoreError):
        writer.write(b"more")


def test_writer_held_across_chunks(tmp_path: Path) -> None:
    """The InstallSnapshot path: chunks arrive one by one, commit after the last."""
    store = SnapshotStore(tmp_path)
    writer = store.create(meta(9, 2))
    for chunk in (b"a" * 10, b"b" * 20, b"c"):
        writer.write(chunk)
    assert store.latest() is None  # nothing visible before commit
    writer.commit()
    assert store.latest() == meta(9, 2)
    assert store.path(meta(9, 2)).read_bytes() == b"a" * 10 + b"b" * 20 + b"c"


def test_latest_orders_by_index_then_term(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for m in (meta(10, 1), meta(30, 2), meta(20, 5), meta(30, 1)):
        write(store, m, b"x")
    assert store.latest() == meta(30, 2)


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for index in (1, 2, 3, 4):
        write(store, meta(index), b"s%d" % index)
    store.prune(keep=2)
    assert sorted(os.listdir(tmp_path)) == sorted(
        f"snapshot-{i:020d}-{1:020d}.{ext}" for i in (3, 4) for ext in ("snap", "meta")
    )
    assert store.latest() == meta(4)
    store.prune(keep=1)
    assert sorted(os.listdir(tmp_path)) == [f"snapshot-{4:020d}-{1:020d}.meta", f"snapshot-{4:020d}-{1:020d}.snap"]
    with pytest.raises(ValueError):
        store.prune(keep=0)


@pytest.mark.parametrize("chunk_bytes", [1, 7, 1000, 1 << 20])
def test_read_chunks_reproduces_the_bytes(tmp_path: Path, chunk_bytes: int) -> None:
    store = SnapshotStore(tmp_path)
    data = os.urandom(3 * 1000 + 17)
    write(store, meta(3), data)
    chunks = list(store.read_chunks(meta(3), chunk_bytes=chunk_bytes))
    assert b"".join(chunks) == data
    assert all(len(c) <= chunk_bytes for c in chunks)
    store.verify(meta(3))


def test_read_chunks_survives_a_prune_after_it_opened(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    write(store, meta(1), b"old" * 100)
    write(store, meta(2), b"new")
    chunks = store.read_chunks(meta(1), chunk_bytes=10)
    store.prune(keep=1)
    assert b"".join(chunks) == b"old" * 100


def test_read_chunks_detects_damage(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    path = write(store, meta(3), b"abcdef")
    path.write_bytes(b"abcdeF")  # same size, different bytes
    assert store.latest() == meta(3)  # latest only checks the size; the CRC needs a full read
    with pytest.raises(SnapshotCorruptError):
        store.verify(meta(3))


def test_latest_skips_incomplete_snapshots(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    write(store, meta(1), b"good")
    write(store, meta(2), b"no sidecar")
    store.path(meta(2)).with_suffix(".meta").unlink()
    write(store, meta(3), b"truncated")
    store.path(meta(3)).write_bytes(b"trunc")
    assert store.latest() == meta(1)
    with pytest.raises(SnapshotStoreError):
        store.read_chunks(meta(2))


def test_construction_removes_crash_leftovers(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    write(store, meta(1), b"kept")
    abandoned = store.create(meta(2))  # a writer whose process died before commit
    abandoned.write(b"half")
    (tmp_path / f"snapshot-{5:020d}-{1:020d}.meta").write_text("{}")  # sidecar renamed, data not
    (tmp_path / "unrelated.txt").write_text("not ours")

    reopened = SnapshotStore(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        f"snapshot-{1:020d}-{1:020d}.meta",
        f"snapshot-{1:020d}-{1:020d}.snap",
        "unrelated.txt",
    ]
    assert reopened.latest() == meta(1)
    abandoned.abort()
