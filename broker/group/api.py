"""The group RPCs at the gRPC edge: protobuf in, protobuf out (docs/research/kafka.md §5.3).

FindCoordinator creates `__consumer_offsets` on first use (Kafka's
getOrCreateInternalTopic: `offsets.topic.num.partitions` partitions,
replication factor `offsets.topic.replication.factor` capped by the live
brokers, `cleanup.policy=compact`, `segment.bytes=offsets.topic.segment.bytes`)
and answers the leader of the group's partition. The rest hand typed values
to the coordinator and turn its answers back into responses.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.config import BrokerConfig
from broker.group.coordinator import GroupConfig, GroupCoordinator, wall_clock_ms
from broker.group.metadata import GroupState, JoinResult
from broker.group.partitioner import OFFSETS_TOPIC
from broker.group.records import OffsetAndMetadata
from broker.group.store import ReplicaOffsetsStore
from broker.metadata_cache import MetadataCache
from client.kafka import errors
from client.kafka.structs import TopicPartition
from client.kafka.znodes import BROKER_IDS_PATH
from zkraft_proto import broker_pb2 as pb

GROUP_KEY_TYPE = 0
# FindCoordinator waits at most this long for a just-created __consumer_offsets to get leaders.
CREATE_WAIT_MS_MAX = 10000


def group_config_of(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        group_min_session_timeout_ms=config.group_min_session_timeout_ms,
        group_max_session_timeout_ms=config.group_max_session_timeout_ms,
        offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
    )


def build_group_api(config: BrokerConfig, replicas: Any, metadata: MetadataCache, admin: Any, logger: Any) -> GroupApi:
    """The coordinator over this broker's replica manager, told of every `__consumer_offsets` leadership change."""
    store = ReplicaOffsetsStore(replicas, config.request_timeout_ms)
    coordinator = GroupCoordinator(group_config_of(config), store, logger.bind(component="group_coordinator"))

    def on_leadership_change(tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic == OFFSETS_TOPIC:
            coordinator.on_leadership_change(tp.partition, is_leader)

    replicas.on_leadership_change(on_leadership_change)
    coordinator.start()
    return GroupApi(coordinator, config, metadata, admin, logger)


class GroupApi:
    def __init__(
        self, coordinator: GroupCoordinator, config: BrokerConfig, metadata: MetadataCache, admin: Any, logger: Any
    ) -> None:
        self.coordinator = coordinator
        self._config = config
        self._metadata = metadata
        self._admin = admin
        self._log = logger
        self._creating: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- FindCoordinator

    async def find_coordinator(self, request: pb.FindCoordinatorRequest) -> pb.FindCoordinatorResponse:
        if request.key_type != GROUP_KEY_TYPE:
            return pb.FindCoordinatorResponse(
                error_code=errors.InvalidRequestError.code,
                error_message=f"key type {request.key_type}: only group coordinators (0) are served",
                node_id=-1,
            )
        error, message, broker_id = await self.group_coordinator_id(request.key)
        broker = self._metadata.brokers.get(broker_id)
        if error != errors.NONE or broker is None:
            return pb.FindCoordinatorResponse(error_code=error, error_message=message, node_id=-1)
        return pb.FindCoordinatorResponse(node_id=broker.id, host=broker.host, port=broker.port)

    async def group_coordinator_id(self, group_id: str) -> tuple[int, str, int]:
        """(error, message, broker id) of the coordinator of `group_id`: the leader of its `__consumer_offsets`
        partition, the topic created on first use. Both front ends answer FindCoordinator from this."""
        if not self._metadata.contains(OFFSETS_TOPIC):
            await self._create_offsets_topic()
        partition = self.coordinator.partition_for(group_id)
        state = self._metadata.partition_state(OFFSETS_TOPIC, partition)
        if state is None or state.leader not in self._metadata.brokers:
            message = f"{OFFSETS_TOPIC}-{partition} has no live leader yet"
            return errors.CoordinatorNotAvailableError.code, message, -1
        return errors.NONE, "", state.leader

    async def _create_offsets_topic(self) -> None:
        """One creation at a time per broker; a topic another broker created meanwhile is fine."""
        if self._creating is not None:
            await asyncio.shield(self._creating)
            return
        self._creating = asyncio.get_running_loop().create_future()
        try:
            config = self._config
            live = max(1, len(self._metadata.brokers), await self._registered_brokers())
            topic = pb.CreatableTopic(
                name=OFFSETS_TOPIC,
                num_partitions=config.offsets_topic_num_partitions,
                replication_factor=min(config.offsets_topic_replication_factor, live),
                configs={
                    "cleanup.policy": "compact",
                    "segment.bytes": str(config.offsets_topic_segment_bytes),
                    "compression.type": "producer",
                },
            )
            timeout_ms = min(config.request_timeout_ms, CREATE_WAIT_MS_MAX)
            response = await self._admin.create_topics(pb.CreateTopicsRequest(topics=[topic], timeout_ms=timeout_ms))
            for result in response.topics:
                if result.error_code == errors.NONE:
                    self._log.info(
                        "offsets_topic_created", partitions=topic.num_partitions, rf=topic.replication_factor
                    )
                elif result.error_code != errors.TopicAlreadyExistsError.code:
                    self._log.warning("offsets_topic_create_failed", error=result.error_message)
        except Exception as exc:  # the caller answers COORDINATOR_NOT_AVAILABLE and the client retries
            self._log.warning("offsets_topic_create_failed", error=str(exc))
        finally:
            self._creating.set_result(None)
            self._creating = None

    async def _registered_brokers(self) -> int:
        """Live brokers by their `/brokers/ids` registrations (this broker's metadata may lag at start-up)."""
        try:
            children = await self._admin.zk.get_children(BROKER_IDS_PATH)
        except Exception as exc:  # the metadata cache's count is used instead
            self._log.info("live_broker_count_failed", error=str(exc))
            return 0
        return sum(1 for child in children if child.isdigit())

    # ---------------------------------------------------------------- membership

    async def join_group(self, request: pb.JoinGroupRequest) -> pb.JoinGroupResponse:
        result: JoinResult = await self.coordinator.join_group(
            request.group_id,
            request.member_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocol_type,
            [(p.name, p.metadata) for p in request.protocols],
            group_instance_id=request.group_instance_id or None,
        )
        return pb.JoinGroupResponse(
            error_code=result.error_code,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            leader=result.leader_id,
            member_id=result.member_id,
            members=[
                pb.JoinGroupResponseMember(member_id=m, metadata=data, group_instance_id=instance or "")
                for (m, data), instance in zip(
                    result.members, result.member_instance_ids or [None] * len(result.members), strict=True
                )
            ],
        )

    async def sync_group(self, request: pb.SyncGroupRequest) -> pb.SyncGroupResponse:
        result = await self.coordinator.sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.protocol_type,
            request.protocol_name,
            {a.member_id: a.assignment for a in request.assignments},
            group_instance_id=request.group_instance_id or None,
        )
        return pb.SyncGroupResponse(
            error_code=result.error_code,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    async def heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        return pb.HeartbeatResponse(
            error_code=self.coordinator.heartbeat(
                request.group_id,
                request.generation_id,
                request.member_id,
                group_instance_id=request.group_instance_id or None,
            )
        )

    async def leave_group(self, request: pb.LeaveGroupRequest) -> pb.LeaveGroupResponse:
        identities = [(m.member_id, m.group_instance_id or None) for m in request.members]
        error, results = self.coordinator.leave_group(request.group_id, identities)
        return pb.LeaveGroupResponse(
            error_code=error,
            members=[
                pb.LeaveGroupMemberResponse(member_id=m, group_instance_id=i or "", error_code=code)
                for (m, code), (_, i) in zip(results, identities if results else [], strict=False)
            ],
        )

    # ---------------------------------------------------------------- offsets

    async def offset_commit(self, request: pb.OffsetCommitRequest) -> pb.OffsetCommitResponse:
        now = wall_clock_ms()
        offsets = {
            TopicPartition(topic.name, p.partition_index): OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata,
                commit_timestamp_ms=now,
            )
            for topic in request.topics
            for p in topic.partitions
        }
        results = await self.commit_offsets(
            request.group_id, request.generation_id, request.member_id, request.group_instance_id or None, offsets
        )
        response = pb.OffsetCommitResponse()
        by_topic: dict[str, pb.OffsetCommitTopicResponse] = {}
        for tp, code in results.items():
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = response.topics.add(name=tp.topic)
            topic.partitions.add(partition_index=tp.partition, error_code=code)
        return response

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """An offset of a partition this broker does not know answers UNKNOWN_TOPIC_OR_PARTITION and is not
        stored (K28 KafkaApis.handleOffsetCommitRequest); the rest go to the coordinator."""
        unknown = {
            tp: errors.UnknownTopicOrPartitionError.code
            for tp in offsets
            if self._metadata.partition_state(tp.topic, tp.partition) is None
        }
        known = {tp: value for tp, value in offsets.items() if tp not in unknown}
        results = (
            await self.coordinator.commit_offsets(
                group_id, generation_id, member_id, known, group_instance_id=group_instance_id
            )
            if known
            else {}
        )
        return {tp: unknown[tp] if tp in unknown else results[tp] for tp in offsets}

    async def offset_fetch(self, request: pb.OffsetFetchRequest) -> pb.OffsetFetchResponse:
        wanted = (
            None
            if request.all_topics
            else [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
        )
        error, offsets = self.coordinator.fetch_offsets(request.group_id, wanted)
        response = pb.OffsetFetchResponse(error_code=error)
        if error != errors.NONE:
            offsets = dict.fromkeys(wanted or [])
        by_topic: dict[str, pb.OffsetFetchTopicResponse] = {}
        for tp, value in offsets.items():
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = response.topics.add(name=tp.topic)
            topic.partitions.add(
                partition_index=tp.partition,
                committed_offset=-1 if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
                error_code=error,
            )
        return response

    # ---------------------------------------------------------------- admin

    async def describe_groups(self, request: pb.DescribeGroupsRequest) -> pb.DescribeGroupsResponse:
        response = pb.DescribeGroupsResponse()
        for group_id in dict.fromkeys(request.groups):  # each group once, however often it is named
            error, group = self.coordinator.describe_group(group_id)
            out = response.groups.add(error_code=error, group_id=group_id)
            if error != errors.NONE:
                continue
            if group is None:
                out.group_state = GroupState.DEAD.value
                continue
            out.group_state = group.state.value
            out.protocol_type = group.protocol_type or ""
            stable = group.is_(GroupState.STABLE)
            out.protocol_data = (group.protocol_name or "") if stable else ""
            for member in group.all():
                out.members.add(
                    member_id=member.member_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    member_metadata=member.metadata_for(group.protocol_name or "") if stable else b"",
                    member_assignment=member.assignment if stable else b"",
                )
        return response

    async def list_groups(self, request: pb.ListGroupsRequest) -> pb.ListGroupsResponse:
        error, groups = self.coordinator.list_groups()
        return pb.ListGroupsResponse(
            error_code=error,
            groups=[pb.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "") for g in groups],
        )

    async def delete_groups(self, request: pb.DeleteGroupsRequest) -> pb.DeleteGroupsResponse:
        results = await self.coordinator.delete_groups(list(request.groups_names))
        return pb.DeleteGroupsResponse(
            results=[pb.DeletableGroupResult(group_id=g, error_code=code) for g, code in results.items()]
        )
