"""`zkraft reassign-partitions`: flags, JSON shapes, plans and output (pure), then generate/execute/verify
against a real cluster (`tests/kafka_harness.KafkaCluster`), checking the znodes written and the lines printed.

The controller's side of reassignment is built separately. With it (broker/controller/reassignment.py
present) the execute test waits until --verify reports the move completed; without it the test checks
"in progress" while the znode lists the partition and then removes the znode itself. Completed and failed
are also checked on states built in the znodes, and the refusal while a reassignment is in progress on one
that cannot finish (its target broker never starts).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.kafka.assignment import BrokerMetadata
from client.kafka.structs import TopicPartition
from client.kafka.znodes import (
    REASSIGN_PARTITIONS_PATH,
    broker_config_path,
    decode_config,
    decode_config_change,
    decode_reassignment,
    encode_reassignment,
    topic_config_path,
)
from zkraft.tools import reassign_partitions as rp
from zkraft.tools.topics import ToolError, ToolUsageError

REPO_ROOT = Path(__file__).resolve().parent.parent
TP = TopicPartition


def namespace(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    rp.configure_parser(parser)
    return parser.parse_args(list(args))


# ---------------------------------------------------------------- flags


def test_exactly_one_action() -> None:
    with pytest.raises(ToolUsageError, match="exactly one action: --generate, --execute, --verify, --cancel or --list"):
        rp.options_from_namespace(namespace("--zookeeper", "h:1"))
    with pytest.raises(ToolUsageError, match="exactly one action"):
        rp.options_from_namespace(namespace("--zookeeper", "h:1", "--execute", "--verify"))


def test_required_files_and_invalid_combinations() -> None:
    with pytest.raises(ToolUsageError, match="Please specify --bootstrap-server"):
        rp.options_from_namespace(namespace("--verify", "--reassignment-json-file", "f"))
    with pytest.raises(ToolUsageError, match="--generate option is used, command must include both"):
        rp.options_from_namespace(namespace("--zookeeper", "h:1", "--generate", "--broker-list", "1"))
    with pytest.raises(ToolUsageError, match="--execute option is used, command must include --reassignment"):
        rp.options_from_namespace(namespace("--zookeeper", "h:1", "--execute"))
    with pytest.raises(ToolUsageError, match='Option "\\[verify\\]" can\'t be used with option "\\[throttle\\]"'):
        rp.options_from_namespace(
            namespace("--zookeeper", "h:1", "--verify", "--reassignment-json-file", "f", "--throttle", "10")
        )
    with pytest.raises(ToolUsageError, match='"\\[execute\\]" can\'t be used with option "\\[broker-list\\]"'):
        rp.options_from_namespace(
            namespace("--zookeeper", "h:1", "--execute", "--reassignment-json-file", "f", "--broker-list", "1")
        )
    options = rp.options_from_namespace(
        namespace("--zookeeper", "h:1", "--generate", "--topics-to-move-json-file", "f", "--broker-list", "4, 5,6")
    )
    assert (options.action, options.broker_list) == ("generate", (4, 5, 6))


def test_broker_list() -> None:
    assert rp.parse_broker_list("1,2,3") == (1, 2, 3)
    with pytest.raises(ToolError, match="Broker list contains duplicate entries: 2"):
        rp.parse_broker_list("1,2,2")
    with pytest.raises(ToolUsageError, match='For input string: "x"'):
        rp.parse_broker_list("1,x")


# ---------------------------------------------------------------- files


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        rp.read_json_file(str(tmp_path / "nope.json"), "reassignment JSON")
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [', encoding="utf-8")
    with pytest.raises(ToolError, match="The input string is not a valid JSON: .*bad.json"):
        rp.read_json_file(str(bad), "reassignment JSON")


def test_topics_to_move() -> None:
    assert rp.parse_topics_to_move({"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}) == ["a", "b"]
    assert rp.parse_topics_to_move({"topics": [{"topic": "a"}]}) == ["a"]
    with pytest.raises(ToolError, match="Not supported version field value 2"):
        rp.parse_topics_to_move({"topics": [{"topic": "a"}], "version": 2})
    with pytest.raises(ToolError, match="List of topics to reassign contains duplicate entries: a"):
        rp.parse_topics_to_move({"topics": [{"topic": "a"}, {"topic": "a"}]})
    with pytest.raises(ToolError, match="empty"):
        rp.parse_topics_to_move({"topics": []})
    with pytest.raises(ToolError, match="each entry"):
        rp.parse_topics_to_move({"topics": ["a"]})


def plan_json(*entries: tuple[str, int, list[int]]) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]}


def test_reassignment_file_checks() -> None:
    assert rp.parse_reassignment(plan_json(("t", 0, [1, 2]), ("t", 1, [2, 3, 1]))) == [
        (TP("t", 0), (1, 2)),
        (TP("t", 1), (2, 3, 1)),
    ]
    with pytest.raises(ToolError, match="^Partition reassignment data file is empty$"):
        rp.parse_reassignment({"version": 1, "partitions": []})
    with pytest.raises(ToolError, match="^Partition replica list cannot be empty$"):
        rp.parse_reassignment(plan_json(("t", 0, [])))
    with pytest.raises(ToolError, match="contains duplicate topic partitions: t-0"):
        rp.parse_reassignment(plan_json(("t", 0, [1]), ("t", 0, [2])))
    with pytest.raises(
        ToolError, match="may not contain duplicate entries: t-0 contains multiple entries for 1. t-1 contains"
    ):
        rp.parse_reassignment(plan_json(("t", 0, [1, 2, 1]), ("t", 1, [3, 3])))
    with pytest.raises(ToolError, match="no integer 'partition'"):
        rp.parse_reassignment({"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]})
    with pytest.raises(ToolError, match="no 'replicas' list"):
        rp.parse_reassignment({"partitions": [{"topic": "t", "partition": 0, "replicas": "1"}]})


def test_log_dirs() -> None:
    entry = {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    assert rp.parse_reassignment({"version": 1, "partitions": [entry]}) == [(TP("t", 0), (1, 2))]
    with pytest.raises(ToolError, match="Size of replicas list List\\(1, 2\\) is different from size of log dirs"):
        rp.parse_reassignment({"partitions": [{**entry, "log_dirs": ["any"]}]})
    with pytest.raises(ToolError, match="bootstrap-server needs to be provided"):
        rp.parse_reassignment({"partitions": [{**entry, "log_dirs": ["/d1", "any"]}]})


def test_cluster_checks() -> None:
    current = {TP("t", 0): (1, 2), TP("t", 1): (2, 3)}
    rp.validate_against_cluster([(TP("t", 0), (3, 4, 5))], current, [1, 2, 3, 4, 5])  # RF 2 -> 3 is allowed
    with pytest.raises(ToolError, match="non-existent partitions: List\\(t-2, u-0\\) \\(unknown topics: u\\)"):
        rp.validate_against_cluster([(TP("t", 2), (1,)), (TP("u", 0), (1,))], current, [1, 2, 3])
    with pytest.raises(ToolError, match="non-existent brokerIDs: 7,9 \\(brokers not present / not alive"):
        rp.validate_against_cluster([(TP("t", 0), (9, 1, 7))], current, [1, 2, 3])
    rp.validate_against_cluster([(TP("t", 0), (9,))], current, None)  # --verify: brokers are not checked


# ---------------------------------------------------------------- plans and output


def test_reassignment_json_is_kafkas_compact_form() -> None:
    text = rp.format_reassignment_json({TP("b", 0): (2, 1), TP("a", 1): (1,), TP("a", 0): (3,)})
    assert text == (
        '{"version":1,"partitions":['
        '{"topic":"a","partition":0,"replicas":[3],"log_dirs":["any"]},'
        '{"topic":"a","partition":1,"replicas":[1],"log_dirs":["any"]},'
        '{"topic":"b","partition":0,"replicas":[2,1],"log_dirs":["any","any"]}]}'
    )
    # It reads back as a plan, as Kafka's users feed --generate's output to --execute.
    assert rp.parse_reassignment(json.loads(text))[2] == (TP("b", 0), (2, 1))


def test_generate_uses_kafkas_assignment_per_topic() -> None:
    current = {TP("t", p): (1, 2, 3) for p in range(6)} | {TP("u", 0): (1,), TP("u", 1): (2,)}
    brokers = [BrokerMetadata(4), BrokerMetadata(5), BrokerMetadata(6)]
    proposed = rp.generate_assignment(current, brokers, random.Random(7))
    assert set(proposed) == set(current)
    assert all(len(proposed[TP("t", p)]) == 3 and set(proposed[TP("t", p)]) == {4, 5, 6} for p in range(6))
    assert all(len(proposed[TP("u", p)]) == 1 and proposed[TP("u", p)][0] in (4, 5, 6) for p in range(2))
    # Leaders spread evenly, as assignReplicasToBrokers does.
    assert sorted(proposed[TP("t", p)][0] for p in range(6)) == [4, 4, 5, 5, 6, 6]


def test_throttled_replicas_follow_kafka() -> None:
    existing = {TP("t", 0): (1, 2), TP("t", 1): (2, 3), TP("t", 2): (3, 1)}
    proposed = {TP("t", 0): (1, 4), TP("t", 1): (3, 2)}  # 0 moves 2 -> 4; 1 only reorders
    assert rp.throttled_replicas(existing, proposed) == {"t": ("0:1,0:2", "0:4")}


def test_status_in_progress_completed_failed() -> None:
    plan = [(TP("t", 0), (1, 2)), (TP("t", 1), (2, 3)), (TP("t", 2), (3, 1))]
    in_progress = {TP("t", 1): (2, 3)}
    current = {TP("t", 0): (1, 2), TP("t", 1): (1, 2), TP("t", 2): (2, 1)}
    errors, statuses = rp.reassignment_status(plan, in_progress, current)
    assert errors == [
        "ERROR: Assigned replicas (2,1) don't match the list of replicas for reassignment (3,1) for partition t-2"
    ]
    assert [rp.status_line(tp, s) for tp, s in statuses.items()] == [
        "Reassignment of partition t-0 completed successfully",
        "Reassignment of partition t-1 is still in progress",
        "Reassignment of partition t-2 failed",
    ]


# ---------------------------------------------------------------- a fake ZooKeeper for the znode logic


class Stat:
    def __init__(self, version: int) -> None:
        self.version = version


class FakeZk:
    """Just enough of ZkClient: get/set/create(makepath, sequence)/exists/get_children."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = dict(nodes)
        self.seq = 0

    def get(self, path: str) -> tuple[bytes, Stat]:
        from client.zk.exceptions import NoNodeError

        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], Stat(0)

    def exists(self, path: str) -> Stat | None:
        return Stat(0) if path in self.nodes else None

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        from client.zk.exceptions import NoNodeError

        if path not in self.nodes:
            raise NoNodeError(path)
        self.nodes[path] = data
        return Stat(1)

    def create(self, path: str, data: bytes = b"", makepath: bool = False, sequence: bool = False) -> str:
        from client.zk.exceptions import NodeExistsError

        if sequence:
            path = f"{path}{self.seq:010d}"
            self.seq += 1
        if path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = data
        return path

    def get_children(self, path: str) -> list[str]:
        from client.zk.exceptions import NoNodeError

        prefix = path.rstrip("/") + "/"
        children = {p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)}
        if not children and path not in self.nodes:
            raise NoNodeError(path)
        return sorted(children)


def cluster_nodes(brokers: list[int], topics: dict[str, dict[int, list[int]]]) -> dict[str, bytes]:
    nodes: dict[str, bytes] = {"/brokers/ids": b"", "/brokers/topics": b""}
    for b in brokers:
        nodes[f"/brokers/ids/{b}"] = json.dumps(
            {"version": 4, "host": "127.0.0.1", "port": 9000 + b, "endpoints": [f"PLAINTEXT://127.0.0.1:{9000 + b}"],
             "jmx_port": -1, "timestamp": "1", "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}}
        ).encode()  # fmt: skip
    for topic, parts in topics.items():
        nodes[f"/brokers/topics/{topic}"] = json.dumps(
            {"version": 1, "partitions": {str(p): r for p, r in parts.items()}}
        ).encode()
    return nodes


def test_execute_with_throttle_writes_kafkas_configs_and_verify_removes_them() -> None:
    zk = FakeZk(cluster_nodes([1, 2, 3, 4], {"t": {0: [1, 2], 1: [2, 3]}}))
    out = io.StringIO()
    tool = rp.ZkReassigner(zk, out)
    options = rp.ReassignOptions("execute", "h:1", reassignment_json_file="f", throttle_bytes_per_s=1000)
    tool.execute(options, [(TP("t", 0), (1, 4))])
    lines = out.getvalue().splitlines()
    assert lines[0:2] == ["Current partition replica assignment", ""]
    assert json.loads(lines[2])["partitions"][1] == {
        "topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]
    }  # fmt: skip
    assert lines[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        rp.THROTTLE_WARNING,
        "The inter-broker throttle limit was set to 1000 B/s",
        "Successfully started reassignment of partitions.",
    ]
    assert decode_reassignment(zk.nodes[REASSIGN_PARTITIONS_PATH]) == {TP("t", 0): (1, 4)}
    assert decode_config(zk.nodes[topic_config_path("t")]) == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:4",
    }
    for broker in (1, 2, 3, 4):  # every broker of the existing and proposed assignments
        assert decode_config(zk.nodes[broker_config_path(broker)]) == {
            "leader.replication.throttled.rate": "1000",
            "follower.replication.throttled.rate": "1000",
        }
    changes = sorted(p for p in zk.nodes if p.startswith("/config/changes/config_change_"))
    entities = [decode_config_change(zk.nodes[p]).entity_path for p in changes]
    assert entities == ["topics/t", "brokers/1", "brokers/2", "brokers/3", "brokers/4"]

    # Running again while the znode exists: Kafka's refusal (without --throttle) ...
    with pytest.raises(ToolError, match="Partition reassignment currently in progress for Map\\(t-0 -> List\\(1, 4\\)"):
        tool.execute(rp.ReassignOptions("execute", "h:1"), [(TP("t", 0), (1, 4))])
    # ... and verify says in progress, keeping the throttle.
    out.seek(0)
    out.truncate()
    tool.verify([(TP("t", 0), (1, 4))])
    assert out.getvalue() == "Status of partition reassignment: \nReassignment of partition t-0 is still in progress\n"
    assert "leader.replication.throttled.rate" in decode_config(zk.nodes[broker_config_path(1)])

    # The controller's work, done by hand: the assignment becomes the plan and the znode goes away.
    del zk.nodes[REASSIGN_PARTITIONS_PATH]
    zk.nodes["/brokers/topics/t"] = json.dumps({"version": 1, "partitions": {"0": [1, 4], "1": [2, 3]}}).encode()
    out.seek(0)
    out.truncate()
    tool.verify([(TP("t", 0), (1, 4))])
    assert out.getvalue() == (
        "Status of partition reassignment: \nReassignment of partition t-0 completed successfully\n"
        "Throttle was removed.\n"
    )
    assert decode_config(zk.nodes[topic_config_path("t")]) == {}
    assert all(decode_config(zk.nodes[broker_config_path(b)]) == {} for b in (1, 2, 3, 4))


def test_execute_refuses_dead_brokers_and_unknown_topics() -> None:
    zk = FakeZk(cluster_nodes([1, 2, 3], {"t": {0: [1, 2]}}))
    tool = rp.ZkReassigner(zk, io.StringIO())
    with pytest.raises(ToolError, match="non-existent brokerIDs: 5"):
        tool.execute(rp.ReassignOptions("execute", "h:1"), [(TP("t", 0), (1, 5))])
    with pytest.raises(ToolError, match="non-existent partitions: List\\(nope-0\\)"):
        tool.execute(rp.ReassignOptions("execute", "h:1"), [(TP("nope", 0), (1,))])
    assert REASSIGN_PARTITIONS_PATH not in zk.nodes


def test_execute_with_throttle_while_running_only_changes_the_rate() -> None:
    zk = FakeZk(cluster_nodes([1, 2], {"t": {0: [1]}}))
    zk.nodes[REASSIGN_PARTITIONS_PATH] = encode_reassignment({TP("t", 0): (2,)})
    out = io.StringIO()
    rp.ZkReassigner(zk, out).execute(rp.ReassignOptions("execute", "h:1", throttle_bytes_per_s=5), [(TP("t", 0), (2,))])
    assert (
        out.getvalue() == "There is an existing assignment running.\nThe inter-broker throttle limit was set to 5 B/s\n"
    )
    assert decode_config(zk.nodes[broker_config_path(2)])["follower.replication.throttled.rate"] == "5"


def test_generate_refuses_unknown_topic_and_dead_broker() -> None:
    zk = FakeZk(cluster_nodes([1, 2, 3], {"t": {0: [1, 2]}}))
    tool = rp.ZkReassigner(zk, io.StringIO())
    options = rp.ReassignOptions("generate", "h:1", broker_list=(1, 2))
    with pytest.raises(ToolError, match="^Topic nope not found.$"):
        tool.generate(options, ["t", "nope"])
    with pytest.raises(ToolError, match="non-existent brokerIDs: 7"):
        tool.generate(rp.ReassignOptions("generate", "h:1", broker_list=(1, 7)), ["t"])


# ---------------------------------------------------------------- the command on a real cluster


def zkraft(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    env.pop("ZKRAFT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_bad_input_is_one_line_without_a_cluster(tmp_path: Path) -> None:
    # The files are checked before connecting, so an unreachable quorum does not matter.
    missing = zkraft("reassign-partitions", "--zookeeper", "127.0.0.1:1", "--execute",
                     "--reassignment-json-file", str(tmp_path / "none.json"))  # fmt: skip
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == f"zkraft: error: reassignment JSON file {tmp_path / 'none.json'} does not exist\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    malformed = zkraft("reassign-partitions", "--zookeeper", "127.0.0.1:1", "--verify",
                       "--reassignment-json-file", str(bad))  # fmt: skip
    assert malformed.returncode == 1 and malformed.stderr.startswith("zkraft: error: The input string is not a valid")
    assert malformed.stderr.count("\n") == 1
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(plan_json(("t", 0, [1, 1]))), encoding="utf-8")
    duplicate = zkraft("reassign-partitions", "--zookeeper", "127.0.0.1:1", "--execute",
                       "--reassignment-json-file", str(dup))  # fmt: skip
    assert duplicate.stderr == (
        "zkraft: error: Partition replica lists may not contain duplicate entries: "
        "t-0 contains multiple entries for 1\n"
    )
    usage = zkraft("reassign-partitions", "--zookeeper", "127.0.0.1:1", "--generate")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1


def _harness_available() -> bool:
    return (REPO_ROOT / "tests" / "kafka_harness.py").exists() and (REPO_ROOT / "broker" / "server.py").exists()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("reassign-tool"), brokers=4) as running:
        running.start()
        yield running


needs_cluster = pytest.mark.skipif(not _harness_available(), reason="the broker harness is not there")


# The controller's side of reassignment is built separately: when it is there the tests wait for it
# to finish a move; when it is not, they do its last step (removing the znode) themselves.
CONTROLLER_REASSIGNS = (REPO_ROOT / "broker" / "controller" / "reassignment.py").exists()


def reassign(*args: str) -> subprocess.CompletedProcess[str]:
    return zkraft("reassign-partitions", *args)


def in_progress_form(*partitions: str) -> str:
    return "Status of partition reassignment: \n" + "".join(
        f"Reassignment of partition {p} is still in progress\n" for p in partitions
    )


def completed_form(*partitions: str, throttle_removed: bool) -> str:
    return (
        "Status of partition reassignment: \n"
        + "".join(f"Reassignment of partition {p} completed successfully\n" for p in partitions)
        + ("Throttle was removed.\n" if throttle_removed else "")
    )


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_generate_on_a_real_cluster(cluster: Any, tmp_path: Path) -> None:
    cluster.create_topic("planned", partitions=3, replication_factor=2)
    before = cluster.assignment("planned")
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"planned"}],"version":1}', encoding="utf-8")
    generated = reassign("--zookeeper", cluster.zookeeper, "--generate",
                         "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4")  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"] and len(lines) == 5
    current = json.loads(lines[1])
    assert {(p["partition"], tuple(p["replicas"])) for p in current["partitions"]} == set(before.items())
    proposed = json.loads(lines[4])
    assert [p["partition"] for p in proposed["partitions"]] == [0, 1, 2]
    assert all(len(p["replicas"]) == 2 and set(p["replicas"]) <= {2, 3, 4} for p in proposed["partitions"])
    assert all(p["log_dirs"] == ["any", "any"] for p in proposed["partitions"])
    assert cluster.assignment("planned") == before  # --generate writes nothing
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"topics":[{"topic":"planned"},{"topic":"nope"}],"version":1}', encoding="utf-8")
    refused = reassign("--zookeeper", cluster.zookeeper, "--generate",
                       "--topics-to-move-json-file", str(unknown), "--broker-list", "2,3,4")  # fmt: skip
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", "zkraft: error: Topic nope not found.\n")


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_execute_then_verify_on_a_real_cluster(cluster: Any, tmp_path: Path) -> None:
    from tests.helpers import wait_until

    cluster.create_topic("moving", partitions=2, replication_factor=2)
    before = cluster.assignment("moving")
    # Partition 0 moves and grows from 2 replicas to 3.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_json(("moving", 0, [4, 3, 2]))), encoding="utf-8")
    executed = reassign("--zookeeper", cluster.zookeeper, "--execute",
                        "--reassignment-json-file", str(plan), "--throttle", "50000000")  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    out = executed.stdout.splitlines()
    assert out[:2] == ["Current partition replica assignment", ""]
    assert {(p["partition"], tuple(p["replicas"])) for p in json.loads(out[2])["partitions"]} == set(before.items())
    assert out[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        rp.THROTTLE_WARNING,
        "The inter-broker throttle limit was set to 50000000 B/s",
        "Successfully started reassignment of partitions.",
    ]
    config, _ = cluster.zk.get(topic_config_path("moving"))
    throttled = decode_config(config)
    assert throttled["leader.replication.throttled.replicas"].split(",") == [f"0:{b}" for b in before[0]]
    assert set(throttled["follower.replication.throttled.replicas"].split(",")) == {
        f"0:{b}" for b in (4, 3, 2) if b not in before[0]
    }
    for broker in sorted(set(before[0]) | {2, 3, 4}):
        rates, _ = cluster.zk.get(broker_config_path(broker))
        assert decode_config(rates) == {
            "leader.replication.throttled.rate": "50000000",
            "follower.replication.throttled.rate": "50000000",
        }

    if CONTROLLER_REASSIGNS:
        # The controller moves the partition; --verify reports it and removes the throttle.
        def verified() -> subprocess.CompletedProcess[str] | None:
            result = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(plan))
            assert result.returncode == 0, result.stderr
            if result.stdout == in_progress_form("moving-0"):
                return None
            return result

        result = wait_until(verified, 120, interval_s=0.5, message="the reassignment did not complete")
        assert result.stdout == completed_form("moving-0", throttle_removed=True)  # type: ignore[union-attr]
        assert cluster.assignment("moving")[0] == (4, 3, 2)
    else:
        data, _stat = cluster.zk.get(REASSIGN_PARTITIONS_PATH)
        assert json.loads(data) == {
            "version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [4, 3, 2]}]
        }  # fmt: skip
        result = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(plan))
        assert (result.returncode, result.stdout) == (0, in_progress_form("moving-0")), result.stderr
        cluster.zk.delete(REASSIGN_PARTITIONS_PATH)  # the controller's last step, by hand
        failed = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(plan))
        assert failed.stdout == (
            "Status of partition reassignment: \n"
            f"ERROR: Assigned replicas ({','.join(map(str, before[0]))}) don't match the list of replicas for "
            "reassignment (4,3,2) for partition moving-0\nReassignment of partition moving-0 failed\n"
        )
    assert cluster.zk.exists(REASSIGN_PARTITIONS_PATH) is None


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_verify_completed_and_failed_from_the_znodes(cluster: Any, tmp_path: Path) -> None:
    """States built in the znodes: the assignment equals the plan (completed) or not (failed)."""
    cluster.create_topic("settled", partitions=2, replication_factor=2)
    current = cluster.assignment("settled")
    # Throttle configs as --execute leaves them, to be removed by a --verify that finds everything done.
    tool = rp.ZkReassigner(cluster.zk, io.StringIO())
    tool.change_broker_config(1, {"leader.replication.throttled.rate": "7", "follower.replication.throttled.rate": "7"})
    from client.kafka.topic_admin import change_topic_config

    change_topic_config(cluster.zk, "settled", {"leader.replication.throttled.replicas": "0:1",
                                                "follower.replication.throttled.replicas": "0:2"})  # fmt: skip
    done = tmp_path / "done.json"
    done.write_text(json.dumps(plan_json(*(("settled", p, list(r)) for p, r in current.items()))), encoding="utf-8")
    completed = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(done))
    assert (completed.returncode, completed.stderr) == (0, "")
    assert completed.stdout == completed_form("settled-0", "settled-1", throttle_removed=True)
    config, _ = cluster.zk.get(topic_config_path("settled"))
    assert decode_config(config) == {}
    rates, _ = cluster.zk.get(broker_config_path(1))
    assert decode_config(rates) == {}
    again = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(done))
    assert again.stdout == completed_form("settled-0", "settled-1", throttle_removed=False)

    other = [b for b in (1, 2, 3, 4) if b not in current[1]][:2]
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(plan_json(("settled", 1, other))), encoding="utf-8")
    failed = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(wrong))
    assert failed.returncode == 0
    assert failed.stdout == (
        "Status of partition reassignment: \n"
        f"ERROR: Assigned replicas ({','.join(map(str, current[1]))}) don't match the list of replicas for "
        f"reassignment ({','.join(map(str, other))}) for partition settled-1\n"
        "Reassignment of partition settled-1 failed\n"
    )


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_execute_refuses_bad_plans_on_a_real_cluster(cluster: Any, tmp_path: Path) -> None:
    cluster.create_topic("stay", partitions=1, replication_factor=1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_json(("stay", 0, [1, 9]))), encoding="utf-8")
    refused = reassign("--zookeeper", cluster.zookeeper, "--execute", "--reassignment-json-file", str(plan))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith("zkraft: error: The proposed assignment contains non-existent brokerIDs: 9 ")
    assert "not present / not alive" in refused.stderr and refused.stderr.count("\n") == 1
    plan.write_text(json.dumps(plan_json(("absent", 0, [1]))), encoding="utf-8")
    unknown = reassign("--zookeeper", cluster.zookeeper, "--execute", "--reassignment-json-file", str(plan))
    assert unknown.returncode == 1
    assert "non-existent partitions: List(absent-0) (unknown topics: absent)" in unknown.stderr
    assert cluster.zk.exists(REASSIGN_PARTITIONS_PATH) is None


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_execute_refuses_while_a_reassignment_is_in_progress(cluster: Any, tmp_path: Path) -> None:
    """Last in this module: it leaves a reassignment that cannot finish (its target broker 9 never starts)."""
    cluster.create_topic("stuck", partitions=1, replication_factor=1)
    cluster.zk.create(REASSIGN_PARTITIONS_PATH, encode_reassignment({TP("stuck", 0): (1, 9)}))
    stuck = tmp_path / "stuck.json"
    stuck.write_text(json.dumps(plan_json(("stuck", 0, [1, 9]))), encoding="utf-8")
    verified = reassign("--zookeeper", cluster.zookeeper, "--verify", "--reassignment-json-file", str(stuck))
    assert (verified.returncode, verified.stdout) == (0, in_progress_form("stuck-0")), verified.stderr
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_json(("stuck", 0, [2]))), encoding="utf-8")
    refused = reassign("--zookeeper", cluster.zookeeper, "--execute", "--reassignment-json-file", str(plan))
    assert (refused.returncode, refused.stdout) == (1, "There is an existing assignment running.\n")
    assert refused.stderr == (
        "zkraft: error: Partition reassignment currently in progress for Map(stuck-0 -> List(1, 9)). "
        "Aborting operation\n"
    )
    # With --throttle, Kafka's tool only changes the throttle of the running reassignment.
    throttled = reassign("--zookeeper", cluster.zookeeper, "--execute", "--reassignment-json-file", str(plan),
                         "--throttle", "1000")  # fmt: skip
    assert (throttled.returncode, throttled.stdout) == (
        0, "There is an existing assignment running.\nThe inter-broker throttle limit was set to 1000 B/s\n"
    )  # fmt: skip
    data, _ = cluster.zk.get(REASSIGN_PARTITIONS_PATH)
    assert decode_reassignment(data) == {TP("stuck", 0): (1, 9)}
