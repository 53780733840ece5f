"""CreateTopics, CreatePartitions and DeleteTopics on any broker (Kafka's `AdminManager`, ZooKeeper mode).

The broker writes the same znodes `zkraft topics --zookeeper` writes (the
planners of client.kafka.topic_admin decide them); the controller, watching
`/brokers/topics` and `/admin/delete_topics`, does the rest. With a
`timeout_ms` the answer waits until this broker's metadata shows a leader for
every new partition, so a client may produce right after.

Every request is bounded before an assignment is built (client/kafka/assignment_bounds.py):
the assignment znode must fit in `jute.maxbuffer`, and a manual assignment may name
registered brokers only (Kafka's KRaft controller check and message).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from broker.config import BrokerConfig
from broker.config_admin import ConfigAdmin
from broker.metadata_cache import MetadataCache
from broker.request_bounds import release_request_bytes
from client.kafka import errors
from client.kafka.assignment import AdminOperationError, BrokerMetadata, RackAwareMode, broker_metadatas
from client.kafka.assignment_bounds import check_manual_assignment_brokers
from client.kafka.topic_admin import plan_partition_addition, plan_topic_creation
from client.kafka.znodes import (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    decode_broker,
    decode_topic,
    delete_topic_path,
    topic_path,
)
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import NodeExistsError, NoNodeError, ZkException
from zkraft_proto import broker_pb2 as pb


def _error_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, errors.KafkaError):
        return exc.code, str(exc)
    if isinstance(exc, AdminOperationError):
        return errors.InvalidReplicaAssignmentError.code, str(exc)
    return errors.UnknownServerError.code, f"{type(exc).__name__}: {exc}"


def _whole_request_error(exc: Exception) -> tuple[int, str]:
    """A failure before any topic was handled (the quorum unreachable): Kafka's ZooKeeper-mode admin retries
    its ZooKeeper calls until the request times out, so its client sees REQUEST_TIMED_OUT and retries."""
    if isinstance(exc, ZkException):
        return errors.RequestTimedOutError.code, f"the quorum did not answer: {exc}"
    return errors.UnknownServerError.code, f"{type(exc).__name__}: {exc}"


def _fail_all(results: Any, names: list[str], exc: Exception) -> None:
    code, message = _whole_request_error(exc)
    for name in names:
        results.add(name=name, error_code=code, error_message=message)


def _check_new_partition_assignments(topic: pb.CreatePartitionsTopic, existing: int, registered: set[int]) -> None:
    """Kafka 2.8 AdminManager.createPartitions: one replica list per new partition, each naming registered
    brokers (KRaft's message for those); a count that does not grow is left to the planner's own error."""
    check_manual_assignment_brokers((a.broker_ids for a in topic.assignments), registered)
    increase = topic.count - existing
    if increase > 0 and len(topic.assignments) != increase:
        raise errors.InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {increase} but {len(topic.assignments)} assignments provided."
        )


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]  # the topic's overrides
    topic_id: str | None = None  # KIP-516, once the topic znode holding it is written (not with validate_only)


class AdminManager:
    def __init__(self, config: BrokerConfig, zk: AsyncZkClient, metadata: MetadataCache, logger: Any) -> None:
        self.config = config
        self.zk = zk
        self.metadata = metadata
        self._log = logger
        self.configs = ConfigAdmin(config, zk, logger)  # DescribeConfigs, AlterConfigs, IncrementalAlterConfigs

    async def _live_brokers(self) -> list[BrokerMetadata]:
        racks: dict[int, str | None] = {}
        for child in await self.zk.get_children(BROKER_IDS_PATH):
            if not child.isdigit():
                continue
            try:
                data, _ = await self.zk.get(f"{BROKER_IDS_PATH}/{child}")
            except NoNodeError:
                continue
            racks[int(child)] = decode_broker(int(child), data).rack
        return broker_metadatas(racks, RackAwareMode.SAFE)

    async def _existing_topics(self) -> list[str]:
        try:
            return sorted(await self.zk.get_children(TOPICS_PATH))
        except NoNodeError:
            return []

    async def _write(self, znodes: list[tuple[str, bytes]], topic: str) -> None:
        (config_path, config_data), (assignment_path, assignment_data) = znodes
        try:
            await self.zk.set(config_path, config_data)
        except NoNodeError:
            try:
                await self.zk.create(config_path, config_data, makepath=True)
            except NodeExistsError:
                await self.zk.set(config_path, config_data)
        try:
            await self.zk.create(assignment_path, assignment_data, makepath=True)
        except NodeExistsError:
            raise errors.TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from None

    async def create_topics(self, request: pb.CreateTopicsRequest) -> pb.CreateTopicsResponse:
        response, _ = await self.create_topics_detailed(request)
        return response

    async def create_topics_detailed(
        self, request: pb.CreateTopicsRequest
    ) -> tuple[pb.CreateTopicsResponse, dict[str, CreatedTopic]]:
        """The response, and each topic created (or that validate_only would create) with its shape and
        configs, which CreateTopics v5+ answers (KIP-525)."""
        response = pb.CreateTopicsResponse()
        shapes: dict[str, CreatedTopic] = {}
        created: dict[str, int] = {}
        try:
            brokers = await self._live_brokers()
            existing = await self._existing_topics()
        except Exception as exc:
            self._log.warning("create_topics_failed", error=str(exc))
            _fail_all(response.topics, [t.name for t in request.topics], exc)
            return response, shapes
        registered = {b.id for b in brokers}
        for topic in request.topics:
            result = response.topics.add(name=topic.name)
            try:
                if topic.assignments:
                    check_manual_assignment_brokers((a.broker_ids for a in topic.assignments), registered)
                assignment = (
                    {a.partition_index: list(a.broker_ids) for a in topic.assignments} if topic.assignments else None
                )
                if assignment is None:
                    partitions = topic.num_partitions if topic.num_partitions != -1 else self.config.num_partitions
                    factor = (
                        topic.replication_factor
                        if topic.replication_factor != -1
                        else self.config.default_replication_factor
                    )
                else:
                    partitions = factor = None
                plan = plan_topic_creation(
                    topic.name,
                    partitions=partitions,
                    replication_factor=factor,
                    replica_assignment=assignment,
                    configs=dict(topic.configs),
                    brokers=brokers,
                    existing_topics=existing,
                    znode_bytes_max=self.config.jute_maxbuffer,
                )
                first = plan.assignment[min(plan.assignment)]
                shapes[topic.name] = CreatedTopic(len(plan.assignment), len(first), plan.configs)
                if not request.validate_only:
                    await self._write(plan.znodes, topic.name)
                    shapes[topic.name] = replace(shapes[topic.name], topic_id=plan.topic_id)
                    created[topic.name] = len(plan.assignment)
                    existing.append(topic.name)
                    self._log.info("topic_created", topic=topic.name, assignment=plan.assignment)
            except Exception as exc:
                result.error_code, result.error_message = _error_of(exc)
                shapes.pop(topic.name, None)
        if created and request.timeout_ms > 0:
            self._mark_timed_out(response.topics, await self._wait_for_leaders(created, request.timeout_ms))
        return response, shapes

    async def auto_create(self, topics: list[str]) -> None:
        """Metadata for unknown topics with auto.create.topics.enable: create them with the defaults."""
        if not self.config.auto_create_topics_enable:
            return
        request = pb.CreateTopicsRequest(
            topics=[pb.CreatableTopic(name=t, num_partitions=-1, replication_factor=-1) for t in topics],
            timeout_ms=min(self.config.request_timeout_ms, 5000),
        )
        response = await self.create_topics(request)
        for result in response.topics:
            if result.error_code not in (
                errors.NONE,
                errors.TopicAlreadyExistsError.code,
                errors.RequestTimedOutError.code,
            ):
                self._log.info("auto_create_failed", topic=result.name, error=result.error_message)

    async def _wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        """Bounded wait until every new partition has a live leader in this broker's metadata; the topics
        still missing one when `timeout_ms` runs out (Kafka's DelayedCreatePartitions answers them
        REQUEST_TIMED_OUT: they exist, their leaders are still being elected)."""
        release_request_bytes()

        def leaderless() -> set[str]:
            missing = set()
            for name, count in topics.items():
                for p in range(count):
                    state = self.metadata.partition_state(name, p)
                    if state is None or state.leader < 0 or state.leader not in self.metadata.brokers:
                        missing.add(name)
                        break
            return missing

        deadline = time.monotonic() + timeout_ms / 1000
        while leaderless() and time.monotonic() < deadline:
            await self.metadata.wait_for_update(deadline - time.monotonic())
        return leaderless()

    def _mark_timed_out(self, results: Any, timed_out: set[str]) -> None:
        for result in results:
            if result.name in timed_out and result.error_code == errors.NONE:
                result.error_code = errors.RequestTimedOutError.code
                self._log.info("admin_leaders_not_elected_in_time", topic=result.name)

    async def create_partitions(self, request: pb.CreatePartitionsRequest) -> pb.CreatePartitionsResponse:
        response = pb.CreatePartitionsResponse()
        try:
            brokers = await self._live_brokers()
        except Exception as exc:
            self._log.warning("create_partitions_failed", error=str(exc))
            _fail_all(response.results, [t.name for t in request.topics], exc)
            return response
        grown: dict[str, int] = {}
        for topic in request.topics:
            result = response.results.add(name=topic.name)
            try:
                try:
                    data, stat = await self.zk.get(topic_path(topic.name))
                except NoNodeError:
                    raise errors.UnknownTopicOrPartitionError(f"The topic '{topic.name}' does not exist.") from None
                current = decode_topic(topic.name, data)
                first_new = len(current.partitions)
                if topic.assignments:
                    _check_new_partition_assignments(topic, first_new, {b.id for b in brokers})
                new_assignment = (
                    {first_new + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
                    if topic.assignments
                    else None
                )
                full, znode = plan_partition_addition(
                    topic.name,
                    current,
                    topic.count,
                    new_assignment,
                    brokers,
                    znode_bytes_max=self.config.jute_maxbuffer,
                )
                if not request.validate_only:
                    await self.zk.set(topic_path(topic.name), znode, version=stat.version)
                    grown[topic.name] = len(full)
            except Exception as exc:
                result.error_code, result.error_message = _error_of(exc)
                if isinstance(exc, AdminOperationError) and "increased" in str(exc):
                    result.error_code = errors.InvalidPartitionsError.code
        if grown and request.timeout_ms > 0:
            self._mark_timed_out(response.results, await self._wait_for_leaders(grown, request.timeout_ms))
        return response

    async def delete_topics(self, request: pb.DeleteTopicsRequest) -> pb.DeleteTopicsResponse:
        response = pb.DeleteTopicsResponse()
        # One read of /brokers/topics for the whole request: a request naming 20,000 topics must not cost
        # 20,000 quorum round trips (nor may a name like "a/b" address a znode below a topic).
        try:
            existing = set(await self._existing_topics())
        except Exception as exc:
            self._log.warning("delete_topics_failed", error=str(exc))
            _fail_all(response.responses, list(request.topic_names), exc)
            return response
        for name in request.topic_names:
            result = response.responses.add(name=name)
            if name not in existing:
                result.error_code = errors.UnknownTopicOrPartitionError.code
                result.error_message = f"Topic '{name}' does not exist."
                continue
            if not self.config.delete_topic_enable:
                result.error_code = errors.TopicDeletionDisabledError.code
                result.error_message = "Topic deletion is disabled."
                continue
            try:
                await self.zk.create(delete_topic_path(name), b"", makepath=True)
            except NodeExistsError:
                pass  # already marked for deletion
            except Exception as exc:
                result.error_code, result.error_message = _whole_request_error(exc)
        deadline = time.monotonic() + request.timeout_ms / 1000
        while request.timeout_ms > 0 and time.monotonic() < deadline:
            if not any(self.metadata.contains(name) for name in request.topic_names):
                break
            await self.metadata.wait_for_update(deadline - time.monotonic())
        return response
