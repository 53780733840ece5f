"""`zkraft preferred-replica-election`: JSON parsing and Kafka's lines (pure), then the command on a real cluster
writing `/admin/preferred_replica_election`. The controller's side is built separately: with it, the cluster
test waits for the controller to consume the znode; without it, the test deletes the znode itself. The refusal
while an election is in progress is checked on the fake ZooKeeper (with a controller the znode lives too briefly
to race against) and, without a controller, on the cluster too."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.kafka.structs import TopicPartition
from client.kafka.znodes import PREFERRED_REPLICA_ELECTION_PATH
from tests.test_reassign_tool import REPO_ROOT, FakeZk, cluster_nodes, needs_cluster, zkraft
from zkraft.tools import preferred_replica_election as pre
from zkraft.tools.topics import ToolError

TP = TopicPartition


def test_parse_election_data() -> None:
    text = '{"partitions":[{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}'
    assert pre.parse_election_data(text) == [TP("foo", 1), TP("foobar", 2)]
    with pytest.raises(ToolError, match="Preferred replica election data is empty"):
        pre.parse_election_data('{"version":1}')
    with pytest.raises(ToolError, match="contains duplicate partitions: foo-1$"):
        pre.parse_election_data('{"partitions":[{"topic":"foo","partition":1},{"topic":"foo","partition":1}]}')
    with pytest.raises(ToolError, match="not valid JSON"):
        pre.parse_election_data('{"partitions":[', "f.json")
    with pytest.raises(ToolError, match="each entry must be"):
        pre.parse_election_data('{"partitions":[{"topic":"foo"}]}')


def test_lines() -> None:
    partitions = [TP("a", 0), TP("a", 1)]
    assert pre.created_line(partitions) == "Created preferred replica election path with a-0,a-1"
    assert (
        pre.started_line(partitions) == "Successfully started preferred replica election for partitions Set(a-0, a-1)"
    )


def test_all_partitions_without_a_file_and_refusals() -> None:
    zk = FakeZk(cluster_nodes([1, 2], {"b": {0: [1], 1: [2]}, "a": {0: [2, 1]}}))
    out = io.StringIO()
    assert pre.start_election(zk, None, out) == [TP("a", 0), TP("b", 0), TP("b", 1)]
    assert json.loads(zk.nodes[PREFERRED_REPLICA_ELECTION_PATH]) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 0}, {"topic": "b", "partition": 1}],
    }
    assert out.getvalue() == (
        "Created preferred replica election path with a-0,b-0,b-1\n"
        "Successfully started preferred replica election for partitions Set(a-0, b-0, b-1)\n"
    )
    with pytest.raises(ToolError, match="currently in progress for a-0,b-0,b-1. Aborting operation"):
        pre.start_election(zk, [TP("a", 0)], out)
    del zk.nodes[PREFERRED_REPLICA_ELECTION_PATH]
    with pytest.raises(ToolError, match="partitions b-5,c-0 do not exist"):
        pre.start_election(zk, [TP("b", 5), TP("a", 0), TP("c", 0)], out)
    assert PREFERRED_REPLICA_ELECTION_PATH not in zk.nodes


def test_bad_input_without_a_cluster(tmp_path: Path) -> None:
    missing = zkraft("preferred-replica-election", "--zookeeper", "127.0.0.1:1",
                     "--path-to-json-file", str(tmp_path / "none.json"))  # fmt: skip
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.startswith("zkraft: error: Failed to start preferred replica election: file ")
    usage = zkraft("preferred-replica-election")
    assert (usage.returncode, usage.stderr) == (2, 'zkraft: error: Missing required argument "[zookeeper]"\n')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("preferred-tool"), brokers=3) as running:
        running.start()
        yield running


# The controller's side is built separately: when it is there it acts on the znode and deletes it, and
# the test waits for that; when it is not, the test deletes the znode itself.
CONTROLLER_ELECTS = (REPO_ROOT / "broker" / "controller" / "preferred_election.py").exists()


def _finish(cluster: Any) -> None:
    """Wait for the controller to act on the znode (it deletes it), or do its last step ourselves."""
    from tests.helpers import wait_until

    if CONTROLLER_ELECTS:
        wait_until(
            lambda: cluster.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None,
            60,
            interval_s=0.1,
            message="the controller did not act on /admin/preferred_replica_election",
        )
    else:
        cluster.zk.delete(PREFERRED_REPLICA_ELECTION_PATH)


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_preferred_election_on_a_real_cluster(cluster: Any, tmp_path: Path) -> None:
    cluster.create_topic("lead", partitions=2, replication_factor=3)
    partitions_file = tmp_path / "p.json"
    partitions_file.write_text('{"partitions":[{"topic":"lead","partition":1}]}', encoding="utf-8")
    started = zkraft("preferred-replica-election", "--zookeeper", cluster.zookeeper,
                     "--path-to-json-file", str(partitions_file))  # fmt: skip
    assert (started.returncode, started.stderr) == (0, "")
    assert started.stdout == (
        "Created preferred replica election path with lead-1\n"
        "Successfully started preferred replica election for partitions Set(lead-1)\n"
    )
    if not CONTROLLER_ELECTS:
        data, _ = cluster.zk.get(PREFERRED_REPLICA_ELECTION_PATH)
        assert json.loads(data) == {"version": 1, "partitions": [{"topic": "lead", "partition": 1}]}
        refused = zkraft("preferred-replica-election", "--zookeeper", cluster.zookeeper)
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (
            "zkraft: error: Failed to start preferred replica election: Preferred replica leader election "
            "currently in progress for lead-1. Aborting operation\n"
        )
    _finish(cluster)

    everything = zkraft("preferred-replica-election", "--zookeeper", cluster.zookeeper)
    assert (everything.returncode, everything.stderr) == (0, "")
    created, started_all = everything.stdout.splitlines()
    assert created.startswith("Created preferred replica election path with ")
    assert {"lead-0", "lead-1"} <= set(created.split(" with ")[1].split(","))
    assert started_all.startswith("Successfully started preferred replica election for partitions Set(")
    _finish(cluster)

    unknown = tmp_path / "u.json"
    unknown.write_text('{"partitions":[{"topic":"lead","partition":7}]}', encoding="utf-8")
    refused_unknown = zkraft("preferred-replica-election", "--zookeeper", cluster.zookeeper,
                             "--path-to-json-file", str(unknown))  # fmt: skip
    assert (refused_unknown.returncode, refused_unknown.stdout) == (1, "")
    assert refused_unknown.stderr == (
        "zkraft: error: Failed to start preferred replica election: partitions lead-7 do not exist "
        "(nothing was started)\n"
    )
    assert cluster.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None
