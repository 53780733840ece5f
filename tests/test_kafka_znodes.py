"""Kafka's znode layout and payloads (docs/research/kafka.md §1; K28 ZkData.scala): golden bytes, round trips."""

from __future__ import annotations

import json

import pytest

from client.kafka import znodes as kz
from client.kafka.errors import InvalidTopicError
from client.kafka.znodes import TopicPartition as TP

# --- paths --------------------------------------------------------------------------------


def test_paths() -> None:
    assert kz.broker_path(3) == "/brokers/ids/3"
    assert kz.topic_path("foo") == "/brokers/topics/foo"
    assert kz.topic_partitions_path("foo") == "/brokers/topics/foo/partitions"
    assert kz.topic_partition_path("foo", 2) == "/brokers/topics/foo/partitions/2"
    assert kz.partition_state_path("foo", 2) == "/brokers/topics/foo/partitions/2/state"
    assert kz.delete_topic_path("foo") == "/admin/delete_topics/foo"
    assert kz.topic_config_path("foo") == "/config/topics/foo"
    assert kz.broker_config_path(1) == "/config/brokers/1"
    assert kz.broker_config_path("<default>") == "/config/brokers/<default>"
    assert kz.isr_change_create_path() == "/isr_change_notification/isr_change_"
    assert kz.config_change_create_path() == "/config/changes/config_change_"
    assert kz.sequence_number("/isr_change_notification/isr_change_0000000042", kz.ISR_CHANGE_PREFIX) == "0000000042"
    assert (kz.CONTROLLER_PATH, kz.CONTROLLER_EPOCH_PATH, kz.CLUSTER_ID_PATH) == (
        "/controller",
        "/controller_epoch",
        "/cluster/id",
    )
    assert kz.REASSIGN_PARTITIONS_PATH == "/admin/reassign_partitions"
    assert kz.PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"


def test_persistent_paths_as_kafka_creates_them_at_startup() -> None:
    assert set(kz.PERSISTENT_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    }


# --- /controller, /controller_epoch ----------------------------------------------------------


def test_controller_golden_and_round_trip() -> None:
    data = kz.encode_controller(2, 1500000000000)
    assert data == b'{"version":1,"brokerid":2,"timestamp":"1500000000000"}'
    assert kz.decode_controller(data) == kz.ControllerRegistration(2, 1500000000000)
    assert kz.decode_controller(b'{"version":1,"brokerid":7}').broker_id == 7


def test_controller_epoch_is_plain_text() -> None:
    assert kz.encode_controller_epoch(5) == b"5"
    assert kz.decode_controller_epoch(b"5") == 5
    with pytest.raises(kz.ZnodeDataError, match="/controller_epoch"):
        kz.decode_controller_epoch(b'{"epoch":5}')


# --- /brokers/ids/<id> --------------------------------------------------------------------------


def _plain(host: str = "host1", port: int = 9092) -> kz.EndPoint:
    return kz.EndPoint(host, port, "PLAINTEXT", "PLAINTEXT")


def test_broker_v4_golden_bytes_in_kafkas_key_order() -> None:
    info = kz.BrokerRegistration(0, (_plain(),), None, -1, 4, 1500000000000)
    assert kz.encode_broker(info) == (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://host1:9092"],'
        b'"jmx_port":-1,"host":"host1","timestamp":"1500000000000","port":9092,"version":4}'
    )


def test_broker_v4_with_rack_and_two_listeners() -> None:
    endpoints = (
        kz.EndPoint("h", 9093, "CLIENT", "SSL"),
        kz.EndPoint("h", 9092, "REPLICATION", "PLAINTEXT"),
    )
    info = kz.BrokerRegistration(1, endpoints, "dc1", 9999, 4, 7)
    data = kz.encode_broker(info)
    assert data == (
        b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
        b'"endpoints":["CLIENT://h:9093","REPLICATION://h:9092"],"rack":"dc1","jmx_port":9999,'
        b'"host":"h","timestamp":"7","port":9092,"version":4}'
    )
    assert kz.decode_broker(1, data) == info


def test_broker_v5_features_round_trip() -> None:
    info = kz.BrokerRegistration(2, (_plain(),), "r1", -1, 5, 11, {"metadata.version": kz.SupportedVersionRange(1, 3)})
    data = kz.encode_broker(info)
    obj = json.loads(data)
    assert list(obj) == [
        "listener_security_protocol_map",
        "endpoints",
        "rack",
        "jmx_port",
        "features",
        "host",
        "timestamp",
        "port",
        "version",
    ]
    assert obj["features"] == {"metadata.version": {"min_version": 1, "max_version": 3}}
    assert kz.decode_broker(2, data) == info


def test_broker_without_plaintext_listener_has_null_host_and_port_minus_one() -> None:
    info = kz.BrokerRegistration(3, (kz.EndPoint("h", 9093, "SSL", "SSL"),), version=5, timestamp_ms=1)
    obj = json.loads(kz.encode_broker(info))
    assert obj["host"] is None and obj["port"] == -1
    assert kz.decode_broker(3, kz.encode_broker(info)) == info


def test_broker_v2_has_no_rack_or_listener_map() -> None:
    info = kz.BrokerRegistration(4, (_plain(),), "dc1", -1, 2, 5)
    obj = json.loads(kz.encode_broker(info))
    assert set(obj) == {"version", "host", "port", "endpoints", "jmx_port", "timestamp"}


def test_broker_decode_v1_from_0_8() -> None:
    data = b'{"jmx_port":-1,"timestamp":"1400000000000","host":"old","version":1,"port":9092}'
    info = kz.decode_broker(0, data)
    assert info.endpoints == (kz.EndPoint("old", 9092, "PLAINTEXT", "PLAINTEXT"),)
    assert info.version == 1 and info.rack is None and info.timestamp_ms == 1400000000000


def test_broker_decode_v3_endpoints_without_listener_map_use_protocol_names() -> None:
    data = (
        b'{"version":3,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1",'
        b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"],"rack":"dc1"}'
    )
    info = kz.decode_broker(9, data)
    assert [e.security_protocol for e in info.endpoints] == ["PLAINTEXT", "SSL"]
    assert info.rack == "dc1"


def test_broker_decode_ipv6_and_wildcard_endpoints() -> None:
    assert kz.parse_endpoint("PLAINTEXT://[::1]:9092") == kz.EndPoint("::1", 9092, "PLAINTEXT", "PLAINTEXT")
    assert kz.parse_endpoint("plaintext://:9092") == kz.EndPoint(None, 9092, "PLAINTEXT", "PLAINTEXT")
    assert kz.EndPoint("::1", 9092, "PLAINTEXT", "PLAINTEXT").connection_string == "PLAINTEXT://[::1]:9092"
    assert kz.EndPoint(None, 9092, "PLAINTEXT", "PLAINTEXT").connection_string == "PLAINTEXT://:9092"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"", "no data"),
        (b"[1,2]", "not a JSON object"),
        (b'{"version":0,"jmx_port":-1}', "Unsupported version of broker registration"),
        (b'{"version":4,"jmx_port":-1,"endpoints":["garbage"]}', "Unable to parse garbage to a broker endpoint"),
        (b'{"version":4,"jmx_port":-1,"endpoints":["X://h:1"],"listener_security_protocol_map":{}}', "listener X"),
        (b'{"version":4,"endpoints":[]}', "'jmx_port' is missing"),
    ],
)
def test_broker_decode_errors_name_the_path(data: bytes, fragment: str) -> None:
    with pytest.raises(kz.ZnodeDataError) as info:
        kz.decode_broker(5, data)
    message = str(info.value)
    assert message.startswith("bad data in /brokers/ids/5: ")
    assert fragment in message
    assert "\n" not in message


# --- /brokers/topics/<t> ------------------------------------------------------------------------


def test_topic_v1_golden() -> None:
    assignment = kz.TopicAssignment("t", {1: (2, 3), 0: (1, 2)})
    assert kz.encode_topic(assignment, version=1) == b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'


def test_topic_v2_golden() -> None:
    assignment = kz.TopicAssignment("t", {0: (4, 5, 1, 2)}, adding={0: (4, 5)}, removing={0: (1, 2)})
    assert kz.encode_topic(assignment, version=2) == (
        b'{"version":2,"partitions":{"0":[4,5,1,2]},"adding_replicas":{"0":[4,5]},"removing_replicas":{"0":[1,2]}}'
    )


def test_topic_v3_golden_with_and_without_topic_id() -> None:
    plain = kz.TopicAssignment("t", {0: (1,)})
    assert kz.encode_topic(plain) == (
        b'{"removing_replicas":{},"partitions":{"0":[1]},"adding_replicas":{},"version":3}'
    )
    with_id = kz.TopicAssignment("t", {0: (1,)}, topic_id="kAu0Ft3oSOuFGd6lZhbHWQ")
    assert kz.encode_topic(with_id) == (
        b'{"removing_replicas":{},"partitions":{"0":[1]},"topic_id":"kAu0Ft3oSOuFGd6lZhbHWQ",'
        b'"adding_replicas":{},"version":3}'
    )
    assert kz.decode_topic("t", kz.encode_topic(with_id)) == with_id


@pytest.mark.parametrize("version", [1, 2, 3])
def test_topic_round_trip_every_version(version: int) -> None:
    moving = version > 1
    assignment = kz.TopicAssignment(
        "orders",
        {0: (1, 2), 1: (2, 3), 10: (3, 1)},
        adding={1: (3,)} if moving else {},
        removing={1: (4,)} if moving else {},
    )
    assert kz.decode_topic("orders", kz.encode_topic(assignment, version)) == assignment


def test_topic_ids_are_kafkas_uuid_strings() -> None:
    """Uuid.toString: 16 bytes, URL-safe base64 without padding (22 characters); the protocol carries the bytes."""
    import random
    import uuid

    ids = {kz.new_topic_id(random.Random(seed)) for seed in range(50)}
    assert len(ids) == 50 and all(len(i) == 22 and "=" not in i for i in ids)
    assert kz.new_topic_id(random.Random(3)) == kz.new_topic_id(random.Random(3))  # the rng decides
    assert kz.topic_id_uuid("AAECAwQFBgcICQoLDA0ODw") == uuid.UUID(bytes=bytes(range(16)))
    assert kz.topic_id_uuid("-_-_-_-_-_-_-_-_-_-_-w") == uuid.UUID(bytes=b"\xfb\xff\xbf" * 5 + b"\xfb")
    assert [kz.topic_id_uuid(bad) for bad in (None, "", "short", "!" * 22)] == [None] * 4


def test_topic_encode_drops_empty_adding_and_removing_lists() -> None:
    assignment = kz.TopicAssignment("t", {0: (1,), 1: (2,)}, adding={0: (), 1: (3,)})
    obj = json.loads(kz.encode_topic(assignment, 2))
    assert obj["adding_replicas"] == {"1": [3]} and obj["removing_replicas"] == {}


def test_topic_decode_tolerates_missing_partitions_and_hash_ordered_keys() -> None:
    assert kz.decode_topic("t", b'{"version":1}').partitions == {}
    decoded = kz.decode_topic("t", b'{"version":1,"partitions":{"2":[1],"1":[3],"0":[2]}}')
    assert list(decoded.partitions.items()) == [(0, (2,)), (1, (3,)), (2, (1,))]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"{", "not JSON"),
        (b'{"version":9,"partitions":{}}', "unsupported version 9"),
        (b'{"version":1,"partitions":{"x":[1]}}', "partition key 'x'"),
        (b'{"version":1,"partitions":{"0":[1,"2"]}}', "expected a list of integers"),
        (b'{"partitions":{}}', "'version' is missing"),
    ],
)
def test_topic_decode_errors(data: bytes, fragment: str) -> None:
    with pytest.raises(kz.ZnodeDataError) as info:
        kz.decode_topic("foo", data)
    assert str(info.value).startswith("bad data in /brokers/topics/foo: ")
    assert fragment in str(info.value)


# --- partition state -------------------------------------------------------------------------------


def test_partition_state_golden_and_round_trip() -> None:
    state = kz.PartitionState(leader=1, leader_epoch=7, isr=(1, 2), controller_epoch=3)
    data = kz.encode_partition_state(state)
    assert data == b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}'
    assert kz.decode_partition_state("t", 0, data) == state


def test_partition_state_no_leader_and_other_key_orders() -> None:
    data = b'{"version":1,"leader":-1,"leader_epoch":0,"controller_epoch":1,"isr":[]}'
    assert kz.decode_partition_state("t", 0, data) == kz.PartitionState(kz.NO_LEADER, 0, (), 1)


def test_partition_state_errors_name_the_path() -> None:
    with pytest.raises(kz.ZnodeDataError, match=r"^bad data in /brokers/topics/t/partitions/3/state: 'isr'"):
        kz.decode_partition_state("t", 3, b'{"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":"1,2"}')


# --- admin and notifications ------------------------------------------------------------------


def test_reassignment_golden_and_round_trip() -> None:
    plan = {TP("t", 0): [4, 5, 6], TP("u", 1): [1]}
    data = kz.encode_reassignment(plan)
    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]},'
        b'{"topic":"u","partition":1,"replicas":[1]}]}'
    )
    assert kz.decode_reassignment(data) == {TP("t", 0): (4, 5, 6), TP("u", 1): (1,)}


def test_reassignment_decode_accepts_log_dirs_and_rejects_garbage() -> None:
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any"]}]}'
    assert kz.decode_reassignment(data) == {TP("t", 0): (1,)}
    with pytest.raises(kz.ZnodeDataError, match="^bad data in /admin/reassign_partitions: 'partitions'"):
        kz.decode_reassignment(b'{"version":1}')
    with pytest.raises(kz.ZnodeDataError, match="'partition'"):
        kz.decode_reassignment(b'{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}')


def test_preferred_replica_election_golden_and_round_trip() -> None:
    data = kz.encode_preferred_replica_election([TP("t", 0), TP("t", 1)])
    assert data == b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}'
    assert kz.decode_preferred_replica_election(data) == (TP("t", 0), TP("t", 1))


def test_isr_change_golden_and_round_trip() -> None:
    data = kz.encode_isr_change([TP("t", 0)])
    assert data == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    path = "/isr_change_notification/isr_change_0000000001"
    assert kz.decode_isr_change(data, path) == frozenset({TP("t", 0)})
    with pytest.raises(kz.ZnodeDataError, match=path):
        kz.decode_isr_change(b"junk", path)


def test_delete_topic_marker_has_no_data() -> None:
    assert kz.DELETE_TOPIC_DATA == b""


def test_log_dir_event() -> None:
    data = kz.encode_log_dir_event(3)
    assert data == b'{"version":1,"broker":3,"event":1}'
    assert kz.decode_log_dir_event(data) == 3


# --- config ----------------------------------------------------------------------------------------


def test_config_golden_and_round_trip() -> None:
    data = kz.encode_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert data == b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'
    assert kz.decode_config(data) == {"retention.ms": "1000", "cleanup.policy": "compact"}


def test_config_decode_tolerates_empty_and_rejects_non_strings() -> None:
    assert kz.decode_config(None) == {}
    assert kz.decode_config(b"") == {}
    assert kz.decode_config(b'{"version":1}') == {}
    with pytest.raises(kz.ZnodeDataError, match="/config/topics/t"):
        kz.decode_config(b'{"version":1,"config":{"a":1}}', kz.topic_config_path("t"))
    with pytest.raises(ValueError):
        kz.encode_config({"retention.ms": 1000})  # type: ignore[dict-item]


def test_config_change_v2_golden_and_older_versions() -> None:
    data = kz.encode_config_change("topics", "t")
    assert data == b'{"version":2,"entity_path":"topics/t"}'
    assert kz.decode_config_change(data) == kz.ConfigChange("topics", "t")
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"foo"}'
    assert kz.decode_config_change(v1) == kz.ConfigChange("topics", "foo")
    assert kz.decode_config_change(b'"foo"') == kz.ConfigChange("topics", "foo")  # 0.8.2
    nested = kz.decode_config_change(b'{"version":2,"entity_path":"users/alice/clients/c1"}')
    assert nested == kz.ConfigChange("users", "alice/clients/c1")
    assert nested.entity_path == "users/alice/clients/c1"
    with pytest.raises(kz.ZnodeDataError, match="entity_path"):
        kz.decode_config_change(b'{"version":2,"entity_path":"topics"}')
    with pytest.raises(kz.ZnodeDataError, match="unsupported version 3"):
        kz.decode_config_change(b'{"version":3}')


# --- cluster id --------------------------------------------------------------------------------------


def test_cluster_id_version_is_a_string() -> None:
    data = kz.encode_cluster_id("kAu0Ft3oSOuFGd6lZhbHWQ")
    assert data == b'{"version":"1","id":"kAu0Ft3oSOuFGd6lZhbHWQ"}'
    assert kz.decode_cluster_id(data) == "kAu0Ft3oSOuFGd6lZhbHWQ"
    with pytest.raises(kz.ZnodeDataError, match="^bad data in /cluster/id: 'id' is missing"):
        kz.decode_cluster_id(b'{"version":"1"}')


# --- topic names -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["foo", "a.b_c-D9", "x" * 249, "__consumer_offsets", "..."])
def test_valid_topic_names(name: str) -> None:
    kz.validate_topic_name(name)
    assert kz.is_valid_topic_name(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("..", 'Topic name cannot be "." or ".."'),
        ("x" * 250, "Topic name is illegal, it can't be longer than 249 characters, topic name: " + "x" * 250),
        (
            "a b",
            "Topic name \"a b\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            "t/1",
            "Topic name \"t/1\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        ),
        ("é", "Topic name \"é\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
    ],
)
def test_invalid_topic_names_have_kafkas_messages(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        kz.validate_topic_name(name)
    assert str(info.value) == message
    assert info.value.code == 17
    assert not kz.is_valid_topic_name(name)


def test_collision_helpers() -> None:
    assert kz.has_collision_chars("a.b") and kz.has_collision_chars("a_b") and not kz.has_collision_chars("a-b")
    assert kz.topics_collide("a.b", "a_b") and not kz.topics_collide("a.b", "a-b")
    assert kz.is_internal_topic("__consumer_offsets") and not kz.is_internal_topic("orders")
