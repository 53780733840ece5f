"""The AclAuthorizer's cost on the produce path: librdkafka produce records/s with the authorizer off and on.

    python3 bench/authorizer_bench.py [--records 200000] [--partitions 4] [--rounds 1]

Each round starts a one-broker cluster without an authorizer, then one with
`authorizer.class.name=kafka.security.authorizer.AclAuthorizer` where User:ANONYMOUS is allowed Write and
Describe on the topic by an ACL (the check runs on every request and finds its ALLOW), and runs the same
bench/rdkafka_driver.py produce against each, in the same run. Prints one JSON line per cluster and a summary
line with the on/off ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kafka_bench import run_driver  # noqa: E402
from tests.kafka_harness import KafkaCluster  # noqa: E402
from tests.quorum_harness import REPO_ROOT, subprocess_env  # noqa: E402

TOPIC = "bench"
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


def measure(root: Path, authorizer: bool, records: int, partitions: int) -> dict[str, object]:
    properties = {"offsets.topic.replication.factor": "1", **(AUTHORIZER if authorizer else {})}
    with KafkaCluster(root, brokers=1, broker_properties=properties) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=partitions, replication_factor=1)
        if authorizer:
            allow_anonymous_producer(cluster.zookeeper)
        run_driver("produce", cluster.kafka_bootstrap_servers, TOPIC, min(records, 10_000), "--acks", "1")  # warm-up
        figures = run_driver("produce", cluster.kafka_bootstrap_servers, TOPIC, records, "--acks", "1")
    return {"authorizer": authorizer, **figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rates: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="authorizer-bench-") as tmp:
        for round_index in range(args.rounds):
            for authorizer in (False, True):
                root = Path(tmp) / f"round-{round_index}-{'on' if authorizer else 'off'}"
                result = measure(root, authorizer, args.records, args.partitions)
                print(json.dumps(result), flush=True)
                rates[authorizer].append(float(result["records_per_s"]))  # type: ignore[arg-type]
    off, on = (sum(rates[k]) / len(rates[k]) for k in (False, True))
    print(
        json.dumps(
            {"summary": "produce records/s", "off": round(off), "on": round(on), "on_over_off": round(on / off, 3)}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
