"""Reassignment (generate, execute, verify, cancel, progress) and preferred-replica election.

The actions are kafka-reassign-partitions.sh's and kafka-leader-election.sh's through the admin API (KIP-455,
KIP-460), run by the same code as `zkraft reassign-partitions --bootstrap-server` and `zkraft leader-election`
(zkraft/tools/reassign_api.py, leader_election.report); the page shows what the tool would print.
"""

from __future__ import annotations

import io
import json
from typing import Any

from client.kafka.structs import TopicPartition
from zkraft.console.clients import ConsoleClients
from zkraft.console.forms import ConsoleInputError, broker_ids, text_field
from zkraft.tools.leader_election import ELECTION_TYPES, report
from zkraft.tools.reassign_partitions import ReassignOptions, parse_reassignment
from zkraft.tools.topics import ToolError

ACTIONS = ("generate", "execute", "verify", "cancel")


def ongoing(clients: ConsoleClients) -> list[tuple[TopicPartition, dict[str, list[int]]]]:
    """Each reassignment in progress: replicas, adding and removing (the progress table)."""
    return sorted(clients.admin.list_partition_reassignments().items())


def _plan(form: dict[str, str]) -> list[tuple[TopicPartition, tuple[int, ...]]]:
    text = text_field(form, "plan", "Reassignment JSON")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConsoleInputError(f"Reassignment JSON: {error}") from None
    return parse_reassignment(data, "the reassignment JSON")


def run_action(clients: ConsoleClients, action: str, form: dict[str, str]) -> str:
    """The tool's output for one action; its refusals (ToolError) become ConsoleInputError with its words."""
    from zkraft.tools.reassign_api import ApiReassigner

    if action not in ACTIONS:
        raise ConsoleInputError(f"unknown reassignment action {action!r}")
    out = io.StringIO()
    tool = ApiReassigner(clients.admin, out)
    try:
        if action == "generate":
            topics = [t.strip() for t in text_field(form, "topics", "Topics to move").split(",") if t.strip()]
            brokers = tuple(broker_ids(text_field(form, "brokers", "Broker list"), "Broker list"))
            tool.generate(ReassignOptions("generate", None, broker_list=brokers), topics)
        elif action == "execute":
            tool.execute_api(_plan(form), additional=False)
        elif action == "verify":
            tool.verify_api(_plan(form))
        else:
            tool.cancel(_plan(form))
    except ToolError as error:
        raise ConsoleInputError(str(error)) from None
    return out.getvalue()


def preferred_election(clients: ConsoleClients, form: dict[str, str]) -> str:
    """Preferred-replica election of one topic's partitions, or of every partition when no topic is given."""
    topic = text_field(form, "topic", "Topic", required=False)
    partitions: Any = None
    if topic:
        (description,) = clients.admin.describe_topics([topic])
        partitions = [TopicPartition(topic, p.partition) for p in description.partitions]
    results = clients.admin.perform_leader_election(ELECTION_TYPES["PREFERRED"], partitions)
    lines, _failed = report("PREFERRED", results)
    return "\n".join(lines) or "No partition needed a preferred-replica election."
