"""TLS against plaintext on the gRPC ports: ZooKeeper create latency and SDK produce throughput, in the same run.

    python3 bench/tls_grpc_bench.py [--blocks 8] [--creates 100] [--records 20000] [--record-bytes 100]

Two `zkraft up` clusters run at once (3 quorum nodes and 2 brokers each): one without TLS, one with
`--secure` (mutual TLS between the nodes, TLS from clients with the files it wrote). The two systems
take turns in blocks, plaintext then TLS, so that both see the same machine: on a shared 2-core machine
whose speed drifts by 2x within minutes, only paired, alternating samples compare fairly. Measured
through the public SDK, with one client per system opened once (connections are set up outside the
measured window, as a long-running client has them):

* `sequential_create`: per block, `--creates` ZooKeeper creates one at a time (100-byte values):
  p50/p99 of call-to-reply;
* `produce`: per block, `--records` records through the SDK Producer (acks=all, a topic of 2
  partitions x 2 replicas): records/s from the first send to the flush that acknowledges the last.

Output is JSON lines on stdout, one per block and system, and a final `summary`: the median of the
per-block figures for each system, their TLS/plaintext ratios, and `*_ratio_paired`, the median of each
block's own TLS/plaintext ratio (the figure to read: drift between blocks cancels), next to issue 30's
targets (throughput >= 0.8x, latency <= 1.2x). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from client import Admin, NewTopic, Producer, ZkClient  # noqa: E402
from runtime.client_config import kafka_client_tls, read_config_file, zookeeper_client_tls  # noqa: E402
from tests.test_up_cli import broker_ports, running_up  # noqa: E402

TOPIC = "tls-bench"
ZK_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 120.0


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class System:
    """One running cluster and the clients that measure it, opened once."""

    def __init__(self, name: str, up: Any, secure: bool) -> None:
        cluster = up.cluster()
        self.name = name
        quorum = ",".join(node["address"] for node in cluster["quorum"])
        brokers = ",".join(broker["address"] for broker in cluster["brokers"])
        zk_tls = kafka_tls = None
        if secure:
            security = cluster["security"]
            zk_tls = zookeeper_client_tls(read_config_file(Path(security["zookeeper_client_properties"])))
            kafka_tls = kafka_client_tls(read_config_file(Path(security["client_properties"])))
        self.zk = ZkClient(quorum, timeout=ZK_TIMEOUT_S, tls=zk_tls)
        self.zk.start()
        self.zk.ensure_path("/bench")
        with Admin(brokers, tls=kafka_tls) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=2)])
        self.producer = Producer(brokers, tls=kafka_tls, acks="all", linger_ms=5)
        self.producer.send(TOPIC, b"warm-up").get(timeout=FLUSH_TIMEOUT_S)  # metadata and leaders ready
        self.created = 0

    def sequential_create(self, creates: int, payload: bytes) -> dict[str, float]:
        samples_ms = []
        for _ in range(creates):
            start = time.perf_counter()
            self.zk.create(f"/bench/n-{self.created}", payload)
            samples_ms.append((time.perf_counter() - start) * 1000)
            self.created += 1
        return {"p50_ms": _percentile(samples_ms, 0.5), "p99_ms": _percentile(samples_ms, 0.99)}

    def produce(self, records: int, payload: bytes) -> dict[str, float]:
        start = time.perf_counter()
        for _ in range(records):
            self.producer.send(TOPIC, payload)
        self.producer.flush(timeout=FLUSH_TIMEOUT_S)
        return {"records_per_s": records / (time.perf_counter() - start)}

    def close(self) -> None:
        self.producer.close()
        self.zk.stop()
        self.zk.close()


def _cluster(stack: contextlib.ExitStack, scratch: Path, secure: bool) -> Any:
    quorum_base, broker_base = broker_ports(brokers=2)
    flags = ("--brokers", "2", "--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
    data_dir = scratch / ("secure" if secure else "plaintext")
    return stack.enter_context(
        running_up(data_dir, *(("--secure",) if secure else ()), *flags, ready_line="zkraft up: running")
    )


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    payload = b"x" * args.record_bytes
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as scratch, contextlib.ExitStack() as stack:
        systems = [
            System("plaintext", _cluster(stack, Path(scratch), False), False),
            System("tls", _cluster(stack, Path(scratch), True), True),
        ]
        try:
            for block in range(args.blocks):
                for system in systems:
                    create = system.sequential_create(args.creates, payload)
                    sent = system.produce(args.records, payload)
                    for measurement, figures in (("sequential_create", create), ("produce", sent)):
                        record = {"measurement": measurement, "system": system.name, "block": block, **figures}
                        print(json.dumps(record), flush=True)
                        records.append(record)
        finally:
            for system in systems:
                system.close()
    return records


def _paired_ratio(records: list[dict[str, Any]], measurement: str, key: str) -> float:
    by_block: dict[int, dict[str, float]] = {}
    for r in records:
        if r["measurement"] == measurement:
            by_block.setdefault(r["block"], {})[r["system"]] = r[key]
    return statistics.median(b["tls"] / b["plaintext"] for b in by_block.values() if len(b) == 2)


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    def median(measurement: str, system: str, key: str) -> float:
        return statistics.median(r[key] for r in records if r["measurement"] == measurement and r["system"] == system)

    out: dict[str, Any] = {"measurement": "summary"}
    for system in ("plaintext", "tls"):
        out[f"create_p50_ms_{system}"] = median("sequential_create", system, "p50_ms")
        out[f"create_p99_ms_{system}"] = median("sequential_create", system, "p99_ms")
        out[f"produce_records_per_s_{system}"] = median("produce", system, "records_per_s")
    out["create_p50_ratio"] = out["create_p50_ms_tls"] / out["create_p50_ms_plaintext"]
    out["produce_ratio"] = out["produce_records_per_s_tls"] / out["produce_records_per_s_plaintext"]
    # The median of each block's own ratio: the two systems measured back to back, so the machine's drift
    # between blocks cancels (the figure to read on a shared machine).
    out["create_p50_ratio_paired"] = _paired_ratio(records, "sequential_create", "p50_ms")
    out["produce_ratio_paired"] = _paired_ratio(records, "produce", "records_per_s")
    out["targets"] = {"create_p50_ratio_max": 1.2, "produce_ratio_min": 0.8}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=8, help="alternating blocks per system (default 8)")
    parser.add_argument("--creates", type=int, default=100, help="sequential creates per block (default 100)")
    parser.add_argument("--records", type=int, default=20000, help="records produced per block (default 20000)")
    parser.add_argument("--record-bytes", type=int, default=100, help="value size (default 100)")
    args = parser.parse_args()
    records = measure(args)
    print(json.dumps(summary(records)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
