"""The record path's Kafka handlers (broker/kafka_api/data.py) on one in-process broker, every version.

Each request is written by kio and read back (as the listener reads it off the wire), handed to the handler
with the broker's real ReplicaManager below, and the answer is written and read again by kio for the same
version: what a Kafka client would receive.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import io
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from broker.config import BrokerConfig
from broker.kafka_api.entities import build
from broker.kafka_api.fetch_encoding import encode_fetch_response
from broker.kafka_api.registry import API_SPECS, CloseConnection, EncodedResponse, KafkaRequestContext
from broker.log_manager import LogManager
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.server import default_log_config
from broker.service import BrokerService
from client.kafka import errors
from client.kafka.compression import GZIP, LZ4, SNAPPY, ZSTD, compress
from client.kafka.records import BATCH_HEADER_SIZE, RecordBatchBuilder, _frame_batch, iter_records
from client.zk.exceptions import NoNodeError
from tests.helpers import wait_until
from zkraft_proto import broker_pb2 as pb

TOPIC = "t"
BROKER_ID = 1
LEADER_EPOCH = 3
API_MODULES = {0: "produce", 1: "fetch", 2: "list_offsets", 22: "init_producer_id", 23: "offset_for_leader_epoch"}


class _NoZk:
    """The replica manager reads a topic's config znode once; there is none here."""

    async def get(self, path: str) -> Any:
        raise NoNodeError(path)


class _ProducerIds:
    def __init__(self) -> None:
        self.next_id = 1000

    async def generate_producer_id(self) -> int:
        self.next_id += 1
        return self.next_id


class Broker:
    """One broker's service with partitions 0 and 1 of TOPIC led here at LEADER_EPOCH; partition 2 exists in the
    cluster's metadata but is hosted elsewhere."""

    def __init__(self, root: Path, min_insync_replicas: int = 1) -> None:
        config = BrokerConfig(broker_id=BROKER_ID, log_dirs=(str(root),), min_insync_replicas=min_insync_replicas)
        logger = structlog.get_logger("test")
        self.logs = LogManager(config.directories, default_log_config(config), logger)
        self.replicas = ReplicaManager(config, self.logs, _NoZk(), logger)  # type: ignore[arg-type]
        self.metadata = MetadataCache(BROKER_ID)
        self.service = BrokerService(self.replicas, self.metadata, None, logger)
        self.service.producer_ids = _ProducerIds()

    async def lead(self, leader_epoch: int = LEADER_EPOCH, replicas: tuple[int, ...] = (BROKER_ID,)) -> None:
        states = [
            pb.LeaderAndIsrPartitionState(
                topic_name=TOPIC,
                partition_index=p,
                controller_epoch=1,
                leader=BROKER_ID,
                leader_epoch=leader_epoch,
                isr=replicas,
                replicas=replicas,
            )
            for p in (0, 1)
        ]
        answer = await self.replicas.become_leader_or_follower(
            pb.LeaderAndIsrRequest(controller_id=9, controller_epoch=1, partition_states=states)
        )
        assert all(e.error_code == 0 for e in answer.partition_errors)
        cached = [
            pb.UpdateMetadataPartitionState(topic_name=TOPIC, partition_index=p, leader=leader, replicas=[leader])
            for p, leader in ((0, BROKER_ID), (1, BROKER_ID), (2, 7))
        ]
        self.metadata.update(pb.UpdateMetadataRequest(controller_id=9, controller_epoch=1, partition_states=cached))

    async def call(self, api_key: int, version: int, request_fields: dict[str, Any]) -> Any:
        """The handler's answer to a request kio wrote and read, as kio writes and reads it for `version`."""
        module = API_MODULES[api_key]
        request_module = importlib.import_module(f"kio.schema.{module}.v{version}.request")
        response_module = importlib.import_module(f"kio.schema.{module}.v{version}.response")
        request_type = _entity_class(request_module, EntityType.request)
        response_type = _entity_class(response_module, EntityType.response)
        request = _round_trip(request_type, _kio_entity(request_type, request_fields))
        ctx = KafkaRequestContext(
            service=self.service,
            api_key=api_key,
            api_version=version,
            correlation_id=7,
            client_id="test",
            client_host="127.0.0.1",
            listener_name="PLAINTEXT",
            response_type=response_type,
        )
        response = await API_SPECS[api_key].handler(request, ctx)
        if isinstance(response, EncodedResponse):  # Fetch: the listener writes these parts as they are
            body = b"".join(response.parts)
            decoded, size = entity_reader(response_type)(body, 0)
            assert size == len(body)
            return decoded
        return None if response is None else _round_trip(response_type, response)


def _synchronous(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Runs the async test in its own event loop (the broker's parts need one)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def _entity_class(module: Any, kind: EntityType) -> type:
    [cls] = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and c.__module__ == module.__name__ and getattr(c, "__type__", None) == kind
    ]
    return cls


def _kio_entity(entity_type: type, values: dict[str, Any]) -> Any:
    """A kio request entity from plain values: nested dicts become the field's nested entity."""
    return build(entity_type, values)


def _round_trip(entity_type: type, entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    decoded, size = entity_reader(entity_type)(buffer.getvalue(), 0)
    assert size == len(buffer.getvalue())
    return decoded


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    yield Broker(tmp_path)


def _batch(values: list[bytes], *, producer_id: int = -1, sequence: int = -1, timestamp_ms: int = 0) -> bytes:
    builder = RecordBatchBuilder(base_timestamp_ms=timestamp_ms or int(time.time() * 1000))
    for i, value in enumerate(values):
        builder.append(
            b"k%d" % i, value, headers=[("h", b"x")], timestamp_ms=(timestamp_ms or None) and timestamp_ms + i
        )
    return builder.build(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence)


def _damaged_batch(position: int, damage: bytes) -> bytes:
    """A valid batch with `damage` written over it at `position` (header fields, lengths, CRC, records)."""
    batch = bytearray(_batch([b"value"]))
    batch[position : position + len(damage)] = damage
    return bytes(batch)


def _produce_request(records: bytes | None, *, partition: int = 0, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}],
    }


def _produced(response: Any) -> Any:
    [topic] = response.responses
    [partition] = topic.partition_responses
    return partition


def _fetch_request(version: int, offset: int, *, isolation: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
        **extra,
    }


def _fetched(response: Any) -> Any:
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def _versions(api_key: int) -> list[int]:
    spec = API_SPECS[api_key]
    return list(range(spec.min_version, spec.max_version + 1))


def test_the_record_path_advertises_kafka_2_8_versions_that_kio_has() -> None:
    ranges = {key: (API_SPECS[key].min_version, API_SPECS[key].max_version) for key in API_MODULES}
    assert ranges == {0: (3, 9), 1: (4, 12), 2: (1, 6), 22: (0, 4), 23: (2, 4)}


@pytest.mark.parametrize("version", _versions(0))
@_synchronous
async def test_produce_then_fetch_returns_the_batch_as_written(broker: Broker, version: int) -> None:
    await broker.lead()
    batch = _batch([b"one", b"two"])
    first = _produced(await broker.call(0, version, _produce_request(batch)))
    second = _produced(await broker.call(0, version, _produce_request(_batch([b"three"]))))
    assert (int(first.error_code), first.base_offset, second.base_offset) == (0, 0, 2)
    fetch_version = min(version + 3, 12)
    partition = _fetched(await broker.call(1, fetch_version, _fetch_request(fetch_version, 0)))
    assert (int(partition.error_code), partition.high_watermark, partition.last_stable_offset) == (0, 3, 3)
    assert partition.aborted_transactions is None
    records = list(iter_records(partition.records))
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (0, b"k0", b"one", (("h", b"x"),)),
        (1, b"k1", b"two", (("h", b"x"),)),
        (2, b"k0", b"three", (("h", b"x"),)),
    ]


@_synchronous
async def test_a_produce_to_a_partition_led_elsewhere_says_not_leader_and_an_unknown_one_unknown(
    broker: Broker,
) -> None:
    await broker.lead()
    elsewhere = _produced(await broker.call(0, 9, _produce_request(_batch([b"x"]), partition=2)))
    unknown = _produced(await broker.call(0, 9, _produce_request(_batch([b"x"]), partition=5)))
    assert int(elsewhere.error_code) == errors.NotLeaderForPartitionError.code
    assert int(unknown.error_code) == errors.UnknownTopicOrPartitionError.code
    assert elsewhere.base_offset == -1


@_synchronous
async def test_produce_v3_and_later_refuses_two_batches_and_zstd_before_v7(broker: Broker) -> None:
    await broker.lead()
    two = _produced(await broker.call(0, 9, _produce_request(_batch([b"a"]) + _batch([b"b"]))))
    assert int(two.error_code) == errors.InvalidRecordError.code
    assert "exactly one record batch" in two.error_message
    zstd = bytearray(_batch([b"a"]))
    zstd[22] |= 4  # the codec bits of the attributes: what a v6 request may not carry (CRC not checked first)
    refused = _produced(await broker.call(0, 6, _produce_request(bytes(zstd))))
    assert int(refused.error_code) == errors.UnsupportedCompressionTypeError.code
    transactional = bytearray(_batch([b"a"]))
    transactional[22] |= 0x10  # the transactional bit, in a request without a transactional id
    refused = _produced(await broker.call(0, 9, _produce_request(bytes(transactional))))
    assert int(refused.error_code) == errors.TransactionalIdAuthorizationFailedError.code
    empty = _produced(await broker.call(0, 9, _produce_request(b"")))
    assert int(empty.error_code) == errors.InvalidRecordError.code
    # Nothing of these reached the log.
    assert broker.replicas.partitions[data_tp(0)].log.log_end_offset == 0


def data_tp(partition: int) -> Any:
    from client.kafka.structs import TopicPartition

    return TopicPartition(TOPIC, partition)


@_synchronous
async def test_acks_0_answers_nothing_and_closes_the_connection_when_a_partition_failed(broker: Broker) -> None:
    await broker.lead()
    assert await broker.call(0, 9, _produce_request(_batch([b"a"]), acks=0)) is None
    assert broker.replicas.partitions[data_tp(0)].log.log_end_offset == 1
    with pytest.raises(CloseConnection, match="t-2"):
        await broker.call(0, 9, _produce_request(_batch([b"a"]), partition=2, acks=0))


@_synchronous
async def test_acks_all_below_min_insync_replicas_is_not_enough_replicas(tmp_path: Path) -> None:
    broker = Broker(tmp_path, min_insync_replicas=2)
    await broker.lead()
    answer = _produced(await broker.call(0, 9, _produce_request(_batch([b"a"]), acks=-1)))
    assert int(answer.error_code) == errors.NotEnoughReplicasError.code
    ok = _produced(await broker.call(0, 9, _produce_request(_batch([b"a"]), acks=1)))
    assert (int(ok.error_code), ok.base_offset) == (0, 0)


@_synchronous
async def test_an_idempotent_retry_answers_the_original_offset_and_a_gap_is_out_of_order(broker: Broker) -> None:
    await broker.lead()
    batch = _batch([b"a", b"b"], producer_id=77, sequence=0)
    first = _produced(await broker.call(0, 9, _produce_request(batch)))
    again = _produced(await broker.call(0, 9, _produce_request(batch)))
    assert (int(again.error_code), again.base_offset) == (0, first.base_offset)
    gap = _produced(await broker.call(0, 9, _produce_request(_batch([b"c"], producer_id=77, sequence=5))))
    assert int(gap.error_code) == errors.OutOfOrderSequenceNumberError.code
    assert broker.replicas.partitions[data_tp(0)].log.log_end_offset == 2


def _section(values: list[bytes]) -> bytes:
    """The uncompressed records section of a batch of `values`."""
    return _batch(values, timestamp_ms=1_000)[BATCH_HEADER_SIZE:]


def _framed(codec: int, records: bytes, count: int) -> bytes:
    """A batch whose CRC-32C is right for whatever records section it carries: a producer's bug, not line noise."""
    return _frame_batch(
        records, attributes=codec, last_offset_delta=count - 1, base_timestamp=1_000, max_timestamp=1_000,
        records_count=count,
    )  # fmt: skip


CORRUPT_COMPRESSED = {
    "lz4 that is not an lz4 frame": (LZ4, b"not an lz4 frame at all", 1),
    "gzip that is not a gzip stream": (GZIP, bytes(40), 1),
    "zstd frame cut short": (ZSTD, compress(ZSTD, _section([b"v"] * 50))[:-3], 50),
    "lz4 frame cut short": (LZ4, compress(LZ4, _section([b"v"] * 50))[:-6], 50),
    "snappy count above what its size holds": (SNAPPY, compress(SNAPPY, _section([b"v"])), 1_000),
    "zstd count above what its blocks hold": (ZSTD, compress(ZSTD, _section([b"v"])), 20_000),
}


@pytest.mark.parametrize("case", sorted(CORRUPT_COMPRESSED))
@_synchronous
async def test_a_compressed_batch_with_a_valid_crc_but_a_malformed_frame_is_corrupt_message(
    broker: Broker, case: str
) -> None:
    """Kafka 2.8's LogValidator answers CORRUPT_MESSAGE (InvalidRecordException); nothing is written and the
    partition goes on taking good batches."""
    await broker.lead()
    codec, records, count = CORRUPT_COMPRESSED[case]
    refused = _produced(await broker.call(0, 9, _produce_request(_framed(codec, records, count))))
    assert int(refused.error_code) == errors.CorruptRecordError.code, refused.error_message
    assert refused.error_message.startswith("t-0: batch at position 0: ")
    assert broker.replicas.partitions[data_tp(0)].log.log_end_offset == 0
    good = _produced(await broker.call(0, 9, _produce_request(_framed(codec, compress(codec, _section([b"v"])), 1))))
    assert (int(good.error_code), good.base_offset) == (0, 0)


def _append_time_ms(produced: Any) -> int:
    """The response's LogAppendTimeMs (kio reads -1 as None, any other value as an aware datetime)."""
    stamp = produced.log_append_time
    return -1 if stamp is None else round(stamp.timestamp() * 1000)


@_synchronous
async def test_an_idempotent_retry_answers_the_original_log_append_time(broker: Broker) -> None:
    """Kafka 2.8 Log.append answers a duplicate with the original batch's offsets and its BatchMetadata.timestamp
    (the batch's max timestamp as written: the LogAppendTime stamp), not the retry's time."""
    await broker.lead()
    broker.replicas.apply_topic_config(TOPIC, {"message.timestamp.type": "LogAppendTime"})
    batch = _batch([b"a", b"b"], producer_id=77, sequence=0, timestamp_ms=1_000)
    first = _produced(await broker.call(0, 9, _produce_request(batch)))
    appended_ms = _append_time_ms(first)
    assert int(first.error_code) == 0 and appended_ms > 1_001
    wait_until(lambda: time.time_ns() // 1_000_000 > appended_ms, 5.0, interval_s=0.001)  # a retry's "now" differs
    again = _produced(await broker.call(0, 9, _produce_request(batch)))
    assert (int(again.error_code), again.base_offset, _append_time_ms(again)) == (0, first.base_offset, appended_ms)
    assert broker.replicas.partitions[data_tp(0)].log.log_end_offset == 2  # written once

    # CreateTime: a fresh append answers -1 and, as in 2.8, a duplicate the original batch's max timestamp.
    broker.replicas.apply_topic_config(TOPIC, {})
    created = _batch([b"c"], producer_id=77, sequence=2, timestamp_ms=5_000)
    fresh = _produced(await broker.call(0, 9, _produce_request(created)))
    retried = _produced(await broker.call(0, 9, _produce_request(created)))
    assert (fresh.base_offset, _append_time_ms(fresh)) == (2, -1)
    assert (retried.base_offset, _append_time_ms(retried)) == (2, 5_000)


@pytest.mark.parametrize("version", _versions(1))
@_synchronous
async def test_fetch_errors_answer_unknown_offsets_and_sessions_are_declined(broker: Broker, version: int) -> None:
    await broker.lead()
    await broker.call(0, 9, _produce_request(_batch([b"a"])))
    out_of_range = _fetched(await broker.call(1, version, _fetch_request(version, 5)))
    assert int(out_of_range.error_code) == errors.OffsetOutOfRangeError.code
    assert (out_of_range.high_watermark, getattr(out_of_range, "log_start_offset", -1)) == (-1, -1)
    committed = _fetched(await broker.call(1, version, _fetch_request(version, 0, isolation=1)))
    assert committed.aborted_transactions == () and committed.last_stable_offset == 1
    if version >= 7:
        created = await broker.call(1, version, _fetch_request(version, 0, session_epoch=0))
        assert (int(created.error_code), created.session_id) == (0, 0)
        assert _fetched(created).high_watermark == 1
        incremental = await broker.call(1, version, _fetch_request(version, 0, session_id=5, session_epoch=1))
        assert int(incremental.error_code) == errors.FetchSessionIdNotFoundError.code
        assert incremental.responses == ()
    if version >= 9:
        fenced = _fetched(await broker.call(1, version, _with_epoch(_fetch_request(version, 0), LEADER_EPOCH - 1)))
        ahead = _fetched(await broker.call(1, version, _with_epoch(_fetch_request(version, 0), LEADER_EPOCH + 1)))
        assert int(fenced.error_code) == errors.FencedLeaderEpochError.code
        assert int(ahead.error_code) == errors.UnknownLeaderEpochError.code


def _with_epoch(request: dict[str, Any], epoch: int) -> dict[str, Any]:
    [topic] = request["topics"]
    [part] = topic["partitions"]
    return request | {"topics": [{"topic": TOPIC, "partitions": [part | {"current_leader_epoch": epoch}]}]}


@_synchronous
async def test_a_fetch_waits_for_min_bytes_until_a_produce_arrives(broker: Broker) -> None:
    await broker.lead()
    waiting = asyncio.ensure_future(broker.call(1, 12, _fetch_request(12, 0, max_wait=5000)))
    for _ in range(100):  # the fetch parks in the purgatory before the append that wakes it
        if broker.replicas._fetch_waiters:
            break
        await asyncio.sleep(0)
    assert broker.replicas._fetch_waiters, "the fetch did not wait for min_bytes"
    started = time.monotonic()
    await broker.call(0, 9, _produce_request(_batch([b"late"])))
    partition = _fetched(await asyncio.wait_for(waiting, 5))
    assert time.monotonic() - started < 4
    assert [r.value for r in iter_records(partition.records)] == [b"late"]


@pytest.mark.parametrize("version", _versions(2))
@_synchronous
async def test_list_offsets_earliest_latest_and_by_timestamp(broker: Broker, version: int) -> None:
    await broker.lead()
    await broker.call(0, 9, _produce_request(_batch([b"a", b"b", b"c"], timestamp_ms=1_000_000)))

    async def lookup(timestamp: int, **extra: Any) -> Any:
        request = {
            "replica_id": -1,
            "isolation_level": 1,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": timestamp, **extra}]}],
        }
        [topic] = (await broker.call(2, version, request)).topics
        [partition] = topic.partitions
        return partition

    earliest, latest, middle, after = [await lookup(t) for t in (-2, -1, 1_000_001, 2_000_000)]
    assert (earliest.offset, latest.offset) == (0, 3)
    assert (middle.offset, middle.timestamp) == (1, 1_000_001)
    assert (after.offset, after.timestamp) == (-1, -1)
    if version >= 4:
        assert latest.leader_epoch == LEADER_EPOCH
        fenced = await lookup(-1, current_leader_epoch=LEADER_EPOCH - 1)
        assert int(fenced.error_code) == errors.FencedLeaderEpochError.code


@_synchronous
async def test_a_new_leader_whose_high_watermark_lags_its_epoch_start_answers_offset_not_available(
    broker: Broker,
) -> None:
    await broker.lead(replicas=(BROKER_ID, 2, 3))
    await broker.call(0, 9, _produce_request(_batch([b"a", b"b"]), acks=1))  # the followers never fetch it
    await broker.lead(leader_epoch=LEADER_EPOCH + 1, replicas=(BROKER_ID, 2, 3))  # a new epoch starts at 2, HW 0

    async def lookup(timestamp: int, replica_id: int = -1) -> Any:
        request = {
            "replica_id": replica_id,
            "isolation_level": 0,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
        }
        [topic] = (await broker.call(2, 6, request)).topics
        [partition] = topic.partitions
        return partition

    assert int((await lookup(-1)).error_code) == errors.OffsetNotAvailableError.code
    assert int((await lookup(0)).error_code) == errors.OffsetNotAvailableError.code
    earliest = await lookup(-2)
    assert (int(earliest.error_code), earliest.offset) == (0, 0)
    debug = await lookup(-1, replica_id=-2)  # a replica's or the debug consumer's view: the log end
    assert (int(debug.error_code), debug.offset) == (0, 2)


@pytest.mark.parametrize("version", _versions(23))
@_synchronous
async def test_offset_for_leader_epoch_answers_the_epoch_end_and_fences(broker: Broker, version: int) -> None:
    await broker.lead()
    await broker.call(0, 9, _produce_request(_batch([b"a", b"b"])))

    async def ask(leader_epoch: int, current: int, partition: int = 0) -> Any:
        request = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition": partition, "current_leader_epoch": current, "leader_epoch": leader_epoch}
                    ],
                }
            ],
        }
        [topic] = (await broker.call(23, version, request)).topics
        [answer] = topic.partitions
        return answer

    ok = await ask(LEADER_EPOCH, LEADER_EPOCH)
    assert (int(ok.error_code), ok.leader_epoch, ok.end_offset) == (0, LEADER_EPOCH, 2)
    assert int((await ask(LEADER_EPOCH, LEADER_EPOCH - 1)).error_code) == errors.FencedLeaderEpochError.code
    assert int((await ask(LEADER_EPOCH, LEADER_EPOCH + 1)).error_code) == errors.UnknownLeaderEpochError.code
    assert int((await ask(LEADER_EPOCH, -1, partition=2)).error_code) == errors.NotLeaderForPartitionError.code


@pytest.mark.parametrize("version", _versions(22))
@_synchronous
async def test_init_producer_id_gives_fresh_ids_and_refuses_transactions(broker: Broker, version: int) -> None:
    request = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    first = await broker.call(22, version, request)
    second = await broker.call(22, version, request)
    assert (int(first.error_code), first.producer_epoch) == (0, 0)
    assert second.producer_id == first.producer_id + 1
    transactional = await broker.call(22, version, request | {"transactional_id": "tx"})
    assert int(transactional.error_code) == errors.UnsupportedVersionError.code
    assert int((await broker.call(22, version, request | {"transactional_id": ""})).error_code) == (
        errors.InvalidRequestError.code
    )
    if version >= 3:
        half = await broker.call(22, version, request | {"producer_id": 5})
        assert int(half.error_code) == errors.InvalidRequestError.code
        bumped = await broker.call(22, version, request | {"producer_id": first.producer_id, "producer_epoch": 0})
        assert int(bumped.error_code) == 0 and bumped.producer_id > second.producer_id


@pytest.mark.parametrize("version", _versions(1))
def test_the_spliced_fetch_encoding_is_byte_for_byte_kios(version: int) -> None:
    response_type = _entity_class(importlib.import_module(f"kio.schema.fetch.v{version}.response"), EntityType.response)
    batch = _batch([b"a" * 300, b"b"])

    def partition(index: int, error: int = 0) -> dict[str, Any]:
        return {
            "partition_index": index,
            "error_code": error,
            "high_watermark": 10 + index,
            "last_stable_offset": 10 + index,
            "log_start_offset": 0,
            "aborted_transactions": () if index % 2 else None,
            "preferred_read_replica": -1,
        }

    top = {"throttle_time": 0, "error_code": 0, "session_id": 0}
    topics = [
        ("a", [(partition(0), batch), (partition(1, error=1), b""), (partition(2), memoryview(batch * 2))]),
        ("b" * 200, []),
        ("c", [(partition(0), b"")]),
    ]
    spliced = b"".join(encode_fetch_response(response_type, top, topics).parts)
    whole = build(
        response_type,
        top,
        responses=[
            {"topic": name, "partitions": [fields | {"records": bytes(records)} for fields, records in parts]}
            for name, parts in topics
        ],
    )
    buffer = io.BytesIO()
    entity_writer(response_type)(buffer, whole)
    assert spliced == buffer.getvalue()


@_synchronous
async def test_a_fetch_whose_last_fetched_epoch_diverged_is_told_where_the_epoch_ends(broker: Broker) -> None:
    await broker.lead()
    await broker.call(0, 9, _produce_request(_batch([b"a", b"b"])))  # offsets 0-1 in epoch 3
    await broker.lead(leader_epoch=LEADER_EPOCH + 2)
    await broker.call(0, 9, _produce_request(_batch([b"c"])))  # offset 2 in epoch 5

    async def fetch(offset: int, last_fetched_epoch: int) -> Any:
        request = _fetch_request(12, offset)
        [part] = request["topics"][0]["partitions"]
        topics = [{"topic": TOPIC, "partitions": [part | {"last_fetched_epoch": last_fetched_epoch}]}]
        return _fetched(await broker.call(1, 12, request | {"topics": topics}))

    agreed = await fetch(2, LEADER_EPOCH)  # epoch 3 ends at 2 here too: read on
    assert agreed.diverging_epoch is None or agreed.diverging_epoch.end_offset == -1  # absent: kio's default
    assert [r.value for r in iter_records(agreed.records)] == [b"c"]
    for offset, epoch in ((3, LEADER_EPOCH), (3, LEADER_EPOCH + 1)):  # the client read past epoch 3's end here
        diverged = await fetch(offset, epoch)
        assert (int(diverged.error_code), diverged.records) == (0, b"")
        assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (LEADER_EPOCH, 2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.binary(max_size=200) | st.builds(_damaged_batch, st.integers(0, 80), st.binary(min_size=1, max_size=8)),
    fetch_offset=st.integers(-(2**63), 2**63 - 1),
    partition_max_bytes=st.integers(-(2**31), 2**31 - 1),
    last_fetched_epoch=st.integers(-(2**31), 2**31 - 1),
    timestamp=st.integers(-(2**63), 2**63 - 1),
)
def test_any_values_a_client_sends_get_an_answer(
    tmp_path: Path, records: bytes, fetch_offset: int, partition_max_bytes: int, last_fetched_epoch: int, timestamp: int
) -> None:
    async def scenario() -> None:
        broker = Broker(tmp_path / str(time.monotonic_ns()))
        await broker.lead()
        produced = _produced(await broker.call(0, 9, _produce_request(records)))
        assert int(produced.error_code) != 0 or produced.base_offset >= 0
        part = {"partition": 0, "fetch_offset": fetch_offset, "partition_max_bytes": partition_max_bytes}
        request = _fetch_request(12, 0) | {
            "topics": [{"topic": TOPIC, "partitions": [part | {"last_fetched_epoch": last_fetched_epoch}]}]
        }
        assert len((await broker.call(1, 12, request)).responses) == 1
        lookup = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
        }
        assert len((await broker.call(2, 6, lookup)).topics) == 1

    asyncio.run(scenario())
