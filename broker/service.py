"""The broker's gRPC service: each RPC hands its request to the part that owns it.

Data requests go to the replica manager, Metadata to the metadata cache,
admin requests to the admin manager, controller requests are fenced by
controller epoch there. A request that fails unexpectedly answers
UNKNOWN_SERVER_ERROR through gRPC's INTERNAL status with one line, and the
broker logs the traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from broker.authorizer.grpc_checks import guard
from broker.config_admin import AlterOp, ConfigOp, DescribeConfigsResult
from broker.metadata_cache import MetadataCache
from broker.producer_ids import init_producer_id
from broker.replica_manager import ReplicaManager
from broker.request_bounds import BytesInFlight, bounded_handler
from broker.state_change_log import update_metadata_partition_text
from client.kafka import errors
from client.kafka.structs import TopicPartition
from zkraft_proto import broker_pb2 as pb
from zkraft_proto.broker_pb2_grpc import BrokerServicer

_SERVICE = pb.DESCRIPTOR.services_by_name["Broker"]
# Methods whose handler returns the response already encoded.
_ENCODED_RESPONSES = frozenset({"Fetch"})


def add_broker_service(
    service: BrokerServicer, server: grpc.aio.Server, budget: BytesInFlight, wait_for_room_s: float, logger: Any
) -> None:
    """`broker_pb2_grpc.add_BrokerServicer_to_server`, except that each request waits for room in `budget`
    (queued.max.request.bytes) before it is parsed, and Fetch answers bytes it encoded itself. A port that
    authenticates (broker/grpc_authentication.py) refuses an unauthenticated call before reading its bytes."""
    handlers = {}
    authorizing = getattr(service, "authorizer", None) is not None  # no authorizer: no guard, nothing runs
    authentication = getattr(service, "authentication", None)
    # A principal is needed by a SASL port (to refuse calls without a login) and by the authorizer's checks on a
    # port that knows its callers; on one that knows no one every call is User:ANONYMOUS, the checks' default.
    authenticating = authentication is not None and (
        authentication.login is not None or (authorizing and authentication.knows_callers)
    )
    for method in _SERVICE.methods:
        request_type = getattr(pb, method.input_type.name)
        response_type = getattr(pb, method.output_type.name)
        method_handler = getattr(service, method.name)
        handler = bounded_handler(
            guard(service, method.name, method_handler) if authorizing else method_handler,
            request_type.FromString,
            method.input_type.name,
            budget,
            wait_for_room_s,
            logger,
        )
        if authenticating:
            handler = authentication.wrap(method.name, handler)
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            handler,
            request_deserializer=None,  # raw bytes: parsed by bounded_handler once they fit in the budget
            response_serializer=None if method.name in _ENCODED_RESPONSES else response_type.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE.full_name, handlers),))
    server.add_registered_method_handlers(_SERVICE.full_name, handlers)


def _no_state_change_log(message: str) -> None:
    """Without a state-change.log (tests that build a service by hand) the lines go nowhere."""


class BrokerService(BrokerServicer):
    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, admin: Any, logger: Any) -> None:
        self._replicas = replicas
        self._metadata = metadata
        self._admin = admin
        self._log = logger
        self.controller: Any = None  # the KafkaController, for ControlledShutdown (set by the server)
        # Writes a `[Broker id=N]` line to state-change.log (set by the server).
        self.state_change: Callable[[str], None] = _no_state_change_log
        self.producer_ids: Any = None  # the ProducerIdManager, for InitProducerId (set by the server)
        self.groups: Any = None  # the GroupApi (broker/group/api.py), for the group RPCs (set by the server)
        # The AclAuthorizer (broker/authorizer) when `authorizer.class.name` names it; None: every request allowed.
        self.authorizer: Any = None
        # Who calls the gRPC port (broker/grpc_authentication.py; set by the server): None, everyone is ANONYMOUS.
        self.authentication: Any = None

    # The broker's parts, for the Kafka listener's handlers (broker/kafka_api): they translate Kafka's requests
    # into calls on the same parts the gRPC methods below use.
    @property
    def replicas(self) -> ReplicaManager:
        return self._replicas

    @property
    def metadata_cache(self) -> MetadataCache:
        return self._metadata

    @property
    def admin(self) -> Any:
        return self._admin

    @property
    def logger(self) -> Any:
        return self._log

    async def Produce(self, request: pb.ProduceRequest, context: grpc.aio.ServicerContext) -> pb.ProduceResponse:
        return await self._replicas.produce(request)

    async def Fetch(self, request: pb.FetchRequest, context: grpc.aio.ServicerContext) -> bytes:
        """An encoded FetchResponse (broker/fetch_response.py): registered without a response serializer."""
        reply = await self._replicas.fetch(request)
        return reply.encode()

    async def ListOffsets(
        self, request: pb.ListOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListOffsetsResponse:
        return self._replicas.list_offsets(request)

    async def InitProducerId(
        self, request: pb.InitProducerIdRequest, context: grpc.aio.ServicerContext
    ) -> pb.InitProducerIdResponse:
        """A fresh producer id, epoch 0 (Kafka's answer to an idempotent producer without a transactional id)."""
        result = await init_producer_id(self.producer_ids, request.transactional_id or None, self._log)
        return pb.InitProducerIdResponse(
            error_code=result.error_code,
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
            error_message=result.error_message or "",
        )

    async def Metadata(self, request: pb.MetadataRequest, context: grpc.aio.ServicerContext) -> pb.MetadataResponse:
        # A set, as Kafka's KafkaApis takes it: a name repeated 20,000 times is answered once, not 20,000 times.
        topics = None if request.all_topics else list(dict.fromkeys(request.topics))
        if topics and request.allow_auto_topic_creation and self._admin is not None:
            missing = [t for t in topics if not self._metadata.contains(t)]
            if missing:
                await self._admin.auto_create(missing)
        return self._metadata.metadata(topics)

    async def OffsetForLeaderEpoch(
        self, request: pb.OffsetForLeaderEpochRequest, context: grpc.aio.ServicerContext
    ) -> pb.OffsetForLeaderEpochResponse:
        return self._replicas.offset_for_leader_epoch(request)

    async def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateTopicsResponse:
        return await self._admin.create_topics(request)

    async def CreatePartitions(
        self, request: pb.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreatePartitionsResponse:
        return await self._admin.create_partitions(request)

    async def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTopicsResponse:
        return await self._admin.delete_topics(request)

    async def LeaderAndIsr(
        self, request: pb.LeaderAndIsrRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaderAndIsrResponse:
        return await self._replicas.become_leader_or_follower(request)

    async def UpdateMetadata(
        self, request: pb.UpdateMetadataRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateMetadataResponse:
        if request.controller_epoch < self._metadata.controller_epoch:
            return pb.UpdateMetadataResponse(error_code=errors.StaleControllerEpochError.code)
        self._metadata.update(request)
        for state in request.partition_states:
            self.state_change(
                f"Cached leader info {update_metadata_partition_text(state)} for partition "
                f"{state.topic_name}-{state.partition_index} in response to UpdateMetadata request sent by "
                f"controller {request.controller_id} epoch {request.controller_epoch} with correlation id "
                f"{request.correlation_id}"
            )
        self._replicas.controller_epoch = max(self._replicas.controller_epoch, request.controller_epoch)
        return pb.UpdateMetadataResponse()

    async def StopReplica(
        self, request: pb.StopReplicaRequest, context: grpc.aio.ServicerContext
    ) -> pb.StopReplicaResponse:
        return await self._replicas.stop_replicas(request)

    async def ControlledShutdown(
        self, request: pb.ControlledShutdownRequest, context: grpc.aio.ServicerContext
    ) -> pb.ControlledShutdownResponse:
        handler = getattr(self.controller, "controlled_shutdown", None)
        if handler is None or not getattr(self.controller, "is_active", False):
            return pb.ControlledShutdownResponse(error_code=errors.NotControllerError.code)
        return await handler(request)

    # ---------------------------------------------------------------- consumer groups (broker/group/)

    async def FindCoordinator(
        self, request: pb.FindCoordinatorRequest, context: grpc.aio.ServicerContext
    ) -> pb.FindCoordinatorResponse:
        return await self.groups.find_coordinator(request)

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext) -> pb.JoinGroupResponse:
        return await self.groups.join_group(request)

    async def SyncGroup(self, request: pb.SyncGroupRequest, context: grpc.aio.ServicerContext) -> pb.SyncGroupResponse:
        return await self.groups.sync_group(request)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext) -> pb.HeartbeatResponse:
        return await self.groups.heartbeat(request)

    async def LeaveGroup(
        self, request: pb.LeaveGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveGroupResponse:
        return await self.groups.leave_group(request)

    async def OffsetCommit(
        self, request: pb.OffsetCommitRequest, context: grpc.aio.ServicerContext
    ) -> pb.OffsetCommitResponse:
        return await self.groups.offset_commit(request)

    async def OffsetFetch(
        self, request: pb.OffsetFetchRequest, context: grpc.aio.ServicerContext
    ) -> pb.OffsetFetchResponse:
        return await self.groups.offset_fetch(request)

    async def DescribeGroups(
        self, request: pb.DescribeGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeGroupsResponse:
        return await self.groups.describe_groups(request)

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListGroupsResponse:
        return await self.groups.list_groups(request)

    async def DeleteGroups(
        self, request: pb.DeleteGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteGroupsResponse:
        return await self.groups.delete_groups(request)

    # ---------------------------------------------------------------- configs (broker/config_admin.py)

    async def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeConfigsResponse:
        resources = [(r.resource_type, r.resource_name, list(r.configuration_keys) or None) for r in request.resources]
        results = await self._admin.configs.describe(
            resources,
            include_synonyms=request.include_synonyms,
            include_documentation=request.include_documentation,
        )
        return pb.DescribeConfigsResponse(results=[describe_configs_result_pb(r) for r in results])

    async def AlterConfigs(
        self, request: pb.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterConfigsResponse:
        try:
            resources = [
                (
                    r.resource_type,
                    r.resource_name,
                    [
                        ConfigOp(c.name, c.value if c.HasField("value") else None, AlterOp(c.config_operation))
                        for c in r.configs
                    ],
                )
                for r in request.resources
            ]
        except ValueError as exc:  # an operation id AlterConfigOp.OpType does not know
            return pb.AlterConfigsResponse(
                responses=[
                    pb.AlterConfigsResourceResponse(
                        error_code=errors.InvalidRequestError.code,
                        error_message=f"Unknown alter config operation type: {exc}",
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                    )
                    for r in request.resources
                ]
            )
        results = await self._admin.configs.alter(
            resources, validate_only=request.validate_only, incremental=request.incremental
        )
        return pb.AlterConfigsResponse(
            responses=[
                pb.AlterConfigsResourceResponse(
                    error_code=r.error_code,
                    error_message=r.error_message or "",
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in results
            ]
        )

    async def DeleteRecords(
        self, request: pb.DeleteRecordsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteRecordsResponse:
        return await self._replicas.delete_records(request)

    async def ElectLeaders(
        self, request: pb.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ElectLeadersResponse:
        partitions = None if request.all_partitions else _topic_partitions(request.topic_partitions)
        error_code, results = await self.controller_admin_call("elect_leaders", partitions, request.election_type)
        response = pb.ElectLeadersResponse(error_code=error_code)
        for topic, items in _by_topic(results).items():
            out = response.replica_election_results.add(topic=topic)
            for partition, (code, message) in items:
                out.partition_result.add(partition_id=partition, error_code=code, error_message=message)
        return response

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterPartitionReassignmentsResponse:
        reassignments = tuple(
            (TopicPartition(t.name, p.partition_index), None if p.cancel else tuple(p.replicas))
            for t in request.topics
            for p in t.partitions
        )
        error_code, results = await self.controller_admin_call("alter_partition_reassignments", reassignments)
        response = pb.AlterPartitionReassignmentsResponse(error_code=error_code)
        for topic, items in _by_topic(results).items():
            out = response.responses.add(name=topic)
            for partition, (code, message) in items:
                out.partitions.add(partition_index=partition, error_code=code, error_message=message)
        return response

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPartitionReassignmentsResponse:
        partitions = None if request.all_partitions else _topic_partitions(request.topics)
        error_code, ongoing = await self.controller_admin_call("list_partition_reassignments", partitions)
        response = pb.ListPartitionReassignmentsResponse(error_code=error_code)
        for topic, items in _by_topic(ongoing).items():
            out = response.topics.add(name=topic)
            for partition, ra in items:
                out.partitions.add(
                    partition_index=partition,
                    replicas=ra.replicas,
                    adding_replicas=ra.adding,
                    removing_replicas=ra.removing,
                )
        return response

    async def SaslAuthenticate(
        self, request: pb.SaslAuthenticateRequest, context: grpc.aio.ServicerContext
    ) -> pb.SaslAuthenticateResponse:
        login = getattr(self.authentication, "login", None)
        if login is None:
            return pb.SaslAuthenticateResponse(
                error_code=errors.IllegalSaslStateError.code,
                error_message="this broker's gRPC port takes no SASL login (its listener GRPC is not SASL_SSL): "
                "connect with security.protocol=SSL or PLAINTEXT",
            )
        return await login.authenticate(request)

    async def controller_admin_call(self, method: str, *args: Any) -> tuple[int, dict[TopicPartition, Any]]:
        """The controller's admin API `method`; NOT_CONTROLLER when this broker is not the active controller."""
        if self.controller is None or not getattr(self.controller, "is_active", False):
            return errors.NotControllerError.code, {}
        return await getattr(self.controller, method)(*args)


def _topic_partitions(topics: Any) -> tuple[TopicPartition, ...]:
    """TopicPartitions messages -> TopicPartition tuple."""
    return tuple(TopicPartition(t.topic, p) for t in topics for p in t.partitions)


def _by_topic(results: dict[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    """Per-partition results grouped by topic, in partition order."""
    grouped: dict[str, list[tuple[int, Any]]] = {}
    for tp in sorted(results):
        grouped.setdefault(tp.topic, []).append((tp.partition, results[tp]))
    return grouped


def describe_configs_result_pb(result: DescribeConfigsResult) -> pb.DescribeConfigsResult:
    return pb.DescribeConfigsResult(
        error_code=result.error_code,
        error_message=result.error_message or "",
        resource_type=result.resource_type,
        resource_name=result.resource_name,
        configs=[
            pb.DescribeConfigsResourceResult(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=int(e.source),
                is_sensitive=e.is_sensitive,
                synonyms=[
                    pb.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms
                ],
                config_type=int(e.config_type),
                documentation=e.documentation,
            )
            for e in result.entries
        ],
    )
    # ---------------------------------------------------------------- records deletion, elections, reassignment
