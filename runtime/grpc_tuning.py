"""gRPC core settings for every process that uses zkraft, made before grpc is imported.

gRPC 1.85's default I/O engine ("EventEngine") hands every read and write
completion through its own poller and thread-pool threads before the asyncio
loop sees it. On a small machine shared by a 3-node quorum, its clients and
brokers, those extra hand-offs are most of a round trip. With the engine's
experiments switched off gRPC uses its older epoll poller, driven from the
thread that waits on the completion queue. Measured with bench/zk_bench-style
probes on this project's 2-core machine, alternating runs: getData round trip
0.41 -> 0.30 ms, sequential create 2.5 -> 2.0 ms, watch-fire with the setter
on a follower 3.1 -> 2.6 ms; throughput unchanged.

The client side gains as much: with only the benchmark's client process
switched as well (nodes already were), sequential create 4.19 -> 3.84 and
5.10 -> 4.14 ms, watch-fire 4.96 -> 4.46 and 4.76 -> 4.24 ms (two alternating
pairs of bench/zk_bench.py on a slow day of the same machine); with brokers,
producers and consumers switched too, bench/kafka_bench.py produced 131 ->
145k and 130 -> 141k records/s, consumption equal within noise.

So importing the `client` package (which every user of the SDK does) calls
`prefer_legacy_poller`, and so does the `zkraft` command, which runs every
server, before it parses anything. It changes nothing when grpc
was imported first (too late for gRPC to see it), when the user set
GRPC_EXPERIMENTS (even empty: the user's choice wins), or on a grpcio
release whose experiment names were not checked (gRPC logs an error for a
name it does not know).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

LEGACY_POLLER_EXPERIMENTS = "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints"
# grpcio releases (major, minor) whose experiment names are the ones above.
CHECKED_GRPC_RELEASES = frozenset({(1, 85)})


def prefer_legacy_poller() -> bool:
    """Set GRPC_EXPERIMENTS for this process; returns whether it did. Call before anything imports grpc."""
    if "grpc" in sys.modules or "GRPC_EXPERIMENTS" in os.environ:
        return False
    if installed_grpcio_release() not in CHECKED_GRPC_RELEASES:
        return False
    os.environ["GRPC_EXPERIMENTS"] = LEGACY_POLLER_EXPERIMENTS
    return True


def installed_grpcio_release() -> tuple[int, int] | None:
    """(major, minor) of the grpcio that `import grpc` would load, read without importing it.

    grpc ships its version in grpc/_grpcio_metadata.py. Reading that file costs
    well under a millisecond; `importlib.metadata.version` cost about 30 ms of
    imports, paid by every process that imports `client` (a Spark query's
    driver-side runner among them).
    """
    try:
        spec = importlib.util.find_spec("grpc")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    try:
        text = (Path(spec.origin).parent / "_grpcio_metadata.py").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"__version__\s*=\s*[\"']+(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None
