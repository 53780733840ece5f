"""The long Kafka fault campaign: seeded runs of brokers on a quorum across network namespaces (root only).

    sudo python3 scripts/fault_campaign_kafka.py --runs 20 --seed 1                       # seeds 1..20
    sudo python3 scripts/fault_campaign_kafka.py --runs 1 --seed 42 --faults broker-split,quorum-kill   # replay

Each run (tests/faults/kafka_campaign.py) puts 3 quorum nodes and 3 brokers on hosts of their own, started
with the commands and server.properties of a multi-machine deployment, runs idempotent acks=all producers
and a consumer group in client hosts, injects its faults on brokers (the controller, a partition leader)
and quorum nodes, heals, and checks: no acknowledged value lost, duplicated or reordered; one member per
partition per generation; committed offsets never going back; one controller epoch acting at a time;
leader epochs only growing. One line per run; a run with an anomaly keeps its directory (histories,
every node's and broker's log, state-change.log, campaign.log with the schedule) and prints the command
that replays it. The summary: runs, operations, faults by kind, anomalies, convergence median and max.
Exit 1 when any run found an anomaly.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.faults import netns  # noqa: E402
from tests.faults.kafka_campaign import FAULT_KINDS, KafkaRunResult, run_kafka_once, summary_counts  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="number of runs (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run i has seed + i")
    parser.add_argument("--faults", default="", help=f"fault kinds of every run, in order: {','.join(FAULT_KINDS)}")
    parser.add_argument("--faults-per-run", type=int, default=2, help="faults drawn per run when --faults is not given")
    parser.add_argument(
        "--keep", type=Path, default=None, help="directory for the runs' evidence (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    if args.faults_per_run < 1:
        parser.error(f"--faults-per-run must be >= 1, got {args.faults_per_run}")
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        parser.error(f"--faults: unknown kind {unknown[0]!r}, expected some of {','.join(FAULT_KINDS)}")
    args.kinds = kinds or None
    return args


def summary(results: list[KafkaRunResult]) -> str:
    by_kind, anomalies = summary_counts(results)
    converge = [s for r in results for s in r.convergence_s]
    figure = f"median {statistics.median(converge):.2f} s, max {max(converge):.2f} s" if converge else "-"
    return (
        f"runs={len(results)} operations={sum(r.operations for r in results)} "
        f"unknown={sum(r.unknown for r in results)} faults={dict(sorted(by_kind.items()))} "
        f"anomalies={dict(anomalies) or 'none'} heal_to_acked_produce_on_every_producer_and_partition: {figure}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = netns.unavailable_reason()
    if reason is not None:
        print(f"fault_campaign_kafka: {reason}", file=sys.stderr)
        return 2
    base = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix="zkraft-kafka-faults-"))
    results = []
    for i in range(args.runs):
        seed = args.seed + i
        root = base / f"run-{seed}"
        result = run_kafka_once(seed, root, args.kinds, args.faults_per_run)
        results.append(result)
        print(result.line(), flush=True)
        if result.anomalies:
            print(f"  evidence kept in {root}; replay: {result.replay_command()}", flush=True)
            if result.explanation:
                print("  " + result.explanation.replace("\n", "\n  "), flush=True)
        elif args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(summary(results), flush=True)
    return 1 if any(r.anomalies for r in results) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("fault_campaign_kafka: interrupted", file=sys.stderr)
        sys.exit(130)
    except netns.NetnsUnavailable as exc:
        print(f"fault_campaign_kafka: {exc}", file=sys.stderr)
        sys.exit(2)
