"""The long fault campaign: seeded runs of a 3-node quorum across network namespaces (root only).

    sudo python3 scripts/fault_campaign.py --runs 100 --seed 1            # seeds 1..100, workloads drawn
    sudo python3 scripts/fault_campaign.py --runs 20 --workload lock     # 20 runs of the lock workload
    sudo python3 scripts/fault_campaign.py --runs 1 --seed 42 --faults split,pause --workload register  # replay
    python3 scripts/fault_campaign.py --summary part1.out part2.out     # the figures of runs made earlier

Each run (tests/faults/campaign.py) makes its hosts, starts the quorum with the commands of a multi-machine
deployment, runs the workload's clients in hosts of their own, injects its faults, heals, measures how long
until every client has a write acknowledged, and checks the history with the workload's checker
(tests/faults/workloads.py): register (linearizability), lock and election (never two holders acting at
once), sessions (no ephemeral outlives its expired session). The default, `mix`, draws each run's workload
from its seed; every run's line and replay command name the workload it ran. One line per run;
a run with an anomaly keeps its directory (histories, every node's log, campaign.log with the schedule)
and prints the command that replays it. The summary: runs, operations, faults by kind, anomalies and
the runs that had them, convergence median and max (by workload), and how soon each fault's target caught
up. Exit 1 when any run found an anomaly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.faults.campaign import FAULT_KINDS, RunResult, run_once  # noqa: E402
from tests.faults.campaign_cli import (  # noqa: E402
    campaign_parser,
    exit_with,
    netns_reason,
    parse_campaign_args,
    run_campaign,
    summary_of_files,
)
from tests.faults.workloads import MIX, WORKLOADS  # noqa: E402

NAME = "fault_campaign"
HEAL_FIGURE = "heal_to_acked_write_on_every_client"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = campaign_parser(__doc__.split("\n")[0], FAULT_KINDS, default_runs=100)
    parser.add_argument(
        "--workload",
        default=MIX,
        choices=[*WORKLOADS, MIX],
        help=f"what the clients run (default {MIX}: each run's workload drawn from its seed)",
    )
    return parse_campaign_args(parser, argv, FAULT_KINDS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summary:
        return summary_of_files(args.summary, HEAL_FIGURE)
    refused = netns_reason(NAME)
    if refused is not None:
        return refused
    if args.workload != MIX:
        reason = getattr(WORKLOADS[args.workload], "unavailable_reason", lambda: None)()
        if reason is not None:
            print(f"{NAME}: --workload {args.workload}: {reason}", file=sys.stderr)
            return 2

    def run_one(seed: int, root: Path) -> RunResult:
        return run_once(seed, root, args.kinds, args.faults_per_run, args.workload)

    return run_campaign(args, run_one, HEAL_FIGURE, "zkraft-faults-")


if __name__ == "__main__":
    exit_with(NAME, main)
