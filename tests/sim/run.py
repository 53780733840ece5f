"""Command line of the Raft simulator.

Replay one seed (verbose prints the event trace):

    python3 -m tests.sim.run --seed 1234 --nodes 5 --steps 3000 -v

Run a range of seeds (the nightly-style sweep); prints a summary line and the
replay command of every failing seed, and exits 1 if any failed:

    python3 -m tests.sim.run --seeds 0:20000 --nodes 3 --jobs 2

With --loop, the seeds run real QuorumNodes, the node's own Ready loop
(tests/sim/node_loop.py), each seed drawing the loop's options; --loop-option
forces one on or off (and implies --loop):

    python3 -m tests.sim.run --loop --seeds 0:5000 --loop-option ready_in_handler=off --jobs 2

With --flapping, the seeds run the flapping-links scenario (tests/sim/flapping.py):
stream breaks reported under a healthy leader must elect nobody new.

    python3 -m tests.sim.run --flapping --seeds 0:2000 --nodes 5
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator

from tests.sim.cluster import SIM_OPTIONS, SimResult, SimulationError, run_seed
from tests.sim.flapping import run_flapping_seed
from tests.sim.node_loop import LOOP_OPTIONS, LoopResult, run_loop_seed

DEFAULT_STEPS = 3000
DEFAULT_LOOP_STEPS = 600


def _seed_range(text: str) -> range:
    lo, sep, hi = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected START:STOP, got {text!r}")
    try:
        return range(int(lo), int(hi))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected START:STOP, got {text!r}") from e


def _on_off(text: str, names: tuple[str, ...]) -> tuple[str, bool]:
    name, sep, value = text.partition("=")
    if not sep or name not in names or value not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected NAME=on|off with NAME one of {', '.join(names)}, got {text!r}")
    return name, value == "on"


def _option(text: str) -> tuple[str, bool]:
    return _on_off(text, SIM_OPTIONS)


def _loop_option(text: str) -> tuple[str, bool]:
    return _on_off(text, LOOP_OPTIONS)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m tests.sim.run", description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="run (replay) one seed")
    which.add_argument("--seeds", type=_seed_range, help="run seeds START:STOP")
    p.add_argument("--nodes", type=int, choices=(3, 5), default=3, help="cluster size (default 3)")
    p.add_argument(
        "--steps",
        type=int,
        help=f"events per seed (default {DEFAULT_STEPS}; {DEFAULT_LOOP_STEPS} with --loop)",
    )
    p.add_argument("--jobs", type=int, default=1, help="worker processes for --seeds (each run is single-threaded)")
    p.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        help="force a protocol extension on or off, e.g. durable_notice=off (default: each seed draws them); "
        "membership_changes=on adds random membership changes",
    )
    p.add_argument("--loop", action="store_true", help="simulate real QuorumNodes: the node's Ready loop")
    p.add_argument("--flapping", action="store_true", help="the flapping-links scenario (tests/sim/flapping.py)")
    p.add_argument(
        "--loop-option",
        type=_loop_option,
        action="append",
        default=[],
        help="force a LoopOptions field on or off, e.g. ready_in_handler=off (implies --loop)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print the event trace (one seed)")
    args = p.parse_args(argv)
    args.loop = args.loop or bool(args.loop_option)
    if args.flapping and (args.loop or args.option):
        p.error("--flapping runs the core alone with its own options: no --loop, --loop-option or --option")
    if args.steps is None:
        args.steps = DEFAULT_LOOP_STEPS if args.loop else DEFAULT_STEPS
    return args


Result = SimResult | LoopResult
# Passed through `forced` (the worker processes take one tuple): run the flapping-links scenario.
FLAPPING = "--flapping"


def _run(seed: int, nodes: int, steps: int, forced: dict[str, bool], loop: bool, verbose: bool = False) -> Result:
    if loop:
        return run_loop_seed(seed, nodes, steps, verbose=verbose, forced=forced)
    if forced.get(FLAPPING):
        return run_flapping_seed(seed, nodes, steps, verbose=verbose)
    return run_seed(seed, nodes, steps, verbose=verbose, forced=forced)


def _one(args: tuple[int, int, int, dict[str, bool], bool]) -> tuple[int, Result | None, str | None]:
    seed, nodes, steps, forced, loop = args
    try:
        return seed, _run(seed, nodes, steps, forced, loop), None
    except SimulationError as e:
        return seed, None, str(e)


def sweep(
    seeds: range, nodes: int, steps: int, jobs: int = 1, forced: dict[str, bool] | None = None, loop: bool = False
) -> Iterator[tuple[int, Result | None, str | None]]:
    work = [(s, nodes, steps, dict(forced or {}), loop) for s in seeds]
    if jobs <= 1:
        yield from map(_one, work)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(_one, work, chunksize=8)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    forced = dict(args.option) | dict(args.loop_option) | ({FLAPPING: True} if args.flapping else {})
    if args.seed is not None:
        try:
            result = _run(args.seed, args.nodes, args.steps, forced, args.loop, verbose=args.verbose)
        except SimulationError as e:
            print(f"FAILED {e}", file=sys.stderr)
            return 1
        print(f"ok seed {args.seed}: {result}")
        return 0
    started = time.perf_counter()
    failures: list[str] = []
    done = 0
    for _seed, _result, error in sweep(args.seeds, args.nodes, args.steps, args.jobs, forced, args.loop):
        done += 1
        if error is not None:
            failures.append(error)
            print(f"FAILED {error}", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    rate = done / elapsed if elapsed > 0 else float("inf")
    what = "node loop" if args.loop else "flapping links" if args.flapping else "core"
    print(
        f"{done} seeds ({what}, {args.seeds.start}:{args.seeds.stop}, {args.nodes} nodes, {args.steps} steps): "
        f"{done - len(failures)} passed, {len(failures)} failed in {elapsed:.1f}s ({rate:.1f} seeds/s)"
    )
    for error in failures:
        print(error.splitlines()[-1].strip())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
