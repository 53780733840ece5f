"""Which old segments retention deletes (Kafka 2.x `Log.deleteOldSegments`).

A segment may go only if it is not the active one and every offset in it is
below the high watermark (a consumer may not have read what is above it, and a
follower may still need it). Among those, oldest first:

* by time (`retention.ms` >= 0): while the segment's largest record timestamp
  is older than now - retention.ms;
* by size (`retention.bytes` >= 0): while dropping the segment still leaves the
  log at least `retention.bytes` large.

The larger of the two counts wins. Whole segments only: the log start offset
moves to the base offset of the first segment kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class SegmentView(Protocol):
    @property
    def size(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


def deletable_count(
    segments: Sequence[SegmentView],
    *,
    high_watermark: int,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
) -> tuple[int, str]:
    """(how many of the oldest segments retention deletes, why: "retention.ms" / "retention.bytes" / "")."""
    candidates = 0
    for segment in segments[:-1]:  # never the active segment
        if segment.next_offset > high_watermark:
            break
        candidates += 1
    by_time = 0
    if retention_ms >= 0:
        horizon = now_ms - retention_ms
        while by_time < candidates and segments[by_time].largest_timestamp < horizon:
            by_time += 1
    by_size = 0
    if retention_bytes >= 0:
        excess = sum(s.size for s in segments) - retention_bytes
        while by_size < candidates and excess - segments[by_size].size >= 0:
            excess -= segments[by_size].size
            by_size += 1
    if by_time == 0 and by_size == 0:
        return 0, ""
    return (by_time, "retention.ms") if by_time >= by_size else (by_size, "retention.bytes")
