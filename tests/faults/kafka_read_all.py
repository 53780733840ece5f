"""The final read of a Kafka fault run: every partition from its beginning to its high watermark.

    python -m tests.faults.kafka_read_all --bootstrap 198.18.29.13:9092,... --topic t --partitions 4 --out final.json

Run inside a client host after the faults healed. confluent-kafka assigns every partition at its beginning
(no group, nothing committed), reads until each one's position reaches the high watermark it had when the
read started, and writes {"<partition>": [[offset, "value"], ...]} to --out. Exits 1 with a one-line reason
when a partition cannot be read to its high watermark within --deadline-s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

BATCH_MAX = 1000
POLL_S = 0.5
WATERMARK_TIMEOUT_S = 5.0


def high_watermarks(consumer: Consumer, topic: str, partitions: int, deadline_s: float) -> dict[int, int]:
    """Each partition's high watermark, asking again while its leader does not answer."""
    marks: dict[int, int] = {}
    while len(marks) < partitions and time.monotonic() < deadline_s:
        for p in range(partitions):
            if p in marks:
                continue
            try:
                marks[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=WATERMARK_TIMEOUT_S)[1]
            except KafkaException:
                continue
    return marks


def read_all(bootstrap: str, topic: str, partitions: int, deadline_s: float) -> dict[int, list[tuple[int, str]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "zkraft-final-read", "enable.auto.commit": False})
    try:
        ends = high_watermarks(consumer, topic, partitions, deadline_s)
        if len(ends) < partitions:
            missing = sorted(set(range(partitions)) - set(ends))
            raise TimeoutError(f"no high watermark for partitions {missing} of {topic}")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        position = dict.fromkeys(range(partitions), 0)
        while any(position[p] < ends[p] for p in range(partitions)):
            if time.monotonic() >= deadline_s:
                behind = {p: (position[p], ends[p]) for p in range(partitions) if position[p] < ends[p]}
                raise TimeoutError(f"partitions not read to their high watermark (position, end): {behind}")
            for msg in consumer.consume(BATCH_MAX, POLL_S):
                if msg.error() is not None:
                    continue
                records[msg.partition()].append((msg.offset(), (msg.value() or b"").decode()))
                position[msg.partition()] = msg.offset() + 1
        return records
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline-s", type=float, default=90.0)
    args = parser.parse_args(argv)
    try:
        records = read_all(args.bootstrap, args.topic, args.partitions, time.monotonic() + args.deadline_s)
    except (TimeoutError, KafkaException) as exc:
        print(f"kafka_read_all: {exc}", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({str(p): rows for p, rows in records.items()}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
