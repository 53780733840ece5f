"""The latency histograms (runtime.latency_histogram) and what scrapes and mntr read of them: Prometheus
histograms and ZooKeeper-style summaries (runtime.latency_families), parsed back with prometheus_client's
own text parser; mntr's figures since `srst` (zkemu.latency_summaries); reads and updates told apart
as ZooKeeper tells them (zkemu.server_stats)."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from quorum.latency_metrics import PROPOSAL_APPLY, PROPOSAL_COMMIT, proposal_applied
from runtime.latency_families import SUMMARY_WINDOW_S, SummaryWindow, histogram_family, summary_family
from runtime.latency_histogram import BUCKET_BOUNDS_S, LatencyHistogram
from zkemu.latency_summaries import MntrCounter, mntr_keys
from zkemu.server_stats import ServerStats


class _Families(Collector):
    def __init__(self, *families: Metric) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return list(self._families)


def scrape(*families: Metric) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The families as a scrape shows them, read back by prometheus_client's parser."""
    registry = CollectorRegistry()
    registry.register(_Families(*families))
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_buckets_are_1_1_5_2_3_5_7_per_decade_from_10_us_to_10_s() -> None:
    assert BUCKET_BOUNDS_S[:7] == (1e-05, 1.5e-05, 2e-05, 3e-05, 5e-05, 7e-05, 0.0001)
    assert BUCKET_BOUNDS_S[-2:] == (7.0, 10.0) and len(BUCKET_BOUNDS_S) == 37
    assert LatencyHistogram(unit_s=1e-9).bounds[:3] == [10_000, 15_000, 20_000]  # integers for perf_counter_ns


def test_a_value_on_a_bound_counts_in_that_bound_and_beyond_every_bound_in_inf() -> None:
    histogram = LatencyHistogram(unit_s=1e-3)
    for value_ms in (0.1, 0.1000001, 12_000.0, 0.0):
        histogram.observe(value_ms)
    samples = scrape(histogram_family("x_seconds", "x", histogram))
    assert samples[("x_seconds_bucket", (("le", "1e-05"),))] == 1  # the 0
    assert samples[("x_seconds_bucket", (("le", "0.0001"),))] == 2  # le is inclusive: 0.1 ms
    assert samples[("x_seconds_bucket", (("le", "0.00015"),))] == 3
    assert samples[("x_seconds_bucket", (("le", "10.0"),))] == 3
    assert samples[("x_seconds_bucket", (("le", "+Inf"),))] == 4 == samples[("x_seconds_count", ())]
    assert samples[("x_seconds_sum", ())] == pytest.approx(12.0002)


def test_quantiles_interpolate_within_a_bucket_and_the_top_reads_the_largest_value() -> None:
    histogram = LatencyHistogram(unit_s=1e-9)
    assert math.isnan(histogram.quantile(histogram.counts, 0.5))
    for _ in range(10):
        histogram.observe(1_200_000)  # 1.2 ms: in (1 ms, 1.5 ms]
    assert histogram.quantile(histogram.counts, 0.5) == pytest.approx(1_250_000)
    assert histogram.quantile(histogram.counts, 1.0) == pytest.approx(1_500_000)
    histogram.observe_many(30_000_000_000, 10)  # 30 s, above every bound
    assert histogram.quantile(histogram.counts, 1.0) == 30_000_000_000
    assert sum(histogram.counts) == 20 and histogram.total == 10 * 1_200_000 + 10 * 30_000_000_000


def test_a_summary_has_zookeepers_samples_and_its_quantiles_cover_the_last_ten_minutes() -> None:
    clock = FakeClock()
    histogram = LatencyHistogram(unit_s=1e-3)
    window = SummaryWindow(histogram, clock=clock)

    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return scrape(summary_family("readlatency", "readlatency", window, (0.5, 0.9, 0.99), unit_s=1e-3))

    assert math.isnan(samples()[("readlatency", (("quantile", "0.5"),))])
    for _ in range(100):
        histogram.observe(40.0)  # slow requests
    first = samples()
    assert first[("readlatency", (("quantile", "0.99"),))] == pytest.approx(49.8)  # in (30, 50] ms: 30 + 20 x 0.99
    clock.now_s += 61
    samples()  # a scrape a minute later marks the counts: the window will start there once it is old enough
    for _ in range(100):
        histogram.observe(0.2)  # fast ones after the mark
    clock.now_s += SUMMARY_WINDOW_S / 2
    assert samples()[("readlatency", (("quantile", "0.99"),))] > 30  # both, until the mark is ten minutes old
    clock.now_s += SUMMARY_WINDOW_S / 2
    later = samples()
    assert later[("readlatency", (("quantile", "0.5"),))] == pytest.approx(0.175)  # in (0.15, 0.2] ms
    assert later[("readlatency", (("quantile", "0.99"),))] <= 0.2  # the slow ones aged out
    # _count and _sum never forget (Prometheus computes rates from them).
    assert later[("readlatency_count", ())] == 200
    assert later[("readlatency_sum", ())] == pytest.approx(100 * 40.0 + 100 * 0.2)


def test_mntr_figures_are_zookeepers_and_count_from_the_last_reset() -> None:
    histogram = LatencyHistogram(unit_s=1e-3)
    counter = MntrCounter("readlatency", histogram, advanced=True)
    assert counter.values() == dict.fromkeys(mntr_keys("readlatency", advanced=True), 0) | {"avg_readlatency": 0.0}
    for value_ms in (3.0, 7.0, 0.4, 2.6):
        histogram.observe(value_ms)
    values = counter.values()
    assert (values["avg_readlatency"], values["min_readlatency"], values["max_readlatency"]) == (3.25, 0, 7)
    assert (values["cnt_readlatency"], values["sum_readlatency"]) == (4, 13)
    assert 0 <= values["p50_readlatency"] <= values["p95_readlatency"] <= values["p999_readlatency"] == 7
    counter.reset()
    assert counter.values()["cnt_readlatency"] == 0 and counter.values()["max_readlatency"] == 0
    histogram.observe(5.0)
    assert counter.values() == {
        "avg_readlatency": 5.0,
        "min_readlatency": 5,
        "max_readlatency": 5,
        "cnt_readlatency": 1,
        "sum_readlatency": 5,
        "p50_readlatency": 5,
        "p95_readlatency": 5,
        "p99_readlatency": 5,
        "p999_readlatency": 5,
    }
    assert sum(histogram.counts) == 5  # what /metrics reads is untouched by the reset
    assert list(MntrCounter("fsynctime", histogram, advanced=False).values()) == list(mntr_keys("fsynctime", False))


def test_replies_count_as_updates_when_zookeeper_gives_the_request_a_transaction() -> None:
    stats = ServerStats()
    connection = stats.connection_opened("127.0.0.1:50000")
    for operation in ("CREA", "DELE", "SETD", "SETA", "CHEC", "MULT", "CLOSE"):
        connection.answered(operation, 7, 2.0)
    for operation in ("GETD", "EXIS", "GETC", "PING", "SYNC", "MLTR", "SETW"):
        connection.answered(operation, 7, 0.5)
    assert sum(stats.update_latency.counts) == 7 and stats.update_latency.total == 14.0
    assert sum(stats.read_latency.counts) == 7 and stats.read_latency.total == 3.5
    assert stats.latency.count == 14  # avg_latency still counts every request


def test_a_proposal_of_several_commands_counts_once_per_command() -> None:
    commit_before, apply_before = sum(PROPOSAL_COMMIT.counts), sum(PROPOSAL_APPLY.counts)
    proposal_applied(proposed_ns=1_000_000, committed_ns=2_200_000, applied_ns=2_500_000, commands=3)
    assert sum(PROPOSAL_COMMIT.counts) == commit_before + 3 and sum(PROPOSAL_APPLY.counts) == apply_before + 3
    # 1.2 ms to commit, 1.5 ms to apply: both in the (1 ms, 1.5 ms] bucket.
    bucket = PROPOSAL_COMMIT.bounds.index(1_500_000)
    assert PROPOSAL_COMMIT.counts[bucket] >= 3 and PROPOSAL_APPLY.counts[bucket] >= 3
