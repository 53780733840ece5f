"""`zkraft reassign-partitions`: Kafka's `kafka-reassign-partitions.sh`, ZooKeeper era (2.x `--zookeeper`).

    zkraft reassign-partitions --zookeeper Q --generate --topics-to-move-json-file F --broker-list 4,5,6
    zkraft reassign-partitions --zookeeper Q --execute --reassignment-json-file F [--throttle BYTES_PER_S]
    zkraft reassign-partitions --zookeeper Q --verify --reassignment-json-file F
    zkraft reassign-partitions --bootstrap-server B --generate|--execute|--verify|--cancel|--list ...

With `--bootstrap-server` the actions go through the admin API instead (KIP-455, Kafka 2.8's default;
zkraft/tools/reassign_api.py), which adds `--cancel` and `--list`.

Research/kafka.md §6.2 (ReassignPartitionsCommand.scala) and §2.13. The tool only writes znodes:
`--execute` creates `/admin/reassign_partitions` (`{"version":1,"partitions":[...]}`) for the
controller to act on; `--verify` reads it back with the topic znodes. Output lines are Kafka's:
`Current partition replica assignment` + JSON, `Proposed partition reassignment configuration` + JSON,
`Save this to use as the --reassignment-json-file option during rollback`, `Successfully started
reassignment of partitions.`, `Status of partition reassignment: ` and one
`Reassignment of partition t-0 completed successfully|is still in progress|failed` per partition.

Checked up front, each with one line and a non-zero exit (Kafka's parseAndValidate plus what
Kafka lets through silently): the file, its JSON, empty or duplicate replica lists, duplicate
partitions, partitions or topics that do not exist, and brokers that are not registered
(not present or not alive). A plan may change a partition's replication factor.

Throttle (`--throttle`, ReassignPartitionsCommand.maybeThrottle): topic configs
`leader.replication.throttled.replicas` (every pre-move replica of a moving partition) and
`follower.replication.throttled.replicas` (the move destinations), `partition:broker,...`; broker
configs `leader.replication.throttled.rate` / `follower.replication.throttled.rate` on every broker
involved; each write followed by a `/config/changes/config_change_` notification. `--verify` removes
them all once every partition has completed (`Throttle was removed.`).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TextIO

from client.kafka.assignment import AdminOperationError, RackAwareMode, assign_replicas_to_brokers, broker_metadatas
from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition
from client.kafka.znodes import (
    REASSIGN_PARTITIONS_PATH,
    ZnodeDataError,
    broker_config_path,
    config_change_create_path,
    decode_config,
    decode_reassignment,
    encode_config,
    encode_config_change,
    encode_reassignment,
    topic_config_path,
)
from client.zk.exceptions import ZkException
from zkraft.tools import command_config
from zkraft.tools.topics import CONNECT_TIMEOUT_S_DEFAULT, EXIT_OK, ToolError, ToolUsageError, check_hosts

ANY_LOG_DIR = "any"
NO_THROTTLE = -1

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
REPLICA_ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"

THROTTLE_WARNING = (
    "Warning: You must run Verify periodically, until the reassignment completes, to ensure the throttle is "
    "removed. You can also alter the throttle by rerunning the Execute command passing a new value."
)

Plan = dict[TopicPartition, tuple[int, ...]]  # in the file's order


class ReassignmentStatus(Enum):
    COMPLETED = "completed successfully"
    IN_PROGRESS = "is still in progress"
    FAILED = "failed"


# ---------------------------------------------------------------- options


ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Kafka 2.8 serves --cancel and --list only through the admin API (KIP-455).
API_ONLY_ACTIONS = ("cancel", "list")


@dataclass(frozen=True, slots=True)
class ReassignOptions:
    action: str
    zookeeper: str | None
    topics_to_move_json_file: str | None = None
    broker_list: tuple[int, ...] = ()
    reassignment_json_file: str | None = None
    throttle_bytes_per_s: int = NO_THROTTLE
    disable_rack_aware: bool = False
    timeout_s: float = CONNECT_TIMEOUT_S_DEFAULT
    bootstrap_server: str | None = None  # the admin API instead of the znodes (KIP-455)
    additional: bool = False  # --execute while another reassignment runs (--bootstrap-server)
    preserve_throttles: bool = False  # --verify / --cancel with --bootstrap-server leave the throttles set
    command_config: Path | None = None  # client properties (TLS) for --bootstrap-server
    zk_tls_config_file: Path | None = None  # TLS to the quorum for --zookeeper


def configure_parser(parser: argparse.ArgumentParser) -> None:
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true", help=f"{action} a reassignment")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="the quorum (ZooKeeper mode)")
    parser.add_argument(
        "--bootstrap-server", metavar="HOST:PORT[,...]", help="the brokers (the admin API; --cancel and --list need it)"
    )
    command_config.add_argument(parser)
    command_config.add_zk_tls_argument(parser)
    parser.add_argument(
        "--additional", action="store_true", help="--execute with --bootstrap-server while another reassignment runs"
    )
    parser.add_argument(
        "--preserve-throttles", action="store_true", help="--verify/--cancel: do not remove the throttles"
    )
    parser.add_argument(
        "--topics-to-move-json-file", metavar="F", help='--generate: {"topics":[{"topic":"foo"}],"version":1}'
    )
    parser.add_argument("--broker-list", metavar="4,5,6", help="--generate: brokers to assign the topics to")
    parser.add_argument(
        "--reassignment-json-file",
        metavar="F",
        help='--execute/--verify: {"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}]}',
    )
    parser.add_argument(
        "--throttle", type=int, default=NO_THROTTLE, metavar="BYTES_PER_S", help="--execute: replication throttle"
    )
    parser.add_argument("--disable-rack-aware", action="store_true", help="--generate: ignore broker racks")
    parser.add_argument(
        "--timeout", type=float, default=CONNECT_TIMEOUT_S_DEFAULT, help="seconds to wait for a connection"
    )


def _flag(name: str) -> str:
    return f'"[{name}]"'


def options_from_namespace(ns: argparse.Namespace) -> ReassignOptions:
    """ReassignPartitionsCommand.validateAndParseArgs (ZooKeeper mode), with its messages."""
    chosen = [a for a in ACTIONS if getattr(ns, a, False)]
    if len(chosen) != 1:
        raise ToolUsageError(
            "Command must include exactly one action: --generate, --execute, --verify, --cancel or --list"
        )
    action = chosen[0]
    bootstrap = getattr(ns, "bootstrap_server", None)
    if bootstrap is None and ns.zookeeper is None:
        raise ToolUsageError("Please specify --bootstrap-server")
    if bootstrap is None and action in API_ONLY_ACTIONS:
        raise ToolUsageError(f"The --{action} action is only supported with --bootstrap-server")
    if action == "cancel" and ns.reassignment_json_file is None:
        raise ToolUsageError('Missing required argument "[reassignment-json-file]"')
    given = {
        "topics-to-move-json-file": ns.topics_to_move_json_file is not None,
        "broker-list": ns.broker_list is not None,
        "reassignment-json-file": ns.reassignment_json_file is not None,
        "throttle": ns.throttle != NO_THROTTLE,
        "disable-rack-aware": bool(ns.disable_rack_aware),
        "additional": bool(getattr(ns, "additional", False)),
        "preserve-throttles": bool(getattr(ns, "preserve_throttles", False)),
    }
    if action == "verify" and not given["reassignment-json-file"]:
        raise ToolUsageError(
            "If --verify option is used, command must include --reassignment-json-file that was used during the "
            "--execute option"
        )
    if action == "generate" and not (given["topics-to-move-json-file"] and given["broker-list"]):
        raise ToolUsageError(
            "If --generate option is used, command must include both --topics-to-move-json-file and --broker-list "
            "options"
        )
    if action == "execute" and not given["reassignment-json-file"]:
        raise ToolUsageError(
            "If --execute option is used, command must include --reassignment-json-file that was output during the "
            "--generate option"
        )
    invalid = {
        "verify": ("throttle", "topics-to-move-json-file", "disable-rack-aware", "broker-list", "additional"),
        "generate": ("throttle", "reassignment-json-file", "additional", "preserve-throttles"),
        "execute": ("topics-to-move-json-file", "disable-rack-aware", "broker-list", "preserve-throttles"),
        "cancel": ("throttle", "topics-to-move-json-file", "disable-rack-aware", "broker-list", "additional"),
        "list": (
            "throttle", "topics-to-move-json-file", "disable-rack-aware", "broker-list", "additional",
            "reassignment-json-file", "preserve-throttles",
        ),
    }[action]  # fmt: skip
    for name in invalid:
        if given[name]:
            raise ToolUsageError(f"Option {_flag(action)} can't be used with option {_flag(name)}")
    if given["throttle"] and ns.throttle < 0:
        raise ToolUsageError(f"--throttle must be >= 0 bytes/s, got {ns.throttle}")
    return ReassignOptions(
        action=action,
        zookeeper=None if bootstrap is not None else check_hosts(ns.zookeeper, "--zookeeper"),
        topics_to_move_json_file=ns.topics_to_move_json_file,
        broker_list=parse_broker_list(ns.broker_list) if ns.broker_list is not None else (),
        reassignment_json_file=ns.reassignment_json_file,
        throttle_bytes_per_s=ns.throttle,
        disable_rack_aware=bool(ns.disable_rack_aware),
        timeout_s=ns.timeout,
        bootstrap_server=None if bootstrap is None else check_hosts(bootstrap, "--bootstrap-server"),
        additional=given["additional"],
        preserve_throttles=given["preserve-throttles"],
        command_config=getattr(ns, "command_config", None),
        zk_tls_config_file=getattr(ns, "zk_tls_config_file", None),
    )


def parse_broker_list(text: str) -> tuple[int, ...]:
    """`--broker-list "4,5,6"`; duplicates are refused with Kafka's message."""
    brokers: list[int] = []
    for piece in text.split(","):
        stripped = piece.strip()
        if not stripped.lstrip("-").isdigit():
            raise ToolUsageError(f'--broker-list: For input string: "{stripped}" (expected broker ids like 4,5,6)')
        brokers.append(int(stripped))
    duplicates = _duplicates(brokers)
    if duplicates:
        raise ToolError(f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}")
    return tuple(brokers)


def _duplicates(values: Sequence[Any]) -> list[Any]:
    """CoreUtils.duplicates: each value seen more than once, in first-seen order."""
    seen: set[Any] = set()
    out: list[Any] = []
    for value in values:
        if value in seen and value not in out:
            out.append(value)
        seen.add(value)
    return out


# ---------------------------------------------------------------- JSON files (pure)


def read_json_file(path: str, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolError(f"{what} file {path} does not exist") from None
    except OSError as error:
        raise ToolError(f"cannot read {what} file {path}: {error.strerror or error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ToolError(f"The input string is not a valid JSON: {path}: {error}") from None


def parse_topics_to_move(data: Any, path: str = "the file") -> list[str]:
    """ReassignPartitionsCommand.parseTopicsData: `{"topics":[{"topic":"foo"}],"version":1}`, version 1 only."""
    if not isinstance(data, dict):
        raise ToolError(f'{path}: expected a JSON object like {{"topics":[{{"topic":"foo"}}],"version":1}}')
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    entries = data.get("topics", [])
    if not isinstance(entries, list):
        raise ToolError(f"{path}: 'topics' must be a list")
    topics: list[str] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str):
            raise ToolError(f'{path}: each entry of \'topics\' must be {{"topic":"<name>"}}, got {json.dumps(entry)}')
        topics.append(topic)
    if not topics:
        raise ToolError(f"{path}: the list of topics to move is empty")
    duplicates = _duplicates(topics)
    if duplicates:
        raise ToolError(f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}")
    return topics


def parse_reassignment(data: Any, path: str = "the file") -> list[tuple[TopicPartition, tuple[int, ...]]]:
    """parsePartitionReassignmentData plus the structural half of parseAndValidate, with Kafka's messages."""
    if not isinstance(data, dict):
        raise ToolError(f"{path}: expected a JSON object with a 'partitions' list")
    entries = data.get("partitions", [])
    if not isinstance(entries, list):
        raise ToolError(f"{path}: 'partitions' must be a list")
    plan: list[tuple[TopicPartition, tuple[int, ...]]] = []
    for entry in entries:
        plan.append(_plan_entry(entry, path))
    if not plan:
        raise ToolError("Partition reassignment data file is empty")
    if any(not replicas for _tp, replicas in plan):
        raise ToolError("Partition replica list cannot be empty")
    duplicate_partitions = _duplicates([tp for tp, _ in plan])
    if duplicate_partitions:
        shown = ",".join(map(str, duplicate_partitions))
        raise ToolError(f"Partition reassignment contains duplicate topic partitions: {shown}")
    duplicate_replicas = [(tp, _duplicates(list(replicas))) for tp, replicas in plan]
    messages = [f"{tp} contains multiple entries for {','.join(map(str, d))}" for tp, d in duplicate_replicas if d]
    if messages:
        raise ToolError(f"Partition replica lists may not contain duplicate entries: {'. '.join(messages)}")
    return plan


def _plan_entry(entry: Any, path: str) -> tuple[TopicPartition, tuple[int, ...]]:
    shown = json.dumps(entry)
    if not isinstance(entry, dict):
        raise ToolError(f"{path}: each entry of 'partitions' must be an object, got {shown}")
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    if not isinstance(topic, str):
        raise ToolError(f"{path}: entry {shown} has no string 'topic'")
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise ToolError(f"{path}: entry {shown} has no integer 'partition'")
    if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
        raise ToolError(f"{path}: entry {shown} has no 'replicas' list of broker ids")
    tp = TopicPartition(topic, partition)
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None:
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise ToolError(f"{path}: entry {shown}: 'log_dirs' must be a list of strings")
        if len(log_dirs) != len(replicas):
            raise ToolError(
                f"Size of replicas list {_scala_list(replicas)} is different from size of log dirs list "
                f"{_scala_list(log_dirs)} for partition {tp}"
            )
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise ToolError(
                "bootstrap-server needs to be provided in order to reassign replica to the specified log directory "
                '(zkraft does not move replicas between log directories; use "any")'
            )
    return tp, tuple(replicas)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scala_list(values: Sequence[Any]) -> str:
    return f"List({', '.join(map(str, values))})"


def validate_against_cluster(
    plan: Sequence[tuple[TopicPartition, Sequence[int]]],
    current: Mapping[TopicPartition, Sequence[int]],
    live_brokers: Sequence[int] | None,
) -> None:
    """The cluster half of parseAndValidate: every partition exists; every replica is a registered broker.

    `live_brokers` None skips the broker check (--verify: a broker may be down after a completed move).
    """
    missing = [tp for tp, _ in plan if tp not in current]
    if missing:
        known_topics = {tp.topic for tp in current}
        unknown_topics = sorted({tp.topic for tp in missing if tp.topic not in known_topics})
        detail = f" (unknown topics: {', '.join(unknown_topics)})" if unknown_topics else ""
        raise ToolError(
            f"The proposed assignment contains non-existent partitions: {_scala_list([str(tp) for tp in missing])}"
            + detail
        )
    if live_brokers is None:
        return
    live = set(live_brokers)
    unknown = sorted({b for _tp, replicas in plan for b in replicas if b not in live})
    if unknown:
        raise ToolError(
            f"The proposed assignment contains non-existent brokerIDs: {','.join(map(str, unknown))} "
            f"(brokers not present / not alive; registered brokers: {','.join(map(str, sorted(live)))})"
        )


# ---------------------------------------------------------------- plans and output (pure)


def format_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """formatAsReassignmentJson: compact, every partition with `log_dirs` of "any"; sorted by topic, partition."""
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(replicas),
            "log_dirs": [ANY_LOG_DIR] * len(replicas),
        }
        for tp, replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def generate_assignment(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Sequence[Any],
    rng: random.Random | None = None,
) -> dict[TopicPartition, tuple[int, ...]]:
    """ReassignPartitionsCommand.generateAssignment: per topic, assignReplicasToBrokers over `brokers`
    (BrokerMetadata, sorted by id) with the topic's partition count and its partition 0's replication factor."""
    by_topic: dict[str, dict[int, Sequence[int]]] = {}
    for tp, replicas in current.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = replicas
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for topic in sorted(by_topic):
        partitions = by_topic[topic]
        replication_factor = len(partitions[min(partitions)])
        assigned = assign_replicas_to_brokers(brokers, len(partitions), replication_factor, rng=rng)
        for partition, replicas in assigned.items():
            proposed[TopicPartition(topic, partition)] = tuple(replicas)
    return proposed


def throttled_replicas(
    existing: Mapping[TopicPartition, Sequence[int]], proposed: Mapping[TopicPartition, Sequence[int]]
) -> dict[str, tuple[str, str]]:
    """assignThrottledReplicas: topic -> (leader value, follower value), each `partition:broker,...`.

    Leader: every pre-move replica of a partition that gains a replica (any may lead during the move).
    Follower: every replica of the plan not already assigned (the move destinations).
    """
    out: dict[str, tuple[str, str]] = {}
    for topic in sorted({tp.topic for tp in proposed}):
        leader: list[str] = []
        follower: list[str] = []
        for tp in sorted(p for p in proposed if p.topic == topic):
            before = list(existing.get(tp, ()))
            after = list(proposed[tp])
            if set(after) - set(before):
                leader += [f"{tp.partition}:{b}" for b in before]
            follower += [f"{tp.partition}:{b}" for b in after if b not in before]
        out[topic] = (",".join(leader), ",".join(follower))
    return out


def reassignment_status(
    plan: Sequence[tuple[TopicPartition, Sequence[int]]],
    in_progress: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
) -> tuple[list[str], dict[TopicPartition, ReassignmentStatus]]:
    """checkIfPartitionReassignmentSucceeded: (ERROR lines, status per partition in the plan's order).

    Listed in /admin/reassign_partitions -> in progress; else completed when the topic znode's
    replicas equal the plan's, failed otherwise (with Kafka's ERROR line).
    """
    errors: list[str] = []
    statuses: dict[TopicPartition, ReassignmentStatus] = {}
    for tp, target in plan:
        if tp in in_progress:
            statuses[tp] = ReassignmentStatus.IN_PROGRESS
            continue
        assigned = list(current.get(tp, ()))
        if assigned == list(target):
            statuses[tp] = ReassignmentStatus.COMPLETED
        else:
            errors.append(
                f"ERROR: Assigned replicas ({','.join(map(str, assigned))}) don't match the list of replicas for "
                f"reassignment ({','.join(map(str, target))}) for partition {tp}"
            )
            statuses[tp] = ReassignmentStatus.FAILED
    return errors, statuses


def status_line(tp: TopicPartition, status: ReassignmentStatus) -> str:
    return f"Reassignment of partition {tp} {status.value}"


def _scala_map(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    entries = ", ".join(f"{tp} -> {_scala_list(list(r))}" for tp, r in assignment.items())
    return f"Map({entries})"


# ---------------------------------------------------------------- the znodes


class ZkReassigner:
    """The three actions over a sync ZkClient; prints Kafka's lines to `out`."""

    def __init__(self, zk: Any, out: TextIO, rng: random.Random | None = None) -> None:
        self.zk = zk
        self.out = out
        self.rng = rng

    def _print(self, text: str) -> None:
        print(text, file=self.out)

    # ---- reads

    def assignment_for_topics(self, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
        """KafkaZkClient.getReplicaAssignmentForTopics: missing topics are left out."""
        from client.kafka.topic_admin import topic_assignment

        out: dict[TopicPartition, tuple[int, ...]] = {}
        for topic in sorted(set(topics)):
            assignment = topic_assignment(self.zk, topic)
            if assignment is not None:
                for partition, replicas in assignment.partitions.items():
                    out[TopicPartition(topic, partition)] = tuple(replicas)
        return out

    def registered_brokers(self) -> dict[int, str | None]:
        from client.kafka.topic_admin import broker_racks

        return broker_racks(self.zk)

    def reassignment_in_progress(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        from client.zk.exceptions import NoNodeError

        try:
            data, _stat = self.zk.get(REASSIGN_PARTITIONS_PATH)
        except NoNodeError:
            return None
        return decode_reassignment(data)

    # ---- actions

    def generate(self, options: ReassignOptions, topics: Sequence[str]) -> None:
        current = self.assignment_for_topics(topics)
        found = {tp.topic for tp in current}
        unknown = [t for t in topics if t not in found]
        if unknown:
            raise ToolError(f"Topic {unknown[0]} not found." if len(unknown) == 1 else f"Topics not found: {unknown}")
        racks = self.registered_brokers()
        dead = [b for b in options.broker_list if b not in racks]
        if dead:
            raise ToolError(
                f"The broker list contains non-existent brokerIDs: {','.join(map(str, dead))} "
                f"(brokers not present / not alive; registered brokers: {','.join(map(str, sorted(racks)))})"
            )
        mode = RackAwareMode.DISABLED if options.disable_rack_aware else RackAwareMode.ENFORCED
        brokers = broker_metadatas({b: racks[b] for b in options.broker_list}, mode)
        proposed = generate_assignment(current, brokers, self.rng)
        self._print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
        self._print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")

    def _load_plan(
        self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]], check_brokers: bool
    ) -> tuple[Plan, dict[TopicPartition, tuple[int, ...]]]:
        current = self.assignment_for_topics([tp.topic for tp, _ in plan_list])
        live = sorted(self.registered_brokers()) if check_brokers else None
        validate_against_cluster(plan_list, current, live)
        return dict(plan_list), current

    def execute(self, options: ReassignOptions, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]]) -> None:
        from client.zk.exceptions import NodeExistsError

        plan, current = self._load_plan(plan_list, check_brokers=True)
        throttle = options.throttle_bytes_per_s
        running = self.reassignment_in_progress()
        if running is not None:
            self._print("There is an existing assignment running.")
            if throttle < 0:
                raise ToolError(
                    f"Partition reassignment currently in progress for {_scala_map(running)}. Aborting operation"
                )
            self._set_rates(throttle, current, plan)  # Kafka: rerunning --execute alters the throttle
            return
        self._print(
            "Current partition replica assignment\n\n"
            f"{format_reassignment_json(current)}\n\n"
            "Save this to use as the --reassignment-json-file option during rollback"
        )
        if throttle >= 0:
            self._print(THROTTLE_WARNING)
            self._throttle_replicas(current, plan)
            self._set_rates(throttle, current, plan)
        try:
            self.zk.create(REASSIGN_PARTITIONS_PATH, encode_reassignment(plan), makepath=True)
        except NodeExistsError:
            running = self.reassignment_in_progress() or {}
            raise ToolError(
                f"Partition reassignment currently in progress for {_scala_map(running)}. Aborting operation"
            ) from None
        self._print("Successfully started reassignment of partitions.")

    def verify(self, plan_list: Sequence[tuple[TopicPartition, tuple[int, ...]]]) -> None:
        plan, _current = self._load_plan(plan_list, check_brokers=False)
        self._print("Status of partition reassignment: ")
        in_progress = self.reassignment_in_progress() or {}
        current = self.assignment_for_topics([tp.topic for tp in plan])
        errors, statuses = reassignment_status(list(plan.items()), in_progress, current)
        for line in errors:
            self._print(line)
        for tp, status in statuses.items():
            self._print(status_line(tp, status))
        if all(s is ReassignmentStatus.COMPLETED for s in statuses.values()):
            self._remove_throttles(sorted({tp.topic for tp in plan}))

    # ---- throttles

    def _throttle_replicas(self, existing: Mapping[TopicPartition, Sequence[int]], plan: Plan) -> None:
        from client.kafka.topic_admin import change_topic_config

        for topic, (leader, follower) in throttled_replicas(existing, plan).items():
            configs = self._config(topic_config_path(topic))
            configs[LEADER_THROTTLED_REPLICAS] = leader
            configs[FOLLOWER_THROTTLED_REPLICAS] = follower
            change_topic_config(self.zk, topic, configs)

    def _set_rates(self, throttle: int, existing: Mapping[TopicPartition, Sequence[int]], plan: Plan) -> None:
        """maybeLimit: both rates on every broker of the existing and proposed assignments."""
        brokers = sorted({b for r in existing.values() for b in r} | {b for r in plan.values() for b in r})
        for broker in brokers:
            configs = self._config(broker_config_path(broker))
            configs[LEADER_THROTTLED_RATE] = str(throttle)
            configs[FOLLOWER_THROTTLED_RATE] = str(throttle)
            self.change_broker_config(broker, configs)
        self._print(f"The inter-broker throttle limit was set to {throttle} B/s")

    def _remove_throttles(self, topics: Sequence[str]) -> None:
        """removeThrottle: the rates from every registered broker, the replica lists from the plan's topics."""
        from client.kafka.topic_admin import change_topic_config

        changed = False
        for broker in sorted(self.registered_brokers()):
            configs = self._config(broker_config_path(broker))
            removed = [configs.pop(k, None) for k in (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)]
            removed.append(configs.pop(REPLICA_ALTER_LOG_DIRS_RATE, None))
            if any(v is not None for v in removed):
                self.change_broker_config(broker, configs)
                changed = True
        for topic in topics:
            configs = self._config(topic_config_path(topic))
            removed = [configs.pop(k, None) for k in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)]
            if any(v is not None for v in removed):
                change_topic_config(self.zk, topic, configs)
                changed = True
        if changed:
            self._print("Throttle was removed.")

    def _config(self, path: str) -> dict[str, str]:
        from client.zk.exceptions import NoNodeError

        try:
            data, _stat = self.zk.get(path)
        except NoNodeError:
            return {}
        return decode_config(data, path)

    def change_broker_config(self, broker: int, configs: Mapping[str, str]) -> None:
        """AdminZkClient.changeBrokerConfig: set or create /config/brokers/<id>, then a v2 notification."""
        from client.zk.exceptions import NodeExistsError, NoNodeError

        path, data = broker_config_path(broker), encode_config(configs)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)
        self.zk.create(
            config_change_create_path(), encode_config_change("brokers", str(broker)), sequence=True, makepath=True
        )


# ---------------------------------------------------------------- running


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    from zkraft.tools.topics import zk_session

    options = options_from_namespace(ns)
    # The files are read and checked before connecting: a bad file fails fast, cluster or not.
    topics: list[str] = []
    plan_list: list[tuple[TopicPartition, tuple[int, ...]]] = []
    if options.action == "generate":
        path = options.topics_to_move_json_file or ""
        topics = parse_topics_to_move(read_json_file(path, "topics-to-move JSON"), path)
    elif options.action != "list":
        path = options.reassignment_json_file or ""
        plan_list = parse_reassignment(read_json_file(path, "reassignment JSON"), path)
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    stream = out if out is not None else sys.stdout
    if options.bootstrap_server is not None:
        return _run_api(options, topics, plan_list, stream)
    assert options.zookeeper is not None
    try:
        with zk_session(
            options.zookeeper, options.timeout_s, command_config.zk_tls_of(options.zk_tls_config_file)
        ) as zk:
            tool = ZkReassigner(zk, stream)
            match options.action:
                case "generate":
                    tool.generate(options, topics)
                case "execute":
                    tool.execute(options, plan_list)
                case "verify":
                    tool.verify(plan_list)
                case _:
                    raise ToolUsageError(f"unknown action {options.action}")
    except (KafkaError, AdminOperationError, ZnodeDataError) as error:
        raise ToolError(str(error)) from None
    except ZkException as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    return EXIT_OK


def _run_api(
    options: ReassignOptions,
    topics: list[str],
    plan_list: list[tuple[TopicPartition, tuple[int, ...]]],
    stream: TextIO,
) -> int:
    """The actions through the admin API (zkraft/tools/reassign_api.py)."""
    from client import Admin
    from zkraft.tools.reassign_api import ApiReassigner

    assert options.bootstrap_server is not None
    try:
        security = command_config.security_of(argparse.Namespace(command_config=options.command_config))
        with Admin(options.bootstrap_server, client_id="reassign-partitions", **security) as admin:
            tool = ApiReassigner(admin, stream)
            match options.action:
                case "generate":
                    tool.generate(options, topics)
                case "execute":
                    tool.execute_api(plan_list, options.additional, options.throttle_bytes_per_s)
                case "verify":
                    tool.verify_api(plan_list, options.preserve_throttles)
                case "cancel":
                    tool.cancel(plan_list, options.preserve_throttles)
                case "list":
                    tool.list_ongoing()
                case _:
                    raise ToolUsageError(f"unknown action {options.action}")
    except (KafkaError, AdminOperationError) as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    return EXIT_OK
