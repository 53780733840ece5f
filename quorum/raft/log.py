"""The in-memory Raft log of one node: compaction point, entries, stable/commit/applied marks.

Entries after the compaction point are kept in memory (the metadata log is
compacted by snapshots, so it stays small); which of them are durable is the
`stable_index` mark. Terms never decrease along a Raft log, which lets the
conflict search bisect instead of walking.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from quorum.raft.errors import invariant
from quorum.raft.types import Entry, SnapshotMeta


def _term_key(e: Entry) -> int:
    return e.term


class RaftLog:
    def __init__(
        self,
        compacted_index: int,
        compacted_term: int,
        entries: Sequence[Entry],
        commit: int,
        applied: int,
    ) -> None:
        self._offset = compacted_index  # index of the last compacted entry
        self._offset_term = compacted_term
        self._entries: list[Entry] = list(entries)
        for k, e in enumerate(self._entries):
            invariant(e.index == compacted_index + 1 + k, f"log not contiguous at {e.index}")
        self.stable_index = self.last_index
        # A hard state may name a commit beyond a log whose corrupt tail was cut.
        self.committed = max(min(commit, self.last_index), compacted_index)
        invariant(applied >= compacted_index, f"applied {applied} behind compaction point {compacted_index}")
        invariant(applied <= self.last_index, f"applied {applied} beyond the log end {self.last_index}")
        self.applied = applied
        self.committed = max(self.committed, applied)
        # A snapshot received from the leader, not yet persisted and installed.
        self.pending_snapshot: SnapshotMeta | None = None

    # ---- reading ----
    @property
    def first_index(self) -> int:
        return self._offset + 1

    @property
    def compacted_index(self) -> int:
        return self._offset

    @property
    def last_index(self) -> int:
        return self._offset + len(self._entries)

    @property
    def last_term(self) -> int:
        return self._entries[-1].term if self._entries else self._offset_term

    def term(self, index: int) -> int | None:
        """The term of entry `index`, or None when it is compacted away or beyond the end."""
        if index == self._offset:
            return self._offset_term
        k = index - self._offset - 1
        if 0 <= k < len(self._entries):
            return self._entries[k].term
        return None

    def entry(self, index: int) -> Entry:
        k = index - self._offset - 1
        invariant(0 <= k < len(self._entries), f"entry {index} not in log {self.first_index}..{self.last_index}")
        return self._entries[k]

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log at least as up to date as ours."""
        return last_term > self.last_term or (last_term == self.last_term and last_index >= self.last_index)

    def slice(self, lo: int, hi: int, max_count: int, max_bytes: int) -> list[Entry]:
        """Entries [lo, hi), at most max_count and about max_bytes (at least one)."""
        invariant(lo > self._offset, f"slice from compacted index {lo}")
        hi = min(hi, self.last_index + 1, lo + max_count)
        out = self._entries[lo - self._offset - 1 : hi - self._offset - 1]
        if len(out) > 1:
            size = 0
            for k, e in enumerate(out):
                size += len(e.data)
                if size > max_bytes and k > 0:
                    return out[:k]
        return out

    def find_conflict_by_term(self, index: int, term: int) -> int:
        """The largest index <= `index` whose term is <= `term` (etcd findConflictByTerm).

        Used for fast back-off: the leader skips a whole term of a follower's
        divergent suffix per round trip instead of one entry.
        """
        if index > self.last_index:
            return index
        if index <= self._offset:
            return index
        hi = index - self._offset  # consider entries[0:hi]
        k = bisect.bisect_right(self._entries, term, 0, hi, key=_term_key)
        return self._offset + k

    # ---- writing ----
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        invariant(entries[0].index == self.last_index + 1, "leader append must extend the log")
        self._entries.extend(entries)

    def maybe_append(self, prev_index: int, prev_term: int, commit: int, entries: Sequence[Entry]) -> int | None:
        """Follower side of AppendEntries. Returns the last new index, or None on mismatch."""
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        for k, e in enumerate(entries):
            t = self.term(e.index)
            if t == e.term:
                continue
            if t is not None:
                invariant(e.index > self.committed, f"conflict at {e.index} <= committed {self.committed}")
                self._truncate_from(e.index)
            self._entries.extend(entries[k:])
            break
        self.commit_to(min(commit, last_new))
        return last_new

    def _truncate_from(self, index: int) -> None:
        del self._entries[index - self._offset - 1 :]
        if self.stable_index >= index:
            self.stable_index = index - 1

    def commit_to(self, index: int) -> bool:
        if index <= self.committed:
            return False
        invariant(index <= self.last_index, f"commit {index} beyond last index {self.last_index}")
        self.committed = index
        return True

    def restore(self, snapshot: SnapshotMeta) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        self._offset = snapshot.index
        self._offset_term = snapshot.term
        self._entries = []
        self.stable_index = snapshot.index
        self.committed = snapshot.index
        self.pending_snapshot = snapshot

    def compact(self, index: int) -> None:
        if index <= self._offset:
            return
        invariant(index <= self.applied and index <= self.stable_index, f"compact {index} beyond applied/stable")
        term = self.term(index)
        assert term is not None
        del self._entries[: index - self._offset]
        self._offset = index
        self._offset_term = term

    # ---- Ready bookkeeping ----
    def unstable_entries(self) -> tuple[Entry, ...]:
        return tuple(self._entries[self.stable_index - self._offset :])

    def has_unstable(self) -> bool:
        return self.last_index > self.stable_index

    def next_committed(self, max_count: int) -> tuple[Entry, ...]:
        if self.pending_snapshot is not None:
            return ()
        lo = self.applied + 1
        hi = min(self.committed, self.applied + max_count)
        if hi < lo:
            return ()
        return tuple(self._entries[lo - self._offset - 1 : hi - self._offset])

    def has_next_committed(self) -> bool:
        return self.pending_snapshot is None and self.committed > self.applied

    def stable_to(self, index: int, term: int) -> None:
        # Entries persisted by a Ready may have been overwritten since (a new
        # leader's conflicting suffix): only mark them stable if still there.
        if index > self.stable_index and self.term(index) == term:
            self.stable_index = index

    def snapshot_persisted(self, snapshot: SnapshotMeta) -> None:
        if self.pending_snapshot == snapshot:
            self.pending_snapshot = None
        if self.applied < snapshot.index:
            self.applied = snapshot.index

    def applied_to(self, index: int) -> None:
        invariant(index <= self.committed, f"applied {index} beyond committed {self.committed}")
        if index > self.applied:
            self.applied = index
