"""Kafka v2 record batches (client/kafka/records.py; docs/research/kafka.md §3.8)."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from client.kafka.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    CorruptRecordError,
    Record,
    RecordBatchBuilder,
    TimestampType,
    assign_offsets,
    decode_columns,
    decode_varint,
    encode_varint,
    iter_records,
    read_batch_header,
    validate_batches,
)

TS = 1_700_000_000_000


def build(records, base_ts=TS, compression=CompressionType.NONE) -> bytes:
    builder = RecordBatchBuilder(base_timestamp_ms=base_ts, compression=compression)
    for rec in records:
        builder.append(*rec)
    return builder.build()


# --------------------------------------------------------------------------- varints


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_zigzag_edge_values(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


def test_varint_round_trips_a_range() -> None:
    for value in [*range(-20000, 20000, 7), 2**40, -(2**40), 8191, 8192, -2]:
        assert decode_varint(b"x" + encode_varint(value), 1) == (value, 1 + len(encode_varint(value)))


def test_varint_truncated_or_overlong_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80" * 11 + b"\x00", 0)


# --------------------------------------------------------------------------- golden bytes


def test_builder_matches_a_batch_built_by_hand_from_the_spec() -> None:
    # One record: key b"k", value b"hello", one header ("h", b"v"), timestamp TS + 5; base TS.
    record_body = (
        b"\x00"  # attributes
        + b"\x0a"  # timestampDelta 5, zig-zag 10
        + b"\x00"  # offsetDelta 0
        + b"\x02k"  # key length 1
        + b"\x0ahello"  # value length 5
        + b"\x02"  # one header
        + b"\x02h"  # header key length 1
        + b"\x02v"  # header value length 1
    )
    records = bytes([len(record_body) * 2]) + record_body  # length varint (small, positive)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no compression, CreateTime
            0,  # lastOffsetDelta
            TS,  # baseTimestamp
            TS + 5,  # maxTimestamp
            -1,  # producerId
            -1,  # producerEpoch
            -1,  # baseSequence
            1,  # recordsCount
        )
        + records
    )
    expected = struct.pack(">qiibI", 0, 49 + len(records), -1, 2, crc32c(after_crc)) + after_crc

    builder = RecordBatchBuilder(base_timestamp_ms=TS)
    assert builder.append(b"k", b"hello", [("h", b"v")], TS + 5) == 0
    assert builder.build() == expected
    assert builder.size_estimate == len(expected)


def test_header_fields_of_a_built_batch() -> None:
    batch = build([(b"a", b"1", (), TS + 9), (None, b"2", (), TS + 3), (b"c", None)])
    header = read_batch_header(batch)
    assert header.base_offset == 0
    assert header.batch_length + 12 == len(batch) == header.size_bytes
    assert header.partition_leader_epoch == -1
    assert header.magic == 2
    assert header.last_offset_delta == 2
    assert header.records_count == 3
    assert header.base_timestamp == TS
    assert header.max_timestamp == TS + 9
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not header.is_transactional and not header.is_control
    assert header.compression == CompressionType.NONE


# --------------------------------------------------------------------------- round trips


def test_round_trip_null_keys_values_headers_and_arbitrary_bytes() -> None:
    unicode_bytes = "ключ-κλειδί-🔑".encode()
    records = [
        (None, None),
        (b"", b""),
        (unicode_bytes, "значение ✓".encode()),
        (b"\x00\xff" * 100, None, [("trace-id", b"\x01\x02"), ("null-valued", None), ("ünï", b"")]),
        (None, b"v" * 20000, (), TS - 50),  # negative timestamp delta, multi-byte lengths
    ]
    got = list(iter_records(build(records)))
    assert got == [
        Record(0, TS, None, None, ()),
        Record(1, TS, b"", b"", ()),
        Record(2, TS, unicode_bytes, "значение ✓".encode(), ()),
        Record(3, TS, b"\x00\xff" * 100, None, (("trace-id", b"\x01\x02"), ("null-valued", None), ("ünï", b""))),
        Record(4, TS - 50, None, b"v" * 20000, ()),
    ]


def test_many_records_round_trip_and_columns_agree() -> None:
    n = 20000  # offset deltas beyond the precomputed varint table
    builder = RecordBatchBuilder(base_timestamp_ms=TS)
    for i in range(n):
        assert builder.append(str(i).encode(), b"x" * (i % 300), (), TS + i) == i
    batch = builder.build()
    info = validate_batches(batch)
    assert (info.batch_count, info.record_count, info.offset_count, info.max_timestamp) == (1, n, n, TS + n - 1)
    records = list(iter_records(batch))
    assert [r.offset for r in records] == list(range(n))
    assert records[12345] == Record(12345, TS + 12345, b"12345", b"x" * (12345 % 300), ())
    columns = decode_columns(batch)
    assert columns["offsets"] == list(range(n))
    assert columns["timestamps"] == [TS + i for i in range(n)]
    assert columns["keys"] == [r.key for r in records]
    assert columns["values"] == [r.value for r in records]


def test_empty_batch_is_refused_by_builder_and_validator() -> None:
    with pytest.raises(ValueError):
        RecordBatchBuilder(base_timestamp_ms=TS).build()
    # Hand-made empty batch: recordsCount 0, lastOffsetDelta 0.
    tail = struct.pack(">hiqqqhii", 0, 0, -1, -1, -1, -1, -1, 0)
    empty = struct.pack(">qiibI", 0, 49, -1, 2, crc32c(tail)) + tail
    with pytest.raises(CorruptRecordError, match="recordsCount 0"):
        validate_batches(empty)
    # Recovery of a compacted log may meet one: allowed there.
    assert validate_batches(empty, from_client=False).record_count == 0


def test_gzip_round_trip() -> None:
    records = [(str(i).encode(), b"payload " * 50, [("h", b"v")], TS + i) for i in range(200)]
    plain = build(records)
    gz = build(records, compression=CompressionType.GZIP)
    assert len(gz) < len(plain) / 5
    assert read_batch_header(gz).compression == CompressionType.GZIP
    assert validate_batches(gz).record_count == 200
    assert list(iter_records(gz)) == list(iter_records(plain))


def test_a_codec_label_that_lies_is_corrupt_and_unknown_codecs_are_refused() -> None:
    with pytest.raises(ValueError):
        RecordBatchBuilder(compression=5)  # Kafka defines codecs 0-4 (tests/test_record_codecs.py has them all)
    batch = bytearray(build([(b"k", b"v")]))
    batch[22] = (batch[22] & ~7) | CompressionType.ZSTD  # attributes low byte
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    assert validate_batches(batch).batch_count == 1  # stored as it came: the broker does not decompress
    with pytest.raises(CorruptRecordError, match="zstd"):
        list(iter_records(batch))
    batch[22] = (batch[22] & ~7) | 5
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        validate_batches(batch)


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    batch = bytearray(build([(b"a", b"1", (), TS), (b"b", b"2", (), TS + 1)]))
    struct.pack_into(">h", batch, 21, 0x08)  # LogAppendTime
    struct.pack_into(">q", batch, 35, TS + 777)  # maxTimestamp = append time
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    assert read_batch_header(batch).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in iter_records(batch)] == [TS + 777, TS + 777]


def test_control_batches_rejected_from_clients_and_skipped_by_readers() -> None:
    control = bytearray(build([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")]))
    struct.pack_into(">h", control, 21, 0x30)  # transactional + control
    struct.pack_into(">I", control, 17, crc32c(bytes(control[21:])))
    header = read_batch_header(control)
    assert header.is_control and header.is_transactional
    with pytest.raises(CorruptRecordError, match="control"):
        validate_batches(control)
    data = build([(b"k", b"v")])
    stream = bytearray(data + control + data)
    assign_offsets(stream, 10, 0)
    assert [r.offset for r in iter_records(stream)] == [10, 12]


# --------------------------------------------------------------------------- broker side


def test_several_batches_validate_and_get_consecutive_offsets() -> None:
    b1 = build([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    b2 = build([(None, b"4", (), TS + 40)])
    b3 = build([(b"e", b"5"), (b"f", b"6")], compression=CompressionType.GZIP)
    buf = bytearray(b1 + b2 + b3)
    info = validate_batches(buf)
    assert info.batch_count == 3
    assert info.record_count == info.offset_count == 6
    assert info.byte_size == len(buf)
    assert info.max_timestamp == TS + 40
    assert [(b.position, b.length, b.last_offset_delta, b.records_count) for b in info.batches] == [
        (0, len(b1), 2, 3),
        (len(b1), len(b2), 0, 1),
        (len(b1) + len(b2), len(b3), 1, 2),
    ]

    assert assign_offsets(buf, 1000, 7) == 1006
    assert validate_batches(buf).record_count == 6  # CRC untouched
    headers = [read_batch_header(buf, b.position) for b in info.batches]
    assert [h.base_offset for h in headers] == [1000, 1003, 1004]
    assert {h.partition_leader_epoch for h in headers} == {7}
    assert [r.offset for r in iter_records(buf)] == list(range(1000, 1006))
    assert [r.value for r in iter_records(buf, start_offset=1004)] == [b"5", b"6"]

    again = bytearray(b1 + b2 + b3)
    assert assign_offsets(again, 1000, 7, info) == 1006
    assert again == buf


def test_every_flipped_byte_after_the_crc_field_is_detected() -> None:
    batch = build([(b"key", b"value", [("h", b"v")]), (None, b"second")])
    for position in range(21, len(batch)):
        corrupt = bytearray(batch)
        corrupt[position] ^= 0x40
        with pytest.raises(CorruptRecordError, match="position 0"):
            validate_batches(corrupt)


def test_flipped_bytes_in_the_crc_field_or_magic_are_detected() -> None:
    batch = build([(b"key", b"value")])
    for position in (16, 17, 18, 19, 20):
        corrupt = bytearray(batch)
        corrupt[position] ^= 0x01
        with pytest.raises(CorruptRecordError):
            validate_batches(corrupt)


def test_corruption_in_a_later_batch_names_its_position() -> None:
    first = build([(b"a", b"1")])
    buf = bytearray(first + build([(b"b", b"2")]))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=f"batch at position {len(first)}: CRC-32C mismatch"):
        validate_batches(buf)


@pytest.mark.parametrize("kept", [1, 40, 60, 61, 70, -1])
def test_truncation_fails_validation_but_is_tolerated_at_the_tail_by_readers(kept: int) -> None:
    whole = build([(b"a", b"1"), (b"b", b"2")])
    second = build([(b"c", b"3" * 100)])
    buf = bytearray(whole + second)
    assign_offsets(buf, 0, 0)
    truncated = bytes(buf[: len(whole) + kept] if kept > 0 else buf[:kept])
    with pytest.raises(CorruptRecordError):
        validate_batches(truncated)
    assert [r.value for r in iter_records(truncated)] == [b"1", b"2"]
    assert decode_columns(truncated)["offsets"] == [0, 1]


def test_framing_errors() -> None:
    batch = build([(b"a", b"1")])
    with pytest.raises(CorruptRecordError, match="magic 1"):
        bad = bytearray(batch)
        bad[16] = 1
        validate_batches(bad)
    with pytest.raises(CorruptRecordError, match="shorter than a header"):
        bad = bytearray(batch)
        struct.pack_into(">i", bad, 8, 10)
        validate_batches(bad)
    with pytest.raises(CorruptRecordError, match="declared"):
        bad = bytearray(batch)
        struct.pack_into(">i", bad, 8, len(batch))
        validate_batches(bad)
    with pytest.raises(CorruptRecordError, match="lastOffsetDelta"):
        bad = bytearray(batch)
        struct.pack_into(">i", bad, 23, 5)
        struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
        validate_batches(bad)
    assert validate_batches(b"").batch_count == 0
    with pytest.raises(CorruptRecordError, match="needs 61"):
        read_batch_header(batch[: BATCH_HEADER_SIZE - 1])


def test_records_overrunning_their_batch_are_corrupt_even_with_a_good_crc() -> None:
    batch = bytearray(build([(b"a", b"1")]))
    batch[BATCH_HEADER_SIZE] = 0x7E  # record length 63: past the batch end
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with pytest.raises(CorruptRecordError, match="overruns"):
        list(iter_records(batch))
