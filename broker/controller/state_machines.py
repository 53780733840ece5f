"""The partition and replica state machines (docs/research/kafka.md §2.5, §2.6, §2.8).

Kafka's `PartitionStateMachine` / `ReplicaStateMachine`, driven by the
controller on its event task. The legal transitions come from `states`, the
leader choices from `election`; this module does the I/O around them:
conditional, fenced writes of the partition state znodes (retried from a
fresh read on BadVersion), the state-change log lines, and the requests added
to the event's `RequestBatch`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from broker.controller.channel import RequestBatch
from broker.controller.context import ControllerContext, PartitionReplica, tp_text
from broker.controller.election import (
    ElectionResult,
    LeaderAndIsr,
    aborted_election_message,
    apply_election,
    controlled_shutdown_election,
    is_stale_controller_epoch,
    new_partition_election,
    next_eligible_leader_replicas,
    offline_election,
    preferred_replica_election,
    reassign_election,
    remove_replica_from_isr,
)
from broker.controller.states import IllegalStateTransition, PartitionState, ReplicaState, check_transition
from broker.controller.zk_store import ControllerZkStore
from broker.state_change_log import StateChangeLogger, leader_and_isr_text
from client.kafka.structs import TopicPartition
from client.zk.exceptions import BadVersionError, NodeExistsError

# How many times a conditional partition-state write is retried from a fresh read (Kafka loops without a limit).
ZK_WRITE_RETRIES_MAX = 10
T = TypeVar("T")

# ZooKeeper work for many partitions goes out together: the session pipelines the requests and the
# quorum commits them in batches, so 1,000 elections cost a few round trips, not 1,000.
CONCURRENT_PARTITIONS_MAX = 512


async def concurrently(work: Callable[[T], Awaitable[None]], items: Sequence[T]) -> None:
    """Runs `work(item)` for every item, at most CONCURRENT_PARTITIONS_MAX at a time; the first error is raised."""
    for start in range(0, len(items), CONCURRENT_PARTITIONS_MAX):
        await asyncio.gather(*(work(item) for item in items[start : start + CONCURRENT_PARTITIONS_MAX]))


P = PartitionState
R = ReplicaState


async def topic_min_isr(store: ControllerZkStore, topic: str, default: int) -> int:
    """The topic's `min.insync.replicas`: its override in `/config/topics/<t>`, else the broker default."""
    override = await store.topic_min_isr_override(topic)
    return default if override is None else override


async def with_eligible_after_shrink(
    store: ControllerZkStore, tp: TopicPartition, current: LeaderAndIsr, new: LeaderAndIsr, min_isr_default: int
) -> LeaderAndIsr:
    """`new` with KIP-966's eligible leader replicas updated for the replicas that left the ISR."""
    if not set(current.isr) - set(new.isr):
        return new
    min_isr = await topic_min_isr(store, tp.topic, min_isr_default)
    return new.with_eligible(next_eligible_leader_replicas(current.isr, new.isr, current.eligible, min_isr))


class ElectionStrategy(enum.Enum):
    """Which leader election an Online transition runs (Kafka's PartitionLeaderElectionStrategy)."""

    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"
    # The candidates are the partition's assignment, which the reassignment has already set to its target (§2.13 B2).
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    # The ElectLeaders API's unclean election: offline election with unclean allowed, whatever the topic says.
    UNCLEAN = "OfflinePartitionLeaderElectionStrategy(true)"


def _csv(values: Iterable[int]) -> str:
    return ",".join(map(str, values))


class PartitionStateMachine:
    def __init__(
        self,
        controller_id: int,
        ctx: ControllerContext,
        store: ControllerZkStore,
        batch: Callable[[], RequestBatch],
        state_log: StateChangeLogger,
        unclean_default: bool,
        logger: Any,
        min_insync_replicas_default: int = 1,
    ) -> None:
        self._id = controller_id
        self._ctx = ctx
        self._store = store
        self._batch = batch
        self._state_log = state_log
        self._unclean_default = unclean_default
        self._log = logger
        self._min_isr_default = min_insync_replicas_default

    def initialize_states(self) -> None:
        """Failover: Online if the cached leader is live, Offline if not, New without a state znode."""
        for tp in self._ctx.all_partitions():
            state = self._ctx.leadership.get(tp)
            if state is None:
                self._ctx.partition_states[tp] = P.NEW_PARTITION
            elif self._ctx.is_online(state.leader):
                self._ctx.partition_states[tp] = P.ONLINE_PARTITION
            else:
                self._ctx.partition_states[tp] = P.OFFLINE_PARTITION

    async def trigger_online_partition_state_change(self) -> None:
        """Elect leaders for every New and Offline partition not queued for deletion (K28 same name)."""
        partitions = self._ctx.partitions_in(P.NEW_PARTITION, P.OFFLINE_PARTITION)
        await self.handle_state_changes(
            [tp for tp in partitions if not self._ctx.is_topic_queued_for_deletion(tp.topic)], P.ONLINE_PARTITION
        )

    async def handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy = ElectionStrategy.OFFLINE,
    ) -> None:
        valid = [tp for tp in partitions if self._transition_ok(tp, target)]
        if target is P.ONLINE_PARTITION:
            # Split before acting: initializing moves New partitions to Online.
            new = [tp for tp in valid if self._ctx.partition_state(tp) is P.NEW_PARTITION]
            others = [tp for tp in valid if self._ctx.partition_state(tp) is not P.NEW_PARTITION]
            await self._initialize(new)
            await self._elect(others, strategy)
            return
        for tp in valid:
            current = self._ctx.partition_state(tp)
            if target is P.NEW_PARTITION:
                replicas = ",".join(map(str, self._ctx.replicas(tp)))
                self._info(
                    f"Changed partition {tp_text(tp)} state from {current} to {target} "
                    f"with assigned replicas {replicas}"
                )
            else:
                self._info(f"Changed partition {tp_text(tp)} state from {current} to {target}")
            self._ctx.partition_states[tp] = target

    def _transition_ok(self, tp: TopicPartition, target: PartitionState) -> bool:
        try:
            check_transition(self._ctx.partition_state(tp), target, tp_text(tp))
        except IllegalStateTransition as e:
            self._error(
                f"Controller {self._id} epoch {self._ctx.epoch} failed to change state for partition {tp_text(tp)} "
                f"from {e.current} to {target}: {e}"
            )
            return False
        return True

    # ---- New -> Online: the first leader (§2.5)

    async def _initialize(self, partitions: Sequence[TopicPartition]) -> None:
        await concurrently(self._initialize_one, partitions)

    async def _initialize_one(self, tp: TopicPartition) -> None:
        replicas = self._ctx.replicas(tp)
        election = new_partition_election(replicas, self._ctx.online_broker_ids)
        if election is None:
            self._fail(
                tp,
                P.ONLINE_PARTITION,
                f"Controller {self._id} epoch {self._ctx.epoch} encountered error during state change of partition "
                f"{tp_text(tp)} from New to Online, assigned replicas are [{_csv(replicas)}], "
                f"live brokers are [{_csv(sorted(self._ctx.live_broker_ids))}]. No assigned replica is alive.",
            )
            return
        state = LeaderAndIsr.initial(election.leader, election.new_isr, self._ctx.epoch)
        try:
            await self._store.create_partition_state(tp, state, self._ctx.epoch_zk_version)
        except NodeExistsError:
            await self._adopt_existing_state(tp)
            return
        self._became_online(tp, state, election.recipients, is_new=True)

    async def _adopt_existing_state(self, tp: TopicPartition) -> None:
        """The state znode already exists (written before a failover): take it instead of overwriting."""
        existing = await self._store.read_partition_state(tp)
        self._fail(
            tp,
            P.ONLINE_PARTITION,
            f"Failed to initialize partition state for {tp_text(tp)}: the state znode already exists ({existing})",
        )
        if existing is None:
            return
        self._ctx.leadership[tp] = existing
        self._ctx.partition_states[tp] = (
            P.ONLINE_PARTITION if self._ctx.is_live(existing.leader) else P.OFFLINE_PARTITION
        )

    # ---- Offline/Online -> Online: offline election (§2.8)

    async def _elect(self, partitions: Sequence[TopicPartition], strategy: ElectionStrategy) -> None:
        async def elect(tp: TopicPartition) -> None:
            for _ in range(ZK_WRITE_RETRIES_MAX):
                try:
                    await self._elect_one(tp, strategy)
                    break
                except BadVersionError:
                    self._log.info("partition_state_write_conflict", topic=tp.topic, partition=tp.partition)
            else:
                self._fail(tp, P.ONLINE_PARTITION, f"gave up after {ZK_WRITE_RETRIES_MAX} conflicting writes")

        await concurrently(elect, partitions)

    async def _elect_one(self, tp: TopicPartition, strategy: ElectionStrategy) -> None:
        current = await self._store.read_partition_state(tp)  # fresh, as doElectLeaderForPartitions
        if current is None:
            self._fail(tp, P.ONLINE_PARTITION, f"partition state of {tp_text(tp)} does not exist in ZooKeeper")
            return
        if is_stale_controller_epoch(self._ctx.epoch, current.controller_epoch):
            self._fail(
                tp, P.ONLINE_PARTITION, aborted_election_message(tp_text(tp), self._id, current.controller_epoch)
            )
            return
        election, strategy_text = await self._run_election(tp, current, strategy)
        if election is None:
            self._ctx.leadership[tp] = current
            self._fail(
                tp,
                P.ONLINE_PARTITION,
                f"Failed to elect leader for partition {tp_text(tp)} under strategy {strategy_text}",
            )
            return
        if election.unclean:
            self._log.warning("unclean_leader_election", topic=tp.topic, partition=tp.partition, leader=election.leader)
            live = ",".join(str(r) for r in self._ctx.replicas(tp) if r in self._ctx.online_broker_ids)
            self._state_log.controller(
                self._ctx.epoch,
                f"Unclean leader election: no broker in ISR is alive for {tp_text(tp)}. Elect leader "
                f"{election.leader} from live brokers {live}. There's potential data loss.",
                level="WARN",
            )
        new_state = apply_election(current, election, self._ctx.epoch)
        if not election.unclean:  # an ISR member shut down or went offline: it may become eligible
            new_state = await with_eligible_after_shrink(self._store, tp, current, new_state, self._min_isr_default)
        version = await self._store.update_partition_state(tp, new_state, self._ctx.epoch_zk_version)
        self._became_online(tp, new_state.with_zk_version(version), election.recipients, is_new=False)

    async def _run_election(
        self, tp: TopicPartition, current: LeaderAndIsr, strategy: ElectionStrategy
    ) -> tuple[ElectionResult | None, str]:
        """The election result and the strategy as Kafka prints it."""
        replicas = self._ctx.replicas(tp)
        if strategy is ElectionStrategy.CONTROLLED_SHUTDOWN:
            result = controlled_shutdown_election(
                replicas, current.isr, self._ctx.live_broker_ids, self._ctx.shutting_down
            )
            return result, strategy.value
        online = self._ctx.online_broker_ids
        if strategy is ElectionStrategy.REASSIGN:
            return reassign_election(replicas, current.isr, online), strategy.value
        if strategy is ElectionStrategy.PREFERRED:
            return preferred_replica_election(replicas, current.isr, online), strategy.value
        unclean = strategy is ElectionStrategy.UNCLEAN
        if not unclean and not any(r in online for r in current.isr):  # Kafka reads the topic config only here
            unclean = await self._unclean_allowed(tp.topic)
        excluded = self._ctx.unclean_excluded(tp, current.isr) if unclean else frozenset()
        election = offline_election(replicas, current.isr, online, unclean, excluded)
        return election, f"{ElectionStrategy.OFFLINE.value}({str(unclean).lower()})"

    async def _unclean_allowed(self, topic: str) -> bool:
        override = await self._store.topic_unclean_override(topic)
        return self._unclean_default if override is None else override

    def _became_online(self, tp: TopicPartition, state: LeaderAndIsr, recipients: Iterable[int], is_new: bool) -> None:
        previous = self._ctx.partition_state(tp)
        self._ctx.leadership[tp] = state
        self._ctx.partition_states[tp] = P.ONLINE_PARTITION
        self._info(
            f"Changed partition {tp_text(tp)} from {previous} to {P.ONLINE_PARTITION} "
            f"with state {leader_and_isr_text(state)}"
        )
        self._batch().add_leader_and_isr(
            tuple(recipients), tp, state, self._ctx.replicas(tp), is_new, self._ctx.live_broker_ids
        )

    # ---- logging

    def _fail(self, tp: TopicPartition, target: PartitionState, reason: str) -> None:
        self._error(
            f"Controller {self._id} epoch {self._ctx.epoch} failed to change state for partition {tp_text(tp)} "
            f"from {self._ctx.partition_state(tp)} to {target}: {reason}"
        )
        self._log.warning("partition_state_change_failed", topic=tp.topic, partition=tp.partition, reason=reason)

    def _info(self, message: str) -> None:
        self._state_log.controller(self._ctx.epoch, message)

    def _error(self, message: str) -> None:
        self._state_log.controller(self._ctx.epoch, message, level="ERROR")


class ReplicaStateMachine:
    def __init__(
        self,
        controller_id: int,
        ctx: ControllerContext,
        store: ControllerZkStore,
        batch: Callable[[], RequestBatch],
        state_log: StateChangeLogger,
        logger: Any,
        min_insync_replicas_default: int = 1,
    ) -> None:
        self._id = controller_id
        self._ctx = ctx
        self._store = store
        self._batch = batch
        self._state_log = state_log
        self._log = logger
        self._min_isr_default = min_insync_replicas_default

    def initialize_states(self) -> list[PartitionReplica]:
        """Failover: replicas on live brokers are Online, the others DeletionIneligible; returns the online ones."""
        online = []
        for pr in self._ctx.replicas_of(self._ctx.all_partitions()):
            if self._ctx.is_online(pr.replica):
                self._ctx.replica_states[pr] = R.ONLINE_REPLICA
                online.append(pr)
            else:
                self._ctx.replica_states[pr] = R.REPLICA_DELETION_INELIGIBLE
        return online

    async def handle_state_changes(self, replicas: Sequence[PartitionReplica], target: ReplicaState) -> None:
        valid = [pr for pr in replicas if self._transition_ok(pr, target)]
        if target is R.OFFLINE_REPLICA:
            await self._go_offline(valid)
            return
        if target is R.NON_EXISTENT_REPLICA:
            self._remove(valid)
            return
        for pr in valid:
            current = self._ctx.replica_state(pr)
            state = self._ctx.leadership.get(pr.partition)
            if target is R.NEW_REPLICA and state is not None and state.leader == pr.replica:
                self._error(
                    f"Replica {pr.replica} for partition {tp_text(pr.partition)} cannot be moved to NewReplica state "
                    "as it is being requested to become leader"
                )
                continue
            if target in (R.NEW_REPLICA, R.ONLINE_REPLICA) and state is not None and current is not R.NEW_REPLICA:
                self._batch().add_leader_and_isr(
                    (pr.replica,),
                    pr.partition,
                    state,
                    self._ctx.replicas(pr.partition),
                    target is R.NEW_REPLICA,
                    self._ctx.live_broker_ids,
                )
            elif target is R.REPLICA_DELETION_STARTED:
                self._batch().add_stop_replica(pr.replica, pr.partition, delete=True)
            self._changed(pr, current, target)

    def _transition_ok(self, pr: PartitionReplica, target: ReplicaState) -> bool:
        try:
            check_transition(self._ctx.replica_state(pr), target, str(pr))
        except IllegalStateTransition as e:
            self._error(
                f"Controller {self._id} epoch {self._ctx.epoch} initiated state change of replica {pr.replica} "
                f"for partition {tp_text(pr.partition)} from {e.current} to {target} failed: {e}"
            )
            return False
        return True

    # ---- -> OfflineReplica: StopReplica, then out of the ISR (§2.6, doRemoveReplicasFromIsr)

    async def _go_offline(self, replicas: Sequence[PartitionReplica]) -> None:
        # Replicas of one partition go one after the other (they write the same znode); partitions in parallel.
        by_partition: dict[TopicPartition, list[PartitionReplica]] = {}
        for pr in replicas:
            by_partition.setdefault(pr.partition, []).append(pr)

        async def offline(group: list[PartitionReplica]) -> None:
            for pr in group:
                await self._go_offline_one(pr)

        await concurrently(offline, list(by_partition.values()))

    async def _go_offline_one(self, pr: PartitionReplica) -> None:
        self._batch().add_stop_replica(pr.replica, pr.partition, delete=False)
        state = await self._remove_from_isr(pr)
        # A topic being deleted gets no new LeaderAndIsr: its replicas are about to be stopped.
        if state is not None and not self._ctx.is_topic_queued_for_deletion(pr.partition.topic):
            recipients = tuple(r for r in self._ctx.replicas(pr.partition) if r != pr.replica)
            self._batch().add_leader_and_isr(
                recipients, pr.partition, state, self._ctx.replicas(pr.partition), False, self._ctx.live_broker_ids
            )
        self._changed(pr, self._ctx.replica_state(pr), R.OFFLINE_REPLICA)

    def _remove(self, replicas: Sequence[PartitionReplica]) -> None:
        """-> NonExistentReplica: forget the replica, in the assignment cache and the state map (§2.6)."""
        for pr in replicas:
            tp = pr.partition
            remaining = tuple(r for r in self._ctx.replicas(tp) if r != pr.replica)
            if tp.topic in self._ctx.assignments:
                self._ctx.assignments[tp.topic][tp.partition] = remaining
            self._changed(pr, self._ctx.replica_state(pr), R.NON_EXISTENT_REPLICA)
            self._ctx.replica_states.pop(pr, None)

    async def _remove_from_isr(self, pr: PartitionReplica) -> LeaderAndIsr | None:
        """The partition's state after the write, or None when there was nothing to write."""
        tp = pr.partition
        min_isr: int | None = None
        for _ in range(ZK_WRITE_RETRIES_MAX):
            current = await self._store.read_partition_state(tp)
            if current is None:
                return None
            if is_stale_controller_epoch(self._ctx.epoch, current.controller_epoch):
                self._error(aborted_election_message(tp_text(tp), self._id, current.controller_epoch))
                return None
            if min_isr is None and pr.replica in current.isr:  # for the eligible leader replicas
                min_isr = await topic_min_isr(self._store, tp.topic, self._min_isr_default)
            new_state = remove_replica_from_isr(current, pr.replica, self._ctx.epoch, min_isr)
            if new_state is None:
                self._ctx.leadership[tp] = current
                return None
            try:
                version = await self._store.update_partition_state(tp, new_state, self._ctx.epoch_zk_version)
            except BadVersionError:
                self._log.info("partition_state_write_conflict", topic=tp.topic, partition=tp.partition)
                continue
            written = new_state.with_zk_version(version)
            self._ctx.leadership[tp] = written
            return written
        self._error(
            f"Failed to remove replica {pr.replica} from the ISR of {tp_text(tp)} "
            f"after {ZK_WRITE_RETRIES_MAX} conflicting writes"
        )
        return None

    # ---- logging

    def _changed(self, pr: PartitionReplica, current: ReplicaState, target: ReplicaState) -> None:
        self._ctx.replica_states[pr] = target
        # Kafka logs replica transitions at TRACE (ReplicaStateMachine.logSuccessfulTransition).
        self._state_log.controller(
            self._ctx.epoch,
            f"Changed state of replica {pr.replica} for partition {tp_text(pr.partition)} from {current} to {target}",
            level="TRACE",
        )

    def _error(self, message: str) -> None:
        self._state_log.controller(self._ctx.epoch, message, level="ERROR")
