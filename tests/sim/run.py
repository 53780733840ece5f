"""Command line of the Raft simulator.

Replay one seed (verbose prints the event trace):

    python3 -m tests.sim.run --seed 1234 --nodes 5 --steps 3000 -v

Run a range of seeds (the nightly-style sweep); prints a summary line and the
replay command of every failing seed, and exits 1 if any failed:

    python3 -m tests.sim.run --seeds 0:20000 --nodes 3 --jobs 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator

from tests.sim.cluster import EXTENSIONS, SimResult, SimulationError, run_seed

DEFAULT_STEPS = 3000


def _seed_range(text: str) -> range:
    lo, sep, hi = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected START:STOP, got {text!r}")
    try:
        return range(int(lo), int(hi))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected START:STOP, got {text!r}") from e


def _option(text: str) -> tuple[str, bool]:
    name, sep, value = text.partition("=")
    if not sep or name not in EXTENSIONS or value not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected NAME=on|off with NAME one of {', '.join(EXTENSIONS)}, got {text!r}")
    return name, value == "on"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m tests.sim.run", description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="run (replay) one seed")
    which.add_argument("--seeds", type=_seed_range, help="run seeds START:STOP")
    p.add_argument("--nodes", type=int, choices=(3, 5), default=3, help="cluster size (default 3)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"events per seed (default {DEFAULT_STEPS})")
    p.add_argument("--jobs", type=int, default=1, help="worker processes for --seeds (each run is single-threaded)")
    p.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        help="force a protocol extension on or off, e.g. durable_notice=off (default: each seed draws them)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print the event trace (one seed)")
    return p.parse_args(argv)


def _one(args: tuple[int, int, int, dict[str, bool]]) -> tuple[int, SimResult | None, str | None]:
    seed, nodes, steps, forced = args
    try:
        return seed, run_seed(seed, nodes, steps, forced=forced), None
    except SimulationError as e:
        return seed, None, str(e)


def sweep(
    seeds: range, nodes: int, steps: int, jobs: int = 1, forced: dict[str, bool] | None = None
) -> Iterator[tuple[int, SimResult | None, str | None]]:
    work = [(s, nodes, steps, dict(forced or {})) for s in seeds]
    if jobs <= 1:
        yield from map(_one, work)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(_one, work, chunksize=8)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    forced = dict(args.option)
    if args.seed is not None:
        try:
            result = run_seed(args.seed, args.nodes, args.steps, verbose=args.verbose, forced=forced)
        except SimulationError as e:
            print(f"FAILED {e}", file=sys.stderr)
            return 1
        print(f"ok seed {args.seed}: {result}")
        return 0
    started = time.perf_counter()
    failures: list[str] = []
    done = 0
    for _seed, _result, error in sweep(args.seeds, args.nodes, args.steps, args.jobs, forced):
        done += 1
        if error is not None:
            failures.append(error)
            print(f"FAILED {error}", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    rate = done / elapsed if elapsed > 0 else float("inf")
    print(
        f"{done} seeds ({args.seeds.start}:{args.seeds.stop}, {args.nodes} nodes, {args.steps} steps): "
        f"{done - len(failures)} passed, {len(failures)} failed in {elapsed:.1f}s ({rate:.1f} seeds/s)"
    )
    for error in failures:
        print(error.splitlines()[-1].strip())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
