"""Kafka error table: codes, names, messages and retriable flags as in Kafka 2.8's Errors.java."""

from __future__ import annotations

import pytest

from client.kafka import errors as ke

# docs/research/kafka.md §3.7: every code listed there, with Kafka's enum name.
RESEARCH_CODES = {
    -1: "UNKNOWN_SERVER_ERROR",
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE",
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE",
    10: "MESSAGE_TOO_LARGE",
    11: "STALE_CONTROLLER_EPOCH",
    12: "OFFSET_METADATA_TOO_LARGE",
    13: "NETWORK_EXCEPTION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    21: "INVALID_REQUIRED_ACKS",
    22: "ILLEGAL_GENERATION",
    23: "INCONSISTENT_GROUP_PROTOCOL",
    24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID",
    26: "INVALID_SESSION_TIMEOUT",
    27: "REBALANCE_IN_PROGRESS",
    28: "INVALID_COMMIT_OFFSET_SIZE",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR",
    39: "INVALID_REPLICA_ASSIGNMENT",
    40: "INVALID_CONFIG",
    41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST",
    56: "KAFKA_STORAGE_ERROR",
    60: "REASSIGNMENT_IN_PROGRESS",
    73: "TOPIC_DELETION_DISABLED",
    74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH",
    77: "STALE_BROKER_EPOCH",
    79: "MEMBER_ID_REQUIRED",
    80: "PREFERRED_LEADER_NOT_AVAILABLE",
    82: "FENCED_INSTANCE_ID",
    83: "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS",
    95: "INVALID_UPDATE_VERSION",
}


@pytest.mark.parametrize(("code", "name"), sorted(RESEARCH_CODES.items()))
def test_every_research_code_has_a_class_with_kafkas_name(code: int, name: str) -> None:
    cls = ke.ERRORS[code]
    assert cls.code == code
    assert cls.name == name
    assert ke.ERRORS_BY_NAME[name] is cls
    assert issubclass(cls, ke.KafkaError)
    assert cls.default_message and "\n" not in cls.default_message


def test_codes_are_contiguous_from_minus_one_to_97_except_none() -> None:
    assert sorted(ke.ERRORS) == [-1, *range(1, 98)]
    assert len({cls.__name__ for cls in ke.ERRORS.values()}) == len(ke.ERRORS)


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (ke.UnknownTopicOrPartitionError, 3),
        (ke.NotLeaderForPartitionError, 6),
        (ke.NotLeaderOrFollowerError, 6),
        (ke.OffsetOutOfRangeError, 1),
        (ke.CorruptRecordError, 2),
        (ke.NotEnoughReplicasError, 19),
        (ke.InvalidReplicationFactorError, 38),
        (ke.TopicAlreadyExistsError, 36),
        (ke.InvalidTopicError, 17),
        (ke.StaleControllerEpochError, 11),
        (ke.FencedLeaderEpochError, 74),
        (ke.InvalidRequiredAcksError, 21),
        (ke.NotControllerError, 41),
    ],
)
def test_kafka_python_style_class_names(cls: type[ke.KafkaError], code: int) -> None:
    assert cls.code == code


def test_not_leader_for_partition_alias() -> None:
    assert ke.ERRORS_BY_NAME["NOT_LEADER_FOR_PARTITION"] is ke.NotLeaderForPartitionError
    assert ke.NotLeaderOrFollowerError is ke.NotLeaderForPartitionError


@pytest.mark.parametrize(
    ("code", "retriable"),
    [
        (1, False),
        (2, True),
        (3, True),
        (5, True),
        (6, True),
        (7, True),
        (8, False),
        (11, False),
        (17, False),
        (19, True),
        (20, True),
        (21, False),
        (36, False),
        (38, False),
        (41, True),
        (56, True),
        (74, True),
        (75, True),
        (77, False),
        (-1, False),
    ],
)
def test_retriable_flags_follow_kafkas_exception_hierarchy(code: int, retriable: bool) -> None:
    assert ke.ERRORS[code].retriable is retriable


def test_default_messages_are_kafkas() -> None:
    assert str(ke.error_for(3)) == "This server does not host this topic-partition."
    assert str(ke.error_for(11)) == "The controller moved to another broker."
    assert str(ke.error_for(19)) == "Messages are rejected since there are fewer in-sync replicas than required."
    assert str(ke.error_for(38)) == "Replication factor is below 1 or larger than the number of available brokers."
    assert str(ke.error_for(74)) == "The leader epoch in the request is older than the epoch on the broker."
    assert str(ke.error_for(1)) == "The requested offset is not within the range of offsets maintained by the server."


def test_error_for_with_message_and_one_line() -> None:
    err = ke.error_for(36, "Topic 'foo' already exists.\n")
    assert isinstance(err, ke.TopicAlreadyExistsError)
    assert str(err) == "Topic 'foo' already exists."
    assert err.message == str(err)
    assert str(ke.UnknownTopicOrPartitionError("a\n b")) == "a b"


def test_error_for_unknown_code_and_none() -> None:
    err = ke.error_for(999)
    assert isinstance(err, ke.UnknownKafkaError)
    assert err.code == 999 and "999" in str(err)
    with pytest.raises(ValueError):
        ke.error_for(0)


def test_raise_for_and_code_of() -> None:
    ke.raise_for(0)
    with pytest.raises(ke.NotLeaderForPartitionError):
        ke.raise_for(6, "not the leader for foo-0")
    assert ke.code_of(ke.FencedLeaderEpochError()) == 74
    assert ke.code_of(RuntimeError("boom")) == -1


def test_subclass_instances_share_the_base() -> None:
    with pytest.raises(ke.KafkaError) as info:
        raise ke.InvalidReplicationFactorError("Replication factor: 4 larger than available brokers: 3.")
    assert info.value.code == 38 and not info.value.retriable
