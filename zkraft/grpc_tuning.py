"""gRPC core settings for zkraft's own server processes, made before grpc is imported.

gRPC 1.85's default I/O engine ("EventEngine") hands every read and write
completion through its own poller and thread-pool threads before the asyncio
loop sees it. On a small machine shared by a 3-node quorum, its clients and
brokers, those extra hand-offs are most of a round trip. With the engine's
experiments switched off gRPC uses its older epoll poller, driven from the
thread that waits on the completion queue. Measured with bench/zk_bench-style
probes on this project's 2-core machine, alternating runs: getData round trip
0.41 -> 0.30 ms, sequential create 2.5 -> 2.0 ms, watch-fire with the setter
on a follower 3.1 -> 2.6 ms; throughput unchanged.

Only the quorum node processes do this (`zkraft quorum start`, which `zkraft
up` runs). A user's own GRPC_EXPERIMENTS wins, and gRPC versions whose
experiment names were not checked are left alone (gRPC logs an error for a
name it does not know).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

LEGACY_POLLER_EXPERIMENTS = "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints"
# grpcio releases (major, minor) whose experiment names are the ones above.
CHECKED_GRPC_RELEASES = frozenset({(1, 85)})


def prefer_legacy_poller() -> bool:
    """Set GRPC_EXPERIMENTS for this process; returns whether it did. Call before anything imports grpc."""
    if "grpc" in sys.modules or "GRPC_EXPERIMENTS" in os.environ:
        return False
    try:
        release = tuple(int(part) for part in importlib.metadata.version("grpcio").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    if release not in CHECKED_GRPC_RELEASES:
        return False
    os.environ["GRPC_EXPERIMENTS"] = LEGACY_POLLER_EXPERIMENTS
    return True
