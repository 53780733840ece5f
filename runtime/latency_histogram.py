"""A latency histogram cheap enough for a hot path: fixed buckets, one list of counts, plain arithmetic.

Recording a value is a `bisect` over the bucket bounds and a few integer or float additions (about
0.2 µs; bench/metrics_cost.py measures it), where prometheus_client's Histogram.observe takes a lock
and costs several times that. Nothing is computed until someone asks: a scrape turns the counts into
Prometheus's cumulative `_bucket` series (runtime.latency_families), ZooKeeper's `mntr` into its
avg/min/max/cnt/sum and percentiles (`quantile`).

One writer at a time, no lock (STYLE 3): a reader on another thread may see a value counted in its
bucket and not yet in `total`, which a scrape tolerates; the count is the sum of the buckets, so the
`+Inf` bucket and `_count` always agree.

The buckets are the same for every histogram, in seconds: 1, 1.5, 2, 3, 5 and 7 per decade from 10 µs
to 10 s, then +Inf. A quantile read from them is off by at most a bucket's width (a factor of 1.5),
and interpolation within the bucket usually does much better; etcd's own fsync histogram
(`etcd_disk_wal_fsync_duration_seconds`) doubles from 1 ms, too coarse for a disk that syncs in 100 µs.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

BUCKET_BOUNDS_S: tuple[float, ...] = (
    *(float(f"{mantissa}e{exponent}") for exponent in range(-5, 1) for mantissa in (1, 1.5, 2, 3, 5, 7)),
    10.0,
)


def _bound_in(bound_s: float, unit_s: float) -> float:
    value = round(bound_s / unit_s, 6)
    return int(value) if value.is_integer() else value


class LatencyHistogram:
    """Durations in the unit the caller measures in (`unit_s` seconds: 1e-9 for perf_counter_ns, 1e-3
    for milliseconds), so a hot path records what its clock gives, without a conversion.

    `counts[i]` holds the values in (bounds[i-1], bounds[i]] (Prometheus's `le`); the last, those above
    every bound. `min_value`/`max_value` are since the last `reset_extremes` (ZooKeeper's `srst`)."""

    __slots__ = ("unit_s", "bounds", "counts", "total", "min_value", "max_value")

    def __init__(self, unit_s: float) -> None:
        self.unit_s = unit_s
        self.bounds: list[float] = [_bound_in(bound, unit_s) for bound in BUCKET_BOUNDS_S]
        self.counts = [0] * (len(self.bounds) + 1)
        self.total: float = 0
        self.min_value: float = math.inf
        self.max_value: float = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        if value > self.max_value:
            self.max_value = value
        if value < self.min_value:
            self.min_value = value

    def observe_many(self, value: float, times: int) -> None:
        """`times` values of `value` (a batch of proposals committed together): one bucket lookup."""
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times
        if value > self.max_value:
            self.max_value = value
        if value < self.min_value:
            self.min_value = value

    def snapshot(self) -> tuple[tuple[int, ...], float]:
        """The counts per bucket and the total, now."""
        return tuple(self.counts), self.total

    def reset_extremes(self) -> None:
        self.min_value = math.inf
        self.max_value = 0

    def quantile(self, counts: Sequence[int], q: float) -> float:
        """The q-quantile (0 < q <= 1) of the values `counts` holds (a snapshot, or the difference of two),
        in the histogram's unit, interpolated linearly within its bucket (as PromQL's histogram_quantile);
        NaN when there are none. A value above every bound reads as the largest value seen, if known."""
        count = sum(counts)
        if count == 0:
            return math.nan
        rank = q * count
        below = 0
        for index, in_bucket in enumerate(counts):
            if in_bucket and below + in_bucket >= rank:
                lower = self.bounds[index - 1] if index else 0
                if index < len(self.bounds):
                    upper = self.bounds[index]
                else:
                    upper = max(self.max_value, lower)
                return lower + (upper - lower) * (rank - below) / in_bucket
            below += in_bucket
        return self.bounds[-1]  # not reached: the counts sum to `count`
