"""A 3-node zkraft quorum seen through its ZooKeeper client ports, for tests that drive it with ZooKeeper's
own clients (tests/java_clients.py's ClientPortCluster, the same shape as the reference ZooKeeper's)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.java_clients import START_TIMEOUT_S, ZKRAFT_CLIENT_PROPERTIES, ClientPortCluster
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader, wait_serving
from tests.real_zookeeper import four_letter_word, server_mode


class ZkraftCluster(ClientPortCluster):
    """Running QuorumProcesses with ZooKeeper client ports."""

    def __init__(self, processes: QuorumProcesses) -> None:
        self.processes = processes
        self.ids = sorted(processes.addresses)
        self.label = f"zkraft {processes.n} nodes"

    def client_addresses(self) -> list[str]:
        return [self.processes.zk_address(node_id) for node_id in self.ids]

    def leader_index(self) -> int:
        leader_id, _ = asyncio.run(wait_for_leader(self.processes.addresses, timeout_s=START_TIMEOUT_S))
        return self.ids.index(leader_id)

    def kill(self, index: int) -> None:
        self.processes.kill(self.ids[index])

    def restart(self, index: int) -> None:
        node_id = self.ids[index]
        self.processes.start(node_id)
        asyncio.run(wait_serving(self.processes.addresses[node_id], START_TIMEOUT_S))


def client_port_mode(address: str) -> str | None:
    """`leader` / `follower` / `standalone` from the node's `srvr` answer on its client port."""
    return server_mode(four_letter_word(address, "srvr"))


@contextlib.contextmanager
def zkraft_cluster(root: Path, n: int = 3) -> Iterator[ZkraftCluster]:
    with QuorumProcesses(root, n=n, properties={**FAST_ZK_PROPERTIES, **ZKRAFT_CLIENT_PROPERTIES}) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=START_TIMEOUT_S))
        yield ZkraftCluster(processes)
