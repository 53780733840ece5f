"""The controller's partition reassignment step by step, against a real quorum (docs/research/kafka.md §2.13).

The brokers are the recording gRPC servicers of test_kafka_controller: they
answer every request and replicate nothing, so the test plays the leader's
part and writes the ISR into the state znode itself, as a leader does when a
follower catches up. That makes each step of Kafka's algorithm observable and
deterministic: the topic znode with adding/removing replicas, the epoch bump
and LeaderAndIsr to every replica, waiting for a target broker that is down,
the leader moved into the target set, the old replicas stopped and deleted,
AR = RAR written last and the admin znode removed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from client.kafka import znodes as kz
from client.kafka.structs import TopicPartition
from client.zk.aio import AsyncZkClient
from tests import test_kafka_controller as base
from tests.test_kafka_controller import Node, create_topic, read_state, run, until, wait_for_controller, wait_states

pytestmark = base.pytestmark
# The fixtures of test_kafka_controller: one quorum for this module, a chroot per test.
quorum = base.quorum
hosts = base.hosts
cluster = base.cluster
admin = base.admin

TP = TopicPartition("t", 0)


def topic_znode(zk: AsyncZkClient) -> dict[str, Any]:
    data, _ = run(zk.get(kz.topic_path("t")))
    return dict(json.loads(data))


def leader_writes_isr(zk: AsyncZkClient, isr: list[int]) -> None:
    """What the partition leader does when the ISR grows: rewrite the state znode, same leader epoch."""
    found = run(read_state(zk, TP))
    assert found is not None
    state, version = found
    state["isr"] = isr
    run(zk.set(kz.partition_state_path("t", 0), json.dumps(state).encode(), version=version))


def lais_for(node: Node, since: int) -> list[Any]:
    out = []
    for kind, request in node.recorder.received[since:]:
        if kind == "LeaderAndIsr":
            out += [s for s in request.partition_states if s.topic_name == "t"]
    return out


def deleted_by(node: Node) -> bool:
    requests = node.recorder.of("StopReplica")
    return any(p.delete_partition and p.topic_name == "t" for r in requests for p in r.partitions)


def test_reassignment_waits_for_a_down_target_then_completes_in_kafka_order(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(3)
    wait_for_controller(nodes)
    create_topic(admin, "t", {0: (1, 2)})
    wait_states(admin, [TP], lambda s: s["leader"] == 1 and s["isr"] == [1, 2])
    marks = {n.broker_id: len(n.recorder.received) for n in nodes}

    # OAR = [1, 2], RAR = [3, 4] with broker 4 not running.
    run(admin.create(kz.REASSIGN_PARTITIONS_PATH, kz.encode_reassignment({TP: (3, 4)}), makepath=True))
    state = wait_states(admin, [TP], lambda s: s["leader_epoch"] == 1)[TP]
    assert state["leader"] == 1 and state["isr"] == [1, 2]
    znode = topic_znode(admin)
    assert znode["partitions"] == {"0": [3, 4, 1, 2]}
    assert znode["adding_replicas"] == {"0": [3, 4]} and znode["removing_replicas"] == {"0": [1, 2]}
    for node in nodes:  # A1 to every replica of RS, A2 (isNew) to the new one
        run(until(lambda n=node: bool(lais_for(n, marks[n.broker_id])), f"no LeaderAndIsr to {node.broker_id}"))
        got = lais_for(node, marks[node.broker_id])[-1]
        assert list(got.replicas) == [3, 4, 1, 2] and got.leader_epoch == 1 and got.leader == 1

    # Broker 3 catches up; 4 is still down: nothing moves.
    leader_writes_isr(admin, [1, 2, 3])
    assert run(admin.exists(kz.REASSIGN_PARTITIONS_PATH)) is not None
    assert topic_znode(admin)["partitions"] == {"0": [3, 4, 1, 2]}

    # Broker 4 starts: the controller resumes (new epoch, LeaderAndIsr to 4), then 4 catches up.
    (node4,) = cluster(1, first_id=4)
    run(until(lambda: bool(lais_for(node4, 0)), "broker 4 got no LeaderAndIsr"))
    assert list(lais_for(node4, 0)[-1].replicas) == [3, 4, 1, 2]
    leader_writes_isr(admin, [1, 2, 3, 4])

    # Done: leader from RAR, OAR out of the ISR, AR = RAR, the admin znode gone, OAR deleted.
    run(until(lambda: znode_gone(admin), "/admin/reassign_partitions was not removed"))
    final = wait_states(admin, [TP], lambda s: s["isr"] == [3, 4])[TP]
    assert final["leader"] == 3
    assert topic_znode(admin)["partitions"] == {"0": [3, 4]}
    assert topic_znode(admin)["adding_replicas"] == {} and topic_znode(admin)["removing_replicas"] == {}
    by_id = {n.broker_id: n for n in nodes}
    run(until(lambda: deleted_by(by_id[1]) and deleted_by(by_id[2]), "OAR got no StopReplica(delete=true)"))
    assert not deleted_by(by_id[3]) and not deleted_by(node4)
    controller = next(n for n in nodes + [node4] if n.active)
    log_text = controller.log_path.read_text()
    assert "Completed reassignment of partition t-0 to replicas 3,4" in log_text
    assert "Leader 1 for partition t-0 being reassigned, is not in the new list of replicas 3,4" in log_text
    # The leader moved before OAR left the ISR, and AR = RAR was written after both.
    order = [
        log_text.index("Leader 1 for partition t-0 being reassigned"),
        log_text.index("Changed state of replica 1 for partition t-0 from OnlineReplica to OfflineReplica"),
        log_text.index("Completed reassignment of partition t-0"),
    ]
    assert order == sorted(order)


async def znode_gone(zk: AsyncZkClient) -> bool:
    return await zk.exists(kz.REASSIGN_PARTITIONS_PATH) is None


def test_bad_reassignment_entries_are_refused_and_removed(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(2)
    wait_for_controller(nodes)
    create_topic(admin, "t", {0: (1, 2)})
    wait_states(admin, [TP], lambda s: s["leader"] == 1)
    bad = {
        TopicPartition("t", 7): (1, 2),  # no such partition
        TopicPartition("nope", 0): (1, 2),  # no such topic
        TP: (2, 2),  # duplicate replica
    }
    run(admin.create(kz.REASSIGN_PARTITIONS_PATH, kz.encode_reassignment(bad), makepath=True))
    run(until(lambda: znode_gone(admin), "refused reassignments were not removed"))
    assert topic_znode(admin)["partitions"] == {"0": [1, 2]}
    found = run(read_state(admin, TP))
    assert found is not None and found[0]["leader_epoch"] == 0


def test_a_changed_target_replaces_the_reassignment_in_flight(
    cluster: Callable[..., list[Node]], admin: AsyncZkClient
) -> None:
    nodes = cluster(4)
    wait_for_controller(nodes)
    by_id = {n.broker_id: n for n in nodes}
    create_topic(admin, "t", {0: (1, 2)})
    wait_states(admin, [TP], lambda s: s["leader"] == 1 and s["isr"] == [1, 2])

    run(admin.create(kz.REASSIGN_PARTITIONS_PATH, kz.encode_reassignment({TP: (3,)}), makepath=True))
    wait_states(admin, [TP], lambda s: s["leader_epoch"] == 1)
    assert topic_znode(admin)["partitions"] == {"0": [3, 1, 2]}

    # The admin changes its mind before 3 caught up: 3 is stopped and deleted, 4 is added instead.
    run(admin.set(kz.REASSIGN_PARTITIONS_PATH, kz.encode_reassignment({TP: (4,)})))
    run(until(lambda: deleted_by(by_id[3]), "the replica no longer wanted was not deleted"))
    wait_states(admin, [TP], lambda s: s["leader_epoch"] >= 2)
    znode = topic_znode(admin)
    assert znode["partitions"] == {"0": [4, 1, 2]}
    assert znode["adding_replicas"] == {"0": [4]} and znode["removing_replicas"] == {"0": [1, 2]}

    leader_writes_isr(admin, [1, 2, 4])
    run(until(lambda: znode_gone(admin), "/admin/reassign_partitions was not removed"))
    final = wait_states(admin, [TP], lambda s: s["isr"] == [4])[TP]
    assert final["leader"] == 4
    assert topic_znode(admin)["partitions"] == {"0": [4]}
    run(until(lambda: deleted_by(by_id[1]) and deleted_by(by_id[2]), "OAR got no StopReplica(delete=true)"))
    assert not deleted_by(by_id[4])
