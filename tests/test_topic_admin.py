"""Topic creation and partition addition planners (client/kafka/topic_admin.py) and the kafka-topics pure parts.

Kafka's messages are compared verbatim (AdminZkClient, AdminUtils, LogConfig/ConfigDef, TopicCommand).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter

import pytest

from client.kafka.assignment import AdminOperationError, BrokerMetadata, parse_replica_assignment
from client.kafka.errors import (
    BrokerNotAvailableError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from client.kafka.topic_admin import (
    TOPIC_CONFIG_NAMES,
    plan_partition_addition,
    plan_topic_creation,
    validate_topic_configs,
)
from client.kafka.znodes import TopicAssignment, decode_topic
from zkraft.tools import topics as tool

BROKERS = [BrokerMetadata(1), BrokerMetadata(2), BrokerMetadata(3)]


def plan(topic: str = "foo", **kwargs: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "partitions": None,
        "replication_factor": None,
        "replica_assignment": None,
        "configs": {},
        "brokers": BROKERS,
    }
    args.update(kwargs)
    return plan_topic_creation(topic, **args)  # type: ignore[arg-type]


# ---------------------------------------------------------------- creation


@pytest.mark.parametrize(("partitions", "rf"), [(1, 1), (3, 2), (8, 3), (20, 3)])
def test_automatic_assignment_sizes_and_spread(partitions: int, rf: int) -> None:
    result = plan(partitions=partitions, replication_factor=rf, rng=random.Random(7))
    assert sorted(result.assignment) == list(range(partitions))
    for replicas in result.assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= {1, 2, 3}
    leaders = Counter(r[0] for r in result.assignment.values())
    assert max(leaders.values()) - min(leaders.values(), default=0) <= 1 or partitions < 3


def test_znodes_are_kafkas_in_kafkas_order() -> None:
    result = plan(replica_assignment={0: [1, 2], 1: [2, 3]}, configs={"retention.ms": "1000"})
    assert [path for path, _ in result.znodes] == ["/config/topics/foo", "/brokers/topics/foo"]
    assert result.znodes[0][1] == b'{"version":1,"config":{"retention.ms":"1000"}}'
    # KIP-516: 2.8's AdminZkClient gives a new topic its id in the znode (22 characters of URL-safe base64).
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", result.topic_id) and result.topic_id != "AAAAAAAAAAAAAAAAAAAAAA"
    assert result.znodes[1][1] == (
        b'{"removing_replicas":{},"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"%s","adding_replicas":{},'
        b'"version":3}' % result.topic_id.encode()
    )
    assert plan(replica_assignment={0: [1]}).topic_id != result.topic_id  # random, as Uuid.randomUuid
    assert result.assignment == {0: (1, 2), 1: (2, 3)}
    assert result.configs == {"retention.ms": "1000"}


def test_config_znode_is_written_even_without_configs() -> None:
    result = plan(partitions=1, replication_factor=1, rng=random.Random(1))
    assert result.znodes[0] == ("/config/topics/foo", b'{"version":1,"config":{}}')
    assert json.loads(result.znodes[1][1])["version"] == 3


def test_rack_aware_assignment_spreads_racks_and_can_be_disabled() -> None:
    racked = [BrokerMetadata(1, "a"), BrokerMetadata(2, "a"), BrokerMetadata(3, "b"), BrokerMetadata(4, "b")]
    result = plan(partitions=8, replication_factor=2, brokers=racked, rng=random.Random(3))
    rack = {b.id: b.rack for b in racked}
    assert all(rack[r[0]] != rack[r[1]] for r in result.assignment.values())
    partial = [BrokerMetadata(1, "a"), BrokerMetadata(2)]
    with pytest.raises(AdminOperationError, match="Not all brokers have rack information"):
        plan(partitions=2, replication_factor=2, brokers=partial)
    assert len(plan(partitions=2, replication_factor=2, brokers=partial, rack_aware=False).assignment) == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"partitions": 3, "replication_factor": 4}, InvalidReplicationFactorError,
         "Replication factor: 4 larger than available brokers: 3."),
        ({"partitions": 0, "replication_factor": 1}, InvalidPartitionsError,
         "Number of partitions must be larger than 0."),
        ({"partitions": 1, "replication_factor": 0}, InvalidReplicationFactorError,
         "Replication factor must be larger than 0."),
        ({"partitions": 1, "replication_factor": None}, InvalidRequestError,
         "Either numPartitions and replicationFactor or replicasAssignments must be set."),
        ({"partitions": 1, "replica_assignment": {0: [1]}}, InvalidRequestError,
         "Both numPartitions or replicationFactor and replicasAssignments were set. "
         "Both cannot be used at the same time."),
        ({"replica_assignment": {0: [1, 2], 1: [1]}}, InvalidReplicaAssignmentError,
         "All partitions should have the same number of replicas"),
        ({"replica_assignment": {0: [1], 2: [2]}}, InvalidReplicaAssignmentError,
         "partitions should be a consecutive 0-based integer sequence"),
        ({"replica_assignment": {0: [1, 1]}}, InvalidReplicaAssignmentError,
         "Duplicate replica assignment found: Map(0 -> List(1, 1))"),
    ],
)  # fmt: skip
def test_creation_errors_carry_kafkas_messages(kwargs: dict[str, object], error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        plan(**kwargs)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("topic", "existing", "error", "message"),
    [
        ("foo", ["foo"], TopicAlreadyExistsError, "Topic 'foo' already exists."),
        ("foo_bar", ["foo.bar"], InvalidTopicError, "Topic 'foo_bar' collides with existing topic: foo.bar"),
        ("a.b", ["a_b", "x"], InvalidTopicError, "Topic 'a.b' collides with existing topic: a_b"),
        ("bad name", [], InvalidTopicError,
         "Topic name \"bad name\" is illegal, it contains a character other than "
         "ASCII alphanumerics, '.', '_' and '-'"),
        ("..", [], InvalidTopicError, 'Topic name cannot be "." or ".."'),
        ("", [], InvalidTopicError, "Topic name is illegal, it can't be empty"),
    ],
)  # fmt: skip
def test_topic_name_checks(topic: str, existing: list[str], error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        plan(topic, partitions=1, replication_factor=1, existing_topics=existing)
    assert str(raised.value) == message


def test_a_name_with_both_separators_but_no_collision_is_fine() -> None:
    assert plan("a.b_c", partitions=1, replication_factor=1, existing_topics=["a.b-c"]).topic == "a.b_c"


# ---------------------------------------------------------------- replica assignment text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1:x", 'For input string: "x"'),
        ("1:1", "Partition replica lists may not contain duplicate entries: 1"),
        ("1:2,3", "Partition 1 has different replication factor: [3]"),
    ],
)
def test_replica_assignment_text_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as raised:
        parse_replica_assignment(text)
    assert str(raised.value) == message


def test_replica_assignment_text_parses() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}


# ---------------------------------------------------------------- partition addition


def test_partition_addition_keeps_existing_and_starts_after_them() -> None:
    current = {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assignment, znode = plan_partition_addition("foo", current, 5, None, BROKERS, rng=random.Random(1))
    assert {p: assignment[p] for p in range(3)} == current
    assert sorted(assignment) == [0, 1, 2, 3, 4]
    assert all(len(set(assignment[p])) == 2 for p in (3, 4))
    assert decode_topic("foo", znode).partitions == assignment


def test_partition_addition_keeps_topic_id_and_reassignment_state() -> None:
    current = TopicAssignment("foo", {0: (1, 2)}, adding={0: (2,)}, removing={}, topic_id="abc")
    _assignment, znode = plan_partition_addition("foo", current, 2, {1: [3, 1]}, BROKERS)
    decoded = decode_topic("foo", znode)
    assert decoded.topic_id == "abc" and decoded.adding == {0: (2,)}
    assert decoded.partitions == {0: (1, 2), 1: (3, 1)}


@pytest.mark.parametrize(
    ("total", "manual", "error", "message"),
    [
        (2, None, InvalidPartitionsError,
         "The number of partitions for a topic can only be increased. Topic foo currently has 3 partitions, "
         "2 would not be an increase."),
        (4, {3: [1]}, InvalidReplicaAssignmentError,
         "Inconsistent replication factor between partitions, partition 0 has 2 while partition 3 has 1 replicas."),
        (4, {3: [1, 9]}, BrokerNotAvailableError,
         "Some brokers specified for partition id 3 are not available. Specified brokers: 1, 9, "
         "available brokers: 1, 2, 3."),
    ],
)  # fmt: skip
def test_partition_addition_errors(total: int, manual: dict[int, list[int]] | None, error: type, message: str) -> None:
    current = {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    with pytest.raises(error) as raised:
        plan_partition_addition("foo", current, total, manual, BROKERS)
    assert str(raised.value) == message


# ---------------------------------------------------------------- topic configs


def test_every_kafka_topic_config_name_is_known() -> None:
    for name in ("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
                 "min.insync.replicas", "unclean.leader.election.enable", "max.message.bytes",
                 "delete.retention.ms", "min.cleanable.dirty.ratio", "message.timestamp.type",
                 "index.interval.bytes", "flush.messages", "flush.ms", "compression.type"):  # fmt: skip
        assert name in TOPIC_CONFIG_NAMES


def test_valid_configs_come_back_as_given() -> None:
    configs = {
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "retention.bytes": "-5",
        "min.cleanable.dirty.ratio": "0.5",
        "unclean.leader.election.enable": "TRUE",
        "compression.type": "lz4",
        "message.timestamp.type": "LogAppendTime",
        "message.format.version": "2.8-IV1",
        "leader.replication.throttled.replicas": "0:1,1:2",
        "follower.replication.throttled.replicas": "*",
    }
    assert validate_topic_configs(configs) == configs


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("x", "1", "Unknown topic config name: x"),
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ("segment.bytes", "10", "Invalid value 10 for configuration segment.bytes: Value must be at least 14"),
        ("segment.bytes", "3000000000",
         "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "2",
         "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
        ("cleanup.policy", "compact,foo",
         "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"),
        ("compression.type", "bz2", "Invalid value bz2 for configuration compression.type: String must be one of: "
         "uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("unclean.leader.election.enable", "yes",
         "Invalid value yes for configuration unclean.leader.election.enable: "
         "Expected value to be either true or false"),
        ("message.timestamp.type", "Now", "Invalid value Now for configuration message.timestamp.type: "
         "String must be one of: CreateTime, LogAppendTime"),
        ("message.format.version", "3.0",
         "Invalid value 3.0 for configuration message.format.version: Version `3.0` is not a valid version"),
    ],
)  # fmt: skip
def test_config_errors_are_kafkas(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as raised:
        validate_topic_configs({name: value})
    assert str(raised.value) == message


def test_compaction_lag_conflict() -> None:
    with pytest.raises(InvalidConfigurationError) as raised:
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert str(raised.value) == ("conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")


# ---------------------------------------------------------------- kafka-topics pure parts


def test_tool_config_parsing() -> None:
    assert tool.parse_topic_configs(["retention.ms = 1000", "cleanup.policy=compact"]) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    for bad in ("retention.ms", "a=b=c", "retention.ms="):
        with pytest.raises(tool.TopicsError, match='must be in the format "key=val"'):
            tool.parse_topic_configs([bad])


def test_topic_regex_selection() -> None:
    topics = ["b", "a", "__consumer_offsets", "abc"]
    assert tool.select_topics(topics, None, False) == ["__consumer_offsets", "a", "abc", "b"]
    assert tool.select_topics(topics, "a.*", False) == ["a", "abc"]
    assert tool.select_topics(topics, "a,b", False) == ["a", "b"]
    assert tool.select_topics(topics, None, True) == ["a", "abc", "b"]
    with pytest.raises(tool.TopicsError, match=r"is an invalid regex\.$"):
        tool.select_topics(topics, "(", False)


def test_describe_lines_are_kafka_2x() -> None:
    parts = [tool.PartitionInfo(0, 1, (1, 2), (1, 2)), tool.PartitionInfo(1, None, (2, 3), ())]
    everything = tool.DescribeFilter(False, False, False, frozenset({1, 2, 3}))
    assert list(
        tool.describe_lines("foo", parts, {"retention.ms": "1", "cleanup.policy": "compact"}, False, everything)
    ) == [
        "Topic: foo\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: retention.ms=1,cleanup.policy=compact",
        "\tTopic: foo\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: foo\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: ",
    ]
    marked = list(tool.describe_lines("foo", parts[:1], {}, True, everything))
    assert marked[0].endswith("\tConfigs: \tMarkedForDeletion: true") and marked[1].endswith(
        "\tMarkedForDeletion: true"
    )
    under = tool.DescribeFilter(True, False, False, frozenset({1, 2, 3}))
    assert list(tool.describe_lines("foo", parts, {}, False, under)) == [
        "\tTopic: foo\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: "
    ]
    unavailable = tool.DescribeFilter(False, True, False, frozenset({2, 3}))
    assert [line.split("\t")[3] for line in tool.describe_lines("foo", parts, {}, False, unavailable)] == [
        "Leader: 1",
        "Leader: none",
    ]
    overrides = tool.DescribeFilter(False, False, True, frozenset())
    assert list(tool.describe_lines("foo", parts, {}, False, overrides)) == []
    assert list(tool.describe_lines("foo", parts, {"a": "1"}, False, overrides)) == [
        "Topic: foo\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: a=1"
    ]


def test_admin_describe_prints_the_non_default_configs() -> None:
    """--bootstrap-server --describe: the Configs column holds every entry whose source is not DEFAULT_CONFIG."""
    import io
    from types import SimpleNamespace

    from client.kafka.config_resources import ConfigDescription, ConfigEntry, ConfigResourceType

    def entry(name: str, value: str, source: str) -> ConfigEntry:
        return ConfigEntry(name, value, source, source == "DEFAULT_CONFIG", False, False)

    described = {
        "a": {"cleanup.policy": entry("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG")}
        | {"segment.bytes": entry("segment.bytes", "5000", "STATIC_BROKER_CONFIG")},
        "b": {"retention.ms": entry("retention.ms", "604800000", "DEFAULT_CONFIG")},
    }
    partition = SimpleNamespace(partition=0, leader=1, replicas=[1], isr=[1])
    admin = SimpleNamespace(
        list_topics=lambda: ["a", "b"],
        describe_cluster=lambda: SimpleNamespace(brokers=[(1, "h", 1, None)]),
        describe_topics=lambda names: [SimpleNamespace(name=n, partitions=[partition]) for n in names],
        describe_configs=lambda resources: [
            ConfigDescription(ConfigResourceType.TOPIC, r.name, described[r.name]) for r in resources
        ],
    )
    for overrides, expected in (
        (
            False,
            [
                "Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,segment.bytes=5000",
                "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1",
                "Topic: b\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ",
                "\tTopic: b\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1",
            ],
        ),
        (
            True,
            ["Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,segment.bytes=5000"],
        ),
    ):
        out = io.StringIO()
        args = ["--describe", "--bootstrap-server", "h:1"] + (["--topics-with-overrides"] if overrides else [])
        tool.AdminTopicService(admin, out).describe(tool.options_from_namespace(_namespace(*args)))
        assert out.getvalue().splitlines() == expected


ONE_ACTION = "Command must include exactly one action: --list, --describe, --create, --alter or --delete"


def _namespace(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tool.configure_parser(parser)
    return parser.parse_args(list(args))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--zookeeper", "h:1"], ONE_ACTION),
        (["--list", "--describe", "--zookeeper", "h:1"], ONE_ACTION),
        (["--list"], "Only one of --bootstrap-server or --zookeeper must be specified"),
        (["--list", "--zookeeper", "h:1", "--bootstrap-server", "h:2"],
         "Only one of --bootstrap-server or --zookeeper must be specified"),
        (["--create", "--zookeeper", "h:1", "--partitions", "1", "--replication-factor", "1"],
         'Missing required argument "[topic]"'),
        (["--create", "--zookeeper", "h:1", "--topic", "t", "--replication-factor", "1"],
         'Missing required argument "[partitions]"'),
        (["--create", "--zookeeper", "h:1", "--topic", "t", "--replica-assignment", "1", "--partitions", "1"],
         'Option "[replica-assignment]" can\'t be used with option "[partitions]"'),
        (["--list", "--zookeeper", "h:1", "--partitions", "1"],
         'Option "[partitions]" can\'t be used with option "[list]"'),
        (["--alter", "--zookeeper", "h:1", "--topic", "t", "--replication-factor", "2"],
         'Option "[replication-factor]" can\'t be used with option "[alter]"'),
        (["--describe", "--zookeeper", "h:1", "--if-not-exists"],
         'Option "[if-not-exists]" can\'t be used with option "[describe]"'),
        (["--alter", "--bootstrap-server", "h:1", "--topic", "t"], 'Missing required argument "[partitions]"'),
    ],
)  # fmt: skip
def test_option_checks(args: list[str], message: str) -> None:
    with pytest.raises(tool.TopicsUsageError) as raised:
        tool.options_from_namespace(_namespace(*args))
    assert str(raised.value) == message


def test_bootstrap_create_does_not_need_partitions() -> None:
    options = tool.options_from_namespace(_namespace("--create", "--bootstrap-server", "h:1", "--topic", "t"))
    assert options.action == "create" and options.partitions is None
