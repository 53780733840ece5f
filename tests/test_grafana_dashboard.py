"""docs/grafana/zkraft.json queries only names zkraft publishes (broker/metrics.py, zkemu/metrics.py), so an
imported dashboard shows data, not empty panels."""

from __future__ import annotations

import json
import re
from pathlib import Path

from quorum.latency_metrics import RAFT_LATENCY_HISTOGRAMS
from zkemu.four_letter_words import MNTR_KEY_ORDER
from zkemu.latency_summaries import MNTR_SUMMARIES, MNTR_SUMMARY_KEYS

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana" / "zkraft.json"
PROMQL_WORDS = frozenset(
    {"sum", "max", "rate", "increase", "by", "or", "topic", "request", "consumergroup", "instance", "peer"}
    | {"histogram_quantile", "le"}
)
# The latency histograms (quorum.latency_metrics) and ZooKeeper's summaries (zkemu.latency_summaries).
HISTOGRAMS = frozenset(RAFT_LATENCY_HISTOGRAMS)
SUMMARIES = frozenset(name for name, _advanced in MNTR_SUMMARIES)


def published_names() -> set[str]:
    """Family names the collectors build (as literals or from their prefixes), with their sample suffixes."""
    sources = (ROOT / "broker" / "metrics.py").read_text() + (ROOT / "zkemu" / "metrics.py").read_text()
    prefixes = dict(re.findall(r'^(\w+) = "(\w+)"$', sources, re.MULTILINE))
    names = set(re.findall(r'"((?:kafka|raft)_\w+)"', sources))
    names |= {prefixes[p] + s for p, s in re.findall(r'(\b[A-Z]+) \+ "(\w+)"', sources) if p in prefixes}
    names |= {f"kafka_server_brokertopicmetrics_{s}" for s in ("messagesin", "bytesin", "bytesout")}
    names |= set(MNTR_KEY_ORDER) - set(MNTR_SUMMARY_KEYS)  # mntr's summary figures are summaries on /metrics
    names |= {n + "_bucket" for n in HISTOGRAMS} | HISTOGRAMS | SUMMARIES
    return names | {n + "_total" for n in names} | {n + "_sum" for n in names} | {n + "_count" for n in names}


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_dashboard_query_names_a_published_metric() -> None:
    published = published_names()
    queried: set[str] = set()
    for query in dashboard_queries():
        expr = re.sub(r"\{[^}]*\}|\[[^]]*\]", "", query)  # drop label matchers and ranges
        queried |= {word for word in re.findall(r"[a-z_]+", expr) if word not in PROMQL_WORDS}
    assert queried, "the dashboard has no queries"
    assert queried <= published, f"queried but not published: {sorted(queried - published)}"


def test_every_latency_histogram_and_summary_has_a_panel() -> None:
    """p50/p99 of each Raft histogram through histogram_quantile; ZooKeeper's summaries by their quantile label."""
    queries = dashboard_queries()
    for name in HISTOGRAMS:
        quantiles = [q for q in queries if f"{name}_bucket" in q and q.startswith("histogram_quantile(")]
        assert quantiles, f"no histogram_quantile panel for {name}"
    for name in ("readlatency", "updatelatency"):
        assert any(f'{name}{{quantile="0.99"}}' in q for q in queries), name
