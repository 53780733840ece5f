"""Container and TTL znodes on a real quorum: three `zkraft quorum start` processes, the leader's sweep every
200 ms (znode.container.checkIntervalMs), what a user would check through the SDK on every node.

A node the sweep must keep is checked after a node it must remove is gone: that proves sweeps ran since
the kept one became eligible in the wrong reading, without sleeping on a guess.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import ZkClient
from client.zk.exceptions import UnimplementedError
from client.zk.states import EventType
from tests import zk_wire_client as wire
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses
from tests.test_zk_client_cluster import LEADER_TIMEOUT_S, WAIT_S, Recorder, connect, followers, run, wait_for_leader
from zkemu import jute_codec as jute
from zkemu.errors import Code

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CHECK_INTERVAL_MS = 200
PROPERTIES = {
    **FAST_ZK_PROPERTIES,
    "znode.container.checkIntervalMs": str(CHECK_INTERVAL_MS),
    "zookeeper.extendedTypesEnabled": "true",
}
TTL_MS = 1500


def start_cluster(root: Path, n: int, properties: dict[str, str]) -> QuorumProcesses:
    processes = QuorumProcesses(root, n=n, properties=properties)
    processes.start_all()
    run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
    return processes


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[QuorumProcesses]:
    with start_cluster(tmp_path, 3, PROPERTIES) as processes:
        yield processes


@pytest.fixture
def clients() -> Iterator[list[ZkClient]]:
    made: list[ZkClient] = []
    yield made
    for zk in made:
        zk.close()


def one_per_node(cluster: QuorumProcesses, made: list[ZkClient], nodes: list[int] | None = None) -> list[ZkClient]:
    return [connect(made, cluster.addresses[n]) for n in (nodes or sorted(cluster.addresses))]


def gone_everywhere(readers: list[ZkClient], path: str) -> None:
    wait_until(lambda: all(r.exists(path) is None for r in readers), WAIT_S, message=f"{path} removed on every node")


def present_everywhere(readers: list[ZkClient], path: str) -> bool:
    for r in readers:
        r.sync(path)
    return all(r.exists(path) is not None for r in readers)


def test_a_container_is_removed_everywhere_once_its_last_child_goes(
    cluster: QuorumProcesses, clients: list[ZkClient]
) -> None:
    readers = one_per_node(cluster, clients)
    zk = readers[0]
    assert zk.create("/used", container=True) == "/used"
    assert zk.create("/never-used", container=True) == "/never-used"
    stat = zk.exists("/used")
    assert stat is not None and stat.ephemeralOwner == 0  # ZooKeeper reports 0 for containers
    zk.create("/used/a")
    zk.create("/used/b", ephemeral=True)
    deleted = Recorder()
    readers[2].sync("/used")
    assert readers[2].exists("/used", watch=deleted) is not None
    zk.delete("/used/a")
    # One child left: several sweeps pass and it stays.
    zk.create("/marker", container=True)
    zk.create("/marker/x")
    zk.delete("/marker/x")
    gone_everywhere(readers, "/marker")
    assert present_everywhere(readers, "/used")
    zk.delete("/used/b")
    gone_everywhere(readers, "/used")
    wait_until(lambda: deleted.snapshot(), WAIT_S, message="the watch on the container fired")
    assert [e.type for e in deleted.snapshot()] == [EventType.DELETED]
    assert present_everywhere(readers, "/never-used")  # never had a child: kept (maxNeverUsedIntervalMs 0)


def test_a_ttl_node_goes_once_unmodified_and_childless_for_its_ttl(
    cluster: QuorumProcesses, clients: list[ZkClient]
) -> None:
    readers = one_per_node(cluster, clients)
    zk = readers[1]
    zk.create("/ttl-alone", b"x", ttl_ms=TTL_MS)
    zk.create("/ttl-parent", ttl_ms=TTL_MS)
    zk.create("/ttl-parent/child")
    seq = zk.create("/ttl-seq-", ttl_ms=TTL_MS, sequence=True)
    assert seq == "/ttl-seq-0000000002"  # the root's third child create (the built-in /zookeeper counts none)
    stat = zk.exists("/ttl-alone")
    assert stat is not None and stat.ephemeralOwner == 0
    gone_everywhere(readers, "/ttl-alone")
    gone_everywhere(readers, seq)
    assert present_everywhere(readers, "/ttl-parent")  # past its TTL too, but it has a child
    zk.delete("/ttl-parent/child")
    gone_everywhere(readers, "/ttl-parent")


def test_the_sweep_goes_on_after_the_leader_is_killed(cluster: QuorumProcesses, clients: list[ZkClient]) -> None:
    leader_id, survivors = followers(cluster)
    readers = one_per_node(cluster, clients, survivors)
    zk = readers[0]
    zk.create("/box", container=True)
    zk.create("/box/item")
    zk.create("/lease", ttl_ms=60_000)  # a long TTL: must outlive the failover
    zk.create("/short", ttl_ms=TTL_MS)
    cluster.kill(leader_id)
    run(wait_for_leader(cluster.addresses, timeout_s=LEADER_TIMEOUT_S, exclude=[leader_id]))
    zk.retry(zk.delete, "/box/item")
    gone_everywhere(readers, "/box")
    gone_everywhere(readers, "/short")
    assert present_everywhere(readers, "/lease")


def test_never_used_containers_go_with_max_never_used_and_ttl_needs_extended_types(
    tmp_path: Path, clients: list[ZkClient]
) -> None:
    properties: dict[str, Any] = {
        **FAST_ZK_PROPERTIES,
        "znode.container.checkIntervalMs": str(CHECK_INTERVAL_MS),
        "znode.container.maxNeverUsedIntervalMs": "1000",
    }
    with start_cluster(tmp_path, 1, properties) as single:
        [zk] = one_per_node(single, clients)
        zk.create("/idle", container=True)
        gone_everywhere([zk], "/idle")
        with pytest.raises(UnimplementedError):
            zk.create("/ttl", ttl_ms=TTL_MS)
        t = zk.transaction()
        t.create("/in-txn", ttl_ms=TTL_MS)
        with pytest.raises(UnimplementedError):
            t.commit()
        assert zk.exists("/ttl") is None and zk.exists("/in-txn") is None
        _wire_creates_without_extended_types(single.zk_address(1))


def _wire_creates_without_extended_types(address: str) -> None:
    """createContainer (19) and createTTL (21) as raw ZooKeeper wire frames: the container is created (a
    Create2Response, ephemeralOwner 0); the TTL node gets UNIMPLEMENTED, the connection stays open."""
    open_acl = wire.int32(1) + wire.int32(31) + wire.ustring("world") + wire.ustring("anyone")
    with wire.WireClient.connect(address) as client:
        record = wire.ustring("/box") + wire.buffer(b"") + open_acl + wire.int32(0)
        reply = client.call(jute.OP_CREATE_CONTAINER, record)
        assert (reply.err, reply.string()) == (0, "/box")
        stat = reply.stat()
        assert stat[7] == 0 and stat[0] == stat[1] == reply.zxid  # ephemeralOwner 0; czxid == mzxid == the txn
        record = wire.ustring("/ttl") + wire.buffer(b"") + open_acl + wire.int32(5) + wire.int64(TTL_MS)
        assert client.call(jute.OP_CREATE_TTL, record).err == Code.UNIMPLEMENTED
        flags_only = wire.ustring("/ttl") + wire.buffer(b"") + open_acl + wire.int32(5)
        assert client.call(jute.OP_CREATE, flags_only).err == Code.UNIMPLEMENTED
        reply = client.call(jute.OP_EXISTS, wire.ustring("/box") + wire.boolean(False))  # still served
        assert reply.err == 0 and reply.stat()[7] == 0
