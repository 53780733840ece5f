"""Console producer/consumer and the perf tools: pure parts with fakes, then the real commands on a real cluster.

The unit part drives `run()` with fake producers and consumers (the SDK's call shapes) and
checks Kafka's output formats; the `integration` part starts `tests/kafka_harness.KafkaCluster`
(3 quorum nodes, 3 brokers) and runs `python3 -m zkraft ...` as users would.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from client.kafka.structs import TopicPartition
from client.kafka.types import ConsumerRecord
from zkraft.tools import console_consumer, console_producer, perf_test
from zkraft.tools.topics import ToolError, ToolUsageError

REPO_ROOT = Path(__file__).resolve().parent.parent
TOTAL_LINE = re.compile(
    r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg latency, "
    r"\d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def parse(configure: Callable[[argparse.ArgumentParser], None], *args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(args))


# ---------------------------------------------------------------- fakes


class FakeFuture:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def add_errback(self, fn: Callable[[BaseException], object]) -> FakeFuture:
        if self.error is not None:
            fn(self.error)
        return self

    def add_both(self, fn: Callable[[object], object]) -> FakeFuture:
        fn(self.error if self.error is not None else object())
        return self

    def get(self, timeout: float | None = None) -> object:
        if self.error is not None:
            raise self.error
        return object()


class FakeProducer:
    def __init__(self, fail_values: frozenset[bytes] = frozenset()) -> None:
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.fail_values = fail_values
        self.flushed = self.closed = False

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> FakeFuture:
        self.sent.append((topic, key, value))
        return FakeFuture(RuntimeError("broker said no") if value in self.fail_values else None)

    def flush(self) -> None:
        self.flushed = True

    def close(self) -> None:
        self.closed = True


def record(partition: int, offset: int, key: bytes | None, value: bytes | None, **kw: Any) -> ConsumerRecord:
    return ConsumerRecord(
        "t",
        partition,
        offset,
        kw.get("timestamp", 1000),
        kw.get("timestamp_type", 0),
        key,
        value,
        kw.get("headers", ()),
    )


class FakeConsumer:
    def __init__(self, records: list[ConsumerRecord], partitions: set[int] | None = None) -> None:
        self.pending = list(records)
        self.partitions = partitions if partitions is not None else {0, 1}
        self.assigned: list[TopicPartition] = []
        self.seeks: list[tuple[str, Any]] = []
        self.closed = False

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = list(tps)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self.seeks.append(("beginning", tps))

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self.seeks.append(("end", tps))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append(("offset", (tp, offset)))

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        n = min(2, max_records or 2)
        batch, self.pending = self.pending[:n], self.pending[n:]
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for r in batch:
            out.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        return out

    def close(self) -> None:
        self.closed = True


# ---------------------------------------------------------------- console producer


def test_producer_reads_lines_and_keys() -> None:
    options = parse(
        console_producer.configure_parser,
        "--bootstrap-server", "h:1", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
    )  # fmt: skip
    producer = FakeProducer()
    seen: dict[str, Any] = {}

    def factory(kwargs: dict[str, Any]) -> FakeProducer:
        seen.update(kwargs)
        return producer

    stdin = io.BytesIO(b"k1:v1\nk2:v:2\r\n:empty-key\n")
    assert console_producer.run(options, stdin=stdin, err=io.StringIO(), producer_factory=factory) == 0
    assert producer.sent == [("t", b"k1", b"v1"), ("t", b"k2", b"v:2"), ("t", b"", b"empty-key")]
    assert producer.flushed and producer.closed
    assert seen["acks"] == 1 and seen["linger_ms"] == 1000 and seen["bootstrap_servers"] == "h:1"


def test_producer_line_without_key_is_kafkas_error() -> None:
    options = parse(
        console_producer.configure_parser, "--bootstrap-server", "h:1", "--topic", "t", "--property", "parse.key=true"
    )
    with pytest.raises(ToolError, match=r"^No key found on line 2: no key here$"):
        console_producer.run(
            options, stdin=io.BytesIO(b"k\tv\nno key here\n"), producer_factory=lambda _: FakeProducer()
        )


def test_producer_reports_failed_sends_and_exits_nonzero() -> None:
    options = parse(console_producer.configure_parser, "--bootstrap-server", "h:1", "--topic", "t")
    err = io.StringIO()
    producer = FakeProducer(fail_values=frozenset({b"bad"}))
    with pytest.raises(ToolError, match=r"^1 of 3 records could not be sent to t$"):
        console_producer.run(options, stdin=io.BytesIO(b"a\nbad\nc\n"), err=err, producer_factory=lambda _: producer)
    assert err.getvalue() == (
        "ERROR Error when sending message to topic t with key: null, value: 3 bytes with error: broker said no\n"
    )


def test_producer_properties_map_to_sdk_keywords() -> None:
    warn = io.StringIO()
    kwargs = console_producer.producer_kwargs(
        {"acks": "all", "linger.ms": "7", "batch.size": "100", "compression.type": "none", "foo.bar": "1"}, warn
    )
    assert kwargs == {"acks": "all", "linger_ms": 7, "batch_size": 100, "compression_type": None}
    assert warn.getvalue() == "WARN The configuration 'foo.bar' was supplied but isn't a known config.\n"
    with pytest.raises(ToolError, match=r"^Invalid value soon for configuration linger.ms: Not a number of type LONG$"):
        console_producer.producer_kwargs({"linger.ms": "soon"})
    with pytest.raises(ToolUsageError, match="Invalid command line properties: nokey"):
        console_producer.parse_key_values(["nokey"], "--property")


# ---------------------------------------------------------------- console consumer


def test_formatter_is_kafkas_default_message_formatter() -> None:
    fmt = console_consumer.MessageFormat.from_properties(
        {"print.timestamp": "true", "print.partition": "true", "print.offset": "true", "print.key": "true"}
    )
    assert (
        console_consumer.format_record(record(1, 7, b"k", b"v"), fmt)
        == b"CreateTime:1000\tPartition:1\tOffset:7\tk\tv\n"
    )
    assert console_consumer.format_record(record(0, 0, None, None, timestamp_type=1), fmt) == (
        b"LogAppendTime:1000\tPartition:0\tOffset:0\tnull\tnull\n"
    )
    headers = console_consumer.MessageFormat.from_properties({"print.headers": "true", "key.separator": "|"})
    assert console_consumer.format_record(record(0, 0, None, b"v", headers=(("a", b"1"), ("b", None))), headers) == (
        b"a:1,b:null|v\n"
    )
    assert console_consumer.format_record(record(0, 0, None, b"v"), headers) == b"NO_HEADERS|v\n"
    plain = console_consumer.MessageFormat()
    assert console_consumer.format_record(record(0, 0, b"k", b"value"), plain) == b"value\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "t"], 'Missing required argument "[bootstrap-server]"'),
        (["--bootstrap-server", "h:1"], "Exactly one of whitelist/topic is required."),
        (["--bootstrap-server", "h:1", "--topic", "t", "--offset", "3"],
         "The partition is required when offset is specified."),
        (["--bootstrap-server", "h:1", "--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"],
         "Options from-beginning and offset cannot be specified together."),
        (["--bootstrap-server", "h:1", "--topic", "t", "--partition", "0", "--offset", "-1"],
         "The provided offset value '-1' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long."),
        (["--bootstrap-server", "nohost", "--topic", "t"], "--bootstrap-server: 'nohost' is not host:port"),
    ],
)  # fmt: skip
def test_consumer_option_checks(args: list[str], message: str) -> None:
    with pytest.raises(ToolUsageError) as raised:
        console_consumer.check_options(parse(console_consumer.configure_parser, *args))
    assert str(raised.value) == message


def test_consumer_prints_records_and_the_count() -> None:
    options = parse(
        console_consumer.configure_parser,
        "--bootstrap-server", "h:1", "--topic", "t", "--from-beginning", "--max-messages", "3",
        "--property", "print.key=true",
    )  # fmt: skip
    fake = FakeConsumer([record(0, i, b"k%d" % i, b"v%d" % i) for i in range(5)])
    out, err = io.BytesIO(), io.StringIO()
    assert console_consumer.run(options, out=out, err=err, consumer_factory=lambda *_: fake) == 0
    assert out.getvalue() == b"k0\tv0\nk1\tv1\nk2\tv2\n"
    assert err.getvalue() == "Processed a total of 3 messages\n"
    assert fake.assigned == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert fake.seeks == [("beginning", (TopicPartition("t", 0), TopicPartition("t", 1)))] and fake.closed


def test_consumer_partition_offset_and_timeout() -> None:
    options = parse(
        console_consumer.configure_parser,
        "--bootstrap-server", "h:1", "--topic", "t", "--partition", "1", "--offset", "4", "--timeout-ms", "50",
    )  # fmt: skip
    fake = FakeConsumer([record(1, 4, None, b"x")])
    out, err = io.BytesIO(), io.StringIO()
    assert console_consumer.run(options, out=out, err=err, consumer_factory=lambda *_: fake) == 0
    assert fake.assigned == [TopicPartition("t", 1)] and fake.seeks == [("offset", (TopicPartition("t", 1), 4))]
    assert out.getvalue() == b"x\n" and err.getvalue() == "Processed a total of 1 messages\n"


def test_consumer_missing_topic() -> None:
    options = parse(
        console_consumer.configure_parser, "--bootstrap-server", "h:1", "--topic", "t", "--timeout-ms", "20"
    )
    err = io.StringIO()
    assert (
        console_consumer.run(options, out=io.BytesIO(), err=err, consumer_factory=lambda *_: FakeConsumer([], set()))
        == 0
    )
    assert err.getvalue() == "Processed a total of 0 messages\n"
    with pytest.raises(ToolError, match=r"^Topic t not present in metadata after 50 ms\.$"):
        console_consumer.wait_for_partitions(FakeConsumer([], set()), "t", wait_s=0.05)


# ---------------------------------------------------------------- perf tools


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 0.0

    def __call__(self) -> float:
        return self.now_ms


def test_stats_lines_are_kafkas() -> None:
    clock, out = FakeClock(), io.StringIO()
    stats = perf_test.Stats(4, 5000, out, clock)
    for i, latency in enumerate((10, 20, 30, 40)):
        clock.now_ms = 1000.0 * (i + 1)
        stats.record(i, latency, 100, clock.now_ms)
    clock.now_ms = 6000.0
    stats.record(4, 50, 100, clock.now_ms)
    assert (
        out.getvalue() == "5 records sent, 0.8 records/sec (0.00 MB/sec), 30.0 ms avg latency, 50.0 ms max latency.\n"
    )
    clock.now_ms = 10_000.0
    assert stats.total_line() == (
        "5 records sent, 0.500000 records/sec (0.00 MB/sec), 30.00 ms avg latency, 50.00 ms max latency, "
        "30 ms 50th, 50 ms 95th, 50 ms 99th, 50 ms 99.9th."
    )


def test_percentiles_sampling_and_java_formats() -> None:
    assert perf_test.percentiles(list(range(1000)), (0.5, 0.95, 0.99, 0.999)) == [500, 950, 990, 999]
    assert perf_test.percentiles([], (0.5,)) == [0]
    assert perf_test.Stats(2_000_000, 5000, io.StringIO(), FakeClock()).sampling == 4
    assert perf_test.jfmt(perf_test.jdiv(1, 0), 2) == "Infinity" and perf_test.jfmt(perf_test.jdiv(0, 0), 4) == "NaN"
    assert perf_test.make_payload(50).isalpha() and len(perf_test.make_payload(50)) == 50


def test_throttler_waits_only_when_ahead() -> None:
    slept: list[float] = []
    throttler = perf_test.Throttler(100, start_s=0.0, sleep=slept.append)
    throttler.throttle(50, now_s=1.0)
    throttler.throttle(200, now_s=1.0)
    assert slept == [1.0]
    perf_test.Throttler(-1, 0.0, sleep=slept.append).throttle(10**6, 0.0)
    assert slept == [1.0]


def test_producer_perf_run_with_a_fake_producer() -> None:
    options = parse(
        perf_test.configure_parser,
        "--topic", "t", "--num-records", "1000", "--record-size", "10", "--throughput", "-1",
        "--producer-props", "acks=1", "linger.ms=5", "bootstrap.servers=h:1",
    )  # fmt: skip
    producer, out = FakeProducer(), io.StringIO()
    seen: dict[str, Any] = {}

    def factory(kwargs: dict[str, Any]) -> FakeProducer:
        seen.update(kwargs)
        return producer

    assert perf_test.run(options, out=out, producer_factory=factory) == 0
    match = TOTAL_LINE.match(out.getvalue().splitlines()[-1])
    assert match is not None and match.group(1) == "1000", out.getvalue()
    assert len(producer.sent) == 1000 and len({v for _, _, v in producer.sent}) == 1  # one payload, made once
    assert seen == {"acks": 1, "linger_ms": 5, "bootstrap_servers": "h:1", "client_id": "perf-producer-client"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "t", "--num-records", "1", "--throughput", "-1", "--producer-props", "bootstrap.servers=h:1"],
         "Either --record-size or --payload-file must be specified but not both."),
        (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1", "--producer-props", "acks"],
         "Invalid property: acks"),
        (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
          "--producer-props", "acks=1"],
         'Missing required configuration "bootstrap.servers" which has no default value.'),
        (["--num-records", "1", "--record-size", "1", "--throughput", "-1"], "argument --topic is required"),
    ],
)  # fmt: skip
def test_producer_perf_option_checks(args: list[str], message: str) -> None:
    with pytest.raises(ToolUsageError) as raised:
        perf_test.run(parse(perf_test.configure_parser, *args), producer_factory=lambda _: FakeProducer())
    assert str(raised.value) == message


def test_consumer_perf_row() -> None:
    row = perf_test.consumer_row(0.0, 2000.0, 2 * 1024 * 1024, 1000, 500, "yyyy")
    assert row.split(", ")[2:] == ["2.0000", "1.0000", "1000", "500.0000", "500", "1500", "1.3333", "666.6667"]
    assert perf_test.CONSUMER_HEADER.startswith("start.time, end.time, data.consumed.in.MB, MB.sec")


def test_consumer_perf_run_with_a_fake_consumer() -> None:
    options = parse(perf_test.configure_consumer_parser, "--bootstrap-server", "h:1", "--topic", "t", "--messages", "3")
    fake = FakeConsumer([record(0, i, b"k", b"vvv") for i in range(4)])
    out = io.StringIO()
    assert perf_test.run_consumer(options, out=out, consumer_factory=lambda *_: fake) == 0
    header, row = out.getvalue().splitlines()
    assert header == perf_test.CONSUMER_HEADER
    fields = row.split(", ")
    assert len(fields) == 10 and fields[4] == "3" and fields[2] == "0.0000"


def test_consumer_perf_times_out_with_kafkas_warning() -> None:
    options = parse(
        perf_test.configure_consumer_parser, "--bootstrap-server", "h:1", "--topic", "t", "--messages", "5",
        "--timeout", "20", "--hide-header",
    )  # fmt: skip
    out = io.StringIO()
    assert (
        perf_test.run_consumer(options, out=out, consumer_factory=lambda *_: FakeConsumer([record(0, 0, None, b"x")]))
        == 0
    )
    warning, row = out.getvalue().splitlines()
    assert warning == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (20 ms) exceeded. "
        "You can use the --timeout option to increase the timeout."
    )
    assert row.split(", ")[4] == "1"


def test_progress_is_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    progress = perf_test.Progress(10, "records", stream=stream, enabled=False)
    progress.update(5, force=True)
    progress.clear()
    assert stream.getvalue() == ""
    shown = perf_test.Progress(10, "records", stream=stream, enabled=True)
    shown.update(5, force=True)
    shown.clear()
    assert "5/10 records" in stream.getvalue() and stream.getvalue().endswith("\r\x1b[K")


# ---------------------------------------------------------------- the commands


def zkraft(*args: str, stdin: str | None = None, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    env.pop("ZKRAFT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=env,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_usage_errors_are_one_line_without_a_cluster() -> None:
    result = zkraft("console-consumer", "--bootstrap-server", "h:1", "--topic", "t", "--offset", "3")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "zkraft: error: The partition is required when offset is specified.\n"
    result = zkraft("producer-perf-test", "--topic", "t", "--num-records", "1", "--throughput", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == "zkraft: error: Either --record-size or --payload-file must be specified but not both.\n"


def _harness_available() -> bool:
    return (REPO_ROOT / "tests" / "kafka_harness.py").exists() and (REPO_ROOT / "broker" / "server.py").exists()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("console-tools"), brokers=3) as running:
        running.start()
        yield running


needs_cluster = pytest.mark.skipif(
    not _harness_available(), reason="the broker and tests/kafka_harness.py are not there yet"
)


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_topics_through_the_admin_api(cluster: Any) -> None:
    bootstrap = ["topics", "--bootstrap-server", cluster.bootstrap_servers]
    created = zkraft(*bootstrap, "--create", "--topic", "admin-made", "--partitions", "2", "--replication-factor", "3")
    assert (created.returncode, created.stdout) == (0, "Created topic admin-made.\n"), created.stderr
    cluster.wait_leaders("admin-made", 2)
    assert "admin-made" in zkraft(*bootstrap, "--list").stdout.splitlines()
    described = zkraft(*bootstrap, "--describe", "--topic", "admin-made").stdout.splitlines()
    assert described[0] == "Topic: admin-made\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: "
    assert [line.split("\t")[2] for line in described[1:]] == ["Partition: 0", "Partition: 1"]
    assert all("Leader: none" not in line for line in described[1:])
    exists = zkraft(*bootstrap, "--create", "--topic", "admin-made", "--partitions", "1", "--replication-factor", "1")
    assert exists.returncode == 1 and exists.stderr.startswith("zkraft: error: ") and "already exists" in exists.stderr
    assert zkraft(*bootstrap, "--alter", "--topic", "admin-made", "--partitions", "3").returncode == 0
    cluster.wait_leaders("admin-made", 3)
    assert sorted(cluster.assignment("admin-made")) == [0, 1, 2]
    too_big = zkraft(*bootstrap, "--create", "--topic", "rf4", "--partitions", "1", "--replication-factor", "4")
    assert too_big.returncode == 1 and "Replication factor: 4 larger than available brokers: 3." in too_big.stderr


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_console_producer_then_consumer(cluster: Any) -> None:
    cluster.create_topic("console", partitions=2, replication_factor=2)
    lines = "".join(f"key{i}:value{i}\n" for i in range(20))
    produced = zkraft(
        "console-producer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "console",
        "--property", "parse.key=true", "--property", "key.separator=:", "--request-required-acks", "all",
        stdin=lines,
    )  # fmt: skip
    assert (produced.returncode, produced.stdout, produced.stderr) == (0, "", "")
    consumed = zkraft(
        "console-consumer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "console",
        "--from-beginning", "--max-messages", "20",
        "--property", "print.key=true", "--property", "print.partition=true",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stderr == "Processed a total of 20 messages\n"
    rows = [line.split("\t") for line in consumed.stdout.splitlines()]
    assert sorted((key, value) for _p, key, value in rows) == sorted((f"key{i}", f"value{i}") for i in range(20))
    partition_of = {key: p for p, key, _v in rows}
    assert all(partition_of[f"key{i}"] in ("Partition:0", "Partition:1") for i in range(20))
    # One partition from an offset, stopping when nothing more comes.
    first = zkraft(
        "console-consumer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "console",
        "--partition", "0", "--offset", "1", "--timeout-ms", "3000",
    )  # fmt: skip
    in_partition_0 = sum(1 for p, _k, _v in rows if p == "Partition:0")
    assert first.returncode == 0 and first.stderr == f"Processed a total of {max(0, in_partition_0 - 1)} messages\n"


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_perf_tools(cluster: Any) -> None:
    cluster.create_topic("perf", partitions=3, replication_factor=3)
    produced = zkraft(
        "producer-perf-test", "--topic", "perf", "--num-records", "3000", "--record-size", "100", "--throughput", "-1",
        "--producer-props", "acks=all", "linger.ms=5", f"bootstrap.servers={cluster.bootstrap_servers}",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    last = produced.stdout.splitlines()[-1]
    match = TOTAL_LINE.match(last)
    assert match is not None and match.group(1) == "3000", produced.stdout
    assert produced.stderr == ""  # no progress display when piped
    consumed = zkraft(
        "consumer-perf-test", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "perf", "--messages", "3000"
    )
    assert consumed.returncode == 0, consumed.stderr
    header, row = consumed.stdout.splitlines()
    assert header == perf_test.CONSUMER_HEADER
    fields = row.split(", ")
    assert fields[4] == "3000" and float(fields[2]) == pytest.approx(3000 * 100 / 1024 / 1024, rel=1e-3)
