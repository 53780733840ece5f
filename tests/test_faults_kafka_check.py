"""The Kafka fault run's checkers (tests/faults/kafka_check.py) on small histories: each anomaly is named,
and a history without one passes."""

from __future__ import annotations

import struct
from typing import Any

from tests.faults import kafka_check
from tests.faults.kafka_consumer import CGMD_MAGIC, generation_of


def ack(p: int, s: int, part: int, off: int | None) -> dict[str, Any]:
    return {"p": p, "s": s, "part": part, "i": 1.0, "c": None if off is None else 2.0, "off": off}


PRODUCED = [ack(1, 0, 0, 0), ack(1, 1, 1, 0), ack(1, 2, 0, 1), ack(2, 0, 0, 2), ack(1, 3, 1, None)]
FINAL = {0: [(0, "p1-0"), (1, "p1-2"), (2, "p2-0")], 1: [(0, "p1-1")]}


def test_a_clean_history_has_no_anomaly() -> None:
    assert kafka_check.produced(PRODUCED, FINAL) == {}


def test_an_acknowledged_value_missing_from_the_final_read_is_lost() -> None:
    final = {0: [(0, "p1-0"), (2, "p2-0")], 1: [(0, "p1-1")]}
    found = kafka_check.produced(PRODUCED, final)
    assert list(found) == ["lost"] and "p1-2" in found["lost"][0]


def test_an_unacknowledged_value_may_be_missing_or_present() -> None:
    final = {0: FINAL[0], 1: [(0, "p1-1"), (1, "p1-3")]}
    assert kafka_check.produced(PRODUCED, final) == {}


def test_a_value_written_twice_is_duplicated() -> None:
    final = {0: [*FINAL[0], (3, "p2-0")], 1: FINAL[1]}
    assert list(kafka_check.produced(PRODUCED, final)) == ["duplicated"]


def test_a_producers_values_out_of_order_in_a_partition_are_reordered() -> None:
    produced = [ack(1, 0, 0, 1), ack(1, 2, 0, 0)]
    found = kafka_check.produced(produced, {0: [(0, "p1-2"), (1, "p1-0")]})
    assert list(found) == ["reordered"], found


def test_a_value_at_another_offset_than_acknowledged_is_misplaced() -> None:
    found = kafka_check.produced([ack(1, 0, 0, 5)], {0: [(0, "p1-0")]})
    assert list(found) == ["misplaced"]


def test_a_fatal_producer_error_is_reported() -> None:
    found = kafka_check.produced([{"p": 1, "fatal": "_OUT_OF_ORDER_SEQUENCE_NUMBER: x"}], {})
    assert list(found) == ["producer_fatal"]


def test_one_partition_in_two_members_of_one_generation_is_caught() -> None:
    fine = [
        {"m": 1, "ev": "assign", "gen": 1, "parts": [0, 1]},
        {"m": 2, "ev": "assign", "gen": 1, "parts": [2, 3]},
        {"m": 2, "ev": "assign", "gen": 2, "parts": [0, 1]},
    ]
    assert kafka_check.group(fine) == []
    shared = [*fine, {"m": 1, "ev": "assign", "gen": 2, "parts": [1]}]
    assert kafka_check.group(shared) == ["generation 2: partition 1 assigned to members [1, 2]"]


def commit(m: int, gen: int, part: int, offset: int, i: float, c: float) -> dict[str, Any]:
    return {"m": m, "ev": "commit", "gen": gen, "offs": {str(part): offset}, "i": i, "c": c}


def test_a_committed_offset_going_back_is_caught_and_overlapping_commits_are_not() -> None:
    forward = [commit(1, 1, 0, 10, 0.0, 1.0), commit(2, 2, 0, 12, 2.0, 3.0)]
    assert kafka_check.commits(forward) == []
    overlapping = [commit(1, 1, 0, 10, 0.0, 1.0), commit(2, 2, 0, 8, 0.5, 1.5)]
    assert kafka_check.commits(overlapping) == []
    back = [*forward, commit(1, 1, 0, 11, 4.0, 5.0)]
    found = kafka_check.commits(back)
    assert len(found) == 1 and "committed 11" in found[0] and "had committed 12" in found[0]


LINE = (
    "[2026-11-28 05:53:03,123] INFO [Controller id={id} epoch={epoch}] Changed partition t-0 from OfflinePartition "
    "to OnlinePartition with state LeaderAndIsr(leader={leader}, leaderEpoch={le}, isr=List(1, 2), zkVersion={v}) "
    "(state.change.logger)"
)


def test_a_decision_of_an_older_controller_epoch_after_a_newer_ones_is_caught() -> None:
    lines = [LINE.format(id=1, epoch=1, leader=1, le=0, v=0), LINE.format(id=2, epoch=2, leader=2, le=1, v=1)]
    made = kafka_check.decisions(lines)
    assert [d["epoch"] for d in made] == [1, 2]
    assert kafka_check.controller(made, []) == []
    stale = kafka_check.decisions([*lines, LINE.format(id=1, epoch=1, leader=1, le=2, v=2)])
    found = kafka_check.controller(stale, [])
    assert len(found) == 1 and "epoch 1 wrote version 2" in found[0]
    twice = kafka_check.decisions([*lines, LINE.format(id=1, epoch=1, leader=1, le=1, v=1)])
    assert any("decided twice" in line for line in kafka_check.controller(twice, []))


def snap(t: float, epoch: int, leader: int, leader_epoch: int) -> dict[str, Any]:
    state = {"leader": leader, "leader_epoch": leader_epoch, "isr": [leader], "controller_epoch": epoch}
    return {"t": t, "controller_epoch": epoch, "states": {"0": state, "1": None}}


def test_polled_epochs_going_back_are_caught() -> None:
    fine = [snap(1.0, 1, 1, 0), snap(2.0, 2, 2, 1), snap(3.0, 2, 2, 1)]
    assert kafka_check.leader_epochs(fine) == [] and kafka_check.controller([], fine) == []
    back = [*fine, snap(4.0, 1, 1, 0)]
    assert len(kafka_check.leader_epochs(back)) == 2
    assert kafka_check.controller([], back) == ["/controller_epoch went from 2 back to 1 at 4.000"]
    two_leaders = [*fine, snap(4.0, 2, 3, 1)]
    assert "names leaders 2 and 3" in kafka_check.leader_epochs(two_leaders)[0]


def test_two_brokers_leading_one_epoch_or_an_epoch_going_back_are_caught() -> None:
    line = "[2026-11-28 05:53:03,123] INFO [Broker id={b}] Leader t-0 starts at leader epoch {e} from offset 5 ..."
    fine = {1: [line.format(b=1, e=0), line.format(b=1, e=2)], 2: [line.format(b=2, e=1)]}
    assert kafka_check.leader_starts(fine) == []
    twice = {**fine, 3: [line.format(b=3, e=1)]}
    assert kafka_check.leader_starts(twice) == ["t-0: brokers [2, 3] each led leader epoch 1"]
    back = {1: [line.format(b=1, e=2), line.format(b=1, e=1)]}
    assert kafka_check.leader_starts(back) == ["broker 1 led t-0 at leader epoch 1 after 2"]


def test_the_generation_is_read_from_librdkafkas_group_metadata() -> None:
    assert generation_of(CGMD_MAGIC + struct.pack("=i", 7) + b"rest") == 7
    assert generation_of(b"something else") is None
