"""TLS and SCRAM against plaintext on the gRPC ports: ZooKeeper create latency and SDK produce throughput, same run.

    python3 bench/tls_grpc_bench.py [--blocks 8] [--creates 100] [--records 20000] [--record-bytes 100]
                                    [--systems plaintext,tls,sasl]

Up to three `zkraft up` clusters run at once (3 quorum nodes and 2 brokers each): `plaintext` without TLS;
`tls`, `--secure` with the brokers' gRPC ports TLS only (`GRPC:SSL`, no client certificate asked, no
authorizer: the SDK with the CA alone); `sasl`, `--secure` as it comes (the SDK logs in with SCRAM-SHA-512
on each gRPC port and carries its session token, mutual TLS, the authorizer on with the admin a super
user). The systems take turns in blocks, each block starting with the next system, so that all see the
same machine: on a shared 2-core machine whose speed drifts by 2x within minutes, only paired, alternating
samples compare fairly. Measured through the public SDK, with one client per system opened once
(connections are set up outside the measured window, as a long-running client has them):

* `sequential_create`: per block, `--creates` ZooKeeper creates one at a time (100-byte values) through
  the quorum's leader in every system (found as `zkraft quorum status` finds it): p50/p99 of call-to-reply;
* `produce`: per block, `--records` records through the SDK Producer (acks=all, a topic of 2
  partitions x 2 replicas): records/s from the first send to the flush that acknowledges the last.

Output is JSON lines on stdout, one per block and system, and a final `summary`: the median of the
per-block figures for each system, their tls/plaintext and sasl/tls ratios, and `*_ratio_paired`, the median of
each block's own ratio (the figure to read: drift between blocks cancels), next to issue 30's targets
(throughput >= 0.8x, latency <= 1.2x). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from client import Admin, NewTopic, Producer, ZkClient  # noqa: E402
from runtime.client_config import (  # noqa: E402
    kafka_client_sasl,
    kafka_client_tls,
    read_config_file,
    zookeeper_client_tls,
)
from tests.test_up_cli import broker_ports, running_up  # noqa: E402
from zkraft.tools.quorum_status import collect_status  # noqa: E402

TOPIC = "tls-bench"
ZK_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 120.0
LEADER_TIMEOUT_S = 60.0
SYSTEMS = ("plaintext", "tls", "sasl")
# `zkraft up --secure` with the brokers' gRPC ports back to TLS only: no SCRAM, no client certificate, no authorizer.
TLS_ONLY_OVERRIDES = (
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,GRPC:SSL",
    "listener.name.grpc.ssl.client.auth=none",
    "authorizer.class.name=",
)


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class System:
    """One running cluster and the clients that measure it, opened once."""

    def __init__(self, name: str, up: Any) -> None:
        cluster = up.cluster()
        self.name = name
        brokers = ",".join(broker["address"] for broker in cluster["brokers"])
        zk_tls, sdk = None, {}
        if name != "plaintext":
            security = cluster["security"]
            zk_tls = zookeeper_client_tls(read_config_file(Path(security["zookeeper_client_properties"])))
            properties = read_config_file(Path(security["client_properties"]))
            sdk = {"tls": kafka_client_tls(properties)}
            if name == "sasl":
                sdk["sasl"] = kafka_client_sasl(properties)
            else:  # the CA alone: this port asks for no certificate
                sdk["tls"] = replace(sdk["tls"], keystore_file=None)
        leader = _quorum_leader_address(cluster, zk_tls)
        # The leader in every system: given the whole quorum the client picks a server at random, and a
        # create through a follower (forwarded to the leader) takes ~0.5 ms more, which swamped TLS's cost.
        self.zk = ZkClient(leader, timeout=ZK_TIMEOUT_S, tls=zk_tls, ensemble_tracker=False)
        self.zk.start()
        self.zk.ensure_path("/bench")
        with Admin(brokers, **sdk) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=2)])
        self.producer = Producer(brokers, **sdk, acks="all", linger_ms=5)
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


def _quorum_leader_address(cluster: dict[str, Any], tls: Any) -> str:
    """The address of the node that leads the quorum, as `zkraft quorum status` finds it (over `tls`)."""
    addresses = [str(node["address"]) for node in cluster["quorum"]]
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    while time.monotonic() < deadline:
        leaders = [row for row in collect_status(addresses, tls=tls) if row.role == "leader"]
        if leaders:
            return max(leaders, key=lambda row: row.term or 0).address
        time.sleep(0.2)  # a poll inside the deadline loop
    raise SystemExit(f"tls_grpc_bench: the quorum agreed on no leader within {LEADER_TIMEOUT_S:.0f} s")


def _cluster(stack: contextlib.ExitStack, scratch: Path, name: str) -> Any:
    quorum_base, broker_base = broker_ports(brokers=2)
    flags = ["--brokers", "2", "--base-port", str(quorum_base), "--broker-base-port", str(broker_base)]
    if name != "plaintext":
        flags.append("--secure")
    if name == "tls":
        flags += [item for override in TLS_ONLY_OVERRIDES for item in ("--override", override)]
    return stack.enter_context(running_up(scratch / name, *flags, ready_line="zkraft up: running"))


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    payload = b"x" * args.record_bytes
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as scratch, contextlib.ExitStack() as stack:
        systems = [System(name, _cluster(stack, Path(scratch), name)) for name in args.systems]
        try:
            for block in range(args.blocks):
                # Each block starts with the next system: the one measured first follows the last one's produce
                # (its brokers still replicating), which a fixed order would charge to the same system each time.
                turn = block % len(systems)
                for system in systems[turn:] + systems[:turn]:
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


def _paired_ratio(records: list[dict[str, Any]], measurement: str, key: str, over: str, under: str) -> float:
    by_block: dict[int, dict[str, float]] = {}
    for r in records:
        if r["measurement"] == measurement:
            by_block.setdefault(r["block"], {})[r["system"]] = r[key]
    return statistics.median(b[over] / b[under] for b in by_block.values() if over in b and under in b)


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    def median(measurement: str, system: str, key: str) -> float:
        return statistics.median(r[key] for r in records if r["measurement"] == measurement and r["system"] == system)

    out: dict[str, Any] = {"measurement": "summary"}
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in records)]
    for system in systems:
        out[f"create_p50_ms_{system}"] = median("sequential_create", system, "p50_ms")
        out[f"create_p99_ms_{system}"] = median("sequential_create", system, "p99_ms")
        out[f"produce_records_per_s_{system}"] = median("produce", system, "records_per_s")
    for over, under in (("tls", "plaintext"), ("sasl", "tls")):
        if over not in systems or under not in systems:
            continue
        suffix = "" if (over, under) == ("tls", "plaintext") else f"_{over}_over_{under}"
        out[f"create_p50_ratio{suffix}"] = out[f"create_p50_ms_{over}"] / out[f"create_p50_ms_{under}"]
        out[f"produce_ratio{suffix}"] = out[f"produce_records_per_s_{over}"] / out[f"produce_records_per_s_{under}"]
        # The median of each block's own ratio: the systems measured back to back, so the machine's drift
        # between blocks cancels (the figure to read on a shared machine).
        out[f"create_p50_ratio_paired{suffix}"] = _paired_ratio(records, "sequential_create", "p50_ms", over, under)
        out[f"produce_ratio_paired{suffix}"] = _paired_ratio(records, "produce", "records_per_s", over, under)
    out["targets"] = {"create_p50_ratio_max": 1.2, "produce_ratio_min": 0.8}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=8, help="alternating blocks per system (default 8)")
    parser.add_argument("--creates", type=int, default=100, help="sequential creates per block (default 100)")
    parser.add_argument("--records", type=int, default=20000, help="records produced per block (default 20000)")
    parser.add_argument("--record-bytes", type=int, default=100, help="value size (default 100)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"among {','.join(SYSTEMS)} (default all)")
    args = parser.parse_args()
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown or not args.systems:
        parser.error(f"--systems: {','.join(unknown) or 'none'} is not among {','.join(SYSTEMS)}")
    records = measure(args)
    print(json.dumps(summary(records)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
