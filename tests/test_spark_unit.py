"""Pure parts of the Spark connector, without a JVM or brokers: options, offsets JSON, planning, Arrow decoding."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from client import TopicPartition  # noqa: E402
from client.kafka.records import (  # noqa: E402
    CorruptRecordError,
    RecordBatchBuilder,
    assign_offsets,
    encode_varint,
    iter_records,
)
from spark_connector.arrow_decode import decode_to_arrow  # noqa: E402
from spark_connector.offsets import (  # noqa: E402
    OffsetsJsonError,
    from_offset_dict,
    parse_assign_json,
    parse_offsets_json,
    to_json,
    to_offset_dict,
)
from spark_connector.options import (  # noqa: E402
    OptionError,
    StartKind,
    check_for_batch,
    check_for_stream,
    parse_sink_options,
    parse_source_options,
)
from spark_connector.planning import (  # noqa: E402
    DataLossError,
    PlannedRange,
    data_loss_reporter,
    offset_ranges,
    rate_limit,
    split_ranges,
)

pytestmark = pytest.mark.spark

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


# --------------------------------------------------------------------------- offsets JSON


def test_offsets_json_is_sorted_and_round_trips() -> None:
    offsets = {B0: 7, A1: -1, A0: 23, TopicPartition("a", 10): 5}
    text = to_json(offsets)
    assert text == '{"a":{"0":23,"1":-1,"10":5},"b":{"0":7}}'
    assert parse_offsets_json(text, "startingOffsets") == offsets
    assert from_offset_dict(json.loads(json.dumps(to_offset_dict(offsets)))) == offsets


@pytest.mark.parametrize("text", ["", "[]", '{"a":5}', '{"a":{"x":1}}', '{"a":{"0":"1"}}', '{"a":{"-1":1}}', "{"])
def test_malformed_offsets_json_names_the_option_and_the_shape(text: str) -> None:
    with pytest.raises(OffsetsJsonError, match=r"option startingOffsets: expected e.g. \{\"topicA\""):
        parse_offsets_json(text, "startingOffsets")


def test_assign_json() -> None:
    assert parse_assign_json('{"b":[0],"a":[1,0]}') == (A0, A1, B0)
    for bad in ('{"a":[]}', '{"a":[-1]}', '{"a":"0"}', "[]", "x"):
        with pytest.raises(OffsetsJsonError, match="option assign"):
            parse_assign_json(bad)


# --------------------------------------------------------------------------- options


def test_options_with_and_without_the_kafka_prefix() -> None:
    a = parse_source_options({"kafka.bootstrap.servers": "h:1,h:2", "subscribe": "b, a,a"})
    b = parse_source_options({"bootstrap.servers": "h:1,h:2", "subscribe": "a,b"})
    assert a.bootstrap_servers == b.bootstrap_servers == "h:1,h:2"
    assert a.subscription.topics == b.subscription.topics == ("a", "b")
    assert a.starting is None and a.ending.kind is StartKind.LATEST
    assert a.fail_on_data_loss and not a.include_headers


def test_every_documented_source_option_parses() -> None:
    options = parse_source_options(
        {
            **BOOT,
            "assign": '{"a":[0,1]}',
            "startingOffsets": '{"a":{"0":-2,"1":5}}',
            "endingOffsets": '{"a":{"0":-1,"1":9}}',
            "maxOffsetsPerTrigger": "100",
            "minPartitions": "8",
            "maxRecordsPerPartition": "1000",
            "failOnDataLoss": "false",
            "includeHeaders": "TRUE",
            "kafkaConsumer.pollTimeoutMs": "5000",
            "kafka.max.partition.fetch.bytes": "1048576",
            "groupIdPrefix": "x",
            "checkpointLocation": "/tmp/ignored-engine-option",
        }
    )
    assert options.subscription.partitions == (A0, A1)
    assert options.starting.offsets == {A0: -2, A1: 5}
    assert options.ending.offsets == {A0: -1, A1: 9}
    assert (options.max_offsets_per_trigger, options.min_partitions, options.max_records_per_partition) == (
        100,
        8,
        1000,
    )
    assert not options.fail_on_data_loss and options.include_headers
    assert options.fetch_timeout_ms == 5000 and options.fetch_max_bytes == 1048576


def test_timestamps_take_precedence_as_in_spark() -> None:
    options = parse_source_options(
        {**BOOT, "subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "1700000000000"}
    )
    assert options.starting.kind is StartKind.TIMESTAMP and options.starting.timestamp_ms == 1700000000000
    options = parse_source_options({**BOOT, "subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":17}}'})
    assert options.starting.kind is StartKind.TIMESTAMPS and options.starting.offsets == {A0: 17}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers is required"),
        ({**BOOT}, "exactly one of the options subscribe, subscribePattern, assign"),
        ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, "given: subscribe, assign"),
        ({**BOOT, "subscribe": " , "}, "option subscribe: no topic"),
        ({**BOOT, "subscribePattern": "("}, "option subscribePattern: bad regular expression"),
        ({**BOOT, "subscribe": "a", "subscribePatern": "a"}, "unknown option 'subscribePatern'"),
        ({**BOOT, "subscribe": "a", "kafka.group.id.x": "a"}, "unknown option 'kafka.group.id.x'"),
        ({**BOOT, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "set the source option startingOffsets"),
        ({**BOOT, "subscribe": "a", "group.id": "g"}, "never joins a consumer group"),
        ({**BOOT, "subscribe": "a", "kafka.enable.auto.commit": "true"}, "does not commit offsets"),
        ({**BOOT, "subscribe": "a", "failOnDataLoss": "yes"}, "failOnDataLoss must be true or false"),
        ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be a positive integer"),
        ({**BOOT, "subscribe": "a", "minPartitions": "-3"}, "minPartitions must be a positive integer"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"b":{"0":1}}'}, "names partitions outside subscribe: b-0"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "offsets must be >= 0, or -2"),
        ({**BOOT, "subscribe": "a", "startingOffsets": "first"}, "option startingOffsets: expected e.g."),
        ({**BOOT, "subscribe": "a", "startingTimestamp": "soon"}, "startingTimestamp must be epoch milliseconds"),
        ({"bootstrap.servers": "h:1", "kafka.bootstrap.servers": "h:2", "subscribe": "a"}, "both set"),
        ({"kafka.bootstrap.servers": "nohostport", "subscribe": "a"}, "bad bootstrap server"),
        ({**BOOT, "subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, "must be error or latest"),
    ],
)
def test_bad_source_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source_options(options)


def test_batch_and_stream_specific_rules() -> None:
    def batch(**extra: str) -> None:
        check_for_batch(parse_source_options({**BOOT, "subscribe": "a", **extra}))

    batch()
    batch(startingOffsets="earliest", endingOffsets='{"a":{"0":-1}}')
    for extra, message in [
        ({"startingOffsets": "latest"}, "latest is not allowed for a batch query"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, "-1 .latest. is not allowed"),
        ({"endingOffsets": "earliest"}, "endingOffsets: earliest is not allowed"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, "-2 .earliest. is not allowed"),
        ({"maxOffsetsPerTrigger": "5"}, "for streaming queries only"),
    ]:
        with pytest.raises(OptionError, match=message):
            batch(**extra)
    check_for_stream(parse_source_options({**BOOT, "subscribe": "a", "startingOffsets": "latest"}))
    with pytest.raises(OptionError, match="endingOffsets is not valid in streaming queries"):
        check_for_stream(parse_source_options({**BOOT, "subscribe": "a", "endingOffsets": "latest"}))


def test_kafkas_security_options_pass_through_and_unknown_ones_are_refused(tmp_path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a client connects", encoding="utf-8")
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    security = {"kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.location": str(ca),
                "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config": 'x.Scram required username="alice" password="secret";'}  # fmt: skip
    parsed = parse_source_options({**base, **security})
    assert dict(parsed.client_properties) == {k.removeprefix("kafka."): v for k, v in security.items()}
    sink = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", **security})
    assert dict(sink.client_properties)["security.protocol"] == "SASL_SSL"
    with pytest.raises(OptionError, match="unknown option 'kafka.ssl.trustore.location'"):
        parse_source_options({**base, "kafka.ssl.trustore.location": str(ca)})
    with pytest.raises(OptionError, match="option kafka.ssl.truststore.location is not set"):
        parse_source_options({**base, "kafka.security.protocol": "SSL"})
    with pytest.raises(OptionError, match="needs a user"):  # the SASL half is checked at once too
        parse_source_options({**base, **security, "kafka.sasl.jaas.config": "x required;"})
    with pytest.raises(OptionError, match="option kafka.security.protocol: 'TLS' is not one of"):
        parse_source_options({**base, "kafka.security.protocol": "TLS"})


def test_sink_options() -> None:
    sink = parse_sink_options({**BOOT, "topic": "t", "kafka.acks": "1", "checkpointLocation": "/x"})
    assert (sink.topic, sink.acks, sink.include_headers) == ("t", "1", False)
    with pytest.raises(OptionError, match="kafka.bootstrap.servers is required"):
        parse_sink_options({"topic": "t"})
    with pytest.raises(OptionError, match="kafka.acks must be"):
        parse_sink_options({**BOOT, "acks": "2"})
    with pytest.raises(OptionError, match="keys are always written as bytes"):
        parse_sink_options({**BOOT, "kafka.key.serializer": "x"})


# --------------------------------------------------------------------------- planning


def test_rate_limit_shares_the_limit_in_proportion_to_backlog() -> None:
    start = {A0: 0, A1: 0}
    latest = {A0: 300, A1: 100, B0: 10}
    # b-0 is new; its earliest offset is 0: backlog 300 + 100 + 10 = 410.
    end = rate_limit(start, {B0: 0}, latest, 41)
    assert end == {A0: 30, A1: 10, B0: 1}
    # A share below one record is rounded up (no partition is starved), and never beyond latest.
    assert rate_limit({A0: 0, A1: 0}, {}, {A0: 1000, A1: 1}, 10) == {A0: 9, A1: 1}
    assert rate_limit(start, {}, {A0: 5, A1: 0}, 1000) == {A0: 5, A1: 0}
    # Partitions whose latest went backwards keep their latest (offset_ranges reports the loss).
    assert rate_limit({A0: 50}, {}, {A0: 10}, 5) == {A0: 10}


def test_offset_ranges_and_data_loss() -> None:
    lost: list[str] = []
    ranges = offset_ranges({A0: 5, A1: 7, B0: 3}, {A0: 9, A1: 7, TopicPartition("c", 0): 4}, {}, lost.append)
    assert ranges == [PlannedRange(A0, 5, 9)]
    assert "partitions b-0 are gone" in lost
    assert any("new partition c-0" in m for m in lost)
    lost.clear()
    assert offset_ranges({A0: 5}, {A0: 3, A1: 4}, {A1: 2}, lost.append) == [PlannedRange(A1, 2, 4)]
    assert lost == [
        "partition a-0's offset was changed from 5 to 3",
        "added partition a-1 starts from offset 2 instead of 0",
    ]


def test_data_loss_reporter_fails_or_warns(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with pytest.raises(DataLossError, match='records gone. Some data may have been lost.*"failOnDataLoss" to "false"'):
        data_loss_reporter(True, logging.getLogger("t"))("records gone")
    with caplog.at_level(logging.WARNING):
        data_loss_reporter(False, logging.getLogger("t"))("records gone")
    assert "records gone" in caplog.text


def test_split_ranges_for_min_partitions_and_max_records() -> None:
    ranges = [PlannedRange(A0, 0, 90), PlannedRange(A1, 0, 10)]
    assert split_ranges(ranges, None, None) == ranges
    assert split_ranges(ranges, 2, None) == ranges
    split = split_ranges(ranges, 10, None)
    assert [(r.tp, r.from_offset, r.until_offset) for r in split if r.tp == A1] == [(A1, 0, 10)]
    assert len([r for r in split if r.tp == A0]) == 9
    assert sum(r.size for r in split) == 100
    pieces = split_ranges([PlannedRange(A0, 10, 35)], None, 10)
    assert [(r.from_offset, r.until_offset) for r in pieces] == [(10, 19), (19, 27), (27, 35)]


# --------------------------------------------------------------------------- Arrow decoding


def _batches(rng: random.Random, batches: int, per_batch: int, *, varying: bool, headers: bool, gzip: bool) -> bytes:
    out = bytearray()
    offset = 0
    for b in range(batches):
        builder = RecordBatchBuilder(base_timestamp_ms=1_700_000_000_000 + b, compression=1 if gzip and b % 2 else 0)
        for i in range(per_batch):
            value = rng.randbytes(rng.randint(0, 300) if varying else 100)
            key = (None if i % 3 == 0 else b"k%d" % i) if varying else None
            hdrs = [("h", b"x"), ("n", None)] if headers and i % 2 else ()
            ts = 1_700_000_000_000 + b + (rng.randint(0, 100_000) if varying else i // 50)
            builder.append(key, value, hdrs, timestamp_ms=ts)
        raw = bytearray(builder.build())
        assign_offsets(raw, offset, 0)
        offset += per_batch
        out += raw
    return bytes(out)


@pytest.mark.parametrize("varying", [False, True])
@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("gzip", [False, True])
def test_arrow_decoding_matches_the_record_decoder(varying: bool, headers: bool, gzip: bool) -> None:
    buf = _batches(random.Random(7), 12, 90, varying=varying, headers=headers, gzip=gzip)
    for start, until in [(0, 10**9), (37, 500), (89, 91), (1079, 1080), (5000, 6000)]:
        expected = [r for r in iter_records(buf, start) if r.offset < until]
        decoded = decode_to_arrow("t", 3, buf, start, until, headers)
        got = decoded.batch.to_pylist() if decoded.batch is not None else []
        assert [g["offset"] for g in got] == [e.offset for e in expected]
        assert [g["key"] for g in got] == [e.key for e in expected]
        assert [g["value"] for g in got] == [e.value for e in expected]
        assert [int(g["timestamp"].timestamp() * 1000) for g in got] == [e.timestamp_ms for e in expected]
        assert {(g["topic"], g["partition"], g["timestampType"]) for g in got} <= {("t", 3, 0)}
        if headers:
            assert [g["headers"] for g in got] == [
                [{"key": k, "value": v} for k, v in e.headers] if e.headers else None for e in expected
            ]
        if expected:
            assert decoded.next_offset >= expected[-1].offset + 1


def test_arrow_decoding_after_a_change_of_producer_matches_the_record_decoder() -> None:
    # The framing window grown over batches of same-size records carries into batches whose sizes vary.
    rng = random.Random(11)
    same = _batches(rng, 6, 200, varying=False, headers=False, gzip=False)
    varying = bytearray(_batches(rng, 4, 60, varying=True, headers=False, gzip=False))
    out = bytearray(same)
    offset, pos = 1200, 0
    while pos < len(varying):  # the second producer's batches continue the first one's offsets
        length = int.from_bytes(varying[pos + 8 : pos + 12], "big") + 12
        raw = bytearray(varying[pos : pos + length])
        assign_offsets(raw, offset, 0)
        offset += 60
        out += raw
        pos += length
    buf = bytes(out)
    expected = list(iter_records(buf, 0))
    got = decode_to_arrow("t", 0, buf, 0, 10**9, False).batch.to_pylist()
    assert len(got) == 1440
    assert [(g["offset"], g["key"], g["value"]) for g in got] == [(e.offset, e.key, e.value) for e in expected]


def test_arrow_decoding_of_runs_of_several_sizes_matches_the_record_decoder() -> None:
    # Runs of equal-size values (a producer cycling through a few sizes, some empty) are framed and copied run by
    # run; runs of one record and runs cut by a batch boundary included.
    out = bytearray()
    offset = 0
    for b, per_batch in enumerate((45, 1, 70)):
        builder = RecordBatchBuilder(base_timestamp_ms=1_700_000_000_000 + b)
        for i in range(per_batch):
            size = (0, 7, 130, 7)[(offset + i) // 6 % 4] if i != 33 else 2
            builder.append(None if i % 9 else b"key%d" % i, bytes([i % 251]) * size)
        raw = bytearray(builder.build())
        assign_offsets(raw, offset, 0)
        offset += per_batch
        out += raw
    buf = bytes(out)
    for start in (0, 20, 45):
        expected = list(iter_records(buf, start))
        got = decode_to_arrow("t", 0, buf, start, 10**9, False).batch.to_pylist()
        assert [(g["offset"], g["key"], g["value"]) for g in got] == [(e.offset, e.key, e.value) for e in expected]


def test_arrow_batches_match_the_schema_spark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_connector.schema import arrow_schema, spark_schema

    for include_headers in (False, True):
        assert to_arrow_schema(spark_schema(include_headers), timezone="UTC").equals(arrow_schema(include_headers))
        buf = _batches(random.Random(1), 2, 5, varying=False, headers=include_headers, gzip=False)
        batch = decode_to_arrow("t", 0, buf, 0, 100, include_headers).batch
        assert batch.schema.equals(arrow_schema(include_headers))


def test_a_corrupted_batch_is_refused() -> None:
    buf = bytearray(_batches(random.Random(2), 2, 10, varying=False, headers=False, gzip=False))
    buf[100] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_to_arrow("t", 0, bytes(buf), 0, 100, False)


@pytest.mark.parametrize("varying", [False, True])
def test_a_record_whose_fields_do_not_fill_its_length_is_refused(varying: bool) -> None:
    # Record lengths come from framing the batch, field widths from decoding the fields: they must agree. A value
    # length one short (CRC not checked, as if the batch had been built wrong) leaves a byte of the record unread:
    # the value's last byte, made 0 here, reads as "no headers" one byte before the record ends.
    buf = bytearray(_batches(random.Random(4), 1, 40, varying=varying, headers=False, gzip=False))
    value = next(iter_records(bytes(buf), 0)).value
    encoded, shorter = encode_varint(len(value)), encode_varint(len(value) - 1)
    assert len(encoded) == len(shorter)  # the seed's first value is long enough for that
    at = buf.index(encoded + value)
    buf[at : at + len(encoded)] = shorter
    buf[at + len(encoded) + len(value) - 1] = 0
    with pytest.raises(CorruptRecordError, match="do not add up"):
        decode_to_arrow("t", 0, bytes(buf), 0, 100, False, check_crc=False)


def test_a_truncated_tail_ends_the_batch_quietly() -> None:
    buf = _batches(random.Random(3), 3, 10, varying=False, headers=False, gzip=False)
    decoded = decode_to_arrow("t", 0, buf[:-5], 0, 100, False)
    assert decoded.batch.num_rows == 20 and decoded.next_offset == 20


def test_register_exports_the_import_root_to_sparks_python_processes() -> None:
    """Spark's streaming source runner does not see --py-files: register() puts our root on its PYTHONPATH."""
    import os
    from types import SimpleNamespace

    import spark_connector
    from spark_connector.source import ZkraftDataSource

    registered = []
    context = SimpleNamespace(environment={"PYTHONPATH": "/elsewhere"})
    fake = SimpleNamespace(sparkContext=context, dataSource=SimpleNamespace(register=registered.append))
    spark_connector.register(fake)
    spark_connector.register(fake)
    root = os.path.dirname(os.path.dirname(os.path.abspath(spark_connector.__file__)))
    assert context.environment["PYTHONPATH"] == os.pathsep.join([root, "/elsewhere"])
    assert registered == [ZkraftDataSource, ZkraftDataSource]
    assert ZkraftDataSource.name() == "zkraft"
