"""A broker config's documentation, as DescribeConfigs v3+ returns it when asked (`include_documentation`).

Kafka 2.8's `ConfigHelper.brokerDocumentation` is `KafkaConfig.documentationOf(name)`: the doc of the
name's `KafkaConfig.configDef` key, or null for a name that has none there (the dynamic-only
`leader/follower.replication.throttled.rate`, defined in `DynamicConfig.Broker`, answer null). Each text
below is the first sentence of 2.8's doc (KafkaConfig.scala, or the TopicConfig / CommonClientConfigs
constant it reuses), with the property names it interpolates filled in. The properties only zkraft has get
a sentence of their own. The topic configs' docs sit with their types in broker/config_describe.py.
"""

from __future__ import annotations

_DEPRECATED_LISTENER = (
    "DEPRECATED: only used when <code>listeners</code> is not set. Use <code>listeners</code> instead."
)

BROKER_CONFIG_DOCS: dict[str, str] = {
    "broker.id": "The broker id for this server.",
    "host.name": _DEPRECATED_LISTENER,
    "port": _DEPRECATED_LISTENER,
    "broker.rack": "Rack of the broker.",
    "listeners": "Listener List - Comma-separated list of URIs we will listen on and the listener names.",
    "advertised.listeners": (
        "Listeners to publish to ZooKeeper for clients to use, if different than the <code>listeners</code> config "
        "property."
    ),
    # Kafka's first sentence, then where zkraft's gRPC port stands in it (the listener GRPC).
    "listener.security.protocol.map": (
        "Map between listener names and security protocols. The broker's gRPC port is the listener GRPC: "
        "GRPC:SASL_SSL makes it require a SASL login (or a client certificate, with "
        "listener.name.grpc.ssl.client.auth=required); without a GRPC entry it takes security.inter.broker.protocol."
    ),
    "log.dirs": "The directories in which the log data is kept.",
    "log.dir": "The directory in which the log data is kept (supplemental for log.dirs property)",
    "zookeeper.connect": (
        "Specifies the ZooKeeper connection string in the form <code>hostname:port</code> where host and port are "
        "the host and port of a ZooKeeper server."
    ),
    "zookeeper.session.timeout.ms": "Zookeeper session timeout",
    "zookeeper.connection.timeout.ms": "The max time that the client waits to establish a connection to zookeeper.",
    "zookeeper.set.acl": "Set client to use secure ACLs",
    "num.partitions": "The default number of log partitions per topic",
    "default.replication.factor": "default replication factors for automatically created topics",
    "min.insync.replicas": (
        'When a producer sets acks to "all" (or "-1"), min.insync.replicas specifies the minimum number of '
        "replicas that must acknowledge a write for the write to be considered successful."
    ),
    "unclean.leader.election.enable": (
        "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort, even "
        "though doing so may result in data loss"
    ),
    "auto.create.topics.enable": "Enable auto creation of topic on the server",
    "delete.topic.enable": "Enables delete topic.",
    "auto.leader.rebalance.enable": "Enables auto leader balancing.",
    "leader.imbalance.check.interval.seconds": (
        "The frequency with which the partition rebalance check is triggered by the controller"
    ),
    "leader.imbalance.per.broker.percentage": "The ratio of leader imbalance allowed per broker.",
    "controlled.shutdown.enable": "Enable controlled shutdown of the server",
    "controlled.shutdown.max.retries": "Controlled shutdown can fail for multiple reasons.",
    "controlled.shutdown.retry.backoff.ms": (
        "Before each retry, the system needs time to recover from the state that caused the previous failure "
        "(Controller fail over, replica lag etc)."
    ),
    "replica.lag.time.max.ms": (
        "If a follower hasn't sent any fetch requests or hasn't consumed up to the leaders log end offset for at "
        "least this time, the leader will remove the follower from isr"
    ),
    "replica.fetch.wait.max.ms": "max wait time for each fetcher request issued by follower replicas.",
    "replica.fetch.min.bytes": "Minimum bytes expected for each fetch response.",
    "replica.fetch.max.bytes": "The number of bytes of messages to attempt to fetch for each partition.",
    "replica.fetch.response.max.bytes": "Maximum bytes expected for the entire fetch response.",
    "replica.fetch.backoff.ms": "The amount of time to sleep when fetch partition error occurs.",
    "replica.high.watermark.checkpoint.interval.ms": "The frequency with which the high watermark is saved out to disk",
    "num.replica.fetchers": "Number of fetcher threads used to replicate messages from a source broker.",
    "log.segment.bytes": "The maximum size of a single log file",
    "log.roll.ms": "The maximum time before a new log segment is rolled out (in milliseconds).",
    "log.roll.hours": (
        "The maximum time before a new log segment is rolled out (in hours), secondary to log.roll.ms property"
    ),
    "log.index.interval.bytes": "The interval with which we add an entry to the offset index",
    "log.flush.interval.messages": (
        "The number of messages accumulated on a log partition before messages are flushed to disk"
    ),
    "log.flush.interval.ms": (
        "The maximum time in ms that a message in any topic is kept in memory before flushed to disk."
    ),
    "log.flush.offset.checkpoint.interval.ms": (
        "The frequency with which we update the persistent record of the last flush which acts as the log recovery "
        "point"
    ),
    "log.retention.hours": (
        "The number of hours to keep a log file before deleting it (in hours), tertiary to log.retention.ms property"
    ),
    "log.retention.ms": (
        "The number of milliseconds to keep a log file before deleting it (in milliseconds), If not set, the value "
        "in log.retention.minutes is used."
    ),
    "log.retention.bytes": "The maximum size of the log before deleting it",
    "log.retention.check.interval.ms": (
        "The frequency in milliseconds that the log cleaner checks whether any log is eligible for deletion"
    ),
    "log.cleanup.policy": "The default cleanup policy for segments beyond the retention window.",
    "log.cleaner.enable": "Enable the log cleaner process to run on the server.",
    "log.cleaner.backoff.ms": "The amount of time to sleep when there are no logs to clean",
    "log.cleaner.delete.retention.ms": "How long are delete records retained?",
    "log.cleaner.min.cleanable.ratio": (
        "The minimum ratio of dirty log to total log for a log to eligible for cleaning."
    ),
    "log.cleaner.min.compaction.lag.ms": "The minimum time a message will remain uncompacted in the log.",
    "message.max.bytes": (
        "The largest record batch size allowed by Kafka (after compression if compression is enabled)."
    ),
    "compression.type": "Specify the final compression type for a given topic.",
    "log.message.timestamp.type": (
        "Define whether the timestamp in the message is message create time or log append time."
    ),
    "log.message.timestamp.difference.max.ms": (
        "The maximum difference allowed between the timestamp when a broker receives a message and the timestamp "
        "specified in the message."
    ),
    "request.timeout.ms": (
        "The configuration controls the maximum amount of time the client will wait for the response of a request."
    ),
    "controller.socket.timeout.ms": "The socket timeout for controller-to-broker channels",
    "offsets.topic.num.partitions": (
        "The number of partitions for the offset commit topic (should not change after deployment)"
    ),
    "offsets.topic.replication.factor": (
        "The replication factor for the offsets topic (set higher to ensure availability)."
    ),
    "offsets.topic.segment.bytes": (
        "The offsets topic segment bytes should be kept relatively small in order to facilitate faster log "
        "compaction and cache loads"
    ),
    "offsets.retention.minutes": (
        "After a consumer group loses all its consumers (i.e. becomes empty) its offsets will be kept for this "
        "retention period before getting discarded."
    ),
    "offsets.retention.check.interval.ms": "Frequency at which to check for stale offsets",
    "group.initial.rebalance.delay.ms": (
        "The amount of time the group coordinator will wait for more consumers to join a new group before "
        "performing the first rebalance."
    ),
    "group.min.session.timeout.ms": "The minimum allowed session timeout for registered consumers.",
    "group.max.session.timeout.ms": "The maximum allowed session timeout for registered consumers.",
    "socket.request.max.bytes": "The maximum number of bytes in a socket request",
    "queued.max.request.bytes": "The number of queued bytes allowed before no more requests are read",
    "fetch.max.bytes": "The maximum number of bytes we will return for a fetch request.",
    "sasl.enabled.mechanisms": "The list of SASL mechanisms enabled in the Kafka server (PLAIN, SCRAM-SHA-256, "
    "SCRAM-SHA-512).",
    "sasl.jaas.config": "JAAS login context parameters for SASL connections in the format used by JAAS "
    'configuration files: PLAIN\'s users as user_<name>="<password>".',
    "connections.max.reauth.ms": "When explicitly set to a positive number, the maximum amount of time in ms a "
    "session may live before it must re-authenticate; 0 means no limit (KIP-368).",
    "authorizer.class.name": (
        "The fully qualified name of a class that implements org.apache.kafka.server.authorizer.Authorizer "
        "interface, which is used by the broker for authorization."
    ),
    # AclAuthorizer's own settings (its config, not KafkaConfig's definitions in 2.8): a sentence of ours.
    "super.users": "Principals, separated by semicolons, that the authorizer allows every operation on every resource.",
    "allow.everyone.if.no.acl.found": "Whether the authorizer allows everyone a resource that has no ACL at all.",
    # TLS (SslConfigs, KafkaConfig's inter-broker and ZooKeeper client TLS, 2.5+).
    "security.inter.broker.protocol": "Security protocol used to communicate between brokers.",
    "ssl.keystore.location": "The location of the key store file.",
    "ssl.keystore.type": "The file format of the key store file.",
    "ssl.truststore.location": "The location of the trust store file.",
    "ssl.truststore.type": "The file format of the trust store file.",
    "ssl.client.auth": "Configures kafka broker to request client authentication.",
    "ssl.endpoint.identification.algorithm": (
        "The endpoint identification algorithm to validate server hostname using server certificate."
    ),
    "zookeeper.ssl.client.enable": "Set client to use TLS when connecting to ZooKeeper.",
    "zookeeper.clientCnxnSocket": (
        "Typically set to <code>org.apache.zookeeper.ClientCnxnSocketNetty</code> when using TLS connectivity to "
        "ZooKeeper."
    ),
    "zookeeper.ssl.keystore.location": (
        "Keystore location when using a client-side certificate with TLS connectivity to ZooKeeper."
    ),
    "zookeeper.ssl.keystore.type": (
        "Keystore type when using a client-side certificate with TLS connectivity to ZooKeeper."
    ),
    "zookeeper.ssl.truststore.location": "Truststore location when using TLS connectivity to ZooKeeper.",
    "zookeeper.ssl.truststore.type": "Truststore type when using TLS connectivity to ZooKeeper.",
    "zookeeper.ssl.endpoint.identification.algorithm": (
        "Specifies whether to enable hostname verification in the ZooKeeper TLS negotiation process, with "
        '(case-insensitively) "https" meaning ZooKeeper hostname verification is enabled and an explicit blank value '
        "meaning it is disabled (disabling it is only recommended for testing purposes)."
    ),
    # zkraft's own properties (Kafka 2.8's KafkaConfig has none of these names).
    "isr.change.propagation.interval.ms": (
        "How often a partition leader publishes its ISR changes to /isr_change_notification for the controller."
    ),
    "max.concurrent.streams.per.connection": "The most gRPC requests one client connection may have in flight.",
    "jute.maxbuffer": "The largest znode, in bytes, a request may make the broker write (ZooKeeper's limit).",
    "fetch.max.wait.ms.max": "The longest a Fetch request may ask the broker to wait for min bytes to arrive, in ms.",
    "metrics.host": "The address the /metrics, /healthz and /readyz HTTP endpoints are served on.",
    "metrics.port": "The port of the /metrics, /healthz and /readyz HTTP endpoints; 0: not served.",
}


def broker_config_doc(name: str) -> str | None:
    """KafkaConfig.documentationOf: None for a name outside the static config definitions."""
    return BROKER_CONFIG_DOCS.get(name)
