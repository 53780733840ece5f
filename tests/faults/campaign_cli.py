"""What the long campaigns' scripts share (scripts/fault_campaign.py, scripts/fault_campaign_kafka.py): their
common flags, the loop over seeded runs (one line a run, evidence kept and the replay command printed for a
run with an anomaly), the summary, and the exit codes (0 clean, 1 an anomaly, 2 cannot run here,
130 interrupted).

The summary is made from the runs' lines alone, so `--summary FILE...` gives the same figures for the output
of campaigns that were stopped, split over several invocations or run on several machines: runs, operations,
faults injected by kind, anomalies and the runs that had them, and how long after each heal the clients had
a write acknowledged (and, where the line has it, the fault's target had caught up), median and max.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from collections import Counter
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
    parser.add_argument(
        "--summary", type=Path, nargs="+", default=None, metavar="FILE",
        help="run nothing: summarise the run lines (seed=...) in these campaign outputs",
    )  # fmt: skip
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


RUN_LINE = re.compile(r"^seed=-?\d+ ")
FAULT_KIND = re.compile(r"([a-z][a-z-]*)\(")


def parse_line(line: str) -> dict[str, str]:
    """A run's line (RunResult.line, KafkaRunResult.line) as its key=value fields."""
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def _seconds(field: str) -> list[float]:
    return [] if field in ("", "-") else [float(s) for s in field.split(",")]


def summarise(lines: Sequence[str], heal_figure: str) -> str:
    """The campaign's figures from its runs' lines; `heal_figure` names what converged_s measures."""
    runs = [parse_line(line) for line in lines if RUN_LINE.match(line)]
    faults = Counter(kind for r in runs for kind in FAULT_KIND.findall(r.get("faults", "-")))
    anomalies = Counter(a for r in runs for a in r["anomalies"].split(",") if a != "none")
    failed = [f"{r['seed']}({r['anomalies']})" for r in runs if r["anomalies"] != "none"]
    out = [
        f"runs={len(runs)} operations={sum(int(r['ops']) for r in runs)} "
        f"unknown={sum(int(r['unknown']) for r in runs)} faults={dict(sorted(faults.items()))} "
        f"anomalies={dict(sorted(anomalies.items())) or 'none'}",
        f"runs_with_anomalies: {' '.join(failed) or 'none'}",
        f"{heal_figure}: {figure([s for r in runs for s in _seconds(r['converged_s'])])}",
    ]
    workloads = sorted({r["workload"] for r in runs if "workload" in r})
    if workloads:
        per = [f"{w} {figure([s for r in runs if r.get('workload') == w for s in _seconds(r['converged_s'])])}"
               for w in workloads]  # fmt: skip
        out.append(f"  by workload: {'; '.join(per)}")
    caught_up = [s for r in runs for s in _seconds(r.get("caught_up_s", "-"))]
    if any("caught_up_s" in r for r in runs):
        with_it = sum(1 for r in runs if "caught_up_s" in r)
        out.append(f"heal_to_target_caught_up (runs that checked it: {with_it}): {figure(caught_up)}")
    return "\n".join(out)


def summary_of_files(paths: Sequence[Path], heal_figure: str) -> int:
    """`--summary FILE...`: the figures of the run lines in those files (0), or a one-line error (2)."""
    lines = []
    for path in paths:
        try:
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            print(f"--summary: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 2
    if not any(RUN_LINE.match(line) for line in lines):
        print(f"--summary: no run lines (seed=...) in {', '.join(map(str, paths))}", file=sys.stderr)
        return 2
    print(summarise(lines, heal_figure))
    return 0


def run_campaign(
    args: argparse.Namespace, run_one: Callable[[int, Path], Any], heal_figure: str, temp_prefix: str
) -> int:
    """Runs seeds args.seed .. args.seed + args.runs - 1, then prints the summary; 1 when any run found an
    anomaly."""
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
    print(summarise([r.line() for r in results], heal_figure), flush=True)
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
