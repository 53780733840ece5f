"""Partition reassignment: Kafka's `onPartitionReassignment` and its helpers (docs/research/kafka.md §2.13).

Driven by the controller on its event task. An admin (or the
reassign-partitions tool) writes `/admin/reassign_partitions`; for each listed
partition with original replicas ORS (Kafka 1.1: OAR) and target TRS (RAR):

* Phase U: the topic znode gets RS = TRS followed by ORS - TRS, with
  `adding_replicas` = TRS - ORS and `removing_replicas` = ORS - TRS (fenced
  write). The set is OAR + RAR of the 1.1 algorithm; the order and the two
  maps are Kafka 2.4+'s, so a controller taking over knows ORS and TRS exactly.
* Phase A, while TRS is not inside the ISR: bump the leader epoch and send
  LeaderAndIsr with RS to every replica of RS; the adding replicas go
  NewReplica (they create their logs and start fetching).
* Completion is checked whenever the partition's state znode changes (a data
  watch, Kafka's PartitionReassignmentIsrChangeHandler), after ISR change
  notifications and when a target broker starts.
* Phase B, once TRS is inside the ISR: adding -> OnlineReplica; RS = TRS in
  memory; a leader outside TRS (or dead) is replaced by the first live ISR
  member of TRS (reassign election), otherwise the epoch is bumped; the
  removing replicas go OfflineReplica (out of the ISR, StopReplica) and then
  through deletion (StopReplica delete=true) to NonExistentReplica; only then
  is RS = TRS written to the topic znode ("the only place where we store OAR
  persistently", so it is written last), the partition is removed from
  `/admin/reassign_partitions` (the znode is deleted when empty) and every
  broker gets UpdateMetadata.

A partition whose target broker is down stays in phase A until the broker
starts. A request for an unknown partition, a topic queued for deletion, an
empty or duplicated replica list is refused: logged and removed from the znode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from broker.controller.channel import RequestBatch
from broker.controller.context import ControllerContext, PartitionReplica, ReplicaAssignment, tp_text
from broker.controller.election import LeaderAndIsr, aborted_election_message, is_stale_controller_epoch
from broker.controller.state_machines import (
    ZK_WRITE_RETRIES_MAX,
    ElectionStrategy,
    PartitionStateMachine,
    ReplicaStateMachine,
)
from broker.controller.states import PartitionState, ReplicaState
from broker.controller.topic_deletion import TopicDeletionManager
from broker.controller.zk_store import ControllerZkStore
from broker.state_change_log import StateChangeLogger, leader_and_isr_text
from client.kafka import errors as kafka_errors
from client.kafka import znodes as kz
from client.kafka.structs import TopicPartition
from client.zk.exceptions import BadVersionError
from client.zk.watches import Watcher

R = ReplicaState


def _csv(values: Iterable[int]) -> str:
    return ",".join(map(str, values))


class ReassignmentManager:
    def __init__(
        self,
        controller_id: int,
        ctx: ControllerContext,
        store: ControllerZkStore,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        deletion: TopicDeletionManager,
        batch: Callable[[], RequestBatch],
        state_log: StateChangeLogger,
        on_partition_state: Watcher,
        logger: Any,
    ) -> None:
        self._id = controller_id
        self._ctx = ctx
        self._store = store
        self._partitions = partitions
        self._replicas = replicas
        self._deletion = deletion
        self._batch = batch
        self._state_log = state_log
        self._on_partition_state = on_partition_state
        self._log = logger

    # ---- entry points (the controller calls these on its event task)

    def load_from_topic_znode(self, assignment: kz.TopicAssignment) -> None:
        """Failover: partitions whose topic znode lists adding/removing replicas are being reassigned."""
        moving = {p for p, r in assignment.adding.items() if r} | {p for p, r in assignment.removing.items() if r}
        for p in sorted(moving):
            tp = TopicPartition(assignment.topic, p)
            replicas = assignment.partitions.get(p, ())
            ra = ReplicaAssignment.from_znode(replicas, assignment.adding.get(p, ()), assignment.removing.get(p, ()))
            self._ctx.reassignments[tp] = ra
            self._ctx.partitions_being_reassigned.add(tp)

    async def initialize(self, requested: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Failover (K28 `initializePartitionReassignments`): resume every reassignment, znode ones first."""
        in_flight = dict(self._ctx.reassignments)
        self._log.info("reassignments_resumed", requested=[tp_text(tp) for tp in requested], in_flight=len(in_flight))
        await self._trigger(requested, resume=True)
        # Marked in a topic znode but gone from /admin/reassign_partitions: finish towards the recorded target.
        leftover = {tp: ra.target for tp, ra in in_flight.items() if tp not in requested}
        if leftover:
            await self._trigger(leftover, resume=True, from_znode=False)

    async def process_reassignment_znode(self, requested: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """`/admin/reassign_partitions` was created or changed (K28 `processZkPartitionReassignment`)."""
        if requested:
            await self._trigger(requested, resume=False)

    async def process_isr_change(self, tp: TopicPartition) -> None:
        """The state znode of a partition being reassigned changed (K28 `processPartitionReassignmentIsrChange`)."""
        ra = self._ctx.reassignments.get(tp)
        if ra is not None:
            await self._maybe_complete(tp, ra)

    async def check_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """After ISR change notifications: finish the reassignments whose targets all joined the ISR."""
        for tp in sorted(set(partitions)):
            await self.process_isr_change(tp)

    async def on_broker_startup(self, new_brokers: Iterable[int]) -> None:
        """§2.4 step 4: resume the reassignments that wait for one of these brokers."""
        new = set(new_brokers)
        for tp, ra in sorted(self._ctx.reassignments.items()):
            if new & set(ra.target):
                await self._on_partition_reassignment(tp, ra)

    # ---- the AlterPartitionReassignments / ListPartitionReassignments APIs (KIP-455)

    async def reassign_from_api(
        self, requested: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[int, str]]:
        """K28 `processApiPartitionReassignment`: per partition (error code, message); a None target cancels.

        The latest request wins over one written to `/admin/reassign_partitions`, which forgets these partitions.
        A cancelled reassignment goes back to its original replicas (the replicas it was adding are removed).
        """
        results: dict[TopicPartition, tuple[int, str]] = {}
        plans: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            error = self._api_refusal(tp, target)
            if error is not None:
                results[tp] = error
                continue
            existing = self._ctx.reassignments.get(tp)
            if target is None:
                if existing is None:
                    results[tp] = (kafka_errors.NoReassignmentInProgressError.code, "")
                    continue
                target = existing.original
            original = existing.original if existing is not None else self._ctx.replicas(tp)
            plans[tp] = ReplicaAssignment(original, target)
        await self._remove_from_znode(list(plans))
        for tp, ra in plans.items():
            self._log.info("api_partition_reassignment", topic=tp.topic, partition=tp.partition, target=ra.target)
            await self._start(tp, ra, self._ctx.reassignments.get(tp))
            results[tp] = (kafka_errors.NONE, "")
        return results

    def ongoing(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """K28 `processListPartitionReassignments`: the running reassignments among `partitions` (None: all)."""
        running = self._ctx.reassignments
        wanted = sorted(running) if partitions is None else sorted(set(partitions) & set(running))
        return {tp: running[tp] for tp in wanted}

    def _api_refusal(self, tp: TopicPartition, target: tuple[int, ...] | None) -> tuple[int, str] | None:
        """K28 `validateReplicas` and the checks of `maybeTriggerPartitionReassignment`."""
        if tp.topic not in self._ctx.topics or tp.partition not in self._ctx.assignments[tp.topic]:
            return kafka_errors.UnknownTopicOrPartitionError.code, "The partition does not exist."
        if self._ctx.is_topic_queued_for_deletion(tp.topic):
            return kafka_errors.UnknownTopicOrPartitionError.code, "The topic is being deleted."
        if target is None:
            return None
        invalid = kafka_errors.InvalidReplicaAssignmentError.code
        if not target:
            return invalid, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return invalid, f"Duplicate replica ids in partition reassignment replica list: [{_csv(target)}]"
        if any(r < 0 for r in target):
            return invalid, f"Invalid broker id in replica list: [{_csv(target)}]"
        adding = [r for r in target if r not in self._ctx.replicas(tp)]
        if not set(adding) <= self._ctx.live_broker_ids:
            return invalid, (
                f"Replica assignment has brokers that are not alive. Replica list: [{_csv(adding)}], "
                f"live broker list: [{_csv(sorted(self._ctx.live_broker_ids))}]"
            )
        return None

    # ---- triggering (K28 maybeTriggerPartitionReassignment)

    async def _trigger(
        self, requested: Mapping[TopicPartition, tuple[int, ...]], *, resume: bool, from_znode: bool = True
    ) -> None:
        refused: list[TopicPartition] = []
        for tp, target in requested.items():
            reason = self._refusal(tp, target)
            if reason is not None:
                self._log.error("partition_reassignment_refused", topic=tp.topic, partition=tp.partition, reason=reason)
                self._error(f"Refused reassignment of partition {tp_text(tp)} to [{_csv(target)}]: {reason}")
                refused.append(tp)
                continue
            existing = self._ctx.reassignments.get(tp)
            if existing is not None and existing.target == target:
                if resume:
                    await self._on_partition_reassignment(tp, existing)
                else:
                    await self._maybe_complete(tp, existing)  # our own znode rewrite, or the same plan again
                continue
            current = self._ctx.replicas(tp)
            if existing is None and current == target:
                self._log.info("partition_already_assigned", topic=tp.topic, partition=tp.partition, replicas=target)
                refused.append(tp)  # nothing to do: drop it from the znode
                continue
            original = existing.original if existing is not None else current
            await self._start(tp, ReplicaAssignment(original, target), existing)
        if refused and from_znode:
            await self._remove_from_znode(refused)

    def _refusal(self, tp: TopicPartition, target: tuple[int, ...]) -> str | None:
        """Why a requested reassignment cannot run, or None (K28 UNKNOWN_TOPIC_OR_PARTITION and the tool's checks)."""
        if tp.topic not in self._ctx.topics or tp.partition not in self._ctx.assignments[tp.topic]:
            return "UNKNOWN_TOPIC_OR_PARTITION: the partition does not exist"
        if self._ctx.is_topic_queued_for_deletion(tp.topic):
            return "UNKNOWN_TOPIC_OR_PARTITION: the topic is being deleted"
        if not target:
            return "the replica list is empty"
        if len(set(target)) != len(target):
            return f"the replica list [{_csv(target)}] has duplicates"
        if any(r < 0 for r in target):
            return f"the replica list [{_csv(target)}] has a negative broker id"
        return None

    async def _start(self, tp: TopicPartition, ra: ReplicaAssignment, replaced: ReplicaAssignment | None) -> None:
        self._log.info(
            "partition_reassignment_started",
            topic=tp.topic,
            partition=tp.partition,
            original=list(ra.original),
            target=list(ra.target),
        )
        if replaced is not None:
            # U3: replicas the replaced plan was adding and this one does not keep.
            unneeded = [r for r in replaced.replicas if r not in ra.replicas]
            await self._stop_removed_replicas(tp, unneeded)
        await self._on_partition_reassignment(tp, ra)

    # ---- the algorithm (K28 onPartitionReassignment)

    async def _on_partition_reassignment(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        # While a reassignment runs, deletion of its topic waits.
        self._deletion.mark_topic_ineligible_for_deletion({tp.topic}, "topic reassignment in progress")
        # U1, U2: RS = TRS + ORS with adding/removing, in ZooKeeper, then in memory.
        self._ctx.reassignments[tp] = ra
        self._ctx.partitions_being_reassigned.add(tp)
        self._ctx.assignments[tp.topic][tp.partition] = ra.replicas
        await self._write_topic_znode(tp.topic)
        current = await self._read_state_and_watch(tp)
        if current is None:
            return
        if not _target_in_isr(ra, current):
            # A1: a new leader epoch carries RS to every replica; A2: the adding replicas start.
            if await self._update_leader_epoch_and_send(tp, ra.replicas, ra) is None:
                return
            starting = [
                PartitionReplica(tp, r)
                for r in ra.adding
                if self._ctx.replica_state(PartitionReplica(tp, r)) is R.NON_EXISTENT_REPLICA
            ]
            await self._replicas.handle_state_changes(starting, R.NEW_REPLICA)
            return
        await self._complete(tp, ra)

    async def _maybe_complete(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        current = await self._read_state_and_watch(tp)
        if current is not None and _target_in_isr(ra, current):
            await self._complete(tp, ra)

    async def _complete(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        """Phase B: TRS is inside the ISR."""
        self._log.info("partition_reassignment_completing", topic=tp.topic, partition=tp.partition, target=ra.target)
        # B1: the adding replicas are online.
        adding = [PartitionReplica(tp, r) for r in ra.adding]
        await self._replicas.handle_state_changes(
            [pr for pr in adding if self._ctx.replica_state(pr) is R.NEW_REPLICA], R.ONLINE_REPLICA
        )
        # B2: RS = TRS in memory; B3: the leader must be a live member of TRS.
        self._ctx.assignments[tp.topic][tp.partition] = ra.target
        if not await self._move_leader_if_required(tp, ra):
            self._ctx.assignments[tp.topic][tp.partition] = ra.replicas
            return
        # B4, B5: the removed replicas leave the ISR and their logs are deleted.
        await self._stop_removed_replicas(tp, ra.removing)
        # B6: RS = TRS in the topic znode, last.
        del self._ctx.reassignments[tp]
        self._ctx.partitions_being_reassigned.discard(tp)
        await self._write_topic_znode(tp.topic)
        # B7: out of /admin/reassign_partitions; B8: every broker learns the new replica set.
        await self._remove_from_znode([tp])
        self._batch().add_update_metadata(self._ctx.live_broker_ids, [tp])
        self._info(f"Completed reassignment of partition {tp_text(tp)} to replicas {_csv(ra.target)}")
        self._log.info("partition_reassignment_completed", topic=tp.topic, partition=tp.partition, target=ra.target)
        if not self._ctx.is_topic_being_reassigned(tp.topic):
            await self._deletion.resume_deletion_for_topics({tp.topic})

    async def _move_leader_if_required(self, tp: TopicPartition, ra: ReplicaAssignment) -> bool:
        """B3 (K28 `moveReassignedPartitionLeaderIfRequired`); False when no live target replica could lead."""
        state = self._ctx.leadership.get(tp)
        leader = state.leader if state is not None else kz.NO_LEADER
        if leader in ra.target and self._ctx.is_online(leader):
            self._info(
                f"Leader {leader} for partition {tp_text(tp)} being reassigned, is already in the new list of "
                f"replicas {_csv(ra.target)} and is alive"
            )
            return await self._update_leader_epoch_and_send(tp, ra.target, ra) is not None
        why = "is not in the new list of replicas" if leader not in ra.target else "is in the new list but is dead"
        self._info(
            f"Leader {leader} for partition {tp_text(tp)} being reassigned, {why} {_csv(ra.target)}. Re-electing leader"
        )
        await self._partitions.handle_state_changes([tp], PartitionState.ONLINE_PARTITION, ElectionStrategy.REASSIGN)
        state = self._ctx.leadership.get(tp)
        moved = state is not None and state.leader in ra.target and self._ctx.is_online(state.leader)
        if not moved:
            self._log.warning("reassignment_leader_move_failed", topic=tp.topic, partition=tp.partition)
        return moved

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        """B4, B5 (K28 `stopRemovedReplicasOfReassignedPartition`): Offline, then deleted, then forgotten."""
        replicas = [PartitionReplica(tp, r) for r in removed]
        if not replicas:
            return
        await self._replicas.handle_state_changes(replicas, R.OFFLINE_REPLICA)
        await self._replicas.handle_state_changes(replicas, R.REPLICA_DELETION_STARTED)
        await self._replicas.handle_state_changes(replicas, R.REPLICA_DELETION_SUCCESSFUL)
        await self._replicas.handle_state_changes(replicas, R.NON_EXISTENT_REPLICA)

    async def _update_leader_epoch_and_send(
        self, tp: TopicPartition, recipients: Sequence[int], ra: ReplicaAssignment
    ) -> LeaderAndIsr | None:
        """Bump the leader epoch (conditional, fenced) and send LeaderAndIsr with the current RS."""
        for _ in range(ZK_WRITE_RETRIES_MAX):
            current = await self._store.read_partition_state(tp)
            if current is None:
                self._fail_send(tp, recipients, ra, "the partition has no state znode")
                return None
            if is_stale_controller_epoch(self._ctx.epoch, current.controller_epoch):
                aborted = aborted_election_message(tp_text(tp), self._id, current.controller_epoch)
                self._fail_send(tp, recipients, ra, aborted)
                return None
            updated = current.new_epoch_and_zk_version(controller_epoch=self._ctx.epoch)
            try:
                version = await self._store.update_partition_state(tp, updated, self._ctx.epoch_zk_version)
            except BadVersionError:
                continue
            state = updated.with_zk_version(version)
            self._ctx.leadership[tp] = state
            self._batch().add_leader_and_isr(
                tuple(recipients), tp, state, self._ctx.replicas(tp), False, self._ctx.live_broker_ids
            )
            self._info(
                f"Sent LeaderAndIsr request {leader_and_isr_text(state)} with new assignment {ra} "
                f"to brokers {_csv(recipients)} for partition being reassigned {tp_text(tp)}"
            )
            return state
        self._fail_send(tp, recipients, ra, f"gave up after {ZK_WRITE_RETRIES_MAX} conflicting writes")
        return None

    # ---- ZooKeeper

    async def _read_state_and_watch(self, tp: TopicPartition) -> LeaderAndIsr | None:
        state = await self._store.read_partition_state(tp, watch=self._on_partition_state)
        if state is not None:
            self._ctx.leadership[tp] = state
        return state

    async def _write_topic_znode(self, topic: str) -> None:
        """The topic's full assignment with the adding/removing replicas of its running reassignments."""
        current = await self._store.read_assignment(topic)
        running = {tp.partition: ra for tp, ra in self._ctx.reassignments.items() if tp.topic == topic}
        # Partitions an admin added that the controller has not processed yet are kept, not overwritten.
        partitions = {**(current.partitions if current is not None else {}), **self._ctx.assignments[topic]}
        assignment = kz.TopicAssignment(
            topic,
            partitions,
            {p: ra.adding for p, ra in running.items() if ra.adding},
            {p: ra.removing for p, ra in running.items() if ra.removing},
        )
        if current is not None:
            assignment = replace(assignment, topic_id=current.topic_id)
        await self._store.write_topic_assignment(assignment, self._ctx.epoch_zk_version)

    async def _remove_from_znode(self, partitions: Sequence[TopicPartition]) -> None:
        """K28 `removePartitionsFromZkReassignment`: rewrite the znode without them, delete it when empty."""
        requested = await self._store.read_reassignments()
        if not any(tp in requested for tp in partitions):
            return
        remaining = {tp: r for tp, r in requested.items() if tp not in partitions}
        await self._store.write_reassignments(remaining, self._ctx.epoch_zk_version)

    # ---- logging

    def _fail_send(self, tp: TopicPartition, recipients: Sequence[int], ra: ReplicaAssignment, why: str) -> None:
        self._error(
            f"Failed to send LeaderAndIsr request with new assignment {ra} to brokers {_csv(recipients)} "
            f"for partition being reassigned {tp_text(tp)}: {why}"
        )

    def _info(self, message: str) -> None:
        self._state_log.controller(self._ctx.epoch, message)

    def _error(self, message: str) -> None:
        self._state_log.controller(self._ctx.epoch, message, level="ERROR")


def _target_in_isr(ra: ReplicaAssignment, state: LeaderAndIsr) -> bool:
    """K28 `isReassignmentComplete`: TRS is a subset of the ISR read from ZooKeeper."""
    return set(ra.target) <= set(state.isr)
