"""The delivery checker must catch each anomaly it claims to, and nothing in a clean history."""

from __future__ import annotations

import pytest

from tests.delivery_checker import Reordering, check, make_value, parse_value

A0, A1, A2, A3 = (make_value("a", i) for i in range(4))
B0, B1 = (make_value("b", i) for i in range(2))


def clean_history() -> tuple[list[tuple[int, int, bytes]], dict[int, list[tuple[int, bytes]]]]:
    acked = [(0, 0, A0), (0, 1, B0), (0, 2, A1), (1, 0, A2), (1, 1, B1)]
    read = {0: [(0, A0), (1, B0), (2, A1)], 1: [(0, A2), (1, B1)]}
    return acked, read


def test_values_round_trip_and_foreign_values_parse_to_none() -> None:
    assert parse_value(make_value("p-3", 17)) == ("p-3", 17)
    assert parse_value(b"no separator") is None
    assert parse_value(b"x:notanumber") is None
    assert parse_value(b"\xff\xfe") is None
    with pytest.raises(ValueError):
        make_value("a:b", 1)


def test_a_clean_history_has_no_anomaly() -> None:
    acked, read = clean_history()
    report = check(acked, read)
    assert report.ok, report.summary()
    assert report.counts() == {
        "acked": 5, "read": 5, "lost": 0, "duplicated": 0, "reordered": 0, "moved": 0, "unexpected": 0,
    }  # fmt: skip


def test_records_read_but_never_acknowledged_are_not_anomalies() -> None:
    # A produce that timed out may still have been written: reading it is fine.
    acked, read = clean_history()
    read[0].append((3, A3))
    assert check(acked, read).ok


def test_an_acknowledged_record_missing_from_the_read_is_lost() -> None:
    acked, read = clean_history()
    read[0] = [(0, A0), (1, A1)]  # B0 truncated away, A1 moved down
    report = check(acked, read)
    assert not report.ok
    assert report.lost == ((0, 1, B0),)
    assert report.moved == ((0, 2, 1, A1),)


def test_a_record_read_only_in_another_partition_is_lost_from_its_own() -> None:
    acked, read = clean_history()
    read[0].remove((1, B0))
    read[1].append((2, B0))
    report = check(acked, read)
    assert (0, 1, B0) in report.lost


def test_a_whole_missing_partition_loses_everything_acknowledged_there() -> None:
    acked, read = clean_history()
    del read[1]
    assert {(p, v) for p, _, v in check(acked, read).lost} == {(1, A2), (1, B1)}


def test_a_value_read_twice_is_duplicated() -> None:
    acked, read = clean_history()
    read[0].append((3, A0))  # a retried batch written twice
    report = check(acked, read)
    assert not report.ok
    assert report.duplicated == ((A0, 2),)
    assert report.reordered == (), "a duplicate alone is not a reordering"
    assert report.lost == ()


def test_a_value_in_two_partitions_is_duplicated() -> None:
    acked, read = clean_history()
    read[1].append((2, A0))
    assert check(acked, read).duplicated == ((A0, 2),)


def test_a_producers_values_out_of_send_order_are_reordered() -> None:
    acked = [(0, 0, A1), (0, 1, B0), (0, 2, A0)]
    read = {0: [(0, A1), (1, B0), (2, A0)]}
    report = check(acked, read)
    assert not report.ok
    assert report.reordered == (Reordering(partition=0, producer="a", earlier_seq=0, later_seq=1, offset=2),)
    assert report.lost == () and report.duplicated == ()


def test_interleaving_of_different_producers_is_not_a_reordering() -> None:
    read = {0: [(0, B1), (1, A0), (2, A1)]}
    assert check([], read).reordered == ()


def test_order_is_per_partition() -> None:
    # a:3 in partition 0 and a:0 in partition 1 are not compared.
    read = {0: [(0, A3)], 1: [(0, A0), (1, A1)]}
    assert check([], read).reordered == ()


def test_an_acknowledged_offset_holding_another_value_is_moved() -> None:
    acked, read = clean_history()
    read[0] = [(0, A0), (1, A1), (2, B0)]  # both present, at swapped offsets; a:0 < a:1 stays in order
    report = check(acked, read)
    assert not report.ok
    assert {m[3] for m in report.moved} == {B0, A1}
    assert report.lost == ()


def test_foreign_values_are_reported_but_do_not_fail_the_check() -> None:
    acked, read = clean_history()
    read[1].append((2, b"stray"))
    report = check(acked, read)
    assert report.ok
    assert report.unexpected == ((1, 2, b"stray"),)


def test_the_summary_names_counts_and_examples() -> None:
    acked, read = clean_history()
    read[0] = [(0, A0), (1, A0)]
    summary = check(acked, read).summary()
    assert "lost=2" in summary and "duplicated=1" in summary
    assert "lost e.g." in summary and "duplicated e.g." in summary
