"""A seeded simulation of N real QuorumNodes: the node's own Ready loop, every LoopOptions field on and off.

The core simulator (tests/sim/cluster.py) runs the pure Raft core with a
Ready handler of its own. This one runs `quorum.node.QuorumNode` itself,
the loop code production runs (`_ready_loop`, `_handle_ready` and the
handlers that take a Ready on the spot), on the twins of tests/sim/loop_world.py:
one deterministic asyncio loop for the whole cluster, an in-memory disk that
loses what was not fsynced, a writer "thread" whose saves finish when the
simulated clock says, a network that drops, duplicates, delays and
partitions, and crashes at any disk call or between events.

Each seed draws the loop's options (LoopOptions, via NodeSettings' loop_*
fields) and the core's extensions (RaftConfig), the forced ones as given.
Checked after every event: the core simulator's invariants (election safety,
log matching, commit, leader completeness, state-machine safety), and the
loop's own: an entry is applied only once committed and on the applying
node's disk; prepare and apply see entries in log order, each applied once
per incarnation (tests.sim.loop_world.LoopMachine); a proposal is answered
only once applied, with its own entry; a ReadIndex answer covers what was
committed when the read was issued; no node's loop fails. At the end the
faults stop and every node must converge, acknowledged entries included
(a crash loses nothing acknowledged). A failing seed replays with

    python3 -m tests.sim.run --loop --seed 1234 --nodes 3 --steps 600 -v
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import structlog

from quorum import errors
from quorum.loop_options import LoopOptions
from quorum.node import QuorumNode
from quorum.raft.types import Entry, Message, MessageType, Role, SnapshotMeta
from quorum.settings import NodeSettings
from quorum.transport import NOTICE_TYPES
from tests.sim.cluster import EXTENSIONS, SimulationError
from tests.sim.invariants import InvariantFailure, Invariants, fail
from tests.sim.loop_world import (
    Life,
    LoopDisk,
    LoopMachine,
    LoopTransport,
    LoopWriter,
    SimCrash,
    make_loop,
    run_until_idle,
)

# Every field of LoopOptions and RaftConfig extension, each drawn on or off per seed, as often either way.
LOOP_OPTIONS = tuple(f.name for f in fields(LoopOptions))
OPTION_ON_RATE = 0.5
# inline_persist_entries_max "off" is 0 (every Ready with entries goes to the writer thread); "on" one of these.
INLINE_ENTRIES_ON = (1, 2, 4, 16)
TICK_UNITS = 10
LANE_BUSY_UNITS_MAX = 3
WRITER_UNITS_MAX = 2 * TICK_UNITS
PROPOSAL_COMMANDS_MAX = 24
# A crash strikes more often at the fsync of a begun save (LogStore.begin_save), where the loop worked
# between the write and the fsync: the write is lost, and so must be all the loop did meanwhile.
FSYNC_CRASH_FACTOR = 5
LIVENESS_TICKS_MAX = 400
PROBE = b"liveness-probe"
# A read's deadline: never reached (the simulated loop never waits on the clock; a read of a node that
# crashed is cancelled with it).
READ_TIMEOUT_S = 1e9
SEED_SALT = 104_729  # the option draws have generators of their own: adding one leaves the schedule alone

_EV_TICK, _EV_DELIVER, _EV_RESTART, _EV_HEAL, _EV_WRITER, _EV_SNAPSHOT = range(6)


def replay_command(seed: int, nodes: int, steps: int, forced: Mapping[str, bool]) -> str:
    options = ""
    for name, on in sorted(forced.items()):
        flag = "--loop-option" if name in LOOP_OPTIONS else "--option"
        options += f" {flag} {name}={'on' if on else 'off'}"
    return f"python3 -m tests.sim.run --loop --seed {seed} --nodes {nodes} --steps {steps}{options} -v"


class LoopSimulationError(SimulationError):
    def __init__(self, seed: int, nodes: int, steps: int, what: str, at: str, forced: Mapping[str, bool]) -> None:
        AssertionError.__init__(self)
        self.seed, self.nodes, self.steps, self.what = seed, nodes, steps, what
        self.command = replay_command(seed, nodes, steps, forced)
        self.args = (f"seed {seed}, {nodes} nodes (node loop): {what} ({at})\n  replay: {self.command}",)

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(slots=True)
class LoopResult:
    seed: int
    nodes: int
    steps: int
    options: str = ""
    ticks: int = 0
    leaders: int = 0
    crashes: int = 0
    crashes_at_io: int = 0
    lost_writes: int = 0  # writes a crash lost: not fsynced yet, or still queued for the writer thread
    partitions: int = 0
    dropped: int = 0
    proposals: int = 0
    acked: int = 0
    refused: int = 0
    reads: int = 0
    reads_answered: int = 0
    writer_saves: int = 0
    saves_overlapped: int = 0
    prepares: int = 0
    prepared_used: int = 0
    snapshots_sent: int = 0
    snapshots_installed: int = 0
    liveness_ticks: int = 0


@dataclass(frozen=True, slots=True)
class Profile:
    drop_rate: float
    dup_rate: float
    delay_units_max: int
    partition_rate: float
    crash_rate: float
    crash_io_rate: float
    restart_ticks_max: int
    propose_rate: float
    lazy_toggle_rate: float
    read_rate: float


def draw_profile(rng: random.Random, election_ticks: int) -> Profile:
    crashy = rng.random() < 0.7
    return Profile(
        drop_rate=rng.choice((0.0, 0.02, 0.1)),
        dup_rate=rng.choice((0.0, 0.05)),
        delay_units_max=rng.choice((TICK_UNITS // 2, 2 * TICK_UNITS, 5 * TICK_UNITS)),
        partition_rate=rng.choice((0.0, 0.01, 0.03)),
        crash_rate=rng.choice((0.003, 0.01)) if crashy else 0.0,
        crash_io_rate=rng.choice((0.002, 0.01)) if crashy else 0.0,
        restart_ticks_max=election_ticks * rng.choice((1, 4)),
        propose_rate=rng.choice((0.3, 0.8, 2.0)),
        lazy_toggle_rate=rng.choice((0.0, 0.05)),
        read_rate=rng.choice((0.0, 0.2, 0.6)),
    )


def draw_options(seed: int, forced: Mapping[str, bool]) -> dict[str, bool]:
    """The loop's options and the core's extensions of one seed, those in `forced` as given."""
    known = LOOP_OPTIONS + EXTENSIONS
    unknown = sorted(set(forced) - set(known))
    if unknown:
        raise ValueError(f"unknown options {unknown}; known: {', '.join(known)}")
    rng = random.Random(seed * SEED_SALT + 1)
    return {name: rng.random() < OPTION_ON_RATE for name in known} | dict(forced)


@dataclass(slots=True)
class Member:
    """One node of the cluster: its disk and snapshot directory outlive its incarnations."""

    id: int
    disk: LoopDisk
    machine: LoopMachine
    data_dir: Path
    life: Life
    node: QuorumNode | None = None
    writer: LoopWriter | None = None
    commit_seen: int = 0
    role: Role = Role.FOLLOWER


class LoopCluster:
    def __init__(
        self,
        seed: int,
        nodes: int = 3,
        steps: int = 600,
        verbose: bool = False,
        out: Callable[[str], None] | None = None,
        forced: Mapping[str, bool] | None = None,
    ) -> None:
        self.seed, self.n, self.steps = seed, nodes, steps
        self.rng = random.Random(seed)
        self.forced = dict(forced or {})
        self.options = draw_options(seed, self.forced)
        self.voters = tuple(range(1, nodes + 1))
        self.election_ticks = self.rng.randint(5, 12)
        self.profile = draw_profile(self.rng, self.election_ticks)
        self.verbose = verbose
        self.out = out or (lambda line: print(line, file=sys.stdout))
        self.inv = Invariants()
        self.result = LoopResult(seed, nodes, steps, " ".join(f"{k}={int(v)}" for k, v in self.options.items()))
        self.now = 0
        self.events = 0
        self._heap: list[tuple[int, int, int, object]] = []
        self._seq = 0
        self.blocked: frozenset[tuple[int, int]] = frozenset()
        self._partition_gen = 0
        self.lane_busy_until: dict[tuple[int, int], int] = {}
        self.chaos = True
        self._loop_error: InvariantFailure | None = None
        self._client_seq = 0
        self.clients = True
        self._reads: list[asyncio.Task[int]] = []
        self._probe_acked = False
        self._root = Path(tempfile.mkdtemp(prefix="zkraft-loop-sim-", dir=_tmp_dir()))
        self.loop = make_loop(self._on_loop_error)
        self.settings_values = self._draw_settings()
        self.members: dict[int, Member] = {}

    # ---------------------------------------------------------------- running
    def run(self) -> LoopResult:
        try:
            with structlog.testing.capture_logs() as logs:
                self._logs = logs
                self._run()
        except InvariantFailure as e:
            raise self._error(str(e)) from e
        except LoopSimulationError:
            raise
        except Exception as e:
            raise self._error(f"{type(e).__name__} raised: {e}") from e
        finally:
            for task in self._reads:
                task.cancel()
            with contextlib.suppress(Exception):
                run_until_idle(self.loop)
            self.loop.close()
            shutil.rmtree(self._root, ignore_errors=True)
        return self.result

    def _error(self, what: str) -> LoopSimulationError:
        return LoopSimulationError(
            self.seed, self.n, self.steps, what, f"event {self.events}, t={self.now}", self.forced
        )

    def _run(self) -> None:
        if self.verbose:
            self.out(f"# seed {self.seed}: options {self.options}")
            self.out(f"# settings {self.settings_values}")
            self.out(f"# profile {self.profile}")
        for i in self.voters:
            disk = LoopDisk(i, self)
            machine = LoopMachine(i, self, disk, self.rng.random() < 0.8, self.rng.random() < 0.5)
            self.members[i] = Member(i, disk, machine, self._root / f"n{i}", Life(i, 0, alive=False))
        for m in self.members.values():
            self._start(m)
        self._schedule(TICK_UNITS, _EV_TICK, None)
        while self.events < self.steps:
            self._step()
        self._liveness()

    def _step(self) -> None:
        t, _, kind, arg = heapq.heappop(self._heap)
        self.now = t
        self.events += 1
        if kind == _EV_TICK:
            self._world_tick()
        elif kind == _EV_DELIVER:
            self._deliver(*arg)  # type: ignore[misc]
        elif kind == _EV_WRITER:
            self._run_writer(*arg)  # type: ignore[misc]
        elif kind == _EV_SNAPSHOT:
            self._deliver_snapshot(*arg)  # type: ignore[misc]
        elif kind == _EV_RESTART:
            m = self.members[arg]  # type: ignore[index]
            if m.node is None:
                self._start(m)
        elif kind == _EV_HEAL and arg == self._partition_gen:
            self.blocked = frozenset()
        self._settle()

    def _schedule(self, delay: int, kind: int, arg: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay, self._seq, kind, arg))

    def _trace(self, line: str) -> None:
        self.out(f"[{self.now:>7} #{self.events:>5}] {line}")

    def _in_loop(self, fn: Callable[..., object], *args: object) -> None:
        self.loop.call_soon(fn, *args)

    def _settle(self) -> None:
        """Run every callback the event scheduled, bury the nodes that died, then check everyone."""
        run_until_idle(self.loop)
        if self._loop_error is not None:
            raise self._loop_error
        for m in self.members.values():
            if m.node is not None and (not m.life.alive or m.node._fatal is not None):  # noqa: SLF001
                self._bury(m)
        for m in self.members.values():
            self._check(m)
        if self.verbose:
            for event in self._logs:
                self._trace(f"log {event}")
            self._logs.clear()
        elif len(self._logs) > 1000:
            self._logs.clear()

    def _on_loop_error(self, exc: BaseException | None, message: str) -> None:
        if isinstance(exc, SimCrash):
            return  # a dead node's late callback touched its disk
        if isinstance(exc, InvariantFailure):
            self._loop_error = self._loop_error or exc
        elif self._loop_error is None:
            self._loop_error = fail("loop", f"{message}: {exc!r}")

    # ------------------------------------------------------------ nodes
    def _draw_settings(self) -> dict[str, object]:
        rng = self.rng
        o = self.options
        return {
            "election_timeout_ticks": self.election_ticks,
            "heartbeat_interval_ticks": rng.choice((1, 2)),
            "inflight_appends_max": rng.choice((1, 4, 64)),
            "snapshot_interval_entries": rng.choice((25, 80, 20000)),
            "snapshot_trailing_entries": rng.choice((0, 5, 50)),
            "raft_durable_notice": o["durable_notice"],
            "raft_lazy_follower_commits": o["lazy_follower_commits"],
            "raft_deferred_replication": o["deferred_replication"],
            "raft_campaign_on_leader_loss": o["campaign_on_leader_loss"],
            "loop_inline_persist_entries_max": rng.choice(INLINE_ENTRIES_ON) if o["inline_persist_entries_max"] else 0,
            "loop_apply_ahead_during_save": o["apply_ahead_during_save"],
            "loop_prepare_while_committing": o["prepare_while_committing"],
            "loop_leader_sends_before_apply": o["leader_sends_before_apply"],
            "loop_ready_in_handler": o["ready_in_handler"],
            "loop_idle_leader_inline_path": o["idle_leader_inline_path"],
        }

    def _settings(self, node_id: int) -> NodeSettings:
        peers = {i: f"127.0.0.1:{20_000 + i}" for i in self.voters}
        return NodeSettings(
            node_id=node_id,
            data_dir=self._root / f"n{node_id}",
            listen=peers[node_id],
            peers=peers,
            cluster_id="sim",
            state_machine="register",
            client_port=0,
            **self.settings_values,  # type: ignore[arg-type]
        )

    def _start(self, m: Member) -> None:
        m.life = Life(m.id, m.life.number + 1)
        m.disk.open(m.life)
        m.machine.open(m.life)
        m.writer = LoopWriter(m.id, m.life, self)
        rng = random.Random(self.rng.randrange(1 << 32))
        node = _SimNode(self._settings(m.id), m.machine, store=m.disk, writer=m.writer, rng=rng)
        m.node = node
        m.commit_seen = node.core.commit_index
        m.role = node.core.role
        transport = LoopTransport(m.id, m.life, self.voters, self)
        self._in_loop(node.start_loop, transport)
        if self.verbose:
            c = node.core
            self._trace(
                f"n{m.id} start #{m.life.number}: term {c.term} commit {c.commit_index} applied {c.applied_index}"
            )

    def _bury(self, m: Member) -> None:
        """A node that crashed: its process is gone (tasks, writer jobs, volatile state); its disk keeps
        what was durable. It restarts later."""
        node = m.node
        assert node is not None
        fatal = node._fatal  # noqa: SLF001
        if isinstance(fatal, InvariantFailure):
            raise fatal  # a check in the node's disk or state machine failed inside its loop
        if m.life.alive and not isinstance(fatal, SimCrash):
            raise fail("node failed", f"node {m.id}'s loop stopped: {fatal!r}")
        m.life.alive = False
        for task in node._tasks:  # noqa: SLF001
            task.cancel()
        run_until_idle(self.loop)
        assert m.writer is not None
        lost = len(m.disk.pending) + len(m.writer.jobs)
        self.result.lost_writes += lost
        m.node = None
        m.writer = None
        self.result.crashes += 1
        for other in self.members.values():
            # Its followers' streams to it break (PeerTransport's on_stream_broken): each may campaign at once.
            if other.node is not None and other.life.alive and other.node.core.leader_id == m.id:
                self._in_loop(other.node._on_stream_broken, m.id)  # noqa: SLF001 (the transport's report)
        if self.verbose:
            self._trace(f"n{m.id} CRASH ({fatal or 'killed'}); {lost} writes lost (not durable, or still queued)")
        delay = self.rng.randint(1, self.profile.restart_ticks_max) * TICK_UNITS if self.chaos else TICK_UNITS
        self._schedule(delay, _EV_RESTART, m.id)

    # ------------------------------------------------------- world.Faults
    def crash_at_io(self, life: Life, where: str) -> bool:
        rate = self.profile.crash_io_rate * (FSYNC_CRASH_FACTOR if where == "wait_durable" else 1)
        if not self.chaos or self.rng.random() >= rate:
            return False
        life.alive = False
        self.result.crashes_at_io += 1
        return True

    def schedule_writer(self, node_id: int, life: Life) -> None:
        self.result.writer_saves += 1
        self._schedule(self.rng.randint(0, WRITER_UNITS_MAX), _EV_WRITER, (node_id, life))

    def _run_writer(self, node_id: int, life: Life) -> None:
        m = self.members[node_id]
        if m.writer is not None and m.life is life:
            if self.verbose:
                self._trace(f"n{node_id} writer thread runs its next job ({len(m.writer.jobs)} queued)")
            m.writer.run_one()

    def durable_holders(self, index: int, term: int) -> int:
        return sum(1 for m in self.members.values() if m.disk.holds_durably(index, term))

    def check_appended(self, node_id: int, entries: tuple[Entry, ...], prev_term: int | None) -> None:
        self.inv.check_appended(node_id, entries, prev_term)

    def check_apply(self, node_id: int, e: Entry) -> None:
        """`node_id` applies `e`: committed (as far as any leader revealed, or by a quorum of disks)."""
        m = self.members[node_id]
        if m.node is not None:
            self._check_commit(m)
        committed = self.inv.committed
        if e.index > len(committed) or committed[e.index - 1] != e.term:
            raise fail("apply committed", f"node {node_id} applies ({e.index}, term {e.term}) not known committed")
        if self.durable_holders(e.index, e.term) < len(self.voters) // 2 + 1:
            raise fail("apply committed", f"node {node_id} applies ({e.index}, term {e.term}) not on a quorum of disks")
        self.inv.check_apply(node_id, e)

    def lane_idle(self, frm: int, to: int) -> bool:
        return self.lane_busy_until.get((frm, to), 0) <= self.now

    def send(self, life: Life, messages: Sequence[Message]) -> None:
        """One send of the node: a batch per peer and stream, as PeerTransport sends a RaftBatch (DURABLE
        notices on a stream of their own, quorum.transport.NOTICE_TYPES); snapshots stream apart."""
        batches: dict[tuple[int, bool], list[Message]] = {}
        for msg in messages:
            self.lane_busy_until[(msg.frm, msg.to)] = self.now + self.rng.randint(0, LANE_BUSY_UNITS_MAX)
            if msg.type is MessageType.SNAPSHOT:
                self._send_snapshot(life, msg)
            else:
                batches.setdefault((msg.to, msg.type in NOTICE_TYPES), []).append(msg)
        for batch in batches.values():
            self._send_batch(tuple(batch))

    def _send_batch(self, batch: tuple[Message, ...]) -> None:
        prof = self.profile
        first = batch[0]
        if self.chaos and ((first.frm, first.to) in self.blocked or self.rng.random() < prof.drop_rate):
            self.result.dropped += len(batch)
            return
        copies = 2 if self.chaos and self.rng.random() < prof.dup_rate else 1
        for _ in range(copies):
            self._schedule(self.rng.randint(1, prof.delay_units_max), _EV_DELIVER, (batch,))

    def _deliver(self, batch: tuple[Message, ...]) -> None:
        m = self.members[batch[0].to]
        if self.verbose:
            for msg in batch:
                self._trace(f"n{msg.frm} -> n{msg.to} {_show(msg)}")
        if m.node is not None and m.life.alive:
            self._in_loop(m.node.deliver, list(batch))

    def _send_snapshot(self, life: Life, msg: Message) -> None:
        """The sender streams its snapshot file; the receiver stores it, then steps the message."""
        meta = msg.snapshot
        assert meta is not None
        sender = self.members[msg.frm]
        assert sender.node is not None
        data = b"".join(sender.node.snapshot_store().read_chunks(meta))
        ok = not (self.chaos and ((msg.frm, msg.to) in self.blocked or self.rng.random() < self.profile.drop_rate))
        self.result.snapshots_sent += 1
        self._schedule(self.rng.randint(1, self.profile.delay_units_max), _EV_SNAPSHOT, (life, msg, data, ok))

    def _deliver_snapshot(self, life: Life, msg: Message, data: bytes, ok: bool) -> None:
        receiver = self.members[msg.to]
        ok = ok and receiver.node is not None and receiver.life.alive
        if ok:
            assert receiver.node is not None and msg.snapshot is not None
            self._store_snapshot(receiver.node, msg.snapshot, data)
            self.result.snapshots_installed += 1
            self._in_loop(receiver.node.deliver, [msg])
        sender = self.members[msg.frm]
        if sender.node is not None and sender.life is life:
            self._in_loop(sender.node._on_snapshot_done, msg.to, ok)  # noqa: SLF001 (the transport's report)

    @staticmethod
    def _store_snapshot(node: QuorumNode, meta: SnapshotMeta, data: bytes) -> None:
        writer = node.snapshot_store().create(meta)
        writer.write(data)
        writer.commit()

    # ------------------------------------------------------------ the world's tick
    def _world_tick(self) -> None:
        self.result.ticks += 1
        self._schedule(TICK_UNITS, _EV_TICK, None)
        live = [m for m in self.members.values() if m.node is not None and m.life.alive]
        self.rng.shuffle(live)
        for m in live:
            assert m.node is not None
            self._in_loop(m.node.tick)
            if self.profile.lazy_toggle_rate and self.rng.random() < self.profile.lazy_toggle_rate:
                self._in_loop(m.node.set_commit_interest, self.rng.random() < 0.5)
        if self.chaos:
            self._faults(live)
        if self.clients:
            self._workload(live)

    def _faults(self, live: list[Member]) -> None:
        prof = self.profile
        if live and self.rng.random() < prof.crash_rate:
            victim = self.rng.choice(live)
            victim.life.alive = False  # killed between events: buried once the callbacks ran
        if not self.blocked and self.rng.random() < prof.partition_rate:
            self._partition()

    def _partition(self) -> None:
        side = set(self.rng.sample(self.voters, self.rng.randint(1, len(self.voters) // 2)))
        one_way = self.rng.random() < 0.3
        pairs = {(a, b) for a in self.voters for b in self.voters if a != b and (a in side) != (b in side)}
        if one_way:
            pairs = {(a, b) for a, b in pairs if a in side}
        self.blocked = frozenset(pairs)
        self._partition_gen += 1
        self.result.partitions += 1
        self._schedule(self.rng.randint(2, 4 * self.election_ticks) * TICK_UNITS, _EV_HEAL, self._partition_gen)
        if self.verbose:
            self._trace(f"partition {sorted(side)} {'one-way' if one_way else ''}")

    def _workload(self, live: list[Member]) -> None:
        proposals = int(self.profile.propose_rate) + (self.rng.random() < self.profile.propose_rate % 1)
        for _ in range(proposals):
            if not live:
                return
            leaders = [m for m in live if m.node is not None and m.node.core.role is Role.LEADER]
            target = self.rng.choice(leaders if leaders and self.rng.random() < 0.9 else live)
            size = 1 if self.rng.random() < 0.6 else self.rng.randint(2, PROPOSAL_COMMANDS_MAX)
            commands = []
            for _ in range(size):
                self._client_seq += 1
                commands.append(f"c{self._client_seq}".encode())
            self._in_loop(self._propose, target, target.life, commands)
        if live and self.rng.random() < self.profile.read_rate:
            reader = self.rng.choice(live)
            self._in_loop(self._read, reader, reader.life)

    def _read(self, m: Member, life: Life) -> None:
        """A linearizable read's ReadIndex round (QuorumNode.read_index): the index it returns must cover
        every entry known committed when it was issued (Raft §6.4)."""
        if m.node is None or m.life is not life or not life.alive:
            return
        bound = max(len(self.inv.applied), len(self.inv.committed))
        self.result.reads += 1
        task = self.loop.create_task(m.node.read_index(READ_TIMEOUT_S))
        task.add_done_callback(lambda t: self._read_answered(m, life, bound, t))
        self._reads.append(task)

    def _read_answered(self, m: Member, life: Life, bound: int, task: asyncio.Task[int]) -> None:
        if task.cancelled() or task.exception() is not None or not life.alive:
            return
        index = task.result()
        if index < bound:
            raise fail("linearizable read", f"node {m.id} answered a read at {index}, {bound} was committed before")
        self.result.reads_answered += 1

    def _propose(self, m: Member, life: Life, commands: list[bytes]) -> None:
        if m.node is None or m.life is not life or not life.alive:
            return
        self.result.proposals += 1
        try:
            future = m.node.propose_nowait(commands)
        except errors.QuorumError as exc:
            self.result.refused += 1
            if self.verbose:
                self._trace(f"n{m.id} refuses {len(commands)} commands: {type(exc).__name__}")
            return
        if self.verbose:
            self._trace(f"n{m.id} takes {len(commands)} commands {commands[0]!r}..")
        future.add_done_callback(lambda f: self._answered(m, life, commands, f))

    def _answered(
        self, m: Member, life: Life, commands: list[bytes], future: asyncio.Future[list[tuple[int, bytes]]]
    ) -> None:
        """The client hears its answer: each entry must be applied, on this node, with its command."""
        if future.cancelled() or future.exception() is not None or not life.alive:
            return
        entries = m.machine.entries
        for (index, result), command in zip(future.result(), commands, strict=True):
            if index > len(entries) or entries[index - 1].data != command:
                raise fail("acked after apply", f"node {m.id} answered {command!r} at {index} before applying it")
            if result != str(index).encode():
                raise fail("acked after apply", f"node {m.id} answered {command!r} with result {result!r}")
            self.inv.ack(entries[index - 1])
            self.result.acked += 1
            if self.verbose:
                self._trace(f"n{m.id} answers {command!r}: applied at {index}")
            self._probe_acked |= command == PROBE

    # ------------------------------------------------------------- checks
    def _check(self, m: Member) -> None:
        node = m.node
        if node is None or not m.life.alive:
            return
        core = node.core
        if core.commit_index < m.commit_seen:
            raise fail("commit monotonic", f"node {m.id} commit index went {m.commit_seen} -> {core.commit_index}")
        m.commit_seen = core.commit_index
        if core.role is not m.role:
            if self.verbose:
                self._trace(f"n{m.id} {m.role.value} -> {core.role.value} term {core.term}")
            m.role = core.role
        if core.role is Role.LEADER and self.inv.check_leader(m.id, core.term):
            self.result.leaders += 1
            self.inv.check_new_leader(core)
        self._check_commit(m)
        if core.applied_index != m.machine.applied_index() and not node._in_ready:  # noqa: SLF001
            raise fail("apply", f"node {m.id}: core applied {core.applied_index}, machine {m.machine.applied_index()}")

    def _check_commit(self, m: Member) -> None:
        assert m.node is not None
        core = m.node.core
        newly = self.inv.check_commit(core, self._durable_on_quorum)
        if newly is not None:
            for other in self.members.values():
                oc = other.node.core if other.node is not None else None
                if oc is not None and oc is not core and oc.role is Role.LEADER:
                    self.inv.check_leader_holds(oc, newly[0], newly[1], core.term)

    def _durable_on_quorum(self, index: int, term: int) -> bool:
        return sum(1 for m in self.members.values() if m.disk.durable.term(index) == term) >= len(self.voters) // 2 + 1

    # ------------------------------------------------------------- liveness
    def _liveness(self) -> None:
        """Faults stop; within a bounded time a leader has a fresh proposal applied and every node converges."""
        self.chaos = False
        self.clients = False
        self.blocked = frozenset()
        for m in self.members.values():
            if m.node is None:
                self._start(m)
        self._settle()
        for m in self.members.values():
            assert m.node is not None
            self._in_loop(m.node.set_commit_interest, True)
        start_ticks = self.result.ticks
        probe_at = -1
        while self.result.ticks - start_ticks < LIVENESS_TICKS_MAX:
            self._step()
            if self._probe_acked:
                if self._converged():
                    self.result.liveness_ticks = self.result.ticks - start_ticks
                    self._count_loop_work()
                    self.inv.check_final({i: m.machine.entries for i, m in self.members.items()})
                    return
            elif self.result.ticks >= probe_at + self.election_ticks:
                leaders = [m for m in self.members.values() if m.node is not None and m.node.core.role is Role.LEADER]
                if leaders:
                    probe_at = self.result.ticks
                    self._in_loop(self._propose, leaders[0], leaders[0].life, [PROBE])
                    self._settle()
        applied = {i: m.machine.applied_index() for i, m in self.members.items()}
        probe = "acknowledged" if self._probe_acked else "not acknowledged"
        quiet = f"{LIVENESS_TICKS_MAX} quiet ticks"
        raise fail("liveness", f"not converged after {quiet} (probe {probe}); applied {applied}")

    def _count_loop_work(self) -> None:
        for m in self.members.values():
            self.result.saves_overlapped += m.disk.saves_begun
            self.result.prepares += m.machine.prepares
            self.result.prepared_used += m.machine.prepared_used

    def _converged(self) -> bool:
        tops = {m.machine.applied_index() for m in self.members.values()}
        if len(tops) != 1:
            return False
        top = tops.pop()
        return all(m.node is not None and m.node.core.commit_index == top for m in self.members.values())


def _show(msg: Message) -> str:
    text = f"{msg.type.name} term {msg.term} index {msg.index} commit {msg.commit}"
    if msg.entries:
        text += f" entries {msg.entries[0].index}..{msg.entries[-1].index}"
    return text + (" reject" if msg.reject else "")


class _SimNode(QuorumNode):
    """The node as production runs it, but a node of the simulation never fetches a peer's state over
    the network at start-up (quorum.state_fetch): its snapshots and log always suffice, and needing
    one would be a finding."""

    def _fetch_peer_state(self, min_index: int) -> tuple[SnapshotMeta, int]:
        raise fail("restart", f"node {self.node_id} needs a peer's state from {min_index} at start-up")


def _tmp_dir() -> str | None:
    """Snapshot files go to a memory file system when there is one (an fsync there costs nothing)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def run_loop_seed(
    seed: int, nodes: int = 3, steps: int = 600, verbose: bool = False, forced: Mapping[str, bool] | None = None
) -> LoopResult:
    return LoopCluster(seed, nodes, steps, verbose=verbose, forced=forced).run()
