"""Kafka's default partitioner (client/kafka/partitioner.py; docs/research/kafka.md §5.5)."""

from __future__ import annotations

from collections import Counter

import pytest

from client.kafka.partitioner import default_partition, murmur2, to_positive

# Kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_MURMUR2_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_is_a_signed_32_bit_int_for_every_tail_length() -> None:
    for n in range(0, 40):
        h = murmur2(bytes(range(n)))
        assert -(2**31) <= h < 2**31


def test_to_positive_masks_the_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_keyed_partition_is_to_positive_murmur2_mod_n() -> None:
    # "21" hashes negative: masking, not abs(), decides the partition.
    assert default_partition(b"21", 7, sticky_partition=3) == (-973932308 & 0x7FFFFFFF) % 7
    for key, h in KAFKA_MURMUR2_VECTORS.items():
        for n in (1, 2, 3, 12, 100):
            assert default_partition(key, n, sticky_partition=0) == (h & 0x7FFFFFFF) % n


def test_null_key_uses_the_sticky_partition() -> None:
    assert default_partition(None, 6, sticky_partition=4) == 4
    assert default_partition(b"", 6, sticky_partition=4) == to_positive(murmur2(b"")) % 6


def test_zero_partitions_is_an_error() -> None:
    with pytest.raises(ValueError):
        default_partition(b"k", 0, 0)


def test_keys_spread_evenly_over_partitions() -> None:
    partitions = 12
    keys = 60000
    counts = Counter(default_partition(f"user-{i}".encode(), partitions, 0) for i in range(keys))
    assert set(counts) == set(range(partitions))
    expected = keys / partitions
    assert all(abs(c - expected) < 0.06 * expected for c in counts.values()), counts
