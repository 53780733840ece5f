"""The long Kafka fault campaign: seeded runs of brokers on a quorum across network namespaces (root only).

    sudo python3 scripts/fault_campaign_kafka.py --runs 20 --seed 1                       # seeds 1..20
    sudo python3 scripts/fault_campaign_kafka.py --runs 1 --seed 42 --faults broker-split,quorum-kill   # replay
    python3 scripts/fault_campaign_kafka.py --summary part1.out part2.out   # the figures of runs made earlier

Each run (tests/faults/kafka_campaign.py) puts 3 quorum nodes and 3 brokers on hosts of their own, started
with the commands and server.properties of a multi-machine deployment, runs idempotent acks=all producers
and a consumer group in client hosts, injects its faults on brokers (the controller, a partition leader)
and quorum nodes, heals, and checks: no acknowledged value lost, duplicated or reordered; one member per
partition per generation; committed offsets never going back; one controller epoch acting at a time;
leader epochs only growing. One line per run; a run with an anomaly keeps its directory (histories,
every node's and broker's log, state-change.log, campaign.log with the schedule) and prints the command
that replays it. The summary: runs, operations, faults by kind, anomalies and the runs that had them,
convergence median and max.
Exit 1 when any run found an anomaly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.faults.campaign_cli import (  # noqa: E402
    campaign_parser,
    exit_with,
    netns_reason,
    parse_campaign_args,
    run_campaign,
    summary_of_files,
)
from tests.faults.kafka_campaign import FAULT_KINDS, KafkaRunResult, run_kafka_once  # noqa: E402

NAME = "fault_campaign_kafka"
HEAL_FIGURE = "heal_to_acked_produce_on_every_producer_and_partition"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = campaign_parser(__doc__.split("\n")[0], FAULT_KINDS, default_runs=20)
    return parse_campaign_args(parser, argv, FAULT_KINDS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summary:
        return summary_of_files(args.summary, HEAL_FIGURE)
    refused = netns_reason(NAME)
    if refused is not None:
        return refused

    def run_one(seed: int, root: Path) -> KafkaRunResult:
        return run_kafka_once(seed, root, args.kinds, args.faults_per_run)

    return run_campaign(args, run_one, HEAL_FIGURE, "zkraft-kafka-faults-")


if __name__ == "__main__":
    exit_with(NAME, main)
