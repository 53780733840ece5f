"""`zkraft producer-perf-test` and `zkraft consumer-perf-test`: Kafka's perf tools (2.x).

    zkraft producer-perf-test --topic T --num-records N --record-size S --throughput T|-1
        --producer-props acks=1 linger.ms=5 bootstrap.servers=H:P [--producer.config F]
    zkraft consumer-perf-test --bootstrap-server H:P --topic T --messages N [--timeout MS]
        [--from-latest] [--fetch-size BYTES] [--hide-header] [--date-format FMT]

ProducerPerformance (`org.apache.kafka.tools.ProducerPerformance`): the payload is made once
(random A-Z, as Kafka's), records are sent as fast as `--throughput` allows, and each
completion is timed in a callback. `Stats` is Kafka's: every 5 s a window line
`N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.`, at the end
the total line with the 50th/95th/99th/99.9th percentiles of a sample of at most 500,000
latencies (every `numRecords / 500000`-th record), all printed with Java's formats.

ConsumerPerformance (`kafka.tools.ConsumerPerformance`): the header
`start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec` and one data row. Without
consumer groups, `rebalance.time.ms` is the time spent assigning and positioning.

On a terminal, both show a progress line on stderr (cleared before each stdout line);
piped, they print exactly Kafka's lines and nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from client.kafka.errors import KafkaError
from zkraft.tools.console_producer import open_producer, producer_kwargs, read_properties_file
from zkraft.tools.topics import ToolError, ToolUsageError, check_hosts

REPORTING_INTERVAL_MS = 5000
LATENCY_SAMPLES_MAX = 500_000
# One record in this many carries a completion callback (see _send_all).
LATENCY_SAMPLE_EVERY = 16
PRODUCER_CLIENT_ID = "perf-producer-client"
CONSUMER_CLIENT_ID = "perf-consumer-client"
PROGRESS_INTERVAL_S = 0.1
CONSUMER_TIMEOUT_MS_DEFAULT = 10_000
FETCH_SIZE_DEFAULT = 1024 * 1024
DATE_FORMAT_DEFAULT = "yyyy-MM-dd HH:mm:ss:SSS"
MB = 1024.0 * 1024.0


# ---------------------------------------------------------------- Java number formats


def jfmt(value: float, decimals: int) -> str:
    """Java's `%.Nf`: NaN and Infinity spelt as Java spells them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.{decimals}f}"


def jdiv(numerator: float, denominator: float) -> float:
    """Java double division: x/0 is ±Infinity, 0/0 is NaN."""
    if denominator == 0:
        if numerator == 0:
            return math.nan
        return math.inf if numerator > 0 else -math.inf
    return numerator / denominator


# ---------------------------------------------------------------- progress display


class Progress:
    """One self-overwriting line on stderr, shown only when stdout is a terminal."""

    def __init__(self, total: int, unit: str, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self._last_s = 0.0
        self._shown = False

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last_s < PROGRESS_INTERVAL_S:
            return
        self._last_s = now
        fraction = min(1.0, done / self.total) if self.total > 0 else 1.0
        width = 30
        filled = int(fraction * width)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r[{bar}] {fraction * 100:5.1f}% {done}/{self.total} {self.unit}\x1b[K")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


# ---------------------------------------------------------------- producer: Stats (Kafka's)


class Stats:
    """ProducerPerformance.Stats: window and total figures, and a latency sample for the percentiles."""

    def __init__(
        self,
        num_records: int,
        reporting_interval_ms: int,
        out: TextIO,
        clock_ms: Callable[[], float],
        progress: Progress | None = None,
    ) -> None:
        self.out = out
        self.clock_ms = clock_ms
        self.progress = progress
        self.start_ms = clock_ms()
        self.window_start_ms = self.start_ms
        self.sampling = max(1, num_records // max(1, min(num_records, LATENCY_SAMPLES_MAX)))
        self.latencies: list[int] = []
        self.count = 0
        self.bytes = 0
        self.max_latency = 0
        self.total_latency = 0
        self.window_count = 0
        self.window_max_latency = 0
        self.window_total_latency = 0
        self.window_bytes = 0
        self.reporting_interval_ms = reporting_interval_ms
        self._lock = threading.Lock()

    def record(self, iteration: int, latency_ms: int, size: int, now_ms: float, weight: int = 1) -> None:
        """One completed record (or `weight` records completing together with the same latency)."""
        with self._lock:
            self.count += weight
            self.bytes += size * weight
            self.total_latency += latency_ms * weight
            self.max_latency = max(self.max_latency, latency_ms)
            self.window_count += weight
            self.window_bytes += size * weight
            self.window_total_latency += latency_ms * weight
            self.window_max_latency = max(self.window_max_latency, latency_ms)
            if iteration % self.sampling == 0:
                self.latencies.append(latency_ms)
            if now_ms - self.window_start_ms >= self.reporting_interval_ms:
                self._print(self.window_line())
                self._new_window()

    def _new_window(self) -> None:
        self.window_start_ms = self.clock_ms()
        self.window_count = 0
        self.window_max_latency = 0
        self.window_total_latency = 0
        self.window_bytes = 0

    def _print(self, line: str) -> None:
        if self.progress is not None:
            self.progress.clear()
        print(line, file=self.out, flush=True)

    def window_line(self) -> str:
        elapsed_ms = self.clock_ms() - self.window_start_ms
        recs_per_sec = jdiv(1000.0 * self.window_count, elapsed_ms)
        mb_per_sec = jdiv(1000.0 * self.window_bytes, elapsed_ms) / MB
        return (
            f"{self.window_count} records sent, {jfmt(recs_per_sec, 1)} records/sec ({jfmt(mb_per_sec, 2)} MB/sec), "
            f"{jfmt(jdiv(self.window_total_latency, self.window_count), 1)} ms avg latency, "
            f"{jfmt(float(self.window_max_latency), 1)} ms max latency."
        )

    def total_line(self) -> str:
        elapsed_ms = self.clock_ms() - self.start_ms
        recs_per_sec = jdiv(1000.0 * self.count, elapsed_ms)
        mb_per_sec = jdiv(1000.0 * self.bytes, elapsed_ms) / MB
        p50, p95, p99, p999 = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        return (
            f"{self.count} records sent, {jfmt(recs_per_sec, 6)} records/sec ({jfmt(mb_per_sec, 2)} MB/sec), "
            f"{jfmt(jdiv(self.total_latency, self.count), 2)} ms avg latency, "
            f"{jfmt(float(self.max_latency), 2)} ms max latency, "
            f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th."
        )


def percentiles(latencies: Sequence[int], fractions: Sequence[float]) -> list[int]:
    """Stats.percentiles: sort the sample, take index `int(p * size)` (0 for an empty sample)."""
    ordered = sorted(latencies)
    if not ordered:
        return [0 for _ in fractions]
    return [ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in fractions]


class Throttler:
    """ThroughputThrottler: at most `throughput` sends per second on average; -1 never waits."""

    def __init__(self, throughput: float, start_s: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.throughput = throughput
        self.start_s = start_s
        self.sleep = sleep

    def throttle(self, sent: int, now_s: float) -> None:
        if self.throughput < 0:
            return
        due_s = self.start_s + sent / self.throughput
        if due_s > now_s:
            self.sleep(due_s - now_s)  # rate limiting: the point of the tool, not synchronisation


def make_payload(size: int, rng: random.Random | None = None) -> bytes:
    """Kafka's payload: `size` random uppercase letters, made once."""
    chooser = rng if rng is not None else random.Random()
    return bytes(chooser.randrange(26) + 65 for _ in range(size))


# ---------------------------------------------------------------- producer-perf-test


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="produce to this topic")
    parser.add_argument("--num-records", type=int, help="number of records to send")
    parser.add_argument("--record-size", type=int, help="bytes per record")
    parser.add_argument("--payload-file", type=Path, help="values to send, one per line (instead of --record-size)")
    parser.add_argument("--payload-delimiter", default="\n", help="delimiter of --payload-file (default newline)")
    parser.add_argument("--throughput", type=float, help="records/sec at most; -1 for no limit")
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="K=V", help="producer properties")
    parser.add_argument("--producer.config", dest="producer_config", type=Path, help="producer properties file")
    parser.add_argument("--bootstrap-server", help="HOST:PORT[,...] (or bootstrap.servers in --producer-props)")


def _producer_settings(ns: argparse.Namespace) -> dict[str, Any]:
    properties: dict[str, str] = {}
    if ns.producer_config is not None:
        properties.update(read_properties_file(ns.producer_config))
    for prop in ns.producer_props:
        pieces = prop.split("=")
        if len(pieces) != 2:
            raise ToolUsageError(f"Invalid property: {prop}")
        properties[pieces[0]] = pieces[1]
    if ns.bootstrap_server:
        properties["bootstrap.servers"] = ns.bootstrap_server
    properties.setdefault("client.id", PRODUCER_CLIENT_ID)
    if "bootstrap.servers" not in properties:
        raise ToolUsageError('Missing required configuration "bootstrap.servers" which has no default value.')
    check_hosts(properties["bootstrap.servers"], "bootstrap.servers")
    return producer_kwargs(properties, sys.stderr)


def check_producer_options(ns: argparse.Namespace) -> None:
    for attr in ("topic", "num_records", "throughput"):
        if getattr(ns, attr) is None:
            raise ToolUsageError(f"argument --{attr.replace('_', '-')} is required")
    if (ns.record_size is None) == (ns.payload_file is None):
        raise ToolUsageError("Either --record-size or --payload-file must be specified but not both.")
    if ns.num_records < 1:
        raise ToolUsageError(f"--num-records must be >= 1, got {ns.num_records}")
    if ns.record_size is not None and ns.record_size < 0:
        raise ToolUsageError(f"--record-size must be >= 0, got {ns.record_size}")
    if ns.throughput == 0:
        raise ToolUsageError("--throughput must be positive, or -1 for no limit")


def _payloads(ns: argparse.Namespace) -> list[bytes]:
    if ns.payload_file is None:
        return [make_payload(ns.record_size)]
    try:
        text = ns.payload_file.read_text(encoding="utf-8")
    except OSError as error:
        raise ToolError(f"cannot read {ns.payload_file}: {error.strerror or error}") from None
    payloads = [p.encode("utf-8") for p in text.split(ns.payload_delimiter) if p]
    if not payloads:
        raise ToolError(f"File is empty: {ns.payload_file}")
    return payloads


def run(
    ns: argparse.Namespace,
    out: TextIO | None = None,
    producer_factory: Callable[[Mapping[str, Any]], Any] = open_producer,
    clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000.0,
) -> int:
    check_producer_options(ns)
    out = out if out is not None else sys.stdout
    kwargs = _producer_settings(ns)
    payloads = _payloads(ns)
    try:
        producer = producer_factory(kwargs)
        try:
            _send_all(producer, ns, payloads, out, clock_ms)
        finally:
            with contextlib.suppress(Exception):
                producer.close()
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    return 0


def _send_all(
    producer: Any, ns: argparse.Namespace, payloads: Sequence[bytes], out: TextIO, clock_ms: Callable[[], float]
) -> None:
    """Sends `--num-records` records; one record in LATENCY_SAMPLE_EVERY carries a completion callback.

    The sampled record stands for itself and the unsampled ones sent after it
    (its `weight`): they ride in the same batch, so its latency is theirs. This
    keeps the per-record loop to one `send()` call, so the figure measures the
    producer rather than the tool (Kafka's tool pays a callback per record; in
    Python that callback would cost as much as the send itself).
    """
    progress = Progress(ns.num_records, "records")
    stats = Stats(ns.num_records, REPORTING_INTERVAL_MS, out, clock_ms, progress)
    throttler = Throttler(ns.throughput, clock_ms() / 1000.0)
    limited = ns.throughput > 0
    failures: list[tuple[int, BaseException]] = []
    rng = random.Random()
    topic = ns.topic
    send = producer.send
    total = ns.num_records
    every = LATENCY_SAMPLE_EVERY
    single = payloads[0] if len(payloads) == 1 else None
    for i in range(total):
        payload = single if single is not None else payloads[rng.randrange(len(payloads))]
        if i % every:
            send(topic, value=payload)
        else:
            send_start_ms = clock_ms()
            weight = min(every, total - i)
            callback = _PerfCallback(stats, i // every, weight, len(payload), send_start_ms, clock_ms, failures)
            send(topic, value=payload).add_both(callback)
            if i % 1024 == 0:
                progress.update(stats.count)
        if limited:
            throttler.throttle(i + 1, clock_ms() / 1000.0)
    producer.flush()
    progress.update(stats.count, force=True)
    progress.clear()
    if failures:
        failed = sum(weight for weight, _ in failures)
        print(f"{failed} records failed: {' '.join(str(failures[0][1]).split())}", file=sys.stderr)
    print(stats.total_line(), file=out, flush=True)


class _PerfCallback:
    """PerfCallback: the latency of a sampled record, recorded for it and the records it stands for."""

    __slots__ = ("stats", "sample", "weight", "size", "start_ms", "clock_ms", "failures")

    def __init__(
        self,
        stats: Stats,
        sample: int,
        weight: int,
        size: int,
        start_ms: float,
        clock_ms: Callable[[], float],
        failures: list[tuple[int, BaseException]],
    ) -> None:
        self.stats = stats
        self.sample = sample
        self.weight = weight
        self.size = size
        self.start_ms = start_ms
        self.clock_ms = clock_ms
        self.failures = failures

    def __call__(self, result: object) -> None:
        now_ms = self.clock_ms()
        self.stats.record(self.sample, int(now_ms - self.start_ms), self.size, now_ms, self.weight)
        if isinstance(result, BaseException):
            self.failures.append((self.weight, result))


# ---------------------------------------------------------------- consumer-perf-test


def configure_consumer_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", help="HOST:PORT[,...]")
    parser.add_argument("--topic", help="the topic to consume")
    parser.add_argument("--messages", type=int, help="number of records to consume")
    parser.add_argument(
        "--timeout", type=int, default=CONSUMER_TIMEOUT_MS_DEFAULT, help="ms without a record before giving up"
    )
    parser.add_argument("--from-latest", action="store_true", help="start at the end instead of the beginning")
    parser.add_argument("--fetch-size", type=int, default=FETCH_SIZE_DEFAULT, help="bytes per partition per fetch")
    parser.add_argument("--hide-header", action="store_true", help="do not print the header line")
    parser.add_argument("--date-format", default=DATE_FORMAT_DEFAULT, help="SimpleDateFormat pattern of the times")
    parser.add_argument("--consumer.config", dest="consumer_config", type=Path, help="consumer properties file")
    parser.add_argument("--group", help="consume as a member of this consumer group (subscribe, commit)")


CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
    "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)

_JAVA_DATE_TOKENS = (
    ("yyyy", "%Y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
)


def format_java_date(epoch_ms: float, pattern: str) -> str:
    """The few SimpleDateFormat letters people use (yyyy MM dd HH mm ss SSS), in local time."""
    moment = datetime.fromtimestamp(epoch_ms / 1000.0)
    text = pattern.replace("SSS", f"{int(epoch_ms) % 1000:03d}")
    for token, directive in _JAVA_DATE_TOKENS:
        text = text.replace(token, moment.strftime(directive))
    return text


def consumer_row(
    start_ms: float, end_ms: float, bytes_read: int, messages: int, rebalance_ms: int, date_format: str
) -> str:
    """ConsumerPerformance.printConsumerProgress' non-detailed row."""
    elapsed_s = (end_ms - start_ms) / 1000.0
    total_mb = bytes_read / MB
    fetch_ms = int(end_ms - start_ms) - rebalance_ms
    return ", ".join(
        (
            format_java_date(start_ms, date_format),
            format_java_date(end_ms, date_format),
            jfmt(total_mb, 4),
            jfmt(jdiv(total_mb, elapsed_s), 4),
            str(messages),
            jfmt(jdiv(messages, elapsed_s), 4),
            str(rebalance_ms),
            str(fetch_ms),
            jfmt(jdiv(total_mb, fetch_ms / 1000.0), 4),
            jfmt(jdiv(messages, fetch_ms / 1000.0), 4),
        )
    )


def check_consumer_options(ns: argparse.Namespace) -> None:
    if not ns.bootstrap_server:
        raise ToolUsageError('Missing required argument "[bootstrap-server]"')
    if not ns.topic:
        raise ToolUsageError('Missing required argument "[topic]"')
    if ns.messages is None:
        raise ToolUsageError('Missing required argument "[messages]"')
    if ns.messages < 1:
        raise ToolUsageError(f"--messages must be >= 1, got {ns.messages}")
    if ns.timeout < 0:
        raise ToolUsageError(f"--timeout must be >= 0, got {ns.timeout}")
    if ns.fetch_size < 1:
        raise ToolUsageError(f"--fetch-size must be >= 1, got {ns.fetch_size}")
    if ns.group is not None and not ns.group.strip():
        raise ToolUsageError("--group must not be empty")
    check_hosts(ns.bootstrap_server, "--bootstrap-server")


def run_consumer(
    ns: argparse.Namespace,
    out: TextIO | None = None,
    consumer_factory: Callable[[str, Mapping[str, Any]], Any] | None = None,
) -> int:
    from zkraft.tools.console_consumer import consumer_kwargs, open_consumer

    check_consumer_options(ns)
    out = out if out is not None else sys.stdout
    properties = {"client.id": CONSUMER_CLIENT_ID, "max.partition.fetch.bytes": str(ns.fetch_size)}
    if ns.consumer_config is not None:
        properties.update(read_properties_file(ns.consumer_config))
    kwargs = consumer_kwargs(properties, sys.stderr)
    if ns.group is not None:
        kwargs["group_id"] = ns.group
        kwargs["auto_offset_reset"] = "latest" if ns.from_latest else "earliest"
    factory = consumer_factory if consumer_factory is not None else open_consumer
    if not ns.hide_header:
        print(CONSUMER_HEADER, file=out, flush=True)
    try:
        consumer = factory(ns.bootstrap_server, kwargs)
        try:
            row = _consume_all(consumer, ns, out)
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    print(row, file=out, flush=True)
    return 0


def _consume_all(consumer: Any, ns: argparse.Namespace, out: TextIO) -> str:
    from client import TopicPartition
    from zkraft.tools.console_consumer import wait_for_partitions

    start_ms = time.time() * 1000.0
    joined = _JoinTimer()
    if ns.group is not None:  # ConsumerPerformance: subscribe; the rebalance time is the wait for the assignment
        consumer.subscribe([ns.topic], listener=joined)
    else:
        tps = [TopicPartition(ns.topic, p) for p in wait_for_partitions(consumer, ns.topic)]
        consumer.assign(tps)
        if ns.from_latest:
            consumer.seek_to_end(*tps)
        else:
            consumer.seek_to_beginning(*tps)
        joined.assigned_ms = time.time() * 1000.0
    progress = Progress(ns.messages, "records")
    messages = 0
    bytes_read = 0
    last_consumed_s = time.monotonic()
    while messages < ns.messages and (time.monotonic() - last_consumed_s) * 1000 <= ns.timeout:
        batches = consumer.poll(timeout_ms=min(100, max(1, ns.timeout)), max_records=ns.messages - messages)
        for records in batches.values():
            if records:
                messages += len(records)
                bytes_read += _records_size(records)
                last_consumed_s = time.monotonic()
        progress.update(messages)
    end_ms = time.time() * 1000.0
    rebalance_ms = int((joined.assigned_ms or end_ms) - start_ms)
    progress.clear()
    if messages < ns.messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({ns.timeout} ms) exceeded. "
            "You can use the --timeout option to increase the timeout.",
            file=out,
            flush=True,
        )
    return consumer_row(start_ms, end_ms, bytes_read, messages, rebalance_ms, ns.date_format)


class _JoinTimer:
    """A rebalance listener noting when the group first handed this consumer its partitions."""

    def __init__(self) -> None:
        self.assigned_ms: float | None = None

    def on_partitions_revoked(self, revoked: object) -> None:
        pass

    def on_partitions_assigned(self, assigned: object) -> None:
        if self.assigned_ms is None:
            self.assigned_ms = time.time() * 1000.0


def _records_size(records: Sequence[Any]) -> int:
    """Key and value bytes of a poll's records; bytes counted by len() in one pass (the common case)."""
    try:
        return sum([len(r.value) for r in records if r.value is not None]) + sum(
            [len(r.key) for r in records if r.key is not None]
        )
    except TypeError:  # deserialized keys or values: measure their UTF-8 text, as Kafka's tool would
        return sum(_size(r.key) + _size(r.value) for r in records)


def _size(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    return len(str(value).encode("utf-8"))
