"""The source and sink options, named as Spark's Kafka connector names them, parsed once into frozen configs.

Spark hands a Python data source its options as a case-insensitive dict of
strings. Every option Spark's Kafka source documents for what we implement is
accepted with and without the `kafka.` prefix where Kafka's own client
property is meant (`kafka.bootstrap.servers` or `bootstrap.servers`);
anything else, and any contradiction (two subscription kinds, `latest` as a
batch start), raises `OptionError` whose message names the option
(docs/research/spark.md §2.1). Kafka's forbidden consumer properties get Kafka's
explanation. Kafka's security properties (`kafka.security.protocol`,
`kafka.ssl.*`, `kafka.sasl.*`) pass through to the client as given
(client.kafka.security_config), which refuses a name Kafka does not know.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from client import TopicPartition
from client.kafka.client_errors import KafkaConfigurationError
from client.kafka.cluster import parse_bootstrap_servers
from client.kafka.security_config import UnknownSecurityPropertyError, client_security, is_security_name
from runtime.tls import TlsConfigError
from spark_connector.offsets import (
    EARLIEST,
    LATEST,
    OffsetsJsonError,
    PartitionOffsets,
    parse_assign_json,
    parse_offsets_json,
)

# Named limits and defaults.
FETCH_TIMEOUT_MS_DEFAULT = 120_000  # Spark's kafkaConsumer.pollTimeoutMs
# Per Fetch: ~70k 100-byte records. The next Fetch is in flight while one is decoded, so smaller fetches overlap
# transfer and decoding (bench/spark_bench.py: 8 MiB read 1.3-1.6M rows/s without Spark, 32 MiB 0.9-1.1M).
FETCH_MAX_BYTES_DEFAULT = 8 * 1024 * 1024
OFFSET_LOOKUP_RETRIES_DEFAULT = 3  # fetchOffset.numRetries
OFFSET_LOOKUP_RETRY_INTERVAL_MS_DEFAULT = 10  # fetchOffset.retryIntervalMs

_INSTRUCTIONS = {
    "group.id": "the source never joins a consumer group (its progress lives in the checkpoint); remove it",
    "auto.offset.reset": "set the source option startingOffsets instead",
    "key.deserializer": "keys are always read as bytes; cast or decode them with DataFrame operations",
    "value.deserializer": "values are always read as bytes; cast or decode them with DataFrame operations",
    "enable.auto.commit": "the source does not commit offsets to Kafka; progress lives in the checkpoint",
    "interceptor.classes": "consumer interceptors are not supported",
    "key.serializer": "keys are always written as bytes (or strings); serialise them with DataFrame operations",
    "value.serializer": "values are always written as bytes (or strings); serialise them with DataFrame operations",
}


# Options Spark itself sets or owns (a streaming sink receives its checkpointLocation among the options).
_ENGINE_OPTIONS = frozenset({"checkpointlocation", "path", "queryname"})


class OptionError(ValueError):
    """A missing, unknown, malformed or contradictory option; the message names it."""


class StartKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSETS = "offsets"  # per-partition JSON, -2/-1 allowed
    TIMESTAMP = "timestamp"  # one epoch-ms timestamp for every partition
    TIMESTAMPS = "timestamps"  # per-partition epoch-ms JSON


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    kind: StartKind
    offsets: PartitionOffsets = field(default_factory=dict)  # OFFSETS: offsets; TIMESTAMPS: timestamps
    timestamp_ms: int = -1  # TIMESTAMP


@dataclass(frozen=True, slots=True)
class Subscription:
    """Exactly one of: a topic list, a regex over topic names, fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    @property
    def option(self) -> str:
        return "subscribePattern" if self.pattern is not None else "assign" if self.partitions else "subscribe"

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        if self.partitions:
            return any(tp.topic == topic for tp in self.partitions)
        return topic in self.topics


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec | None  # None: not given (streaming starts at latest, batch at earliest)
    ending: OffsetSpec
    starting_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    fetch_timeout_ms: int = FETCH_TIMEOUT_MS_DEFAULT
    fetch_max_bytes: int = FETCH_MAX_BYTES_DEFAULT
    offset_lookup_retries: int = OFFSET_LOOKUP_RETRIES_DEFAULT
    offset_lookup_retry_interval_ms: int = OFFSET_LOOKUP_RETRY_INTERVAL_MS_DEFAULT
    given: frozenset[str] = frozenset()  # which options the user set (lower case), for mode-specific checks
    # Kafka's security properties as given (without `kafka.`), sorted: the clients' TLS and login.
    client_properties: tuple[
        tuple[str, str], ...
    ] = ()  # which options the user set (lower case), for mode-specific checks


@dataclass(frozen=True, slots=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    include_headers: bool = False
    acks: str = "all"
    linger_ms: int = 5
    batch_size: int = 16384
    compression_type: str | None = None
    client_properties: tuple[tuple[str, str], ...] = ()  # as SourceOptions'


# Lower-case option -> the spelling used in messages. Kafka client properties come with and without `kafka.`.
_SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "maxRecordsPerPartition",
        "failOnDataLoss",
        "includeHeaders",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "groupIdPrefix",
    )
}
_SOURCE_CLIENT_PROPERTIES = {"bootstrap.servers", "max.partition.fetch.bytes"}
_SINK_OPTIONS = {name.lower(): name for name in ("topic", "includeHeaders")}
_SINK_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")  # Kafka's producer compression.type
_SINK_CLIENT_PROPERTIES = {"bootstrap.servers", "acks", "linger.ms", "batch.size", "compression.type"}


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validates everything that does not depend on batch versus streaming; OptionError names the culprit."""
    opts, client = _split(options, _SOURCE_OPTIONS, _SOURCE_CLIENT_PROPERTIES)
    given = frozenset(opts) | frozenset(f"kafka.{k}" for k in client)
    subscription = _subscription(opts)
    starting = _starting(opts, subscription)
    ending = _offset_spec(opts.get("endingoffsets"), "endingOffsets", subscription) or OffsetSpec(StartKind.LATEST)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")
    return SourceOptions(
        bootstrap_servers=_bootstrap(client),
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
        min_partitions=_positive_int(opts, "minpartitions"),
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        fetch_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms") or FETCH_TIMEOUT_MS_DEFAULT,
        fetch_max_bytes=_positive_int(client, "max.partition.fetch.bytes", "kafka.max.partition.fetch.bytes")
        or FETCH_MAX_BYTES_DEFAULT,
        offset_lookup_retries=_int_at_least(opts, "fetchoffset.numretries", 0, OFFSET_LOOKUP_RETRIES_DEFAULT),
        offset_lookup_retry_interval_ms=_int_at_least(
            opts, "fetchoffset.retryintervalms", 0, OFFSET_LOOKUP_RETRY_INTERVAL_MS_DEFAULT
        ),
        given=given,
        client_properties=_security(client),
    )


def check_for_batch(options: SourceOptions) -> None:
    """Kafka's batch-query rules: no `latest` start, no `earliest` end, no -1 start or -2 end in JSON."""
    if options.starting is not None and options.starting.kind is StartKind.LATEST:
        raise OptionError("option startingOffsets: latest is not allowed for a batch query (use earliest or JSON)")
    if (
        options.starting is not None
        and options.starting.kind is StartKind.OFFSETS
        and LATEST in options.starting.offsets.values()
    ):
        raise OptionError("option startingOffsets: -1 (latest) is not allowed for a batch query")
    if options.ending.kind is StartKind.EARLIEST:
        raise OptionError("option endingOffsets: earliest is not allowed (use latest or JSON)")
    if options.ending.kind is StartKind.OFFSETS and EARLIEST in options.ending.offsets.values():
        raise OptionError("option endingOffsets: -2 (earliest) is not allowed")
    for name in ("maxoffsetspertrigger",):
        if name in options.given:
            raise OptionError(f"option {_SOURCE_OPTIONS[name]} is for streaming queries only")


def check_for_stream(options: SourceOptions) -> None:
    if "endingoffsets" in options.given:
        raise OptionError("option endingOffsets is not valid in streaming queries")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts, client = _split(options, _SINK_OPTIONS, _SINK_CLIENT_PROPERTIES)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic is empty")
    acks = client.get("acks", "all").strip().lower()
    if acks not in ("all", "-1", "0", "1"):
        raise OptionError(f"option kafka.acks must be all, -1, 0 or 1, got {acks!r}")
    compression = client.get("compression.type", "none").strip().lower()
    if compression not in _SINK_COMPRESSION:
        raise OptionError(
            f"option kafka.compression.type must be one of {', '.join(_SINK_COMPRESSION)}, got {compression!r}"
        )
    return SinkOptions(
        bootstrap_servers=_bootstrap(client),
        topic=None if topic is None else topic.strip(),
        include_headers=_bool(opts, "includeheaders", False),
        acks=acks,
        linger_ms=_int_at_least(client, "linger.ms", 0, 5),
        batch_size=_positive_int(client, "batch.size", "kafka.batch.size") or 16384,
        compression_type=None if compression == "none" else compression,
        client_properties=_security(client),
    )


# --------------------------------------------------------------------------- helpers


def _split(
    options: Mapping[str, str], known: Mapping[str, str], client_properties: set[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """(source options, Kafka client properties without `kafka.`), both keyed in lower case."""
    opts: dict[str, str] = {}
    client: dict[str, str] = {}
    for raw_key, value in options.items():
        key = str(raw_key).strip().lower()
        bare = key.removeprefix("kafka.")
        if key in _ENGINE_OPTIONS:
            continue
        if key in known:
            opts[key] = str(value)
        elif bare in client_properties or is_security_name(bare):
            if bare in client and client[bare] != str(value):
                raise OptionError(f"options {bare} and kafka.{bare} are both set, to different values")
            client[bare] = str(value)
        elif bare in _INSTRUCTIONS:
            raise OptionError(f"option {raw_key} is not supported: {_INSTRUCTIONS[bare]}")
        else:
            names = sorted([*known.values(), *(f"kafka.{p}" for p in client_properties)])
            raise OptionError(f"unknown option {raw_key!r}; known options: {', '.join(names)}")
    return opts, client


def _security(client: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The security properties, checked now (a bad file or name fails the query at once, naming the option)."""
    props = {key: value for key, value in client.items() if is_security_name(key)}
    try:
        client_security(props)
    except UnknownSecurityPropertyError as exc:
        raise OptionError(f"unknown option 'kafka.{exc.name}': not a Kafka client security property") from None
    except TlsConfigError as exc:
        raise OptionError(f"option kafka.{exc}") from None  # the message starts with the property's name
    return tuple(sorted(props.items()))


def _bootstrap(client: Mapping[str, str]) -> str:
    servers = client.get("bootstrap.servers")
    if servers is None or not servers.strip():
        raise OptionError("option kafka.bootstrap.servers is required (host:port,host:port)")
    try:
        return ",".join(parse_bootstrap_servers(servers))
    except KafkaConfigurationError as exc:
        raise OptionError(f"option kafka.bootstrap.servers: {exc}") from None


def _subscription(opts: Mapping[str, str]) -> Subscription:
    chosen = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(chosen) != 1:
        have = ", ".join(_SOURCE_OPTIONS[c] for c in chosen) or "none"
        raise OptionError(f"exactly one of the options subscribe, subscribePattern, assign is required (given: {have})")
    kind = chosen[0]
    value = opts[kind]
    if kind == "subscribe":
        topics = tuple(sorted({t.strip() for t in value.split(",") if t.strip()}))
        if not topics:
            raise OptionError(f"option subscribe: no topic in {value!r} (a comma-separated list of topics)")
        return Subscription(topics=topics)
    if kind == "subscribepattern":
        if not value.strip():
            raise OptionError("option subscribePattern is empty")
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"option subscribePattern: bad regular expression {value!r}: {exc}") from None
        return Subscription(pattern=value)
    try:
        return Subscription(partitions=parse_assign_json(value))
    except OffsetsJsonError as exc:
        raise OptionError(str(exc)) from None


def _starting(opts: Mapping[str, str], subscription: Subscription) -> OffsetSpec | None:
    # Spark's precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets.
    if "startingtimestamp" in opts:
        value = opts["startingtimestamp"].strip()
        if not value.lstrip("-").isdigit() or int(value) < 0:
            raise OptionError(f"option startingTimestamp must be epoch milliseconds >= 0, got {value!r}")
        return OffsetSpec(StartKind.TIMESTAMP, timestamp_ms=int(value))
    if "startingoffsetsbytimestamp" in opts:
        try:
            stamps = parse_offsets_json(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
        except OffsetsJsonError as exc:
            raise OptionError(str(exc)) from None
        if any(ts < 0 for ts in stamps.values()):
            raise OptionError("option startingOffsetsByTimestamp: timestamps must be epoch milliseconds >= 0")
        _check_topics(stamps, subscription, "startingOffsetsByTimestamp")
        return OffsetSpec(StartKind.TIMESTAMPS, offsets=stamps)
    return _offset_spec(opts.get("startingoffsets"), "startingOffsets", subscription)


def _offset_spec(value: str | None, option: str, subscription: Subscription) -> OffsetSpec | None:
    """`earliest`, `latest` or JSON; None when not given."""
    if value is None:
        return None
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(StartKind(text.lower()))
    try:
        offsets = parse_offsets_json(text, option)
    except OffsetsJsonError as exc:
        raise OptionError(str(exc)) from None
    bad = [f"{tp}={o}" for tp, o in offsets.items() if o < EARLIEST]
    if bad:
        raise OptionError(f"option {option}: offsets must be >= 0, or -2 (earliest) or -1 (latest): {', '.join(bad)}")
    _check_topics(offsets, subscription, option)
    return OffsetSpec(StartKind.OFFSETS, offsets=offsets)


def _check_topics(offsets: PartitionOffsets, subscription: Subscription, option: str) -> None:
    foreign = sorted({str(tp) for tp in offsets if not subscription.matches(tp.topic)})
    if subscription.partitions:
        foreign = sorted({str(tp) for tp in offsets if tp not in subscription.partitions})
    if foreign:
        raise OptionError(f"option {option} names partitions outside {subscription.option}: {', '.join(foreign)}")


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in opts:
        return default
    value = opts[key].strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {_SOURCE_OPTIONS.get(key, key)} must be true or false, got {opts[key]!r}")
    return value == "true"


def _positive_int(opts: Mapping[str, str], key: str, display: str | None = None) -> int | None:
    if key not in opts:
        return None
    value = opts[key].strip()
    if not value.isdigit() or int(value) < 1:
        name = display or _SOURCE_OPTIONS.get(key, key)
        raise OptionError(f"option {name} must be a positive integer, got {opts[key]!r}")
    return int(value)


def _int_at_least(opts: Mapping[str, str], key: str, minimum: int, default: int) -> int:
    if key not in opts:
        return default
    value = opts[key].strip()
    if not value.lstrip("-").isdigit() or int(value) < minimum:
        name = _SOURCE_OPTIONS.get(key, key)
        raise OptionError(f"option {name} must be an integer >= {minimum}, got {opts[key]!r}")
    return int(value)
