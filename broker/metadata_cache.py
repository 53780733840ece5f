"""What this broker knows of the cluster, kept by the controller's UpdateMetadata (Kafka's `MetadataCache`).

Answers the Metadata request: live brokers, the controller id, and per
partition its leader, leader epoch, replicas, ISR and offline replicas. A
partition whose leader is not a live broker answers LEADER_NOT_AVAILABLE.
Replicas that are not alive are listed in `offline_replicas` and the lists
are returned whole, as Kafka does for Metadata v5+ (K24
MetadataCache.getPartitionMetadata with errorUnavailableEndpoints=false).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from client.kafka import errors as kafka_errors
from client.kafka.znodes import INTERNAL_TOPICS, LEADER_DURING_DELETE
from zkraft_proto import broker_pb2

NONE = kafka_errors.NONE


class MetadataCache:
    def __init__(self, broker_id: int, cluster_id: str = "") -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.controller_epoch = -1
        self.brokers: dict[int, broker_pb2.UpdateMetadataBroker] = {}
        # topic -> partition -> state (leader -2 marks a topic being deleted)
        self.partitions: dict[str, dict[int, broker_pb2.UpdateMetadataPartitionState]] = {}
        self._waiters: list[asyncio.Future[None]] = []

    async def wait_for_update(self, timeout_s: float) -> None:
        """Returns after the next UpdateMetadata, or after `timeout_s`."""
        if timeout_s <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def update(self, request: broker_pb2.UpdateMetadataRequest) -> None:
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        if request.live_brokers:
            self.brokers = {b.id: b for b in request.live_brokers}
        for state in request.partition_states:
            if state.leader == LEADER_DURING_DELETE:
                topic = self.partitions.get(state.topic_name)
                if topic is not None:
                    topic.pop(state.partition_index, None)
                    if not topic:
                        del self.partitions[state.topic_name]
            else:
                self.partitions.setdefault(state.topic_name, {})[state.partition_index] = state
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def topics(self) -> list[str]:
        return sorted(self.partitions)

    def contains(self, topic: str) -> bool:
        return topic in self.partitions

    def topic_named_by_id(self, topic_id: str) -> str | None:
        """The topic whose KIP-516 id (as the znode writes it) is `topic_id`; a scan: DeleteTopics by id is rare."""
        for name, partitions in self.partitions.items():
            if any(state.topic_id == topic_id for state in partitions.values()):
                return name
        return None

    def partition_state(self, topic: str, partition: int) -> broker_pb2.UpdateMetadataPartitionState | None:
        return self.partitions.get(topic, {}).get(partition)

    def broker_address(self, broker_id: int) -> str | None:
        broker = self.brokers.get(broker_id)
        return None if broker is None else f"{broker.host}:{broker.port}"

    def listener_endpoint(self, broker_id: int, listener: str) -> broker_pb2.UpdateMetadataEndpoint | None:
        """Live broker `broker_id`'s endpoint on `listener` (Kafka's MetadataCache.getAliveBrokerNode)."""
        broker = self.brokers.get(broker_id)
        if broker is None:
            return None
        return next((e for e in broker.endpoints if e.listener == listener), None)

    def listener_brokers(
        self, listener: str
    ) -> list[tuple[broker_pb2.UpdateMetadataBroker, broker_pb2.UpdateMetadataEndpoint]]:
        """Live brokers with an endpoint on `listener`, by id, with that endpoint (getAliveBrokerNodes)."""
        found = []
        for _, broker in sorted(self.brokers.items()):
            endpoint = next((e for e in broker.endpoints if e.listener == listener), None)
            if endpoint is not None:
                found.append((broker, endpoint))
        return found

    def metadata(self, topics: Iterable[str] | None) -> broker_pb2.MetadataResponse:
        """The Metadata response for `topics` (None: all topics)."""
        response = broker_pb2.MetadataResponse(
            cluster_id=self.cluster_id,
            controller_id=self.controller_id if self.controller_id in self.brokers else -1,
            brokers=[
                broker_pb2.MetadataBroker(node_id=b.id, host=b.host, port=b.port, rack=b.rack)
                for _, b in sorted(self.brokers.items())
            ],
        )
        names = self.topics() if topics is None else list(topics)
        for name in names:
            response.topics.append(self._topic_metadata(name))
        return response

    def _topic_metadata(self, name: str) -> broker_pb2.MetadataTopic:
        partitions = self.partitions.get(name)
        if partitions is None:
            return broker_pb2.MetadataTopic(
                name=name,
                error_code=kafka_errors.UnknownTopicOrPartitionError.code,
                is_internal=name in INTERNAL_TOPICS,
            )
        topic = broker_pb2.MetadataTopic(name=name, is_internal=name in INTERNAL_TOPICS)
        live = self.brokers
        for index in sorted(partitions):
            state = partitions[index]
            replicas = list(state.replicas)
            isr = list(state.isr)
            error = NONE
            if state.leader not in live:
                error = kafka_errors.LeaderNotAvailableError.code
            topic.partitions.append(
                broker_pb2.MetadataPartition(
                    error_code=error,
                    partition_index=index,
                    leader_id=state.leader if state.leader in live else -1,
                    leader_epoch=state.leader_epoch,
                    replica_nodes=replicas,
                    isr_nodes=isr,
                    offline_replicas=[r for r in replicas if r not in live],
                )
            )
        return topic
