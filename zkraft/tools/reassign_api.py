"""`zkraft reassign-partitions --bootstrap-server`: Kafka 2.8's ReassignPartitionsCommand through the admin API.

    zkraft reassign-partitions --bootstrap-server B --generate --topics-to-move-json-file F --broker-list 4,5,6
    zkraft reassign-partitions --bootstrap-server B --execute --reassignment-json-file F [--additional] [--throttle N]
    zkraft reassign-partitions --bootstrap-server B --verify --reassignment-json-file F [--preserve-throttles]
    zkraft reassign-partitions --bootstrap-server B --cancel --reassignment-json-file F [--preserve-throttles]
    zkraft reassign-partitions --bootstrap-server B --list

KIP-455: `--execute` sends AlterPartitionReassignments to the controller, `--cancel` sends it with null
replica lists for the listed partitions that are still moving (back to their original replicas), `--verify`
and `--list` read ListPartitionReassignments and the metadata. Kafka 2.8's lines: `Successfully started
partition reassignment(s) for t-0,t-1`, `Status of partition reassignment:` then per partition
`Reassignment of partition t-0 is complete.` | `... is still in progress.` | `There is no active
reassignment of partition t-0, but replica set is 1,2 rather than 3,4.`, `Successfully cancelled partition
reassignment(s) for: t-0`, `None of the specified partition reassignments are active.`, `Current partition
reassignments:` with `t-0: replicas: 1,2,3. adding: 3. removing: 1.` lines, `No partition reassignments found.`
The JSON files and their checks are the ZooKeeper mode's (zkraft/tools/reassign_partitions.py).

Throttle (2.8's modifyReassignmentThrottle / clearAllThrottles), through IncrementalAlterConfigs: `--execute
--throttle N` SETs `leader.replication.throttled.replicas` (each moving partition's sources) and
`follower.replication.throttled.replicas` (its destinations) on the topics, and both `*.replication.throttled.rate`
on every broker a move touches, moves already running included (`The inter-broker throttle limit was set to N
B/s`). `--verify` once nothing is moving, and `--cancel`, DELETE them again (`Clearing broker-level throttles on
brokers 1,2,3`, `Clearing topic-level throttles on topic t`) unless `--preserve-throttles`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from client.kafka.config_resources import AlterConfigOp, ConfigResource
from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition
from zkraft.tools.reassign_partitions import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    NO_THROTTLE,
    REPLICA_ALTER_LOG_DIRS_RATE,
    THROTTLE_WARNING,
    ZkReassigner,
    format_reassignment_json,
    validate_against_cluster,
)
from zkraft.tools.topics import ToolError

# Kafka 2.8 ReassignPartitionsCommand.cannotExecuteBecauseOfExistingMessage
EXISTING_REASSIGNMENT_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used to "
    "change the throttle by resubmitting the current reassignment."
)
NO_MOVES_LINE = "None of the specified partition moves are active."  # replica moves between log dirs: none here
# ReassignPartitionsCommand.brokerLevelThrottles / topicLevelThrottles: what clearAllThrottles deletes.
BROKER_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, REPLICA_ALTER_LOG_DIRS_RATE)
TOPIC_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


@dataclass(frozen=True, slots=True)
class PartitionMove:
    """ReassignPartitionsCommand.PartitionMove: the replicas a partition leaves from and the ones it goes to."""

    sources: frozenset[int]
    destinations: frozenset[int]


class ApiReassigner(ZkReassigner):
    """The actions over the admin client. `generate` is the ZooKeeper mode's over the two reads below."""

    def __init__(self, admin: Any, out: TextIO, rng: random.Random | None = None) -> None:
        super().__init__(None, out, rng)
        self.admin = admin

    # ---- reads (the metadata instead of the znodes)

    def assignment_for_topics(self, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
        wanted = set(topics)
        return {
            TopicPartition(t.name, p.partition): tuple(p.replicas)
            for t in self.admin.describe_topics(None)
            if t.name in wanted
            for p in t.partitions
        }

    def registered_brokers(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.admin.describe_cluster().brokers}

    # ---- actions

    def execute_api(
        self,
        plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]],
        additional: bool,
        throttle_bytes_per_s: int = NO_THROTTLE,
    ) -> None:
        """executeAssignment: refuse while another runs (unless --additional), print the rollback JSON, throttle
        (before the move starts, so the new replicas' first fetch is already throttled), alter."""
        ongoing = self.admin.list_partition_reassignments()
        if ongoing and not additional:
            raise ToolError(EXISTING_REASSIGNMENT_MESSAGE)
        live = self.registered_brokers()
        for broker in sorted({b for _tp, replicas in plan_list for b in replicas}):
            if broker not in live:
                raise ToolError(f"Unknown broker id {broker}")
        current = self.assignment_for_topics([tp.topic for tp, _ in plan_list])
        validate_against_cluster(plan_list, current, None)
        plan = dict(plan_list)
        self._print(
            "Current partition replica assignment\n\n"
            f"{format_reassignment_json({tp: current[tp] for tp in plan})}\n\n"
            "Save this to use as the --reassignment-json-file option during rollback"
        )
        if throttle_bytes_per_s >= 0:
            self._print(THROTTLE_WARNING)
            self._throttle(proposed_moves(ongoing, plan, current), throttle_bytes_per_s)
        failed = _failures(self.admin.alter_partition_reassignments(plan))
        if failed:
            raise ToolError(f"Error reassigning partition(s): {failed}")
        self._print(f"Successfully started partition reassignment{_plural(plan)} for {_names(plan)}")

    def verify_api(
        self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]], preserve_throttles: bool = False
    ) -> bool:
        """verifyAssignment: one status line per partition; True while any reassignment (listed or not) is still
        moving. Once none is, the throttles go (all of them: Kafka cannot know which earlier moves set some)."""
        plan = dict(plan_list)
        ongoing = self.admin.list_partition_reassignments()
        current = self.assignment_for_topics([tp.topic for tp in plan])
        validate_against_cluster(plan_list, current, None)
        self._print("Status of partition reassignment:")
        for tp in sorted(plan):
            self._print(verify_line(tp, plan[tp], current[tp], tp in ongoing))
        self._print("")  # Kafka then prints the (empty) status of replica moves between log directories
        if not ongoing and not preserve_throttles:
            self.clear_all_throttles(plan_list)
        return bool(ongoing)

    def cancel(
        self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]], preserve_throttles: bool = False
    ) -> None:
        """cancelAssignment: null replica lists for the listed partitions still adding or removing replicas,
        then the throttles go (unless --preserve-throttles)."""
        listed = self.admin.list_partition_reassignments([tp for tp, _ in plan_list])
        moving = sorted(tp for tp, r in listed.items() if r["adding_replicas"] or r["removing_replicas"])
        if moving:
            failed = _failures(self.admin.alter_partition_reassignments({tp: None for tp in moving}))
            if failed:
                raise ToolError(f"Error cancelling partition reassignment{_plural(moving)} for: {failed}")
            self._print(f"Successfully cancelled partition reassignment{_plural(moving)} for: {_names(moving)}")
        else:
            self._print("None of the specified partition reassignments are active.")
        self._print(NO_MOVES_LINE)
        if not preserve_throttles:
            self.clear_all_throttles(plan_list)

    def list_ongoing(self) -> None:
        """listReassignments (curReassignmentsToString)."""
        self._print(reassignments_text(self.admin.list_partition_reassignments()))

    # ---- throttles

    def _throttle(self, moves: Mapping[TopicPartition, PartitionMove], rate_bytes_per_s: int) -> None:
        """modifyReassignmentThrottle: the topics' replica lists, then the rates of every broker of a move."""
        topics = [
            ConfigResource("TOPIC", topic, operations=[
                AlterConfigOp(LEADER_THROTTLED_REPLICAS, leader, "SET"),
                AlterConfigOp(FOLLOWER_THROTTLED_REPLICAS, follower, "SET"),
            ])
            for topic, (leader, follower) in throttled_replicas(moves).items()
        ]  # fmt: skip
        self.admin.incremental_alter_configs(topics)
        brokers = sorted({b for move in moves.values() for b in move.sources | move.destinations})
        rate = str(rate_bytes_per_s)
        self.admin.incremental_alter_configs(
            [
                ConfigResource(
                    "BROKER",
                    str(broker),
                    operations=[
                        AlterConfigOp(LEADER_THROTTLED_RATE, rate, "SET"),
                        AlterConfigOp(FOLLOWER_THROTTLED_RATE, rate, "SET"),
                    ],
                )
                for broker in brokers
            ]  # fmt: skip
        )
        self._print(f"The inter-broker throttle limit was set to {rate_bytes_per_s} B/s")

    def clear_all_throttles(self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]]) -> None:
        """clearAllThrottles: DELETE the rates on every live broker and every broker of the plan, and the
        replica lists on the plan's topics (a DELETE of a config that is not set changes nothing)."""
        live = {b.node_id for b in self.admin.describe_cluster().brokers}
        brokers = sorted(live | {b for _tp, replicas in plan_list for b in replicas})
        self._print(f"Clearing broker-level throttles on broker{_plural(brokers)} {_csv(brokers)}")
        self.admin.incremental_alter_configs(
            [ConfigResource("BROKER", str(b), operations=_deletes(BROKER_THROTTLES)) for b in brokers]
        )
        topics = sorted({tp.topic for tp, _replicas in plan_list})
        self._print(f"Clearing topic-level throttles on topic{_plural(topics)} {','.join(topics)}")
        self.admin.incremental_alter_configs(
            [ConfigResource("TOPIC", t, operations=_deletes(TOPIC_THROTTLES)) for t in topics]
        )


def proposed_moves(
    ongoing: Mapping[TopicPartition, Mapping[str, Sequence[int]]],
    plan: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, PartitionMove]:
    """calculateProposedMoveMap: the moves already running (sources = replicas not being added), then the plan's,
    whose sources are a running move's sources or else the partition's current replicas."""
    moves = {
        tp: PartitionMove(frozenset(r["replicas"]) - frozenset(r["adding_replicas"]), frozenset(r["adding_replicas"]))
        for tp, r in ongoing.items()
    }
    for tp, replicas in plan.items():
        sources = moves[tp].sources if tp in moves else frozenset(current[tp])
        moves[tp] = PartitionMove(sources, frozenset(replicas) - sources)
    return moves


def throttled_replicas(moves: Mapping[TopicPartition, PartitionMove]) -> dict[str, tuple[str, str]]:
    """calculateLeaderThrottles / calculateFollowerThrottles: topic -> (leader value, follower value), each a
    sorted set of `partition:broker` strings (Kafka's TreeSet[String], so "10:1" sorts before "2:1")."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for tp, move in moves.items():
        leader.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in move.sources)
        follower.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in move.destinations - move.sources)
    return {topic: (",".join(sorted(leader[topic])), ",".join(sorted(follower[topic]))) for topic in sorted(leader)}


def _deletes(names: Sequence[str]) -> list[AlterConfigOp]:
    return [AlterConfigOp(name, None, "DELETE") for name in names]


def verify_line(tp: TopicPartition, target: Sequence[int], current: Sequence[int], ongoing: bool) -> str:
    """partitionReassignmentStatesToString for one partition."""
    if ongoing:
        return f"Reassignment of partition {tp} is still in progress."
    if list(current) == list(target):
        return f"Reassignment of partition {tp} is complete."
    return (
        f"There is no active reassignment of partition {tp}, but replica set is {_csv(current)} rather than "
        f"{_csv(target)}."
    )


def reassignments_text(ongoing: Mapping[TopicPartition, Mapping[str, Sequence[int]]]) -> str:
    """curReassignmentsToString: `t-0: replicas: 1,2,3. adding: 3. removing: 1.` per partition."""
    lines = []
    for tp in sorted(ongoing):
        r = ongoing[tp]
        adding = f" adding: {_csv(r['adding_replicas'])}." if r["adding_replicas"] else ""
        removing = f" removing: {_csv(r['removing_replicas'])}." if r["removing_replicas"] else ""
        lines.append(f"{tp}: replicas: {_csv(r['replicas'])}.{adding}{removing}")
    return "Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found."


def _failures(results: Mapping[TopicPartition, KafkaError | None]) -> str:
    return "; ".join(f"{tp}: {' '.join(str(results[tp]).split())}" for tp in sorted(results) if results[tp])


def _csv(values: Sequence[int]) -> str:
    return ",".join(map(str, values))


def _plural(items: Sequence[Any] | Mapping[Any, Any]) -> str:
    return "" if len(items) == 1 else "s"


def _names(partitions: Sequence[TopicPartition] | Mapping[TopicPartition, Any]) -> str:
    return ",".join(str(tp) for tp in sorted(partitions))
