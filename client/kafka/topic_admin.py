"""Topic creation and partition addition as Kafka's AdminZkClient does them (K28 `kafka/zk/AdminZkClient.scala`).

Research/kafka.md §1 (znodes), §2.11, §6.1. Two layers:

* pure planners, shared by `zkraft topics --zookeeper` and the broker's CreateTopics and
  CreatePartitions handlers: `plan_topic_creation` and `plan_partition_addition` decide the
  assignment, validate it, the topic name and its configs, and say which znodes to write,
  with Kafka's data and in Kafka's order (`/config/topics/<t>` first, then
  `/brokers/topics/<t>`; the two writes are not transactional in Kafka either);
* thin synchronous helpers over `client.ZkClient` for the tool (`existing_topics`,
  `live_brokers`, `create_topic`, `add_partitions`, `mark_topic_for_deletion`); the broker
  does the asynchronous equivalent itself.

`validate_topic_configs` is Kafka's `LogConfig.validate`: the topic config names of 2.8 with
their ConfigDef types and validators, each failure a ConfigException message
(`Invalid value x for configuration retention.ms: Not a number of type LONG`), raised as
InvalidConfigurationError. Every error carries Kafka's message verbatim.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.kafka.assignment import (
    AdminOperationError,
    BrokerMetadata,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
    check_partition_increase,
    validate_replica_assignment,
    validate_topic_assignment,
)
from client.kafka.assignment_bounds import JUTE_MAXBUFFER_DEFAULT, check_partitions_fit, check_znode_fits
from client.kafka.errors import (
    InvalidConfigurationError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from client.kafka.znodes import (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    TopicAssignment,
    config_change_create_path,
    decode_broker,
    decode_topic,
    delete_topic_path,
    encode_config,
    encode_config_change,
    encode_topic,
    has_collision_chars,
    new_topic_id,
    topic_config_path,
    topic_path,
    topics_collide,
    validate_topic_name,
)

__all__ = [
    "TOPIC_CONFIG_NAMES",
    "TopicCreationPlan",
    "add_partitions",
    "create_topic",
    "existing_topics",
    "live_brokers",
    "mark_topic_for_deletion",
    "plan_partition_addition",
    "plan_topic_creation",
    "validate_topic_configs",
]


@dataclass(frozen=True, slots=True)
class TopicCreationPlan:
    """What creating `topic` writes: `znodes` in creation order, each (path, data)."""

    topic: str
    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str]
    znodes: list[tuple[str, bytes]]
    topic_id: str  # KIP-516: written in the topic znode (v3), as 2.8's AdminZkClient does on creation


# --- planners (pure) -------------------------------------------------------------------


def plan_topic_creation(
    topic: str,
    *,
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: Mapping[int, Sequence[int]] | None,
    configs: Mapping[str, str],
    brokers: Sequence[BrokerMetadata],
    rack_aware: bool = True,
    existing_topics: Collection[str] = (),
    rng: random.Random | None = None,
    znode_bytes_max: int = JUTE_MAXBUFFER_DEFAULT,
) -> TopicCreationPlan:
    """AdminZkClient.createTopic / createTopicWithAssignment, without the writes.

    `brokers` sorted by id (as `live_brokers` returns them); with `rack_aware=False` their racks are
    ignored (`--disable-rack-aware`). `existing_topics` are checked for the name and for a '.'/'_'
    collision, as validateTopicCreate does. Kafka's order of checks is kept: the assignment first,
    then the name, then the assignment's shape, then the configs. The assignment znode must fit in
    `znode_bytes_max` (ZooKeeper's jute.maxbuffer): checked before the assignment is built, and again encoded.
    """
    assignment = _initial_assignment(
        topic, partitions, replication_factor, replica_assignment, brokers, rack_aware, rng, znode_bytes_max
    )
    _validate_new_topic_name(topic, existing_topics)
    validate_topic_assignment(assignment)
    checked = validate_topic_configs(configs)
    frozen = {p: tuple(assignment[p]) for p in sorted(assignment)}
    topic_id = new_topic_id(rng)
    assignment_znode = encode_topic(TopicAssignment(topic, frozen, topic_id=topic_id))
    check_znode_fits(topic, assignment_znode, len(frozen), znode_bytes_max)
    config_znode = encode_config(checked)
    if len(config_znode) > znode_bytes_max:
        raise InvalidConfigurationError(
            f"The configs of topic '{topic}' are {len(config_znode)} bytes in /config/topics/{topic}, "
            f"more than jute.maxbuffer ({znode_bytes_max} bytes)."
        )
    znodes = [
        (topic_config_path(topic), config_znode),
        (topic_path(topic), assignment_znode),
    ]
    return TopicCreationPlan(topic, frozen, checked, znodes, topic_id)


def _initial_assignment(
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: Mapping[int, Sequence[int]] | None,
    brokers: Sequence[BrokerMetadata],
    rack_aware: bool,
    rng: random.Random | None,
    znode_bytes_max: int,
) -> dict[int, list[int]]:
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise InvalidRequestError(
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time."
            )
        fewest_replicas = min((len(r) for r in replica_assignment.values()), default=0)
        check_partitions_fit(topic, len(replica_assignment), fewest_replicas, znode_bytes_max)
        return {p: list(r) for p, r in replica_assignment.items()}
    if partitions is None or replication_factor is None:
        raise InvalidRequestError("Either numPartitions and replicationFactor or replicasAssignments must be set.")
    if 0 < replication_factor <= len(brokers):  # other factors get Kafka's own errors from the assignment
        check_partitions_fit(
            topic, partitions, replication_factor, znode_bytes_max, broker_id_min=min(b.id for b in brokers)
        )
    usable = list(brokers) if rack_aware else [BrokerMetadata(b.id) for b in brokers]
    return assign_replicas_to_brokers(usable, partitions, replication_factor, rng=rng)


def _validate_new_topic_name(topic: str, existing: Collection[str]) -> None:
    """Topic.validate, then validateTopicCreate's existence and collision checks."""
    validate_topic_name(topic)
    if topic in existing:
        raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
    if has_collision_chars(topic):
        colliding = next((t for t in sorted(existing) if topics_collide(topic, t)), None)
        if colliding is not None:
            raise InvalidTopicError(f"Topic '{topic}' collides with existing topic: {colliding}")


def plan_partition_addition(
    topic: str,
    current_assignment: Mapping[int, Sequence[int]] | TopicAssignment,
    new_total: int,
    new_assignment: Mapping[int, Sequence[int]] | None,
    brokers: Sequence[BrokerMetadata],
    rng: random.Random | None = None,
    znode_bytes_max: int = JUTE_MAXBUFFER_DEFAULT,
) -> tuple[dict[int, tuple[int, ...]], bytes]:
    """AdminZkClient.addPartitions: the full assignment after growing to `new_total`, and the new topic znode.

    `new_assignment` holds the new partitions only, keyed by their ids (`existing..new_total-1`).
    A `TopicAssignment` keeps its adding/removing replicas and topic id in the rewritten znode.
    """
    if isinstance(current_assignment, TopicAssignment):
        current = current_assignment
    else:
        current = TopicAssignment(topic, {p: tuple(r) for p, r in current_assignment.items()})
    existing = current.partitions
    if 0 not in existing:
        shown = ", ".join(f"{p} -> {list(r)}" for p, r in sorted(existing.items()))
        raise AdminOperationError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing. "
            f"Assignment: Map({shown})"
        )
    to_add = check_partition_increase(topic, len(existing), new_total)
    broker_id_min = min((b.id for b in brokers), default=0)
    check_partitions_fit(topic, to_add, len(existing[0]), znode_bytes_max, len(existing), broker_id_min)
    if new_assignment is not None:
        validate_replica_assignment(new_assignment, len(existing[0]), {b.id for b in brokers})
        added: Mapping[int, Sequence[int]] = new_assignment
    else:
        added = assign_new_partitions(brokers, existing, to_add, rng)
    full = {**{p: tuple(r) for p, r in existing.items()}, **{p: tuple(r) for p, r in added.items()}}
    full = dict(sorted(full.items()))
    znode = encode_topic(TopicAssignment(topic, full, current.adding, current.removing, current.topic_id))
    check_znode_fits(topic, znode, len(full), znode_bytes_max)
    return full, znode


# --- topic configs (LogConfig.configDef, K28) -----------------------------------------------

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_BROKER_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_THROTTLED_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")
# ApiVersion.versionMap keys: the versions message.format.version accepts (0.x: 3 segments, else 2).
_API_VERSIONS = frozenset(
    "0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.0 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.1 "
    "0.10.2-IV0 0.10.2 0.11.0-IV0 0.11.0-IV1 0.11.0-IV2 0.11.0 1.0-IV0 1.0 1.1-IV0 1.1 2.0-IV0 2.0-IV1 2.0 "
    "2.1-IV0 2.1-IV1 2.1-IV2 2.1 2.2-IV0 2.2-IV1 2.2 2.3-IV0 2.3-IV1 2.3 2.4-IV0 2.4-IV1 2.4 2.5-IV0 2.5 "
    "2.6-IV0 2.6 2.7-IV0 2.7-IV1 2.7-IV2 2.7 2.8-IV0 2.8-IV1 2.8".split()
)


class _ConfigValueError(Exception):
    """The reason part of Kafka's ConfigException; the caller adds value and name."""


def _parse_long(text: str) -> int:
    return _parse_integral(text, _LONG_MIN, _LONG_MAX, "LONG")


def _parse_int(text: str) -> int:
    return _parse_integral(text, _INT_MIN, _INT_MAX, "INT")


def _parse_integral(text: str, low: int, high: int, kind: str) -> int:
    trimmed = text.strip()
    if _JAVA_INT.fullmatch(trimmed) is None or not low <= int(trimmed) <= high:
        raise _ConfigValueError(f"Not a number of type {kind}")
    return int(trimmed)


def _parse_double(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise _ConfigValueError("Not a number of type DOUBLE") from None


def _parse_boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise _ConfigValueError("Expected value to be either true or false")
    return lowered == "true"


def _parse_list(text: str) -> list[str]:
    trimmed = text.strip()
    return [] if not trimmed else re.split(r"\s*,\s*", trimmed)


def _at_least(low: float) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < low:
            raise _ConfigValueError(f"Value must be at least {low}")

    return check


def _between(low: int, high: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < low:
            raise _ConfigValueError(f"Value must be at least {low}")
        if value > high:
            raise _ConfigValueError(f"Value must be no more than {high}")

    return check


def _one_of(*allowed: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        for item in value if isinstance(value, list) else [value]:
            if item not in allowed:
                raise _ConfigValueError(f"String must be one of: {', '.join(allowed)}", item)

    return check


def _api_version(value: Any) -> None:
    segments = value.split(".")
    key = ".".join(segments[: 3 if value.startswith("0.") else 2])
    if key not in _API_VERSIONS:
        raise _ConfigValueError(f"Version `{value}` is not a valid version")


def _throttled_replicas(name: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not (all(_THROTTLED_ENTRY.fullmatch(v.strip()) for v in value) or "".join(value).strip() == "*"):
            raise _ConfigValueError(
                f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )

    return check


def _as_str(text: str) -> str:
    return text.strip()


@dataclass(frozen=True, slots=True)
class _ConfigKey:
    parse: Callable[[str], Any]
    check: Callable[[Any], None] | None = None


_TOPIC_CONFIGS: dict[str, _ConfigKey] = {
    "segment.bytes": _ConfigKey(_parse_int, _at_least(14)),  # LegacyRecord.RECORD_OVERHEAD_V0
    "segment.ms": _ConfigKey(_parse_long, _at_least(1)),
    "segment.jitter.ms": _ConfigKey(_parse_long, _at_least(0)),
    "segment.index.bytes": _ConfigKey(_parse_int, _at_least(0)),
    "flush.messages": _ConfigKey(_parse_long, _at_least(0)),
    "flush.ms": _ConfigKey(_parse_long, _at_least(0)),
    "retention.bytes": _ConfigKey(_parse_long),  # may be negative: no limit
    "retention.ms": _ConfigKey(_parse_long, _at_least(-1)),
    "max.message.bytes": _ConfigKey(_parse_int, _at_least(0)),
    "index.interval.bytes": _ConfigKey(_parse_int, _at_least(0)),
    "delete.retention.ms": _ConfigKey(_parse_long, _at_least(0)),
    "min.compaction.lag.ms": _ConfigKey(_parse_long, _at_least(0)),
    "max.compaction.lag.ms": _ConfigKey(_parse_long, _at_least(1)),
    "file.delete.delay.ms": _ConfigKey(_parse_long, _at_least(0)),
    "min.cleanable.dirty.ratio": _ConfigKey(_parse_double, _between(0, 1)),
    "cleanup.policy": _ConfigKey(_parse_list, _one_of("compact", "delete")),
    "unclean.leader.election.enable": _ConfigKey(_parse_boolean),
    "min.insync.replicas": _ConfigKey(_parse_int, _at_least(1)),
    "compression.type": _ConfigKey(_as_str, _one_of(*_BROKER_COMPRESSION)),
    "preallocate": _ConfigKey(_parse_boolean),
    "message.format.version": _ConfigKey(_as_str, _api_version),
    "message.timestamp.type": _ConfigKey(_as_str, _one_of("CreateTime", "LogAppendTime")),
    "message.timestamp.difference.max.ms": _ConfigKey(_parse_long, _at_least(0)),
    "leader.replication.throttled.replicas": _ConfigKey(
        _parse_list, _throttled_replicas("leader.replication.throttled.replicas")
    ),
    "follower.replication.throttled.replicas": _ConfigKey(
        _parse_list, _throttled_replicas("follower.replication.throttled.replicas")
    ),
    "message.downconversion.enable": _ConfigKey(_parse_boolean),
}
TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(sorted(_TOPIC_CONFIGS))
_MAX_COMPACTION_LAG_MS_DEFAULT = _LONG_MAX


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """LogConfig.validate: names first, then each value parsed and checked; the configs back as a dict of strings."""
    for name in configs:
        if name not in _TOPIC_CONFIGS:
            raise InvalidConfigurationError(f"Unknown topic config name: {name}")
    parsed: dict[str, Any] = {}
    for name, text in configs.items():
        if not isinstance(text, str):
            raise InvalidConfigurationError(f"Invalid value {text} for configuration {name}: value must be a string")
        key = _TOPIC_CONFIGS[name]
        try:
            value = key.parse(text)
        except _ConfigValueError as error:
            raise InvalidConfigurationError(f"Invalid value {text} for configuration {name}: {error.args[0]}") from None
        if key.check is not None:
            try:
                key.check(value)
            except _ConfigValueError as error:
                shown = error.args[1] if len(error.args) > 1 else _java_value(value)
                raise InvalidConfigurationError(
                    f"Invalid value {shown} for configuration {name}: {error.args[0]}"
                ) from None
        parsed[name] = value
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", _MAX_COMPACTION_LAG_MS_DEFAULT)
    if min_lag > max_lag:
        raise InvalidConfigurationError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )
    return dict(configs)


def _java_value(value: Any) -> str:
    """How ConfigException prints a parsed value: Java's toString."""
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- synchronous helpers over client.ZkClient ------------------------------------------


def existing_topics(zk: Any) -> list[str]:
    """The children of /brokers/topics, sorted (KafkaZkClient.getAllTopicsInCluster); none if it is missing."""
    from client.zk.exceptions import NoNodeError

    try:
        return sorted(zk.get_children(TOPICS_PATH))
    except NoNodeError:
        return []


def broker_racks(zk: Any) -> dict[int, str | None]:
    """Registered brokers: id -> rack (None without one), from /brokers/ids/<id>."""
    from client.zk.exceptions import NoNodeError

    try:
        children = zk.get_children(BROKER_IDS_PATH)
    except NoNodeError:
        return {}
    racks: dict[int, str | None] = {}
    for child in children:
        if not child.isdigit():
            continue
        try:
            data, _stat = zk.get(f"{BROKER_IDS_PATH}/{child}")
        except NoNodeError:  # the broker went away while we listed
            continue
        racks[int(child)] = decode_broker(int(child), data).rack
    return racks


def live_brokers(zk: Any, mode: RackAwareMode = RackAwareMode.ENFORCED) -> list[BrokerMetadata]:
    """AdminZkClient.getBrokerMetadatas(mode): registered brokers sorted by id, racks kept per `mode`."""
    return broker_metadatas(broker_racks(zk), mode)


def create_topic(zk: Any, plan: TopicCreationPlan) -> None:
    """Write the plan: the config znode (set or created), then the topic znode; NodeExists -> TopicAlreadyExists."""
    from client.zk.exceptions import NodeExistsError

    (config_path, config_data), (assignment_path, assignment_data) = plan.znodes
    _set_or_create(zk, config_path, config_data)
    try:
        zk.create(assignment_path, assignment_data, makepath=True)
    except NodeExistsError:
        raise TopicAlreadyExistsError(f"Topic '{plan.topic}' already exists.") from None


def _set_or_create(zk: Any, path: str, data: bytes) -> None:
    """KafkaZkClient.setOrCreateEntityConfigs: set; on NoNode create (with parents); on a racing create, set."""
    from client.zk.exceptions import NodeExistsError, NoNodeError

    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            zk.set(path, data)


def topic_assignment(zk: Any, topic: str) -> TopicAssignment | None:
    """The decoded /brokers/topics/<t>, or None if the topic does not exist."""
    from client.zk.exceptions import NoNodeError

    try:
        data, _stat = zk.get(topic_path(topic))
    except NoNodeError:
        return None
    return decode_topic(topic, data)


def add_partitions(
    zk: Any,
    topic: str,
    new_total: int,
    new_assignment: Mapping[int, Sequence[int]] | None,
    brokers: Sequence[BrokerMetadata],
) -> dict[int, tuple[int, ...]]:
    """AdminZkClient.addPartitions: plan, then a conditional write of the topic znode (the version it was read at)."""
    from client.zk.exceptions import NoNodeError

    try:
        data, stat = zk.get(topic_path(topic))
    except NoNodeError:
        raise InvalidTopicError(f"The topic {topic} does not exist") from None
    assignment, znode = plan_partition_addition(topic, decode_topic(topic, data), new_total, new_assignment, brokers)
    zk.set(topic_path(topic), znode, version=stat.version)
    return assignment


def change_topic_config(zk: Any, topic: str, configs: Mapping[str, str]) -> None:
    """AdminZkClient.changeTopicConfig: write /config/topics/<t>, then a v2 change notification."""
    checked = validate_topic_configs(configs)
    _set_or_create(zk, topic_config_path(topic), encode_config(checked))
    zk.create(config_change_create_path(), encode_config_change("topics", topic), sequence=True, makepath=True)


def mark_topic_for_deletion(zk: Any, topic: str) -> bool:
    """Create /admin/delete_topics/<t> (no data); False if it was already marked."""
    from client.zk.exceptions import NodeExistsError

    try:
        zk.create(delete_topic_path(topic), b"", makepath=True)
    except NodeExistsError:
        return False
    return True
