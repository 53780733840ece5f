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
    from client.kafka.admin import Admin
    from client.kafka.config_resources import AlterConfigOp, ConfigResource, ConfigResourceType
    from client.kafka.consumer import Consumer
    from client.kafka.consumer_coordinator import ConsumerRebalanceListener, OffsetAndMetadata
    from client.kafka.producer import Producer
    from client.kafka.record_accumulator import FutureRecordMetadata
    from client.kafka.structs import TopicPartition
    from client.kafka.types import (
        ClusterDescription,
        ConsumerRecord,
        NewPartitions,
        NewTopic,
        OffsetAndTimestamp,
        PartitionDescription,
        RecordMetadata,
        TopicDescription,
    )
    from client.zk.aio import AsyncZkClient
    from client.zk.client import ZkClient
    from client.zk.retry import AsyncZkRetry, ZkRetry
    from client.zk.states import (
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
    "Admin": "client.kafka.admin",
    "AlterConfigOp": "client.kafka.config_resources",
    "ConfigResource": "client.kafka.config_resources",
    "ConfigResourceType": "client.kafka.config_resources",
    "AsyncZkClient": "client.zk.aio",
    "Consumer": "client.kafka.consumer",
    "ConsumerRebalanceListener": "client.kafka.consumer_coordinator",
    "OffsetAndMetadata": "client.kafka.consumer_coordinator",
    "ClusterDescription": "client.kafka.types",
    "ConsumerRecord": "client.kafka.types",
    "OffsetAndTimestamp": "client.kafka.types",
    "NewPartitions": "client.kafka.types",
    "NewTopic": "client.kafka.types",
    "PartitionDescription": "client.kafka.types",
    "RecordMetadata": "client.kafka.types",
    "TopicDescription": "client.kafka.types",
    "Producer": "client.kafka.producer",
    "FutureRecordMetadata": "client.kafka.record_accumulator",
    "TopicPartition": "client.kafka.structs",
    "ZkClient": "client.zk.client",
    "AsyncZkRetry": "client.zk.retry",
    "ZkRetry": "client.zk.retry",
    "AddWatchMode": "client.zk.states",
    "EventType": "client.zk.states",
    "KeeperState": "client.zk.states",
    "WatchedEvent": "client.zk.states",
    "WatcherType": "client.zk.states",
    "ZkState": "client.zk.states",
    "ZnodeStat": "client.zk.states",
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
