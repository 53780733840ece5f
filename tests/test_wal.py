"""The write-ahead log's own contract: records come back in order, and nothing that is not one of them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from client.fsync import start_writeback
from quorum.wal import WriteAheadLog


def _segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.wal"))


def test_records_appended_since_the_last_reset_come_back_in_order(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, preallocate_bytes=1 << 16)
    wal.reset()
    wal.append(b"first", sync=True)
    wal.reset()  # everything so far is stored elsewhere
    wal.append(b"second", sync=False)
    wal.append(b"third" * 1000, sync=True)
    wal.close()
    reopened = WriteAheadLog(tmp_path)
    assert reopened.recovered == [b"second", b"third" * 1000]
    assert len(_segments(tmp_path)) == 1
    reopened.reset()
    assert reopened.recovered == [] and len(_segments(tmp_path)) == 1
    reopened.close()
    assert WriteAheadLog(tmp_path).recovered == []


def test_a_torn_record_and_everything_after_it_are_not_recovered(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, preallocate_bytes=1 << 16)
    wal.reset()
    wal.append(b"kept", sync=True)
    wal.append(b"torn" * 100, sync=True)
    wal.close()
    [segment] = _segments(tmp_path)
    data = bytearray(segment.read_bytes())
    last = data.rindex(b"torn")
    data[last : last + 4] = b"\0\0\0\0"  # the end of the record never reached the disk
    segment.write_bytes(bytes(data))
    assert WriteAheadLog(tmp_path).recovered == [b"kept"]


def test_records_of_another_segment_number_are_not_recovered(tmp_path: Path) -> None:
    """Bytes left from another segment (here: a file under a different number) never pass the check."""
    wal = WriteAheadLog(tmp_path, preallocate_bytes=1 << 16)
    wal.reset()
    wal.append(b"record", sync=True)
    wal.close()
    [segment] = _segments(tmp_path)
    segment.rename(segment.with_name(f"{int(segment.stem) + 1:020d}.wal"))
    assert WriteAheadLog(tmp_path).recovered == []


def test_appending_needs_a_segment(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="no open segment"):
        WriteAheadLog(tmp_path).append(b"x", sync=False)


def test_work_given_to_a_synced_append_runs_once_the_record_is_written(tmp_path: Path) -> None:
    """`meanwhile` overlaps the disk's work: it sees the record already in the segment, and a
    failure in it still leaves the record appended, synced and recoverable, and the log usable."""
    wal = WriteAheadLog(tmp_path, preallocate_bytes=1 << 16)
    wal.reset()
    seen: list[list[bytes]] = []
    wal.append(b"first", sync=True, meanwhile=lambda: seen.append(WriteAheadLog(tmp_path).recovered))
    assert seen == [[b"first"]]

    def failing() -> None:
        raise RuntimeError("prepare failed")

    with pytest.raises(RuntimeError, match="prepare failed"):
        wal.append(b"second", sync=True, meanwhile=failing)
    wal.append(b"third", sync=False)
    wal.close()
    assert WriteAheadLog(tmp_path).recovered == [b"first", b"second", b"third"]


def test_start_writeback_hands_a_written_range_to_the_device_and_refuses_a_bad_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 4096)
    fd = os.open(path, os.O_RDWR)
    try:
        assert start_writeback(fd, 0, 4096) is (sys.platform == "linux")
    finally:
        os.close(fd)
    assert start_writeback(fd, 0, 4096) is False  # closed: EBADF
