"""A linearizability checker for one register with read, write and compare-and-set-by-version.

    history = History()
    h = history.invoke(process=1, kind=Kind.WRITE, value=b"a")
    history.complete(h, version=1)           # or history.unknown(h) after ConnectionLoss
    result = check(history.operations(), initial=RegisterState(b"", 0))
    assert result.linearizable, result.explain()

The register is a znode: its state is (data, version). A write (`set` with
version -1) stores a value and bumps the version; a compare-and-set (`set`
with an expected version) does the same only when the version matches and
otherwise fails (BadVersion) without effect; a read returns (data, version).

The search is Wing & Gong's, with Lowe's memoization, in the linked-list form
Porcupine uses: events (invocations and completions) sorted by time; the
operations that may come next are the invocations met before the first
completion still in the list; linearizing one lifts its two events out of the
list, backtracking puts them back; a (linearized set, state) pair already
explored is never explored again. Two things keep it fast on real histories:
completed operations are tried before ones of unknown outcome, and since a
znode's version only grows, a branch dies as soon as the state's version
passes the version some pending operation returned or expected
(`version_ceiling`) -- which also stops unknown writes from being tried in
every subset and order.

An operation whose outcome is unknown (ConnectionLoss, a timeout, the session
lost before the reply) has no completion: it may take effect at any time
after its invocation, or never (Knossos's "info" operations). Such an
operation is only linearized when it changes the state -- an unknown
compare-and-set that would fail, or would be a no-op, is the same as one
that never happened -- and the search ends once every completed operation is
linearized.
"""

from __future__ import annotations

import bisect
import enum
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

# The search gives up (CheckBudgetExceeded) after exploring this many (set, state) pairs by default.
EXPLORED_MAX = 2_000_000


class Kind(enum.Enum):
    READ = "read"
    WRITE = "write"
    CAS = "cas"


class RegisterState(NamedTuple):
    """(value, version) of the register."""

    value: bytes
    version: int

    def __repr__(self) -> str:
        return f"({self.value!r}, v{self.version})"


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of a history; times are seconds of one monotonic clock.

    read:  `value`, `version` as read.
    write: `value` written; `version` the new version it returned (None: not checked).
    cas:   `expected_version`, `value` written; `succeeded` True (then `version` the new one,
           None: not checked) or False (BadVersion).
    `complete_s` None: the outcome is unknown (then `succeeded` / `version` are None too).
    """

    id: int
    process: int
    kind: Kind
    invoke_s: float
    complete_s: float | None
    value: bytes | None = None
    version: int | None = None
    expected_version: int | None = None
    succeeded: bool | None = None

    @property
    def known(self) -> bool:
        return self.complete_s is not None

    def __str__(self) -> str:
        end = f"{self.complete_s:.4f}" if self.complete_s is not None else "?"
        match self.kind:
            case Kind.READ:
                what = f"read -> {self.value!r} v{self.version}"
            case Kind.WRITE:
                got = "?" if not self.known else f"v{self.version}" if self.version is not None else "ok"
                what = f"write {self.value!r} -> {got}"
            case Kind.CAS:
                got = "?" if not self.known else ("ok" if self.succeeded else "BadVersion")
                if self.succeeded and self.version is not None:
                    got += f" v{self.version}"
                what = f"cas v{self.expected_version} {self.value!r} -> {got}"
        return f"#{self.id} p{self.process} [{self.invoke_s:.4f}, {end}] {what}"


def step(state: RegisterState, op: Operation) -> RegisterState | None:
    """The state after `op` runs atomically in `state`, or None when `op`'s recorded result is impossible there."""
    match op.kind:
        case Kind.READ:
            if op.value != state.value or (op.version is not None and op.version != state.version):
                return None
            return state
        case Kind.WRITE:
            assert op.value is not None
            new = RegisterState(op.value, state.version + 1)
            if op.version is not None and op.version != new.version:
                return None
            return new
        case Kind.CAS:
            assert op.value is not None and op.expected_version is not None
            if state.version != op.expected_version:
                return None if op.succeeded else state
            if op.succeeded is False:
                return None
            new = RegisterState(op.value, state.version + 1)
            if op.version is not None and op.version != new.version:
                return None
            return new


class CheckBudgetExceeded(Exception):
    """The search explored more states than allowed: neither proved nor refuted."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    linearizable: bool
    explored: int  # distinct (linearized set, state) pairs visited
    operations: int
    unknown: int  # operations with an unknown outcome
    # When not linearizable: the longest linearization found, and the completed operations it could not place.
    longest_prefix: tuple[Operation, ...] = field(default=())
    stuck_on: tuple[Operation, ...] = field(default=())
    final_state: RegisterState | None = None

    def explain(self, tail: int = 12) -> str:
        if self.linearizable:
            return f"linearizable: {self.operations} operations ({self.unknown} unknown), {self.explored} states"
        lines = [
            f"NOT linearizable: {self.operations} operations ({self.unknown} unknown), {self.explored} states;",
            f"longest linearization places {len(self.longest_prefix)} operations, ending in state {self.final_state}:",
        ]
        lines += [f"  {op}" for op in self.longest_prefix[-tail:]]
        lines.append("and then none of these can be placed next:")
        lines += [f"  {op}" for op in self.stuck_on]
        return "\n".join(lines)


class _Entry:
    """A node of the doubly linked event list: the invocation or the completion of `op`."""

    __slots__ = ("op", "index", "is_call", "match", "prev", "next")

    def __init__(self, op: Operation | None, index: int, is_call: bool) -> None:
        self.op = op
        self.index = index
        self.is_call = is_call
        self.match: _Entry | None = None  # the call's completion entry (None for unknown outcomes)
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def _lift(call: _Entry) -> None:
    for e in (call, call.match):
        if e is None:
            continue
        assert e.prev is not None
        e.prev.next = e.next
        if e.next is not None:
            e.next.prev = e.prev


def _unlift(call: _Entry) -> None:
    for e in (call.match, call):  # reverse order of _lift
        if e is None:
            continue
        assert e.prev is not None
        e.prev.next = e
        if e.next is not None:
            e.next.prev = e


def _event_list(ops: Sequence[Operation]) -> _Entry:
    """The head sentinel of the event list; at equal times completions come first (they did not overlap)."""
    events: list[tuple[float, int, int, _Entry]] = []
    for i, op in enumerate(ops):
        call = _Entry(op, i, True)
        events.append((op.invoke_s, 1, i, call))
        if op.complete_s is not None:
            if op.complete_s < op.invoke_s:
                raise ValueError(f"operation completes before it is invoked: {op}")
            ret = _Entry(op, i, False)
            call.match = ret
            events.append((op.complete_s, 0, i, ret))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    head = _Entry(None, -1, False)
    prev = head
    for _, _, _, e in events:
        prev.next = e
        e.prev = prev
        prev = e
    return head


def version_ceiling(op: Operation) -> int | None:
    """The highest version the register may have before `op` takes effect, if `op`'s result pins one.

    Versions never decrease, so once the state's version is past a pending operation's ceiling, no
    linearization can place that operation any more (the search prunes there).
    """
    if not op.known:
        return None
    match op.kind:
        case Kind.READ:
            return op.version
        case Kind.WRITE:
            return None if op.version is None else op.version - 1
        case Kind.CAS:
            return op.expected_version if op.succeeded else None


@dataclass(slots=True)
class _Frame:
    """One level of the depth-first search: the candidates at this point and the next one to try."""

    candidates: list[_Entry]
    tried: int
    placed: _Entry | None  # the operation linearized to reach this level (None at the root)
    state_before: RegisterState  # the state before `placed`


def _candidate_entries(head: _Entry) -> list[_Entry]:
    """Invocations met before the first completion: completed operations first, then unknown ones."""
    known: list[_Entry] = []
    unknown: list[_Entry] = []
    e = head.next
    while e is not None and e.is_call:
        assert e.op is not None
        (known if e.op.known else unknown).append(e)
        e = e.next
    return known + unknown


def check(operations: Iterable[Operation], initial: RegisterState, explored_max: int = EXPLORED_MAX) -> CheckResult:
    """Is the history linearizable for a register starting in `initial`? (CheckBudgetExceeded past `explored_max`.)"""
    ops = list(operations)
    for op in ops:
        if op.kind is not Kind.READ and op.value is None:
            raise ValueError(f"a {op.kind.value} needs the value it writes: {op}")
        if op.kind is Kind.CAS and op.expected_version is None:
            raise ValueError(f"a cas needs its expected version: {op}")
    known_total = known_left = sum(1 for op in ops if op.known)
    unknown = len(ops) - known_total
    head = _event_list(ops)
    # (ceiling, index) of the operations not yet linearized whose results pin a version ceiling
    ceilings = sorted((c, i) for i, c in enumerate(map(version_ceiling, ops)) if c is not None)

    state = initial
    linearized = 0  # bit i set: ops[i] is linearized
    seen: set[tuple[int, RegisterState]] = {(0, initial)}
    frames = [_Frame(_candidate_entries(head), 0, None, initial)]
    best_placed, best_state = -1, initial
    best_prefix: list[Operation] = []
    best_stuck: list[Operation] = []

    while known_left > 0:
        frame = frames[-1]
        advanced = False
        while frame.tried < len(frame.candidates):
            entry = frame.candidates[frame.tried]
            frame.tried += 1
            cand = entry.op
            assert cand is not None
            new_state = step(state, cand)
            # An unknown operation that does not change the state is the same as one that never ran.
            if new_state is None or (not cand.known and new_state == state):
                continue
            key = (linearized | (1 << entry.index), new_state)
            if key in seen:
                continue
            ceiling = version_ceiling(cand)
            if ceiling is not None:
                ceilings.pop(bisect.bisect_left(ceilings, (ceiling, entry.index)))
            if ceilings and new_state.version > ceilings[0][0]:
                if ceiling is not None:
                    bisect.insort(ceilings, (ceiling, entry.index))
                continue  # some pending operation needs an older version: dead end
            if len(seen) >= explored_max:
                raise CheckBudgetExceeded(f"explored {len(seen)} states of {len(ops)} operations")
            seen.add(key)
            _lift(entry)
            frames.append(_Frame(_candidate_entries(head), 0, entry, state))
            linearized, state = key
            if cand.known:
                known_left -= 1
            advanced = True
            break
        if advanced:
            continue
        # Every candidate at this level failed: backtrack.
        placed = known_total - known_left
        if placed > best_placed:
            best_placed, best_state = placed, state
            best_prefix = [f.placed.op for f in frames if f.placed is not None and f.placed.op is not None]
            best_stuck = [e.op for e in frame.candidates if e.op is not None and e.op.known]
            best_stuck += [op for op in _first_completion(head) if op not in best_stuck]
            # Pending operations that need the oldest version: nothing that bumps it may come before them.
            oldest = [ops[i] for c, i in ceilings if c == ceilings[0][0]] if ceilings else []
            best_stuck += [op for op in oldest if op not in best_stuck]
        frames.pop()
        if frame.placed is None:
            return CheckResult(False, len(seen), len(ops), unknown, tuple(best_prefix), tuple(best_stuck), best_state)
        undone = frame.placed.op
        assert undone is not None
        state = frame.state_before
        linearized &= ~(1 << frame.placed.index)
        if undone.known:
            known_left += 1
        ceiling = version_ceiling(undone)
        if ceiling is not None:
            bisect.insort(ceilings, (ceiling, frame.placed.index))
        _unlift(frame.placed)
    return CheckResult(True, len(seen), len(ops), unknown)


def _first_completion(head: _Entry) -> list[Operation]:
    """The operation whose completion ends the candidates (it had to be linearized by then)."""
    e = head.next
    while e is not None and e.is_call:
        e = e.next
    return [] if e is None or e.op is None else [e.op]


class History:
    """Records operations from several threads: `invoke` before the call, `complete` / `fail` / `unknown` after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, Operation] = {}
        self._done: list[Operation] = []
        self._next_id = 0
        self._clock = time.monotonic

    def invoke(self, process: int, kind: Kind, value: bytes | None = None, expected_version: int | None = None) -> int:
        with self._lock:
            op_id = self._next_id
            self._next_id += 1
            self._pending[op_id] = Operation(
                op_id, process, kind, self._clock(), None, value=value, expected_version=expected_version
            )
            return op_id

    def complete(
        self, op_id: int, value: bytes | None = None, version: int | None = None, succeeded: bool | None = None
    ) -> Operation:
        """The operation returned: a read's (value, version); a write's / cas's new version; a cas's failure."""
        now = self._clock()
        with self._lock:
            op = self._pending.pop(op_id)
            if op.kind is Kind.READ:
                done = replace(op, complete_s=now, value=value, version=version)
            elif op.kind is Kind.WRITE:
                done = replace(op, complete_s=now, version=version)
            else:
                if succeeded is None:
                    self._pending[op_id] = op
                    raise ValueError("a completed cas either succeeded or failed")
                done = replace(op, complete_s=now, version=version if succeeded else None, succeeded=succeeded)
            self._done.append(done)
            return done

    def unknown(self, op_id: int) -> Operation:
        """The outcome is unknown: it may take effect at any time after its invocation, or never."""
        with self._lock:
            op = self._pending.pop(op_id)
            self._done.append(op)
            return op

    def drop(self, op_id: int) -> None:
        """Forget an operation that certainly had no effect (e.g. a read that failed)."""
        with self._lock:
            del self._pending[op_id]

    def operations(self) -> list[Operation]:
        """Finished operations plus still-pending ones (as unknown), in invocation order."""
        with self._lock:
            return sorted([*self._done, *self._pending.values()], key=lambda op: op.id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._done)
