"""What every benchmark here shares: JSON-lines output and the statistics of its samples."""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def emit(record: dict[str, Any]) -> None:
    """One figure per line, flushed at once so a partial run still leaves its results."""
    print(json.dumps(record), flush=True)


def percentile_ms(sorted_ns: Sequence[int], q: float) -> float | None:
    """Nearest-rank percentile of sorted nanosecond samples, in milliseconds."""
    if not sorted_ns:
        return None
    rank = max(1, math.ceil(q * len(sorted_ns)))
    return round(sorted_ns[rank - 1] / 1e6, 3)


def median_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def process_cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds the processes `pids` have used so far, all their threads included
    (/proc/<pid>/stat fields 14 and 15, utime and stime, in clock ticks). A process that is gone counts 0."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    total_ticks = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        # The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        total_ticks += int(fields[11]) + int(fields[12])
    return total_ticks / ticks_per_s
