"""Client-side ceiling of the consumer: decoding a 1 MB fetch of 100-byte records into ConsumerRecords.

    python3 bench/consumer_micro.py [--value-bytes 100] [--fetch-bytes 1048576] [--rounds 20]

Builds 16 KB batches (as the producer sends them) with broker-assigned offsets
until the fetch size is reached, then decodes the buffer repeatedly with
`client.kafka.consumer_records.decode_fetched` (the Consumer's path) and, for
comparison, `client.kafka.records.iter_records`. Output: JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from client.kafka.consumer_records import decode_fetched  # noqa: E402
from client.kafka.records import RecordBatchBuilder, assign_offsets, iter_records, validate_batches  # noqa: E402


def fetch_buffer(value_bytes: int, fetch_bytes: int, batch_size: int = 16384) -> tuple[bytes, int]:
    value = b"v" * value_bytes
    batches = []
    total = 0
    while total < fetch_bytes:
        builder = RecordBatchBuilder(1_700_000_000_000)
        while builder.size_estimate < batch_size:
            builder.append(None, value)
        batch = builder.build()
        batches.append(batch)
        total += len(batch)
    buf = bytearray(b"".join(batches))
    info = validate_batches(buf)
    assign_offsets(buf, 0, 0, info)
    return bytes(buf), info.record_count


def timed(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--fetch-bytes", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    buf, count = fetch_buffer(args.value_bytes, args.fetch_bytes)
    print(json.dumps({"measurement": "setup", "python": sys.version.split()[0], "bytes": len(buf), "records": count}))
    for name, fn in (
        ("decode_fetched", lambda: decode_fetched("t", 0, buf, 0)),
        ("decode_fetched_no_crc", lambda: decode_fetched("t", 0, buf, 0, check_crc=False)),
        ("records.iter_records", lambda: list(iter_records(buf))),
    ):
        best = timed(fn, args.rounds)
        print(
            json.dumps(
                {
                    "measurement": name,
                    "records": count,
                    "best_s": round(best, 5),
                    "records_per_s": round(count / best),
                    "us_per_record": round(best / count * 1e6, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
