"""What every benchmark here shares: JSON-lines output and the statistics of its samples."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
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
