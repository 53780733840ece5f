"""`zkraft preferred-replica-election`: Kafka's `kafka-preferred-replica-election.sh` (ZooKeeper era).

    zkraft preferred-replica-election --zookeeper Q [--path-to-json-file F]

Research/kafka.md §6.3 and §2.14 (PreferredReplicaLeaderElectionCommand.scala). The tool writes
`/admin/preferred_replica_election` (`{"version":1,"partitions":[{"topic":..,"partition":..}]}`)
for the controller, which moves each partition's leadership to its preferred replica (the first
of its assignment) when that replica is alive and in the ISR. Without a file every partition of
every topic is listed. Kafka's lines: `Created preferred replica election path with t-0,t-1`, then
`Successfully started preferred replica election for partitions Set(t-0, t-1)`.

Refused with one line and a non-zero exit: a missing or malformed file, duplicate partitions
(Kafka's message), partitions that do not exist (Kafka writes the others and prints `Skipping ...`
for these; we refuse before writing anything, so that a typo never starts a partial election), and
an election already in progress (Kafka's `Preferred replica leader election currently in progress
for ... Aborting operation`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition
from client.kafka.znodes import (
    PREFERRED_REPLICA_ELECTION_PATH,
    ZnodeDataError,
    decode_preferred_replica_election,
    encode_preferred_replica_election,
)
from client.zk.exceptions import ZkException
from zkraft.tools import command_config
from zkraft.tools.topics import CONNECT_TIMEOUT_S_DEFAULT, EXIT_OK, ToolError, ToolUsageError, check_hosts

FAILED_PREFIX = "Failed to start preferred replica election"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="the quorum (required)")
    parser.add_argument(
        "--path-to-json-file",
        metavar="F",
        help='partitions to elect for: {"partitions":[{"topic":"foo","partition":1}]}; default: all partitions',
    )
    parser.add_argument(
        "--timeout", type=float, default=CONNECT_TIMEOUT_S_DEFAULT, help="seconds to wait for a connection"
    )
    command_config.add_zk_tls_argument(parser)


# ---------------------------------------------------------------- pure parts


def parse_election_data(text: str, path: str = "the file") -> list[TopicPartition]:
    """parsePreferredReplicaElectionData: the partitions in file order; duplicates refused (Kafka's message)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ToolError(f"{FAILED_PREFIX}: {path} is not valid JSON: {error}") from None
    entries = data.get("partitions") if isinstance(data, dict) else None
    if entries is None:
        raise ToolError(f"{FAILED_PREFIX}: Preferred replica election data is empty")
    if not isinstance(entries, list):
        raise ToolError(f"{FAILED_PREFIX}: {path}: 'partitions' must be a list")
    partitions: list[TopicPartition] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise ToolError(
                f'{FAILED_PREFIX}: {path}: each entry must be {{"topic":"<name>","partition":<id>}}, '
                f"got {json.dumps(entry)}"
            )
        partitions.append(TopicPartition(topic, partition))
    duplicates = _duplicates(partitions)
    if duplicates:
        raise ToolError(
            f"{FAILED_PREFIX}: Preferred replica election data contains duplicate partitions: "
            + ",".join(map(str, duplicates))
        )
    return partitions


def _duplicates(values: Sequence[TopicPartition]) -> list[TopicPartition]:
    seen: set[TopicPartition] = set()
    out: list[TopicPartition] = []
    for value in values:
        if value in seen and value not in out:
            out.append(value)
        seen.add(value)
    return out


def scala_set(partitions: Iterable[TopicPartition]) -> str:
    """How Kafka prints the Set of partitions (we sort; Scala prints hash order)."""
    return f"Set({', '.join(map(str, partitions))})"


def created_line(partitions: Sequence[TopicPartition]) -> str:
    return f"Created preferred replica election path with {','.join(map(str, partitions))}"


def started_line(partitions: Sequence[TopicPartition]) -> str:
    return f"Successfully started preferred replica election for partitions {scala_set(partitions)}"


def in_progress_message(partitions: Sequence[TopicPartition]) -> str:
    return (
        f"{FAILED_PREFIX}: Preferred replica leader election currently in progress for "
        f"{','.join(map(str, partitions))}. Aborting operation"
    )


# ---------------------------------------------------------------- the znodes


def all_partitions(zk: Any) -> list[TopicPartition]:
    """KafkaZkClient.getAllPartitions: every partition of every topic znode."""
    from client.kafka.topic_admin import existing_topics, topic_assignment

    out: list[TopicPartition] = []
    for topic in existing_topics(zk):
        assignment = topic_assignment(zk, topic)
        if assignment is not None:
            out += [TopicPartition(topic, p) for p in sorted(assignment.partitions)]
    return out


def start_election(zk: Any, requested: Sequence[TopicPartition] | None, out: TextIO) -> list[TopicPartition]:
    """Check the partitions against the topic znodes, create the znode, print Kafka's lines; the partitions written."""
    from client.zk.exceptions import NodeExistsError, NoNodeError

    known = all_partitions(zk)
    if requested is None:
        partitions = known
    else:
        missing = [tp for tp in requested if tp not in set(known)]
        if missing:
            raise ToolError(
                f"{FAILED_PREFIX}: partitions {','.join(map(str, missing))} do not exist (nothing was started)"
            )
        partitions = sorted(requested)
    if not partitions:
        raise ToolError(f"{FAILED_PREFIX}: there are no partitions (no topics exist)")
    try:
        zk.create(PREFERRED_REPLICA_ELECTION_PATH, encode_preferred_replica_election(partitions), makepath=True)
    except NodeExistsError:
        try:
            data, _stat = zk.get(PREFERRED_REPLICA_ELECTION_PATH)
            running = list(decode_preferred_replica_election(data))
        except NoNodeError:  # finished between our create and this read
            running = []
        raise ToolError(in_progress_message(running)) from None
    print(created_line(partitions), file=out)
    print(started_line(partitions), file=out)
    return partitions


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    from zkraft.tools.topics import zk_session

    if ns.zookeeper is None:
        raise ToolUsageError('Missing required argument "[zookeeper]"')
    hosts = check_hosts(ns.zookeeper, "--zookeeper")
    requested = None
    if ns.path_to_json_file is not None:
        path = ns.path_to_json_file
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ToolError(f"{FAILED_PREFIX}: file {path} does not exist") from None
        except OSError as error:
            raise ToolError(f"{FAILED_PREFIX}: cannot read {path}: {error.strerror or error}") from None
        requested = parse_election_data(text, path)
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    stream = out if out is not None else sys.stdout
    try:
        with zk_session(hosts, ns.timeout, command_config.zk_tls_of(getattr(ns, "zk_tls_config_file", None))) as zk:
            start_election(zk, requested, stream)
    except (KafkaError, ZnodeDataError) as error:
        raise ToolError(f"{FAILED_PREFIX}: {error}") from None
    except ZkException as error:
        raise ToolError(f"{FAILED_PREFIX}: {' '.join(str(error).split()) or type(error).__name__}") from None
    return EXIT_OK
