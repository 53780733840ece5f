"""Stop the process at once, skipping every clean-up: the answer to a failed write or fsync.

A failed fsync leaves the kernel's copy of the file in an unknown state (Linux may already have dropped
the dirty pages, and a retried fsync then succeeds without them), so nothing may be written, checkpointed
or acknowledged after it. ZooKeeper's SyncThread stops the server on the first failed commit
(ZooKeeperCriticalThread.handleException: "Severe unrecoverable error"); Kafka 2.8 halts the broker when
its last log directory fails (LogManager.handleLogDirFailure: Exit.halt(1)). The caller logs why first;
this flushes the standard streams (the log lines are in them) and exits without running finalizers.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

EXIT_STORAGE_FAILED = 1  # ZooKeeper's ExitCode.UNEXPECTED_ERROR and Kafka's Exit.halt(1)


def halt(exit_code: int = EXIT_STORAGE_FAILED) -> NoReturn:
    """Flush stdout and stderr, then `os._exit` (no atexit handlers, no clean shutdown of the storage)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: the exit matters more than its last lines
            pass
    os._exit(exit_code)
