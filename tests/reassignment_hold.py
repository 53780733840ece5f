"""Holding a reassignment in progress for as long as a test needs, without racing a clock.

Every broker gets a follower replication rate of 1 byte/s when the cluster starts (`set_follower_rates`,
before any replica follows: a broker's throttle reads it when its first fetcher starts). It binds only the
replicas a topic lists in `follower.replication.throttled.replicas` (KIP-73, as `reassign-partitions
--throttle` writes them). `throttle_new_replica` lists the replica a reassignment is about to add; a
fetcher reads a new topic's config before its first fetch, so that first fetch is already throttled: it
brings one batch and puts the quota minutes in debt. With two batches or more in the partition the new
replica cannot reach the high watermark, cannot join the ISR, and the reassignment stays in progress until
it is cancelled.
"""

from __future__ import annotations

import io

from client.kafka.structs import TopicPartition
from client.kafka.topic_admin import change_topic_config
from tests.kafka_harness import KafkaCluster
from zkraft.tools.reassign_partitions import FOLLOWER_THROTTLED_RATE, FOLLOWER_THROTTLED_REPLICAS, ZkReassigner

THROTTLE_BYTES_PER_S = 1


def set_follower_rates(cluster: KafkaCluster) -> None:
    """Call right after `cluster.start()`, before any topic exists."""
    configs = ZkReassigner(cluster.zk, io.StringIO())
    for broker in cluster.broker_ids:
        configs.change_broker_config(broker, {FOLLOWER_THROTTLED_RATE: str(THROTTLE_BYTES_PER_S)})


def throttle_new_replica(cluster: KafkaCluster, tp: TopicPartition, broker: int) -> None:
    """Before the reassignment that adds `broker` to `tp` starts."""
    change_topic_config(cluster.zk, tp.topic, {FOLLOWER_THROTTLED_REPLICAS: f"{tp.partition}:{broker}"})


def remove_throttle(cluster: KafkaCluster, tp: TopicPartition) -> None:
    change_topic_config(cluster.zk, tp.topic, {})
