"""Producer, Consumer and Admin without broker processes.

Pure parts (accumulator batching and linger, sticky and keyed partition
choice, record futures, decoding fetched batches into ConsumerRecords, option
validation) run on their own; the request paths run against
`tests/kafka_fake_broker.FakeKafka`, in-process gRPC servers speaking
broker.proto. Waiting is on conditions with deadlines, never sleeps.
"""

from __future__ import annotations

import threading

import pytest

from client import Admin, Consumer, NewTopic, Producer, TopicPartition
from client.kafka.client_errors import (
    IllegalStateError,
    KafkaConfigurationError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from client.kafka.cluster import ClusterSnapshot, PartitionMetadata, TopicMetadata, parse_bootstrap_servers
from client.kafka.consumer_records import decode_fetched, deserialize, fetched_end_offset
from client.kafka.errors import (
    CorruptRecordError,
    InvalidGroupIdError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    KafkaError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from client.kafka.partitioner import default_partition
from client.kafka.record_accumulator import RecordAccumulator
from client.kafka.records import (
    CompressionType,
    RecordBatchBuilder,
    _frame_batch,
    assign_offsets,
    iter_records,
    validate_batches,
)
from client.kafka.types import NewPartitions, RecordMetadata
from tests.helpers import wait_until
from tests.kafka_fake_broker import FakeKafka

TIMEOUT_S = 20.0


# --------------------------------------------------------------------------- option validation


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"acks": 2}, "acks must be 0, 1, -1 or 'all'"),
        ({"acks": "none"}, "acks must be"),
        ({"batch_size": -1}, "batch_size must be a number >= 1"),
        ({"linger_ms": -5}, "linger_ms must be"),
        ({"compression_type": "bz2"}, "compression_type must be None, 'none', 'gzip'"),
        ({"max_in_flight_requests_per_connection": 0}, "max_in_flight_requests_per_connection"),
        ({"buffer_memory": 0}, "buffer_memory"),
        ({"key_serializer": 3}, "key_serializer must be callable"),
    ],
)
def test_producer_rejects_bad_options_with_one_line(kwargs: dict, fragment: str) -> None:
    with pytest.raises(KafkaConfigurationError, match=fragment) as info:
        Producer("127.0.0.1:9092", **kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, KafkaError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("servers", ["", "localhost", "host:", ":9092", "h:0", "h:70000", "h:abc", ["a:1", "b"], 5])
def test_bad_bootstrap_servers_are_rejected_at_construction(servers: object) -> None:
    with pytest.raises(KafkaConfigurationError, match="bootstrap"):
        Producer(servers)  # type: ignore[arg-type]
    with pytest.raises(KafkaConfigurationError):
        Admin(servers)  # type: ignore[arg-type]
    with pytest.raises(KafkaConfigurationError):
        Consumer(bootstrap_servers=servers)  # type: ignore[arg-type]


def test_bootstrap_servers_accept_strings_and_lists() -> None:
    assert parse_bootstrap_servers("a:1, b:2,") == ["a:1", "b:2"]
    assert parse_bootstrap_servers(["a:1", "[::1]:9092"]) == ["a:1", "[::1]:9092"]


def test_consumer_and_admin_reject_bad_options() -> None:
    with pytest.raises(KafkaConfigurationError, match="auto_offset_reset must be"):
        Consumer(bootstrap_servers="h:1", auto_offset_reset="smallest")
    with pytest.raises(KafkaConfigurationError, match="max_poll_records"):
        Consumer(bootstrap_servers="h:1", max_poll_records=0)
    with pytest.raises(KafkaConfigurationError, match="request_timeout_ms"):
        Admin("h:1", request_timeout_ms=0)


def test_offset_apis_need_a_group_id() -> None:
    consumer = Consumer(bootstrap_servers="127.0.0.1:1")
    try:
        with pytest.raises(InvalidGroupIdError, match="valid group_id"):
            consumer.commit()
        with pytest.raises(InvalidGroupIdError, match="valid group_id"):
            consumer.committed(TopicPartition("t", 0))
    finally:
        consumer.close()
    with pytest.raises(IllegalStateError, match="closed"):
        consumer.poll()
    with pytest.raises(KafkaConfigurationError, match="heartbeat_interval_ms"):
        Consumer(bootstrap_servers="h:1", group_id="g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(KafkaConfigurationError, match="unknown partition assignment strategy"):
        Consumer(bootstrap_servers="h:1", group_id="g", partition_assignment_strategy=["nope"])


# --------------------------------------------------------------------------- accumulator


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def make_accumulator(clock: FakeClock, **overrides: object) -> RecordAccumulator:
    config: dict = {
        "batch_size": 1000,
        "linger_ms": 5,
        "compression": CompressionType.NONE,
        "buffer_memory": 1 << 20,
        "max_block_ms": 50,
        "acks0": False,
        "wakeup": lambda: None,
        "clock": clock,
    }
    config.update(overrides)
    return RecordAccumulator(**config)


def leader_is_1(topic: str, partition: int) -> int:
    return 1


def test_accumulator_batches_until_linger_then_drains_per_leader() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock)
    futures = [acc.append("t", 0, None, b"v" * 10, None, None, 31) for _ in range(5)]
    drained, next_s, unknown = acc.drain(leader_is_1, lambda node: True, 1 << 20, clock.now_s)
    assert drained == {} and not unknown and next_s == pytest.approx(clock.now_s + 0.005)
    clock.now_s += 0.005
    drained, _, _ = acc.drain(leader_is_1, lambda node: True, 1 << 20, clock.now_s)
    (batch,) = drained[1]
    assert batch.record_count == 5
    assert [r.value for r in iter_records(batch.payload)] == [b"v" * 10] * 5
    assert {f._delta for f in futures} == set(range(5))


def test_full_batch_is_ready_before_linger_and_a_new_one_starts() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock, batch_size=300)
    for _ in range(12):
        acc.append("t", 0, None, b"v" * 40, None, None, 61)
    drained, _, _ = acc.drain(leader_is_1, lambda node: True, 1 << 20, clock.now_s)
    batches = drained[1]
    assert len(batches) >= 2  # every full batch, not the open last one
    assert all(b.record_count >= 4 for b in batches)
    assert sum(b.record_count for b in batches) < 12


def test_flush_makes_everything_ready_and_max_request_size_limits_a_request() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock, batch_size=200)
    for _ in range(10):
        acc.append("t", 0, None, b"v" * 50, None, None, 71)
    acc.begin_flush()
    drained, _, _ = acc.drain(leader_is_1, lambda node: True, 300, clock.now_s)
    assert len(drained[1]) == 1  # 200-byte batches: a second would exceed 300 bytes
    drained, _, _ = acc.drain(leader_is_1, lambda node: True, 1 << 20, clock.now_s)
    assert sum(b.record_count for b in drained[1]) == 10 - 2
    acc.end_flush()


def test_unknown_leader_and_busy_node_hold_batches_back() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock, linger_ms=0)
    acc.append("t", 0, None, b"v", None, None, 22)
    drained, _, unknown = acc.drain(lambda t, p: -1, lambda node: True, 1 << 20, clock.now_s)
    assert drained == {} and unknown
    drained, _, _ = acc.drain(leader_is_1, lambda node: False, 1 << 20, clock.now_s)
    assert drained == {}
    drained, _, _ = acc.drain(leader_is_1, lambda node: True, 1 << 20, clock.now_s)
    assert len(drained[1]) == 1


def test_sticky_partition_holds_until_its_batch_is_drained_then_changes() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock, batch_size=10_000)
    acc.set_available_partitions("t", [0, 1, 2, 3])
    first = {acc.append("t", None, None, b"v", None, None, 22)._result.tp.partition for _ in range(50)}
    assert len(first) == 1
    (sticky,) = first
    clock.now_s += 1
    acc.drain(leader_is_1, lambda node: True, 1 << 20, clock.now_s)
    second = {acc.append("t", None, None, b"v", None, None, 22)._result.tp.partition for _ in range(50)}
    assert len(second) == 1 and second != first


def test_sticky_partition_changes_when_the_batch_fills() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock, batch_size=61 + 10 * 30)
    acc.set_available_partitions("t", [0, 1])
    partitions = [acc.append("t", None, None, b"v" * 8, None, None, 30)._result.tp.partition for _ in range(100)]
    changes = sum(1 for a, b in zip(partitions, partitions[1:], strict=False) if a != b)
    assert changes >= 2
    runs = "".join(str(p) for p in partitions)
    assert "0" * 5 in runs or "1" * 5 in runs  # it stays while the batch has room


def test_buffer_memory_blocks_then_times_out() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock, buffer_memory=100, max_block_ms=50)
    acc.append("t", 0, None, b"v" * 60, None, None, 81)
    with pytest.raises(KafkaTimeoutError, match="buffer_memory 100 bytes full"):
        acc.append("t", 0, None, b"v" * 60, None, None, 81)


# --------------------------------------------------------------------------- futures


def test_future_callbacks_success_and_failure() -> None:
    clock = FakeClock()
    acc = make_accumulator(clock)
    ok, errs = [], []
    f1 = acc.append("t", 0, b"k", b"a", None, 1234, 22).add_callback(ok.append).add_errback(errs.append)
    f2 = acc.append("t", 0, b"k", b"b", None, None, 22)
    f2.add_callback(ok.append)
    assert not f1.is_done and f1.exception() is None
    with pytest.raises(KafkaTimeoutError):
        f1.get(timeout=0.01)
    batch = acc.abort_all()[0]
    acc.complete(batch, 40, -1, None)
    assert f1.is_done and f1.succeeded()
    assert ok[0] == RecordMetadata("t", 0, 40, 1234)
    assert ok[1].offset == 41 and ok[1].timestamp == batch.base_timestamp_ms
    assert f2.get() == ok[1] and errs == []
    late = []
    f2.add_callback(late.append)  # already done: runs now
    assert late == [ok[1]]

    f3 = acc.append("t", 0, None, b"c", None, None, 22)
    f3.add_errback(errs.append)
    batch = acc.abort_all()[0]
    acc.complete(batch, -1, -1, NotLeaderForPartitionError("t-0"))
    assert f3.failed() and isinstance(errs[0], NotLeaderForPartitionError)
    with pytest.raises(NotLeaderForPartitionError):
        f3.get()


def test_a_failing_user_callback_does_not_break_the_others() -> None:
    acc = make_accumulator(FakeClock())
    seen = []
    future = acc.append("t", 0, None, b"x", None, None, 22)
    future.add_callback(lambda md: 1 / 0)
    future.add_callback(seen.append)
    acc.complete(acc.abort_all()[0], 7, -1, None)
    assert seen[0].offset == 7


# --------------------------------------------------------------------------- decoding fetched records


def fetched(*batches: bytes, base_offset: int = 0) -> bytes:
    buf = bytearray(b"".join(batches))
    assign_offsets(buf, base_offset, 0, validate_batches(buf, from_client=False))
    return bytes(buf)


def build(values: list[bytes], **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(1_000, **kwargs)  # type: ignore[arg-type]
    for i, value in enumerate(values):
        builder.append(
            b"k%d" % i if i % 2 else None, value, headers=[("h", b"x")] if i == 1 else (), timestamp_ms=1_000 + i
        )
    return builder.build()


def test_decode_fetched_matches_iter_records_and_skips_below_position() -> None:
    buf = fetched(
        build([b"a", b"b", b"c"]), build([b"d" * 300, b"e"], compression=CompressionType.GZIP), base_offset=10
    )
    records, next_offset = decode_fetched("t", 3, buf, 11)
    assert next_offset == 15
    assert [r.offset for r in records] == [11, 12, 13, 14]
    expected = [r for r in iter_records(buf) if r.offset >= 11]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in expected
    ]
    assert records[0].topic == "t" and records[0].partition == 3 and records[0].timestamp_type == 0
    assert records[0].headers == (("h", b"x"),) and records[0].key == b"k1"
    assert records[1].key is None and records[1].headers == ()


def test_decode_fetched_skips_control_batches_and_a_truncated_tail() -> None:
    control = _frame_batch(
        b"", attributes=0x20, last_offset_delta=0, base_timestamp=1, max_timestamp=1, records_count=0
    )
    buf = fetched(build([b"a"]), control, build([b"b", b"c"]))
    records, next_offset = decode_fetched("t", 0, buf + buf[:30], 0)
    assert [r.offset for r in records] == [0, 2, 3] and next_offset == 4
    records, next_offset = decode_fetched("t", 0, fetched(build([b"a"]), control), 1)
    assert records == [] and next_offset == 2  # position moves past a control batch


def test_log_append_time_batches_stamp_every_record() -> None:
    batch = bytearray(build([b"a", b"b"]))
    batch[21:23] = (0x08).to_bytes(2, "big")  # LogAppendTime; the CRC is recomputed by re-framing below
    header_tail, records_bytes = bytes(batch[21:61]), bytes(batch[61:])
    import struct

    attrs, last_delta, base_ts, _max_ts, pid, pepoch, bseq, count = struct.unpack(">hiqqqhii", header_tail)
    framed = _frame_batch(
        records_bytes, attributes=attrs, last_offset_delta=last_delta, base_timestamp=base_ts, max_timestamp=9_999,
        records_count=count,
    )  # fmt: skip
    records, _ = decode_fetched("t", 0, fetched(framed), 0)
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(9_999, 1), (9_999, 1)]


def test_deserializers_apply_to_keys_and_values_not_nulls() -> None:
    records, _ = decode_fetched("t", 0, fetched(build([b"1", b"2"])), 0)
    out = deserialize(records, lambda k: k.decode(), lambda v: int(v))
    assert [(r.key, r.value) for r in out] == [(None, 1), ("k1", 2)]


# --------------------------------------------------------------------------- partition choice in the producer


def primed_producer(partitions: int, **config: object) -> Producer:
    producer = Producer("127.0.0.1:1", retry_backoff_ms=1000, **config)  # type: ignore[arg-type]
    meta = TopicMetadata("t", 0, False, {p: PartitionMetadata(p, -1, 0, (1,), (1,), (), 0) for p in range(partitions)})
    snapshot = ClusterSnapshot("c", -1, {}, {"t": meta})
    producer._cluster._snapshot = snapshot
    producer._update_topics(snapshot)
    return producer


def test_keyed_records_use_kafkas_murmur2_partition() -> None:
    producer = primed_producer(7, linger_ms=60_000)
    try:
        for i in range(200):
            key = f"user-{i}".encode()
            future = producer.send("t", b"v", key=key)
            assert future._result.tp.partition == default_partition(key, 7, sticky_partition=-1)
        assert producer.send("t", b"v", key=b"21")._result.tp.partition == (-973932308 & 0x7FFFFFFF) % 7
        assert producer.send("t", b"v", partition=5)._result.tp.partition == 5
    finally:
        producer.close(timeout=0)


def test_oversized_record_and_closed_producer_raise_at_send() -> None:
    producer = primed_producer(1, max_request_size=1000, linger_ms=60_000)
    with pytest.raises(MessageSizeTooLargeError, match="record for t is"):
        producer.send("t", b"x" * 2000)
    producer.close(timeout=0)
    with pytest.raises(IllegalStateError, match="closed"):
        producer.send("t", b"x")


def test_close_fails_what_could_not_be_delivered() -> None:
    producer = primed_producer(2, linger_ms=0)
    future = producer.send("t", b"x")
    producer.close(timeout=0.05)
    assert future.is_done and isinstance(future.exception(), KafkaError)


# --------------------------------------------------------------------------- against the fake broker


@pytest.fixture
def fake() -> FakeKafka:
    with FakeKafka(brokers=2) as kafka:
        yield kafka


def test_produce_and_consume_back_in_order(fake: FakeKafka) -> None:
    fake.create_topic("t", partitions=4)
    with Producer(fake.bootstrap_servers, acks="all", linger_ms=2) as producer:
        futures = [producer.send("t", b"v%d" % i, key=b"k%d" % (i % 13)) for i in range(2000)]
        producer.flush(TIMEOUT_S)
        metadata = [f.get(0) for f in futures]
    for p in range(4):
        offsets = [m.offset for m in metadata if m.partition == p]
        assert offsets == list(range(len(offsets)))
    # one Produce per broker: requests carry several partitions of the leader
    assert any(len(r.topics[0].partitions) > 1 for r in fake.produce_requests)
    with Consumer("t", bootstrap_servers=fake.bootstrap_servers, auto_offset_reset="earliest",
                  consumer_timeout_ms=500) as consumer:  # fmt: skip
        records = list(consumer)
    assert len(records) == 2000
    by_partition: dict[int, list] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    for p, rs in by_partition.items():
        assert [r.offset for r in rs] == list(range(len(rs)))
        sent = [m for m, _ in zip(metadata, range(2000), strict=True) if m.partition == p]
        assert len(sent) == len(rs)
    values = {r.value for r in records}
    assert values == {b"v%d" % i for i in range(2000)}


def test_retriable_errors_are_retried_and_others_fail_the_batch(fake: FakeKafka) -> None:
    fake.create_topic("t", partitions=2)
    fake.inject_produce_errors("t", 0, [NotLeaderForPartitionError.code, 7])
    fake.inject_produce_errors("t", 1, [CorruptRecordError.code])
    with Producer(fake.bootstrap_servers, retry_backoff_ms=10) as producer:
        ok = producer.send("t", b"a", partition=0)
        bad = producer.send("t", b"b", partition=1)
        assert ok.get(TIMEOUT_S).offset == 0
        with pytest.raises(CorruptRecordError, match="t-1"):
            bad.get(TIMEOUT_S)
        assert producer.metrics()["retries"] >= 2


def test_leader_move_is_followed_after_a_metadata_refresh(fake: FakeKafka) -> None:
    fake.create_topic("t", partitions=1)
    with Producer(fake.bootstrap_servers, retry_backoff_ms=10) as producer:
        assert producer.send("t", b"a").get(TIMEOUT_S).offset == 0
        fake.move_leader("t", 0, 2)
        assert producer.send("t", b"b").get(TIMEOUT_S).offset == 1


def test_delivery_timeout_fails_records_for_an_unreachable_leader(fake: FakeKafka) -> None:
    fake.create_topic("t", partitions=2)
    with Producer(fake.bootstrap_servers, retry_backoff_ms=10, delivery_timeout_ms=300, linger_ms=0) as producer:
        producer.partitions_for("t")
        fake.down.add(2)  # leads t-1
        future = producer.send("t", b"x", partition=1)
        with pytest.raises(KafkaError) as info:
            future.get(TIMEOUT_S)
        assert "t-1" in str(info.value) or "broker 2" in str(info.value)
        fake.down.clear()


def test_acks_0_completes_with_offset_minus_one(fake: FakeKafka) -> None:
    fake.create_topic("t")
    with Producer(fake.bootstrap_servers, acks=0) as producer:
        assert producer.send("t", b"x").get(TIMEOUT_S).offset == -1
    wait_until(lambda: fake.end_offset("t", 0) == 1, TIMEOUT_S, message="acks=0 record not written")


def test_callbacks_run_after_delivery(fake: FakeKafka) -> None:
    fake.create_topic("t")
    done = threading.Event()
    seen: list[RecordMetadata] = []
    with Producer(fake.bootstrap_servers) as producer:
        producer.send("t", b"x").add_callback(seen.append).add_callback(lambda _md: done.set())
        assert done.wait(TIMEOUT_S)
    assert seen[0].topic == "t" and seen[0].offset == 0


def test_send_to_a_missing_topic_times_out_naming_it(fake: FakeKafka) -> None:
    with Producer(fake.bootstrap_servers, request_timeout_ms=300, retry_backoff_ms=20) as producer:
        with pytest.raises(KafkaTimeoutError, match="nope"):
            producer.send("nope", b"x")


def test_seek_position_and_offsets(fake: FakeKafka) -> None:
    fake.create_topic("t", partitions=2)
    with Producer(fake.bootstrap_servers) as producer:
        for i in range(10):
            producer.send("t", b"%d" % i, partition=0)
        producer.flush(TIMEOUT_S)
    tp = TopicPartition("t", 0)
    with Consumer(bootstrap_servers=fake.bootstrap_servers, value_deserializer=int) as consumer:
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp, TopicPartition("t", 1)]) == {tp: 10, TopicPartition("t", 1): 0}
        assert consumer.position(tp) == 10  # latest
        consumer.seek(tp, 4)
        got = consumer.poll(timeout_ms=TIMEOUT_S * 1000, max_records=3)
        assert [r.value for r in got[tp]] == [4, 5, 6]
        assert consumer.position(tp) == 7
        consumer.seek_to_beginning()
        assert consumer.position(tp) == 0
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 10
        assert consumer.poll(timeout_ms=50) == {}
        assert consumer.partitions_for_topic("t") == {0, 1}
        assert consumer.partitions_for_topic("missing") is None
        assert consumer.topics() == {"t"}
        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.seek(TopicPartition("t", 1), 0)


def test_offset_out_of_range_resets_or_raises(fake: FakeKafka) -> None:
    fake.create_topic("t")
    with Producer(fake.bootstrap_servers) as producer:
        producer.send("t", b"a").get(TIMEOUT_S)
    tp = TopicPartition("t", 0)
    with Consumer(bootstrap_servers=fake.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 50)
        got = consumer.poll(timeout_ms=TIMEOUT_S * 1000)
        assert [r.offset for r in got[tp]] == [0]
    with Consumer(bootstrap_servers=fake.bootstrap_servers, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError, match="t-0"):
            consumer.poll()
        consumer.seek(tp, 50)
        with pytest.raises(OffsetOutOfRangeError, match="t-0: offset 50"):
            consumer.poll(timeout_ms=TIMEOUT_S * 1000)


def test_subscribed_consumer_picks_up_all_partitions(fake: FakeKafka) -> None:
    fake.create_topic("t", partitions=3)
    with Producer(fake.bootstrap_servers) as producer:
        for p in range(3):
            producer.send("t", b"x", partition=p)
        producer.flush(TIMEOUT_S)
    with Consumer("t", bootstrap_servers=fake.bootstrap_servers, auto_offset_reset="earliest",
                  consumer_timeout_ms=300) as consumer:  # fmt: skip
        assert consumer.assignment() == {TopicPartition("t", p) for p in range(3)}
        assert sorted(r.partition for r in consumer) == [0, 1, 2]
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            consumer.assign([TopicPartition("t", 0)])


def test_admin_create_describe_list_delete(fake: FakeKafka) -> None:
    with Admin(fake.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("a", 3, 1), NewTopic("__internal", 1, 1)])
        assert admin.list_topics() == ["__internal", "a"]
        (desc,) = admin.describe_topics(["a"])
        assert desc.name == "a" and not desc.is_internal
        assert [p.partition for p in desc.partitions] == [0, 1, 2]
        assert all(p.leader in (1, 2) and p.error is None for p in desc.partitions)
        cluster = admin.describe_cluster()
        assert cluster.cluster_id == "fake-cluster" and [b.node_id for b in cluster.brokers] == [1, 2]
        with pytest.raises(TopicAlreadyExistsError, match="create topic a: Topic 'a' already exists"):
            admin.create_topics([NewTopic("a", 1, 1)])
        with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers"):
            admin.create_topics([NewTopic("b", 1, 3)])
        admin.create_partitions({"a": NewPartitions(5)})
        assert len(admin.describe_topics(["a"])[0].partitions) == 5
        with pytest.raises(InvalidPartitionsError, match="a"):
            admin.create_partitions({"a": NewPartitions(2)})
        admin.delete_topics(["a"])
        assert admin.list_topics() == ["__internal"]
        with pytest.raises(UnknownTopicOrPartitionError, match="a"):
            admin.describe_topics(["a"])
    with pytest.raises(IllegalStateError):
        admin.list_topics()


def test_fetched_end_offset_agrees_with_decoding() -> None:
    control = _frame_batch(
        b"", attributes=0x20, last_offset_delta=0, base_timestamp=1, max_timestamp=1, records_count=0
    )
    buf = fetched(build([b"a", b"b"]), control, build([b"c"]), base_offset=5)
    for start in range(3, 10):
        assert fetched_end_offset(buf + buf[:40], start) == decode_fetched("t", 0, buf, start)[1]


def test_consumer_prefetches_while_records_are_buffered(fake: FakeKafka) -> None:
    fake.create_topic("t")
    with Producer(fake.bootstrap_servers, linger_ms=0, batch_size=200) as producer:
        for i in range(30):
            producer.send("t", b"%03d" % i)
        producer.flush(TIMEOUT_S)
    tp = TopicPartition("t", 0)
    with Consumer(bootstrap_servers=fake.bootstrap_servers, max_partition_fetch_bytes=300) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        first = consumer.poll(timeout_ms=TIMEOUT_S * 1000, max_records=1)[tp]
        assert [r.offset for r in first] == [0]
        # the next fetch left before the user asked for more
        wait_until(lambda: len(fake.fetch_requests) >= 2, TIMEOUT_S, message="no prefetch sent")
        second = fake.fetch_requests[1].topics[0].partitions[0].fetch_offset
        assert second > 1
        seen = [r.offset for r in first]
        wait_until(
            lambda: seen.extend(r.offset for r in consumer.poll(timeout_ms=100).get(tp, [])) or len(seen) >= 30,
            TIMEOUT_S,
            message="not all 30 records consumed",
        )
        assert seen == list(range(30))


def test_bad_record_types_raise_at_send_and_leave_no_empty_batch() -> None:
    producer = primed_producer(1, linger_ms=60_000)
    try:
        with pytest.raises(KafkaConfigurationError, match="value must be bytes"):
            producer.send("t", "text")
        with pytest.raises(KafkaConfigurationError, match="key must be bytes"):
            producer.send("t", b"v", key=7)
        with pytest.raises((TypeError, AttributeError)):
            producer.send("t", b"v", headers=[(1, 2)])
        assert producer._accumulator.incomplete_count() == 0
        assert producer.send("t", b"v", headers=[("h", b"1")])._delta == 0
    finally:
        producer.close(timeout=0)


def test_consumer_follows_a_leader_move(fake: FakeKafka) -> None:
    fake.create_topic("t")
    tp = TopicPartition("t", 0)
    with Producer(fake.bootstrap_servers) as producer, Consumer(bootstrap_servers=fake.bootstrap_servers) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        producer.send("t", b"a").get(TIMEOUT_S)
        seen: list[bytes] = []

        def consumed(n: int) -> bool:
            seen.extend(r.value for r in consumer.poll(timeout_ms=100).get(tp, []))
            return len(seen) >= n

        wait_until(lambda: consumed(1), TIMEOUT_S, message="first record not consumed")
        fake.move_leader("t", 0, 2)
        producer.send("t", b"b").get(TIMEOUT_S)
        wait_until(lambda: consumed(2), TIMEOUT_S, message="record after the leader move not consumed")
        assert seen == [b"a", b"b"]
