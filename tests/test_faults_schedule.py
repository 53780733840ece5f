"""The fault campaign's pure parts (no root needed): schedules replay from their seed, every fault holds
longer than the session and election timeouts, and the workers' lines become the checker's operations."""

from __future__ import annotations

import pytest

from tests.faults.campaign import ELECTION_TIMEOUT_S, FAULT_KINDS, SESSION_S, operations, schedule
from tests.faults.sessions_check import expired_while_active
from tests.linearizability import Kind, RegisterState, check


def test_a_schedule_is_a_function_of_its_seed() -> None:
    assert schedule(7, faults=3) == schedule(7, faults=3)
    assert len({tuple(schedule(seed, faults=3)) for seed in range(20)}) > 1
    assert [f.kind for f in schedule(7, ("split", "kill"))] == ["split", "kill"]


def test_the_replay_command_of_a_run_draws_its_schedule_again() -> None:
    for seed in range(50):
        drawn = schedule(seed, faults=2)
        assert schedule(seed, tuple(f.kind for f in drawn)) == drawn


def test_every_fault_outlasts_the_session_and_election_timeouts() -> None:
    for seed in range(200):
        for fault in schedule(seed, faults=2):
            assert fault.kind in FAULT_KINDS and fault.target in {"leader", "follower"}
            assert fault.hold_s > max(SESSION_S, ELECTION_TIMEOUT_S), fault


def test_an_unknown_fault_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown fault kind 'flood'"):
        schedule(1, ("split", "flood"))


def test_worker_lines_become_operations_with_unknown_outcomes_kept() -> None:
    records = {
        1: [
            {"p": 100000, "k": "write", "i": 1.0, "c": 1.1, "v": "w1-1", "ver": 1, "ok": True},
            {"p": 100000, "k": "cas", "i": 2.0, "c": None, "v": "w1-2", "ev": 1, "why": "ConnectionLoss", "f": 2.5},
        ],
        2: [
            {"p": 200000, "k": "read", "i": 1.5, "c": 1.6, "v": "w1-1", "ver": 1},
            {"p": 200000, "k": "cas", "i": 3.0, "c": 3.1, "v": "w2-2", "ev": 0, "ok": False},
        ],
    }
    ops = operations(records)
    assert [op.kind for op in ops] == [Kind.WRITE, Kind.READ, Kind.CAS, Kind.CAS]
    unknown = ops[2]
    assert not unknown.known and unknown.succeeded is None and unknown.version is None
    assert ops[3].succeeded is False and ops[1].value == b"w1-1"
    assert check(ops, RegisterState(b"init", 0)).linearizable
    stale = {**records, 3: [{"p": 300000, "k": "read", "i": 4.0, "c": 4.1, "v": "init", "ver": 0}]}
    assert not check(operations(stale), RegisterState(b"init", 0)).linearizable


def test_an_expiry_learned_soon_after_an_acknowledged_write_is_an_anomaly_and_a_late_one_is_not() -> None:
    ack = {"p": 1, "k": "write", "i": 9.9, "c": 10.0, "v": "w1-1", "ver": 1, "ok": True}
    soon = {"p": 1, "k": "cas", "i": 10.1, "c": None, "v": "w1-2", "ev": 1, "why": "SessionExpiredError", "f": 10.2}
    burst = {**soon, "i": 10.3, "f": 10.3}
    late = {**soon, "i": 12.4, "f": 12.5}
    found = expired_while_active({1: [ack, soon, burst]}, timeout_s=2.0, margin_s=0.5)
    assert len(found) == 1 and "worker 1" in found[0] and "0.20 s after" in found[0]
    assert expired_while_active({1: [ack, late]}, timeout_s=2.0, margin_s=0.5) == []
