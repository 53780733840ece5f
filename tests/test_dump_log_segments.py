"""`zkraft dump-log-segments`: Kafka 2.8 DumpLogSegments lines for segments written by broker.log."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.log import LogConfig, PartitionLog
from client.kafka.records import RecordBatchBuilder
from zkraft.cli import main
from zkraft.tools.dump_log_segments import DumpError, DumpOptions, run

REPO_ROOT = Path(__file__).resolve().parent.parent
BASE = "00000000000000000000"

BATCH_LINES = [
    "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1"
    " partitionLeaderEpoch: 3 isTransactional: false isControl: false position: 0 CreateTime: 1600000000005"
    " size: 106 magic: 2 compresscodec: NONE crc: 1077609113 isvalid: true",
    "baseOffset: 2 lastOffset: 4 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1"
    " partitionLeaderEpoch: 3 isTransactional: false isControl: false position: 106 CreateTime: 1600000001009"
    " size: 107 magic: 2 compresscodec: NONE crc: 2280850493 isvalid: true",
    "baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1"
    " partitionLeaderEpoch: 4 isTransactional: false isControl: false position: 213 CreateTime: 1600000002000"
    " size: 81 magic: 2 compresscodec: NONE crc: 4184869189 isvalid: true",
]
RECORD_LINES = [
    [
        "| offset: 0 CreateTime: 1600000000000 keySize: 6 valueSize: 5 sequence: -1 headerKeys: [trace,src]"
        " key: user-1 payload: hello",
        "| offset: 1 CreateTime: 1600000000005 keySize: -1 valueSize: 6 sequence: -1 headerKeys: [] payload: no key",
    ],
    [
        "| offset: 2 CreateTime: 1600000001000 keySize: 6 valueSize: -1 sequence: -1 headerKeys: [] key: user-2",
        "| offset: 3 CreateTime: 1600000001000 keySize: 6 valueSize: 5 sequence: -1 headerKeys: [] key: user-3"
        " payload: caf\u00e9",
        "| offset: 4 CreateTime: 1600000001009 keySize: 6 valueSize: 2 sequence: -1 headerKeys: [] key: user-4"
        " payload: v4",
    ],
    [
        "| offset: 5 CreateTime: 1600000002000 keySize: 6 valueSize: 4 sequence: -1 headerKeys: [h] key: user-5"
        " payload: last"
    ],
]


class _NullLogger:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def bind(self, **_: Any) -> _NullLogger:
        return self


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    """A partition directory with one segment of three batches, every batch after the first indexed."""
    directory = tmp_path / "events-0"
    log = PartitionLog(directory, LogConfig(index_interval_bytes=0), _NullLogger(), clock_ms=lambda: 1_000)
    builder = RecordBatchBuilder(base_timestamp_ms=1_600_000_000_000)
    builder.append(b"user-1", b"hello", headers=[("trace", b"t1"), ("src", None)])
    builder.append(None, b"no key", timestamp_ms=1_600_000_000_005)
    log.append(bytearray(builder.build()), 3)
    builder = RecordBatchBuilder(base_timestamp_ms=1_600_000_001_000)
    builder.append(b"user-2", None)
    builder.append(b"user-3", "caf\u00e9".encode())
    builder.append(b"user-4", b"v4", timestamp_ms=1_600_000_001_009)
    log.append(bytearray(builder.build()), 3)
    builder = RecordBatchBuilder(base_timestamp_ms=1_600_000_002_000)
    builder.append(b"user-5", b"last", headers=[("h", b"")])
    log.append(bytearray(builder.build()), 4)
    log.flush()
    log.close()
    return directory


def dump(files: list[Path], **options: Any) -> tuple[int, list[str], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(f) for f in files], DumpOptions(**options), out=out, err=err)
    return code, out.getvalue().splitlines(), err.getvalue().splitlines()


def test_log_batches(segment: Path) -> None:
    log = segment / f"{BASE}.log"
    assert dump([log]) == (0, [f"Dumping {log}", "Starting offset: 0", *BATCH_LINES], [])


def test_log_with_print_data_log(segment: Path) -> None:
    log = segment / f"{BASE}.log"
    code, out, err = dump([log], print_data_log=True)
    expected = [f"Dumping {log}", "Starting offset: 0"]
    for batch, records in zip(BATCH_LINES, RECORD_LINES, strict=True):
        expected += [batch, *records]
    assert (code, out, err) == (0, expected, [])


def test_deep_iteration_without_data(segment: Path) -> None:
    code, out, _ = dump([segment / f"{BASE}.log"], deep_iteration=True)
    assert code == 0
    assert (
        out[3] == "| offset: 0 CreateTime: 1600000000000 keySize: 6 valueSize: 5 sequence: -1 headerKeys: [trace,src]"
    )
    assert len(out) == 2 + 3 + 6


def test_index_and_time_index(segment: Path) -> None:
    index, time_index = segment / f"{BASE}.index", segment / f"{BASE}.timeindex"
    assert dump([index, time_index]) == (
        0,
        [
            f"Dumping {index}",
            "offset: 4 position: 106",
            "offset: 5 position: 213",
            f"Dumping {time_index}",
            "timestamp: 1600000001009 offset: 4",
            "timestamp: 1600000002000 offset: 5",
        ],
        [],
    )
    assert dump([index, time_index], verify_index_only=True) == (0, [f"Dumping {index}", f"Dumping {time_index}"], [])
    assert dump([index], index_sanity_check=True)[1] == [f"Dumping {index}", f"{index} passed sanity check."]


def test_verify_index_only_reports_mismatches_as_kafka(segment: Path) -> None:
    index = segment / f"{BASE}.index"
    index.write_bytes(struct.pack(">ii", 4, 0) + struct.pack(">ii", 5, 106))  # both point one batch early
    code, out, err = dump([index], verify_index_only=True)
    assert (code, out) == (1, [f"Dumping {index}"])
    assert err == [f"Mismatches in :{index}", "  Index offset: 5, log offset: 4", "  Index offset: 4, log offset: 1"]


def test_unknown_file_is_ignored(segment: Path) -> None:
    other = segment / "leader-epoch-checkpoint"
    assert dump([other]) == (0, [f"Dumping {other}"], [f"Ignoring unknown file {other}"])


def test_corrupt_batch_stops_at_its_position(segment: Path) -> None:
    log = segment / f"{BASE}.log"
    data = bytearray(log.read_bytes())
    data[106 + 70] ^= 0xFF  # inside the second batch's records
    log.write_bytes(bytes(data))
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(DumpError, match="corrupt batch at position 106: CRC-32C mismatch"):
        run(str(log), DumpOptions(print_data_log=True), out=out, err=err)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("baseOffset: 2 lastOffset: 4 ") and lines[-1].endswith(" isvalid: false")
    assert lines[:5] == [f"Dumping {log}", "Starting offset: 0", BATCH_LINES[0], *RECORD_LINES[0]]


def test_torn_tail_is_reported_and_fails(segment: Path) -> None:
    log = segment / f"{BASE}.log"
    os.truncate(log, 213 + 40)
    assert dump([log]) == (
        1,
        [f"Dumping {log}", "Starting offset: 0", *BATCH_LINES[:2], f"Found 40 invalid bytes at the end of {BASE}.log"],
        [],
    )


def test_cli_corrupt_file_one_error_line(segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = segment / f"{BASE}.log"
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, 8, 10)  # first batch's batchLength below a header
    log.write_bytes(bytes(data))
    assert main(["dump-log-segments", "--files", str(log)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"Dumping {log}", "Starting offset: 0"]
    assert captured.err.splitlines() == [
        f"zkraft: error: {log}: corrupt batch at position 0: record size 10 is smaller than the minimum"
        " batch overhead (49)"
    ]


def test_cli_missing_file_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / f"{BASE}.log"
    assert main(["dump-log-segments", "--files", str(missing)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"zkraft: error: no such file: {missing}"]


def test_subprocess_run(segment: Path) -> None:
    files = ",".join(f"{BASE}{suffix}" for suffix in (".log", ".index"))
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "dump-log-segments", "--files", files, "--print-data-log"],
        cwd=segment,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"Dumping {BASE}.log",
        "Starting offset: 0",
        BATCH_LINES[0],
        *RECORD_LINES[0],
        BATCH_LINES[1],
        *RECORD_LINES[1],
        BATCH_LINES[2],
        *RECORD_LINES[2],
        f"Dumping {BASE}.index",
        "offset: 4 position: 106",
        "offset: 5 position: 213",
    ]
