"""A quorum node's operations ports, as Prometheus, an orchestrator and a ZooKeeper operator use them:
`/metrics` with ZooKeeper's mntr names and Raft's figures (moving with writes), `/healthz` and
`/readyz`, and ZooKeeper's AdminServer commands as JSON (zkemu.metrics); the latency histograms and
summaries (Raft's fsync and proposal histograms, ZooKeeper's readlatency/updatelatency) counting the
writes and reads a client makes."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from quorum.latency_metrics import RAFT_LATENCY_HISTOGRAMS
from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, MeteredQuorum, QuorumProcesses, free_ports, wait_for_leader
from tests.real_zookeeper import four_letter_word

pytestmark = pytest.mark.integration

LEADER_TIMEOUT_S = 60.0  # an upper bound: a loaded machine takes up to half of it to elect
HTTP_TIMEOUT_S = 10.0
WRITES = 20
READS = 30


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""  # not listening yet


def samples(url: str) -> dict[str, float]:
    status, body = http_get(url)
    assert status == 200, body
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if not sample.labels
    }


def test_metrics_health_and_admin_server_of_a_node(tmp_path: Path) -> None:
    metrics_port, admin_port = free_ports(2)
    properties = {
        **FAST_ZK_PROPERTIES,
        "quorum.state.machine": "zookeeper",
        "metricsProvider.httpHost": "127.0.0.1",
        "metricsProvider.httpPort": str(metrics_port),
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(admin_port),
    }
    metrics_url = f"http://127.0.0.1:{metrics_port}"
    admin_url = f"http://127.0.0.1:{admin_port}"
    with QuorumProcesses(tmp_path, n=1, properties=properties) as cluster:
        cluster.start_all()
        asyncio.run(wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S))
        wait_until(lambda: http_get(f"{metrics_url}/readyz")[0] == 200, LEADER_TIMEOUT_S, message="readyz")
        assert json.loads(http_get(f"{metrics_url}/healthz")[1]) == {"status": "ok"}
        before = samples(f"{metrics_url}/metrics")
        assert before["raft_term"] >= 1 and before["raft_is_leader"] == 1
        assert before["raft_leader_changes_total"] >= 1

        zk = KazooClient(hosts=cluster.zk_connect_string, timeout=10.0)
        zk.start(timeout=10.0)
        try:
            for i in range(20):
                zk.create(f"/m{i}", b"x")
            zk.create("/eph", b"", ephemeral=True)
            zk.exists("/m0", watch=lambda _event: None)
            after = samples(f"{metrics_url}/metrics")
            assert after["raft_commit_index"] >= before["raft_commit_index"] + 21
            assert after["raft_applied_index"] >= before["raft_applied_index"] + 21
            assert after["znode_count"] == before["znode_count"] + 21
            assert after["ephemerals_count"] == 1
            assert after["watch_count"] == 1
            assert after["num_alive_connections"] == 1

            status, body = http_get(f"{admin_url}/commands/ruok")
            assert status == 200 and json.loads(body) == {"command": "ruok", "error": None}
            monitor = json.loads(http_get(f"{admin_url}/commands/mntr")[1])
            assert monitor["command"] == "monitor" and monitor["error"] is None
            assert monitor["znode_count"] == after["znode_count"] and monitor["server_state"] == "standalone"
            # Figures are JSON numbers, as ZooKeeper's MonitorCommand puts them (avg_latency a double).
            assert isinstance(monitor["avg_latency"], float) and monitor["cnt_updatelatency"] >= 21
            stats = json.loads(http_get(f"{admin_url}/commands/srvr")[1])
            assert stats["server_stats"]["server_state"] == "standalone"
            conf = json.loads(http_get(f"{admin_url}/commands/conf")[1])
            assert conf["command"] == "configuration" and conf["clientPort"] == str(cluster.client_ports[1])
            assert http_get(f"{admin_url}/commands/nope")[0] == 404
        finally:
            zk.stop()
            zk.close()


def labelled_samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by (name, sorted labels); parsed by prometheus_client's own text parser."""
    status, body = http_get(url)
    assert status == 200, body
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def assert_histogram_consistent(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> None:
    buckets = sorted(
        (float(dict(labels)["le"]), value) for (sample, labels), value in scrape.items() if sample == name + "_bucket"
    )
    counts = [value for _le, value in buckets]
    assert counts == sorted(counts), f"{name}: buckets not cumulative"
    assert buckets[-1] == (float("inf"), scrape[(name + "_count", ())])


def test_latency_histograms_and_summaries_count_writes_and_reads(tmp_path: Path) -> None:
    """N znode writes through a follower: the leader's proposal histograms count at least N, every node's
    fsync histogram grows (the leader's by N at least: one write at a time is one fsync each), and the
    follower's updatelatency and readlatency summaries count the client's writes and reads. Counts are
    summed over the nodes where a leader's are meant: a loaded machine may elect another meanwhile, and
    each write is timed and synced by the leader that proposed it."""
    properties = {**FAST_ZK_PROPERTIES, "4lw.commands.whitelist": "mntr,srvr"}
    with MeteredQuorum(tmp_path, n=3, properties=properties) as cluster:
        cluster.start_all()
        leader, _ = asyncio.run(wait_for_leader(cluster.addresses, LEADER_TIMEOUT_S))
        follower = min(node_id for node_id in cluster.addresses if node_id != leader)
        for node_id in cluster.addresses:
            ready_url = cluster.metrics_url(node_id).replace("/metrics", "/readyz")
            wait_until(lambda url=ready_url: http_get(url)[0] == 200, LEADER_TIMEOUT_S, message="readyz")
        before = {node_id: samples(cluster.metrics_url(node_id)) for node_id in cluster.addresses}

        zk = KazooClient(hosts=cluster.zk_address(follower), timeout=10.0)
        zk.start(timeout=10.0)
        try:
            for i in range(WRITES):
                zk.create(f"/latency-{i}", b"x")
            for _ in range(READS):
                zk.get("/latency-0")
        finally:
            zk.stop()
            zk.close()

        after = {node_id: labelled_samples(cluster.metrics_url(node_id)) for node_id in cluster.addresses}

        def growth(sample: str) -> float:
            return sum(after[node_id][(sample, ())] - before[node_id][sample] for node_id in cluster.addresses)

        fsync = "zkraft_disk_wal_fsync_duration_seconds"
        for name in ("zkraft_raft_proposal_commit_duration_seconds", "zkraft_raft_proposal_apply_duration_seconds"):
            assert growth(name + "_count") >= WRITES and growth(name + "_sum") > 0, name
        assert growth(fsync + "_count") >= WRITES
        for node_id, scrape in after.items():
            assert scrape[(fsync + "_count", ())] > before[node_id][fsync + "_count"], node_id
            for name in RAFT_LATENCY_HISTOGRAMS:
                assert_histogram_consistent(scrape, name)
        on_follower = after[follower]
        assert on_follower[("updatelatency_count", ())] >= before[follower]["updatelatency_count"] + WRITES
        assert on_follower[("readlatency_count", ())] >= before[follower]["readlatency_count"] + READS
        for quantile in ("0.5", "0.9", "0.99"):
            assert on_follower[("updatelatency", (("quantile", quantile),))] > 0, quantile

        mntr = four_letter_word(cluster.zk_address(follower), "mntr", timeout_s=HTTP_TIMEOUT_S)
        assert mntr is not None
        figures = dict(line.split("\t", 1) for line in mntr.splitlines())
        assert int(figures["zk_cnt_updatelatency"]) >= WRITES and int(figures["zk_cnt_readlatency"]) >= READS
        assert float(figures["zk_avg_updatelatency"]) > 0 and int(figures["zk_cnt_fsynctime"]) > 0
