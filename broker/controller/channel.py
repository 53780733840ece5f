"""Controller -> broker requests: the per-event batch and one ordered sender per live broker.

Kafka's `ControllerChannelManager` and `AbstractControllerBrokerRequestBatch`
(docs/research/kafka.md §2.10). A `RequestBatch` collects what one controller event
decided; `send()` turns it into at most one LeaderAndIsr, one UpdateMetadata
and one StopReplica per broker, queued in that order. Each broker has one
sender task that sends its queue strictly in order, retrying a request while
the broker is unreachable (UNAVAILABLE / DEADLINE_EXCEEDED) until the broker
is removed or the channel manager is fenced. Protobuf types appear only here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from broker.controller.context import ControllerContext, LiveBroker
from broker.controller.election import LeaderAndIsr
from client.kafka.errors import UnknownServerError
from client.kafka.structs import TopicPartition
from client.kafka.znodes import LEADER_DURING_DELETE
from zkraft_proto import broker_pb2, broker_pb2_grpc

# Every queue is bounded (STYLE 10): far more requests than one broker can be behind by in practice.
REQUEST_QUEUE_MAX = 10_000
RETRY_BACKOFF_MIN_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
REQUEST_TIMEOUT_S = 30.0
EPOCH_DURING_DELETE = -2  # LeaderAndIsr.EpochDuringDelete
NO_EPOCH = -1
_RETRIABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

ControllerRequest = broker_pb2.LeaderAndIsrRequest | broker_pb2.UpdateMetadataRequest | broker_pb2.StopReplicaRequest
# Told what became of a StopReplica that deleted partitions (Kafka's TopicDeletionStopReplicaResponseReceived):
# (broker id, request-level error code, ((partition, error code), ...) for the deleted partitions only).
StopReplicaDeleteCallback = Callable[[int, int, tuple[tuple[TopicPartition, int], ...]], None]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrEntry:
    state: LeaderAndIsr
    replicas: tuple[int, ...]
    is_new: bool


@dataclass
class RequestBatch:
    """What one controller event will tell the brokers (Kafka's ControllerBrokerRequestBatch)."""

    leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrEntry]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)

    def add_leader_and_isr(
        self,
        broker_ids: tuple[int, ...] | list[int],
        tp: TopicPartition,
        state: LeaderAndIsr,
        replicas: tuple[int, ...],
        is_new: bool,
        all_live_brokers: frozenset[int],
    ) -> None:
        """LeaderAndIsr for `tp` to `broker_ids`, and (as Kafka does) UpdateMetadata for it to every live broker."""
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.leader_and_isr.setdefault(broker_id, {})
            # A later state for the same partition in the same event supersedes; is_new sticks.
            was_new = tp in per_broker and per_broker[tp].is_new
            per_broker[tp] = LeaderAndIsrEntry(state, replicas, is_new or was_new)
        self.add_update_metadata(all_live_brokers, [tp])

    def add_update_metadata(self, broker_ids: frozenset[int] | set[int], partitions: list[TopicPartition]) -> None:
        self.update_metadata_brokers.update(broker_ids)
        self.update_metadata_partitions.update(partitions)

    def add_stop_replica(self, broker_id: int, tp: TopicPartition, delete: bool) -> None:
        self.stop_replica.setdefault(broker_id, {})[tp] = delete

    @property
    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica)

    def build(self, controller_id: int, ctx: ControllerContext) -> list[tuple[int, ControllerRequest]]:
        """The requests, in Kafka's order: every LeaderAndIsr, then UpdateMetadata, then StopReplica."""
        out: list[tuple[int, ControllerRequest]] = []
        for broker_id in sorted(self.leader_and_isr):
            out.append(
                (broker_id, _leader_and_isr_request(controller_id, ctx, broker_id, self.leader_and_isr[broker_id]))
            )
        partitions = sorted(self.update_metadata_partitions)
        for broker_id in sorted(self.update_metadata_brokers):
            out.append((broker_id, _update_metadata_request(controller_id, ctx, broker_id, partitions)))
        for broker_id in sorted(self.stop_replica):
            out.append((broker_id, _stop_replica_request(controller_id, ctx, broker_id, self.stop_replica[broker_id])))
        return out


def _leader_and_isr_request(
    controller_id: int, ctx: ControllerContext, broker_id: int, entries: dict[TopicPartition, LeaderAndIsrEntry]
) -> broker_pb2.LeaderAndIsrRequest:
    states = [
        broker_pb2.LeaderAndIsrPartitionState(
            topic_name=tp.topic,
            partition_index=tp.partition,
            controller_epoch=e.state.controller_epoch,
            leader=e.state.leader,
            leader_epoch=e.state.leader_epoch,
            isr=list(e.state.isr),
            zk_version=e.state.zk_version,
            replicas=list(e.replicas),
            is_new=e.is_new,
        )
        for tp, e in sorted(entries.items())
    ]
    leader_ids = {e.state.leader for e in entries.values()}
    leaders = [
        broker_pb2.LeaderAndIsrLiveLeader(broker_id=b.broker_id, host_name=b.host, port=b.port)
        for b_id, b in sorted(ctx.live_brokers.items())
        if b_id in leader_ids
    ]
    return broker_pb2.LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=ctx.epoch,
        broker_epoch=ctx.broker_epoch(broker_id),
        partition_states=states,
        live_leaders=leaders,
    )


def _update_metadata_request(
    controller_id: int, ctx: ControllerContext, broker_id: int, partitions: list[TopicPartition]
) -> broker_pb2.UpdateMetadataRequest:
    states = []
    for tp in partitions:
        state = ctx.leadership.get(tp)
        if state is None:  # Kafka sends UpdateMetadata only for partitions with a known leadership
            continue
        # A topic queued for deletion is announced with leader -2 (LeaderAndIsr.duringDelete): brokers drop it.
        leader = LEADER_DURING_DELETE if ctx.is_topic_queued_for_deletion(tp.topic) else state.leader
        states.append(
            broker_pb2.UpdateMetadataPartitionState(
                topic_name=tp.topic,
                partition_index=tp.partition,
                controller_epoch=state.controller_epoch,
                leader=leader,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                zk_version=state.zk_version,
                replicas=list(ctx.replicas(tp)),
                offline_replicas=list(ctx.offline_replicas(tp)),
                topic_id=ctx.topic_ids.get(tp.topic, ""),
            )
        )
    return broker_pb2.UpdateMetadataRequest(
        controller_id=controller_id,
        controller_epoch=ctx.epoch,
        broker_epoch=ctx.broker_epoch(broker_id),
        partition_states=states,
        live_brokers=[_metadata_broker(b) for _, b in sorted(ctx.live_brokers.items())],
    )


def _metadata_broker(broker: LiveBroker) -> broker_pb2.UpdateMetadataBroker:
    """host/port: the gRPC endpoint; endpoints: every listener (Kafka's UpdateMetadata v1+ carries them all, so
    each broker answers a Kafka Metadata request with the endpoints of the listener it came in on)."""
    return broker_pb2.UpdateMetadataBroker(
        id=broker.broker_id,
        host=broker.host,
        port=broker.port,
        rack=broker.registration.rack or "",
        endpoints=[
            broker_pb2.UpdateMetadataEndpoint(
                port=e.port, host=e.host or "", listener=e.listener_name, security_protocol=e.security_protocol
            )
            for e in broker.registration.endpoints
        ],
    )


def _stop_replica_request(
    controller_id: int, ctx: ControllerContext, broker_id: int, entries: dict[TopicPartition, bool]
) -> broker_pb2.StopReplicaRequest:
    return broker_pb2.StopReplicaRequest(
        controller_id=controller_id,
        controller_epoch=ctx.epoch,
        broker_epoch=ctx.broker_epoch(broker_id),
        partitions=[
            broker_pb2.StopReplicaPartition(
                topic_name=tp.topic,
                partition_index=tp.partition,
                # Kafka's EpochDuringDelete sentinel for a topic being deleted (§2.10); -1 (no epoch) otherwise.
                leader_epoch=EPOCH_DURING_DELETE if ctx.is_topic_queued_for_deletion(tp.topic) else NO_EPOCH,
                delete_partition=delete,
            )
            for tp, delete in sorted(entries.items())
        ],
    )


# ---------------------------------------------------------------- senders


@dataclass
class _BrokerSender:
    broker_id: int
    address: str
    channel: grpc.aio.Channel
    queue: asyncio.Queue[ControllerRequest]
    task: asyncio.Task[None] | None = None


class ControllerChannelManager:
    """One gRPC channel, one bounded queue and one sender task per live broker."""

    def __init__(
        self,
        logger: Any,
        *,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        channel_factory: Callable[[str], grpc.aio.Channel] = grpc.aio.insecure_channel,
        on_stop_replica_delete: StopReplicaDeleteCallback | None = None,
    ) -> None:
        self._log = logger
        self._on_stop_replica_delete = on_stop_replica_delete
        self._request_timeout_s = request_timeout_s
        self._channel_factory = channel_factory
        self._senders: dict[int, _BrokerSender] = {}
        self._fenced = False

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(self._senders)

    def add_broker(self, broker: LiveBroker) -> None:
        if self._fenced or broker.broker_id in self._senders:
            return
        address = f"{broker.host}:{broker.port}"
        sender = _BrokerSender(
            broker.broker_id, address, self._channel_factory(address), asyncio.Queue(REQUEST_QUEUE_MAX)
        )
        sender.task = asyncio.create_task(self._run_sender(sender), name=f"controller-sender-{broker.broker_id}")
        self._senders[broker.broker_id] = sender

    async def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            await _stop_sender(sender)

    def send(self, broker_id: int, request: ControllerRequest) -> None:
        """Queue `request` for `broker_id`; a broker not (or no longer) live is skipped, as in Kafka."""
        if self._fenced:
            return
        sender = self._senders.get(broker_id)
        if sender is None:
            # Kafka: "Not sending request ... since it is offline" -- e.g. StopReplica to a dead broker.
            self._log.info("controller_request_to_offline_broker", target=broker_id, request=_kind(request))
            return
        try:
            sender.queue.put_nowait(request)
        except asyncio.QueueFull:
            self._log.error("controller_request_queue_full", target=broker_id, limit=REQUEST_QUEUE_MAX)

    def fence(self) -> None:
        """Stop sending at once, from any callback: the session that made us controller is gone.

        Synchronous on purpose: called from the ZooKeeper state listener before
        the event task can run again, so not one more request leaves with the
        old controller epoch. Queued requests are dropped; channels close later.
        """
        self._fenced = True
        for sender in self._senders.values():
            if sender.task is not None:
                sender.task.cancel()
            while not sender.queue.empty():
                sender.queue.get_nowait()

    async def shutdown(self) -> None:
        self._fenced = True
        senders, self._senders = list(self._senders.values()), {}
        for sender in senders:
            await _stop_sender(sender)

    async def _run_sender(self, sender: _BrokerSender) -> None:
        stub = broker_pb2_grpc.BrokerStub(sender.channel)
        log = self._log.bind(target=sender.broker_id, address=sender.address)
        while True:
            request = await sender.queue.get()
            try:
                await self._send_until_done(stub, request, log, sender.broker_id)
            except Exception as e:  # loop boundary: a broken request must not stall the ones behind it
                log.exception("controller_request_crashed", request=_kind(request), error=str(e))

    async def _send_until_done(
        self, stub: broker_pb2_grpc.BrokerStub, request: ControllerRequest, log: Any, broker_id: int
    ) -> None:
        backoff_s = RETRY_BACKOFF_MIN_S
        kind = _kind(request)
        while not self._fenced:
            try:
                response = await getattr(stub, kind)(request, timeout=self._request_timeout_s)
            except grpc.aio.AioRpcError as e:
                if e.code() not in _RETRIABLE:
                    log.error("controller_request_failed", request=kind, code=e.code().name, detail=e.details())
                    self._report_stop_replica(broker_id, request, None)
                    return
                log.info("controller_request_retry", request=kind, code=e.code().name, backoff_s=backoff_s)
                await asyncio.sleep(backoff_s)  # backoff before retrying an unreachable broker, not a sync wait
                backoff_s = min(backoff_s * 2, RETRY_BACKOFF_MAX_S)
                continue
            if response.error_code:
                log.warning("controller_request_error", request=kind, error_code=response.error_code)
            for err in getattr(response, "partition_errors", ()):
                if err.error_code:
                    log.warning(
                        "controller_partition_error",
                        request=kind,
                        topic=err.topic_name,
                        partition=err.partition_index,
                        error_code=err.error_code,
                    )
            self._report_stop_replica(broker_id, request, response)
            return

    def _report_stop_replica(self, broker_id: int, request: ControllerRequest, response: Any) -> None:
        """Hand the outcome of a deleting StopReplica to the controller; None = the RPC itself failed."""
        callback = self._on_stop_replica_delete
        if callback is None or self._fenced or not isinstance(request, broker_pb2.StopReplicaRequest):
            return
        deleted = [TopicPartition(p.topic_name, p.partition_index) for p in request.partitions if p.delete_partition]
        if not deleted:
            return
        failed = UnknownServerError.code
        if response is None:
            callback(broker_id, failed, tuple((tp, failed) for tp in deleted))
            return
        errors = {TopicPartition(e.topic_name, e.partition_index): e.error_code for e in response.partition_errors}
        # A partition the broker did not mention was not deleted.
        callback(broker_id, response.error_code, tuple((tp, errors.get(tp, failed)) for tp in deleted))


async def _stop_sender(sender: _BrokerSender) -> None:
    if sender.task is not None:
        sender.task.cancel()
        # wait(), not `await task`: the sender's CancelledError is its own, while a cancellation of
        # the caller (the controller task being shut down) must still propagate.
        await asyncio.wait([sender.task])
    await sender.channel.close()


def _kind(request: ControllerRequest) -> str:
    """The RPC name, which is also the request message's name without `Request`."""
    return type(request).__name__.removesuffix("Request")


def controlled_shutdown_fields(request: broker_pb2.ControlledShutdownRequest) -> tuple[int, int]:
    """(broker id, broker epoch) of a ControlledShutdown request."""
    return request.broker_id, request.broker_epoch


def controlled_shutdown_response(
    error_code: int, remaining: tuple[TopicPartition, ...]
) -> broker_pb2.ControlledShutdownResponse:
    return broker_pb2.ControlledShutdownResponse(
        error_code=error_code,
        remaining_partitions=[
            broker_pb2.TopicPartitionName(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining
        ],
    )
