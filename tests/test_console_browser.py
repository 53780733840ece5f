"""`zkraft console` in a real browser (headless Chromium through Selenium) against `zkraft up`.

One cluster (a quorum and one broker, with the console `zkraft up` starts) and one browser serve the module.
The walk is the issue's: open the overview, create a topic through the form, see it listed with its partitions,
produce and see a group's lag change, browse a record, open a znode. A failing step saves a screenshot and the
page's HTML in the test's tmp path and prints where.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, ensure_chromium, screenshot_on_failure
from tests.helpers import wait_until
from tests.test_up_cli import UpProcess, broker_ports, running_up

# The first run on a fresh machine installs Chromium inside the module's setup: allow for the download.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PAGE_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 30.0
TOPIC = "browser-topic"
GROUP = "browser-group"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UpProcess, str]]:
    reason = ensure_chromium()
    if reason is not None:
        pytest.skip(reason)
    quorum_base, broker_base = broker_ports(brokers=1)
    args = (
        "--brokers", "1",
        "--base-port", str(quorum_base),
        "--broker-base-port", str(broker_base),
        "--override", "controlled.shutdown.retry.backoff.ms=100",
    )  # fmt: skip
    data_dir = tmp_path_factory.mktemp("console") / "cluster"
    with running_up(data_dir, *args, ready_line="zkraft up: running") as up:
        url = up.cluster()["console_url"]
        wait_until(lambda: _serves(url), PAGE_TIMEOUT_S, interval_s=0.1, message=f"the console at {url} never answered")
        assert f"console: {url} (log " in up.output()
        yield up, url.rstrip("/")
        output = up.stop()  # every child gone, the console among them, and first
        assert output.index("console stopped") < output.index("brokers stopped")


def _serves(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def browser(console: tuple[UpProcess, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


def text_of(driver: Any, css: str) -> str:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return str(driver.find_element("css selector", css).text)
    except (NoSuchElementException, StaleElementReferenceException):
        # Not there, or found on the page a submitted form is replacing (post/redirect/get): "" until the
        # next look, which reads the new page.
        return ""


def wait_for(driver: Any, condition: Callable[[], object], what: str, reload: bool = False) -> None:
    """Wait for a page condition within PAGE_TIMEOUT_S; `reload` reloads the page between looks."""

    def look() -> object:
        if reload:
            driver.refresh()
        return condition()

    wait_until(look, PAGE_TIMEOUT_S, interval_s=0.25 if reload else 0.05, message=what)


def kafka_bootstrap(up: UpProcess) -> str:
    return ",".join(b["kafka_address"] for b in up.cluster()["brokers"])


def test_the_console_walk_overview_topic_form_lag_messages_znode(
    console: tuple[UpProcess, str], browser: Any, tmp_path: Path
) -> None:
    up, url = console
    with screenshot_on_failure(browser, tmp_path, "overview"):
        browser.get(url + "/")
        wait_for(browser, lambda: "leader" in text_of(browser, "#quorum"), "the overview shows no quorum leader")
        quorum_ids = {str(node["id"]) for node in up.cluster()["quorum"]}
        rows = browser.find_elements("css selector", "#quorum tr")[1:]
        assert {row.find_elements("css selector", "td")[0].text for row in rows} == quorum_ids
        assert "Controller: broker 1" in text_of(browser, "#controller")
        assert text_of(browser, "#urp-count") == "0 under-replicated"

    with screenshot_on_failure(browser, tmp_path, "create-topic"):
        browser.find_element("link text", "Topics").click()
        browser.find_element("id", "topic-name").send_keys(TOPIC)
        partitions = browser.find_element("id", "topic-partitions")
        partitions.clear()
        partitions.send_keys("2")
        browser.find_element("id", "topic-configs").send_keys("retention.ms=3600000")
        browser.find_element("id", "create").click()
        wait_for(browser, lambda: "Created topic" in text_of(browser, "#message"), "no 'Created topic' message")
        listed = [row for row in browser.find_elements("css selector", "#topics tr") if TOPIC in row.text]
        assert len(listed) == 1 and listed[0].find_elements("css selector", "td")[1].text == "2"
        browser.find_element("link text", TOPIC).click()
        wait_for(browser, lambda: len(browser.find_elements("css selector", "#partitions tr")) == 3, "no partitions")
        assert "retention.ms 3600000 DYNAMIC_TOPIC_CONFIG" in text_of(browser, "#configs")

    bootstrap = kafka_bootstrap(up)
    produce(bootstrap, [(b"k0", b'{"n": 0, "html": "<script>alert(1)</script>"}')] + numbered(1, 4))
    with screenshot_on_failure(browser, tmp_path, "group-lag"):
        consume_and_commit(bootstrap, records=4)
        browser.get(f"{url}/groups")
        browser.find_element("link text", GROUP).click()
        wait_for(browser, lambda: text_of(browser, "#total-lag") == "0", "the group's lag is not 0", reload=True)
        produce(bootstrap, numbered(4, 8))
        wait_for(
            browser, lambda: text_of(browser, "#total-lag") == "4", "the group's lag did not become 4", reload=True
        )

    with screenshot_on_failure(browser, tmp_path, "messages"):
        browser.get(f"{url}/topics/{TOPIC}")
        browser.find_element("id", "browse").click()
        browser.find_element("css selector", "#mode option[value=offset]").click()
        browser.find_element("css selector", "#format option[value=json]").click()
        browser.find_element("id", "read").click()
        wait_for(browser, lambda: text_of(browser, "#count") == "8 record(s)", "the browser did not read 8 records")
        first = [row for row in browser.find_elements("css selector", "#messages tr") if "k0" in row.text]
        assert len(first) == 1
        # Escaped, not run: the value's markup is shown as text, pretty-printed as JSON.
        assert '"html": "<script>alert(1)</script>"' in first[0].text
        assert "source: console-test" in first[0].text

    with screenshot_on_failure(browser, tmp_path, "znode"):
        browser.find_element("link text", "Znodes").click()
        for name in ("brokers", "topics", TOPIC):
            browser.find_element("css selector", f"#children a[href$='{name}']").click()
        wait_for(browser, lambda: '"partitions"' in text_of(browser, "#data"), "the topic's znode shows no data")
        assert json.loads(text_of(browser, "#data"))["partitions"] == {"0": [1], "1": [1]}
        assert "numChildren" in text_of(browser, "#stat") and "world anyone" in text_of(browser, "#acl")


def test_a_refused_action_shows_kafkas_error_in_plain_words(console: tuple[UpProcess, str], browser: Any) -> None:
    _up, url = console
    browser.get(f"{url}/topics")
    browser.find_element("id", "topic-name").send_keys("bad name!")
    browser.find_element("id", "create").click()
    wait_for(browser, lambda: text_of(browser, "#error"), "no error shown")
    assert "is illegal" in text_of(browser, "#error") and "Traceback" not in browser.page_source
    browser.get(f"{url}/topics/no-such-topic")
    assert "does not host this topic-partition" in text_of(browser, "#error")


def numbered(first: int, last: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f'{{"n": {i}}}'.encode()) for i in range(first, last)]


def produce(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    from client import Producer

    with Producer(bootstrap_servers=bootstrap) as producer:
        futures = [
            producer.send(TOPIC, key=key, value=value, headers=[("source", b"console-test")]) for key, value in records
        ]
        producer.flush(timeout=CLIENT_TIMEOUT_S)
        for future in futures:
            future.get(timeout=CLIENT_TIMEOUT_S)


def consume_and_commit(bootstrap: str, records: int) -> None:
    """A group member reads `records` records from the beginning, commits and leaves (the group is then Empty)."""
    from client import Consumer

    consumer = Consumer(
        TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False
    )
    seen: list[Any] = []

    def read_enough() -> bool:
        for batch in consumer.poll(timeout_ms=200).values():
            seen.extend(batch)
        return len(seen) >= records

    try:
        wait_until(read_enough, CLIENT_TIMEOUT_S, message=f"the group read fewer than {records} records")
        consumer.commit()
    finally:
        consumer.close(autocommit=False)


def test_topic_admin_and_reassignment_through_the_forms(
    console: tuple[UpProcess, str], browser: Any, tmp_path: Path
) -> None:
    """Edit a config, add partitions, generate and execute a reassignment plan, elect preferred leaders, delete."""
    from client import Admin, NewTopic

    up, url = console
    topic = "browser-admin"
    with Admin(kafka_bootstrap(up)) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with screenshot_on_failure(browser, tmp_path, "topic-admin"):
        browser.get(f"{url}/topics/{topic}")
        form = browser.find_element("id", "set-config")
        form.find_element("name", "key").send_keys("retention.bytes")
        form.find_element("name", "value").send_keys("1048576")
        form.find_element("css selector", "button[value=set]").click()
        wait_for(browser, lambda: "retention.bytes=1048576 set" in text_of(browser, "#message"), "config not set")
        assert "retention.bytes 1048576 DYNAMIC_TOPIC_CONFIG" in text_of(browser, "#configs")
        browser.find_element("css selector", "#add-partitions button").click()
        wait_for(browser, lambda: "now has 2 partitions" in text_of(browser, "#message"), "partitions not added")
        assert len(browser.find_elements("css selector", "#partitions tr")) == 3

    with screenshot_on_failure(browser, tmp_path, "reassignment"):
        browser.find_element("link text", "Reassignment").click()
        browser.find_element("css selector", "#generate input[name=topics]").send_keys(topic)
        browser.find_element("css selector", "#generate input[name=brokers]").send_keys("1")
        browser.find_element("css selector", "#generate button").click()
        wait_for(browser, lambda: "Proposed partition reassignment" in text_of(browser, "#output"), "no plan")
        proposed = text_of(browser, "#output").split("Proposed partition reassignment configuration")[1].strip()
        assert json.loads(proposed)["partitions"][0]["replicas"] == [1]
        browser.find_element("css selector", "#plan-form textarea").send_keys(proposed)
        browser.find_element("css selector", "#plan-form button[formaction$=execute]").click()
        wait_for(browser, lambda: "Successfully started" in text_of(browser, "#output"), "the plan did not start")
        browser.find_element("css selector", "#plan-form button[formaction$=verify]").click()
        wait_for(browser, lambda: "Status of partition reassignment" in text_of(browser, "#output"), "no verify")
        browser.find_element("css selector", "#election input[name=topic]").send_keys(topic)
        browser.find_element("css selector", "#election button").click()
        wait_for(browser, lambda: text_of(browser, "#message") or text_of(browser, "#error"), "no election outcome")
        # One replica each: the preferred one already leads (kafka-leader-election.sh's words).
        assert text_of(browser, "#message") == f"Valid replica already elected for partitions {topic}-0, {topic}-1"

    with screenshot_on_failure(browser, tmp_path, "delete-topic"):
        browser.get(f"{url}/topics/{topic}")
        browser.find_element("css selector", "#delete-topic input[name=confirm]").send_keys(topic)
        browser.find_element("css selector", "#delete-topic button").click()
        wait_for(browser, lambda: "marked for deletion" in text_of(browser, "#message"), "topic not deleted")
