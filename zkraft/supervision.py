"""What `zkraft up` needs to restart a failed child: its back-off and the tail of its log.

A child (quorum node or broker) that exits unexpectedly is restarted with the
same command after a delay that doubles with each failure in a row, from
RESTART_DELAY_INITIAL_S up to RESTART_DELAY_MAX_S, as systemd's
`Restart=on-failure` with a growing `RestartSec` would: a child that fails at
once on every start (a damaged file it cannot get past, a port someone else
took) is retried without spinning, and one that fails once in a long while is
back within a second. A child that stayed up RESTART_HEALTHY_AFTER_S counts
as healthy again, so its next failure starts over at the initial delay.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

RESTART_DELAY_INITIAL_S = 1.0
RESTART_DELAY_MAX_S = 30.0
RESTART_HEALTHY_AFTER_S = 60.0
# Doubling stops well before the float overflows, whatever the failure count.
RESTART_DOUBLINGS_MAX = 30

LOG_TAIL_LINES = 10
# Only the end of a log is read: a child's log may be gigabytes.
LOG_TAIL_BYTES_MAX = 64 * 1024
# A structured log line carries a traceback in one field; cut it so that the report stays readable.
LOG_TAIL_LINE_CHARS_MAX = 500


@dataclass(slots=True)
class RestartBackoff:
    """The delay before the next restart of one child, from its failures in a row."""

    initial_s: float = RESTART_DELAY_INITIAL_S
    max_s: float = RESTART_DELAY_MAX_S
    healthy_after_s: float = RESTART_HEALTHY_AFTER_S
    failures_in_a_row: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError(f"restart delays: need 0 < initial ({self.initial_s}) <= max ({self.max_s})")
        if self.healthy_after_s <= 0:
            raise ValueError(f"restart healthy_after_s must be > 0, got {self.healthy_after_s}")

    def delay_after_exit(self, up_for_s: float) -> float:
        """Count the exit of a child that ran `up_for_s` seconds; return how long to wait before restarting it."""
        if up_for_s >= self.healthy_after_s:
            self.failures_in_a_row = 0
        doublings = min(self.failures_in_a_row, RESTART_DOUBLINGS_MAX)
        self.failures_in_a_row += 1
        return min(self.max_s, self.initial_s * 2**doublings)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last `lines` non-empty lines of the file at `path` (cut to a readable width); [] if it cannot be read."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - LOG_TAIL_BYTES_MAX))
            data = handle.read(LOG_TAIL_BYTES_MAX)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    if size > LOG_TAIL_BYTES_MAX and "\n" in text:
        text = text.split("\n", 1)[1]  # the first line read is probably cut at its start
    tail = [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]
    return [line if len(line) <= LOG_TAIL_LINE_CHARS_MAX else line[:LOG_TAIL_LINE_CHARS_MAX] + " ..." for line in tail]
