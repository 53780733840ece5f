"""The topic and config admin APIs' handlers (broker/kafka_api/admin.py), called directly with kio requests.

An in-memory ZooKeeper stands in for the quorum; each response is encoded with kio for the version it
answers, as the listener would send it. The cluster tests (test_kafka_wire_admin.py) run the same APIs
through real Kafka clients.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import io
import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

import broker.kafka_api  # noqa: F401  (fills the registry)
from broker.admin_manager import AdminManager
from broker.config import from_properties
from broker.config_describe import ConfigSource
from broker.kafka_api.registry import API_SPECS, KafkaRequestContext
from broker.log_manager import LogManager
from broker.metadata_cache import MetadataCache
from client.zk.exceptions import NodeExistsError, NoNodeError

MODULES = {
    19: "create_topics",
    20: "delete_topics",
    32: "describe_configs",
    33: "alter_configs",
    35: "describe_log_dirs",
    37: "create_partitions",
    44: "incremental_alter_configs",
}


class MemoryZk:
    """The slice of AsyncZkClient the admin manager uses, over a dict of path -> data."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.sequence = 0

    async def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], SimpleNamespace(version=0)

    async def exists(self, path: str) -> Any:
        return SimpleNamespace(version=0) if path in self.nodes else None

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        if path not in self.nodes:
            raise NoNodeError(path)
        self.nodes[path] = data
        return SimpleNamespace(version=1)

    async def create(self, path: str, data: bytes = b"", makepath: bool = False, sequence: bool = False) -> str:
        if sequence:
            path, self.sequence = f"{path}{self.sequence:010d}", self.sequence + 1
        if path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = data
        return path

    async def get_children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        children = {p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)}
        if not children and path not in self.nodes:
            raise NoNodeError(path)
        return sorted(children)


def _registration(broker_id: int) -> bytes:
    return json.dumps(
        {
            "version": 4,
            "host": "127.0.0.1",
            "port": 9090 + broker_id,
            "jmx_port": -1,
            "timestamp": "0",
            "endpoints": [f"PLAINTEXT://127.0.0.1:{9090 + broker_id}"],
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        }
    ).encode()


class NullLogger:
    def __getattr__(self, _name: str) -> Any:
        return lambda *args, **kwargs: None


@pytest.fixture
def broker(tmp_path: Path) -> SimpleNamespace:
    zk = MemoryZk()
    for broker_id in (1, 2, 3):
        zk.nodes[f"/brokers/ids/{broker_id}"] = _registration(broker_id)
    config = from_properties(
        {"broker.id": "1", "log.dirs": str(tmp_path / "logs"), "log.segment.bytes": "2000000", "num.partitions": "2"}
    )
    admin = AdminManager(config, zk, MetadataCache(1), NullLogger())  # type: ignore[arg-type]
    logs = LogManager(config.directories, __import__("broker.server").server.default_log_config(config), NullLogger())
    replicas = SimpleNamespace(logs=logs, partitions={})
    service = SimpleNamespace(admin=admin, replicas=replicas, metadata_cache=admin.metadata)
    return SimpleNamespace(zk=zk, config=config, service=service)


def _call(broker: SimpleNamespace, api_key: int, version: int, request: Any) -> Any:
    """Run the handler, then encode and decode its response with kio as the listener would."""
    module = importlib.import_module(f"kio.schema.{MODULES[api_key]}.v{version}.response")
    response_type = next(v for v in vars(module).values() if getattr(v, "__type__", None) == EntityType.response)
    ctx = KafkaRequestContext(broker.service, api_key, version, 1, "test", "127.0.0.1", "PLAINTEXT", response_type)
    response = asyncio.run(API_SPECS[api_key].handler(request, ctx))
    buffer = io.BytesIO()
    entity_writer(response_type)(buffer, response)
    decoded, _ = entity_reader(response_type)(buffer.getvalue(), 0)
    return decoded


def _request(api_key: int, version: int, name: str) -> Any:
    return vars(importlib.import_module(f"kio.schema.{MODULES[api_key]}.v{version}.request"))[name]


def _create(
    broker: SimpleNamespace,
    version: int,
    topics: list[dict[str, Any]],
    validate_only: bool = False,
    timeout_ms: int = 0,
) -> Any:
    module = importlib.import_module(f"kio.schema.create_topics.v{version}.request")
    import datetime

    request = module.CreateTopicsRequest(
        topics=tuple(
            module.CreatableTopic(
                name=t["name"],
                num_partitions=t.get("partitions", -1),
                replication_factor=t.get("rf", -1),
                assignments=tuple(
                    module.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(r))
                    for p, r in t.get("assignment", {}).items()
                ),
                configs=tuple(module.CreatableTopicConfig(name=k, value=v) for k, v in t.get("configs", {}).items()),
            )
            for t in topics
        ),
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        validate_only=validate_only,
    )
    return _call(broker, 19, version, request)


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_with_configs_in_each_version(broker: SimpleNamespace, version: int) -> None:
    response = _create(broker, version, [{"name": "t", "partitions": 3, "rf": 2, "configs": {"retention.ms": "5000"}}])
    [result] = response.topics
    assert (result.name, int(result.error_code)) == ("t", 0)
    assert json.loads(broker.zk.nodes["/config/topics/t"])["config"] == {"retention.ms": "5000"}
    assert len(json.loads(broker.zk.nodes["/brokers/topics/t"])["partitions"]) == 3
    if version >= 5:  # KIP-525: the created topic's shape and configs
        assert (result.num_partitions, result.replication_factor) == (3, 2)
        configs = {c.name: c for c in result.configs}
        assert configs["retention.ms"].value == "5000"
        assert configs["retention.ms"].config_source == ConfigSource.TOPIC_CONFIG
        assert configs["segment.bytes"].value == "2000000"
        assert configs["segment.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        assert configs["cleanup.policy"].config_source == ConfigSource.DEFAULT_CONFIG


def test_create_topics_v7_answers_the_topic_id_written_in_the_topic_znode(broker: SimpleNamespace) -> None:
    """KIP-516: the new topic's id is in /brokers/topics/<t> (v3 "topic_id") and in the v7 answer, the same 16
    bytes; a topic only validated, or refused, has none (2.8 reads the znode back and finds nothing)."""
    [created] = _create(broker, 7, [{"name": "ided", "partitions": 1, "rf": 1}]).topics
    written = json.loads(broker.zk.nodes["/brokers/topics/ided"])["topic_id"]
    assert created.topic_id == uuid.UUID(bytes=base64.urlsafe_b64decode(written + "=="))
    [checked] = _create(broker, 7, [{"name": "checked", "partitions": 1, "rf": 1}], validate_only=True).topics
    [refused] = _create(broker, 7, [{"name": "ided", "partitions": 1, "rf": 1}]).topics
    assert (int(checked.error_code), checked.topic_id) == (0, None)
    assert (int(refused.error_code), refused.topic_id) == (36, None)  # TOPIC_ALREADY_EXISTS
    [other] = _create(broker, 7, [{"name": "other", "partitions": 1, "rf": 1}]).topics
    assert other.topic_id not in (None, created.topic_id)


def test_create_topics_defaults_errors_and_validate_only(broker: SimpleNamespace) -> None:
    response = _create(
        broker,
        7,
        [
            {"name": "defaults"},
            {"name": "too-many", "partitions": 1, "rf": 4},
            {"name": "bad-config", "partitions": 1, "rf": 1, "configs": {"retention.ms": "soon"}},
            {"name": "unknown-config", "partitions": 1, "rf": 1, "configs": {"no.such": "1"}},
            {"name": "bad/name", "partitions": 1, "rf": 1},
            {"name": "dry", "partitions": 1, "rf": 1},
        ][:5],
    )
    by_name = {r.name: r for r in response.topics}
    assert int(by_name["defaults"].error_code) == 0 and by_name["defaults"].num_partitions == 2  # num.partitions
    assert (int(by_name["too-many"].error_code), by_name["too-many"].error_message) == (
        38,
        "Replication factor: 4 larger than available brokers: 3.",
    )
    assert int(by_name["bad-config"].error_code) == 40
    assert (
        by_name["bad-config"].error_message
        == "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    )
    assert (int(by_name["unknown-config"].error_code), by_name["unknown-config"].error_message) == (
        40,
        "Unknown topic config name: no.such",
    )
    assert int(by_name["bad/name"].error_code) == 17
    again = _create(broker, 7, [{"name": "defaults"}])
    assert (int(again.topics[0].error_code), again.topics[0].error_message) == (36, "Topic 'defaults' already exists.")
    dry = _create(broker, 7, [{"name": "dry", "partitions": 4, "rf": 3}], validate_only=True)
    assert int(dry.topics[0].error_code) == 0 and dry.topics[0].num_partitions == 4
    assert "/brokers/topics/dry" not in broker.zk.nodes


def test_create_topics_refuses_a_request_kafka_refuses(broker: SimpleNamespace) -> None:
    response = _create(broker, 7, [{"name": "dup", "partitions": 1}, {"name": "dup", "partitions": 1}])
    assert {(r.name, int(r.error_code)) for r in response.topics} == {("dup", 42)}
    both = _create(broker, 7, [{"name": "both", "partitions": 1, "assignment": {0: [1]}}])
    assert int(both.topics[0].error_code) == 42
    assert "Both cannot be used at the same time." in both.topics[0].error_message


def _describe(broker: SimpleNamespace, version: int, resources: list[tuple[int, str, Any]], **flags: bool) -> Any:
    module = importlib.import_module(f"kio.schema.describe_configs.v{version}.request")
    request = module.DescribeConfigsRequest(
        resources=tuple(
            module.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
            for t, n, k in resources
        ),
        **flags,
    )
    return _call(broker, 32, version, request)


def _alter(
    broker: SimpleNamespace, resources: list[tuple[int, str, dict[str, Any]]], validate_only: bool = False
) -> Any:
    module = importlib.import_module("kio.schema.alter_configs.v2.request")
    request = module.AlterConfigsRequest(
        resources=tuple(
            module.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=tuple(module.AlterableConfig(name=k, value=v) for k, v in c.items()),
            )
            for t, n, c in resources
        ),
        validate_only=validate_only,
    )
    return _call(broker, 33, 2, request)


def _incremental(broker: SimpleNamespace, resource: tuple[int, str], ops: list[tuple[str, int, str | None]]) -> Any:
    module = importlib.import_module("kio.schema.incremental_alter_configs.v1.request")
    request = module.IncrementalAlterConfigsRequest(
        resources=(
            module.AlterConfigsResource(
                resource_type=resource[0],
                resource_name=resource[1],
                configs=tuple(module.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops),
            ),
        ),
        validate_only=False,
    )
    return _call(broker, 44, 1, request)


def _configs(response: Any) -> dict[str, Any]:
    [result] = response.results
    assert int(result.error_code) == 0, result.error_message
    return {c.name: c for c in result.configs}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_topic_configs_lists_every_log_config_with_its_source(broker: SimpleNamespace, version: int) -> None:
    _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 1, "configs": {"cleanup.policy": "compact"}}])
    flags = {"include_synonyms": True} | ({"include_documentation": True} if version >= 3 else {})
    configs = _configs(_describe(broker, version, [(2, "t", None)], **flags))
    assert len(configs) == 26  # every topic config of Kafka 2.8's LogConfig
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only) == ("compact", ConfigSource.TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", ConfigSource.TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    ]
    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source) == ("2000000", ConfigSource.STATIC_BROKER_CONFIG)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("604800000", 5)
    if version >= 3:
        assert configs["segment.bytes"].config_type == 3  # INT
        assert configs["segment.bytes"].documentation.startswith("This configuration controls the segment file size")
    only = _configs(_describe(broker, version, [(2, "t", ("retention.bytes",))]))
    assert list(only) == ["retention.bytes"] and only["retention.bytes"].synonyms == ()


def test_describe_configs_errors_and_broker_resources(broker: SimpleNamespace) -> None:
    response = _describe(
        broker, 4, [(2, "missing", None), (4, "2", None), (4, "1", ("log.segment.bytes",)), (4, "", None)]
    )
    missing, other_broker, this_broker, default = response.results
    assert int(missing.error_code) == 3 and missing.configs == ()
    assert int(other_broker.error_code) == 42
    assert other_broker.error_message == "Unexpected broker id, expected 1 or empty string, but received 2"
    [segment] = this_broker.configs
    assert (segment.value, segment.config_source, segment.read_only) == ("2000000", 4, False)
    assert int(default.error_code) == 0 and default.configs == ()


def test_describe_configs_documents_every_config_when_asked(broker: SimpleNamespace) -> None:
    """include_documentation (v3+): Kafka 2.8's doc (its first sentence) on every topic and broker config, null
    for the dynamic-only throttle rates (KafkaConfig.documentationOf has no key for them); null when not asked."""
    _create(broker, 7, [{"name": "documented", "partitions": 1, "rf": 1}])
    [rate] = _incremental(broker, (4, "1"), [("follower.replication.throttled.rate", 0, "1000")]).responses
    assert int(rate.error_code) == 0
    response = _describe(broker, 4, [(2, "documented", None), (4, "1", None)], include_documentation=True)
    topic, this_broker = (_configs(SimpleNamespace(results=[r])) for r in response.results)
    assert all(c.documentation for c in topic.values())
    assert topic["retention.ms"].documentation == (
        "This configuration controls the maximum time we will retain a log before we will discard old log "
        'segments to free up space if we are using the "delete" retention policy.'
    )
    assert this_broker["follower.replication.throttled.rate"].documentation is None
    undocumented = [n for n, c in this_broker.items() if not c.documentation]
    assert undocumented == ["follower.replication.throttled.rate"]
    assert this_broker["log.retention.hours"].documentation == (
        "The number of hours to keep a log file before deleting it (in hours), tertiary to log.retention.ms property"
    )
    assert this_broker["num.partitions"].documentation == "The default number of log partitions per topic"
    plain = _describe(broker, 4, [(2, "documented", None), (4, "1", None)])
    assert all(c.documentation is None for r in plain.results for c in r.configs)


def test_alter_configs_replaces_the_whole_override_set(broker: SimpleNamespace) -> None:
    _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 1, "configs": {"cleanup.policy": "compact"}}])
    [ok] = _alter(broker, [(2, "t", {"retention.ms": "1000"})]).responses
    assert int(ok.error_code) == 0
    assert json.loads(broker.zk.nodes["/config/topics/t"])["config"] == {"retention.ms": "1000"}
    change = [p for p in broker.zk.nodes if p.startswith("/config/changes/config_change_")]
    assert json.loads(broker.zk.nodes[change[-1]]) == {"version": 2, "entity_path": "topics/t"}
    configs = _configs(_describe(broker, 4, [(2, "t", None)]))
    assert configs["cleanup.policy"].config_source == ConfigSource.DEFAULT_CONFIG
    responses = _alter(
        broker,
        [
            (2, "t", {"retention.ms": "soon"}),
            (2, "t2", {"retention.ms": "1"}),
            (2, "t", {"x": "1"}),
            (4, "1", {"log.retention.ms": "1"}),
        ],
    ).responses
    assert [(int(r.error_code), r.error_message) for r in responses] == [
        (42, "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
         "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        (3, "The topic 't2' does not exist."),
        (40, "Unknown topic config name: x"),
        (42, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
         "Cannot update these configs dynamically: Set(log.retention.ms)"),
    ]  # fmt: skip
    [dry] = _alter(broker, [(2, "t", {"retention.ms": "7"})], validate_only=True).responses
    assert int(dry.error_code) == 0
    assert json.loads(broker.zk.nodes["/config/topics/t"])["config"] == {"retention.ms": "1000"}
    [rate] = _alter(broker, [(4, "1", {"follower.replication.throttled.rate": "1000"})]).responses
    assert int(rate.error_code) == 0
    assert json.loads(broker.zk.nodes["/config/brokers/1"])["config"] == {"follower.replication.throttled.rate": "1000"}
    described = _configs(_describe(broker, 4, [(4, "1", ("follower.replication.throttled.rate",))]))
    assert described["follower.replication.throttled.rate"].config_source == ConfigSource.DYNAMIC_BROKER_CONFIG


def test_incremental_alter_configs_set_delete_append_subtract(broker: SimpleNamespace) -> None:
    _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 1, "configs": {"retention.ms": "1000"}}])
    [ok] = _incremental(
        broker,
        (2, "t"),
        [("segment.ms", 0, "60000"), ("retention.ms", 1, None), ("cleanup.policy", 2, "compact")],
    ).responses
    assert int(ok.error_code) == 0
    config = json.loads(broker.zk.nodes["/config/topics/t"])["config"]
    assert config == {"segment.ms": "60000", "cleanup.policy": "delete,compact"}
    [ok] = _incremental(broker, (2, "t"), [("cleanup.policy", 3, "delete")]).responses
    assert json.loads(broker.zk.nodes["/config/topics/t"])["config"]["cleanup.policy"] == "compact"
    [bad] = _incremental(broker, (2, "t"), [("segment.ms", 2, "1")]).responses
    assert (int(bad.error_code), bad.error_message) == (
        42,
        "Config value append is not allowed for config key: segment.ms",
    )
    [dup] = _incremental(broker, (2, "t"), [("segment.ms", 0, "1"), ("segment.ms", 1, None)]).responses
    assert (int(dup.error_code), dup.error_message) == (42, "Error due to duplicate config keys : segment.ms")


def test_create_partitions_delete_topics_and_describe_log_dirs(broker: SimpleNamespace, tmp_path: Path) -> None:
    import datetime

    from client.kafka.structs import TopicPartition

    _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 2}])
    module = importlib.import_module("kio.schema.create_partitions.v3.request")
    grow = module.CreatePartitionsRequest(
        topics=(
            module.CreatePartitionsTopic(name="t", count=3, assignments=None),
            module.CreatePartitionsTopic(name="t", count=1, assignments=None),
            module.CreatePartitionsTopic(name="gone", count=3, assignments=None),
        ),
        timeout=datetime.timedelta(0),
        validate_only=False,
    )
    results = {r.name: r for r in _call(broker, 37, 3, grow).results}
    assert int(results["t"].error_code) == 42 and results["t"].error_message == "Duplicate topic in request."
    assert int(results["gone"].error_code) == 3
    grow = module.CreatePartitionsRequest(
        topics=(module.CreatePartitionsTopic(name="t", count=3, assignments=None),),
        timeout=datetime.timedelta(0),
        validate_only=False,
    )
    assert int(_call(broker, 37, 3, grow).results[0].error_code) == 0
    assert len(json.loads(broker.zk.nodes["/brokers/topics/t"])["partitions"]) == 3

    log = broker.service.replicas.logs.get_or_create(TopicPartition("t", 0))
    log_dirs = _request(35, 2, "DescribeLogDirsRequest")(topics=None)
    [result] = _call(broker, 35, 2, log_dirs).results
    assert int(result.error_code) == 0 and result.log_dir == str((tmp_path / "logs").absolute())
    [(topic, [partition])] = [(t.name, list(t.partitions)) for t in result.topics]
    assert (topic, partition.partition_index, partition.partition_size) == ("t", 0, log.size_bytes)
    assert partition.is_future_key is False

    for version, request in (
        (6, _request(20, 6, "DeleteTopicsRequest")(
            topics=(_request(20, 6, "DeleteTopicState")(name="t", topic_id=None),), timeout=datetime.timedelta(0)
        )),
        (1, _request(20, 1, "DeleteTopicsRequest")(topic_names=("nope",), timeout=datetime.timedelta(0))),
    ):  # fmt: skip
        [deleted] = _call(broker, 20, version, request).responses
        assert int(deleted.error_code) == (0 if version == 6 else 3)
    assert "/admin/delete_topics/t" in broker.zk.nodes


def test_delete_topics_by_an_unknown_id(broker: SimpleNamespace) -> None:
    import datetime
    import uuid

    module = importlib.import_module("kio.schema.delete_topics.v6.request")
    topic_id = uuid.uuid4()
    request = module.DeleteTopicsRequest(
        topics=(module.DeleteTopicState(name=None, topic_id=topic_id),), timeout=datetime.timedelta(0)
    )
    [result] = _call(broker, 20, 6, request).responses
    assert (int(result.error_code), result.topic_id, result.name) == (100, topic_id, None)


def test_delete_topics_by_the_id_metadata_carries(broker: SimpleNamespace) -> None:
    """DeleteTopics v6 by id (KIP-516): the id the controller's UpdateMetadata carries names the topic to delete."""
    import datetime

    from zkraft_proto import broker_pb2 as pb

    [created] = _create(broker, 7, [{"name": "doomed", "partitions": 1, "rf": 1}]).topics
    written = json.loads(broker.zk.nodes["/brokers/topics/doomed"])["topic_id"]
    state = pb.UpdateMetadataPartitionState(topic_name="doomed", partition_index=0, leader=1, topic_id=written)
    broker.service.metadata_cache.update(pb.UpdateMetadataRequest(controller_id=1, partition_states=[state]))
    module = importlib.import_module("kio.schema.delete_topics.v6.request")
    request = module.DeleteTopicsRequest(
        topics=(module.DeleteTopicState(name=None, topic_id=created.topic_id),), timeout=datetime.timedelta(0)
    )
    [result] = _call(broker, 20, 6, request).responses
    assert (int(result.error_code), result.name, result.topic_id) == (0, "doomed", created.topic_id)
    assert "/admin/delete_topics/doomed" in broker.zk.nodes


def _minimal_request(api_key: int, module: Any) -> Any:
    """A request of each API that succeeds on a cluster holding topic t, in the fields of `module`'s version."""
    import datetime

    zero = datetime.timedelta(0)
    match api_key:
        case 19:
            topic = module.CreatableTopic(
                name="fresh", num_partitions=1, replication_factor=1, assignments=(), configs=()
            )
            return module.CreateTopicsRequest(topics=(topic,), timeout=zero, validate_only=True)
        case 20 if hasattr(module, "DeleteTopicState"):
            return module.DeleteTopicsRequest(topics=(module.DeleteTopicState(name="t", topic_id=None),), timeout=zero)
        case 20:
            return module.DeleteTopicsRequest(topic_names=("t",), timeout=zero)
        case 33:
            config = module.AlterableConfig(name="retention.ms", value="1000")
            resource = module.AlterConfigsResource(resource_type=2, resource_name="t", configs=(config,))
            return module.AlterConfigsRequest(resources=(resource,), validate_only=True)
        case 44:
            config = module.AlterableConfig(name="retention.ms", config_operation=0, value="1000")
            resource = module.AlterConfigsResource(resource_type=2, resource_name="t", configs=(config,))
            return module.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=True)
        case 35:
            return module.DescribeLogDirsRequest(topics=None)
        case 37:
            topic = module.CreatePartitionsTopic(name="t", count=2, assignments=None)
            return module.CreatePartitionsRequest(topics=(topic,), timeout=zero, validate_only=True)
    raise AssertionError(api_key)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (key, v)
        for key in (19, 20, 33, 35, 37, 44)
        for v in range(API_SPECS[key].min_version, API_SPECS[key].max_version + 1)
    ],
)
def test_every_advertised_version_answers(broker: SimpleNamespace, api_key: int, version: int) -> None:
    _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 1}])
    module = importlib.import_module(f"kio.schema.{MODULES[api_key]}.v{version}.request")
    response = _call(broker, api_key, version, _minimal_request(api_key, module))
    results = next(getattr(response, f) for f in ("topics", "responses", "results") if hasattr(response, f))
    assert results and all(int(getattr(r, "error_code", 0)) == 0 for r in results)


def test_config_requests_kafka_refuses(broker: SimpleNamespace) -> None:
    _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 1}])
    assert len(_configs(_describe(broker, 4, [(2, "t", ())]))) == 26  # an empty key list asks for every config
    logger, unknown = _describe(broker, 4, [(8, "1", None), (4, "one", None)]).results
    assert (int(logger.error_code), logger.error_message) == (42, "Unsupported resource type: BROKER_LOGGER")
    assert unknown.error_message == "Broker id must be an integer, but it is: one"
    other, logger = _alter(broker, [(4, "2", {"follower.replication.throttled.rate": "1"}), (8, "1", {})]).responses
    assert (int(other.error_code), other.error_message) == (42, "Unexpected broker id, expected 1, but received 2")
    assert (
        logger.error_message
        == "AlterConfigs is only supported for topics and brokers, but resource type is BROKER_LOGGER"
    )
    [twice] = _incremental(broker, (2, "t"), [("cleanup.policy", 2, "delete")]).responses
    assert int(twice.error_code) == 0  # 2.8 appends without removing repeats
    assert json.loads(broker.zk.nodes["/config/topics/t"])["config"]["cleanup.policy"] == "delete,delete"


def test_create_topics_whose_leaders_are_not_elected_in_time_answer_request_timed_out(broker: SimpleNamespace) -> None:
    # No controller runs here, so no leader ever shows in the metadata: as Kafka's DelayedCreatePartitions,
    # the topic exists and the answer says the wait ran out.
    [result] = _create(broker, 7, [{"name": "slow", "partitions": 1, "rf": 1}], timeout_ms=50).topics
    assert int(result.error_code) == 7 and "/brokers/topics/slow" in broker.zk.nodes


def test_an_unreachable_quorum_answers_each_topic_instead_of_closing_the_connection(broker: SimpleNamespace) -> None:
    import datetime

    from client.zk.exceptions import ConnectionLoss

    async def unreachable(*_args: Any, **_kwargs: Any) -> Any:
        raise ConnectionLoss("no server answered")

    broker.zk.get_children = unreachable
    [created] = _create(broker, 7, [{"name": "t", "partitions": 1, "rf": 1}]).topics
    assert int(created.error_code) == 7 and "the quorum did not answer" in created.error_message
    request = _request(20, 6, "DeleteTopicsRequest")(
        topics=(_request(20, 6, "DeleteTopicState")(name="t", topic_id=None),), timeout=datetime.timedelta(0)
    )
    [deleted] = _call(broker, 20, 6, request).responses
    assert int(deleted.error_code) == 7
    broker.zk.exists = unreachable
    [described] = _describe(broker, 4, [(2, "t", None)]).results
    assert int(described.error_code) == 7
