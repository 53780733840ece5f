"""What users import: ZooKeeper-style client, Kafka-style Producer/Consumer/Admin, the record-batch format."""

from client.admin import Admin
from client.aio import AsyncZkClient
from client.consumer import Consumer
from client.consumer_coordinator import ConsumerRebalanceListener, OffsetAndMetadata
from client.kafka_types import (
    ClusterDescription,
    ConsumerRecord,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    RecordMetadata,
    TopicDescription,
)
from client.producer import Producer
from client.record_accumulator import FutureRecordMetadata
from client.structs import TopicPartition
from client.zk_client import ZkClient
from client.zk_retry import AsyncZkRetry, ZkRetry
from client.zk_states import (
    AddWatchMode,
    EventType,
    KeeperState,
    WatchedEvent,
    WatcherType,
    ZkState,
    ZnodeStat,
)

__all__ = [
    "AddWatchMode",
    "Admin",
    "AsyncZkClient",
    "AsyncZkRetry",
    "ClusterDescription",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "EventType",
    "FutureRecordMetadata",
    "KeeperState",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionDescription",
    "Producer",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
    "WatchedEvent",
    "WatcherType",
    "ZkClient",
    "ZkRetry",
    "ZkState",
    "ZnodeStat",
]
