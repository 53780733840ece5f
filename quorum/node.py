"""The node runner: drives the pure Raft core with real storage, network, clock and state machine.

One Ready loop (STYLE 3, etcd's: persist, send, apply, advance): every Ready
goes through `QuorumNode._handle_ready`, whose docstring lists its steps.
Handlers on the same event loop step the core and wake the loop's task;
proposals that arrive during an fsync join the next Ready, so load turns into
larger batches, not more fsyncs (group commit). Storage only stores
(quorum.log_store): where the loop's work overlaps a save, the loop does it
between the save's write and its fsync (LogStore.begin_save).

Each departure from the plain loop is a named option with one place in it
(quorum.loop_options.LoopOptions, from NodeSettings' loop_* fields): where a
Ready is handled (the loop's task; a follower's peer handler; an idle
leader's proposer), where its save runs (this thread, or the writer thread
for large ones, so the loop keeps serving while it syncs), and when the state
machine works ahead (during a save, while a commit is under way). The
protocol's own extensions are RaftConfig options (quorum.raft.core).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import itertools
import random
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from quorum import errors
from quorum.address_book import encode_addresses, member_addresses, members_string, parse_members
from quorum.deadline import await_owned
from quorum.join import JoinAnswer
from quorum.latency_metrics import proposal_applied
from quorum.lmdb_log_store import LmdbLogStore, TailCut
from quorum.log_store import LogStore
from quorum.raft import (
    SENDABLE_BEFORE_PERSIST,
    Entry,
    InvariantViolation,
    Message,
    PersistentState,
    Raft,
    RaftConfig,
    Ready,
    Role,
    SnapshotMeta,
    SoftState,
)
from quorum.raft import NotLeaderError as CoreNotLeader
from quorum.raft import ProposalDroppedError as CoreDropped
from quorum.raft.core import decode_membership, membership_of
from quorum.raft.errors import invariant
from quorum.raft.membership import ChangeKind, ConfChange, ConfChangeError
from quorum.raft.recovery import Recovery, RecoveryError, reconcile
from quorum.raft.types import EntryKind
from quorum.settings import NodeSettings, parse_host_port, parse_peers, peers_string
from quorum.snapshot_store import SnapshotStore, SnapshotWriter
from quorum.state_check import StateMachineDamagedError
from quorum.state_fetch import fetch_peer_state
from quorum.state_machine import RegisterMap, StateMachine
from quorum.state_restore import restore_base
from quorum.transport import PeerTransport, peers_digest
from runtime.cpu_placement import LoopPlacement

SNAPSHOTS_KEPT = 2
# At most this many entries are applied ahead of their commit (_prepare_ahead): a sequential
# writer's one entry, a few concurrent ones; not the runs of a loaded pipeline.
PREPARE_AHEAD_ENTRIES_MAX = 8
# At most this many bytes of entries are applied during a follower's save (_prepares_during_save): the
# apply must fit in what the disk takes anyway, or the acknowledgement the leader waits for is late.
PREPARE_DURING_SAVE_BYTES_MAX = 4096
# Snapshots by bytes come no sooner than the last snapshot's size was applied, but at least every this
# many snapshot.interval.bytes (QuorumNode._snapshot_due): the Raft log's memory stays under 4 x 64 MiB.
SNAPSHOT_INTERVAL_STRETCH_MAX = 4
# The earliest point of its interval a snapshot may be taken at (_roll_snapshot_scale; ZooKeeper rolls half).
SNAPSHOT_ROLL_FLOOR = 0.5


class _Apply(enum.Enum):
    """When a Ready's committed entries that earlier Readies made durable are applied (_durable_apply_timing)."""

    BEFORE_SAVE = "before"
    DURING_SAVE = "during"
    AFTER_SAVE = "after"


class _Batch:
    """The proposals of one propose_many call: one future, resolved when the last is applied."""

    __slots__ = ("first_index", "results", "remaining", "future", "proposed_ns")

    def __init__(self, first_index: int, size: int, future: asyncio.Future[list[tuple[int, bytes]]]) -> None:
        self.first_index = first_index
        self.results: list[tuple[int, bytes]] = [(0, b"")] * size
        self.remaining = size
        self.future = future
        self.proposed_ns = 0  # quorum.latency_metrics: when appended to the leader's log, if timed

    def complete(self, index: int, result: bytes) -> None:
        self.results[index - self.first_index] = (index, result)
        self.remaining -= 1
        if self.remaining == 0 and not self.future.done():
            self.future.set_result(self.results)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class _PrefixBatch(_Batch):
    """Proposals whose outcome is wanted entry by entry (propose_prefix_nowait): the future resolves
    with the results of the entries applied, in log order, and the error that ended the rest (None
    when every entry was applied)."""

    __slots__ = ()

    def complete(self, index: int, result: bytes) -> None:
        if self.future.done():
            return
        self.results[index - self.first_index] = (index, result)
        self.remaining -= 1
        if self.remaining == 0:
            self.future.set_result((self.results, None))  # type: ignore[arg-type]

    def fail(self, exc: BaseException) -> None:
        # Entries are applied in log order, so the ones applied so far are a prefix of the batch.
        if not self.future.done():
            done = len(self.results) - self.remaining
            self.future.set_result((self.results[:done], exc))  # type: ignore[arg-type]


@dataclass(slots=True)
class _Waiter:
    term: int
    batch: _Batch


class NodeLogStore(LogStore, Protocol):
    """The log store as the node uses it (quorum.log_store's contract, plus what start-up reads)."""

    tail_cuts: list[TailCut]  # damaged tails cut at open (quorum.raft.recovery reconciles them)

    def identity(self) -> tuple[str, str] | None: ...

    def set_identity(self, cluster_id: str, peers: str) -> None: ...


class NodeTransport(Protocol):
    """What the loop asks of the peer transport (quorum.transport.PeerTransport; the simulator's twin)."""

    def send(self, messages: Sequence[Message]) -> bool: ...

    def streams_idle(self) -> bool: ...

    def heard_from(self, peer: int) -> None: ...

    def set_peers(self, peers: dict[int, str]) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class NodeStatus:
    node_id: int
    address: str
    role: str
    term: int
    leader: int
    leader_address: str
    commit_index: int
    applied_index: int
    last_index: int
    first_index: int
    snapshot_index: int
    followers: tuple[tuple[int, int, int, str], ...]  # (id, match, next, state)
    cluster_id: str
    leader_changes: int = 0  # times this node saw a new leader (raft_leader_changes_total)
    # The configuration in use (quorum.raft.membership) and every member's address, "1=h:p,...".
    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()
    observers: tuple[int, ...] = ()
    config_index: int = 0
    members: str = ""


class QuorumNode:
    def __init__(
        self,
        settings: NodeSettings,
        state_machine: StateMachine | None = None,
        *,
        store: NodeLogStore | None = None,
        writer: Executor | None = None,
        snapshot_writer: Executor | None = None,
        rng: random.Random | None = None,
        joined: JoinAnswer | None = None,
    ) -> None:
        """`store` and `writer` (the thread that saves large Readies) default to the LMDB log store in
        the data dir and a thread of our own, `snapshot_writer` (the thread that writes snapshots while the
        loop goes on) to `writer` when one is passed, else to another thread of our own, `rng` (the core's
        election timeouts) to a fresh one; the simulator (tests/sim/node_loop.py) passes in-memory twins,
        its writer and a seeded generator."""
        self.settings = settings
        self.node_id = settings.node_id
        self.log = structlog.get_logger("quorum").bind(node=settings.node_id)
        data_dir = Path(settings.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        self._store: NodeLogStore = store if store is not None else LmdbLogStore(data_dir / "raft", logger=self.log)
        # The peer list the cluster started with (the data dir's identity, or what a join learned): its
        # digest names the cluster on the wire, its ids are the first configuration (quorum.address_book).
        self._joined = joined
        self._bootstrap = self._bootstrap_peers()
        self._digest = (
            self._joined.digest
            if self._joined is not None
            else peers_digest(settings.cluster_id, peers_string(self._bootstrap))
        )
        self._snapshots = SnapshotStore(data_dir / "snapshots", logger=self.log)
        self.state_machine: StateMachine = state_machine or RegisterMap(data_dir / "state", log=self.log)
        try:
            state = self._open_state_machine(self._store.load())
            state = self._reconcile_log_with_applied_state(state)
        except errors.StartupError:
            self._store.close()
            if state_machine is None:  # ours to close; the caller closes one it passed
                self.state_machine.close()
            raise
        config = RaftConfig(
            node_id=settings.node_id,
            voters=tuple(sorted(self._bootstrap)),
            election_timeout_ticks=settings.election_timeout_ticks,
            heartbeat_interval_ticks=settings.heartbeat_interval_ticks,
            inflight_appends_max=settings.inflight_appends_max,
            durable_notice=settings.raft_durable_notice,
            lazy_follower_commits=settings.raft_lazy_follower_commits,
            deferred_replication=settings.raft_deferred_replication,
            campaign_on_leader_loss=settings.raft_campaign_on_leader_loss,
        )
        rng = rng or random.Random()
        self.core = Raft(config, state, rng, applied=self.state_machine.applied_index())
        self._last_snapshot_index = state.snapshot.index if state.snapshot else 0
        self._log_incomplete = self.core.log_incomplete  # logged once when it ends (_note_log_repaired)
        self._applied_bytes_since_snapshot = 0  # entry data applied since: the log holds it in memory
        self._last_snapshot_bytes = 0
        # Its own sequence per node (and the same on every run, for the simulator), apart from the core's.
        self._snapshot_rng = random.Random(settings.node_id)
        self._snapshot_scale = self._roll_snapshot_scale()
        self._soft = SoftState(self.core.role, self.core.leader_id)
        self._config_index_seen = self.core.config_index
        self._addresses = self._member_addresses()
        self._note_stored_configuration()
        self.role_since_s = time.monotonic()  # when this node took its current role (mntr's zk_leader_uptime)
        self.leader_changes = 0  # a new leader seen (not counting "none"): raft_leader_changes_total
        self._writer = writer or ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"raft-writer-{self.node_id}")
        # Its own thread, so that a save never waits behind a snapshot being written (_begin_snapshot).
        self._snapshot_writer = (
            snapshot_writer
            or writer
            or ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"raft-snapshot-{self.node_id}")
        )
        self._snapshot_writing: asyncio.Task[None] | None = None  # a snapshot being written (_begin_snapshot)
        self._snapshot_written: tuple[SnapshotMeta, int] | None = None  # written, its log not compacted yet
        self._placement = LoopPlacement.for_node(
            settings.cpu_placement,
            settings.cluster_id,
            (parse_host_port(address, "peers")[0] for address in settings.peers.values()),
        )
        self._transport: NodeTransport | None = None
        self._wakeup: asyncio.Event | None = None
        self._waiters: dict[int, _Waiter] = {}
        # Proposals are timed (quorum.latency_metrics) only when /metrics publishes them: off, no clock is read.
        self._times_proposals = bool(settings.metrics_port)
        self._committed_seen_ns = 0  # when the Ready being handled, with committed entries, was taken
        # ReadIndex contexts unique across this node's incarnations, as etcd's request ids are (idutil.Generator
        # prefixes them with the member id and the start time): the answer to a read of an earlier incarnation,
        # still queued at the leader when this one starts, must not answer a read of this one with its older index.
        self._read_ctx_prefix = f"{self.node_id}:{rng.getrandbits(64):016x}:"
        self._read_ctx_seq = itertools.count(1)
        self._open_read: tuple[bytes, asyncio.Future[int]] | None = None
        self._reads_in_flight: dict[bytes, asyncio.Future[int]] = {}
        self._applied_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._applied_seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._in_ready = False  # a Ready is being handled (by the ready task or in place)
        self._queued_early = False  # some of the last Ready's early messages wait behind a write in flight
        # Whether the state machine applies entries ahead of their commit (StateMachine.prepare).
        self._prepares_ahead = self.state_machine.prepares_ahead
        self._loop_options = settings.loop
        self._stopping = False
        self._fatal: BaseException | None = None
        self._stopped: asyncio.Event | None = None
        # Resolved at this node's next change of role or leader (leadership_changed), then replaced.
        self._leadership_notice: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- startup
    def _reconcile_log_with_applied_state(self, state: PersistentState) -> PersistentState:
        """Start from whatever the disk still holds (quorum.raft.recovery): when the log lost entries the
        state machine applied (a damaged write-ahead log tail was cut), the applied point becomes the
        snapshot base, snapshotted here so that this node can serve InstallSnapshot; a hard state a cut
        may have outdated is raised. Persisted before the core starts from it."""
        sm = self.state_machine
        try:
            recovery = reconcile(
                state,
                sm.applied_index(),
                sm.applied_term(),
                tuple(sorted(self._bootstrap)),
                self.node_id,
                cut=bool(self._store.tail_cuts),
            )
        except RecoveryError as exc:
            raise errors.StartupError(
                f"{exc}; move the state machine's directory in {self.settings.data_dir} aside "
                "so that this node rebuilds it from its log and the leader"
            ) from None
        if recovery.rebase is not None:
            self._snapshot_state_machine_now(recovery.rebase)
        if recovery.rebase is not None or recovery.hard_state_changed:
            entries = recovery.state.entries if recovery.rebase is not None else ()
            self._store.save(recovery.state.hard_state, entries, recovery.rebase, sync=True)
        if recovery.rebase is not None or recovery.hard_state_changed:
            self._log_recovery(state, recovery)
        return recovery.state

    def _snapshot_state_machine_now(self, meta: SnapshotMeta) -> None:
        """A snapshot of the state machine at `meta` (its applied point), durable, with its state synced
        (the log forgets the entries before it next)."""
        self._write_snapshot_file(self._snapshots.create(meta), self.state_machine.snapshot_chunks())
        self._snapshots.prune(SNAPSHOTS_KEPT)

    def _log_recovery(self, before: PersistentState, recovery: Recovery) -> None:
        after = recovery.state
        last_before = before.entries[-1].index if before.entries else before.compacted_index
        self.log.warning(
            "log_recovered_from_applied_state",
            snapshot_base=recovery.rebase.index if recovery.rebase else None,
            snapshot_base_term=recovery.rebase.term if recovery.rebase else None,
            log_end_before=last_before,
            log_end=after.entries[-1].index if after.entries else after.compacted_index,
            entries_kept_after_base=len(after.entries) if recovery.rebase else None,
            term_before=before.hard_state.term,
            term=after.hard_state.term,
            vote_before=before.hard_state.vote,
            vote=after.hard_state.vote,
            commit_before=before.hard_state.commit,
            commit=after.hard_state.commit,
            repair_index=after.repair_index,
            tail_cuts=len(self._store.tail_cuts),
        )

    def _bootstrap_peers(self) -> dict[int, str]:
        """The peer list the cluster started with: the data dir's (whatever this start's --peers says: the
        configuration since is in the log), else a join's answer, else this start's --peers."""
        s = self.settings
        stored = self._store.identity()
        if stored is None:
            if s.join and self._joined is None:
                raise errors.StartupError(f"cannot join: no node of the cluster answered at {s.join}")
            return parse_peers(self._joined.peers) if self._joined is not None else dict(s.peers)
        cluster_id, peers = stored
        if cluster_id != s.cluster_id:
            raise errors.ClusterMismatchError(
                f"data dir {s.data_dir} belongs to cluster '{cluster_id}', not '{s.cluster_id}'"
            )
        self._joined = None  # a restart: the data dir knows the cluster
        return parse_peers(peers)

    def _note_stored_configuration(self) -> None:
        """One line when this start's --peers is not the configuration the node uses (it takes the stored one)."""
        s = self.settings
        m = self.core.membership
        if s.join or self._store.identity() is None:
            return
        given = dict(s.peers)
        if given != {k: v for k, v in self._addresses.items() if k in m.voters} and given != self._bootstrap:
            self.log.warning(
                "stored_configuration_used",
                given_peers=s.peers_string,
                voters=list(m.voters),
                learners=list(m.learners),
                observers=list(m.observers),
                config_index=self.core.config_index,
            )

    def _member_addresses(self) -> dict[int, str]:
        known = dict(self.settings.peers)
        if self._joined is not None:
            known.update(parse_members(self._joined.members))
        book = member_addresses(self.core.membership, self._bootstrap, known)
        book[self.node_id] = self.settings.advertised_address
        return book

    def _membership_changed(self) -> None:
        """A configuration entry was appended or cut, or a snapshot brought one: reach the new members, stop
        sending to the removed ones, say so once."""
        self._config_index_seen = self.core.config_index
        m = self.core.membership
        self._addresses = self._member_addresses()
        if self._transport is not None:
            self._transport.set_peers(self._addresses)
        role = m.role_of(self.node_id)
        self.log.info(
            "membership_changed",
            voters=list(m.voters),
            learners=list(m.learners),
            observers=list(m.observers),
            config_index=self.core.config_index,
            member_role=role.value if role is not None else "removed",
        )

    def _open_state_machine(self, state: PersistentState) -> PersistentState:
        """A state machine behind the log's compaction point restored first: its database was damaged and
        reopened empty, or the crash came before a leader's snapshot was installed (quorum.state_restore).

        Returns the log state the core starts from (its snapshot, or the whole log, replaced by the base)."""
        self._stored_members = self._members_in(state)
        return restore_base(state, self.state_machine, self._store, self._snapshots, self._fetch_peer_state, self.log)

    def _members_in(self, state: PersistentState) -> dict[int, str]:
        """Every member of the configuration the stored log ends with (its last CONFIG entry, else its snapshot's;
        a start-up --peers may be stale) and its address; the start-up peer list while there is none."""
        configs = (e for e in reversed(state.entries) if e.kind is EntryKind.CONFIG)
        membership = next((decode_membership(e.data) for e in configs), None)
        if membership is None and state.snapshot is not None and state.snapshot.config_index:
            membership = membership_of(state.snapshot)
        if membership is None:
            return dict(self._bootstrap)
        known = dict(self.settings.peers)
        if self._joined is not None:
            known.update(parse_members(self._joined.members))
        return member_addresses(membership, self._bootstrap, known)

    def _fetch_peer_state(self, min_index: int) -> tuple[SnapshotMeta, int]:
        members = self._stored_members
        return fetch_peer_state(self.settings, self._digest, min_index, self._snapshots, self.log, members)

    async def start(self) -> None:
        if self._store.identity() is None:
            self._store.set_identity(self.settings.cluster_id, peers_string(self._bootstrap))
        loop = asyncio.get_running_loop()
        if self._placement is not None:
            # The writer's thread is started first, so that it does not inherit the loop thread's CPUs.
            await loop.run_in_executor(self._writer, lambda: None)
            self._place()
        transport = PeerTransport(
            self.node_id,
            self._addresses,
            self.settings.cluster_id,
            self._digest,
            self._snapshots,
            on_unreachable=self._on_unreachable,
            on_snapshot_done=self._on_snapshot_done,
            log=self.log,
            tls=self.settings.peer_tls,
            on_stream_broken=self._on_stream_broken,
        )
        transport.start()
        self.start_loop(transport)
        self._tasks.append(loop.create_task(self._ticker(), name="raft-ticker"))
        self.log.info(
            "node_started",
            term=self.core.term,
            last_index=self.core.last_index,
            commit=self.core.commit_index,
            applied=self.core.applied_index,
            peers=peers_string(self._addresses),
            voters=list(self.core.membership.voters),
            learners=list(self.core.membership.learners),
            observers=list(self.core.membership.observers),
        )

    def start_loop(self, transport: NodeTransport) -> None:
        """Start the loop's task, sending through `transport`. start() adds the real transport and the
        ticker; the simulator (tests/sim/node_loop.py) passes its own and calls tick() itself."""
        self._wakeup = asyncio.Event()
        self._stopped = asyncio.Event()
        self._transport = transport
        self._tasks.append(asyncio.get_running_loop().create_task(self._ready_loop(), name="raft-ready"))

    @property
    def cluster_id(self) -> str:
        return self.settings.cluster_id

    @property
    def digest(self) -> str:
        return self._digest

    def address_of(self, node_id: int) -> str:
        return self._addresses.get(node_id) or self._bootstrap.get(node_id, "")

    @property
    def bootstrap_peers(self) -> str:
        """The peer list the cluster started with, "1=h:p,..." (its digest names the cluster on the wire)."""
        return peers_string(self._bootstrap)

    @property
    def addresses(self) -> dict[int, str]:
        """host:port of every member of the current configuration (quorum.address_book)."""
        return dict(self._addresses)

    # -------------------------------------------------------------- the loops
    async def _ticker(self) -> None:
        interval_s = self.settings.tick_ms / 1000
        next_at = time.monotonic()
        while not self._stopping:
            next_at += interval_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            if time.monotonic() - next_at > 10 * interval_s:
                next_at = time.monotonic()  # we were starved; don't fire a burst of ticks
            self.tick()

    def tick(self) -> None:
        """One Raft tick (the ticker's every tick_ms; the simulator's on its virtual clock)."""
        self._guard(self.core.tick)
        self._wake()

    async def _ready_loop(self) -> None:
        """The loop's task: woken by the ticker, proposals, messages and reads, it handles each Ready no
        handler took on the spot (_handle_ready_here), then begins a snapshot when one is due, and
        compacts the log behind one that has been written."""
        assert self._wakeup is not None
        try:
            while not self._stopping:
                await self._wakeup.wait()
                self._wakeup.clear()
                self._in_ready = True
                try:
                    self._issue_reads()
                    while self.core.has_ready() and not self._stopping:
                        await self._handle_ready(self.core.ready(), in_task=True)
                        self._issue_reads()
                    if self._snapshot_written is not None:
                        await self._finish_snapshot()
                    elif self._snapshot_due():
                        self._begin_snapshot()
                finally:
                    self._in_ready = False
        except Exception as exc:  # loop boundary: the node cannot go on safely
            self._die(exc)

    async def _handle_ready(self, rd: Ready, in_task: bool) -> None:
        """One Ready, in etcd's order (etcd-io/raft doc.go, rawnode.go): persist, send, apply, advance.

        The one place every Ready goes through, whoever took it: the loop's task (`in_task`), a peer
        handler (_handle_ready_here) or a proposer (_handle_proposal_here). It waits only for a save in
        the writer thread, a snapshot's install and the task's own yields, none of which a Ready taken
        in a handler has (_handle_ready_inline). Its steps:

        1. send what may leave before the persist (SENDABLE_BEFORE_PERSIST: the leader's appends, so
           that its followers persist in parallel with it; Raft §10.2.1);
        2. apply the committed entries earlier Readies made durable, before, during or after this
           Ready's save (_durable_apply_timing);
        3. persist: on this thread, overlapped with the state machine's work where there is some
           (_persist_inline, LogStore.begin_save), or in the writer thread for a snapshot or more than
           LoopOptions.inline_persist_entries_max entries, the loop working meanwhile; then the leader's
           DURABLE notices (RaftConfig.durable_notice);
        4. install a snapshot; send the rest (a follower's acknowledgement promises its disk holds the
           entries, so it leaves only now);
        5. apply the remaining committed entries, answer reads, advance (_finish_ready).
        """
        if self._times_proposals and self._waiters and rd.committed_entries:
            self._committed_seen_ns = time.perf_counter_ns()  # quorum.latency_metrics: a proposal's commit
        in_writer = self._persists_in_writer(rd)
        timing = self._durable_apply_timing(rd, in_writer, in_task)
        sent_early = self._send_early(rd)
        applied = self._apply_durable(rd) if timing is _Apply.BEFORE_SAVE else 0
        if in_writer:
            applied += await self._persist_in_writer(rd, sent_early, timing is _Apply.DURING_SAVE)
        else:
            if in_task and rd.entries and self._queued_early:
                # One loop turn first, so that appends queued behind a write still in flight (an idle
                # stream takes them at once: transport._Lane) reach gRPC before this Ready's fsync.
                await asyncio.sleep(0)
            applied += self._persist_inline(rd, timing is _Apply.DURING_SAVE)
        if rd.snapshot is not None:
            await self._install_snapshot(rd.snapshot)
        if self._send_late(rd) and in_writer and applied < len(rd.committed_entries):
            await asyncio.sleep(0)  # the acknowledgement leaves before a long apply
        self._finish_ready(rd, applied)

    def _handle_ready_inline(self, rd: Ready) -> None:
        """Run _handle_ready to its end in the calling handler. A Ready that persists on this thread
        without a snapshot never waits; one that would is a bug, and the node stops."""
        steps = self._handle_ready(rd, in_task=False)
        try:
            steps.send(None)
        except StopIteration:
            return
        steps.close()
        invariant(False, "a Ready handled in a handler had to wait")

    def _handle_ready_here(self) -> None:
        """Handle Readies on the spot, in the peer handler that stepped the core (LoopOptions.ready_in_handler).

        A follower's append is on every write's critical path: receive,
        persist, acknowledge. Waking the loop's task and handing the fsync to
        the writer thread and back cost three loop/thread hand-offs, more than
        the fsync of a small batch. So a Ready without a snapshot and with few
        entries is handled here (LMDB and the write-ahead log release the GIL
        during the fsync); anything else wakes the loop's task.
        """
        if self._in_ready or self._stopping or not self._loop_options.ready_in_handler:
            self._wake()
            return
        self._in_ready = True
        # A leader sends a Ready's messages (the COMMITs that followers with clients wait for, to fire
        # watches and answer) before it applies the entries just committed (LoopOptions.leader_sends_before_apply):
        # when there are messages, the loop's task applies them, after the peer senders have written.
        # The leader's own clients are answered after both either way.
        messages_first = self.core.role is Role.LEADER and self._loop_options.leader_sends_before_apply
        try:
            while self.core.has_ready() and not self._stopping and self._persists_inline_next():
                rd = self.core.ready(withhold_committed=messages_first)
                self._handle_ready_inline(rd)
                if messages_first and rd.messages and self.core.has_ready():
                    break  # woken below
                messages_first = False
        except Exception as exc:  # the same boundary as the loop task's
            self._die(exc)
        finally:
            self._in_ready = False
        if self.core.has_ready() or self._snapshot_due():
            self._wake()

    def _snapshot_due(self) -> bool:
        """Every snapshot.interval.entries, or sooner once snapshot.interval.bytes of entry data were applied:
        the Raft log keeps each entry in memory until a snapshot lets it compact, so a burst of large
        writes would otherwise hold up to 20,000 x 1 MiB there. Not before as much was applied as the
        last snapshot held, though, up to SNAPSHOT_INTERVAL_STRETCH_MAX times the interval: a snapshot
        writes the whole state, so this keeps its cost near the writes' own while the log's memory
        stays bounded."""
        if self._snapshot_writing is not None or self._snapshot_written is not None:
            return False  # one at a time; the one under way wakes the loop when it is written
        interval_bytes = self.settings.snapshot_interval_bytes
        bytes_due = min(max(interval_bytes, self._last_snapshot_bytes), SNAPSHOT_INTERVAL_STRETCH_MAX * interval_bytes)
        scale = self._snapshot_scale
        return (
            self.core.applied_index - self._last_snapshot_index >= self.settings.snapshot_interval_entries * scale
            or self._applied_bytes_since_snapshot >= bytes_due * scale
        )

    def _roll_snapshot_scale(self) -> float:
        """Where in its interval the next snapshot falls: between SNAPSHOT_ROLL_FLOOR and all of it, drawn
        anew after each snapshot. ZooKeeper's SyncRequestProcessor rolls part of snapCount the same way, so
        that the servers of an ensemble do not snapshot at once: a snapshot holds up the node's loop, and
        two followers held up at the same index cost the leader its quorum (check-quorum steps it down)."""
        return SNAPSHOT_ROLL_FLOOR + (1 - SNAPSHOT_ROLL_FLOOR) * self._snapshot_rng.random()

    def _persists_in_writer(self, rd: Ready) -> bool:
        """Whether the writer thread saves `rd`: a snapshot, or more than inline_persist_entries_max entries."""
        return rd.snapshot is not None or len(rd.entries) > self._loop_options.inline_persist_entries_max

    def _persists_inline_next(self) -> bool:
        """Whether the next Ready can be handled in a handler: no snapshot, few entries to persist, and none
        of a leader's own (its appends must reach the peer senders before an fsync blocks this thread)."""
        unstable = self.core.unstable_entry_count()
        if self.core.role is Role.LEADER and unstable:
            return False
        return not self.core.has_pending_snapshot() and unstable <= self._loop_options.inline_persist_entries_max

    def _durable_apply_timing(self, rd: Ready, in_writer: bool, in_task: bool) -> _Apply:
        """When to apply the committed entries earlier Readies made durable, relative to this Ready's save.

        Before it by default: the leader's next batch does not delay the answers to the previous one.
        During a save in the writer thread, a leader applies them (its appends have left; the followers
        persist meanwhile), and a follower after it: its acknowledgement, which the leader's next
        commit waits for, leaves first. A follower in a handler applies them during its own save
        (LoopOptions.apply_ahead_during_save): the work overlaps the disk's, off the acknowledgement's path."""
        follower = self.core.role is Role.FOLLOWER
        if in_writer and rd.snapshot is None:
            return _Apply.AFTER_SAVE if follower else _Apply.DURING_SAVE
        if not in_task and rd.entries and follower and self._loop_options.apply_ahead_during_save:
            return _Apply.DURING_SAVE
        return _Apply.BEFORE_SAVE

    async def _persist_in_writer(self, rd: Ready, sent_early: bool, apply_durable: bool) -> int:
        """Save `rd` in the writer thread, the loop working meanwhile; `apply_durable`: apply the committed
        entries earlier Readies made durable during the save. Returns how many it applied."""
        saved = asyncio.get_running_loop().run_in_executor(
            self._writer, self._store.save, rd.hard_state, rd.entries, rd.snapshot, rd.must_sync
        )
        if sent_early:
            await asyncio.sleep(0)  # the peer senders hand the appends to gRPC before the apply below
        applied = self._apply_durable(rd) if apply_durable else 0
        await saved
        self._send_persisted_notices(rd)
        return applied

    def _send_early(self, rd: Ready) -> bool:
        """A change of role, then the messages that may leave before the persist; whether there were any."""
        assert self._transport is not None
        if rd.soft_state != self._soft:
            self._on_soft_state(rd.soft_state)
        early = [m for m in rd.messages if m.type in SENDABLE_BEFORE_PERSIST]
        self._queued_early = bool(early) and not self._transport.send(early)
        return bool(early)

    def _send_late(self, rd: Ready) -> bool:
        """The messages that wait for the persist (a follower's acknowledgement); whether there were any."""
        assert self._transport is not None
        late = [m for m in rd.messages if m.type not in SENDABLE_BEFORE_PERSIST]
        if late:
            self._transport.send(late)
        return bool(late)

    def _apply_durable(self, rd: Ready) -> int:
        """Apply the committed entries that earlier Readies already made durable; returns how many."""
        durable = self._durable_committed(rd)
        self._apply(durable)
        return len(durable)

    @staticmethod
    def _durable_committed(rd: Ready) -> Sequence[Entry]:
        committed = rd.committed_entries
        return committed if not rd.entries else [e for e in committed if e.index < rd.entries[0].index]

    def _persist_inline(self, rd: Ready, apply_durable: bool) -> int:
        """Persist `rd` on this thread. `apply_durable`: apply the committed entries earlier Readies made
        durable while the disk writes this one; returns how many it applied.

        Work for the state machine (that apply, and the prepare of _prepares_during_save) runs between
        the save's write and its fsync (LogStore.begin_save): the write's bytes are on their way to the
        device meanwhile, so the work costs the save little, and the fsync waits for what is left."""
        if not (rd.entries or rd.must_sync):
            return self._apply_durable(rd) if apply_durable else 0
        durable = self._durable_committed(rd) if apply_durable else ()
        prepare = self._prepares_during_save(rd, durable)
        if durable or prepare:
            invariant(rd.must_sync, "a save overlapped with work must be synced")
            saving = self._store.begin_save(rd.hard_state, rd.entries, rd.snapshot)
            try:
                self._apply(durable)
                if prepare:
                    self.state_machine.prepare(rd.entries)
            finally:
                saving.wait_durable()
        else:
            self._store.save(rd.hard_state, rd.entries, rd.snapshot, rd.must_sync)
        self._send_persisted_notices(rd)
        return len(durable)

    def _prepares_during_save(self, rd: Ready, durable: Sequence[Entry]) -> bool:
        """Whether to prepare the entries being saved (StateMachine.prepare) while the disk writes them
        (LoopOptions.apply_ahead_during_save): as a follower that serves clients (it wants each commit
        at once), so that the commit, which the leader's DURABLE notice brings about, only has to make
        that work visible. Few and small entries only: the work must fit in what the disk takes anyway,
        or the acknowledgement the leader waits for is late. Not on the leader: its fsync ends in the
        DURABLE notice, which the work would delay, and it prepares while it waits for
        acknowledgements (_prepare_ahead). Only entries that follow what is applied once `durable` is:
        prepare sees entries in log order (a follower whose applies lag, or that takes a leader's
        older entries again, has others to apply first)."""
        return (
            self._prepares_ahead
            and self._loop_options.apply_ahead_during_save
            and 0 < len(rd.entries) <= PREPARE_AHEAD_ENTRIES_MAX
            and self.core.role is Role.FOLLOWER
            and not self.core.lazy_commits
            and rd.entries[0].index == (durable[-1].index if durable else self.state_machine.applied_index()) + 1
            and sum(len(e.data) for e in rd.entries) <= PREPARE_DURING_SAVE_BYTES_MAX
        )

    def _send_persisted_notices(self, rd: Ready) -> None:
        """Right after a leader's save: the DURABLE notices it allows leave now (Raft.persisted), not with
        the next Ready, whose making waits for this one's apply and advance (RaftConfig.durable_notice)."""
        if rd.entries and self.core.role is Role.LEADER and self.core.config.durable_notice:
            notices = self.core.persisted(rd)
            if notices:
                assert self._transport is not None
                self._transport.send(notices)

    def _finish_ready(self, rd: Ready, applied_early: int) -> None:
        """The last steps of a Ready (its messages all sent): the rest of the committed entries, reads, advance."""
        # A change of the commit index alone is not written: Raft keeps it
        # volatile, and a restarted node learns it again from the leader (its
        # state machine's applied index is a floor). It is stored with the next entries.
        if applied_early < len(rd.committed_entries):
            self._apply(rd.committed_entries[applied_early:])
        for rs in rd.read_states:
            fut = self._reads_in_flight.pop(rs.context, None)
            if fut is not None and not fut.done():
                fut.set_result(rs.index)
        self.core.advance(rd)
        self._release_applied_waiters()
        if self.core.config_index != self._config_index_seen:
            self._membership_changed()
        if self._log_incomplete:
            self._note_log_repaired()
        if rd.entries and self._prepares_ahead and self._loop_options.prepare_while_committing:
            # After what this turn of the loop already has to do, and after what the rest of this
            # step wakes (the sender tasks of a follower's acknowledgement, of the DURABLE notice
            # the next Ready of a leader holds): the wait for the commit absorbs the apply.
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, self._prepare_ahead)

    def _note_log_repaired(self) -> None:
        """Log once that this node's log again holds everything it may have acknowledged before its tail
        was cut (quorum.raft.recovery): its votes count as any other's from now on."""
        if not self.core.log_incomplete:
            self._log_incomplete = False
            self.log.info("log_repaired", commit=self.core.commit_index, term=self.core.term)

    def _prepare_ahead(self) -> None:
        """Let the state machine apply the entries this node holds durably while their commit is under
        way (ZnodeTree.prepare); the apply of the committed entries then only commits that work.

        Only while the node is not busy persisting more (under load, commits come in runs that
        would not match what was prepared, and the work would be done twice), and only entries
        not known committed (those are the next Ready's to apply). A serving follower has usually
        prepared them during their save already (_prepares_during_save); then this does nothing."""
        if self._stopping or self.core.unstable_entry_count():
            return
        entries = self.core.durable_uncommitted(PREPARE_AHEAD_ENTRIES_MAX + 1)
        if 0 < len(entries) <= PREPARE_AHEAD_ENTRIES_MAX and entries[0].index == self.state_machine.applied_index() + 1:
            self.state_machine.prepare(entries)

    def _apply(self, entries: Sequence[Entry]) -> None:
        if entries:
            results = self.state_machine.apply(entries)
            self._complete_proposals(entries, results)
            self._applied_bytes_since_snapshot += sum(len(e.data) for e in entries)

    async def _in_writer(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _guard(self, fn: Any, *args: Any) -> Any:
        """Run a core call and return what it returns; an invariant violation stops the node instead of
        corrupting state (then None)."""
        try:
            return fn(*args)
        except InvariantViolation as exc:
            self._die(exc)
            return None

    def _die(self, exc: BaseException) -> None:
        if self._fatal is None:
            self._fatal = exc
            if isinstance(exc, StateMachineDamagedError):
                # One event, no traceback: the database is marked, and the next start rebuilds it.
                self.log.critical("state_machine_damaged", phase="run", error=str(exc), action="node stops")
            else:
                self.log.critical("node_failed", error=repr(exc))
        self._stopping = True
        if self._stopped is not None:
            self._stopped.set()

    def _on_soft_state(self, soft: SoftState) -> None:
        old = self._soft
        self._soft = soft
        notice, self._leadership_notice = self._leadership_notice, None
        if notice is not None and not notice.done():
            notice.set_result(None)
        if soft.role != old.role:
            self._place()
            self.role_since_s = time.monotonic()
        if soft.role != old.role or soft.leader != old.leader:
            self.log.info(
                "role_changed",
                old_role=old.role.value,
                role=soft.role.value,
                leader=soft.leader,
                term=self.core.term,
            )
        if soft.leader != old.leader and soft.leader != 0:
            self.leader_changes += 1
        if soft.leader != old.leader and self._reads_in_flight:
            # A forwarded ReadIndex may have died with the old leader: ask the new one.
            for ctx in self._reads_in_flight:
                self._guard(self.core.read_index, ctx)

    def _place(self) -> None:
        """Move this node's loop thread to its role's CPUs (runtime.cpu_placement), when placement is on."""
        if self._placement is None:
            return
        try:
            moved = self._placement.place(leader=self.core.role is Role.LEADER)
        except OSError as exc:  # the CPUs allowed changed under us (a cpuset, taskset): leave the scheduler free
            self.log.warning("cpu_placement_off", error=str(exc))
            self._placement = None
            return
        if moved:
            self.log.info("cpu_placement", role=self.core.role.value, cpus=sorted(self._placement.current or ()))

    # ------------------------------------------------------------- snapshots
    async def _install_snapshot(self, meta: SnapshotMeta) -> None:
        path = self._snapshots.path(meta)
        await self._in_writer(self._snapshots.verify, meta)
        self.state_machine.restore(path, meta.index, meta.term)
        self._last_snapshot_index = meta.index
        self._applied_bytes_since_snapshot = 0
        self._last_snapshot_bytes = path.stat().st_size
        self._snapshot_scale = self._roll_snapshot_scale()
        for index in [i for i in self._waiters if i <= meta.index]:
            self._waiters.pop(index).batch.fail(
                errors.QuorumTimeoutError(f"outcome of entry {index} unknown: replaced by a snapshot from the leader")
            )
        self.log.info("snapshot_installed", index=meta.index, term=meta.term)

    def _begin_snapshot(self) -> None:
        """Start a snapshot at the applied index: its state is fixed here, on the loop (the state machine's
        snapshot_chunks reads it in a transaction opened by the call), and written, fsynced and synced in
        the snapshot writer's thread while the loop goes on handling Readies. Serializing the whole state
        (tens of MB under load) on the loop stalled every write on this node for that long: with the
        followers snapshotting about once a second under load, the leader lost a third of its throughput
        and check-quorum stepped it down now and then (elections under load). _finish_snapshot compacts
        the log once it is written."""
        index = self.state_machine.applied_index()
        term = self.core.term_at(index)
        if term is None:
            return
        meta = self.core.snapshot_meta(index)
        chunks = self.state_machine.snapshot_chunks()
        self._applied_bytes_since_snapshot = 0  # from the snapshot's index on
        loop = asyncio.get_running_loop()
        written = loop.run_in_executor(
            self._snapshot_writer, self._write_snapshot_file, self._snapshots.create(meta), chunks
        )
        self._snapshot_writing = task = loop.create_task(
            self._snapshot_done(meta, written), name=f"raft-snapshot-{self.node_id}"
        )
        self._tasks.append(task)  # one of the node's tasks while it runs: stop() (or a crash) cancels it
        task.add_done_callback(self._tasks.remove)

    async def _snapshot_done(self, meta: SnapshotMeta, written: asyncio.Future[int]) -> None:
        """Wait for the snapshot writer, then wake the loop to compact the log behind it (_finish_snapshot)."""
        try:
            size = await written
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the loop task's boundary: a snapshot that cannot be written stops the node
            self._die(exc)
            return
        finally:
            self._snapshot_writing = None
        self._snapshot_written = (meta, size)
        self._wake()

    def _write_snapshot_file(self, writer: SnapshotWriter, chunks: Iterator[bytes]) -> int:
        """Write `chunks` into `writer`, commit it (fsync, rename) and sync the state machine (the log may
        only forget entries whose effect is on disk); returns the snapshot's size. Any thread."""
        size = 0
        try:
            for chunk in chunks:
                writer.write(chunk)
                size += len(chunk)
        except BaseException:
            writer.abort()
            raise
        writer.commit()
        self.state_machine.sync()
        return size

    async def _finish_snapshot(self) -> None:
        """In the loop's task, between Readies: compact the log behind the snapshot just written."""
        assert self._snapshot_written is not None
        meta, size = self._snapshot_written
        self._snapshot_written = None
        if meta.index <= self._last_snapshot_index:
            # A leader's snapshot at or past this one was installed while it was written: the log and the
            # store already follow that one.
            await self._in_writer(self._snapshots.prune, SNAPSHOTS_KEPT)
            return
        compact_to, trailing_bytes = self._trailing_compaction_point(meta.index)
        compacted = self.core.snapshot_taken(meta, compact_to)
        # Not beyond compact_to: a leader's snapshot stepped in while this one was written (a peer
        # handler ran during the awaits above) compacted the core past it, but the store holds that
        # snapshot only once its Ready is saved; until then the store's log may end before it.
        await self._in_writer(self._store.compact, min(compacted, compact_to), meta)
        await self._in_writer(self._snapshots.prune, SNAPSHOTS_KEPT)
        self._last_snapshot_index = meta.index
        self._last_snapshot_bytes = size
        self._snapshot_scale = self._roll_snapshot_scale()
        self.log.info(
            "snapshot_taken",
            index=meta.index,
            term=meta.term,
            compacted_to=compacted,
            trailing_bytes=trailing_bytes,
            size_bytes=size,
        )

    def _trailing_compaction_point(self, index: int) -> tuple[int, int]:
        """Where the log compacts after a snapshot at `index`, and the bytes of entry data kept behind the
        snapshot: snapshot.trailing.entries stay (a slightly late follower catches up by appends), but no
        more than snapshot.trailing.bytes of entry data (they stay in memory). One walk back per snapshot,
        over the kept entries only."""
        log = self.core.log
        lowest = max(0, index - self.settings.snapshot_trailing_entries, log.compacted_index)
        kept_bytes = 0
        point = index
        while point > lowest:
            size = len(log.entry(point).data)
            if kept_bytes + size > self.settings.snapshot_trailing_bytes:
                break
            kept_bytes += size
            point -= 1
        return point, kept_bytes

    # ---------------------------------------------------- transport callbacks
    def deliver(self, messages: Sequence[Message]) -> None:
        if self._stopping or self._transport is None:
            # Before start(): the server already listens (run_node checks its peers meanwhile, which
            # takes long after a state-machine rebuild), but nothing could send a reply. Raft
            # tolerates the loss: the leader sends again.
            return
        for m in messages:
            if m.to != self.node_id:
                continue
            self._guard(self.core.step, m)
        if messages and self._transport is not None:
            self._transport.heard_from(messages[0].frm)
        self._handle_ready_here()

    def _on_unreachable(self, peer: int) -> None:
        self._guard(self.core.report_unreachable, peer)
        self._wake()

    def _on_stream_broken(self, peer: int) -> None:
        """A live stream to `peer` broke hard (PeerTransport's on_stream_broken): if `peer` is our leader,
        the core starts a pre-election now instead of waiting out the election timeout
        (Raft.leader_unreachable, RaftConfig.campaign_on_leader_loss)."""
        term = self.core.term
        if self._guard(self.core.leader_unreachable, peer):
            self.log.info("leader_stream_broken", leader=peer, term=term, action="pre_election")
            self._wake()

    def _on_snapshot_done(self, peer: int, ok: bool) -> None:
        self._guard(self.core.report_snapshot, peer, ok)
        self._wake()

    def snapshot_store(self) -> SnapshotStore:
        return self._snapshots

    def state_for_peer(self, min_index: int) -> tuple[SnapshotMeta, Iterator[bytes]]:
        """This node's applied state as snapshot bytes, for a peer rebuilding its state machine (FetchState):
        the state at the index returned (StateMachine.snapshot_chunks fixes it when called)."""
        if self._stopping:
            raise errors.ShuttingDownError("node is shutting down")
        index = self.state_machine.applied_index()
        term = self.core.term_at(index)
        if index < min_index or term is None:
            raise errors.StateUnavailableError(
                f"node {self.node_id} has applied only up to index {index}, a peer needs {min_index}"
            )
        return self.core.snapshot_meta(index), self.state_machine.snapshot_chunks()

    # -------------------------------------------------------------- proposals
    async def propose_many(self, commands: Sequence[bytes], timeout_s: float) -> list[tuple[int, bytes]]:
        """Replicate commands; returns (index, result) per command once each is committed and applied here."""
        future = self.propose_nowait(commands)
        try:
            return await await_owned(future, timeout_s)
        except TimeoutError:
            raise errors.QuorumTimeoutError(
                f"proposal not committed within {timeout_s:.1f}s; it may still be applied later"
            ) from None

    def propose_nowait(self, commands: Sequence[bytes]) -> asyncio.Future[list[tuple[int, bytes]]]:
        """Append commands to the log now (so calls keep their order); the future resolves as propose_many returns."""
        return self._propose(commands, _Batch)

    def propose_prefix_nowait(
        self, commands: Sequence[bytes]
    ) -> asyncio.Future[tuple[list[tuple[int, bytes]], BaseException | None]]:
        """Like propose_nowait, with an outcome per entry: the future resolves, never fails, with the
        (index, result) of the entries applied, a prefix of the commands in order, and the QuorumError
        that befell the rest (None when none did). A lost entry takes every later one with it (Raft's
        log matching), so the rest were not applied unless the error says the outcome is unknown.
        Raises at once, as propose_nowait does, when nothing was appended."""
        return self._propose(commands, _PrefixBatch)  # type: ignore[return-value]

    def _propose(self, commands: Sequence[bytes], kind: type[_Batch]) -> asyncio.Future[Any]:
        if self._stopping:
            raise errors.ShuttingDownError("node is shutting down")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not commands:
            future.set_result(([], None) if kind is _PrefixBatch else [])
            return future
        try:
            first = self.core.propose_many(commands)
        except CoreNotLeader as exc:
            raise errors.NotLeaderError(exc.leader_id, self.address_of(exc.leader_id)) from None
        except CoreDropped as exc:
            raise errors.ProposalDroppedError(str(exc)) from None
        batch = kind(first, len(commands), future)
        if self._times_proposals:
            batch.proposed_ns = time.perf_counter_ns()
        waiter = _Waiter(self.core.term, batch)
        for k in range(len(commands)):
            self._waiters[first + k] = waiter
        if self._idle_leader_with(len(commands)):
            self._handle_proposal_here()
        else:
            self._wake()
        return future

    def _idle_leader_with(self, proposed: int) -> bool:
        """Whether the leader had nothing in flight before these `proposed` entries: every earlier entry
        committed and applied, no Ready under way, every peer stream idle, few new entries."""
        core = self.core
        return (
            not self._in_ready
            and not self._stopping
            and core.role is Role.LEADER
            and self._loop_options.idle_leader_inline_path
            and proposed <= self._loop_options.inline_persist_entries_max
            and core.unstable_entry_count() == proposed
            and core.applied_index == core.commit_index == core.last_index - proposed
            and not core.has_pending_snapshot()
            and self._transport is not None
            and self._transport.streams_idle()
        )

    def _handle_proposal_here(self) -> None:
        """An idle leader's proposal handled on the spot (LoopOptions.idle_leader_inline_path): its appends
        go to the idle streams and its fsync runs, right in the proposer's call, without waking the loop's
        task (a loop turn and a task switch). Under load (entries in flight, a stream busy) proposals wait
        for the loop's task, and those that arrive meanwhile join one Ready (group commit)."""
        self._in_ready = True
        try:
            self._handle_ready_inline(self.core.ready())
        except Exception as exc:  # the loop task's boundary
            self._die(exc)
        finally:
            self._in_ready = False
        if self.core.has_ready() or self._snapshot_due() or self._open_read is not None:
            self._wake()

    def _complete_proposals(self, entries: Sequence[Any], results: Sequence[bytes]) -> None:
        waiters = self._waiters
        if not waiters:
            return
        applied_ns = time.perf_counter_ns() if self._times_proposals else 0
        for e, result in zip(entries, results, strict=True):
            w = waiters.pop(e.index, None)
            if w is None:
                continue
            if w.term == e.term:
                batch = w.batch
                batch.complete(e.index, result)
                if applied_ns and not batch.remaining:
                    proposal_applied(batch.proposed_ns, self._committed_seen_ns, applied_ns, len(batch.results))
            else:
                w.batch.fail(errors.ProposalLostError(f"entry {e.index} was replaced by a newer leader's entry"))

    # ------------------------------------------------------------------ reads
    async def read_index(self, timeout_s: float) -> int:
        """A ReadIndex round: returns an index that, once applied here, makes a read linearizable."""
        if self._stopping:
            raise errors.ShuttingDownError("node is shutting down")
        if self._open_read is None:
            ctx = f"{self._read_ctx_prefix}{next(self._read_ctx_seq)}".encode()
            self._open_read = (ctx, asyncio.get_running_loop().create_future())
            self._wake()
        fut = self._open_read[1]
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            raise errors.QuorumTimeoutError(f"no quorum confirmed leadership within {timeout_s:.1f}s") from None

    def _issue_reads(self) -> None:
        """Reads that arrived since the last turn share one heartbeat round."""
        if self._open_read is None:
            return
        ctx, fut = self._open_read
        self._open_read = None
        self._reads_in_flight[ctx] = fut
        fut.add_done_callback(lambda _f, c=ctx: self._reads_in_flight.pop(c, None))
        self._guard(self.core.read_index, ctx)

    def set_commit_interest(self, wanted: bool) -> None:
        """Whether this node, as a follower, needs each commit at once (the default) or may learn it
        with the leader's next append or heartbeat (Raft.set_lazy_commits, RaftConfig.lazy_follower_commits).

        The state machine says so: zkemu wants commits only while a client
        session is connected here. A follower without sessions then costs the
        leader no COMMIT messages, and while the leader has a quorum without it
        no new entries either (Raft._deferred_followers, RaftConfig.deferred_replication);
        a follower with sessions that the quorum does not need gets each entry
        as it commits.
        """
        self.core.set_lazy_commits(not wanted)

    async def wait_applied(self, index: int, timeout_s: float) -> None:
        if self.core.applied_index >= index:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._applied_waiters, (index, next(self._applied_seq), fut))
        try:
            await await_owned(fut, timeout_s)
        except TimeoutError:
            raise errors.QuorumTimeoutError(f"index {index} not applied within {timeout_s:.1f}s") from None

    def _release_applied_waiters(self) -> None:
        applied = self.core.applied_index
        w = self._applied_waiters
        while w and w[0][0] <= applied:
            _, _, fut = heapq.heappop(w)
            if not fut.done():
                fut.set_result(None)

    async def read(self, key: bytes, linearizable: bool, timeout_s: float) -> tuple[bytes | None, int]:
        if linearizable:
            index = await self.read_index(timeout_s)
            await self.wait_applied(index, timeout_s)
        return self.state_machine.read(key), self.core.applied_index

    async def leadership_changed(self, timeout_s: float) -> None:
        """Return at this node's next change of role or of the leader it knows, or after `timeout_s`.

        What a request that found no leader waits on (an election is under way): it goes on the moment
        the election is decided, instead of polling. Costs nothing until someone waits."""
        notice = self._leadership_notice
        if notice is None:
            notice = self._leadership_notice = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(notice), timeout_s)

    # ------------------------------------------------------------- operations
    def status(self) -> NodeStatus:
        c = self.core
        return NodeStatus(
            node_id=self.node_id,
            address=self.settings.advertised_address,
            role=c.role.value,
            term=c.term,
            leader=c.leader_id,
            leader_address=self.address_of(c.leader_id),
            commit_index=c.commit_index,
            applied_index=c.applied_index,
            last_index=c.last_index,
            first_index=c.first_index,
            snapshot_index=c.snapshot.index if c.snapshot else 0,
            followers=tuple((p, m, n, st) for p, (m, n, st) in sorted(c.progress().items())),
            cluster_id=self.settings.cluster_id,
            leader_changes=self.leader_changes,
            voters=c.membership.voters,
            learners=c.membership.learners,
            observers=c.membership.observers,
            config_index=c.config_index,
            members=members_string(c.membership, self._addresses),
        )

    def read_index_rounds_in_flight(self) -> int:
        """ReadIndex rounds this node waits on (each serves a batch of syncs and linearizable reads)."""
        return len(self._reads_in_flight) + (self._open_read is not None)

    def best_transfer_target(self) -> int:
        progress = self.core.progress()
        if not progress:
            return 0
        return max(progress, key=lambda p: progress[p][0])

    async def transfer_leadership(self, target: int, timeout_s: float) -> int:
        """Hand leadership to `target` (0: the most caught-up follower); returns the new leader or 0."""
        if self.core.role is not Role.LEADER:
            return self.core.leader_id
        target = target or self.best_transfer_target()
        if target == 0:
            return self.node_id
        self._guard(self.core.transfer_leadership, target)
        self._wake()
        deadline = time.monotonic() + timeout_s
        # Done once another node leads and we have heard from it (the leader
        # id is unknown between our stepping down and its first append).
        while time.monotonic() < deadline and (self.core.role is Role.LEADER or self.core.leader_id == 0):
            await asyncio.sleep(self.settings.tick_ms / 1000)
        return self.core.leader_id

    async def change_membership(self, kind: ChangeKind, node_id: int, address: str, timeout_s: float) -> int:
        """A single-server change (quorum.raft.membership), returned once committed and applied here; the new
        configuration's context is its address book (quorum.address_book)."""
        if self._stopping:
            raise errors.ShuttingDownError("node is shutting down")
        addresses = dict(self._addresses)
        if kind in (ChangeKind.ADD_LEARNER, ChangeKind.ADD_OBSERVER):
            if not address:
                raise errors.MembershipChangeError(f"node {node_id}: an added node needs its host:port")
            addresses[node_id] = address
        elif kind is ChangeKind.REMOVE:
            addresses.pop(node_id, None)
        members = set(self.core.membership.members) | {node_id}
        context = encode_addresses({k: v for k, v in addresses.items() if k in members})
        try:
            index = self.core.propose_conf_change(ConfChange(kind, node_id, context))
        except CoreNotLeader as exc:
            raise errors.NotLeaderError(exc.leader_id, self.address_of(exc.leader_id)) from None
        except CoreDropped as exc:
            raise errors.ProposalDroppedError(str(exc)) from None
        except ConfChangeError as exc:
            raise errors.MembershipChangeError(str(exc)) from None
        term = self.core.term
        self.log.info("membership_change_proposed", change=kind.name.lower(), changed=node_id, index=index)
        self._wake()
        await self.wait_applied(index, timeout_s)
        if self.core.term_at(index) not in (term, None):
            raise errors.ProposalLostError(f"the membership change at index {index} was replaced by a new leader")
        return index

    async def stop(self, transfer_timeout_s: float | None = None) -> None:
        """Graceful stop: a leader hands over first so a rolling restart costs no election timeout."""
        if transfer_timeout_s is None:
            transfer_timeout_s = 2 * self.settings.election_timeout_ticks * self.settings.tick_ms / 1000
        if not self._stopping and self.core.role is Role.LEADER and len(self.core.membership.voters) > 1:
            new_leader = await self.transfer_leadership(0, transfer_timeout_s)
            self.log.info("leadership_transferred_on_shutdown", new_leader=new_leader)
            # Let the last messages (TimeoutNow, appends) leave before the transport closes.
            await asyncio.sleep(self.settings.tick_ms / 1000)
        self._stopping = True
        self._wake()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._transport is not None:
            await self._transport.close()
        for w in self._waiters.values():
            w.batch.fail(errors.ShuttingDownError("node is shutting down"))
        self._writer.shutdown(wait=True)
        if self._snapshot_writer is not self._writer:
            self._snapshot_writer.shutdown(wait=True)  # a snapshot still being written reads the state machine
        self._store.close()
        self.state_machine.close()
        if self._placement is not None:
            with contextlib.suppress(OSError):
                self._placement.release()
        if self._stopped is not None:
            self._stopped.set()

    async def wait_failed(self) -> BaseException | None:
        assert self._stopped is not None
        await self._stopped.wait()
        return self._fatal

    # ------------------------------------------- what an application reads of the core (quorum.facade)
    @property
    def following(self) -> bool:
        """A follower (of a known leader or not), not a candidate in an election."""
        return self.core.role is Role.FOLLOWER

    def follower_states(self) -> list[str]:
        """While leading, each follower's replication state ("probe", "replicate", "snapshot"); else []."""
        return [state for _match, _next, state in self.core.progress().values()]
