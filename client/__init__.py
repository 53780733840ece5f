"""What users import: ZooKeeper-style client, Kafka-style Producer/Consumer/Admin, the record-batch format."""

from client.aio import AsyncZkClient
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
    "AsyncZkClient",
    "AsyncZkRetry",
    "EventType",
    "KeeperState",
    "WatchedEvent",
    "WatcherType",
    "ZkClient",
    "ZkRetry",
    "ZkState",
    "ZnodeStat",
]
