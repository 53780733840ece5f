"""`zkraft topics`: Kafka's `kafka-topics.sh` (`kafka.admin.TopicCommand`, 2.x) for our cluster.

    zkraft topics --zookeeper H:P[,H:P] --create --topic foo --partitions 3 --replication-factor 2
    zkraft topics --zookeeper H:P --create --topic foo --replica-assignment 1:2,2:3 --config retention.ms=1000
    zkraft topics --zookeeper H:P --list
    zkraft topics --zookeeper H:P --describe [--topic REGEX] [--under-replicated-partitions]
        [--unavailable-partitions] [--topics-with-overrides]
    zkraft topics --zookeeper H:P --alter --topic foo --partitions 6 [--replica-assignment ...]
    zkraft topics --zookeeper H:P --delete --topic foo
    zkraft topics --bootstrap-server H:P ...      # the same through client.Admin

Flags, the order of checks and every output line are TopicCommand's (docs/research/kafka.md §6.1):
`Created topic foo.`; the 2.x describe lines (`Topic: foo\tPartitionCount: 3\t...` then one
`\tTopic: foo\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2` per partition, `Leader: none`
without a leader); `Topic foo is marked for deletion.` and its note; `Adding partitions
succeeded!`. `--topic` is a regular expression for --list, --describe, --alter and --delete,
as Kafka's IncludeList. With `--zookeeper` the tool reads and writes the znodes itself
(AdminZkClient through `client.kafka.topic_admin`), as the old tool did; with `--bootstrap-server`
it asks a broker (AdminClientTopicService), and, as Kafka's, prints nothing on --alter/--delete.

Errors: `TopicsUsageError` (bad flags, exit 2) and `TopicsError` (Kafka's message, exit 1);
the command prints either as one line.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from client.kafka.assignment import AdminOperationError, BrokerMetadata, RackAwareMode, parse_replica_assignment
from client.kafka.errors import KafkaError, TopicAlreadyExistsError
from client.kafka.znodes import (
    NO_LEADER,
    ZnodeDataError,
    decode_config,
    decode_partition_state,
    delete_topic_path,
    has_collision_chars,
    is_internal_topic,
    partition_state_path,
    topic_config_path,
)
from client.zk.exceptions import ZkException
from runtime.tls import TlsConfig
from zkraft.tools import command_config

CONNECT_TIMEOUT_S_DEFAULT = 10.0
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. "
    "To avoid issues it is best to use either, but not both."
)
PARTITION_KEY_WARNING = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of the "
    "messages will be affected"
)
DELETE_NOTE = "Note: This will have no impact if delete.topic.enable is not set to true."


class ToolError(Exception):
    """A Kafka tool (topics, console and perf tools) failed; the message is Kafka's, one line (exit 1)."""

    exit_code = EXIT_FAILURE


class ToolUsageError(ToolError):
    """The flags were wrong (exit 2)."""

    exit_code = EXIT_USAGE


TopicsError = ToolError
TopicsUsageError = ToolUsageError


# ---------------------------------------------------------------- options


ACTIONS = ("create", "list", "describe", "alter", "delete")


@dataclass(frozen=True, slots=True)
class TopicCommandOptions:
    action: str
    zookeeper: str | None = None
    bootstrap_server: str | None = None
    topic: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    replica_assignment: str | None = None
    configs: tuple[str, ...] = ()
    delete_configs: tuple[str, ...] = ()
    if_exists: bool = False
    if_not_exists: bool = False
    under_replicated_partitions: bool = False
    unavailable_partitions: bool = False
    topics_with_overrides: bool = False
    exclude_internal: bool = False
    disable_rack_aware: bool = False
    timeout_s: float = CONNECT_TIMEOUT_S_DEFAULT
    given: frozenset[str] = field(default_factory=frozenset)  # option names the user gave, for the checks
    command_config: Path | None = None  # --command-config: client properties (TLS) for --bootstrap-server
    zk_tls_config_file: Path | None = None  # --zk-tls-config-file: TLS to the quorum for --zookeeper


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """kafka-topics' flags (2.x names) on an argparse parser."""
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="the quorum: read and write znodes directly")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a broker: go through the Admin API")
    command_config.add_argument(parser)
    command_config.add_zk_tls_argument(parser)
    parser.add_argument("--topic", help="the topic (a regular expression except with --create)")
    parser.add_argument("--partitions", type=int, help="number of partitions (--create, or the new total for --alter)")
    parser.add_argument("--replication-factor", type=int, help="replicas of each partition (--create)")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B3:B4", help="replicas per partition, by broker id")
    parser.add_argument("--config", action="append", default=[], metavar="K=V", help="topic config (repeatable)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K", help="config to remove (--alter)")
    parser.add_argument("--if-exists", action="store_true", help="--alter/--delete/--describe only if it exists")
    parser.add_argument("--if-not-exists", action="store_true", help="--create only if it does not exist")
    parser.add_argument("--under-replicated-partitions", action="store_true", help="partitions with isr < replicas")
    parser.add_argument("--unavailable-partitions", action="store_true", help="partitions without a live leader")
    parser.add_argument("--topics-with-overrides", action="store_true", help="topics that have config overrides")
    parser.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    parser.add_argument("--disable-rack-aware", action="store_true", help="assign replicas ignoring racks")
    parser.add_argument(
        "--timeout", type=float, default=CONNECT_TIMEOUT_S_DEFAULT, help="seconds to wait for a connection"
    )


_OPTION_ATTRS = (
    "zookeeper", "bootstrap_server", "topic", "partitions", "replication_factor", "replica_assignment",
    "if_exists", "if_not_exists", "under_replicated_partitions", "unavailable_partitions",
    "topics_with_overrides", "exclude_internal", "disable_rack_aware",
)  # fmt: skip


def options_from_namespace(ns: argparse.Namespace) -> TopicCommandOptions:
    """Build the options and run TopicCommandOptions.checkArgs' checks (TopicsUsageError, Kafka's words)."""
    chosen = [a for a in ACTIONS if getattr(ns, a, False)]
    if len(chosen) != 1:
        raise TopicsUsageError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
        )
    given = {a for a in _OPTION_ATTRS if getattr(ns, a) not in (None, False)}
    if ns.config:
        given.add("config")
    if ns.delete_config:
        given.add("delete_config")
    given.add(chosen[0])
    options = TopicCommandOptions(
        action=chosen[0],
        zookeeper=ns.zookeeper,
        bootstrap_server=ns.bootstrap_server,
        command_config=getattr(ns, "command_config", None),
        zk_tls_config_file=getattr(ns, "zk_tls_config_file", None),
        topic=ns.topic,
        partitions=ns.partitions,
        replication_factor=ns.replication_factor,
        replica_assignment=ns.replica_assignment,
        configs=tuple(ns.config),
        delete_configs=tuple(ns.delete_config),
        if_exists=ns.if_exists,
        if_not_exists=ns.if_not_exists,
        under_replicated_partitions=ns.under_replicated_partitions,
        unavailable_partitions=ns.unavailable_partitions,
        topics_with_overrides=ns.topics_with_overrides,
        exclude_internal=ns.exclude_internal,
        disable_rack_aware=ns.disable_rack_aware,
        timeout_s=ns.timeout,
        given=frozenset(given),
    )
    check_options(options)
    return options


def _flag(attr: str) -> str:
    return "[" + attr.replace("_", "-") + "]"


def _require(options: TopicCommandOptions, *attrs: str) -> None:
    for attr in attrs:
        if attr not in options.given:
            raise TopicsUsageError(f'Missing required argument "{_flag(attr)}"')


def _invalid_with(options: TopicCommandOptions, attr: str, allowed_actions: set[str]) -> None:
    """CommandLineUtils.checkInvalidArgs: `attr` may only be used with `allowed_actions`."""
    if attr in options.given and options.action not in allowed_actions:
        raise TopicsUsageError(f'Option "{_flag(attr)}" can\'t be used with option "{_flag(options.action)}"')


def check_options(options: TopicCommandOptions) -> None:
    if (options.bootstrap_server is None) == (options.zookeeper is None):
        raise TopicsUsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    action = options.action
    if action == "describe" and options.if_exists:
        _require(options, "topic")
    if action not in ("list", "describe"):
        _require(options, "topic")
    if action == "create" and options.replica_assignment is None and options.zookeeper is not None:
        _require(options, "partitions", "replication_factor")
    if options.bootstrap_server is not None and action == "alter":
        if options.configs or options.delete_configs:
            raise TopicsUsageError(
                'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]"; '
                "use kafka-configs for topic configs"
            )
        _require(options, "partitions")
    _invalid_with(options, "config", {"alter", "create"})
    _invalid_with(options, "delete_config", {"alter"})
    _invalid_with(options, "partitions", {"alter", "create"})
    _invalid_with(options, "replication_factor", {"create"})
    _invalid_with(options, "replica_assignment", {"create", "alter"})
    if action == "create" and options.replica_assignment is not None:
        for other in ("partitions", "replication_factor"):
            if other in options.given:
                raise TopicsUsageError(f'Option "[replica-assignment]" can\'t be used with option "{_flag(other)}"')
    for report in ("under_replicated_partitions", "unavailable_partitions", "topics_with_overrides"):
        _invalid_with(options, report, {"describe"})
    _invalid_with(options, "if_exists", {"alter", "delete", "describe"})
    _invalid_with(options, "if_not_exists", {"create"})
    _invalid_with(options, "exclude_internal", {"list", "describe"})
    _invalid_with(options, "disable_rack_aware", {"create", "alter"})


def parse_topic_configs(configs: Sequence[str]) -> dict[str, str]:
    """TopicCommand.parseTopicConfigsToBeAdded: `k=v` each, split on '=' with blanks around it, then validated."""
    from client.kafka.topic_admin import validate_topic_configs

    out: dict[str, str] = {}
    for text in configs:
        pieces = _java_split(re.split(r"\s*=\s*", text))
        if len(pieces) != 2:
            raise TopicsError(
                'requirement failed: Invalid topic config: all configs to be added must be in the format "key=val".'
            )
        out[pieces[0].strip()] = pieces[1].strip()
    return validate_topic_configs(out)


def _java_split(parts: list[str]) -> list[str]:
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def topic_filter(pattern: str) -> re.Pattern[str]:
    """IncludeList: ',' means '|', blanks and surrounding quotes are dropped; the whole name must match."""
    regex = pattern.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"^[\"']+", "", regex)
    regex = re.sub(r"[\"']+$", "", regex)
    try:
        return re.compile(regex)
    except re.error:
        raise TopicsError(f"{regex} is an invalid regex.") from None


def select_topics(all_topics: Sequence[str], pattern: str | None, exclude_internal: bool) -> list[str]:
    """TopicService.doGetTopics: sorted, filtered by the --topic regex and --exclude-internal."""
    allowed = topic_filter(pattern) if pattern is not None else None
    return [
        t
        for t in sorted(all_topics)
        if (allowed is None or allowed.fullmatch(t)) and not (exclude_internal and is_internal_topic(t))
    ]


def ensure_topic_exists(found: Sequence[str], requested: str | None, require: bool) -> None:
    if requested is not None and require and not found:
        raise TopicsError(f"Topic '{requested}' does not exist as expected")


# ---------------------------------------------------------------- describe output (pure)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int | None  # None: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def format_topic_line(
    topic: str, partition_count: int, replication_factor: int, configs: Mapping[str, str], marked: bool
) -> str:
    shown = ",".join(f"{k}={v}" for k, v in configs.items())
    line = (
        f"Topic: {topic}\tPartitionCount: {partition_count}\tReplicationFactor: {replication_factor}\tConfigs: {shown}"
    )
    return line + ("\tMarkedForDeletion: true" if marked else "")


def format_partition_line(topic: str, info: PartitionInfo, marked: bool) -> str:
    leader = "none" if info.leader is None else str(info.leader)
    line = (
        f"\tTopic: {topic}\tPartition: {info.partition}\tLeader: {leader}"
        f"\tReplicas: {','.join(map(str, info.replicas))}\tIsr: {','.join(map(str, info.isr))}"
    )
    return line + ("\tMarkedForDeletion: true" if marked else "")


@dataclass(frozen=True, slots=True)
class DescribeFilter:
    """TopicCommand.DescribeOptions: which lines --describe prints."""

    under_replicated: bool
    unavailable: bool
    with_overrides: bool
    live_brokers: frozenset[int]

    @property
    def describe_configs(self) -> bool:
        return not self.unavailable and not self.under_replicated

    @property
    def describe_partitions(self) -> bool:
        return not self.with_overrides

    def show_partition(self, info: PartitionInfo) -> bool:
        if self.describe_configs:
            return True
        under = len(info.replicas) - len(info.isr) > 0
        unavailable = info.leader is None or info.leader not in self.live_brokers
        return (self.under_replicated and under) or (self.unavailable and unavailable)


def describe_lines(
    topic: str,
    partitions: Sequence[PartitionInfo],
    configs: Mapping[str, str],
    marked: bool,
    report: DescribeFilter,
) -> Iterator[str]:
    if report.describe_configs and (not report.with_overrides or configs):
        rf = len(partitions[0].replicas) if partitions else 0
        yield format_topic_line(topic, len(partitions), rf, configs, marked)
    if report.describe_partitions:
        for info in sorted(partitions, key=lambda i: i.partition):
            if report.show_partition(info):
                yield format_partition_line(topic, info, marked)


# ---------------------------------------------------------------- services


class TopicService(Protocol):
    def create(self, options: TopicCommandOptions) -> None: ...
    def list(self, options: TopicCommandOptions) -> None: ...
    def describe(self, options: TopicCommandOptions) -> None: ...
    def alter(self, options: TopicCommandOptions) -> None: ...
    def delete(self, options: TopicCommandOptions) -> None: ...


def _replica_assignment(options: TopicCommandOptions) -> dict[int, list[int]] | None:
    if options.replica_assignment is None:
        return None
    return parse_replica_assignment(options.replica_assignment)


class ZkTopicService:
    """ZookeeperTopicService: the znodes, read and written with client.ZkClient."""

    def __init__(self, zk: Any, out: TextIO) -> None:
        self.zk = zk
        self.out = out

    def _print(self, line: str) -> None:
        print(line, file=self.out)

    def _topics(self, options: TopicCommandOptions) -> list[str]:
        from client.kafka.topic_admin import existing_topics

        return select_topics(existing_topics(self.zk), options.topic, options.exclude_internal)

    def _marked(self, topic: str) -> bool:
        return self.zk.exists(delete_topic_path(topic)) is not None

    def _rack_mode(self, options: TopicCommandOptions) -> RackAwareMode:
        return RackAwareMode.DISABLED if options.disable_rack_aware else RackAwareMode.ENFORCED

    def create(self, options: TopicCommandOptions) -> None:
        from client.kafka.topic_admin import create_topic, existing_topics, live_brokers, plan_topic_creation

        topic = options.topic or ""
        if has_collision_chars(topic):
            self._print(COLLISION_WARNING)
        configs = parse_topic_configs(options.configs)
        manual = _replica_assignment(options)
        brokers: list[BrokerMetadata] = [] if manual is not None else live_brokers(self.zk, self._rack_mode(options))
        try:
            plan = plan_topic_creation(
                topic,
                partitions=None if manual is not None else options.partitions,
                replication_factor=None if manual is not None else options.replication_factor,
                replica_assignment=manual,
                configs=configs,
                brokers=brokers,
                existing_topics=existing_topics(self.zk),
            )
            create_topic(self.zk, plan)
        except TopicAlreadyExistsError:
            if options.if_not_exists:
                return
            raise
        self._print(f"Created topic {topic}.")

    def list(self, options: TopicCommandOptions) -> None:
        for topic in self._topics(options):
            self._print(f"{topic} - marked for deletion" if self._marked(topic) else topic)

    def describe(self, options: TopicCommandOptions) -> None:
        from client.kafka.topic_admin import broker_racks, topic_assignment

        topics = self._topics(options)
        ensure_topic_exists(topics, options.topic, not options.if_exists)
        report = DescribeFilter(
            options.under_replicated_partitions,
            options.unavailable_partitions,
            options.topics_with_overrides,
            frozenset(broker_racks(self.zk)),
        )
        for topic in topics:
            assignment = topic_assignment(self.zk, topic)
            if assignment is None:
                self._print(f"Topic {topic} doesn't exist!")
                continue
            partitions = [self._partition_info(topic, p, r) for p, r in assignment.partitions.items()]
            configs = self._configs(topic) if report.describe_configs else {}
            for line in describe_lines(topic, partitions, configs, self._marked(topic), report):
                self._print(line)

    def _configs(self, topic: str) -> dict[str, str]:
        from client.zk.exceptions import NoNodeError

        path = topic_config_path(topic)
        try:
            data, _stat = self.zk.get(path)
        except NoNodeError:
            return {}
        return decode_config(data, path)

    def _partition_info(self, topic: str, partition: int, replicas: Sequence[int]) -> PartitionInfo:
        from client.zk.exceptions import NoNodeError

        try:
            data, _stat = self.zk.get(partition_state_path(topic, partition))
        except NoNodeError:
            return PartitionInfo(partition, None, tuple(replicas), ())
        state = decode_partition_state(topic, partition, data)
        leader = None if state.leader == NO_LEADER else state.leader
        return PartitionInfo(partition, leader, tuple(replicas), state.isr)

    def alter(self, options: TopicCommandOptions) -> None:
        from client.kafka.topic_admin import add_partitions, change_topic_config, live_brokers, topic_assignment

        topics = self._topics(options)
        ensure_topic_exists(topics, options.topic, not options.if_exists)
        for topic in topics:
            if options.configs or options.delete_configs:
                self._print(
                    "WARNING: Altering topic configuration from this script has been deprecated and may be "
                    "removed in future releases."
                )
                self._print("         Going forward, please use kafka-configs.sh for this functionality")
                configs = {**self._configs(topic), **parse_topic_configs(options.configs)}
                for name in options.delete_configs:
                    configs.pop(name.strip(), None)
                change_topic_config(self.zk, topic, configs)
                self._print(f"Updated config for topic {topic}.")
            if options.partitions is None:
                continue
            if is_internal_topic(topic):
                raise TopicsError(f"The number of partitions for the internal topic {topic} cannot be changed.")
            self._print(PARTITION_KEY_WARNING)
            existing = topic_assignment(self.zk, topic)
            current_count = len(existing.partitions) if existing is not None else 0
            manual = _replica_assignment(options)
            new_assignment = None
            if manual is not None:
                new_assignment = {p: r for p, r in manual.items() if p >= current_count} or None
            brokers = live_brokers(self.zk, self._rack_mode(options))
            add_partitions(self.zk, topic, options.partitions, new_assignment, brokers)
            self._print("Adding partitions succeeded!")

    def delete(self, options: TopicCommandOptions) -> None:
        from client.kafka.topic_admin import mark_topic_for_deletion

        topics = self._topics(options)
        ensure_topic_exists(topics, options.topic, not options.if_exists)
        for topic in topics:
            if is_internal_topic(topic):
                raise TopicsError(
                    f"Topic {topic} is a kafka internal topic and is not allowed to be marked for deletion."
                )
            if mark_topic_for_deletion(self.zk, topic):
                self._print(f"Topic {topic} is marked for deletion.")
                self._print(DELETE_NOTE)
            else:
                self._print(f"Topic {topic} is already marked for deletion.")


class AdminTopicService:
    """AdminClientTopicService: the same actions through client.Admin and a broker."""

    def __init__(self, admin: Any, out: TextIO) -> None:
        self.admin = admin
        self.out = out

    def _print(self, line: str) -> None:
        print(line, file=self.out)

    def _topics(self, options: TopicCommandOptions) -> list[str]:
        return select_topics(list(self.admin.list_topics()), options.topic, options.exclude_internal)

    def create(self, options: TopicCommandOptions) -> None:
        from client import NewTopic

        topic = options.topic or ""
        if has_collision_chars(topic):
            self._print(COLLISION_WARNING)
        rf = options.replication_factor
        if rf is not None and not 1 <= rf <= 32767:
            raise TopicsError("The replication factor must be between 1 and 32767 inclusive")
        if options.partitions is not None and options.partitions < 1:
            raise TopicsError("The partitions must be greater than 0")
        configs = parse_topic_configs(options.configs)
        manual = _replica_assignment(options)
        new_topic = NewTopic(
            topic,
            options.partitions if options.partitions is not None else -1,
            rf if rf is not None else -1,
            replica_assignments=manual,
            topic_configs=configs or None,
        )
        try:
            _first_result(self.admin.create_topics([new_topic]))
        except TopicAlreadyExistsError:
            if options.if_not_exists:
                return
            raise
        self._print(f"Created topic {topic}.")

    def list(self, options: TopicCommandOptions) -> None:
        for topic in self._topics(options):
            self._print(topic)

    def describe(self, options: TopicCommandOptions) -> None:
        topics = self._topics(options)
        ensure_topic_exists(topics, options.topic, not options.if_exists)
        if not topics:
            return
        live = frozenset(b[0] for b in self.admin.describe_cluster().brokers)
        report = DescribeFilter(
            options.under_replicated_partitions, options.unavailable_partitions, options.topics_with_overrides, live
        )
        configs = self._non_default_configs(topics) if report.describe_configs else {}
        for description in self.admin.describe_topics(topics):
            partitions = [
                PartitionInfo(p.partition, None if p.leader < 0 else p.leader, tuple(p.replicas), tuple(p.isr))
                for p in description.partitions
            ]
            shown = configs.get(description.name, {})
            for line in describe_lines(description.name, partitions, shown, False, report):
                self._print(line)

    def _non_default_configs(self, topics: Sequence[str]) -> dict[str, dict[str, str]]:
        """TopicCommand (2.8, --bootstrap-server): each topic's configs whose source is not DEFAULT_CONFIG (its
        overrides, and the broker's static settings such as log.segment.bytes from server.properties)."""
        from client.kafka.config_resources import ConfigResource, ConfigResourceType

        if not topics:
            return {}
        described = self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
        return {d.name: {k: v or "" for k, v in d.non_default().items()} for d in described}

    def alter(self, options: TopicCommandOptions) -> None:
        from client import NewPartitions

        topics = self._topics(options)
        ensure_topic_exists(topics, options.topic, not options.if_exists)
        manual = _replica_assignment(options)
        requests = {}
        for topic in topics:
            new_assignments = None
            if manual is not None:
                (description,) = self.admin.describe_topics([topic])
                start = len(description.partitions)
                new_assignments = [r for p, r in sorted(manual.items()) if p >= start] or None
            requests[topic] = NewPartitions(options.partitions or 0, new_assignments)
        if requests:
            _first_result(self.admin.create_partitions(requests))

    def delete(self, options: TopicCommandOptions) -> None:
        topics = self._topics(options)
        ensure_topic_exists(topics, options.topic, not options.if_exists)
        internal = [t for t in topics if is_internal_topic(t)]
        if internal:
            raise TopicsError(
                f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for deletion."
            )
        if topics:
            _first_result(self.admin.delete_topics(topics))


def _first_result(result: Any) -> Any:
    """An Admin call may return per-topic errors instead of raising: raise the first one."""
    if isinstance(result, Mapping):
        for value in result.values():
            if isinstance(value, BaseException):
                raise value
    return result


# ---------------------------------------------------------------- running


@contextlib.contextmanager
def zk_session(hosts: str, timeout_s: float, tls: TlsConfig | None = None) -> Iterator[Any]:
    from client import ZkClient
    from client.kafka.znodes import secure_default_acls
    from client.zk.exceptions import ZkException
    from runtime.jaas import JaasError, sasl_options_from_env

    # Kafka's tools log in when KAFKA_OPTS names a JAAS file, and then create with Kafka's ACLs
    # (KafkaZkClient's isSecure = JaasUtils.isZkSaslEnabled): what zookeeper.set.acl brokers let write.
    try:
        sasl = sasl_options_from_env("KAFKA_OPTS")
    except JaasError as error:
        raise TopicsError(f"KAFKA_OPTS: {error}") from None
    default_acl = secure_default_acls if sasl is not None else None
    client = ZkClient(hosts, timeout=timeout_s, tls=tls, sasl_options=sasl, default_acl=default_acl)
    try:
        client.start()
    except (ZkException, OSError, ValueError) as error:
        with contextlib.suppress(Exception):
            client.close()
        reason = " ".join(str(error).split()) or type(error).__name__
        raise TopicsError(f"cannot connect to {hosts} within {timeout_s:g}s: {reason}") from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.stop()
        with contextlib.suppress(Exception):
            client.close()


@contextlib.contextmanager
def _admin(bootstrap: str, security: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """An Admin with the SDK's security keywords (zkraft/tools/command_config.security_of)."""
    from client import Admin

    admin = Admin(bootstrap, **(security or {}))
    try:
        yield admin
    finally:
        with contextlib.suppress(Exception):
            admin.close()


def check_hosts(text: str, flag: str) -> str:
    from zkraft.tools.quorum_status import ServerListError, parse_server_list

    addresses, _slash, _chroot = text.partition("/")
    try:
        parse_server_list(addresses)
    except ServerListError as error:
        raise TopicsUsageError(str(error).replace("--server", flag, 1)) from None
    return text


def run(options: TopicCommandOptions, out: TextIO | None = None) -> int:
    """Run one action; TopicsError (one line, Kafka's message) on failure."""
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    stream = out if out is not None else sys.stdout
    try:
        if options.zookeeper is not None:
            zk_tls = command_config.zk_tls_of(options.zk_tls_config_file)
            with zk_session(check_hosts(options.zookeeper, "--zookeeper"), options.timeout_s, zk_tls) as zk:
                _dispatch(ZkTopicService(zk, stream), options)
        else:
            security = command_config.security_of(argparse.Namespace(command_config=options.command_config))
            with _admin(check_hosts(options.bootstrap_server or "", "--bootstrap-server"), security) as admin:
                _dispatch(AdminTopicService(admin, stream), options)
    except (KafkaError, AdminOperationError, ZnodeDataError) as error:
        raise TopicsError(str(error)) from None
    except ZkException as error:
        raise TopicsError(" ".join(str(error).split()) or type(error).__name__) from None
    return EXIT_OK


def _dispatch(service: TopicService, options: TopicCommandOptions) -> None:
    match options.action:
        case "create":
            service.create(options)
        case "list":
            service.list(options)
        case "describe":
            service.describe(options)
        case "alter":
            service.alter(options)
        case "delete":
            service.delete(options)
        case _:
            raise TopicsUsageError(f"unknown action {options.action}")
