"""`zkraft up`'s restart back-off and log tail (zkraft/supervision.py): pure, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkraft.supervision import (
    LOG_TAIL_BYTES_MAX,
    LOG_TAIL_LINE_CHARS_MAX,
    RESTART_DELAY_INITIAL_S,
    RESTART_DELAY_MAX_S,
    RESTART_HEALTHY_AFTER_S,
    RestartBackoff,
    log_tail,
)


def test_the_delay_doubles_with_each_failure_in_a_row_up_to_the_maximum() -> None:
    backoff = RestartBackoff()
    delays = [backoff.delay_after_exit(up_for_s=0.5) for _ in range(8)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert (RESTART_DELAY_INITIAL_S, RESTART_DELAY_MAX_S) == (1.0, 30.0)
    assert backoff.failures_in_a_row == 8


def test_a_child_that_stayed_up_long_enough_starts_over_at_the_initial_delay() -> None:
    backoff = RestartBackoff()
    for _ in range(4):
        backoff.delay_after_exit(up_for_s=1.0)
    assert backoff.delay_after_exit(up_for_s=RESTART_HEALTHY_AFTER_S - 1) == 16.0
    assert backoff.delay_after_exit(up_for_s=RESTART_HEALTHY_AFTER_S) == 1.0
    assert backoff.failures_in_a_row == 1


def test_thousands_of_failures_do_not_overflow() -> None:
    backoff = RestartBackoff()
    for _ in range(5000):
        assert backoff.delay_after_exit(up_for_s=0.0) <= RESTART_DELAY_MAX_S


@pytest.mark.parametrize(("initial_s", "max_s", "healthy_s"), [(0.0, 30.0, 60.0), (40.0, 30.0, 60.0), (1.0, 30.0, 0)])
def test_bad_delays_are_refused(initial_s: float, max_s: float, healthy_s: float) -> None:
    with pytest.raises(ValueError, match="restart"):
        RestartBackoff(initial_s=initial_s, max_s=max_s, healthy_after_s=healthy_s)


def test_log_tail_is_the_last_lines_cut_to_a_readable_width(tmp_path: Path) -> None:
    log = tmp_path / "broker-1.log"
    long_line = "x" * (LOG_TAIL_LINE_CHARS_MAX + 50)
    log.write_text("".join(f"line {i}\n" for i in range(20)) + "\n" + long_line + "\n", encoding="utf-8")
    tail = log_tail(log)
    assert tail[:-1] == [f"line {i}" for i in range(11, 20)]
    assert tail[-1] == "x" * LOG_TAIL_LINE_CHARS_MAX + " ..."


def test_log_tail_reads_only_the_end_of_a_large_log_and_survives_a_missing_one(tmp_path: Path) -> None:
    log = tmp_path / "quorum-1.log"
    with open(log, "wb") as handle:
        handle.write(b"a" * (LOG_TAIL_BYTES_MAX * 4) + b"\n\xff\xfe not utf-8\nlast\n")
    assert log_tail(log, lines=3) == ["\ufffd\ufffd not utf-8", "last"]
    assert log_tail(tmp_path / "missing.log") == []
