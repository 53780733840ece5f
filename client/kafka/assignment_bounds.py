"""What an assignment may hold before anything is built: it must fit in one znode, on brokers that exist.

A topic's replica assignment is one znode, `/brokers/topics/<t>` (Kafka's
JSON, `client.kafka.znodes.encode_topic`), and ZooKeeper refuses a znode
larger than `jute.maxbuffer` (0xfffff bytes by default). So the partition
count and replication factor a request asks for are checked against that
limit with arithmetic alone, before the assignment is computed: a request
for a billion partitions is refused in microseconds instead of building a
billion lists. The planners check the encoded znode again afterwards (broker
ids may be longer than the bound assumes).

A manual assignment may only name registered brokers: the check and message
of Kafka's KRaft controller (`ReplicationControlManager
.validateManualPartitionAssignment`), which ZooKeeper-mode Kafka lacked.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from client.kafka.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError

# ZooKeeper's default jute.maxbuffer: the largest znode (and request) a server accepts.
JUTE_MAXBUFFER_DEFAULT = 0xFFFFF
# encode_topic of an empty assignment; each partition adds `"<p>":[<ids>]` and a comma between partitions.
_EMPTY_TOPIC_ZNODE_BYTES = len(b'{"removing_replicas":{},"partitions":{},"adding_replicas":{},"version":3}')
_PARTITION_FRAME_BYTES = len(b'"":[]')


def decimal_digits_total(count: int, start: int = 0) -> int:
    """How many decimal digits the numbers start .. start+count-1 (non-negative) have together, in O(log)."""
    total, low, width = 0, 0, 1
    end = start + count
    while low < end:
        high = 10**width  # numbers in [10**(width-1), 10**width) have `width` digits; 0 has one
        first, last = max(low, start), min(high, end)
        if last > first:
            total += (last - first) * width
        low, width = high, width + 1
    return total


def partitions_bytes_min(count: int, replication_factor: int, first_partition: int, broker_id_min: int) -> int:
    """A lower bound on the bytes `count` partitions numbered from `first_partition` add to the topic znode
    (with the commas between them; exact when every broker id has as many digits as `broker_id_min`)."""
    if count <= 0 or replication_factor <= 0:
        return 0
    id_digits = len(str(max(broker_id_min, 0)))
    per_partition = _PARTITION_FRAME_BYTES + replication_factor * id_digits + (replication_factor - 1)
    return count * per_partition + (count - 1) + decimal_digits_total(count, first_partition)


def check_partitions_fit(
    topic: str,
    new_partitions: int,
    replication_factor: int,
    znode_bytes_max: int,
    existing_partitions: int = 0,
    broker_id_min: int = 0,
) -> None:
    """InvalidPartitionsError (InvalidReplicationFactorError when one partition alone is too large) if the topic
    znode cannot hold `existing_partitions + new_partitions` partitions of `replication_factor` replicas."""
    one_bytes = _EMPTY_TOPIC_ZNODE_BYTES + partitions_bytes_min(1, replication_factor, 0, broker_id_min)
    if replication_factor > 0 and one_bytes > znode_bytes_max:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} does not fit in the assignment znode /brokers/topics/{topic}: "
            f"one partition needs at least {one_bytes} bytes, more than jute.maxbuffer ({znode_bytes_max} bytes)."
        )
    needed = (
        _EMPTY_TOPIC_ZNODE_BYTES
        + partitions_bytes_min(existing_partitions, replication_factor, 0, broker_id_min)
        + (1 if existing_partitions > 0 and new_partitions > 0 else 0)  # the comma between the two
        + partitions_bytes_min(new_partitions, replication_factor, existing_partitions, broker_id_min)
    )
    if needed > znode_bytes_max:
        total = existing_partitions + new_partitions
        raise InvalidPartitionsError(
            f"Number of partitions: {total} with replication factor {replication_factor} does not fit in the "
            f"assignment znode /brokers/topics/{topic}: it needs at least {needed} bytes, more than jute.maxbuffer "
            f"({znode_bytes_max} bytes)."
        )


def check_znode_fits(topic: str, znode: bytes, partitions: int, znode_bytes_max: int) -> None:
    """The encoded topic znode itself, checked before it is written."""
    if len(znode) > znode_bytes_max:
        raise InvalidPartitionsError(
            f"Number of partitions: {partitions} does not fit in the assignment znode /brokers/topics/{topic}: "
            f"it is {len(znode)} bytes, more than jute.maxbuffer ({znode_bytes_max} bytes)."
        )


def check_manual_assignment_brokers(replica_lists: Iterable[Sequence[int]], registered: Collection[int]) -> None:
    """KRaft's validateManualPartitionAssignment: no empty replica list, no broker that is not registered."""
    for replicas in replica_lists:
        if not replicas:
            raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
        for broker in replicas:
            if broker not in registered:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered."
                )
