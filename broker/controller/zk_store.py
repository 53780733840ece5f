"""The controller's ZooKeeper reads and writes (Kafka's `KafkaZkClient`, the parts the controller uses).

Every write the controller makes after winning is a multi that starts with
`check /controller_epoch @ epoch_zk_version` (docs/research/kafka.md §1.3, KAFKA-6082):
once another controller has bumped the epoch, a deposed controller's write
fails as a whole with `ControllerMovedError` instead of landing.
Watches passed in are one-shot callables; the caller re-arms them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from broker.controller.context import LiveBroker
from broker.controller.election import LeaderAndIsr
from broker.damaged_logs import LostData, claim_path, decode_claim
from client.kafka import znodes as kz
from client.kafka.errors import ControllerMovedError
from client.kafka.structs import TopicPartition
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    ZookeeperError,
)
from client.zk.transaction import AsyncTransaction
from client.zk.watches import Watcher

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
# Kafka's InitialControllerEpoch / InitialControllerEpochZkVersion (2.x).
INITIAL_CONTROLLER_EPOCH = 0
# A topic subtree that changes under its deletion is re-listed this often before giving up (STYLE 10).
SUBTREE_DELETE_RETRIES_MAX = 5


class ControllerZkStore:
    def __init__(self, zk: AsyncZkClient) -> None:
        self.zk = zk

    # ---- /controller and /controller_epoch (§2.2)

    async def read_controller_id(self, watch: Watcher | None = None) -> int:
        """The broker named by `/controller`, -1 if none; `watch` is an exists watch (fires on creation too)."""
        stat = await self.zk.exists(kz.CONTROLLER_PATH, watch=watch)
        if stat is None:
            return -1
        try:
            data, _ = await self.zk.get(kz.CONTROLLER_PATH)
        except NoNodeError:
            return -1
        return kz.decode_controller(data).broker_id

    async def read_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) of `/controller_epoch`, None if absent."""
        try:
            data, stat = await self.zk.get(kz.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return kz.decode_controller_epoch(data), stat.version

    async def register_controller_and_increment_epoch(self, broker_id: int, timestamp_ms: int) -> tuple[int, int]:
        """Create `/controller` and bump `/controller_epoch` in one multi; (new epoch, its znode version).

        Raises ControllerMovedError when another broker won (K28 `registerControllerAndIncrementControllerEpoch`).
        """
        current = await self._controller_epoch_or_create()
        epoch, version = current
        t = self.zk.transaction()
        t.create(kz.CONTROLLER_PATH, kz.encode_controller(broker_id, timestamp_ms), ephemeral=True)
        t.set_data(kz.CONTROLLER_EPOCH_PATH, kz.encode_controller_epoch(epoch + 1), version)
        results = await t.commit()
        failure = _first_failure(results)
        if failure is None:
            return epoch + 1, results[1].version
        if not isinstance(failure, NodeExistsError | BadVersionError):
            raise failure
        # A retried multi may have succeeded the first time: the winner is us iff both znodes say so.
        if await self.read_controller_id() == broker_id:
            after = await self.read_controller_epoch()
            if after is not None and after[0] == epoch + 1:
                return after
        raise ControllerMovedError(f"broker {broker_id} lost the controller election at epoch {epoch + 1}")

    async def _controller_epoch_or_create(self) -> tuple[int, int]:
        current = await self.read_controller_epoch()
        if current is not None:
            return current
        try:
            await self.zk.create(kz.CONTROLLER_EPOCH_PATH, kz.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
            return INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            current = await self.read_controller_epoch()
            if current is None:
                raise ControllerMovedError("/controller_epoch vanished while electing") from None
            return current

    async def delete_controller(self, epoch_zk_version: int) -> None:
        """Resign by deleting `/controller`, only while still the epoch's owner."""
        await self.fenced(lambda t: t.delete(kz.CONTROLLER_PATH), epoch_zk_version)

    # ---- fencing

    async def fenced(self, build: Callable[[AsyncTransaction], None], epoch_zk_version: int) -> list[Any]:
        """Run `build`'s ops after `check /controller_epoch`; their results, or raise the failing op's error."""
        t = self.zk.transaction()
        t.check(kz.CONTROLLER_EPOCH_PATH, epoch_zk_version)
        build(t)
        results = await t.commit()
        check = results[0]
        if isinstance(check, BadVersionError | NoNodeError):
            raise ControllerMovedError(
                f"controller epoch znode version moved past {epoch_zk_version}: another controller was elected"
            )
        failure = _first_failure(results[1:])
        if failure is not None:
            raise failure
        return results[1:]

    # ---- brokers

    async def read_live_brokers(self, watch: Watcher | None = None) -> dict[int, LiveBroker]:
        """Every registered broker with its epoch (czxid); a broker that vanishes meanwhile is left out.

        With `/brokers/ids` itself deleted (by hand: brokers never delete it) there are none, and `watch`
        waits for its re-creation instead: a live broker re-creates it with its registration.
        """
        try:
            children = await self.zk.get_children(kz.BROKER_IDS_PATH, watch=watch)
        except NoNodeError:
            if await self.zk.exists(kz.BROKER_IDS_PATH, watch=watch) is None:
                return {}
            children = await self.zk.get_children(kz.BROKER_IDS_PATH, watch=watch)
        assert isinstance(children, list)
        ids = sorted(int(c) for c in children if c.isdigit())
        reads = await asyncio.gather(*(self.zk.get(kz.broker_path(i)) for i in ids), return_exceptions=True)
        brokers: dict[int, LiveBroker] = {}
        for broker_id, read in zip(ids, reads, strict=True):
            if isinstance(read, NoNodeError):
                continue
            if isinstance(read, BaseException):
                raise read
            data, stat = read
            brokers[broker_id] = LiveBroker(kz.decode_broker(broker_id, data), stat.czxid)
        return brokers

    # ---- topics

    async def read_topics(self, watch: Watcher | None = None) -> list[str]:
        children = await self.zk.get_children(kz.TOPICS_PATH, watch=watch)
        assert isinstance(children, list)
        return sorted(children)

    async def read_assignment(self, topic: str, watch: Watcher | None = None) -> kz.TopicAssignment | None:
        try:
            data, _ = await self.zk.get(kz.topic_path(topic), watch=watch)
        except NoNodeError:
            return None
        return kz.decode_topic(topic, data)

    async def topic_unclean_override(self, topic: str) -> bool | None:
        """The topic's `unclean.leader.election.enable` from `/config/topics/<t>`, None if not set."""
        value = await self._topic_config_value(topic, UNCLEAN_LEADER_ELECTION_ENABLE)
        return None if value is None else value.strip().lower() == "true"

    async def topic_min_isr_override(self, topic: str) -> int | None:
        """The topic's `min.insync.replicas` from `/config/topics/<t>`, None if not set or not a number."""
        value = await self._topic_config_value(topic, MIN_INSYNC_REPLICAS)
        return int(value) if value is not None and value.strip().isdigit() else None

    async def _topic_config_value(self, topic: str, key: str) -> str | None:
        path = kz.topic_config_path(topic)
        try:
            data, _ = await self.zk.get(path)
        except NoNodeError:
            return None
        return kz.decode_config(data, path).get(key)

    # ---- /brokers/damaged_logs/<id> (broker/damaged_logs.py)

    async def read_damage_claim(self, broker_id: int) -> tuple[list[LostData], int] | None:
        """The broker's claim and its znode version, None if it has none. Raises ClaimDataError if unreadable."""
        path = claim_path(broker_id)
        try:
            data, stat = await self.zk.get(path)
        except NoNodeError:
            return None
        return decode_claim(path, data), stat.version

    async def delete_damage_claim(self, broker_id: int, version: int, epoch_zk_version: int) -> bool:
        """Fenced delete at `version`; False if the broker wrote a newer claim meanwhile (or it is gone)."""
        path = claim_path(broker_id)
        try:
            await self.fenced(lambda t: t.delete(path, version), epoch_zk_version)
        except (NoNodeError, BadVersionError):
            return False
        return True

    # ---- partition state znodes

    async def read_partition_state(self, tp: TopicPartition, watch: Watcher | None = None) -> LeaderAndIsr | None:
        """The state znode and its version; `watch` is a data watch (Kafka's PartitionReassignmentIsrChangeHandler)."""
        try:
            data, stat = await self.zk.get(kz.partition_state_path(tp.topic, tp.partition), watch=watch)
        except NoNodeError:
            return None
        state = kz.decode_partition_state(tp.topic, tp.partition, data)
        return LeaderAndIsr(
            state.leader, state.leader_epoch, state.isr, state.controller_epoch, stat.version,
            state.eligible_leader_replicas,
        )  # fmt: skip

    async def read_partition_states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
        reads = await asyncio.gather(*(self.read_partition_state(tp) for tp in partitions))
        return {tp: s for tp, s in zip(partitions, reads, strict=True) if s is not None}

    async def create_partition_state(self, tp: TopicPartition, state: LeaderAndIsr, epoch_zk_version: int) -> None:
        """Create `…/partitions/<p>/state` and its parents (NodeExistsError if it is already there)."""
        path = kz.partition_state_path(tp.topic, tp.partition)
        data = _encode_state(state)
        await self.fenced(lambda t: t.create(path, data, makepath=True), epoch_zk_version)

    async def update_partition_state(self, tp: TopicPartition, state: LeaderAndIsr, epoch_zk_version: int) -> int:
        """Conditional set at `state.zk_version`; the new znode version. BadVersionError if someone wrote first."""
        path = kz.partition_state_path(tp.topic, tp.partition)
        data = _encode_state(state)
        results = await self.fenced(lambda t: t.set_data(path, data, state.zk_version), epoch_zk_version)
        return int(results[0].version)

    async def write_topic_assignment(self, assignment: kz.TopicAssignment, epoch_zk_version: int) -> None:
        """Overwrite `/brokers/topics/<t>` (fenced; Kafka's `setTopicAssignment`), with adding/removing replicas."""
        data = kz.encode_topic(assignment)
        await self.fenced(lambda t: t.set_data(kz.topic_path(assignment.topic), data), epoch_zk_version)

    # ---- /admin/reassign_partitions (§2.13) and /admin/preferred_replica_election (§2.14)

    async def read_reassignments(self, watch: Watcher | None = None) -> dict[TopicPartition, tuple[int, ...]]:
        """The partitions listed in `/admin/reassign_partitions` (empty if absent); `watch` is an exists watch."""
        return await self._read_admin(kz.REASSIGN_PARTITIONS_PATH, kz.decode_reassignment, watch) or {}

    async def write_reassignments(
        self, remaining: dict[TopicPartition, tuple[int, ...]], epoch_zk_version: int
    ) -> None:
        """Rewrite `/admin/reassign_partitions` with what is left, deleting it when nothing is (fenced)."""
        path = kz.REASSIGN_PARTITIONS_PATH
        try:
            if remaining:
                data = kz.encode_reassignment(remaining)
                await self.fenced(lambda t: t.set_data(path, data), epoch_zk_version)
            else:
                await self.fenced(lambda t: t.delete(path), epoch_zk_version)
        except NoNodeError:
            pass  # an admin removed it meanwhile

    async def read_preferred_replica_election(self, watch: Watcher | None = None) -> tuple[TopicPartition, ...] | None:
        """The partitions listed in `/admin/preferred_replica_election`, None if absent; an exists watch."""
        return await self._read_admin(kz.PREFERRED_REPLICA_ELECTION_PATH, kz.decode_preferred_replica_election, watch)

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        await self._fenced_delete_if_exists(kz.PREFERRED_REPLICA_ELECTION_PATH, epoch_zk_version)

    async def _read_admin(self, path: str, decode: Callable[[bytes], Any], watch: Watcher | None) -> Any:
        """Arm an exists watch on `path` (it fires on creation, change and deletion) and decode its data."""
        if await self.zk.exists(path, watch=watch) is None:
            return None
        try:
            data, _ = await self.zk.get(path)
        except NoNodeError:
            return None
        return decode(data)

    # ---- /isr_change_notification (§2.16)

    async def read_isr_change_notifications(self, watch: Watcher | None = None) -> dict[str, frozenset[TopicPartition]]:
        """Child name -> partitions it lists; a notification deleted meanwhile is left out."""
        children = await self.zk.get_children(kz.ISR_CHANGE_NOTIFICATION_PATH, watch=watch)
        assert isinstance(children, list)
        names = sorted(c for c in children if c.startswith(kz.ISR_CHANGE_PREFIX))
        paths = [f"{kz.ISR_CHANGE_NOTIFICATION_PATH}/{n}" for n in names]
        reads = await asyncio.gather(*(self.zk.get(p) for p in paths), return_exceptions=True)
        out: dict[str, frozenset[TopicPartition]] = {}
        for name, path, read in zip(names, paths, reads, strict=True):
            if isinstance(read, NoNodeError):
                continue
            if isinstance(read, BaseException):
                raise read
            out[name] = kz.decode_isr_change(read[0], path)
        return out

    async def delete_isr_change_notifications(self, names: Sequence[str], epoch_zk_version: int) -> None:
        """Fenced deletes, one multi each so that one already gone does not keep the others."""
        for name in names:
            path = f"{kz.ISR_CHANGE_NOTIFICATION_PATH}/{name}"
            try:
                await self.fenced(lambda t, p=path: t.delete(p), epoch_zk_version)  # type: ignore[misc]
            except NoNodeError:
                pass

    # ---- topic deletion (§2.12)

    async def read_topic_deletions(self, watch: Watcher | None = None) -> list[str]:
        """The topics marked under `/admin/delete_topics` (Kafka's getTopicDeletions); `watch` is a child watch."""
        children = await self.zk.get_children(kz.DELETE_TOPICS_PATH, watch=watch)
        assert isinstance(children, list)
        return sorted(children)

    async def delete_topic_deletions(self, topics: Sequence[str], epoch_zk_version: int) -> None:
        """Fenced deletes of `/admin/delete_topics/<t>`, one multi each; a marker already gone is fine."""
        for topic in topics:
            await self._fenced_delete_if_exists(kz.delete_topic_path(topic), epoch_zk_version)

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        """K28 `deleteTopic`: the topic znode and its subtree, its config, then its deletion marker.

        The marker goes last, so that a controller failing over half-way
        finds the marker and finishes the job.
        """
        await self.delete_recursive(kz.topic_path(topic), epoch_zk_version)
        await self._fenced_delete_if_exists(kz.topic_config_path(topic), epoch_zk_version)
        await self._fenced_delete_if_exists(kz.delete_topic_path(topic), epoch_zk_version)

    async def delete_recursive(self, path: str, epoch_zk_version: int) -> None:
        """Delete `path` and its subtree in one fenced multi, children first; absent is fine.

        Re-listed and retried when the subtree changed between the listing and
        the multi (NoNode / NotEmpty), at most SUBTREE_DELETE_RETRIES_MAX times.
        """
        for _ in range(SUBTREE_DELETE_RETRIES_MAX):
            nodes = await self._subtree_children_first(path)
            if not nodes:
                return

            def build(t: AsyncTransaction, nodes: list[str] = nodes) -> None:
                for node in nodes:
                    t.delete(node)

            try:
                await self.fenced(build, epoch_zk_version)
                return
            except (NoNodeError, NotEmptyError):
                continue
        raise NotEmptyError(f"{path} kept changing while being deleted", path)

    async def _subtree_children_first(self, path: str) -> list[str]:
        try:
            children = await self.zk.get_children(path)
        except NoNodeError:
            return []
        assert isinstance(children, list)
        nodes: list[str] = []
        for child in sorted(children):
            nodes += await self._subtree_children_first(f"{path}/{child}")
        nodes.append(path)
        return nodes

    async def _fenced_delete_if_exists(self, path: str, epoch_zk_version: int) -> None:
        try:
            await self.fenced(lambda t: t.delete(path), epoch_zk_version)
        except NoNodeError:
            pass


def _encode_state(state: LeaderAndIsr) -> bytes:
    return kz.encode_partition_state(
        kz.PartitionState(state.leader, state.leader_epoch, state.isr, state.controller_epoch, state.eligible)
    )


def _first_failure(results: Sequence[Any]) -> ZookeeperError | None:
    """The error of the op that failed a transaction (others report rolled back / not run)."""
    for result in results:
        if isinstance(result, ZookeeperError) and not isinstance(result, RolledBackError | RuntimeInconsistency):
            return result
    return None
