"""`__consumer_offsets` keys and values in Kafka's binary schemas (docs/research/kafka.md §5.1).

K28 `GroupMetadataManager.scala` (object GroupMetadataManager): every key and
value starts with an int16 schema version; strings are int16 length + UTF-8
(-1 for null), bytes are int32 length + data, arrays are int32 count + items.

* key v0/v1 (offset commit): group string, topic string, partition int32. Written as v1.
* key v2 (group metadata): group string.
* offset value v0 {offset, metadata, timestamp}; v1 {offset, metadata,
  commit_timestamp, expire_timestamp}; v2 {offset, metadata, commit_timestamp};
  v3 {offset, leader_epoch, metadata, commit_timestamp}. Written as v3 (2.1+).
* group value v0..v3 {protocol_type, generation, protocol?, leader?,
  [current_state_timestamp v2+], members[{member_id, [group_instance_id? v3],
  client_id, client_host, [rebalance_timeout v1+], session_timeout,
  subscription bytes, assignment bytes}]}. Written as v3 (2.3+).

A null value is a tombstone: the offset or the group is deleted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from client.kafka.structs import TopicPartition

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class GroupRecordError(ValueError):
    """A `__consumer_offsets` key or value that does not parse."""


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None  # only offset value v1 carries one


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


# ---------------------------------------------------------------- writer / reader


KAFKA_STRING_BYTES_MAX = 0x7FFF


def fits_kafka_string(text: str) -> bool:
    """Whether `text` fits a Kafka STRING (int16 length, UTF-8): what the group records can store."""
    return len(text) <= KAFKA_STRING_BYTES_MAX // 4 or len(text.encode("utf-8")) <= KAFKA_STRING_BYTES_MAX


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> _Writer:
        self.parts.append(_I16.pack(v))
        return self

    def i32(self, v: int) -> _Writer:
        self.parts.append(_I32.pack(v))
        return self

    def i64(self, v: int) -> _Writer:
        self.parts.append(_I64.pack(v))
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > KAFKA_STRING_BYTES_MAX:
            raise GroupRecordError(f"string of {len(data)} bytes is longer than 32767")
        self.i16(len(data))
        self.parts.append(data)
        return self

    def bytes_(self, v: bytes) -> _Writer:
        self.i32(len(v))
        self.parts.append(bytes(v))
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise GroupRecordError(f"{self.what}: truncated at byte {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GroupRecordError(f"{self.what}: bad UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise GroupRecordError(f"{self.what}: null where a string is required")
        return value

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else bytes(self._take(n))


# ---------------------------------------------------------------- keys


def encode_offset_key(group: str, tp: TopicPartition) -> bytes:
    return _Writer().i16(OFFSET_KEY_VERSION).string(group).string(tp.topic).i32(tp.partition).done()


def encode_group_key(group: str) -> bytes:
    return _Writer().i16(GROUP_KEY_VERSION).string(group).done()


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    reader = _Reader(data, "__consumer_offsets key")
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.i32())
    if version == 2:
        return GroupKey(reader.string())
    raise GroupRecordError(f"__consumer_offsets key: unknown version {version}")


# ---------------------------------------------------------------- offset values


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    """v3, or v1 when an explicit expire timestamp is set (Kafka's choice in offsetCommitValue)."""
    if value.expire_timestamp_ms is not None:
        return (
            _Writer()
            .i16(1)
            .i64(value.offset)
            .string(value.metadata)
            .i64(value.commit_timestamp_ms)
            .i64(value.expire_timestamp_ms)
            .done()
        )
    return (
        _Writer()
        .i16(OFFSET_VALUE_VERSION)
        .i64(value.offset)
        .i32(value.leader_epoch)
        .string(value.metadata)
        .i64(value.commit_timestamp_ms)
        .done()
    )


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    reader = _Reader(data, "offset commit value")
    version = reader.i16()
    if version in (0, 1, 2):
        offset, metadata, timestamp = reader.i64(), reader.string(), reader.i64()
        expire = reader.i64() if version == 1 else None
        return OffsetAndMetadata(offset, NO_LEADER_EPOCH, metadata, timestamp, expire)
    if version == 3:
        offset, epoch, metadata, timestamp = reader.i64(), reader.i32(), reader.string(), reader.i64()
        return OffsetAndMetadata(offset, epoch, metadata, timestamp)
    raise GroupRecordError(f"offset commit value: unknown version {version}")


# ---------------------------------------------------------------- group values


def encode_group_value(group: StoredGroup, version: int = GROUP_VALUE_VERSION) -> bytes:
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"group metadata value: unknown version {version}")
    w = _Writer().i16(version).string(group.protocol_type).i32(group.generation)
    w.string(group.protocol).string(group.leader)
    if version >= 2:
        w.i64(group.current_state_timestamp_ms)
    w.i32(len(group.members))
    for m in group.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id).string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return w.done()


def decode_group_value(data: bytes) -> StoredGroup:
    reader = _Reader(data, "group metadata value")
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"group metadata value: unknown version {version}")
    protocol_type, generation = reader.string(), reader.i32()
    protocol, leader = reader.nullable_string(), reader.nullable_string()
    timestamp = reader.i64() if version >= 2 else -1
    count = reader.i32()
    members = []
    for _ in range(max(count, 0)):
        member_id = reader.string()
        instance = reader.nullable_string() if version >= 3 else None
        client_id, client_host = reader.string(), reader.string()
        session_timeout = 0
        rebalance_timeout = reader.i32() if version >= 1 else -1
        session_timeout = reader.i32()
        if version == 0:
            rebalance_timeout = session_timeout  # v0 had none; Kafka uses the session timeout
        members.append(
            StoredMember(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes_(),
                reader.bytes_(),
            )
        )
    return StoredGroup(protocol_type, generation, protocol, leader, timestamp, tuple(members))
