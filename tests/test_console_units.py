"""The console's pure pieces (forms, rates, charts, znode and message rendering, login) and its place in
`zkraft up` and the CLI; the pages themselves are tested in a real browser (test_console_browser.py)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.kafka.errors import UnknownTopicOrPartitionError
from client.kafka.scram import encode_credential, make_credential
from tests.helpers import wait_until
from zkraft import up as up_module
from zkraft.console import charts, forms, login, message_pages, rates, znode_pages
from zkraft.console.app import plain_error

REPO_ROOT = Path(__file__).resolve().parent.parent

METRICS_TEXT = """\
# TYPE kafka_server_brokertopicmetrics_messagesin counter
kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 30.0
kafka_server_brokertopicmetrics_messagesin_total 30.0
# TYPE kafka_server_brokertopicmetrics_bytesout counter
kafka_server_brokertopicmetrics_bytesout_total{topic="t"} 900.0
kafka_server_brokertopicmetrics_bytesout_total 900.0
# TYPE kafka_log_log_size gauge
kafka_log_log_size{partition="0",topic="t"} 100.0
"""


def test_config_lines_and_numbers_name_the_bad_field() -> None:
    assert forms.config_lines("# c\nretention.ms = 1000\n\ncleanup.policy=compact") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    with pytest.raises(forms.ConsoleInputError, match="configs line 2: 'oops' is not key=value"):
        forms.config_lines("a=1\noops")
    with pytest.raises(forms.ConsoleInputError, match="Partitions must be a whole number, got 'x'"):
        forms.int_field({"p": "x"}, "p", "Partitions")
    with pytest.raises(forms.ConsoleInputError, match="Partitions must be at least 1, got 0"):
        forms.int_field({"p": "0"}, "p", "Partitions", minimum=1)
    assert forms.int_field({}, "p", "Partitions", default=3) == 3
    with pytest.raises(forms.ConsoleInputError, match="Broker list: 'x' is not a broker id"):
        forms.broker_ids("1,x", "Broker list")


def test_rates_sum_the_brokers_and_a_restarted_counter_counts_from_zero() -> None:
    counters: dict[tuple[str, str], float] = {}
    sizes: dict[tuple[str, int], float] = {}
    for _broker in range(2):  # the same text from two brokers: counters add up, a partition's size is its largest
        rates.parse_metrics(METRICS_TEXT, counters, sizes)
    assert counters[("messagesin", "")] == 60.0 and counters[("messagesin", "t")] == 60.0
    assert sizes == {("t", 0): 100.0}
    old = rates.Scrape(10.0, 1000.0, {("messagesin", ""): 60.0, ("bytesout", ""): 100.0})
    new = rates.Scrape(15.0, 1005.0, {("messagesin", ""): 110.0, ("bytesout", ""): 20.0})
    assert rates.rates_between(old, new) == rates.Rates(10.0, 0.0, 4.0)


def test_a_chart_is_an_svg_polyline_and_waits_for_two_samples() -> None:
    waiting = charts.svg_line_chart(charts.Series("Produce", "messages/s", [(0.0, 1.0)]))
    assert "collecting samples" in waiting
    history = [rates.Scrape(float(t), 1000.0 + t, {("messagesin", ""): 10.0 * t}) for t in range(4)]
    produce, _bytes_in, _fetch = charts.rate_series(history)
    assert [value for _, value in produce.points] == [10.0, 10.0, 10.0]
    svg = charts.svg_line_chart(produce)
    assert svg.count("<polyline") == 1 and 'aria-label="Produce, messages/s"' in svg
    assert "<b>" not in charts.svg_line_chart(charts.Series("<b>", "x", []))


def test_znode_data_is_pretty_json_else_text_else_hex() -> None:
    assert znode_pages.render_data(b'{"b":1,"a":[1]}') == ('{\n  "a": [\n    1\n  ],\n  "b": 1\n}', "json", False)
    assert znode_pages.render_data(b"plain") == ("plain", "text", False)
    assert znode_pages.render_data(b"\xff\x00") == ("ff 00", "hex", False)
    assert znode_pages.render_data(b"") == ("", "empty", False)
    assert znode_pages.normalized_path("/brokers/ids/") == "/brokers/ids"
    for bad in ("brokers", "/a//b", "/a/../b"):
        with pytest.raises(forms.ConsoleInputError):
            znode_pages.normalized_path(bad)


def test_message_values_render_as_text_json_or_hex_and_timestamps_parse() -> None:
    assert message_pages.render_bytes(b'{"k": 1}', "json") == '{\n  "k": 1\n}'
    assert message_pages.render_bytes(b"not json", "json") == "not json"
    assert message_pages.render_bytes(b"\x01\x02", "hex") == "01 02"
    assert message_pages.render_bytes(None, "text") == "null"
    assert message_pages.parse_timestamp_ms("1700000000000") == 1700000000000
    assert message_pages.parse_timestamp_ms("2023-11-14T22:13:20") == 1700000000000
    with pytest.raises(forms.ConsoleInputError, match="Timestamp must be epoch milliseconds"):
        message_pages.parse_timestamp_ms("yesterday")
    with pytest.raises(forms.ConsoleInputError, match="mode must be one of latest, offset, timestamp"):
        message_pages.browse_query({"mode": "oldest"})
    query = message_pages.browse_query({"mode": "offset", "offset": "5", "partition": "all", "limit": "9999"})
    assert (query.partition, query.offset, query.limit) == (None, 5, message_pages.LIMIT_MAX)


def test_a_kafka_error_with_only_its_context_gets_the_codes_meaning() -> None:
    assert plain_error(UnknownTopicOrPartitionError("describe topic t")) == (
        "describe topic t: This server does not host this topic-partition."
    )
    assert plain_error(UnknownTopicOrPartitionError("topic t: gone")) == "topic t: gone"


def test_login_checks_the_scram_stored_key_and_signs_its_cookie() -> None:
    config = {"SCRAM-SHA-512": encode_credential(make_credential("SCRAM-SHA-512", "s3cret"))}
    assert login.scram_password_matches(config, "s3cret")
    assert not login.scram_password_matches(config, "wrong")
    assert not login.scram_password_matches({}, "s3cret")
    gate = login.LoginGate(lambda user, password: False, secret=b"k" * 32)
    cookie = gate.cookie_for("alice|x", now_s=1000.0)
    assert gate.user_of(cookie, now_s=1001.0) == "alice|x"
    assert gate.user_of(cookie, now_s=1000.0 + login.SESSION_S + 1) is None  # expired
    assert gate.user_of(cookie.replace("alice", "mallory"), now_s=1001.0) is None  # tampered
    assert login.LoginGate(lambda u, p: False).user_of(cookie, now_s=1001.0) is None  # another console's secret


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _open(url: str, data: bytes | None = None, cookie: str = "", origin: str = "") -> tuple[int, dict[str, str], str]:
    headers = {"Cookie": cookie} if cookie else {}
    if origin:
        headers["Origin"] = origin
    request = urllib.request.Request(url, data=data, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


@contextlib.contextmanager
def _serving(app: object) -> Iterator[str]:
    import uvicorn

    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 10.0, message="uvicorn did not start")
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)
        listener.close()


def test_with_a_login_every_page_asks_for_it_and_a_good_password_opens_them() -> None:
    from zkraft.console.app import ConsoleState, build_app
    from zkraft.console.clients import ConsoleClients, ConsoleTargets

    gate = login.LoginGate(lambda user, password: (user, password) == ("alice", "s3cret"))
    clients = ConsoleClients(ConsoleTargets("127.0.0.1:1", None, ()))
    with _serving(build_app(ConsoleState(clients, None, gate))) as url:
        status, headers, _ = _open(f"{url}/charts")
        assert (status, headers["location"]) == (303, "/login?next=%2Fcharts")
        status, _, body = _open(f"{url}/login", b"user=alice&password=nope&next=/charts")
        assert status == 401 and "Wrong user or password" in body
        status, headers, _ = _open(f"{url}/login", b"user=alice&password=s3cret&next=/charts")
        assert (status, headers["location"]) == (303, "/charts")
        cookie = headers["set-cookie"].split(";", 1)[0]
        status, _, body = _open(f"{url}/charts", cookie=cookie)
        assert status == 200 and "alice" in body and "Produce and fetch rates" in body
        # A form another site's page posts (CSRF) is refused, logged in or not.
        status, _, body = _open(f"{url}/login", b"user=alice&password=s3cret", origin="http://evil.example")
        assert status == 403 and "another site" in body


def test_up_plans_a_console_on_a_free_port_records_its_url_and_keeps_it(tmp_path: Path) -> None:
    plan = up_module.plan(tmp_path, brokers=1, base_port=17001, broker_base_port=19192, kafka_base_port=29092)
    planned = up_module.with_console(plan, 28080, None)
    assert planned.console is not None and planned.console.url == "http://127.0.0.1:28080/"
    cmd = planned.console.cmd
    assert cmd[cmd.index("--bootstrap-server") + 1] == "127.0.0.1:29092"
    assert cmd[cmd.index("--zookeeper") + 1] == planned.zookeeper_connect
    assert cmd[cmd.index("--metrics-server") + 1] == "127.0.0.1:20192"
    assert "--require-login" not in cmd
    up_module.write_cluster_file(planned, {})
    document = json.loads((tmp_path / "cluster.json").read_text(encoding="utf-8"))
    assert document["console_url"] == "http://127.0.0.1:28080/"
    recorded = up_module._read_cluster_file(tmp_path / "cluster.json")
    again = up_module.with_console(up_module.plan(tmp_path, 1, None, None), None, recorded)
    assert again.console is not None and again.console.address == "127.0.0.1:28080"
    assert up_module.with_console(plan, 0, None).console is None
    assert up_module.with_console(up_module.plan(tmp_path, 0, None, None), None, None).console is None


def test_console_options_are_checked_before_anything_serves() -> None:
    import argparse

    from zkraft.console.server import build, configure_parser
    from zkraft.tools.topics import ToolUsageError

    parser = argparse.ArgumentParser()
    configure_parser(parser)
    with pytest.raises(ToolUsageError, match="--bootstrap-server: 'nowhere' is not host:port"):
        build(parser.parse_args(["--bootstrap-server", "nowhere"]))
    with pytest.raises(ToolUsageError, match="--require-login needs --zookeeper"):
        build(parser.parse_args(["--bootstrap-server", "127.0.0.1:9092", "--require-login"]))
    with pytest.raises(ToolUsageError, match="--metrics-server: 'x' is not host:port"):
        build(parser.parse_args(["--bootstrap-server", "127.0.0.1:9092", "--metrics-server", "x"]))


def test_a_console_port_in_use_is_one_line_and_exit_1() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        busy = subprocess.run(
            [sys.executable, "-m", "zkraft", "console", "--bootstrap-server", "127.0.0.1:9092", "--port", port],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert busy.returncode == 1, busy.stderr
    assert busy.stderr.startswith(f"zkraft: error: the console cannot serve on 127.0.0.1:{port}")
    assert busy.stderr.count("\n") == 1 and "Traceback" not in busy.stderr


def test_a_topic_page_shows_an_offline_partition_without_asking_its_offsets() -> None:
    from client.kafka.config_resources import ConfigDescription, ConfigResourceType
    from client.kafka.structs import TopicPartition
    from client.kafka.types import PartitionDescription, TopicDescription
    from zkraft.console import kafka_pages

    class Admin:
        def describe_topics(self, names: list[str]) -> list[TopicDescription]:
            online = PartitionDescription(0, 1, [1, 2], [1], [], None)
            offline = PartitionDescription(1, -1, [2, 3], [2], [2, 3], None)
            return [TopicDescription("t", False, [online, offline])]

        def describe_configs(self, resources: list[object]) -> list[ConfigDescription]:
            return [ConfigDescription(ConfigResourceType.TOPIC, "t", {})]

    class Consumer:
        def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            assert tps == [TopicPartition("t", 0)]  # a leaderless partition would make ListOffsets fail
            return {TopicPartition("t", 0): 3}

        def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            return {TopicPartition("t", 0): 9}

    class Clients:
        admin = Admin()
        consumer = Consumer()

    detail = kafka_pages.topic_detail(Clients(), "t")  # type: ignore[arg-type]
    online, offline = detail.partitions
    assert (online.start_offset, online.end_offset, online.out_of_sync) == (3, 9, [2])
    assert offline.offline and offline.start_offset is None and offline.out_of_sync == [3]
