"""`zkraft console-consumer`: Kafka's `kafka-console-consumer.sh` (`kafka.tools.ConsoleConsumer`, 2.x).

    zkraft console-consumer --bootstrap-server H:P --topic T [--from-beginning]
        [--partition P [--offset O|earliest|latest]] [--max-messages N] [--timeout-ms N]
        [--property print.key=true] [--property print.timestamp=true] [--property print.partition=true]
        [--property print.offset=true] [--property print.headers=true] [--property key.separator=...]

Records are printed by Kafka's DefaultMessageFormatter: in the order timestamp
(`CreateTime:<ms>`), `Partition:<p>`, `Offset:<o>`, headers, key, value, separated by
`key.separator` (a tab) and ended by `line.separator` (a newline); a null key or value prints
`null`. At the end `Processed a total of N messages` goes to stderr, as Kafka's does, also on
Ctrl-C and when `--timeout-ms` passes without a record. The option checks and their messages
are ConsoleConsumer's.

With `--group G` (or `group.id` in --consumer-property / --consumer.config) the tool is a member of
that consumer group, as Kafka's: it subscribes to the topic, reads the partitions the group gives it
from the group's committed offsets (`--from-beginning` only matters when there are none), commits
automatically (`enable.auto.commit`, every `auto.commit.interval.ms`) and on exit, and leaves the
group. Without a group and without `--partition` the tool assigns every partition of the topic
itself, at the end (or the beginning with `--from-beginning`), and commits nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from client.kafka.errors import KafkaError
from zkraft.tools.console_producer import parse_key_values, read_properties_file
from zkraft.tools.topics import ToolError, ToolUsageError, check_hosts

METADATA_WAIT_S = 10.0  # how long to wait for the topic to appear in metadata
POLL_TIMEOUT_MS = 1000
CLIENT_ID_DEFAULT = "console-consumer"
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


# ---------------------------------------------------------------- the formatter (pure)


@dataclass(frozen=True, slots=True)
class MessageFormat:
    """DefaultMessageFormatter's properties."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MessageFormat:
        def flag(name: str, default: bool) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        def text(name: str, default: bytes) -> bytes:
            return props[name].encode("utf-8") if name in props else default

        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_partition=flag("print.partition", False),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )


def _bytes(value: object, null: bytes) -> bytes:
    if value is None:
        return null
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8")


def format_record(record: Any, fmt: MessageFormat) -> bytes:
    """One record as DefaultMessageFormatter.writeTo writes it (KIP-431 order)."""
    columns: list[bytes] = []
    if fmt.print_timestamp:
        kind = _TIMESTAMP_TYPES.get(int(record.timestamp_type))
        columns.append(b"NO_TIMESTAMP" if kind is None else f"{kind}:{record.timestamp}".encode())
    if fmt.print_partition:
        columns.append(f"Partition:{record.partition}".encode())
    if fmt.print_offset:
        columns.append(f"Offset:{record.offset}".encode())
    if fmt.print_headers:
        headers = record.headers or ()
        shown = [k.encode("utf-8") + b":" + _bytes(v, fmt.null_literal) for k, v in headers]
        columns.append(fmt.headers_separator.join(shown) if shown else b"NO_HEADERS")
    if fmt.print_key:
        columns.append(_bytes(record.key, fmt.null_literal))
    if fmt.print_value:
        columns.append(_bytes(record.value, fmt.null_literal))
    if not columns:
        return b""
    return fmt.key_separator.join(columns) + fmt.line_separator


# ---------------------------------------------------------------- options


EARLIEST = "earliest"
LATEST = "latest"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", help="HOST:PORT[,...]")
    parser.add_argument("--topic", help="the topic to consume")
    parser.add_argument("--partition", type=int, help="consume only this partition")
    parser.add_argument("--offset", help="with --partition: a non-negative offset, 'earliest' or 'latest'")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--timeout-ms", type=int, help="stop when no record arrives for this long")
    parser.add_argument("--property", action="append", default=[], metavar="K=V", help="formatter property")
    parser.add_argument("--consumer-property", action="append", default=[], metavar="K=V", help="consumer config")
    parser.add_argument("--consumer.config", dest="consumer_config", type=Path, help="consumer properties file")
    parser.add_argument("--group", help="the consumer group id: join it, start from its committed offsets, commit")
    parser.add_argument("--skip-message-on-error", action="store_true", help="accepted for compatibility")


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    bootstrap_server: str
    topic: str
    partition: int | None
    start: str | int  # EARLIEST, LATEST or an offset
    max_messages: int | None
    timeout_ms: int | None
    fmt: MessageFormat
    consumer_kwargs: dict[str, Any]
    group: str | None = None


def check_options(ns: argparse.Namespace) -> ConsumerOptions:
    """ConsoleConsumer.ConsumerConfig's checks, in its words (ToolUsageError)."""
    if not ns.bootstrap_server:
        raise ToolUsageError('Missing required argument "[bootstrap-server]"')
    if not ns.topic:
        raise ToolUsageError("Exactly one of whitelist/topic is required.")
    kwargs = _consumer_kwargs(ns)
    group = _group_id(ns.group, kwargs.pop("group_id", None))
    if group is not None and ns.partition is not None:
        raise ToolUsageError("Options group and partition cannot be specified together.")
    if ns.offset is not None and ns.partition is None:
        raise ToolUsageError("The partition is required when offset is specified.")
    if ns.partition is not None and ns.from_beginning and ns.offset is not None:
        raise ToolUsageError("Options from-beginning and offset cannot be specified together.")
    start: str | int = EARLIEST if ns.from_beginning else LATEST
    if ns.offset is not None:
        start = parse_offset(ns.offset)
    if ns.max_messages is not None and ns.max_messages < 0:
        raise ToolUsageError(f"--max-messages must be >= 0, got {ns.max_messages}")
    if ns.timeout_ms is not None and ns.timeout_ms < 0:
        raise ToolUsageError(f"--timeout-ms must be >= 0, got {ns.timeout_ms}")
    props = parse_key_values(ns.property, "--property")
    check_hosts(ns.bootstrap_server, "--bootstrap-server")
    return ConsumerOptions(
        ns.bootstrap_server,
        ns.topic,
        ns.partition,
        start,
        ns.max_messages,
        ns.timeout_ms,
        MessageFormat.from_properties(props),
        kwargs,
        group,
    )


def _group_id(flag: str | None, configured: str | None) -> str | None:
    """ConsoleConsumer: --group and group.id from the properties must agree."""
    if flag is not None and configured is not None and flag != configured:
        raise ToolUsageError(
            "The group ids provided in different places (directly using '--group', via '--consumer-property', "
            "or via '--consumer.config') do not match. Detected group ids: "
            + ", ".join(f"'{g}'" for g in sorted({flag, configured}))
        )
    group = flag if flag is not None else configured
    if group is not None and not group.strip():
        raise ToolUsageError("--group must not be empty")
    return group


def parse_offset(text: str) -> str | int:
    lowered = text.strip().lower()
    if lowered in (EARLIEST, LATEST):
        return lowered
    if lowered.isdigit():
        return int(lowered)
    raise ToolUsageError(
        f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', 'latest', "
        "or a non-negative long."
    )


# Kafka consumer config name -> (SDK keyword, int?)
CONSUMER_PROPERTIES: dict[str, tuple[str, bool]] = {
    "fetch.min.bytes": ("fetch_min_bytes", True),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", True),
    "fetch.max.bytes": ("fetch_max_bytes", True),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", True),
    "max.poll.records": ("max_poll_records", True),
    "client.id": ("client_id", False),
    "group.id": ("group_id", False),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", True),
    "session.timeout.ms": ("session_timeout_ms", True),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", True),
    "max.poll.interval.ms": ("max_poll_interval_ms", True),
    "partition.assignment.strategy": ("partition_assignment_strategy", False),
}
BOOLEAN_PROPERTIES = {"enable.auto.commit": "enable_auto_commit"}


def consumer_kwargs(properties: Mapping[str, str], warn: TextIO | None = None) -> dict[str, Any]:
    from zkraft.tools import command_config

    security, properties = command_config.split_security(properties)
    kwargs: dict[str, Any] = command_config.security_of_properties(security, "consumer properties")
    for name, text in properties.items():
        if name in BOOLEAN_PROPERTIES:
            flag = text.strip().lower()
            if flag not in ("true", "false"):
                raise ToolError(
                    f"Invalid value {text} for configuration {name}: Expected value to be either true or false"
                )
            kwargs[BOOLEAN_PROPERTIES[name]] = flag == "true"
            continue
        known = CONSUMER_PROPERTIES.get(name)
        if known is None:
            if warn is not None:
                print(f"WARN The configuration '{name}' was supplied but isn't a known config.", file=warn)
            continue
        keyword, numeric = known
        if numeric:
            trimmed = text.strip()
            if not trimmed.lstrip("+-").isdigit():
                raise ToolError(f"Invalid value {text} for configuration {name}: Not a number of type INT")
            kwargs[keyword] = int(trimmed)
        else:
            kwargs[keyword] = text.strip()
    return kwargs


def _consumer_kwargs(ns: argparse.Namespace) -> dict[str, Any]:
    properties: dict[str, str] = {"client.id": CLIENT_ID_DEFAULT}
    if ns.consumer_config is not None:
        properties.update(read_properties_file(ns.consumer_config))
    properties.update(parse_key_values(ns.consumer_property, "--consumer-property"))
    return consumer_kwargs(properties, sys.stderr)


# ---------------------------------------------------------------- running


def open_consumer(bootstrap: str, kwargs: Mapping[str, Any]) -> Any:
    from client import Consumer

    return Consumer(bootstrap_servers=bootstrap, **kwargs)


def wait_for_partitions(consumer: Any, topic: str, wait_s: float = METADATA_WAIT_S) -> list[int]:
    """The topic's partition ids; ToolError if it does not show up in metadata within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return sorted(partitions)
        if time.monotonic() >= deadline:
            raise ToolError(f"Topic {topic} not present in metadata after {int(wait_s * 1000)} ms.")
        time.sleep(0.1)  # metadata back-off, as the Java client's retry.backoff.ms


def _partitions(consumer: Any, options: ConsumerOptions) -> list[int]:
    """The topic's partitions. With --timeout-ms a topic that never shows up is a quiet end (Kafka's poll
    simply times out); without it, an error after METADATA_WAIT_S (Kafka would wait for ever)."""
    if options.timeout_ms is None:
        return wait_for_partitions(consumer, options.topic)
    try:
        return wait_for_partitions(consumer, options.topic, min(METADATA_WAIT_S, options.timeout_ms / 1000))
    except ToolError:
        return []


def position_consumer(consumer: Any, options: ConsumerOptions, partitions: Iterable[int]) -> None:
    from client import TopicPartition

    ids = list(partitions)
    if options.partition is not None:
        if options.partition not in ids:
            raise ToolError(f"Partition {options.partition} of topic {options.topic} does not exist")
        ids = [options.partition]
    tps = [TopicPartition(options.topic, p) for p in ids]
    consumer.assign(tps)
    if options.start == EARLIEST:
        consumer.seek_to_beginning(*tps)
    elif options.start == LATEST:
        consumer.seek_to_end(*tps)
    else:
        for tp in tps:
            consumer.seek(tp, int(options.start))


class Counter:
    """Records printed so far; kept outside `consume` so that Ctrl-C still reports it."""

    def __init__(self) -> None:
        self.value = 0


def consume(
    consumer: Any,
    options: ConsumerOptions,
    out: BinaryIO,
    counter: Counter | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """ConsoleConsumer.process: print records until --max-messages, or --timeout-ms without one; the count."""
    counter = counter if counter is not None else Counter()
    count = counter.value
    last_record_s = clock()
    while options.max_messages is None or count < options.max_messages:
        wait_ms = POLL_TIMEOUT_MS
        if options.timeout_ms is not None:
            left_ms = options.timeout_ms - (clock() - last_record_s) * 1000
            if left_ms <= 0:
                break
            wait_ms = min(wait_ms, max(1, int(left_ms)))
        wanted = None if options.max_messages is None else options.max_messages - count
        batches = consumer.poll(timeout_ms=wait_ms, max_records=wanted)
        written = False
        for records in batches.values():
            for record in records:
                if options.max_messages is not None and count >= options.max_messages:
                    break
                out.write(format_record(record, options.fmt))
                count += 1
                counter.value = count
                written = True
        if written:
            out.flush()
            last_record_s = clock()
    return count


def run(
    ns: argparse.Namespace,
    out: BinaryIO | None = None,
    err: TextIO | None = None,
    consumer_factory: Callable[[str, Mapping[str, Any]], Any] = open_consumer,
) -> int:
    options = check_options(ns)
    out = out if out is not None else sys.stdout.buffer
    err = err if err is not None else sys.stderr
    counter = Counter()
    try:
        kwargs = dict(options.consumer_kwargs)
        if options.group is not None:
            kwargs["group_id"] = options.group
            kwargs["auto_offset_reset"] = EARLIEST if options.start == EARLIEST else LATEST
        consumer = consumer_factory(options.bootstrap_server, kwargs)
        try:
            if options.group is not None:
                consumer.subscribe([options.topic])
                consume(consumer, options, out, counter)
            else:
                partitions = _partitions(consumer, options)
                if partitions:
                    position_consumer(consumer, options, partitions)
                    consume(consumer, options, out, counter)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a console consumer is stopped: report the count and exit 0, as Kafka does
        except BrokenPipeError:  # `| head`: the reader is gone; keep Python from complaining at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            with contextlib.suppress(OSError, ValueError):
                os.dup2(devnull, sys.stdout.fileno())
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    finally:
        print(f"Processed a total of {counter.value} messages", file=err, flush=True)
    return 0
