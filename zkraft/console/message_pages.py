"""The message browser: a topic's records, latest or from an offset or a timestamp; key, value, headers.

Reads with a group-less Consumer (assign + seek, never a commit), so browsing moves no group's offsets. A
timestamp is found with ListOffsets by time (Kafka's offsetsForTimes). Reading stops at the end offset each
partition had when the browse began, so a busy topic cannot keep a page loading.
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass
from typing import Any

from client.kafka.structs import TopicPartition
from zkraft.console.clients import ConsoleClients
from zkraft.console.forms import ConsoleInputError, int_field

MODES = ("latest", "offset", "timestamp")
FORMATS = ("text", "json", "hex")
LIMIT_DEFAULT = 20
LIMIT_MAX = 500
READ_TIMEOUT_S = 5.0
POLL_TIMEOUT_MS = 200
SHOWN_BYTES_MAX = 16 * 1024


@dataclass(frozen=True, slots=True)
class MessageRow:
    partition: int
    offset: int
    timestamp_ms: int
    key: str
    value: str
    headers: list[tuple[str, str]]

    @property
    def timestamp_text(self) -> str:
        moment = datetime.datetime.fromtimestamp(self.timestamp_ms / 1000.0, tz=datetime.UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class BrowseQuery:
    partition: int | None  # None: every partition
    mode: str
    offset: int
    timestamp_ms: int
    limit: int
    value_format: str


def render_bytes(data: bytes | None, value_format: str) -> str:
    if data is None:
        return "null"
    shown = data[:SHOWN_BYTES_MAX]
    suffix = f" … ({len(data)} bytes)" if len(data) > SHOWN_BYTES_MAX else ""
    if value_format == "hex":
        return shown.hex(" ") + suffix
    text = shown.decode("utf-8", "replace")
    if value_format == "json" and not suffix:
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False)
        except ValueError:
            return text
    return text + suffix


def parse_timestamp_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO date-time (a browser's datetime-local field), taken as UTC when it has no zone."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConsoleInputError(
            f"Timestamp must be epoch milliseconds or a date-time like 2026-11-28T10:00, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def browse_query(params: dict[str, str]) -> BrowseQuery:
    mode = params.get("mode") or "latest"
    if mode not in MODES:
        raise ConsoleInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    value_format = params.get("format") or "text"
    if value_format not in FORMATS:
        raise ConsoleInputError(f"format must be one of {', '.join(FORMATS)}, got {value_format!r}")
    partition_text = (params.get("partition") or "").strip()
    partition = None if partition_text in ("", "all") else int_field(params, "partition", "Partition", minimum=0)
    limit = int_field(params, "limit", "Records", minimum=1, default=LIMIT_DEFAULT)
    offset = int_field(params, "offset", "Offset", minimum=0, default=0) if mode == "offset" else 0
    timestamp_ms = parse_timestamp_ms(params.get("timestamp", "")) if mode == "timestamp" else 0
    return BrowseQuery(partition, mode, offset, timestamp_ms, min(limit, LIMIT_MAX), value_format)


def _start_positions(consumer: Any, query: BrowseQuery, tps: list[TopicPartition]) -> tuple[dict, dict]:
    starts = consumer.beginning_offsets(tps)
    ends = consumer.end_offsets(tps)
    match query.mode:
        case "latest":
            positions = {tp: max(starts[tp], ends[tp] - query.limit) for tp in tps}
        case "offset":
            positions = {tp: min(max(query.offset, starts[tp]), ends[tp]) for tp in tps}
        case _:
            found = consumer.offsets_for_times({tp: query.timestamp_ms for tp in tps})
            positions = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
    return positions, ends


def browse(clients: ConsoleClients, topic: str, query: BrowseQuery) -> list[MessageRow]:
    partitions = sorted(clients.consumer.partitions_for_topic(topic) or ())
    if not partitions:
        raise ConsoleInputError(f"Topic {topic} does not exist")
    if query.partition is not None and query.partition not in partitions:
        raise ConsoleInputError(f"Topic {topic} has no partition {query.partition}")
    tps = [TopicPartition(topic, p) for p in partitions if query.partition in (None, p)]
    consumer = clients.new_consumer()
    try:
        positions, ends = _start_positions(consumer, query, tps)
        stops = {tp: min(ends[tp], positions[tp] + query.limit) for tp in tps}
        records = _read(consumer, positions, stops)
    finally:
        consumer.close(autocommit=False)
    rows = [
        MessageRow(
            r.partition,
            r.offset,
            r.timestamp,
            render_bytes(r.key, "hex" if query.value_format == "hex" else "text"),
            render_bytes(r.value, query.value_format),
            [(name, render_bytes(value, "text")) for name, value in r.headers],
        )
        for r in records
    ]
    newest_first = query.mode == "latest"
    rows.sort(key=lambda row: (row.timestamp_ms, row.partition, row.offset), reverse=newest_first)
    return rows[: query.limit]


def _read(consumer: Any, positions: dict, stops: dict) -> list[Any]:
    """Records from each position up to its stop offset, within READ_TIMEOUT_S."""
    wanted = {tp for tp in positions if positions[tp] < stops[tp]}
    if not wanted:
        return []
    consumer.assign(sorted(wanted))
    for tp in wanted:
        consumer.seek(tp, positions[tp])
    records: list[Any] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while wanted and time.monotonic() < deadline:
        for tp, batch in consumer.poll(timeout_ms=POLL_TIMEOUT_MS).items():
            records.extend(r for r in batch if r.offset < stops[tp])
            if batch and batch[-1].offset + 1 >= stops[tp]:
                wanted.discard(tp)
    return records
