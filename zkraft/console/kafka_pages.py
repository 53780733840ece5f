"""The overview and topic pages: what each shows, read through the SDK, and the topic actions.

The overview is CMAK's cluster summary: quorum members (`zkraft quorum status`'s Status RPC), brokers, the
controller, under-replicated and offline partitions (ISR smaller than the replicas; no leader), all from one
Metadata request. A partition's out-of-sync replicas are its replicas not in the ISR, as Kafka's
UnderReplicatedPartitions counts them (docs/research/kafka.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from client.kafka.structs import TopicPartition
from zkraft.console.clients import ConsoleClients
from zkraft.console.forms import ConsoleInputError, config_lines, int_field, text_field
from zkraft.console.rates import RateSampler, rates_between

QUORUM_STATUS_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]
    start_offset: int | None = None
    end_offset: int | None = None

    @property
    def out_of_sync(self) -> list[int]:
        return [r for r in self.replicas if r not in self.isr]

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication: int
    under_replicated: int
    offline: int
    size_bytes: int | None  # None: no /metrics sampled yet
    messages_in_per_s: float | None
    bytes_out_per_s: float | None


@dataclass(slots=True)
class Overview:
    cluster_id: str
    controller_id: int
    brokers: list[Any]
    quorum: list[Any]
    quorum_error: str | None
    topics: int = 0
    partitions: int = 0
    under_replicated: list[PartitionRow] = field(default_factory=list)
    offline: list[PartitionRow] = field(default_factory=list)


def _rows(topic: Any) -> list[PartitionRow]:
    return [PartitionRow(topic.name, p.partition, p.leader, list(p.replicas), list(p.isr)) for p in topic.partitions]


def overview(clients: ConsoleClients) -> Overview:
    cluster = clients.admin.describe_cluster()
    topics = clients.admin.describe_topics(None)
    quorum, quorum_error = quorum_rows(clients)
    view = Overview(cluster.cluster_id, cluster.controller_id, list(cluster.brokers), quorum, quorum_error)
    view.topics = len(topics)
    for topic in topics:
        for row in _rows(topic):
            view.partitions += 1
            if row.offline:
                view.offline.append(row)
            elif row.out_of_sync:
                view.under_replicated.append(row)
    return view


def quorum_rows(clients: ConsoleClients) -> tuple[list[Any], str | None]:
    """Each quorum node's role, term, indexes and lag, as `zkraft quorum status` shows them."""
    if clients.targets.zookeeper is None:
        return [], "started without --zookeeper: the quorum is not shown"
    from zkraft.tools.quorum_status import QuorumStatusError, collect_status, parse_server_list

    try:
        addresses = parse_server_list(clients.targets.zookeeper.split("/", 1)[0])
    except QuorumStatusError as error:
        return [], str(error)
    return collect_status(addresses, QUORUM_STATUS_TIMEOUT_S, clients.targets.zk_tls), None


def topic_rows(clients: ConsoleClients, sampler: RateSampler | None) -> list[TopicRow]:
    topics = clients.admin.describe_topics(None)
    history = sampler.history()[-2:] if sampler is not None else []
    latest = history[-1] if history else None
    sizes: dict[str, int] = {}
    if latest is not None:
        for (topic, _partition), size in latest.log_size_bytes.items():
            sizes[topic] = sizes.get(topic, 0) + int(size)
    out = []
    for topic in topics:
        rows = _rows(topic)
        rates = rates_between(history[0], history[1], topic.name) if len(history) == 2 else None
        out.append(
            TopicRow(
                name=topic.name,
                internal=topic.is_internal,
                partitions=len(rows),
                replication=max((len(r.replicas) for r in rows), default=0),
                under_replicated=sum(1 for r in rows if r.out_of_sync and not r.offline),
                offline=sum(1 for r in rows if r.offline),
                size_bytes=None if latest is None else sizes.get(topic.name, 0),
                messages_in_per_s=None if rates is None else rates.messages_in,
                bytes_out_per_s=None if rates is None else rates.bytes_out,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class TopicDetail:
    name: str
    internal: bool
    partitions: list[PartitionRow]
    configs: list[Any]  # ConfigEntry, the non-default ones first
    offsets_error: str | None = None


def topic_detail(clients: ConsoleClients, name: str) -> TopicDetail:
    from client.kafka.config_resources import ConfigResource

    (topic,) = clients.admin.describe_topics([name])
    tps = [TopicPartition(name, p.partition) for p in topic.partitions]
    led = [TopicPartition(name, p.partition) for p in topic.partitions if p.leader >= 0]
    starts, ends, offsets_error = _log_offsets(clients, led)
    rows = [
        PartitionRow(name, p.partition, p.leader, list(p.replicas), list(p.isr), starts.get(tp), ends.get(tp))
        for p, tp in zip(topic.partitions, tps, strict=True)
    ]
    (described,) = clients.admin.describe_configs([ConfigResource("TOPIC", name)])
    entries = sorted(described.entries.values(), key=lambda e: (e.is_default, e.name))
    return TopicDetail(name, topic.is_internal, rows, entries, offsets_error)


def _log_offsets(clients: ConsoleClients, tps: list[TopicPartition]) -> tuple[dict, dict, str | None]:
    """Log start and end offsets of the partitions that have a leader; a refusal leaves them unknown (the
    page still shows the partitions, which matter most when something is wrong)."""
    from client.kafka.errors import KafkaError

    if not tps:
        return {}, {}, None
    try:
        return clients.consumer.beginning_offsets(tps), clients.consumer.end_offsets(tps), None
    except KafkaError as error:
        return {}, {}, f"log offsets unknown: {error}"


# ---- actions: each raises the SDK's KafkaError (shown in plain words) or ConsoleInputError


def create_topic(clients: ConsoleClients, form: dict[str, str]) -> str:
    from client.kafka.types import NewTopic

    name = text_field(form, "name", "Topic name")
    partitions = int_field(form, "partitions", "Partitions", minimum=1, default=1)
    replication = int_field(form, "replication_factor", "Replication factor", minimum=1, default=1)
    configs = config_lines(form.get("configs", ""))
    clients.admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs or None)])
    return f"Created topic {name} ({partitions} partitions, replication factor {replication})"


def delete_topic(clients: ConsoleClients, name: str, form: dict[str, str]) -> str:
    if text_field(form, "confirm", "The topic's name, typed again", required=False) != name:
        raise ConsoleInputError(f"type the topic's name ({name}) to confirm its deletion")
    clients.admin.delete_topics([name])
    return f"Topic {name} is marked for deletion"


def add_partitions(clients: ConsoleClients, name: str, form: dict[str, str]) -> str:
    from client.kafka.types import NewPartitions

    total = int_field(form, "total", "New partition count", minimum=1)
    clients.admin.create_partitions({name: NewPartitions(total)})
    return f"Topic {name} now has {total} partitions"


def alter_topic_config(clients: ConsoleClients, name: str, form: dict[str, str]) -> str:
    from client.kafka.config_resources import AlterConfigOp, ConfigResource

    key = text_field(form, "key", "Config name")
    if form.get("action") == "delete":
        operation = AlterConfigOp(key, None, "DELETE")
        done = f"{key} of {name} is back to its default"
    else:
        value = text_field(form, "value", f"The value of {key}")
        operation = AlterConfigOp(key, value, "SET")
        done = f"{key}={value} set on {name}"
    clients.admin.incremental_alter_configs([ConfigResource("TOPIC", name, operations=[operation])])
    return done
