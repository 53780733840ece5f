"""`zkraft state-change-log-merger`: Kafka's `kafka.tools.StateChangeLogMerger` (docs/research/kafka.md §6.5).

    zkraft state-change-log-merger (--logs F1,F2 | --logs-regex DIR/state-change.log*)
        [--topic T] [--partitions 0,1] [--start-time "yyyy-MM-dd HH:mm:ss,SSS"] [--end-time ...]

Merges the state-change.log files of several brokers into one history ordered by timestamp,
as Kafka's tool does: the first `yyyy-MM-dd HH:mm:ss,SSS` in a line is its time; lines outside
[start, end] are dropped; with `--topic` (and `--partitions`) only lines about that topic
(and those partitions) are kept, lines that name no partition only when there is no filter.

Two differences, both so the tool works on 2.x files. Kafka's partition regex only knows the
0.8 spelling `[topic,0]`; 2.x lines (ours: broker/state_change_log.py, the controller's state
machines and the replica manager) print `topic-0`, so a line's partition is the first `[t,p]`,
else the first ` t-p` token. And a line without a timestamp (a stack trace under an ERROR line)
stays with the entry above it instead of being dropped.

`--logs-regex` is Kafka's: the part after the last '/' is a regular expression searched in the
names of the files of that directory ('.' when there is no '/').
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from zkraft.tools.topics import EXIT_OK, ToolError, ToolUsageError

DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}")
LEGAL_CHARS = "[a-zA-Z0-9._-]"
# Kafka's: `[topic,partition]` (0.8 to 1.0 lines).
BRACKET_PARTITION_RE = re.compile(r"\[(" + LEGAL_CHARS + r"+),( )*([0-9]+)\]")
# 2.x lines: TopicPartition.toString, `topic-0`, as a whole token.
DASH_PARTITION_RE = re.compile(r"(?:^|[\s(\[,=])(" + LEGAL_CHARS + r"+)-([0-9]+)(?=$|[\s)\],.:;])")
START_TIME_DEFAULT = "0000-00-00 00:00:00,000"
END_TIME_DEFAULT = "9999-12-31 23:59:59,999"
USAGE = "A tool for merging the log files from several brokers to reconnstruct a unified history of what happened."


@dataclass(frozen=True, slots=True)
class MergeOptions:
    files: tuple[Path, ...]
    topic: str | None = None
    partitions: frozenset[int] = frozenset()
    start_time: str = START_TIME_DEFAULT
    end_time: str = END_TIME_DEFAULT


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logs", metavar="F1,F2", help="comma-separated state-change.log files to merge")
    parser.add_argument("--logs-regex", metavar="DIR/REGEX", help="files of DIR whose name matches REGEX")
    parser.add_argument("--topic", help="only lines about this topic")
    parser.add_argument("--partitions", metavar="0,1", help="only these partitions of --topic")
    parser.add_argument(
        "--start-time", default=START_TIME_DEFAULT, help=f'"yyyy-MM-dd HH:mm:ss,SSS" (default {START_TIME_DEFAULT})'
    )
    parser.add_argument(
        "--end-time", default=END_TIME_DEFAULT, help=f'"yyyy-MM-dd HH:mm:ss,SSS" (default {END_TIME_DEFAULT})'
    )


def options_from_namespace(ns: argparse.Namespace) -> MergeOptions:
    """StateChangeLogMerger.main's checks, Kafka's messages."""
    if (ns.logs is None) == (ns.logs_regex is None):
        raise ToolUsageError('Provide arguments to exactly one of the two options "[logs]" or "[logs-regex]". ' + USAGE)
    if ns.partitions is not None and ns.topic is None:
        raise ToolUsageError('The option "[topic]" needs to be provided an argument when specifying partition ids')
    partitions = parse_partitions(ns.partitions) if ns.partitions is not None else frozenset()
    for flag, value in (("--start-time", ns.start_time), ("--end-time", ns.end_time)):
        if not DATE_RE.fullmatch(value.strip()):
            raise ToolUsageError(f'{flag}: Unparseable date: "{value}" (expected yyyy-MM-dd HH:mm:ss,SSS)')
    files = list_files(ns.logs, None) if ns.logs is not None else list_files(None, ns.logs_regex)
    return MergeOptions(tuple(files), ns.topic, partitions, ns.start_time.strip(), ns.end_time.strip())


def parse_partitions(text: str) -> frozenset[int]:
    values: list[int] = []
    for piece in text.split(","):
        stripped = piece.strip()
        if not stripped.isdigit():
            raise ToolUsageError(f'--partitions: For input string: "{stripped}" (expected partition ids like 0,1)')
        values.append(int(stripped))
    if len(set(values)) != len(values):
        raise ToolUsageError(f"The list of partitions contains repeated entries: {text}")
    return frozenset(values)


def list_files(logs: str | None, regex: str | None) -> list[Path]:
    if logs is not None:
        files = [Path(name.strip()) for name in logs.split(",") if name.strip()]
        for path in files:
            if not path.is_file():
                raise ToolError(f"{path}: no such file")
        if not files:
            raise ToolUsageError("--logs names no file")
        return files
    text = regex or ""
    cut = text.rfind("/") + 1
    directory = Path(text[: cut - 1] if cut > 1 else ("/" if cut == 1 else "."))
    try:
        name_re = re.compile(text[cut:])
    except re.error as error:
        raise ToolUsageError(f"--logs-regex: {text[cut:]} is an invalid regex: {error}") from None
    if not directory.is_dir():
        raise ToolError(f"{directory}: no such directory")
    files = sorted(p for p in directory.iterdir() if p.is_file() and name_re.search(p.name))
    if not files:
        raise ToolError(f"no file in {directory} matches {text[cut:]}")
    return files


# ---------------------------------------------------------------- parsing and merging (pure)


def line_partition(line: str) -> tuple[str, int] | None:
    """The partition a line is about: Kafka's `[t,p]` first, else the first 2.x `t-p` token."""
    bracket = BRACKET_PARTITION_RE.search(line)
    if bracket is not None:
        return bracket.group(1), int(bracket.group(3))
    dash = DASH_PARTITION_RE.search(DATE_RE.sub(" ", line, count=1))  # `2026-11` is no partition
    if dash is not None:
        return dash.group(1), int(dash.group(2))
    return None


def keep(line: str, options: MergeOptions) -> bool:
    """getNextLine's filter on a line that has a date."""
    match = DATE_RE.search(line)
    if match is None:
        return False
    date = match.group(0)
    if not options.start_time <= date <= options.end_time:
        return False
    found = line_partition(line)
    if found is None:
        return options.topic is None and not options.partitions
    topic, partition = found
    return (options.topic is None or options.topic == topic) and (
        not options.partitions or partition in options.partitions
    )


def entries(lines: Iterator[str]) -> Iterator[tuple[str, list[str]]]:
    """(date, [line, continuation lines...]) for each dated line; undated lines join the entry above."""
    date: str | None = None
    block: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        match = DATE_RE.search(line)
        if match is None:
            if date is not None:
                block.append(line)
            continue
        if date is not None:
            yield date, block
        date, block = match.group(0), [line]
    if date is not None:
        yield date, block


def filtered(lines: Iterator[str], options: MergeOptions) -> Iterator[tuple[str, list[str]]]:
    for date, block in entries(lines):
        if keep(block[0], options):
            yield date, block


def merge(sources: Sequence[Iterator[str]], options: MergeOptions) -> Iterator[str]:
    """The n-way merge by timestamp (ties: the earlier file first, then file order)."""
    streams = [filtered(source, options) for source in sources]
    heap_input = [_keyed(stream, index) for index, stream in enumerate(streams)]
    for _key, block in heapq.merge(*heap_input, key=lambda item: item[0]):
        yield from block


def _keyed(stream: Iterator[tuple[str, list[str]]], index: int) -> Iterator[tuple[tuple[str, int], list[str]]]:
    for date, block in stream:
        yield (date, index), block


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    options = options_from_namespace(ns)
    stream = out if out is not None else sys.stdout
    handles = []
    try:
        for path in options.files:
            try:
                handles.append(path.open("r", encoding="utf-8", errors="replace"))
            except OSError as error:
                raise ToolError(f"cannot read {path}: {error.strerror or error}") from None
        for line in merge(handles, options):
            stream.write(line + "\n")
        stream.flush()
    finally:
        for handle in handles:
            handle.close()
    return EXIT_OK
