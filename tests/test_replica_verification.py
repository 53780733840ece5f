"""`zkraft replica-verification`: the batch-by-batch comparison and Kafka's lines (pure, fake fetches), then
the command on a real cluster with a healthy RF 3 topic."""

from __future__ import annotations

import argparse
import re
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from client.kafka.records import RecordBatchBuilder
from client.kafka.structs import TopicPartition
from tests.test_reassign_tool import needs_cluster, zkraft
from zkraft.tools import replica_verification as rv
from zkraft.tools.topics import ToolUsageError

TP = TopicPartition
DATE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}"
LAG_LINE = re.compile(rf"^{DATE}: max lag is (-?\d+) for partition (\S+) at offset (-?\d+) among (\d+) partitions$")


def namespace(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    rv.configure_parser(parser)
    return parser.parse_args(list(args))


def batches(*spans: tuple[int, int]) -> tuple[rv.BatchInfo, ...]:
    """(last offset, checksum) per batch."""
    return tuple(rv.BatchInfo(last, crc) for last, crc in spans)


def buffer(partitions: dict[TopicPartition, int], offsets: dict[TopicPartition, int]) -> rv.ReplicaBuffer:
    return rv.ReplicaBuffer(partitions, dict(offsets), report_interval_ms=1000, last_report_ms=0)


def test_options() -> None:
    with pytest.raises(ToolUsageError, match='Missing required argument "\\[broker-list\\]"'):
        rv.options_from_namespace(namespace())
    with pytest.raises(ToolUsageError, match="Please provide valid host:port like host1:9091,host2:9092"):
        rv.options_from_namespace(namespace("--broker-list", "nohost"))
    with pytest.raises(ToolUsageError, match="--fetch-size must be >= 1"):
        rv.options_from_namespace(namespace("--broker-list", "h:1", "--fetch-size", "0"))
    options = rv.options_from_namespace(namespace("--broker-list", "h:1,h:2", "--time-limit-ms", "10"))
    assert (options.brokers, options.max_wait_ms, options.report_interval_ms) == (("h:1", "h:2"), 1000, 30000)


def test_batch_infos_reads_last_offsets_and_crcs() -> None:
    first = RecordBatchBuilder(base_timestamp_ms=1)
    for i in range(3):
        first.append(b"k", f"v{i}".encode())
    second = RecordBatchBuilder(base_timestamp_ms=1)
    second.append(None, b"x")
    data = first.build() + struct.pack(">q", 3) + second.build()[8:]  # the broker's offsets: 0-2, then 3
    infos = rv.batch_infos(data)
    assert [i.last_offset for i in infos] == [2, 3] and [i.next_offset for i in infos] == [3, 4]
    assert rv.batch_infos(data[:-5]) == infos[:1]  # a partial last batch is ignored, as in a fetch


def test_equal_replicas_verify_up_to_the_high_watermark() -> None:
    tp = TP("t", 0)
    state = buffer({tp: 3}, {tp: 0})
    same = batches((1, 11), (4, 12), (6, 13))
    fetched = {
        tp: {
            1: rv.ReplicaData(7, same),
            2: rv.ReplicaData(7, same),
            3: rv.ReplicaData(5, same[:2]),  # a follower whose high watermark is behind
        }
    }
    assert state.verify(fetched, now_ms=500) == []  # no report before the interval
    assert state.fetch_offsets[tp] == 5
    assert (state.max_lag, state.max_lag_partition, state.offset_with_max_lag) == (2, tp, 5)
    lines = state.verify({tp: {1: rv.ReplicaData(7, same[2:]), 2: rv.ReplicaData(7, same[2:]),
                               3: rv.ReplicaData(7, same[2:])}}, now_ms=1600)  # fmt: skip
    assert state.fetch_offsets[tp] == 7 and len(lines) == 1
    match = LAG_LINE.match(lines[0])
    assert match is not None and match.groups() == ("0", "t-0", "7", "1"), lines


def test_checksum_mismatch_is_kafkas_line() -> None:
    tp = TP("t", 1)
    state = buffer({tp: 2}, {tp: 0})
    lines = state.verify(
        {tp: {1: rv.ReplicaData(3, batches((2, 100))), 2: rv.ReplicaData(3, batches((2, 200)))}}, now_ms=10
    )
    assert len(lines) == 1
    assert re.fullmatch(
        rf"{DATE}: partition t-1 has unmatched checksum at offset 2; "
        r"replica 1's checksum 100; replica 2's checksum 200",
        lines[0],
    )


def test_offset_mismatch_stops_the_tool() -> None:
    tp = TP("t", 2)
    state = buffer({tp: 2}, {tp: 0})
    with pytest.raises(rv.OffsetMismatch) as raised:
        state.verify({tp: {1: rv.ReplicaData(9, batches((2, 1))), 2: rv.ReplicaData(9, batches((4, 1)))}}, 10)
    assert re.fullmatch(
        rf"{DATE}: partition t-2: replica 1's offset 2 doesn't match replica 2's offset 4", str(raised.value)
    )


def test_largest_lag_is_reported_across_partitions() -> None:
    a, b = TP("a", 0), TP("b", 0)
    state = buffer({a: 1, b: 1}, {a: 0, b: 0})
    state.verify({a: {1: rv.ReplicaData(1, batches((0, 1)))}, b: {2: rv.ReplicaData(9, batches((3, 1)))}}, 2000)
    assert (state.max_lag, state.max_lag_partition, state.offset_with_max_lag) == (5, b, 4)
    assert state.report_line(0).endswith(": max lag is 5 for partition b-0 at offset 4 among 2 partitions")


def test_an_unreachable_broker_list_is_one_line() -> None:
    result = zkraft("replica-verification", "--broker-list", "127.0.0.1:1", "--time-limit-ms", "100")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("zkraft: error: Fetching topic metadata failed from every broker")
    assert result.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("replica-verification"), brokers=3) as running:
        running.start()
        yield running


def _produce(cluster: Any, topic: str, count: int) -> None:
    lines = "".join(f"value-{i}\n" for i in range(count))
    done = zkraft_stdin(
        "console-producer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", topic,
        "--request-required-acks", "all", stdin=lines,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def zkraft_stdin(*args: str, stdin: str) -> Any:
    import os
    import subprocess
    import sys

    from tests.test_reassign_tool import REPO_ROOT

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args], cwd=REPO_ROOT, env=env, input=stdin,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_healthy_rf3_topic_has_max_lag_zero(cluster: Any) -> None:
    from tests.helpers import wait_until

    cluster.create_topic("verified", partitions=1, replication_factor=3)
    cluster.create_topic("verified-too", partitions=2, replication_factor=3)
    _produce(cluster, "verified", 200)
    _produce(cluster, "verified-too", 50)

    def isr_full() -> bool:
        states = [cluster.partition_state("verified", 0)] + [cluster.partition_state("verified-too", p) for p in (0, 1)]
        return all(len(state.isr) == 3 for state in states)

    wait_until(isr_full, 30, message="ISRs did not fill")
    result = zkraft(
        "replica-verification", "--broker-list", cluster.bootstrap_servers, "--topic-white-list", "verified.*",
        "--time", "-2", "--report-interval-ms", "200", "--max-wait-ms", "100", "--time-limit-ms", "3000",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(rf"{DATE}: verification process is started\.", lines[0]), lines
    reports = [LAG_LINE.match(x) for x in lines[1:]]
    assert len(reports) >= 2 and all(reports), lines
    last = reports[-1]
    assert last is not None
    # Every partition verified to its end: lag 0 everywhere, so Kafka names the first partition it looked at
    # (verified-0), at the offset verified, which is its end: the 200 records produced.
    assert last.groups() == ("0", "verified-0", "200", "3"), lines
    assert not any("unmatched checksum" in x or "doesn't match" in x for x in lines)
    nothing = zkraft("replica-verification", "--broker-list", cluster.bootstrap_servers,
                     "--topic-white-list", "no-such-topic", "--time-limit-ms", "100")  # fmt: skip
    assert nothing.returncode == 1 and "No topics found." in nothing.stderr
