"""ZooKeeper's own Java client, zkCli (org.apache.zookeeper.ZooKeeperMain from the jars in pyspark), against
a real three-node quorum's client ports: the Java client's handshake, its reads and writes, a
deleteall (a multi of deletes), and config and reconfig (issue 32) work as against ZooKeeper."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
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


SUPER_PASSWORD = "zkcli-secret"
SUPER_DIGEST = "super:" + base64.b64encode(hashlib.sha1(f"super:{SUPER_PASSWORD}".encode()).digest()).decode()
# As `zkraft up` runs its nodes: zkCli's reconfig is served (ZooKeeper's default is off); super may reconfigure.
RECONFIG_PROPERTIES = {
    "reconfigEnabled": "true",
    "zookeeper.DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    properties = {**FAST_ZK_PROPERTIES, **RECONFIG_PROPERTIES}
    with QuorumProcesses(tmp_path_factory.mktemp("zkcli"), n=3, properties=properties) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        asyncio.run(processes.wait_client_ports(timeout_s=LEADER_TIMEOUT_S))
        yield processes


def zkcli(connect_string: str, *command: str, script: str | None = None) -> str:
    """Run one zkCli command, or the lines of `script` in one session; what it printed (zkCli prints some
    results on stderr)."""
    java = find_java()
    jars = pyspark_jars_dir()
    assert java is not None and jars is not None
    classpath = str(Path(jars) / "*")
    result = subprocess.run(
        [java, "-cp", classpath, "org.apache.zookeeper.ZooKeeperMain", "-server", connect_string, *command],
        capture_output=True,
        text=True,
        timeout=ZKCLI_TIMEOUT_S,
        input=script,
        stdin=None if script is not None else subprocess.DEVNULL,
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


def test_zkcli_config_and_reconfig_remove_then_add(cluster: QuorumProcesses) -> None:
    """zkCli's config and reconfig (ZooKeeperAdmin) against node 1: node 3 removed, then added back."""
    port3 = cluster.addresses[3].rpartition(":")[2]
    # The line as `config` prints it: quorumPort the peer port, electionPort 0 (zkemu.config_text says why).
    server3 = f"server.3=127.0.0.1:{port3}:0:participant;{cluster.zk_address(3)}"
    add = f"reconfig -add server.3=127.0.0.1:{port3}:{port3};{cluster.zk_address(3)}"  # the peer port twice
    lines = [f"addauth digest super:{SUPER_PASSWORD}", "config", "reconfig -remove 3", "config -c", add, "config",
             "quit", ""]  # fmt: skip
    printed = zkcli(cluster.zk_address(1), script="\n".join(lines))
    texts = re.findall(r"(?:^|\] )((?:server\.\d+=\S+\n)+version=[0-9a-f]+)", printed, re.MULTILINE)
    assert len(texts) == 4, printed  # config, the removal's answer, the addition's answer, config
    first, removed, added, last = texts
    assert server3 in first and server3 not in removed and added == last and server3 in last
    assert "Committed new configuration:" in printed
    removed_version = removed.rpartition("version=")[2]
    # config -c: the version, then the client addresses (in java.util.Properties' hash order).
    connect = re.search(rf"\] {removed_version} (\S+)\n", printed)
    assert connect is not None, printed
    assert sorted(connect.group(1).split(",")) == sorted([cluster.zk_address(1), cluster.zk_address(2)])
