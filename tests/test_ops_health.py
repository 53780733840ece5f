"""/readyz's decisions (zkemu.metrics._ready, broker.metrics._ready) for the states a cluster test cannot
hold still long enough to probe: starting, no leader, applying, not registered, a follower without a
fetcher; and the HTTP answers of runtime.metrics_http (200 / 503 with reasons / 404)."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from broker import metrics as broker_metrics
from client.kafka.structs import TopicPartition
from runtime.metrics_http import Check, check_route, start_ops_server
from zkemu import metrics as zk_metrics


def zk_service(serving: bool = True, started: bool = True, commit: int = 10, applied: int = 10) -> SimpleNamespace:
    status = SimpleNamespace(commit_index=commit, applied_index=applied)
    quorum = SimpleNamespace(serving=serving, status=lambda: status)
    return SimpleNamespace(quorum=quorum, tracker=object() if started else None)


def test_quorum_node_readiness() -> None:
    assert zk_metrics._ready(SimpleNamespace(quorum=None, tracker=None)) == Check(False, ("starting",))
    assert not zk_metrics._ready(zk_service(started=False)).ok
    no_leader = zk_metrics._ready(zk_service(serving=False))
    assert not no_leader.ok and "no leader" in no_leader.reasons[0]
    behind = zk_metrics._ready(zk_service(commit=5000, applied=10))
    assert not behind.ok and "4990 committed entries not applied" in behind.reasons[0]
    assert zk_metrics._ready(zk_service()).ok


def broker_with(
    partitions: list[SimpleNamespace], fetching: set[TopicPartition], registered: bool = True
) -> SimpleNamespace:
    fetchers = SimpleNamespace(is_fetching=lambda tp: tp in fetching)
    replicas = SimpleNamespace(partitions={p.tp: p for p in partitions})
    zk = SimpleNamespace(connected=True)
    return SimpleNamespace(broker_epoch=7 if registered else -1, zk=zk, replicas=replicas, fetchers=fetchers)


def partition(name: str, is_leader: bool, leader: int) -> SimpleNamespace:
    return SimpleNamespace(tp=TopicPartition(name, 0), is_leader=is_leader, leader=leader)


def test_broker_readiness() -> None:
    led, followed, leaderless = partition("a", True, 1), partition("b", False, 2), partition("c", False, -1)
    assert broker_metrics._ready(broker_with([], set(), registered=False)) == Check(False, ("not registered",))
    stalled = broker_metrics._ready(broker_with([led, followed], set()))
    assert not stalled.ok and "b-0" in stalled.reasons[0]
    # A partition whose leader is offline is not this broker's to catch up with.
    assert broker_metrics._ready(broker_with([led, followed, leaderless], {followed.tp})).ok


def get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_http_answers_follow_the_checks_run_on_the_loop() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    state = {"ready": False}
    routes = {
        "/healthz": check_route(lambda: Check(True), loop),
        "/readyz": check_route(lambda: Check(state["ready"], () if state["ready"] else ("starting",)), loop),
    }
    server = start_ops_server("127.0.0.1", 0, CollectorRegistry(), routes)
    try:
        base = f"http://{server.address}"
        assert get(f"{base}/healthz") == (200, {"status": "ok"})
        assert get(f"{base}/readyz") == (503, {"status": "unavailable", "reasons": ["starting"]})
        state["ready"] = True
        assert get(f"{base}/readyz") == (200, {"status": "ok"})
        status, body = get(f"{base}/nope")
        assert status == 404 and "/readyz" in body["paths"]  # type: ignore[operator]
    finally:
        server.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
