"""Topic deletion: Kafka's `TopicDeletionManager` (docs/research/kafka.md §2.12).

Driven by the controller on its event task. A topic marked under
`/admin/delete_topics` is queued; while it is *eligible* (every replica on an
online broker, no partition being reassigned, no replica deletion that failed
and waits for a retry) its deletion runs:

1. `onTopicDeletion`: its partitions go Offline -> NonExistent and every live
   broker gets UpdateMetadata with leader -2, so it stops serving the topic.
2. `onPartitionDeletion`: replicas on dead brokers -> ReplicaDeletionIneligible
   (the topic is halted); the live ones -> OfflineReplica (StopReplica
   delete=false) -> ReplicaDeletionStarted (StopReplica delete=true, leader
   epoch -2).
3. Each broker's StopReplica response comes back as an event: success ->
   ReplicaDeletionSuccessful, error -> ReplicaDeletionIneligible (halted).
4. `resumeDeletions`: once every replica is ReplicaDeletionSuccessful the
   replicas go NonExistent and the znodes are deleted (`/brokers/topics/<t>`
   with its subtree, `/config/topics/<t>`, then the marker); the topic leaves
   the controller's context, so a topic created again under that name is new.

A halted topic resumes when a broker hosting one of its replicas starts, on
controller failover, and (unlike Kafka 2.x, which waits for one of those)
after `deletion_retry_backoff_s` when a live broker answered with an error.
With `delete.topic.enable=false` the markers are deleted and nothing else
happens, as Kafka 2.x does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.controller.channel import RequestBatch
from broker.controller.context import ControllerContext, PartitionReplica
from broker.controller.state_machines import PartitionStateMachine, ReplicaStateMachine
from broker.controller.states import PartitionState, ReplicaState
from broker.controller.zk_store import ControllerZkStore
from client.kafka.errors import NONE
from client.kafka.structs import TopicPartition

P = PartitionState
R = ReplicaState


class TopicDeletionManager:
    def __init__(
        self,
        ctx: ControllerContext,
        store: ControllerZkStore,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        batch: Callable[[], RequestBatch],
        delete_topic_enable: bool,
        schedule_retry: Callable[[], None],
        logger: Any,
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._partitions = partitions
        self._replicas = replicas
        self._batch = batch
        self._enabled = delete_topic_enable
        self._schedule_retry = schedule_retry
        self._log = logger

    @property
    def enabled(self) -> bool:
        return self._enabled

    # ---- entry points (the controller calls these)

    async def init(self, marked: Sequence[str]) -> None:
        """Failover (§2.3 step 5): queue the marked topics; halt those with offline replicas or a reassignment."""
        if not self._enabled:
            await self._drop_markers(marked, "delete.topic.enable is false")
            return
        ineligible = [t for t in marked if self._has_offline_replicas(t) or self._ctx.is_topic_being_reassigned(t)]
        self._log.info("topic_deletion_init", topics=sorted(marked), ineligible=sorted(ineligible))
        self._ctx.topics_to_be_deleted.update(marked)
        self._ctx.topics_ineligible_for_deletion.update(ineligible)

    async def try_topic_deletion(self) -> None:
        if self._enabled:
            await self._resume_deletions()

    async def process_markers(self, marked: Sequence[str]) -> None:
        """The children of `/admin/delete_topics` changed (K28 `processTopicDeletion`)."""
        unknown = sorted(t for t in marked if t not in self._ctx.topics)
        if unknown:
            await self._drop_markers(unknown, "the topics do not exist")
        wanted = sorted(set(marked) - set(unknown) - self._ctx.topics_to_be_deleted)
        if not wanted:
            return
        if not self._enabled:
            await self._drop_markers(wanted, "delete.topic.enable is false")
            return
        self._log.info("topic_deletion_started", topics=wanted)
        self._ctx.topics_to_be_deleted.update(wanted)
        reassigning = [t for t in wanted if self._ctx.is_topic_being_reassigned(t)]
        self.mark_topic_ineligible_for_deletion(reassigning, "topic reassignment in progress")
        await self._resume_deletions()

    async def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        """A broker hosting a replica started, or the retry back-off passed: un-halt and try again."""
        if not self._enabled:
            return
        resumed = set(topics) & self._ctx.topics_to_be_deleted
        if resumed:
            self._ctx.topics_ineligible_for_deletion.difference_update(resumed)
            await self._resume_deletions()

    async def retry_halted(self) -> None:
        """After the retry back-off: resume halted topics that no longer wait for a broker or a reassignment."""
        ready = [
            t
            for t in sorted(self._ctx.topics_ineligible_for_deletion)
            if not self._has_offline_replicas(t) and not self._ctx.is_topic_being_reassigned(t)
        ]
        await self.resume_deletion_for_topics(ready)

    async def fail_replica_deletion(self, replicas: Iterable[PartitionReplica], reason: str) -> None:
        """Replicas whose deletion failed (error response, or their broker died) -> DeletionIneligible; halt."""
        if not self._enabled:
            return
        failed = [pr for pr in replicas if self._ctx.is_topic_queued_for_deletion(pr.partition.topic)]
        if not failed:
            return
        self._log.info("replica_deletion_failed", replicas=[str(pr) for pr in failed], reason=reason)
        await self._to_ineligible(failed)
        self.mark_topic_ineligible_for_deletion({pr.partition.topic for pr in failed}, reason)
        await self._resume_deletions()

    async def complete_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        deleted = [pr for pr in replicas if self._ctx.is_topic_queued_for_deletion(pr.partition.topic)]
        if not deleted:
            return
        await self._replicas.handle_state_changes(deleted, R.REPLICA_DELETION_SUCCESSFUL)
        await self._resume_deletions()

    async def process_stop_replica_response(
        self, replica_id: int, error_code: int, partition_errors: Sequence[tuple[TopicPartition, int]]
    ) -> None:
        """K28 `processTopicDeletionStopReplicaResponseReceived`: split into failed and deleted replicas."""
        failed = [
            PartitionReplica(tp, replica_id) for tp, code in partition_errors if error_code != NONE or code != NONE
        ]
        deleted = [
            PartitionReplica(tp, replica_id) for tp, code in partition_errors if error_code == NONE and code == NONE
        ]
        in_flight = [pr for pr in failed if self._ctx.replica_state(pr) is R.REPLICA_DELETION_STARTED]
        if in_flight:
            await self.fail_replica_deletion(in_flight, f"StopReplica error from broker {replica_id}")
            self._schedule_retry()  # a live broker refused: try again after the back-off
        await self.complete_replica_deletion(
            [pr for pr in deleted if self._ctx.replica_state(pr) is R.REPLICA_DELETION_STARTED]
        )

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> None:
        halted = sorted(set(topics) & self._ctx.topics_to_be_deleted)
        if self._enabled and halted:
            self._ctx.topics_ineligible_for_deletion.update(halted)
            self._log.info("topic_deletion_halted", topics=halted, reason=reason)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self._ctx.is_topic_queued_for_deletion(topic)

    # ---- the algorithm (K28 resumeDeletions, onTopicDeletion, onPartitionDeletion, completeDeleteTopic)

    async def _resume_deletions(self) -> None:
        retry: list[str] = []
        eligible: list[str] = []
        for topic in sorted(self._ctx.topics_to_be_deleted):
            if self._ctx.are_all_replicas_in_state(topic, R.REPLICA_DELETION_SUCCESSFUL):
                await self._complete_delete_topic(topic)
                continue
            if not self._ctx.is_any_replica_in_state(topic, R.REPLICA_DELETION_STARTED) and (
                self._ctx.is_any_replica_in_state(topic, R.REPLICA_DELETION_INELIGIBLE)
            ):
                retry.append(topic)
            if self._is_eligible(topic):
                eligible.append(topic)
        if retry:
            await self._retry_deletion_for_ineligible_replicas(retry)
        if eligible:
            self._log.info("topic_deletion_resumed", topics=eligible)
            await self._on_topic_deletion(eligible)

    def _is_eligible(self, topic: str) -> bool:
        return (
            self._ctx.is_topic_queued_for_deletion(topic)
            and not self._ctx.is_any_replica_in_state(topic, R.REPLICA_DELETION_STARTED)
            and topic not in self._ctx.topics_ineligible_for_deletion
        )

    async def _retry_deletion_for_ineligible_replicas(self, topics: Sequence[str]) -> None:
        failed = [pr for t in topics for pr in self._ctx.replicas_in_state(t, R.REPLICA_DELETION_INELIGIBLE)]
        await self._replicas.handle_state_changes(failed, R.OFFLINE_REPLICA)

    async def _on_topic_deletion(self, topics: Sequence[str]) -> None:
        unseen = [t for t in topics if t not in self._ctx.topics_with_deletion_started]
        if unseen:
            partitions = [tp for t in unseen for tp in self._ctx.partitions_of(t)]
            await self._partitions.handle_state_changes(partitions, P.OFFLINE_PARTITION)
            await self._partitions.handle_state_changes(partitions, P.NON_EXISTENT_PARTITION)
            self._ctx.topics_with_deletion_started.update(unseen)
        # Brokers stop serving the topics: the batch sends their partitions with leader -2.
        self._batch().add_update_metadata(
            self._ctx.live_broker_ids, [tp for t in topics for tp in self._ctx.partitions_of(t)]
        )
        await self._on_partition_deletion(topics)

    async def _on_partition_deletion(self, topics: Sequence[str]) -> None:
        dead: list[PartitionReplica] = []
        retry: list[PartitionReplica] = []
        halted: list[str] = []
        for topic in topics:
            replicas = self._ctx.replicas_for_topic(topic)
            topic_dead = [pr for pr in replicas if not self._ctx.is_online(pr.replica)]
            dead += topic_dead
            retry += [
                pr
                for pr in replicas
                if self._ctx.is_online(pr.replica) and self._ctx.replica_state(pr) is not R.REPLICA_DELETION_SUCCESSFUL
            ]
            if topic_dead:
                halted.append(topic)
        await self._to_ineligible(dead)
        # StopReplica(delete=false) first, so followers stop fetching; both land in one request per broker.
        await self._replicas.handle_state_changes(retry, R.OFFLINE_REPLICA)
        await self._replicas.handle_state_changes(retry, R.REPLICA_DELETION_STARTED)
        self.mark_topic_ineligible_for_deletion(halted, "offline replicas")

    async def _complete_delete_topic(self, topic: str) -> None:
        deleted = self._ctx.replicas_in_state(topic, R.REPLICA_DELETION_SUCCESSFUL)
        await self._replicas.handle_state_changes(deleted, R.NON_EXISTENT_REPLICA)
        await self._store.delete_topic(topic, self._ctx.epoch_zk_version)
        self._ctx.remove_topic(topic)
        self._log.info("topic_deletion_completed", topic=topic)

    # ---- helpers

    async def _to_ineligible(self, replicas: Sequence[PartitionReplica]) -> None:
        """-> ReplicaDeletionIneligible through OfflineReplica where needed; a replica already deleted stays so."""
        online = [pr for pr in replicas if self._ctx.replica_state(pr) in (R.NEW_REPLICA, R.ONLINE_REPLICA)]
        await self._replicas.handle_state_changes(online, R.OFFLINE_REPLICA)
        stoppable = (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED)
        await self._replicas.handle_state_changes(
            [pr for pr in replicas if self._ctx.replica_state(pr) in stoppable], R.REPLICA_DELETION_INELIGIBLE
        )

    def _has_offline_replicas(self, topic: str) -> bool:
        return any(not self._ctx.is_online(pr.replica) for pr in self._ctx.replicas_for_topic(topic))

    async def _drop_markers(self, topics: Sequence[str], reason: str) -> None:
        if topics:
            self._log.info("topic_deletion_markers_removed", topics=sorted(topics), reason=reason)
            await self._store.delete_topic_deletions(sorted(topics), self._ctx.epoch_zk_version)
