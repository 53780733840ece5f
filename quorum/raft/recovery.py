"""Where a node restarts from when its log lost entries: pure decisions, no I/O (the runner does the I/O).

A damaged write-ahead log tail is cut by the log store (quorum.lmdb_log_store),
but the state machine may have applied entries that were in the cut part: its
applied index is then beyond the log's end. What it applied was committed
(only committed entries are applied), so (applied index, applied term) is a
point every future leader's log holds (Leader Completeness, Raft §5.4): the
node makes it its compaction point and snapshot base, keeps the entries that
still follow it, and takes what it lacks from the leader (appends, or
InstallSnapshot, Raft §7).

The hard state (term, vote) is saved with the entries, so a cut may take the
node's latest term and vote with it. Raft §5.2 lets a node vote at most once
per term, and §5.4's proof that committed entries survive elections rests on
it: a node that forgot a vote and granted another in the same term could
give two candidates a majority each. So after a cut:

* the term is at least the largest term the node still has evidence of (its
  stored term, the applied entry's, the last surviving entry's): it may have
  voted in that term;
* in that term its vote counts as already given (to itself, which no other
  candidate is), unless the surviving hard state names the vote of that very
  term: a vote never changes within a term, so that one is still the vote.

Candidates of later terms get its vote as usual; it campaigns as usual.

Entries the node acknowledged beyond what its state machine applied may be
gone with the tail, although they may be committed: counted on this node's
acknowledgement. §5.4.3 shows a winner holds every committed entry because a
voter of its quorum holds each and grants only to a log at least as up to date;
this node can no longer vouch for those entries. So until its commit index
reaches the last index it may have acknowledged (`repair_index`, which the log
store records in the transaction that makes the cut durable), its grant counts
only in an election every voter grants (Raft._poll): a quorum of the other
voters' grants elects as usual, and when every node of a cluster lost its
tail, the one whose log (or applied state) is the most up to date wins, since
each other node grants only to a log at least as up to date as whatever it
kept. What the state machine applied covers the entries up to it, so a cut
within them leaves the log complete (its commit index starts there).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from quorum.raft.errors import RaftError
from quorum.raft.membership import decode_config
from quorum.raft.types import NO_VOTE, Entry, EntryKind, HardState, PersistentState, SnapshotMeta


class RecoveryError(RaftError):
    """The stored state cannot be reconciled without information that is not there."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What the node starts from, and what it must persist before it does."""

    state: PersistentState
    # Set when the state machine's applied point becomes the compaction point: the runner snapshots the
    # state machine at it, then saves this snapshot with `state.entries` and `state.hard_state` atomically.
    rebase: SnapshotMeta | None
    # Set when the hard state differs from the stored one (term raised, vote taken as given, commit clamped).
    hard_state_changed: bool


def _last(state: PersistentState) -> tuple[int, int]:
    if state.entries:
        return state.entries[-1].index, state.entries[-1].term
    return state.compacted_index, state.compacted_term


def applied_term_of(state: PersistentState, applied_index: int, applied_term: int | None) -> int | None:
    """The term of the applied entry: the state machine's, else (an old database) the log's, if it has it."""
    return applied_term if applied_term is not None else state.term_at(applied_index)


def _rebased(state: PersistentState, applied: int, term: int, voters: tuple[int, ...]) -> PersistentState:
    """The log with its compaction point at (applied, term): entries after it are kept only if the entry at
    `applied` is the applied one (Log Matching, §5.3: then everything after it follows it); else they
    belong to another history and are cut."""
    follows = state.term_at(applied) == term
    kept: tuple[Entry, ...] = tuple(e for e in state.entries if e.index > applied) if follows else ()
    meta = _configured(SnapshotMeta(index=applied, term=term, voters=voters), state, applied)
    return replace(state, snapshot=meta, compacted_index=applied, compacted_term=term, entries=kept)


def _configured(meta: SnapshotMeta, state: PersistentState, applied: int) -> SnapshotMeta:
    """`meta` with the latest configuration the stored snapshot and log hold at or below `applied`
    (quorum.raft.membership). A change in the part of the log that was cut is not known here: the leader's
    next configuration entry or snapshot brings the node up to date."""
    if state.snapshot is not None:
        s = state.snapshot
        meta = replace(meta, voters=s.voters, learners=s.learners, observers=s.observers,
                       config_index=s.config_index, config_context=s.config_context)  # fmt: skip
    for e in state.entries:
        if e.index <= applied and e.kind is EntryKind.CONFIG:
            _, m = decode_config(e.data)
            meta = replace(meta, voters=m.voters, learners=m.learners, observers=m.observers,
                           config_index=e.index, config_context=m.context)  # fmt: skip
    return meta


def recovered_hard_state(hs: HardState, evidence_term: int, last_index: int, node_id: int, cut: bool) -> HardState:
    """The hard state after a cut (module doc, §5.2): term raised to the evidence, the vote in it taken as
    given unless the stored one is of that very term, commit no further than the log."""
    commit = min(hs.commit, last_index)
    if not cut:
        return replace(hs, commit=commit)
    term = max(hs.term, evidence_term)
    vote = hs.vote if term == hs.term and hs.vote != NO_VOTE else node_id
    return HardState(term=term, vote=vote, commit=commit)


def reconcile(
    state: PersistentState,
    applied_index: int,
    applied_term: int | None,
    voters: tuple[int, ...],
    node_id: int,
    cut: bool,
) -> Recovery:
    """Fit the stored log to what the state machine applied; `cut`: the log store cut a damaged tail.

    The state machine must not be behind the stored snapshot (the runner restores that first)."""
    rebase: SnapshotMeta | None = None
    if applied_index > state.compacted_index:
        term = applied_term_of(state, applied_index, applied_term)
        if term is None:
            last_index, _ = _last(state)
            raise RecoveryError(
                f"the state machine applied entry {applied_index} but records no term for it (written by an "
                f"older version) and the log ends at {last_index}: its term is unknown"
            )
        if state.term_at(applied_index) != term:
            state = _rebased(state, applied_index, term, voters)
            rebase = state.snapshot
    last_index, last_term = _last(state)
    evidence_term = max(last_term, applied_term or 0)
    hs = recovered_hard_state(state.hard_state, evidence_term, last_index, node_id, cut or rebase is not None)
    return Recovery(state=replace(state, hard_state=hs), rebase=rebase, hard_state_changed=hs != state.hard_state)
