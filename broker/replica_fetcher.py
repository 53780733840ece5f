"""Followers copy their leaders' logs with the Fetch API consumers use (Kafka's `ReplicaFetcherThread`).

One fetcher task per leader broker fetches every partition this broker
follows from it, in one request (replica_id = this broker's id, fetch offset
= the local LEO). The leader reads a follower's fetch offset as its LEO; the
response's high watermark becomes the follower's (capped by its own LEO).

Before a partition's first fetch from a new leader the follower truncates
(KIP-101): it asks the leader for the end offset of its own latest leader
epoch and cuts its log there, never blindly to its high watermark. A fetch
answered OFFSET_OUT_OF_RANGE truncates to the leader's LEO when the follower
is ahead, or restarts the log at the leader's log start offset when behind it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc

from broker.config import BrokerConfig
from broker.replication_throttle import ReplicationThrottle
from broker.tls_settings import grpc_tls
from client.kafka import errors
from client.kafka.structs import TopicPartition
from runtime import grpc_channels
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

UNDEFINED_EPOCH = -1
# Errors that mean "the leader moved or is not ready yet": wait for the controller's next word.
_LEADERSHIP_ERRORS = frozenset(
    {
        errors.NotLeaderForPartitionError.code,
        errors.FencedLeaderEpochError.code,
        errors.UnknownLeaderEpochError.code,
        errors.UnknownTopicOrPartitionError.code,
    }
)


@dataclass(slots=True)
class FetchState:
    needs_truncation: bool = True
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, leader_id: int, address: str, manager: ReplicaFetcherManager) -> None:
        self.leader_id = leader_id
        self.address = address
        self._manager = manager
        self._rm = manager.replica_manager
        self._config: BrokerConfig = manager.config
        self._log = manager.log.bind(leader=leader_id)
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def add(self, tp: TopicPartition) -> None:
        self.partitions[tp] = FetchState()
        self._changed.set()

    async def _run(self) -> None:
        backoff = self._config.replica_fetch_backoff_ms / 1000
        async with grpc_channels.aio_channel(self.address, self._manager.tls) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            while True:
                if not self.partitions:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                try:
                    await self._manager.throttle.ensure_started()
                    await self._manager.throttle.ensure_topics({tp.topic for tp in self.partitions})
                    await self._truncate_if_needed(stub)
                    fetched = await self._fetch_once(stub)
                except grpc.aio.AioRpcError as exc:
                    self._log.info("replica_fetch_failed", code=exc.code().name, details=exc.details())
                    fetched = False
                if not fetched:
                    self._changed.clear()
                    try:
                        await asyncio.wait_for(self._changed.wait(), backoff)
                    except TimeoutError:
                        pass

    async def _truncate_if_needed(self, stub: broker_pb2_grpc.BrokerStub) -> None:
        pending = [tp for tp, state in self.partitions.items() if state.needs_truncation]
        if not pending:
            return
        request = pb.OffsetForLeaderEpochRequest(replica_id=self._config.broker_id)
        by_topic: dict[str, Any] = {}
        for tp in pending:
            partition = self._rm.partitions.get(tp)
            if partition is None:
                continue
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = request.topics.add(topic=tp.topic)
            topic.partitions.add(
                partition=tp.partition,
                current_leader_epoch=partition.leader_epoch,
                leader_epoch=partition.log.leader_epoch_cache.latest_epoch,
            )
        response = await stub.OffsetForLeaderEpoch(request, timeout=self._config.request_timeout_ms / 1000)
        truncated = False
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic, result.partition)
                state = self.partitions.get(tp)
                partition = self._rm.partitions.get(tp)
                if state is None or partition is None or partition.is_leader:
                    continue
                if result.error_code in _LEADERSHIP_ERRORS:
                    state.delayed_until = asyncio.get_running_loop().time() + 0.1
                    continue
                log = partition.log
                if result.error_code != errors.NONE:
                    self._log.warning(
                        "epoch_lookup_failed", topic=tp.topic, partition=tp.partition, code=result.error_code
                    )
                    continue
                if result.end_offset == UNDEFINED_EPOCH or result.leader_epoch == UNDEFINED_EPOCH:
                    # No common epoch (an empty or pre-epoch log): the HW is all we know to be shared.
                    target = min(partition.high_watermark, log.log_end_offset)
                else:
                    target = min(result.end_offset, log.log_end_offset)
                if target < log.log_end_offset:
                    self._log.info(
                        "follower_truncating",
                        topic=tp.topic,
                        partition=tp.partition,
                        from_offset=log.log_end_offset,
                        to_offset=target,
                        leader_epoch=result.leader_epoch,
                    )
                    log.truncate_to(target)
                    partition.high_watermark = min(partition.high_watermark, log.log_end_offset)
                    truncated = True
                state.needs_truncation = False
        if truncated:
            # As Kafka's LogManager.truncateTo: the checkpoints follow a truncation at once, so that a
            # restart does not mistake the cut for a recovery that lost checkpointed data.
            self._rm.checkpoint_hw()

    async def _fetch_once(self, stub: broker_pb2_grpc.BrokerStub) -> bool:
        """One fetch round; False when nothing could be fetched (back off)."""
        config = self._config
        request = pb.FetchRequest(
            replica_id=config.broker_id,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes,
        )
        now = asyncio.get_running_loop().time()
        asked: dict[TopicPartition, int] = {}
        by_topic: dict[str, Any] = {}
        # Follower replication throttle (broker/replication_throttle.py): while the quota is in debt,
        # throttled partitions sit out; the others are fetched as usual.
        throttle = self._manager.throttle
        throttled_wait = throttle.delay_s() > 0
        throttled: set[TopicPartition] = set()
        for tp, state in self.partitions.items():
            partition = self._rm.partitions.get(tp)
            if state.needs_truncation or state.delayed_until > now or partition is None or partition.is_leader:
                continue
            max_bytes = config.replica_fetch_max_bytes
            if throttle.is_throttled(tp):
                if throttled_wait:
                    continue
                throttled.add(tp)
                max_bytes = throttle.fetch_bytes(max_bytes)
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = request.topics.add(topic=tp.topic)
            leo = partition.log.log_end_offset
            topic.partitions.add(
                partition=tp.partition,
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=leo,
                log_start_offset=partition.log.log_start_offset,
                partition_max_bytes=max_bytes,
            )
            asked[tp] = leo
        if not asked:
            return False
        timeout = (config.replica_fetch_wait_max_ms + config.request_timeout_ms) / 1000
        response = await stub.Fetch(request, timeout=timeout)
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition)
                if tp in throttled:
                    throttle.record(len(data.records))
                if tp in self.partitions and tp in asked:
                    self._handle_partition(tp, data, asked[tp])
        return True  # the fetch itself long-polled: go again at once

    def _handle_partition(self, tp: TopicPartition, data: pb.FetchPartitionData, fetch_offset: int) -> None:
        partition = self._rm.partitions.get(tp)
        state = self.partitions[tp]
        if partition is None or partition.is_leader or partition.log.log_end_offset != fetch_offset:
            return  # the partition changed while the fetch was in flight
        code = data.error_code
        if code == errors.NONE:
            try:
                self._rm.append_as_follower(tp, data.records, data.high_watermark, data.log_start_offset)
                # Kafka's FetcherLagStats: how far this replica is behind the leader's high watermark.
                self._manager.lag_by_partition[tp] = max(0, data.high_watermark - partition.log.log_end_offset)
            except ValueError as exc:  # the leader's batches do not line up with ours: truncate first
                self._log.warning("follower_append_misaligned", topic=tp.topic, partition=tp.partition, error=str(exc))
                state.needs_truncation = True
            return
        if code == errors.OffsetOutOfRangeError.code:
            log = partition.log
            if data.log_end_offset >= 0 and log.log_end_offset > data.log_end_offset:
                log.truncate_to(data.log_end_offset)
            else:
                log.truncate_fully_and_start_at(max(data.log_start_offset, 0))
            partition.high_watermark = min(partition.high_watermark, log.log_end_offset)
            self._rm.checkpoint_hw()
            self._log.info(
                "follower_offset_out_of_range", topic=tp.topic, partition=tp.partition, now=log.log_end_offset
            )
            return
        if code in _LEADERSHIP_ERRORS:
            state.delayed_until = asyncio.get_running_loop().time() + 0.1
            return
        self._log.warning("replica_fetch_partition_error", topic=tp.topic, partition=tp.partition, code=code)
        state.delayed_until = asyncio.get_running_loop().time() + self._config.replica_fetch_backoff_ms / 1000


class ReplicaFetcherManager:
    def __init__(self, config: BrokerConfig, replica_manager: Any, logger: Any) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.log = logger
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}
        self.lag_by_partition: dict[TopicPartition, int] = {}  # replicafetchermanager MaxLag is their max
        self.throttle = ReplicationThrottle(config.broker_id, getattr(replica_manager, "zk", None), logger)
        self.tls = grpc_tls(config)  # security.inter.broker.protocol=SSL: fetches over TLS

    def add_partitions(self, leaders: dict[TopicPartition, int], addresses: dict[int, str]) -> None:
        for tp, leader in leaders.items():
            self._remove(tp)
            address = addresses.get(leader)
            if address is None:
                self.log.warning("leader_address_unknown", topic=tp.topic, partition=tp.partition, leader=leader)
                continue
            fetcher = self._fetchers.get(leader)
            if fetcher is not None and fetcher.address != address:
                self._retire(leader)
                fetcher = None
            if fetcher is None:
                fetcher = self._fetchers[leader] = ReplicaFetcher(leader, address, self)
                fetcher.start()
            fetcher.add(tp)
            self._leader_of[tp] = leader

    def is_fetching(self, tp: TopicPartition) -> bool:
        return tp in self._leader_of

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self._remove(tp)

    def _remove(self, tp: TopicPartition) -> None:
        leader = self._leader_of.pop(tp, None)
        self.lag_by_partition.pop(tp, None)
        if leader is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is not None:
            fetcher.partitions.pop(tp, None)
            if not fetcher.partitions:
                self._retire(leader)

    def _retire(self, leader: int) -> None:
        fetcher = self._fetchers.pop(leader, None)
        if fetcher is not None:
            for tp in fetcher.partitions:
                self._leader_of.pop(tp, None)
            asyncio.ensure_future(fetcher.stop())

    async def stop(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._leader_of.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        await self.throttle.stop()
