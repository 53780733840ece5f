"""Client-side ceiling of `Producer.send()`: records accumulated per second with no broker.

    python3 bench/producer_micro.py [--records 500000] [--value-bytes 100] [--partitions 6]

The producer's metadata is primed by hand with a topic whose partitions have no
leader, so batches accumulate and nothing is sent: the figure is send()'s cost
(serialisation aside) plus the builder's, the upper bound of one Python producer.
A second figure adds `RecordBatchBuilder.build()` of every full batch (what the
sender thread does per batch). Output: JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from client.kafka.cluster import ClusterSnapshot, PartitionMetadata, TopicMetadata  # noqa: E402
from client.kafka.producer import Producer  # noqa: E402
from client.kafka.records import RecordBatchBuilder  # noqa: E402


def primed_producer(partitions: int, **config) -> Producer:
    producer = Producer("127.0.0.1:1", buffer_memory=1 << 40, retry_backoff_ms=1000, **config)
    meta = TopicMetadata(
        "bench", 0, False, {p: PartitionMetadata(p, -1, 0, (1,), (1,), (), 0) for p in range(partitions)}
    )
    snapshot = ClusterSnapshot("bench", -1, {}, {"bench": meta})
    producer._cluster._snapshot = snapshot
    producer._update_topics(snapshot)
    return producer


def bench_send(records: int, value: bytes, partitions: int, keyed: bool) -> dict:
    producer = primed_producer(partitions, linger_ms=10_000)
    keys = [b"key-%d" % i for i in range(1000)] if keyed else None
    send = producer.send
    start = time.perf_counter()
    if keys is None:
        for _ in range(records):
            send("bench", value)
    else:
        for i in range(records):
            send("bench", value, key=keys[i % 1000])
    elapsed = time.perf_counter() - start
    producer.close(timeout=0)
    return {
        "measurement": "send_keyed" if keyed else "send_null_key",
        "records": records,
        "value_bytes": len(value),
        "us_per_record": round(elapsed / records * 1e6, 3),
        "records_per_s": round(records / elapsed),
    }


def bench_build(records: int, value: bytes, batch_size: int = 16384) -> dict:
    start = time.perf_counter()
    builder = RecordBatchBuilder(0)
    batches = 0
    for _ in range(records):
        builder.append(None, value)
        if builder.size_estimate >= batch_size:
            builder.build()
            batches += 1
            builder = RecordBatchBuilder(0)
    elapsed = time.perf_counter() - start
    return {
        "measurement": "builder_append_and_build",
        "records": records,
        "batches": batches,
        "us_per_record": round(elapsed / records * 1e6, 3),
        "records_per_s": round(records / elapsed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    value = b"x" * args.value_bytes
    print(json.dumps({"measurement": "setup", "python": sys.version.split()[0], "cpus": os.cpu_count()}))
    print(json.dumps(bench_build(args.records, value)))
    print(json.dumps(bench_send(args.records, value, args.partitions, keyed=False)))
    print(json.dumps(bench_send(args.records, value, args.partitions, keyed=True)))


if __name__ == "__main__":
    main()
