"""Kafka's error codes: one class per wire code, as in Kafka 2.8's `Errors.java` (docs/research/kafka.md §3.7).

Every class carries Kafka's `code`, its enum `name` (`NOT_LEADER_OR_FOLLOWER`), Kafka's
default message and the `retriable` flag (True where Kafka's exception class derives from
`RetriableException`, e.g. through `InvalidMetadataException`: retrying after a metadata
refresh may succeed). Class names follow kafka-python (`UnknownTopicOrPartitionError`,
`NotLeaderForPartitionError`); a few have the newer Kafka name as an alias.

`ERRORS` maps a code to its class, `ERRORS_BY_NAME` maps Kafka's enum name (and the
pre-2.8 alias `NOT_LEADER_FOR_PARTITION`) to it. `error_for(code, message)` builds the
exception for a code read off the wire; `raise_for(code, message)` raises it unless the
code is 0 (NONE). A code Kafka does not define gives `UnknownKafkaError` holding that code.

Kafka's messages are kept verbatim, including the few without a final period, so that
a user who searches for one finds Kafka's documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

NONE = 0  # Errors.NONE: no error


class KafkaError(Exception):
    """Base of every Kafka error; `code`, `name`, `retriable` and `default_message` are Kafka's."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str = "The server experienced an unexpected error when processing the request."

    def __init__(self, message: str | None = None) -> None:
        text = self.default_message if message is None or message == "" else message
        super().__init__(_one_line(text))

    @property
    def message(self) -> str:
        return str(self)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# code -> class; filled by @_code below.
ERRORS: dict[int, type[KafkaError]] = {}
ERRORS_BY_NAME: dict[str, type[KafkaError]] = {}
_E = TypeVar("_E", bound=type[KafkaError])


def _code(code: int, name: str, retriable: bool = False) -> Callable[[_E], _E]:
    def register(cls: _E) -> _E:
        if code in ERRORS or name in ERRORS_BY_NAME:
            raise RuntimeError(f"Kafka error code {code} ({name}) registered twice")
        cls.code = code
        cls.name = name
        cls.retriable = retriable
        ERRORS[code] = cls
        ERRORS_BY_NAME[name] = cls
        return cls

    return register


@_code(-1, "UNKNOWN_SERVER_ERROR")
class UnknownServerError(KafkaError):
    default_message = "The server experienced an unexpected error when processing the request."


@_code(1, "OFFSET_OUT_OF_RANGE")
class OffsetOutOfRangeError(KafkaError):
    default_message = "The requested offset is not within the range of offsets maintained by the server."


@_code(2, "CORRUPT_MESSAGE", retriable=True)
class CorruptRecordError(KafkaError):
    default_message = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, "
        "or is otherwise corrupt."
    )


@_code(3, "UNKNOWN_TOPIC_OR_PARTITION", retriable=True)
class UnknownTopicOrPartitionError(KafkaError):
    default_message = "This server does not host this topic-partition."


@_code(4, "INVALID_FETCH_SIZE")
class InvalidFetchSizeError(KafkaError):
    default_message = "The requested fetch size is invalid."


@_code(5, "LEADER_NOT_AVAILABLE", retriable=True)
class LeaderNotAvailableError(KafkaError):
    default_message = "There is no leader for this topic-partition as we are in the middle of a leadership election."


@_code(6, "NOT_LEADER_OR_FOLLOWER", retriable=True)
class NotLeaderForPartitionError(KafkaError):
    default_message = (
        "For requests intended only for the leader, this error indicates that the broker is not the current "
        "leader. For requests intended for any replica, this error indicates that the broker is not a replica of "
        "the topic partition."
    )


@_code(7, "REQUEST_TIMED_OUT", retriable=True)
class RequestTimedOutError(KafkaError):
    default_message = "The request timed out."


@_code(8, "BROKER_NOT_AVAILABLE")
class BrokerNotAvailableError(KafkaError):
    default_message = "The broker is not available."


@_code(9, "REPLICA_NOT_AVAILABLE", retriable=True)
class ReplicaNotAvailableError(KafkaError):
    default_message = (
        "The replica is not available for the requested topic-partition. Produce/Fetch requests and other "
        "requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a "
        "replica of the topic-partition."
    )


@_code(10, "MESSAGE_TOO_LARGE")
class MessageSizeTooLargeError(KafkaError):
    default_message = "The request included a message larger than the max message size the server will accept."


@_code(11, "STALE_CONTROLLER_EPOCH")
class StaleControllerEpochError(KafkaError):
    default_message = "The controller moved to another broker."


@_code(12, "OFFSET_METADATA_TOO_LARGE")
class OffsetMetadataTooLargeError(KafkaError):
    default_message = "The metadata field of the offset request was too large."


@_code(13, "NETWORK_EXCEPTION", retriable=True)
class NetworkExceptionError(KafkaError):
    default_message = "The server disconnected before a response was received."


@_code(14, "COORDINATOR_LOAD_IN_PROGRESS", retriable=True)
class CoordinatorLoadInProgressError(KafkaError):
    default_message = "The coordinator is loading and hence can't process requests."


@_code(15, "COORDINATOR_NOT_AVAILABLE", retriable=True)
class CoordinatorNotAvailableError(KafkaError):
    default_message = "The coordinator is not available."


@_code(16, "NOT_COORDINATOR", retriable=True)
class NotCoordinatorError(KafkaError):
    default_message = "This is not the correct coordinator."


@_code(17, "INVALID_TOPIC_EXCEPTION")
class InvalidTopicError(KafkaError):
    default_message = "The request attempted to perform an operation on an invalid topic."


@_code(18, "RECORD_LIST_TOO_LARGE")
class RecordListTooLargeError(KafkaError):
    default_message = "The request included message batch larger than the configured segment size on the server."


@_code(19, "NOT_ENOUGH_REPLICAS", retriable=True)
class NotEnoughReplicasError(KafkaError):
    default_message = "Messages are rejected since there are fewer in-sync replicas than required."


@_code(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True)
class NotEnoughReplicasAfterAppendError(KafkaError):
    default_message = "Messages are written to the log, but to fewer in-sync replicas than required."


@_code(21, "INVALID_REQUIRED_ACKS")
class InvalidRequiredAcksError(KafkaError):
    default_message = "Produce request specified an invalid value for required acks."


@_code(22, "ILLEGAL_GENERATION")
class IllegalGenerationError(KafkaError):
    default_message = "Specified group generation id is not valid."


@_code(23, "INCONSISTENT_GROUP_PROTOCOL")
class InconsistentGroupProtocolError(KafkaError):
    default_message = (
        "The group member's supported protocols are incompatible with those of existing members or first group "
        "member tried to join with empty protocol type or empty protocol list."
    )


@_code(24, "INVALID_GROUP_ID")
class InvalidGroupIdError(KafkaError):
    default_message = "The configured groupId is invalid."


@_code(25, "UNKNOWN_MEMBER_ID")
class UnknownMemberIdError(KafkaError):
    default_message = "The coordinator is not aware of this member."


@_code(26, "INVALID_SESSION_TIMEOUT")
class InvalidSessionTimeoutError(KafkaError):
    default_message = (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."
    )


@_code(27, "REBALANCE_IN_PROGRESS")
class RebalanceInProgressError(KafkaError):
    default_message = "The group is rebalancing, so a rejoin is needed."


@_code(28, "INVALID_COMMIT_OFFSET_SIZE")
class InvalidCommitOffsetSizeError(KafkaError):
    default_message = "The committing offset data size is not valid."


@_code(29, "TOPIC_AUTHORIZATION_FAILED")
class TopicAuthorizationFailedError(KafkaError):
    default_message = "Topic authorization failed."


@_code(30, "GROUP_AUTHORIZATION_FAILED")
class GroupAuthorizationFailedError(KafkaError):
    default_message = "Group authorization failed."


@_code(31, "CLUSTER_AUTHORIZATION_FAILED")
class ClusterAuthorizationFailedError(KafkaError):
    default_message = "Cluster authorization failed."


@_code(32, "INVALID_TIMESTAMP")
class InvalidTimestampError(KafkaError):
    default_message = "The timestamp of the message is out of acceptable range."


@_code(33, "UNSUPPORTED_SASL_MECHANISM")
class UnsupportedSaslMechanismError(KafkaError):
    default_message = "The broker does not support the requested SASL mechanism."


@_code(34, "ILLEGAL_SASL_STATE")
class IllegalSaslStateError(KafkaError):
    default_message = "Request is not valid given the current SASL state."


@_code(35, "UNSUPPORTED_VERSION")
class UnsupportedVersionError(KafkaError):
    default_message = "The version of API is not supported."


@_code(36, "TOPIC_ALREADY_EXISTS")
class TopicAlreadyExistsError(KafkaError):
    default_message = "Topic with this name already exists."


@_code(37, "INVALID_PARTITIONS")
class InvalidPartitionsError(KafkaError):
    default_message = "Number of partitions is below 1."


@_code(38, "INVALID_REPLICATION_FACTOR")
class InvalidReplicationFactorError(KafkaError):
    default_message = "Replication factor is below 1 or larger than the number of available brokers."


@_code(39, "INVALID_REPLICA_ASSIGNMENT")
class InvalidReplicaAssignmentError(KafkaError):
    default_message = "Replica assignment is invalid."


@_code(40, "INVALID_CONFIG")
class InvalidConfigurationError(KafkaError):
    default_message = "Configuration is invalid."


@_code(41, "NOT_CONTROLLER", retriable=True)
class NotControllerError(KafkaError):
    default_message = "This is not the correct controller for this cluster."


@_code(42, "INVALID_REQUEST")
class InvalidRequestError(KafkaError):
    default_message = (
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details."
    )


@_code(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
class UnsupportedForMessageFormatError(KafkaError):
    default_message = "The message format version on the broker does not support the request."


@_code(44, "POLICY_VIOLATION")
class PolicyViolationError(KafkaError):
    default_message = "Request parameters do not satisfy the configured policy."


@_code(45, "OUT_OF_ORDER_SEQUENCE_NUMBER")
class OutOfOrderSequenceNumberError(KafkaError):
    default_message = "The broker received an out of order sequence number."


@_code(46, "DUPLICATE_SEQUENCE_NUMBER")
class DuplicateSequenceNumberError(KafkaError):
    default_message = "The broker received a duplicate sequence number."


@_code(47, "INVALID_PRODUCER_EPOCH")
class InvalidProducerEpochError(KafkaError):
    default_message = "Producer attempted to produce with an old epoch."


@_code(48, "INVALID_TXN_STATE")
class InvalidTxnStateError(KafkaError):
    default_message = "The producer attempted a transactional operation in an invalid state."


@_code(49, "INVALID_PRODUCER_ID_MAPPING")
class InvalidProducerIdMappingError(KafkaError):
    default_message = (
        "The producer attempted to use a producer id which is not currently assigned to its transactional id."
    )


@_code(50, "INVALID_TRANSACTION_TIMEOUT")
class InvalidTransactionTimeoutError(KafkaError):
    default_message = (
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by "
        "transaction.max.timeout.ms)."
    )


@_code(51, "CONCURRENT_TRANSACTIONS", retriable=True)
class ConcurrentTransactionsError(KafkaError):
    default_message = (
        "The producer attempted to update a transaction while another concurrent operation on the same "
        "transaction was ongoing."
    )


@_code(52, "TRANSACTION_COORDINATOR_FENCED")
class TransactionCoordinatorFencedError(KafkaError):
    default_message = (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator"
        " for a given producer."
    )


@_code(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
class TransactionalIdAuthorizationFailedError(KafkaError):
    default_message = "Transactional Id authorization failed."


@_code(54, "SECURITY_DISABLED")
class SecurityDisabledError(KafkaError):
    default_message = "Security features are disabled."


@_code(55, "OPERATION_NOT_ATTEMPTED")
class OperationNotAttemptedError(KafkaError):
    default_message = (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs where some "
        "operations in the batch failed, causing the broker to respond without trying the rest."
    )


@_code(56, "KAFKA_STORAGE_ERROR", retriable=True)
class KafkaStorageError(KafkaError):
    default_message = "Disk error when trying to access log file on the disk."


@_code(57, "LOG_DIR_NOT_FOUND")
class LogDirNotFoundError(KafkaError):
    default_message = "The user-specified log directory is not found in the broker config."


@_code(58, "SASL_AUTHENTICATION_FAILED")
class SaslAuthenticationFailedError(KafkaError):
    default_message = "SASL Authentication failed."


@_code(59, "UNKNOWN_PRODUCER_ID")
class UnknownProducerIdError(KafkaError):
    default_message = (
        "This exception is raised by the broker if it could not locate the producer metadata associated with the "
        "producerId in question. This could happen if, for instance, the producer's records were deleted because "
        "their retention time had elapsed. Once the last records of the producerId are removed, the producer's "
        "metadata is removed from the broker, and future appends by the producer will return this exception."
    )


@_code(60, "REASSIGNMENT_IN_PROGRESS")
class ReassignmentInProgressError(KafkaError):
    default_message = "A partition reassignment is in progress."


@_code(61, "DELEGATION_TOKEN_AUTH_DISABLED")
class DelegationTokenAuthDisabledError(KafkaError):
    default_message = "Delegation Token feature is not enabled."


@_code(62, "DELEGATION_TOKEN_NOT_FOUND")
class DelegationTokenNotFoundError(KafkaError):
    default_message = "Delegation Token is not found on server."


@_code(63, "DELEGATION_TOKEN_OWNER_MISMATCH")
class DelegationTokenOwnerMismatchError(KafkaError):
    default_message = "Specified Principal is not valid Owner/Renewer."


@_code(64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
class DelegationTokenRequestNotAllowedError(KafkaError):
    default_message = (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token "
        "authenticated channels."
    )


@_code(65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED")
class DelegationTokenAuthorizationFailedError(KafkaError):
    default_message = "Delegation Token authorization failed."


@_code(66, "DELEGATION_TOKEN_EXPIRED")
class DelegationTokenExpiredError(KafkaError):
    default_message = "Delegation Token is expired."


@_code(67, "INVALID_PRINCIPAL_TYPE")
class InvalidPrincipalTypeError(KafkaError):
    default_message = "Supplied principalType is not supported."


@_code(68, "NON_EMPTY_GROUP")
class NonEmptyGroupError(KafkaError):
    default_message = "The group is not empty."


@_code(69, "GROUP_ID_NOT_FOUND")
class GroupIdNotFoundError(KafkaError):
    default_message = "The group id does not exist."


@_code(70, "FETCH_SESSION_ID_NOT_FOUND", retriable=True)
class FetchSessionIdNotFoundError(KafkaError):
    default_message = "The fetch session ID was not found."


@_code(71, "INVALID_FETCH_SESSION_EPOCH", retriable=True)
class InvalidFetchSessionEpochError(KafkaError):
    default_message = "The fetch session epoch is invalid."


@_code(72, "LISTENER_NOT_FOUND", retriable=True)
class ListenerNotFoundError(KafkaError):
    default_message = (
        "There is no listener on the leader broker that matches the listener on which metadata request was processed."
    )


@_code(73, "TOPIC_DELETION_DISABLED")
class TopicDeletionDisabledError(KafkaError):
    default_message = "Topic deletion is disabled."


@_code(74, "FENCED_LEADER_EPOCH", retriable=True)
class FencedLeaderEpochError(KafkaError):
    default_message = "The leader epoch in the request is older than the epoch on the broker."


@_code(75, "UNKNOWN_LEADER_EPOCH", retriable=True)
class UnknownLeaderEpochError(KafkaError):
    default_message = "The leader epoch in the request is newer than the epoch on the broker."


@_code(76, "UNSUPPORTED_COMPRESSION_TYPE")
class UnsupportedCompressionTypeError(KafkaError):
    default_message = "The requesting client does not support the compression type of given partition."


@_code(77, "STALE_BROKER_EPOCH")
class StaleBrokerEpochError(KafkaError):
    default_message = "Broker epoch has changed."


@_code(78, "OFFSET_NOT_AVAILABLE", retriable=True)
class OffsetNotAvailableError(KafkaError):
    default_message = (
        "The leader high watermark has not caught up from a recent leader election so the offsets cannot be "
        "guaranteed to be monotonically increasing."
    )


@_code(79, "MEMBER_ID_REQUIRED")
class MemberIdRequiredError(KafkaError):
    default_message = "The group member needs to have a valid member id before actually entering a consumer group."


@_code(80, "PREFERRED_LEADER_NOT_AVAILABLE", retriable=True)
class PreferredLeaderNotAvailableError(KafkaError):
    default_message = "The preferred leader was not available."


@_code(81, "GROUP_MAX_SIZE_REACHED")
class GroupMaxSizeReachedError(KafkaError):
    default_message = "The consumer group has reached its max size."


@_code(82, "FENCED_INSTANCE_ID")
class FencedInstanceIdError(KafkaError):
    default_message = (
        "The broker rejected this static consumer since another consumer with the same group.instance.id has "
        "registered with a different member.id."
    )


@_code(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True)
class EligibleLeadersNotAvailableError(KafkaError):
    default_message = "Eligible topic partition leaders are not available."


@_code(84, "ELECTION_NOT_NEEDED", retriable=True)
class ElectionNotNeededError(KafkaError):
    default_message = "Leader election not needed for topic partition."


@_code(85, "NO_REASSIGNMENT_IN_PROGRESS")
class NoReassignmentInProgressError(KafkaError):
    default_message = "No partition reassignment is in progress."


@_code(86, "GROUP_SUBSCRIBED_TO_TOPIC")
class GroupSubscribedToTopicError(KafkaError):
    default_message = "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."


@_code(87, "INVALID_RECORD")
class InvalidRecordError(KafkaError):
    default_message = "This record has failed the validation on broker and hence will be rejected."


@_code(88, "UNSTABLE_OFFSET_COMMIT", retriable=True)
class UnstableOffsetCommitError(KafkaError):
    default_message = "There are unstable offsets that need to be cleared."


@_code(89, "THROTTLING_QUOTA_EXCEEDED", retriable=True)
class ThrottlingQuotaExceededError(KafkaError):
    default_message = "The throttling quota has been exceeded."


@_code(90, "PRODUCER_FENCED")
class ProducerFencedError(KafkaError):
    default_message = "There is a newer producer with the same transactionalId which fences the current one."


@_code(91, "RESOURCE_NOT_FOUND")
class ResourceNotFoundError(KafkaError):
    default_message = "A request illegally referred to a resource that does not exist."


@_code(92, "DUPLICATE_RESOURCE")
class DuplicateResourceError(KafkaError):
    default_message = "A request illegally referred to the same resource twice."


@_code(93, "UNACCEPTABLE_CREDENTIAL")
class UnacceptableCredentialError(KafkaError):
    default_message = "Requested credential would not meet criteria for acceptability."


@_code(94, "INCONSISTENT_VOTER_SET")
class InconsistentVoterSetError(KafkaError):
    default_message = (
        "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters"
    )


@_code(95, "INVALID_UPDATE_VERSION")
class InvalidUpdateVersionError(KafkaError):
    default_message = "The given update version was invalid."


@_code(96, "FEATURE_UPDATE_FAILED")
class FeatureUpdateFailedError(KafkaError):
    default_message = "Unable to update finalized features due to an unexpected server error."


@_code(97, "PRINCIPAL_DESERIALIZATION_FAILURE")
class PrincipalDeserializationFailureError(KafkaError):
    default_message = (
        "Request principal deserialization failed during forwarding. This indicates an internal error on the "
        "broker cluster security setup."
    )


class UnknownKafkaError(KafkaError):
    """A code this table does not know (a newer broker's); the instance carries the code it was given."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.name = f"UNKNOWN_CODE_{code}"
        super().__init__(message if message else f"Unknown Kafka error code {code}.")


# Names Kafka used before 2.8 and names the newer Kafka exceptions have.
NotLeaderOrFollowerError = NotLeaderForPartitionError
ERRORS_BY_NAME["NOT_LEADER_FOR_PARTITION"] = NotLeaderForPartitionError
CorruptMessageError = CorruptRecordError
InvalidMessageError = CorruptRecordError  # 0.8's name for code 2
TopicExistsError = TopicAlreadyExistsError
ControllerMovedError = StaleControllerEpochError
InvalidReplicationAssignmentError = InvalidReplicaAssignmentError  # kafka-python's name
RecordBatchTooLargeError = RecordListTooLargeError
GroupLoadInProgressError = CoordinatorLoadInProgressError
GroupCoordinatorNotAvailableError = CoordinatorNotAvailableError
NotCoordinatorForGroupError = NotCoordinatorError


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The exception for a non-zero wire `code`, with `message` or Kafka's default message."""
    if code == NONE:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = ERRORS.get(code)
    if cls is None:
        return UnknownKafkaError(code, message)
    return cls(message)


def raise_for(code: int, message: str | None = None) -> None:
    """Raise the exception for `code` unless it is 0 (NONE)."""
    if code != NONE:
        raise error_for(code, message)


def code_of(error: BaseException) -> int:
    """The wire code to send for `error`: its Kafka code, or UNKNOWN_SERVER_ERROR (-1) for anything else."""
    if isinstance(error, KafkaError):
        return error.code
    return UnknownServerError.code
