"""Deterministic simulation of the Raft core over thousands of seeds (STYLE 11).

CI runs CHUNKS x SEEDS_PER_CHUNK seeds, half on 3-node and half on 5-node
clusters. A failing seed is reported with the command that replays it, e.g.

    python3 -m tests.sim.run --seed 1234 --nodes 5 --steps 3000 -v

The nightly-style sweep runs wider ranges from the command line:

    python3 -m tests.sim.run --seeds 0:20000 --nodes 3 --jobs 2
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.sim.cluster import EXTENSIONS, Cluster, SimResult, SimulationError, run_seed

pytestmark = pytest.mark.sim

STEPS = 3000
# 800 seeds: about 2 minutes of CI's 60 (each seed costs ~0.1 s); wider sweeps run from the command line.
CHUNKS = 16
SEEDS_PER_CHUNK = 50
# Seeds per protocol extension forced on, and forced off (on top of the chunks, where each seed draws them).
EXTENSION_SEEDS = 12


def _chunks() -> list[pytest.param]:  # type: ignore[valid-type]
    params = []
    for k in range(CHUNKS):
        nodes = 3 if k % 2 == 0 else 5
        first = (k // 2) * SEEDS_PER_CHUNK
        params.append(pytest.param(nodes, first, id=f"{nodes}nodes-seeds{first}-{first + SEEDS_PER_CHUNK - 1}"))
    return params


@pytest.mark.parametrize(("nodes", "first"), _chunks())
def test_seeds(nodes: int, first: int) -> None:
    failures = []
    for seed in range(first, first + SEEDS_PER_CHUNK):
        try:
            run_seed(seed, nodes, STEPS)
        except SimulationError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {SEEDS_PER_CHUNK} seeds failed:\n" + "\n".join(failures)


@pytest.mark.parametrize("on", [True, False], ids=["on", "off"])
@pytest.mark.parametrize("extension", EXTENSIONS)
def test_seeds_with_each_extension_on_and_off(extension: str, on: bool) -> None:
    """Every protocol extension (RaftConfig) keeps every invariant both ways, the others drawn per seed."""
    failures = []
    self_commits = 0
    for seed in range(EXTENSION_SEEDS):
        try:
            self_commits += run_seed(10_000 + seed, 3 if seed % 3 else 5, STEPS, forced={extension: on}).self_commits
        except SimulationError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {EXTENSION_SEEDS} seeds failed:\n" + "\n".join(failures)
    if extension == "durable_notice":
        # Only the leader's DURABLE notice lets a follower commit what no leader counted yet.
        assert (self_commits > 0) is on, f"{self_commits} follower self-commits with durable_notice {on}"


def test_a_forced_extension_is_in_the_config_and_the_replay_command() -> None:
    cluster = Cluster(3, 3, 100, forced={"durable_notice": False})
    assert cluster.knobs["durable_notice"] is False
    err = SimulationError(3, 3, 100, "x", "event 1", {"durable_notice": False})
    assert "--option durable_notice=off" in str(err)


def test_a_seed_replays_exactly() -> None:
    traces: list[list[str]] = [[], []]
    results = []
    for trace in traces:
        results.append(Cluster(11, 5, 1500, verbose=True, out=trace.append).run())
    assert traces[0] == traces[1]
    assert results[0] == results[1]
    assert len(traces[0]) > 1000


def test_the_simulation_exercises_every_fault_and_feature() -> None:
    """Guard against a vacuous simulator: over a few seeds, everything happens at least once."""
    total = SimResult(seed=0, nodes=0, steps=0)
    for seed in range(40):
        r = run_seed(seed, 3 if seed % 2 == 0 else 5, STEPS)
        for f in dataclasses.fields(r):
            setattr(total, f.name, getattr(total, f.name) + getattr(r, f.name))
    for name in (
        "leaders",
        "crashes",
        "crashes_mid_ready",
        "unsynced_lost",
        "partitions",
        "dropped",
        "acked",
        "not_leader",
        "dropped_proposals",
        "reads_answered",
        "transfers",
        "snapshots_taken",
        "snapshots_sent",
        "snapshots_installed",
        "lazy_commit_changes",
        "self_commits",
        "applied_ahead",
        "leader_loss_reports",
        "leader_loss_campaigns",
    ):
        assert getattr(total, name) > 0, f"no {name} in 40 seeds: {total}"
    assert total.acked > 1000 and total.reads_answered > 500


def test_failure_message_carries_the_replay_command() -> None:
    err = SimulationError(1234, 5, 3000, "election safety: nodes 1 and 2 both lead term 7", "event 10")
    assert "python3 -m tests.sim.run --seed 1234 --nodes 5 --steps 3000 -v" in str(err)
