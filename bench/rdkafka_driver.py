"""librdkafka (confluent-kafka) as the benchmark's Kafka client: one process per role, one JSON line of figures.

    python3 bench/rdkafka_driver.py produce --bootstrap H:P,... --topic t --records 500000 --acks all
    python3 bench/rdkafka_driver.py consume --bootstrap H:P,... --topic t --records 500000
    python3 bench/rdkafka_driver.py latency-consume --bootstrap H:P,... --topic t --records 100000   # prints "ready"
    python3 bench/rdkafka_driver.py latency-produce --bootstrap H:P,... --topic t --records 100000 --rate 10000

`--client-property key=value` (repeatable) adds a librdkafka setting to every role's client, e.g. the
`security.protocol`, `sasl.mechanism`, `sasl.username` and `sasl.password` of a SASL listener
(bench/sasl_bench.py).

bench/kafka_bench.py runs these against zkraft's Kafka listener and against real Apache Kafka brokers with
the same settings (CLIENT_SETTINGS), so whatever the client costs is the same on both sides. A role is a
process of its own: "one producer process", as the issue's benchmark and Kafka's published one have it, and
a consumer that does not share an interpreter lock with the producer whose latency it measures.

- produce: `--records` 100-byte values with null keys (librdkafka's partitioner spreads them), queued with
  produce_batch in chunks (one Python call per chunk, not per record), timed from the first record queued to
  flush() returning, when every record is acknowledged; failures come back through a delivery callback that
  librdkafka calls for failed records only (delivery.report.only.error).
- consume: every partition assigned from offset 0 (no group: a rebalance is not what is measured), consumed
  in batches until `--records` arrived; timed from the first assignment.
- latency: the consumer assigns itself to the end of every partition and prints "ready"; the producer then
  sends records at `--rate`, each carrying the CLOCK_MONOTONIC time it was queued (shared by the processes of
  one machine), with linger.ms 0; the consumer reads the clock as each record arrives and reports the
  percentiles (the first `--warmup-fraction` of records left out: connections and JIT warming up).
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

VALUE_BYTES = 100
PRODUCE_CHUNK_RECORDS = 1000  # records per produce_batch call
QUEUE_FULL_WAIT_S = 0.005
QUEUE_FULL_LIMIT_S = 120.0  # a queue that stays full this long means the brokers take nothing: give up
FLUSH_TIMEOUT_S = 600.0
CONSUME_BATCH_RECORDS = 10_000
CONSUME_POLL_S = 0.5
IDLE_LIMIT_S = 60.0  # a consumer that receives nothing for this long gives up and reports what it has
METADATA_TIMEOUT_S = 30.0
PACE_SLICE_S = 0.001
TIMESTAMP = struct.Struct(">q")

# The client's settings, the same against zkraft and against Apache Kafka (librdkafka's CONFIGURATION.md).
CLIENT_SETTINGS: dict[str, Any] = {
    "linger.ms": 5,  # librdkafka's default since 1.5, written down so both sides surely share it
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
    "enable.idempotence": False,
    # The Java producer's default (Kafka's published figures are the Java client's). librdkafka's own default
    # pipelines without limit, and a broker that handles one request per connection at a time (Kafka does)
    # then queues tiny batches behind each other instead of letting the client fill bigger ones.
    "max.in.flight.requests.per.connection": 5,
    "socket.nagle.disable": True,
}
CONSUMER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.partition.eof": False,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
    "queued.min.messages": 100_000,
    "socket.nagle.disable": True,
}


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


class DeliveryErrors:
    """Counts records librdkafka failed to deliver (called for failures only) and keeps the first error."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def __call__(self, error: KafkaError | None, _message: object) -> None:
        if error is not None:
            self.count += 1
            self.first = self.first or str(error)


EXTRA_SETTINGS: dict[str, Any] = {}  # --client-property: added to every client


def producer(bootstrap: str, acks: str, linger_ms: int | None, errors: DeliveryErrors) -> Producer:
    settings = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "delivery.report.only.error": True,
        "on_delivery": errors,
        **CLIENT_SETTINGS,
        **EXTRA_SETTINGS,
    }
    if linger_ms is not None:
        settings["linger.ms"] = linger_ms
    return Producer(settings)


def queue_chunk(client: Producer, topic: str, chunk: list[dict[str, Any]]) -> None:
    """Queue every record of `chunk`, serving delivery reports while librdkafka's queue is full.

    produce_batch marks each record it could not queue with an "_error" key; those are queued again.
    """
    pending = chunk
    deadline = time.monotonic() + QUEUE_FULL_LIMIT_S
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"librdkafka's queue stayed full for {QUEUE_FULL_LIMIT_S:g} s: are the brokers up?")
        try:
            client.produce_batch(topic, pending)
        except BufferError:
            client.poll(QUEUE_FULL_WAIT_S)
            continue
        pending = [message for message in pending if message.pop("_error", None) is not None]
        if pending:
            client.poll(QUEUE_FULL_WAIT_S)


def run_produce(args: argparse.Namespace) -> dict[str, Any]:
    errors = DeliveryErrors()
    client = producer(args.bootstrap, args.acks, None, errors)
    client.list_topics(args.topic, timeout=METADATA_TIMEOUT_S)  # connections up before the clock starts
    chunk = [{"value": b"v" * VALUE_BYTES} for _ in range(PRODUCE_CHUNK_RECORDS)]
    started = time.perf_counter()
    sent = 0
    while sent < args.records:
        part = chunk if args.records - sent >= len(chunk) else chunk[: args.records - sent]
        queue_chunk(client, args.topic, part)
        sent += len(part)
        client.poll(0)
    left = client.flush(FLUSH_TIMEOUT_S)
    seconds = time.perf_counter() - started
    return {
        "records": sent,
        "seconds": round(seconds, 3),
        "records_per_s": round(sent / seconds),
        "mb_per_s": round(sent * VALUE_BYTES / seconds / 1e6, 2),
        "failed": errors.count + left,
        "first_error": errors.first,
    }


def assigned_consumer(bootstrap: str, topic: str, at_end: bool) -> Consumer:
    """A consumer given every partition of `topic`, at offset 0 or at each partition's high watermark."""
    client = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "zkraft-bench-unused", **CONSUMER_SETTINGS, **EXTRA_SETTINGS}
    )
    metadata = client.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    partitions = sorted(metadata.topics[topic].partitions)
    if not partitions:
        raise SystemExit(f"topic {topic} has no partitions")
    assignment = []
    for partition in partitions:
        offset = 0
        if at_end:
            _low, offset = client.get_watermark_offsets(TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S)
        assignment.append(TopicPartition(topic, partition, offset))
    client.assign(assignment)
    return client


def run_consume(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    client = assigned_consumer(args.bootstrap, args.topic, at_end=False)
    received = 0
    last_seen = time.monotonic()
    try:
        while received < args.records and time.monotonic() - last_seen < IDLE_LIMIT_S:
            batch = client.consume(CONSUME_BATCH_RECORDS, CONSUME_POLL_S)
            good = sum(1 for message in batch if message.error() is None)
            if good:
                received += good
                last_seen = time.monotonic()
    finally:
        seconds = time.perf_counter() - started
        client.close()
    return {
        "records": received,
        "seconds": round(seconds, 3),
        "records_per_s": round(received / seconds),
        "mb_per_s": round(received * VALUE_BYTES / seconds / 1e6, 2),
    }


def percentile_ms(sorted_ns: list[int], q: float) -> float | None:
    if not sorted_ns:
        return None
    return round(sorted_ns[max(1, math.ceil(q * len(sorted_ns))) - 1] / 1e6, 3)


def run_latency_consume(args: argparse.Namespace) -> dict[str, Any]:
    client = assigned_consumer(args.bootstrap, args.topic, at_end=True)
    client.poll(0.1)  # fetch positions resolved before the producer starts
    print("ready", flush=True)
    latencies_ns: list[int] = []
    last_seen = time.monotonic()
    try:
        while len(latencies_ns) < args.records and time.monotonic() - last_seen < IDLE_LIMIT_S:
            # poll, not consume(n, timeout): consume waits until n records or the timeout, which would be
            # the latency measured.
            message = client.poll(CONSUME_POLL_S)
            if message is not None and message.error() is None:
                now_ns = time.monotonic_ns()
                latencies_ns.append(now_ns - TIMESTAMP.unpack_from(message.value())[0])
                last_seen = time.monotonic()
    finally:
        client.close()
    measured = sorted(latencies_ns[int(len(latencies_ns) * args.warmup_fraction) :])
    return {
        "records": len(latencies_ns),
        "measured": len(measured),
        "p50_ms": percentile_ms(measured, 0.50),
        "p99_ms": percentile_ms(measured, 0.99),
        "p999_ms": percentile_ms(measured, 0.999),
        "max_ms": percentile_ms(measured, 1.0),
    }


def run_latency_produce(args: argparse.Namespace) -> dict[str, Any]:
    """`--records` records at `--rate` per second, each queued when its turn comes (not in bursts)."""
    errors = DeliveryErrors()
    client = producer(args.bootstrap, args.acks, 0, errors)
    client.list_topics(args.topic, timeout=METADATA_TIMEOUT_S)
    padding = b"p" * (VALUE_BYTES - TIMESTAMP.size)
    started = time.monotonic()
    sent = 0
    while sent < args.records:
        due = min(args.records, int((time.monotonic() - started) * args.rate) + 1)
        while sent < due:
            client.produce(args.topic, TIMESTAMP.pack(time.monotonic_ns()) + padding)
            sent += 1
        client.poll(0)
        time.sleep(PACE_SLICE_S)
    left = client.flush(FLUSH_TIMEOUT_S)
    seconds = time.monotonic() - started
    return {"records": sent, "seconds": round(seconds, 3), "records_per_s": round(sent / seconds),
            "failed": errors.count + left, "first_error": errors.first}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=("produce", "consume", "latency-consume", "latency-produce"))
    parser.add_argument("--bootstrap", required=True, help="bootstrap.servers")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--acks", default="1", choices=("0", "1", "all", "-1"))
    parser.add_argument("--rate", type=int, default=10_000, help="records/s (latency-produce)")
    parser.add_argument("--warmup-fraction", type=float, default=0.1, help="of the records (latency-consume)")
    parser.add_argument("--client-property", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    for text in args.client_property:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            parser.error(f"--client-property {text!r}: expected key=value")
        EXTRA_SETTINGS[key.strip()] = value
    if args.records < 1:
        parser.error(f"--records must be >= 1, got {args.records}")
    if args.rate < 1:
        parser.error(f"--rate must be >= 1, got {args.rate}")
    if not 0 <= args.warmup_fraction < 1:
        parser.error(f"--warmup-fraction must be in [0, 1), got {args.warmup_fraction}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    roles = {
        "produce": run_produce,
        "consume": run_consume,
        "latency-consume": run_latency_consume,
        "latency-produce": run_latency_produce,
    }
    emit(roles[args.role](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
