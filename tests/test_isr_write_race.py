"""A leader's ISR writes racing ZooKeeper, found by the Kafka fault campaign.

* Seed 305: a write never puts the partition's leader epoch back (the leader read the state znode for its ELR,
  the controller's LeaderAndIsr of the next epoch arrived meanwhile, and the write of the old epoch went out
  conditional on the new version -- and succeeded).
* Seed 67: an expansion whose ZooKeeper reply was lost. ZooKeeper held the larger ISR, the leader kept the
  smaller one and acknowledged acks=all records the added replica lacked; the controller then elected that
  replica and the records were lost. The leader now counts the replica being added at once (KIP-497's maximal
  ISR) and settles the write by reading the znode back (Kafka's ReplicationUtils.checkLeaderAndIsrZkData)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import structlog

from broker.config import BrokerConfig
from broker.log_manager import LogManager
from broker.partition import Partition
from broker.replica_manager import ReplicaManager
from broker.server import default_log_config
from client.kafka.records import RecordBatchBuilder
from client.kafka.structs import TopicPartition
from client.kafka.znodes import PartitionState, decode_partition_state, encode_partition_state, partition_state_path
from client.zk.exceptions import BadVersionError, ConnectionLoss, NoNodeError
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


class LossyStateZnode(GatedStateZnode):
    """A state znode that applies the next write and then loses its reply, as a cut-off connection does."""

    def __init__(self, state: PartitionState) -> None:
        super().__init__(state)
        self.gate.set()
        self.lose_next_reply, self.writes_answered = False, asyncio.Event()

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        try:
            stat = await super().set(path, data, version)
            if self.lose_next_reply:
                self.lose_next_reply = False
                raise ConnectionLoss(path)
            return stat
        finally:
            self.writes_answered.set()


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


def one_record() -> bytes:
    builder = RecordBatchBuilder(base_timestamp_ms=1_700_000_000_000)
    builder.append(None, b"acknowledged")
    return builder.build()


def follower_fetch(replica_id: int, fetch_offset: int) -> pb.FetchRequest:
    item = pb.FetchPartition(partition=0, current_leader_epoch=0, fetch_offset=fetch_offset, log_start_offset=0)
    return pb.FetchRequest(replica_id=replica_id, max_wait_ms=0, topics=[pb.FetchTopic(topic=TOPIC, partitions=[item])])


async def settle(znode: LossyStateZnode) -> None:
    await asyncio.wait_for(znode.writes_answered.wait(), STEP_WAIT_S)
    znode.writes_answered.clear()
    for _ in range(100):  # bounded: the write task handles the answer in a few loop turns
        await asyncio.sleep(0)


async def _leader_of_isr_1_2(root: Path) -> tuple[ReplicaManager, Partition, LossyStateZnode]:
    """Broker 1 leading the partition with ISR (1, 2) in ZooKeeper, min.insync.replicas 2."""
    config = BrokerConfig(broker_id=BROKER_ID, log_dirs=(str(root),), min_insync_replicas=2)
    logger = structlog.get_logger("test")
    znode = LossyStateZnode(PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1))
    replicas = ReplicaManager(config, LogManager(config.directories, default_log_config(config), logger), znode, logger)  # type: ignore[arg-type]
    await replicas.become_leader_or_follower(leader_and_isr(0, (1, 2), 0))
    partition = replicas.partitions[TopicPartition(TOPIC, 0)]
    return replicas, partition, znode


def test_a_replica_whose_isr_addition_lost_its_reply_must_have_a_record_before_it_is_acknowledged(
    tmp_path: Path,
) -> None:
    asyncio.run(_lost_expansion_reply(tmp_path))


async def _lost_expansion_reply(root: Path) -> None:
    replicas, partition, znode = await _leader_of_isr_1_2(root)
    # Broker 3 caught up: the leader adds it; ZooKeeper takes the write but its reply is lost.
    znode.lose_next_reply = True
    await replicas.fetch(follower_fetch(3, 0))
    await settle(znode)
    assert decode_partition_state(TOPIC, 0, znode.data).isr == (1, 2, 3)
    # acks=all with min.insync.replicas 2: broker 2 has the record, broker 3 (in ZooKeeper's ISR) not yet.
    data = pb.PartitionProduceData(index=0, records=one_record())
    request = pb.ProduceRequest(acks=-1, timeout_ms=10_000, topics=[pb.TopicProduceData(name=TOPIC, partitions=[data])])
    produce = asyncio.create_task(replicas.produce(request))
    await replicas.fetch(follower_fetch(2, 1))
    for _ in range(100):  # bounded: give a wrongly completed produce every chance to finish
        await asyncio.sleep(0)
    assert not produce.done(), "acknowledged while broker 3, in ZooKeeper's ISR, lacked the record"
    assert partition.high_watermark == 0
    await replicas.fetch(follower_fetch(3, 1))
    answer = await asyncio.wait_for(produce, STEP_WAIT_S)
    assert answer.responses[0].partitions[0].error_code == 0
    # The periodic ISR check sends the write again: BADVERSION, and the znode holds what was written.
    replicas.shrink_isrs()
    await settle(znode)
    assert (partition.isr, partition.zk_version, partition.isr_update_pending) == ((1, 2, 3), 1, False)
    assert partition.maximal_isr == (1, 2, 3)


def test_an_isr_write_of_unknown_outcome_overtaken_by_the_controller_waits_for_its_leader_and_isr(
    tmp_path: Path,
) -> None:
    asyncio.run(_overtaken_unknown_write(tmp_path))


async def _overtaken_unknown_write(root: Path) -> None:
    replicas, partition, znode = await _leader_of_isr_1_2(root)
    znode.lose_next_reply = True
    await replicas.fetch(follower_fetch(3, 0))
    await settle(znode)
    # The controller moved on (broker 3 leads at epoch 1): the write is stale, the maximal ISR holds.
    znode.controller_writes(PartitionState(leader=3, leader_epoch=1, isr=(3, 1, 2), controller_epoch=1))
    replicas.shrink_isrs()
    await settle(znode)
    assert (partition.isr, partition.maximal_isr, partition.isr_update_pending) == ((1, 2), (1, 2, 3), True)
    assert decode_partition_state(TOPIC, 0, znode.data).leader == 3, "the stale leader overwrote the controller"
