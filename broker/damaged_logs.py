"""Replicas whose recovery lost acknowledged data, and the claim a broker publishes about them.

Kafka 3.7's KIP-966 ("Eligible Leader Replicas") starts from the same
observation: a replica that comes back from a bad shutdown may hold less than
it had acknowledged, and if it leads, the followers truncate to it and the
data is gone from every replica. Here the broker knows exactly when that
happened: recovery (`PartitionLog._load_segments`) cut its log below an offset
it had written down before, in one of three places:

* `recovery-point-offset-checkpoint`: every offset below it had been fsynced;
* `replication-offset-checkpoint`: the high watermark, so every offset below
  it had been committed (and acks=all records acknowledged);
* `leader-epoch-checkpoint`: the log reached each epoch's start offset;

and, with no checkpoint to compare, when recovery cut bytes off a segment's
tail at all (`RECOVERY_CUT`, reported as one offset past the new end): a
process crash does not tear a write, so a cut tail is a disk that lost or
garbled data, and the records cut may have been acknowledged (acks=all does
not wait for an fsync). Better out of the ISR for a while than leading with
a hole.

Such a partition is *damaged* on this broker. The broker tells the controller
before it registers, by the claim znode below, and the controller treats the
replica as out of sync (broker/controller/damaged_replicas.py).

Why a znode of its own, `/brokers/damaged_logs/<id>` (persistent), and not a
field of the `/brokers/ids/<id>` registration:

* the claim must outlive the registration's session until the controller has
  acted on it: a broker that crashes again at once, or re-registers, must not
  make it vanish unseen;
* the controller deletes it once it has moved the replica out of the ISR, so a
  replica that caught up and rejoined the ISR is never pushed out again by a
  later controller failover or a re-registration (a registration field would be
  re-read by every new controller);
* it is written before the registration on the same session, and ZooKeeper
  keeps one session's writes in order, so a controller that sees the broker
  registered also sees its claim: it can never take the broker for a healthy
  one.

JSON: `{"version":1,"partitions":[{"topic":"t","partition":0,"log_end_offset":4997,
"checkpointed_offset":5000,"checkpoint":"replication-offset-checkpoint"}]}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from client.kafka.structs import TopicPartition
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import BadVersionError, NodeExistsError, NoNodeError

DAMAGED_LOGS_PATH = "/brokers/damaged_logs"
RECOVERY_CUT = "recovery-cut-tail"  # the `checkpoint` of a loss known only from recovery cutting a tail
CLAIM_VERSION = 1
# A claim listing more partitions than this is cut to fit a znode (jute.maxbuffer 1 MiB; ~120 bytes an entry).
CLAIM_PARTITIONS_MAX = 8000
# Writing the claim races only with the controller deleting it: a few rounds settle it.
CLAIM_WRITE_ATTEMPTS_MAX = 5


class LostData(NamedTuple):
    """One partition whose log recovery cut below a checkpointed offset."""

    topic: str
    partition: int
    log_end_offset: int  # after recovery
    checkpointed_offset: int  # the largest checkpointed offset the log fell below
    checkpoint: str  # which checkpoint named it

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def find_lost_data(tp: TopicPartition, log_end_offset: int, checkpointed: Mapping[str, int]) -> LostData | None:
    """The loss of `tp`, or None: the largest checkpointed offset above the log end offset after recovery.

    `checkpointed` maps a checkpoint's name to the offset the log reached at
    least according to it (absent or non-positive: nothing known); among equal
    offsets the first named wins, so callers list the high watermark first
    (below it, records were acknowledged).
    """
    worst: tuple[int, str] | None = None
    for name, offset in checkpointed.items():
        if offset > log_end_offset and (worst is None or offset > worst[0]):
            worst = (offset, name)
    if worst is None:
        return None
    return LostData(tp.topic, tp.partition, log_end_offset, worst[0], worst[1])


def claim_path(broker_id: int) -> str:
    return f"{DAMAGED_LOGS_PATH}/{broker_id}"


def encode_claim(lost: Iterable[LostData]) -> bytes:
    entries = [item._asdict() for item in sorted(lost)][:CLAIM_PARTITIONS_MAX]
    return json.dumps({"version": CLAIM_VERSION, "partitions": entries}, separators=(",", ":")).encode()


class ClaimDataError(ValueError):
    """A claim znode that cannot be read; one line naming the path."""


def decode_claim(path: str, data: bytes | None) -> list[LostData]:
    try:
        obj = json.loads(data or b"")
        entries = obj["partitions"]
        return [
            LostData(
                str(e["topic"]),
                int(e["partition"]),
                int(e["log_end_offset"]),
                int(e["checkpointed_offset"]),
                str(e["checkpoint"]),
            )
            for e in entries
        ]
    except (ValueError, TypeError, KeyError) as exc:
        raise ClaimDataError(f"{path}: unreadable damaged-log claim ({exc!r})") from None


def merge_claims(old: Iterable[LostData], new: Iterable[LostData]) -> list[LostData]:
    """A claim not yet acted upon keeps its partitions; a new loss of the same partition replaces the entry."""
    merged = {item.tp: item for item in old}
    merged.update((item.tp, item) for item in new)
    return sorted(merged.values())


async def publish_damage_claim(zk: AsyncZkClient, broker_id: int, lost: list[LostData], log: Any) -> None:
    """Writes (or extends) this broker's claim; call before registering. No damage: nothing written.

    A claim left by an earlier start that the controller has not yet acted
    upon is merged, never overwritten: its partitions are still damaged.
    """
    if not lost:
        return
    path = claim_path(broker_id)
    await zk.ensure_path(DAMAGED_LOGS_PATH)
    for _ in range(CLAIM_WRITE_ATTEMPTS_MAX):
        try:
            data, stat = await zk.get(path)
        except NoNodeError:
            try:
                await zk.create(path, encode_claim(lost))
            except NodeExistsError:
                continue
            break
        try:
            old = decode_claim(path, data)
        except ClaimDataError as exc:
            log.warning("damage_claim_unreadable_replaced", path=path, error=str(exc))
            old = []
        try:
            await zk.set(path, encode_claim(merge_claims(old, lost)), version=stat.version)
        except (NoNodeError, BadVersionError) as exc:  # the controller deleted or changed it meanwhile: read again
            log.info("damage_claim_write_retried", path=path, error=type(exc).__name__)
            continue
        break
    else:
        raise RuntimeError(f"could not write the damaged-log claim {path} in {CLAIM_WRITE_ATTEMPTS_MAX} attempts")
    log.warning(
        "damage_claim_published",
        path=path,
        partitions=[f"{item.topic}-{item.partition}" for item in lost],
    )
