"""Links that flap under a healthy leader elect nobody new (tests/sim/flapping.py), over seeds.

Followers of a leader that is alive are told, a minority at a time, that their
stream to it broke (Raft.leader_unreachable); with pre-vote and check-quorum on,
no term may change after the first election, while messages are delayed,
duplicated and reordered. The core simulator's own seeds (tests/test_raft_sim.py)
draw the option on and off, with stream breaks reported on crashes and flaps
that heed no majority. A failing seed replays with

    python3 -m tests.sim.run --flapping --seed 1234 --nodes 3 --steps 2000 -v
"""

from __future__ import annotations

import pytest

from tests.sim.cluster import SimulationError
from tests.sim.flapping import run_flapping_seed

pytestmark = pytest.mark.sim

STEPS = 2000
SEEDS = 12


@pytest.mark.parametrize("nodes", [3, 5])
def test_flapping_links_under_a_healthy_leader_change_no_term(nodes: int) -> None:
    failures = []
    reports = campaigns = 0
    for seed in range(SEEDS):
        try:
            result = run_flapping_seed(30_000 + seed, nodes, STEPS)
        except SimulationError as e:
            failures.append(str(e))
            continue
        reports += result.leader_loss_reports
        campaigns += result.leader_loss_campaigns
        assert result.leaders == 1, f"seed {30_000 + seed}: {result.leaders} leaders"
    assert not failures, f"{len(failures)} of {SEEDS} seeds failed:\n" + "\n".join(failures)
    # Not vacuous: the flaps were reported and each started a pre-election.
    assert campaigns > 10 * SEEDS and campaigns == reports
