"""Durability helpers. A created, renamed or deleted file survives a power loss only once its
directory is fsynced too (`fsync_directory`); a write can be handed to the device before the
fdatasync that waits for it (`start_writeback`). Here because every server part may import `client`
(the quorum's snapshots and write-ahead log, the broker's log segments and checkpoints)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from pathlib import Path

from runtime import failpoints

_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h: start writeback of the range's dirty pages, do not wait


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's sync_file_range, where the platform has one (ctypes releases the GIL around the call)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Hand the written range to the device now, without waiting (Linux sync_file_range); returns
    whether it did. Durability still needs fdatasync: this only lets the device work while the caller
    does something else before it."""
    if _SYNC_FILE_RANGE is None:
        return False
    return _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE) == 0


def fsync_directory(directory: Path) -> None:
    """Make creates, renames and unlinks in `directory` durable."""
    if failpoints.ON:
        failpoints.check("fsync")
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
