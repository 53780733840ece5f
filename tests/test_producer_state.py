"""Idempotent-producer state (KIP-98): sequence checks, the 5-batch duplicate window, epochs, rebuild, truncation.

Pure tests: the state object on its own, then through `PartitionLog` on a
temporary directory (no broker, no network). Also the producer id block JSON
and the client's idempotence config checks and sequence stamping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.log import LogConfig, PartitionLog
from broker.producer_ids import (
    ProducerIdBlock,
    ProducerIdBlockError,
    decode_producer_id_block,
    encode_producer_id_block,
    next_block,
)
from broker.producer_state import (
    BATCHES_RETAINED,
    DuplicateMixedError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    UnknownProducerIdError,
)
from client.kafka.client_errors import KafkaConfigurationError
from client.kafka.record_accumulator import RecordAccumulator
from client.kafka.records import (
    CompressionType,
    RecordBatchBuilder,
    iter_records,
    read_batch_header,
    validate_batches,
)

PID = 4000


class NullLogger:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def batch(seq: int, count: int = 3, pid: int = PID, epoch: int = 0, tag: str = "v") -> bytes:
    builder = RecordBatchBuilder(base_timestamp_ms=1_000)
    for i in range(count):
        builder.append(None, f"{tag}-{seq + i}".encode())
    if pid < 0:
        return builder.build()
    return builder.build(pid, epoch, seq)


def header(seq: int, count: int = 3, pid: int = PID, epoch: int = 0, offset: int = 0):
    return read_batch_header(batch(seq, count, pid, epoch))._replace(base_offset=offset)


# --------------------------------------------------------------------------- the state alone


def written(state: ProducerStateManager, *headers) -> None:
    for h in headers:
        assert state.check_append("t-0", [h]) is None
        state.update(h)


def test_first_batch_must_start_at_zero_else_unknown_producer() -> None:
    state = ProducerStateManager()
    with pytest.raises(UnknownProducerIdError):
        state.check_append("t-0", [header(5)])
    written(state, header(0))
    assert state.entry(PID).last_seq == 2


def test_in_sequence_batches_are_accepted_and_a_gap_is_out_of_order() -> None:
    state = ProducerStateManager()
    written(state, header(0, offset=0), header(3, offset=3))
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append("t-0", [header(7, offset=6)])
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append("t-0", [header(4, offset=6)])  # overlaps, not a duplicate


def test_duplicate_within_the_window_answers_the_original_offsets() -> None:
    state = ProducerStateManager()
    headers = [header(3 * i, offset=100 + 10 * i) for i in range(BATCHES_RETAINED + 2)]
    written(state, *headers)
    for h in headers[-BATCHES_RETAINED:]:
        duplicate = state.check_append("t-0", [h._replace(base_offset=0)])
        assert duplicate == (h.base_offset, h.last_offset, h.max_timestamp)  # the original's, as written
    # Older than the window: no longer recognised, and not next in line either.
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append("t-0", [headers[0]])


def test_a_duplicate_request_of_several_batches_answers_first_to_last() -> None:
    state = ProducerStateManager()
    first, second = header(0, offset=10), header(3, offset=13)
    written(state, first, second)
    assert state.check_append("t-0", [first, second]) == (10, 15, first.max_timestamp)
    with pytest.raises(DuplicateMixedError):
        state.check_append("t-0", [second, header(6)])


def test_several_new_batches_in_one_request_are_checked_in_order() -> None:
    state = ProducerStateManager()
    assert state.check_append("t-0", [header(0), header(3), header(6)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append("t-0", [header(0), header(4)])


def test_epoch_fencing() -> None:
    state = ProducerStateManager()
    written(state, header(0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        state.check_append("t-0", [header(3, epoch=1)])
    with pytest.raises(OutOfOrderSequenceError):
        state.check_append("t-0", [header(3, epoch=3)])  # a new epoch starts at 0
    written(state, header(0, epoch=3, offset=3))
    assert state.entry(PID).epoch == 3
    assert len(state.entry(PID).batches) == 1


def test_sequence_wraps_after_int32_max() -> None:
    state = ProducerStateManager()
    top = (1 << 31) - 3
    state.update(header(top, count=3))  # as replicated: sequences top .. 2^31 - 1
    assert state.entry(PID).last_seq == (1 << 31) - 1
    assert state.check_append("t-0", [header(0, offset=3)]) is None


def test_batches_without_producer_id_are_not_checked() -> None:
    state = ProducerStateManager()
    plain = read_batch_header(batch(0, pid=-1))
    assert state.check_append("t-0", [plain, plain]) is None
    state.update(plain)
    assert len(state) == 0


# --------------------------------------------------------------------------- through the partition log


def open_log(directory: Path) -> PartitionLog:
    return PartitionLog(directory / "t-0", LogConfig(segment_bytes=4096, index_interval_bytes=256), NullLogger())


def values(log: PartitionLog) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        records = list(iter_records(data, offset))
        out += [r.value for r in records]  # type: ignore[misc]
        offset = records[-1].offset + 1
    return out


def test_log_append_stores_a_retried_batch_once(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.append(bytearray(batch(0)), 0) == (0, 2)
    log.append(bytearray(batch(0, pid=-1, tag="other")), 0)  # another writer in between
    assert log.append(bytearray(batch(0)), 0) == (0, 2)  # the retry: same bytes, not written again
    assert log.log_end_offset == 6
    assert log.append(bytearray(batch(3)), 0) == (6, 8)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(bytearray(batch(9)), 0)
    assert values(log) == [b"v-0", b"v-1", b"v-2", b"other-0", b"other-1", b"other-2", b"v-3", b"v-4", b"v-5"]


def test_producer_state_is_rebuilt_from_the_log_after_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(100):  # several segments
        log.append(bytearray(batch(3 * i)), 0)
    log.close()
    reopened = open_log(tmp_path)
    assert len(reopened.segments) > 1
    entry = reopened.producer_state.entry(PID)
    assert entry is not None and entry.last_seq == 299 and entry.last_offset == 299
    assert reopened.append(bytearray(batch(294)), 0) == (294, 296)  # a duplicate still in the window
    assert reopened.append(bytearray(batch(300)), 0) == (300, 302)


def test_follower_appends_feed_the_state_a_new_leader_checks(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    leader.append(bytearray(batch(0)), 0)
    assert len(follower.producer_state) == 0  # built before the follower's appends arrive: kept up to date
    follower.append_as_follower(leader.read(0, 1 << 20))
    leader.append(bytearray(batch(3)), 0)
    follower.append_as_follower(leader.read(3, 1 << 20))
    # The follower becomes leader: the producer's retry of its last batch is a duplicate.
    assert follower.append(bytearray(batch(3)), 1) == (3, 5)
    assert follower.append(bytearray(batch(6)), 1) == (6, 8)
    # A follower whose state was never built rebuilds it from its log, replicated batches included.
    lazy = open_log(tmp_path / "lazy")
    lazy.append_as_follower(leader.read(0, 1 << 20))
    assert lazy.append(bytearray(batch(3)), 1) == (3, 5)
    assert lazy.append(bytearray(batch(6)), 1) == (6, 8)


def test_truncation_drops_state_above_the_cut(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(4):
        log.append(bytearray(batch(3 * i)), 0)
    log.truncate_to(6)  # batches with sequences 6.. and 9.. go
    assert log.producer_state.entry(PID).last_seq == 5
    # The producer's retry of sequence 6 is new again and lands once.
    assert log.append(bytearray(batch(6)), 1) == (6, 8)
    assert values(log) == [b"v-%d" % i for i in range(9)]
    log.truncate_fully_and_start_at(100)
    assert log.producer_state.entry(PID) is None


# --------------------------------------------------------------------------- producer ids


def test_producer_id_block_json_is_kafkas() -> None:
    block = next_block(None, broker_id=2)
    assert block == ProducerIdBlock(2, 0, 999)
    data = encode_producer_id_block(block)
    assert data == b'{"version":1,"broker":2,"block_start":"0","block_end":"999"}'
    assert decode_producer_id_block(data) == block
    assert next_block(block, broker_id=1) == ProducerIdBlock(1, 1000, 1999)
    assert decode_producer_id_block(b"") is None
    with pytest.raises(ProducerIdBlockError):
        decode_producer_id_block(b'{"version":2}')


# --------------------------------------------------------------------------- client side


def test_idempotence_requires_acks_all_retries_and_at_most_5_in_flight() -> None:
    from client.kafka.producer import Producer

    with pytest.raises(KafkaConfigurationError, match="acks to all"):
        Producer("127.0.0.1:1", enable_idempotence=True, acks=1)
    with pytest.raises(ValueError, match="retries"):
        Producer("127.0.0.1:1", enable_idempotence=True, retries=0)
    with pytest.raises(ValueError, match="at most 5"):
        Producer("127.0.0.1:1", enable_idempotence=True, max_in_flight_requests_per_connection=6)
    producer = Producer("127.0.0.1:1", enable_idempotence=True)
    try:
        assert producer.acks == -1
    finally:
        producer.close(0)
    plain = Producer("127.0.0.1:1")
    try:
        assert plain.acks == 1 and not plain.enable_idempotence
    finally:
        plain.close(0)


def test_accumulator_stamps_consecutive_sequences_one_batch_per_partition() -> None:
    acc = RecordAccumulator(
        batch_size=200,
        linger_ms=0,
        compression=CompressionType.NONE,
        buffer_memory=1 << 20,
        max_block_ms=1000,
        acks0=False,
        wakeup=lambda: None,
    )
    for _ in range(20):
        acc.append("t", 0, None, b"x" * 30, None, None, 51)
    sent = []
    for _ in range(10):
        drained, _, _ = acc.drain(lambda t, p: 1, lambda n: True, 1 << 20, 1e12, (), (PID, 0))
        if not drained:
            break
        assert len(drained[1]) == 1
        sent += drained[1]
    headers = [read_batch_header(b.payload) for b in sent]
    assert sum(h.records_count for h in headers) == 20
    expected = 0
    for h in headers:
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (PID, 0, expected)
        expected += h.records_count
    validate_batches(b"".join(b.payload for b in sent))  # type: ignore[misc]
    # A retry keeps its bytes; a new producer id restarts the sequences at 0.
    acc.reenqueue([sent[-1]], 0)
    acc.append("t", 0, None, b"y", None, None, 22)
    drained, _, _ = acc.drain(lambda t, p: 1, lambda n: True, 1 << 20, 1e12, (), (PID + 1, 0))
    assert drained[1][0] is sent[-1]
    drained, _, _ = acc.drain(lambda t, p: 1, lambda n: True, 1 << 20, 1e12, (), (PID + 1, 0))
    assert read_batch_header(drained[1][0].payload).base_sequence == 0
    assert read_batch_header(drained[1][0].payload).producer_id == PID + 1
