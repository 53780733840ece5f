"""ZooKeeper's latency summaries: `readlatency`, `updatelatency` and `fsynctime`, as ZooKeeper 3.9's
ServerMetrics names them, over zkraft's histograms (runtime.latency_histogram).

* readlatency / updatelatency (ServerStats.updateLatency): the time from a request's arrival to its
  reply, in ms; an update is a request ZooKeeper gives a transaction header (a write, a failed write
  included, and the closing of a session), a read any other (pings and syncs too). Recorded by the
  wire front end (zkemu.server_stats), for its connections, as `avg_latency` is.
* fsynctime (FileTxnLog.commit): each fdatasync of the quorum's write-ahead log, in ms
  (quorum.facade.WAL_FSYNC: the process's).

`mntr` prints each as ZooKeeper's default metrics provider does (AvgMinMaxCounter: avg_, min_, max_,
cnt_, sum_; the ADVANCED ones, read and update latency, add AvgMinMaxPercentileCounter's p50_, p95_,
p99_, p999_), counting from the last `srst`. /metrics publishes them as its Prometheus provider does:
summaries with quantiles 0.5 (and 0.9, 0.99 for ADVANCED), `_count` and `_sum`, never reset
(zkemu.metrics). zkraft's clock is finer than ZooKeeper's whole milliseconds, so avg_ and sum_ keep
the fractions that ZooKeeper's sum of truncated values drops; min_, max_ and the percentiles are
whole ms, as ZooKeeper prints them, the percentiles read from the histogram's buckets.
"""

from __future__ import annotations

import math

from runtime.latency_histogram import LatencyHistogram

# The wire front end's operation names (zkemu.jute_codec.OPERATION_NAMES) of the requests ZooKeeper's
# PrepRequestProcessor gives a TxnHeader: updatelatency; every other request is a read.
UPDATE_OPERATIONS = frozenset({"CREA", "DELE", "SETD", "SETA", "CHEC", "MULT", "RECO", "CLOSE"})

# ServerMetrics' DetailLevel: ADVANCED summaries carry more quantiles (PrometheusSummary) and the
# percentiles in mntr (AvgMinMaxPercentileCounter).
BASIC_QUANTILES = (0.5,)
ADVANCED_QUANTILES = (0.5, 0.9, 0.99)
_MNTR_FIGURES = ("avg_", "min_", "max_", "cnt_", "sum_")
_MNTR_PERCENTILES = (("p50_", 0.5), ("p95_", 0.95), ("p99_", 0.99), ("p999_", 0.999))
_MS_PER_S = 1000.0
# (name, ADVANCED) in the order ZooKeeper 3.9.5's mntr prints them.
MNTR_SUMMARIES = (("fsynctime", False), ("updatelatency", True), ("readlatency", True))


def mntr_keys(name: str, advanced: bool) -> tuple[str, ...]:
    percentiles = tuple(prefix for prefix, _q in _MNTR_PERCENTILES) if advanced else ()
    return tuple(prefix + name for prefix in (*_MNTR_FIGURES, *percentiles))


MNTR_SUMMARY_KEYS = tuple(key for name, advanced in MNTR_SUMMARIES for key in mntr_keys(name, advanced))


class MntrCounter:
    """One summary's mntr figures since the last reset (`srst`); the histogram itself only grows, as
    Prometheus needs, so a reset keeps the counts it then had to subtract."""

    __slots__ = ("name", "histogram", "advanced", "_base")

    def __init__(self, name: str, histogram: LatencyHistogram, advanced: bool) -> None:
        self.name = name
        self.histogram = histogram
        self.advanced = advanced
        self._base: tuple[tuple[int, ...], float] = ((0,) * len(histogram.counts), 0)  # since start

    @property
    def quantiles(self) -> tuple[float, ...]:
        return ADVANCED_QUANTILES if self.advanced else BASIC_QUANTILES

    def reset(self) -> None:
        self._base = self.histogram.snapshot()
        self.histogram.reset_extremes()

    def values(self) -> dict[str, object]:
        """avg_<name> ... sum_<name> (and p50_ ... p999_ when ADVANCED), in ms, as mntr prints them."""
        histogram = self.histogram
        counts, total = histogram.snapshot()
        base_counts, base_total = self._base
        since = [now - before for now, before in zip(counts, base_counts, strict=True)]
        count = sum(since)
        to_ms = histogram.unit_s * _MS_PER_S
        total_ms = (total - base_total) * to_ms
        name = self.name
        min_ms = int(histogram.min_value * to_ms) if count and histogram.min_value != math.inf else 0
        max_ms = int(histogram.max_value * to_ms) if count else 0
        values: dict[str, object] = {
            # AvgMinMaxCounter.getAvg: 4 decimals (HALF_UP), 0.0 with no values.
            f"avg_{name}": round(total_ms / count, 4) + 0.0 if count else 0.0,
            f"min_{name}": min_ms,
            f"max_{name}": max_ms,
            f"cnt_{name}": count,
            f"sum_{name}": int(total_ms),
        }
        if self.advanced:
            for prefix, q in _MNTR_PERCENTILES:
                # Read from the buckets; within the whole ms seen, as ZooKeeper's percentiles of whole ms are.
                estimate_ms = _java_round(histogram.quantile(since, q) * to_ms) if count else 0
                values[prefix + name] = min(max(estimate_ms, min_ms), max_ms)
        return values


def _java_round(value: float) -> int:
    """Java's Math.round: half up, where Python's round goes to even."""
    return math.floor(value + 0.5)
