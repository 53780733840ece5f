"""The fault campaign's checkers on made-up histories (no hosts needed): each anomaly they name is found,
and a correct history passes. The workloads themselves run in tests/test_faults_short.py (root only)."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from tests.faults import locks_check, sessions_workload
from tests.faults.cluster import leader_of
from tests.faults.register import with_retries
from tests.faults.sessions_check import expired_while_active
from tests.faults.workloads import MIX, WORKLOADS, available, resolve


def _acquire(holder: str, zxid: int, at_s: float) -> dict[str, Any]:
    return {"p": 0, "k": "acquire", "i": at_s, "c": at_s + 0.01, "session": "0x1", "holder": holder,
            "zxid": zxid, "lowest": True}  # fmt: skip


def _act(holder: str, zxid: int, at_s: float, path: str) -> dict[str, Any]:
    return {"p": 0, "k": "act", "i": at_s, "c": at_s + 0.01, "session": "0x1", "holder": holder, "zxid": zxid,
            "path": f"/lock-acts/{path}", "ok": True}  # fmt: skip


def _history() -> tuple[dict[int, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Holder a (worker 1) acts at zxids 5 and 6; b (worker 2) acquires at pzxid 8 and acts at 9."""
    records = {
        1: [_acquire("a", 4, 1.0), _act("a", 5, 1.1, "act-1"), _act("a", 6, 1.2, "act-2")],
        2: [_acquire("b", 8, 2.0), _act("b", 9, 2.1, "act-3")],
    }
    acts = [{"path": "act-1", "zxid": 5, "holder": "a"}, {"path": "act-2", "zxid": 6, "holder": "a"},
            {"path": "act-3", "zxid": 9, "holder": "b"}]  # fmt: skip
    return records, acts


def test_disjoint_tenures_pass() -> None:
    records, acts = _history()
    checked = locks_check.check(records, acts)
    assert checked.anomalies == [] and checked.operations == 5


def test_an_act_of_a_holder_after_the_next_holder_started_is_two_holders() -> None:
    records, acts = _history()
    acts.append({"path": "act-4", "zxid": 10, "holder": "a"})  # a's unknown-outcome act that took effect late
    checked = locks_check.check(records, acts)
    assert checked.anomalies == ["two_holders"]
    assert "b (worker 2, session 0x1) holds from zxid 8, while a (worker 1" in checked.explanation


def test_an_acknowledged_act_missing_from_the_cluster_is_lost() -> None:
    records, acts = _history()
    assert locks_check.check(records, acts[:2]).anomalies == ["acked_act_lost"]


def test_an_act_by_nobody_who_acquired_is_outside_every_tenure() -> None:
    records, acts = _history()
    acts.append({"path": "act-5", "zxid": 7, "holder": "ghost"})
    assert locks_check.check(records, acts).anomalies == ["act_outside_tenure"]


def test_a_holder_acting_after_its_client_said_suspended_breaks_its_own_rule() -> None:
    records, acts = _history()
    records[1].insert(2, {"p": 0, "k": "suspended", "i": 1.15, "c": 1.15, "session": "0x1"})
    assert locks_check.check(records, acts).anomalies == ["acted_after_losing_session"]


def test_an_ephemeral_of_an_expired_session_is_found_by_its_worker_or_after_the_run() -> None:
    expired = {"p": 100000, "k": "expired", "i": 3.0, "c": None, "session": "0x7", "why": "SessionExpiredError",
               "f": 3.0}  # fmt: skip
    seen = {"p": 100001, "k": "after_expiry", "i": 3.5, "c": 3.6, "session": "0x7", "left": ["w1-3"]}
    assert sessions_workload.check({1: [expired]}, []).anomalies == []
    assert sessions_workload.check({1: [expired, seen]}, []).anomalies == ["ephemeral_outlived_session"]
    after = [{"node": "198.18.29.11:2181", "path": "w1-3", "owner": "0x7"}]
    checked = sessions_workload.check({1: [expired]}, after)
    assert checked.anomalies == ["ephemeral_outlived_session"] and "198.18.29.11:2181 lists w1-3" in checked.explanation


def test_lock_nodes_read_before_the_workers_stop_name_the_worker_whose_session_holds_each() -> None:
    """A stuck lock as data: the lowest node belongs to worker 2's session, whose last line is its release
    that failed (so it does not know it still holds); the other node's session no worker logged."""
    records = {
        1: [_acquire("a", 4, 1.0)],
        2: [{"p": 1, "k": "release", "i": 2.5, "c": None, "session": "0x2", "holder": "n-0000000003",
             "why": "ConnectionLoss"}],
    }  # fmt: skip
    nodes = [
        {"node": "n-0000000003", "czxid": 12, "owner": "0x2"},
        {"node": "n-0000000007", "czxid": 20, "owner": "0x9"},
    ]
    lines = locks_check.describe_lock_nodes(nodes, records).splitlines()
    assert lines[1:] == [
        "  n-0000000003 (czxid 12) owned by 0x2: worker 2's session, whose last line is release of n-0000000003 "
        "at 2.500",
        "  n-0000000007 (czxid 20) owned by 0x9: a session no worker logged",
    ]
    assert locks_check.describe_lock_nodes([], records) == "lock nodes before the workers stopped: none"


def test_the_leader_is_the_one_node_leading_with_a_majority_on_its_term() -> None:
    def node(role: str, term: int) -> dict[str, Any]:
        return {"role": role, "term": term, "leader": 0, "commit": 5, "applied": 5}

    assert leader_of({1: node("leader", 3), 2: node("follower", 3), 3: None}) == 1
    assert leader_of({1: node("leader", 3), 2: node("follower", 2), 3: None}) is None  # no majority on term 3
    assert leader_of({1: node("leader", 3), 2: node("leader", 2), 3: node("follower", 3)}) is None  # two say so


def test_a_read_back_retries_a_connection_loss_and_returns_what_it_read() -> None:
    """Run 33 of the long campaign: the leader missed its check-quorum deadline on the loaded machine after
    the last heal, the election ended every connection, and the ephemerals' read-back failed with
    ConnectionLoss (finish_failed). A read-back now retries, bounded, as any ZooKeeper client must."""
    answers: list[object] = [ConnectionLoss(), ConnectionLoss(), {"w1-3": 7}]

    def read() -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert with_retries(read, attempts=3) == {"w1-3": 7}
    answers[:] = [ConnectionLoss(), ConnectionLoss()]
    with pytest.raises(ConnectionLoss):
        with_retries(read, attempts=2)


def test_workloads_by_name_and_the_mix_is_drawn_from_the_seed() -> None:
    assert set(WORKLOADS) >= {"register", "lock", "election", "sessions"}
    drawn = {resolve(MIX, seed).name for seed in range(40)}
    assert drawn == set(available()) and set(available()) >= {"register", "lock", "election", "sessions"}
    assert [resolve(MIX, s).name for s in range(10)] == [resolve(MIX, s).name for s in range(10)]
    with pytest.raises(ValueError, match="unknown workload 'nope': one of register, lock"):
        resolve("nope", 1)


def test_a_write_answered_only_after_a_partition_healed_does_not_prove_its_session_was_served() -> None:
    """From a run: a create waited 2 s on a cut-off node, went through after the heal, and the leader, which
    had not heard from the session for longer than its timeout, expired it 0.26 s later."""
    waited = {"p": 1, "k": "create", "i": 5.73, "c": 7.735, "ok": True}
    expired = {"p": 1, "k": "expired", "i": 7.996, "c": None, "why": "SessionExpiredError", "f": 7.996}
    assert expired_while_active({1: [waited, expired]}, timeout_s=2.0, margin_s=0.5) == []
    prompt = {"p": 1, "k": "create", "i": 7.6, "c": 7.7, "ok": True}
    assert len(expired_while_active({1: [prompt, expired]}, timeout_s=2.0, margin_s=0.5)) == 1
