"""`zkraft delete-records`: Kafka's `kafka-delete-records.sh` (Kafka 2.8 DeleteRecordsCommand.scala).

    zkraft delete-records --bootstrap-server B --offset-json-file F

F is Kafka's `{"partitions":[{"topic":"foo","partition":1,"offset":1}],"version":1}`; each partition's
records below its offset are deleted (-1: below the high watermark), through the admin client's
DeleteRecords to the partitions' leaders. Kafka's lines: `Executing records delete operation`,
`Records delete operation completed:`, then per partition `partition: foo-1<TAB>low_watermark: 1` or
`partition: foo-1<TAB>error: org.apache.kafka.common.errors.OffsetOutOfRangeException: ...`.

Refused with one line and a non-zero exit: a missing or unreadable file, JSON that is not Kafka's shape
(Kafka's `The input string is not a valid JSON`, `Not supported version field value N`), duplicate
partitions (Kafka's `Offset json file contains duplicate topic partitions: foo-1`). Where Kafka exits 0
after printing a partition's error, this tool prints the same line and exits 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition
from zkraft.tools import command_config
from zkraft.tools.java_errors import java_exception_text
from zkraft.tools.topics import EXIT_OK, ToolError, ToolUsageError, check_hosts

EXIT_PARTITION_FAILED = 1


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="REQUIRED: The server to connect to.")
    parser.add_argument(
        "--offset-json-file",
        metavar="F",
        help='REQUIRED: The JSON file with offset per partition: {"partitions":[{"topic":"foo", "partition":1, '
        '"offset":1}], "version":1}',
    )
    command_config.add_argument(parser)


def parse_offset_json(text: str) -> list[tuple[TopicPartition, int]]:
    """DeleteRecordsCommand.parseOffsetJsonStringWithoutDedup: (partition, offset) in file order."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ToolError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise ToolError("The input string is not a valid JSON object")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    partitions = data.get("partitions", [])
    if not isinstance(partitions, list):
        raise ToolError('"partitions" must be a JSON array')
    out = []
    for item in partitions:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        offset = item.get("offset") if isinstance(item, dict) else None
        if not isinstance(topic, str) or not topic:
            raise ToolError(f'each partition needs a "topic" string: {json.dumps(item)}')
        if not _is_int(partition) or partition < 0:
            raise ToolError(f'each partition needs a "partition" integer >= 0: {json.dumps(item)}')
        if not _is_int(offset) or offset < -1:
            raise ToolError(f'each partition needs an "offset" integer >= -1: {json.dumps(item)}')
        out.append((TopicPartition(topic, partition), offset))
    duplicates = sorted({str(tp) for tp, _ in out if sum(1 for other, _ in out if other == tp) > 1})
    if duplicates:
        raise ToolError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    if not out:
        raise ToolError("the offset json file lists no partitions")
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def result_lines(results: dict[TopicPartition, Any], order: list[TopicPartition]) -> list[str]:
    """One `partition: t-p<TAB>low_watermark: n` or `... error: <Java exception>` line per partition."""
    lines = []
    for tp in order:
        result = results.get(tp)
        if isinstance(result, KafkaError):
            lines.append(f"partition: {tp}\terror: {java_exception_text(result)}")
        elif result is not None:
            lines.append(f"partition: {tp}\tlow_watermark: {result['low_watermark']}")
    return lines


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    if not ns.bootstrap_server:
        raise ToolUsageError('Missing required argument "[bootstrap-server]"')
    if not ns.offset_json_file:
        raise ToolUsageError('Missing required argument "[offset-json-file]"')
    bootstrap = check_hosts(ns.bootstrap_server, "--bootstrap-server")
    try:
        text = Path(ns.offset_json_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ToolError(f"cannot read {ns.offset_json_file}: {error.strerror or error}") from None
    offsets = parse_offset_json(text)
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    stream = out if out is not None else sys.stdout
    from client import Admin

    stream.write("Executing records delete operation\n")
    try:
        with Admin(bootstrap, client_id="delete-records", **command_config.security_of(ns)) as admin:
            results = admin.delete_records(dict(offsets), raise_errors=False)
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    stream.write("Records delete operation completed:\n")
    for line in result_lines(results, [tp for tp, _ in offsets]):
        stream.write(line + "\n")
    failed = any(isinstance(r, KafkaError) for r in results.values())
    return EXIT_PARTITION_FAILED if failed else EXIT_OK
