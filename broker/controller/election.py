"""Leader election, `LeaderAndIsr` and epoch fencing: the controller's pure decisions.

docs/research/kafka.md §2.7 (K28 `kafka/api/LeaderAndIsr.scala`), §2.8
(`PartitionLeaderElectionAlgorithms` in `PartitionStateMachine.scala`, and
`Election.scala`), §2.9 (epoch fencing), §2.14 (auto leader rebalance,
`KafkaController.checkAndTriggerAutoLeaderRebalance`), §2.15 (controlled
shutdown) and the ISR removal of §2.6 (`ReplicaStateMachine.doRemoveReplicasFromIsr`).

Each strategy exists twice, as in Kafka: `*_partition_leader` is the bare
algorithm (the chosen leader or None) and `*_election` adds the new ISR, whether
the choice was unclean and who must receive the LeaderAndIsr request
(Kafka's `ElectionResult.liveReplicas`). "Live" means what
`ControllerContext.isReplicaOnline` means: the broker is registered, not shutting
down, and the replica's log dir is online; the caller computes it.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The content of `/brokers/topics/<t>/partitions/<p>/state` and the znode version it was read at.

    Kafka keeps the controller epoch beside it (`LeaderIsrAndControllerEpoch`);
    here it is one value. `zk_version` is the version a conditional write must
    expect: the `new_*` helpers keep it, and the controller replaces it with
    `with_zk_version` after its write succeeds (K28 `withZkVersion`).
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = INITIAL_ZK_VERSION
    # KIP-966's eligible leader replicas: left the ISR while it was below min.insync.replicas, so they hold
    # every acknowledged record (see `next_eligible_leader_replicas`). Only the damaged-replica rules use them.
    eligible: tuple[int, ...] = ()

    @classmethod
    def initial(cls, leader: int, isr: Sequence[int], controller_epoch: int) -> LeaderAndIsr:
        """A new partition's first state: leader epoch 0, znode version 0 (K28 `LeaderAndIsr(leader, isr)`)."""
        return cls(leader, INITIAL_LEADER_EPOCH, tuple(isr), controller_epoch, INITIAL_ZK_VERSION)

    @classmethod
    def during_delete(cls, isr: Sequence[int], controller_epoch: int) -> LeaderAndIsr:
        """The state a topic deletion writes: leader -2 (K28 `LeaderAndIsr.duringDelete`)."""
        return cls.initial(LEADER_DURING_DELETE, isr, controller_epoch)

    @property
    def has_leader(self) -> bool:
        """K28 `leaderOpt.isDefined`: only -1 means no leader (-2, during delete, counts as a leader value)."""
        return self.leader != NO_LEADER

    def new_leader_and_isr(
        self, leader: int, isr: Sequence[int], *, controller_epoch: int | None = None
    ) -> LeaderAndIsr:
        """Every controller-driven change bumps the leader epoch, even an ISR-only one (§2.7)."""
        epoch = self.controller_epoch if controller_epoch is None else controller_epoch
        eligible = tuple(r for r in self.eligible if r not in isr)  # an ISR member is not also "eligible"
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), epoch, self.zk_version, eligible)

    def with_eligible(self, eligible: Sequence[int]) -> LeaderAndIsr:
        return replace(self, eligible=tuple(eligible))

    def new_leader(self, leader: int, *, controller_epoch: int | None = None) -> LeaderAndIsr:
        """A new leader, same ISR, next leader epoch (K28 `newLeader`)."""
        return self.new_leader_and_isr(leader, self.isr, controller_epoch=controller_epoch)

    def new_epoch_and_zk_version(self, *, controller_epoch: int | None = None) -> LeaderAndIsr:
        """Same leader and ISR, next leader epoch; reassignment uses it to push a new replica list."""
        return self.new_leader_and_isr(self.leader, self.isr, controller_epoch=controller_epoch)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return replace(self, zk_version=zk_version)

    def with_controller_epoch(self, controller_epoch: int) -> LeaderAndIsr:
        return replace(self, controller_epoch=controller_epoch)


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """A successful election: the leader, the ISR to write, and who gets the LeaderAndIsr request.

    `unclean` is true when the leader was not in the ISR (data may be lost;
    Kafka marks `UncleanLeaderElectionsPerSec`). `recipients` is Kafka's
    `ElectionResult.liveReplicas`, in assignment order.
    """

    leader: int
    new_isr: tuple[int, ...]
    unclean: bool
    recipients: tuple[int, ...]


# --- the algorithms (K28 PartitionLeaderElectionAlgorithms) ---------------------------------


def offline_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
    unclean_excluded: Collection[int] = (),
) -> int | None:
    """The first live ISR member in assignment order; else, if unclean election is on, the first live replica.

    `unclean_excluded`: replicas known to have lost acknowledged data (damaged_replicas); an unclean
    election never picks them, since they would make the replicas that still hold the data truncate.
    """
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if not unclean_leader_election_enabled:
        return None
    return next((r for r in assignment if r in live_replicas and r not in unclean_excluded), None)


def reassign_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The first live ISR member in the target replica list; never unclean."""
    return next((r for r in reassignment if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The preferred replica (`assignment[0]`), only if it is live and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    return preferred if preferred in live_replicas and preferred in isr else None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    """The first ISR member that is live and not shutting down.

    Kafka passes `live_replicas` *including* shutting-down brokers here
    (`isReplicaOnline(..., includeShuttingDownBrokers = true)`); excluding
    them is this function's job.
    """
    return next(
        (r for r in assignment if r in live_replicas and r in isr and r not in shutting_down_brokers),
        None,
    )


# --- elections with their ISR rule (K28 Election.scala) -------------------------------------


def new_partition_election(assignment: Sequence[int], live_replicas: Collection[int]) -> ElectionResult | None:
    """NewPartition -> OnlinePartition: leader = first live replica, ISR = all live replicas (§2.5).

    None means "No assigned replica is alive" (the transition fails). Kafka
    sends this first LeaderAndIsr (isNew=true) to the ISR.
    """
    live = tuple(r for r in assignment if r in live_replicas)
    if not live:
        return None
    return ElectionResult(leader=live[0], new_isr=live, unclean=False, recipients=live)


def offline_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
    unclean_excluded: Collection[int] = (),
) -> ElectionResult | None:
    """Offline strategy: new ISR = the live ISR members, or just the leader when it was an unclean pick."""
    leader = offline_partition_leader(assignment, isr, live_replicas, unclean_leader_election_enabled, unclean_excluded)
    if leader is None:
        return None
    unclean = leader not in isr
    new_isr = (leader,) if unclean else tuple(r for r in isr if r in live_replicas)
    recipients = tuple(r for r in assignment if r in live_replicas)
    return ElectionResult(leader=leader, new_isr=new_isr, unclean=unclean, recipients=recipients)


def reassign_election(
    reassignment: Sequence[int], isr: Sequence[int], live_replicas: Collection[int]
) -> ElectionResult | None:
    """Reassignment strategy: ISR unchanged; every target replica, live or not, gets the request."""
    leader = reassign_partition_leader(reassignment, isr, live_replicas)
    if leader is None:
        return None
    return ElectionResult(leader=leader, new_isr=tuple(isr), unclean=False, recipients=tuple(reassignment))


def preferred_replica_election(
    assignment: Sequence[int], isr: Sequence[int], live_replicas: Collection[int]
) -> ElectionResult | None:
    """Preferred strategy: ISR unchanged; every assigned replica gets the request."""
    leader = preferred_replica_partition_leader(assignment, isr, live_replicas)
    if leader is None:
        return None
    return ElectionResult(leader=leader, new_isr=tuple(isr), unclean=False, recipients=tuple(assignment))


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> ElectionResult | None:
    """Controlled-shutdown strategy: new ISR = ISR minus the shutting-down brokers.

    `live_replicas` includes shutting-down brokers, as in Kafka; they are the recipients too.
    """
    leader = controlled_shutdown_partition_leader(assignment, isr, live_replicas, shutting_down_brokers)
    if leader is None:
        return None
    new_isr = tuple(r for r in isr if r not in shutting_down_brokers)
    recipients = tuple(r for r in assignment if r in live_replicas)
    return ElectionResult(leader=leader, new_isr=new_isr, unclean=False, recipients=recipients)


def apply_election(current: LeaderAndIsr, result: ElectionResult, controller_epoch: int) -> LeaderAndIsr:
    """The state to write for an election result: next leader epoch, stamped with the controller's epoch.

    An unclean leader's log becomes the partition's history: the eligible replicas no longer vouch for it.
    """
    state = current.new_leader_and_isr(result.leader, result.new_isr, controller_epoch=controller_epoch)
    return state.with_eligible(()) if result.unclean else state


# --- ISR removal when a replica goes offline (K28 ReplicaStateMachine.doRemoveReplicasFromIsr) ---


def remove_replica_from_isr(
    current: LeaderAndIsr, replica: int, controller_epoch: int, min_insync_replicas: int | None = None
) -> LeaderAndIsr | None:
    """The state after `replica` goes offline, or None when it is not in the ISR (nothing to write).

    A leader that goes offline leaves leader -1. The ISR never becomes empty:
    a one-member ISR is kept as it is, so the last ISR member stays the
    candidate for a clean election when it returns. With the topic's
    `min_insync_replicas`, the eligible leader replicas follow the change.
    """
    if replica not in current.isr:
        return None
    new_leader = NO_LEADER if replica == current.leader else current.leader
    new_isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    new_state = current.new_leader_and_isr(new_leader, new_isr, controller_epoch=controller_epoch)
    if min_insync_replicas is None:
        return new_state
    return new_state.with_eligible(
        next_eligible_leader_replicas(current.isr, new_isr, current.eligible, min_insync_replicas)
    )


def next_eligible_leader_replicas(
    old_isr: Sequence[int], new_isr: Sequence[int], old_eligible: Sequence[int], min_insync_replicas: int
) -> tuple[int, ...]:
    """KIP-966's ELR after an ISR change (Kafka 3.7 `PartitionChangeBuilder`, the ELR part).

    A replica that leaves an ISR now smaller than `min.insync.replicas` has
    every acknowledged record: an acks=all record is acknowledged only while
    the ISR has at least `min.insync.replicas` members, every one of which
    holds it. From then until the ISR is that large again nothing more is
    acknowledged, so it stays eligible; once the ISR is large enough again,
    new acknowledgements pass it by and the list is cleared.
    """
    if len(new_isr) >= min_insync_replicas:
        return ()
    left = [r for r in old_isr if r not in new_isr]
    merged = list(dict.fromkeys([*old_eligible, *left]))
    return tuple(r for r in merged if r not in new_isr)


# --- a replica that lost acknowledged data (KIP-966 motivation; broker/damaged_logs.py) ------


@dataclass(frozen=True, slots=True)
class DamagedReplicaDecision:
    """What the controller does when brokers report damaged replicas of one partition.

    `state` is the partition state to write (None: nothing to write).
    `outcome` names the rule that applied, for the logs:

    * `not_in_isr`: the replica was out of sync already (it only leaves the eligible replicas);
    * `removed_from_isr`: other ISR members have the data; if the damaged one led, one of them
      leads now, or none until one is live (the partition stays offline);
    * `isr_from_eligible`: every ISR member is damaged, but replicas that left the ISR below
      min.insync.replicas hold every acknowledged record: they become the ISR;
    * `damaged_may_lead`: no other replica is known to have the data: a damaged ISR member may
      lead, an unclean election in effect.
    """

    state: LeaderAndIsr | None
    outcome: str

    @property
    def unclean(self) -> bool:
        return self.outcome == DAMAGED_MAY_LEAD


NOT_IN_ISR = "not_in_isr"
REMOVED_FROM_ISR = "removed_from_isr"
ISR_FROM_ELIGIBLE = "isr_from_eligible"
DAMAGED_MAY_LEAD = "damaged_may_lead"


def _still_eligible(
    current: LeaderAndIsr, assignment: Sequence[int], damaged: Collection[int], min_insync_replicas: int
) -> tuple[int, ...]:
    """The eligible replicas that still vouch for every acknowledged record.

    None once the ISR is as large as `min.insync.replicas` (lowered since, say: acknowledgements went on
    without them, which is why Kafka clears the ELR when the setting changes); never a damaged replica, nor
    one a reassignment dropped from the assignment.
    """
    if len(current.isr) >= min_insync_replicas:
        return ()
    return tuple(r for r in current.eligible if r not in damaged and r in assignment)


def _first_live(assignment: Sequence[int], candidates: Collection[int], live: Collection[int]) -> int:
    return next((r for r in assignment if r in candidates and r in live), NO_LEADER)


def damaged_replica_decision(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    damaged: Collection[int],
    live_replicas: Collection[int],
    controller_epoch: int,
    min_insync_replicas: int,
) -> DamagedReplicaDecision:
    """The partition's next state when `damaged` replicas lost acknowledged data (pure; table-tested).

    Never a damaged leader while a healthy ISR or eligible replica exists,
    live or not: when none of those is live the partition has no leader
    until one registers (the offline election then picks it).
    """
    eligible = _still_eligible(current, assignment, damaged, min_insync_replicas)
    healthy_isr = tuple(r for r in current.isr if r not in damaged)
    if len(healthy_isr) == len(current.isr):
        if eligible == current.eligible:
            return DamagedReplicaDecision(None, NOT_IN_ISR)
        state = current.new_leader_and_isr(current.leader, current.isr, controller_epoch=controller_epoch)
        return DamagedReplicaDecision(state.with_eligible(eligible), NOT_IN_ISR)
    if healthy_isr:
        leader = (
            current.leader if current.leader in healthy_isr else _first_live(assignment, healthy_isr, live_replicas)
        )
        state = current.new_leader_and_isr(leader, healthy_isr, controller_epoch=controller_epoch)
        return DamagedReplicaDecision(state.with_eligible(eligible), REMOVED_FROM_ISR)
    if eligible:
        leader = _first_live(assignment, eligible, live_replicas)
        state = current.new_leader_and_isr(leader, eligible, controller_epoch=controller_epoch)
        return DamagedReplicaDecision(state.with_eligible(()), ISR_FROM_ELIGIBLE)
    if current.leader in current.isr and current.leader in live_replicas:
        return DamagedReplicaDecision(None, DAMAGED_MAY_LEAD)  # it leads already; nothing better exists
    leader = _first_live(assignment, current.isr, live_replicas)
    if leader == current.leader:
        return DamagedReplicaDecision(None, DAMAGED_MAY_LEAD)
    state = current.new_leader_and_isr(leader, current.isr, controller_epoch=controller_epoch)
    return DamagedReplicaDecision(state, DAMAGED_MAY_LEAD)


# --- epoch fencing (§2.9) ------------------------------------------------------------------


def is_stale_controller_epoch(request_epoch: int, known_epoch: int) -> bool:
    """A request (or a znode write) from an older controller than the newest one seen.

    Broker side: `request_epoch` is the request's, `known_epoch` the cached
    one; a stale request is answered STALE_CONTROLLER_EPOCH as a whole. An
    equal epoch is not stale (the same controller's next request).
    Controller side (`doElectLeaderForPartitions`): pass the controller's own
    epoch and the epoch found in the partition state; stale means another
    controller already wrote it, so the election is aborted.
    """
    return request_epoch < known_epoch


def is_newer_leader_epoch(request_leader_epoch: int, current_leader_epoch: int) -> bool:
    """A LeaderAndIsr partition state is applied only if its leader epoch is strictly newer.

    An equal or older epoch is ignored with STALE_CONTROLLER_EPOCH (sic, K28 ReplicaManager.becomeLeaderOrFollower).
    """
    return request_leader_epoch > current_leader_epoch


def aborted_election_message(partition: str, controller_id: int, zk_controller_epoch: int) -> str:
    """K28 `doElectLeaderForPartitions` wording when the partition state carries a newer controller epoch."""
    return (
        f"Aborted leader election for partition {partition} since the LeaderAndIsr path was already written by "
        f"another controller. This probably means that the current controller {controller_id} went through a soft "
        f"failure and another controller was elected with epoch {zk_controller_epoch}."
    )


# --- auto leader rebalance (K28 KafkaController.checkAndTriggerAutoLeaderRebalance) ----------


@dataclass(frozen=True, slots=True)
class PreferredLeaderGroup(Generic[K]):
    """The partitions whose preferred replica is one broker, and those of them it does not lead."""

    partitions: tuple[K, ...]
    off_preferred: tuple[K, ...]

    @property
    def imbalance_ratio(self) -> float:
        return len(self.off_preferred) / len(self.partitions)


def group_by_preferred_leader(
    assignments: Mapping[K, Sequence[int]], leaders: Mapping[K, int]
) -> dict[int, PreferredLeaderGroup[K]]:
    """Groups partitions by preferred replica (`assignment[0]`), in the order given.

    Callers exclude topics queued for deletion beforehand, as Kafka does. A
    partition with no known leadership does not count as out of place; one
    with leader -1 does (Kafka: `leadershipInfo.exists(_.leader != broker)`).
    """
    partitions: dict[int, list[K]] = {}
    off_preferred: dict[int, list[K]] = {}
    for tp, replicas in assignments.items():
        if not replicas:
            continue
        preferred = replicas[0]
        partitions.setdefault(preferred, []).append(tp)
        off = off_preferred.setdefault(preferred, [])
        leader = leaders.get(tp)
        if leader is not None and leader != preferred:
            off.append(tp)
    return {b: PreferredLeaderGroup(tuple(tps), tuple(off_preferred[b])) for b, tps in partitions.items()}


def leader_imbalance_ratios(assignments: Mapping[K, Sequence[int]], leaders: Mapping[K, int]) -> dict[int, float]:
    """Per broker that is the preferred leader of some partition: the share of those it does not lead."""
    return {b: g.imbalance_ratio for b, g in group_by_preferred_leader(assignments, leaders).items()}


def imbalanced_brokers(
    assignments: Mapping[K, Sequence[int]], leaders: Mapping[K, int], threshold_percent: int
) -> dict[int, float]:
    """Brokers whose imbalance ratio is strictly above `leader.imbalance.per.broker.percentage` / 100.

    For these Kafka runs a PREFERRED election (AutoTriggered) over the
    broker's out-of-place partitions, skipping a partition while any
    reassignment is in progress, its topic is being deleted, or
    `preferred_replica_partition_leader` finds no leader.
    """
    limit = threshold_percent / 100
    return {broker: ratio for broker, ratio in leader_imbalance_ratios(assignments, leaders).items() if ratio > limit}
