"""A client and a broker given only node 1 follow the quorum's membership and outlive node 1 (issue 32).

Real processes: quorum nodes 1-3 (node 4 joins with --join), one broker whose `zookeeper.connect` names
node 1 alone, and an SDK client with the same connect string. Node 4 is added with `zkraft quorum add`,
node 1 removed with `zkraft quorum remove` and SIGKILLed: both sessions move to a member they learned
from /zookeeper/config and survive. The mechanism on its own (the parser, the watch, the list kept
on bad text) is tested against fake servers in test_zk_ensemble_tracker.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from client import ZkClient
from client.zk.states import ZnodeStat
from tests.helpers import wait_until
from tests.kafka_harness import QUORUM_PROPERTIES, KafkaCluster
from tests.quorum_harness import wait_for_leader, wait_serving
from tests.test_quorum_membership_cluster import BOOTSTRAP, MemberProcesses, zkraft

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT_S = 60.0
# How long a client may take to see a committed membership change in /zookeeper/config: one watch event.
FOLLOW_WAIT_S = 10.0
SESSION_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    root = tmp_path_factory.mktemp("follow")
    with KafkaCluster(root, brokers=1) as kafka:
        kafka.quorum = quorum = MemberProcesses(
            root / "members", n=4, properties={**QUORUM_PROPERTIES, "raft.tick.ms": "20"}
        )
        kafka.properties["zookeeper.connect"] = quorum.addresses[1]  # node 1 alone
        for i in BOOTSTRAP:
            quorum.start(i)
        # Started at once, all of them: the broker retries until the quorum serves, node 4 until it is added.
        kafka.start_broker(1, wait=False)
        quorum.start(4)
        asyncio.run(wait_for_leader({i: quorum.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S))
        kafka.wait_registered([1], TIMEOUT_S)
        kafka.wait_controller()
        yield kafka


def stat_of(zk: ZkClient, path: str) -> ZnodeStat:
    stat = zk.exists(path)
    assert stat is not None, f"{path} is gone"
    return stat


def test_a_client_and_a_broker_given_only_node_1_survive_its_removal(cluster: KafkaCluster) -> None:
    quorum = cluster.quorum
    one, others = quorum.addresses[1], [quorum.addresses[i] for i in (2, 3, 4)]
    with ZkClient(one, session_timeout_ms=SESSION_MS, timeout=TIMEOUT_S) as zk:
        session_id = (zk.client_id or (0, b""))[0]
        zk.create("/follow-me", ephemeral=True)
        broker_session = stat_of(zk, "/brokers/ids/1").ephemeralOwner

        asyncio.run(wait_serving(quorum.addresses[4], TIMEOUT_S))
        done = zkraft("add", "--server", one, "--id", "4", "--address", quorum.addresses[4])
        assert done.returncode == 0, done.stderr + quorum.log_tail(4)
        wait_until(lambda: set(zk.hosts) == {one, *others}, FOLLOW_WAIT_S, message="node 4 not learned")

        done = zkraft("remove", "--server", ",".join(others), "--id", "1")
        assert done.returncode == 0, done.stderr
        quorum.kill(1)
        # The session moves to a member it learned; reading the configuration again there drops node 1.
        wait_until(lambda: zk.connected and zk.server in others, TIMEOUT_S, message="no reconnect to a member")
        wait_until(lambda: set(zk.hosts) == set(others), FOLLOW_WAIT_S, message="node 1 still listed")
        assert (zk.client_id or (0, b""))[0] == session_id
        assert stat_of(zk, "/follow-me").ephemeralOwner == session_id

        # The broker's session moved too: its registration is the same ephemeral, and as the controller it
        # still acts on the quorum: a topic written into /brokers/topics (as Kafka's AdminUtils wrote it)
        # gets its partition's leader.
        zk.create("/brokers/topics/after-node-1-left", b'{"version":1,"partitions":{"0":[1]}}')
        cluster.wait_leaders("after-node-1-left", 1, TIMEOUT_S)
        assert stat_of(zk, "/brokers/ids/1").ephemeralOwner == broker_session
        cluster.assert_alive(1)
