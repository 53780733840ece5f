"""Kafka's ZooKeeper layout: paths and JSON payloads as Kafka 2.x writes and reads them.

Research/kafka.md §1 (K28 `kafka/zk/ZkData.scala`). Each znode has a path function,
a frozen value object and an `encode_*(...) -> bytes` / `decode_*(...)` pair. Encoders
write compact JSON (Jackson's form: no spaces, UTF-8) with Kafka's key order where the
order is known; decoders accept every older version Kafka itself accepts and raise
`ZnodeDataError`, a one-line `ValueError` that names the path, on anything else.

Key order. Kafka builds most payloads from Scala maps: up to four keys keep insertion
order; larger and mutable maps iterate in hash order. The broker registration order is
that of the Scala 2.12 build (`listener_security_protocol_map, endpoints, rack, jmx_port,
features, host, timestamp, port, version`), which reproduces the registration real 2.x
clusters show; the partition state order is the one real clusters show
(`controller_epoch, leader, version, leader_epoch, isr`). Inside the `partitions` maps
Kafka's order is hash order; we write ascending partition ids. Readers never depend on
order.

No clocks here: `timestamp_ms` is always given by the caller.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from client.kafka.errors import InvalidTopicError
from client.kafka.structs import TopicPartition
from client.zk.acl import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

# --- paths (ZkData.scala) -------------------------------------------------------------

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
CONSUMERS_PATH = "/consumers"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"

# ConfigType.all (K28 DynamicConfigManager.scala)
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER, CONFIG_TYPE_IP)

# ZkData.PersistentZkPaths: created (with parents) at broker start-up.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES)

# ZkData.SensitiveRootPaths: with zookeeper.set.acl only their creator may even read them (SCRAM credentials,
# broker configs with secrets, delegation tokens).
SENSITIVE_ROOT_PATHS: tuple[str, ...] = (f"{CONFIG_PATH}/{CONFIG_TYPE_USER}", f"{CONFIG_PATH}/{CONFIG_TYPE_BROKER}",
                                         "/delegation_token")  # fmt: skip


def is_sensitive_path(path: str) -> bool:
    return path.startswith(SENSITIVE_ROOT_PATHS)


def secure_default_acls(path: str) -> list[ACL]:
    """ZkData.defaultAcls(isSecure=true, path) of Kafka 2.8: the creator (its authenticated ids) may do
    everything, and everyone else may read, except under a sensitive root path; the old consumers' /consumers
    stays open (consumers of every principal write there)."""
    if path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    return list(CREATOR_ALL_ACL) if is_sensitive_path(path) else [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


# ZkVersion: -1 matches any version in a conditional write; -2 is "no such node" inside Kafka.
MATCH_ANY_VERSION = -1
UNKNOWN_VERSION = -2

# LeaderAndIsr constants.
NO_LEADER = -1
LEADER_DURING_DELETE = -2  # sent in UpdateMetadata for a topic being deleted, never written to ZK
INITIAL_LEADER_EPOCH = 0

# Topic.java
TOPIC_NAME_MAX_LENGTH = 249
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    return config_entity_path(CONFIG_TYPE_TOPIC, topic)


def broker_config_path(broker: int | str) -> str:
    """`/config/brokers/<id>`; `"<default>"` is the cluster-wide default entity."""
    return config_entity_path(CONFIG_TYPE_BROKER, str(broker))


def isr_change_create_path() -> str:
    """The path to create PERSISTENT_SEQUENTIAL; ZooKeeper appends the 10-digit counter."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}"


def config_change_create_path() -> str:
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


def log_dir_event_create_path() -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"


def sequence_number(path: str, prefix: str) -> str:
    """`.../isr_change_0000000007` -> `"0000000007"` (Kafka's `sequenceNumber(path)`)."""
    return path[path.rfind(prefix) + len(prefix) :]


# --- errors and JSON helpers ---------------------------------------------------------


class ZnodeDataError(ValueError):
    """A znode's data is not what Kafka writes there; the message names the path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(" ".join(f"bad data in {path}: {reason}".split()))
        self.path = path


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | None, path: str) -> Any:
    if data is None or len(data) == 0:
        raise ZnodeDataError(path, "no data")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZnodeDataError(path, f"not JSON ({e}): {_preview(data)}") from None


def _preview(data: bytes, limit: int = 120) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + "..."


def _object(value: Any, path: str, what: str = "the payload") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ZnodeDataError(path, f"{what} is not a JSON object")
    return value


def _int(obj: Mapping[str, Any], key: str, path: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZnodeDataError(path, f"{key!r} is {_describe(value)}, expected an integer")
    return value


def _str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ZnodeDataError(path, f"{key!r} is {_describe(value)}, expected a string")
    return value


def _int_list(value: Any, path: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise ZnodeDataError(path, f"{what} is {_describe(value)}, expected a list of integers")
    return tuple(value)


def _describe(value: Any) -> str:
    return "missing" if value is None else json.dumps(value)[:60]


def _version(obj: Mapping[str, Any], path: str, supported: Iterable[int]) -> int:
    version = _int(obj, "version", path)
    allowed = tuple(supported)
    if version not in allowed:
        raise ZnodeDataError(path, f"unsupported version {version} (supported: {', '.join(map(str, allowed))})")
    return version


def _partition_id(key: str, path: str) -> int:
    try:
        return int(key)
    except ValueError:
        raise ZnodeDataError(path, f"partition key {key!r} is not an integer") from None


# --- /controller and /controller_epoch ------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """`{"version":1,"brokerid":N,"timestamp":"<ms>"}` (ControllerZNode.encode)."""
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> ControllerRegistration:
    """Kafka reads only `brokerid`; 0.8's payload is the same. A missing timestamp reads as 0."""
    obj = _object(_loads(data, CONTROLLER_PATH), CONTROLLER_PATH)
    broker_id = _int(obj, "brokerid", CONTROLLER_PATH)
    stamp = obj.get("timestamp")
    timestamp_ms = int(stamp) if isinstance(stamp, str) and stamp.lstrip("-").isdigit() else 0
    return ControllerRegistration(broker_id, timestamp_ms)


def encode_controller_epoch(epoch: int) -> bytes:
    """Plain decimal text, not JSON (ControllerEpochZNode)."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    text = (data or b"").decode("utf-8", errors="replace").strip()
    try:
        return int(text)
    except ValueError:
        raise ZnodeDataError(CONTROLLER_EPOCH_PATH, f"{text!r} is not an integer") from None


# --- /brokers/ids/<id> ---------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# zkraft's: the listener name of a broker's gRPC endpoint in its registration (its Kafka listeners have theirs).
GRPC_LISTENER_NAME = "GRPC"
# EndPoint.DefaultSecurityProtocolMap: each protocol's name is also a listener name.
_DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}
# EndPoint.uriParseExp; Scala matches the whole string.
_ENDPOINT_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
# Order Kafka's (Scala 2.12) mutable.HashMap gives these keys; see the module docstring.
_BROKER_KEY_ORDER = (
    "listener_security_protocol_map",
    "endpoints",
    "rack",
    "jmx_port",
    "features",
    "host",
    "timestamp",
    "port",
    "version",
)
BROKER_REGISTRATION_VERSIONS = (1, 2, 3, 4, 5)


@dataclass(frozen=True, slots=True)
class EndPoint:
    host: str | None  # None: bind to all interfaces, written as "LISTENER://:9092"
    port: int
    listener_name: str
    security_protocol: str

    @property
    def connection_string(self) -> str:
        """`CLIENT://host:9092`, IPv6 hosts in brackets (EndPoint.connectionString)."""
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def parse_endpoint(connection_string: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
    """`"SSL://h:9093"` -> EndPoint (EndPoint.createEndPoint); the listener name is upper-cased."""
    match = _ENDPOINT_RE.fullmatch(connection_string)
    if match is None:
        raise ValueError(f"Unable to parse {connection_string} to a broker endpoint")
    listener = match.group(1).upper()
    protocols = _DEFAULT_PROTOCOL_MAP if protocol_map is None else protocol_map
    protocol = protocols.get(listener)
    if protocol is None:
        raise ValueError(f"No security protocol defined for listener {listener}")
    host = match.group(2) or None
    return EndPoint(host, int(match.group(3)), listener, protocol)


@dataclass(frozen=True, slots=True)
class SupportedVersionRange:
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The payload of `/brokers/ids/<id>` (Kafka's BrokerInfo); the broker epoch is the znode's czxid."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    version: int = 5
    timestamp_ms: int = 0
    features: Mapping[str, SupportedVersionRange] = field(default_factory=dict)

    def plaintext_endpoint(self) -> EndPoint | None:
        """The first PLAINTEXT endpoint: the source of the top-level host/port old clients read."""
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    def endpoint_for(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def grpc_endpoint(self) -> EndPoint | None:
        """The broker's gRPC endpoint: the GRPC listener; in a registration written before brokers had Kafka
        listeners, the first PLAINTEXT endpoint, else the first."""
        grpc = self.endpoint_for(GRPC_LISTENER_NAME)
        if grpc is not None:
            return grpc
        return self.plaintext_endpoint() or next(iter(self.endpoints), None)


def encode_broker(info: BrokerRegistration) -> bytes:
    """BrokerIdZNode.encode: v2 endpoints; v3+ rack (when set); v4+ listener map; v5+ features."""
    if info.version not in BROKER_REGISTRATION_VERSIONS:
        raise ValueError(f"unsupported broker registration version {info.version}")
    plain = info.plaintext_endpoint()
    values: dict[str, Any] = {
        "version": info.version,
        "host": plain.host if plain is not None else None,
        "port": plain.port if plain is not None else -1,
        "endpoints": [e.connection_string for e in info.endpoints],
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms),
    }
    if info.rack is not None and info.version >= 3:
        values["rack"] = info.rack
    if info.version >= 4:
        values["listener_security_protocol_map"] = {e.listener_name: e.security_protocol for e in info.endpoints}
    if info.version >= 5:
        values["features"] = {
            name: {"min_version": r.min_version, "max_version": r.max_version}
            for name, r in sorted(info.features.items())
        }
    return _dumps({k: values[k] for k in _BROKER_KEY_ORDER if k in values})


def decode_broker(broker_id: int, data: bytes | None) -> BrokerRegistration:
    """BrokerIdZNode.decode: v1 has only host/port (PLAINTEXT); v2+ endpoints, mapped by the listener map if any."""
    path = broker_path(broker_id)
    obj = _object(_loads(data, path), path)
    version = _int(obj, "version", path)
    if version < 1:
        raise ZnodeDataError(path, f"Unsupported version of broker registration: {version}")
    jmx_port = _int(obj, "jmx_port", path)
    if version == 1:
        host, port = _str(obj, "host", path), _int(obj, "port", path)
        endpoints: tuple[EndPoint, ...] = (EndPoint(host, port, "PLAINTEXT", "PLAINTEXT"),)
    else:
        endpoints = _decode_endpoints(obj, path)
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZnodeDataError(path, f"'rack' is {_describe(rack)}, expected a string")
    stamp = obj.get("timestamp")
    timestamp_ms = int(stamp) if isinstance(stamp, str) and stamp.lstrip("-").isdigit() else 0
    return BrokerRegistration(broker_id, endpoints, rack, jmx_port, version, timestamp_ms, _decode_features(obj, path))


def _decode_endpoints(obj: Mapping[str, Any], path: str) -> tuple[EndPoint, ...]:
    raw_map = obj.get("listener_security_protocol_map")
    protocol_map: dict[str, str] | None = None
    if raw_map is not None:
        raw_map = _object(raw_map, path, "'listener_security_protocol_map'")
        if not all(isinstance(v, str) for v in raw_map.values()):
            raise ZnodeDataError(path, "'listener_security_protocol_map' values must be strings")
        protocol_map = {k.upper(): v for k, v in raw_map.items()}
    listeners = obj.get("endpoints")
    if not isinstance(listeners, list) or not all(isinstance(s, str) for s in listeners):
        raise ZnodeDataError(path, f"'endpoints' is {_describe(listeners)}, expected a list of strings")
    try:
        return tuple(parse_endpoint(s, protocol_map) for s in listeners)
    except ValueError as e:
        raise ZnodeDataError(path, str(e)) from None


def _decode_features(obj: Mapping[str, Any], path: str) -> dict[str, SupportedVersionRange]:
    raw = obj.get("features")
    if raw is None:
        return {}
    features: dict[str, SupportedVersionRange] = {}
    for name, value in _object(raw, path, "'features'").items():
        ranges = _object(value, path, f"feature {name!r}")
        features[name] = SupportedVersionRange(_int(ranges, "min_version", path), _int(ranges, "max_version", path))
    return features


# --- /brokers/topics/<topic> ---------------------------------------------------------

TOPIC_ASSIGNMENT_VERSIONS = (1, 2, 3)


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: partition -> replicas; during a reassignment replicas = target then original.

    `adding`/`removing` hold only partitions with non-empty lists (v2+); `topic_id` is v3 (2.8).
    """

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: str | None = None


def new_topic_id(rng: random.Random | None = None) -> str:
    """A topic id as 2.8 writes it in `/brokers/topics/<t>` (KIP-516, `Uuid.randomUuid().toString`): 16 random
    bytes in URL-safe base64 without padding, never the all-zero id (Uuid.ZERO_UUID means "no id")."""
    source = rng if rng is not None else random.SystemRandom()
    while True:
        raw = source.getrandbits(128).to_bytes(16, "big")
        if any(raw):
            return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def topic_id_uuid(topic_id: str | None) -> uuid.UUID | None:
    """The 16 bytes a topic id stands for, as the Kafka protocol carries them; None if absent or malformed."""
    if not topic_id or len(topic_id) != 22:
        return None
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))
    except (binascii.Error, ValueError):
        return None


def topic_id_string(topic_id: uuid.UUID) -> str:
    """The protocol's 16 bytes as the znode writes them (Uuid.toString)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def _partition_map(assignment: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): list(assignment[p]) for p in sorted(assignment)}


def encode_topic(assignment: TopicAssignment, version: int = 3) -> bytes:
    """TopicZNode.encode. v1 (0.8-2.3) drops adding/removing; v3 (2.8) adds topic_id when known."""
    partitions = _partition_map(assignment.partitions)
    if version == 1:
        if assignment.adding or assignment.removing:
            raise ValueError("topic znode version 1 cannot carry adding/removing replicas")
        return _dumps({"version": 1, "partitions": partitions})
    adding = _partition_map({p: r for p, r in assignment.adding.items() if r})
    removing = _partition_map({p: r for p, r in assignment.removing.items() if r})
    if version == 2:  # K24: a four-key Scala Map keeps insertion order
        return _dumps(
            {"version": 2, "partitions": partitions, "adding_replicas": adding, "removing_replicas": removing}
        )
    if version == 3:  # K28: a mutable.HashMap; this is its (Scala 2.12) iteration order
        out: dict[str, Any] = {"removing_replicas": removing, "partitions": partitions}
        if assignment.topic_id is not None:
            out["topic_id"] = assignment.topic_id
        out["adding_replicas"] = adding
        out["version"] = 3
        return _dumps(out)
    raise ValueError(f"unsupported topic znode version {version}")


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    """TopicZNode.decode. Missing `partitions` reads as no partitions, as in Kafka; v1 has no adding/removing."""
    path = topic_path(topic)
    obj = _object(_loads(data, path), path)
    _version(obj, path, TOPIC_ASSIGNMENT_VERSIONS)
    partitions = _decode_partition_map(obj.get("partitions"), path, "partitions")
    adding = _decode_partition_map(obj.get("adding_replicas"), path, "adding_replicas")
    removing = _decode_partition_map(obj.get("removing_replicas"), path, "removing_replicas")
    topic_id = obj.get("topic_id")
    if topic_id is not None and not isinstance(topic_id, str):
        raise ZnodeDataError(path, f"'topic_id' is {_describe(topic_id)}, expected a string")
    return TopicAssignment(topic, partitions, adding, removing, topic_id)


def _decode_partition_map(raw: Any, path: str, key: str) -> dict[int, tuple[int, ...]]:
    if raw is None:
        return {}
    out: dict[int, tuple[int, ...]] = {}
    for p, replicas in _object(raw, path, repr(key)).items():
        out[_partition_id(p, path)] = _int_list(replicas, path, f"{key}[{p}]")
    return dict(sorted(out.items()))


# --- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """LeaderIsrAndControllerEpoch as stored; the znode's stat.version is the zkVersion for conditional writes.

    `controller_epoch` is the epoch of the controller that made the leadership decision.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    # KIP-966's eligible leader replicas (broker/controller/election.py). Written only when there are
    # some, under a key Kafka's own reader ignores, so the znode stays readable by Kafka tools.
    eligible_leader_replicas: tuple[int, ...] = ()


def encode_partition_state(state: PartitionState) -> bytes:
    payload: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.eligible_leader_replicas:
        payload["eligible_leader_replicas"] = list(state.eligible_leader_replicas)
    return _dumps(payload)


def decode_partition_state(topic: str, partition: int, data: bytes | None) -> PartitionState:
    """TopicPartitionStateZNode.decode; version 1 in every release, and Kafka does not check it."""
    path = partition_state_path(topic, partition)
    obj = _object(_loads(data, path), path)
    return PartitionState(
        leader=_int(obj, "leader", path),
        leader_epoch=_int(obj, "leader_epoch", path),
        isr=_int_list(obj.get("isr"), path, "'isr'"),
        controller_epoch=_int(obj, "controller_epoch", path),
        eligible_leader_replicas=_int_list(obj.get("eligible_leader_replicas", []), path, "'eligible_leader_replicas'"),
    )


# --- /admin/* and /isr_change_notification -------------------------------------------

DELETE_TOPIC_DATA = b""  # /admin/delete_topics/<t> carries no data


def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """`{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}` (ReassignPartitionsZNode)."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in reassignment.items()
    ]
    return _dumps({"version": 1, "partitions": partitions})


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    """In the file's order; a partition listed twice keeps its last entry, as Kafka's `toMap` does."""
    path = REASSIGN_PARTITIONS_PATH
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in _partition_entries(data, path):
        tp = _topic_partition(entry, path)
        out[tp] = _int_list(entry.get("replicas"), path, f"replicas of {tp.topic}-{tp.partition}")
    return out


def _partition_entries(data: bytes | None, path: str) -> list[dict[str, Any]]:
    obj = _object(_loads(data, path), path)
    _version(obj, path, (1,))
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise ZnodeDataError(path, f"'partitions' is {_describe(entries)}, expected a list")
    return [_object(e, path, "a partitions entry") for e in entries]


def _topic_partition(entry: Mapping[str, Any], path: str) -> TopicPartition:
    return TopicPartition(_str(entry, "topic", path), _int(entry, "partition", path))


def _encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    """`{"version":1,"partitions":[{"topic":..,"partition":..}]}` (PreferredReplicaElectionZNode)."""
    return _encode_partition_list(partitions)


def decode_preferred_replica_election(data: bytes | None) -> tuple[TopicPartition, ...]:
    """In the file's order, duplicates kept: the tool reports them, the controller takes the set."""
    path = PREFERRED_REPLICA_ELECTION_PATH
    return tuple(_topic_partition(e, path) for e in _partition_entries(data, path))


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    """`{"version":1,"partitions":[...]}` under `/isr_change_notification/isr_change_<seq>`."""
    return _encode_partition_list(partitions)


def decode_isr_change(data: bytes | None, path: str = ISR_CHANGE_NOTIFICATION_PATH) -> frozenset[TopicPartition]:
    return frozenset(_topic_partition(e, path) for e in _partition_entries(data, path))


def encode_log_dir_event(broker_id: int) -> bytes:
    """`{"version":1,"broker":<id>,"event":1}`; 1 is LogDirFailure, the only event."""
    return _dumps({"version": 1, "broker": broker_id, "event": 1})


def decode_log_dir_event(data: bytes | None, path: str = LOG_DIR_EVENT_NOTIFICATION_PATH) -> int:
    return _int(_object(_loads(data, path), path), "broker", path)


# --- /config ---------------------------------------------------------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    """`{"version":1,"config":{"retention.ms":"1000"}}`; values are strings (ConfigEntityZNode)."""
    for key, value in config.items():
        if not isinstance(value, str):
            raise ValueError(f"config value of {key} must be a string, got {value!r}")
    return _dumps({"version": 1, "config": dict(config)})


def decode_config(data: bytes | None, path: str = CONFIG_PATH) -> dict[str, str]:
    """ConfigEntityZNode.decode: no data, or no `config` object, is an empty config."""
    if data is None or len(data) == 0:
        return {}
    obj = _loads(data, path)
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict):
        return {}
    if not all(isinstance(v, str) for v in config.values()):
        raise ZnodeDataError(path, "config values must be strings")
    return dict(config)


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A `/config/changes/config_change_<seq>` notification: which entity's config changed."""

    entity_type: str
    entity_name: str

    @property
    def entity_path(self) -> str:
        return f"{self.entity_type}/{self.entity_name}"


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    """v2: `{"version":2,"entity_path":"topics/foo"}` (ConfigEntityChangeNotificationSequenceZNode)."""
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes | None, path: str = CONFIG_CHANGES_PATH) -> ConfigChange:
    """v2 `entity_path`, v1 `entity_type`/`entity_name`, and 0.8.2's bare JSON string (a topic name)."""
    value = _loads(data, path)
    if isinstance(value, str):
        return ConfigChange(CONFIG_TYPE_TOPIC, value)
    obj = _object(value, path)
    version = _version(obj, path, (1, 2))
    if version == 1:
        entity_type = _str(obj, "entity_type", path)
        if entity_type not in CONFIG_TYPES:
            raise ZnodeDataError(path, f"unknown entity_type {entity_type!r}")
        return ConfigChange(entity_type, _str(obj, "entity_name", path))
    entity_type, sep, entity_name = _str(obj, "entity_path", path).partition("/")
    if not sep or not entity_name:
        raise ZnodeDataError(path, f"entity_path {obj['entity_path']!r} is not <type>/<name>")
    return ConfigChange(entity_type, entity_name)


# --- /cluster/id -----------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """`{"version":"1","id":"<id>"}`: the version is a string here."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _str(_object(_loads(data, CLUSTER_ID_PATH), CLUSTER_ID_PATH), "id", CLUSTER_ID_PATH)


# --- topic names (Topic.java, 2.x) --------------------------------------------------------

_TOPIC_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(topic: str) -> None:
    """Raise InvalidTopicError with Kafka's message; the '.'/'_' collision warning is the caller's."""
    if not topic:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(topic) > TOPIC_NAME_MAX_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_MAX_LENGTH} characters, topic name: {topic}"
        )
    if _TOPIC_LEGAL.fullmatch(topic) is None:
        raise InvalidTopicError(
            f'Topic name "{topic}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def is_valid_topic_name(topic: str) -> bool:
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return False
    return True


def is_internal_topic(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def has_collision_chars(topic: str) -> bool:
    """Metric names map '.' to '_': such topics may collide (Topic.hasCollisionChars)."""
    return "_" in topic or "." in topic


def unify_collision_chars(topic: str) -> str:
    return topic.replace(".", "_")


def topics_collide(topic_a: str, topic_b: str) -> bool:
    return unify_collision_chars(topic_a) == unify_collision_chars(topic_b)
