"""The Kafka producer workload: one idempotent acks=all producer, inside a client host, until its stdin closes.

    python -m tests.faults.kafka_producer --bootstrap 198.18.29.13:9092,... --producer 1 --topic t \
        --partitions 4 --out producer-1.jsonl

confluent-kafka (librdkafka, what a Kafka user runs) with enable.idempotence=true (which implies acks=all
and at most 5 requests in flight, KIP-98) writes the values `p<producer>-<seq>` for seq = 0, 1, ... to
partition seq % partitions. Each value's outcome is one JSON line in --out when its delivery report comes:
{"p", "s", "part", "i": monotonic seconds produced, "c": seconds acknowledged or null, "off": its offset
or null, "err": librdkafka's error or absent}. A failed delivery has an unknown outcome (the value may be
in the log, KIP-98 keeps it at most once). A fatal idempotence error is a line {"fatal": "..."} and ends
the producer: the checker reports it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from typing import IO, Any

from confluent_kafka import KafkaError, Message, Producer

# A value not acknowledged within this long is reported failed (outcome unknown); longer than any fault.
MESSAGE_TIMEOUT_MS = 60_000
# At most this many values produced and not yet reported: the producer waits for reports beyond it.
IN_FLIGHT_MAX = 200
FLUSH_TIMEOUT_S = 20.0
VALUES_MAX = 1_000_000


class Workload:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args, self.out = args, out
        self.fatal: str | None = None
        self.pending: dict[int, tuple[int, float]] = {}  # seq -> (partition, produced at)
        self.producer = Producer({
            "bootstrap.servers": args.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "error_cb": self.on_error,
        })  # fmt: skip

    def write(self, line: dict[str, Any]) -> None:
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def on_error(self, err: KafkaError) -> None:
        if err.fatal() and self.fatal is None:
            self.fatal = f"{err.name()}: {err.str()}"
            self.write({"p": self.args.producer, "fatal": self.fatal, "t": time.monotonic()})

    def on_delivery(self, seq: int, err: KafkaError | None, msg: Message) -> None:
        partition, invoke_s = self.pending.pop(seq)
        line: dict[str, Any] = {"p": self.args.producer, "s": seq, "part": partition, "i": invoke_s}
        if err is None:
            line.update(c=time.monotonic(), off=msg.offset())
        else:
            line.update(c=None, off=None, err=err.name(), f=time.monotonic())
        self.write(line)

    def run(self, stop: threading.Event) -> None:
        for seq in range(VALUES_MAX):
            if stop.is_set() or self.fatal is not None:
                return
            while len(self.pending) >= IN_FLIGHT_MAX and not stop.is_set():
                self.producer.poll(0.05)
            partition = seq % self.args.partitions
            self.pending[seq] = (partition, time.monotonic())
            try:
                self.producer.produce(
                    self.args.topic, value=f"p{self.args.producer}-{seq}".encode(), partition=partition,
                    on_delivery=lambda err, msg, seq=seq: self.on_delivery(seq, err, msg),
                )  # fmt: skip
            except BufferError:
                self.pending.pop(seq)
                self.producer.poll(0.1)
                continue
            self.producer.poll(0)
            stop.wait(self.args.pacing_ms / 1000)

    def finish(self) -> None:
        """Wait for the outstanding reports; what is still unreported has an unknown outcome."""
        self.producer.flush(FLUSH_TIMEOUT_S)
        for seq, (partition, invoke_s) in sorted(self.pending.items()):
            self.write({"p": self.args.producer, "s": seq, "part": partition, "i": invoke_s, "c": None,
                        "off": None, "err": "unreported", "f": time.monotonic()})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port,... of the brokers' Kafka listeners")
    parser.add_argument("--producer", type=int, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--pacing-ms", type=int, default=10)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with open(args.out, "a", encoding="utf-8") as out:
        workload = Workload(args, out)
        print("ready", flush=True)
        workload.run(stop)
        workload.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
