"""A seeded discrete-event simulation of N Raft cores (STYLE 11; quorum.md §5.5).

One `random.Random(seed)` drives everything: message delays, drops,
duplicates, partitions, crashes, snapshots and the client workload. There is
no wall clock and no thread. Time is an integer: a tick is `TICK_UNITS`
units, and every node ticks once per tick (in a random order), while messages
take a random number of units, so they interleave with ticks and reorder.

A node is a `Raft` core plus a `SimDisk` (a `MemoryLogStore` that survives
crashes, fronted by a buffer of unsynced writes that a crash may lose), a
durable store of state-machine snapshots, and a state machine that is simply
the list of entries it applied. Ready processing follows the contract in
`quorum.raft.types.Ready`; a crash may strike between sending the early
messages and persisting.

After every event the touched node is checked (`invariants.Invariants`); at
the end the faults stop and the cluster must elect one leader, commit a fresh
proposal and converge to identical state machines within a bounded time.
"""

from __future__ import annotations

import heapq
import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from quorum.log_store import MemoryLogStore
from quorum.raft.config import RaftConfig
from quorum.raft.core import Raft
from quorum.raft.errors import NotLeaderError, ProposalDroppedError
from quorum.raft.membership import ChangeKind, ConfChange, ConfChangeError, decode_config
from quorum.raft.types import (
    SENDABLE_BEFORE_PERSIST,
    Entry,
    EntryKind,
    HardState,
    Message,
    MessageType,
    Ready,
    Role,
    SnapshotMeta,
)
from tests.sim.invariants import InvariantFailure, Invariants, fail

TICK_UNITS = 10
# Readies handled back to back for one node before the loop must have settled.
READY_ROUNDS_MAX = 64
# Full log audit of every settled node, every this many events.
AUDIT_EVERY_EVENTS = 512
LAZY_SEED_FACTOR = 7919
WITHHOLD_COMMITTED_RATE = 0.3
PERSISTED_REPORT_RATE = 0.5
# The core's protocol extensions (RaftConfig): each seed draws every one on or off (on more often, as
# deployed), from a generator of its own; a test forces one on or off over many seeds.
EXTENSIONS = ("durable_notice", "lazy_follower_commits", "deferred_replication", "campaign_on_leader_loss")
EXTENSION_ON_RATE = 0.75
# Random membership changes (quorum.raft.membership), off unless forced on (`--option membership_changes=on`):
# a seed without them runs exactly as before they existed. They draw from a generator of their own.
MEMBERSHIP_CHANGES = "membership_changes"
SIM_OPTIONS = (*EXTENSIONS, MEMBERSHIP_CHANGES)
MEMBERSHIP_CHANGE_RATE = 0.03  # per tick
MEMBERS_ADDED_MAX = 4  # fresh node ids a run may add
# A removed node keeps running this many election timeouts at most (a disruptive removed server, dissertation
# §4.2.3), then its operator stops it.
REMOVED_LINGER_ELECTIONS_MAX = 4
# How often the runner applies the committed entries earlier Readies made durable before it persists
# the Ready's own (the node's loop does so before or during its save: quorum.node._durable_apply_timing).
APPLY_AHEAD_RATE = 0.5
LAZY_TOGGLE_RATE = 0.05  # per tick: a node gains or loses its last client session
# Reports of a broken stream to the leader (Raft.leader_unreachable), from a generator of their own: a
# crashed leader's followers each learn of it with this chance (their stream was live), and per tick a
# follower of a leader that is alive is told its stream broke (a flapping link) with one of these chances.
STREAM_BREAK_SEEN_RATES = (1.0, 0.5)
FLAP_RATES = (0.0, 0.02, 0.1)
# Snapshots a node keeps in its snapshot store (the newest ones).
SNAPSHOTS_KEPT = 3
# More messages in flight than this is a storm (two nodes answering each other forever, and
# duplicates multiplying the exchange): a failure, not something to simulate to the end.
IN_FLIGHT_MAX = 5000
# Liveness bound: elections' worth of ticks, plus ticks per entry the most lagging node lacks.
LIVENESS_ELECTIONS_MAX = 30
LIVENESS_TICKS_PER_LAGGING_ENTRY = 4

_EV_TICK = 0
_EV_DELIVER = 1
_EV_RESTART = 2
_EV_HEAL = 3
_EV_STOP = 4

MT = MessageType
Payload = tuple[Entry, ...]


def replay_command(seed: int, nodes: int, steps: int, forced: Mapping[str, bool] | None = None) -> str:
    options = "".join(f" --option {name}={'on' if on else 'off'}" for name, on in sorted((forced or {}).items()))
    return f"python3 -m tests.sim.run --seed {seed} --nodes {nodes} --steps {steps}{options} -v"


class SimulationError(AssertionError):
    """A seed failed; the message names the invariant and the command that replays it."""

    def __init__(
        self, seed: int, nodes: int, steps: int, what: str, at: str, forced: Mapping[str, bool] | None = None
    ) -> None:
        self.seed, self.nodes, self.steps, self.what = seed, nodes, steps, what
        self.command = replay_command(seed, nodes, steps, forced)
        super().__init__(f"seed {seed}, {nodes} nodes: {what} ({at})\n  replay: {self.command}")


@dataclass(slots=True)
class SimResult:
    seed: int
    nodes: int
    steps: int
    ticks: int = 0
    liveness_ticks: int = 0
    liveness_lag: int = 0
    messages: int = 0
    dropped: int = 0
    leaders: int = 0
    crashes: int = 0
    crashes_mid_ready: int = 0
    pauses: int = 0
    partitions: int = 0
    proposals: int = 0
    acked: int = 0
    not_leader: int = 0
    dropped_proposals: int = 0
    reads: int = 0
    reads_answered: int = 0
    transfers: int = 0
    snapshots_taken: int = 0
    snapshots_sent: int = 0
    snapshots_installed: int = 0
    changes: int = 0
    changes_refused: int = 0
    unsynced_lost: int = 0
    lazy_commit_changes: int = 0
    # A follower committed entries no leader had counted yet (on the leader's DURABLE notice).
    self_commits: int = 0
    # Stream breaks reported to followers (a crashed leader's, a flapping link), and the campaigns they began.
    leader_loss_reports: int = 0
    leader_loss_campaigns: int = 0
    # Committed entries applied (and acknowledged) before the Ready's own entries were persisted.
    applied_ahead: int = 0
    committed: int = 0


@dataclass(frozen=True, slots=True)
class Profile:
    """Fault and workload rates of one seed (each run draws its own mix)."""

    drop_rate: float
    dup_rate: float
    slow_rate: float
    slow_units_max: int
    partition_rate: float
    partition_ticks_max: int
    crash_rate: float
    pause_rate: float
    pause_ticks_max: int
    crash_mid_ready_rate: float
    restart_ticks_max: int
    defer_ready_rate: float
    early_send_rate: float
    propose_rate: float
    read_rate: float
    transfer_rate: float
    snapshot_rate: float
    snapshot_keep_max: int


def draw_profile(rng: random.Random, election_ticks: int) -> Profile:
    crashy = rng.random() < 0.7
    return Profile(
        drop_rate=rng.choice((0.0, 0.01, 0.05, 0.15)),
        dup_rate=rng.choice((0.0, 0.02, 0.1)),
        slow_rate=rng.choice((0.0, 0.02, 0.1)),
        slow_units_max=TICK_UNITS * election_ticks * rng.choice((1, 3)),
        partition_rate=rng.choice((0.0, 0.01, 0.03)),
        partition_ticks_max=election_ticks * rng.choice((2, 6)),
        crash_rate=rng.choice((0.002, 0.01)) if crashy else 0.0,
        pause_rate=rng.choice((0.0, 0.005, 0.02)),
        pause_ticks_max=election_ticks * rng.choice((1, 3)),
        crash_mid_ready_rate=rng.choice((0.0, 0.002, 0.01)) if crashy else 0.0,
        restart_ticks_max=election_ticks * rng.choice((1, 5)),
        defer_ready_rate=rng.choice((0.0, 0.2, 0.6)),
        early_send_rate=rng.choice((0.0, 0.5, 1.0)),
        propose_rate=rng.choice((0.2, 0.5, 1.5)),
        read_rate=rng.choice((0.05, 0.3)),
        transfer_rate=rng.choice((0.0, 0.005, 0.03)),
        snapshot_rate=rng.choice((0.0, 0.03, 0.1)),
        snapshot_keep_max=rng.choice((0, 0, 2, 20)),
    )


def draw_config(rng: random.Random) -> dict[str, object]:
    """Core settings of one seed, shared by every node."""
    election = rng.randint(5, 12)
    knobs: dict[str, object] = {
        "election_timeout_ticks": election,
        "heartbeat_interval_ticks": rng.choice((1, 1, 2)),
        "pre_vote": rng.random() < 0.8,
        "check_quorum": rng.random() < 0.8,
        "inflight_appends_max": rng.choice((1, 2, 4, 64)),
        "append_entries_max": rng.choice((1, 3, 4096)),
        "append_bytes_max": rng.choice((8, 64, 4 * 1024 * 1024)),
        "uncommitted_bytes_max": rng.choice((48, 64 * 1024 * 1024)),
    }
    return knobs


def draw_extensions(rng: random.Random, forced: Mapping[str, bool]) -> dict[str, bool]:
    """The protocol extensions of one seed (RaftConfig), those in `forced` as given."""
    unknown = set(forced) - set(EXTENSIONS)
    if unknown:
        raise ValueError(f"unknown extensions {sorted(unknown)}; known: {', '.join(EXTENSIONS)}")
    drawn = {name: rng.random() < EXTENSION_ON_RATE for name in EXTENSIONS}
    return drawn | dict(forced)


class SimDisk:
    """A durable `MemoryLogStore` behind a buffer of writes made without fsync.

    A synced save (or a compaction) first flushes the buffer, as an fsync
    makes every earlier write of the file durable; a crash keeps a random
    prefix of the buffer and loses the rest (the page cache went away).
    """

    def __init__(self) -> None:
        self.store = MemoryLogStore()
        self.unsynced: list[tuple[HardState | None, tuple[Entry, ...], SnapshotMeta | None]] = []

    def save(self, hs: HardState | None, entries: tuple[Entry, ...], snap: SnapshotMeta | None, sync: bool) -> None:
        if not sync:
            self.unsynced.append((hs, entries, snap))
            return
        self.flush()
        self.store.save(hs, entries, snap, sync=True)

    def flush(self) -> None:
        for hs, entries, snap in self.unsynced:
            self.store.save(hs, entries, snap, sync=True)
        self.unsynced.clear()

    def compact(self, index: int, meta: SnapshotMeta) -> None:
        self.flush()
        self.store.compact(index, meta)

    def crash(self, rng: random.Random) -> int:
        """Lose a random suffix of the unsynced writes; returns how many were lost."""
        keep = rng.randint(0, len(self.unsynced))
        lost = len(self.unsynced) - keep
        del self.unsynced[keep:]
        self.flush()
        return lost


@dataclass(slots=True)
class SimNode:
    id: int
    disk: SimDisk = field(default_factory=SimDisk)
    # Durable snapshot store: (index, term) -> the state machine at that index.
    snapshots: dict[tuple[int, int], Payload] = field(default_factory=dict)
    core: Raft | None = None
    incarnation: int = 0
    # Volatile, rebuilt on restart.
    machine: list[Entry] = field(default_factory=list)
    incoming: dict[tuple[int, int], Payload] = field(default_factory=dict)
    commit_seen: int = 0
    written_last: int = 0  # last log index handed to the disk by this incarnation
    written_hs: HardState = field(default_factory=HardState)
    role: Role = Role.FOLLOWER
    # A paused process (GC, swapped out, SIGSTOP): no ticks, messages wait in its socket buffer.
    paused_until: int = 0
    # Proposals this incarnation made as leader: index -> data (the client waits for them).
    proposed: dict[int, bytes] = field(default_factory=dict)


class Cluster:
    def __init__(
        self,
        seed: int,
        nodes: int = 3,
        steps: int = 3000,
        verbose: bool = False,
        out: Callable[[str], None] | None = None,
        forced: Mapping[str, bool] | None = None,
    ) -> None:
        self.seed, self.n, self.steps = seed, nodes, steps
        self.rng = random.Random(seed)
        self.voters = tuple(range(1, nodes + 1))
        self.knobs = draw_config(self.rng)
        self.forced = dict(forced or {})
        extensions = {k: v for k, v in self.forced.items() if k != MEMBERSHIP_CHANGES}
        self.knobs.update(draw_extensions(random.Random(seed * LAZY_SEED_FACTOR + 4), extensions))
        self.membership_changes = self.forced.get(MEMBERSHIP_CHANGES, False)
        self.member_rng = random.Random(seed * LAZY_SEED_FACTOR + 6)
        self.ids = list(self.voters)  # every node ever started, the added ones too
        self.stopped: set[int] = set()  # removed nodes their operator stopped for good
        # Vote grants seen on the wire: (term, candidate) -> voters that granted it.
        self.grants: dict[tuple[int, int], set[int]] = {}
        self.election_ticks = int(self.knobs["election_timeout_ticks"])  # type: ignore[call-overload]
        self.profile = draw_profile(self.rng, self.election_ticks)
        # Which followers want COMMIT messages (Raft.set_lazy_commits) changes
        # what a follower learns when, never what is safe. Its own generator,
        # so that adding it left every other seed's schedule as it was.
        self.lazy_rng = random.Random(seed * LAZY_SEED_FACTOR + 1)
        # Whether a Ready leaves its committed entries to the next one (as the node
        # runner's leader does when it has messages to send first): its own generator too.
        self.withhold_rng = random.Random(seed * LAZY_SEED_FACTOR + 2)
        # Whether the runner reports a Ready persisted (Raft.persisted) and sends what that allows before
        # it sends the rest and applies, as the node runner's leader does: its own generator too.
        self.persisted_rng = random.Random(seed * LAZY_SEED_FACTOR + 3)
        # Whether the runner applies durable committed entries before persisting: its own generator too.
        self.apply_ahead_rng = random.Random(seed * LAZY_SEED_FACTOR + 5)
        # Which followers hear of a broken stream to their leader, and when a link flaps: its own generator too.
        self.break_rng = random.Random(seed * LAZY_SEED_FACTOR + 6)
        self.stream_break_seen_rate = self.break_rng.choice(STREAM_BREAK_SEEN_RATES)
        self.flap_rate = self.break_rng.choice(FLAP_RATES)
        self.verbose = verbose
        self.out = out or (lambda line: print(line, file=sys.stdout))
        self.inv = Invariants()
        self.nodes = {i: SimNode(i) for i in self.voters}
        self.result = SimResult(seed, nodes, steps)
        self.now = 0
        self.ticks = 0
        self.events = 0
        self._heap: list[tuple[int, int, int, object, object, int]] = []
        self._seq = 0
        self.blocked: frozenset[tuple[int, int]] = frozenset()
        self._partition_gen = 0
        self.chaos = True
        self._client_seq = 0
        self._final: tuple[int, int, bytes, int] | None = None  # liveness probe: node, index, data, term

    # ------------------------------------------------------------------ running
    def run(self) -> SimResult:
        try:
            self._run()
        except InvariantFailure as e:
            raise self._error(str(e)) from e
        except SimulationError:
            raise
        except Exception as e:  # the core raised (an InvariantViolation or a plain bug)
            raise self._error(f"{type(e).__name__} raised: {e}") from e
        return self.result

    def _error(self, what: str) -> SimulationError:
        at = f"event {self.events}, tick {self.ticks}, t={self.now}"
        return SimulationError(self.seed, self.n, self.steps, what, at, self.forced)

    def _run(self) -> None:
        if self.verbose:
            self.out(f"# seed {self.seed}: config {self.knobs}")
            self.out(f"# profile {self.profile}")
        for node in self.nodes.values():
            self._start(node)
        self._schedule(TICK_UNITS, _EV_TICK, None, None, 0)
        while self.events < self.steps:
            self._step_event()
        self._liveness()

    def _step_event(self) -> None:
        t, _, kind, a, b, c = heapq.heappop(self._heap)
        self.now = t
        self.events += 1
        if kind == _EV_DELIVER:
            self._deliver(a, b, c)  # type: ignore[arg-type]
        elif kind == _EV_TICK:
            self._world_tick()
        elif kind == _EV_RESTART:
            node = self.nodes[c]
            if node.core is None and c not in self.stopped:
                self._start(node)
        elif kind == _EV_STOP:
            self._stop_removed(c)
        elif kind == _EV_HEAL:
            if c == self._partition_gen and self.blocked:
                self._heal()
        if self.events % AUDIT_EVERY_EVENTS == 0:
            self._audit()

    def _schedule(self, delay: int, kind: int, a: object, b: object, c: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay, self._seq, kind, a, b, c))

    def _trace(self, line: str) -> None:
        self.out(f"[{self.now:>7} #{self.events:>5}] {line}")

    # -------------------------------------------------------------------- nodes
    def _start(self, node: SimNode) -> None:
        state = node.disk.store.load()
        applied = 0
        machine: list[Entry] = []
        if state.snapshot is not None:
            meta = state.snapshot
            payload = node.snapshots.get((meta.index, meta.term))
            if payload is None:
                raise fail("restart", f"node {node.id} has no snapshot data for stored meta {meta}")
            machine = list(payload)
            applied = meta.index
        node.core = Raft(self._config(node.id), state, random.Random(self.rng.randrange(1 << 32)), applied=applied)
        node.incarnation += 1
        node.machine = machine
        node.incoming = {}
        node.commit_seen = node.core.commit_index
        node.written_last = state.entries[-1].index if state.entries else state.compacted_index
        node.written_hs = state.hard_state
        node.role = node.core.role
        node.proposed = {}
        node.paused_until = 0
        if self.verbose:
            self._trace(
                f"n{node.id} start #{node.incarnation}: term {state.hard_state.term} vote {state.hard_state.vote} "
                f"commit {state.hard_state.commit} log {state.compacted_index}+{len(state.entries)} applied {applied}"
            )
        self._after(node)

    def _config(self, node_id: int) -> RaftConfig:
        # A node added later starts with no configuration (`zkraft quorum start --join`): the log names it.
        voters = self.voters if node_id in self.voters else ()
        return RaftConfig(node_id=node_id, voters=voters, **self.knobs)  # type: ignore[arg-type]

    def _crash(self, node: SimNode, why: str) -> None:
        node.core = None
        lost = node.disk.crash(self.rng)
        self.result.unsynced_lost += lost
        self.result.crashes += 1
        if self.verbose:
            self._trace(f"n{node.id} CRASH ({why}); {lost} unsynced writes lost")
        if self.chaos and node.id not in self.stopped:
            delay = self.rng.randint(1, self.profile.restart_ticks_max) * TICK_UNITS
            self._schedule(delay, _EV_RESTART, None, None, node.id)
        for other in self.nodes.values():
            # Its followers' streams to it break at once (the kernel resets a dead process's connections).
            core = self._running(other)  # a paused follower hears of it once it runs again: left out
            if core is not None and core.leader_id == node.id and self.break_rng.random() < self.stream_break_seen_rate:
                self._report_stream_break(other, node.id)

    def _report_stream_break(self, node: SimNode, peer: int) -> None:
        """The transport tells `node` its stream to `peer` broke (Raft.leader_unreachable)."""
        core = node.core
        assert core is not None
        self.result.leader_loss_reports += 1
        if core.leader_unreachable(peer):
            self.result.leader_loss_campaigns += 1
            if self.verbose:
                self._trace(f"n{node.id} lost its stream to leader n{peer}: pre-election at once")
        self._drain(node)
        self._after(node)

    def _after(self, node: SimNode) -> None:
        """Checks after every event that touched `node` (O(1) unless something new happened)."""
        core = node.core
        if core is None:
            return
        inv = self.inv
        commit = core.commit_index
        if commit < node.commit_seen:
            raise fail("commit monotonic", f"node {node.id} commit index went {node.commit_seen} -> {commit}")
        node.commit_seen = commit
        role = core.role
        if role is not node.role:
            if self.verbose:
                self._trace(f"n{node.id} {node.role.value} -> {role.value} term {core.term}")
            node.role = role
            if role in (Role.CANDIDATE, Role.PRE_CANDIDATE) and (
                node.id in core.membership.learners + core.membership.observers
            ):
                raise fail(
                    "learner", f"node {node.id} campaigns but is a non-voter in its configuration {core.membership}"
                )
        if role is Role.LEADER and inv.check_leader(node.id, core.term):
            self.result.leaders += 1
            inv.check_new_leader(core)
            self._check_elected(node.id, core)
        newly = inv.check_commit(core, self._durable_on_quorum(core))
        if newly is not None:
            first, last = newly
            if role is Role.LEADER and not self._durable_on_quorum(core)(last, core.term_at(last) or -1):
                raise fail(
                    "commit quorum",
                    f"leader {node.id} commits through {last} but no majority of its configuration "
                    f"{core.membership.voters} holds it on disk",
                )
            if role is not Role.LEADER:
                self.result.self_commits += 1
            for other in self.nodes.values():
                oc = other.core
                if oc is not None and oc is not core and oc.role is Role.LEADER:
                    inv.check_leader_holds(oc, first, last, core.term)

    def _durable_on_quorum(self, core: Raft) -> Callable[[int, int], bool]:
        """Whether a majority of the voters of `core`'s configuration hold entry (index, term) on disk (synced
        writes; a snapshot beyond the index holds it too): what a commit there needs (Raft §5.4.2, §4.1)."""
        voters = core.membership.voters

        def holds(index: int, term: int) -> bool:
            copies = 0
            for v in voters:
                store = self.nodes[v].disk.store if v in self.nodes else None
                if store is not None and (store.term(index) == term or store.compacted_index > index):
                    copies += 1
            return copies >= len(voters) // 2 + 1

        return holds

    def _check_elected(self, node_id: int, core: Raft) -> None:
        """A new leader won the grants of a majority of its configuration's voters (the candidate's own among
        them only when it is one); a learner's grant never counts."""
        voters = core.membership.voters
        granted = self.grants.get((core.term, node_id), set()) | ({node_id} if node_id in voters else set())
        if len(granted & set(voters)) < len(voters) // 2 + 1:
            raise fail(
                "election",
                f"node {node_id} leads term {core.term} with grants from {sorted(granted)}, "
                f"its configuration's voters are {voters}",
            )

    def _audit(self) -> None:
        for node in self.nodes.values():
            core = node.core
            if core is not None and not core.has_ready():
                self.inv.audit_log(core)

    # -------------------------------------------------------------------- Ready
    def _drain(self, node: SimNode) -> None:
        for _ in range(READY_ROUNDS_MAX):
            core = node.core
            if core is None or not core.has_ready():
                return
            withhold = self.withhold_rng.random() < WITHHOLD_COMMITTED_RATE
            self._handle_ready(node, core, core.ready(withhold_committed=withhold))
        if node.core is not None and node.core.has_ready():
            raise fail("ready", f"node {node.id} still has a Ready after {READY_ROUNDS_MAX} rounds")

    def _handle_ready(self, node: SimNode, core: Raft, rd: Ready) -> None:
        # Record what the core now claims (a leader's new commit index) before any message can
        # spread it and before a crash can hide it.
        self._after(node)
        self._check_ready(node, core, rd)
        if self.verbose:
            self._trace_ready(node, rd)
        prof = self.profile
        late: tuple[Message, ...] | list[Message] = rd.messages
        if rd.messages and self.rng.random() < prof.early_send_rate:
            late = []
            for m in rd.messages:
                if m.type in SENDABLE_BEFORE_PERSIST:
                    self._send(node, m)
                else:
                    late.append(m)
        applied_ahead = self._apply_ahead(node, rd)
        if self.chaos and prof.crash_mid_ready_rate and self.rng.random() < prof.crash_mid_ready_rate:
            self.result.crashes_mid_ready += 1
            self._crash(node, "after early sends, before persisting")
            return
        # 1. persist: snapshot data first (write-fsync-rename beside the log), then the log store.
        snap = rd.snapshot
        payload: Payload = ()
        if snap is not None:
            payload = node.incoming.get((snap.index, snap.term), ())
            if not payload:
                raise fail("ready", f"node {node.id} must install snapshot {snap} it never received")
            self.inv.check_snapshot_payload(node.id, snap.index, snap.term, payload)
            self._keep_snapshot(node, snap, payload)
        node.disk.save(rd.hard_state, rd.entries, snap, rd.must_sync)
        if snap is not None:
            node.written_last = snap.index
        if rd.entries:
            node.written_last = rd.entries[-1].index
        if rd.hard_state is not None:
            node.written_hs = rd.hard_state
        if self.persisted_rng.random() < PERSISTED_REPORT_RATE:
            for m in core.persisted(rd):
                self._send(node, m)
        # 2. send the rest.
        for m in late:
            self._send(node, m)
        # 3. apply.
        if snap is not None:
            node.machine = list(payload)
            self.result.snapshots_installed += 1
        for e in rd.committed_entries[applied_ahead:]:
            self._apply(node, e)
        for rs in rd.read_states:
            self.inv.check_read(node.id, rs)
            self.result.reads_answered += 1
        # 4. advance.
        core.advance(rd)
        if core.applied_index != len(node.machine):
            raise fail("apply", f"node {node.id}: core applied {core.applied_index}, machine has {len(node.machine)}")

    def _apply_ahead(self, node: SimNode, rd: Ready) -> int:
        """Sometimes apply the committed entries earlier Readies made durable before persisting this one's
        (those below its first new entry), as the node's loop does; returns how many."""
        if rd.snapshot is not None or self.apply_ahead_rng.random() >= APPLY_AHEAD_RATE:
            return 0
        first_new = rd.entries[0].index if rd.entries else None
        count = 0
        for e in rd.committed_entries:
            if first_new is not None and e.index >= first_new:
                break
            self._apply(node, e)
            count += 1
        self.result.applied_ahead += count
        return count

    def _check_ready(self, node: SimNode, core: Raft, rd: Ready) -> None:
        """The Ready contract, as far as the runner can see it."""
        hs, prev = rd.hard_state, node.written_hs
        needs_sync = bool(rd.entries) or (hs is not None and (hs.term != prev.term or hs.vote != prev.vote))
        if needs_sync and not rd.must_sync:
            raise fail("ready", f"node {node.id}: entries or a term/vote change without must_sync")
        if hs is not None and hs.term < prev.term:
            raise fail("ready", f"node {node.id}: term went back from {prev.term} to {hs.term}")
        if hs is not None and hs.term == prev.term and prev.vote != 0 and hs.vote != prev.vote:
            raise fail("election safety", f"node {node.id} votes for {hs.vote} after {prev.vote} in term {hs.term}")
        if rd.entries:
            first = rd.entries[0].index
            base = rd.snapshot.index if rd.snapshot is not None else node.written_last
            if first > base + 1:
                raise fail("ready", f"node {node.id}: entries start at {first}, the disk log ends at {base}")
            if rd.soft_state.role is Role.LEADER and first != base + 1:
                raise fail(
                    "leader append-only", f"leader {node.id} rewrites its log from {first} (disk log ends at {base})"
                )
            self.inv.check_appended(node.id, rd.entries, core.term_at(first - 1))
        if rd.committed_entries:
            first = rd.committed_entries[0].index
            base = rd.snapshot.index if rd.snapshot is not None else len(node.machine)
            if first != base + 1:
                raise fail("apply", f"node {node.id}: committed entries start at {first}, applied is {base}")
        for m in rd.messages:
            if m.frm != node.id or m.to == node.id or m.to not in self.nodes:
                raise fail("ready", f"node {node.id} emits a misaddressed message {m}")

    def _apply(self, node: SimNode, e: Entry) -> None:
        if e.index != len(node.machine) + 1:
            raise fail("apply", f"node {node.id} applies {e.index} after {len(node.machine)}")
        node.machine.append(e)
        if self.inv.check_apply(node.id, e) and e.kind is EntryKind.CONFIG:
            self._config_applied(e)
        data = node.proposed.pop(e.index, None)
        if data is not None and data == e.data and e.kind is EntryKind.NORMAL:
            self.inv.ack(e)  # the leader tells its client: committed
            self.result.acked += 1

    def _keep_snapshot(self, node: SimNode, meta: SnapshotMeta, payload: Payload) -> None:
        node.snapshots[(meta.index, meta.term)] = payload
        while len(node.snapshots) > SNAPSHOTS_KEPT:
            del node.snapshots[min(node.snapshots)]

    def _trace_ready(self, node: SimNode, rd: Ready) -> None:
        parts = [f"n{node.id} ready {rd.soft_state.role.value}"]
        if rd.hard_state is not None:
            hs = rd.hard_state
            parts.append(f"hs=(term {hs.term}, vote {hs.vote}, commit {hs.commit})")
        if rd.entries:
            parts.append(f"entries {rd.entries[0].index}..{rd.entries[-1].index} (last term {rd.entries[-1].term})")
        if rd.snapshot is not None:
            parts.append(f"snapshot ({rd.snapshot.index}, term {rd.snapshot.term})")
        if rd.committed_entries:
            parts.append(f"apply {rd.committed_entries[0].index}..{rd.committed_entries[-1].index}")
        if rd.read_states:
            parts.append("reads " + ",".join(f"{r.context.decode()}@{r.index}" for r in rd.read_states))
        if rd.messages:
            parts.append(f"{len(rd.messages)} msgs")
        if rd.must_sync:
            parts.append("sync")
        self._trace(" ".join(parts))

    # ------------------------------------------------------------------ network
    def _send(self, node: SimNode, m: Message) -> None:
        payload: Payload | None = None
        if m.type is MT.SNAPSHOT:
            meta = m.snapshot
            if meta is None:
                raise fail("ready", f"node {node.id} sends a SNAPSHOT without metadata")
            payload = node.snapshots.get((meta.index, meta.term))
            if payload is None:
                raise fail("ready", f"node {node.id} sends snapshot {meta} it never took or installed")
            self.result.snapshots_sent += 1
        self._check_extensions_off(node, m)
        if m.type is MT.VOTE_RESP and not m.reject:
            self.grants.setdefault((m.term, m.to), set()).add(m.frm)
        self.result.messages += 1
        if len(self._heap) > IN_FLIGHT_MAX:
            raise fail("message storm", f"{len(self._heap)} messages in flight; last sent {_show(m)}")
        prof, rng = self.profile, self.rng
        copies = 2 if prof.dup_rate and rng.random() < prof.dup_rate else 1
        for _ in range(copies):
            if self.chaos and prof.slow_rate and rng.random() < prof.slow_rate:
                delay = rng.randint(TICK_UNITS, prof.slow_units_max)
            else:
                delay = rng.randint(1, 2 * TICK_UNITS)
            self._schedule(delay, _EV_DELIVER, m, payload, node.incarnation)

    def _check_extensions_off(self, node: SimNode, m: Message) -> None:
        """An extension turned off leaves no trace on the wire."""
        if m.type is MT.DURABLE and not self.knobs["durable_notice"]:
            raise fail("extension off", f"node {node.id} sends {_show(m)} with durable_notice off")
        if m.lazy_commits and not self.knobs["lazy_follower_commits"]:
            raise fail("extension off", f"node {node.id} asks for lazy commits with lazy_follower_commits off")

    def _deliver(self, m: Message, payload: Payload | None, sender_incarnation: int) -> None:
        dst = self.nodes[m.to]
        core = dst.core
        if core is not None and dst.paused_until > self.now:
            self._schedule(
                dst.paused_until - self.now + self.rng.randint(0, TICK_UNITS),
                _EV_DELIVER,
                m,
                payload,
                sender_incarnation,
            )
            return
        drop = self.chaos and self.profile.drop_rate and self.rng.random() < self.profile.drop_rate
        if core is None or drop or (m.frm, m.to) in self.blocked:
            self.result.dropped += 1
            if self.verbose:
                self._trace(f"drop {_show(m)}")
            self._report_failure(m, sender_incarnation)
            return
        if self.verbose:
            self._trace(f"deliver {_show(m)}")
        if payload is not None and m.snapshot is not None:
            dst.incoming[(m.snapshot.index, m.snapshot.term)] = payload
        core.step(m)
        if self.rng.random() >= self.profile.defer_ready_rate:
            self._drain(dst)
        self._after(dst)
        if m.type is MT.SNAPSHOT:
            sender = self.nodes[m.frm]
            if sender.core is not None and sender.incarnation == sender_incarnation:
                sender.core.report_snapshot(m.to, True)
                self._drain(sender)
                self._after(sender)

    def _report_failure(self, m: Message, sender_incarnation: int) -> None:
        """What the transport tells the sender when a message did not get through."""
        sender = self.nodes[m.frm]
        core = sender.core
        if core is None or sender.incarnation != sender_incarnation:
            return
        if m.type is MT.SNAPSHOT:
            core.report_snapshot(m.to, False)
        elif self.rng.random() < 0.2:
            core.report_unreachable(m.to)
        else:
            return
        self._drain(sender)
        self._after(sender)

    # ---------------------------------------------------------------- the world
    def _world_tick(self) -> None:
        self.ticks += 1
        if self.chaos:
            self._chaos()
        order = list(self.nodes.values())
        self.rng.shuffle(order)
        for node in order:
            core = node.core
            if core is None or node.paused_until > self.now:
                continue
            core.tick()
            self._drain(node)
            self._after(node)
        if not self.chaos:
            self._liveness_probe()
        self._schedule(TICK_UNITS, _EV_TICK, None, None, 0)

    def _flap(self) -> None:
        """A follower of a leader that is alive is told its stream to the leader broke (a flapping link)."""
        if not self.flap_rate or self.break_rng.random() >= self.flap_rate:
            return
        node = self.nodes[self.break_rng.choice(self.voters)]
        core = self._running(node)
        if core is not None and core.role is Role.FOLLOWER and core.leader_id in self.nodes:
            leader = self.nodes[core.leader_id].core
            if leader is not None and leader.role is Role.LEADER:
                self._report_stream_break(node, core.leader_id)

    def _chaos(self) -> None:
        prof, rng = self.profile, self.rng
        self._flap()
        if self.lazy_rng.random() < LAZY_TOGGLE_RATE:
            node = self.nodes[self.lazy_rng.choice(self.ids)]
            lazy = self.lazy_rng.random() < 0.5
            if node.core is not None:
                node.core.set_lazy_commits(lazy)
                self.result.lazy_commit_changes += 1
                if self.verbose:
                    self._trace(f"n{node.id} lazy commits {lazy}")
        n = _poisson_small(rng, prof.propose_rate)
        for _ in range(n):
            self._client_propose()
        if rng.random() < prof.read_rate:
            self._client_read()
        if prof.transfer_rate and rng.random() < prof.transfer_rate:
            self._client_transfer()
        if prof.snapshot_rate and rng.random() < prof.snapshot_rate:
            # Compaction on the leader is what sends lagging followers snapshots.
            leaders = self._leaders()
            self._take_snapshot(
                rng.choice(leaders) if leaders and rng.random() < 0.5 else self.nodes[rng.choice(self.ids)]
            )
        if prof.crash_rate and rng.random() < prof.crash_rate * self.n:
            node = self.nodes[rng.choice(self.ids)]
            if node.core is not None:
                self._crash(node, "between readies")
        if prof.partition_rate and not self.blocked and rng.random() < prof.partition_rate:
            self._partition()
        if prof.pause_rate and rng.random() < prof.pause_rate:
            node = self.nodes[rng.choice(self.ids)]
            if node.core is not None and node.paused_until <= self.now:
                node.paused_until = self.now + rng.randint(1, prof.pause_ticks_max) * TICK_UNITS
                self.result.pauses += 1
                if self.verbose:
                    self._trace(f"n{node.id} PAUSED until {node.paused_until}")
        if self.membership_changes and self.member_rng.random() < MEMBERSHIP_CHANGE_RATE:
            self._change_membership()

    def _leaders(self) -> list[SimNode]:
        return [nd for nd in self.nodes.values() if nd.core is not None and nd.core.role is Role.LEADER]

    def _running(self, node: SimNode) -> Raft | None:
        """The core of a node that is up and not paused (the only ones a client reaches)."""
        return node.core if node.paused_until <= self.now else None

    def _client_propose(self) -> None:
        leaders = self._leaders()
        if leaders and self.rng.random() < 0.85:
            node = self.rng.choice(leaders)
        else:
            node = self.nodes[self.rng.choice(self.ids)]
        core = self._running(node)
        if core is None:
            return
        self._client_seq += 1
        data = b"w%d" % self._client_seq
        self.result.proposals += 1
        try:
            index = core.propose(data)
        except NotLeaderError as e:
            self.result.not_leader += 1
            if core.role is Role.LEADER or (e.leader_id != 0 and e.leader_id not in self.nodes):
                raise fail("propose", f"node {node.id} refused as not leader (hint {e.leader_id})") from e
            return
        except ProposalDroppedError:
            self.result.dropped_proposals += 1
            return
        node.proposed[index] = data
        if self.verbose:
            self._trace(f"n{node.id} propose {data.decode()} -> index {index} term {core.term}")
        if self.rng.random() >= self.profile.defer_ready_rate:
            self._drain(node)
        self._after(node)

    def _client_read(self) -> None:
        node = self.nodes[self.rng.choice(self.ids)]
        core = self._running(node)
        if core is None:
            return
        self._client_seq += 1
        ctx = b"r%d" % self._client_seq
        self.inv.read_issued(ctx)
        self.result.reads += 1
        if self.verbose:
            self._trace(f"n{node.id} read_index {ctx.decode()} (must cover {self.inv.read_bounds[ctx]})")
        core.read_index(ctx)
        self._drain(node)
        self._after(node)

    def _client_transfer(self) -> None:
        leaders = self._leaders()
        if not leaders:
            return
        node = self.rng.choice(leaders)
        target = self.rng.choice([v for v in self.ids if v != node.id])
        core = self._running(node)
        if core is None:
            return
        self.result.transfers += 1
        if self.verbose:
            self._trace(f"n{node.id} transfer leadership to n{target}")
        core.transfer_leadership(target)
        self._drain(node)
        self._after(node)

    # --------------------------------------------------------------- membership
    def _change_membership(self) -> None:
        """Ask a leader for a random single-server change: add a learner or an observer (a fresh node, started
        with no configuration), promote a learner, or remove any member, the leader itself included."""
        leaders = [nd for nd in self._leaders() if self._running(nd) is not None]
        if not leaders:
            return
        rng = self.member_rng
        node = rng.choice(leaders)
        core = node.core
        assert core is not None
        m = core.membership
        # Removing servers safely needs §4.2.3's protection against disruptive removed servers: pre-vote or
        # check-quorum's lease (both on by default). Without either, a removed server that missed its removal
        # keeps raising the term and its uncommitted removal may never commit.
        kinds = [ChangeKind.REMOVE] if self.knobs["pre_vote"] or self.knobs["check_quorum"] else []
        if len(self.ids) < self.n + MEMBERS_ADDED_MAX:
            kinds += [ChangeKind.ADD_LEARNER, ChangeKind.ADD_LEARNER, ChangeKind.ADD_OBSERVER]
        if m.learners:
            kinds += [ChangeKind.PROMOTE] * 3
        if not kinds:
            return
        kind = rng.choice(kinds)
        if kind in (ChangeKind.ADD_LEARNER, ChangeKind.ADD_OBSERVER):
            target = max(self.ids) + 1
        elif kind is ChangeKind.PROMOTE:
            target = rng.choice(m.learners)
        else:
            target = rng.choice(m.members)
        try:
            index = core.propose_conf_change(ConfChange(kind, target, b"n%d" % target))
        except (ConfChangeError, NotLeaderError, ProposalDroppedError) as e:
            self.result.changes_refused += 1
            if self.verbose:
                self._trace(f"n{node.id} refuses {kind.name} n{target}: {e}")
            return
        self.result.changes += 1
        if self.verbose:
            self._trace(f"n{node.id} {kind.name} n{target} -> index {index}: {core.membership}")
        if target not in self.nodes:
            self.ids.append(target)
            self.nodes[target] = SimNode(target)
            self._start(self.nodes[target])
        self._drain(node)
        self._after(node)

    def _config_applied(self, e: Entry) -> None:
        """A configuration entry was applied (so committed): a node it removed is stopped by its operator, a
        few election timeouts later (meanwhile it may disrupt, §4.2.3)."""
        change, _ = decode_config(e.data)
        if change.kind is ChangeKind.REMOVE and change.node_id not in self.stopped:
            linger = self.member_rng.randint(0, REMOVED_LINGER_ELECTIONS_MAX * self.election_ticks) * TICK_UNITS
            self._schedule(linger if self.chaos else 0, _EV_STOP, None, None, change.node_id)

    def _stop_removed(self, node_id: int) -> None:
        if node_id in self.stopped or not self._removed_for_good(node_id):
            return
        self.stopped.add(node_id)
        node = self.nodes[node_id]
        node.core = None
        if self.verbose:
            self._trace(f"n{node_id} STOPPED (removed)")

    def _removed_for_good(self, node_id: int) -> bool:
        """No running node's configuration names it (ids are never reused, so it stays out)."""
        return all(nd.core is None or node_id not in nd.core.membership.members for nd in self.nodes.values())

    def _take_snapshot(self, node: SimNode) -> None:
        core = self._running(node)
        if core is None or core.has_ready():
            return
        applied = core.applied_index
        floor = core.snapshot.index if core.snapshot is not None else 0
        if applied <= floor:
            return
        index = self.rng.randint(floor + 1, applied)
        term = core.term_at(index)
        if term is None:
            raise fail("snapshot", f"node {node.id} lost the term of applied entry {index}")
        meta = core.snapshot_meta(index)
        compact_to = max(index - self.rng.randint(0, self.profile.snapshot_keep_max), core.first_index - 1)
        self._keep_snapshot(node, meta, tuple(node.machine[:index]))
        got = core.snapshot_taken(meta, compact_to)
        if isinstance(got, int):
            compact_to = got
        node.disk.compact(compact_to, meta)
        self.result.snapshots_taken += 1
        if self.verbose:
            self._trace(f"n{node.id} snapshot at ({index}, term {term}), log compacted to {compact_to}")
        self._drain(node)
        self._after(node)

    def _partition(self) -> None:
        rng, voters = self.rng, self.ids
        kind = rng.randrange(4)
        pairs: set[tuple[int, int]] = set()
        if kind == 0:  # isolate one node
            x = rng.choice(voters)
            pairs = {(a, b) for a in voters for b in voters if a != b and x in (a, b)}
            what = f"isolate n{x}"
        elif kind == 1:  # split into two sides
            side = set(rng.sample(voters, rng.randint(1, len(voters) // 2)))
            pairs = {(a, b) for a in voters for b in voters if (a in side) != (b in side)}
            what = f"split {sorted(side)} | rest"
        elif kind == 2:  # one-way cuts
            for a in voters:
                for b in voters:
                    if a != b and rng.random() < 0.3:
                        pairs.add((a, b))
            what = "one-way cuts"
        else:  # a node hears everybody, nobody hears it (or the reverse)
            x = rng.choice(voters)
            out = rng.random() < 0.5
            pairs = {(x, b) if out else (b, x) for b in voters if b != x}
            what = f"n{x} {'cannot send' if out else 'cannot receive'}"
        self.blocked = frozenset(pairs)
        self._partition_gen += 1
        self.result.partitions += 1
        if self.verbose:
            self._trace(f"PARTITION {what}: {sorted(self.blocked)}")
        heal = rng.randint(1, self.profile.partition_ticks_max) * TICK_UNITS
        self._schedule(heal, _EV_HEAL, None, None, self._partition_gen)

    def _heal(self) -> None:
        self.blocked = frozenset()
        if self.verbose:
            self._trace("HEAL")

    # ----------------------------------------------------------------- liveness
    def _liveness(self) -> None:
        """Stop the faults; one leader, a fresh commit and identical state machines must follow."""
        self.chaos = False
        self._heal()
        if self.verbose:
            self._trace("LIVENESS: faults off, crashed nodes restart")
        for node in self.nodes.values():
            node.paused_until = 0
            if node.core is None and node.id not in self.stopped:
                self._start(node)
        start = self.ticks
        limit = start + self.liveness_ticks_max()
        self.result.liveness_lag = self._lag()
        while not self._converged():
            if self.ticks >= limit:
                raise fail(
                    "liveness",
                    f"no convergence {self.ticks - start} ticks after the faults stopped: " + self._describe(),
                )
            self._step_event()
        self.result.liveness_ticks = self.ticks - start
        self.result.ticks = self.ticks
        self.result.committed = len(self.inv.committed)
        members = self._members()
        for node in self.nodes.values():
            if node.id in members:
                assert node.core is not None
                self.inv.audit_log(node.core)
        self.inv.check_final({i: nd.machine for i, nd in self.nodes.items() if i in members})

    def _members(self) -> tuple[int, ...]:
        """The members of the single leader's configuration (every node, before any membership change)."""
        leaders = self._leaders()
        if not self.membership_changes or len(leaders) != 1:
            return tuple(self.nodes)
        assert leaders[0].core is not None
        return leaders[0].core.membership.members

    def liveness_ticks_max(self) -> int:
        """Ticks allowed from the end of the faults to convergence.

        Enough for a few split votes, the lease to lapse, slow messages to drain, and the most
        lagging node to catch up one batch per round trip, each possibly lost to a reordering.
        """
        per_batch = LIVENESS_TICKS_PER_LAGGING_ENTRY
        return (
            LIVENESS_ELECTIONS_MAX * self.election_ticks
            + self.profile.slow_units_max // TICK_UNITS
            + per_batch * self._lag()
        )

    def _lag(self) -> int:
        lasts = [nd.core.last_index for nd in self.nodes.values() if nd.core is not None]
        return max(lasts, default=0) - min(len(nd.machine) for nd in self.nodes.values() if nd.id not in self.stopped)

    def _liveness_probe(self) -> None:
        """Each tick of the liveness phase: keep one fresh proposal on its way until it commits."""
        if self._final is not None:
            node_id, index, data, term = self._final
            applied = self.inv.applied
            if len(applied) >= index:
                if applied[index - 1].data == data:
                    return  # committed: now wait for every node to apply it
            else:
                core = self.nodes[node_id].core
                if core is not None and core.role is Role.LEADER and core.term == term:
                    return  # still in flight under the leader that took it
        leaders = self._leaders()
        if len(leaders) != 1:
            return
        node = leaders[0]
        core = node.core
        assert core is not None
        self._client_seq += 1
        data = b"final%d" % self._client_seq
        try:
            index = core.propose(data)
        except (NotLeaderError, ProposalDroppedError):
            return
        node.proposed[index] = data
        self._final = (node.id, index, data, core.term)
        if self.verbose:
            self._trace(f"n{node.id} propose {data.decode()} -> index {index} (liveness probe)")
        self._drain(node)
        self._after(node)

    def _converged(self) -> bool:
        if self._final is None:
            return False
        _, index, data, _ = self._final
        applied = self.inv.applied
        if len(applied) < index or applied[index - 1].data != data:
            return False
        leaders = self._leaders()
        if len(leaders) != 1:
            return False
        lead = leaders[0].id
        lengths = set()
        members = self._members()
        for node in self.nodes.values():
            if node.id not in members:
                # Out of the configuration: its operator stops it once no running node names it any more.
                if node.core is not None and self._removed_for_good(node.id):
                    self._stop_removed(node.id)
                continue
            core = node.core
            if core is None or (core.role is not Role.LEADER and core.leader_id != lead):
                return False
            lengths.add(len(node.machine))
        return len(lengths) == 1 and lengths.pop() >= index

    def _describe(self) -> str:
        parts = []
        for node in self.nodes.values():
            c = node.core
            if c is None:
                parts.append(f"n{node.id} down")
            else:
                parts.append(
                    f"n{node.id} {c.role.value} term {c.term} leader {c.leader_id} last {c.last_index} "
                    f"commit {c.commit_index} applied {len(node.machine)}"
                    + (f" progress {c.progress()}" if c.role is Role.LEADER else "")
                )
        return "; ".join(parts)


def _poisson_small(rng: random.Random, rate: float) -> int:
    """A small random count with mean about `rate` (cheap, deterministic)."""
    n = int(rate)
    if rng.random() < rate - n:
        n += 1
    return n


def _show(m: Message) -> str:
    s = f"{m.type.name} {m.frm}->{m.to} term {m.term}"
    if m.type in (MT.APPEND, MT.VOTE, MT.PRE_VOTE, MT.COMMIT, MT.DURABLE):
        s += f" idx {m.index} lt {m.log_term}"
    if m.entries:
        s += f" +{m.entries[0].index}..{m.entries[-1].index}"
    if m.type in (MT.APPEND, MT.HEARTBEAT, MT.COMMIT):
        s += f" commit {m.commit}"
    if m.type is MT.APPEND_RESP:
        s += f" idx {m.index}" + (f" REJECT hint {m.reject_hint} lt {m.log_term}" if m.reject else "")
    if m.reject and m.type is not MT.APPEND_RESP:
        s += " REJECT"
    if m.snapshot is not None:
        s += f" snap ({m.snapshot.index}, term {m.snapshot.term})"
    if m.context:
        s += f" ctx {m.context.decode(errors='replace')}"
    return s


def run_seed(
    seed: int, nodes: int = 3, steps: int = 3000, verbose: bool = False, forced: Mapping[str, bool] | None = None
) -> SimResult:
    """Run one seed (`forced`: extensions set on or off); raises SimulationError (with the replay command)."""
    return Cluster(seed, nodes, steps, verbose=verbose, forced=forced).run()
