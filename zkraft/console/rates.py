"""Produce and fetch rates from the brokers' /metrics, sampled in the background for the charts and topic list.

The brokers publish the JMX exporter's BrokerTopicMetrics counters (`kafka_server_brokertopicmetrics_messagesin_total`,
`_bytesin_total`, `_bytesout_total`, per topic and without a label for all topics) and `kafka_log_log_size` per
partition replica (broker/metrics.py). A rate is the difference of two samples over their time apart, as
Prometheus's rate() computes it; a counter that went down (a restarted broker) counts from zero.
"""

from __future__ import annotations

import collections
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

BTM = "kafka_server_brokertopicmetrics_"
COUNTERS = ("messagesin", "bytesin", "bytesout")
LOG_SIZE = "kafka_log_log_size"
SAMPLE_INTERVAL_S = 5.0
# The charts show the last 15 minutes: 180 samples 5 s apart.
HISTORY_SAMPLES_MAX = 180
SCRAPE_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Scrape:
    """One scrape of every broker, summed: counters per topic ("" is all topics), log size per partition."""

    at_s: float  # time.monotonic()
    wall_s: float  # time.time(), for the chart's axis
    counters: dict[tuple[str, str], float]  # (counter, topic) -> value
    log_size_bytes: dict[tuple[str, int], float] = field(default_factory=dict)  # largest replica's size
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Rates:
    """Per second between two scrapes: messages in, bytes in (produce) and bytes out (fetch)."""

    messages_in: float
    bytes_in: float
    bytes_out: float


def parse_metrics(text: str, counters: dict[tuple[str, str], float], sizes: dict[tuple[str, int], float]) -> None:
    """Add one broker's BrokerTopicMetrics counters into `counters`; keep each partition's largest replica size."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == LOG_SIZE:
                key = (sample.labels.get("topic", ""), int(sample.labels.get("partition", "0")))
                sizes[key] = max(sizes.get(key, 0.0), sample.value)
                continue
            if not sample.name.startswith(BTM) or not sample.name.endswith("_total"):
                continue
            counter = sample.name[len(BTM) : -len("_total")]
            if counter in COUNTERS:
                key = (counter, sample.labels.get("topic", ""))
                counters[key] = counters.get(key, 0.0) + sample.value


def scrape(addresses: Sequence[str], timeout_s: float = SCRAPE_TIMEOUT_S) -> Scrape:
    counters: dict[tuple[str, str], float] = {}
    sizes: dict[tuple[str, int], float] = {}
    errors = []
    for address in addresses:
        try:
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout_s) as response:
                parse_metrics(response.read().decode("utf-8", "replace"), counters, sizes)
        except (OSError, ValueError) as error:
            errors.append(f"{address}: {error}")
    return Scrape(time.monotonic(), time.time(), counters, sizes, tuple(errors))


def rates_between(old: Scrape, new: Scrape, topic: str = "") -> Rates:
    elapsed_s = new.at_s - old.at_s
    if elapsed_s <= 0:
        return Rates(0.0, 0.0, 0.0)

    def rate(counter: str) -> float:
        now = new.counters.get((counter, topic), 0.0)
        before = old.counters.get((counter, topic), 0.0)
        return (now - before if now >= before else now) / elapsed_s

    return Rates(rate("messagesin"), rate("bytesin"), rate("bytesout"))


class RateSampler:
    """A daemon thread scraping the brokers every SAMPLE_INTERVAL_S; keeps the last HISTORY_SAMPLES_MAX scrapes."""

    def __init__(self, addresses: Sequence[str], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.addresses = tuple(addresses)
        self.interval_s = interval_s
        self._history: collections.deque[Scrape] = collections.deque(maxlen=HISTORY_SAMPLES_MAX)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-rates", daemon=True)

    def start(self) -> None:
        if self.addresses:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=SCRAPE_TIMEOUT_S * (len(self.addresses) + 1))

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = scrape(self.addresses)
            with self._lock:
                self._history.append(sample)
            self._stop.wait(self.interval_s)

    def history(self) -> list[Scrape]:
        with self._lock:
            return list(self._history)

    def latest_rates(self, topic: str = "") -> Rates | None:
        history = self.history()
        if len(history) < 2:
            return None
        return rates_between(history[-2], history[-1], topic)

    def latest(self) -> Scrape | None:
        history = self.history()
        return history[-1] if history else None
