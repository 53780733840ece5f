"""A node's state machine given a base its log can be replayed onto, at start-up.

The Raft log keeps only the entries after its compaction point, so the state
machine must have applied at least that far (and at least as far as the
snapshot the log store records: the core counts that one as applied). One
that has not (its database damaged, moved aside and reopened empty:
quorum.state_check; or a crash before a leader's snapshot was installed) is
restored first, from the first of:

1. the node's own newest snapshot that covers the compaction point, matches
   its log and verifies (a damaged one is moved aside);
2. the log alone, when nothing was ever compacted;
3. a peer's applied state (quorum.state_fetch), fetched before the node joins
   the quorum.

Raft §7 decides what happens to the log: a base whose last entry the log
holds (same index and term) keeps the log after it, and the node replays its
own entries from there; otherwise the whole log is replaced by the base, as
InstallSnapshot does. What the log loses then is either in the base (entries
up to its index are committed, so the same on every node) or was never
committed (an entry that disagrees with a committed one at the same index),
so an entry this node acknowledged can only go if it could never count.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from quorum.log_store import LogStore
from quorum.raft.types import PersistentState, SnapshotMeta
from quorum.snapshot_store import SnapshotStore, SnapshotStoreError
from quorum.state_machine import StateMachine

# Fetches a peer's state at least this recent into the snapshot store: its meta and the peer's id.
Fetch = Callable[[int], tuple[SnapshotMeta, int]]


def restore_base(
    state: PersistentState,
    state_machine: StateMachine,
    store: LogStore,
    snapshots: SnapshotStore,
    fetch: Fetch,
    log: Any,
) -> PersistentState:
    """Restore `state_machine` when it is behind the log; returns the log state the core starts from."""
    applied = state_machine.applied_index()
    snapshot_index = state.snapshot.index if state.snapshot is not None else 0
    if applied >= max(state.compacted_index, snapshot_index):
        if state_machine.rebuilt:
            _restored(log, "log", applied, 0, state)
        return state
    restored = _restore_from_own_snapshot(state, state_machine, store, snapshots, log)
    if restored is not None:
        return restored
    if applied >= state.compacted_index:
        # Nothing compacted that the state machine lacks: the log replays it all. The core must
        # not count the store's snapshot as applied (Raft() takes applied >= snapshot.index).
        _restored(log, "log", applied, 0, state)
        return dataclasses.replace(state, snapshot=None)
    return _restore_from_peer(state, state_machine, store, snapshots, fetch, log)


def _restore_from_own_snapshot(
    state: PersistentState, state_machine: StateMachine, store: LogStore, snapshots: SnapshotStore, log: Any
) -> PersistentState | None:
    for meta in snapshots.complete():
        if meta.index < state.compacted_index or state.term_at(meta.index) != meta.term:
            continue  # older than the log's start, or not this log's (its entries were replaced since)
        try:
            snapshots.verify(meta)
            state_machine.restore(snapshots.path(meta), meta.index, meta.term)
        except (SnapshotStoreError, ValueError, struct.error) as exc:
            log.error("snapshot_damaged", index=meta.index, term=meta.term, error=str(exc))
            snapshots.set_aside(meta)
            continue
        if meta != state.snapshot:
            store.compact(state.compacted_index, meta)  # the core's snapshot from now on: records it, drops nothing
        _restored(log, "local_snapshot", meta.index, meta.term, state)
        return dataclasses.replace(state, snapshot=meta)
    return None


def _restore_from_peer(
    state: PersistentState,
    state_machine: StateMachine,
    store: LogStore,
    snapshots: SnapshotStore,
    fetch: Fetch,
    log: Any,
) -> PersistentState:
    meta, peer = fetch(state.compacted_index)
    if state.term_at(meta.index) == meta.term:
        store.compact(state.compacted_index, meta)
        state = dataclasses.replace(state, snapshot=meta)
    else:
        log.warning(
            "log_replaced_by_snapshot",
            index=meta.index,
            term=meta.term,
            log_first=state.compacted_index + 1,
            log_last=state.compacted_index + len(state.entries),
        )
        store.save(None, (), meta, True)
        state = PersistentState(state.hard_state, meta, meta.index, meta.term, ())
    state_machine.restore(snapshots.path(meta), meta.index, meta.term)
    _restored(log, "peer_snapshot", meta.index, meta.term, state, peer=peer)
    return state


def _restored(log: Any, source: str, index: int, term: int, state: PersistentState, **fields: Any) -> None:
    last = state.compacted_index + len(state.entries)
    log.warning(
        "state_machine_restored", source=source, index=index, term=term, replay_from=index + 1, replay_to=last, **fields
    )
