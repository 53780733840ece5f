"""Where the coordinator's records go: one `__consumer_offsets` partition per group (docs/research/kafka.md §5.1).

Durability contract of `OffsetsStore.append`: it returns only when the records
are committed (acks=all: the high watermark passed them), and raises the
Kafka error otherwise; nothing is cached by the coordinator before that.
`read` yields every (key, value) of a partition from its log start to its log
end offset, in offset order (a null value is a tombstone).

`ReplicaOffsetsStore` is the broker's (through the replica manager);
`MemoryOffsetsStore` is its in-memory twin for tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

from broker.group.partitioner import OFFSETS_TOPIC
from client.kafka import errors
from client.kafka.records import RecordBatchBuilder, iter_batches, iter_records
from client.kafka.structs import TopicPartition

# Bytes read per step while loading a partition (the loop yields between steps).
LOAD_READ_BYTES = 1024 * 1024

KeyValue = tuple[bytes, bytes | None]


class OffsetsStore(Protocol):
    async def append(self, partition: int, records: list[KeyValue]) -> None: ...

    def read(self, partition: int) -> AsyncIterator[KeyValue]: ...


def build_batch(records: list[KeyValue]) -> bytes:
    builder = RecordBatchBuilder()
    for key, value in records:
        builder.append(key, value)
    return builder.build()


class ReplicaOffsetsStore:
    """`__consumer_offsets` through the replica manager: leader appends with acks=-1, local log reads."""

    def __init__(self, replicas: Any, timeout_ms: int) -> None:
        self._replicas = replicas
        self._timeout_ms = timeout_ms

    async def append(self, partition: int, records: list[KeyValue]) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        await self._replicas.append_internal(tp, build_batch(records), self._timeout_ms)

    async def read(self, partition: int) -> AsyncIterator[KeyValue]:
        replica = self._replicas.partitions.get(TopicPartition(OFFSETS_TOPIC, partition))
        if replica is None:
            return
        log = replica.log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            offset = max(offset, log.log_start_offset)  # retention or compaction may have moved the start
            data = log.read(offset, LOAD_READ_BYTES)
            if not data:
                return
            next_offset = offset
            for header, _ in iter_batches(data):
                next_offset = header.base_offset + header.last_offset_delta + 1
            for record in iter_records(data, offset):
                if record.offset >= end:
                    return
                if record.key is not None:
                    yield record.key, record.value
            if next_offset <= offset:
                return
            offset = next_offset
            await asyncio.sleep(0)


class MemoryOffsetsStore:
    """In-memory twin: a list of records per partition; `fail_with` makes appends fail."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[KeyValue]] = {}
        self.fail_with: errors.KafkaError | None = None
        self.gate: asyncio.Event | None = None  # when set, appends wait for it (to test races)

    async def append(self, partition: int, records: list[KeyValue]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.partitions.setdefault(partition, []).extend(records)

    async def read(self, partition: int) -> AsyncIterator[KeyValue]:
        for item in list(self.partitions.get(partition, [])):
            yield item
