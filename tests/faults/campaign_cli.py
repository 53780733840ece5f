"""What the long campaigns' scripts share (scripts/fault_campaign.py, scripts/fault_campaign_kafka.py): their
common flags, the loop over seeded runs (one line a run, evidence kept and the replay command printed for a
run with an anomaly), the convergence figure, and the exit codes (0 clean, 1 an anomaly, 2 cannot run here,
130 interrupted).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from tests.faults import netns


class CampaignRun(Protocol):
    """What a run's result offers the loop (campaign.RunResult, kafka_campaign.KafkaRunResult)."""

    anomalies: list[str]
    explanation: str

    def line(self) -> str: ...

    def replay_command(self) -> str: ...


def campaign_parser(description: str, fault_kinds: Sequence[str], default_runs: int) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=default_runs, help=f"number of runs (default {default_runs})")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run i has seed + i")
    parser.add_argument("--faults", default="", help=f"fault kinds of every run, in order: {','.join(fault_kinds)}")
    parser.add_argument("--faults-per-run", type=int, default=2, help="faults drawn per run when --faults is not given")
    parser.add_argument(
        "--keep", type=Path, default=None, help="directory for the runs' evidence (default: a temp dir)"
    )
    return parser


def parse_campaign_args(
    parser: argparse.ArgumentParser, argv: list[str] | None, fault_kinds: Sequence[str]
) -> argparse.Namespace:
    """The flags, checked; `kinds` is the --faults tuple or None (kinds drawn from the seed)."""
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    if args.faults_per_run < 1:
        parser.error(f"--faults-per-run must be >= 1, got {args.faults_per_run}")
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = [k for k in kinds if k not in fault_kinds]
    if unknown:
        parser.error(f"--faults: unknown kind {unknown[0]!r}, expected some of {','.join(fault_kinds)}")
    args.kinds = kinds or None
    return args


def figure(seconds: list[float]) -> str:
    return f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s" if seconds else "-"


def run_campaign(
    args: argparse.Namespace,
    run_one: Callable[[int, Path], Any],
    summary: Callable[[list[Any]], str],
    temp_prefix: str,
) -> int:
    """Runs seeds args.seed .. args.seed + args.runs - 1; 1 when any run found an anomaly."""
    base = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix=temp_prefix))
    results: list[CampaignRun] = []
    for i in range(args.runs):
        seed = args.seed + i
        root = base / f"run-{seed}"
        result: CampaignRun = run_one(seed, root)
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


def netns_reason(name: str) -> int | None:
    """2 with one line when this machine cannot make hosts (not root, no `ip netns`), else None."""
    reason = netns.unavailable_reason()
    if reason is None:
        return None
    print(f"{name}: {reason}", file=sys.stderr)
    return 2


def exit_with(name: str, main: Callable[[], int]) -> None:
    """Runs `main` as a script: its code, 130 on Ctrl-C, 2 when network namespaces cannot be made."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        sys.exit(130)
    except netns.NetnsUnavailable as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        sys.exit(2)
