"""Client-side Kafka errors that have no wire code (kafka-python's names).

They derive from `KafkaError` so that `except KafkaError` catches every failure
of the Producer, Consumer and Admin; `code` stays -1 and `name` says what it is.
"""

from __future__ import annotations

from client.kafka.errors import KafkaError


class KafkaClientError(KafkaError):
    name = "CLIENT_ERROR"
    default_message = "The Kafka client failed."


class KafkaConfigurationError(KafkaClientError, ValueError):
    """A bad argument to a Producer, Consumer or Admin constructor (also a ValueError)."""

    name = "CLIENT_CONFIGURATION"
    default_message = "Invalid client configuration."


class KafkaTimeoutError(KafkaClientError):
    """A bounded wait ran out: delivery timeout, flush, metadata, a full buffer, a request."""

    name = "CLIENT_TIMEOUT"
    retriable = True
    default_message = "The operation timed out."


class NoBrokersAvailable(KafkaClientError):
    name = "NO_BROKERS_AVAILABLE"
    retriable = True
    default_message = "No broker of the bootstrap list answered."


class KafkaConnectionError(KafkaClientError):
    """gRPC said UNAVAILABLE (or similar) for a broker: retried after a metadata refresh."""

    name = "CLIENT_CONNECTION"
    retriable = True
    default_message = "The connection to the broker failed."


class SslAuthenticationError(KafkaClientError):
    """Kafka's SslAuthenticationException: the connection failed for a TLS reason (a plaintext client on a
    TLS port, a certificate not signed by a trusted CA). Not retriable: raised at once with the reason."""

    name = "SSL_AUTHENTICATION_FAILED"
    default_message = "SSL handshake failed."


class IllegalStateError(KafkaClientError):
    name = "CLIENT_ILLEGAL_STATE"
    default_message = "The client is not in a state that allows this call."


class CommitFailedError(KafkaClientError):
    """Kafka's CommitFailedException: the group rebalanced (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID) and the
    partitions may belong to another member now; the cause is the wire error (`__cause__`)."""

    name = "CLIENT_COMMIT_FAILED"
    default_message = (
        "Commit cannot be completed since the group has already rebalanced and assigned the partitions to another "
        "member. This means that the time between subsequent calls to poll() was longer than the configured "
        "max.poll.interval.ms, which typically implies that the poll loop is spending too much time message "
        "processing."
    )


class NoOffsetForPartitionError(KafkaClientError):
    """A partition has no position and auto_offset_reset is "none"."""

    name = "CLIENT_NO_OFFSET_FOR_PARTITION"
    default_message = "No offset for the partition and no reset policy."
