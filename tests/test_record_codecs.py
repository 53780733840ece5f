"""Kafka's four codecs and LogAppendTime: round trips, other clients' bytes, bounds, and the broker's log rules.

Cross-checks use aiokafka's record builder and reader (it compresses with
cramjam like us but frames independently: its own xerial writer, python-style
LZ4 frames with block checksums) and kafka-python's (python-snappy, python-lz4
frames and zstandard, from the test extra). No broker is needed here; the live
cluster tests are at the end of the file.
"""

from __future__ import annotations

import io
import os
import random
import struct
from pathlib import Path

import cramjam
import pytest
import structlog
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.log import LogConfig, PartitionLog
from broker.log.cleaner import plan_clean
from broker.log.compressed_batches import check_compressed_batches
from broker.log.errors import InvalidTimestampError
from client.kafka import compression
from client.kafka.records import (
    CompressionType,
    CorruptRecordError,
    RecordBatchBuilder,
    TimestampType,
    iter_batches,
    iter_records,
    read_batch_header,
    validate_batches,
)
from spark_connector.arrow_decode import decode_to_arrow
from zkraft.tools.dump_log_segments import DumpOptions, run

LOG = structlog.get_logger()
T0 = 1_700_000_000_000
CODECS = list(CompressionType)


def _records(rng: random.Random, count: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    # Half random, half repetitive: compressible, yet not all one run.
    return [
        (b"key-%d" % i, rng.randbytes(40) + b"v" * rng.randint(0, 300), [("h", b"%d" % i)] if i % 3 else [])
        for i in range(count)
    ]


def _ours(codec: int, records: list, base_ms: int = T0) -> bytes:
    builder = RecordBatchBuilder(base_ms, codec)
    for i, (key, value, headers) in enumerate(records):
        builder.append(key, value, headers, base_ms + i)
    return builder.build()


def _aiokafka(codec: int, records: list, base_ms: int = T0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamp=base_ms + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_our_batches_round_trip_and_aiokafka_reads_them(codec: CompressionType) -> None:
    records = _records(random.Random(codec), 3000)
    data = _ours(codec, records)
    assert read_batch_header(data).compression == codec
    info = validate_batches(data)
    assert info.record_count == 3000
    got = list(iter_records(data))
    assert [(r.key, r.value, [(k, v) for k, v in r.headers]) for r in got] == records
    assert [r.timestamp_ms for r in got] == [T0 + i for i in range(3000)]
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert [(r.key, r.value) for r in theirs] == [(k, v) for k, v, _ in records]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_we_read_aiokafka_batches_and_the_spark_decoder_agrees(codec: CompressionType) -> None:
    records = _records(random.Random(100 + codec), 2000)
    data = _aiokafka(codec, records)
    validate_batches(data)
    got = list(iter_records(data))
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _ in records]
    assert [[(k, v) for k, v in r.headers] for r in got] == [h for _, _, h in records]
    decoded = decode_to_arrow("t", 0, data, 0, 1 << 62, False)
    assert decoded.batch is not None
    assert decoded.batch.column("value").to_pylist() == [v for _, v, _ in records]
    assert decoded.batch.column("offset").to_pylist() == list(range(2000))


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                   CompressionType.ZSTD])  # fmt: skip
def test_kafka_python_batches_read_both_ways(codec: CompressionType) -> None:
    from kafka.record.default_records import DefaultRecordBatch as KpBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

    records = _records(random.Random(7), 500)
    builder = KpBuilder(magic=2, compression_type=int(codec), is_transactional=False, producer_id=-1,
                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)  # fmt: skip
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamp=T0 + i, key=key, value=value, headers=headers)
    theirs = bytes(builder.build())
    assert read_batch_header(theirs).compression == codec
    check_compressed_batches(theirs, validate_batches(theirs), [read_batch_header(theirs)])  # a leader takes it
    assert [r.value for r in iter_records(theirs)] == [v for _, v, _ in records]
    assert [r.value for r in KpBatch(_ours(codec, records))] == [v for _, v, _ in records]


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them() -> None:
    raw = b"".join(b"record %d;" % i for i in range(5000))
    body = bytes(cramjam.snappy.compress_raw(raw))
    assert compression.decompress(compression.SNAPPY, body, decompressed_bytes_max=1 << 20) == raw
    xerial = compression.compress(compression.SNAPPY, raw)
    assert xerial.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"), "snappy-java's header, as Java writes"


def test_lz4_frames_are_kafkas_and_standard_frames_are_read() -> None:
    raw = os.urandom(1000) * 200  # several 64 KiB blocks
    ours = compression.compress(compression.LZ4, raw)
    # KafkaLZ4BlockOutputStream's header: magic, FLG 0x60 (v01, independent blocks), BD 0x40 (64 KiB), HC.
    assert ours[:6] == b"\x04\x22\x4d\x18\x60\x40"
    assert bytes(cramjam.lz4.decompress(ours)) == raw, "a standard LZ4 frame decoder reads ours"
    standard = bytes(cramjam.lz4.compress(raw))  # content checksum, linked blocks: what other writers may do
    assert compression.decompress(compression.LZ4, standard, decompressed_bytes_max=1 << 20) == raw


@pytest.mark.parametrize("codec", [c for c in CODECS if c], ids=lambda c: c.name.lower())
def test_a_batch_inflating_past_the_limit_is_corrupt_not_an_allocation(codec: CompressionType) -> None:
    body = compression.compress(codec, bytes(4 << 20))  # 4 MiB of zeros: a few KB compressed
    assert len(body) < 256 << 10
    with pytest.raises(CorruptRecordError, match="above the limit of 1048576"):
        compression.decompress(codec, body, decompressed_bytes_max=1 << 20)
    assert len(compression.decompress(codec, body, decompressed_bytes_max=4 << 20)) == 4 << 20


@pytest.mark.parametrize("codec", [c for c in CODECS if c], ids=lambda c: c.name.lower())
def test_garbage_in_a_compressed_batch_is_a_corrupt_record_error(codec: CompressionType) -> None:
    data = bytearray(_ours(codec, _records(random.Random(1), 50)))
    rng = random.Random(codec)
    for _ in range(30):
        broken = bytearray(data)
        start = 61 + rng.randrange(len(data) - 61)
        broken[start : start + 8] = rng.randbytes(8)
        try:
            list(iter_records(broken, check_crc=False))
        except CorruptRecordError:
            pass  # the other outcome: garbage that still decodes (inside a literal) is fine


def test_the_default_limit_is_named_and_generous() -> None:
    assert compression.DECOMPRESSED_BYTES_MAX_DEFAULT == 256 << 20
    data = _ours(CompressionType.ZSTD, [(None, bytes(8 << 20), [])])
    ((_, body),) = list(iter_batches(data))
    assert len(body) > 8 << 20
    with pytest.raises(CorruptRecordError, match="batch at position 0: zstd"):
        list(iter_batches(data, decompressed_bytes_max=1 << 20))


# ---------------------------------------------------------------- the broker's log


def _log(tmp_path: Path, **config: object) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", LogConfig(**config), LOG, clock_ms=lambda: T0 + 5_000)


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_topic_compression_type_recompresses_on_append(tmp_path: Path, target: str) -> None:
    log = _log(tmp_path, compression_type=target)
    records = _records(random.Random(3), 400)
    for codec in CODECS:
        log.append(bytearray(_ours(codec, records)), 0)
    data = log.read(0, 1 << 24)
    want = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[target]
    headers = [h for h, _ in iter_batches(data)]
    assert [h.compression for h in headers] == [want] * len(CODECS)
    values = [r.value for r in iter_records(data)]
    assert values == [v for _, v, _ in records] * len(CODECS)
    assert [r.offset for r in iter_records(data)] == list(range(400 * len(CODECS)))


def test_producer_compression_type_keeps_each_batch_as_sent(tmp_path: Path) -> None:
    log = _log(tmp_path)
    sent = [_ours(codec, _records(random.Random(9), 100)) for codec in CODECS]
    for batch in sent:
        log.append(bytearray(batch), 0)
    stored = [bytes(b) for _, b in _raw(log.read(0, 1 << 24))]
    # Only baseOffset (0..7) and partitionLeaderEpoch (12..15) differ: everything from the magic on is as sent.
    assert [b[16:] for b in stored] == [b[16:] for b in sent]


def _raw(data: bytes) -> list[tuple[int, memoryview]]:
    out, pos, view = [], 0, memoryview(data)
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append((pos, view[pos : pos + 12 + length]))
        pos += 12 + length
    return out


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_compaction_keeps_a_batchs_codec(tmp_path: Path, codec: CompressionType) -> None:
    log = PartitionLog(
        tmp_path / "t-0", LogConfig(segment_bytes=4096, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0), LOG
    )
    for round_ in range(6):
        builder = RecordBatchBuilder(T0 + round_, codec)
        for key in range(10):
            builder.append(b"k%d" % key, b"round %d " % round_ + b"x" * 200)
        log.append(bytearray(builder.build()), 0)
    log.roll()
    task = plan_clean(log, first_dirty=0, high_watermark=log.log_end_offset, now_ms=T0 + 10_000)
    assert task is not None
    task.compute()
    assert task.swap(LOG)
    data = log.read(log.log_start_offset, 1 << 24)
    headers = [h for h, _ in iter_batches(data)]
    assert headers and all(h.compression == codec for h in headers)
    latest = {r.key: r.value for r in iter_records(data)}
    assert latest == {b"k%d" % k: b"round 5 " + b"x" * 200 for k in range(10)}
    assert len(list(iter_records(data))) == 10, "only the last round's records are left"


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_log_append_time_stamps_the_header_only(tmp_path: Path, codec: CompressionType) -> None:
    log = _log(tmp_path, message_timestamp_type="LogAppendTime")
    sent = _ours(codec, _records(random.Random(5), 20), base_ms=T0 - 60_000)
    log.append(bytearray(sent), 0, append_time_ms=T0 + 1234)
    log.append(bytearray(sent), 0)  # without an explicit time: the log's clock
    data = log.read(0, 1 << 20)
    validate_batches(data, from_client=False)  # the CRCs were recomputed
    (first, _), (second, _) = list(iter_batches(data))
    assert first.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (first.max_timestamp, second.max_timestamp) == (T0 + 1234, T0 + 5_000)
    assert first.base_timestamp == T0 - 60_000, "records keep their own timestamps"
    assert {r.timestamp_ms for r in iter_records(data) if r.offset < 20} == {T0 + 1234}
    decoded = decode_to_arrow("t", 0, data, 0, 20, False)
    assert decoded.batch is not None
    assert set(decoded.batch.column("timestampType").to_pylist()) == {1}
    assert len(set(decoded.batch.column("timestamp").to_pylist())) == 1
    theirs = DefaultRecordBatch(bytes(_raw(data)[0][1]))
    assert theirs.timestamp_type == 1 and {r.timestamp for r in theirs} == {T0 + 1234}


def test_timestamp_difference_max_refuses_far_timestamps(tmp_path: Path) -> None:
    log = _log(tmp_path, message_timestamp_difference_max_ms=10_000)
    log.append(bytearray(_ours(CompressionType.NONE, _records(random.Random(1), 3), base_ms=T0)), 0)  # 5 s off: fine
    with pytest.raises(InvalidTimestampError, match="message.timestamp.difference.max.ms=10000"):
        log.append(bytearray(_ours(CompressionType.NONE, _records(random.Random(1), 3), base_ms=T0 - 60_000)), 0)
    assert log.log_end_offset == 3


def test_bad_topic_codec_settings_are_refused_with_one_line() -> None:
    with pytest.raises(ValueError, match="compression.type 'bz2' is not one of producer, uncompressed"):
        LogConfig(compression_type="bz2")
    with pytest.raises(ValueError, match="message.timestamp.type 'Now' is not CreateTime or LogAppendTime"):
        LogConfig(message_timestamp_type="Now")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_dump_log_segments_names_the_codec_and_prints_records(tmp_path: Path, codec: CompressionType) -> None:
    log = _log(tmp_path, message_timestamp_type="LogAppendTime")
    builder = RecordBatchBuilder(T0, codec)
    builder.append(b"user-1", b"hello")
    builder.append(b"user-2", b"world")
    log.append(bytearray(builder.build()), 0, append_time_ms=T0 + 42)
    log.flush()
    out = io.StringIO()
    code = run([str(p) for p in sorted((tmp_path / "t-0").glob("*.log"))], DumpOptions(print_data_log=True), out=out)
    lines = out.getvalue().splitlines()
    assert code == 0
    assert f" LogAppendTime: {T0 + 42} " in lines[2]
    assert f" compresscodec: {codec.name} crc: " in lines[2]  # Kafka 2.8 prints the enum's name: NONE, GZIP, ...
    assert lines[3].endswith("key: user-1 payload: hello") and lines[4].endswith("key: user-2 payload: world")


def test_spark_sink_takes_every_producer_codec() -> None:
    from spark_connector.options import OptionError, parse_sink_options

    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.compression.type": codec})
        assert options.compression_type == (None if codec == "none" else codec)
    with pytest.raises(OptionError, match="kafka.compression.type must be one of none, gzip, snappy, lz4, zstd"):
        parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.compression.type": "brotli"})


# Batches written by Apache Kafka's Java client (kafka-clients 3.9.1, whose codec streams are 2.8's:
# GZIPOutputStream, snappy-java's SnappyOutputStream, KafkaLZ4BlockOutputStream, zstd-jni), with
# `MemoryRecords.builder(buf, MAGIC_VALUE_V2, Compression.of(codec), CREATE_TIME, 0)` and 200 records:
# timestamp 1700000000000 + i, key "k<i>", value "value <i> " + "x" * (i % 90).
JAVA_BATCHES = Path(__file__).parent / "data" / "kafka_java_batches"


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_we_read_batches_the_java_client_wrote(codec: CompressionType) -> None:
    data = (JAVA_BATCHES / f"{codec.name.lower()}.bin").read_bytes()
    assert read_batch_header(data).compression == codec
    assert validate_batches(data).record_count == 200
    got = list(iter_records(data))
    assert [(r.offset, r.timestamp_ms, r.key, r.value) for r in got] == [
        (i, 1_700_000_000_000 + i, b"k%d" % i, b"value %d " % i + b"x" * (i % 90)) for i in range(200)
    ]
    decoded = decode_to_arrow("t", 0, data, 0, 200, False)
    assert decoded.batch is not None and decoded.batch.num_rows == 200


def test_our_lz4_frame_header_is_byte_identical_to_the_java_clients() -> None:
    java = (JAVA_BATCHES / "lz4.bin").read_bytes()[61:68]
    ours = compression.compress(compression.LZ4, b"anything")[:7]
    assert ours == java, "magic, FLG, BD and the header checksum as KafkaLZ4BlockOutputStream writes them"


def test_broker_defaults_and_topic_overrides_of_codec_and_timestamp_type() -> None:
    from broker.config import BrokerConfigError, from_properties
    from broker.topic_config import log_config_for

    broker = from_properties({"compression.type": "LZ4", "log.message.timestamp.type": "LogAppendTime",
                              "log.message.timestamp.difference.max.ms": "60000"})  # fmt: skip
    config = log_config_for(broker, {})
    assert (config.compression_type, config.message_timestamp_type) == ("lz4", "LogAppendTime")
    assert config.message_timestamp_difference_max_ms == 60000
    topic = log_config_for(broker, {"compression.type": "producer", "message.timestamp.type": "CreateTime"})
    assert (topic.compression_type, topic.log_append_time) == ("producer", False), "a topic's setting wins"
    skipped = log_config_for(broker, {"compression.type": "bz2"})  # a hand-edited znode: skipped, not fatal
    assert skipped.compression_type == "lz4"
    with pytest.raises(BrokerConfigError, match=r"compression.type='brotli': not a valid value \(one of uncompressed"):
        from_properties({"compression.type": "brotli"})
    with pytest.raises(BrokerConfigError, match="log.message.timestamp.type='now': not a valid value"):
        from_properties({"log.message.timestamp.type": "now"})
