"""`zkraft consumer-groups` without a cluster: option checks and Kafka's table layouts (ConsumerGroupCommand)."""

from __future__ import annotations

import argparse

import pytest

from client.kafka.structs import TopicPartition as TP
from client.kafka.types import BrokerMetadata, ConsumerGroupDescription, MemberDescription
from zkraft.tools import consumer_groups as cg
from zkraft.tools.topics import ToolUsageError


def parse(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cg.configure_parser(parser)
    return parser.parse_args(list(args))


def group(state: str = "Stable", members: tuple[MemberDescription, ...] = ()) -> ConsumerGroupDescription:
    return ConsumerGroupDescription(
        "g", state, "consumer", "range", members, BrokerMetadata(2, "127.0.0.1", 9093, None)
    )


MEMBER = MemberDescription("c-1", None, "cli", "/127.0.0.1", ("t",), (TP("t", 1), TP("t", 0)))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bootstrap-server", "h:1"],
         "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"),
        (["--list"], 'Missing required argument "[bootstrap-server]"'),
        (["--bootstrap-server", "h:1", "--describe"],
         "Option [describe] takes one of these options: [all-groups], [group]"),
        (["--bootstrap-server", "h:1", "--describe", "--group", "g", "--members", "--state"],
         "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
        (["--bootstrap-server", "h:1", "--reset-offsets", "--group", "g", "--to-earliest"],
         "Option [reset-offsets] takes one of these options: [all-topics], [topic]"),
        (["--bootstrap-server", "h:1", "--reset-offsets", "--group", "g", "--topic", "t"],
         "Option [reset-offsets] takes exactly one of these options: [to-earliest], [to-latest], [to-current], "
         "[to-offset], [shift-by]"),
        (["--bootstrap-server", "h:1", "--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--execute",
          "--dry-run"], "Option [reset-offsets] only accepts one of [execute], [dry-run]"),
    ],
)  # fmt: skip
def test_option_checks(args: list[str], message: str) -> None:
    with pytest.raises(ToolUsageError) as raised:
        cg.check_options(parse(*args))
    assert str(raised.value) == message


def test_offsets_table_has_kafkas_columns_and_widths() -> None:
    rows = cg.offset_rows(group(members=(MEMBER,)), {TP("t", 0): 5, TP("t", 2): 7}, {TP("t", 0): 9, TP("t", 1): 4})
    text = cg.format_offsets(rows)
    assert text == (
        "\n"
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     "
        "HOST            CLIENT-ID\n"
        "g               t               0          5               9               4               c-1             "
        "/127.0.0.1      cli\n"
        "g               t               1          -               4               -               c-1             "
        "/127.0.0.1      cli\n"
        "g               t               2          7               -               -               -               "
        "-               -\n"
    )


def test_offsets_table_grows_with_long_values() -> None:
    long_member = MemberDescription(
        "consumer-" + "x" * 30, None, "cli", "/10.0.0.1", ("t",), (TP("a-long-topic-name", 0),)
    )
    rows = cg.offset_rows(group(members=(long_member,)), {}, {})
    header = cg.format_offsets(rows).splitlines()[1]
    assert header.index("HOST") == header.index("CONSUMER-ID") + len(long_member.member_id) + 1
    assert header.index("PARTITION") == len("GROUP") + 11 + len("a-long-topic-name") + 1


def test_members_and_state_views() -> None:
    members = cg.format_members(group(members=(MEMBER,)), verbose=True)
    assert members == (
        "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT\n"
        "g               c-1             /127.0.0.1      cli             2               t(0,1)\n"
    )
    assert cg.format_state(group(members=(MEMBER,))) == (
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS"
        "\ng                         127.0.0.1:9093 (2)        range                Stable          1\n"
    )


def test_state_messages_and_reset_table() -> None:
    assert cg.state_message("g", "Dead") == ("Error: Consumer group 'g' does not exist.", False)
    assert cg.state_message("g", "Empty") == ("\nConsumer group 'g' has no active members.", True)
    assert cg.state_message("g", "PreparingRebalance") == ("\nWarning: Consumer group 'g' is rebalancing.", True)
    assert cg.state_message("g", "Stable") == (None, True)
    assert cg.format_reset("g", {TP("t", 1): 3, TP("t", 0): 0}).splitlines() == [
        "",
        f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}",
        f"{'g':<30} {'t':<30} {'0':<10} {'0':<15}",
        f"{'g':<30} {'t':<30} {'1':<10} {'3':<15}",
    ]
