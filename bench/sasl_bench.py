"""SASL benchmark: librdkafka produce and consume records/s through a SASL_PLAINTEXT listener (SCRAM-SHA-512)
against a PLAINTEXT listener of the same broker, in the same run.

    python3 bench/sasl_bench.py [--runs 3] [--records 200000] [--partitions 3]

One broker on a 3-node quorum (tests/kafka_harness.py) with two Kafka listeners, `PLAINTEXT` and
`SASL_PLAINTEXT`; a SCRAM-SHA-512 user made with `zkraft configs`. Each run measures both listeners, in an
order that alternates from run to run, with bench/rdkafka_driver.py (one process per role, 100-byte records,
RF 1, acks=1): `produce` to a fresh topic, then `consume` it back. SASL costs the login of each connection
(one SCRAM exchange) and one state check per request; the target is at least 0.8x of PLAINTEXT.

Output: one JSON line per measurement (`listener`, `role`, `records_per_s`), then a `summary` with the medians
and the ratios SASL / PLAINTEXT. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import emit, median_or_none  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import LOOPBACK, REPO_ROOT, free_ports, subprocess_env  # noqa: E402

DRIVER = REPO_ROOT / "bench" / "rdkafka_driver.py"
USER, PASSWORD = "bench", "bench-secret"
ROLE_TIMEOUT_S = 900.0
SASL_CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": USER,
    "sasl.password": PASSWORD,
}


class TwoListenerCluster(KafkaCluster):
    """Each broker with a PLAINTEXT and a SASL_PLAINTEXT Kafka listener."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, brokers=1, broker_properties={"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
        self.sasl_ports = dict(zip(self.broker_ids, free_ports(len(self.broker_ids)), strict=True))

    def write_config(self, broker_id: int) -> Path:
        self.properties["listeners"] = (
            f"PLAINTEXT://{self.kafka_address(broker_id)},SASL_PLAINTEXT://{LOOPBACK}:{self.sasl_ports[broker_id]}"
        )
        return super().write_config(broker_id)

    @property
    def sasl_bootstrap_servers(self) -> str:
        return ",".join(f"{LOOPBACK}:{self.sasl_ports[b]}" for b in self.broker_ids)


def run_driver(role: str, bootstrap: str, topic: str, records: int, client: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, str(DRIVER), role, "--bootstrap", bootstrap, "--topic", topic]
    command += ["--records", str(records), "--acks", "1"]
    for key, value in client.items():
        command += ["--client-property", f"{key}={value}"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=ROLE_TIMEOUT_S, env=subprocess_env(), check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"rdkafka_driver {role} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def add_user(cluster: KafkaCluster) -> None:
    subprocess.run(
        [sys.executable, "-m", "zkraft", "configs", "--zookeeper", cluster.zookeeper, "--entity-type", "users"]
        + ["--entity-name", USER, "--alter", "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]"],
        check=True,
        capture_output=True,
        env=subprocess_env(),
        cwd=REPO_ROOT,
        timeout=120,
    )


def measure(cluster: TwoListenerCluster, args: argparse.Namespace, run: int) -> list[dict[str, Any]]:
    listeners = {
        "PLAINTEXT": (cluster.kafka_bootstrap_servers, {}),
        "SASL_PLAINTEXT": (cluster.sasl_bootstrap_servers, SASL_CLIENT),
    }
    order = list(listeners) if run % 2 == 0 else list(reversed(listeners))
    records = []
    for listener in order:
        bootstrap, client = listeners[listener]
        topic = f"sasl-bench-{run}-{listener.lower()}"
        cluster.create_topic(topic, partitions=args.partitions, replication_factor=1)
        for role in ("produce", "consume"):
            figures = run_driver(role, bootstrap, topic, args.records, client)
            record = {"run": run, "listener": listener, "role": role, **figures}
            emit(record)
            records.append(record)
    return records


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": True}
    for role in ("produce", "consume"):
        medians = {
            listener: median_or_none(
                [r["records_per_s"] for r in records if r["listener"] == listener and r["role"] == role]
            )
            for listener in ("PLAINTEXT", "SASL_PLAINTEXT")
        }
        out[f"{role}_plaintext_records_per_s"] = medians["PLAINTEXT"]
        out[f"{role}_sasl_scram_records_per_s"] = medians["SASL_PLAINTEXT"]
        if medians["PLAINTEXT"] and medians["SASL_PLAINTEXT"] is not None:
            out[f"{role}_ratio_sasl_over_plaintext"] = round(medians["SASL_PLAINTEXT"] / medians["PLAINTEXT"], 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    if args.runs < 1 or args.records < 1 or args.partitions < 1:
        parser.error("--runs, --records and --partitions must be at least 1")
    with tempfile.TemporaryDirectory(prefix="zkraft-sasl-bench-") as root:
        with TwoListenerCluster(Path(root)) as cluster:
            cluster.start()
            add_user(cluster)
            records = [r for run in range(args.runs) for r in measure(cluster, args, run)]
    emit(summary(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
