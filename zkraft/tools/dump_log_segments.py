"""`zkraft dump-log-segments`: Kafka's `kafka.tools.DumpLogSegments` for segment files.

    zkraft dump-log-segments --files 00000000000000000000.log[,...] [--print-data-log]
        [--deep-iteration] [--verify-index-only] [--index-sanity-check] [--max-message-size N]

Output lines are Kafka 2.8's (docs/research/kafka.md §6.6), so scripts written
against `kafka-dump-log.sh` read ours:

* every file: `Dumping <file>`;
* `.log`: `Starting offset: <base>`, one line per batch (`baseOffset: ... isvalid: true`),
  and with `--deep-iteration` one `| offset: ...` line per record, with
  `--print-data-log` ending in ` key: ... payload: ...` (UTF-8, Kafka's StringDecoder);
  a torn tail ends with `Found N invalid bytes at the end of <name>`;
* `.index`: `offset: <abs> position: <pos>`; `.timeindex`: `timestamp: <ts> offset: <abs>`;
  index/log disagreements are reported on stderr after all files, in Kafka's words
  (`Mismatches in :<path>`, `Found timestamp mismatch in :<path>`, ...);
* anything else: `Ignoring unknown file <file>` on stderr.

Where Kafka would die with a stack trace (a batch whose framing or CRC is broken,
an index that fails its sanity check), this tool prints what it read so far and
raises `DumpError` naming the file and byte position; the command prints that as
one line and exits 1. The exit status is also 1 when a torn tail or an index
mismatch was reported. A client tool: it reads files with `struct` and
`client.kafka.records`, never the broker's log classes.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from crc32c import crc32c

from client.kafka.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC,
    NO_SEQUENCE,
    BatchHeader,
    CompressionType,
    Record,
    RecordsError,
    iter_records,
    read_batch_header,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
MAX_MESSAGE_SIZE_BYTES_DEFAULT = 5 * 1024 * 1024  # Kafka's --max-message-size default
RECORD_INDENT = "|"
# FileLogInputStream stops when fewer bytes than offset + size + epoch + magic remain.
_HEADER_SIZE_UP_TO_MAGIC = 17
_INT32_MAX = 2**31 - 1

_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_OFFSET_AND_SIZE = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")  # version, type (Kafka's ControlRecordType key)
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch (EndTransactionMarker)
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE"}


class DumpError(Exception):
    """A failure reported as one line: a missing or unreadable file, a corrupt batch, an insane index."""


@dataclass(frozen=True, slots=True)
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size_bytes: int = MAX_MESSAGE_SIZE_BYTES_DEFAULT

    @property
    def is_deep_iteration(self) -> bool:
        return self.deep_iteration or self.print_data_log  # as Kafka: printing implies deep iteration


@dataclass(slots=True)
class _Reports:
    """What Kafka collects while dumping and prints to stderr at the end; lists are in Kafka's order."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    trailing_bytes: bool = False

    @property
    def any(self) -> bool:
        return self.trailing_bytes or any(
            (self.index_mismatches, self.time_mismatches, self.out_of_order, self.not_found, self.non_consecutive)
        )

    def print(self, err: TextIO) -> None:
        # Kafka prepends to an immutable List for these two (`::=`), so they come out newest first.
        for path, pairs in self.index_mismatches.items():
            print(f"Mismatches in :{path}", file=err)
            for index_offset, log_offset in reversed(pairs):
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for path, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{path}", file=err)
            for index_ts, log_ts in pairs:
                print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=err)
        for path, pairs in self.out_of_order.items():
            print(f"Found out of order timestamp in :{path}", file=err)
            for index_ts, previous_ts in pairs:
                print(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous_ts}", file=err)
        for pairs in self.not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for index_offset, log_offset in pairs:
                print(f"Indexed offset: {index_offset}, found log offset: {log_offset}", file=err)
        for path, pairs in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {path}", file=err)
            for first, second in reversed(pairs):
                print(f"  {first} is followed by {second}", file=err)


def run(
    files: str | Sequence[str],
    options: DumpOptions = DumpOptions(),
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Dumps each file; returns 0, or 1 when a torn tail or an index mismatch was reported.

    `files` is Kafka's comma-separated `--files` value or a list. Raises DumpError
    (after flushing what was printed) for a missing file or corrupt content.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    names = [f for f in files.split(",") if f] if isinstance(files, str) else list(files)
    if not names:
        raise DumpError("--files names no file")
    if options.max_message_size_bytes < BATCH_HEADER_SIZE:
        raise DumpError(f"--max-message-size {options.max_message_size_bytes} is below a batch header (61 bytes)")
    for name in names:  # all up front: a typo fails before any output
        if not os.path.isfile(name):
            raise DumpError(f"no such file: {name}")
    reports = _Reports()
    try:
        for name in names:
            print(f"Dumping {name}", file=out)
            suffix = name[name.rfind(".") :] if "." in Path(name).name else ""
            if suffix == LOG_SUFFIX:
                _dump_log(Path(name), options, reports, out)
            elif suffix == INDEX_SUFFIX:
                _dump_index(Path(name), options, reports, out)
            elif suffix == TIME_INDEX_SUFFIX:
                _dump_time_index(Path(name), options, reports, out)
            else:
                out.flush()
                print(f"Ignoring unknown file {name}", file=err)
    finally:
        out.flush()
        reports.print(err)
        err.flush()
    return 1 if reports.any else 0


# --------------------------------------------------------------------------- files


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes. Read whole: a dump walks every byte anyway, and an mmap could not be
    closed while record slices of it are still referenced."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DumpError(f"cannot read {path}: {exc.strerror or exc}") from None
    yield memoryview(data)


def _base_offset(path: Path) -> int:
    prefix = path.name.split(".")[0]
    if not prefix.isdigit():
        raise DumpError(f"{path}: file name is not <base offset>{path.suffix} (e.g. 00000000000000000000.log)")
    return int(prefix)


def _sibling(path: Path, suffix: str) -> Path:
    return path.parent / (path.name.split(".")[0] + suffix)


def _absolute(path: Path) -> str:
    """java.io.File.getAbsolutePath: joined to the working directory, not normalised."""
    return str(path) if path.is_absolute() else os.path.join(os.getcwd(), str(path))


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


# --------------------------------------------------------------------------- .log


def _dump_log(path: Path, options: DumpOptions, reports: _Reports, out: TextIO) -> None:
    """Kafka's `dumpLog`: batch lines, record lines when deep, trailing-byte report."""
    print(f"Starting offset: {_base_offset(path)}", file=out)
    last_offset = -1
    with _mapped(path) as buf:
        position = 0
        for header, batch in _batches(buf, path, options.max_message_size_bytes):
            valid = crc32c(batch[ATTRIBUTES_OFFSET:]) == header.crc
            print(_batch_line(header, position, valid), file=out)
            if not valid:
                raise DumpError(f"{path}: corrupt batch at position {position}: CRC-32C mismatch (isvalid: false)")
            if options.is_deep_iteration:
                for record in _records(header, batch, path, position):
                    if last_offset != -1 and record.offset != last_offset + 1:
                        reports.non_consecutive.setdefault(_absolute(path), []).append((last_offset, record.offset))
                    last_offset = record.offset
                    print(_record_line(header, record, options.print_data_log), file=out)
            position += len(batch)
        trailing = len(buf) - position
    if trailing > 0:
        print(f"Found {trailing} invalid bytes at the end of {path.name}", file=out)
        reports.trailing_bytes = True


def _batches(
    buf: memoryview, path: Path, max_size_bytes: int, start: int = 0
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Whole v2 batches from `start`, as Kafka's FileLogInputStream frames them.

    Ends quietly before a tail too short for a header or its declared size (the
    caller reports those bytes); raises DumpError on framing no writer produces.
    """
    position = start
    end = len(buf)
    while position + _HEADER_SIZE_UP_TO_MAGIC < end:
        _, batch_length = _OFFSET_AND_SIZE.unpack_from(buf, position)
        size = batch_length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE:
            raise DumpError(
                f"{path}: corrupt batch at position {position}: record size {batch_length}"
                f" is smaller than the minimum batch overhead ({BATCH_HEADER_SIZE - LOG_OVERHEAD})"
            )
        if size > max_size_bytes:
            raise DumpError(
                f"{path}: corrupt batch at position {position}: size {size} is larger than"
                f" --max-message-size {max_size_bytes}"
            )
        if position + size > end:
            return
        header = read_batch_header(buf, position)
        if header.magic != MAGIC:
            raise DumpError(f"{path}: corrupt batch at position {position}: magic {header.magic}, expected 2")
        if header.compression > CompressionType.ZSTD:
            raise DumpError(
                f"{path}: corrupt batch at position {position}: unknown compression codec {header.compression}"
            )
        yield header, buf[position : position + size]
        position += size


def _records(header: BatchHeader, batch: memoryview, path: Path, position: int) -> list[Record]:
    """Every record of one batch (control batches too), decoded by client.kafka.records."""
    data = bytes(batch)
    if header.is_control:
        # iter_records hides control batches from consumers; the dump shows them. The CRC was
        # checked by the caller, so a copy with the control bit cleared decodes unchecked.
        flipped = bytearray(data)
        struct.pack_into(">h", flipped, ATTRIBUTES_OFFSET, header.attributes & ~CONTROL_FLAG_MASK)
        data = bytes(flipped)
    try:
        return list(iter_records(data, check_crc=False))
    except RecordsError as exc:
        raise DumpError(f"{path}: corrupt batch at position {position}: {exc}") from None


def _sequence(base_sequence: int, delta: int) -> int:
    """DefaultRecordBatch.incrementSequence: sequences wrap from Int.MaxValue to 0."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if base_sequence > _INT32_MAX - delta:
        return delta - (_INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def _timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.timestamp_type else "CreateTime"


def _batch_line(header: BatchHeader, position: int, valid: bool) -> str:
    """Kafka 2.8 `printBatchLevel` for a v2 batch."""
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count}"
        f" baseSequence: {header.base_sequence}"
        f" lastSequence: {_sequence(header.base_sequence, header.last_offset_delta)}"
        f" producerId: {header.producer_id} producerEpoch: {header.producer_epoch}"
        f" partitionLeaderEpoch: {header.partition_leader_epoch}"
        f" isTransactional: {_java_bool(header.is_transactional)} isControl: {_java_bool(header.is_control)}"
        f" position: {position} {_timestamp_type(header)}: {header.max_timestamp}"
        f" size: {header.size_bytes} magic: {header.magic}"
        f" compresscodec: {CompressionType(header.compression).name} crc: {header.crc} isvalid: {_java_bool(valid)}"
    )


def _record_line(header: BatchHeader, record: Record, print_data: bool) -> str:
    """Kafka 2.8 `dumpLog`'s per-record line (v2), with key and payload when printing."""
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    sequence = _sequence(header.base_sequence, record.offset - header.base_offset)
    parts = [
        f"{RECORD_INDENT} offset: {record.offset} {_timestamp_type(header)}: {record.timestamp_ms}"
        f" keySize: {key_size} valueSize: {value_size}"
        f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    ]
    if header.is_control:
        parts.append(_control_text(record))
    elif print_data:
        if record.key is not None:
            parts.append(f" key: {_string_decoder(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {_string_decoder(record.value)}")
    return "".join(parts)


def _control_text(record: Record) -> str:
    key = record.key or b""
    type_id = _CONTROL_KEY.unpack_from(key)[1] if len(key) >= _CONTROL_KEY.size else -1
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    value = record.value or b""
    if name in ("ABORT", "COMMIT") and len(value) >= _END_TXN_VALUE.size:
        return f" endTxnMarker: {name} coordinatorEpoch: {_END_TXN_VALUE.unpack_from(value)[1]}"
    return f" controlType: {name}({type_id})"


def _string_decoder(data: bytes) -> str:
    """Kafka's StringDecoder: UTF-8, malformed input replaced."""
    return data.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- .index


def _dump_index(path: Path, options: DumpOptions, reports: _Reports, out: TextIO) -> None:
    """Kafka's `dumpIndex`: each entry, checked against the batch at its position."""
    base = _base_offset(path)
    with _mapped(path) as data:
        entries = [(base + rel, pos) for rel, pos in _INDEX_ENTRY.iter_unpack(data[: len(data) // 8 * 8])]
        if options.index_sanity_check:
            _index_sanity_check(path, base, len(data), entries)
            print(f"{path} passed sanity check.", file=out)
            return
    log_path = _sibling(path, LOG_SUFFIX)
    with _mapped(_require(log_path, path)) as log:
        for i, (offset, position) in enumerate(entries):
            if offset == base and i > 0:  # a pre-allocated, zero-filled tail: Kafka stops here
                return
            batch = next(_batches_quietly(log, log_path, options.max_message_size_bytes, position), None)
            log_offset = -1 if batch is None else batch.last_offset
            if log_offset != offset:
                reports.index_mismatches.setdefault(_absolute(path), []).append((offset, log_offset))
            if not options.verify_index_only:
                print(f"offset: {offset} position: {position}", file=out)


def _index_sanity_check(path: Path, base: int, size: int, entries: list[tuple[int, int]]) -> None:
    """OffsetIndex.sanityCheck, the check a broker runs at start-up to decide on a rebuild."""
    if entries and entries[-1][0] < base:
        raise DumpError(
            f"Corrupt index found, index file ({_absolute(path)}) has non-zero size but the last offset"
            f" is {entries[-1][0]} which is less than the base offset {base}."
        )
    if size % _INDEX_ENTRY.size:
        raise DumpError(
            f"Index file {_absolute(path)} is corrupt, found {size} bytes which is neither positive"
            f" nor a multiple of {_INDEX_ENTRY.size}."
        )


def _require(path: Path, for_file: Path) -> Path:
    if not path.is_file():
        raise DumpError(f"{for_file}: no {path.name} next to it to check the entries against")
    return path


def _batches_quietly(buf: memoryview, path: Path, max_size_bytes: int, start: int) -> Iterator[BatchHeader]:
    """Batch headers from `start`, ending (rather than failing) where the framing breaks: index checks."""
    if not 0 <= start < len(buf):
        return
    try:
        for header, _ in _batches(buf, path, max_size_bytes, start):
            yield header
    except DumpError:
        return


# --------------------------------------------------------------------------- .timeindex


def _dump_time_index(path: Path, options: DumpOptions, reports: _Reports, out: TextIO) -> None:
    """Kafka's `dumpTimeIndex`: each entry's offset must end a batch whose max timestamp it names."""
    base = _base_offset(path)
    with _mapped(path) as data:
        entries = [(ts, base + rel) for ts, rel in _TIME_INDEX_ENTRY.iter_unpack(data[: len(data) // 12 * 12])]
        if options.index_sanity_check:
            _time_index_sanity_check(path, base, len(data), entries)
            print(f"{path} passed sanity check.", file=out)
            return
    index = _read_offset_index(_sibling(path, INDEX_SUFFIX), base)
    log_path = _sibling(path, LOG_SUFFIX)
    absolute = _absolute(path)
    previous_ts = -1  # RecordBatch.NO_TIMESTAMP
    with _mapped(_require(log_path, path)) as log:
        for i, (timestamp, offset) in enumerate(entries):
            if offset == base and i > 0:
                return
            found = _batch_ending_at_or_after(log, log_path, _index_lookup(index, offset), offset)
            if found is None:
                reports.not_found.setdefault(absolute, []).append((offset, -1))
            elif found[0].last_offset != offset:
                reports.not_found.setdefault(absolute, []).append((offset, found[0].last_offset))
            else:
                header, batch = found
                records = _records(header, batch, log_path, -1)
                max_ts = max((r.timestamp_ms for r in records), default=-1)
                if max_ts != timestamp:
                    reports.time_mismatches.setdefault(absolute, []).append((timestamp, max_ts))
                if previous_ts >= timestamp:
                    reports.out_of_order.setdefault(absolute, []).append((timestamp, previous_ts))
            if not options.verify_index_only:
                print(f"timestamp: {timestamp} offset: {offset}", file=out)
            previous_ts = timestamp


def _time_index_sanity_check(path: Path, base: int, size: int, entries: list[tuple[int, int]]) -> None:
    """TimeIndex.sanityCheck."""
    where = _absolute(path)
    if entries and entries[-1][0] < entries[0][0]:
        raise DumpError(
            f"Corrupt time index found, time index file ({where}) has non-zero size but the last timestamp"
            f" is {entries[-1][0]} which is less than the first timestamp {entries[0][0]}"
        )
    if entries and entries[-1][1] < base:
        raise DumpError(
            f"Corrupt time index found, time index file ({where}) has non-zero size but the last offset"
            f" is {entries[-1][1]} which is less than the first offset {base}"
        )
    if size % _TIME_INDEX_ENTRY.size:
        raise DumpError(
            f"Time index file {where} is corrupt, found {size} bytes which is neither positive"
            f" nor a multiple of {_TIME_INDEX_ENTRY.size}."
        )


def _read_offset_index(path: Path, base: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries; a missing `.index` reads as empty (Kafka would create it)."""
    if not path.is_file():
        return []
    with _mapped(path) as data:
        entries = [(base + rel, pos) for rel, pos in _INDEX_ENTRY.iter_unpack(data[: len(data) // 8 * 8])]
    # Drop a zero-filled pre-allocated tail, as OffsetIndex's entry count would.
    for i in range(1, len(entries)):
        if entries[i][0] == base:
            return entries[:i]
    return entries


def _index_lookup(entries: list[tuple[int, int]], offset: int) -> int:
    """OffsetIndex.lookup: the position of the greatest entry <= offset, else 0."""
    position = 0
    for entry_offset, entry_position in entries:  # sparse: a linear scan is fine for a dump
        if entry_offset > offset:
            break
        position = entry_position
    return position


def _batch_ending_at_or_after(
    log: memoryview, log_path: Path, start: int, offset: int
) -> tuple[BatchHeader, memoryview] | None:
    if not 0 <= start < len(log):
        return None
    try:
        for header, batch in _batches(log, log_path, _INT32_MAX, start):
            if header.last_offset >= offset:
                return header, batch
    except DumpError:
        return None
    return None
