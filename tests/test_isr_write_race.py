"""A leader's ISR write never puts the partition's leader epoch back (found by the Kafka fault campaign, seed 305:
the leader read the state znode for its ELR, the controller's LeaderAndIsr of the next epoch arrived meanwhile,
and the write of the old epoch went out conditional on the new version -- and succeeded)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import structlog

from broker.config import BrokerConfig
from broker.log_manager import LogManager
from broker.replica_manager import ReplicaManager
from broker.server import default_log_config
from client.kafka.structs import TopicPartition
from client.kafka.znodes import PartitionState, decode_partition_state, encode_partition_state, partition_state_path
from client.zk.exceptions import BadVersionError, NoNodeError
from zkraft_proto import broker_pb2 as pb

TOPIC = "t"
BROKER_ID = 1
STEP_WAIT_S = 10.0


class GatedStateZnode:
    """One partition-state znode whose reads wait for `gate`, with ZooKeeper's conditional set."""

    def __init__(self, state: PartitionState) -> None:
        self.data, self.version = encode_partition_state(state), 0
        self.reading, self.gate = asyncio.Event(), asyncio.Event()

    async def get(self, path: str, watch: Any = None) -> tuple[bytes, Any]:
        if path != partition_state_path(TOPIC, 0):
            raise NoNodeError(path)  # no topic config: the broker's defaults
        self.reading.set()
        await self.gate.wait()
        return self.data, SimpleNamespace(version=self.version)

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        if version not in (-1, self.version):
            raise BadVersionError(path)
        self.data, self.version = data, self.version + 1
        return SimpleNamespace(version=self.version)

    def controller_writes(self, state: PartitionState) -> None:
        self.data, self.version = encode_partition_state(state), self.version + 1


def leader_and_isr(leader_epoch: int, isr: tuple[int, ...], zk_version: int) -> pb.LeaderAndIsrRequest:
    state = pb.LeaderAndIsrPartitionState(
        topic_name=TOPIC, partition_index=0, controller_epoch=1, leader=BROKER_ID, leader_epoch=leader_epoch,
        isr=isr, replicas=(1, 2, 3), zk_version=zk_version,
    )  # fmt: skip
    return pb.LeaderAndIsrRequest(controller_id=2, controller_epoch=1, partition_states=[state])


def test_an_isr_write_overtaken_by_a_newer_leader_epoch_is_dropped(tmp_path: Path) -> None:
    asyncio.run(_overtaken(tmp_path))


async def _overtaken(root: Path) -> None:
    config = BrokerConfig(broker_id=BROKER_ID, log_dirs=(str(root),))
    logger = structlog.get_logger("test")
    znode = GatedStateZnode(PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1))
    replicas = ReplicaManager(config, LogManager(config.directories, default_log_config(config), logger), znode, logger)  # type: ignore[arg-type]
    await replicas.become_leader_or_follower(leader_and_isr(0, (1, 2, 3), 0))
    partition = replicas.partitions[TopicPartition(TOPIC, 0)]
    replicas._start_isr_update(partition, (1, 2), "shrinking ISR, out of sync replicas [3]")
    await asyncio.wait_for(znode.reading.wait(), STEP_WAIT_S)  # the leader is reading the znode for its ELR
    # Meanwhile the controller removes 3 from the ISR with a new leader epoch and tells the leader.
    znode.controller_writes(PartitionState(leader=1, leader_epoch=1, isr=(1, 2), controller_epoch=1))
    await replicas.become_leader_or_follower(leader_and_isr(1, (1, 2), 1))
    znode.gate.set()
    for _ in range(100):  # bounded: the write task needs a few loop turns
        await asyncio.sleep(0)
    written = decode_partition_state(TOPIC, 0, znode.data)
    assert (written.leader_epoch, znode.version) == (1, 1), f"leader epoch went back: {written} at {znode.version}"
    assert partition.leader_epoch == 1 and partition.zk_version == 1
