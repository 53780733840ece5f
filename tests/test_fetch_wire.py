"""The broker's hand-encoded Fetch responses and the Spark reader's zero-copy parse of them, against protobuf."""

from __future__ import annotations

import pytest

from broker.fetch_response import FetchReply
from client.kafka.records import CorruptRecordError
from spark_connector.fetch_wire import fetched_partition
from zkraft_proto import broker_pb2 as pb


def _reply() -> FetchReply:
    reply = FetchReply()
    reply.response.throttle_time_ms = 7
    first = reply.response.responses.add(topic="events")
    first.partitions.add(partition=0, high_watermark=-1, log_start_offset=-1, error_code=1)
    first.partitions.add(
        partition=1, high_watermark=300, last_stable_offset=300, log_start_offset=5, log_end_offset=301
    )
    reply.records[(0, 1)] = b"r" * 200
    second = reply.response.responses.add(topic="other")
    second.partitions.add(partition=1, high_watermark=9)
    reply.records[(1, 0)] = bytes(range(256)) * 300  # a length prefix of three bytes
    return reply


def test_an_encoded_reply_is_the_protobuf_message_with_its_records() -> None:
    reply = _reply()
    expected = pb.FetchResponse()
    expected.CopyFrom(reply.response)
    expected.responses[0].partitions[1].records = b"r" * 200
    expected.responses[1].partitions[0].records = bytes(range(256)) * 300
    assert pb.FetchResponse.FromString(reply.encode()) == expected
    assert FetchReply(expected).encode() == expected.SerializeToString()  # no records apart: plain protobuf


def test_the_reader_finds_its_partition_as_protobuf_would() -> None:
    raw = _reply().encode()
    got = fetched_partition(raw, "other", 1)
    assert got.error_code == 0 and got.partition is not None
    assert (got.partition.error_code, got.partition.high_watermark) == (0, 9)
    assert got.partition.records.obj is raw  # a view into the received bytes, not a copy
    assert bytes(got.partition.records) == bytes(range(256)) * 300
    negative = fetched_partition(raw, "events", 0).partition
    assert negative is not None and (negative.error_code, negative.high_watermark, len(negative.records)) == (1, -1, 0)
    assert fetched_partition(raw, "events", 5).partition is None
    assert fetched_partition(raw, "missing", 1).partition is None


def test_fields_the_reader_does_not_know_are_skipped_and_errors_read() -> None:
    response = pb.FetchResponse(error_code=3, throttle_time_ms=1)
    part = response.responses.add(topic="t").partitions.add(partition=2, high_watermark=4, log_end_offset=-5)
    part.records = b"abc"
    got = fetched_partition(response.SerializeToString(), "t", 2)
    assert got.error_code == 3 and got.partition is not None and bytes(got.partition.records) == b"abc"


def test_a_truncated_response_is_refused() -> None:
    raw = _reply().encode()
    with pytest.raises(CorruptRecordError):
        fetched_partition(raw[:-10], "other", 1)
