"""The quorum facade (quorum.facade) over a real one-node quorum: what zkemu asks of the node, asked
through the facade, of a node that `run_hosted` built and runs with a hosted service."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from quorum.facade import QuorumFacade, run_hosted
from quorum.settings import NodeSettings
from tests.quorum_harness import free_ports, poll_until
from zkemu.tree import ZnodeTree
from zkraft_proto import zk_pb2

DEADLINE_S = 20.0


class Recorder:
    """A hosted service that keeps the facade it is given, and notes its start and stop."""

    def __init__(self) -> None:
        self.quorum: QuorumFacade | None = None
        self.events: list[str] = []
        self.started = asyncio.Event()

    def register(self, quorum: QuorumFacade, server: grpc.aio.Server) -> None:
        self.quorum = quorum
        self.events.append("register")

    async def start(self) -> None:
        self.events.append("start")
        self.started.set()

    async def stop(self) -> None:
        self.events.append("stop")


def create_txn(path: str) -> bytes:
    return zk_pb2.Txn(create=zk_pb2.CreateOp(path=path, data=b"x"), time_ms=1).SerializeToString()


async def until_leader(quorum: QuorumFacade) -> None:
    async def leading() -> bool:
        return quorum.is_leader

    await poll_until(leading, DEADLINE_S, "the one-node quorum elected no leader in time")


def test_a_hosted_service_reads_and_writes_the_quorum_through_the_facade(tmp_path: Path) -> None:
    [port] = free_ports(1)
    address = f"127.0.0.1:{port}"
    settings = NodeSettings(node_id=1, data_dir=tmp_path, listen=address, peers={1: address}, cpu_placement="off")
    tree = ZnodeTree(tmp_path / "zk")
    service = Recorder()

    async def body() -> int:
        stop = asyncio.Event()
        running = asyncio.ensure_future(run_hosted(settings, tree, service, stop))
        try:
            await asyncio.wait_for(service.started.wait(), DEADLINE_S)
            quorum = service.quorum
            assert quorum is not None and quorum.node_id == 1
            await until_leader(quorum)
            assert (quorum.leader_id, quorum.leader_address(), quorum.serving) == (1, address, True)
            assert quorum.follower_states() == [] and quorum.voter_count == 1

            [(index, raw)] = await quorum.propose([create_txn("/a")], DEADLINE_S)
            assert zk_pb2.TxnResult.FromString(raw).path == "/a"
            outcomes, stopped_by = await asyncio.wait_for(
                quorum.propose_prefix_nowait([create_txn("/b"), create_txn("/c")]), DEADLINE_S
            )
            assert [i for i, _ in outcomes] == [index + 1, index + 2] and stopped_by is None
            await quorum.wait_applied(index + 2, DEADLINE_S)
            assert quorum.applied_index >= index + 2 and tree.stat("/c") is not None
            assert await quorum.read_index(DEADLINE_S) >= index + 2
            status = quorum.status()
            assert (status.role, status.leader, status.applied_index) == ("leader", 1, quorum.applied_index)
        finally:
            stop.set()
        return await asyncio.wait_for(running, DEADLINE_S)

    assert asyncio.run(body()) == 0
    assert service.events == ["register", "start", "stop"]
