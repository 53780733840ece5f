"""State-machine snapshot files beside the Raft log.

A snapshot at (index, term) is two files in one directory:

* `snapshot-<index:020d>-<term:020d>.snap`: exactly the bytes the state machine
  produced (or the leader sent), so a consumer may open `path(meta)` directly;
* `snapshot-<index:020d>-<term:020d>.meta`: a JSON sidecar with the voters
  (which the name cannot hold), the size and a crc32 of the `.snap` bytes.

Both are written write-fsync-rename: data into `*.tmp`, fsync, then the
sidecar renamed into place, then the data, then an fsync of the directory. A
crash at any point leaves either a complete snapshot or one that `latest()`
ignores (no sidecar, no data, or a size that disagrees); leftovers are removed
at construction and by `prune`.

Threading: like the log store, create/commit/prune run on the node runner's
one storage thread. A `read_chunks` iterator may stream an older snapshot to a
follower while `prune` deletes it: the file is already open, and an open file
stays readable after unlink on POSIX.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from quorum.raft.types import SnapshotMeta
from runtime.fsync import fsync_directory

SNAPSHOT_CHUNK_BYTES_DEFAULT = 1024 * 1024
SNAPSHOT_KEEP_DEFAULT = 2

_NAME = re.compile(r"^snapshot-(\d{20})-(\d{20})\.(snap|meta)$")


class SnapshotStoreError(Exception):
    pass


class SnapshotCorruptError(SnapshotStoreError):
    """A snapshot's bytes disagree with the size or crc32 recorded when it was written."""


def _stem(index: int, term: int) -> str:
    return f"snapshot-{index:020d}-{term:020d}"


def _fsync_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


class SnapshotWriter:
    """Writes one snapshot; `commit()` publishes it atomically, `abort()` leaves no trace.

    As a context manager it commits on normal exit and aborts on an exception.
    The node runner also holds one across the chunks of an InstallSnapshot
    transfer and calls `commit()` after the last chunk.
    """

    def __init__(self, directory: Path, meta: SnapshotMeta) -> None:
        self.meta = meta
        self._directory = directory
        stem = _stem(meta.index, meta.term)
        self.path = directory / f"{stem}.snap"
        self._meta_path = directory / f"{stem}.meta"
        # A unique temporary name: two transfers of the same snapshot may overlap.
        fd, tmp_name = tempfile.mkstemp(prefix=f"{stem}.", suffix=".tmp", dir=directory)
        self._tmp_path = Path(tmp_name)
        self._file: Any = os.fdopen(fd, "wb")
        self.size_bytes = 0
        self._crc32 = 0

    def write(self, data: bytes | memoryview) -> None:
        if self._file is None:
            raise SnapshotStoreError(f"snapshot writer for {self.path.name} is already closed")
        self._file.write(data)
        self.size_bytes += len(data)
        self._crc32 = zlib.crc32(data, self._crc32)

    def commit(self) -> None:
        if self._file is None:
            raise SnapshotStoreError(f"snapshot writer for {self.path.name} is already closed")
        file, self._file = self._file, None
        meta_tmp = self._tmp_path.with_name(self._tmp_path.name[: -len(".tmp")] + ".meta.tmp")
        try:
            file.flush()
            os.fsync(file.fileno())
            file.close()
            sidecar = {
                "index": self.meta.index,
                "term": self.meta.term,
                "voters": list(self.meta.voters),
                "learners": list(self.meta.learners),
                "observers": list(self.meta.observers),
                "config_index": self.meta.config_index,
                "config_context": self.meta.config_context.hex(),
                "size_bytes": self.size_bytes,
                "crc32": self._crc32,
            }
            _fsync_write(meta_tmp, json.dumps(sidecar).encode())
            # Sidecar first: a crash between the renames leaves a sidecar
            # without data, which latest() ignores and construction removes.
            os.replace(meta_tmp, self._meta_path)
            os.replace(self._tmp_path, self.path)
            fsync_directory(self._directory)
        except BaseException:
            file.close()
            for leftover in (self._tmp_path, meta_tmp):
                leftover.unlink(missing_ok=True)
            raise

    def abort(self) -> None:
        if self._file is None:
            return
        file, self._file = self._file, None
        file.close()
        self._tmp_path.unlink(missing_ok=True)

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class SnapshotStore:
    def __init__(self, directory: str | Path, logger: Any = None) -> None:
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        self._log = logger if logger is not None else structlog.get_logger("quorum.snapshot_store")
        self._remove_leftovers()

    def create(self, meta: SnapshotMeta) -> SnapshotWriter:
        return SnapshotWriter(self._directory, meta)

    def path(self, meta: SnapshotMeta) -> Path:
        return self._directory / f"{_stem(meta.index, meta.term)}.snap"

    def latest(self) -> SnapshotMeta | None:
        """The newest complete snapshot (by index, then term), None when there is none."""
        for index, term in sorted(self._snap_ids(), reverse=True):
            sidecar = self._read_sidecar(index, term)
            if sidecar is not None:
                return _meta_of(sidecar)
        return None

    def complete(self) -> list[SnapshotMeta]:
        """Every complete snapshot, newest first (by index, then term)."""
        metas = []
        for index, term in sorted(self._snap_ids(), reverse=True):
            sidecar = self._read_sidecar(index, term)
            if sidecar is not None:
                metas.append(_meta_of(sidecar))
        return metas

    def set_aside(self, meta: SnapshotMeta) -> Path:
        """Rename a damaged snapshot out of the store's sight (kept for inspection); returns its new path."""
        stem = _stem(meta.index, meta.term)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        moved = self._directory / f"{stem}.snap.damaged-{stamp}"
        os.replace(self._directory / f"{stem}.snap", moved)
        (self._directory / f"{stem}.meta").unlink(missing_ok=True)
        fsync_directory(self._directory)
        self._log.warning("snapshot_moved_aside", snapshot=stem, moved_to=str(moved))
        return moved

    def read_chunks(self, meta: SnapshotMeta, chunk_bytes: int = SNAPSHOT_CHUNK_BYTES_DEFAULT) -> Iterator[bytes]:
        """The snapshot's bytes in chunks of at most `chunk_bytes`.

        The file is opened now, so a `prune` after this call does not disturb
        the transfer. Raises SnapshotCorruptError after the last chunk when the
        bytes disagree with the sidecar.
        """
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be > 0, got {chunk_bytes}")
        sidecar = self._read_sidecar(meta.index, meta.term)
        if sidecar is None:
            raise SnapshotStoreError(f"no complete snapshot {self.path(meta).name}")
        file = open(self.path(meta), "rb")  # closed by _chunks when the iteration ends
        return _chunks(file, chunk_bytes, sidecar, self.path(meta).name)

    def verify(self, meta: SnapshotMeta) -> None:
        """Read the whole snapshot and raise SnapshotCorruptError if its crc32 is wrong."""
        for _ in self.read_chunks(meta):
            pass

    def prune(self, keep: int = SNAPSHOT_KEEP_DEFAULT) -> None:
        """Remove every snapshot file except the newest `keep` complete snapshots."""
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        complete = [
            (index, term)
            for index, term in sorted(self._snap_ids(), reverse=True)
            if self._read_sidecar(index, term) is not None
        ]
        kept = set(complete[:keep])
        for name in os.listdir(self._directory):
            match = _NAME.match(name)
            if match and (int(match[1]), int(match[2])) not in kept:
                (self._directory / name).unlink(missing_ok=True)
                self._log.info("snapshot_file_pruned", file=name)

    # -- internals ------------------------------------------------------------

    def _snap_ids(self) -> list[tuple[int, int]]:
        ids = []
        for name in os.listdir(self._directory):
            match = _NAME.match(name)
            if match and match[3] == "snap":
                ids.append((int(match[1]), int(match[2])))
        return ids

    def _read_sidecar(self, index: int, term: int) -> dict[str, Any] | None:
        """The sidecar of a complete snapshot, None (with a warning) when it is missing or disagrees."""
        stem = _stem(index, term)
        try:
            sidecar = json.loads((self._directory / f"{stem}.meta").read_bytes())
            size_bytes = (self._directory / f"{stem}.snap").stat().st_size
        except (OSError, ValueError) as exc:
            self._log.warning("snapshot_incomplete", snapshot=stem, error=str(exc))
            return None
        if (
            not isinstance(sidecar, dict)
            or (sidecar.get("index"), sidecar.get("term")) != (index, term)
            or sidecar.get("size_bytes") != size_bytes
        ):
            self._log.warning("snapshot_incomplete", snapshot=stem, size_bytes=size_bytes, sidecar=sidecar)
            return None
        return dict(sidecar)

    def _remove_leftovers(self) -> None:
        """Remove temporary files and sidecars without data, both left by a crash mid-write."""
        snaps = {name[: -len(".snap")] for name in os.listdir(self._directory) if name.endswith(".snap")}
        for name in os.listdir(self._directory):
            orphan_sidecar = name.endswith(".meta") and name[: -len(".meta")] not in snaps
            if name.endswith(".tmp") or (orphan_sidecar and _NAME.match(name)):
                (self._directory / name).unlink(missing_ok=True)
                self._log.info("snapshot_leftover_removed", file=name)


def _meta_of(sidecar: dict[str, Any]) -> SnapshotMeta:
    # Sidecars written before membership changes existed name the voters only.
    return SnapshotMeta(
        index=sidecar["index"],
        term=sidecar["term"],
        voters=tuple(sidecar["voters"]),
        learners=tuple(sidecar.get("learners", ())),
        observers=tuple(sidecar.get("observers", ())),
        config_index=sidecar.get("config_index", 0),
        config_context=bytes.fromhex(sidecar.get("config_context", "")),
    )


def _chunks(file: Any, chunk_bytes: int, sidecar: dict[str, Any], name: str) -> Iterator[bytes]:
    with contextlib.closing(file):
        crc32 = 0
        size_bytes = 0
        while chunk := file.read(chunk_bytes):
            crc32 = zlib.crc32(chunk, crc32)
            size_bytes += len(chunk)
            yield chunk
    if (size_bytes, crc32) != (sidecar["size_bytes"], sidecar["crc32"]):
        raise SnapshotCorruptError(
            f"snapshot {name}: read {size_bytes} bytes crc32 {crc32:#010x}, "
            f"expected {sidecar['size_bytes']} bytes crc32 {sidecar['crc32']:#010x}"
        )
