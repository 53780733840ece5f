"""The group coordinator without processes: state table, error codes per state, protocol
selection, Java's String.hashCode partition choice and the __consumer_offsets binary formats.

The coordinator runs on a real event loop (its parked requests are futures) with a fake
clock for its timers, so rebalance delays and session expiry are stepped, not slept.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from broker.group.coordinator import GroupConfig, GroupCoordinator
from broker.group.metadata import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    IllegalStateTransition,
    MemberMetadata,
    select_protocol,
)
from broker.group.partitioner import java_string_hash, kafka_abs, partition_for
from broker.group.records import (
    GroupKey,
    GroupRecordError,
    OffsetAndMetadata,
    OffsetKey,
    StoredGroup,
    StoredMember,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from broker.group.store import MemoryOffsetsStore
from client.kafka import errors
from client.kafka.structs import TopicPartition

NONE = errors.NONE
UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.code
ILLEGAL_GENERATION = errors.IllegalGenerationError.code
REBALANCE_IN_PROGRESS = errors.RebalanceInProgressError.code
GROUP = "my-group"
PARTITION = partition_for(GROUP, 50)
TP0 = TopicPartition("t", 0)


class NullLog:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None

    def bind(self, **kwargs: Any) -> NullLog:
        return self


# ---------------------------------------------------------------- Java hashCode / partition choice


def test_java_string_hash_matches_java() -> None:
    # Values of java.lang.String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("my-group") == -1906497762  # values checked with a JDK
    assert java_string_hash("console-consumer-12345") == 158455506
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001f600") == 1772899  # a surrogate pair: two UTF-16 code units


def test_partition_choice_is_kafka_abs_of_hash_mod_partitions() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("console-consumer-12345", 50) == abs(java_string_hash("console-consumer-12345")) % 50


# ---------------------------------------------------------------- binary formats


def test_offset_key_and_value_round_trip() -> None:
    key = encode_offset_key("g", TopicPartition("topic", 7))
    # int16 version 1, "g", "topic", int32 7
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x05topic" + b"\x00\x00\x00\x07"
    assert decode_key(key) == OffsetKey("g", "topic", 7)
    value = OffsetAndMetadata(offset=42, leader_epoch=3, metadata="meta", commit_timestamp_ms=1234)
    raw = encode_offset_value(value)
    assert raw[:2] == b"\x00\x03"
    assert decode_offset_value(raw) == value
    expiring = OffsetAndMetadata(offset=1, metadata="", commit_timestamp_ms=5, expire_timestamp_ms=9)
    raw = encode_offset_value(expiring)
    assert raw[:2] == b"\x00\x01"
    assert decode_offset_value(raw) == expiring


def test_offset_value_v0_and_v2_decode() -> None:
    v0 = b"\x00\x00" + (10).to_bytes(8, "big") + b"\x00\x01m" + (77).to_bytes(8, "big")
    assert decode_offset_value(v0) == OffsetAndMetadata(10, -1, "m", 77)
    v2 = b"\x00\x02" + (11).to_bytes(8, "big") + b"\x00\x00" + (78).to_bytes(8, "big")
    assert decode_offset_value(v2) == OffsetAndMetadata(11, -1, "", 78)


def test_group_key_and_value_round_trip_all_versions() -> None:
    assert encode_group_key("g") == b"\x00\x02\x00\x01g"
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    member = StoredMember("c-1", None, "c", "/127.0.0.1", 300000, 10000, b"sub", b"assign")
    group = StoredGroup("consumer", 4, "range", "c-1", 99, (member,))
    assert decode_group_value(encode_group_value(group)) == group
    assert decode_group_value(encode_group_value(group, version=2)) == group
    v1 = decode_group_value(encode_group_value(group, version=1))
    assert v1 == StoredGroup("consumer", 4, "range", "c-1", -1, (member,))
    v0 = decode_group_value(encode_group_value(group, version=0))
    assert v0.members[0].rebalance_timeout_ms == v0.members[0].session_timeout_ms == 10000
    empty = StoredGroup("consumer", 5, None, None, 1, ())
    raw = encode_group_value(empty)
    assert decode_group_value(raw) == empty
    assert b"\xff\xff\xff\xff" in raw  # null protocol and leader (int16 -1 each)


def test_truncated_records_are_refused() -> None:
    with pytest.raises(GroupRecordError):
        decode_key(b"\x00\x01\x00\x05ab")
    with pytest.raises(GroupRecordError):
        decode_key(b"\x00\x09\x00\x00")
    with pytest.raises(GroupRecordError):
        decode_offset_value(b"\x00\x03\x00")


# ---------------------------------------------------------------- state table and protocol selection


@pytest.mark.parametrize(
    ("source", "target", "legal"),
    [
        (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, True),
        (GroupState.STABLE, GroupState.PREPARING_REBALANCE, True),
        (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE, True),
        (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, True),
        (GroupState.PREPARING_REBALANCE, GroupState.EMPTY, True),
        (GroupState.COMPLETING_REBALANCE, GroupState.STABLE, True),
        (GroupState.STABLE, GroupState.DEAD, True),
        (GroupState.EMPTY, GroupState.STABLE, False),
        (GroupState.EMPTY, GroupState.COMPLETING_REBALANCE, False),
        (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, False),
        (GroupState.PREPARING_REBALANCE, GroupState.STABLE, False),
        (GroupState.DEAD, GroupState.EMPTY, False),
    ],
)
def test_transition_table(source: GroupState, target: GroupState, legal: bool) -> None:
    assert (source in VALID_PREVIOUS_STATES[target]) is legal
    group = GroupMetadata("g", state=source)
    if legal:
        assert group.transition_to(target) is source
        assert group.state is target
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target)


def member(member_id: str, *protocols: str) -> MemberMetadata:
    return MemberMetadata(member_id, "c", "h", 1000, 1000, "consumer", [(p, p.encode()) for p in protocols])


def test_select_protocol_is_common_and_most_voted() -> None:
    assert select_protocol([member("a", "range", "roundrobin"), member("b", "roundrobin", "range")]) == "range"
    assert select_protocol([member("a", "range", "roundrobin"), member("b", "roundrobin")]) == "roundrobin"
    three = [member("a", "sticky", "range"), member("b", "range", "sticky"), member("c", "range", "sticky")]
    assert select_protocol(three) == "range"
    with pytest.raises(IllegalStateTransition):
        select_protocol([member("a", "range"), member("b", "roundrobin")])


# ---------------------------------------------------------------- the coordinator, stepped


class FakeTimers:
    """call_later on a fake clock: `advance(ms)` fires what is due, in order."""

    class Handle:
        def __init__(self) -> None:
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.now_s = 0.0
        self._heap: list[tuple[float, int, FakeTimers.Handle, Callable[[], None]]] = []
        self._seq = itertools.count()

    def __call__(self, delay_s: float, action: Callable[[], None]) -> FakeTimers.Handle:
        handle = FakeTimers.Handle()
        heapq.heappush(self._heap, (self.now_s + delay_s, next(self._seq), handle, action))
        return handle

    def advance(self, ms: float) -> None:
        target = self.now_s + ms / 1000
        for _ in range(10_000):
            if not self._heap or self._heap[0][0] > target:
                break
            due, _, handle, action = heapq.heappop(self._heap)
            self.now_s = due
            if not handle.cancelled:
                action()
        self.now_s = target


class Harness:
    def __init__(self, initial_delay_ms: int = 0) -> None:
        self.timers = FakeTimers()
        self.store = MemoryOffsetsStore()
        ids = itertools.count(1)
        self.coordinator = GroupCoordinator(
            GroupConfig(group_initial_rebalance_delay_ms=initial_delay_ms, group_min_session_timeout_ms=100),
            self.store,
            NullLog(),
            now_ms=lambda: int(self.timers.now_s * 1000),
            new_member_suffix=lambda: f"m{next(ids)}",
            call_later=self.timers,
        )

    async def own(self, partition: int = PARTITION) -> None:
        self.coordinator.on_election(partition)
        await settle()
        assert partition in self.coordinator.owned

    def join(
        self, member_id: str = "", client: str = "c", protocols: tuple[str, ...] = ("range",), session_ms: int = 1000
    ) -> asyncio.Task[Any]:
        return asyncio.ensure_future(
            self.coordinator.join_group(
                GROUP, member_id, client, "/h", session_ms, 5000, "consumer", [(p, p.encode()) for p in protocols]
            )
        )

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None) -> asyncio.Task[Any]:
        return asyncio.ensure_future(
            self.coordinator.sync_group(GROUP, generation, member_id, "", "", assignments or {})
        )

    @property
    def group(self) -> GroupMetadata:
        return self.coordinator.groups[GROUP]


async def settle() -> None:
    """Lets every ready task run until it parks (yields only; time does not pass)."""
    for _ in range(20):
        await asyncio.sleep(0)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def two_member_stable_group(h: Harness) -> tuple[str, str]:
    await h.own()
    j1, j2 = h.join(client="a"), h.join(client="b")
    await settle()
    assert h.group.state is GroupState.PREPARING_REBALANCE
    h.timers.advance(0)
    await settle()
    r1, r2 = j1.result(), j2.result()
    assert (r1.error_code, r2.error_code) == (NONE, NONE)
    assert r1.generation_id == r2.generation_id == 1
    assert r1.leader_id == r1.member_id == "a-m1"
    assert [m for m, _ in r1.members] == ["a-m1", "b-m2"] and r2.members == ()
    s2 = h.sync("b-m2", 1)
    await settle()
    assert not s2.done()  # a follower waits for the leader's assignment
    s1 = h.sync("a-m1", 1, {"a-m1": b"A", "b-m2": b"B"})
    await settle()
    assert (s1.result().assignment, s2.result().assignment) == (b"A", b"B")
    assert h.group.state is GroupState.STABLE
    return r1.member_id, r2.member_id


def test_not_owned_and_loading_errors() -> None:
    async def body() -> None:
        h = Harness()
        result = await h.coordinator.join_group(GROUP, "", "c", "h", 1000, 1000, "consumer", [("range", b"")])
        assert result.error_code == errors.NotCoordinatorError.code
        h.store.gate = asyncio.Event()
        h.coordinator.on_election(PARTITION)
        assert h.coordinator.heartbeat(GROUP, 1, "x") == errors.CoordinatorLoadInProgressError.code
        assert h.coordinator.fetch_offsets(GROUP, [TP0])[0] == errors.CoordinatorLoadInProgressError.code
        await settle()
        assert h.coordinator.heartbeat(GROUP, 1, "x") == UNKNOWN_MEMBER_ID
        assert h.coordinator.heartbeat("", 1, "x") == errors.InvalidGroupIdError.code

    run(body)


def test_join_validation_errors() -> None:
    async def body() -> None:
        h = Harness()
        await h.own()
        c = h.coordinator
        bad = await c.join_group(GROUP, "", "c", "h", 10, 1000, "consumer", [("range", b"")])
        assert bad.error_code == errors.InvalidSessionTimeoutError.code
        unknown = await c.join_group(GROUP, "ghost", "c", "h", 1000, 1000, "consumer", [("range", b"")])
        assert unknown.error_code == UNKNOWN_MEMBER_ID
        no_protocols = await c.join_group(GROUP, "", "c", "h", 1000, 1000, "consumer", [])
        assert no_protocols.error_code == errors.InconsistentGroupProtocolError.code
        await two_member_stable_group(h)
        other = await c.join_group(GROUP, "", "c", "h", 1000, 1000, "consumer", [("roundrobin", b"")])
        assert other.error_code == errors.InconsistentGroupProtocolError.code

    run(body)


def test_two_members_then_third_rebalances_to_generation_two() -> None:
    async def body() -> None:
        h = Harness()
        a, b = await two_member_stable_group(h)
        c = h.coordinator
        assert c.heartbeat(GROUP, 1, a) == NONE
        j3 = h.join(client="c")
        await settle()
        assert h.group.state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat(GROUP, 1, a) == REBALANCE_IN_PROGRESS
        assert c.heartbeat(GROUP, 1, b) == REBALANCE_IN_PROGRESS
        assert (await c.commit_offsets(GROUP, 1, a, {TP0: OffsetAndMetadata(5)}))[TP0] == NONE  # previous gen
        ja, jb = h.join(a, client="a"), h.join(b, client="b")
        await settle()
        results = [ja.result(), jb.result(), j3.result()]
        assert {r.generation_id for r in results} == {2}
        assert results[0].leader_id == a and len(results[0].members) == 3
        assert h.group.state is GroupState.COMPLETING_REBALANCE
        assert c.heartbeat(GROUP, 2, b) == NONE  # Kafka 2.8: NONE while completing
        assert c.heartbeat(GROUP, 1, b) == ILLEGAL_GENERATION
        commit = await c.commit_offsets(GROUP, 2, a, {TP0: OffsetAndMetadata(6)})
        assert commit[TP0] == REBALANCE_IN_PROGRESS
        assert (await h.sync(b, 1)).error_code == ILLEGAL_GENERATION
        assert (await h.sync("ghost", 2)).error_code == UNKNOWN_MEMBER_ID

    run(body)


def test_member_that_stops_heartbeating_is_removed() -> None:
    async def body() -> None:
        h = Harness()
        a, b = await two_member_stable_group(h)
        c = h.coordinator
        for _ in range(2):  # a keeps heartbeating, b does not
            h.timers.advance(400)
            assert c.heartbeat(GROUP, 1, a) == NONE
        h.timers.advance(400)  # 1200 ms: b's 1000 ms session is over
        assert c.heartbeat(GROUP, 1, a) == REBALANCE_IN_PROGRESS
        assert b not in h.group.members
        assert h.group.state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat(GROUP, 1, b) == UNKNOWN_MEMBER_ID
        ja = h.join(a, client="a")
        await settle()
        assert ja.result().generation_id == 2 and [m for m, _ in ja.result().members] == [a]

    run(body)


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def body() -> None:
        h = Harness()
        a, b = await two_member_stable_group(h)
        ja = h.join(a, client="a", protocols=("range", "roundrobin"))  # new metadata: rebalance
        await settle()
        assert h.group.state is GroupState.PREPARING_REBALANCE and not ja.done()
        for _ in range(10):  # b stays alive by heartbeats but does not rejoin; 5000 ms is the rebalance timeout
            assert h.coordinator.heartbeat(GROUP, 1, b) == REBALANCE_IN_PROGRESS
            h.timers.advance(500)
        await settle()
        assert ja.result().generation_id == 2
        assert list(h.group.members) == [a]

    run(body)


def test_leave_group_and_last_leave_empties_the_group() -> None:
    async def body() -> None:
        h = Harness()
        a, b = await two_member_stable_group(h)
        c = h.coordinator
        assert c.leave_group(GROUP, [b, "ghost"]) == (NONE, [(b, NONE), ("ghost", UNKNOWN_MEMBER_ID)])
        assert h.group.state is GroupState.PREPARING_REBALANCE
        assert h.group.leader_id == a
        assert c.leave_group(GROUP, [a]) == (NONE, [(a, NONE)])
        await settle()
        assert h.group.state is GroupState.EMPTY and h.group.generation_id == 2
        assert c.heartbeat(GROUP, 2, a) == UNKNOWN_MEMBER_ID
        assert (await h.sync(a, 2)).error_code == UNKNOWN_MEMBER_ID
        assert c.leave_group("unknown-group", ["x"]) == (NONE, [("x", UNKNOWN_MEMBER_ID)])

    run(body)


def test_initial_delay_waits_for_more_members() -> None:
    async def body() -> None:
        h = Harness(initial_delay_ms=3000)
        await h.own()
        j1 = h.join(client="a")
        await settle()
        h.timers.advance(2000)
        j2 = h.join(client="b")
        await settle()
        h.timers.advance(1000)  # first delay over, but a member arrived: wait again
        await settle()
        assert not j1.done()
        h.timers.advance(2000)  # remaining = 5000 - 3000: the extension is capped by it
        await settle()
        assert j1.result().generation_id == j2.result().generation_id == 1
        assert len(j1.result().members) == 2

    run(body)


def test_commit_errors_per_state() -> None:
    async def body() -> None:
        h = Harness()
        await h.own()
        c = h.coordinator
        offsets = {TP0: OffsetAndMetadata(1)}
        assert (await c.commit_offsets(GROUP, 3, "m", offsets))[TP0] == ILLEGAL_GENERATION  # no group
        assert (await c.commit_offsets(GROUP, -1, "", offsets))[TP0] == NONE  # offsets-only group
        assert c.fetch_offsets(GROUP, [TP0, TopicPartition("t", 1)]) == (
            NONE,
            {TP0: OffsetAndMetadata(1), TopicPartition("t", 1): None},
        )
        assert (await c.commit_offsets(GROUP, 0, "ghost", offsets))[TP0] == UNKNOWN_MEMBER_ID
        big = {TP0: OffsetAndMetadata(2, metadata="x" * 5000)}
        assert (await c.commit_offsets(GROUP, -1, "", big))[TP0] == errors.OffsetMetadataTooLargeError.code
        h.store.fail_with = errors.NotLeaderForPartitionError("moved")
        assert (await c.commit_offsets(GROUP, -1, "", offsets))[TP0] == errors.NotCoordinatorError.code
        h.store.fail_with = errors.RequestTimedOutError("slow")
        assert (await c.commit_offsets(GROUP, -1, "", offsets))[TP0] == errors.CoordinatorNotAvailableError.code

    run(body)


def test_reload_after_leadership_moves_and_delete_groups() -> None:
    async def body() -> None:
        h = Harness()
        a, _ = await two_member_stable_group(h)
        c = h.coordinator
        assert (await c.commit_offsets(GROUP, 1, a, {TP0: OffsetAndMetadata(41, 0, "m", 7)}))[TP0] == NONE
        c.on_resignation(PARTITION)
        assert GROUP not in c.groups
        assert c.heartbeat(GROUP, 1, a) == errors.NotCoordinatorError.code
        # Another coordinator over the same records (what the new leader reads from its log).
        h2 = Harness()
        h2.store.partitions = h.store.partitions
        await h2.own()
        group = h2.group
        assert group.state is GroupState.STABLE and group.generation_id == 1 and group.leader_id == a
        assert group.members[a].assignment == b"A"
        assert h2.coordinator.fetch_offsets(GROUP, [TP0])[1][TP0] == OffsetAndMetadata(41, 0, "m", 7)
        assert h2.coordinator.heartbeat(GROUP, 1, a) == NONE
        _, described = h2.coordinator.describe_group(GROUP)
        assert described is not None and described.protocol_name == "range"
        assert partition_for("g30", 50) == PARTITION
        assert await h2.coordinator.delete_groups([GROUP, "g30", "nope"]) == {
            GROUP: errors.NonEmptyGroupError.code,
            "g30": errors.GroupIdNotFoundError.code,
            "nope": errors.NotCoordinatorError.code,  # another partition
        }
        for member_id in list(group.members):
            h2.coordinator.leave_group(GROUP, [member_id])
        await settle()
        assert group.state is GroupState.EMPTY
        assert await h2.coordinator.delete_groups([GROUP]) == {GROUP: NONE}
        assert h2.coordinator.describe_group(GROUP) == (NONE, None)
        h3 = Harness()
        h3.store.partitions = h2.store.partitions
        await h3.own()
        assert GROUP not in h3.coordinator.groups  # tombstones deleted group and offsets

    run(body)


def test_sync_store_failure_fails_the_generation() -> None:
    async def body() -> None:
        h = Harness()
        await h.own()
        j1 = h.join(client="a")
        await settle()
        h.timers.advance(0)
        await settle()
        a = j1.result().member_id
        h.store.fail_with = errors.NotEnoughReplicasError("isr")
        result = await h.sync(a, 1, {a: b"A"})
        assert result.error_code == errors.CoordinatorNotAvailableError.code
        assert h.group.state is GroupState.PREPARING_REBALANCE

    run(body)


def test_offsets_expire_after_retention_and_empty_groups_die() -> None:
    async def body() -> None:
        h = Harness()
        h.coordinator.config = GroupConfig(
            offsets_retention_ms=10_000, group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0
        )
        c = h.coordinator
        a, _ = await two_member_stable_group(h)

        def at(offset: int) -> OffsetAndMetadata:
            return OffsetAndMetadata(offset, commit_timestamp_ms=int(h.timers.now_s * 1000))

        assert (await c.commit_offsets(GROUP, 1, a, {TP0: at(7)}))[TP0] == NONE
        assert await c.expire_offsets() == 0
        h.timers.advance(1_000)  # neither member heartbeats: both sessions end, the group is Empty
        await settle()
        assert h.group.state is GroupState.EMPTY and h.group.state_timestamp_ms == 1_000
        h.timers.advance(5_000)
        assert await c.expire_offsets() == 0  # retention counts from when the group became Empty
        h.timers.advance(5_000)
        assert await c.expire_offsets() == 1
        assert GROUP not in c.groups  # Empty and no offsets left: Dead, tombstoned
        records = h.store.partitions[PARTITION]
        assert records[-2:] == [(encode_offset_key(GROUP, TP0), None), (encode_group_key(GROUP), None)]

        # A group used only as an offset store expires each offset from its own commit.
        tp1 = TopicPartition("t", 1)
        assert (await c.commit_offsets("g30", -1, "", {TP0: at(1)}))[TP0] == NONE
        h.timers.advance(5_000)
        assert (await c.commit_offsets("g30", -1, "", {tp1: at(2)}))[tp1] == NONE
        h.timers.advance(6_000)
        assert await c.expire_offsets() == 1
        assert list(c.groups["g30"].offsets) == [tp1]

    run(body)


# ---------------------------------------------------------------- KIP-394 pending members, KIP-345 static members


def test_member_id_required_then_the_pending_id_expires_with_the_session() -> None:
    async def body() -> None:
        h = Harness()
        await h.own()
        protocols = [("range", b"r")]
        first = await h.coordinator.join_group(
            GROUP, "", "c", "/h", 1000, 5000, "consumer", protocols, require_known_member_id=True
        )
        assert first.error_code == errors.MemberIdRequiredError.code and first.member_id == "c-m1"
        assert h.group.pending_members == {"c-m1"}
        h.timers.advance(1001)  # the member never came back within its session timeout
        assert h.group.pending_members == set()
        late = await h.coordinator.join_group(GROUP, "c-m1", "c", "/h", 1000, 5000, "consumer", protocols)
        assert late.error_code == UNKNOWN_MEMBER_ID

    run(body)


def test_static_member_that_does_not_rejoin_keeps_its_place_until_its_session_expires() -> None:
    async def body() -> None:
        h = Harness()
        await h.own()
        protocols = [("range", b"r")]

        def join(member_id: str, instance: str | None) -> asyncio.Task[Any]:
            return asyncio.ensure_future(
                h.coordinator.join_group(
                    GROUP, member_id, "c", "/h", 1000, 500, "consumer", protocols, group_instance_id=instance
                )
            )

        s, d = join("", "static-1"), join("", None)
        await settle()
        h.timers.advance(0)
        await settle()
        static_id, dynamic_id = s.result().member_id, d.result().member_id
        assert static_id.startswith("static-1-") and h.group.static_members == {"static-1": static_id}
        leader = s.result().leader_id
        h.sync(dynamic_id, 1)
        h.sync(static_id, 1)
        h.sync(leader, 1, {static_id: b"S", dynamic_id: b"D"})
        await settle()
        assert h.group.state is GroupState.STABLE
        # A third member joins; only the dynamic one rejoins before the rebalance timeout.
        j3 = join("", None)
        await settle()
        jd = join(dynamic_id, None)
        await settle()
        h.timers.advance(500)
        await settle()
        assert (j3.result().error_code, jd.result().error_code) == (NONE, NONE)
        assert static_id in h.group.members  # a static member is not dropped for not rejoining
        assert h.group.leader_id != static_id or h.group.members[static_id].awaiting_join is not None
        duplicate = await h.coordinator.join_group(
            GROUP, "other-id", "c", "/h", 1000, 500, "consumer", protocols, group_instance_id="static-1"
        )
        assert duplicate.error_code == errors.FencedInstanceIdError.code
        h.timers.advance(1001)  # its session expires: now it is gone, with its instance id
        await settle()
        assert static_id not in h.group.members and h.group.static_members == {}

    run(body)
