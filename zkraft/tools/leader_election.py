"""`zkraft leader-election`: Kafka's `kafka-leader-election.sh` (Kafka 2.8 LeaderElectionCommand.scala, KIP-460).

    zkraft leader-election --bootstrap-server B --election-type preferred|unclean
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)

The admin client's ElectLeaders goes to the controller: a preferred election moves leadership to the
first assigned replica when it is alive and in the ISR; an unclean one elects a leader for partitions
without a live one, from outside the ISR if it must. Kafka's lines:
`Successfully completed leader election (PREFERRED) for partitions t-0, t-1`,
`Valid replica already elected for partitions t-2`, and per failed partition
`Error completing leader election (PREFERRED) for partition: t-3: org.apache.kafka.common.errors....`,
after which the tool fails with `N replica(s) could not be elected` (exit 1).

Flags are checked as Kafka's LeaderElectionCommandOptions.validate does, with its messages; the JSON
file is Kafka's `{"partitions":[{"topic":"foo","partition":1}]}` (duplicates refused).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from client.kafka.errors import ElectionNotNeededError, KafkaError
from client.kafka.structs import TopicPartition
from zkraft.tools import command_config
from zkraft.tools.java_errors import java_exception_text
from zkraft.tools.topics import EXIT_OK, ToolError, ToolUsageError, check_hosts

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="A hostname and port for the broker to connect to, in the form host:port. REQUIRED.",
    )
    parser.add_argument(
        "--admin.config", dest="admin_config", metavar="F", help="client properties (TLS: security.protocol, ssl.*)"
    )
    parser.add_argument(
        "--path-to-json-file",
        metavar="F",
        help="The JSON file with the list of partitions for which leader elections should be performed: "
        '{"partitions":[{"topic": "foo", "partition": 1}]}',
    )
    parser.add_argument("--topic", metavar="T", help="Name of topic for which to perform an election.")
    parser.add_argument("--partition", metavar="P", help="Partition id for which to perform an election.")
    parser.add_argument(
        "--all-topic-partitions", action="store_true", help="Perform election on all of the topic partitions."
    )
    parser.add_argument("--election-type", metavar="TYPE", help='"preferred" or "unclean" leader election. REQUIRED.')


def check_options(ns: argparse.Namespace) -> tuple[str, str, list[TopicPartition] | None]:
    """(bootstrap, election type as Kafka prints it, partitions or None for all): Kafka's validate()."""
    missing = [name for name, value in (("bootstrap-server", ns.bootstrap_server), ("election-type",
               ns.election_type)) if not value]  # fmt: skip
    if missing:
        raise ToolUsageError(f"Missing required option(s): {', '.join(missing)}")
    election_type = ns.election_type.upper()
    if election_type not in ELECTION_TYPES:
        raise ToolUsageError(
            f"Value for option election-type must be one of preferred, unclean, got {ns.election_type!r}"
        )
    chosen = sum(1 for given in (ns.topic, ns.all_topic_partitions, ns.path_to_json_file) if given)
    if chosen != 1:
        raise ToolUsageError(
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"
        )
    if ns.topic and ns.partition is None:
        raise ToolUsageError("Missing required option(s): partition")
    if ns.partition is not None and not ns.topic:
        raise ToolUsageError("Option partition is only allowed if topic is used")
    bootstrap = check_hosts(ns.bootstrap_server, "--bootstrap-server")
    if ns.topic:
        if not ns.partition.isdigit():
            raise ToolUsageError(f"Cannot parse argument '{ns.partition}' of option partition")
        return bootstrap, election_type, [TopicPartition(ns.topic, int(ns.partition))]
    if ns.path_to_json_file:
        try:
            text = Path(ns.path_to_json_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or error
            raise ToolError(f"cannot read {ns.path_to_json_file}: {reason}") from None
        return bootstrap, election_type, parse_election_data(text)
    return bootstrap, election_type, None


def parse_election_data(text: str) -> list[TopicPartition]:
    """LeaderElectionCommand.parseReplicaElectionData, with Kafka's messages."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ToolError("Replica election data is empty") from None
    partitions = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(partitions, list):
        raise ToolError('Replica election data is missing "partitions" field')
    out = []
    for item in partitions:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise ToolError(f'each partition needs a "topic" string and a "partition" integer: {json.dumps(item)}')
        out.append(TopicPartition(topic, partition))
    duplicates = sorted({str(tp) for tp in out if out.count(tp) > 1})
    if duplicates:
        raise ToolError(f"Replica election data contains duplicate partitions: {','.join(duplicates)}")
    return out


def report(election_type: str, results: dict[TopicPartition, Any]) -> tuple[list[str], int]:
    """Kafka's lines for the results, and how many partitions failed."""
    succeeded = [tp for tp in sorted(results) if results[tp] is None]
    noop = [tp for tp in sorted(results) if isinstance(results[tp], ElectionNotNeededError)]
    failed = [tp for tp in sorted(results) if results[tp] is not None and tp not in noop]
    lines = []
    if succeeded:
        names = ", ".join(map(str, succeeded))
        lines.append(f"Successfully completed leader election ({election_type}) for partitions {names}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(map(str, noop))}")
    for tp in failed:
        error = results[tp]
        lines.append(
            f"Error completing leader election ({election_type}) for partition: {tp}: {java_exception_text(error)}"
        )
    return lines, len(failed)


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    bootstrap, election_type, partitions = check_options(ns)
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    stream = out if out is not None else sys.stdout
    from client import Admin

    try:
        with Admin(bootstrap, client_id="leader-election", **command_config.security_of(ns, "admin_config")) as admin:
            results = admin.perform_leader_election(ELECTION_TYPES[election_type], partitions)
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    lines, failed = report(election_type, results)
    for line in lines:
        stream.write(line + "\n")
    if failed:
        stream.flush()
        raise ToolError(f"{failed} replica(s) could not be elected")
    return EXIT_OK
