"""The node's own Ready loop (quorum.node) under deterministic simulation, every LoopOptions field on and off.

tests/sim/node_loop.py runs real QuorumNodes on in-memory twins of their disk,
writer thread, state machine and network, with crashes at any disk call. CI
runs CHUNKS x SEEDS_PER_CHUNK seeds, each drawing every loop option and core
extension on or off (about half of the seeds each way per option), and for
each option a few seeds with it forced on and forced off, asserting that the
option's own step of the loop ran exactly when it was on. A failing seed
prints the command that replays it, e.g.

    python3 -m tests.sim.run --loop --seed 1234 --nodes 3 --steps 400 -v

Longer sweeps run from the command line:

    python3 -m tests.sim.run --loop --seeds 0:5000 --loop-option ready_in_handler=off --jobs 2
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from quorum.node import QuorumNode
from quorum.raft.core import Raft
from tests.sim.cluster import SimulationError
from tests.sim.node_loop import LOOP_OPTIONS, LoopCluster, LoopResult, LoopSimulationError, draw_options, run_loop_seed

pytestmark = pytest.mark.sim

STEPS = 400
CHUNKS = 4  # 200 seeds in CI (about 30 s); wider sweeps from the command line
SEEDS_PER_CHUNK = 50
FORCED_SEEDS = 8
# What forcing an option on also needs, so that its step can run at all: the follower's apply during
# its save and the leader's send-before-apply both act in a Ready handled in the peer handler.
NEEDS = {"apply_ahead_during_save": {"ready_in_handler": True}, "leader_sends_before_apply": {"ready_in_handler": True}}


def _run_seeds(seeds: range, nodes: int, forced: dict[str, bool]) -> tuple[LoopResult, list[str]]:
    total = LoopResult(seed=0, nodes=nodes, steps=STEPS)
    failures = []
    for seed in seeds:
        try:
            r = run_loop_seed(seed, nodes, STEPS, forced=forced)
        except SimulationError as e:
            failures.append(str(e))
            continue
        for f in dataclasses.fields(r):
            if isinstance(getattr(r, f.name), int) and f.name not in ("seed", "nodes", "steps"):
                setattr(total, f.name, getattr(total, f.name) + getattr(r, f.name))
    return total, failures


def _chunks() -> list[Any]:
    params = []
    for k in range(CHUNKS):
        nodes = 5 if k % 4 == 3 else 3
        first = 50_000 + k * SEEDS_PER_CHUNK
        params.append(pytest.param(nodes, first, id=f"{nodes}nodes-seeds{first}-{first + SEEDS_PER_CHUNK - 1}"))
    return params


@pytest.mark.parametrize(("nodes", "first"), _chunks())
def test_seeds(nodes: int, first: int) -> None:
    """Every invariant holds with the options each seed draws; the faults and the loop's steps all happen."""
    total, failures = _run_seeds(range(first, first + SEEDS_PER_CHUNK), nodes, {})
    assert not failures, f"{len(failures)} of {SEEDS_PER_CHUNK} seeds failed:\n" + "\n".join(failures)
    for name in (
        "leaders",
        "crashes",
        "crashes_at_io",
        "lost_writes",
        "partitions",
        "dropped",
        "acked",
        "reads_answered",
        "writer_saves",
        "saves_overlapped",
        "prepares",
        "prepared_used",
        "snapshots_installed",
    ):
        assert getattr(total, name) > 0, f"no {name} in {SEEDS_PER_CHUNK} seeds: {total}"


def test_the_seeds_cover_each_option_both_ways() -> None:
    """The chunks' draws give every option on and off in a good share of the seeds."""
    counts: Counter[tuple[str, bool]] = Counter()
    for _nodes, first in (p.values for p in _chunks()):
        for seed in range(first, first + SEEDS_PER_CHUNK):
            for name, on in draw_options(seed, {}).items():
                counts[(name, on)] += 1
    for name in LOOP_OPTIONS:
        for on in (True, False):
            assert counts[(name, on)] >= CHUNKS * SEEDS_PER_CHUNK // 3, f"{name}={on}: {counts[(name, on)]} seeds"


class _Probe:
    """Counts how often one step of the loop ran (a wrapper around the node's or the core's method)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: type, name: str, hit: Callable[..., bool]) -> None:
        self.hits = 0
        original = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.hits += bool(hit(result, *args, **kwargs))
            return result

        monkeypatch.setattr(owner, name, counting)


def _probe(monkeypatch: pytest.MonkeyPatch, option: str) -> _Probe:
    """The step of the loop that `option` turns on (LoopOptions' field comments)."""
    match option:
        case "inline_persist_entries_max":  # a Ready with entries saved on the loop's thread
            return _Probe(monkeypatch, QuorumNode, "_persist_inline", lambda _r, _self, rd, _a: bool(rd.entries))
        case "apply_ahead_during_save":  # work between a save's write and its fsync, in a handler
            return _Probe(monkeypatch, QuorumNode, "_prepares_during_save", lambda r, *_: r)
        case "prepare_while_committing":
            return _Probe(monkeypatch, QuorumNode, "_prepare_ahead", lambda *_: True)
        case "leader_sends_before_apply":
            return _Probe(monkeypatch, Raft, "ready", lambda _r, _self, withhold_committed=False: withhold_committed)
        case "ready_in_handler":  # the peer handler looks whether it may handle the Ready itself
            return _Probe(monkeypatch, QuorumNode, "_persists_inline_next", lambda *_: True)
        case "idle_leader_inline_path":
            return _Probe(monkeypatch, QuorumNode, "_handle_proposal_here", lambda *_: True)
    raise AssertionError(f"no probe for {option}")


@pytest.mark.parametrize("on", [True, False], ids=["on", "off"])
@pytest.mark.parametrize("option", LOOP_OPTIONS)
def test_each_loop_option_on_and_off(option: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every LoopOptions field keeps every invariant both ways, and its step runs exactly when it is on."""
    probe = _probe(monkeypatch, option)
    forced = {option: on} | (NEEDS.get(option, {}) if on else {})
    _total, failures = _run_seeds(range(70_000, 70_000 + FORCED_SEEDS), 3, forced)
    assert not failures, f"{len(failures)} of {FORCED_SEEDS} seeds failed:\n" + "\n".join(failures)
    assert (probe.hits > 0) is on, f"{option}={'on' if on else 'off'}: its step ran {probe.hits} times"


def test_a_seed_replays_exactly() -> None:
    traces: list[list[str]] = [[], []]
    results = []
    for trace in traces:
        results.append(LoopCluster(7, 3, 300, verbose=True, out=trace.append).run())
    assert traces[0] == traces[1]
    assert results[0] == results[1]
    assert len(traces[0]) > 50


def test_a_failure_names_the_options_it_replays_with() -> None:
    forced = {"ready_in_handler": False, "durable_notice": True}
    err = LoopSimulationError(3, 3, 400, "apply order: x", "event 1", forced)
    assert "python3 -m tests.sim.run --loop --seed 3 --nodes 3 --steps 400" in str(err)
    assert "--option durable_notice=on" in str(err) and "--loop-option ready_in_handler=off" in str(err)
    with pytest.raises(ValueError, match="unknown options"):
        draw_options(1, {"no_such_option": True})
