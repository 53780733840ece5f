"""Render time of each console page for a cluster with 1,000 partitions (target: under 300 ms each).

    python3 bench/console_bench.py [--partitions 1000] [--topics 10] [--rounds 10] [--no-browser]

Starts `zkraft up` (3 quorum nodes, 3 brokers and the console it starts) in a temporary directory, creates
`--topics` topics sharing `--partitions` partitions (replication factor 2), produces a record to every
partition, lets one consumer group commit on the first topic, waits for two rate samples, then loads every
page `--rounds` times after one warm-up. Records (JSON lines):
* `page`: per page, `server_ms` (the console's Server-Timing: routing, SDK calls and template) and
  `client_ms` (the HTTP request seen from this process), medians and maxima;
* `browser_page`: with Chromium at /usr/bin/chromium (skipped otherwise, or with --no-browser), per page the
  median Navigation Timing `loadEventEnd` (request to page loaded) of 3 loads in headless Chromium;
* `summary`: the slowest page's server and browser medians against the 300 ms target. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import emit  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.test_up_cli import broker_ports, running_up  # noqa: E402

TARGET_MS = 300.0
GROUP = "bench-group"
SAMPLE_WAIT_S = 12.0  # two of the console's 5 s rate samples
BROWSER_LOADS = 3


def pages(topic: str) -> list[str]:
    return [
        "/",
        "/topics",
        f"/topics/{topic}",
        f"/topics/{topic}/messages?mode=latest&limit=20",
        "/groups",
        f"/groups/{GROUP}",
        f"/znodes?path=/brokers/topics/{topic}",
        "/reassignment",
        "/charts",
    ]


def fill(bootstrap: str, topics: int, partitions: int) -> list[str]:
    """Topics sharing `partitions` partitions, a record in each partition, a group committed on the first."""
    from client import Admin, Consumer, NewTopic, Producer

    names = [f"bench-{index}" for index in range(topics)]
    per_topic = partitions // topics
    with Admin(bootstrap, request_timeout_ms=120_000) as admin:
        admin.create_topics([NewTopic(name, per_topic, 2) for name in names], timeout_ms=120_000)

        def all_led() -> bool:
            described = admin.describe_topics(names)
            return all(p.leader >= 0 for t in described for p in t.partitions)

        wait_until(all_led, 120.0, interval_s=0.5, message="partitions without a leader")
    with Producer(bootstrap_servers=bootstrap) as producer:
        for name in names:
            for partition in range(per_topic):
                producer.send(name, value=b'{"bench": true}', partition=partition)
        producer.flush(timeout=120.0)
    consumer = Consumer(names[0], bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest")
    try:
        seen: list[Any] = []

        def read_some() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                seen.extend(batch)
            return len(seen) >= per_topic // 2

        wait_until(read_some, 120.0, message="the bench group read nothing")
        consumer.commit()
    finally:
        consumer.close(autocommit=False)
    return names


def timed_get(url: str) -> tuple[float, float]:
    """(client ms, server ms from Server-Timing) of one GET."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        timing = response.headers.get("Server-Timing", "render;dur=nan")
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    client_ms = (time.perf_counter() - started) * 1000
    return client_ms, float(timing.rsplit("=", 1)[1])


def measure_pages(base: str, paths: list[str], rounds: int) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        timed_get(base + path)  # warm-up: first connections, first metadata
        samples = [timed_get(base + path) for _ in range(rounds)]
        client = [c for c, _ in samples]
        server = [s for _, s in samples]
        record = {
            "record": "page",
            "path": path,
            "rounds": rounds,
            "server_ms_median": round(statistics.median(server), 1),
            "server_ms_max": round(max(server), 1),
            "client_ms_median": round(statistics.median(client), 1),
            "client_ms_max": round(max(client), 1),
        }
        emit(record)
        out.append(record)
    return out


def measure_browser(base: str, paths: list[str], profile: Path) -> list[dict[str, Any]]:
    from tests.browser import CHROMEDRIVER, CHROMIUM, chromium

    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        emit({"record": "browser_page", "skipped": f"no {CHROMIUM} or {CHROMEDRIVER}"})
        return []
    out = []
    with chromium(profile) as driver:
        for path in paths:
            driver.get(base + path)  # warm-up
            loads = []
            for _ in range(BROWSER_LOADS):
                driver.get(base + path)
                loads.append(
                    driver.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd;")
                )
            record = {"record": "browser_page", "path": path, "load_ms_median": round(statistics.median(loads), 1)}
            emit(record)
            out.append(record)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args(argv)
    quorum_base, broker_base = broker_ports(brokers=3)
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        up_args = ("--brokers", "3", "--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
        with running_up(Path(tmp) / "cluster", *up_args, ready_line="zkraft up: running") as up:
            cluster = up.cluster()
            bootstrap = ",".join(b["kafka_address"] for b in cluster["brokers"])
            base = cluster["console_url"].rstrip("/")
            names = fill(bootstrap, args.topics, args.partitions)
            time.sleep(SAMPLE_WAIT_S)  # not synchronisation: the charts need samples 5 s apart to show rates
            paths = pages(names[0])
            emit({"record": "setup", "partitions": args.partitions, "topics": args.topics, "brokers": 3})
            server = measure_pages(base, paths, args.rounds)
            browser = [] if args.no_browser else measure_browser(base, paths, Path(tmp) / "chromium-profile")
    slowest = max(server, key=lambda r: r["server_ms_median"])
    summary: dict[str, Any] = {
        "record": "summary",
        "target_ms": TARGET_MS,
        "slowest_page": slowest["path"],
        "slowest_server_ms_median": slowest["server_ms_median"],
        "pages_under_target": sum(r["server_ms_median"] < TARGET_MS for r in server),
        "pages": len(server),
    }
    if browser:
        slow = max(browser, key=lambda r: r["load_ms_median"])
        summary |= {"slowest_browser_page": slow["path"], "slowest_browser_load_ms_median": slow["load_ms_median"]}
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
