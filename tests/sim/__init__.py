"""Deterministic simulation of the pure Raft core (STYLE 11).

N `quorum.raft.core.Raft` instances run in one thread on a seeded
discrete-event loop: a network that drops, delays, duplicates, reorders and
partitions messages, a disk (`MemoryLogStore` plus a buffer of unsynced
writes that a crash loses), crashes and restarts, snapshots with log
compaction, and a client that proposes, reads and transfers leadership.
Safety invariants are checked after every event; liveness at the end of each
run. Everything depends only on the seed, so a failing seed replays exactly:

    python3 -m tests.sim.run --seed 1234 --nodes 5 --steps 3000 -v

`node_loop` runs real QuorumNodes (the node's Ready loop, every LoopOptions
field on and off) on the deterministic twins of `loop_world`:

    python3 -m tests.sim.run --loop --seed 1234 --nodes 3 --steps 600 -v
"""

from tests.sim.cluster import Cluster, SimResult, SimulationError, replay_command, run_seed

__all__ = ["Cluster", "SimResult", "SimulationError", "replay_command", "run_seed"]
