"""Consumer group pages: state, members and their assignment, lag per partition and in total, offset resets.

Lag is the partition's end offset (high watermark) minus the group's committed offset, as
kafka-consumer-groups.sh and kafka_exporter's `kafka_consumergroup_lag` compute it; the rows are that tool's
(`zkraft.tools.consumer_groups.offset_rows`). Offsets can be reset only while the group has no members, as
Kafka's ConsumerGroupCommand requires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from client.kafka.structs import TopicPartition
from zkraft.console.clients import ConsoleClients
from zkraft.console.forms import ConsoleInputError, int_field, text_field
from zkraft.tools.consumer_groups import OffsetRow, offset_rows

RESET_TARGETS = ("earliest", "latest", "offset")


@dataclass(frozen=True, slots=True)
class GroupRow:
    group_id: str
    state: str
    members: int
    total_lag: int | None


@dataclass(frozen=True, slots=True)
class GroupDetail:
    description: Any  # ConsumerGroupDescription
    rows: list[OffsetRow]
    topics: list[str]

    @property
    def total_lag(self) -> int:
        return sum(row.lag or 0 for row in self.rows)


def group_rows(clients: ConsoleClients) -> list[GroupRow]:
    listings = clients.admin.list_consumer_groups()
    if not listings:
        return []
    described = clients.admin.describe_consumer_groups([g.group_id for g in listings])
    out = []
    for group in described:
        rows = _offset_rows(clients, group)
        lags = [row.lag for row in rows if row.lag is not None]
        out.append(GroupRow(group.group_id, group.state, len(group.members), sum(lags) if lags else None))
    return out


def _offset_rows(clients: ConsoleClients, group: Any) -> list[OffsetRow]:
    committed = {tp: o.offset for tp, o in clients.admin.list_consumer_group_offsets(group.group_id).items()}
    owned = {tp for m in group.members for tp in m.assignment}
    wanted = sorted(owned | set(committed))
    log_end = clients.consumer.end_offsets(wanted) if wanted else {}
    return offset_rows(group, committed, log_end)


def group_detail(clients: ConsoleClients, group_id: str) -> GroupDetail:
    (group,) = clients.admin.describe_consumer_groups([group_id])
    rows = _offset_rows(clients, group)
    topics = sorted({row.topic for row in rows if row.topic})
    return GroupDetail(group, rows, topics)


def reset_offsets(clients: ConsoleClients, group_id: str, form: dict[str, str]) -> str:
    """Kafka's --reset-offsets --execute for one topic of the group: to earliest, latest or a given offset."""
    topic = text_field(form, "topic", "Topic")
    target = text_field(form, "to", "Reset to")
    if target not in RESET_TARGETS:
        raise ConsoleInputError(f"Reset to must be one of {', '.join(RESET_TARGETS)}, got {target!r}")
    (group,) = clients.admin.describe_consumer_groups([group_id])
    if group.state not in ("Empty", "Dead"):
        raise ConsoleInputError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state is "
            f"{group.state}."
        )
    partitions = clients.consumer.partitions_for_topic(topic)
    if not partitions:
        raise ConsoleInputError(f"Topic {topic} does not exist")
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    earliest = clients.consumer.beginning_offsets(tps)
    latest = clients.consumer.end_offsets(tps)
    if target == "offset":
        wanted = int_field(form, "offset", "Offset", minimum=0)
        new = {tp: min(max(wanted, earliest[tp]), latest[tp]) for tp in tps}
    else:
        new = earliest if target == "earliest" else latest
    clients.admin.alter_consumer_group_offsets(group_id, new)
    summary = ", ".join(f"{tp.partition}→{offset}" for tp, offset in sorted(new.items()))
    return f"Offsets of group {group_id} on {topic} reset: {summary}"
