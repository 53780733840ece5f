"""A quorum node's operations ports, as Prometheus, an orchestrator and a ZooKeeper operator use them:
`/metrics` with ZooKeeper's mntr names and Raft's figures (moving with writes), `/healthz` and
`/readyz`, and ZooKeeper's AdminServer commands as JSON (zkemu.metrics)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, free_ports, wait_for_leader

pytestmark = pytest.mark.integration

LEADER_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 10.0


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
            stats = json.loads(http_get(f"{admin_url}/commands/srvr")[1])
            assert stats["server_stats"]["server_state"] == "standalone"
            conf = json.loads(http_get(f"{admin_url}/commands/conf")[1])
            assert conf["command"] == "configuration" and conf["clientPort"] == str(cluster.client_ports[1])
            assert http_get(f"{admin_url}/commands/nope")[0] == 404
        finally:
            zk.stop()
            zk.close()
