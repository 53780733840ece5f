"""Replicas that lost acknowledged data: out of the ISR before they can lead (KIP-966's motivation).

A broker whose log recovery cut a partition below a checkpointed offset
publishes a claim, `/brokers/damaged_logs/<id>`, before it registers
(broker/damaged_logs.py says why it is a znode of its own). The controller
acts on the claim before the broker gets any LeaderAndIsr, at both places
where it first learns of a live broker:

* broker start-up (`on_broker_startup`, first step of `onBrokerStartup`);
* controller failover (`on_failover`, right after the context is read, before
  any request goes out): a broker that registered while no controller ran.

For each claimed partition the pure rule `damaged_replica_decision` decides:
the damaged replica leaves the ISR and, if it led, a healthy ISR member leads,
or nobody until one registers; if every ISR member is damaged, the eligible
leader replicas (KIP-966's ELR: they left the ISR while it was below
min.insync.replicas, so they hold every acknowledged record) become the ISR;
only if no replica is known to have the data may a damaged one lead, logged
as an unclean election. Until it is back in the ISR, a replica moved out this
way is never the pick of an unclean election either (`unclean.leader.election.enable`
trades data for availability, but not for data another replica still holds);
this controller remembers that in memory, so a controller failover in between
forgets it. The write is conditional on the znode version and
fenced by the controller epoch; the claim is deleted afterwards (at the
version read), so a replica that caught up and rejoined the ISR is never
pushed out by it again. A crash between the two repeats only an idempotent
step: the replica is out of the ISR already.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from broker.controller.channel import RequestBatch
from broker.controller.context import ControllerContext, PartitionReplica, tp_text
from broker.controller.election import (
    DamagedReplicaDecision,
    LeaderAndIsr,
    damaged_replica_decision,
    is_stale_controller_epoch,
)
from broker.controller.state_machines import concurrently, topic_min_isr
from broker.controller.states import PartitionState
from broker.controller.zk_store import ControllerZkStore
from broker.damaged_logs import ClaimDataError, LostData
from broker.state_change_log import StateChangeLogger, leader_and_isr_text
from client.kafka.structs import TopicPartition
from client.zk.exceptions import BadVersionError

# A conditional write lost to a concurrent ISR change is retried from a fresh read this often.
DAMAGE_WRITE_RETRIES_MAX = 10


class DamagedReplicaHandler:
    def __init__(
        self,
        ctx: ControllerContext,
        store: ControllerZkStore,
        batch: Callable[[], RequestBatch],
        state_log: StateChangeLogger,
        logger: Any,
        min_insync_replicas_default: int = 1,
    ) -> None:
        self._min_isr_default = min_insync_replicas_default
        self._ctx = ctx
        self._store = store
        self._batch = batch
        self._state_log = state_log
        self._log = logger

    async def on_failover(self) -> None:
        """Claims of every live broker; no request is queued (the state machines' start-up sends them)."""
        await self._process(sorted(self._ctx.live_broker_ids), send=False)

    async def on_broker_startup(self, brokers: Sequence[int]) -> None:
        """Claims of brokers that just registered; the other live replicas learn the new state at once."""
        await self._process(brokers, send=True)

    async def _process(self, brokers: Iterable[int], send: bool) -> None:
        for broker_id in brokers:
            try:
                claim = await self._store.read_damage_claim(broker_id)
            except ClaimDataError as exc:
                # Unreadable: treat nothing as damaged rather than block the broker; say so loudly.
                self._log.error("damage_claim_unreadable", target=broker_id, error=str(exc))
                continue
            if claim is not None:
                await self._process_claim(broker_id, claim[0], claim[1], send)

    async def _process_claim(self, broker_id: int, lost: list[LostData], version: int, send: bool) -> None:
        """Every claimed partition, then the claim's deletion, unless one could not be handled (kept: retried)."""
        known = [i for i in lost if i.tp in self._ctx.leadership and broker_id in self._ctx.replicas(i.tp)]
        if len(known) < len(lost):  # deleted since, or never created: nothing to protect
            self._log.info("damage_claim_partitions_unknown", target=broker_id, partitions=len(lost) - len(known))
        failed: list[LostData] = []

        async def handle(item: LostData) -> None:
            if not await self._handle(item, broker_id, send):
                failed.append(item)

        await concurrently(handle, known)
        if failed:
            self._log.error("damage_claim_kept", target=broker_id, partitions_not_handled=len(failed))
        elif not await self._store.delete_damage_claim(broker_id, version, self._ctx.epoch_zk_version):
            self._log.info("damage_claim_changed_meanwhile", target=broker_id)

    async def _handle(self, item: LostData, broker_id: int, send: bool) -> bool:
        """False if the partition state kept changing under every attempt."""
        tp = item.tp
        min_isr = await topic_min_isr(self._store, tp.topic, self._min_isr_default)
        for _ in range(DAMAGE_WRITE_RETRIES_MAX):
            current = await self._store.read_partition_state(tp)
            if current is None or is_stale_controller_epoch(self._ctx.epoch, current.controller_epoch):
                return True  # deleted, or another controller owns it now (its own failover reads the claim)
            replicas, live = self._ctx.replicas(tp), self._ctx.online_broker_ids
            decision = damaged_replica_decision(current, replicas, (broker_id,), live, self._ctx.epoch, min_isr)
            try:
                written = await self._write(tp, current, decision)
            except BadVersionError:
                self._log.info("partition_state_write_conflict", topic=tp.topic, partition=tp.partition)
                continue
            if not decision.unclean:
                self._ctx.damaged_replicas.add(PartitionReplica(tp, broker_id))
            self._report(item, broker_id, current, written, decision)
            if send and decision.state is not None:
                self._send(tp, written, exclude=(broker_id,))
            return True
        self._log.error("damaged_replica_not_handled", topic=tp.topic, partition=tp.partition, target=broker_id)
        return False

    async def _write(self, tp: TopicPartition, current: LeaderAndIsr, decision: DamagedReplicaDecision) -> LeaderAndIsr:
        state = current
        if decision.state is not None:
            version = await self._store.update_partition_state(tp, decision.state, self._ctx.epoch_zk_version)
            state = decision.state.with_zk_version(version)
        self._ctx.leadership[tp] = state
        if self._ctx.partition_state(tp) is not PartitionState.NEW_PARTITION:
            online = self._ctx.is_online(state.leader)
            self._ctx.partition_states[tp] = (
                PartitionState.ONLINE_PARTITION if online else PartitionState.OFFLINE_PARTITION
            )
        return state

    def _send(self, tp: TopicPartition, state: LeaderAndIsr, exclude: Collection[int]) -> None:
        """The other live replicas get the new state now; the starting broker gets it from its start-up."""
        recipients = tuple(r for r in self._ctx.replicas(tp) if self._ctx.is_live(r) and r not in exclude)
        self._batch().add_leader_and_isr(
            recipients, tp, state, self._ctx.replicas(tp), False, self._ctx.live_broker_ids
        )

    def _report(
        self, item: LostData, broker_id: int, old: LeaderAndIsr, new: LeaderAndIsr, decision: DamagedReplicaDecision
    ) -> None:
        tp = item.tp
        self._log.warning(
            "damaged_replica_handled",
            topic=tp.topic,
            partition=tp.partition,
            target=broker_id,
            outcome=decision.outcome,
            log_end_offset=item.log_end_offset,
            checkpointed_offset=item.checkpointed_offset,
            checkpoint=item.checkpoint,
            old_leader=old.leader,
            new_leader=new.leader,
            old_isr=list(old.isr),
            new_isr=list(new.isr),
            eligible=list(new.eligible),
        )
        lost = (
            f"replica {broker_id} of {tp_text(tp)} lost acknowledged data: its log ends at {item.log_end_offset} "
            f"below {item.checkpointed_offset} ({item.checkpoint})"
        )
        if decision.unclean:
            self._state_log.controller(
                self._ctx.epoch,
                f"Unclean leader election: {lost}, and no other replica is known to have it. "
                f"Partition state {leader_and_isr_text(new)}. There's potential data loss.",
                level="WARN",
            )
            return
        self._state_log.controller(
            self._ctx.epoch,
            f"Damaged replica out of sync: {lost}; {decision.outcome}, partition state {leader_and_isr_text(new)}",
            level="WARN",
        )
