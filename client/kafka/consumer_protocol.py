"""The consumer protocol's member metadata and assignment bytes (docs/research/kafka.md §5.3).

Kafka's `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment`
(K28 `clients/src/main/resources/common/message/*.json`, serialized by
`ConsumerProtocol.java`): an int16 version, then the struct in Kafka's classic
(non-flexible) encoding: a string is an int16 length and UTF-8 bytes, an array
an int32 count, nullable bytes an int32 length (-1 for null).

    Subscription v0: Topics [string], UserData nullable bytes
    Subscription v1: ... OwnedPartitions [{Topic string, Partitions [int32]}]
    Assignment   v0/v1: AssignedPartitions [{Topic string, Partitions [int32]}], UserData nullable bytes

Version 1 of the assignment has the same fields as version 0. As Kafka's
`ConsumerProtocol.deserialize*`, a newer version than we know is read as our
newest (later versions only append fields), a negative one is an error.
The coordinator never looks inside these bytes; the group leader and the
members do.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition

__all__ = [
    "PROTOCOL_TYPE",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION_MAX = 1
ASSIGNMENT_VERSION_MAX = 1
# K28 ConsumerProtocol.CONSUMER_PROTOCOL_CURRENT_VERSION: what this client writes.
CURRENT_VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(KafkaError):
    """Member metadata or an assignment that is not valid consumer-protocol bytes (Kafka's SchemaException)."""

    name = "CONSUMER_PROTOCOL"
    default_message = "Invalid consumer protocol bytes."


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member subscribes to (topics sorted as sent), its assignor user data, the partitions it owns."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    group_instance_id: str | None = None  # not on the wire: from JoinGroup's member list


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)
    user_data: bytes | None = None


# ---------------------------------------------------------------- writing


def _string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    out += _I16.pack(len(data))
    out += data


def _nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(data))
        out += data


def _topic_partitions(out: bytearray, partitions: Iterable[TopicPartition]) -> None:
    """[{Topic, Partitions[int32]}], grouped by topic in first-seen order (Kafka groups them the same way)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I32.pack(len(by_topic))
    for topic, ids in by_topic.items():
        _string(out, topic)
        out += _I32.pack(len(ids))
        for p in ids:
            out += _I32.pack(p)


def _check_version(version: int, newest: int) -> None:
    if not 0 <= version <= newest:
        raise ConsumerProtocolError(f"consumer protocol version {version} cannot be written (0..{newest})")


def encode_subscription(subscription: Subscription, version: int = CURRENT_VERSION) -> bytes:
    _check_version(version, SUBSCRIPTION_VERSION_MAX)
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(subscription.topics))
    for topic in subscription.topics:
        _string(out, topic)
    _nullable_bytes(out, subscription.user_data)
    if version >= 1:
        _topic_partitions(out, subscription.owned_partitions)
    return bytes(out)


def encode_assignment(assignment: Assignment, version: int = CURRENT_VERSION) -> bytes:
    _check_version(version, ASSIGNMENT_VERSION_MAX)
    out = bytearray(_I16.pack(version))
    _topic_partitions(out, assignment.partitions)
    _nullable_bytes(out, assignment.user_data)
    return bytes(out)


# ---------------------------------------------------------------- reading


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConsumerProtocolError(
                f"{self.what}: needs {n} bytes at position {self.pos}, only {len(self.buf) - self.pos} left"
            )
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise ConsumerProtocolError(f"{self.what}: negative array length {n} at position {self.pos - 4}")
        return n

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ConsumerProtocolError(f"{self.what}: null string at position {self.pos - 2}")
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"{self.what}: string is not UTF-8 ({exc})") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else bytes(self._take(n))

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string()
            out.extend(TopicPartition(topic, self.int32()) for _ in range(self.count()))
        return tuple(out)

    def version(self) -> int:
        version = self.int16()
        if version < 0:
            raise ConsumerProtocolError(f"{self.what}: unsupported version {version}")
        return version


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data, "consumer protocol subscription")
    version = min(reader.version(), SUBSCRIPTION_VERSION_MAX)
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned = reader.topic_partitions() if version >= 1 else ()
    return Subscription(topics, user_data, owned)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data, "consumer protocol assignment")
    reader.version()
    partitions = reader.topic_partitions()
    return Assignment(partitions, reader.nullable_bytes())
