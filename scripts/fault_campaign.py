"""The long fault campaign: seeded runs of a 3-node quorum across network namespaces (root only).

    sudo python3 scripts/fault_campaign.py --runs 100 --seed 1            # seeds 1..100, workloads drawn
    sudo python3 scripts/fault_campaign.py --runs 20 --workload lock     # 20 runs of the lock workload
    sudo python3 scripts/fault_campaign.py --runs 1 --seed 42 --faults split,pause --workload register  # replay

Each run (tests/faults/campaign.py) makes its hosts, starts the quorum with the commands of a multi-machine
deployment, runs the workload's clients in hosts of their own, injects its faults, heals, measures how long
until every client has a write acknowledged, and checks the history with the workload's checker
(tests/faults/workloads.py): register (linearizability), lock and election (never two holders acting at
once), sessions (no ephemeral outlives its expired session). The default, `mix`, draws each run's workload
from its seed; every run's line and replay command name the workload it ran. One line per run;
a run with an anomaly keeps its directory (histories, every node's log, campaign.log with the schedule)
and prints the command that replays it. The summary: runs, operations, faults by kind, anomalies,
convergence median and max. Exit 1 when any run found an anomaly.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.faults import netns  # noqa: E402
from tests.faults.campaign import FAULT_KINDS, RunResult, run_once  # noqa: E402
from tests.faults.workloads import MIX, WORKLOADS  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="number of runs (default 100)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run i has seed + i")
    parser.add_argument("--faults", default="", help=f"fault kinds of every run, in order: {','.join(FAULT_KINDS)}")
    parser.add_argument("--faults-per-run", type=int, default=2, help="faults drawn per run when --faults is not given")
    parser.add_argument(
        "--workload",
        default=MIX,
        choices=[*WORKLOADS, MIX],
        help=f"what the clients run (default {MIX}: each run's workload drawn from its seed)",
    )
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


def figure(seconds: list[float]) -> str:
    return f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s" if seconds else "-"


def summary(results: list[RunResult]) -> str:
    by_kind = Counter(f.kind for r in results for f in r.faults[: len(r.targets)])
    by_workload = Counter(r.workload for r in results)
    converge = [s for r in results for s in r.convergence_s]
    per_workload = "; ".join(
        f"{w} {figure([s for r in results if r.workload == w for s in r.convergence_s])}" for w in sorted(by_workload)
    )
    anomalies = Counter(a for r in results for a in r.anomalies)
    return (
        f"runs={len(results)} workloads={dict(sorted(by_workload.items()))} "
        f"operations={sum(r.operations for r in results)} unknown={sum(r.unknown for r in results)} "
        f"faults={dict(sorted(by_kind.items()))} anomalies={dict(anomalies) or 'none'} "
        f"heal_to_acked_write_on_every_client: {figure(converge)} ({per_workload})"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = netns.unavailable_reason()
    if reason is not None:
        print(f"fault_campaign: {reason}", file=sys.stderr)
        return 2
    if args.workload != MIX:
        reason = getattr(WORKLOADS[args.workload], "unavailable_reason", lambda: None)()
        if reason is not None:
            print(f"fault_campaign: --workload {args.workload}: {reason}", file=sys.stderr)
            return 2
    base = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix="zkraft-faults-"))
    results = []
    for i in range(args.runs):
        seed = args.seed + i
        root = base / f"run-{seed}"
        result = run_once(seed, root, args.kinds, args.faults_per_run, args.workload)
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
        print("fault_campaign: interrupted", file=sys.stderr)
        sys.exit(130)
    except netns.NetnsUnavailable as exc:
        print(f"fault_campaign: {exc}", file=sys.stderr)
        sys.exit(2)
