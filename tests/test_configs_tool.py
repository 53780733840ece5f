"""`zkraft configs` against a real ZooKeeper-semantics quorum: alter and describe topic configs, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from client import ZkClient
from client.kafka.znodes import TopicAssignment, encode_topic
from tests.quorum_harness import REPO_ROOT, QuorumProcesses, subprocess_env
from zkraft.tools.configs import parse_add_config
from zkraft.tools.topics import ToolUsageError


def test_add_config_keeps_commas_inside_brackets() -> None:
    assert parse_add_config("retention.ms=1000,leader.replication.throttled.replicas=[0:1,1:2]") == {
        "retention.ms": "1000",
        "leader.replication.throttled.replicas": "0:1,1:2",
    }
    with pytest.raises(ToolUsageError):
        parse_add_config("retention.ms")


@pytest.mark.integration
def test_alter_writes_the_config_and_a_change_notification(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, 3, {"quorum.state.machine": "zookeeper", "tickTime": "200"}) as quorum:
        quorum.start_all()
        hosts = ",".join(quorum.addresses.values())
        zk = ZkClient(hosts, timeout=30)
        zk.start()
        try:
            zk.create("/brokers/topics/t", encode_topic(TopicAssignment("t", {0: (1,)})), makepath=True)

            def tool(*args: str) -> subprocess.CompletedProcess[str]:
                command = [sys.executable, "-m", "zkraft", "configs", "--zookeeper", hosts, *args]
                return subprocess.run(
                    command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60
                )

            done = tool(
                "--entity-type", "topics", "--entity-name", "t", "--alter",
                "--add-config", "retention.ms=1000,cleanup.policy=compact",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "Completed Updating config for entity: topic 't'."
            data, _ = zk.get("/config/topics/t")
            assert json.loads(data) == {"version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}}
            changes = zk.get_children("/config/changes")
            assert len(changes) == 1 and changes[0].startswith("config_change_")
            assert json.loads(zk.get(f"/config/changes/{changes[0]}")[0]) == {"version": 2, "entity_path": "topics/t"}

            done = tool("--entity-type", "topics", "--entity-name", "t", "--alter", "--delete-config", "retention.ms")
            assert done.returncode == 0, done.stderr
            described = tool("--entity-type", "topics", "--entity-name", "t", "--describe")
            assert described.stdout.strip() == "Configs for topic 't' are cleanup.policy=compact"

            bad = tool("--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "retention.ms=soon")
            assert bad.returncode == 1 and "retention.ms" in bad.stderr and "Traceback" not in bad.stderr
            missing = tool("--entity-type", "topics", "--entity-name", "nope", "--alter", "--add-config", "a=b")
            assert missing.returncode == 1 and "Topic nope does not exist" in missing.stderr
            unknown = tool("--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "colour=red")
            assert unknown.returncode == 1 and "colour" in unknown.stderr
        finally:
            zk.stop()
