"""ZooKeeper's own Java client and Apache Curator (from pyspark's jars) against zkraft's client port.

Each scenario is a small Java program in tests/java (one scenario per method, JSON lines out) run
against a real 3-node ZooKeeper ensemble and against a 3-node zkraft quorum, sessions spread over the
nodes. The expected observations are written here once: ZooKeeper itself must produce them (that proves
the scenario is right), and zkraft must produce the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.java_clients import (
    ClientPortCluster,
    JavaClients,
    reference_cluster,
    unavailable_reason,
)
from tests.zkraft_clients import zkraft_cluster

_UNAVAILABLE = unavailable_reason()
if _UNAVAILABLE is not None:
    pytest.skip(f"cannot run ZooKeeper's Java clients: {_UNAVAILABLE}", allow_module_level=True)

pytestmark = pytest.mark.integration

RECONNECT_READY_TIMEOUT_S = 90.0
RECONNECT_DONE_TIMEOUT_S = 150.0
PROGRAM_EXIT_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaClients:
    """tests/java/*.java compiled once for the module (javac at test time, into a temporary folder)."""
    clients = JavaClients(tmp_path_factory.mktemp("java-clients"))
    clients.compile_programs()
    return clients


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientPortCluster]:
    with reference_cluster(tmp_path_factory.mktemp("zookeeper"), n=3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def zkraft(tmp_path_factory: pytest.TempPathFactory, java: JavaClients) -> Iterator[ClientPortCluster]:
    with zkraft_cluster(tmp_path_factory.mktemp("zkraft"), n=3) as cluster:
        yield cluster


@pytest.fixture(params=["zookeeper", "zkraft"])
def cluster(request: pytest.FixtureRequest) -> ClientPortCluster:
    return request.getfixturevalue(request.param)


def run(java: JavaClients, cluster: ClientPortCluster, program: str, scenario: str) -> dict[str, object]:
    done = java.run_program(program, scenario, cluster.connect_string())
    seen = done.result()
    seen.pop("result")
    return seen


# ---------------------------------------------------------------- the Java client

CRUD = {
    "create": "/java-crud",
    "get": "v1",
    "get_version": 0,
    "set_version": 1,
    "set_stale_version": "BADVERSION",
    "create_existing": "NODEEXISTS",
    "create_no_parent": "NONODE",
    "child": "/java-crud/c",
    "sequential": "/java-crud/s-0000000001",
    "ephemeral_owner_is_session": True,
    "create2_stat": [0, 3, True],
    "children": ["c", "c2", "e", "s-0000000001"],
    "parent_stat": [4, 4, 1],
    "exists_missing": True,
    "get_missing": "NONODE",
    "delete_not_empty": "NOTEMPTY",
    "delete_bad_version": "BADVERSION",
    "ephemeral_child": "NOCHILDRENFOREPHEMERALS",
    "all_children_number": 4,
    "ephemerals": ["/java-crud/e"],
    "multi": ["CheckResult", "CreateResult", "SetDataResult", "DeleteResult"],
    # The failed multi: the error, then each op's code (0 before the failing op, BadVersion -103 at it),
    # and the create rolled back.
    "multi_failed": ["BADVERSION", 0, -103, True],
    "multi_read": [["data", "m", 1], ["children", []], ["error", -101]],
    "deleted": 5,
    "after_delete": True,
}


def test_java_client_crud_multi_and_multiread(java: JavaClients, cluster: ClientPortCluster) -> None:
    assert run(java, cluster, "ZkClientScenarios", "crud") == CRUD


WATCHES = {
    "exists_watch_on_missing": True,
    "one_shot": ["NodeDataChanged /java-w", "NodeCreated /java-w/new", "NodeChildrenChanged /java-w"],
    # 3.9 puts the zxid of the change in the notification's header; the client hands it to the watcher.
    "data_event_zxid_is_mzxid": True,
    "recursive": [
        "NodeCreated /java-r",
        "NodeCreated /java-r/x",
        "NodeCreated /java-r/x/y",
        "NodeDataChanged /java-r/x",
        "NodeDeleted /java-r/x/y",
    ],
    "removed": ["PersistentWatchRemoved /java-r"],
    "remove_again": "NOWATCHER",
    "marker": ["NodeCreated /java-r/z"],
    "after_remove": [],
}


def test_java_client_watches_fired_from_another_server(java: JavaClients, cluster: ClientPortCluster) -> None:
    assert run(java, cluster, "ZkClientScenarios", "watches") == WATCHES


def test_java_client_session_moves_with_its_password_and_not_without(
    java: JavaClients, cluster: ClientPortCluster
) -> None:
    assert run(java, cluster, "ZkClientScenarios", "session_move") == {
        "wrong_password": "Expired",  # ZooKeeper answers a wrong password with timeOut 0: the session is gone to it
        "moved_same_session": True,
        "ephemeral_kept": "owned by the session",
        "ephemeral_gone_after_close": True,
    }


RECONNECT = {
    "same_session": True,
    "reconnected_to_other_server": True,
    # SetWatches from the client's last zxid: each missed change fires its watch on the new server.
    "missed_events": ["NodeDataChanged /java-rc", "NodeCreated /java-rc/new", "NodeChildrenChanged /java-rc"],
    "ephemeral_survives": True,
    "persistent_catch_up": ["NodeDataChanged /java-rc", "NodeChildrenChanged /java-rc"],
    "persistent_after": ["NodeDataChanged /java-rc"],
    "read_own_tree": "c",
}


@pytest.mark.parametrize("victim_role", ["follower", "leader"])
def test_java_client_moves_to_another_server_when_its_server_is_killed(
    victim_role: str, java: JavaClients, cluster: ClientPortCluster
) -> None:
    """The session's server is SIGKILLed; a change is made while the client is away."""
    addresses = cluster.client_addresses()
    leader = cluster.leader_index()
    victim = leader if victim_role == "leader" else next(i for i in range(len(addresses)) if i != leader)
    order = [addresses[victim], *(a for i, a in enumerate(addresses) if i != victim)]
    try:
        with java.start_program("ZkClientScenarios", "reconnect", ",".join(order)) as program:
            ready = program.read_until("ready", RECONNECT_READY_TIMEOUT_S)
            assert ready["server"] == addresses[victim]
            cluster.kill(victim)
            seen = program.read_until("result", RECONNECT_DONE_TIMEOUT_S)
            assert program.wait(PROGRAM_EXIT_TIMEOUT_S) == 0
    finally:
        cluster.restart(victim)
    seen.pop("result")
    assert seen == RECONNECT


# ---------------------------------------------------------------- Curator's recipes


def test_curator_leader_latch_one_leader_then_another_takes_over(java: JavaClients, cluster: ClientPortCluster) -> None:
    assert run(java, cluster, "CuratorScenarios", "leader_latch") == {
        "leaders_at_start": 1,
        "takeover_by_other": True,
        "leaders_after_close": 1,
        "more_elections": 0,
    }


def test_curator_mutex_excludes_and_loses_no_increment(java: JavaClients, cluster: ClientPortCluster) -> None:
    assert run(java, cluster, "CuratorScenarios", "mutex") == {
        "rounds": 45,
        "counter": 45,
        "max_holders": 1,
        "lock_children_left": 0,
    }


def test_curator_cache_sees_a_subtree_change_from_another_server(java: JavaClients, cluster: ClientPortCluster) -> None:
    assert run(java, cluster, "CuratorScenarios", "cache") == {
        "events": [
            "create /curator-cache r",
            "initialized",
            "create /curator-cache/a 1",
            "create /curator-cache/a/b 2",
            "change /curator-cache/a 1->3",
            "delete /curator-cache/a/b",
            "delete /curator-cache/a",
        ],
        "cached_paths": ["/curator-cache"],
    }


def test_curator_container_parents_go_once_emptied(java: JavaClients, cluster: ClientPortCluster) -> None:
    assert run(java, cluster, "CuratorScenarios", "containers") == {
        "container_parent_owner": 0,  # ZooKeeper shows a container's ephemeralOwner as 0
        "emptied_containers_removed": True,
        "persistent_parents_kept": True,
        "never_used_container_kept": True,
    }
