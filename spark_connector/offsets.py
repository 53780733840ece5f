"""Kafka's offsets JSON, as Spark's Kafka source writes it: `{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}`.

The same shape serves three purposes (docs/research/spark.md §2.3): the
`startingOffsets`/`endingOffsets` options (where -2 means earliest and -1
latest), the `startingOffsetsByTimestamp` option (values are epoch ms), and
the offsets Spark checkpoints for each micro-batch (values are the next
offset to read). Topics and partitions are sorted, as Kafka's
`JsonUtils.partitionOffsets` does "for more determinism": Spark compares and
stores the JSON text, so equal offsets must give equal text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from client import TopicPartition

EARLIEST = -2
LATEST = -1
OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'

PartitionOffsets = dict[TopicPartition, int]


class OffsetsJsonError(ValueError):
    """A malformed offsets or assign JSON option; the message names the option and shows the expected shape."""


def to_offset_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} -> {"topic": {"partition": offset}}, sorted by topic then partition number."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_offset_dict(data: Mapping[str, Mapping[str, int]], what: str = "offsets") -> PartitionOffsets:
    """The inverse of `to_offset_dict`; partition keys may be strings (from JSON) or ints."""
    if not isinstance(data, Mapping):
        raise OffsetsJsonError(f"{what}: expected e.g. {OFFSETS_EXAMPLE}, got {json.dumps(data)}")
    out: PartitionOffsets = {}
    for topic, partitions in data.items():
        if not isinstance(topic, str) or not topic or not isinstance(partitions, Mapping):
            raise OffsetsJsonError(f"{what}: expected e.g. {OFFSETS_EXAMPLE}, got {json.dumps(data)}")
        for partition, offset in partitions.items():
            number = _partition_number(partition)
            if number is None or isinstance(offset, bool) or not isinstance(offset, int):
                raise OffsetsJsonError(f"{what}: expected e.g. {OFFSETS_EXAMPLE}, got {json.dumps(data)}")
            out[TopicPartition(topic, number)] = offset
    return out


def to_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(to_offset_dict(offsets), separators=(",", ":"))


def parse_offsets_json(text: str, option: str) -> PartitionOffsets:
    """The value of an offsets option; OffsetsJsonError naming `option` when malformed."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise OffsetsJsonError(f"option {option}: expected e.g. {OFFSETS_EXAMPLE}, got {text!r}") from None
    return from_offset_dict(data, f"option {option}")


def parse_assign_json(text: str) -> tuple[TopicPartition, ...]:
    """`assign`: {"topicA":[0,1],"topicB":[2,4]} -> sorted TopicPartitions."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    bad = OffsetsJsonError(f"option assign: expected e.g. {ASSIGN_EXAMPLE}, got {text!r}")
    if not isinstance(data, dict) or not data:
        raise bad
    out = set()
    for topic, partitions in data.items():
        if not topic or not isinstance(partitions, list) or not partitions:
            raise bad
        for partition in partitions:
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise bad
            out.add(TopicPartition(topic, partition))
    return tuple(sorted(out))


def _partition_number(key: object) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key if key >= 0 else None
    if isinstance(key, str) and key.isdigit():
        return int(key)
    return None
