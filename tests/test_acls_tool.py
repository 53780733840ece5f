"""`zkraft acls`'s flags are checked as kafka-acls.sh 2.8 checks them, before any connection (usage: exit 2)."""

from __future__ import annotations

import pytest

from zkraft.cli import EXIT_USAGE, main

BOOTSTRAP = ("--bootstrap-server", "127.0.0.1:1")  # nothing listens: a usage error must come first


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--list",), "One of --authorizer-properties or --bootstrap-server must be specified"),
        ((*BOOTSTRAP,), "Command must include exactly one action: --list, --add, --remove."),
        ((*BOOTSTRAP, "--add", "--list"), "Command must include exactly one action"),
        ((*BOOTSTRAP, "--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal"),
        ((*BOOTSTRAP, "--add", "--allow-principal", "User:a"), "You must provide at least one resource"),
        ((*BOOTSTRAP, "--add", "--topic", "t", "--allow-principal", "alice"),
         "expected a string in format principalType:principalName but got alice"),
        ((*BOOTSTRAP, "--add", "--group", "g", "--allow-principal", "User:a", "--operation", "Write"),
         "ResourceType GROUP only supports operations ALL,DELETE,DESCRIBE,READ"),
        ((*BOOTSTRAP, "--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"),
         "--operation 'Fly': not one of Kafka's ACL operations"),
        ((*BOOTSTRAP, "--add", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "match"),
         "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
        ((*BOOTSTRAP, "--list", "--resource-pattern-type", "glob"), "expected literal, prefixed, match or any"),
        ((*BOOTSTRAP, "--list", "--producer", "--topic", "t"),
         'Option "[list]" can\'t be used with option "[producer]"'),
        ((*BOOTSTRAP, "--add", "--producer", "--allow-principal", "User:a"),
         "With --producer you must specify a --topic"),
        ((*BOOTSTRAP, "--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"),
         "With --consumer you must specify a --topic and a --group"),
        ((*BOOTSTRAP, "--add", "--producer", "--topic", "t", "--allow-principal", "User:a", "--operation", "Read"),
         'Option "[producer]" can\'t be used with option "[operation]"'),
        ((*BOOTSTRAP, "--add", "--idempotent", "--topic", "t", "--allow-principal", "User:a"),
         "The --idempotent option is only available if --producer is set"),
        (("--authorizer-properties", "zookeeper.timeout=5", "--list"), "must include zookeeper.connect"),
    ],
)  # fmt: skip
def test_bad_flags_are_one_line_usage_errors(
    flags: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["acls", *flags]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_an_unreachable_broker_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", *BOOTSTRAP, "--list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zkraft: error: cannot reach any broker of '127.0.0.1:1'") and err.count("\n") == 1
