"""One bad request cannot take a broker down: each refusal as a user sees it, through the SDK, the CLI and the wire.

A real quorum and one broker (tests/kafka_harness.py) with small limits, so that
the bounds are reached quickly: `socket.request.max.bytes` and
`queued.max.request.bytes` of 8 MiB, `fetch.max.wait.ms.max` of 1 s. After each
refusal the broker is alive and still answers; the test reads its resident
memory from /proc.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from client import Admin, NewPartitions, NewTopic
from client.kafka.errors import (
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidReplicaAssignmentError,
)
from client.kafka.records import RecordBatchBuilder
from tests.helpers import resident_bytes, wait_until
from tests.kafka_harness import KafkaCluster
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUEST_BYTES_MAX = 8 * 1024 * 1024
FETCH_WAIT_MS_MAX = 1000
# A broker at rest is about 50 MB; a billion partitions once took it to 24 GB.
RSS_BYTES_MAX = 250 * 1024 * 1024
TOPIC = "bounded"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    properties = {
        "socket.request.max.bytes": str(REQUEST_BYTES_MAX),
        "queued.max.request.bytes": str(REQUEST_BYTES_MAX),
        "fetch.max.wait.ms.max": str(FETCH_WAIT_MS_MAX),
    }
    with KafkaCluster(tmp_path_factory.mktemp("bounds"), brokers=1, broker_properties=properties) as kafka:
        kafka.start()
        kafka.create_topic(TOPIC, partitions=PARTITIONS)
        yield kafka


@pytest.fixture(scope="module")
def admin(cluster: KafkaCluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap_servers) as client:
        yield client


@pytest.fixture(scope="module")
def stub(cluster: KafkaCluster) -> Iterator[broker_pb2_grpc.BrokerStub]:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(cluster.broker_address(1), options=options) as channel:
        yield broker_pb2_grpc.BrokerStub(channel)


def zkraft(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def assert_one_error_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("zkraft: error: ")
    for fragment in fragments:
        assert fragment in line, line


def batch(records: int = 10, value_bytes: int = 100) -> bytes:
    builder = RecordBatchBuilder()
    for _ in range(records):
        builder.append(None, b"v" * value_bytes)
    return builder.build()


def produce_request(records: bytes, partition: int = 0, topic: str = TOPIC) -> pb.ProduceRequest:
    data = pb.PartitionProduceData(index=partition, records=records)
    return pb.ProduceRequest(acks=1, timeout_ms=10000, topics=[pb.TopicProduceData(name=topic, partitions=[data])])


def every_partition_request(records: bytes) -> pb.ProduceRequest:
    data = [pb.PartitionProduceData(index=p, records=records) for p in range(PARTITIONS)]
    return pb.ProduceRequest(acks=1, timeout_ms=10000, topics=[pb.TopicProduceData(name=TOPIC, partitions=data)])


def assert_broker_serves(cluster: KafkaCluster, stub: broker_pb2_grpc.BrokerStub) -> None:
    cluster.assert_alive(1)
    (result,) = stub.Produce(produce_request(batch()), timeout=30).responses[0].partitions
    assert result.error_code == 0 and result.base_offset >= 0
    assert resident_bytes(cluster._procs[1].pid) < RSS_BYTES_MAX


# ---------------------------------------------------------------- CreateTopics / CreatePartitions


def test_a_billion_partitions_are_refused_through_the_sdk_and_the_cli(
    cluster: KafkaCluster, admin: Admin, stub: broker_pb2_grpc.BrokerStub
) -> None:
    with pytest.raises(InvalidPartitionsError, match=r"huge: Number of partitions: 1000000000 .*jute.maxbuffer"):
        admin.create_topics([NewTopic("huge", 1_000_000_000, 1)])
    for where in (["--bootstrap-server", cluster.bootstrap_servers], ["--zookeeper", cluster.zookeeper]):
        result = zkraft("topics", *where, "--create", "--topic", "huge", "--partitions", "1000000000",
                        "--replication-factor", "1")  # fmt: skip
        assert_one_error_line(result, "Number of partitions: 1000000000", "jute.maxbuffer (1048575 bytes)")
    assert "huge" not in admin.list_topics()
    assert_broker_serves(cluster, stub)


def test_an_assignment_naming_an_unregistered_broker_is_refused(
    cluster: KafkaCluster, admin: Admin, stub: broker_pb2_grpc.BrokerStub
) -> None:
    message = "The manual partition assignment includes broker 999, but no such broker is registered."
    with pytest.raises(InvalidReplicaAssignmentError, match=f"ghost: {message}"):
        admin.create_topics([NewTopic("ghost", replica_assignments={0: [1, 999]})])
    result = zkraft("topics", "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", "ghost",
                    "--replica-assignment", "1:999")  # fmt: skip
    assert_one_error_line(result, message)
    with pytest.raises(InvalidReplicaAssignmentError, match=message):
        admin.create_partitions({TOPIC: NewPartitions(PARTITIONS + 1, [[999]])})
    assert "ghost" not in admin.list_topics()
    assert_broker_serves(cluster, stub)


def test_adding_too_many_partitions_is_refused(
    cluster: KafkaCluster, admin: Admin, stub: broker_pb2_grpc.BrokerStub
) -> None:
    with pytest.raises(InvalidPartitionsError, match=r"Number of partitions: 2147483647 .*jute.maxbuffer"):
        admin.create_partitions({TOPIC: NewPartitions(2**31 - 1)})
    result = zkraft("topics", "--bootstrap-server", cluster.bootstrap_servers, "--alter", "--topic", TOPIC,
                    "--partitions", "2147483647")  # fmt: skip
    assert_one_error_line(result, "jute.maxbuffer")
    assert cluster.assignment(TOPIC) == {p: (1,) for p in range(PARTITIONS)}
    assert_broker_serves(cluster, stub)


# ---------------------------------------------------------------- Produce / Fetch


def test_an_empty_produce_is_refused_without_an_offset(cluster: KafkaCluster, stub: broker_pb2_grpc.BrokerStub) -> None:
    def log_end() -> int:
        request = pb.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                pb.ListOffsetsTopic(name=TOPIC, partitions=[pb.ListOffsetsPartition(partition_index=1, timestamp=-1)])
            ],
        )
        return stub.ListOffsets(request, timeout=30).topics[0].partitions[0].offset

    before = log_end()
    (result,) = stub.Produce(produce_request(b"", partition=1), timeout=30).responses[0].partitions
    assert result.error_code == InvalidRecordError.code
    assert result.error_message == "Produce requests with version 3 and above must have at least one record batch"
    assert result.base_offset == -1
    assert log_end() == before


def test_a_fetch_waits_no_longer_than_the_broker_allows(
    cluster: KafkaCluster, stub: broker_pb2_grpc.BrokerStub
) -> None:
    """max_wait_ms near 2^31 and min_bytes that never come: the answer comes after fetch.max.wait.ms.max."""
    partition = pb.FetchPartition(partition=2, current_leader_epoch=-1, fetch_offset=0, partition_max_bytes=-1)
    request = pb.FetchRequest(
        replica_id=-1, max_wait_ms=2**31 - 1, min_bytes=2**31 - 1, max_bytes=-1,
        topics=[pb.FetchTopic(topic=TOPIC, partitions=[partition])],
    )  # fmt: skip
    started = time.monotonic()
    (answer,) = stub.Fetch(request, timeout=60).responses[0].partitions
    elapsed_s = time.monotonic() - started
    assert answer.error_code == 0, answer
    assert FETCH_WAIT_MS_MAX / 1000 * 0.9 <= elapsed_s < FETCH_WAIT_MS_MAX / 1000 + 5


# ---------------------------------------------------------------- bytes in flight


def test_a_request_over_socket_request_max_bytes_is_refused(
    cluster: KafkaCluster, stub: broker_pb2_grpc.BrokerStub
) -> None:
    oversized = produce_request(b"x" * (REQUEST_BYTES_MAX + 1024))
    with pytest.raises(grpc.RpcError) as refused:
        stub.Produce(oversized, timeout=30)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(REQUEST_BYTES_MAX) in (refused.value.details() or "")
    assert_broker_serves(cluster, stub)


def test_a_burst_of_large_requests_is_served_and_its_memory_goes_back(
    cluster: KafkaCluster, stub: broker_pb2_grpc.BrokerStub
) -> None:
    """Six requests of 3 MiB at once (a batch of 1 MiB, message.max.bytes, per partition) against a budget of
    8 MiB, each acknowledged; then the broker logs that it handed the burst's memory back."""
    large = every_partition_request(batch(records=1, value_bytes=1024 * 1024 - 200))
    released_before = len(cluster.log_events(1, "request_burst_memory_released"))
    results: list[int] = []
    errors: list[BaseException] = []

    def send() -> None:
        try:
            results.extend(p.error_code for p in stub.Produce(large, timeout=60).responses[0].partitions)
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and results == [0] * 6 * PARTITIONS
    wait_until(
        lambda: len(cluster.log_events(1, "request_burst_memory_released")) > released_before,
        30,
        interval_s=0.1,
        message="the broker did not hand the burst's memory back",
    )
    (event,) = cluster.log_events(1, "request_burst_memory_released")[released_before:][:1]
    assert event["burst_bytes"] >= 6 * PARTITIONS * 1024 * 1024 * 0.99
    assert event["peak_in_flight_bytes"] <= REQUEST_BYTES_MAX  # never more than the budget at once
    assert_broker_serves(cluster, stub)
