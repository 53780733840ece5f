"""`zkraft zk` beside ZooKeeper's own zkCli (org.apache.zookeeper.ZooKeeperMain from pyspark's jars)
for the ACL commands users type: the same script through both, against one quorum (zkCli on its
client port, `zkraft zk` on its gRPC port), prints the same getAcl, getAcl -s and whoami lines.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.quorum_harness import FAST_ZK_PROPERTIES, REPO_ROOT, QuorumProcesses, wait_for_leader
from tests.real_zookeeper import find_java, pyspark_jars_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

JAVA = find_java()
JARS = pyspark_jars_dir()
ALICE_DIGEST = "alice:" + base64.b64encode(hashlib.sha1(b"alice:pw").digest()).decode()  # noqa: S324
# zkCli's prompt, printed before each command it reads (no newline after it when stdin is not a terminal).
PROMPT = re.compile(r"\[zk: [^\]]*\] ")
# Times and zxids differ between the two runs (each creates its own nodes); everything else must not.
TIME_LINE = re.compile(r"^((?:[cm]time|[cmp]Zxid) = ).*$")


def script(root: str) -> str:
    return "\n".join(
        [
            "addauth digest alice:pw",
            f"create {root} v digest:{ALICE_DIGEST}:cdrwa,world:anyone:r",
            f"getAcl {root}",
            f"setAcl {root} world:anyone:cdrwa,digest:{ALICE_DIGEST}:ra",
            f"getAcl -s {root}",
            f"create {root}/a v auth::cdr",
            f"getAcl {root}/a",
            "getAcl /zookeeper/config",
            "whoami",
            "quit",
            "",
        ]
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("zkcli"), n=1, properties=FAST_ZK_PROPERTIES) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=30))
        asyncio.run(processes.wait_client_ports(timeout_s=30))
        yield processes


def _zkcli_lines(address: str, text: str) -> list[str]:
    assert JAVA is not None and JARS is not None
    result = subprocess.run(
        [JAVA, "-cp", f"{JARS}/*", "org.apache.zookeeper.ZooKeeperMain", "-server", address],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # What each command printed sits between two prompts; the first chunk is the connection banner.
    chunks = PROMPT.split(result.stdout)[1:]
    return [line for chunk in chunks for line in chunk.splitlines() if line and not line.startswith("WATCHER::")][:-1]


def _our_lines(address: str, text: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "zk", "--server", address],
        cwd=REPO_ROOT,
        env=env,
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")
    # zkCli 3.9 prints "Created ..." on stderr, `zkraft zk` on stdout: compared elsewhere.
    return [line for line in result.stdout.splitlines() if line and not line.startswith("Created ")]


@pytest.mark.skipif(JAVA is None or JARS is None, reason="needs java and pyspark's ZooKeeper jars")
def test_acl_commands_print_what_zkcli_prints(cluster: QuorumProcesses) -> None:
    theirs = _zkcli_lines(cluster.zk_address(1), script("/by-zkcli"))
    ours = _our_lines(cluster.addresses[1], script("/by-zkraft"))
    assert "'digest,'alice:x" in theirs  # the masked hash of a node without ADMIN for alice
    assert [TIME_LINE.sub(r"\1...", line) for line in ours] == [TIME_LINE.sub(r"\1...", line) for line in theirs]
