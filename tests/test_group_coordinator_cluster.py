"""The group coordinator over real broker processes, driven through the raw gRPC group API.

FindCoordinator creates `__consumer_offsets` (50 partitions, RF 3, compacted) and names
the leader of partition abs(hashCode(group)) % 50; members join, sync, heartbeat,
rebalance to a higher generation, expire, commit; the committed offsets survive the
SIGKILL of the coordinator broker (the new leader reloads them from the log).
Waiting is always polling with a deadline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker.group.partitioner import OFFSETS_TOPIC, java_string_hash
from client.kafka import errors
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

pytestmark = pytest.mark.integration

GROUP = "my-group"
NONE = errors.NONE
RPC_TIMEOUT_S = 30.0
WAIT_S = 60.0
LONG_SESSION_MS = 30000
SHORT_SESSION_MS = 1500
REBALANCE_TIMEOUT_MS = 10000
RETRIABLE = {
    errors.CoordinatorLoadInProgressError.code,
    errors.NotCoordinatorError.code,
    errors.CoordinatorNotAvailableError.code,
}
PROPERTIES = {
    "group.initial.rebalance.delay.ms": "1000",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "replica.lag.time.max.ms": "3000",
}


def stub(cluster: KafkaCluster, broker_id: int) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.broker_address(broker_id)))


def find_coordinator(cluster: KafkaCluster, via: int) -> pb.FindCoordinatorResponse | None:
    try:
        response = stub(cluster, via).FindCoordinator(pb.FindCoordinatorRequest(key=GROUP), timeout=RPC_TIMEOUT_S)
    except grpc.RpcError:
        return None
    return response if response.error_code == NONE else None


def join_request(member_id: str, client_id: str, session_ms: int, topics: str) -> pb.JoinGroupRequest:
    return pb.JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        client_id=client_id,
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        protocol_type="consumer",
        protocols=[pb.JoinGroupProtocol(name="range", metadata=topics.encode())],
    )


def describe(coordinator: broker_pb2_grpc.BrokerStub) -> pb.DescribedGroup:
    response = coordinator.DescribeGroups(pb.DescribeGroupsRequest(groups=[GROUP]), timeout=RPC_TIMEOUT_S)
    return response.groups[0]


def heartbeat(coordinator: broker_pb2_grpc.BrokerStub, generation: int, member_id: str) -> int:
    request = pb.HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member_id)
    return coordinator.Heartbeat(request, timeout=RPC_TIMEOUT_S).error_code


def commit(
    coordinator: broker_pb2_grpc.BrokerStub, generation: int, member_id: str, offsets: dict[int, int]
) -> set[int]:
    request = pb.OffsetCommitRequest(
        group_id=GROUP,
        generation_id=generation,
        member_id=member_id,
        topics=[
            pb.OffsetCommitTopic(
                name="t",
                partitions=[
                    pb.OffsetCommitPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1)
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    response = coordinator.OffsetCommit(request, timeout=RPC_TIMEOUT_S)
    return {p.error_code for t in response.topics for p in t.partitions}


def fetch_offsets(coordinator: broker_pb2_grpc.BrokerStub) -> tuple[int, dict[int, int]]:
    request = pb.OffsetFetchRequest(group_id=GROUP, topics=[pb.OffsetFetchTopic(name="t", partition_indexes=[0, 1, 2])])
    response = coordinator.OffsetFetch(request, timeout=RPC_TIMEOUT_S)
    return response.error_code, {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


def in_thread(pool: ThreadPoolExecutor, call: Callable[..., Any], *args: Any) -> Future[Any]:
    return pool.submit(call, *args, timeout=RPC_TIMEOUT_S)


def test_group_membership_offsets_and_coordinator_failover(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, brokers=3, broker_properties=PROPERTIES) as cluster, ThreadPoolExecutor(4) as pool:
        cluster.start()
        # Offsets are committed for partitions of a topic the brokers know (Kafka answers
        # UNKNOWN_TOPIC_OR_PARTITION otherwise).
        cluster.create_topic("t", partitions=3, replication_factor=3)

        # FindCoordinator creates __consumer_offsets and names the leader of the group's partition.
        found = wait_until(lambda: find_coordinator(cluster, 1), WAIT_S, 0.2, "no coordinator found")
        assert isinstance(found, pb.FindCoordinatorResponse)
        assignment = cluster.assignment(OFFSETS_TOPIC)
        assert len(assignment) == 50 and all(len(replicas) == 3 for replicas in assignment.values())
        config, _ = cluster.zk.get(f"/config/topics/{OFFSETS_TOPIC}")
        assert json.loads(config)["config"]["cleanup.policy"] == "compact"
        partition = abs(java_string_hash(GROUP)) % 50
        assert partition == 12
        assert found.node_id == cluster.partition_state(OFFSETS_TOPIC, partition).leader
        assert found.port == cluster.ports[found.node_id]
        coordinator_id = found.node_id
        coordinator = stub(cluster, coordinator_id)

        # Loaded and serving: an unknown member's heartbeat gets UNKNOWN_MEMBER_ID.
        wait_until(
            lambda: heartbeat(coordinator, 0, "nobody") == errors.UnknownMemberIdError.code,
            WAIT_S,
            0.1,
            "coordinator never loaded its partition",
        )

        # Two members join: the first is the leader, gets both metadata; generation 1.
        join_a = in_thread(pool, coordinator.JoinGroup, join_request("", "a", LONG_SESSION_MS, "t"))
        wait_until(lambda: len(describe(coordinator).members) == 1, WAIT_S, 0.05, "the first member never joined")
        join_b = in_thread(pool, coordinator.JoinGroup, join_request("", "b", LONG_SESSION_MS, "t"))
        a, b = join_a.result(), join_b.result()
        assert (a.error_code, b.error_code) == (NONE, NONE)
        assert a.generation_id == b.generation_id == 1
        assert a.member_id.startswith("a-") and b.member_id.startswith("b-")
        assert a.leader == b.leader == a.member_id
        assert {m.member_id for m in a.members} == {a.member_id, b.member_id} and not b.members
        assert a.protocol_name == "range"

        # The leader syncs the assignment; both get theirs.
        sync_b = in_thread(
            pool, coordinator.SyncGroup, pb.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=b.member_id)
        )
        sync_a = coordinator.SyncGroup(
            pb.SyncGroupRequest(
                group_id=GROUP,
                generation_id=1,
                member_id=a.member_id,
                assignments=[
                    pb.SyncGroupAssignment(member_id=a.member_id, assignment=b"for-a"),
                    pb.SyncGroupAssignment(member_id=b.member_id, assignment=b"for-b"),
                ],
            ),
            timeout=RPC_TIMEOUT_S,
        )
        assert (sync_a.error_code, sync_a.assignment) == (NONE, b"for-a")
        assert (sync_b.result().error_code, sync_b.result().assignment) == (NONE, b"for-b")
        assert heartbeat(coordinator, 1, a.member_id) == NONE
        assert heartbeat(coordinator, 1, b.member_id) == NONE
        assert describe(coordinator).group_state == "Stable"

        # A third member joins: heartbeats answer REBALANCE_IN_PROGRESS, rejoins give generation 2.
        join_c = in_thread(pool, coordinator.JoinGroup, join_request("", "c", SHORT_SESSION_MS, "t"))
        wait_until(
            lambda: heartbeat(coordinator, 1, a.member_id) == errors.RebalanceInProgressError.code,
            WAIT_S,
            0.05,
            "no rebalance after a third member joined",
        )
        assert heartbeat(coordinator, 1, b.member_id) == errors.RebalanceInProgressError.code
        rejoin_a = in_thread(pool, coordinator.JoinGroup, join_request(a.member_id, "a", LONG_SESSION_MS, "t"))
        rejoin_b = in_thread(pool, coordinator.JoinGroup, join_request(b.member_id, "b", LONG_SESSION_MS, "t"))
        a2, b2, c2 = rejoin_a.result(), rejoin_b.result(), join_c.result()
        assert {r.error_code for r in (a2, b2, c2)} == {NONE}
        assert {r.generation_id for r in (a2, b2, c2)} == {2}
        assert a2.leader == a.member_id and len(a2.members) == 3

        # A commit from the old generation and one from an unknown member are refused.
        assert commit(coordinator, 1, a.member_id, {0: 5}) == {errors.IllegalGenerationError.code}
        assert commit(coordinator, 2, "ghost", {0: 5}) == {errors.UnknownMemberIdError.code}

        # The leader's sync makes generation 2 Stable; then offsets commit and fetch.
        sync_a2 = coordinator.SyncGroup(
            pb.SyncGroupRequest(
                group_id=GROUP,
                generation_id=2,
                member_id=a.member_id,
                assignments=[pb.SyncGroupAssignment(member_id=a.member_id, assignment=b"a2")],
            ),
            timeout=RPC_TIMEOUT_S,
        )
        assert sync_a2.error_code == NONE
        assert commit(coordinator, 2, a.member_id, {0: 10, 1: 20}) == {NONE}
        assert fetch_offsets(coordinator) == (NONE, {0: 10, 1: 20, 2: -1})

        # c never heartbeats: it is removed after its session timeout and the group rebalances.
        def c_removed() -> bool:
            heartbeat(coordinator, 2, a.member_id)
            heartbeat(coordinator, 2, b.member_id)
            return c2.member_id not in {m.member_id for m in describe(coordinator).members}

        wait_until(c_removed, WAIT_S, 0.1, "the silent member was never expired")
        assert heartbeat(coordinator, 2, a.member_id) == errors.RebalanceInProgressError.code
        assert heartbeat(coordinator, 2, c2.member_id) == errors.UnknownMemberIdError.code

        # SIGKILL the coordinator: another broker leads the partition and reloads the offsets.
        cluster.kill_broker(coordinator_id)
        survivor = next(b for b in cluster.broker_ids if b != coordinator_id)

        def moved() -> pb.FindCoordinatorResponse | None:
            response = find_coordinator(cluster, survivor)
            return response if response is not None and response.node_id != coordinator_id else None

        new = wait_until(moved, WAIT_S, 0.2, "the coordinator never moved")
        assert isinstance(new, pb.FindCoordinatorResponse)
        new_coordinator = stub(cluster, new.node_id)

        def reloaded() -> dict[int, int] | None:
            error, offsets = fetch_offsets(new_coordinator)
            assert error in RETRIABLE | {NONE}
            return offsets if error == NONE else None

        assert wait_until(reloaded, WAIT_S, 0.1, "offsets never reloaded") == {0: 10, 1: 20, 2: -1}
        loads = [e for e in cluster.log_events(new.node_id, "group_partition_loaded") if e["partition"] == partition]
        assert loads and loads[-1]["groups"] >= 1 and loads[-1]["records"] >= 3
        described = describe(new_coordinator)
        assert described.error_code == NONE and described.group_state in ("Stable", "PreparingRebalance")

        # Listed; not deletable while it has members; deletable once they all left.
        def listed() -> bool:
            response = new_coordinator.ListGroups(pb.ListGroupsRequest(), timeout=RPC_TIMEOUT_S)
            return response.error_code == NONE and GROUP in {g.group_id for g in response.groups}

        wait_until(listed, WAIT_S, 0.1, "the group is not listed by its new coordinator")
        delete = pb.DeleteGroupsRequest(groups_names=[GROUP])
        assert new_coordinator.DeleteGroups(delete, timeout=RPC_TIMEOUT_S).results[0].error_code == (
            errors.NonEmptyGroupError.code
        )
        members = [pb.LeaveGroupMember(member_id=m) for m in (a.member_id, b.member_id, c2.member_id)]
        left = new_coordinator.LeaveGroup(pb.LeaveGroupRequest(group_id=GROUP, members=members), timeout=RPC_TIMEOUT_S)
        assert left.error_code == NONE
        wait_until(lambda: describe(new_coordinator).group_state == "Empty", WAIT_S, 0.05, "the group never emptied")
        assert new_coordinator.DeleteGroups(delete, timeout=RPC_TIMEOUT_S).results[0].error_code == NONE
        assert describe(new_coordinator).group_state == "Dead"
        assert fetch_offsets(new_coordinator) == (NONE, {0: -1, 1: -1, 2: -1})
        assert new_coordinator.DeleteGroups(delete, timeout=RPC_TIMEOUT_S).results[0].error_code == (
            errors.GroupIdNotFoundError.code
        )
