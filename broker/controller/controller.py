"""The Kafka controller: runs inside whichever broker wins `/controller` (docs/research/kafka.md §2).

One asyncio task consumes one queue of typed events (Kafka's
ControllerEventManager, §2.1); all controller state is touched only there.
ZooKeeper watch callbacks and the session listener only queue events; a
one-shot watch is re-armed by the read the event's processing does.

    controller = KafkaController(config, zk, broker_epoch, state_change_log, logger)
    await controller.startup()
    ...
    await controller.shutdown()

What is here: election and failover (§2.2, §2.3), broker start-up, failure
and bounce (§2.4), topic creation and partition addition (§2.11), ISR change
notifications (§2.16), controlled shutdown (§2.15), topic deletion (§2.12,
in `topic_deletion`), partition reassignment (§2.13, in `reassignment`),
preferred replica election and the automatic leader rebalance (§2.14, in
`preferred_election`), and the admin APIs it answers as events with a reply:
ElectLeaders (KIP-460, in `admin_election`), Alter/ListPartitionReassignments
(KIP-455, in `reassignment`). Not yet: log-dir events, BrokerModifications.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, assert_never

import grpc

from broker.config import BrokerConfig
from broker.controller.admin_election import AdminLeaderElection
from broker.controller.channel import (
    ControllerChannelManager,
    RequestBatch,
    controlled_shutdown_fields,
    controlled_shutdown_response,
)
from broker.controller.context import ControllerContext, LiveBroker, PartitionReplica
from broker.controller.damaged_replicas import DamagedReplicaHandler
from broker.controller.events import (
    ADMIN_EVENTS,
    AdminReply,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ElectLeaders,
    Expire,
    IsrChangeNotification,
    ListPartitionReassignments,
    PartitionModifications,
    PartitionReassignmentIsrChange,
    PreferredReplicaElection,
    Reelect,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionRetry,
    TopicDeletionStopReplicaResponseReceived,
    ZkPartitionReassignment,
)
from broker.controller.preferred_election import ZK_TRIGGERED, PreferredReplicaElectionManager
from broker.controller.reassignment import ReassignmentManager
from broker.controller.state_machines import ElectionStrategy, PartitionStateMachine, ReplicaStateMachine
from broker.controller.states import PartitionState, ReplicaState
from broker.controller.topic_deletion import TopicDeletionManager
from broker.controller.zk_store import ControllerZkStore
from broker.state_change_log import StateChangeLogger, log_sent_request
from client.kafka import znodes as kz
from client.kafka.errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    NotControllerError,
    StaleBrokerEpochError,
)
from client.kafka.structs import TopicPartition
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import NoNodeError, SessionExpiredError, ZkException
from client.zk.states import EventType, WatchedEvent, ZkState

# Bounded (STYLE 10). Identical queued events coalesce, so the queue holds at most a few events per topic.
EVENT_QUEUE_MAX = 100_000
# After a broker answered a deleting StopReplica with an error, retry the halted deletion this much later.
DELETION_RETRY_BACKOFF_S = 1.0
# Kafka schedules the first automatic leader rebalance check 5 s after failover (§2.3 step 10).
AUTO_REBALANCE_FIRST_DELAY_S = 5.0


class KafkaController:
    def __init__(
        self,
        config: BrokerConfig,
        zk: AsyncZkClient,
        broker_epoch: int,
        state_change_log: StateChangeLogger,
        logger: Any,
        *,
        clock: Callable[[], float] = time.time,
        channel_factory: Callable[[str], grpc.aio.Channel] = grpc.aio.insecure_channel,
    ) -> None:
        self._config = config
        self._id = config.broker_id
        self._zk = zk
        self.broker_epoch = broker_epoch
        self._state_log = state_change_log
        self._base_log = logger.bind(controller=config.broker_id)
        self._log = self._base_log
        self._clock = clock
        self._channel_factory = channel_factory
        self._store = ControllerZkStore(zk)
        self._ctx = ControllerContext()
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue(EVENT_QUEUE_MAX)
        self._pending: set[ControllerEvent] = set()
        self._task: asyncio.Task[None] | None = None
        self._channel: ControllerChannelManager | None = None
        self._batch = RequestBatch()
        self._correlation_id = 0  # numbers the requests this controller sends, as Kafka's request header does
        self._active = False
        self._active_controller_id = -1
        self._session_lost = False
        self._stopping = False
        self._partitions = PartitionStateMachine(
            self._id, self._ctx, self._store, lambda: self._batch, state_change_log,
            config.unclean_leader_election_enable, self._base_log, config.min_insync_replicas,
        )  # fmt: skip
        self._replicas = ReplicaStateMachine(
            self._id, self._ctx, self._store, lambda: self._batch, state_change_log, self._base_log,
            config.min_insync_replicas,
        )  # fmt: skip
        self._deletion = TopicDeletionManager(
            self._ctx, self._store, self._partitions, self._replicas, lambda: self._batch,
            config.delete_topic_enable, self._schedule_deletion_retry, self._base_log,
        )  # fmt: skip
        self._deletion_retry: asyncio.TimerHandle | None = None
        self._reassignment = ReassignmentManager(
            self._id, self._ctx, self._store, self._partitions, self._replicas, self._deletion,
            lambda: self._batch, state_change_log, self._on_reassigning_partition_state, self._base_log,
        )  # fmt: skip
        self._preferred = PreferredReplicaElectionManager(self._ctx, self._partitions, self._base_log)
        self._admin_election = AdminLeaderElection(self._ctx, self._partitions, self._base_log)
        self._damaged = DamagedReplicaHandler(
            self._ctx, self._store, lambda: self._batch, state_change_log, self._base_log,
            config.min_insync_replicas,
        )  # fmt: skip
        self._auto_rebalance: asyncio.TimerHandle | None = None

    # ---- public surface

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        """The controller epoch this broker won with, 0 while it is not the controller."""
        return self._ctx.epoch

    @property
    def context(self) -> ControllerContext:
        """The controller's view of the cluster, read-only for others (broker/metrics.py's gauges)."""
        return self._ctx

    @property
    def active_controller_id(self) -> int:
        return self._active_controller_id

    async def startup(self) -> None:
        """Arm the `/controller` watch and queue Startup, which elects (§2.2 step 1)."""
        self._zk.add_listener(self._on_zk_state)
        # Retried on a lost connection (the broker's start-up policy): the read is idempotent, its watch is one.
        self._active_controller_id = await self._zk.retry(
            self._store.read_controller_id, watch=self._on_controller_znode
        )
        self._task = asyncio.create_task(self._run(), name=f"controller-{self._id}")
        self._enqueue(Startup())

    async def session_reestablished(self, broker_epoch: int) -> None:
        """After a lost session: the broker has a new session and registration; run for controller again."""
        self.broker_epoch = broker_epoch
        self._session_lost = False
        self._enqueue(Reelect())

    async def controlled_shutdown(self, request: Any) -> Any:
        """The broker service's ControlledShutdown RPC (§2.15): queued as an event, answered when processed."""
        broker_id, broker_epoch = controlled_shutdown_fields(request)
        reply: asyncio.Future[tuple[int, tuple[TopicPartition, ...]]] = asyncio.get_running_loop().create_future()
        if not self._enqueue(ControlledShutdown(broker_id, broker_epoch, reply)):
            return controlled_shutdown_response(NotControllerError.code, ())
        error_code, remaining = await reply
        return controlled_shutdown_response(error_code, remaining)

    # The admin APIs the controller answers (Kafka's KafkaApis hands them to `controller.electLeaders`,
    # `alterPartitionReassignments`, `listPartitionReassignments`): queued as events, answered when processed;
    # (request-level error code, per-partition results), NOT_CONTROLLER on a broker that is not the controller.

    async def elect_leaders(
        self, partitions: tuple[TopicPartition, ...] | None, election_type: int
    ) -> tuple[int, dict[TopicPartition, tuple[int, str]]]:
        """Per partition (error code, message); `partitions` None: all of them (KIP-460)."""
        return await self._ask(lambda reply: ElectLeaders(partitions, election_type, reply))

    async def alter_partition_reassignments(
        self, reassignments: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
    ) -> tuple[int, dict[TopicPartition, tuple[int, str]]]:
        """Per partition (error code, message); a None target cancels (KIP-455)."""
        return await self._ask(lambda reply: ApiPartitionReassignment(reassignments, reply))

    async def list_partition_reassignments(
        self, partitions: tuple[TopicPartition, ...] | None
    ) -> tuple[int, dict[TopicPartition, Any]]:
        """The ongoing reassignments (ReplicaAssignment by partition) among `partitions`, all when None."""
        return await self._ask(lambda reply: ListPartitionReassignments(partitions, reply))

    async def _ask(self, make: Callable[[AdminReply], ControllerEvent]) -> tuple[int, dict[TopicPartition, Any]]:
        reply: AdminReply = asyncio.get_running_loop().create_future()
        if not self._active or not self._enqueue(make(reply)):
            return NotControllerError.code, {}
        return await reply

    async def shutdown(self) -> None:
        """Stop the event task; if active, give up `/controller` (fenced) and stop the senders."""
        self._stopping = True
        self._zk.remove_listener(self._on_zk_state)
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])  # propagates our own cancellation, not the task's
            self._task = None
        if self._active and not self._session_lost:
            try:
                await self._store.delete_controller(self._ctx.epoch_zk_version)
            except Exception as e:  # shutting down anyway; another broker wins when our session ends
                self._log.warning("controller_delete_failed", error=str(e))
        self._drain_queue()
        await self._on_controller_resignation()

    # ---- callbacks: they only queue events

    def _enqueue(self, event: ControllerEvent) -> bool:
        """Queue `event` unless an identical one already waits; False if it was refused."""
        if self._stopping:
            return False
        if event in self._pending:
            return True
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self._log.error("controller_event_queue_full", controller_event=type(event).__name__, limit=EVENT_QUEUE_MAX)
            return False
        self._pending.add(event)
        return True

    def _drain_queue(self) -> None:
        """Drop every queued event; those that carry a future are answered NOT_CONTROLLER (Kafka's preempt)."""
        while not self._queue.empty():
            _refuse(self._queue.get_nowait())
        self._pending.clear()

    def _on_zk_state(self, state: ZkState) -> None:
        if state is not ZkState.LOST:
            return
        # Fence before anything else can run: no request may leave with the epoch of a lost session.
        self._session_lost = True
        if self._channel is not None:
            self._channel.fence()
        self._drain_queue()  # Kafka's clearAndPut(Expire)
        self._enqueue(Expire())

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        if event.type is EventType.DELETED:
            self._enqueue(Reelect())
        elif event.type in (EventType.CREATED, EventType.CHANGED):
            self._enqueue(ControllerChange())

    def _on_broker_ids(self, event: WatchedEvent) -> None:
        # CREATED and DELETED: `/brokers/ids` itself deleted by hand and re-created by a broker.
        if event.type in (EventType.CHILD, EventType.CREATED, EventType.DELETED):
            self._enqueue(BrokerChange())

    def _on_topics(self, event: WatchedEvent) -> None:
        if event.type is EventType.CHILD:
            self._enqueue(TopicChange())

    def _on_topic_data(self, event: WatchedEvent) -> None:
        if event.type is EventType.CHANGED and event.path:
            self._enqueue(PartitionModifications(event.path.rsplit("/", 1)[-1]))

    def _on_isr_change(self, event: WatchedEvent) -> None:
        if event.type is EventType.CHILD:
            self._enqueue(IsrChangeNotification())

    def _on_delete_topics(self, event: WatchedEvent) -> None:
        if event.type is EventType.CHILD:
            self._enqueue(TopicDeletion())

    # Exists watches: processing re-reads and re-arms, also after a deletion (so the next creation is seen).
    def _on_reassign_partitions(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED, EventType.DELETED):
            self._enqueue(ZkPartitionReassignment())

    def _on_reassigning_partition_state(self, event: WatchedEvent) -> None:
        # …/topics/<t>/partitions/<p>/state
        parts = (event.path or "").split("/")
        if event.type is EventType.CHANGED and len(parts) == 7 and parts[6] == "state" and parts[5].isdigit():
            self._enqueue(PartitionReassignmentIsrChange(TopicPartition(parts[3], int(parts[5]))))

    def _on_preferred_replica_election(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED, EventType.DELETED):
            self._enqueue(PreferredReplicaElection())

    def _schedule_auto_rebalance(self, delay_s: float) -> None:
        if self._auto_rebalance is None:
            self._auto_rebalance = asyncio.get_running_loop().call_later(delay_s, self._auto_rebalance_due)

    def _auto_rebalance_due(self) -> None:
        self._auto_rebalance = None
        self._enqueue(AutoPreferredReplicaLeaderElection())

    def _on_stop_replica_delete(
        self, broker_id: int, error_code: int, partition_errors: tuple[tuple[TopicPartition, int], ...]
    ) -> None:
        """From a channel sender: a deleting StopReplica was answered (or failed)."""
        self._enqueue(TopicDeletionStopReplicaResponseReceived(broker_id, error_code, partition_errors))

    def _schedule_deletion_retry(self) -> None:
        """Queue TopicDeletionRetry after the back-off (one timer at a time, cancelled on resignation)."""
        if self._deletion_retry is None:
            self._deletion_retry = asyncio.get_running_loop().call_later(
                DELETION_RETRY_BACKOFF_S, self._deletion_retry_due
            )

    def _deletion_retry_due(self) -> None:
        self._deletion_retry = None
        self._enqueue(TopicDeletionRetry())

    # ---- the event task

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            self._pending.discard(event)
            await self._process(event)

    async def _process(self, event: ControllerEvent) -> None:
        try:
            match event:
                case Startup():
                    await self._elect()
                case ControllerChange():
                    await self._maybe_resign()
                case Reelect():
                    await self._maybe_resign()
                    await self._elect()
                case Expire():
                    await self._process_expire()
                case BrokerChange():
                    await self._if_active(self._process_broker_change)
                case TopicChange():
                    await self._if_active(self._process_topic_change)
                case PartitionModifications(topic=topic):
                    await self._if_active(lambda: self._process_partition_modifications(topic))
                case IsrChangeNotification():
                    await self._if_active(self._process_isr_change_notification)
                case TopicDeletion():
                    await self._if_active(self._process_topic_deletion)
                case TopicDeletionStopReplicaResponseReceived():
                    await self._if_active(lambda: self._process_stop_replica_response(event))
                case TopicDeletionRetry():
                    await self._if_active(self._deletion.retry_halted)
                case ZkPartitionReassignment():
                    await self._if_active(self._process_zk_partition_reassignment)
                case PartitionReassignmentIsrChange(partition=tp):
                    await self._if_active(lambda: self._reassignment.process_isr_change(tp))
                case PreferredReplicaElection():
                    await self._if_active(self._process_preferred_replica_election)
                case AutoPreferredReplicaLeaderElection():
                    await self._if_active(self._process_auto_preferred_replica_leader_election)
                case ControlledShutdown():
                    await self._process_controlled_shutdown(event)
                case ElectLeaders(partitions=partitions, election_type=election_type, reply=reply):
                    await self._answer_admin(reply, lambda: self._admin_election.elect(partitions, election_type))
                case ApiPartitionReassignment(reassignments=reassignments, reply=reply):
                    requested = dict(reassignments)
                    await self._answer_admin(reply, lambda: self._reassignment.reassign_from_api(requested))
                case ListPartitionReassignments(partitions=partitions, reply=reply):
                    await self._answer_admin(reply, lambda: _completed(self._reassignment.ongoing(partitions)))
                case _:
                    assert_never(event)
            self._send_batch()
        except ControllerMovedError as e:
            self._log.info("controller_moved", controller_event=type(event).__name__, reason=str(e))
            self._batch = RequestBatch()
            await self._guarded(self._maybe_resign(), "maybe_resign")
        except Exception as e:  # loop boundary: one failing event must not stop the controller
            if self._session_lost or self._stopping or isinstance(e, SessionExpiredError):
                # Expected: the session went away under this event; Expire (queued) resigns.
                self._log.info("controller_event_abandoned", controller_event=type(event).__name__, error=str(e))
            else:
                self._log.exception("controller_event_failed", controller_event=type(event).__name__, error=str(e))
            # Znodes already written must still reach the brokers.
            self._send_batch()
        finally:
            _refuse(event)  # no-op once answered; otherwise the asker must not wait forever

    async def _guarded(self, work: Awaitable[None], what: str) -> None:
        try:
            await work
        except Exception as e:  # loop boundary
            self._log.error("controller_step_failed", step=what, error=str(e))

    async def _answer_admin(self, reply: AdminReply, work: Callable[[], Awaitable[dict[TopicPartition, Any]]]) -> None:
        """An admin API event: NOT_CONTROLLER unless active, else the results of `work`."""
        if not self._active or self._session_lost:
            _answer_reply(reply, NotControllerError.code, {})
            return
        _answer_reply(reply, 0, await work())

    async def _if_active(self, work: Callable[[], Awaitable[None]]) -> None:
        if self._active and not self._session_lost:
            await work()

    def _send_batch(self) -> None:
        """Hand the event's requests to the senders: LeaderAndIsr, then UpdateMetadata, then StopReplica."""
        batch, self._batch = self._batch, RequestBatch()
        if batch.empty or not self._active or self._session_lost or self._channel is None:
            return
        for broker_id, request in batch.build(self._id, self._ctx):
            self._correlation_id += 1
            request.correlation_id = self._correlation_id
            log_sent_request(self._state_log, self._ctx.epoch, broker_id, request)
            self._channel.send(broker_id, request)

    # ---- election and resignation (§2.2)

    async def _elect(self) -> None:
        self._active_controller_id = await self._store.read_controller_id(watch=self._on_controller_znode)
        if self._active_controller_id != -1:
            if self._active_controller_id == self._id and not self._active and await self._holds_controller_znode():
                # Ours, of this session, yet no controller acts on it (it resigned while an election in flight
                # finished): free it, and its deletion's watch elects again (Kafka's triggerControllerMove).
                self._log.info("controller_znode_released", reason="held by this session without acting on it")
                await self._guarded(self._zk.delete(kz.CONTROLLER_PATH), "release_controller_znode")
                return
            self._log.info("controller_exists", active_controller=self._active_controller_id)
            return
        try:
            epoch, epoch_zk_version = await self._store.register_controller_and_increment_epoch(
                self._id, int(self._clock() * 1000)
            )
        except ControllerMovedError:
            await self._maybe_resign()
            return
        self._ctx.epoch, self._ctx.epoch_zk_version = epoch, epoch_zk_version
        self._active_controller_id = self._id
        self._active = True
        self._log = self._base_log.bind(controller_epoch=epoch)
        self._log.info("controller_elected", epoch=epoch, epoch_zk_version=epoch_zk_version)
        try:
            await self._on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception as e:
            # K28 triggerControllerMove: resign and free /controller so another broker can take over.
            self._log.exception("controller_failover_failed", error=str(e))
            await self._guarded(self._store.delete_controller(self._ctx.epoch_zk_version), "delete_controller")
            await self._on_controller_resignation()

    async def _maybe_resign(self) -> None:
        was_active = self._active
        self._active_controller_id = await self._store.read_controller_id(watch=self._on_controller_znode)
        if was_active and self._active_controller_id != self._id:
            await self._on_controller_resignation()

    async def _process_expire(self) -> None:
        if self._active and await self._holds_controller_znode():
            # An election in flight when the session went finished in the next one: its /controller is live, and
            # resigning now would leave it held by a controller that no longer acts (Reelect would see it taken).
            self._log.info("expire_after_election_ignored", reason="elected in the session that replaced it")
            return
        self._active_controller_id = -1
        await self._on_controller_resignation()

    async def _holds_controller_znode(self) -> bool:
        """Is /controller ephemeral of this client's current, live session?"""
        client_id = self._zk.client_id
        try:
            stat = await self._zk.exists(kz.CONTROLLER_PATH)
        except ZkException:
            return False  # no live session to hold it with
        return stat is not None and client_id is not None and stat.ephemeralOwner == client_id[0]

    async def _on_controller_resignation(self) -> None:
        if self._deletion_retry is not None:
            self._deletion_retry.cancel()
            self._deletion_retry = None
        if self._auto_rebalance is not None:
            self._auto_rebalance.cancel()
            self._auto_rebalance = None
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.shutdown()
        if self._active:
            self._log.info("controller_resigned")
        self._active = False
        self._batch = RequestBatch()
        self._ctx.reset()
        self._log = self._base_log

    # ---- failover (§2.3)

    async def _on_controller_failover(self) -> None:
        for path in (kz.BROKER_IDS_PATH, kz.TOPICS_PATH, kz.ISR_CHANGE_NOTIFICATION_PATH, kz.DELETE_TOPICS_PATH):
            await self._zk.ensure_path(path)
        stale = await self._store.read_isr_change_notifications(watch=self._on_isr_change)
        await self._store.delete_isr_change_notifications(sorted(stale), self._ctx.epoch_zk_version)
        await self._initialize_context()
        # Before any request names them: replicas that lost acknowledged data leave the ISR (damaged_replicas).
        await self._damaged.on_failover()
        # §2.3 step 5: deletions in progress are queued before the state machines start.
        await self._deletion.init(await self._store.read_topic_deletions(watch=self._on_delete_topics))
        self._channel = ControllerChannelManager(
            self._log, channel_factory=self._channel_factory, on_stop_replica_delete=self._on_stop_replica_delete
        )
        for broker in self._ctx.live_brokers.values():
            self._channel.add_broker(broker)
        # Brokers learn who is alive before any LeaderAndIsr names them (§2.3 step 6).
        self._batch.add_update_metadata(self._ctx.live_broker_ids, [])
        self._send_batch()
        online = self._replicas.initialize_states()
        offline = [pr for pr in self._ctx.replicas_of(self._ctx.all_partitions()) if not self._ctx.is_live(pr.replica)]
        self._partitions.initialize_states()
        # Replicas of a topic being deleted are Online already; no LeaderAndIsr, they get StopReplica below.
        await self._replicas.handle_state_changes(self._not_being_deleted(online), ReplicaState.ONLINE_REPLICA)
        await self._replicas.handle_state_changes(offline, ReplicaState.OFFLINE_REPLICA)
        await self._partitions.trigger_online_partition_state_change()
        self._batch.add_update_metadata(self._ctx.live_broker_ids, self._ctx.all_partitions())
        # §2.3 step 9: reassignments, then deletions, then pending preferred elections resume.
        await self._reassignment.initialize(await self._read_reassignments())
        await self._deletion.try_topic_deletion()
        await self._process_preferred_replica_election()
        if self._config.auto_leader_rebalance_enable:
            interval_s = self._config.leader_imbalance_check_interval_seconds
            self._schedule_auto_rebalance(min(AUTO_REBALANCE_FIRST_DELAY_S, interval_s))
        self._log.info(
            "controller_failover_done",
            live_brokers=sorted(self._ctx.live_broker_ids),
            topics=len(self._ctx.topics),
            partitions=len(self._ctx.all_partitions()),
        )

    async def _initialize_context(self) -> None:
        self._ctx.add_live_brokers((await self._store.read_live_brokers(watch=self._on_broker_ids)).values())
        topics = await self._store.read_topics(watch=self._on_topics)
        await self._read_assignments(topics)
        self._ctx.leadership.update(await self._store.read_partition_states(self._ctx.all_partitions()))

    async def _read_assignments(self, topics: Sequence[str]) -> list[str]:
        """Read (and watch) each topic's assignment into the context; the topics that still exist."""
        reads = await asyncio.gather(*(self._store.read_assignment(t, watch=self._on_topic_data) for t in topics))
        found = []
        for topic, assignment in zip(topics, reads, strict=True):
            if assignment is not None:
                if assignment.topic_id is None:
                    assignment = await self._assign_topic_id(assignment)
                self._ctx.set_assignment(topic, dict(assignment.partitions))
                if assignment.topic_id is not None:
                    self._ctx.topic_ids[topic] = assignment.topic_id
                self._reassignment.load_from_topic_znode(assignment)
                found.append(topic)
        return found

    async def _assign_topic_id(self, assignment: kz.TopicAssignment) -> kz.TopicAssignment:
        """KafkaController.processTopicIds (2.8): a topic znode written without an id (before 2.8, or by an
        older tool) gets one, written back in the znode (v3) so every later controller keeps it."""
        with_id = replace(assignment, topic_id=kz.new_topic_id())
        try:
            await self._store.write_topic_assignment(with_id, self._ctx.epoch_zk_version)
        except NoNodeError:  # deleted since it was read: the TopicChange that follows drops it
            return assignment
        self._log.info("topic_id_assigned", topic=assignment.topic, topic_id=with_id.topic_id)
        return with_id

    # ---- brokers (§2.4)

    async def _process_broker_change(self) -> None:
        assert self._channel is not None
        current = await self._store.read_live_brokers(watch=self._on_broker_ids)
        cached = dict(self._ctx.live_brokers)
        new = sorted(set(current) - set(cached))
        dead = sorted(set(cached) - set(current))
        bounced = sorted(b for b in set(current) & set(cached) if current[b].epoch > cached[b].epoch)
        self._log.info("broker_change", new=new, dead=dead, bounced=bounced, live=sorted(current))
        _log_registration_changes(self._log, cached, current, dead, bounced)
        for broker_id in bounced + dead:
            await self._channel.remove_broker(broker_id)
        for broker_id in new + bounced:
            self._channel.add_broker(current[broker_id])
        if new:
            self._ctx.add_live_brokers(current[b] for b in new)
            await self._on_broker_startup(new)
        if bounced:
            self._ctx.remove_live_brokers(bounced)
            await self._on_broker_failure(bounced)
            # Its StopReplica must reach the bounced broker before its new LeaderAndIsr.
            self._send_batch()
            self._ctx.add_live_brokers(current[b] for b in bounced)
            await self._on_broker_startup(bounced)
        if dead:
            self._ctx.remove_live_brokers(dead)
            await self._on_broker_failure(dead)

    async def _on_broker_startup(self, new: Sequence[int]) -> None:
        # First: a replica that lost acknowledged data must not get a LeaderAndIsr that lets it lead.
        await self._damaged.on_broker_startup(new)
        existing = self._ctx.live_broker_ids - set(new)
        self._batch.add_update_metadata(existing, [])
        self._send_batch()
        self._batch.add_update_metadata(set(new), self._ctx.partitions_with_leaders())
        self._send_batch()
        on_new = self._ctx.replicas_on_brokers(new)
        # Kafka also sends LeaderAndIsr for replicas of topics being deleted; they are only to be stopped.
        await self._replicas.handle_state_changes(self._not_being_deleted(on_new), ReplicaState.ONLINE_REPLICA)
        await self._partitions.trigger_online_partition_state_change()
        # §2.4 step 4: reassignments waiting for a target replica on these brokers go on.
        await self._reassignment.on_broker_startup(new)
        # §2.4 step 5: a deletion halted for a replica on these brokers can go on.
        deleting = {pr.partition.topic for pr in on_new if self._ctx.is_topic_queued_for_deletion(pr.partition.topic)}
        await self._deletion.resume_deletion_for_topics(deleting)

    async def _on_broker_failure(self, dead: Sequence[int]) -> None:
        await self._on_replicas_become_offline(self._ctx.replicas_on_brokers(dead))

    async def _on_replicas_become_offline(self, replicas: Sequence[PartitionReplica]) -> None:
        """K28 onReplicasBecomeOffline: elect for leaderless partitions, then drop the replicas from ISRs."""
        leaderless = [
            tp
            for tp in self._ctx.partitions_with_leaders()
            if not self._ctx.is_online(self._ctx.leadership[tp].leader)
            and self._ctx.partition_state(tp) is not PartitionState.NEW_PARTITION
            and not self._ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        await self._partitions.handle_state_changes(leaderless, PartitionState.OFFLINE_PARTITION)
        await self._partitions.trigger_online_partition_state_change()
        # New leaders go out now (Kafka sends at the end of each handleStateChanges), not after the ISR cleanup.
        self._send_batch()
        await self._replicas.handle_state_changes(self._not_being_deleted(replicas), ReplicaState.OFFLINE_REPLICA)
        deleting = [pr for pr in replicas if self._ctx.is_topic_queued_for_deletion(pr.partition.topic)]
        await self._deletion.fail_replica_deletion(deleting, "offline replicas")
        if not leaderless:
            self._batch.add_update_metadata(self._ctx.live_broker_ids, [])

    # ---- topics (§2.11)

    async def _process_topic_change(self) -> None:
        topics = set(await self._store.read_topics(watch=self._on_topics))
        for topic in sorted(self._ctx.topics - topics):
            self._ctx.remove_topic(topic)
        new_topics = await self._read_assignments(sorted(topics - self._ctx.topics))
        if not new_topics:
            return
        self._log.info("new_topics", topics=new_topics)
        await self._on_new_partition_creation([tp for t in new_topics for tp in self._ctx.partitions_of(t)])

    async def _process_partition_modifications(self, topic: str) -> None:
        assignment = await self._store.read_assignment(topic, watch=self._on_topic_data)
        if assignment is None or topic not in self._ctx.topics:
            return  # deleted, or new: TopicChange handles it
        known = self._ctx.assignments[topic]
        added = {p: r for p, r in assignment.partitions.items() if p not in known}
        if not added:
            return
        if self._ctx.is_topic_queued_for_deletion(topic):
            # Kafka writes the old assignment back; the whole znode goes with the deletion anyway.
            self._log.info("partitions_added_to_deleted_topic_ignored", topic=topic, partitions=sorted(added))
            return
        self._log.info("partitions_added", topic=topic, partitions=sorted(added))
        self._ctx.set_assignment(topic, added)
        await self._on_new_partition_creation([TopicPartition(topic, p) for p in sorted(added)])

    async def _on_new_partition_creation(self, partitions: Sequence[TopicPartition]) -> None:
        replicas = self._ctx.replicas_of(partitions)
        await self._partitions.handle_state_changes(partitions, PartitionState.NEW_PARTITION)
        await self._replicas.handle_state_changes(replicas, ReplicaState.NEW_REPLICA)
        await self._partitions.handle_state_changes(partitions, PartitionState.ONLINE_PARTITION)
        await self._replicas.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    def _not_being_deleted(self, replicas: Sequence[PartitionReplica]) -> list[PartitionReplica]:
        return [pr for pr in replicas if not self._ctx.is_topic_queued_for_deletion(pr.partition.topic)]

    # ---- topic deletion (§2.12; the algorithm is in topic_deletion)

    async def _process_stop_replica_response(self, event: TopicDeletionStopReplicaResponseReceived) -> None:
        await self._deletion.process_stop_replica_response(event.replica_id, event.error_code, event.partition_errors)

    async def _process_topic_deletion(self) -> None:
        await self._deletion.process_markers(await self._store.read_topic_deletions(watch=self._on_delete_topics))

    # ---- ISR change notifications (§2.16, before AlterIsr)

    async def _process_isr_change_notification(self) -> None:
        notifications = await self._store.read_isr_change_notifications(watch=self._on_isr_change)
        if not notifications:
            return
        known = set(self._ctx.all_partitions())
        changed = sorted(set().union(*notifications.values()) & known)
        self._ctx.leadership.update(await self._store.read_partition_states(changed))
        self._batch.add_update_metadata(self._ctx.live_broker_ids, changed)
        self._log.info("isr_change_notifications", notifications=len(notifications), partitions=len(changed))
        await self._store.delete_isr_change_notifications(sorted(notifications), self._ctx.epoch_zk_version)
        await self._reassignment.check_partitions(tp for tp in changed if tp in self._ctx.reassignments)

    # ---- reassignment (§2.13, in reassignment) and preferred replica election (§2.14, in preferred_election)

    async def _read_reassignments(self) -> dict[TopicPartition, tuple[int, ...]]:
        """`/admin/reassign_partitions` (re-arming its exists watch); unreadable JSON is logged and removed."""
        try:
            return await self._store.read_reassignments(watch=self._on_reassign_partitions)
        except kz.ZnodeDataError as e:
            self._log.error("reassignment_znode_malformed", error=str(e))
            await self._store.write_reassignments({}, self._ctx.epoch_zk_version)
            return {}

    async def _process_zk_partition_reassignment(self) -> None:
        await self._reassignment.process_reassignment_znode(await self._read_reassignments())

    async def _process_preferred_replica_election(self) -> None:
        """K28 ZK-triggered PREFERRED election: elect, then delete the znode whatever the outcome."""
        try:
            requested = await self._store.read_preferred_replica_election(watch=self._on_preferred_replica_election)
        except kz.ZnodeDataError as e:
            self._log.error("preferred_replica_election_znode_malformed", error=str(e))
            requested = ()
        if requested is None:
            return
        try:
            await self._preferred.elect(requested, ZK_TRIGGERED)
        finally:
            await self._store.delete_preferred_replica_election(self._ctx.epoch_zk_version)

    async def _process_auto_preferred_replica_leader_election(self) -> None:
        try:
            await self._preferred.check_and_trigger_auto_rebalance(self._config.leader_imbalance_per_broker_percentage)
        finally:
            if self._active and not self._session_lost:
                self._schedule_auto_rebalance(self._config.leader_imbalance_check_interval_seconds)

    # ---- controlled shutdown (§2.15)

    async def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        if not self._active or self._session_lost:
            _answer(event, NotControllerError.code)
            return
        broker_id = event.broker_id
        if not self._ctx.is_live(broker_id):
            _answer(event, BrokerNotAvailableError.code)
            return
        if event.broker_epoch != -1 and event.broker_epoch < self._ctx.broker_epoch(broker_id):
            _answer(event, StaleBrokerEpochError.code)
            return
        self._ctx.shutting_down.add(broker_id)
        self._log.info("controlled_shutdown", target=broker_id, shutting_down=sorted(self._ctx.shutting_down))
        movable = [
            tp
            for tp in self._ctx.partitions_on_broker(broker_id)
            if tp in self._ctx.leadership and len(self._ctx.replicas(tp)) > 1
        ]
        led = [tp for tp in movable if self._ctx.leadership[tp].leader == broker_id]
        followed = [PartitionReplica(tp, broker_id) for tp in movable if tp not in led]
        await self._partitions.handle_state_changes(
            led, PartitionState.ONLINE_PARTITION, ElectionStrategy.CONTROLLED_SHUTDOWN
        )
        self._send_batch()  # the new leaders learn at once; the ISR cleanup below follows
        await self._replicas.handle_state_changes(followed, ReplicaState.OFFLINE_REPLICA)
        remaining = tuple(tp for tp in movable if self._ctx.leadership[tp].leader == broker_id)
        _answer(event, 0, remaining)


def _log_registration_changes(
    log: Any, cached: dict[int, LiveBroker], current: dict[int, LiveBroker], dead: list[int], bounced: list[int]
) -> None:
    """A warning for each broker whose registration went, or came back with a new epoch.

    A broker is gone when its session ended, or when its znode was deleted by hand while it lives (it then
    registers again, broker/registration_guard.py): either way it is treated as failed, and when it is back
    as a broker starting up (§2.4).
    """
    for broker_id in dead:
        log.warning("broker_registration_gone", target_broker=broker_id, broker_epoch=cached[broker_id].epoch)
    for broker_id in bounced:
        log.warning(
            "broker_registered_again",
            target_broker=broker_id,
            broker_epoch=current[broker_id].epoch,
            previous_broker_epoch=cached[broker_id].epoch,
        )


def _answer(event: ControlledShutdown, error_code: int, remaining: tuple[TopicPartition, ...] = ()) -> None:
    if not event.reply.done():
        event.reply.set_result((error_code, remaining))


def _answer_reply(reply: AdminReply, error_code: int, results: dict[TopicPartition, Any]) -> None:
    if not reply.done():
        reply.set_result((error_code, results))


async def _completed(results: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
    return results


def _refuse(event: ControllerEvent) -> None:
    if isinstance(event, ControlledShutdown):
        _answer(event, NotControllerError.code)
    elif isinstance(event, ADMIN_EVENTS):
        _answer_reply(event.reply, NotControllerError.code, {})
