"""What users import: ZooKeeper-style client, Kafka-style Producer/Consumer/Admin, the record-batch format.

The names are imported on first use (PEP 562 `__getattr__`), so a process that
needs one part does not pay for the others: the Spark source's streaming
runner, a new Python process per query on the driver, needs the Kafka wire
client but not the asyncio ZooKeeper client, consumer groups or the producer
(about 60 ms less before every query starts).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runtime.grpc_tuning import prefer_legacy_poller

prefer_legacy_poller()  # before any client module imports grpc: runtime/grpc_tuning.py says why

if TYPE_CHECKING:
    from client.admin import Admin
    from client.aio import AsyncZkClient
    from client.config_resources import AlterConfigOp, ConfigResource, ConfigResourceType
    from client.consumer import Consumer
    from client.consumer_coordinator import ConsumerRebalanceListener, OffsetAndMetadata
    from client.kafka_types import (
        ClusterDescription,
        ConsumerRecord,
        NewPartitions,
        NewTopic,
        OffsetAndTimestamp,
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

# name -> the module that defines it
_EXPORTS = {
    "Admin": "client.admin",
    "AlterConfigOp": "client.config_resources",
    "ConfigResource": "client.config_resources",
    "ConfigResourceType": "client.config_resources",
    "AsyncZkClient": "client.aio",
    "Consumer": "client.consumer",
    "ConsumerRebalanceListener": "client.consumer_coordinator",
    "OffsetAndMetadata": "client.consumer_coordinator",
    "ClusterDescription": "client.kafka_types",
    "ConsumerRecord": "client.kafka_types",
    "OffsetAndTimestamp": "client.kafka_types",
    "NewPartitions": "client.kafka_types",
    "NewTopic": "client.kafka_types",
    "PartitionDescription": "client.kafka_types",
    "RecordMetadata": "client.kafka_types",
    "TopicDescription": "client.kafka_types",
    "Producer": "client.producer",
    "FutureRecordMetadata": "client.record_accumulator",
    "TopicPartition": "client.structs",
    "ZkClient": "client.zk_client",
    "AsyncZkRetry": "client.zk_retry",
    "ZkRetry": "client.zk_retry",
    "AddWatchMode": "client.zk_states",
    "EventType": "client.zk_states",
    "KeeperState": "client.zk_states",
    "WatchedEvent": "client.zk_states",
    "WatcherType": "client.zk_states",
    "ZkState": "client.zk_states",
    "ZnodeStat": "client.zk_states",
}

__all__ = [
    "AddWatchMode",
    "Admin",
    "AlterConfigOp",
    "AsyncZkClient",
    "AsyncZkRetry",
    "ClusterDescription",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "OffsetAndTimestamp",
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
