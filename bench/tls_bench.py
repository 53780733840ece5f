"""TLS against plaintext on the gRPC ports: ZooKeeper create latency and SDK produce throughput, in the same run.

    python3 bench/tls_bench.py [--rounds 2] [--creates 500] [--records 20000] [--record-bytes 100]

Each round starts a fresh `zkraft up` cluster (3 quorum nodes, 2 brokers) without TLS, measures, stops it,
then the same with `zkraft up --secure` (mutual TLS between the nodes, TLS from clients with the files it
wrote), so that the two are measured on the same machine under the same load, alternating. Measured
through the public SDK:

* `sequential_create`: one ZooKeeper create at a time (100-byte values), p50/p99 of call-to-reply;
* `produce`: the SDK Producer (acks=all, a topic of 2 partitions x 2 replicas), records/s from the first
  send to the flush that acknowledges the last.

Output is JSON lines on stdout, one per measurement and a final `summary` with the medians over rounds and
TLS/plaintext ratios next to issue 30's targets (throughput >= 0.8x, latency <= 1.2x). Nothing is asserted.
"""

from __future__ import annotations

import argparse
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


def sequential_create(quorum: str, tls: Any, creates: int, payload: bytes) -> dict[str, float]:
    zk = ZkClient(quorum, timeout=ZK_TIMEOUT_S, tls=tls)
    zk.start()
    try:
        zk.ensure_path("/bench")
        samples_ms = []
        for i in range(creates):
            start = time.perf_counter()
            zk.create(f"/bench/n-{i}", payload)
            samples_ms.append((time.perf_counter() - start) * 1000)
    finally:
        zk.stop()
        zk.close()
    return {"p50_ms": _percentile(samples_ms, 0.5), "p99_ms": _percentile(samples_ms, 0.99)}


def produce(bootstrap: str, tls: Any, records: int, payload: bytes) -> dict[str, float]:
    with Admin(bootstrap, tls=tls) as admin:
        admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=2)])
    with Producer(bootstrap, tls=tls, acks="all", linger_ms=5) as producer:
        producer.send(TOPIC, payload).get(timeout=FLUSH_TIMEOUT_S)  # metadata and leaders ready
        start = time.perf_counter()
        for _ in range(records):
            producer.send(TOPIC, payload)
        producer.flush(timeout=FLUSH_TIMEOUT_S)
        elapsed_s = time.perf_counter() - start
    return {"records_per_s": records / elapsed_s}


def measure(secure: bool, args: argparse.Namespace, round_index: int) -> list[dict[str, Any]]:
    quorum_base, broker_base = broker_ports(brokers=2)
    flags = ("--brokers", "2", "--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as scratch:
        data_dir = Path(scratch) / "cluster"
        with running_up(data_dir, *(("--secure",) if secure else ()), *flags, ready_line="zkraft up: running") as up:
            cluster = up.cluster()
            quorum = ",".join(node["address"] for node in cluster["quorum"])
            brokers = ",".join(broker["address"] for broker in cluster["brokers"])
            zk_tls = kafka_tls = None
            if secure:
                security = cluster["security"]
                zk_tls = zookeeper_client_tls(read_config_file(Path(security["zookeeper_client_properties"])))
                kafka_tls = kafka_client_tls(read_config_file(Path(security["client_properties"])))
            payload = b"x" * args.record_bytes
            system = "tls" if secure else "plaintext"
            create = sequential_create(quorum, zk_tls, args.creates, payload)
            sent = produce(brokers, kafka_tls, args.records, payload)
    return [
        {"measurement": "sequential_create", "system": system, "round": round_index, **create},
        {"measurement": "produce", "system": system, "round": round_index, **sent},
    ]


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
    out["targets"] = {"create_p50_ratio_max": 1.2, "produce_ratio_min": 0.8}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="plaintext then TLS clusters per round (default 2)")
    parser.add_argument("--creates", type=int, default=500, help="sequential creates per cluster (default 500)")
    parser.add_argument("--records", type=int, default=20000, help="records produced per cluster (default 20000)")
    parser.add_argument("--record-bytes", type=int, default=100, help="value size (default 100)")
    args = parser.parse_args()
    records: list[dict[str, Any]] = []
    for round_index in range(args.rounds):
        for secure in (False, True):
            for record in measure(secure, args, round_index):
                print(json.dumps(record), flush=True)
                records.append(record)
    print(json.dumps(summary(records)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
