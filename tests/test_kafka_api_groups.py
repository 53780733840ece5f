"""The group APIs' Kafka handlers without processes: every advertised version of each request, written and read
back by kio, goes through its handler onto a real group coordinator (fake clock), and the response written by kio.

The end-to-end tests with Kafka's own clients are in tests/test_kafka_wire_groups.py; these pin what each
version carries (MEMBER_ID_REQUIRED from JoinGroup v4, group.instance.id from v5, the committed leader epoch
from OffsetFetch v5, OffsetFetch v1's per-partition group error, LeaveGroup v3's batch).
"""

from __future__ import annotations

import asyncio
import importlib
import io
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

import broker.kafka_api  # noqa: F401  (registers the handlers)
from broker.config import BrokerConfig
from broker.group.api import GroupApi
from broker.group.coordinator import GroupConfig, GroupCoordinator
from broker.group.partitioner import partition_for
from broker.group.store import MemoryOffsetsStore
from broker.kafka_api.entities import build
from broker.kafka_api.registry import API_SPECS, KafkaRequestContext
from client.kafka import errors
from client.kafka.consumer_protocol import Subscription, encode_subscription
from tests.test_group_coordinator import FakeTimers, NullLog, settle

GROUP = "wire-group"
LISTENER = "PLAINTEXT"
MODULES = {
    8: "offset_commit",
    9: "offset_fetch",
    10: "find_coordinator",
    11: "join_group",
    12: "heartbeat",
    13: "leave_group",
    14: "sync_group",
    15: "describe_groups",
    16: "list_groups",
    42: "delete_groups",
    47: "offset_delete",
}
NAMES = {
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    42: "DeleteGroups",
    47: "OffsetDelete",
}


def kio_class(api_key: int, version: int, kind: str) -> type:
    module = importlib.import_module(f"kio.schema.{MODULES[api_key]}.v{version}.{kind}")
    return getattr(module, f"{NAMES[api_key]}{kind.capitalize()}")


@dataclass
class Endpoint:
    host: str
    port: int


@dataclass
class PartitionState:
    leader: int


class FakeMetadata:
    """Topic "t" with 4 partitions and broker 1 on listener PLAINTEXT (127.0.0.1:9092)."""

    brokers = {1: object()}

    def contains(self, topic: str) -> bool:
        return True

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return PartitionState(1) if topic in ("t", "__consumer_offsets") and 0 <= partition < 50 else None

    def listener_endpoint(self, broker_id: int, listener: str) -> Endpoint | None:
        return Endpoint("127.0.0.1", 9092) if (broker_id, listener) == (1, LISTENER) else None


@dataclass
class FakeService:
    groups: GroupApi
    metadata_cache: FakeMetadata


class Wire:
    """Requests go through kio's writer and reader, the handler, and the response through kio's writer."""

    def __init__(self) -> None:
        self.timers = FakeTimers()
        config = GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100)
        self.coordinator = GroupCoordinator(
            config, MemoryOffsetsStore(), NullLog(), now_ms=lambda: 1000, call_later=self.timers
        )
        metadata = FakeMetadata()
        api = GroupApi(self.coordinator, BrokerConfig(broker_id=1), metadata, None, NullLog())  # type: ignore[arg-type]
        self.service = FakeService(api, metadata)

    async def own(self) -> None:
        """Leads every __consumer_offsets partition, so any group id is this broker's."""
        for partition in range(50):
            self.coordinator.on_election(partition)
        await settle()
        assert partition_for(GROUP, 50) in self.coordinator.owned

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        request_type = kio_class(api_key, version, "request")
        buffer = io.BytesIO()
        entity_writer(request_type)(buffer, build(request_type, **fields))
        request, _ = entity_reader(request_type)(memoryview(buffer.getvalue()), 0)
        response_type = kio_class(api_key, version, "response")
        context = KafkaRequestContext(
            self.service, api_key, version, 7, "rdkafka", "127.0.0.1", LISTENER, response_type
        )
        response = await API_SPECS[api_key].handler(request, context)
        assert type(response) is response_type
        entity_writer(response_type)(io.BytesIO(), response)  # every response this handler builds encodes
        return response

    def start(self, api_key: int, version: int, **fields: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.call(api_key, version, **fields))


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


SUBSCRIPTION = encode_subscription(Subscription(("t",)))


def join_fields(member_id: str = "", instance: str | None = None) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
    }


def test_advertised_ranges_are_kafka_28_within_kio() -> None:
    expected = {8: (2, 8), 9: (1, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5)}
    expected |= {15: (0, 5), 16: (0, 4), 42: (0, 2), 47: (0, 0)}
    for key, (low, high) in expected.items():
        spec = API_SPECS[key]
        assert (spec.min_version, spec.max_version) == (low, high), spec.name
        for version in (low, high):
            kio_class(key, version, "request")


@pytest.mark.parametrize("version", range(4))
def test_find_coordinator_answers_the_listener_endpoint(version: int) -> None:
    async def body() -> None:
        wire = Wire()
        response = await wire.call(10, version, key=GROUP, key_type=0)
        assert (response.error_code, response.node_id, response.host, response.port) == (0, 1, "127.0.0.1", 9092)
        if version >= 1:
            txn = await wire.call(10, version, key="txn", key_type=1)
            assert txn.error_code == errors.CoordinatorNotAvailableError.code and txn.node_id == -1
            bad = await wire.call(10, version, key="x", key_type=5)
            assert bad.error_code == errors.InvalidRequestError.code

    run(body)


@pytest.mark.parametrize("version", range(8))
def test_join_sync_heartbeat_leave_every_version(version: int) -> None:
    async def body() -> None:
        wire = Wire()
        await wire.own()
        join = wire.start(11, version, **join_fields())
        await settle()
        wire.timers.advance(0)
        await settle()
        joined = join.result()
        if version >= 4:  # KIP-394: a new dynamic member first learns its id
            assert joined.error_code == errors.MemberIdRequiredError.code and joined.member_id.startswith("rdkafka-")
            join = wire.start(11, version, **join_fields(joined.member_id))
            await settle()
            wire.timers.advance(0)
            await settle()
            joined = join.result()
        assert joined.error_code == 0 and joined.generation_id == 1 and joined.leader == joined.member_id
        assert [m.member_id for m in joined.members] == [joined.member_id]
        assert joined.protocol_name == "range"
        member = joined.member_id
        sync_version = min(version, 5)
        synced = await wire.call(
            14,
            sync_version,
            group_id=GROUP,
            generation_id=1,
            member_id=member,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": member, "assignment": b"A"}],
        )
        assert synced.error_code == 0 and synced.assignment == b"A"
        if sync_version >= 5:
            assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        beat = await wire.call(12, min(version, 4), group_id=GROUP, generation_id=1, member_id=member)
        assert beat.error_code == 0
        stale = await wire.call(12, min(version, 4), group_id=GROUP, generation_id=0, member_id=member)
        assert stale.error_code == errors.IllegalGenerationError.code
        leave_version = min(version, 4)
        if leave_version >= 3:
            members = [{"member_id": member}, {"member_id": "x"}]
            left = await wire.call(13, leave_version, group_id=GROUP, members=members)
            assert left.error_code == 0
            assert [(m.member_id, m.error_code) for m in left.members] == [(member, 0), ("x", 25)]
        else:
            left = await wire.call(13, leave_version, group_id=GROUP, member_id=member)
            assert left.error_code == 0
            again = await wire.call(13, leave_version, group_id=GROUP, member_id=member)
            assert again.error_code == errors.UnknownMemberIdError.code
        assert wire.coordinator.groups[GROUP].members == {}

    run(body)


def test_static_member_restart_keeps_its_assignment_without_a_rebalance() -> None:
    async def body() -> None:
        wire = Wire()
        await wire.own()
        join = wire.start(11, 5, **join_fields(instance="host-1"))
        await settle()
        wire.timers.advance(0)
        await settle()
        first = join.result()
        assert first.error_code == 0 and first.member_id.startswith("host-1-")  # static: no MEMBER_ID_REQUIRED
        assert first.members[0].group_instance_id == "host-1"
        sync = dict(group_id=GROUP, generation_id=1, member_id=first.member_id, group_instance_id="host-1")
        synced = await wire.call(14, 3, **sync, assignments=[{"member_id": first.member_id, "assignment": b"P"}])
        assert synced.assignment == b"P"
        # The process restarts: it joins again with an empty member id and the same instance id.
        rejoined = await wire.call(11, 5, **join_fields(instance="host-1"))
        assert rejoined.error_code == 0 and rejoined.generation_id == 1  # no new generation: no rebalance
        assert rejoined.member_id != first.member_id
        again = await wire.call(14, 3, **(sync | {"member_id": rejoined.member_id}), assignments=[])
        assert again.error_code == 0 and again.assignment == b"P"
        # The old incarnation is fenced.
        fenced = await wire.call(
            12, 3, group_id=GROUP, generation_id=1, member_id=first.member_id, group_instance_id="host-1"
        )
        assert fenced.error_code == errors.FencedInstanceIdError.code
        described = await wire.call(15, 4, groups=[GROUP], include_authorized_operations=False)
        [member] = described.groups[0].members
        assert (member.member_id, member.group_instance_id, member.member_assignment) == (
            rejoined.member_id,
            "host-1",
            b"P",
        )

    run(body)


@pytest.mark.parametrize("version", range(2, 9))
def test_offset_commit_and_fetch_every_version(version: int) -> None:
    async def body() -> None:
        wire = Wire()
        await wire.own()
        partitions = [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 3, "committed_metadata": "m"},
            {"partition_index": 99, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": None},
        ]
        committed = await wire.call(
            8,
            version,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[{"name": "t", "partitions": partitions}],
        )
        codes = [(p.partition_index, p.error_code) for p in committed.topics[0].partitions]
        assert codes == [(0, 0), (99, errors.UnknownTopicOrPartitionError.code)]
        fetch_version = min(version, 7)
        fetched = await wire.call(
            9, fetch_version, group_id=GROUP, topics=[{"name": "t", "partition_indexes": [0, 1]}], require_stable=True
        )
        got = {p.partition_index: p for p in fetched.topics[0].partitions}
        assert (got[0].committed_offset, got[0].metadata, got[1].committed_offset) == (42, "m", -1)
        if fetch_version >= 5:
            expected_epoch = 3 if version >= 6 else -1  # OffsetCommit carries the epoch from v6
            assert got[0].committed_leader_epoch == expected_epoch
        if fetch_version >= 2:
            everything = await wire.call(9, fetch_version, group_id=GROUP, topics=None)
            assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.topics] == [("t", [0])]

    run(body)


def test_offset_fetch_v1_repeats_the_group_error_on_each_partition() -> None:
    async def body() -> None:
        wire = Wire()  # owns no partition: NOT_COORDINATOR
        v1 = await wire.call(9, 1, group_id=GROUP, topics=[{"name": "t", "partition_indexes": [0, 1]}])
        assert [p.error_code for p in v1.topics[0].partitions] == [errors.NotCoordinatorError.code] * 2
        v3 = await wire.call(9, 3, group_id=GROUP, topics=[{"name": "t", "partition_indexes": [0]}])
        assert (v3.error_code, v3.topics) == (errors.NotCoordinatorError.code, ())

    run(body)


def test_describe_list_delete_and_offset_delete() -> None:
    async def body() -> None:
        wire = Wire()
        await wire.own()
        commit = dict(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="")
        parts = [{"partition_index": p, "committed_offset": 5, "committed_metadata": ""} for p in (0, 1)]
        await wire.call(8, 8, **commit, topics=[{"name": "t", "partitions": parts}])
        listed = await wire.call(16, 4, states_filter=["Empty"])
        assert [(g.group_id, g.group_state) for g in listed.groups] == [(GROUP, "Empty")]
        assert (await wire.call(16, 4, states_filter=["Stable"])).groups == ()
        described = await wire.call(15, 5, groups=[GROUP, "nobody"], include_authorized_operations=True)
        assert [(g.group_id, g.group_state) for g in described.groups] == [(GROUP, "Empty"), ("nobody", "Dead")]
        assert described.groups[0].authorized_operations == 328
        deleted = await wire.call(47, 0, group_id=GROUP, topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
        assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
        fetched = await wire.call(9, 7, group_id=GROUP, topics=None)
        assert [p.partition_index for p in fetched.topics[0].partitions] == [1]
        gone = await wire.call(42, 2, groups_names=[GROUP, GROUP, "nobody"])
        assert [(r.group_id, r.error_code) for r in gone.results] == [
            (GROUP, 0),
            ("nobody", errors.GroupIdNotFoundError.code),
        ]
        missing = await wire.call(47, 0, group_id=GROUP, topics=[])
        assert missing.error_code == errors.GroupIdNotFoundError.code

    run(body)


def test_offset_delete_refuses_topics_a_live_consumer_group_subscribes_to() -> None:
    async def body() -> None:
        wire = Wire()
        await wire.own()
        join = wire.start(11, 3, **join_fields())
        await settle()
        wire.timers.advance(0)
        await settle()
        member = join.result().member_id
        await wire.call(14, 3, group_id=GROUP, generation_id=1, member_id=member, assignments=[])
        topics = [{"name": n, "partitions": [{"partition_index": 0}]} for n in ("t", "other")]
        deleted = await wire.call(47, 0, group_id=GROUP, topics=topics)
        assert [(t.name, t.partitions[0].error_code) for t in deleted.topics] == [
            ("t", errors.GroupSubscribedToTopicError.code),
            ("other", 0),
        ]

    run(body)
