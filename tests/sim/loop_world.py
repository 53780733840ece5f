"""The world a simulated QuorumNode runs in: event loop, disk, writer thread, state machine, transport.

Each piece is the deterministic in-memory twin of what the node uses in
production (tests/sim/node_loop.py drives them):

* `make_loop` is an asyncio event loop whose selector never waits and never
  reports I/O: callbacks run in the order they were scheduled, and
  `run_until_idle` runs them until none is left, so a step of the simulator
  is a fixed sequence of callbacks.
* `LoopDisk` is the log store (quorum.log_store's contract) with what was
  written apart from what is durable: `save(sync=False)` and `begin_save` only
  write; an fsync (`save(sync=True)`, `SaveHandle.wait_durable`, `compact`)
  makes every earlier write durable. A crash keeps the durable part only.
* `LoopWriter` is the node's writer thread: jobs run one at a time, in order,
  each when the simulator's clock reaches it, so the loop keeps working while
  a large save is under way, as it does in production.
* `LoopMachine` is a StateMachine that records what it applied and checks the
  loop's contract on every call (quorum.state_machine.StateMachine).
* `LoopTransport` hands messages to the simulated network.

A crash can strike at any disk call (`Life.crash_io_rate`): the call raises
`SimCrash`, which the node's loop boundary takes as fatal (it stops, as a
killed process would), and everything the node does afterwards in the same
step is ignored because its `Life` is over.
"""

from __future__ import annotations

import asyncio
import copy
import selectors
import struct
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from quorum.lmdb_log_store import TailCut
from quorum.log_store import MemoryLogStore, SaveHandle
from quorum.raft.types import Entry, EntryKind, HardState, Message, MessageType, PersistentState, SnapshotMeta
from tests.sim.invariants import fail

# Callback rounds run_until_idle allows before it calls the loop stuck (a task that never waits).
IDLE_ROUNDS_MAX = 10_000
_RECORD = struct.Struct(">QQBI")  # index, term, kind, data length: one applied entry in a snapshot


class SimCrash(Exception):
    """The simulated process died at this disk call; nothing it does from now on counts."""


class _NoIO(selectors.BaseSelector):
    """A selector with nothing to wait for: the simulated node has no sockets (the loop's self-pipe
    is registered, and never read: no other thread runs, so it carries nothing)."""

    def __init__(self) -> None:
        self._keys: dict[int, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


def make_loop(on_error: Callable[[BaseException | None, str], None]) -> asyncio.AbstractEventLoop:
    """A deterministic event loop; an exception no task or callback handled goes to `on_error`."""
    loop = asyncio.SelectorEventLoop(_NoIO())
    loop.set_exception_handler(lambda _loop, ctx: on_error(ctx.get("exception"), str(ctx.get("message"))))
    return loop


def run_until_idle(loop: asyncio.AbstractEventLoop) -> None:
    """Run the loop's ready callbacks, and those they schedule, until none is left."""
    ready = loop._ready  # type: ignore[attr-defined]
    for _ in range(IDLE_ROUNDS_MAX):
        if not ready:
            return
        loop.call_soon(loop.stop)
        loop.run_forever()
    raise fail("loop", f"callbacks still ready after {IDLE_ROUNDS_MAX} rounds")


@dataclass(slots=True)
class Life:
    """One incarnation of a node's process: over once it crashed."""

    node_id: int
    number: int
    alive: bool = True


class Faults(Protocol):
    """What the world asks the simulator (tests.sim.node_loop.LoopCluster)."""

    now: int

    def crash_at_io(self, life: Life, where: str) -> bool: ...

    def schedule_writer(self, node_id: int, life: Life) -> None: ...

    def durable_holders(self, index: int, term: int) -> int: ...

    def check_apply(self, node_id: int, e: Entry) -> None: ...

    def check_appended(self, node_id: int, entries: tuple[Entry, ...], prev_term: int | None) -> None: ...

    def send(self, life: Life, messages: Sequence[Message]) -> None: ...

    def lane_idle(self, frm: int, to: int) -> bool: ...


class _Handle:
    __slots__ = ("_disk", "_done")

    def __init__(self, disk: LoopDisk) -> None:
        self._disk = disk
        self._done = False

    def wait_durable(self) -> None:
        if not self._done:
            self._disk.fault("wait_durable")
            self._disk.sync()
            self._done = True


class LoopDisk:
    """A node's log store: `written` is everything handed to it, `durable` what an fsync covered."""

    def __init__(self, node_id: int, world: Faults) -> None:
        self.node_id = node_id
        self.world = world
        self.durable = MemoryLogStore()
        self.written = MemoryLogStore()
        self.pending: list[tuple[HardState | None, tuple[Entry, ...], SnapshotMeta | None]] = []
        self.tail_cuts: list[TailCut] = []
        self._identity: tuple[str, str] | None = None
        self.life = Life(node_id, 0, alive=False)
        self.saves_begun = 0

    # -- crash and restart
    def open(self, life: Life) -> None:
        """A new incarnation opens the disk: what was not durable is gone."""
        self.pending.clear()
        self.written = copy.copy(self.durable)
        self.written._entries = list(self.durable._entries)  # noqa: SLF001 (the twin's own list)
        self.life = life

    def fault(self, where: str) -> None:
        if not self.life.alive or self.world.crash_at_io(self.life, where):
            raise SimCrash(f"node {self.node_id} crashed at {where}")

    # -- quorum.log_store.LogStore
    def load(self) -> PersistentState:
        return self.durable.load()

    def save(self, hs: HardState | None, entries: Sequence[Entry], snap: SnapshotMeta | None, sync: bool) -> None:
        self.fault("save")
        self._write(hs, tuple(entries), snap)
        if sync:
            self.sync()

    def begin_save(self, hs: HardState | None, entries: Sequence[Entry], snap: SnapshotMeta | None) -> SaveHandle:
        self.fault("begin_save")
        self._write(hs, tuple(entries), snap)
        self.saves_begun += 1
        return _Handle(self)

    def compact(self, index: int, snapshot: SnapshotMeta) -> None:
        self.fault("compact")
        self.sync()
        self.written.compact(index, snapshot)
        self.durable.compact(index, snapshot)

    def set_repair_index(self, index: int) -> None:
        self.fault("set_repair_index")
        self.sync()
        self.written.set_repair_index(index)
        self.durable.set_repair_index(index)

    def identity(self) -> tuple[str, str] | None:
        return self._identity

    def set_identity(self, cluster_id: str, peers: str) -> None:
        self._identity = (cluster_id, peers)

    def close(self) -> None:
        pass

    # -- the simulator's view
    def _write(self, hs: HardState | None, entries: tuple[Entry, ...], snap: SnapshotMeta | None) -> None:
        if entries:
            prev = entries[0].index - 1
            prev_term = snap.term if snap is not None and snap.index == prev else self.written.term(prev)
            self.world.check_appended(self.node_id, entries, prev_term)
        self.written.save(hs, entries, snap, sync=True)
        self.pending.append((hs, entries, snap))

    def sync(self) -> None:
        for hs, entries, snap in self.pending:
            self.durable.save(hs, entries, snap, sync=True)
        self.pending.clear()

    def holds_durably(self, index: int, term: int) -> bool:
        """Whether the durable log holds entry (index, term), or compacted it (a snapshot covers it)."""
        d = self.durable
        return d.term(index) == term or index <= d._compacted_index  # noqa: SLF001 (the twin's own field)


class LoopWriter(Executor):
    """The node's writer thread: jobs run in order, one per simulator event (LoopCluster._run_writer)."""

    def __init__(self, node_id: int, life: Life, world: Faults) -> None:
        self.node_id = node_id
        self.life = life
        self.world = world
        self.jobs: deque[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] = deque()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.jobs.append((lambda: fn(*args, **kwargs), (), future))
        self.world.schedule_writer(self.node_id, self.life)
        return future

    def run_one(self) -> None:
        if not self.jobs or not self.life.alive:
            return
        fn, _, future = self.jobs.popleft()
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task, as the thread pool does
            future.set_exception(exc)
        else:
            future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.jobs.clear()


class LoopMachine:
    """A StateMachine (quorum.state_machine) that checks the loop's contract on every call.

    apply: entries in log order, each exactly once in this incarnation, each committed and durable
    on this node's disk; prepare: entries in log order, from the next one to apply. Its state is the
    list of entries applied (entry i at position i-1). `kept_on_kill`: a killed process keeps what it
    applied (the OS still has the pages), else only what `sync` or `restore` made durable."""

    rebuilt = False

    def __init__(self, node_id: int, world: Faults, disk: LoopDisk, prepares_ahead: bool, kept_on_kill: bool) -> None:
        self.node_id = node_id
        self.world = world
        self.disk = disk
        self.prepares_ahead = prepares_ahead
        self.kept_on_kill = kept_on_kill
        self.entries: list[Entry] = []
        self.synced = 0  # how many entries sync/restore made durable
        self.prepared: tuple[Entry, ...] = ()
        self.prepares = 0
        self.prepared_used = 0
        self.life = Life(node_id, 0, alive=False)

    def open(self, life: Life) -> None:
        """After a crash: what the process kept (kept_on_kill), else what was synced."""
        if not self.kept_on_kill:
            del self.entries[self.synced :]
        self.prepared = ()
        self.life = life

    def applied_index(self) -> int:
        return len(self.entries)

    def applied_term(self) -> int | None:
        return self.entries[-1].term if self.entries else 0

    def apply(self, entries: Sequence[Entry]) -> list[bytes]:
        results = [str(e.index).encode() for e in entries]
        if not self.life.alive or not entries:
            return results
        for e in entries:
            if e.index != len(self.entries) + 1:
                raise fail("apply order", f"node {self.node_id} applies {e.index} after {len(self.entries)}")
            if not self.disk.holds_durably(e.index, e.term):
                raise fail("apply durable", f"node {self.node_id} applies ({e.index}, term {e.term}) not on its disk")
            self.world.check_apply(self.node_id, e)
            self.entries.append(e)
        if self.prepared:
            # The prepared work is used when the same entries come to be applied, else abandoned.
            self.prepared_used += self.prepared[0] == entries[0]
            self.prepared = ()
        return results

    def prepare(self, entries: Sequence[Entry]) -> None:
        if not self.life.alive or not entries:
            return
        first = entries[0].index
        if first != len(self.entries) + 1 or any(e.index != first + k for k, e in enumerate(entries)):
            raise fail(
                "prepare order",
                f"node {self.node_id} prepares {[e.index for e in entries]} with {len(self.entries)} applied",
            )
        self.prepared = tuple(entries)
        self.prepares += 1

    def sync(self) -> None:
        if self.life.alive:
            self.synced = len(self.entries)

    def snapshot_chunks(self) -> Iterator[bytes]:
        # The state as of the call (StateMachine.snapshot_chunks): the node consumes it later, in its writer.
        return iter([b"".join(_RECORD.pack(e.index, e.term, e.kind, len(e.data)) + e.data for e in self.entries)])

    def restore(self, snapshot_path: Path, index: int, term: int | None = None) -> None:
        entries = decode_snapshot(snapshot_path.read_bytes())
        if len(entries) != index or (index and entries[-1].term != term):
            raise fail("snapshot", f"node {self.node_id} restores {len(entries)} entries for ({index}, term {term})")
        if self.life.alive:
            self.entries = entries
            self.synced = index
            self.prepared = ()

    def read(self, key: bytes) -> bytes | None:
        return None

    def close(self) -> None:
        pass


def decode_snapshot(data: bytes) -> list[Entry]:
    entries = []
    pos = 0
    while pos < len(data):
        index, term, kind, size = _RECORD.unpack_from(data, pos)
        pos += _RECORD.size
        entries.append(Entry(index, term, data[pos : pos + size], EntryKind(kind)))
        pos += size
    return entries


class LoopTransport:
    """The node's peer transport (quorum.node.NodeTransport) on the simulated network. A peer's stream
    stays busy a little while after a send (LoopCluster.lane_idle), as a gRPC write in flight does."""

    def __init__(self, node_id: int, life: Life, peers: Sequence[int], world: Faults) -> None:
        self.node_id = node_id
        self.life = life
        self.peers = [p for p in peers if p != node_id]
        self.world = world

    def send(self, messages: Sequence[Message]) -> bool:
        at_once = all(m.type is not MessageType.SNAPSHOT and self.world.lane_idle(self.node_id, m.to) for m in messages)
        if self.life.alive:
            self.world.send(self.life, messages)
        return at_once

    def streams_idle(self) -> bool:
        return all(self.world.lane_idle(self.node_id, p) for p in self.peers)

    def heard_from(self, peer: int) -> None:
        pass

    def set_peers(self, peers: dict[int, str]) -> None:
        pass  # the loop simulator keeps its voters fixed (membership changes: tests/sim/cluster.py)

    async def close(self) -> None:
        pass
