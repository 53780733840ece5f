"""The AclAuthorizer's cost on the produce path: librdkafka produce records/s with the authorizer off and on.

    python3 bench/authorizer_bench.py [--records 200000] [--partitions 4] [--rounds 1]

It starts two one-broker clusters side by side, one without an authorizer and one with
`authorizer.class.name=kafka.security.authorizer.AclAuthorizer` where User:ANONYMOUS is allowed Write and
Describe on the topic by an ACL (the check runs on every request and finds its ALLOW), then runs the same
bench/rdkafka_driver.py produce against each in turn, round after round. Prints one JSON line per run and a
summary line with the medians and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kafka_bench import run_driver  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import REPO_ROOT, subprocess_env  # noqa: E402

TOPIC = "bench"
START_TIMEOUT_S = 180.0  # a loaded machine starts a quorum slowly
AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
}


def allow_anonymous_producer(zookeeper: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "zkraft", "acls", "--authorizer-properties", f"zookeeper.connect={zookeeper}",
         "--add", "--allow-principal", "User:ANONYMOUS", "--producer", "--topic", TOPIC],
        cwd=REPO_ROOT, env=subprocess_env(), check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def start_cluster(stack: contextlib.ExitStack, root: Path, authorizer: bool, partitions: int) -> str:
    """A one-broker cluster with the topic (and, with the authorizer, the ACL); its Kafka bootstrap list."""
    properties = {"offsets.topic.replication.factor": "1", **(AUTHORIZER if authorizer else {})}
    cluster = stack.enter_context(KafkaCluster(root, brokers=1, broker_properties=properties))
    cluster.start(timeout_s=START_TIMEOUT_S)
    cluster.create_topic(TOPIC, partitions=partitions, replication_factor=1)
    if authorizer:
        allow_anonymous_producer(cluster.zookeeper)
    run_driver("produce", cluster.kafka_bootstrap_servers, TOPIC, 10_000, "--acks", "1")  # warm-up
    return cluster.kafka_bootstrap_servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="authorizer-bench-") as tmp, contextlib.ExitStack() as stack:
        # Both clusters run side by side and the rounds alternate, so the machine's load weighs on both alike.
        bootstrap = {on: start_cluster(stack, Path(tmp) / ("on" if on else "off"), on, args.partitions)
                     for on in (False, True)}  # fmt: skip
        for round_index in range(args.rounds):
            # Each round swaps the order: the cluster measured second shares the machine with the first's wake.
            for on in (False, True) if round_index % 2 == 0 else (True, False):
                figures = run_driver("produce", bootstrap[on], TOPIC, args.records, "--acks", "1")
                print(json.dumps({"authorizer": on, **figures}), flush=True)
                rates[on].append(float(figures["records_per_s"]))
    off, on = (statistics.median(rates[k]) for k in (False, True))
    summary = {
        "summary": "median produce records/s",
        "off": round(off),
        "on": round(on),
        "on_over_off": round(on / off, 3),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
