"""`zkraft configs --entity-type users`: SCRAM credentials in `/config/users/<user>`, as kafka-configs.sh 2.x.

    zkraft configs --zookeeper Q --entity-type users --entity-name alice --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    zkraft configs --zookeeper Q --entity-type users --entity-name alice --alter --delete-config SCRAM-SHA-512
    zkraft configs --zookeeper Q --entity-type users [--entity-name alice] --describe

A value is `[iterations=<n>,]password=<password>` (ConfigCommand's scramCredential; iterations default to
4096, the minimum). Only the salted credential is stored (client/kafka/scram.py); brokers pick it up from the
`/config/changes` notification, without a restart. Output: `Completed Updating config for entity:
user-principal 'alice'.` and `Configs for user-principal 'alice' are SCRAM-SHA-512=salt=...,iterations=4096`.
"""

from __future__ import annotations

import re
from typing import TextIO

from client.kafka.scram import (
    ITERATIONS_DEFAULT,
    SCRAM_MECHANISMS,
    ScramCredentialError,
    alter_scram_credentials,
    check_iterations,
    desanitize_user,
    sanitize_user,
)
from client.kafka.znodes import CONFIG_TYPE_USER, config_entity_path, decode_config
from client.zk.exceptions import NoNodeError
from zkraft.tools.topics import ToolError

_CREDENTIAL = re.compile(r"(?:iterations=([0-9]*),)?password=(.*)", re.DOTALL)
USERS_PATH = f"/config/{CONFIG_TYPE_USER}"


def parse_scram_value(mechanism: str, text: str) -> tuple[str, int]:
    """`[iterations=8192,]password=secret` (brackets already taken off) -> (password, iterations)."""
    match = _CREDENTIAL.fullmatch(text)
    if match is None or not match.group(2):
        # The value holds a password: the message names the mechanism and the expected form, never the value.
        raise ToolError(f"Invalid credential property {mechanism}: expected [iterations=<n>,]password=<password>")
    iterations = int(match.group(1)) if match.group(1) else ITERATIONS_DEFAULT
    try:
        check_iterations(mechanism, iterations)
    except ScramCredentialError as exc:
        raise ToolError(str(exc)) from None
    return match.group(2), iterations


def alter_user(zk: object, user: str, added: dict[str, str], deleted: list[str], out: TextIO) -> None:
    unknown = [k for k in [*added, *deleted] if k not in SCRAM_MECHANISMS]
    if unknown:
        raise ToolError(
            f"Invalid config(s): {','.join(unknown)} (users take {' and '.join(SCRAM_MECHANISMS)} credentials)"
        )
    upserts = {mechanism: parse_scram_value(mechanism, text) for mechanism, text in added.items()}
    try:
        alter_scram_credentials(zk, user, upserts, deleted)
    except ScramCredentialError as exc:
        raise ToolError(str(exc)) from None
    print(f"Completed Updating config for entity: user-principal '{user}'.", file=out)


def describe_users(zk: object, user: str | None, out: TextIO) -> None:
    if user is not None:
        names = [user]
    else:
        try:
            names = sorted(desanitize_user(n) for n in zk.get_children(USERS_PATH))  # type: ignore[attr-defined]
        except NoNodeError:
            names = []
    for name in names:
        path = config_entity_path(CONFIG_TYPE_USER, sanitize_user(name))
        try:
            data, _ = zk.get(path)  # type: ignore[attr-defined]
        except NoNodeError:
            data = None
        configs = decode_config(data, path)
        shown = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
        print(f"Configs for user-principal '{name}' are {shown}", file=out)
