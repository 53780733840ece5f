"""`zkraft consumer-groups`: Kafka's `kafka-consumer-groups.sh` (`kafka.admin.ConsumerGroupCommand`, 2.x).

    zkraft consumer-groups --bootstrap-server H:P --list
    zkraft consumer-groups --bootstrap-server H:P --describe (--group G | --all-groups)
        [--members [--verbose] | --state]
    zkraft consumer-groups --bootstrap-server H:P --delete (--group G | --all-groups)
    zkraft consumer-groups --bootstrap-server H:P --reset-offsets --group G (--topic T[:P,P] | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-current) (--dry-run | --execute)

Output is ConsumerGroupCommand's: the describe table
`GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID` with its column
widths (group, topic, consumer id and host at least 15 wide, growing to the longest value), rows of
each member with partitions (largest assignment first, partitions in order), then committed partitions
nobody owns with `-` for the member columns; `Consumer group 'G' has no active members.` and
`Warning: Consumer group 'G' is rebalancing.` on stderr; `Error: Consumer group 'G' does not exist.`
for a Dead group. Resetting refuses a group with members, in Kafka's words, and prints
`GROUP TOPIC PARTITION NEW-OFFSET`; without --execute nothing is changed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from client.kafka.errors import KafkaError
from client.kafka.structs import TopicPartition
from zkraft.tools import command_config
from zkraft.tools.topics import ToolError, ToolUsageError, check_hosts

MISSING = "-"
ACTIONS = ("list", "describe", "delete", "reset_offsets")
SCENARIOS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_current")
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting."
)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", help="HOST:PORT[,...] of the brokers")
    command_config.add_argument(parser)
    parser.add_argument("--list", action="store_true", help="list all consumer groups")
    parser.add_argument("--describe", action="store_true", help="describe the group: offsets, --members or --state")
    parser.add_argument("--delete", action="store_true", help="delete the group (it must have no members)")
    parser.add_argument("--reset-offsets", action="store_true", help="reset the group's committed offsets")
    parser.add_argument("--group", action="append", default=[], help="the consumer group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (--describe, --delete)")
    parser.add_argument("--members", action="store_true", help="with --describe: the members")
    parser.add_argument("--verbose", action="store_true", help="with --describe --members: their partitions")
    parser.add_argument("--state", action="store_true", help="with --describe: the group's state")
    parser.add_argument("--offsets", action="store_true", help="with --describe: the offsets (the default)")
    parser.add_argument("--topic", action="append", default=[], help="with --reset-offsets: TOPIC or TOPIC:P,P")
    parser.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every committed topic")
    parser.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    parser.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    parser.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    parser.add_argument("--to-offset", type=int, help="reset to this offset (clamped to the log's range)")
    parser.add_argument("--shift-by", type=int, help="move the committed offset by N (clamped)")
    parser.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    parser.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--timeout", type=int, default=5000, help="ms to wait for the group (accepted)")


@dataclass(frozen=True, slots=True)
class GroupCommandOptions:
    bootstrap_server: str
    action: str
    groups: tuple[str, ...]
    all_groups: bool
    view: str  # offsets, members, state
    verbose: bool
    topics: tuple[str, ...]
    all_topics: bool
    scenario: str | None
    value: int | None
    execute: bool
    dry_run: bool


def check_options(ns: argparse.Namespace) -> GroupCommandOptions:
    """ConsumerGroupCommand.checkArgs, in its words (ToolUsageError)."""
    actions = [a for a in ACTIONS if getattr(ns, a)]
    if len(actions) != 1:
        raise ToolUsageError(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"
        )
    action = actions[0]
    if not ns.bootstrap_server:
        raise ToolUsageError('Missing required argument "[bootstrap-server]"')
    check_hosts(ns.bootstrap_server, "--bootstrap-server")
    flag = "reset-offsets" if action == "reset_offsets" else action
    if action != "list" and not ns.group and not (ns.all_groups and action != "reset_offsets"):
        raise ToolUsageError(f"Option [{flag}] takes one of these options: [all-groups], [group]")
    if ns.group and ns.all_groups:
        raise ToolUsageError(f"Option [{flag}] takes only one of these options: [all-groups], [group]")
    views = [v for v in ("members", "offsets", "state") if getattr(ns, v)]
    if len(views) > 1:
        raise ToolUsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
    if views and action != "describe":
        raise ToolUsageError(f"Option [{views[0]}] can only be used with [describe]")
    scenario, value = None, None
    if action == "reset_offsets":
        if not ns.topic and not ns.all_topics:
            raise ToolUsageError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
        if ns.topic and ns.all_topics:
            raise ToolUsageError("Option [reset-offsets] takes only one of these options: [all-topics], [topic]")
        chosen = [s for s in SCENARIOS if getattr(ns, s) not in (None, False)]
        if len(chosen) != 1:
            raise ToolUsageError(
                "Option [reset-offsets] takes exactly one of these options: [to-earliest], [to-latest], "
                "[to-current], [to-offset], [shift-by]"
            )
        scenario = chosen[0]
        value = getattr(ns, scenario) if scenario in ("to_offset", "shift_by") else None
        if ns.dry_run and ns.execute:
            raise ToolUsageError("Option [reset-offsets] only accepts one of [execute], [dry-run]")
    elif ns.execute or ns.dry_run:
        raise ToolUsageError("Option [execute] and [dry-run] can only be used with [reset-offsets]")
    return GroupCommandOptions(
        ns.bootstrap_server,
        action,
        tuple(ns.group),
        bool(ns.all_groups),
        views[0] if views else "offsets",
        bool(ns.verbose),
        tuple(ns.topic),
        bool(ns.all_topics),
        scenario,
        value,
        bool(ns.execute),
        bool(ns.dry_run),
    )


# ---------------------------------------------------------------- formatting (pure)


@dataclass(frozen=True, slots=True)
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def _left(text: str, width: int) -> str:
    return text.ljust(width)


def format_offsets(rows: Sequence[OffsetRow]) -> str:
    """ConsumerGroupCommand.printOffsets: a blank line, the header, one line per row."""
    group_w = max([15] + [len(r.group) for r in rows])
    topic_w = max([15] + [len(_cell(r.topic)) for r in rows])
    consumer_w = max([15] + [len(_cell(r.consumer_id)) for r in rows])
    host_w = max([15] + [len(_cell(r.host)) for r in rows])

    def line(*cols: str) -> str:
        g, t, p, o, e, lag, c, h, cl = cols
        return " ".join(
            [
                _left(g, group_w),
                _left(t, topic_w),
                _left(p, 10),
                _left(o, 15),
                _left(e, 15),
                _left(lag, 15),
                _left(c, consumer_w),
                _left(h, host_w),
                cl,
            ]
        )

    out = ["", line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                    "CLIENT-ID")]  # fmt: skip
    for r in rows:
        out.append(
            line(
                r.group,
                _cell(r.topic),
                _cell(r.partition),
                _cell(r.offset),
                _cell(r.log_end_offset),
                _cell(r.lag),
                _cell(r.consumer_id),
                _cell(r.host),
                _cell(r.client_id),
            )
        )
    return "\n".join(out) + "\n"


def _assignment_text(partitions: Sequence[TopicPartition]) -> str:
    if not partitions:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(sorted(t + "(" + ",".join(map(str, sorted(ps))) + ")" for t, ps in by_topic.items()))


def format_members(group: Any, verbose: bool) -> str:
    """ConsumerGroupCommand.printMembers (without GROUP-INSTANCE-ID unless a member has one)."""
    members = group.members
    group_w = max(15, len(group.group_id))
    consumer_w = max([15] + [len(m.member_id) for m in members])
    instance_w = max([17] + [len(m.group_instance_id or MISSING) for m in members])
    host_w = max([15] + [len(m.host) for m in members])
    client_w = max([15] + [len(m.client_id) for m in members])
    with_instance = any(m.group_instance_id for m in members)

    def line(g: str, c: str, i: str, h: str, cl: str, n: str) -> str:
        cols = [_left(g, group_w), _left(c, consumer_w)]
        if with_instance:
            cols.append(_left(i, instance_w))
        cols += [_left(h, host_w), _left(cl, client_w), _left(n, 15)]
        return " ".join(cols) + " "

    header = line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    out = ["", header + ("ASSIGNMENT" if verbose else "")]
    for m in members:
        row = line(
            group.group_id,
            m.member_id,
            m.group_instance_id or MISSING,
            m.host,
            m.client_id,
            str(len(m.assignment)),
        )
        out.append(row + (_assignment_text(m.assignment) if verbose else ""))
    return "\n".join(out) + "\n"


def format_state(group: Any) -> str:
    """ConsumerGroupCommand.printStates (the first column is as wide as the coordinator's, as Kafka's)."""
    c = group.coordinator
    coordinator = f"{c.host}:{c.port} ({c.node_id})"
    width = max(25, len(coordinator))

    def line(*cols: str) -> str:
        g, co, strategy, state, n = cols
        return "\n" + " ".join([_left(g, width), _left(co, 25), _left(strategy, 20), _left(state, 15), n])

    return (
        line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
        + line(group.group_id, coordinator, group.protocol, group.state, str(len(group.members)))
        + "\n"
    )


def format_reset(group_id: str, offsets: dict[TopicPartition, int]) -> str:
    """ConsumerGroupCommand.printOffsetsToReset."""
    fmt = "{:<30} {:<30} {:<10} {:<15}"
    out = ""
    if offsets:
        out += "\n" + fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for tp, offset in sorted(offsets.items()):
        out += "\n" + fmt.format(group_id, tp.topic, tp.partition, offset)
    return out + "\n"


def offset_rows(
    group: Any, committed: dict[TopicPartition, int], log_end: dict[TopicPartition, int]
) -> list[OffsetRow]:
    """collectGroupOffsets: members with partitions, largest assignment first; then committed, unowned ones."""
    rows: list[OffsetRow] = []
    owned: set[TopicPartition] = set()
    members = sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment))
    for m in members:
        owned.update(m.assignment)
        for tp in sorted(m.assignment, key=lambda tp: tp.partition):
            rows.append(
                OffsetRow(
                    group.group_id,
                    tp.topic,
                    tp.partition,
                    committed.get(tp),
                    log_end.get(tp),
                    m.member_id,
                    m.host,
                    m.client_id,
                )  # fmt: skip
            )
    unowned = sorted((tp for tp in committed if tp not in owned), key=lambda tp: tp.partition)
    for tp in unowned:
        rows.append(
            OffsetRow(
                group.group_id, tp.topic, tp.partition, committed[tp], log_end.get(tp), MISSING, MISSING, MISSING
            )  # fmt: skip
        )
    return rows


def state_message(group_id: str, state: str) -> tuple[str | None, bool]:
    """shouldPrintMemberState: (the stderr line, whether the group exists)."""
    match state:
        case "Dead":
            return f"Error: Consumer group '{group_id}' does not exist.", False
        case "Empty":
            return f"\nConsumer group '{group_id}' has no active members.", True
        case "PreparingRebalance" | "CompletingRebalance":
            return f"\nWarning: Consumer group '{group_id}' is rebalancing.", True
        case _:
            return None, True


# ---------------------------------------------------------------- running


@contextmanager
def _clients(bootstrap: str, security: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    from client import Admin, Consumer

    admin = Admin(bootstrap, client_id="consumer-groups", **security)
    try:
        consumer = Consumer(bootstrap_servers=bootstrap, client_id="consumer-groups", **security)
        try:
            yield admin, consumer
        finally:
            consumer.close()
    finally:
        admin.close()


def run(ns: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    options = check_options(ns)
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        with _clients(options.bootstrap_server, command_config.security_of(ns)) as (admin, consumer):
            command = _Command(admin, consumer, options, out, err)
            match options.action:
                case "list":
                    command.list_groups()
                case "describe":
                    command.describe_groups()
                case "delete":
                    command.delete_groups()
                case "reset_offsets":
                    command.reset_offsets()
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    return 0


class _Command:
    def __init__(self, admin: Any, consumer: Any, options: GroupCommandOptions, out: TextIO, err: TextIO) -> None:
        self.admin = admin
        self.consumer = consumer
        self.options = options
        self.out = out
        self.err = err

    def _group_ids(self) -> list[str]:
        if self.options.all_groups:
            return [g.group_id for g in self.admin.list_consumer_groups()]
        return list(self.options.groups)

    def list_groups(self) -> None:
        for group in self.admin.list_consumer_groups():
            print(group.group_id, file=self.out)

    def describe_groups(self) -> None:
        for group_id in self._group_ids():
            (group,) = self.admin.describe_consumer_groups([group_id])
            message, exists = state_message(group_id, group.state)
            if self.options.view == "state":
                if message:
                    print(message, file=self.err)
                if exists:
                    self.out.write(format_state(group))
                continue
            if self.options.view == "members":
                if message:
                    print(message, file=self.err)
                if exists and group.members:
                    self.out.write(format_members(group, self.options.verbose))
                continue
            committed = {tp: o.offset for tp, o in self.admin.list_consumer_group_offsets(group_id).items()}
            owned = {tp for m in group.members for tp in m.assignment}
            log_end = self.consumer.end_offsets(sorted(owned | set(committed))) if (owned or committed) else {}
            rows = offset_rows(group, committed, log_end)
            if message:
                print(message, file=self.err)
            if exists and rows:
                self.out.write(format_offsets(rows))

    def delete_groups(self) -> None:
        results = self.admin.delete_consumer_groups(self._group_ids())
        ok = [g for g, error in results if error is None]
        failed = [(g, error) for g, error in results if error is not None]
        quoted = ", ".join(f"'{g}'" for g in ok)
        if not failed:
            print(f"Deletion of requested consumer groups ({quoted}) was successful.", file=self.out)
            return
        print("Error: Deletion of some consumer groups failed:", file=self.err)
        for group, error in failed:
            print(f"* Group '{group}' could not be deleted due to: {type(error).__name__}: {error}", file=self.out)
        if ok:
            print(f"\nThese consumer groups were deleted successfully: {quoted}", file=self.out)
        raise ToolError(f"deleting consumer group(s) {', '.join(g for g, _ in failed)} failed")

    def reset_offsets(self) -> None:
        options = self.options
        if not options.execute and not options.dry_run:
            print(DRY_RUN_WARNING, file=self.err)
        for group_id in self._group_ids():
            (group,) = self.admin.describe_consumer_groups([group_id])
            if group.state not in ("Empty", "Dead"):
                raise ToolError(
                    f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state "
                    f"is {group.state}."
                )
            committed = {tp: o.offset for tp, o in self.admin.list_consumer_group_offsets(group_id).items()}
            partitions = self._partitions(committed)
            new = self._new_offsets(partitions, committed)
            if options.execute:
                self.admin.alter_consumer_group_offsets(group_id, new)
            self.out.write(format_reset(group_id, new))

    def _partitions(self, committed: dict[TopicPartition, int]) -> list[TopicPartition]:
        if self.options.all_topics:
            return sorted(committed)
        out: list[TopicPartition] = []
        for spec in self.options.topics:
            topic, _, ids = spec.partition(":")
            if ids:
                try:
                    out.extend(TopicPartition(topic, int(p)) for p in ids.split(",") if p.strip())
                except ValueError:
                    raise ToolUsageError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P,P,...") from None
                continue
            known = self.consumer.partitions_for_topic(topic)
            if not known:
                raise ToolError(f"Topic {topic} does not exist")
            out.extend(TopicPartition(topic, p) for p in sorted(known))
        return out

    def _new_offsets(self, partitions: list[TopicPartition], committed: dict[TopicPartition, int]) -> dict:
        options = self.options
        if not partitions:
            return {}
        earliest = self.consumer.beginning_offsets(partitions)
        latest = self.consumer.end_offsets(partitions)

        def clamp(tp: TopicPartition, offset: int) -> int:
            return min(max(offset, earliest[tp]), latest[tp])

        new: dict[TopicPartition, int] = {}
        for tp in partitions:
            match options.scenario:
                case "to_earliest":
                    new[tp] = earliest[tp]
                case "to_latest":
                    new[tp] = latest[tp]
                case "to_offset":
                    new[tp] = clamp(tp, int(options.value or 0))
                case "to_current" | "shift_by":
                    current = committed.get(tp)
                    if current is None:
                        if options.scenario == "to_current":
                            new[tp] = latest[tp]  # Kafka falls back to the reset policy (latest) here
                            continue
                        raise ToolError(
                            f"Cannot shift offset for partition {tp} since there is no current committed offset"
                        )
                    new[tp] = clamp(tp, current + int(options.value or 0))
        return new
