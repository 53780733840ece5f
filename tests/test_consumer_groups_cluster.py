"""Consumer groups against a real cluster: 3 quorum nodes, 3 brokers, consumers in and out of process.

What a user of Kafka's groups would check (docs/research/kafka.md §5): three members split a
10-partition topic as range (4/3/3) and round-robin assign it; a fourth member makes the
group rebalance into a higher generation; a SIGKILLed member's partitions move after its
session timeout; a stale member's commit fails with ILLEGAL_GENERATION; two groups read a
topic independently; across a consumer crash every record is processed (at-least-once);
`zkraft consumer-groups` lists, describes and resets; `zkraft console-consumer --group`
commits. Waiting is on conditions with deadlines; several consumers share the test thread
because a poll never blocks past its timeout.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Admin, Consumer, ConsumerRebalanceListener, Producer, TopicPartition
from client.kafka.client_errors import CommitFailedError
from client.kafka.errors import IllegalGenerationError
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
POLL_MS = 100
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_MS = 300
BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("groups"), brokers=3, broker_properties=BROKER_PROPERTIES) as kafka:
        kafka.start()
        yield kafka


def member(cluster: KafkaCluster, group: str, *topics: str, **overrides: object) -> Consumer:
    settings: dict = {
        "bootstrap_servers": cluster.bootstrap_servers,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        **overrides,
    }
    return Consumer(*topics, **settings)


def poll_all(consumers: list[Consumer]) -> None:
    for c in consumers:
        c.poll(POLL_MS)


def settled(consumers: list[Consumer], sizes: list[int]) -> bool:
    """All members stable in one generation, with these assignment sizes (sorted, largest first)."""
    poll_all(consumers)
    generations = {c._coordinator.generation_if_stable() for c in consumers}  # type: ignore[union-attr]
    if None in generations or len({g.generation_id for g in generations if g}) != 1:
        return False
    if any(c._coordinator.rejoin_needed() for c in consumers):  # type: ignore[union-attr]
        return False
    return sorted((len(c.assignment()) for c in consumers), reverse=True) == sizes


def generation(consumer: Consumer) -> int:
    return consumer._coordinator.generation.generation_id  # type: ignore[union-attr]


def member_id(consumer: Consumer) -> str:
    return consumer._coordinator.generation.member_id  # type: ignore[union-attr]


def produce(cluster: KafkaCluster, topic: str, count: int, start: int = 0) -> None:
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        for i in range(start, start + count):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i)
        producer.flush(TIMEOUT_S)


def close_all(consumers: list[Consumer]) -> None:
    for c in consumers:
        c.close()


# ---------------------------------------------------------------- assignment


def test_range_splits_ten_partitions_4_3_3_and_a_fourth_member_rebalances(cluster: KafkaCluster) -> None:
    cluster.create_topic("range-t", partitions=10, replication_factor=3)
    consumers = [member(cluster, "range-g", "range-t", client_id=f"c{i}") for i in range(3)]
    try:
        wait_until(lambda: settled(consumers, [4, 3, 3]), TIMEOUT_S, message="range split 4/3/3")
        by_member = sorted(consumers, key=member_id)
        assert [sorted(p for _, p in c.assignment()) for c in by_member] == [
            [0, 1, 2, 3],
            [4, 5, 6],
            [7, 8, 9],
        ]
        first_generation = generation(consumers[0])
        consumers.append(member(cluster, "range-g", "range-t", client_id="c3"))
        wait_until(lambda: settled(consumers, [3, 3, 2, 2]), TIMEOUT_S, message="rebalance to 3/3/2/2")
        assert generation(consumers[0]) > first_generation
        assert len({generation(c) for c in consumers}) == 1
        owned = [tp for c in consumers for tp in c.assignment()]
        assert sorted(owned) == [TopicPartition("range-t", p) for p in range(10)]
    finally:
        close_all(consumers)


def test_roundrobin_deals_partitions_in_member_order(cluster: KafkaCluster) -> None:
    cluster.create_topic("rr-t", partitions=10, replication_factor=3)
    consumers = [
        member(cluster, "rr-g", "rr-t", partition_assignment_strategy=["roundrobin"], client_id=f"r{i}")
        for i in range(3)
    ]
    try:
        wait_until(lambda: settled(consumers, [4, 3, 3]), TIMEOUT_S, message="round-robin split")
        by_member = sorted(consumers, key=member_id)
        assert [sorted(p for _, p in c.assignment()) for c in by_member] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
        with Admin(cluster.bootstrap_servers) as admin:
            (described,) = admin.describe_consumer_groups(["rr-g"])
        assert described.state == "Stable" and described.protocol == "roundrobin"
        assert sorted(m.client_id for m in described.members) == ["r0", "r1", "r2"]
    finally:
        close_all(consumers)


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", sorted(revoked)))
        if revoked and self.consumer is not None:
            self.consumer.commit()  # the generation is still valid here: the commit must succeed

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", sorted(assigned)))


def test_pattern_subscription_picks_up_new_topics_with_listener_calls(cluster: KafkaCluster) -> None:
    cluster.create_topic("pat-a", partitions=2, replication_factor=3)
    cluster.create_topic("nopat-x", partitions=1, replication_factor=3)
    produce(cluster, "pat-a", 10)
    recorder = Recorder()
    consumer = member(cluster, "pat-g", metadata_max_age_ms=300, enable_auto_commit=False)
    recorder.consumer = consumer
    consumer.subscribe(pattern=r"pat-.*", listener=recorder)
    try:
        read: set[tuple[str, int, int]] = set()

        def consumed_a() -> bool:
            for batch in consumer.poll(POLL_MS).values():
                read.update((r.topic, r.partition, r.offset) for r in batch)
            return len(read) == 10

        wait_until(consumed_a, TIMEOUT_S, message="pat-a read")
        assert consumer.assignment() == {TopicPartition("pat-a", 0), TopicPartition("pat-a", 1)}
        cluster.create_topic("pat-b", partitions=1, replication_factor=3)

        def has_b() -> bool:
            consumer.poll(POLL_MS)
            return TopicPartition("pat-b", 0) in consumer.assignment()

        wait_until(has_b, TIMEOUT_S, message="pattern matched the new topic")
        assert consumer.subscription() == {"pat-a", "pat-b"}
        assert recorder.events[0] == ("assigned", [TopicPartition("pat-a", 0), TopicPartition("pat-a", 1)])
        assert ("revoked", [TopicPartition("pat-a", 0), TopicPartition("pat-a", 1)]) in recorder.events
        assert recorder.events[-1] == (
            "assigned",
            [TopicPartition("pat-a", 0), TopicPartition("pat-a", 1), TopicPartition("pat-b", 0)],
        )
        # The revoke callback's commit stored what had been consumed.
        committed = {p: consumer.committed(TopicPartition("pat-a", p)) for p in (0, 1)}
        assert sum(o or 0 for o in committed.values()) == 10
    finally:
        consumer.close()


# ---------------------------------------------------------------- failures

MEMBER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from client import Consumer
    bootstrap, group, topic, out_path = sys.argv[1:5]
    consumer = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                        session_timeout_ms=int(sys.argv[5]), heartbeat_interval_ms=int(sys.argv[6]),
                        auto_commit_interval_ms=200, max_poll_records=int(sys.argv[7]))
    with open(out_path, "a") as out:
        while True:
            records = consumer.poll(100)
            for tp, batch in records.items():
                for r in batch:
                    out.write(json.dumps(["rec", r.partition, r.offset]) + "\\n")
            if records:
                time.sleep(float(sys.argv[8]))  # the work of processing a batch
            out.write(json.dumps(["assigned", sorted(p for _, p in consumer.assignment())]) + "\\n")
            out.flush()
    """
)


def start_member_process(
    cluster: KafkaCluster,
    group: str,
    topic: str,
    out_path: Path,
    max_poll_records: int = 500,
    batch_work_s: float = 0.0,
) -> subprocess.Popen[bytes]:
    args = [cluster.bootstrap_servers, group, topic, str(out_path), str(SESSION_TIMEOUT_MS), str(HEARTBEAT_MS)]
    return subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, *args, str(max_poll_records), str(batch_work_s)],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=open(out_path.with_suffix(".err"), "ab"),  # noqa: SIM115 - the child owns it
    )


def last_assignment(path: Path) -> list[int] | None:
    if not path.exists():
        return None
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.startswith('["assigned"')]
    return lines[-1][1] if lines else None


def test_sigkilled_member_loses_its_partitions_after_the_session_timeout(cluster: KafkaCluster, tmp_path: Path) -> None:
    cluster.create_topic("kill-t", partitions=10, replication_factor=3)
    out_path = tmp_path / "member.jsonl"
    proc = start_member_process(cluster, "kill-g", "kill-t", out_path)
    local = member(cluster, "kill-g", "kill-t")
    try:

        def split() -> bool:
            local.poll(POLL_MS)
            remote = last_assignment(out_path)
            mine = sorted(p for _, p in local.assignment())
            return remote is not None and sorted(remote + mine) == list(range(10)) and bool(mine) and bool(remote)

        wait_until(split, TIMEOUT_S, message="two members split the topic")
        before = generation(local)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

        def took_over() -> bool:
            local.poll(POLL_MS)
            return len(local.assignment()) == 10

        wait_until(took_over, TIMEOUT_S, message="the survivor owns every partition")
        assert generation(local) > before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        local.close()


def test_a_stale_members_commit_fails_with_illegal_generation(cluster: KafkaCluster) -> None:
    cluster.create_topic("stale-t", partitions=4, replication_factor=3)
    first = member(cluster, "stale-g", "stale-t")
    try:
        wait_until(lambda: settled([first], [4]), TIMEOUT_S, message="first member joined")
        stale = first._coordinator.generation  # type: ignore[union-attr]
        second = member(cluster, "stale-g", "stale-t")
        try:
            wait_until(lambda: settled([first, second], [2, 2]), TIMEOUT_S, message="rebalanced to two members")
            assert generation(first) > stale.generation_id
            # A member that missed the rebalance still carries the old generation: its commit is fenced.
            first._coordinator._generation = stale  # type: ignore[union-attr]
            with pytest.raises(CommitFailedError) as raised:
                first.commit({TopicPartition("stale-t", 0): 0})
            assert isinstance(raised.value.__cause__, IllegalGenerationError)
        finally:
            second.close()
    finally:
        first.close()


def group_state(cluster: KafkaCluster, group: str) -> str:
    with Admin(cluster.bootstrap_servers) as admin:
        (described,) = admin.describe_consumer_groups([group])
    return described.state


def test_a_member_that_stops_polling_leaves_and_rejoins_on_its_next_poll(cluster: KafkaCluster) -> None:
    cluster.create_topic("idle-t", partitions=2, replication_factor=3)
    idle = member(cluster, "idle-g", "idle-t", max_poll_interval_ms=1500)
    try:
        wait_until(lambda: settled([idle], [2]), TIMEOUT_S, message="member joined")
        # No poll from here on: the heartbeat thread leaves the group after max_poll_interval_ms.
        wait_until(lambda: group_state(cluster, "idle-g") == "Empty", TIMEOUT_S, message="idle member left")
        with pytest.raises(CommitFailedError, match="not part of an active group"):
            idle.commit()
        wait_until(lambda: settled([idle], [2]), TIMEOUT_S, message="member rejoined on poll")
        assert group_state(cluster, "idle-g") == "Stable"
        idle.unsubscribe()
        assert idle.assignment() == set()
        assert group_state(cluster, "idle-g") == "Empty"  # LeaveGroup at once, no session timeout
    finally:
        idle.close()


def test_two_groups_read_the_same_topic_independently(cluster: KafkaCluster) -> None:
    cluster.create_topic("shared-t", partitions=3, replication_factor=3)
    produce(cluster, "shared-t", 300)

    def read_all(group: str, expected: int) -> set[tuple[int, int]]:
        seen: set[tuple[int, int]] = set()
        with member(cluster, group, "shared-t", enable_auto_commit=False) as consumer:

            def done() -> bool:
                for batch in consumer.poll(POLL_MS).values():
                    seen.update((r.partition, r.offset) for r in batch)
                return len(seen) >= expected

            wait_until(done, TIMEOUT_S, message=f"{group} read {expected} records")
            consumer.commit()
        return seen

    a = read_all("shared-a", 300)
    b = read_all("shared-b", 300)
    assert a == b and len(a) == 300
    produce(cluster, "shared-t", 30, start=300)
    assert len(read_all("shared-a", 30)) == 30  # group a goes on from its own committed offsets
    with Admin(cluster.bootstrap_servers) as admin:
        offsets_a = admin.list_consumer_group_offsets("shared-a")
        offsets_b = admin.list_consumer_group_offsets("shared-b")
    assert sum(o.offset for o in offsets_a.values()) == 330
    assert sum(o.offset for o in offsets_b.values()) == 300


def test_at_least_once_across_a_consumer_crash(cluster: KafkaCluster, tmp_path: Path) -> None:
    total = 2000
    cluster.create_topic("alo-t", partitions=4, replication_factor=3)
    produce(cluster, "alo-t", total)
    out_path = tmp_path / "crashing.jsonl"
    proc = start_member_process(cluster, "alo-g", "alo-t", out_path, max_poll_records=20, batch_work_s=0.05)

    def processed(path: Path) -> set[tuple[int, int]]:
        if not path.exists():
            return set()
        return {
            (row[1], row[2])
            for row in (json.loads(line) for line in path.read_text().splitlines() if line.startswith('["rec"'))
        }

    try:
        wait_until(lambda: len(processed(out_path)) >= total // 4, TIMEOUT_S, message="crashing member progressed")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    before_crash = processed(out_path)
    assert len(before_crash) < total, "the member finished before the crash: nothing tested"
    with Admin(cluster.bootstrap_servers) as admin:
        committed = admin.list_consumer_group_offsets("alo-g")
    assert committed, "nothing was auto-committed before the crash"
    after: set[tuple[int, int]] = set()
    with member(cluster, "alo-g", "alo-t", auto_offset_reset="latest") as survivor:
        ends = survivor.end_offsets([TopicPartition("alo-t", p) for p in range(4)])

        def caught_up() -> bool:
            for batch in survivor.poll(POLL_MS).values():
                after.update((r.partition, r.offset) for r in batch)
            return all(survivor.position(tp) >= end for tp, end in ends.items() if tp in survivor.assignment()) and (
                len(survivor.assignment()) == 4
            )

        wait_until(caught_up, TIMEOUT_S, message="the new member read to the end")
    everything = {(tp.partition, o) for tp, end in ends.items() for o in range(end)}
    assert sum(ends.values()) == total
    assert before_crash | after == everything  # nothing skipped
    for tp, offset in committed.items():  # the new member resumed at the committed offsets, not later
        assert {(tp.partition, o) for o in range(offset.offset, ends[tp])} <= after


# ---------------------------------------------------------------- tools


def zkraft(*args: str, timeout_s: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


DESCRIBE_COLUMNS = "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID".split()


def test_consumer_groups_tool_lists_describes_and_resets(cluster: KafkaCluster) -> None:
    cluster.create_topic("tool-t", partitions=2, replication_factor=3)
    produce(cluster, "tool-t", 20)
    bootstrap = cluster.bootstrap_servers
    consumer = member(cluster, "tool-g", "tool-t", client_id="tool-client", enable_auto_commit=False)
    try:
        wait_until(lambda: settled([consumer], [2]), TIMEOUT_S, message="tool-g member joined")
        consumer.commit({TopicPartition("tool-t", 0): 3, TopicPartition("tool-t", 1): 4})
        listed = zkraft("consumer-groups", "--bootstrap-server", bootstrap, "--list")
        assert listed.returncode == 0, listed.stderr
        assert "tool-g" in listed.stdout.splitlines()

        described = zkraft("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "tool-g")
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0] == ""
        assert lines[1].split() == DESCRIBE_COLUMNS
        assert lines[1].startswith("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG ")
        rows = sorted(line.split() for line in lines[2:])
        ends = consumer.end_offsets([TopicPartition("tool-t", 0), TopicPartition("tool-t", 1)])
        mid = member_id(consumer)
        assert rows == [
            ["tool-g", "tool-t", "0", "3", str(ends[TopicPartition("tool-t", 0)]),
             str(ends[TopicPartition("tool-t", 0)] - 3), mid, "/" + rows[0][7].lstrip("/"), "tool-client"],
            ["tool-g", "tool-t", "1", "4", str(ends[TopicPartition("tool-t", 1)]),
             str(ends[TopicPartition("tool-t", 1)] - 4), mid, "/" + rows[1][7].lstrip("/"), "tool-client"],
        ]  # fmt: skip
        state = zkraft("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "tool-g", "--state")
        assert state.returncode == 0, state.stderr
        assert state.stdout.splitlines()[2].split()[-3:] == ["range", "Stable", "1"]

        refused = zkraft(
            "consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "tool-g",
            "--topic", "tool-t", "--to-earliest", "--execute",
        )  # fmt: skip
        assert refused.returncode == 1
        assert (
            "Assignments can only be reset if the group 'tool-g' is inactive, but the current state is Stable."
            in refused.stderr
        )
    finally:
        consumer.close(autocommit=False)

    empty = zkraft("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "tool-g")
    assert empty.returncode == 0, empty.stderr
    assert "Consumer group 'tool-g' has no active members." in empty.stderr
    assert [line.split()[6:] for line in empty.stdout.splitlines()[2:]] == [["-", "-", "-"], ["-", "-", "-"]]

    dry = zkraft(
        "consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "tool-g",
        "--topic", "tool-t", "--shift-by", "-2", "--dry-run",
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert [line.split() for line in dry.stdout.splitlines()[1:]] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        ["tool-g", "tool-t", "0", "1"],
        ["tool-g", "tool-t", "1", "2"],
    ]
    with Admin(bootstrap) as admin:
        assert {tp.partition: o.offset for tp, o in admin.list_consumer_group_offsets("tool-g").items()} == {0: 3, 1: 4}
    executed = zkraft(
        "consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "tool-g",
        "--topic", "tool-t", "--to-earliest", "--execute",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    with Admin(bootstrap) as admin:
        assert {tp.partition: o.offset for tp, o in admin.list_consumer_group_offsets("tool-g").items()} == {0: 0, 1: 0}
    deleted = zkraft("consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", "tool-g")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "Deletion of requested consumer groups ('tool-g') was successful."
    gone = zkraft("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "tool-g")
    assert "Error: Consumer group 'tool-g' does not exist." in gone.stderr


def test_console_consumer_with_a_group_commits_what_it_printed(cluster: KafkaCluster) -> None:
    cluster.create_topic("console-t", partitions=2, replication_factor=3)
    produce(cluster, "console-t", 10)
    common = ["console-consumer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "console-t"]
    first = zkraft(*common, "--group", "console-g", "--from-beginning", "--max-messages", "6")
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 6
    with Admin(cluster.bootstrap_servers) as admin:
        assert sum(o.offset for o in admin.list_consumer_group_offsets("console-g").values()) == 6
    rest = zkraft(*common, "--group", "console-g", "--from-beginning", "--timeout-ms", "10000")
    assert rest.returncode == 0, rest.stderr
    assert sorted(first.stdout.splitlines() + rest.stdout.splitlines()) == sorted(f"v{i}" for i in range(10))
    assert "Processed a total of 4 messages" in rest.stderr


def test_consumer_perf_test_with_a_group(cluster: KafkaCluster) -> None:
    cluster.create_topic("perf-t", partitions=2, replication_factor=3)
    produce(cluster, "perf-t", 50)
    result = zkraft(
        "consumer-perf-test", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "perf-t",
        "--messages", "50", "--group", "perf-g", "--timeout", "20000",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.strip().splitlines()[-2:]
    assert header.startswith("start.time, end.time")
    assert row.split(", ")[4] == "50"
    with Admin(cluster.bootstrap_servers) as admin:
        assert sum(o.offset for o in admin.list_consumer_group_offsets("perf-g").values()) == 50


def test_committed_offsets_survive_the_sigkill_of_the_coordinator(cluster: KafkaCluster) -> None:
    """Last in the module: it kills a broker (restarted at the end)."""
    cluster.create_topic("coord-t", partitions=3, replication_factor=3)
    produce(cluster, "coord-t", 30)
    consumer = member(cluster, "coord-g", "coord-t", enable_auto_commit=False)
    with Admin(cluster.bootstrap_servers) as admin:
        coordinator = admin.find_coordinator("coord-g").node_id
    try:
        seen: set[tuple[int, int]] = set()

        def read(expected: int) -> bool:
            for batch in consumer.poll(POLL_MS).values():
                seen.update((r.partition, r.offset) for r in batch)
            return len(seen) >= expected

        wait_until(lambda: read(30), TIMEOUT_S, message="first 30 read")
        consumer.commit()
        cluster.kill_broker(coordinator)
        produce(cluster, "coord-t", 30, start=30)
        wait_until(lambda: read(60), TIMEOUT_S, message="reading went on after the coordinator died")
        consumer.commit()
        with Admin(cluster.bootstrap_servers) as admin:
            assert admin.find_coordinator("coord-g").node_id != coordinator
            committed = admin.list_consumer_group_offsets("coord-g")
        assert sum(o.offset for o in committed.values()) == 60
    finally:
        consumer.close()
        cluster.start_broker(coordinator)
