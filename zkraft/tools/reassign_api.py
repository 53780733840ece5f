"""`zkraft reassign-partitions --bootstrap-server`: Kafka 2.8's ReassignPartitionsCommand through the admin API.

    zkraft reassign-partitions --bootstrap-server B --generate --topics-to-move-json-file F --broker-list 4,5,6
    zkraft reassign-partitions --bootstrap-server B --execute --reassignment-json-file F [--additional]
    zkraft reassign-partitions --bootstrap-server B --verify --reassignment-json-file F
    zkraft reassign-partitions --bootstrap-server B --cancel --reassignment-json-file F
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
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition
from zkraft.tools.reassign_partitions import ZkReassigner, format_reassignment_json, validate_against_cluster
from zkraft.tools.topics import ToolError

# Kafka 2.8 ReassignPartitionsCommand.cannotExecuteBecauseOfExistingMessage
EXISTING_REASSIGNMENT_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used to "
    "change the throttle by resubmitting the current reassignment."
)
NO_MOVES_LINE = "None of the specified partition moves are active."  # replica moves between log dirs: none here


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

    def execute_api(self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]], additional: bool) -> None:
        """executeAssignment: refuse while another runs (unless --additional), print the rollback JSON, alter."""
        if self.admin.list_partition_reassignments() and not additional:
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
        failed = _failures(self.admin.alter_partition_reassignments(plan))
        if failed:
            raise ToolError(f"Error reassigning partition(s): {failed}")
        self._print(f"Successfully started partition reassignment{_plural(plan)} for {_names(plan)}")

    def verify_api(self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]]) -> bool:
        """verifyAssignment: one status line per partition; True while any is still moving."""
        plan = dict(plan_list)
        ongoing = self.admin.list_partition_reassignments(list(plan))
        current = self.assignment_for_topics([tp.topic for tp in plan])
        validate_against_cluster(plan_list, current, None)
        self._print("Status of partition reassignment:")
        for tp in sorted(plan):
            self._print(verify_line(tp, plan[tp], current[tp], tp in ongoing))
        self._print("")  # Kafka then prints the (empty) status of replica moves between log directories
        return bool(ongoing)

    def cancel(self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]]) -> None:
        """cancelAssignment: null replica lists for the listed partitions still adding or removing replicas."""
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

    def list_ongoing(self) -> None:
        """listReassignments (curReassignmentsToString)."""
        self._print(reassignments_text(self.admin.list_partition_reassignments()))


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
