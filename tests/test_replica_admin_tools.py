"""`zkraft delete-records`, `zkraft leader-election` and `zkraft reassign-partitions --bootstrap-server`.

Flags, files and printed lines first (pure), then each tool as a user runs it (`python -m zkraft ...`) against
three real brokers: delete-records then a consumer starts at the new low watermark; leader-election prints
Kafka's lines and brings leadership back to the preferred replica; a reassignment started with --execute,
listed with --list and cancelled with --cancel returns to the original replicas.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Consumer, Producer, TopicPartition
from client.kafka.errors import ElectionNotNeededError, OffsetOutOfRangeError, PreferredLeaderNotAvailableError
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env
from tests.reassignment_hold import remove_throttle, set_follower_rates, throttle_new_replica
from zkraft.tools import delete_records, leader_election, reassign_api
from zkraft.tools.reassign_partitions import THROTTLE_WARNING
from zkraft.tools.topics import ToolError, ToolUsageError

TP = TopicPartition
TIMEOUT_S = 60.0
BROKER_PROPERTIES = {"replica.lag.time.max.ms": "3000", "log.cleaner.enable": "false"}


def namespace(configure, *args: str) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(args))


# ---------------------------------------------------------------- pure


def test_offset_json_file() -> None:
    text = '{"partitions":[{"topic":"foo","partition":1,"offset":5},{"topic":"bar","partition":0,"offset":-1}]}'
    assert delete_records.parse_offset_json(text) == [(TP("foo", 1), 5), (TP("bar", 0), -1)]
    with pytest.raises(ToolError, match="The input string is not a valid JSON"):
        delete_records.parse_offset_json("{")
    with pytest.raises(ToolError, match="Not supported version field value 2"):
        delete_records.parse_offset_json('{"version":2,"partitions":[]}')
    with pytest.raises(ToolError, match="Offset json file contains duplicate topic partitions: foo-1"):
        delete_records.parse_offset_json(
            '{"partitions":[{"topic":"foo","partition":1,"offset":5},{"topic":"foo","partition":1,"offset":6}]}'
        )
    with pytest.raises(ToolError, match='"offset" integer >= -1'):
        delete_records.parse_offset_json('{"partitions":[{"topic":"foo","partition":1,"offset":-3}]}')


def test_delete_records_lines() -> None:
    results = {TP("t", 0): {"low_watermark": 7}, TP("t", 1): OffsetOutOfRangeError("above the high watermark 3")}
    assert delete_records.result_lines(results, [TP("t", 0), TP("t", 1)]) == [
        "partition: t-0\tlow_watermark: 7",
        "partition: t-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: above the high watermark 3",
    ]


def test_leader_election_flags() -> None:
    configure = leader_election.configure_parser
    with pytest.raises(ToolUsageError, match=r"Missing required option\(s\): election-type"):
        leader_election.check_options(namespace(configure, "--bootstrap-server", "h:1", "--all-topic-partitions"))
    only_one = "One and only one of the following options is required: topic, all-topic-partitions, path-to-json"
    with pytest.raises(ToolUsageError, match=only_one):
        leader_election.check_options(namespace(configure, "--bootstrap-server", "h:1", "--election-type", "preferred"))
    with pytest.raises(ToolUsageError, match=only_one):
        leader_election.check_options(namespace(
            configure, "--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t", "--partition",
            "0", "--all-topic-partitions",
        ))  # fmt: skip
    with pytest.raises(ToolUsageError, match=r"Missing required option\(s\): partition"):
        leader_election.check_options(
            namespace(configure, "--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t")
        )
    assert leader_election.check_options(
        namespace(configure, "--bootstrap-server", "h:1", "--election-type", "UNCLEAN", "--topic", "t", "--partition",
                  "3")
    ) == ("h:1", "UNCLEAN", [TP("t", 3)])  # fmt: skip
    with pytest.raises(ToolError, match="Replica election data contains duplicate partitions: t-0"):
        leader_election.parse_election_data('{"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}')


def test_leader_election_lines() -> None:
    lines, failed = leader_election.report(
        "PREFERRED",
        {
            TP("a", 1): None,
            TP("a", 0): None,
            TP("b", 0): ElectionNotNeededError(),
            TP("c", 0): PreferredLeaderNotAvailableError("Failed to elect leader for partition c-0"),
        },
    )
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions a-0, a-1",
        "Valid replica already elected for partitions b-0",
        "Error completing leader election (PREFERRED) for partition: c-0: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: Failed to elect leader for partition c-0",
    ]
    assert failed == 1


def test_reassignment_lines() -> None:
    assert reassign_api.reassignments_text({}) == "No partition reassignments found."
    ongoing = {
        TP("t", 1): {"replicas": [3, 1, 2], "adding_replicas": [3], "removing_replicas": [1]},
        TP("t", 0): {"replicas": [1, 2], "adding_replicas": [2], "removing_replicas": []},
    }
    assert reassign_api.reassignments_text(ongoing) == (
        "Current partition reassignments:\n"
        "t-0: replicas: 1,2. adding: 2.\n"
        "t-1: replicas: 3,1,2. adding: 3. removing: 1."
    )
    assert reassign_api.verify_line(TP("t", 0), [2], [2], False) == "Reassignment of partition t-0 is complete."
    assert (
        reassign_api.verify_line(TP("t", 0), [2], [1, 2], True) == "Reassignment of partition t-0 is still in progress."
    )
    assert reassign_api.verify_line(TP("t", 0), [2], [1], False) == (
        "There is no active reassignment of partition t-0, but replica set is 1 rather than 2."
    )


# ---------------------------------------------------------------- against real brokers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("replica-admin-tools"), 3, BROKER_PROPERTIES) as running:
        running.start()
        set_follower_rates(running)  # binds only the replicas a test lists: see tests/reassignment_hold.py
        yield running


def zkraft(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "zkraft", *args]
    return subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.integration
def test_delete_records_then_a_consumer_starts_at_the_low_watermark(cluster: KafkaCluster, tmp_path: Path) -> None:
    cluster.create_topic("purged", partitions=1, replication_factor=3)
    with Producer(cluster.bootstrap_servers, acks="all", linger_ms=1) as producer:
        for i in range(10):
            producer.send("purged", value=b"%d" % i, partition=0)
        producer.flush()
    offsets = tmp_path / "offsets.json"
    kafka_bootstrap = cluster.kafka_bootstrap_servers  # the one list `zkraft up` prints: the Kafka listeners
    offsets.write_text(json.dumps({"partitions": [{"topic": "purged", "partition": 0, "offset": 4}], "version": 1}))
    done = zkraft("delete-records", "--bootstrap-server", kafka_bootstrap, "--offset-json-file", str(offsets))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: purged-0\tlow_watermark: 4\n"
    )
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP("purged", 0)])
        got: list[int] = []
        wait_until(lambda: got.extend(r.offset for rs in consumer.poll(200).values() for r in rs) or len(got) >= 6,
                   TIMEOUT_S, message="the consumer read nothing")  # fmt: skip
        assert got == [4, 5, 6, 7, 8, 9]
    # Above the high watermark: Kafka's line for the partition, and a non-zero exit.
    offsets.write_text(json.dumps({"partitions": [{"topic": "purged", "partition": 0, "offset": 11}]}))
    done = zkraft("delete-records", "--bootstrap-server", kafka_bootstrap, "--offset-json-file", str(offsets))
    assert done.returncode == 1
    assert "partition: purged-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: " in done.stdout


@pytest.mark.integration
def test_leader_election_prints_kafkas_lines(cluster: KafkaCluster) -> None:
    cluster.create_topic("led", partitions=1, replication_factor=3)
    preferred = cluster.assignment("led")[0][0]
    cluster.kill_broker(preferred)
    wait_until(lambda: cluster.partition_state("led", 0).leader not in (-1, preferred), TIMEOUT_S)
    cluster.start_broker(preferred)
    wait_until(lambda: preferred in cluster.partition_state("led", 0).isr, TIMEOUT_S, message="not back in the ISR")
    bootstrap = cluster.kafka_bootstrap_servers  # the one list `zkraft up` prints: the Kafka listeners
    done = zkraft("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred", "--topic", "led",
                  "--partition", "0")  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "Successfully completed leader election (PREFERRED) for partitions led-0\n"
    assert cluster.partition_state("led", 0).leader == preferred
    done = zkraft("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred", "--topic", "led",
                  "--partition", "0")  # fmt: skip
    assert done.stdout == "Valid replica already elected for partitions led-0\n"


@pytest.mark.integration
def test_reassignment_executed_listed_cancelled_returns_to_the_original_replicas(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    cluster.create_topic("moved", partitions=1, replication_factor=1)
    original = list(cluster.assignment("moved")[0])
    spare = next(b for b in cluster.broker_ids if b not in original)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0,
                                                              "replicas": [*original, spare]}]}))  # fmt: skip
    bootstrap = cluster.kafka_bootstrap_servers  # the one list `zkraft up` prints: the Kafka listeners
    with Producer(bootstrap, acks="all", linger_ms=1) as producer:
        for i in range(3):  # three batches: the throttled new replica cannot catch up
            producer.send("moved", value=b"%d" % i, partition=0)
            producer.flush()
    throttle_new_replica(cluster, TP("moved", 0), spare)
    try:
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                      str(plan))  # fmt: skip
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.endswith("Successfully started partition reassignment for moved-0\n")
        assert "Save this to use as the --reassignment-json-file option during rollback" in done.stdout
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--list")
        replicas = ",".join(map(str, [*original, spare]))
        assert done.stdout == f"Current partition reassignments:\nmoved-0: replicas: {replicas}. adding: {spare}.\n"
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                      str(plan))  # fmt: skip
        assert "Reassignment of partition moved-0 is still in progress." in done.stdout
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--cancel", "--reassignment-json-file",
                      str(plan))  # fmt: skip
        assert (done.returncode, done.stderr) == (0, "")
        brokers = ",".join(map(str, sorted(cluster.broker_ids)))
        assert done.stdout == (
            "Successfully cancelled partition reassignment for: moved-0\n"
            "None of the specified partition moves are active.\n"
            f"Clearing broker-level throttles on brokers {brokers}\n"  # Kafka's --cancel clears them all
            "Clearing topic-level throttles on topic moved\n"
        )
        wait_until(lambda: list(cluster.assignment("moved")[0]) == original, TIMEOUT_S, message="not reverted")
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--list")
        assert done.stdout == "No partition reassignments found.\n"
    finally:
        remove_throttle(cluster, TP("moved", 0))


def overrides(bootstrap: str, kind: str, name: str) -> dict[str, str | None]:
    """The configs set on a topic or broker (not defaults, not static), as describe_configs reports them."""
    from client import Admin, ConfigResource

    with Admin(bootstrap, client_id="test") as admin:
        (described,) = admin.describe_configs([ConfigResource(kind, name)])
    return {n: e.value for n, e in described.entries.items() if e.source.startswith("DYNAMIC_")}


@pytest.mark.integration
def test_reassignment_throttled_through_the_admin_api_until_verify_clears_it(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    """--execute --throttle 1 with --bootstrap-server: Kafka's lines, the four configs set through the admin API
    (1 B/s holds the new replica behind, so the move stays in progress), kept by --verify while it moves and by
    --cancel --preserve-throttles, removed by --verify once nothing moves."""
    set_follower_rates(cluster)  # the --cancel of the test above cleared every broker's rate, as Kafka's does
    cluster.create_topic("slowed", partitions=1, replication_factor=1)
    (source,) = cluster.assignment("slowed")[0]
    spare = next(b for b in cluster.broker_ids if b != source)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "slowed", "partition": 0,
                                                              "replicas": [source, spare]}]}))  # fmt: skip
    bootstrap = cluster.kafka_bootstrap_servers
    with Producer(bootstrap, acks="all", linger_ms=1) as producer:
        for i in range(3):  # three batches: at 1 B/s the new replica cannot catch up
            producer.send("slowed", value=b"%d" % i, partition=0)
            producer.flush()
    try:
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                      str(plan), "--throttle", "1")  # fmt: skip
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.splitlines()[-3:] == [
            THROTTLE_WARNING,
            "The inter-broker throttle limit was set to 1 B/s",
            "Successfully started partition reassignment for slowed-0",
        ]
        throttled_topic = {
            "leader.replication.throttled.replicas": f"0:{source}",
            "follower.replication.throttled.replicas": f"0:{spare}",
        }
        throttled_broker = {"leader.replication.throttled.rate": "1", "follower.replication.throttled.rate": "1"}
        assert overrides(bootstrap, "TOPIC", "slowed") == throttled_topic
        assert overrides(bootstrap, "BROKER", str(source)) == throttled_broker
        assert overrides(bootstrap, "BROKER", str(spare)) == throttled_broker
        verify = ("reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                  str(plan))  # fmt: skip
        done = zkraft(*verify)
        assert done.stdout == ("Status of partition reassignment:\n"
                               "Reassignment of partition slowed-0 is still in progress.\n\n")  # fmt: skip
        assert overrides(bootstrap, "TOPIC", "slowed") == throttled_topic
        done = zkraft("reassign-partitions", "--bootstrap-server", bootstrap, "--cancel", "--reassignment-json-file",
                      str(plan), "--preserve-throttles")  # fmt: skip
        assert done.stdout == (
            "Successfully cancelled partition reassignment for: slowed-0\n"
            "None of the specified partition moves are active.\n"
        )
        wait_until(lambda: cluster.assignment("slowed")[0] == (source,), TIMEOUT_S, message="not reverted")
        assert overrides(bootstrap, "TOPIC", "slowed") == throttled_topic
        done = zkraft(*verify)
        brokers = ",".join(map(str, sorted(cluster.broker_ids)))
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == (
            "Status of partition reassignment:\n"
            f"There is no active reassignment of partition slowed-0, but replica set is {source} rather than "
            f"{source},{spare}.\n\n"
            f"Clearing broker-level throttles on brokers {brokers}\n"
            "Clearing topic-level throttles on topic slowed\n"
        )
        assert overrides(bootstrap, "TOPIC", "slowed") == {}
        assert all(overrides(bootstrap, "BROKER", str(b)) == {} for b in cluster.broker_ids)
    finally:
        set_follower_rates(cluster)


class FakeAdmin:
    """The admin calls ApiReassigner makes, over a fixed cluster: topic `t` with 2 partitions, brokers 1-3."""

    def __init__(self, ongoing: dict | None = None) -> None:
        from client.kafka.types import BrokerMetadata, ClusterDescription, PartitionDescription, TopicDescription

        self.assignment = {0: [1, 2], 1: [2, 3]}
        self.ongoing = ongoing or {}
        self.altered: list[dict] = []
        self.configs: list[tuple[str, str, list[tuple[str, str | None, str]]]] = []
        self._cluster = ClusterDescription("c", 1, [BrokerMetadata(b, "h", 1, None) for b in (1, 2, 3)])
        self._topic = lambda: TopicDescription(
            "t", False, [PartitionDescription(p, r[0], r, r, [], None) for p, r in self.assignment.items()]
        )

    def describe_topics(self, topics):  # type: ignore[no-untyped-def]
        return [self._topic()]

    def describe_cluster(self):  # type: ignore[no-untyped-def]
        return self._cluster

    def list_partition_reassignments(self, partitions=None):  # type: ignore[no-untyped-def]
        return {tp: r for tp, r in self.ongoing.items() if partitions is None or tp in partitions}

    def alter_partition_reassignments(self, plan):  # type: ignore[no-untyped-def]
        self.altered.append(dict(plan))
        return {tp: None for tp in plan}

    def incremental_alter_configs(self, resources):  # type: ignore[no-untyped-def]
        for r in resources:
            kind = r.resource_type.upper()
            self.configs.append((kind, r.name, [(op.name, op.value, op.op) for op in r.operations]))


def test_api_throttle_follows_kafkas_move_map() -> None:
    """calculateProposedMoveMap: a running move keeps its sources and its destinations are throttled too
    (--additional); partition strings sort as Kafka's TreeSet[String] does."""
    import io

    running = {TP("t", 1): {"replicas": [2, 3, 1], "adding_replicas": [1], "removing_replicas": [3]}}
    admin = FakeAdmin(running)
    out = io.StringIO()
    reassign_api.ApiReassigner(admin, out).execute_api([(TP("t", 0), (3, 1))], additional=True, throttle_bytes_per_s=7)
    assert admin.configs[0] == ("TOPIC", "t", [
        ("leader.replication.throttled.replicas", "0:1,0:2,1:2,1:3", "SET"),
        ("follower.replication.throttled.replicas", "0:3,1:1", "SET"),
    ])  # fmt: skip
    rates = [("leader.replication.throttled.rate", "7", "SET"), ("follower.replication.throttled.rate", "7", "SET")]
    assert admin.configs[1:] == [("BROKER", str(b), rates) for b in (1, 2, 3)]
    assert admin.altered == [{TP("t", 0): (3, 1)}]  # after the throttle: the first fetch is already throttled
    lines = out.getvalue().splitlines()
    assert lines[-3:] == [
        THROTTLE_WARNING,
        "The inter-broker throttle limit was set to 7 B/s",
        "Successfully started partition reassignment for t-0",
    ]
    moves = {TP("t", p): reassign_api.PartitionMove(frozenset({1}), frozenset({2})) for p in (2, 10)}
    assert reassign_api.throttled_replicas(moves) == {"t": ("10:1,2:1", "10:2,2:2")}


def test_api_verify_clears_throttles_once_nothing_moves() -> None:
    import io

    admin = FakeAdmin()
    out = io.StringIO()
    assert not reassign_api.ApiReassigner(admin, out).verify_api([(TP("t", 0), (1, 4))], preserve_throttles=True)
    assert admin.configs == []
    assert not reassign_api.ApiReassigner(admin, out).verify_api([(TP("t", 0), (1, 4))])
    assert out.getvalue().splitlines()[-2:] == [
        "Clearing broker-level throttles on brokers 1,2,3,4",  # the live ones and the plan's
        "Clearing topic-level throttles on topic t",
    ]
    deletes = [(name, None, "DELETE") for name in reassign_api.BROKER_THROTTLES]
    assert admin.configs[:4] == [("BROKER", str(b), deletes) for b in (1, 2, 3, 4)]
    assert admin.configs[4:] == [("TOPIC", "t", [(name, None, "DELETE") for name in reassign_api.TOPIC_THROTTLES])]


def test_api_execute_verify_generate_with_a_fake_admin() -> None:
    import io

    from zkraft.tools.reassign_partitions import ReassignOptions

    out = io.StringIO()
    busy = FakeAdmin({TP("t", 1): {"replicas": [2, 3, 1], "adding_replicas": [1], "removing_replicas": []}})
    with pytest.raises(ToolError, match="Cannot execute because there is an existing partition assignment"):
        reassign_api.ApiReassigner(busy, out).execute_api([(TP("t", 0), (3,))], additional=False)
    with pytest.raises(ToolError, match="Unknown broker id 7"):
        reassign_api.ApiReassigner(FakeAdmin(), out).execute_api([(TP("t", 0), (7,))], additional=False)
    admin = FakeAdmin()
    reassign_api.ApiReassigner(admin, out).execute_api([(TP("t", 0), (3,)), (TP("t", 1), (1,))], additional=False)
    assert admin.altered == [{TP("t", 0): (3,), TP("t", 1): (1,)}]
    assert out.getvalue().endswith("Successfully started partition reassignments for t-0,t-1\n")

    out = io.StringIO()
    assert reassign_api.ApiReassigner(busy, out).verify_api([(TP("t", 0), (1, 2)), (TP("t", 1), (1,))])
    assert out.getvalue() == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is complete.\n"
        "Reassignment of partition t-1 is still in progress.\n\n"
    )
    out = io.StringIO()
    options = ReassignOptions(action="generate", zookeeper=None, broker_list=(1, 3), bootstrap_server="h:1")
    reassign_api.ApiReassigner(FakeAdmin(), out).generate(options, ["t"])
    current, proposed = out.getvalue().split("\n\n")
    assert current.startswith("Current partition replica assignment\n")
    plan = json.loads(proposed.split("\n")[1])
    assert {tuple(sorted(p["replicas"])) for p in plan["partitions"]} == {(1, 3)}
