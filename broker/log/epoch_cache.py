"""Leader-epoch cache of one partition (KIP-101, K28 `LeaderEpochFileCache.scala`).

A list of (epoch, start offset), both strictly increasing, written to the
partition's `leader-epoch-checkpoint` after every change. The write is not
fsynced at once: `flush` makes it durable, and the log calls it before it
moves its recovery point, so every batch below the recovery point has its
epoch on disk (after a crash the batches above it are re-scanned and their
epochs re-assigned). A leader change on 1,000 partitions thus costs no
fsync per partition.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Any, NamedTuple

from broker.log.checkpoints import EpochEntry, LeaderEpochCheckpointFile, fsync_file

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEndOffset(NamedTuple):
    """OffsetForLeaderEpoch's answer: the largest known epoch <= the requested one and where it ends."""

    leader_epoch: int
    end_offset: int


class LeaderEpochCache:
    def __init__(self, path: Path, logger: Any) -> None:
        self._file = LeaderEpochCheckpointFile(path)
        self._log = logger
        self._entries: list[EpochEntry] = self._file.read()
        self._dirty = False

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that `epoch` starts at `start_offset` (K28 `assign`): a no-op unless it is new information.

        Entries with an epoch >= `epoch` or a start offset >= `start_offset`
        are replaced, as they can only be left over from a diverged history.
        """
        if epoch < 0:
            return
        if self._entries:
            last = self._entries[-1]
            if last.epoch == epoch and start_offset >= last.start_offset:
                return
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        if len(kept) != len(self._entries):
            removed = [tuple(e) for e in self._entries if e not in kept]
            self._log.warning("leader_epoch_entries_replaced", removed=removed, epoch=epoch, start_offset=start_offset)
        kept.append(EpochEntry(epoch, start_offset))
        self._set(kept)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """KIP-101/KIP-279 OffsetForLeaderEpoch (K28 `endOffsetFor` l.174-228).

        * the latest epoch ends at the log end offset;
        * an older epoch ends where the first larger epoch starts, paired with
          the largest known epoch <= the requested one (the requested epoch
          itself if it precedes every known one);
        * an unknown or future epoch gives (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == self.latest_epoch:
            return EpochEndOffset(requested_epoch, log_end_offset)
        epochs = [e.epoch for e in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        higher_start = self._entries[higher].start_offset
        if higher == 0:
            return EpochEndOffset(requested_epoch, higher_start)
        return EpochEndOffset(self._entries[higher - 1].epoch, higher_start)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drops entries starting at or after `end_offset` (the log was truncated to it)."""
        starts = [e.start_offset for e in self._entries]
        keep = bisect_left(starts, end_offset)
        if keep != len(self._entries):
            self._set(self._entries[:keep])

    def truncate_from_start(self, start_offset: int) -> None:
        """Drops entries wholly below `start_offset`; the one spanning it now starts there."""
        starts = [e.start_offset for e in self._entries]
        spanning = bisect_right(starts, start_offset) - 1
        if spanning <= 0 and (not self._entries or self._entries[0].start_offset >= start_offset):
            return
        rest = self._entries[spanning + 1 :]
        self._set([EpochEntry(self._entries[spanning].epoch, start_offset), *rest])

    def clear(self) -> None:
        self._set([])

    def _set(self, entries: list[EpochEntry]) -> None:
        self._file.write(entries, durable=False)
        self._entries = entries
        self._dirty = True

    def flush(self) -> None:
        """fsyncs the checkpoint if it changed since the last flush."""
        if self._dirty:
            fsync_file(self._file.path)
            self._dirty = False
