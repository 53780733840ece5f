"""`zkraft console-producer`: Kafka's `kafka-console-producer.sh` (`kafka.tools.ConsoleProducer`, 2.x).

    zkraft console-producer --bootstrap-server H:P --topic T [--property parse.key=true]
        [--property key.separator=:] [--producer-property K=V ...] [--request-required-acks N] [--sync]

One record per line of stdin (Kafka's LineMessageReader): the line without its end-of-line is
the value; with `parse.key=true` the text before the first `key.separator` (default a tab) is
the key, and a line without the separator is an error (`No key found on line N: ...`) unless
`ignore.error=true`. Records are sent asynchronously; a failed send is reported on stderr in
ErrorLoggingCallback's words and the tool goes on, as Kafka's does, but then exits 1 (Kafka
exits 0). `--sync` waits for each record. Kafka's `>` prompt is shown only on a terminal.

Producer properties use Kafka's names (`linger.ms`, `batch.size`, `acks`, ...); the table
`PRODUCER_PROPERTIES` maps them to the SDK's keyword arguments, with ConfigDef's type checks.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from client.kafka.errors import KafkaError
from zkraft.tools.topics import ToolError, ToolUsageError, check_hosts

LINGER_MS_DEFAULT = 1000  # ConsoleProducer's --timeout default (linger.ms)
KEY_SEPARATOR_DEFAULT = "\t"
CLIENT_ID_DEFAULT = "console-producer"


# ---------------------------------------------------------------- Kafka properties -> SDK arguments


def _long(name: str, text: str) -> int:
    trimmed = text.strip()
    if not trimmed.lstrip("+-").isdigit() or not trimmed.isascii():
        raise ToolError(f"Invalid value {text} for configuration {name}: Not a number of type LONG")
    return int(trimmed)


def _acks(name: str, text: str) -> int | str:
    trimmed = text.strip().lower()
    if trimmed in ("all", "-1"):
        return "all"
    if trimmed in ("0", "1"):
        return int(trimmed)
    raise ToolError(f"Invalid value {text} for configuration {name}: String must be one of: all, -1, 0, 1")


def _compression(name: str, text: str) -> str | None:
    trimmed = text.strip().lower()
    if trimmed not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise ToolError(
            f"Invalid value {text} for configuration {name}: String must be one of: none, gzip, snappy, lz4, zstd"
        )
    return None if trimmed == "none" else trimmed


def _text(_name: str, text: str) -> str:
    return text.strip()


# Kafka producer config name -> (SDK keyword, parser).
PRODUCER_PROPERTIES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "bootstrap.servers": ("bootstrap_servers", _text),
    "acks": ("acks", _acks),
    "linger.ms": ("linger_ms", _long),
    "batch.size": ("batch_size", _long),
    "compression.type": ("compression_type", _compression),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", _long),
    "retries": ("retries", _long),
    "request.timeout.ms": ("request_timeout_ms", _long),
    "delivery.timeout.ms": ("delivery_timeout_ms", _long),
    "buffer.memory": ("buffer_memory", _long),
    "max.request.size": ("max_request_size", _long),
    "client.id": ("client_id", _text),
}


def parse_key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """`k=v` strings (Kafka's CommandLineUtils.parseKeyValueArgs): split at the first '='; a bare key is an error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ToolUsageError(f"Invalid command line properties: {item} (expected key=value after {flag})")
        out[key.strip()] = value
    return out


def read_properties_file(path: Path) -> dict[str, str]:
    from runtime.properties import PropertiesError, parse_properties

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ToolError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return {key: value for key, value, _line in parse_properties(text, str(path))}
    except PropertiesError as error:
        raise ToolError(str(error)) from None


def producer_kwargs(properties: Mapping[str, str], warn: TextIO | None = None) -> dict[str, Any]:
    """Kafka producer properties -> `Producer(...)` keywords; unknown names are warned about and ignored.
    The security ones (security.protocol, ssl.*, sasl.*) become the `tls` and `sasl` keywords."""
    from zkraft.tools import command_config

    security, properties = command_config.split_security(properties)
    kwargs: dict[str, Any] = command_config.security_of_properties(security, "producer properties")
    for name, text in properties.items():
        known = PRODUCER_PROPERTIES.get(name)
        if known is None:
            if warn is not None:
                print(f"WARN The configuration '{name}' was supplied but isn't a known config.", file=warn)
            continue
        keyword, parse = known
        kwargs[keyword] = parse(name, text)
    return kwargs


def open_producer(kwargs: Mapping[str, Any]) -> Any:
    from client import Producer

    options = dict(kwargs)
    bootstrap = options.pop("bootstrap_servers", None)
    if not bootstrap:
        raise ToolUsageError('Missing required configuration "bootstrap.servers" which has no default value.')
    check_hosts(bootstrap, "bootstrap.servers")
    try:
        return Producer(bootstrap, **options)
    except TypeError as error:  # a keyword the SDK does not take
        raise ToolError(f"unsupported producer setting: {error}") from None


# ---------------------------------------------------------------- line reading (LineMessageReader)


def split_line(
    line: bytes, line_number: int, parse_key: bool, separator: bytes, ignore_error: bool
) -> tuple[bytes | None, bytes]:
    """(key, value) of one line; ToolError `No key found on line N: ...` when a key is expected but missing."""
    if not parse_key:
        return None, line
    index = line.find(separator)
    if index < 0:
        if ignore_error:
            return None, line
        raise ToolError(f"No key found on line {line_number}: {line.decode('utf-8', errors='replace')}")
    return line[:index], line[index + len(separator) :]


def strip_eol(line: bytes) -> bytes:
    """Java's readLine: the line without '\\n', '\\r' or '\\r\\n'."""
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith((b"\n", b"\r")):
        return line[:-1]
    return line


# ---------------------------------------------------------------- the command


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", help="HOST:PORT[,...]")
    parser.add_argument("--topic", help="the topic to produce to")
    parser.add_argument("--producer-property", action="append", default=[], metavar="K=V", help="producer config")
    parser.add_argument("--producer.config", dest="producer_config", type=Path, help="producer properties file")
    parser.add_argument(
        "--property", action="append", default=[], metavar="K=V", help="parse.key, key.separator, ignore.error"
    )
    parser.add_argument("--request-required-acks", default="1", help="acks: 0, 1 or all (default 1)")
    # Kafka's ConsoleProducer: the flag's value is optional and defaults to gzip when given without one.
    parser.add_argument(
        "--compression-codec", nargs="?", const="gzip", help="none, gzip, snappy, lz4 or zstd (alone: gzip)"
    )
    parser.add_argument("--timeout", type=int, default=LINGER_MS_DEFAULT, help="linger.ms (default 1000)")
    parser.add_argument("--request-timeout-ms", type=int, help="request.timeout.ms")
    parser.add_argument("--message-send-max-retries", type=int, help="retries")
    parser.add_argument("--sync", action="store_true", help="wait for each record to be acknowledged")


def _settings(options: argparse.Namespace, err: TextIO) -> dict[str, Any]:
    """ConsoleProducer.producerProps: tool flags first, then --producer.config, then --producer-property."""
    properties = {
        "acks": options.request_required_acks,
        "linger.ms": str(options.timeout),
        "client.id": CLIENT_ID_DEFAULT,
    }
    if options.compression_codec is not None:
        properties["compression.type"] = options.compression_codec
    if options.request_timeout_ms is not None:
        properties["request.timeout.ms"] = str(options.request_timeout_ms)
    if options.message_send_max_retries is not None:
        properties["retries"] = str(options.message_send_max_retries)
    if options.producer_config is not None:
        properties.update(read_properties_file(options.producer_config))
    properties.update(parse_key_values(options.producer_property, "--producer-property"))
    properties["bootstrap.servers"] = options.bootstrap_server
    return producer_kwargs(properties, err)


def check_options(options: argparse.Namespace) -> None:
    if not options.topic:
        raise ToolUsageError('Missing required argument "[topic]"')
    if not options.bootstrap_server:
        raise ToolUsageError('Missing required argument "[bootstrap-server]"')


def run(
    options: argparse.Namespace,
    stdin: BinaryIO | None = None,
    err: TextIO | None = None,
    producer_factory: Callable[[Mapping[str, Any]], Any] = open_producer,
) -> int:
    check_options(options)
    err = err if err is not None else sys.stderr
    reader_props = parse_key_values(options.property, "--property")
    parse_key = reader_props.get("parse.key", "false").strip().lower() == "true"
    ignore_error = reader_props.get("ignore.error", "false").strip().lower() == "true"
    separator = reader_props.get("key.separator", KEY_SEPARATOR_DEFAULT).encode("utf-8")
    kwargs = _settings(options, err)
    source = stdin if stdin is not None else sys.stdin.buffer
    prompt = stdin is None and sys.stdin.isatty()
    failures = _Failures(options.topic, err)
    try:
        producer = producer_factory(kwargs)
        try:
            _produce_lines(
                producer, options.topic, source, parse_key, separator, ignore_error, options.sync, failures, prompt
            )
            producer.flush()
        finally:
            with contextlib.suppress(Exception):
                producer.close()
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    if failures.count:
        raise ToolError(f"{failures.count} of {failures.sent} records could not be sent to {options.topic}")
    return 0


class _Failures:
    """ErrorLoggingCallback: one stderr line per failed send."""

    def __init__(self, topic: str, err: TextIO) -> None:
        self.topic = topic
        self.err = err
        self.count = 0
        self.sent = 0

    def errback(self, key: bytes | None, value: bytes) -> Callable[[BaseException], None]:
        def report(error: BaseException) -> None:
            self.count += 1
            shown_key = "null" if key is None else f"{len(key)} bytes"
            reason = " ".join(str(error).split()) or type(error).__name__
            print(
                f"ERROR Error when sending message to topic {self.topic} with key: {shown_key}, "
                f"value: {len(value)} bytes with error: {reason}",
                file=self.err,
                flush=True,
            )

        return report


def _produce_lines(
    producer: Any,
    topic: str,
    source: BinaryIO,
    parse_key: bool,
    separator: bytes,
    ignore_error: bool,
    sync: bool,
    failures: _Failures,
    prompt: bool,
) -> None:
    line_number = 0
    while True:
        if prompt:
            print(">", end="", flush=True)
        raw = source.readline()
        if not raw:
            return
        line_number += 1
        key, value = split_line(strip_eol(raw), line_number, parse_key, separator, ignore_error)
        future = producer.send(topic, value=value, key=key)
        failures.sent += 1
        if sync:
            try:
                future.get()
            except Exception as error:  # a failed send: Kafka's sync mode stops here
                failures.errback(key, value)(error)
                return
        else:
            future.add_errback(failures.errback(key, value))
