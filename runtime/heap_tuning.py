"""Process memory settings for zkraft's servers: freed buffers kept for reuse, start-up objects out of the GC.

`retain_freed_buffers`: keep freed multi-megabyte buffers in the process heap (glibc), so that each fetch
does not page-fault anew.

A fetch moves megabytes through several short-lived buffers (the segment
read, the encoded response, gRPC's copy, the client's bytes, the decoded
columns). With glibc's defaults a freed buffer that large goes back to the
kernel (munmap, or a trim of the heap top), and the next one is faulted in
and zeroed page by page: on the broker and the Spark reader that cost more
CPU than the copies themselves (measured with bench/spark_bench.py: broker
CPU per million 100-byte records 0.22 s -> 0.07 s). Raising the mmap and
trim thresholds keeps up to `TRIM_THRESHOLD_BYTES` of freed memory for reuse.
Processes that move bulk records (the broker, the Spark source's readers)
call `retain_freed_buffers()` once; elsewhere it is a no-op.
"""

from __future__ import annotations

import ctypes
import gc
import sys

# mallopt(3) parameters (glibc malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Allocations below this come from the heap, not from their own mmap: glibc's largest dynamic threshold on 64-bit
# (DEFAULT_MMAP_THRESHOLD_MAX), which covers the default 8 MiB fetch and its copies.
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# Free memory at the top of the heap is returned to the kernel only beyond this.
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024

_applied = False


def retain_freed_buffers() -> bool:
    """Sets the thresholds once per process; False where the C library has no glibc mallopt."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    _applied = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and (
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    )
    return _applied


def freeze_startup_objects() -> None:
    """Move every object alive now out of the cycle collector's reach (`gc.freeze`); call once, when the
    process has started serving.

    A server imports grpc, protobuf, lmdb and structlog and builds its state
    before it serves; those objects live as long as the process, yet each
    full (generation 2) collection walked them all again. In a quorum node
    under 200 setData in flight, such a collection took 50-80 ms of the event
    loop, while a whole round of requests took 10-20 ms, so every one stalled
    the replication pipeline of all three nodes; after the freeze the same
    collections took 8-13 ms. Objects made afterwards are collected as before.
    """
    gc.freeze()


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the kernel (glibc `malloc_trim(0)`); False where there is no glibc.

    Why: after a burst of large requests a server's heap keeps the freed
    buffers (`retain_freed_buffers` raises the trim threshold on purpose, and
    glibc trims only the heap top anyway), so its resident memory stays at the
    burst's peak long after the clients left. A server calls this once its
    requests in flight have drained, not per request: a trim walks the whole
    heap (a few milliseconds on a large one).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim(0)
    return True
