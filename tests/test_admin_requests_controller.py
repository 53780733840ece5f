"""The controller's answers to the admin APIs (ElectLeaders, KIP-455 Alter/ListPartitionReassignments), step by step.

The brokers are the recording gRPC servicers of test_kafka_controller on a real quorum: they answer every
request and replicate nothing, so the test writes the ISR into the state znode as a leader would. Each
outcome Kafka 2.8's controller gives is checked: a preferred election whose preferred replica is dead
(PREFERRED_LEADER_NOT_AVAILABLE), an unclean election that takes a live replica from outside the ISR, then
ELECTION_NOT_NEEDED; a reassignment shown in the topic znode with adding/removing replicas and listed, then
cancelled back to its original replicas, NO_REASSIGNMENT_IN_PROGRESS after that, bad replica lists refused;
NOT_CONTROLLER from a broker that is not the controller.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from client.kafka import znodes as kz
from client.kafka.structs import TopicPartition
from client.zk.aio import AsyncZkClient
from tests import test_kafka_controller as base
from tests.test_kafka_controller import Node, create_topic, read_state, run, wait_for_controller, wait_states

pytestmark = base.pytestmark
quorum = base.quorum
hosts = base.hosts
cluster = base.cluster
admin = base.admin

NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT = 41, 3, 39
PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS = 80, 84, 85
PREFERRED, UNCLEAN = 0, 1


def leader_writes_isr(zk: AsyncZkClient, tp: TopicPartition, isr: list[int]) -> None:
    found = run(read_state(zk, tp))
    assert found is not None
    state, version = found
    state["isr"] = isr
    run(zk.set(kz.partition_state_path(tp.topic, tp.partition), json.dumps(state).encode(), version=version))


def test_preferred_then_unclean_election(cluster: Callable[..., list[Node]], admin: AsyncZkClient) -> None:
    nodes = cluster(3)
    controller = wait_for_controller(nodes)
    x, y = (n for n in nodes if n is not controller)
    tp = TopicPartition("u", 0)
    create_topic(admin, "u", {0: (x.broker_id, y.broker_id)})
    wait_states(admin, [tp], lambda s: s["leader"] == x.broker_id and len(s["isr"]) == 2)
    leader_writes_isr(admin, tp, [x.broker_id])  # y fell behind
    run(x.kill_session())
    # Unclean election is off: the partition stays without a leader, its ISR the dead broker.
    wait_states(admin, [tp], lambda s: s["leader"] == -1)
    assert controller.controller is not None and y.controller is not None

    def elect(at: Node, election_type: int, partitions: tuple[TopicPartition, ...] | None) -> tuple[int, dict]:
        assert at.controller is not None
        return run(at.controller.elect_leaders(partitions, election_type))

    assert elect(y, PREFERRED, (tp,)) == (NOT_CONTROLLER, {})
    code, results = elect(controller, PREFERRED, (tp, TopicPartition("nope", 0)))
    assert code == 0
    assert results[TopicPartition("nope", 0)] == (UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert results[tp][0] == PREFERRED_LEADER_NOT_AVAILABLE
    assert results[tp][1] == (
        "Failed to elect leader for partition u-0 under strategy PreferredReplicaPartitionLeaderElectionStrategy"
    )
    assert elect(controller, UNCLEAN, (tp,)) == (0, {tp: (0, "")})
    state = wait_states(admin, [tp], lambda s: s["leader"] == y.broker_id)[tp]
    assert state["isr"] == [y.broker_id]
    assert elect(controller, UNCLEAN, (tp,)) == (0, {tp: (ELECTION_NOT_NEEDED, "")})
    # Over every partition, those that needed no election are left out.
    assert elect(controller, UNCLEAN, None) == (0, {})
    assert "Unclean leader election" in controller.log_path.read_text()


def test_api_reassignment_listed_then_cancelled(cluster: Callable[..., list[Node]], admin: AsyncZkClient) -> None:
    nodes = cluster(3)
    controller = wait_for_controller(nodes)
    assert controller.controller is not None
    other = next(n for n in nodes if n is not controller)
    assert other.controller is not None
    tp = TopicPartition("r", 0)
    create_topic(admin, "r", {0: (1, 2)})
    wait_states(admin, [tp], lambda s: s["leader"] == 1 and s["isr"] == [1, 2])

    def alter(at: Node, target: tuple[int, ...] | None) -> tuple[int, dict]:
        assert at.controller is not None
        return run(at.controller.alter_partition_reassignments(((tp, target),)))

    assert alter(other, (3,)) == (NOT_CONTROLLER, {})
    assert alter(controller, None) == (0, {tp: (NO_REASSIGNMENT_IN_PROGRESS, "")})
    assert alter(controller, ())[1][tp][0] == INVALID_REPLICA_ASSIGNMENT
    assert alter(controller, (3, 9))[1][tp] == (
        INVALID_REPLICA_ASSIGNMENT,
        "Replica assignment has brokers that are not alive. Replica list: [3,9], live broker list: [1,2,3]",
    )
    assert alter(controller, (3,)) == (0, {tp: (0, "")})
    znode = json.loads(run(admin.get(kz.topic_path("r")))[0])
    assert znode["partitions"] == {"0": [3, 1, 2]}
    assert znode["adding_replicas"] == {"0": [3]} and znode["removing_replicas"] == {"0": [1, 2]}
    code, ongoing = run(controller.controller.list_partition_reassignments(None))
    assert code == 0 and list(ongoing) == [tp]
    assert (ongoing[tp].replicas, ongoing[tp].adding, ongoing[tp].removing) == ((3, 1, 2), (3,), (1, 2))

    assert alter(controller, None) == (0, {tp: (0, "")})
    znode = json.loads(run(admin.get(kz.topic_path("r")))[0])
    assert znode["partitions"] == {"0": [1, 2]}
    assert znode.get("adding_replicas", {}) == {} and znode.get("removing_replicas", {}) == {}
    assert run(controller.controller.list_partition_reassignments((tp,))) == (0, {})
    assert alter(controller, None) == (0, {tp: (NO_REASSIGNMENT_IN_PROGRESS, "")})
    assert wait_states(admin, [tp], lambda s: True)[tp]["leader"] == 1
