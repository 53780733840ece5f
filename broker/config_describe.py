"""Describing configs as Kafka 2.8's `ZkAdminManager.describeConfigs` does: entries, sources and synonyms.

Pure functions over plain maps, shared by the Kafka DescribeConfigs / CreateTopics (v5+) answers and the
gRPC DescribeConfigs the SDK calls; the znode reads are broker/config_admin.py's.

A topic lists every config of 2.8's `LogConfig` with its effective value. Its source and synonyms follow
`createTopicConfigEntry`: the topic's own override (TOPIC_CONFIG, which the Java AdminClient names
DYNAMIC_TOPIC_CONFIG) first, then the broker synonyms (`LogConfig.TopicConfigSynonyms`, expanded by
`brokerSynonyms`, e.g. `log.retention.ms`, `log.retention.minutes`, `log.retention.hours`), each found in
the dynamic broker config, the dynamic cluster default, the static server.properties and the static
defaults, in that order. As `configSynonyms` does, synonyms before the first one of the topic config's
own broker name are dropped: `retention.ms` without `log.retention.ms` anywhere reports DEFAULT_CONFIG with
no synonyms even though `log.retention.hours` supplies its value.

A broker lists its properties (broker/config.py) and its dynamic configs (`/config/brokers/<id>`), each
read-only unless 2.8 can change it dynamically (`DynamicBrokerConfig.AllDynamicConfigs`); the cluster
default entity (an empty name) lists `/config/brokers/<default>` only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.broker_config_docs import broker_config_doc
from broker.config import PROPERTIES, BrokerConfig

_LONG_MAX = str(2**63 - 1)


class ConfigSource(enum.IntEnum):
    """DescribeConfigsResponse.ConfigSource (KIP-226)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1  # the Java AdminClient's DYNAMIC_TOPIC_CONFIG
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(enum.IntEnum):
    """DescribeConfigsResponse.ConfigType (KIP-569, DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ResourceType(enum.IntEnum):
    """ConfigResource.Type ids on the wire."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """One config of 2.8's LogConfig: its type, its broker synonym and a line of its documentation."""

    config_type: ConfigType
    broker_name: str
    doc: str


T = ConfigType
# LogConfig.configDef and LogConfig.TopicConfigSynonyms (Kafka 2.8); the docs are the first sentence of TopicConfig's.
TOPIC_CONFIG_KEYS: dict[str, TopicConfigKey] = {
    "cleanup.policy": TopicConfigKey(
        T.LIST,
        "log.cleanup.policy",
        'A string that is either "delete" or "compact" or both.',
    ),
    "compression.type": TopicConfigKey(
        T.STRING,
        "compression.type",
        "Specify the final compression type for a given topic.",
    ),
    "delete.retention.ms": TopicConfigKey(
        T.LONG,
        "log.cleaner.delete.retention.ms",
        "The amount of time to retain delete tombstone markers for log compacted topics.",
    ),
    "file.delete.delay.ms": TopicConfigKey(
        T.LONG,
        "log.segment.delete.delay.ms",
        "The time to wait before deleting a file from the filesystem",
    ),
    "flush.messages": TopicConfigKey(
        T.LONG,
        "log.flush.interval.messages",
        "This setting allows specifying an interval at which we will force an fsync of data written to the log.",
    ),
    "flush.ms": TopicConfigKey(
        T.LONG,
        "log.flush.interval.ms",
        "This setting allows specifying a time interval at which we will force an fsync of data written to the log.",
    ),
    "follower.replication.throttled.replicas": TopicConfigKey(
        T.LIST,
        "",
        "A list of replicas for which log replication should be throttled on the follower side.",
    ),
    "index.interval.bytes": TopicConfigKey(
        T.INT,
        "log.index.interval.bytes",
        "This setting controls how frequently Kafka adds an index entry to its offset index.",
    ),
    "leader.replication.throttled.replicas": TopicConfigKey(
        T.LIST,
        "",
        "A list of replicas for which log replication should be throttled on the leader side.",
    ),
    "max.compaction.lag.ms": TopicConfigKey(
        T.LONG,
        "log.cleaner.max.compaction.lag.ms",
        "The maximum time a message will remain ineligible for compaction in the log.",
    ),
    "max.message.bytes": TopicConfigKey(
        T.INT,
        "message.max.bytes",
        "The largest record batch size allowed by Kafka (after compression if compression is enabled).",
    ),
    "message.downconversion.enable": TopicConfigKey(
        T.BOOLEAN,
        "log.message.downconversion.enable",
        "This configuration controls whether down-conversion of message formats is enabled to satisfy "
        "consume requests.",
    ),
    "message.format.version": TopicConfigKey(
        T.STRING,
        "log.message.format.version",
        "Specify the message format version the broker will use to append messages to the logs.",
    ),
    "message.timestamp.difference.max.ms": TopicConfigKey(
        T.LONG,
        "log.message.timestamp.difference.max.ms",
        "The maximum difference allowed between the timestamp when a broker receives a message and the "
        "timestamp specified in the message.",
    ),
    "message.timestamp.type": TopicConfigKey(
        T.STRING,
        "log.message.timestamp.type",
        "Define whether the timestamp in the message is message create time or log append time.",
    ),
    "min.cleanable.dirty.ratio": TopicConfigKey(
        T.DOUBLE,
        "log.cleaner.min.cleanable.ratio",
        "This configuration controls how frequently the log compactor will attempt to clean the log "
        "(assuming log compaction is enabled).",
    ),
    "min.compaction.lag.ms": TopicConfigKey(
        T.LONG,
        "log.cleaner.min.compaction.lag.ms",
        "The minimum time a message will remain uncompacted in the log.",
    ),
    "min.insync.replicas": TopicConfigKey(
        T.INT,
        "min.insync.replicas",
        'When a producer sets acks to "all" (or "-1"), this configuration specifies the minimum number of'
        " replicas that must acknowledge a write for the write to be considered successful.",
    ),
    "preallocate": TopicConfigKey(
        T.BOOLEAN,
        "log.preallocate",
        "True if we should preallocate the file on disk when creating a new log segment.",
    ),
    "retention.bytes": TopicConfigKey(
        T.LONG,
        "log.retention.bytes",
        "This configuration controls the maximum size a partition (which consists of log segments) can "
        'grow to before we will discard old log segments to free up space if we are using the "delete" '
        "retention policy.",
    ),
    "retention.ms": TopicConfigKey(
        T.LONG,
        "log.retention.ms",
        "This configuration controls the maximum time we will retain a log before we will discard old log"
        ' segments to free up space if we are using the "delete" retention policy.',
    ),
    "segment.bytes": TopicConfigKey(
        T.INT,
        "log.segment.bytes",
        "This configuration controls the segment file size for the log.",
    ),
    "segment.index.bytes": TopicConfigKey(
        T.INT,
        "log.index.size.max.bytes",
        "This configuration controls the size of the index that maps offsets to file positions.",
    ),
    "segment.jitter.ms": TopicConfigKey(
        T.LONG,
        "log.roll.jitter.ms",
        "The maximum random jitter subtracted from the scheduled segment roll time to avoid thundering "
        "herds of segment rolling",
    ),
    "segment.ms": TopicConfigKey(
        T.LONG,
        "log.roll.ms",
        "This configuration controls the period of time after which Kafka will force the log to roll even"
        " if the segment file isn't full to ensure that retention can delete or compact old data.",
    ),
    "unclean.leader.election.enable": TopicConfigKey(
        T.BOOLEAN,
        "unclean.leader.election.enable",
        "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last "
        "resort, even though doing so may result in data loss.",
    ),
}
del T

# KafkaConfig's static defaults (configDef.defaultValues, 2.8) of the broker names topic configs fall back on;
# a name whose default is null (log.roll.ms, log.retention.ms, ...) is absent, as in Kafka.
KAFKA_BROKER_DEFAULTS: dict[str, str] = {
    "log.cleanup.policy": "delete",
    "compression.type": "producer",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.segment.delete.delay.ms": "60000",
    "log.flush.interval.messages": _LONG_MAX,
    "log.flush.scheduler.interval.ms": _LONG_MAX,
    "log.index.interval.bytes": "4096",
    "log.cleaner.max.compaction.lag.ms": _LONG_MAX,
    "message.max.bytes": "1048588",
    "log.message.downconversion.enable": "true",
    "log.message.format.version": "2.8-IV1",
    "log.message.timestamp.difference.max.ms": _LONG_MAX,
    "log.message.timestamp.type": "CreateTime",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "log.preallocate": "false",
    "log.retention.bytes": "-1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.index.size.max.bytes": "10485760",
    "log.roll.jitter.hours": "0",
    "log.roll.hours": "168",
    "unclean.leader.election.enable": "false",
}

# KafkaConfig's synonyms of a broker name, highest priority first (DynamicBrokerConfig.brokerSynonyms).
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
}
# The unit, in ms, of each time synonym, to turn log.retention.hours=168 into retention.ms=604800000.
_SYNONYM_UNIT_MS = {"log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000}
_SYNONYM_UNIT_MS |= {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000}

# The broker configs this broker applies dynamically (broker/replication_throttle.py): DynamicConfig.Broker's.
DYNAMIC_BROKER_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate"})
# Of the properties this broker knows, those 2.8 can change without a restart (DynamicBrokerConfig.AllDynamicConfigs):
# they describe as read_only=false, as Kafka's do, though AlterConfigs refuses them here (see config_admin.py).
_KAFKA_DYNAMIC_PROPERTIES = frozenset(
    {
        "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.index.interval.bytes",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.ms", "log.retention.hours",
        "log.retention.bytes", "log.cleanup.policy", "log.cleaner.delete.retention.ms",
        "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms", "log.cleaner.backoff.ms",
        "message.max.bytes", "min.insync.replicas", "unclean.leader.election.enable", "num.replica.fetchers",
    }
)  # fmt: skip


def broker_synonyms(name: str) -> tuple[str, ...]:
    return _BROKER_SYNONYMS.get(name, (name,))


@dataclass(frozen=True, slots=True)
class BrokerConfigLayers:
    """Where a broker config can come from, highest priority first (DynamicBrokerConfig's layers)."""

    dynamic_broker: Mapping[str, str]  # /config/brokers/<id>
    dynamic_default: Mapping[str, str]  # /config/brokers/<default>
    static: Mapping[str, str]  # server.properties and --override, as given
    defaults: Mapping[str, str] = field(default_factory=lambda: KAFKA_BROKER_DEFAULTS)

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """configSynonyms(name, brokerSynonyms(name)): every layer's value of every synonym, in priority order,
        from the first entry that is `name` itself."""
        found = []
        layers = (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            (self.defaults, ConfigSource.DEFAULT_CONFIG),
        )
        for layer, source in layers:
            for synonym in broker_synonyms(name):
                if synonym in layer:
                    found.append(ConfigSynonym(synonym, layer[synonym], source))
        while found and found[0].name != name:
            found.pop(0)
        return found

    def effective(self, name: str) -> str | None:
        """The value KafkaConfig resolves for `name`: the highest-priority synonym, in `name`'s unit."""
        for synonym in broker_synonyms(name):
            for layer in (self.dynamic_broker, self.dynamic_default, self.static, self.defaults):
                if synonym in layer:
                    return _in_unit(layer[synonym], _SYNONYM_UNIT_MS.get(synonym, 1))
        return None


def _in_unit(text: str, unit_ms: int) -> str:
    return text if unit_ms == 1 else str(int(text.strip()) * unit_ms)


def canonical_value(text: str | None, config_type: ConfigType) -> str | None:
    """ConfigDef.convertToString of the parsed value: trimmed numbers, lowercase booleans, comma-joined lists."""
    if text is None:
        return None
    if config_type == ConfigType.LIST:
        return ",".join(part.strip() for part in text.split(",") if part.strip())
    if config_type == ConfigType.BOOLEAN:
        return text.strip().lower()
    if config_type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        return str(int(text.strip()))
    if config_type == ConfigType.DOUBLE:
        return repr(float(text.strip()))
    return text.strip()


def topic_config_value(name: str, overrides: Mapping[str, str], layers: BrokerConfigLayers) -> str | None:
    """The effective value of topic config `name`: the override, else the broker's synonym, else LogConfig's default."""
    key = TOPIC_CONFIG_KEYS[name]
    raw = overrides.get(name)
    if raw is None:
        raw = layers.effective(key.broker_name) if key.broker_name else ""
    try:
        return canonical_value(raw, key.config_type)
    except ValueError:  # a hand-edited znode: show it as written rather than fail the whole describe
        return raw


def topic_config_entry(
    name: str, overrides: Mapping[str, str], layers: BrokerConfigLayers, *, synonyms: bool, documentation: bool
) -> ConfigEntry:
    """ZkAdminManager.createTopicConfigEntry for one LogConfig name."""
    key = TOPIC_CONFIG_KEYS[name]
    value = topic_config_value(name, overrides, layers)
    found = layers.synonyms(key.broker_name) if key.broker_name else []
    if name in overrides:
        found.insert(0, ConfigSynonym(name, value, ConfigSource.TOPIC_CONFIG))
    return ConfigEntry(
        name=name,
        value=value,
        source=found[0].source if found else ConfigSource.DEFAULT_CONFIG,
        read_only=False,
        is_sensitive=False,
        config_type=key.config_type,
        synonyms=tuple(found) if synonyms else (),
        documentation=key.doc if documentation else None,
    )


def describe_topic_configs(
    overrides: Mapping[str, str],
    layers: BrokerConfigLayers,
    keys: Iterable[str] | None = None,
    *,
    synonyms: bool = False,
    documentation: bool = False,
) -> list[ConfigEntry]:
    """Every LogConfig entry of a topic (or those named in `keys`; unknown names are left out, as Kafka does)."""
    names = sorted(TOPIC_CONFIG_KEYS) if keys is None else [k for k in dict.fromkeys(keys) if k in TOPIC_CONFIG_KEYS]
    return [topic_config_entry(n, overrides, layers, synonyms=synonyms, documentation=documentation) for n in names]


def broker_static_values(config: BrokerConfig) -> dict[str, str | None]:
    """Each property this broker knows, as its parsed value converted back to Kafka's string form."""
    values: dict[str, str | None] = {}
    for prop in PROPERTIES:
        value = getattr(config, prop.field)
        if isinstance(value, bool):
            values[prop.name] = "true" if value else "false"
        elif isinstance(value, tuple):
            values[prop.name] = ",".join(value) if value else None
        elif value is None:
            values[prop.name] = None
        else:
            values[prop.name] = str(value)
    return values


def describe_broker_configs(
    config: BrokerConfig,
    layers: BrokerConfigLayers,
    keys: Iterable[str] | None = None,
    *,
    per_broker: bool,
    synonyms: bool = False,
    documentation: bool = False,
) -> list[ConfigEntry]:
    """ZkAdminManager.createBrokerConfigEntry for each config of a broker, or of the cluster default entity."""
    if per_broker:
        # A property this broker leaves unset (None) still has Kafka's static default where 2.8 has one.
        static = {n: v if v is not None else layers.defaults.get(n) for n, v in broker_static_values(config).items()}
        values: dict[str, str | None] = {**static, **layers.dynamic_broker}
    else:
        values = dict(layers.dynamic_default)
    wanted = sorted(values) if keys is None else [k for k in dict.fromkeys(keys) if k in values]
    entries = []
    for name in wanted:
        found = [
            s for s in layers.synonyms(name) if per_broker or s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
        dynamic = name in DYNAMIC_BROKER_CONFIGS or name in _KAFKA_DYNAMIC_PROPERTIES
        sensitive = is_sensitive_broker_config(name)
        if sensitive:  # Kafka's PASSWORD configs: described without their value, in every synonym too
            found = [ConfigSynonym(s.name, None, s.source) for s in found]
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else values[name],
                source=found[0].source if found else ConfigSource.DEFAULT_CONFIG,
                read_only=not dynamic,
                is_sensitive=sensitive,
                config_type=ConfigType.UNKNOWN if name in DYNAMIC_BROKER_CONFIGS else _broker_type(name),
                synonyms=tuple(found) if synonyms else (),
                documentation=broker_config_doc(name) if documentation else None,
            )
        )
    return entries


def is_sensitive_broker_config(name: str) -> bool:
    """Kafka's Type.PASSWORD broker configs this broker has: the JAAS config (it holds PLAIN's passwords)."""
    return name == "sasl.jaas.config" or name.endswith(".sasl.jaas.config")


def _broker_type(name: str) -> ConfigType:
    for prop in PROPERTIES:
        if prop.name == name:
            parse_name = getattr(prop.parse, "__name__", "")
            return {"_int": ConfigType.INT, "_bool": ConfigType.BOOLEAN, "float": ConfigType.DOUBLE}.get(
                parse_name, ConfigType.LIST if parse_name == "_list" else ConfigType.STRING
            )
    return ConfigType.UNKNOWN
