"""`zkraft up` keeps a cluster running when one of its processes dies (issue 25), against real processes.

What a user sees: one line naming the process that died (its role, id, pid, how it ended, its log)
followed by its log's last lines; the other processes keep their pids and keep serving; the dead one
comes back with a new pid in cluster.json; one that keeps failing is retried with growing delays, and
a stop leaves it down.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Admin, Consumer, NewTopic, Producer
from client.kafka.errors import UnknownTopicOrPartitionError
from tests.helpers import wait_until
from tests.test_up_cli import (
    READY_TIMEOUT_S,
    REPO_ROOT,
    STOP_TIMEOUT_S,
    UpProcess,
    _env,
    broker_ports,
    free_base_port,
    pid_alive,
    running_up,
    settled,
    status_json,
)

pytestmark = pytest.mark.integration

BROKERS = 2
SDK_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_MS = 5000
# Quick sessions: a broker restarted after SIGKILL waits for its old session's registration to expire.
FAST = (
    "--override", "zookeeper.session.timeout.ms=4000",
    "--override", "controlled.shutdown.retry.backoff.ms=100",
)  # fmt: skip


@pytest.fixture
def up(tmp_path: Path) -> Iterator[UpProcess]:
    quorum_base, broker_base = broker_ports(BROKERS)
    ports = ("--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
    with running_up(
        tmp_path / "cluster", "--brokers", str(BROKERS), *ports, *FAST, ready_line="zkraft up: running"
    ) as u:
        yield u


def children(up: UpProcess) -> dict[str, dict]:
    """cluster.json's children by the name `zkraft up` prints ("quorum node 1", "broker 2")."""
    cluster = up.cluster()
    named = {f"quorum node {c['id']}": c for c in cluster["quorum"]}
    named.update({f"broker {c['id']}": c for c in cluster["brokers"]})
    return named


def bootstrap(up: UpProcess) -> str:
    """The bootstrap list `zkraft up` prints: the brokers' Kafka listeners, which the SDK takes as well."""
    return ",".join(b["kafka_address"] for b in up.cluster()["brokers"])


def create_spread_topic(bootstrap_servers: str, topic: str) -> None:
    """Partition 0 on broker 1 alone, partition 1 on broker 2 alone: each is served by that broker or nobody."""
    with Admin(bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [1], 1: [2]})], timeout_ms=30000)
    wait_led(bootstrap_servers, topic, {0: 1, 1: 2})


def wait_led(bootstrap_servers: str, topic: str, leaders: dict[int, int]) -> None:
    def led() -> bool:
        with Admin(bootstrap_servers) as admin:
            try:
                (description,) = admin.describe_topics([topic])
            except UnknownTopicOrPartitionError:
                return False
        return {p.partition: p.leader for p in description.partitions} == leaders

    wait_until(led, READY_TIMEOUT_S, interval_s=0.2, message=f"{topic} is not led by {leaders}")


def produce_and_consume(bootstrap_servers: str, topic: str, tag: str, count: int, partitions: int = 2) -> None:
    """acks=all records to every partition through the SDK, each acknowledged, then all of them read back."""
    values = {b"%s-%d" % (tag.encode(), i) for i in range(count)}
    with Producer(bootstrap_servers, acks="all") as producer:
        futures = [producer.send(topic, value, partition=i % partitions) for i, value in enumerate(sorted(values))]
        producer.flush(SDK_TIMEOUT_S)
        for future in futures:
            future.get(SDK_TIMEOUT_S)
    missing = set(values)
    with Consumer(
        topic, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest", consumer_timeout_ms=CONSUME_TIMEOUT_MS
    ) as consumer:
        for record in consumer:
            missing.discard(record.value)
            if not missing:
                break
    assert not missing, sorted(missing)


def failure_report(output: str, name: str, pid: int, how: str) -> list[str]:
    """The report of `name` (pid) ending `how`: its line and the indented log lines that follow it."""
    lines = output.splitlines()
    head = f"{name} (pid {pid}) exited unexpectedly ({how}); log: "
    [start] = [i for i, line in enumerate(lines) if line.startswith(head)]
    report = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  | "):
            break
        report.append(line)
    return report


def test_a_killed_quorum_node_and_broker_come_back_and_the_rest_keeps_running(up: UpProcess) -> None:
    create_spread_topic(bootstrap(up), "spread")
    produce_and_consume(bootstrap(up), "spread", "before", 20)
    before = {name: child["pid"] for name, child in children(up).items()}
    victims = ["quorum node 2", "broker 2"]
    for name in victims:
        os.kill(before[name], signal.SIGKILL)

    def restarted() -> dict[str, int] | None:
        now = {name: child["pid"] for name, child in children(up).items()}
        fresh = all(now[n] not in (None, before[n]) and pid_alive(now[n]) for n in victims)
        return now if fresh and all(f"{n} restarted (pid {now[n]}" in up.output() for n in victims) else None

    now = wait_until(restarted, READY_TIMEOUT_S, interval_s=0.1, message="zkraft up did not restart both")
    assert isinstance(now, dict)
    assert up.process.poll() is None
    for name in set(before) - set(victims):
        assert now[name] == before[name], f"{name} was restarted too"
        assert pid_alive(now[name])
    output = up.output()
    for name in victims:
        report = failure_report(output, name, before[name], "killed by SIGKILL")
        assert report[0].endswith(str(children(up)[name]["log"]))
        assert 2 <= len(report) <= 11, report  # the failure line and the log's last lines (at most 10)
        assert f"restarting {name} in 1 s (failure 1 in a row)" in output

    # Serving again: three nodes agree on a leader; broker 2's new process registered and leads its partition.
    wait_until(lambda: settled(status_json(up.addresses()), 3), READY_TIMEOUT_S, interval_s=0.2, message="no quorum")
    broker_log = Path(children(up)["broker 2"]["log"])
    wait_until(
        lambda: broker_log.read_text(encoding="utf-8").count('"broker_registered"') == 2,
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="the restarted broker 2 did not register",
    )
    wait_led(bootstrap(up), "spread", {0: 1, 1: 2})
    produce_and_consume(bootstrap(up), "spread", "after", 20)
    output = up.stop()
    assert output.count("exited unexpectedly") == 2


def test_a_child_that_keeps_failing_is_retried_with_growing_delays_and_a_stop_leaves_it_down(up: UpProcess) -> None:
    before = {name: child["pid"] for name, child in children(up).items()}
    broker = children(up)["broker 2"]
    # Its next starts refuse their configuration (exit code 2): the running broker has read the file already.
    with open(broker["config"], "a", encoding="utf-8") as properties:
        properties.write("num.partitions=many\n")
    os.kill(broker["pid"], signal.SIGKILL)

    delays = wait_until(
        lambda: (d := re.findall(r"restarting broker 2 in (\d+) s", up.output())) and len(d) >= 3 and d,
        READY_TIMEOUT_S,
        interval_s=0.1,
        message="broker 2 was not retried three times",
    )
    assert delays[:3] == ["1", "2", "4"]
    output = up.output()
    assert "exit code 2" in output and "num.partitions" in output, output  # its log says why
    assert up.process.poll() is None

    # The rest keeps serving, on the same processes.
    now = {name: child["pid"] for name, child in children(up).items()}
    for name in set(before) - {"broker 2"}:
        assert now[name] == before[name]
        assert pid_alive(now[name])
    broker_1 = children(up)["broker 1"]["address"]
    with Admin(broker_1) as admin:
        admin.create_topics([NewTopic("meanwhile", replica_assignments={0: [1]})], timeout_ms=30000)
    wait_led(broker_1, "meanwhile", {0: 1})
    produce_and_consume(broker_1, "meanwhile", "meanwhile", 20, partitions=1)

    # Stopped while broker 2 waits out a back-off: it is not started again.
    wait_until(
        lambda: (
            len(re.findall(r"restarting broker 2 in", up.output()))
            > len(re.findall(r"broker 2 restarted", up.output()))
        ),
        READY_TIMEOUT_S,
        interval_s=0.05,
        message="broker 2 never waited in its back-off",
    )
    starts = up.output().count("broker 2 restarted")
    output = up.stop()
    stopping = output[output.index("not restarting broker 2: the cluster is stopping") :]
    assert "broker 2 restarted" not in stopping
    assert output.count("broker 2 restarted") == starts
    assert "stopping 1 broker(s)" in stopping
    assert up.process.returncode == 0


def start_node_of_another_cluster(data_dir: Path, base_port: int) -> None:
    """Leave in `data_dir` the data of node 3 of a cluster named 'other' (its peers on base_port..base_port+2)."""
    peers = ",".join(f"{i}=127.0.0.1:{base_port + i - 1}" for i in (1, 2, 3))
    log = data_dir.parent / "other-node.log"
    with open(log, "ab") as output:
        node = subprocess.Popen(
            [
                sys.executable, "-m", "zkraft", "quorum", "start", "--id", "3", "--data-dir", str(data_dir),
                "--listen", f"127.0.0.1:{base_port + 2}", "--peers", peers, "--cluster-id", "other",
            ],
            cwd=REPO_ROOT, env=_env(), stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until(
            lambda: '"node_started"' in log.read_text(encoding="utf-8") or node.poll() is not None,
            READY_TIMEOUT_S,
            interval_s=0.1,
            message="the other cluster's node did not start",
        )
        assert node.poll() is None, log.read_text(encoding="utf-8")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=STOP_TIMEOUT_S)


def test_a_node_that_fails_at_every_start_does_not_keep_the_cluster_from_coming_up(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    data_dir.mkdir()
    base_port = free_base_port()
    start_node_of_another_cluster(data_dir / "quorum-3", base_port)

    args = ("--brokers", "0", "--base-port", str(base_port))
    with running_up(data_dir, *args, ready_line="zkraft up: running") as up:
        # Nodes 1 and 2 elect; node 3 refuses its data dir at each start and is retried with growing delays.
        wait_until(
            lambda: "restarting quorum node 3 in 2 s (failure 2 in a row)" in up.output(),
            READY_TIMEOUT_S,
            interval_s=0.1,
            message="quorum node 3 was not retried",
        )
        output = up.output()
        assert "belongs to cluster 'other'" in output  # its log's last lines say why
        assert up.process.poll() is None
        healthy = {n["id"]: n["pid"] for n in up.cluster()["quorum"] if n["id"] != 3}
        assert all(pid_alive(pid) for pid in healthy.values())
        rows = status_json(up.addresses())
        assert sum(row["role"] == "leader" for row in rows) == 1
        up.stop()
    assert {n["id"]: n["pid"] for n in up.cluster()["quorum"] if n["id"] != 3} == healthy
