"""How the node's Ready loop (quorum.node) overlaps and short-cuts its steps.

The loop is etcd's (persist, send, apply, advance: etcd-io/raft rawnode.go).
Each option below names one departure from its plain form and the one step of
the loop where it acts; every option is on by default and the loop is correct
with any of them off. The node-loop simulator (tests/sim/node_loop.py, run by
tests/test_node_loop_sim.py) runs QuorumNode's own loop with each option drawn
on or off per seed and forced either way, under message loss, partitions and
crashes at any disk call, and checks that its step runs exactly when it is on;
the SIGKILL-under-writes cluster test runs real processes all on and all off.
The protocol extensions the core offers are RaftConfig options
(quorum.raft.config), not these.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoopOptions:
    # Persist: a Ready with at most this many entries and no snapshot is saved on the loop's thread
    # (LMDB and the write-ahead log release the GIL while they wait); a larger one goes to the writer
    # thread, and the loop applies meanwhile. 0: every Ready with entries goes to the writer thread.
    inline_persist_entries_max: int = 16
    # Persist: a follower that serves clients applies what earlier Readies made durable, and prepares
    # the entries being saved (StateMachine.prepare), between the save's write and its fsync
    # (LogStore.begin_save). Off: it applies before the save and prepares after it.
    apply_ahead_during_save: bool = True
    # Advance: once a Ready's entries are durable, the state machine prepares those not known committed
    # yet, a loop turn later, while their commit is under way (StateMachine.prepare).
    prepare_while_committing: bool = True
    # Send before apply: a leader's Ready handled in a handler leaves its committed entries to the next
    # Ready (Raft.ready(withhold_committed)), so that the COMMIT and APPEND messages reach the peer
    # senders a loop turn before the apply.
    leader_sends_before_apply: bool = True
    # Where a Ready is handled: a follower handles an append's Ready in the handler that received it,
    # instead of waking the loop's task.
    ready_in_handler: bool = True
    # Where a Ready is handled: a leader with nothing in flight handles its proposal's Ready in the
    # proposer's call (appends to the idle peer streams, then the fsync), instead of waking the loop's task.
    idle_leader_inline_path: bool = True

    def __post_init__(self) -> None:
        if self.inline_persist_entries_max < 0:
            raise ValueError(f"inline_persist_entries_max must be >= 0, got {self.inline_persist_entries_max}")
