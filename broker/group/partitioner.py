"""Group -> `__consumer_offsets` partition (docs/research/kafka.md §5.1, K28 GroupMetadataManager.partitionFor).

`Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, with Java's
`String.hashCode` (UTF-16 code units, 32-bit signed wrap-around) and Kafka's
`Utils.abs` (Integer.MIN_VALUE maps to 0).
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: `Math.abs` except that Integer.MIN_VALUE gives 0 (K28 Utils.java l.176-178)."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % partitions
