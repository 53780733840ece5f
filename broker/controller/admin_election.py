"""Leader elections an admin asks for through the ElectLeaders API (KIP-460; docs/research/kafka.md §2.14).

Driven by the controller on its event task. Kafka 2.8's `processReplicaLeaderElection` with
`AdminClientTriggered`, per partition:

* unknown: UNKNOWN_TOPIC_OR_PARTITION "The partition does not exist.";
* its topic is queued for deletion: INVALID_TOPIC_EXCEPTION "The topic is being deleted";
* no election needed (preferred: already led by its preferred replica; unclean: its leader is alive):
  ELECTION_NOT_NEEDED;
* otherwise the election runs (preferred: the first assigned replica if alive and in the ISR; unclean:
  Kafka's offline election with unclean allowed, whatever the topic's setting) and a failure answers
  PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.controller.context import ControllerContext, tp_text
from broker.controller.state_machines import ElectionStrategy, PartitionStateMachine
from broker.controller.states import PartitionState
from client.kafka import errors
from client.kafka.structs import TopicPartition

PREFERRED = 0
UNCLEAN = 1
ELECTION_TYPES = {PREFERRED: "preferred", UNCLEAN: "unclean"}

# (Kafka error code, message); message "" when the error's own text is enough.
ElectionOutcome = tuple[int, str]


class AdminLeaderElection:
    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine, logger: Any) -> None:
        self._ctx = ctx
        self._partitions = partitions
        self._log = logger

    async def elect(
        self, requested: Sequence[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Per partition, the outcome; with `requested` None every partition that needed an election."""
        wanted = sorted(set(requested)) if requested is not None else self._ctx.all_partitions()
        results: dict[TopicPartition, ElectionOutcome] = {}
        electable = []
        for tp in wanted:
            refusal = self._refusal(tp, election_type)
            if refusal is None:
                electable.append(tp)
            else:
                results[tp] = refusal
        strategy = ElectionStrategy.PREFERRED if election_type == PREFERRED else ElectionStrategy.UNCLEAN
        await self._partitions.handle_state_changes(electable, PartitionState.ONLINE_PARTITION, strategy)
        for tp in electable:
            results[tp] = self._outcome(tp, election_type, strategy)
        self._log.info(
            "admin_leader_election",
            election_type=ELECTION_TYPES[election_type],
            requested=len(wanted),
            elected=sorted(tp_text(tp) for tp in electable if results[tp][0] == errors.NONE),
            failed=sorted(tp_text(tp) for tp in electable if results[tp][0] != errors.NONE),
        )
        if requested is None:
            # Kafka's KafkaApis: over all partitions only those elected or failed are answered.
            return {tp: r for tp, r in results.items() if r[0] != errors.ElectionNotNeededError.code}
        return results

    def _refusal(self, tp: TopicPartition, election_type: int) -> ElectionOutcome | None:
        if tp.topic not in self._ctx.topics or not self._ctx.replicas(tp):
            return errors.UnknownTopicOrPartitionError.code, "The partition does not exist."
        if self._ctx.is_topic_queued_for_deletion(tp.topic):
            return errors.InvalidTopicError.code, "The topic is being deleted"
        state = self._ctx.leadership.get(tp)
        leader = state.leader if state is not None else -1
        if election_type == PREFERRED:
            needed = leader != self._ctx.replicas(tp)[0]
        else:
            needed = leader == -1 or not self._ctx.is_online(leader)
        return None if needed else (errors.ElectionNotNeededError.code, "")

    def _outcome(self, tp: TopicPartition, election_type: int, strategy: ElectionStrategy) -> ElectionOutcome:
        state = self._ctx.leadership.get(tp)
        leader = state.leader if state is not None else -1
        if election_type == PREFERRED:
            if leader == self._ctx.replicas(tp)[0]:
                return errors.NONE, ""
            code = errors.PreferredLeaderNotAvailableError.code
        else:
            if leader != -1 and self._ctx.is_online(leader):
                return errors.NONE, ""
            code = errors.EligibleLeadersNotAvailableError.code
        return code, f"Failed to elect leader for partition {tp_text(tp)} under strategy {strategy.value}"
