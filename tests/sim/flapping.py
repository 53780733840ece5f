"""A scenario of the core simulator: links that flap under a healthy leader elect nobody new.

The only faults are reports of a broken stream to the leader
(Raft.leader_unreachable, RaftConfig.campaign_on_leader_loss) at random
followers and random times, while the leader is alive and still heard by a
majority (itself and the followers with no report pending); messages are
delayed, duplicated and reordered, never lost. Pre-vote and check-quorum are
on, as the option requires. Checked after every event, besides the core
simulator's invariants: once the first leader is elected no node's term
grows and nobody else leads. A failing seed replays with

    python3 -m tests.sim.run --flapping --seed 1234 --nodes 3 --steps 3000 -v
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from quorum.raft.types import Role
from tests.sim.cluster import Cluster, SimNode, SimResult, SimulationError
from tests.sim.invariants import fail

# Per tick: the chance that one more follower is told its stream to the leader broke.
FLAP_RATE = 0.3


class FlappingLinkError(SimulationError):
    def __init__(self, seed: int, nodes: int, steps: int, what: str, at: str) -> None:
        super().__init__(seed, nodes, steps, what, at)
        self.command = f"python3 -m tests.sim.run --flapping --seed {seed} --nodes {nodes} --steps {steps} -v"
        self.args = (f"seed {seed}, {nodes} nodes (flapping links): {what} ({at})\n  replay: {self.command}",)


class FlappingLinks(Cluster):
    def __init__(
        self,
        seed: int,
        nodes: int = 3,
        steps: int = 3000,
        verbose: bool = False,
        out: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(seed, nodes, steps, verbose, out, forced={"campaign_on_leader_loss": True})
        self.knobs.update(pre_vote=True, check_quorum=True)
        self.profile = replace(
            self.profile,
            drop_rate=0.0,
            slow_rate=0.0,
            partition_rate=0.0,
            crash_rate=0.0,
            pause_rate=0.0,
            crash_mid_ready_rate=0.0,
            transfer_rate=0.0,
        )
        self.flap_rate = 0.0  # the core simulator's flaps heed no majority: this scenario's own below
        self.stable: tuple[int, int] | None = None  # the first leader and its term

    def _error(self, what: str) -> SimulationError:
        return FlappingLinkError(self.seed, self.n, self.steps, what, f"event {self.events}, tick {self.ticks}")

    def _chaos(self) -> None:
        super()._chaos()
        if self.break_rng.random() < FLAP_RATE:
            self._flap_a_minority()

    def _flap_a_minority(self) -> None:
        """Report a broken stream at one more follower, if the leader and the followers still in its
        lease stay a majority after it."""
        leaders = self._leaders()
        if len(leaders) != 1:
            return
        lead = leaders[0].id
        following = [nd for nd in self.nodes.values() if nd.core is not None and nd.core.leader_id == lead]
        away = self.n - len(following)  # the leader follows itself
        quorum = self.n // 2 + 1
        candidates = [nd for nd in following if nd.id != lead and nd.core is not None and nd.core.role is Role.FOLLOWER]
        if candidates and away + 1 <= self.n - quorum:
            self._report_stream_break(self.break_rng.choice(candidates), lead)

    def _after(self, node: SimNode) -> None:
        super()._after(node)
        core = node.core
        if core is None:
            return
        if self.stable is None:
            if core.role is Role.LEADER:
                self.stable = (node.id, core.term)
            return
        leader, term = self.stable
        if core.term > term:
            raise fail("flapping link", f"node {node.id} moved to term {core.term} under leader {leader} of {term}")
        if core.role is Role.LEADER and node.id != leader:
            raise fail("flapping link", f"node {node.id} leads term {core.term}; node {leader} led {term}")


def run_flapping_seed(
    seed: int, nodes: int = 3, steps: int = 3000, verbose: bool = False, out: Callable[[str], None] | None = None
) -> SimResult:
    return FlappingLinks(seed, nodes, steps, verbose, out).run()
