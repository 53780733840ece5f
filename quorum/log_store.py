"""Where a node keeps its Raft log, hard state and snapshot metadata.

Durability contract (every implementation):
* `save` applies, in one atomic step, a snapshot (which drops every entry and
  moves the compaction point to it), then entries (an entry at index i first
  discards every stored entry >= i), then the hard state. When `sync` is true
  it returns only after all of it is on stable storage (fsync).
* `begin_save` is `save` with `sync` in two halves: it writes (and may hand the
  write to the device) and returns a SaveHandle; the save is durable once the
  handle's `wait_durable` returns, and not before. One save at a time: no other
  save or compact until then. The caller (the node's Ready loop) does its own
  work in between, so that it overlaps the disk's; storage never calls back.
* `compact` drops entries <= index and records the latest snapshot's metadata,
  atomically and durably.
* `set_repair_index` records PersistentState.repair_index durably.
* `load` returns exactly what the last completed `save`/`compact` left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from quorum.raft.types import Entry, HardState, PersistentState, SnapshotMeta


class SaveHandle(Protocol):
    def wait_durable(self) -> None:
        """Return once the begun save is on stable storage (idempotent)."""
        ...


class _Done:
    """The handle of a save that was durable when begun."""

    __slots__ = ()

    def wait_durable(self) -> None:
        pass


SAVED: SaveHandle = _Done()


class LogStore(Protocol):
    def load(self) -> PersistentState: ...

    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None,
        sync: bool,
    ) -> None: ...

    def begin_save(
        self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: SnapshotMeta | None
    ) -> SaveHandle: ...

    def compact(self, index: int, snapshot: SnapshotMeta) -> None: ...

    def set_repair_index(self, index: int) -> None: ...

    def close(self) -> None: ...


class MemoryLogStore:
    """The in-memory twin of the LMDB store: same contract, nothing on disk.

    The simulator keeps one per node across simulated crashes, which is what
    "durable" means there.
    """

    def __init__(self) -> None:
        self._hard_state = HardState()
        self._snapshot: SnapshotMeta | None = None
        self._compacted_index = 0
        self._compacted_term = 0
        self._entries: list[Entry] = []  # contiguous, starting at compacted_index + 1
        self._repair_index = 0

    def load(self) -> PersistentState:
        return PersistentState(
            hard_state=self._hard_state,
            snapshot=self._snapshot,
            compacted_index=self._compacted_index,
            compacted_term=self._compacted_term,
            entries=tuple(self._entries),
            repair_index=self._repair_index,
        )

    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: SnapshotMeta | None,
        sync: bool,
    ) -> None:
        if snapshot is not None:
            self._snapshot = snapshot
            self._compacted_index = snapshot.index
            self._compacted_term = snapshot.term
            self._entries = []
        if entries:
            first = entries[0].index
            keep = first - self._compacted_index - 1
            if keep < 0 or keep > len(self._entries):
                raise ValueError(
                    f"entries starting at {first} do not follow the stored log "
                    f"({self._compacted_index + 1}..{self._compacted_index + len(self._entries)})"
                )
            del self._entries[keep:]
            self._entries.extend(entries)
        if hard_state is not None:
            self._hard_state = hard_state

    def begin_save(
        self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: SnapshotMeta | None
    ) -> SaveHandle:
        """`save` at once: memory has nothing to wait for."""
        self.save(hard_state, entries, snapshot, sync=True)
        return SAVED

    @property
    def compacted_index(self) -> int:
        return self._compacted_index

    def term(self, index: int) -> int | None:
        """The term of the stored entry at `index` (at the compaction point: its term), else None."""
        if index == self._compacted_index:
            return self._compacted_term
        offset = index - self._compacted_index - 1
        return self._entries[offset].term if 0 <= offset < len(self._entries) else None

    def compact(self, index: int, snapshot: SnapshotMeta) -> None:
        if index <= self._compacted_index:
            self._snapshot = snapshot
            return
        drop = index - self._compacted_index
        if drop > len(self._entries):
            raise ValueError(f"cannot compact to {index}: log ends at {self._compacted_index + len(self._entries)}")
        self._compacted_term = self._entries[drop - 1].term
        self._compacted_index = index
        del self._entries[:drop]
        self._snapshot = snapshot

    def set_repair_index(self, index: int) -> None:
        self._repair_index = index

    def close(self) -> None:
        pass
