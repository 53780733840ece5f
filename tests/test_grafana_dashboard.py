"""docs/grafana/zkraft.json queries only names zkraft publishes (broker/metrics.py, zkemu/metrics.py), so an
imported dashboard shows data, not empty panels."""

from __future__ import annotations

import json
import re
from pathlib import Path

from zkemu.four_letter_words import MNTR_KEY_ORDER

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana" / "zkraft.json"
PROMQL_WORDS = frozenset(
    {"sum", "max", "rate", "increase", "by", "or", "topic", "request", "consumergroup", "instance", "peer"}
)


def published_names() -> set[str]:
    """Family names the collectors build (as literals or from their prefixes), with their sample suffixes."""
    sources = (ROOT / "broker" / "metrics.py").read_text() + (ROOT / "zkemu" / "metrics.py").read_text()
    prefixes = dict(re.findall(r'^(\w+) = "(\w+)"$', sources, re.MULTILINE))
    names = set(re.findall(r'"((?:kafka|raft)_\w+)"', sources))
    names |= {prefixes[p] + s for p, s in re.findall(r'(\b[A-Z]+) \+ "(\w+)"', sources) if p in prefixes}
    names |= {f"kafka_server_brokertopicmetrics_{s}" for s in ("messagesin", "bytesin", "bytesout")}
    names |= set(MNTR_KEY_ORDER)
    return names | {n + "_total" for n in names} | {n + "_sum" for n in names} | {n + "_count" for n in names}


def test_every_dashboard_query_names_a_published_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    published = published_names()
    queried: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = re.sub(r"\{[^}]*\}|\[[^]]*\]", "", target["expr"])  # drop label matchers and ranges
            queried |= {word for word in re.findall(r"[a-z_]+", expr) if word not in PROMQL_WORDS}
    assert queried, "the dashboard has no queries"
    assert queried <= published, f"queried but not published: {sorted(queried - published)}"
