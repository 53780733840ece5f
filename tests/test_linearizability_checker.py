"""The register linearizability checker (tests/linearizability.py) on hand-made and generated histories.

Hand-made histories pin down each rule (real-time order, versions, compare-and-set
outcomes, operations of unknown outcome); generated ones come from a simulated
register whose every operation takes effect at a chosen instant inside its
interval, so they are linearizable by construction, and a read moved to a value
written only after it returned makes them not.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace

import pytest

from tests.linearizability import (
    CheckBudgetExceeded,
    History,
    Kind,
    Operation,
    RegisterState,
    check,
    step,
)

INITIAL = RegisterState(b"init", 0)


class Ops:
    """Builds operations with increasing ids: `r(p, t0, t1, value, version)`, `w(...)`, `cas(...)`."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def _add(self, **fields: object) -> Operation:
        op = Operation(id=len(self.ops), **fields)  # type: ignore[arg-type]
        self.ops.append(op)
        return op

    def r(self, p: int, t0: float, t1: float, value: bytes, version: int | None = None) -> Operation:
        return self._add(process=p, kind=Kind.READ, invoke_s=t0, complete_s=t1, value=value, version=version)

    def w(self, p: int, t0: float, t1: float | None, value: bytes, version: int | None = None) -> Operation:
        return self._add(process=p, kind=Kind.WRITE, invoke_s=t0, complete_s=t1, value=value, version=version)

    def cas(
        self,
        p: int,
        t0: float,
        t1: float | None,
        expected: int,
        value: bytes,
        ok: bool | None,
        version: int | None = None,
    ) -> Operation:
        return self._add(
            process=p, kind=Kind.CAS, invoke_s=t0, complete_s=t1, value=value, expected_version=expected,
            succeeded=ok, version=version,
        )  # fmt: skip


def linearizable(ops: Ops, initial: RegisterState = INITIAL) -> bool:
    return check(ops.ops, initial).linearizable


# ---------------------------------------------------------------- the model


def test_step_is_the_znode_register() -> None:
    op = Ops()
    assert step(INITIAL, op.r(1, 0, 1, b"init", 0)) == INITIAL
    assert step(INITIAL, op.r(1, 0, 1, b"init")) == INITIAL  # version not recorded: not checked
    assert step(INITIAL, op.r(1, 0, 1, b"init", 1)) is None
    assert step(INITIAL, op.w(1, 0, 1, b"a", 1)) == RegisterState(b"a", 1)
    assert step(INITIAL, op.w(1, 0, 1, b"a", 2)) is None  # set returned a version the register cannot have
    assert step(INITIAL, op.cas(1, 0, 1, 0, b"a", True, 1)) == RegisterState(b"a", 1)
    assert step(INITIAL, op.cas(1, 0, 1, 0, b"a", False)) is None  # version matched: it cannot fail
    assert step(INITIAL, op.cas(1, 0, 1, 3, b"a", False)) == INITIAL  # BadVersion: no effect
    assert step(INITIAL, op.cas(1, 0, 1, 3, b"a", True)) is None
    assert step(INITIAL, op.cas(1, 0, None, 0, b"a", None)) == RegisterState(b"a", 1)  # unknown: may apply


# ---------------------------------------------------------------- hand-made histories


def test_empty_and_sequential_histories() -> None:
    assert check([], INITIAL).linearizable
    op = Ops()
    op.r(1, 0, 1, b"init", 0)
    op.w(1, 2, 3, b"a", 1)
    op.r(2, 4, 5, b"a", 1)
    op.cas(2, 6, 7, 1, b"b", True, 2)
    op.cas(1, 8, 9, 1, b"c", False)
    op.r(1, 10, 11, b"b", 2)
    assert linearizable(op)


def test_a_read_after_a_completed_write_must_see_it() -> None:
    op = Ops()
    op.w(1, 0, 1, b"a", 1)
    op.r(2, 2, 3, b"init", 0)  # stale: the write completed before the read began
    result = check(op.ops, INITIAL)
    assert not result.linearizable
    assert "NOT linearizable" in result.explain() and "read -> b'init'" in result.explain()


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    for seen in (b"init", b"a"):
        op = Ops()
        op.w(1, 0, 10, b"a")
        op.r(2, 1, 2, seen)
        assert linearizable(op), seen


def test_no_going_back_once_a_newer_value_was_read() -> None:
    op = Ops()
    op.w(1, 0, 10, b"a")
    op.r(2, 1, 2, b"a")
    op.r(3, 3, 4, b"init")  # began after a read that saw the write: must see it too
    assert not linearizable(op)


def test_concurrent_reads_may_disagree_only_in_a_consistent_order() -> None:
    op = Ops()
    op.w(1, 0, 10, b"a")
    op.r(2, 1, 5, b"a")
    op.r(3, 1, 5, b"init")  # overlaps the other read: linearized before it
    assert linearizable(op)


def test_a_read_of_a_value_nobody_wrote_is_not_linearizable() -> None:
    op = Ops()
    op.w(1, 0, 1, b"a")
    op.r(2, 2, 3, b"ghost")
    assert not linearizable(op)


def test_versions_are_checked_not_only_values() -> None:
    op = Ops()
    op.w(1, 0, 1, b"a", 1)
    op.w(1, 2, 3, b"a", 2)  # same value again: only the version tells the writes apart
    op.r(2, 4, 5, b"a", 1)
    assert not linearizable(op)


def test_two_cas_on_the_same_version_cannot_both_succeed() -> None:
    op = Ops()
    op.cas(1, 0, 5, 0, b"x", True, 1)
    op.cas(2, 0, 5, 0, b"y", True, 1)
    assert not linearizable(op)

    op = Ops()
    op.cas(1, 0, 5, 0, b"x", True, 1)
    op.cas(2, 0, 5, 0, b"y", False)
    op.r(3, 6, 7, b"x", 1)
    assert linearizable(op)


def test_a_cas_that_failed_must_have_seen_another_version() -> None:
    op = Ops()
    op.cas(1, 0, 1, 0, b"x", False)  # nothing else ran: the version was 0, the cas had to succeed
    assert not linearizable(op)

    op = Ops()
    op.w(2, 0, 3, b"a", 1)
    op.cas(1, 1, 2, 0, b"x", False)  # overlaps the write: it may come after it
    assert linearizable(op)


def test_an_unknown_write_may_take_effect_later_or_never() -> None:
    op = Ops()
    op.w(1, 0, None, b"lost")  # ConnectionLoss
    op.r(2, 1, 2, b"init", 0)
    op.r(2, 50, 51, b"lost", 1)  # applied long after the client gave up on it: allowed
    op.r(3, 60, 61, b"lost", 1)
    assert linearizable(op)

    op = Ops()
    op.w(1, 0, None, b"lost")
    op.r(2, 50, 51, b"init", 0)  # never applied: allowed
    assert linearizable(op)


def test_an_unknown_write_cannot_be_seen_before_it_was_invoked() -> None:
    op = Ops()
    op.r(2, 0, 1, b"late", 1)
    op.w(1, 2, None, b"late")
    assert not linearizable(op)


def test_an_unknown_write_takes_effect_at_most_once() -> None:
    op = Ops()
    op.w(1, 0, None, b"u")
    op.r(2, 1, 2, b"u", 1)
    op.w(3, 3, 4, b"b", 2)
    op.r(2, 5, 6, b"u", 3)  # the unknown write cannot apply a second time
    assert not linearizable(op)


def test_an_unknown_cas_counts_only_if_its_version_matched() -> None:
    op = Ops()
    op.w(2, 0, 1, b"a", 1)
    op.cas(1, 2, None, 0, b"x", None)  # expected version 0 is gone: it cannot have applied
    op.r(2, 3, 4, b"x")
    assert not linearizable(op)

    op = Ops()
    op.cas(1, 0, None, 0, b"x", None)
    op.r(2, 3, 4, b"x", 1)
    assert linearizable(op)


def test_many_pending_unknown_writes_do_not_blow_up_the_search() -> None:
    # Twelve writes lost to ConnectionLoss, all pending for the whole history: without pruning the search
    # would try them in every subset and order (~12 * 2**11 states) before each dead end.
    op = Ops()
    for p in range(12):
        op.w(p, 0, None, f"u{p}".encode())
    op.r(20, 1, 2, b"u3", 1)
    op.r(20, 3, 4, b"u7", 2)
    op.w(21, 5, 6, b"k", 3)
    op.r(20, 7, 8, b"u0", 4)
    result = check(op.ops, INITIAL)
    assert result.linearizable and result.explored < 200, result.explain()

    op.r(20, 9, 10, b"u3", 1)  # back to an older version: impossible
    result = check(op.ops, INITIAL)
    assert not result.linearizable and result.explored < 200, result.explain()


def test_equal_timestamps_do_not_overlap() -> None:
    op = Ops()
    op.w(1, 0, 1, b"a", 1)
    op.r(2, 1, 2, b"init", 0)  # began exactly when the write returned: after it
    assert not linearizable(op)


def test_malformed_operations_are_refused() -> None:
    with pytest.raises(ValueError, match="completes before it is invoked"):
        check([Operation(0, 1, Kind.READ, 2.0, 1.0, b"x", 0)], INITIAL)
    with pytest.raises(ValueError, match="needs the value"):
        check([Operation(0, 1, Kind.WRITE, 0.0, 1.0)], INITIAL)
    with pytest.raises(ValueError, match="expected version"):
        check([Operation(0, 1, Kind.CAS, 0.0, 1.0, b"x", succeeded=True)], INITIAL)


# ---------------------------------------------------------------- generated histories


def generated_history(
    rng: random.Random, processes: int, per_process: int, unknown_rate: float, versions: bool = True
) -> list[Operation]:
    """A linearizable history: each operation takes effect at an instant inside its interval.

    An operation of unknown outcome takes effect at any later instant, or never, and its process
    moves on at once; reads of unknown outcome are dropped (they have no effect). `versions=False`:
    reads and writes do not record versions (only compare-and-set outcomes tell versions apart).
    """
    planned: list[tuple[float, int, Kind, float, float, bool, int]] = []  # (effect at, process, kind, ...)
    never = float("inf")
    for p in range(processes):
        t = rng.uniform(0, 1)
        for i in range(per_process):
            invoke, complete = t, t + rng.uniform(0.05, 2.0)
            known = rng.random() >= unknown_rate
            kind = rng.choice([Kind.READ, Kind.READ, Kind.WRITE, Kind.CAS])
            if known:
                effect = rng.uniform(invoke, complete)
            else:
                effect = never if rng.random() < 0.3 else invoke + rng.uniform(0, 20)
            planned.append((effect, p, kind, invoke, complete, known, i))
            t = complete + rng.uniform(0, 0.3)
    ops: list[Operation] = []
    state = INITIAL
    for effect, p, kind, invoke, complete, known, i in sorted(planned, key=lambda x: (x[0], x[1], x[6])):
        value = f"p{p}-{i}".encode()
        end = complete if known else None
        applies = effect != never
        match kind:
            case Kind.READ:
                if known:
                    ops.append(Operation(0, p, kind, invoke, end, state.value, state.version if versions else None))
            case Kind.WRITE:
                if applies:
                    state = RegisterState(value, state.version + 1)
                ops.append(Operation(0, p, kind, invoke, end, value, state.version if known and versions else None))
            case Kind.CAS:
                expected = state.version if rng.random() < 0.6 else max(0, state.version - rng.randint(1, 2))
                ok = applies and expected == state.version
                if ok:
                    state = RegisterState(value, state.version + 1)
                version = state.version if known and ok else None
                ops.append(Operation(0, p, kind, invoke, end, value, version, expected, ok if known else None))
    ops.sort(key=lambda op: op.invoke_s)
    return [replace(op, id=i) for i, op in enumerate(ops)]


@pytest.mark.parametrize("seed", range(40))
def test_generated_histories_are_linearizable(seed: int) -> None:
    rng = random.Random(seed)
    ops = generated_history(
        rng, processes=rng.randint(2, 5), per_process=rng.randint(5, 40), unknown_rate=0.08, versions=seed % 3 != 0
    )
    result = check(ops, INITIAL)
    assert result.linearizable, f"seed {seed}: " + result.explain()


@pytest.mark.parametrize("seed", range(40))
def test_a_read_moved_into_the_future_is_caught(seed: int) -> None:
    rng = random.Random(1000 + seed)
    ops = generated_history(
        rng, processes=rng.randint(2, 5), per_process=rng.randint(5, 40), unknown_rate=0.08, versions=seed % 3 != 0
    )
    # A read that returns what a write invoked only after the read returned: impossible in any order.
    pairs = [
        (r, w)
        for r in ops
        if r.kind is Kind.READ
        for w in ops
        if w.kind is Kind.WRITE and w.known and r.complete_s is not None and w.invoke_s > r.complete_s
    ]
    if not pairs:
        pytest.skip("no read is followed by a completed write in this history")
    r, w = rng.choice(pairs)
    ops[r.id] = replace(r, value=w.value, version=w.version)
    result = check(ops, INITIAL)
    assert not result.linearizable
    assert result.stuck_on, result.explain()


@pytest.mark.parametrize("unknown_rate", [0.03, 0.2])
def test_a_history_of_a_few_hundred_operations_is_checked_in_seconds(unknown_rate: float) -> None:
    rng = random.Random(7)
    ops = generated_history(rng, processes=4, per_process=150, unknown_rate=unknown_rate)
    started = time.monotonic()
    result = check(ops, INITIAL, explored_max=200_000)
    elapsed_s = time.monotonic() - started
    assert result.linearizable, result.explain()
    assert elapsed_s < 20, f"{len(ops)} operations took {elapsed_s:.1f} s ({result.explored} states)"


def test_the_search_is_bounded() -> None:
    ops = generated_history(random.Random(3), processes=4, per_process=20, unknown_rate=0.0)
    with pytest.raises(CheckBudgetExceeded):
        check(ops, INITIAL, explored_max=5)


# ---------------------------------------------------------------- the recorder


def test_history_records_from_several_threads() -> None:
    history = History()
    barrier = threading.Barrier(3)

    def worker(p: int) -> None:
        barrier.wait(timeout=5)
        for i in range(20):
            value = f"{p}-{i}".encode()
            h = history.invoke(p, Kind.WRITE, value=value)
            if i % 7 == 3:
                history.unknown(h)
            else:
                history.complete(h, version=None)

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    ops = history.operations()
    assert len(ops) == 60 and [op.id for op in ops] == list(range(60))
    assert sum(1 for op in ops if not op.known) == 9
    assert all(op.complete_s is None or op.complete_s >= op.invoke_s for op in ops)
    # Writes whose versions were not recorded: any order of them is fine.
    assert check(ops, INITIAL).linearizable


def test_history_results() -> None:
    history = History()
    r = history.invoke(1, Kind.READ)
    done = history.complete(r, value=b"init", version=0)
    assert done.known and done.value == b"init" and done.version == 0
    c = history.invoke(1, Kind.CAS, value=b"x", expected_version=5)
    failed = history.complete(c, succeeded=False, version=9)
    assert failed.succeeded is False and failed.version is None
    pending = history.invoke(2, Kind.WRITE, value=b"y")
    dropped = history.invoke(2, Kind.READ)
    history.drop(dropped)
    assert [op.id for op in history.operations()] == [r, c, pending]  # the pending write counts as unknown
    assert not history.operations()[-1].known
    with pytest.raises(ValueError, match="succeeded or failed"):
        history.complete(history.invoke(3, Kind.CAS, value=b"z", expected_version=0))
    assert check(history.operations(), INITIAL).linearizable
