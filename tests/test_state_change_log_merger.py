"""`zkraft state-change-log-merger`: the partition and date parsing, filters and the n-way merge (pure),
then the command on the brokers' real state-change.log files."""

from __future__ import annotations

import argparse
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_reassign_tool import needs_cluster, zkraft
from zkraft.tools import state_change_log_merger as merger
from zkraft.tools.topics import ToolError, ToolUsageError

LINE_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\] [A-Z]+ .* \(state\.change\.logger\)$")


def namespace(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    merger.configure_parser(parser)
    return parser.parse_args(list(args))


def line(date: str, text: str, level: str = "INFO") -> str:
    return f"[2026-11-21 {date}] {level} {text} (state.change.logger)"


def test_partition_of_a_line_old_and_new_spellings() -> None:
    assert merger.line_partition("Controller 1 epoch 2 changed partition [foo,0] state") == ("foo", 0)
    assert merger.line_partition("[Broker id=1] ... partition [foo, 12] ...") == ("foo", 12)
    assert merger.line_partition(
        "[Controller id=1 epoch=3] Changed partition my.topic-3 from NewPartition to OnlinePartition"
    ) == ("my.topic", 3)
    assert merger.line_partition("[Broker id=2] Follower a-b-7 starts at leader epoch 0") == ("a-b", 7)
    assert (
        merger.line_partition("[Controller id=1 epoch=3] Sending UpdateMetadata request to brokers Set(1, 2)") is None
    )
    # The date and the id=1 prefix are not partitions.
    assert merger.line_partition(line("10:00:00,000", "[Controller id=1 epoch=3] Started")) is None


def test_filters() -> None:
    options = merger.MergeOptions(files=(), topic="t", partitions=frozenset({1}))
    assert merger.keep(line("10:00:00,000", "Changed partition t-1 from A to B"), options)
    assert not merger.keep(line("10:00:00,000", "Changed partition t-0 from A to B"), options)
    assert not merger.keep(line("10:00:00,000", "Changed partition u-1 from A to B"), options)
    assert not merger.keep(line("10:00:00,000", "no partition here"), options)
    assert not merger.keep("Changed partition t-1 without a date", options)
    everything = merger.MergeOptions(files=())
    assert merger.keep(line("10:00:00,000", "no partition here"), everything)
    window = merger.MergeOptions(files=(), start_time="2026-11-21 10:00:00,000", end_time="2026-11-21 10:00:01,000")
    assert merger.keep(line("10:00:00,000", "x"), window) and merger.keep(line("10:00:01,000", "x"), window)
    assert not merger.keep(line("10:00:01,001", "x"), window)
    assert not merger.keep(line("09:59:59,999", "x"), window)


def test_merge_orders_by_time_and_keeps_continuation_lines() -> None:
    broker1 = [
        line("10:00:00,100", "Changed partition t-0 from NewPartition to OnlinePartition"),
        line("10:00:00,300", "failed to change state for partition t-1", "ERROR"),
        "java.lang.IllegalStateException: boom",
        "\tat kafka.controller.X(X.scala:1)",
        line("10:00:00,500", "Changed partition t-1 from A to B"),
    ]
    broker2 = [
        "a stray line before any date",
        line("10:00:00,200", "[Broker id=2] Follower t-0 starts at leader epoch 0"),
        line("10:00:00,300", "[Broker id=2] Leader t-1 starts at leader epoch 0"),
        line("10:00:00,400", "[Broker id=2] Follower t-0 starts at leader epoch 1"),
    ]
    options = merger.MergeOptions(files=())
    merged = list(merger.merge([iter(broker1), iter(broker2)], options))
    assert merged == [
        broker1[0], broker2[1], broker1[1], broker1[2], broker1[3], broker2[2], broker2[3], broker1[4]
    ]  # fmt: skip
    only_t1 = merger.MergeOptions(files=(), topic="t", partitions=frozenset({1}))
    assert list(merger.merge([iter(broker1), iter(broker2)], only_t1)) == [
        broker1[1], broker1[2], broker1[3], broker2[2], broker1[4]
    ]  # fmt: skip


def test_argument_checks(tmp_path: Path) -> None:
    with pytest.raises(ToolUsageError, match='exactly one of the two options "\\[logs\\]" or "\\[logs-regex\\]"'):
        merger.options_from_namespace(namespace())
    with pytest.raises(ToolUsageError, match="exactly one of the two options"):
        merger.options_from_namespace(namespace("--logs", "a", "--logs-regex", "b"))
    with pytest.raises(
        ToolUsageError, match='"\\[topic\\]" needs to be provided an argument when specifying partition'
    ):
        merger.options_from_namespace(namespace("--logs", "a", "--partitions", "0"))
    with pytest.raises(ToolUsageError, match='Unparseable date: "yesterday"'):
        merger.options_from_namespace(namespace("--logs", "a", "--start-time", "yesterday"))
    with pytest.raises(ToolUsageError, match='For input string: "x"'):
        merger.options_from_namespace(namespace("--logs", "a", "--topic", "t", "--partitions", "0,x"))
    with pytest.raises(ToolError, match="no such file"):
        merger.options_from_namespace(namespace("--logs", str(tmp_path / "missing.log")))
    (tmp_path / "state-change.log").write_text("", encoding="utf-8")
    (tmp_path / "state-change.log.1").write_text("", encoding="utf-8")
    (tmp_path / "server.log").write_text("", encoding="utf-8")
    options = merger.options_from_namespace(namespace("--logs-regex", f"{tmp_path}/state-change.log*"))
    assert [p.name for p in options.files] == ["state-change.log", "state-change.log.1"]
    with pytest.raises(ToolError, match="no file in .* matches nothing-here"):
        merger.options_from_namespace(namespace("--logs-regex", f"{tmp_path}/nothing-here"))


def test_run_on_files(tmp_path: Path) -> None:
    first, second = tmp_path / "b1.log", tmp_path / "b2.log"
    first.write_text(line("10:00:00,300", "t-0 third") + "\n" + line("10:00:00,100", "t-0 first") + "\n")
    second.write_text(line("10:00:00,200", "t-0 second") + "\n")
    out = io.StringIO()
    assert merger.run(namespace("--logs", f"{first},{second}"), out) == 0
    # Each file is taken in its own order (as Kafka's merge does); across files the earlier head goes first.
    assert [text.split("] INFO ")[1] for text in out.getvalue().splitlines()] == [
        "t-0 second (state.change.logger)",
        "t-0 third (state.change.logger)",
        "t-0 first (state.change.logger)",
    ]


def test_bad_arguments_are_one_line() -> None:
    result = zkraft("state-change-log-merger", "--topic", "t")
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith('zkraft: error: Provide arguments to exactly one of the two options "[logs]"')
    missing = zkraft("state-change-log-merger", "--logs", "/nonexistent/state-change.log")
    assert (missing.returncode, missing.stderr) == (1, "zkraft: error: /nonexistent/state-change.log: no such file\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.kafka_harness import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("merger-tool"), brokers=3) as running:
        running.start()
        yield running


@pytest.mark.integration
@pytest.mark.timeout(300)
@needs_cluster
def test_merge_the_brokers_state_change_logs(cluster: Any, tmp_path: Path) -> None:
    from tests.helpers import wait_until

    cluster.create_topic("merged", partitions=2, replication_factor=3)
    cluster.create_topic("other", partitions=1, replication_factor=2)
    logs = [cluster.data_dir(b) / "state-change.log" for b in cluster.broker_ids]

    def every_broker_logged_both_partitions() -> bool:
        texts = [p.read_text(encoding="utf-8") if p.exists() else "" for p in logs]
        return all("merged-0 " in t and "merged-1 " in t for t in texts)

    wait_until(every_broker_logged_both_partitions, 30, message="brokers did not log the LeaderAndIsr of merged")
    # Copies, so that the files do not grow between the merge and the check.
    copies = []
    for broker, path in zip(cluster.broker_ids, logs, strict=True):
        copies.append(tmp_path / f"broker-{broker}-state-change.log")
        copies[-1].write_bytes(path.read_bytes())
    result = zkraft("state-change-log-merger", "--logs", ",".join(map(str, copies)))
    assert result.returncode == 0, result.stderr
    merged = result.stdout.splitlines()
    source_lines = [x for p in copies for x in p.read_text(encoding="utf-8").splitlines()]
    assert sorted(merged) == sorted(source_lines)
    assert all(LINE_RE.match(x) for x in merged), merged[:3]
    dates = [LINE_RE.match(x).group(1) for x in merged]  # type: ignore[union-attr]
    assert dates == sorted(dates)  # each broker writes in time order, so the merge is sorted

    regex = zkraft("state-change-log-merger", "--logs-regex", f"{tmp_path}/broker-[12]-state-change.log")
    assert regex.returncode == 0, regex.stderr
    assert sorted(regex.stdout.splitlines()) == sorted(x for p in copies[:2] for x in p.read_text().splitlines())
    direct = zkraft(
        "state-change-log-merger", "--logs", ",".join(map(str, copies)), "--topic", "merged", "--partitions", "1"
    )
    assert direct.returncode == 0, direct.stderr
    kept = direct.stdout.splitlines()
    assert kept and all(merger.line_partition(x) == ("merged", 1) for x in kept)
    # Both the controller's lines and every broker's LeaderAndIsr handling are there.
    assert any("[Controller id=" in x and "Changed partition merged-1" in x for x in kept)
    assert {re.search(r"\[Broker id=(\d)\]", x).group(1) for x in kept if "[Broker id=" in x} == {"1", "2", "3"}  # type: ignore[union-attr]
    window = zkraft("state-change-log-merger", "--logs", ",".join(map(str, copies)),
                    "--start-time", dates[-1], "--end-time", dates[-1])  # fmt: skip
    assert (
        window.returncode == 0
        and window.stdout.splitlines()
        and all(dates[-1] in x for x in window.stdout.splitlines())
    )
