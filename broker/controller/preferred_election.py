"""Preferred replica election and the automatic leader rebalance (docs/research/kafka.md §2.14).

Driven by the controller on its event task.

* ZK-triggered (K28 `processReplicaLeaderElection` with `ZkTriggered`): the
  partitions listed in `/admin/preferred_replica_election` move to their
  preferred replica (the first of the assignment) when it is alive and in the
  ISR; otherwise the partition keeps its leader and the reason is logged. The
  znode is deleted when done, whatever the outcome, so the tool can run again.
* Auto (K28 `checkAndTriggerAutoLeaderRebalance`): every
  `leader.imbalance.check.interval.seconds`, per broker the share of the
  partitions it is preferred for that it does not lead; above
  `leader.imbalance.per.broker.percentage` its out-of-place partitions get a
  preferred election, skipping all of them while any reassignment runs, those
  of topics queued for deletion, and those whose preferred replica is not alive
  or not in the ISR.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker.controller.context import ControllerContext, tp_text
from broker.controller.election import imbalanced_brokers, preferred_replica_partition_leader
from broker.controller.state_machines import ElectionStrategy, PartitionStateMachine
from broker.controller.states import PartitionState
from client.kafka.structs import TopicPartition

ZK_TRIGGERED = "ZkTriggered"
AUTO_TRIGGERED = "AutoTriggered"


class PreferredReplicaElectionManager:
    def __init__(
        self,
        ctx: ControllerContext,
        partitions: PartitionStateMachine,
        logger: Any,
    ) -> None:
        self._ctx = ctx
        self._partitions = partitions
        self._log = logger

    async def elect(self, requested: Iterable[TopicPartition], trigger: str) -> dict[TopicPartition, bool]:
        """Move each partition's leadership to its preferred replica; partition -> led by it afterwards."""
        wanted = sorted(set(requested))
        unknown = [tp for tp in wanted if tp.topic not in self._ctx.topics or not self._ctx.replicas(tp)]
        deleting = [tp for tp in wanted if tp not in unknown and self._ctx.is_topic_queued_for_deletion(tp.topic)]
        if unknown:
            self._log.warning(
                "preferred_election_skipped", reason="the topics do not exist", partitions=_names(unknown)
            )
        if deleting:
            self._log.warning(
                "preferred_election_skipped", reason="the topics are being deleted", partitions=_names(deleting)
            )
        valid = [tp for tp in wanted if tp not in unknown and tp not in deleting]
        # Kafka's ElectionNotNeeded: already led by the preferred replica, nothing is written.
        needed = [tp for tp in valid if not self._led_by_preferred(tp)]
        await self._partitions.handle_state_changes(needed, PartitionState.ONLINE_PARTITION, ElectionStrategy.PREFERRED)
        results = {tp: self._led_by_preferred(tp) for tp in valid}
        for tp in needed:
            state = self._ctx.leadership.get(tp)
            leader = state.leader if state is not None else -1
            if results[tp]:
                self._log.info(
                    "preferred_election_completed", topic=tp.topic, partition=tp.partition, leader=leader,
                    trigger=trigger,
                )  # fmt: skip
            else:
                # The leadership cache now holds what the election read from ZooKeeper.
                self._log.warning(
                    "preferred_election_failed", topic=tp.topic, partition=tp.partition, leader=leader,
                    preferred=self._ctx.replicas(tp)[0], trigger=trigger, reason=self._why_not_electable(tp),
                )  # fmt: skip
        self._log.info(
            "preferred_replica_election",
            trigger=trigger,
            requested=len(wanted),
            elected=sorted(tp_text(tp) for tp in needed if results[tp]),
            not_elected=sorted(tp_text(tp) for tp in needed if not results[tp]),
            already_preferred=len(valid) - len(needed),
        )
        return results

    async def check_and_trigger_auto_rebalance(self, threshold_percent: int) -> None:
        """K28 `checkAndTriggerAutoLeaderRebalance`."""
        assignments = {
            tp: self._ctx.replicas(tp)
            for tp in self._ctx.all_partitions()
            if not self._ctx.is_topic_queued_for_deletion(tp.topic)
        }
        leaders = {tp: s.leader for tp, s in self._ctx.leadership.items() if tp in assignments}
        brokers = imbalanced_brokers(assignments, leaders, threshold_percent)
        if not brokers:
            return
        candidates = [
            tp
            for tp, replicas in assignments.items()
            if replicas[0] in brokers
            and tp in leaders
            and leaders[tp] != replicas[0]
            and not self._ctx.partitions_being_reassigned
            and self._why_not_electable(tp) is None
        ]
        self._log.info(
            "leader_imbalance",
            ratios={b: round(r, 3) for b, r in sorted(brokers.items())},
            threshold_percent=threshold_percent,
            candidates=_names(candidates),
        )
        if candidates:
            await self.elect(candidates, AUTO_TRIGGERED)

    def _led_by_preferred(self, tp: TopicPartition) -> bool:
        state = self._ctx.leadership.get(tp)
        replicas = self._ctx.replicas(tp)
        return state is not None and bool(replicas) and state.leader == replicas[0]

    def _why_not_electable(self, tp: TopicPartition) -> str | None:
        """None if the preferred replica can lead now (K28 `canPreferredReplicaBeLeader`), else why not."""
        replicas = self._ctx.replicas(tp)
        state = self._ctx.leadership.get(tp)
        if state is None:
            return "the partition has no leadership state"
        if preferred_replica_partition_leader(replicas, state.isr, self._ctx.online_broker_ids) is not None:
            return None
        preferred = replicas[0]
        if not self._ctx.is_online(preferred):
            return f"preferred replica {preferred} is not alive"
        return f"preferred replica {preferred} is not in the ISR [{','.join(map(str, state.isr))}]"


def _names(partitions: Iterable[TopicPartition]) -> list[str]:
    return sorted(tp_text(tp) for tp in partitions)
