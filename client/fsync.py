"""Making a directory entry durable: a created, renamed or deleted file survives a power loss only
once its directory is fsynced too. Here because every server part may import `client` (the quorum's
snapshots and write-ahead log, the broker's log segments and checkpoints)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make creates, renames and unlinks in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
