"""The Kafka consumer-group workload: one group member, inside a client host, until its stdin closes.

    python -m tests.faults.kafka_consumer --bootstrap 198.18.29.13:9092,... --member 1 --group g \
        --topic t --out member-1.jsonl

confluent-kafka (librdkafka) subscribes to the topic in group --group with the eager range assignor, reads,
and commits the next offsets itself (enable.auto.commit=false, a synchronous commit every --commit-ms).
Each JSON line in --out is one event, with the generation id the member was in (librdkafka's consumer
group metadata, KIP-447):
  {"m", "ev": "assign"|"revoke", "gen", "parts": [...], "t"}     the assignment it was handed / gave up
  {"m", "ev": "commit", "gen", "offs": {"p": next offset}, "i", "c"}   a commit the coordinator acknowledged
  {"m", "ev": "commit_failed", "gen", "offs", "i", "f", "err"}
  {"m", "ev": "consumed", "part", "first", "last", "n", "t"}      a run of records read from one partition
"""

from __future__ import annotations

import argparse
import json
import logging
import struct
import sys
import threading
import time
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

CGMD_MAGIC = b"CGMDv2:"
BATCH_MAX = 500
POLL_S = 0.2
CLOSE_TIMEOUT_S = 10.0
POLLS_MAX = 1_000_000


def generation_of(metadata: bytes) -> int | None:
    """The generation id in librdkafka's serialized consumer group metadata (rd_kafka_consumer_group_metadata
    _write: the magic, then the generation id as a native int32); None when the layout is not that."""
    if not metadata.startswith(CGMD_MAGIC) or len(metadata) < len(CGMD_MAGIC) + 4:
        return None
    return int(struct.unpack_from("=i", metadata, len(CGMD_MAGIC))[0])


class Member:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args, self.out = args, out
        self.positions: dict[int, int] = {}  # partition -> next offset to commit
        self.committed: dict[int, int] = {}
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": max(args.session_ms // 6, 100),
        })  # fmt: skip

    def write(self, line: dict[str, Any]) -> None:
        self.out.write(json.dumps({"m": self.args.member, **line}) + "\n")
        self.out.flush()

    def generation(self) -> int | None:
        try:
            return generation_of(bytes(self.consumer.consumer_group_metadata()))
        except KafkaException:
            return None

    def on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.write({"ev": "assign", "gen": self.generation(), "parts": sorted(p.partition for p in parts),
                    "t": time.monotonic()})  # fmt: skip

    def on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        gone = {p.partition for p in parts}
        self.write({"ev": "revoke", "gen": self.generation(), "parts": sorted(gone), "t": time.monotonic()})
        for p in gone:
            self.positions.pop(p, None)
            self.committed.pop(p, None)

    def commit(self) -> None:
        offs = {p: o for p, o in self.positions.items() if self.committed.get(p) != o}
        if not offs:
            return
        gen, invoke_s = self.generation(), time.monotonic()
        parts = [TopicPartition(self.args.topic, p, o) for p, o in sorted(offs.items())]
        try:
            self.consumer.commit(offsets=parts, asynchronous=False)
        except KafkaException as exc:
            self.write({"ev": "commit_failed", "gen": gen, "offs": offs, "i": invoke_s, "f": time.monotonic(),
                        "err": exc.args[0].name() if exc.args else str(exc)})  # fmt: skip
            return
        self.committed.update(offs)
        self.write({"ev": "commit", "gen": gen, "offs": offs, "i": invoke_s, "c": time.monotonic()})

    def consumed(self, batch: list[Any]) -> None:
        runs: dict[int, list[int]] = {}
        for msg in batch:
            if msg.error() is None:
                runs.setdefault(msg.partition(), []).append(msg.offset())
        for p, offsets in sorted(runs.items()):
            self.positions[p] = offsets[-1] + 1
            self.write({"ev": "consumed", "part": p, "first": offsets[0], "last": offsets[-1], "n": len(offsets),
                        "t": time.monotonic()})  # fmt: skip

    def run(self, stop: threading.Event) -> None:
        self.consumer.subscribe([self.args.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        last_commit_s = time.monotonic()
        for _ in range(POLLS_MAX):
            if stop.is_set():
                break
            self.consumed(self.consumer.consume(BATCH_MAX, POLL_S))
            if time.monotonic() - last_commit_s >= self.args.commit_ms / 1000:
                self.commit()
                last_commit_s = time.monotonic()
        closer = threading.Thread(target=self.consumer.close, daemon=True)
        closer.start()
        closer.join(CLOSE_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--member", type=int, required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--commit-ms", type=int, default=500)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with open(args.out, "a", encoding="utf-8") as out:
        member = Member(args, out)
        print("ready", flush=True)
        member.run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
