"""What a failed write or fsync in a log directory does: Kafka 2.8's LogDirFailureChannel, for one process.

Kafka turns the IOException into a KafkaStorageException (KAFKA_STORAGE_ERROR to the producer: the
batch is not acknowledged), marks the directory offline, and once no log directory is left online halts
the broker (LogManager.handleLogDirFailure: "Shutdown broker because all log dirs in ... have failed",
Exit.halt(1)). zkraft halts on the first failed directory, whatever the others: serving partitions from
the remaining directories would need the controller's log-dir-event handling (KIP-112), which it does
not have yet, and a broker that is gone is one its controller and followers already know how to handle.

The broker process installs the handler (broker.server.serve); without one (a log opened by a tool or a
test) the caller just gets the KafkaStorageError. The handler runs in the thread whose call failed,
before the error propagates, so nothing after the failure is acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from broker.log.errors import KafkaStorageError
from runtime.fsync import fsync_directory

# (the directory the failed file is in, what failed, the OSError) -> None; it may not return (a halt).
FailureHandler = Callable[[Path, str, OSError], None]

_handler: FailureHandler | None = None


def set_handler(handler: FailureHandler | None) -> None:
    """Install what a log directory's failure does in this process (None: only raise)."""
    global _handler
    _handler = handler


def storage_error(directory: Path, operation: str, exc: OSError) -> KafkaStorageError:
    """Report a failed write or fsync in `directory` to the handler; returns the error to raise."""
    if _handler is not None:
        _handler(directory, operation, exc)
    return KafkaStorageError(f"{operation} in {directory} failed: {exc}")


def fsync_directory_or_fail(directory: Path) -> None:
    """runtime.fsync.fsync_directory, a failure of which is a failure of the log directory."""
    try:
        fsync_directory(directory)
    except OSError as exc:
        raise storage_error(directory, "fsync of the directory", exc) from exc
