"""The client's group membership against a scripted in-process coordinator (no broker processes).

Covers the error paths a real coordinator rarely produces on demand: MEMBER_ID_REQUIRED,
NOT_COORDINATOR with rediscovery, COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID on sync,
REBALANCE_IN_PROGRESS from a heartbeat, a fenced commit, the leader's assignment and the
LeaveGroup on close. Each RPC answers from a per-method script (then a default).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from client.kafka.assignors import RangeAssignor, RoundRobinAssignor
from client.kafka.client_errors import CommitFailedError
from client.kafka.cluster import KafkaClusterClient
from client.kafka.consumer_coordinator import (
    ConsumerCoordinator,
    GroupSettings,
    MemberState,
    OffsetAndMetadata,
)
from client.kafka.consumer_protocol import Assignment, decode_assignment, decode_subscription, encode_assignment
from client.kafka.errors import InconsistentGroupProtocolError, UnknownMemberIdError
from client.kafka.structs import TopicPartition as TP
from tests.helpers import wait_until
from tests.quorum_harness import LOOPBACK, free_ports
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc as pb_grpc

TIMEOUT_S = 10.0
Handler = Callable[[Any], Any]


class ScriptedCoordinator(pb_grpc.BrokerServicer):
    """Answers group RPCs from scripts; records every request."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.scripts: dict[str, deque[Handler]] = defaultdict(deque)
        self.requests: dict[str, list[Any]] = defaultdict(list)
        self.lock = threading.Lock()
        self.defaults: dict[str, Handler] = {
            "FindCoordinator": lambda r: pb.FindCoordinatorResponse(node_id=1, host=LOOPBACK, port=self.port),
            "Heartbeat": lambda r: pb.HeartbeatResponse(),
            "LeaveGroup": lambda r: pb.LeaveGroupResponse(),
            "SyncGroup": lambda r: pb.SyncGroupResponse(assignment=encode_assignment(Assignment((TP("t", 0),)))),
        }

    def script(self, method: str, *handlers: Handler) -> None:
        with self.lock:
            self.scripts[method].extend(handlers)

    def _answer(self, method: str, request: Any) -> Any:
        with self.lock:
            self.requests[method].append(request)
            handler = self.scripts[method].popleft() if self.scripts[method] else self.defaults.get(method)
        if handler is None:
            raise AssertionError(f"unscripted {method}")
        return handler(request)

    def FindCoordinator(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's names
        return self._answer("FindCoordinator", request)

    def JoinGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer("JoinGroup", request)

    def SyncGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer("SyncGroup", request)

    def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer("Heartbeat", request)

    def LeaveGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer("LeaveGroup", request)

    def OffsetCommit(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer("OffsetCommit", request)

    def OffsetFetch(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer("OffsetFetch", request)


@pytest.fixture
def fake() -> Iterator[ScriptedCoordinator]:
    (port,) = free_ports(1)
    servicer = ScriptedCoordinator(port)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_BrokerServicer_to_server(servicer, server)
    server.add_insecure_port(f"{LOOPBACK}:{port}")
    server.start()
    try:
        yield servicer
    finally:
        server.stop(0)


def coordinator_for(fake: ScriptedCoordinator, **overrides: Any) -> ConsumerCoordinator:
    settings = {
        "group_id": "g",
        "client_id": "c",
        "assignors": (RangeAssignor(), RoundRobinAssignor()),
        "session_timeout_ms": 2000,
        "heartbeat_interval_ms": 50,
        "max_poll_interval_ms": 60000,
        "request_timeout_ms": 5000,
        **overrides,
    }
    cluster = KafkaClusterClient(f"{LOOPBACK}:{fake.port}", client_id="c")
    return ConsumerCoordinator(cluster, GroupSettings(**settings))


def joined(generation: int = 1, member: str = "m-1", leader: str = "other", protocol: str = "range") -> Handler:
    return lambda r: pb.JoinGroupResponse(
        generation_id=generation, member_id=member, leader=leader, protocol_name=protocol, protocol_type="consumer"
    )


def join(coordinator: ConsumerCoordinator, topics: tuple[str, ...] = ("t",)) -> Any:
    return coordinator.ensure_active_group(list(topics), lambda ts: {t: 4 for t in ts}, time.monotonic() + TIMEOUT_S)


def test_member_id_required_then_join_and_sync(fake: ScriptedCoordinator) -> None:
    fake.script(
        "JoinGroup",
        lambda r: pb.JoinGroupResponse(error_code=79, member_id="m-given"),
        joined(member="m-given"),
    )
    coordinator = coordinator_for(fake)
    try:
        result = join(coordinator)
        assert result is not None and result.assignment.partitions == (TP("t", 0),)
        first, second = fake.requests["JoinGroup"]
        assert first.member_id == "" and second.member_id == "m-given"
        assert [p.name for p in first.protocols] == ["range", "roundrobin"]
        assert decode_subscription(first.protocols[0].metadata).topics == ("t",)
        assert first.rebalance_timeout_ms == 60000 and first.session_timeout_ms == 2000
        (sync,) = fake.requests["SyncGroup"]
        assert (sync.generation_id, sync.member_id, list(sync.assignments)) == (1, "m-given", [])
        assert coordinator.state is MemberState.STABLE
    finally:
        coordinator.close()
    (leave,) = fake.requests["LeaveGroup"]
    assert [m.member_id for m in leave.members] == ["m-given"]


def test_not_coordinator_and_load_in_progress_are_retried_with_rediscovery(fake: ScriptedCoordinator) -> None:
    fake.script("FindCoordinator", lambda r: pb.FindCoordinatorResponse(error_code=15))  # not available yet
    fake.script(
        "JoinGroup", lambda r: pb.JoinGroupResponse(error_code=16), lambda r: pb.JoinGroupResponse(error_code=14)
    )
    fake.script("JoinGroup", joined())
    coordinator = coordinator_for(fake)
    try:
        assert join(coordinator) is not None
        assert len(fake.requests["FindCoordinator"]) == 3  # first failed, then again after NOT_COORDINATOR
        assert len(fake.requests["JoinGroup"]) == 3
    finally:
        coordinator.close()


def test_the_leader_assigns_with_the_chosen_assignor(fake: ScriptedCoordinator) -> None:
    from client.kafka.consumer_protocol import Subscription, encode_subscription

    members = [
        pb.JoinGroupResponseMember(member_id=m, metadata=encode_subscription(Subscription(("t",))))
        for m in ("m-2", "m-1")
    ]
    fake.script(
        "JoinGroup",
        lambda r: pb.JoinGroupResponse(
            generation_id=3, member_id="m-1", leader="m-1", protocol_name="roundrobin", members=members
        ),
    )
    coordinator = coordinator_for(fake)
    try:
        result = join(coordinator)
        assert result is not None and result.leader_topics == frozenset({"t"})
        (sync,) = fake.requests["SyncGroup"]
        sent = {a.member_id: decode_assignment(a.assignment).partitions for a in sync.assignments}
        assert sent == {"m-1": (TP("t", 0), TP("t", 2)), "m-2": (TP("t", 1), TP("t", 3))}
    finally:
        coordinator.close()


def test_unknown_member_on_sync_resets_and_rejoins(fake: ScriptedCoordinator) -> None:
    fake.script("JoinGroup", joined(member="m-old"), joined(generation=2, member="m-new"))
    fake.script("SyncGroup", lambda r: pb.SyncGroupResponse(error_code=UnknownMemberIdError.code))
    coordinator = coordinator_for(fake)
    try:
        result = join(coordinator)
        assert result is not None and result.generation.member_id == "m-new"
        assert fake.requests["JoinGroup"][1].member_id == ""  # the old member id was dropped
    finally:
        coordinator.close()


def test_fatal_join_error_is_raised(fake: ScriptedCoordinator) -> None:
    fake.script("JoinGroup", lambda r: pb.JoinGroupResponse(error_code=InconsistentGroupProtocolError.code))
    coordinator = coordinator_for(fake)
    try:
        with pytest.raises(InconsistentGroupProtocolError, match="JoinGroup for group g"):
            join(coordinator)
    finally:
        coordinator.close()


def test_join_never_blocks_past_the_deadline(fake: ScriptedCoordinator) -> None:
    release = threading.Event()

    def parked(request: Any) -> Any:
        release.wait(TIMEOUT_S)
        return joined()(request)

    fake.script("JoinGroup", parked)
    coordinator = coordinator_for(fake)
    try:
        started = time.monotonic()
        assert coordinator.ensure_active_group(["t"], lambda ts: {}, time.monotonic() + 0.2) is None
        assert time.monotonic() - started < 2.0
        release.set()
        assert join(coordinator) is not None  # the same JoinGroup, picked up by the next call
        assert len(fake.requests["JoinGroup"]) == 1
    finally:
        release.set()
        coordinator.close()


def test_heartbeat_rebalance_in_progress_asks_for_a_rejoin(fake: ScriptedCoordinator) -> None:
    fake.script("JoinGroup", joined())
    coordinator = coordinator_for(fake)
    try:
        assert join(coordinator) is not None
        assert not coordinator.rejoin_needed()
        fake.script("Heartbeat", lambda r: pb.HeartbeatResponse(error_code=27))

        def rejoin_asked() -> bool:
            coordinator.note_poll(time.monotonic())
            return coordinator.rejoin_needed()

        wait_until(rejoin_asked, TIMEOUT_S, message="heartbeat REBALANCE_IN_PROGRESS seen")
        assert coordinator.generation.generation_id == 1  # still valid: commits before the rejoin may go through
    finally:
        coordinator.close()


def test_a_fenced_commit_is_commit_failed_and_resets_the_generation(fake: ScriptedCoordinator) -> None:
    fake.script("JoinGroup", joined(generation=4))
    fake.script(
        "OffsetCommit",
        lambda r: pb.OffsetCommitResponse(
            topics=[
                pb.OffsetCommitTopicResponse(
                    name="t", partitions=[pb.OffsetCommitPartitionResponse(partition_index=0, error_code=22)]
                )
            ]
        ),
    )
    coordinator = coordinator_for(fake)
    try:
        result = join(coordinator)
        assert result is not None
        with pytest.raises(CommitFailedError, match="ILLEGAL_GENERATION, generation 4"):
            coordinator.commit_offsets(
                {TP("t", 0): OffsetAndMetadata(7, "meta")}, result.generation, time.monotonic() + TIMEOUT_S
            )
        (request,) = fake.requests["OffsetCommit"]
        assert (request.generation_id, request.member_id) == (4, "m-1")
        assert request.topics[0].partitions[0].committed_metadata == "meta"
        assert coordinator.rejoin_needed() and coordinator.generation_if_stable() is None
    finally:
        coordinator.close()
