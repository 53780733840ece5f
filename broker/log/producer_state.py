"""Per-partition idempotent-producer state (KIP-98; Kafka's `ProducerStateManager`).

For each producer id that wrote to the partition: its epoch and the sequence
and offset ranges of its last `BATCHES_RETAINED` batches. The leader checks a
produce request's batches against it BEFORE writing (Kafka 2.x
`ProducerAppendInfo.checkSequence`, `ProducerStateEntry.findDuplicateBatch`):

* a batch equal to one of the last 5 (same epoch, same first and last
  sequence) is a duplicate: nothing is written and the answer is the
  original's offsets and max timestamp (Kafka 2.8 `Log.append` answers NONE
  with the duplicate's base offset and its `BatchMetadata.timestamp` as the
  log append time);
* an epoch older than the producer's: INVALID_PRODUCER_EPOCH;
* a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
* an unknown producer id must start at sequence 0, else UNKNOWN_PRODUCER_ID
  (Kafka 2.0-2.4; its records may have been removed by retention);
* otherwise the first sequence must be last sequence + 1 (wrapping after
  2^31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER.

Followers and log recovery do not check: they `update` from the batches as
they are, so a new leader knows every replicated producer's sequences. The
state is pure data built from batch headers; `PartitionLog` owns one per
partition and rebuilds it from its segments' headers after a restart or a
truncation (no `.snapshot` files: a header scan is cheap).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.log.errors import LogError
from client.kafka import errors as kafka_errors
from client.kafka.records import BatchHeader

BATCHES_RETAINED = 5  # Kafka ProducerStateEntry.NumBatchesToRetain; why max.in.flight <= 5
SEQUENCE_MODULUS = 1 << 31  # sequences are int32 >= 0 and wrap to 0 after Int.MaxValue
NO_PRODUCER_ID = -1


class OutOfOrderSequenceError(LogError):
    error_code = kafka_errors.OutOfOrderSequenceNumberError.code


class InvalidProducerEpochError(LogError):
    error_code = kafka_errors.InvalidProducerEpochError.code


class UnknownProducerIdError(LogError):
    error_code = kafka_errors.UnknownProducerIdError.code


class DuplicateMixedError(LogError):
    """A request mixing already-written batches with new ones of the same producer: one base offset cannot answer it."""

    error_code = kafka_errors.InvalidRequestError.code


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int = -1  # as written: the LogAppendTime stamp when the topic uses it


class Duplicate(NamedTuple):
    """What the leader answers for a retried request already written: the original's offsets and timestamp."""

    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def last_sequence(header: BatchHeader) -> int:
    """The batch's last sequence: baseSequence + lastOffsetDelta, wrapping like Kafka's incrementSequence."""
    return (header.base_sequence + header.last_offset_delta) % SEQUENCE_MODULUS


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == (last_seq + 1) % SEQUENCE_MODULUS


class ProducerStateManager:
    """The producers of one partition: {producer id: (epoch, last 5 batches)}."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # ------------------------------------------------------------------ leader: check before writing

    def check_append(self, tp: object, headers: Sequence[BatchHeader]) -> Duplicate | None:
        """Validates a produce request's batches (in order); returns the original offsets of a duplicate.

        A request is a duplicate when every batch in it is one of its producer's
        last 5; raises OutOfOrderSequenceError, InvalidProducerEpochError,
        UnknownProducerIdError, or DuplicateMixedError (duplicates and new batches
        in one request). Changes nothing: call `update` with the assigned offsets
        after the write.
        """
        duplicates: list[BatchMetadata] = []
        fresh = 0
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) as this request moves them
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                fresh += 1
                continue
            first_seq, last_seq, epoch = header.base_sequence, last_sequence(header), header.producer_epoch
            entry = self.producers.get(pid)
            if pid not in pending and entry is not None:
                duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    duplicates.append(duplicate)
                    continue
            fresh += 1
            if pid in pending:
                known_epoch, known_last = pending[pid]
            elif entry is not None:
                known_epoch, known_last = entry.epoch, entry.last_seq
            else:
                known_epoch, known_last = -1, -1
            self._check_sequence(tp, pid, epoch, first_seq, known_epoch, known_last, header.base_offset)
            pending[pid] = (epoch, last_seq)
        if not duplicates:
            return None
        if fresh:
            raise DuplicateMixedError(
                f"{tp}: produce request mixes {len(duplicates)} already written batch(es) with {fresh} new one(s); "
                "send each partition's batches in the groups first sent"
            )
        # Kafka answers with the first duplicate batch's timestamp (one batch per partition since Produce v3).
        return Duplicate(duplicates[0].first_offset, duplicates[-1].last_offset, duplicates[0].max_timestamp)

    @staticmethod
    def _check_sequence(
        tp: object, pid: int, epoch: int, first_seq: int, known_epoch: int, known_last: int, offset: int
    ) -> None:
        if known_epoch < 0:
            if first_seq != 0:
                raise UnknownProducerIdError(
                    f"{tp}: found no record of producerId={pid} on the broker; its first batch has sequence "
                    f"{first_seq}, not 0 (its records may have been removed by retention)"
                )
            return
        if epoch < known_epoch:
            raise InvalidProducerEpochError(
                f"{tp}: producer {pid} epoch {epoch} is older than the last seen epoch {known_epoch}"
            )
        if epoch > known_epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"{tp}: invalid sequence number for new epoch {epoch} of producer {pid}: {first_seq} "
                    f"(request), expected 0; current epoch {known_epoch}"
                )
            return
        if not in_sequence(known_last, first_seq):
            raise OutOfOrderSequenceError(
                f"{tp}: out of order sequence number for producerId {pid}: {first_seq} (incoming seq. number), "
                f"{known_last} (current end sequence number)"
            )

    # ------------------------------------------------------------------ every replica: record what was written

    def update(self, header: BatchHeader) -> None:
        """Records one written batch (offsets already assigned); batches without a producer id are ignored."""
        pid = header.producer_id
        if pid < 0 or header.is_control:
            return
        epoch = header.producer_epoch
        entry = self.producers.get(pid)
        if entry is None or entry.epoch != epoch:
            # A new epoch starts a fresh window (Kafka maybeUpdateProducerEpoch).
            entry = self.producers[pid] = ProducerStateEntry(epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

    def update_all(self, headers: Iterable[BatchHeader]) -> None:
        for header in headers:
            if header.producer_id >= 0:
                self.update(header)

    @classmethod
    def rebuild(cls, headers: Iterable[BatchHeader]) -> ProducerStateManager:
        """The state a replica has after writing `headers` in order (start-up, truncation)."""
        state = cls()
        state.update_all(headers)
        return state
