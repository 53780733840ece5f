"""Producer ids for idempotent producers (KIP-98; Kafka 2.x `ProducerIdManager`).

Each broker claims blocks of `PRODUCER_ID_BLOCK_SIZE` ids from the znode
`/latest_producer_id_block`, whose JSON names the last block handed out:
`{"version":1,"broker":B,"block_start":"N","block_end":"M"}` (both ends
inclusive, the numbers as strings: docs/research/kafka.md §1.1). A claim reads the
znode and writes the next block with a conditional setData on the version it
read (create when the znode is absent); a BadVersion/NodeExists means another
broker claimed first, so it reads again. An empty znode (created at start-up
with the other persistent paths) means no block yet: the first starts at 0.
Ids are then handed out from the block in memory; a restarted broker claims a
new block, so an id is never given twice.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from client.kafka import errors
from client.kafka.znodes import PRODUCER_ID_BLOCK_PATH
from client.zk.exceptions import BadVersionError, NodeExistsError, NoNodeError

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka ProducerIdManager.PidBlockSize
PRODUCER_ID_BLOCK_VERSION = 1
PRODUCER_ID_MAX = (1 << 63) - 1
CLAIM_ATTEMPTS_MAX = 100  # conditional writes lost to other brokers before giving up


class ProducerIdBlockError(Exception):
    """The znode holds something that is not Kafka's producer id block JSON, or no block could be claimed."""


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    broker_id: int
    block_start: int
    block_end: int  # inclusive


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """Kafka's JSON, key order as Kafka writes it (a 4-key Scala map keeps insertion order)."""
    payload = {
        "version": PRODUCER_ID_BLOCK_VERSION,
        "broker": block.broker_id,
        "block_start": str(block.block_start),
        "block_end": str(block.block_end),
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    """None for an empty znode (no block handed out yet)."""
    if not data:
        return None
    try:
        payload = json.loads(data)
        if payload.get("version") != PRODUCER_ID_BLOCK_VERSION:
            raise ValueError(f"unsupported version {payload.get('version')!r}")
        return ProducerIdBlock(int(payload["broker"]), int(payload["block_start"]), int(payload["block_end"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProducerIdBlockError(f"{PRODUCER_ID_BLOCK_PATH}: not a producer id block: {exc}") from None


def next_block(previous: ProducerIdBlock | None, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
    start = 0 if previous is None else previous.block_end + 1
    end = start + size - 1
    if end > PRODUCER_ID_MAX:
        raise ProducerIdBlockError(f"{PRODUCER_ID_BLOCK_PATH}: producer ids exhausted (next block from {start})")
    return ProducerIdBlock(broker_id, start, end)


class ProducerIdManager:
    """Hands out producer ids from this broker's current block; claims the next block when it runs out."""

    def __init__(self, broker_id: int, zk: Any, logger: Any, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self._zk = zk
        self._log = logger
        self._block_size = block_size
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        # Claims are one at a time: two callers running out together must not claim two blocks for one.
        self._claiming = asyncio.Lock()

    async def generate_producer_id(self) -> int:
        async with self._claiming:
            if self._block is None or self._next_id > self._block.block_end:
                self._block = await self._claim_block()
                self._next_id = self._block.block_start
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    async def _claim_block(self) -> ProducerIdBlock:
        for _ in range(CLAIM_ATTEMPTS_MAX):
            try:
                data, stat = await self._zk.get(PRODUCER_ID_BLOCK_PATH)
                version: int | None = stat.version
            except NoNodeError:
                data, version = b"", None
            block = next_block(decode_producer_id_block(data), self.broker_id, self._block_size)
            try:
                if version is None:
                    await self._zk.create(PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), makepath=True)
                else:
                    await self._zk.set(PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), version=version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed a block between our read and write
            self._log.info("producer_id_block_claimed", block_start=block.block_start, block_end=block.block_end)
            return block
        raise ProducerIdBlockError(
            f"{PRODUCER_ID_BLOCK_PATH}: no block claimed after {CLAIM_ATTEMPTS_MAX} conditional writes"
        )


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    """InitProducerId's answer, shared by the gRPC and the Kafka front ends."""

    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
    error_message: str | None = None


async def init_producer_id(
    manager: ProducerIdManager | None, transactional_id: str | None, logger: Any
) -> InitProducerIdResult:
    """A fresh producer id with epoch 0: Kafka 2.8's TransactionCoordinator.handleInitProducerId for a null
    transactional id ("blindly accept the request and return a new producerId"), whatever id and epoch the
    producer held before (an idempotent producer bumps past an UNKNOWN_PRODUCER_ID this way, KIP-360).

    Transactions are not served: a transactional id answers UNSUPPORTED_VERSION with a message saying so.
    """
    if transactional_id:
        return InitProducerIdResult(
            errors.UnsupportedVersionError.code,
            error_message=f"transactional id {transactional_id!r}: transactions are not supported",
        )
    if manager is None:
        return InitProducerIdResult(
            errors.CoordinatorNotAvailableError.code, error_message="this broker is still starting: no producer ids yet"
        )
    try:
        producer_id = await manager.generate_producer_id()
    except Exception as exc:  # a quorum hiccup: the client retries on a retriable code
        logger.warning("init_producer_id_failed", error=str(exc))
        return InitProducerIdResult(
            errors.CoordinatorNotAvailableError.code, error_message=f"cannot claim a producer id block: {exc}"
        )
    return InitProducerIdResult(errors.NONE, producer_id, 0)
