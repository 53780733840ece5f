"""What metrics cost on the hot paths: produce throughput and ZooKeeper create latency with metrics on
(every broker and quorum node serving /metrics, scraped every second, harsher than Prometheus's default
15 s; quorum leaders timing each proposal for zkraft_raft_proposal_*_duration_seconds) against off (no
metrics port, no proposal timing), same run, alternating which goes first.

    python3 bench/metrics_cost.py [--rounds 2] [--records 100000] [--creates 2000]

Each round starts a fresh cluster (3 quorum nodes, 3 brokers, loopback) per mode and measures:
* `produce_records_per_s`: one librdkafka producer, 100-byte records, acks=all, RF 3, 3 partitions;
* `create_p50_ms` / `create_p99_ms`: kazoo, one create at a time (100-byte values);
* `broker_cpu_s_per_million_records` and `node_cpu_us_per_create`: the brokers' CPU over the produce and
  the quorum nodes' over the creates (scrapes included when on), per unit of work: the figures other load
  moves least.
Also `counter_ns`: the per-record cost of the broker's plain-int counters against prometheus_client's
Counter.inc (why the hot paths keep plain ints), and `latency_ns`: what the latency histograms cost
per value (runtime.latency_histogram against prometheus_client's Histogram.observe), per ZooKeeper
reply (its read or update histogram, on whatever the metrics port), per WAL fsync (two clock reads
and a value, also always on: mntr's fsynctime) and per proposal on the leader (metrics on only). The
micro figures are CPU time of this thread (time.thread_time), which other processes on a loaded
machine move less than wall time. With metrics on, each round also gives `scrape_cost`: per kind of
process (broker, quorum node), the CPU milliseconds one scrape costs it (its CPU over back-to-back scrapes
of the idle cluster, less its idle CPU over as long a window) and the answer's size. Output: JSON lines,
then a `summary` with medians, on/off ratios of the medians and the median of each round's own on/off
ratio (`on_over_off_paired`; target: within 3%), and each kind's share of a core at Prometheus's default
15 s scrape interval. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from bench.figures import process_cpu_seconds  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import LOOPBACK, MeteredQuorum, free_ports, wait_for_leader  # noqa: E402

SCRAPE_INTERVAL_S = 1.0
# Back-to-back scrapes per process for scrape_cpu_ms: enough CPU to read well above /proc's 10 ms tick.
SCRAPE_COST_SAMPLES = 50
# A loaded machine can take longer than the harness's 30 s session timeout to elect a leader while the
# brokers start too: the quorum gets this long on its own first.
QUORUM_START_TIMEOUT_S = 180.0
VALUE = b"x" * 100


class _MeteredCluster(KafkaCluster):
    def __init__(self, root: Path) -> None:
        super().__init__(root, brokers=3)
        self.quorum = MeteredQuorum(self.root / "quorum", 3, self.quorum.properties)
        self.metrics_ports = dict(zip(self.broker_ids, free_ports(3), strict=True))

    def write_config(self, broker_id: int) -> Path:
        path = super().write_config(broker_id)
        with path.open("a", encoding="utf-8") as out:
            out.write(f"metrics.host={LOOPBACK}\nmetrics.port={self.metrics_ports[broker_id]}\n")
        return path

    def metrics_urls(self) -> list[str]:
        ports = [*self.metrics_ports.values(), *self.quorum.metrics_ports.values()]
        return [f"http://{LOOPBACK}:{port}/metrics" for port in ports]

    def scraped_processes(self) -> list[tuple[str, str, int]]:
        """(kind, /metrics URL, pid) of every broker and quorum node."""
        brokers = [
            ("broker", f"http://{LOOPBACK}:{port}/metrics", self.pid(b)) for b, port in self.metrics_ports.items()
        ]
        nodes = [
            ("quorum_node", f"http://{LOOPBACK}:{port}/metrics", self.quorum.pid(n))
            for n, port in self.quorum.metrics_ports.items()
        ]
        return [(kind, url, pid) for kind, url, pid in brokers + nodes if pid is not None]


class _Scraper(threading.Thread):
    """Scrapes every URL every SCRAPE_INTERVAL_S until stopped (a bounded loop: stop() ends it)."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__(daemon=True)
        self.urls, self.scrapes, self.failures = urls, 0, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(SCRAPE_INTERVAL_S):
            for url in self.urls:
                try:
                    with urllib.request.urlopen(url, timeout=5) as response:
                        response.read()
                    self.scrapes += 1
                except OSError:
                    self.failures += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)


def scrape_cpu_ms(url: str, pid: int, samples: int = SCRAPE_COST_SAMPLES) -> tuple[float, int]:
    """CPU milliseconds one scrape costs the scraped process, and the size of its answer: the process's CPU
    over `samples` back-to-back scrapes, less what it spent idle over a window as long right after (its
    ticker, heartbeats, session pings)."""
    cpu_before, started = process_cpu_seconds([pid]), time.perf_counter()
    size = 0
    for _ in range(samples):
        with urllib.request.urlopen(url, timeout=5) as response:
            size = len(response.read())
    scraping_cpu, window_s = process_cpu_seconds([pid]) - cpu_before, time.perf_counter() - started
    idle_before = process_cpu_seconds([pid])
    time.sleep(window_s)  # the idle window the scrapes are compared with
    idle_cpu = process_cpu_seconds([pid]) - idle_before
    return max(0.0, scraping_cpu - idle_cpu) * 1000 / samples, size


def scrape_costs(cluster: _MeteredCluster) -> dict[str, Any]:
    """Per kind of process, the median CPU ms per scrape and bytes per answer, on the idle cluster."""
    by_kind: dict[str, list[tuple[float, int]]] = {}
    for kind, url, pid in cluster.scraped_processes():
        by_kind.setdefault(kind, []).append(scrape_cpu_ms(url, pid))
    return {
        kind: {
            "cpu_ms_per_scrape": round(statistics.median(cpu for cpu, _ in costs), 2),
            "bytes": statistics.median(size for _, size in costs),
        }
        for kind, costs in by_kind.items()
    }


def produce_rate(cluster: KafkaCluster, topic: str, records: int) -> float:
    producer = Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all", "linger.ms": 5, "batch.size": 262144}
    )
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return records / elapsed


def create_latencies_ms(cluster: KafkaCluster, creates: int, leader_id: int) -> list[float]:
    # One server, the leader, in both modes: kazoo given the whole connect string picks a server at random, and a
    # create through a follower (forwarded) takes ~0.5 ms more than through the leader, which swamped the
    # difference this bench measures (on/off create p50 1.25-1.29 with a random server per cluster).
    zk = KazooClient(hosts=cluster.quorum.zk_address(leader_id), timeout=10.0)
    zk.start(timeout=30)
    try:
        zk.ensure_path("/bench")
        samples = []
        for i in range(creates):
            started = time.perf_counter_ns()
            zk.create(f"/bench/n{i}", VALUE)
            samples.append((time.perf_counter_ns() - started) / 1e6)
        return sorted(samples)
    finally:
        zk.stop()
        zk.close()


def one_round(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"metrics-{mode}-") as root:
        cluster = _MeteredCluster(Path(root)) if mode == "on" else KafkaCluster(Path(root), brokers=3)
        with cluster:
            cluster.quorum.start_all()
            leader_id, _ = asyncio.run(wait_for_leader(cluster.quorum.addresses, QUORUM_START_TIMEOUT_S))
            for broker_id in cluster.broker_ids:
                cluster.start_broker(broker_id, wait=False)
            cluster.wait_registered(cluster.broker_ids, QUORUM_START_TIMEOUT_S)
            cluster.wait_controller(QUORUM_START_TIMEOUT_S)
            cluster.create_topic("bench", partitions=3, replication_factor=3)
            costs = scrape_costs(cluster) if isinstance(cluster, _MeteredCluster) else None
            scraper = _Scraper(cluster.metrics_urls()) if isinstance(cluster, _MeteredCluster) else None
            if scraper is not None:
                scraper.start()
            produce_rate(cluster, "bench", args.records // 10)  # warm-up
            brokers = [pid for pid in map(cluster.pid, cluster.broker_ids) if pid is not None]
            nodes = [pid for pid in map(cluster.quorum.pid, cluster.quorum.addresses) if pid is not None]
            brokers_cpu_s = process_cpu_seconds(brokers)
            rate = produce_rate(cluster, "bench", args.records)
            brokers_cpu_s = process_cpu_seconds(brokers) - brokers_cpu_s
            nodes_cpu_s = process_cpu_seconds(nodes)
            latencies = create_latencies_ms(cluster, args.creates, leader_id)
            nodes_cpu_s = process_cpu_seconds(nodes) - nodes_cpu_s
            if scraper is not None:
                scraper.stop()
    return {
        "mode": mode,
        "produce_records_per_s": round(rate),
        "create_p50_ms": round(latencies[len(latencies) // 2], 3),
        "create_p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
        # CPU per unit of work, which the machine's other load moves much less than rates and latencies.
        "broker_cpu_s_per_million_records": round(brokers_cpu_s * 1e6 / args.records, 3),
        "node_cpu_us_per_create": round(nodes_cpu_s * 1e6 / args.creates, 1),
        "scrapes": scraper.scrapes if scraper else 0,
        "scrape_failures": scraper.failures if scraper else 0,
        **({"scrape_cost": costs} if costs else {}),
    }


def counter_cost_ns() -> dict[str, float]:
    from prometheus_client import CollectorRegistry, Counter

    from broker.broker_stats import BrokerTopicStats

    stats = BrokerTopicStats()
    counter = Counter("m", "m", ["topic"], registry=CollectorRegistry())

    def plain() -> None:
        counters = stats.topic("t")
        counters.messages_in += 10
        counters.bytes_in += 1000

    def locked() -> None:
        counter.labels("t").inc(10)
        counter.labels("t").inc(1000)

    loops = 200_000
    return {
        "plain_int_ns": round(min(timeit.repeat(plain, number=loops, repeat=5)) / loops * 1e9, 1),
        "prometheus_counter_ns": round(min(timeit.repeat(locked, number=loops, repeat=5)) / loops * 1e9, 1),
    }


def _thread_ns_per_call(fn: Any, loops: int = 200_000) -> float:
    return round(min(timeit.repeat(fn, number=loops, repeat=5, timer=time.thread_time)) / loops * 1e9, 1)


def latency_cost_ns() -> dict[str, float]:
    """Per-operation cost of the latency histograms on the paths they sit on (see the module doc)."""
    from prometheus_client import CollectorRegistry, Histogram

    from quorum.latency_metrics import WAL_FSYNC, proposal_applied
    from runtime.latency_histogram import LatencyHistogram
    from zkemu.latency_summaries import UPDATE_OPERATIONS
    from zkemu.server_stats import ServerStats

    histogram = LatencyHistogram(unit_s=1e-3)
    prometheus = Histogram("h", "h", registry=CollectorRegistry())
    server = ServerStats()
    connection = server.connection_opened("127.0.0.1:1")

    def reply_histogram() -> None:  # the line ConnectionStats.answered gained
        (server.update_latency if "GETD" in UPDATE_OPERATIONS else server.read_latency).observe(0.734)

    def fsync_timing() -> None:  # WriteAheadLog.wait_durable around its fdatasync
        started_ns = time.perf_counter_ns()
        WAL_FSYNC.observe(time.perf_counter_ns() - started_ns)

    def proposal_timing() -> None:  # the leader: the clock at append, at the Ready's commit, at apply
        proposed_ns = time.perf_counter_ns()
        committed_ns = time.perf_counter_ns()
        proposal_applied(proposed_ns, committed_ns, time.perf_counter_ns(), 1)

    return {
        "histogram_observe": _thread_ns_per_call(lambda: histogram.observe(0.734)),
        "prometheus_histogram_observe": _thread_ns_per_call(lambda: prometheus.observe(0.000734)),
        "zk_reply_accounting_total": _thread_ns_per_call(lambda: connection.answered("GETD", 5, 0.734)),
        "zk_reply_histogram": _thread_ns_per_call(reply_histogram),
        "wal_fsync_timing": _thread_ns_per_call(fsync_timing),
        "proposal_timing": _thread_ns_per_call(proposal_timing),
        "empty_call": _thread_ns_per_call(lambda: None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--creates", type=int, default=2000)
    args = parser.parse_args(argv)
    print(json.dumps({"counter_ns": counter_cost_ns()}), flush=True)
    print(json.dumps({"latency_ns": latency_cost_ns()}), flush=True)
    results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for round_index in range(args.rounds):
        order = ("off", "on") if round_index % 2 == 0 else ("on", "off")
        for mode in order:
            result = one_round(mode, args)
            results[mode].append(result)
            print(json.dumps({"round": round_index, **result}), flush=True)
    summary: dict[str, Any] = {"summary": True}
    for key in (
        "produce_records_per_s",
        "create_p50_ms",
        "create_p99_ms",
        "broker_cpu_s_per_million_records",
        "node_cpu_us_per_create",
    ):
        on = statistics.median(r[key] for r in results["on"])
        off = statistics.median(r[key] for r in results["off"])
        paired = statistics.median(a[key] / b[key] for a, b in zip(results["on"], results["off"], strict=True))
        summary[key] = {
            "on": on,
            "off": off,
            "on_over_off": round(on / off, 4) if off else None,
            "on_over_off_paired": round(paired, 4),
        }
    for kind in ("broker", "quorum_node"):
        costs = [r["scrape_cost"][kind]["cpu_ms_per_scrape"] for r in results["on"] if kind in r.get("scrape_cost", {})]
        if costs:
            cpu_ms = statistics.median(costs)
            summary[f"{kind}_cpu_ms_per_scrape"] = cpu_ms
            summary[f"{kind}_core_share_at_15s_scrapes"] = round(cpu_ms / 1000 / 15, 6)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
