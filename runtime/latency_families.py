"""A LatencyHistogram (runtime.latency_histogram) as Prometheus reads it, built at scrape time.

* `histogram_family`: a Prometheus histogram in seconds (`<name>_bucket{le=...}`, `_sum`, `_count`),
  which PromQL's histogram_quantile turns into p50/p99 over any range (etcd's disk histograms).
* `summary_family`: a Prometheus summary as ZooKeeper's PrometheusMetricsProvider publishes its
  ServerMetrics summaries (`readlatency{quantile="0.5"}`, `_count`, `_sum`; in ms). Its quantiles
  cover the last ten minutes or so, as the Java client's Summary does (maxAgeSeconds 600): a
  `SummaryWindow` keeps a snapshot of the counts at most every minute, taken by the scrapes
  themselves, and reads the quantiles from the counts since the one ten minutes back.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from prometheus_client.core import HistogramMetricFamily, SummaryMetricFamily
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from runtime.latency_histogram import BUCKET_BOUNDS_S, LatencyHistogram

# The Java Prometheus client's Summary defaults, which ZooKeeper keeps (maxAgeSeconds, and one of its
# five age buckets as the step).
SUMMARY_WINDOW_S = 600.0
SUMMARY_MARK_INTERVAL_S = 60.0


def histogram_family(name: str, documentation: str, histogram: LatencyHistogram) -> HistogramMetricFamily:
    counts, total = histogram.snapshot()
    buckets: list[tuple[str, float]] = []
    cumulative = 0
    for bound_s, in_bucket in zip(BUCKET_BOUNDS_S, counts, strict=False):
        cumulative += in_bucket
        buckets.append((floatToGoString(bound_s), cumulative))
    buckets.append(("+Inf", cumulative + counts[-1]))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=total * histogram.unit_s)


class SummaryWindow:
    """Which of a histogram's values a summary's quantiles cover: those since a mark at least
    SUMMARY_WINDOW_S old (the newest such), or all of them until there is one. Scrapes are its only
    clock ticks: marks are taken when scraped, so a process nobody scrapes keeps its first mark."""

    def __init__(self, histogram: LatencyHistogram, clock: Callable[[], float] = time.monotonic) -> None:
        self.histogram = histogram
        self._clock = clock
        self._marks: deque[tuple[float, tuple[int, ...]]] = deque([(clock(), (0,) * len(histogram.counts))])

    def recent(self, counts: Sequence[int]) -> list[int]:
        """The counts of the window ending now, given the histogram's `counts` now."""
        now = self._clock()
        marks = self._marks
        while len(marks) >= 2 and now - marks[1][0] >= SUMMARY_WINDOW_S:
            marks.popleft()
        base = marks[0][1]
        if now - marks[-1][0] >= SUMMARY_MARK_INTERVAL_S:
            marks.append((now, tuple(counts)))
        return [current - before for current, before in zip(counts, base, strict=True)]


def summary_family(
    name: str, documentation: str, window: SummaryWindow, quantiles: Sequence[float], unit_s: float
) -> SummaryMetricFamily:
    """`quantiles` of the recent values, with the count and sum of them all, in `unit_s` seconds."""
    histogram = window.histogram
    counts, total = histogram.snapshot()
    scale = histogram.unit_s / unit_s
    family = SummaryMetricFamily(name, documentation, count_value=sum(counts), sum_value=total * scale)
    recent = window.recent(counts)
    # The Java client writes the quantiles first, then _count and _sum.
    family.samples[0:0] = [
        Sample(name, {"quantile": floatToGoString(q)}, histogram.quantile(recent, q) * scale) for q in quantiles
    ]
    return family
