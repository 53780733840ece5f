"""ZooKeeper's own Java client, zkCli (org.apache.zookeeper.ZooKeeperMain from the jars in pyspark), against
a real three-node quorum's client ports: the Java client's handshake, its reads and writes, and a
deleteall (a multi of deletes) work as against ZooKeeper."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader
from tests.real_zookeeper import find_java, pyspark_jars_dir, unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

_UNAVAILABLE = unavailable_reason()
if _UNAVAILABLE is not None:
    pytest.skip(f"no ZooKeeper jars to run zkCli from: {_UNAVAILABLE}", allow_module_level=True)

LEADER_TIMEOUT_S = 30.0
ZKCLI_TIMEOUT_S = 90.0  # one JVM start and one command


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("zkcli"), n=3, properties=FAST_ZK_PROPERTIES) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        asyncio.run(processes.wait_client_ports(timeout_s=LEADER_TIMEOUT_S))
        yield processes


def zkcli(connect_string: str, *command: str) -> str:
    """Run one zkCli command; what it printed (zkCli prints some results on stderr)."""
    java = find_java()
    jars = pyspark_jars_dir()
    assert java is not None and jars is not None
    classpath = str(Path(jars) / "*")
    result = subprocess.run(
        [java, "-cp", classpath, "org.apache.zookeeper.ZooKeeperMain", "-server", connect_string, *command],
        capture_output=True,
        text=True,
        timeout=ZKCLI_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_zkcli_reads_and_writes(cluster: QuorumProcesses) -> None:
    hosts = cluster.zk_connect_string
    assert "Created /cli" in zkcli(hosts, "create", "/cli", "hello")
    zkcli(hosts, "create", "/cli/child", "c")
    got = zkcli(hosts, "get", "-s", "/cli")
    assert "hello" in got and "numChildren = 1" in got and "dataLength = 5" in got
    assert "[child]" in zkcli(hosts, "ls", "/cli")
    zkcli(hosts, "deleteall", "/cli")  # ZKUtil's batch: one multi of deletes
    assert "[zookeeper]" in zkcli(hosts, "ls", "/")
