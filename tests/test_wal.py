"""The write-ahead log's own contract: records come back in order, and nothing that is not one of them."""

from __future__ import annotations

import os
import struct
import sys
import zlib
from pathlib import Path

import pytest

from quorum.wal import WriteAheadLog
from runtime.fsync import start_writeback


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


def test_a_started_append_is_written_before_it_is_waited_for(tmp_path: Path) -> None:
    """append_started + wait_durable: work between the two sees the record already in the segment,
    and a failure in that work, the wait still made, leaves the record recoverable and the log usable."""
    wal = WriteAheadLog(tmp_path, preallocate_bytes=1 << 16)
    wal.reset()
    wal.append_started(b"first")
    assert WriteAheadLog(tmp_path).recovered == [b"first"]
    wal.wait_durable()

    def failing() -> None:
        raise RuntimeError("prepare failed")

    wal.append_started(b"second")
    with pytest.raises(RuntimeError, match="prepare failed"):
        try:
            failing()
        finally:
            wal.wait_durable()
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


# ---- damage: where reading stopped, and what was cut


def _write_records(tmp_path: Path, payloads: list[bytes]) -> tuple[Path, list[int]]:
    """A closed log of one segment holding `payloads`; the segment and each record's offset."""
    wal = WriteAheadLog(tmp_path, preallocate_bytes=1 << 16)
    wal.reset()
    offsets = []
    for payload in payloads:
        offsets.append(wal.size_bytes)
        wal.append(payload, sync=False)
    wal.close()
    [segment] = _segments(tmp_path)
    return segment, offsets


PAYLOADS = [b"first" * 10, b"second" * 10, b"third" * 10, b"fourth" * 10]


def test_a_segment_that_ends_in_its_preallocated_zeros_is_not_damaged(tmp_path: Path) -> None:
    _write_records(tmp_path, PAYLOADS)
    wal = WriteAheadLog(tmp_path)
    assert (wal.recovered, wal.damage) == (PAYLOADS, None)


def test_a_flipped_byte_cuts_its_record_and_every_later_one_and_says_where(tmp_path: Path) -> None:
    segment, offsets = _write_records(tmp_path, PAYLOADS)
    data = bytearray(segment.read_bytes())
    data[offsets[1] + 8 + 3] ^= 0x01
    segment.write_bytes(bytes(data))
    wal = WriteAheadLog(tmp_path)
    assert wal.recovered == PAYLOADS[:1]
    assert wal.damage is not None
    assert (wal.damage.segment, wal.damage.offset_bytes, wal.damage.reason) == (
        segment.name,
        offsets[1],
        "crc_mismatch",
    )
    damaged = bytearray(PAYLOADS[1])
    damaged[3] ^= 0x01
    # What was cut, to name it, never replayed.
    assert (wal.damage.damaged, wal.damage.after) == (bytes(damaged), (PAYLOADS[2], PAYLOADS[3]))
    assert wal.damage.cut_bytes == sum(8 + len(p) for p in PAYLOADS[1:])


def test_a_record_cut_mid_way_is_reported_as_cut_short(tmp_path: Path) -> None:
    segment, offsets = _write_records(tmp_path, PAYLOADS)
    with open(segment, "r+b") as f:
        f.truncate(offsets[3] + 8 + 10)
    wal = WriteAheadLog(tmp_path)
    assert wal.recovered == PAYLOADS[:3]
    assert wal.damage is not None and (wal.damage.offset_bytes, wal.damage.reason) == (offsets[3], "record_cut_short")
    assert (wal.damage.damaged, wal.damage.after) == (PAYLOADS[3][:10], ())


def test_after_a_zeroed_header_the_next_valid_record_is_found_again(tmp_path: Path) -> None:
    segment, offsets = _write_records(tmp_path, PAYLOADS)
    data = bytearray(segment.read_bytes())
    data[offsets[1] : offsets[1] + 8] = bytes(8)
    segment.write_bytes(bytes(data))
    wal = WriteAheadLog(tmp_path)
    assert wal.recovered == PAYLOADS[:1]
    assert wal.damage is not None and wal.damage.reason == "zero_length_header"
    # Without the payload's own framing the damaged record runs to the end of the written bytes.
    assert wal.damage.after == (PAYLOADS[2], PAYLOADS[3])
    framed = WriteAheadLog(tmp_path, measure=lambda data, offset: len(PAYLOADS[1]))
    assert framed.damage is not None and framed.damage.damaged == PAYLOADS[1]


def test_damage_in_a_segment_also_cuts_the_segments_after_it(tmp_path: Path) -> None:
    segment, offsets = _write_records(tmp_path, PAYLOADS[:2])
    data = bytearray(segment.read_bytes())
    data[offsets[1] + 8] ^= 0x01
    segment.write_bytes(bytes(data))
    later_seq = int(segment.stem) + 1
    record = PAYLOADS[2]
    head = struct.pack(">II", len(record), zlib.crc32(record, later_seq))
    (tmp_path / f"{later_seq:020d}.wal").write_bytes(head + record + bytes(64))
    wal = WriteAheadLog(tmp_path)
    assert wal.recovered == PAYLOADS[:1]
    assert wal.damage is not None and wal.damage.segment == segment.name
    assert wal.damage.after == (PAYLOADS[2],)
