"""A quorum node's operations port: Prometheus metrics with ZooKeeper's and Raft's names, ZooKeeper's
AdminServer commands, and `/healthz` / `/readyz` (runtime/metrics_http.py serves them).

ZooKeeper 3.6+'s PrometheusMetricsProvider publishes every `mntr` figure as a gauge of the same name
(`znode_count`, `watch_count`, `ephemerals_count`, `num_alive_connections`, `outstanding_requests`,
`avg_latency`, ...): those come from zkemu.four_letter_words, so their meaning lives once. Its
ServerMetrics summaries `readlatency`, `updatelatency` (quantiles 0.5, 0.9, 0.99) and `fsynctime` (0.5),
in ms, come from zkemu.latency_summaries' histograms. Raft's own figures (term, commit and applied
index, follower lag) come from the node's status, and its latency histograms in seconds
(zkraft_disk_wal_fsync_duration_seconds, ...) from quorum.latency_metrics through the facade.

Everything is read at scrape time on the event loop (runtime.metrics_http.on_loop): the request path
keeps no extra counter for it beyond the histograms' bucket counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from quorum.facade import RAFT_LATENCY_HISTOGRAMS, NodeSettings
from runtime.latency_families import SummaryWindow, histogram_family, summary_family
from runtime.metrics_http import Check, JsonRoute, OpsHttpServer, check_route, on_loop, start_ops_server
from zkemu import four_letter_words
from zkemu.latency_summaries import MNTR_SUMMARY_KEYS
from zkemu.service import ZooKeeperService

# A node is ready once it applied all but this many committed entries (it serves reads that fresh).
READY_APPLY_LAG_ENTRIES_MAX = 1000


def _numeric(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None  # version, server_state, peer_state: not figures


# mntr's figures of the summaries are not gauges on /metrics: the summaries are (ZooKeeper's provider).
_NOT_GAUGES = frozenset(MNTR_SUMMARY_KEYS)


def _snapshot(service: ZooKeeperService) -> dict[str, Any]:
    """Everything one scrape reports, read in one go on the event loop."""
    if service.quorum is None:
        return {"mntr": {}, "status": None}
    serving = four_letter_words.is_serving(service)
    mntr = four_letter_words.mntr_values(service, data_size=False) if serving else {}
    return {"mntr": mntr, "status": service.quorum.status()}


class ZooKeeperCollector(Collector):
    def __init__(self, service: ZooKeeperService, loop: asyncio.AbstractEventLoop) -> None:
        self._service = service
        self._loop = loop
        # The summaries' quantile windows (scrape-time state: only touched on the loop, by _latency_families).
        self._windows = {
            summary.name: (SummaryWindow(summary.histogram), summary.quantiles)
            for summary in service.server_stats.latency_summaries
        }

    def collect(self) -> Iterator[Metric]:
        snapshot, latency = on_loop(self._loop, lambda: (_snapshot(self._service), self._latency_families()))
        for key, value in snapshot["mntr"].items():
            number = _numeric(value)
            if number is not None and key not in _NOT_GAUGES:
                yield GaugeMetricFamily(key, f"ZooKeeper mntr zk_{key}", value=number)
        status = snapshot["status"]
        if status is not None:
            yield from _raft_families(status)
        yield from latency

    def _latency_families(self) -> list[Metric]:
        """ZooKeeper's summaries in ms (ServerMetrics), then Raft's histograms in seconds."""
        families: list[Metric] = [
            summary_family(name, name, window, quantiles, unit_s=1e-3)
            for name, (window, quantiles) in self._windows.items()
        ]
        families += [histogram_family(name, text, hist) for name, (text, hist) in RAFT_LATENCY_HISTOGRAMS.items()]
        return families


def _raft_families(status: Any) -> Iterator[Metric]:
    """Raft's figures (Raft thesis §3: term, commitIndex, lastApplied; the leader's matchIndex per peer)."""
    yield GaugeMetricFamily("raft_term", "Current Raft term", value=status.term)
    yield GaugeMetricFamily("raft_commit_index", "Highest log index known committed", value=status.commit_index)
    yield GaugeMetricFamily("raft_applied_index", "Highest log index applied here", value=status.applied_index)
    yield GaugeMetricFamily("raft_last_index", "Last index in this node's log", value=status.last_index)
    yield GaugeMetricFamily("raft_is_leader", "1 while this node leads", value=float(status.role == "leader"))
    yield GaugeMetricFamily("raft_leader_id", "The leader this node knows (0: none)", value=status.leader)
    yield CounterMetricFamily("raft_leader_changes", "New leaders this node has seen", value=status.leader_changes)
    lag = GaugeMetricFamily("raft_follower_lag_entries", "Leader only: entries a follower lacks", labels=["peer"])
    for peer, match, _next, _state in status.followers:
        if peer != status.node_id:
            lag.add_metric([str(peer)], max(0, status.last_index - match))
    yield lag


# ---------------------------------------------------------------- health


def _healthy(service: ZooKeeperService) -> Check:
    return Check(True)  # the event loop answered: the process is alive and not wedged


def _ready(service: ZooKeeperService) -> Check:
    """Ready: in a quorum with a known leader, and applied (nearly) all that is committed."""
    if service.quorum is None or service.tracker is None:
        return Check(False, ("starting",))
    if not four_letter_words.is_serving(service):
        return Check(False, ("no leader known (election in progress or quorum lost)",))
    status = service.quorum.status()
    behind = status.commit_index - status.applied_index
    if behind > READY_APPLY_LAG_ENTRIES_MAX:
        return Check(False, (f"applying: {behind} committed entries not applied yet",))
    return Check(True)


# ---------------------------------------------------------------- AdminServer (ZooKeeper's Commands.java)


def _command(name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "command": name, "error": None}


def _admin_body(service: ZooKeeperService, word: str) -> tuple[int, dict[str, Any]]:
    if word == "ruok":  # RuokCommand: an empty answer with error null while the server runs
        return 200, _command("ruok", {})
    if word == "conf" or word == "configuration":
        return 200, _command("configuration", four_letter_words.conf_values(service))
    if not four_letter_words.is_serving(service):
        return 200, {"command": word, "error": four_letter_words.NOT_SERVING.strip()}
    values = four_letter_words.mntr_values(service)
    if word in ("mntr", "monitor"):
        return 200, _command("monitor", values)
    keys = ("packets_sent", "packets_received", "avg_latency", "max_latency", "min_latency", "outstanding_requests")
    stats = {key: values[key] for key in keys} | {"server_state": values["server_state"]}
    stats |= {"node_count": values["znode_count"], "num_alive_client_connections": values["num_alive_connections"]}
    body = {"version": values["version"], "read_only": False, "server_stats": stats}
    return 200, _command("stats" if word == "stat" else "server_stats", body)


ADMIN_COMMANDS = ("ruok", "mntr", "monitor", "srvr", "server_stats", "stat", "stats", "conf", "configuration")


def _admin_routes(service: ZooKeeperService, loop: asyncio.AbstractEventLoop) -> dict[str, JsonRoute]:
    def route_for(word: str) -> JsonRoute:
        lookup = "stat" if word == "stats" else "srvr" if word == "server_stats" else word
        return lambda: on_loop(loop, lambda: _admin_body(service, lookup))

    routes = {f"/commands/{word}": route_for(word) for word in ADMIN_COMMANDS}
    routes["/commands"] = lambda: (200, _command("commands", {"commands": list(ADMIN_COMMANDS)}))
    return routes


def start_node_ops(settings: NodeSettings, service: ZooKeeperService) -> list[OpsHttpServer]:
    """metricsProvider.httpPort: /metrics, /healthz, /readyz; admin.serverPort: AdminServer + health.
    0 leaves either off. Called on the event loop before the node starts (so /readyz says "starting")."""
    loop = asyncio.get_running_loop()
    health = {
        "/healthz": check_route(lambda: _healthy(service), loop),
        "/readyz": check_route(lambda: _ready(service), loop),
    }
    started: list[OpsHttpServer] = []
    log = structlog.get_logger("quorum").bind(node=settings.node_id)
    if settings.metrics_port:
        registry = CollectorRegistry()
        registry.register(ZooKeeperCollector(service, loop))
        started.append(start_ops_server(settings.metrics_host, settings.metrics_port, registry, health))
        log.info("metrics_server_started", address=started[-1].address)
    if settings.admin_enable_server and settings.admin_server_port:
        routes = health | _admin_routes(service, loop)
        started.append(
            start_ops_server(settings.admin_server_address, settings.admin_server_port, CollectorRegistry(), routes)
        )
        log.info("admin_server_started", address=started[-1].address)
    return started
