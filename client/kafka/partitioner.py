"""Kafka's default producer partitioner (docs/research/kafka.md §5.5).

A keyed record goes to `toPositive(murmur2(key)) % num_partitions`, exactly as
Kafka's Java `DefaultPartitioner`, so a key lands on the same partition here as
from a Java producer. A record without a key goes to the sticky partition the
producer chose for the current batch (KIP-480, Kafka 2.4+); choosing and
changing it is the producer's job, not this module's.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: 32-bit MurmurHash2, seed 0x9747b28c, as a signed Java int.

    Java's int arithmetic wraps at 32 bits; here every product is masked to 32
    bits and the unsigned shifts (`>>>`) act on the masked value.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clears the sign bit (not abs(), so MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def default_partition(key: bytes | None, num_partitions: int, sticky_partition: int) -> int:
    """Kafka's `DefaultPartitioner.partition`: murmur2 for keys, the sticky partition for null keys."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if key is None:
        return sticky_partition
    return to_positive(murmur2(key)) % num_partitions
