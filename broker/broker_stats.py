"""The broker's counters on the hot paths, as plain ints (Kafka's BrokerTopicStats, ReplicaManager's ISR
meters, RequestMetrics): an increment is one dict lookup and an integer add, no lock. broker/metrics.py
reads them at scrape time on the event loop, which owns them (docs/STYLE principle 3).

prometheus_client's labelled Counter.inc takes a label lookup and a lock per call (bench/metrics_cost.py's
`counter_ns` measures both ways: over ten times these adds on the test machine); here none of it runs
per request.
"""

from __future__ import annotations

import time


class TopicCounters:
    """One topic's MessagesInPerSec, BytesInPerSec (leader appends) and BytesOutPerSec (consumer fetches)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0


class BrokerTopicStats:
    """Per-topic counters; the all-topics figure is their sum (Kafka's allTopicsStats)."""

    __slots__ = ("topics", "isr_shrinks", "isr_expands")

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)


class RequestStats:
    """kafka.network:type=RequestMetrics: requests and their total time, by request name."""

    __slots__ = ("counts", "total_ns")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.total_ns: dict[str, int] = {}

    def record(self, request: str, started_ns: int) -> None:
        elapsed_ns = time.perf_counter_ns() - started_ns
        self.counts[request] = self.counts.get(request, 0) + 1
        self.total_ns[request] = self.total_ns.get(request, 0) + elapsed_ns


# The broker process's request counters (one broker per process; the Kafka listeners record into it).
REQUEST_STATS = RequestStats()
