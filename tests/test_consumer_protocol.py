"""Consumer protocol bytes against hand-built expectations (Kafka's classic encoding, docs/research/kafka.md §5.3)."""

from __future__ import annotations

import struct

import pytest

from client.kafka.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from client.kafka.structs import TopicPartition


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def s(text: str) -> bytes:
    return i16(len(text)) + text.encode()


def test_subscription_v0_bytes() -> None:
    sub = Subscription(("foo", "bar"), user_data=b"\x01\x02")
    expected = i16(0) + i32(2) + s("foo") + s("bar") + i32(2) + b"\x01\x02"
    assert encode_subscription(sub, version=0) == expected
    assert decode_subscription(expected) == sub


def test_subscription_v0_null_user_data() -> None:
    expected = i16(0) + i32(1) + s("t") + i32(-1)
    assert encode_subscription(Subscription(("t",)), version=0) == expected
    assert decode_subscription(expected) == Subscription(("t",), None)


def test_subscription_v1_with_owned_partitions() -> None:
    sub = Subscription(("a", "b"), None, (TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)))
    expected = (
        i16(1)
        + i32(2)
        + s("a")
        + s("b")
        + i32(-1)
        + i32(2)
        + s("a")
        + i32(2)
        + i32(0)
        + i32(2)
        + s("b")
        + i32(1)
        + i32(1)
    )
    assert encode_subscription(sub) == expected
    assert decode_subscription(expected) == sub


def test_subscription_v1_empty_owned() -> None:
    expected = i16(1) + i32(0) + i32(0) + i32(0)
    assert encode_subscription(Subscription((), b"")) == expected
    assert decode_subscription(expected) == Subscription((), b"", ())


def test_newer_version_is_read_as_the_newest_known() -> None:
    data = i16(3) + i32(1) + s("t") + i32(-1) + i32(0) + i32(7)  # v3 appends a generation id
    assert decode_subscription(data) == Subscription(("t",))
    assignment = i16(2) + i32(0) + i32(-1) + b"extra"
    assert decode_assignment(assignment) == Assignment((), None)


def test_assignment_bytes_v0_and_v1_are_the_same_struct() -> None:
    a = Assignment((TopicPartition("t", 0), TopicPartition("t", 3), TopicPartition("u", 1)), b"x")
    body = i32(2) + s("t") + i32(2) + i32(0) + i32(3) + s("u") + i32(1) + i32(1) + i32(1) + b"x"
    assert encode_assignment(a, version=0) == i16(0) + body
    assert encode_assignment(a) == i16(1) + body
    assert decode_assignment(i16(0) + body) == a
    assert decode_assignment(i16(1) + body) == a


def test_empty_assignment() -> None:
    assert encode_assignment(Assignment()) == i16(1) + i32(0) + i32(-1)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", i16(-1) + i32(0), i16(0) + i32(1) + i16(5) + b"ab", i16(0) + i32(-2), i16(0) + i32(0) + i32(4)],
)
def test_malformed_subscription_is_a_typed_error(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_cannot_write_unknown_versions() -> None:
    with pytest.raises(ConsumerProtocolError, match="version 2"):
        encode_subscription(Subscription(()), version=2)
