"""A broker's settings: Kafka's property names and defaults (2.x `KafkaConfig`), from server.properties.

    zkraft broker start --config server.properties --override broker.id=2 --override port=9093

Only properties the broker acts on are accepted; an unknown key is refused
with a one-line error that suggests the nearest known name. Values are typed
and range-checked here so that nothing later has to.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from broker.authorizer import ACL_AUTHORIZER_CLASS, AUTHORIZER_CLASSES
from broker.listener_tls import is_ssl_property, listener_tls_config
from broker.listeners import KafkaListener, ListenerConfigError, parse_listeners
from broker.sasl.settings import SaslConfigError, is_listener_sasl_property, listener_sasl_settings
from runtime.jaas import JaasError, optional_client_login
from runtime.properties import PropertiesError, read_properties_file
from runtime.tls import TlsConfigError


class BrokerConfigError(ValueError):
    """A bad broker property: one line naming it."""


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"{text!r} is not true or false")


def _int(text: str) -> int:
    return int(text.strip())


def _str(text: str) -> str:
    return text.strip()


def _list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")  # Kafka's SecurityProtocol


def _security_protocol(text: str) -> str:
    value = text.strip().upper()
    if value not in _SECURITY_PROTOCOLS:
        raise ValueError(text)
    return value


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # Kafka's order
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _compression_type(text: str) -> str:
    value = text.strip().lower()
    if value not in _COMPRESSION_TYPES:
        raise ValueError(text)
    return value


def _timestamp_type(text: str) -> str:
    value = text.strip()
    if value not in _TIMESTAMP_TYPES:
        raise ValueError(text)
    return value


@dataclass(frozen=True)
class Property:
    name: str  # Kafka's property name
    field: str  # BrokerConfig attribute
    parse: Callable[[str], Any]
    minimum: int | None = None


# (property, attribute, parser, minimum). Defaults are the dataclass defaults below.
PROPERTIES: tuple[Property, ...] = (
    Property("broker.id", "broker_id", _int, 0),
    Property("host.name", "host", _str),
    Property("port", "port", _int, 0),
    Property("broker.rack", "rack", _str),
    # Where /metrics (Prometheus's text format, the JMX exporter's Kafka names), /healthz and /readyz are
    # served (broker/metrics.py); metrics.port=0 (the default): not served.
    Property("metrics.host", "metrics_host", _str),
    Property("metrics.port", "metrics_port", _int, 0),
    # The Kafka listeners (broker/listeners.py); host.name/port above stay the broker's gRPC endpoint.
    Property("listeners", "listeners", _str),
    Property("advertised.listeners", "advertised_listeners", _str),
    Property("listener.security.protocol.map", "listener_security_protocol_map", _str),
    Property("log.dirs", "log_dirs", _list),
    Property("log.dir", "log_dir", _str),
    Property("zookeeper.connect", "zookeeper_connect", _str),
    Property("zookeeper.session.timeout.ms", "zookeeper_session_timeout_ms", _int, 1),
    Property("zookeeper.connection.timeout.ms", "zookeeper_connection_timeout_ms", _int, 1),
    Property("zookeeper.set.acl", "zookeeper_set_acl", _bool),
    Property("num.partitions", "num_partitions", _int, 1),
    Property("default.replication.factor", "default_replication_factor", _int, 1),
    Property("min.insync.replicas", "min_insync_replicas", _int, 1),
    Property("unclean.leader.election.enable", "unclean_leader_election_enable", _bool),
    Property("auto.create.topics.enable", "auto_create_topics_enable", _bool),
    Property("delete.topic.enable", "delete_topic_enable", _bool),
    Property("auto.leader.rebalance.enable", "auto_leader_rebalance_enable", _bool),
    Property("leader.imbalance.check.interval.seconds", "leader_imbalance_check_interval_seconds", _int, 1),
    Property("leader.imbalance.per.broker.percentage", "leader_imbalance_per_broker_percentage", _int, 0),
    Property("controlled.shutdown.enable", "controlled_shutdown_enable", _bool),
    Property("controlled.shutdown.max.retries", "controlled_shutdown_max_retries", _int, 0),
    Property("controlled.shutdown.retry.backoff.ms", "controlled_shutdown_retry_backoff_ms", _int, 0),
    Property("replica.lag.time.max.ms", "replica_lag_time_max_ms", _int, 1),
    Property("replica.fetch.wait.max.ms", "replica_fetch_wait_max_ms", _int, 0),
    Property("replica.fetch.min.bytes", "replica_fetch_min_bytes", _int, 1),
    Property("replica.fetch.max.bytes", "replica_fetch_max_bytes", _int, 0),
    Property("replica.fetch.response.max.bytes", "replica_fetch_response_max_bytes", _int, 0),
    Property("replica.fetch.backoff.ms", "replica_fetch_backoff_ms", _int, 0),
    Property("replica.high.watermark.checkpoint.interval.ms", "replica_high_watermark_checkpoint_interval_ms", _int, 1),
    Property("num.replica.fetchers", "num_replica_fetchers", _int, 1),
    Property("log.segment.bytes", "log_segment_bytes", _int, 14),
    Property("log.roll.ms", "log_roll_ms", _int, 1),
    Property("log.roll.hours", "log_roll_hours", _int, 1),
    Property("log.index.interval.bytes", "log_index_interval_bytes", _int, 0),
    Property("log.flush.interval.messages", "log_flush_interval_messages", _int, 1),
    Property("log.flush.interval.ms", "log_flush_interval_ms", _int, 0),
    Property("log.flush.offset.checkpoint.interval.ms", "log_flush_offset_checkpoint_interval_ms", _int, 0),
    Property("log.retention.hours", "log_retention_hours", _int, -1),
    Property("log.retention.ms", "log_retention_ms", _int, -1),
    Property("log.retention.bytes", "log_retention_bytes", _int, -1),
    Property("log.retention.check.interval.ms", "log_retention_check_interval_ms", _int, 1),
    Property("log.cleanup.policy", "log_cleanup_policy", _list),
    Property("log.cleaner.enable", "log_cleaner_enable", _bool),
    Property("log.cleaner.backoff.ms", "log_cleaner_backoff_ms", _int, 0),
    Property("log.cleaner.delete.retention.ms", "log_cleaner_delete_retention_ms", _int, 0),
    Property("log.cleaner.min.cleanable.ratio", "log_cleaner_min_cleanable_ratio", float, 0),
    Property("log.cleaner.min.compaction.lag.ms", "log_cleaner_min_compaction_lag_ms", _int, 0),
    Property("message.max.bytes", "message_max_bytes", _int, 0),
    Property("compression.type", "compression_type", _compression_type),
    Property("log.message.timestamp.type", "log_message_timestamp_type", _timestamp_type),
    Property("log.message.timestamp.difference.max.ms", "log_message_timestamp_difference_max_ms", _int, 0),
    Property("request.timeout.ms", "request_timeout_ms", _int, 1),
    Property("controller.socket.timeout.ms", "controller_socket_timeout_ms", _int, 1),
    Property("isr.change.propagation.interval.ms", "isr_change_propagation_interval_ms", _int, 1),
    Property("offsets.topic.num.partitions", "offsets_topic_num_partitions", _int, 1),
    Property("offsets.topic.replication.factor", "offsets_topic_replication_factor", _int, 1),
    Property("offsets.topic.segment.bytes", "offsets_topic_segment_bytes", _int, 1),
    Property("offsets.retention.minutes", "offsets_retention_minutes", _int, 1),
    Property("offsets.retention.check.interval.ms", "offsets_retention_check_interval_ms", _int, 1),
    Property("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", _int, 0),
    Property("group.min.session.timeout.ms", "group_min_session_timeout_ms", _int, 0),
    Property("group.max.session.timeout.ms", "group_max_session_timeout_ms", _int, 0),
    # Request bounds (broker/request_bounds.py): what one request, or all of them at once, may take.
    Property("socket.request.max.bytes", "socket_request_max_bytes", _int, 1),
    Property("queued.max.request.bytes", "queued_max_request_bytes", _int, -1),
    Property("max.concurrent.streams.per.connection", "max_concurrent_streams_per_connection", _int, 1),
    Property("jute.maxbuffer", "jute_maxbuffer", _int, 1),
    Property("fetch.max.bytes", "fetch_max_bytes", _int, 1024),
    Property("fetch.max.wait.ms.max", "fetch_max_wait_ms_max", _int, 0),
    # SASL on SASL_ listeners (broker/sasl/settings.py reads these and their listener.name.<l>. forms).
    Property("sasl.enabled.mechanisms", "sasl_enabled_mechanisms", _list),
    Property("sasl.jaas.config", "sasl_jaas_config", _str),
    Property("connections.max.reauth.ms", "connections_max_reauth_ms", _int, 0),
    # Authorization (broker/authorizer): Kafka's AclAuthorizer and its two settings.
    Property("authorizer.class.name", "authorizer_class_name", _str),
    Property("super.users", "super_users", _str),
    Property("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", _bool),
    # TLS (broker/tls_settings.py): Kafka's ssl.* for the gRPC port and the inter-broker channels
    # (security.inter.broker.protocol), and Kafka 2.5's zookeeper.ssl.* for the session to the quorum.
    Property("security.inter.broker.protocol", "security_inter_broker_protocol", _security_protocol),
    Property("ssl.keystore.location", "ssl_keystore_location", _str),
    Property("ssl.keystore.type", "ssl_keystore_type", _str),
    Property("ssl.truststore.location", "ssl_truststore_location", _str),
    Property("ssl.truststore.type", "ssl_truststore_type", _str),
    Property("ssl.client.auth", "ssl_client_auth", _str),
    Property("ssl.endpoint.identification.algorithm", "ssl_endpoint_identification_algorithm", _str),
    Property("zookeeper.ssl.client.enable", "zookeeper_ssl_client_enable", _bool),
    Property("zookeeper.clientCnxnSocket", "zookeeper_client_cnxn_socket", _str),
    Property("zookeeper.ssl.keystore.location", "zookeeper_ssl_keystore_location", _str),
    Property("zookeeper.ssl.keystore.type", "zookeeper_ssl_keystore_type", _str),
    Property("zookeeper.ssl.truststore.location", "zookeeper_ssl_truststore_location", _str),
    Property("zookeeper.ssl.truststore.type", "zookeeper_ssl_truststore_type", _str),
    Property(
        "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper_ssl_endpoint_identification_algorithm", _str
    ),
)
_BY_NAME = {p.name: p for p in PROPERTIES}


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str = ""
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 0
    # Kafka's; unset: no Kafka listener, only the gRPC endpoint (broker/listeners.py says why).
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""
    log_dirs: tuple[str, ...] = ()
    log_dir: str = "/tmp/kafka-logs"
    zookeeper_connect: str = "127.0.0.1:2181"
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 18000
    # Kafka's zookeeper.set.acl: the broker creates its znodes with ZkData.defaultAcls (client.kafka.znodes);
    # it needs a SASL login to the quorum, `zookeeper_login`.
    zookeeper_set_acl: bool = False
    # The JAAS Client section's (username, password) the broker logs in to the quorum with (SASL DIGEST-MD5),
    # from `zkraft broker start --jaas-config` or -Djava.security.auth.login.config in KAFKA_OPTS. Not a property.
    zookeeper_login: tuple[str, str] | None = field(default=None, compare=False, repr=False)
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    num_replica_fetchers: int = 1
    log_segment_bytes: int = 1024**3
    log_roll_ms: int | None = None
    log_roll_hours: int = 168
    log_index_interval_bytes: int = 4096
    log_flush_interval_messages: int | None = None
    log_flush_interval_ms: int | None = None
    log_flush_offset_checkpoint_interval_ms: int = 60000
    log_retention_hours: int = 168
    log_retention_ms: int | None = None
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    log_cleanup_policy: tuple[str, ...] = ("delete",)
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_delete_retention_ms: int = 86400000
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_min_compaction_lag_ms: int = 0
    message_max_bytes: int = 1048588
    compression_type: str = "producer"
    log_message_timestamp_type: str = "CreateTime"
    log_message_timestamp_difference_max_ms: int = 2**63 - 1  # Kafka's Long.MAX_VALUE: no limit
    request_timeout_ms: int = 30000
    controller_socket_timeout_ms: int = 30000
    isr_change_propagation_interval_ms: int = 2500
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    # Kafka's: the largest request the broker reads (gRPC's max receive message length here).
    socket_request_max_bytes: int = 104857600
    # Kafka's (there -1, no limit): bytes of requests being worked on at once; beyond, new ones wait for room.
    queued_max_request_bytes: int = 104857600
    # zkraft's (Kafka serves one request per connection at a time): HTTP/2 streams at once on one connection.
    max_concurrent_streams_per_connection: int = 100
    # ZooKeeper's (0xfffff): the largest znode a request may make the broker write (/brokers/topics/<t>).
    jute_maxbuffer: int = 0xFFFFF
    # Kafka's (KIP-541): the most bytes one Fetch response carries, whatever the request asks.
    fetch_max_bytes: int = 57671680
    # zkraft's: the longest a Fetch waits for min_bytes (its max_wait_ms is capped to this); Kafka's request.timeout.ms.
    fetch_max_wait_ms_max: int = 30000
    # Kafka's (its default is GSSAPI, not served here): the mechanisms a SASL_ listener enables.
    sasl_enabled_mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    sasl_jaas_config: str = ""  # PLAIN's users (user_<name>="<password>"); Kafka reads only the listener's form
    connections_max_reauth_ms: int = 0  # KIP-368: 0, sessions never expire
    # Kafka's: empty (no authorizer, every request allowed) or kafka.security.authorizer.AclAuthorizer.
    authorizer_class_name: str = ""
    # Kafka's: principals allowed everything, separated by semicolons (User:admin;User:ops).
    super_users: str = ""
    # Kafka's: whether a resource without any ACL is open to everyone (false, as in Kafka).
    allow_everyone_if_no_acl_found: bool = False
    # ---- TLS, Kafka's names and defaults (KafkaConfig, SslConfigs; ZkClientConfig since Kafka 2.5).
    security_inter_broker_protocol: str = "PLAINTEXT"
    ssl_keystore_location: str = ""
    ssl_keystore_type: str = "PEM"  # Kafka's default is JKS; only PEM is read (runtime.tls)
    ssl_truststore_location: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_client_auth: str = "none"
    ssl_endpoint_identification_algorithm: str = "https"
    zookeeper_ssl_client_enable: bool = False
    zookeeper_client_cnxn_socket: str = ""  # Kafka needs ClientCnxnSocketNetty for TLS; accepted, not needed here
    zookeeper_ssl_keystore_location: str = ""
    zookeeper_ssl_keystore_type: str = "PEM"
    zookeeper_ssl_truststore_location: str = ""
    zookeeper_ssl_truststore_type: str = "PEM"
    zookeeper_ssl_endpoint_identification_algorithm: str = "https"
    # Properties as given (after overrides), for the record in the start-up log.
    given: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def directories(self) -> tuple[Path, ...]:
        """`log.dirs`, else `log.dir` (Kafka's precedence)."""
        return tuple(Path(d) for d in (self.log_dirs or (self.log_dir,)))

    @property
    def segment_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3600 * 1000

    @property
    def retention_ms(self) -> int:
        return self.log_retention_ms if self.log_retention_ms is not None else self.log_retention_hours * 3600 * 1000

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def kafka_listeners(self) -> tuple[KafkaListener, ...]:
        """`listeners` with `advertised.listeners` (checked by from_properties; a bad value raises here too)."""
        return parse_listeners(self.listeners, self.advertised_listeners, self.listener_security_protocol_map)


def check_key(key: str, where: str = "") -> None:
    # ssl.* and listener.name.<l>. SASL properties: read per listener from `given` (listener_tls, sasl_settings).
    if key in _BY_NAME or is_ssl_property(key) or is_listener_sasl_property(key):
        return
    close = difflib.get_close_matches(key, list(_BY_NAME), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise BrokerConfigError(f"{where}unknown broker property {key!r}{hint}")


def parse_override(text: str) -> tuple[str, str]:
    """`key=value` from `--override`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise BrokerConfigError(f"--override {text!r}: expected key=value")
    return key.strip(), value.strip()


def from_properties(properties: Mapping[str, str]) -> BrokerConfig:
    """Typed, checked BrokerConfig from property strings."""
    values: dict[str, Any] = {}
    for key, raw in properties.items():
        check_key(key)
        prop = _BY_NAME.get(key)
        if prop is None:  # an ssl.* or listener SASL property: kept in `given`, checked per listener below
            continue
        try:
            value = prop.parse(raw)
        except ValueError:
            raise BrokerConfigError(f"broker property {key}={raw!r}: not a valid {_kind(prop)}") from None
        if prop.minimum is not None and value < prop.minimum:
            raise BrokerConfigError(f"broker property {key}={raw!r}: must be at least {prop.minimum}")
        values[prop.field] = value
    config = BrokerConfig(**values, given=dict(properties))
    if config.min_insync_replicas < 1:
        raise BrokerConfigError("min.insync.replicas must be at least 1")
    _check_request_bounds(config)
    _check_authorizer(config)
    _check_tls(config)
    try:
        for listener in config.kafka_listeners:
            protocol = listener.advertised.security_protocol
            listener_tls_config(properties, listener.name, protocol)
            if protocol.startswith("SASL_"):
                listener_sasl_settings(listener.name, config.given)
    except (ListenerConfigError, SaslConfigError, TlsConfigError) as exc:
        raise BrokerConfigError(str(exc)) from None
    return config


def _check_tls(config: BrokerConfig) -> None:
    """Build the TLS settings once here, so that a bad one is refused at start with one line."""
    from broker.tls_settings import grpc_requires_sasl, grpc_tls, zookeeper_tls

    try:
        tls_configs = (grpc_tls(config), zookeeper_tls(config))
        if grpc_requires_sasl(config):  # the gRPC port's own SASL settings (listener.name.grpc.* or the broker's)
            listener_sasl_settings("GRPC", config.given)
    except (TlsConfigError, SaslConfigError) as exc:
        raise BrokerConfigError(str(exc)) from None
    for tls in tls_configs:
        for path in (tls.keystore_file, tls.truststore_file) if tls is not None else ():
            if path is not None and not path.is_file():
                raise BrokerConfigError(f"{path}: no such file (a TLS keystore or truststore)")


def _check_request_bounds(config: BrokerConfig) -> None:
    """Kafka's KafkaConfig check: one request of the largest size must fit in the queue, or it could never run."""
    queued = config.queued_max_request_bytes
    if queued == 0 or queued < -1:
        raise BrokerConfigError(f"queued.max.request.bytes={queued}: must be -1 (no limit) or positive")
    if queued > 0 and queued < config.socket_request_max_bytes:
        raise BrokerConfigError(
            f"queued.max.request.bytes={queued} must be -1 or at least socket.request.max.bytes "
            f"({config.socket_request_max_bytes})"
        )


def _check_authorizer(config: BrokerConfig) -> None:
    name = config.authorizer_class_name
    if name and name not in AUTHORIZER_CLASSES:
        raise BrokerConfigError(
            f"authorizer.class.name={name!r}: the only authorizer is {ACL_AUTHORIZER_CLASS} (or leave it empty)"
        )


def _kind(prop: Property) -> str:
    return {
        _int: "integer",
        _bool: "boolean (true or false)",
        _compression_type: f"value (one of {', '.join(_COMPRESSION_TYPES)})",
        _timestamp_type: "value (CreateTime or LogAppendTime)",
        _security_protocol: f"value (one of {', '.join(_SECURITY_PROTOCOLS)})",
    }.get(prop.parse, "value")


def load_broker_config(
    config_file: Path | None, overrides: Sequence[str] = (), jaas_file: Path | None = None
) -> BrokerConfig:
    """server.properties (optional) with `--override key=value` applied on top; the ZooKeeper login from the
    JAAS file's Client section (ZooKeeper's zookeeper.sasl.clientconfig default)."""
    properties: dict[str, str] = {}
    if config_file is not None:
        try:
            properties = read_properties_file(Path(config_file), check_key)
        except PropertiesError as exc:
            raise BrokerConfigError(str(exc)) from None
    for text in overrides:
        key, value = parse_override(text)
        check_key(key, "--override: ")
        properties[key] = value
    config = from_properties(properties)
    login = None
    if jaas_file is not None:
        try:
            login = optional_client_login(jaas_file)
        except JaasError as exc:
            raise BrokerConfigError(f"java.security.auth.login.config: {exc}") from None
    if config.zookeeper_set_acl and login is None:
        # KafkaServer.initZkClient: set.acl without a secure ZooKeeper login is a SecurityException.
        raise BrokerConfigError(
            "zookeeper.set.acl is true, but no JAAS login for the quorum was given "
            "(--jaas-config FILE, or -Djava.security.auth.login.config=FILE in KAFKA_OPTS, with a Client section)"
        )
    return dataclasses.replace(config, zookeeper_login=login) if login is not None else config


CONFIG_FIELDS = frozenset(f.name for f in fields(BrokerConfig))
