"""The partitions this broker hosts, as leader or follower (Kafka's `ReplicaManager`).

* LeaderAndIsr (`become_leader_or_follower`): fenced by controller epoch and
  leader epoch (docs/research/kafka.md §2.9); makes partitions leaders or followers
  and hands followers to the fetcher manager.
* Produce (`produce`): append as leader; acks=1 answers after the local write,
  acks=-1 waits (delayed produce) until the HW passes the last offset, failing
  with NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas
  before the append and NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank after.
* Fetch (`fetch`): consumers read up to the HW, followers up to the LEO; a
  follower's fetch offset is its LEO on the leader. Delayed fetch: the request
  waits, woken by appends and HW moves, until `min_bytes` are there or
  `max_wait_ms` has passed.
* ISR maintenance: a task shrinks the ISR of followers that fell behind
  `replica.lag.time.max.ms`; a follower that caught up is added back. Each
  change is a conditional write of the partition's state znode (expected zk
  version) followed by an ISR change notification for the controller.

Everything runs on the broker's one event loop; appends and reads are plain
page-cache file I/O, done inline (Kafka does not fsync on append either).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.broker_stats import BrokerTopicStats
from broker.config import BrokerConfig
from broker.controller.election import next_eligible_leader_replicas
from broker.fetch_response import FetchReply
from broker.log import LogError, OffsetOutOfRangeError
from broker.log.epoch_cache import EpochEndOffset
from broker.log_manager import LogManager
from broker.partition import Partition
from broker.periodic import every
from broker.request_bounds import release_request_bytes
from broker.state_change_log import leader_and_isr_partition_text
from broker.topic_config import log_config_for
from client.kafka import errors
from client.kafka.records import CorruptRecordError, RecordsError
from client.kafka.structs import TopicPartition
from client.kafka.znodes import (
    ISR_CHANGE_NOTIFICATION_PATH,
    PartitionState,
    decode_config,
    decode_partition_state,
    encode_isr_change,
    encode_partition_state,
    partition_state_path,
    topic_config_path,
    validate_topic_name,
)
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import BadVersionError, NoNodeError
from zkraft_proto import broker_pb2 as pb

NONE = errors.NONE
CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
# Kafka 2.8 ProduceRequest.validateRecords (v3+, every version this broker speaks) refuses a partition whose
# records hold no batch: InvalidRecordException("Produce requests with version " + version + " must have at least
# one record batch"), INVALID_RECORD for that partition, no offset assigned.
EMPTY_PRODUCE_MESSAGE = "Produce requests with version 3 and above must have at least one record batch"


def _is_valid_partition(tp: TopicPartition) -> bool:
    """A topic name Kafka accepts (Topic.validate) and a partition id that is not negative."""
    try:
        validate_topic_name(tp.topic)
    except errors.InvalidTopicError:
        return False
    return tp.partition >= 0


def leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> int:
    """The error for a request that names the leader epoch it believes current (KIP-320; Kafka 2.8
    Partition.checkCurrentLeaderEpoch): FENCED_LEADER_EPOCH when it is older than this replica's, so the
    client refreshes its metadata; UNKNOWN_LEADER_EPOCH when newer, as this replica has not heard of it yet;
    -1 means the client does not know the epoch and is not checked."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return NONE
    if current_leader_epoch < leader_epoch:
        return errors.FencedLeaderEpochError.code
    return errors.UnknownLeaderEpochError.code


def _resolved(future: asyncio.Future[None], done: bool) -> bool:
    """Resolves `future` when `done`; returns `done`."""
    if done:
        future.set_result(None)
    return done


@dataclass(frozen=True, slots=True)
class _IsrWrite:
    """One leader's ISR write: the state written, the znode version it is conditional on, and why."""

    state: PartitionState
    zk_version: int
    why: str

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        logs: LogManager,
        zk: AsyncZkClient,
        logger: Any,
        state_change: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.logs = logs
        self.zk = zk
        self._log = logger
        self._state_change = state_change
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.topic_configs: dict[str, dict[str, str]] = {}
        # Delayed produce: tp -> [(required offset, future)], resolved as the HW passes.
        self._produce_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[int]]]] = {}
        # Delayed fetch: futures woken by any append or HW move of one of their partitions.
        self._fetch_waiters: dict[TopicPartition, list[asyncio.Future[None]]] = {}
        # Delayed DeleteRecords: tp -> [(requested log start offset, future)], resolved as the low watermark
        # (the ISR's smallest log start offset) reaches it (Kafka's DelayedDeleteRecords).
        self._delete_records_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[None]]]] = {}
        self._isr_changes: set[TopicPartition] = set()
        # ISR writes whose outcome is unknown (the reply was lost), sent again by the periodic ISR check.
        self._unsettled_isr_writes: dict[TopicPartition, _IsrWrite] = {}
        self._last_isr_change_ms = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.fetchers: Any = None  # ReplicaFetcherManager, set by the server (it needs this object too)
        self.stats = BrokerTopicStats()  # messages/bytes in and out, ISR changes (broker/metrics.py reads them)
        # Told (tp, is_leader) after each LeaderAndIsr/StopReplica change (the group coordinator).
        self._leadership_listeners: list[Callable[[TopicPartition, bool], None]] = []

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(every(self.config.replica_lag_time_max_ms / 2000, self.shrink_isrs, self._log)),
            asyncio.create_task(
                every(self.config.replica_high_watermark_checkpoint_interval_ms / 1000, self.checkpoint_hw, self._log)
            ),
            asyncio.create_task(
                every(self.config.isr_change_propagation_interval_ms / 1000, self.propagate_isr_changes, self._log)
            ),
            asyncio.create_task(every(1.0, self._maybe_flush_logs, self._log)),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks = []
        for waiters in self._produce_waiters.values():
            for _, future in waiters:
                if not future.done():
                    future.set_exception(errors.NotLeaderForPartitionError("the broker is shutting down"))
        self._produce_waiters.clear()
        self.checkpoint_hw()

    def checkpoint_hw(self) -> None:
        self.logs.write_high_watermarks({tp: p.high_watermark for tp, p in self.partitions.items()})
        self.logs.flush_checkpoints()

    def _maybe_flush_logs(self) -> None:
        for _, log in self.logs:
            log.maybe_flush()

    # ---------------------------------------------------------------- wake-ups

    def _wake_fetchers(self, tp: TopicPartition) -> None:
        waiters = self._fetch_waiters.pop(tp, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def _complete_produces(self, partition: Partition) -> None:
        waiters = self._produce_waiters.get(partition.tp)
        if not waiters:
            return
        hw = partition.high_watermark
        remaining = []
        for required, future in waiters:
            if future.done():
                continue
            if not partition.is_leader:
                future.set_exception(errors.NotLeaderForPartitionError(f"{partition.tp}: leadership moved"))
            elif hw >= required:
                # The maximal ISR, as Kafka's checkEnoughReplicasReachOffset (KIP-497): the HW counted it.
                if len(partition.maximal_isr) < self._min_isr(partition.tp.topic):
                    future.set_exception(
                        errors.NotEnoughReplicasAfterAppendError(
                            f"{partition.tp}: ISR {list(partition.maximal_isr)} shrank below min.insync.replicas "
                            f"{self._min_isr(partition.tp.topic)} after the append"
                        )
                    )
                else:
                    future.set_result(hw)
            else:
                remaining.append((required, future))
        if remaining:
            self._produce_waiters[partition.tp] = remaining
        else:
            del self._produce_waiters[partition.tp]

    def _hw_moved(self, partition: Partition) -> None:
        self._complete_produces(partition)
        self._wake_fetchers(partition.tp)

    def _min_isr(self, topic: str) -> int:
        raw = self.topic_configs.get(topic, {}).get("min.insync.replicas")
        return int(raw) if raw is not None else self.config.min_insync_replicas

    # ---------------------------------------------------------------- LeaderAndIsr / StopReplica

    async def _topic_config(self, topic: str) -> dict[str, str]:
        cached = self.topic_configs.get(topic)
        if cached is not None:
            return cached
        try:
            data, _ = await self.zk.get(topic_config_path(topic))
            overrides = decode_config(data)
        except NoNodeError:
            overrides = {}
        self.topic_configs[topic] = overrides
        return overrides

    def apply_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """A topic's config changed (/config/changes): its logs take the new settings at once."""
        self.topic_configs[topic] = dict(overrides)
        log_config = log_config_for(self.config, overrides, self._log)
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.log.config = log_config

    async def become_leader_or_follower(self, request: pb.LeaderAndIsrRequest) -> pb.LeaderAndIsrResponse:
        if request.controller_epoch < self.controller_epoch:
            self._log.warning(
                "stale_controller_epoch",
                request="LeaderAndIsr",
                controller_id=request.controller_id,
                epoch=request.controller_epoch,
                known=self.controller_epoch,
            )
            return pb.LeaderAndIsrResponse(error_code=errors.StaleControllerEpochError.code)
        self.controller_epoch = request.controller_epoch
        response = pb.LeaderAndIsrResponse()
        new_followers: dict[TopicPartition, int] = {}
        stopped_following: list[TopicPartition] = []
        clock = now_ms()
        for state in request.partition_states:
            tp = TopicPartition(state.topic_name, state.partition_index)
            self._state_change(
                f"Received LeaderAndIsr request {leader_and_isr_partition_text(state)} correlation id "
                f"{request.correlation_id} from controller {request.controller_id} epoch {request.controller_epoch}"
            )
            error = await self._apply_partition_state(tp, state, request, clock, new_followers, stopped_following)
            response.partition_errors.append(
                pb.PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=error)
            )
        if self.fetchers is not None:
            self.fetchers.remove_partitions(stopped_following)
            addresses = {leader.broker_id: f"{leader.host_name}:{leader.port}" for leader in request.live_leaders}
            self.fetchers.add_partitions(new_followers, addresses)
        self._notify_leadership(
            [TopicPartition(e.topic_name, e.partition_index) for e in response.partition_errors if e.error_code == NONE]
        )
        return response

    async def _apply_partition_state(
        self,
        tp: TopicPartition,
        state: pb.LeaderAndIsrPartitionState,
        request: pb.LeaderAndIsrRequest,
        clock: int,
        new_followers: dict[TopicPartition, int],
        stopped_following: list[TopicPartition],
    ) -> int:
        if self.broker_id not in state.replicas:
            return errors.UnknownTopicOrPartitionError.code
        if tp not in self.partitions and not _is_valid_partition(tp):
            # The name becomes a directory: "../x" or "a/b" must never reach the file system.
            return errors.InvalidTopicError.code
        partition = self.partitions.get(tp)
        if partition is not None and state.leader_epoch <= partition.leader_epoch:
            self._state_change(
                f"Ignoring LeaderAndIsr request from controller {request.controller_id} with correlation id "
                f"{request.correlation_id} "
                f"epoch {request.controller_epoch} for partition {tp} since its associated leader epoch "
                f"{state.leader_epoch} is not higher than the current leader epoch {partition.leader_epoch}"
            )
            return errors.StaleControllerEpochError.code
        if partition is None:
            overrides = await self._topic_config(tp.topic)
            log = self.logs.get_or_create(tp, log_config_for(self.config, overrides, self._log))
            hw = min(self.logs.high_watermarks.get(tp, 0), log.log_end_offset)
            partition = Partition(tp, self.broker_id, log, high_watermark=hw)
            self.partitions[tp] = partition
        isr, replicas = tuple(state.isr), tuple(state.replicas)
        partition.controller_epoch = state.controller_epoch
        if state.leader == self.broker_id:
            partition.make_leader(state.leader_epoch, isr, replicas, state.zk_version, clock)
            stopped_following.append(tp)
            if partition.maybe_increment_hw():
                self._hw_moved(partition)
            self._state_change(
                f"Leader {tp} starts at leader epoch {state.leader_epoch} from offset {partition.leo} "
                f"with high watermark {partition.high_watermark}. Previous leader epoch was {state.leader_epoch - 1}."
            )
        else:
            if partition.make_follower(state.leader, state.leader_epoch, isr, replicas, state.zk_version):
                new_followers[tp] = state.leader
            # A demoted leader's waiting produces can no longer succeed here.
            self._complete_produces(partition)
            self._wake_fetchers(tp)
            self._state_change(
                f"Follower {tp} starts at leader epoch {state.leader_epoch} from offset {partition.leo} "
                f"with high watermark {partition.high_watermark}. Current leader is {state.leader}."
            )
        return NONE

    async def stop_replicas(self, request: pb.StopReplicaRequest) -> pb.StopReplicaResponse:
        if request.controller_epoch < self.controller_epoch:
            return pb.StopReplicaResponse(error_code=errors.StaleControllerEpochError.code)
        self.controller_epoch = request.controller_epoch
        response = pb.StopReplicaResponse()
        stopped = []
        for item in request.partitions:
            tp = TopicPartition(item.topic_name, item.partition_index)
            partition = self.partitions.get(tp)
            error = NONE
            if partition is not None and item.leader_epoch >= 0 and item.leader_epoch < partition.leader_epoch:
                error = errors.FencedLeaderEpochError.code
            else:
                stopped.append(tp)
                if partition is not None:
                    partition.leader = -1
                    self._complete_produces(partition)
                    self._wake_fetchers(tp)
                if item.delete_partition:
                    self.partitions.pop(tp, None)
                    self.logs.delete(tp)
                    self.topic_configs.pop(tp.topic, None)
            response.partition_errors.append(
                pb.PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=error)
            )
        if self.fetchers is not None:
            self.fetchers.remove_partitions(stopped)
        self._notify_leadership(stopped)
        return response

    # ---------------------------------------------------------------- produce

    async def produce(self, request: pb.ProduceRequest) -> pb.ProduceResponse:
        acks = request.acks
        response = pb.ProduceResponse()
        waits: list[tuple[pb.PartitionProduceResponse, asyncio.Future[int], TopicPartition]] = []
        for topic_data in request.topics:
            topic_response = response.responses.add(name=topic_data.name)
            for data in topic_data.partitions:
                result = topic_response.partitions.add(index=data.index, base_offset=-1, log_append_time_ms=-1)
                if acks not in (0, 1, -1):
                    result.error_code = errors.InvalidRequiredAcksError.code
                    continue
                if not data.records:
                    result.error_code = errors.InvalidRecordError.code
                    result.error_message = EMPTY_PRODUCE_MESSAGE
                    continue
                tp = TopicPartition(topic_data.name, data.index)
                future = self._append_as_leader(tp, data.records, acks, result)
                if future is not None:
                    waits.append((result, future, tp))
        if waits:
            release_request_bytes()  # appended: what is left is a wait (Kafka's delayed produce)
            await self._await_produces(waits, request.timeout_ms)
        return response

    def _append_as_leader(
        self, tp: TopicPartition, records: bytes, acks: int, result: pb.PartitionProduceResponse
    ) -> asyncio.Future[int] | None:
        partition = self.partitions.get(tp)
        if partition is None:
            result.error_code = errors.UnknownTopicOrPartitionError.code
            result.error_message = f"This server does not host {tp}."
            return None
        if not partition.is_leader:
            result.error_code = errors.NotLeaderForPartitionError.code
            result.error_message = f"This server is not the leader for {tp}."
            return None
        if acks == -1 and len(partition.isr) < self._min_isr(tp.topic):
            result.error_code = errors.NotEnoughReplicasError.code
            result.error_message = (
                f"The size of the current ISR {list(partition.isr)} is insufficient to satisfy the min.isr "
                f"requirement of {self._min_isr(tp.topic)} for partition {tp}"
            )
            return None
        log = partition.log
        # LogAppendTime: the time stamped into the batches is the one the response reports (K28 LogValidator).
        append_time_ms = time.time_ns() // 1_000_000 if log.config.log_append_time else -1
        try:
            first, last, append_time_ms = log.append_leader(
                bytearray(records),
                partition.leader_epoch,
                append_time_ms=append_time_ms if append_time_ms >= 0 else None,
            )
        except CorruptRecordError as exc:
            result.error_code = errors.CorruptRecordError.code
            result.error_message = f"{tp}: {exc}"
            return None
        except RecordsError as exc:
            result.error_code = errors.InvalidRecordError.code
            result.error_message = f"{tp}: {exc}"
            return None
        except LogError as exc:
            result.error_code = exc.error_code
            result.error_message = str(exc)
            return None
        result.base_offset = first
        counters = self.stats.topic(tp.topic)
        counters.messages_in += last - first + 1
        counters.bytes_in += len(records)
        result.log_append_time_ms = append_time_ms
        result.log_start_offset = log.log_start_offset
        if partition.maybe_increment_hw():
            self._complete_produces(partition)
        self._wake_fetchers(tp)
        if acks != -1 or partition.high_watermark > last:
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._produce_waiters.setdefault(tp, []).append((last + 1, future))
        return future

    async def _await_produces(
        self,
        waits: list[tuple[pb.PartitionProduceResponse, asyncio.Future[int], TopicPartition]],
        timeout_ms: int,
    ) -> None:
        futures = [future for _, future, _ in waits]
        timeout = timeout_ms / 1000 if timeout_ms > 0 else self.config.request_timeout_ms / 1000
        await asyncio.wait(futures, timeout=timeout)
        for result, future, tp in waits:
            if not future.done():
                future.cancel()
                result.error_code = errors.RequestTimedOutError.code
                result.error_message = f"{tp}: the ISR did not acknowledge offset {result.base_offset} in time"
            elif future.exception() is not None:
                exc = future.exception()
                assert isinstance(exc, errors.KafkaError)
                result.error_code = exc.code
                result.error_message = str(exc)

    # ---------------------------------------------------------------- internal topics (group coordinator)

    async def append_internal(self, tp: TopicPartition, records: bytes, timeout_ms: int) -> int:
        """Appends `records` as leader with acks=-1 and returns their base offset once the HW passed them.

        Raises the Kafka error otherwise (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...).
        """
        result = pb.PartitionProduceResponse(index=tp.partition, base_offset=-1, log_append_time_ms=-1)
        future = self._append_as_leader(tp, records, -1, result)
        if future is not None:
            await self._await_produces([(result, future, tp)], timeout_ms)
        if result.error_code != NONE:
            raise errors.error_for(result.error_code, result.error_message)
        return result.base_offset

    def on_leadership_change(self, callback: Callable[[TopicPartition, bool], None]) -> None:
        """`callback(tp, is_leader)` after every LeaderAndIsr or StopReplica that changed `tp` here."""
        self._leadership_listeners.append(callback)

    def _notify_leadership(self, changed: list[TopicPartition]) -> None:
        for tp in changed:
            partition = self.partitions.get(tp)
            is_leader = partition is not None and partition.is_leader
            for callback in self._leadership_listeners:
                try:
                    callback(tp, is_leader)
                except Exception as exc:  # a listener's failure must not fail the controller's request
                    self._log.exception(
                        "leadership_listener_failed", topic=tp.topic, partition=tp.partition, error=str(exc)
                    )

    # ---------------------------------------------------------------- fetch

    async def fetch(self, request: pb.FetchRequest) -> FetchReply:
        replica_id = request.replica_id
        is_follower = replica_id >= 0
        # Clamped as Kafka clamps them: a wait of at most fetch.max.wait.ms.max (a negative one answers at once),
        # a response of at most fetch.max.bytes (0 or less: that much; Kafka's ReplicaManager.fetchMessages).
        wait_ms = min(max(request.max_wait_ms, 0), self.config.fetch_max_wait_ms_max)
        deadline = time.monotonic() + wait_ms / 1000
        response_bytes_max = self.config.fetch_max_bytes
        max_bytes = min(request.max_bytes, response_bytes_max) if request.max_bytes > 0 else response_bytes_max
        while True:
            reply, total, errored = self._read(request, replica_id, is_follower, max_bytes)
            remaining = deadline - time.monotonic()
            if total >= max(request.min_bytes, 1) or errored or remaining <= 0:
                return reply
            release_request_bytes()  # a delayed fetch holds no request bytes worth counting
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for topic in request.topics:
                for item in topic.partitions:
                    self._fetch_waiters.setdefault(TopicPartition(topic.topic, item.partition), []).append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                pass
            finally:
                self._drop_waiter(request, waiter)

    def _drop_waiter(self, request: pb.FetchRequest, waiter: asyncio.Future[None]) -> None:
        for topic in request.topics:
            for item in topic.partitions:
                tp = TopicPartition(topic.topic, item.partition)
                waiters = self._fetch_waiters.get(tp)
                if waiters and waiter in waiters:
                    waiters.remove(waiter)
                    if not waiters:
                        del self._fetch_waiters[tp]

    def _read(
        self, request: pb.FetchRequest, replica_id: int, is_follower: bool, max_bytes: int
    ) -> tuple[FetchReply, int, bool]:
        reply = FetchReply()
        total = 0
        errored = False
        clock = now_ms()
        for topic in request.topics:
            topic_response = reply.response.responses.add(topic=topic.topic)
            for item in topic.partitions:
                out = topic_response.partitions.add(partition=item.partition, high_watermark=-1, log_start_offset=-1)
                tp = TopicPartition(topic.topic, item.partition)
                partition = self.partitions.get(tp)
                error = self._check_fetchable(partition, item, replica_id)
                if error != NONE:
                    out.error_code = error
                    errored = True
                    continue
                assert partition is not None
                log = partition.log
                if is_follower and partition.update_follower(
                    replica_id, item.fetch_offset, clock, item.log_start_offset
                ):
                    self._hw_moved(partition)
                if is_follower and tp in self._delete_records_waiters:
                    self._complete_delete_records(partition)
                if is_follower:
                    self._maybe_expand_isr(partition)
                limit = min(item.partition_max_bytes or max_bytes, max_bytes - total)
                try:
                    found = log.read_slice(
                        item.fetch_offset,
                        max(limit, 0),
                        min_one_batch=total == 0,
                        max_offset=None if is_follower or replica_id == DEBUG_REPLICA_ID else partition.high_watermark,
                    )
                except LogError as exc:
                    out.error_code = exc.error_code
                    errored = True
                    out.high_watermark = partition.high_watermark
                    out.log_start_offset = log.log_start_offset
                    out.log_end_offset = log.log_end_offset
                    continue
                out.high_watermark = partition.high_watermark
                out.last_stable_offset = partition.high_watermark
                out.log_start_offset = log.log_start_offset
                out.log_end_offset = log.log_end_offset
                if found is not None and found.length > 0:
                    index = (len(reply.response.responses) - 1, len(topic_response.partitions) - 1)
                    reply.records[index] = found.read()
                    total += found.length
                    if not is_follower:
                        self.stats.topic(tp.topic).bytes_out += found.length
        return reply, total, errored

    def _check_fetchable(self, partition: Partition | None, item: pb.FetchPartition, replica_id: int) -> int:
        if partition is None:
            return errors.UnknownTopicOrPartitionError.code
        if not partition.is_leader and replica_id != DEBUG_REPLICA_ID:
            return errors.NotLeaderForPartitionError.code
        epoch_error = leader_epoch_error(item.current_leader_epoch, partition.leader_epoch)
        if epoch_error != NONE:
            return epoch_error
        if replica_id >= 0 and replica_id not in partition.replicas:
            return errors.NotLeaderForPartitionError.code  # Kafka: the replica is not assigned here
        return NONE

    def diverging_epoch(self, tp: TopicPartition, last_fetched_epoch: int, fetch_offset: int) -> EpochEndOffset | None:
        """KIP-595's check of a fetch that names the epoch of the last batch its client read (Kafka 2.8
        Partition.readRecords with lastFetchedEpoch): when this leader's log ends that epoch before the fetch
        offset, or knows only an older epoch, the client's log diverged and is told where the epoch ends here
        (the fetch answers no records). Raises OffsetOutOfRangeError when the epoch's end is unknown, as Kafka
        does. None when the logs agree (or the epoch is not given)."""
        partition = self.partitions.get(tp)
        if partition is None or last_fetched_epoch < 0:
            return None
        log = partition.log
        found = log.leader_epoch_cache.end_offset_for(last_fetched_epoch, partition.leo)
        if found.end_offset < 0 or found.leader_epoch < 0 or fetch_offset < log.log_start_offset:
            raise OffsetOutOfRangeError(str(tp), fetch_offset, log.log_start_offset, partition.leo)
        if found.leader_epoch < last_fetched_epoch or found.end_offset < fetch_offset:
            return found
        return None

    # ---------------------------------------------------------------- offsets

    def list_offsets(self, request: pb.ListOffsetsRequest) -> pb.ListOffsetsResponse:
        response = pb.ListOffsetsResponse()
        for topic in request.topics:
            topic_response = response.topics.add(name=topic.name)
            for item in topic.partitions:
                out = topic_response.partitions.add(partition_index=item.partition_index, timestamp=-1, offset=-1)
                partition = self.partitions.get(TopicPartition(topic.name, item.partition_index))
                if partition is None:
                    out.error_code = errors.UnknownTopicOrPartitionError.code
                    continue
                if not partition.is_leader and request.replica_id != DEBUG_REPLICA_ID:
                    out.error_code = errors.NotLeaderForPartitionError.code
                    continue
                out.error_code = leader_epoch_error(item.current_leader_epoch, partition.leader_epoch)
                if out.error_code == NONE:
                    out.leader_epoch = partition.leader_epoch
                    self._offset_for_timestamp(partition, item.timestamp, request.replica_id, out)
        return response

    @staticmethod
    def _offset_for_timestamp(
        partition: Partition, timestamp: int, replica_id: int, out: pb.ListOffsetsPartitionResponse
    ) -> None:
        """Kafka 2.8 Partition.fetchOffsetForTimestamp. A consumer sees up to the high watermark (also the last
        stable offset: no transactions), a replica or the debug consumer up to the log end. A new leader whose
        high watermark has not yet reached the start of its epoch answers OFFSET_NOT_AVAILABLE (retriable) for
        LATEST and for a time past what it can show: its high watermark is older than what was acknowledged."""
        log = partition.log
        is_client = replica_id == CONSUMER_REPLICA_ID
        last_fetchable = partition.high_watermark if is_client else log.log_end_offset
        lagging = is_client and partition.leader_epoch_start_offset > partition.high_watermark
        if timestamp == EARLIEST_TIMESTAMP:
            out.offset = log.log_start_offset
            return
        if timestamp != LATEST_TIMESTAMP:
            found = log.offset_for_timestamp(timestamp)
            if found is not None and found[0] < last_fetchable:
                out.offset, out.timestamp = found
                return
        if lagging:
            out.error_code = errors.OffsetNotAvailableError.code
            out.leader_epoch = -1
        elif timestamp == LATEST_TIMESTAMP:
            out.offset = last_fetchable

    def offset_for_leader_epoch(self, request: pb.OffsetForLeaderEpochRequest) -> pb.OffsetForLeaderEpochResponse:
        response = pb.OffsetForLeaderEpochResponse()
        for topic in request.topics:
            topic_response = response.topics.add(topic=topic.topic)
            for item in topic.partitions:
                out = topic_response.partitions.add(partition=item.partition, leader_epoch=-1, end_offset=-1)
                partition = self.partitions.get(TopicPartition(topic.topic, item.partition))
                if partition is None:
                    out.error_code = errors.UnknownTopicOrPartitionError.code
                elif not partition.is_leader:
                    out.error_code = errors.NotLeaderForPartitionError.code
                elif (epoch_error := leader_epoch_error(item.current_leader_epoch, partition.leader_epoch)) != NONE:
                    out.error_code = epoch_error
                else:
                    found = partition.log.leader_epoch_cache.end_offset_for(item.leader_epoch, partition.leo)
                    out.leader_epoch, out.end_offset = found.leader_epoch, found.end_offset
        return response

    # ---------------------------------------------------------------- follower side

    def append_as_follower(
        self, tp: TopicPartition, records: bytes, leader_hw: int, leader_log_start_offset: int = -1
    ) -> None:
        partition = self.partitions.get(tp)
        if partition is None or partition.is_leader:
            return
        if records:
            partition.log.append_as_follower(records)
        new_hw = min(leader_hw, partition.leo)
        if new_hw > partition.high_watermark:
            partition.high_watermark = new_hw
        # Kafka 2.8 ReplicaFetcherThread.processPartitionData: the follower's log start follows the leader's
        # (DeleteRecords, retention), bounded by what it holds below its high watermark.
        new_start = min(leader_log_start_offset, partition.high_watermark)
        if new_start > partition.log.log_start_offset:
            partition.log.maybe_increment_log_start_offset(new_start, "leader_offset_incremented")

    # ---------------------------------------------------------------- records deletion

    async def delete_records(self, request: pb.DeleteRecordsRequest) -> pb.DeleteRecordsResponse:
        """DeleteRecords (KIP-107) on the leader: each partition's log start offset moves to the requested offset.

        Offset -1 means the high watermark; above it the answer is OFFSET_OUT_OF_RANGE (Kafka 2.8
        `Partition.deleteRecordsOnLeader`). The followers follow through the log start offset of their fetches;
        the answer waits (Kafka's DelayedDeleteRecords) until the ISR's low watermark reached the offset, or
        `timeout_ms` passed (REQUEST_TIMED_OUT), and carries the low watermark.
        """
        response = pb.DeleteRecordsResponse()
        waits: list[tuple[pb.DeleteRecordsPartitionResult, TopicPartition, int, asyncio.Future[None]]] = []
        for topic in request.topics:
            topic_result = response.topics.add(name=topic.name)
            for item in topic.partitions:
                out = topic_result.partitions.add(partition_index=item.partition_index, low_watermark=-1)
                tp = TopicPartition(topic.name, item.partition_index)
                out.error_code, out.error_message = self._delete_records_on_leader(tp, item.offset)
                if out.error_code != NONE:
                    continue
                partition = self.partitions[tp]
                required = partition.log.log_start_offset
                if partition.low_watermark() >= required:
                    out.low_watermark = partition.low_watermark()
                    continue
                future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._delete_records_waiters.setdefault(tp, []).append((required, future))
                waits.append((out, tp, required, future))
        if waits:
            release_request_bytes()
            await self._await_delete_records(waits, request.timeout_ms)
        return response

    async def _await_delete_records(
        self,
        waits: list[tuple[pb.DeleteRecordsPartitionResult, TopicPartition, int, asyncio.Future[None]]],
        timeout_ms: int,
    ) -> None:
        timeout_s = (timeout_ms if timeout_ms > 0 else self.config.request_timeout_ms) / 1000
        await asyncio.wait([future for *_, future in waits], timeout=timeout_s)
        for out, tp, required, future in waits:
            partition = self.partitions.get(tp)
            if future.done() and partition is not None:
                out.low_watermark = partition.low_watermark()
                continue
            future.cancel()
            self._drop_delete_records_waiter(tp, future)
            out.error_code = errors.RequestTimedOutError.code
            out.error_message = f"{tp}: the in-sync replicas did not reach log start offset {required} in time"

    def _complete_delete_records(self, partition: Partition) -> None:
        """Resolve the DeleteRecords waiting on `partition` whose offset the low watermark reached."""
        low = partition.low_watermark()
        waiting = self._delete_records_waiters.pop(partition.tp, [])
        still = [(required, f) for required, f in waiting if not f.done() and not _resolved(f, required <= low)]
        if still:
            self._delete_records_waiters[partition.tp] = still

    def _drop_delete_records_waiter(self, tp: TopicPartition, future: asyncio.Future[None]) -> None:
        waiting = [(r, f) for r, f in self._delete_records_waiters.get(tp, []) if f is not future]
        if waiting:
            self._delete_records_waiters[tp] = waiting
        else:
            self._delete_records_waiters.pop(tp, None)

    def _delete_records_on_leader(self, tp: TopicPartition, offset: int) -> tuple[int, str]:
        """(error code, message) of moving `tp`'s log start offset to `offset` (-1: the high watermark)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return errors.UnknownTopicOrPartitionError.code, f"This server does not host {tp}."
        if not partition.is_leader:
            return errors.NotLeaderForPartitionError.code, f"This server is not the leader for {tp}."
        if not partition.log.config.delete:
            return errors.PolicyViolationError.code, (
                f"Records of partition {tp} can not be deleted due to the configured policy"
            )
        target = partition.high_watermark if offset == -1 else offset
        if target < 0 or target > partition.high_watermark:
            return errors.OffsetOutOfRangeError.code, (
                f"Cannot increment the log start offset to {target} of partition {tp} since it is larger than "
                f"the high watermark {partition.high_watermark}"
            )
        if partition.log.maybe_increment_log_start_offset(target, "client_records_deletion"):
            # Checkpointed at once: a crash must not bring deleted records back (Kafka checkpoints periodically).
            self.logs.flush_checkpoints()
        return NONE, ""

    # ---------------------------------------------------------------- ISR changes

    def _maybe_expand_isr(self, partition: Partition) -> None:
        if partition.isr_update_pending:
            return
        joining = partition.caught_up_followers_to_add()
        if joining:
            new_isr = tuple(sorted({*partition.isr, *joining}, key=partition.replicas.index))
            self._start_isr_update(partition, new_isr, f"expanding ISR to add {joining}")

    def shrink_isrs(self) -> None:
        self._retry_unsettled_isr_writes()
        clock = now_ms()
        lag = self.config.replica_lag_time_max_ms
        for partition in list(self.partitions.values()):
            if not partition.is_leader or partition.isr_update_pending:
                continue
            lagging = partition.out_of_sync_followers(clock, lag)
            if lagging:
                new_isr = tuple(r for r in partition.isr if r not in lagging)
                self._start_isr_update(partition, new_isr, f"shrinking ISR, out of sync replicas {lagging}")

    def _start_isr_update(self, partition: Partition, new_isr: tuple[int, ...], why: str) -> None:
        partition.begin_isr_write(new_isr)
        self._spawn(self._write_isr(partition, new_isr, why))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _write_isr(self, partition: Partition, new_isr: tuple[int, ...], why: str) -> None:
        """Conditional write of the state znode; on success the local ISR changes (Kafka's updateIsr).

        The write is conditional on the znode version this leader epoch knows, captured with the epoch before
        any await: a LeaderAndIsr arriving during the ELR read brings the controller's newer version, and a
        write of the old epoch at that version would succeed and put the partition's leader epoch back
        (found by the Kafka fault campaign: the controller's epoch-1 state overwritten by the leader's epoch 0)."""
        tp, epoch, version = partition.tp, partition.leader_epoch, partition.zk_version
        path = partition_state_path(tp.topic, tp.partition)
        eligible = next_eligible_leader_replicas(
            partition.isr,
            new_isr,
            await self._eligible_leader_replicas(partition, path, version),
            self._min_isr(tp.topic),
        )
        if not partition.is_leader or partition.leader_epoch != epoch:
            return  # a LeaderAndIsr came while reading (it reset isr_update_pending): the controller's state wins
        state = PartitionState(
            leader=self.broker_id,
            leader_epoch=epoch,
            isr=new_isr,
            controller_epoch=partition.controller_epoch,
            eligible_leader_replicas=eligible,
        )
        await self._send_isr_write(partition, _IsrWrite(state, version, why))

    async def _send_isr_write(self, partition: Partition, write: _IsrWrite) -> None:
        """One attempt of `write`. A failure other than BADVERSION leaves its outcome unknown (the reply may be
        all that was lost): the maximal ISR stays in force and the periodic ISR check sends it again until it
        is settled (Kafka 2.8's ZooKeeper client retries a request across a connection loss)."""
        tp = partition.tp
        path = partition_state_path(tp.topic, tp.partition)
        self._unsettled_isr_writes.pop(tp, None)
        try:
            stat = await self.zk.set(path, encode_partition_state(write.state), version=write.zk_version)
        except BadVersionError:
            await self._reconcile_isr(partition, path, write)
            return
        except Exception as exc:
            self._log.warning("isr_update_failed", topic=tp.topic, partition=tp.partition, error=str(exc))
            if self._writes_current_epoch(partition, write):
                self._unsettled_isr_writes[tp] = write
            return
        self._isr_write_settled(partition, write, stat.version)

    def _writes_current_epoch(self, partition: Partition, write: _IsrWrite) -> bool:
        """`write` is still this leader's own (no LeaderAndIsr reset the partition since it started)."""
        return partition.is_leader and partition.isr_update_pending and partition.leader_epoch == write.leader_epoch

    def _retry_unsettled_isr_writes(self) -> None:
        unsettled, self._unsettled_isr_writes = self._unsettled_isr_writes, {}
        for tp, write in unsettled.items():
            partition = self.partitions.get(tp)
            if partition is not None and self._writes_current_epoch(partition, write):
                self._spawn(self._send_isr_write(partition, write))

    def _isr_write_settled(self, partition: Partition, write: _IsrWrite, zk_version: int) -> None:
        """ZooKeeper holds `write` at `zk_version`: the local ISR becomes the one written."""
        tp = partition.tp
        if not self._writes_current_epoch(partition, write):
            return  # leadership moved while writing; the controller's state wins
        old, new_isr = partition.isr, write.state.isr
        partition.settle_isr_write(new_isr, zk_version)
        if len(new_isr) < len(old):
            self.stats.isr_shrinks += 1
        elif len(new_isr) > len(old):
            self.stats.isr_expands += 1
        self._log.info(
            "isr_changed",
            topic=tp.topic,
            partition=tp.partition,
            old_isr=list(old),
            new_isr=list(new_isr),
            why=write.why,
        )
        self._isr_changes.add(tp)
        self._last_isr_change_ms = now_ms()
        if partition.maybe_increment_hw():
            self._hw_moved(partition)
        else:
            self._complete_produces(partition)  # a shrink may make waiting acks=all fail or succeed
        if tp in self._delete_records_waiters:
            self._complete_delete_records(partition)  # a lagging follower left: the low watermark may be reached

    async def _eligible_leader_replicas(self, partition: Partition, path: str, version: int) -> tuple[int, ...]:
        """The ELR in the state znode at the version this leader knows (KIP-966; the LeaderAndIsr request
        does not carry it). Read only on an ISR change, never on the produce or fetch path; any other
        version makes the conditional write fail anyway."""
        try:
            data, stat = await self.zk.get(path)
            state = decode_partition_state(partition.tp.topic, partition.tp.partition, data)
        except Exception as exc:  # the write that follows fails or succeeds on its own; an empty ELR is safe
            self._log.info("eligible_replicas_unread", topic=partition.tp.topic, error=type(exc).__name__)
            return ()
        return state.eligible_leader_replicas if stat.version == version else ()

    async def _reconcile_isr(self, partition: Partition, path: str, write: _IsrWrite) -> None:
        """BADVERSION: settle `write` by reading the znode (Kafka 2.8's KafkaZkClient.conditionalUpdatePath
        with ReplicationUtils.checkLeaderAndIsrZkData). Holding what we wrote, an earlier attempt landed and
        only its reply was lost: adopt its version. Holding our own epoch's state, adopt that. Else the
        controller or another leader moved on: the maximal ISR stays in force until its LeaderAndIsr."""
        tp = partition.tp
        try:
            data, stat = await self.zk.get(path)
            current = decode_partition_state(tp.topic, tp.partition, data)
        except Exception as exc:  # still unknown: sent again by the next periodic ISR check
            self._log.warning("isr_reconcile_failed", topic=tp.topic, error=str(exc))
            if self._writes_current_epoch(partition, write):
                self._unsettled_isr_writes[tp] = write
            return
        if current == decode_partition_state(tp.topic, tp.partition, encode_partition_state(write.state)):
            self._log.info("isr_update_found_written", topic=tp.topic, partition=tp.partition, zk_version=stat.version)
            self._isr_write_settled(partition, write, stat.version)
            return
        if not self._writes_current_epoch(partition, write):
            return  # a LeaderAndIsr came meanwhile: the controller's state wins
        if current.leader == self.broker_id and current.leader_epoch == partition.leader_epoch:
            partition.settle_isr_write(tuple(current.isr), stat.version)
        self._log.info(
            "isr_update_skipped_zk_version_moved",
            topic=tp.topic,
            partition=tp.partition,
            zk_leader_epoch=current.leader_epoch,
            zk_leader=current.leader,
        )

    async def propagate_isr_changes(self) -> None:
        """One `/isr_change_notification/isr_change_N` listing the partitions whose ISR changed."""
        if not self._isr_changes:
            return
        changed, self._isr_changes = self._isr_changes, set()
        try:
            await self.zk.create(
                ISR_CHANGE_NOTIFICATION_PATH + "/isr_change_", encode_isr_change(sorted(changed)), sequence=True
            )
        except NoNodeError:
            await self.zk.ensure_path(ISR_CHANGE_NOTIFICATION_PATH)
            self._isr_changes |= changed
        except Exception:
            self._isr_changes |= changed
            raise
