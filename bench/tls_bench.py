"""What TLS costs on the two socket protocols: ZooKeeper's wire protocol and Kafka's, TLS against plaintext
on the same servers in the same run.

    python3 bench/tls_bench.py                    # ~3-5 minutes
    python3 bench/tls_bench.py --rounds 3 --records 100000 --sequential-ops 1000

One quorum node serves its plaintext clientPort and its secureClientPort (TLS, `ssl.clientAuth=need`, the
client presenting a certificate) side by side; one broker serves a PLAINTEXT and an SSL listener side by side
(certificates from tests/tls_material.py). Rounds alternate which protocol goes first, so that drift on the
machine falls on both alike. Records, one JSON line each:

- `setup`: Python, CPUs, load average, the sizes asked for.
- `zk_latency`: per round and protocol, through kazoo (ZooKeeper's wire protocol): sequential-create latency
  (one create at a time, `--sequential-ops` after 20 untimed) and watch-fire latency (a setData on one
  session to the data watch firing on another, `--watch-samples`), p50/p99 in ms.
- `kafka_throughput`: per round and protocol, through librdkafka: produce records/s (acks=all, `--records` of
  `--record-bytes`, one partition) and consume records/s (the same records read back from offset 0).
- `summary`: medians over rounds, and TLS / plaintext ratios (targets: latency <= 1.2, throughput >= 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from bench.figures import emit, median_or_none, percentile_ms  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import (  # noqa: E402
    BENCH_QUORUM_PROPERTIES,
    FAST_ZK_PROPERTIES,
    LOOPBACK,
    QuorumProcesses,
    free_ports,
    wait_for_leader,
)
from tests.tls_material import TlsMaterial, make_tls_material  # noqa: E402

PROTOCOLS = ("plaintext", "tls")
LEADER_TIMEOUT_S = 30.0
KAZOO_TIMEOUT_S = 10.0
WATCH_TIMEOUT_S = 10.0
KAFKA_TIMEOUT_S = 120.0
WARMUP_OPS = 20


def round_order(run: int) -> tuple[str, ...]:
    """Plaintext first in even rounds, TLS first in odd ones: whichever runs first pays for warming the server."""
    return PROTOCOLS if run % 2 == 0 else PROTOCOLS[::-1]


# ---- ZooKeeper's wire protocol


def kazoo_client(address: str, protocol: str, material: TlsMaterial) -> KazooClient:
    tls: dict[str, Any] = {}
    if protocol == "tls":
        tls = {
            "use_ssl": True,
            "ca": str(material.ca_file),
            "certfile": str(material.client_cert),
            "keyfile": str(material.client_key),
            "verify_certs": True,
            "check_hostname": True,
        }
    zk = KazooClient(hosts=address, timeout=KAZOO_TIMEOUT_S, **tls)
    zk.start(timeout=KAZOO_TIMEOUT_S)
    return zk


def sequential_create_ns(zk: KazooClient, root: str, ops: int) -> list[int]:
    zk.ensure_path(root)
    for _ in range(WARMUP_OPS):  # untimed: the session's first requests also pay for connection set-up
        zk.create(f"{root}/warm-", b"", sequence=True)
    samples = []
    for _ in range(ops):
        started = time.perf_counter_ns()
        zk.create(f"{root}/n-", b"x" * 16, sequence=True)
        samples.append(time.perf_counter_ns() - started)
    return sorted(samples)


def watch_fire_ns(setter: KazooClient, watcher: KazooClient, path: str, samples: int) -> list[int]:
    """setData on `setter`'s session to the data watch firing on `watcher`'s."""
    setter.ensure_path(path)
    fired = threading.Event()
    fired_at = [0]

    def on_change(_event: Any) -> None:
        fired_at[0] = time.perf_counter_ns()
        fired.set()

    latencies = []
    for i in range(samples):
        fired.clear()
        watcher.get(path, watch=on_change)
        started = time.perf_counter_ns()
        setter.set(path, str(i).encode())
        if not fired.wait(WATCH_TIMEOUT_S):
            raise RuntimeError(f"a watch on {path} did not fire within {WATCH_TIMEOUT_S} s")
        latencies.append(fired_at[0] - started)
    return sorted(latencies)


def zk_round(addresses: dict[str, str], material: TlsMaterial, run: int, args: argparse.Namespace) -> list[dict]:
    records = []
    for protocol in round_order(run):
        setter = kazoo_client(addresses[protocol], protocol, material)
        watcher = kazoo_client(addresses[protocol], protocol, material)
        try:
            creates = sequential_create_ns(setter, f"/bench-{protocol}-{run}", args.sequential_ops)
            watches = watch_fire_ns(setter, watcher, f"/watch-{protocol}-{run}", args.watch_samples)
        finally:
            for zk in (setter, watcher):
                zk.stop()
                zk.close()
        record = {
            "record": "zk_latency",
            "run": run,
            "protocol": protocol,
            "create_p50_ms": percentile_ms(creates, 0.5),
            "create_p99_ms": percentile_ms(creates, 0.99),
            "watch_p50_ms": percentile_ms(watches, 0.5),
            "watch_p99_ms": percentile_ms(watches, 0.99),
        }
        emit(record)
        records.append(record)
    return records


def zk_bench(root: Path, material: TlsMaterial, args: argparse.Namespace) -> list[dict]:
    [secure_port] = free_ports(1)
    properties = {
        **FAST_ZK_PROPERTIES,
        **BENCH_QUORUM_PROPERTIES,
        "secureClientPort": str(secure_port),
        "secureClientPortAddress": LOOPBACK,
        "ssl.keyStore.location": str(material.server_keystore),
        "ssl.trustStore.location": str(material.ca_file),
    }
    # One node: both ports on it (a properties file gives every node the same secureClientPort).
    with QuorumProcesses(root / "quorum", n=1, properties=properties) as nodes:
        nodes.start_all()
        asyncio.run(wait_for_leader(nodes.addresses, timeout_s=LEADER_TIMEOUT_S))
        addresses = {"plaintext": nodes.zk_address(1), "tls": f"{LOOPBACK}:{secure_port}"}
        return [r for run in range(args.rounds) for r in zk_round(addresses, material, run, args)]


# ---- Kafka's protocol


def kafka_config(address: str, protocol: str, material: TlsMaterial, **extra: str) -> dict[str, str]:
    config = {"bootstrap.servers": address, **extra}
    if protocol == "tls":
        config.update({"security.protocol": "SSL", "ssl.ca.location": str(material.ca_file)})
    return config


def produce_per_s(config: dict[str, str], topic: str, records: int, record_bytes: int) -> float:
    producer = Producer({**config, "acks": "all", "linger.ms": "5", "queue.buffering.max.messages": "1000000"})
    value = b"v" * record_bytes
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.01)
    remaining = producer.flush(KAFKA_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records to {topic} not delivered within {KAFKA_TIMEOUT_S} s")
    return records / elapsed


def consume_per_s(config: dict[str, str], topic: str, records: int) -> float:
    consumer = Consumer({**config, "group.id": f"bench-{topic}", "enable.auto.commit": "false"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = 0.0  # the clock starts at the first record: connecting and fetching metadata are not reading
    deadline = time.monotonic() + KAFKA_TIMEOUT_S
    try:
        while got < records and time.monotonic() < deadline:
            for message in consumer.consume(10000, 1.0):
                if message.error() is None:
                    started = started or time.perf_counter()
                    got += 1
    finally:
        consumer.close()
    elapsed = time.perf_counter() - started
    if got < records:
        raise RuntimeError(f"read {got} of {records} records of {topic} within {KAFKA_TIMEOUT_S} s")
    return records / elapsed


def kafka_bench(root: Path, material: TlsMaterial, args: argparse.Namespace) -> list[dict]:
    plain_port, ssl_port = free_ports(2)
    addresses = {"plaintext": f"{LOOPBACK}:{plain_port}", "tls": f"{LOOPBACK}:{ssl_port}"}
    properties = {
        "listeners": f"PLAIN://{addresses['plaintext']},SECURE://{addresses['tls']}",
        "listener.security.protocol.map": "PLAIN:PLAINTEXT,SECURE:SSL",
        "ssl.keystore.location": str(material.server_keystore),
        "ssl.truststore.location": str(material.ca_file),
        "offsets.topic.replication.factor": "1",
    }
    records = []
    with KafkaCluster(root / "kafka", brokers=1, broker_properties=properties) as cluster:
        cluster.start()
        for run in range(args.rounds):
            for protocol in round_order(run):
                topic = f"bench-{protocol}-{run}"
                cluster.create_topic(topic, partitions=1, replication_factor=1)
                config = kafka_config(addresses[protocol], protocol, material)
                record = {
                    "record": "kafka_throughput",
                    "run": run,
                    "protocol": protocol,
                    "produce_records_per_s": round(produce_per_s(config, topic, args.records, args.record_bytes)),
                    "consume_records_per_s": round(consume_per_s(config, topic, args.records)),
                }
                emit(record)
                records.append(record)
    return records


# ---- summary


def summarize(records: Sequence[dict]) -> dict[str, Any]:
    def median(kind: str, protocol: str, key: str) -> float | None:
        return median_or_none([r[key] for r in records if r["record"] == kind and r["protocol"] == protocol])

    summary: dict[str, Any] = {"record": "summary"}
    figures = [("zk_latency", k) for k in ("create_p50_ms", "create_p99_ms", "watch_p50_ms", "watch_p99_ms")]
    figures += [("kafka_throughput", k) for k in ("produce_records_per_s", "consume_records_per_s")]
    for kind, key in figures:
        plain, tls = median(kind, "plaintext", key), median(kind, "tls", key)
        summary[f"{key}_plaintext"], summary[f"{key}_tls"] = plain, tls
        summary[f"{key}_tls_ratio"] = round(tls / plain, 3) if plain and tls is not None else None
    summary["targets"] = "latency ratio <= 1.2, throughput ratio >= 0.8"
    return summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="plaintext-then-TLS rounds (default 2)")
    p.add_argument("--sequential-ops", type=int, default=500, help="sequential creates timed (default 500)")
    p.add_argument("--watch-samples", type=int, default=200, help="watch-fire samples (default 200)")
    p.add_argument("--records", type=int, default=50000, help="records produced and consumed (default 50000)")
    p.add_argument("--record-bytes", type=int, default=100, help="bytes per record value (default 100)")
    p.add_argument("--skip-kafka", action="store_true", help="only the ZooKeeper figures")
    p.add_argument("--skip-zk", action="store_true", help="only the Kafka figures")
    args = p.parse_args(argv)
    for name in ("rounds", "sequential_ops", "watch_samples", "records", "record_bytes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    emit(
        {
            "record": "setup",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            **{k: v for k, v in vars(args).items() if not k.startswith("skip")},
        }
    )
    with tempfile.TemporaryDirectory(prefix="zkraft-tls-bench-") as tmp:
        root = Path(tmp)
        material = make_tls_material(root / "tls")
        records: list[dict] = []
        if not args.skip_zk:
            records += zk_bench(root, material, args)
        if not args.skip_kafka:
            records += kafka_bench(root, material, args)
    emit(summarize(records))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
