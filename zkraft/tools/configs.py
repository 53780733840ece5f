"""`zkraft configs`: Kafka's kafka-configs.sh for topic, broker and user configs, through ZooKeeper or a broker.

    zkraft configs --zookeeper Q --entity-type topics --entity-name T --alter \\
        --add-config k=v[,k=v] [--delete-config k[,k]]
    zkraft configs --zookeeper Q --entity-type topics|brokers [--entity-name N] --describe
    zkraft configs --bootstrap-server B --entity-type topics|brokers [--entity-name N] --describe [--all]
    zkraft configs --bootstrap-server B --entity-type topics|brokers --entity-name N --alter ...
    zkraft configs --bootstrap-server B --entity-type brokers --entity-default --describe|--alter ...

`--alter` writes `/config/<type>/<name>` and a `/config/changes/config_change_<seq>`
notification (Kafka's AdminZkClient.changeConfigs), so running brokers apply it
without a restart. Topic values are checked as Kafka's LogConfig checks them.
Output lines are Kafka 2.x's: `Completed Updating config for entity: topic 'T'.`
and `Configs for topic 'T' are k=v,k2=v2`. Users (SCRAM credentials, `--zookeeper` only):
zkraft/tools/user_configs.py.

With `--bootstrap-server` the tool goes through `client.Admin` as 2.8's ConfigCommand goes through the
AdminClient: `--describe` prints `Dynamic configs for topic T are:` (`All configs` with `--all`) and one
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` line per config; `--alter` changes a topic
with IncrementalAlterConfigs (SET and DELETE) and a broker with AlterConfigs (its whole dynamic config),
then prints `Completed updating config for topic T.`
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from client.kafka.errors import KafkaError
from client.kafka.topic_admin import validate_topic_configs
from client.kafka.znodes import (
    CONFIG_TYPE_BROKER,
    CONFIG_TYPE_TOPIC,
    CONFIG_TYPE_USER,
    ZnodeDataError,
    config_change_create_path,
    config_entity_path,
    decode_config,
    encode_config,
    encode_config_change,
    topic_path,
)
from client.zk.exceptions import NoNodeError, ZkException
from zkraft.tools import command_config
from zkraft.tools.topics import ToolError, ToolUsageError, zk_session
from zkraft.tools.user_configs import alter_user, describe_users

ENTITY_NAMES = {CONFIG_TYPE_TOPIC: "topic", CONFIG_TYPE_BROKER: "broker", CONFIG_TYPE_USER: "user-principal"}
BROKER_DEFAULT_ENTITY = ""  # ConfigCommand.BrokerDefaultEntityName: the cluster-wide broker default


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="the quorum")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="brokers: go through the Admin API")
    command_config.add_argument(parser)
    command_config.add_zk_tls_argument(parser)
    parser.add_argument("--all", action="store_true", help="with --bootstrap-server --describe: every config")
    parser.add_argument("--entity-type", choices=sorted(ENTITY_NAMES), help="topics, brokers or users")
    parser.add_argument("--entity-name", help="the topic name, broker id or user name")
    parser.add_argument(
        "--entity-default", action="store_true", help="brokers: the cluster-wide default (with --bootstrap-server)"
    )
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--alter", action="store_true", help="add or delete configs of one entity")
    actions.add_argument("--describe", action="store_true", help="print configs of one or all entities")
    parser.add_argument("--add-config", metavar="k1=v1,k2=v2", help="configs to set; [a,b] for a list value")
    parser.add_argument("--delete-config", metavar="k1,k2", help="configs to remove")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the quorum (default 30)")


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's `k1=v1,k2=[v1,v2]`: commas inside brackets belong to the value."""
    configs: dict[str, str] = {}
    depth, current, parts = 0, "", []
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ToolUsageError(
                f'Invalid entity config: all configs to be added must be in the format "key=val". {part!r}'
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key.strip()] = value
    return configs


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out if out is not None else sys.stdout
    if (ns.zookeeper is None) == (ns.bootstrap_server is None):
        raise ToolUsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    if ns.all and (ns.bootstrap_server is None or not ns.describe):
        raise ToolUsageError("--all can only be used with --bootstrap-server and --describe")
    if ns.entity_type is None:
        raise ToolUsageError('Missing required argument "[entity-type]"')
    if not (ns.alter or ns.describe):
        raise ToolUsageError("Command must include exactly one action: --describe, --alter")
    if ns.entity_default:
        if ns.bootstrap_server is None or ns.entity_type != CONFIG_TYPE_BROKER or ns.entity_name is not None:
            raise ToolUsageError(
                "--entity-default needs --bootstrap-server, --entity-type brokers and no --entity-name"
            )
        ns.entity_name = BROKER_DEFAULT_ENTITY
    if ns.alter and ns.entity_name is None:
        raise ToolUsageError("an entity name must be specified with --alter")
    if ns.alter and not (ns.add_config or ns.delete_config):
        raise ToolUsageError("--alter needs --add-config or --delete-config")
    added = parse_add_config(ns.add_config) if ns.add_config else {}
    deleted = [k.strip() for k in (ns.delete_config or "").split(",") if k.strip()]
    if ns.bootstrap_server is not None:
        if ns.entity_type == CONFIG_TYPE_USER:
            raise ToolUsageError(
                "--entity-type users needs --zookeeper here (Kafka's admin clients manage users through the "
                "Kafka listener's AlterUserScramCredentials)"
            )
        return _run_with_admin(ns, added, deleted, stream)
    try:
        with zk_session(ns.zookeeper, ns.timeout, command_config.zk_tls_of(ns.zk_tls_config_file)) as zk:
            if ns.entity_type == CONFIG_TYPE_USER:
                if ns.alter:
                    alter_user(zk, ns.entity_name, added, deleted, stream)
                else:
                    describe_users(zk, ns.entity_name, stream)
            elif ns.alter:
                alter(zk, ns.entity_type, ns.entity_name, added, deleted, stream)
            else:
                describe(zk, ns.entity_type, ns.entity_name, stream)
    except (KafkaError, ZnodeDataError, ValueError) as error:
        raise ToolError(" ".join(str(error).split())) from None
    except ZkException as error:
        raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None
    return 0


def _read(zk: object, entity_type: str, name: str) -> dict[str, str]:
    try:
        data, _ = zk.get(config_entity_path(entity_type, name))  # type: ignore[attr-defined]
    except NoNodeError:
        return {}
    return decode_config(data)


def alter(zk: object, entity_type: str, name: str, added: dict[str, str], deleted: list[str], out: TextIO) -> None:
    if entity_type == CONFIG_TYPE_TOPIC and zk.exists(topic_path(name)) is None:  # type: ignore[attr-defined]
        raise ToolError(f"Topic {name} does not exist")
    missing = [k for k in deleted if k not in _read(zk, entity_type, name)]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    configs = {**_read(zk, entity_type, name), **added}
    for key in deleted:
        configs.pop(key, None)
    if entity_type == CONFIG_TYPE_TOPIC:
        configs = validate_topic_configs(configs)
    path = config_entity_path(entity_type, name)
    try:
        zk.set(path, encode_config(configs))  # type: ignore[attr-defined]
    except NoNodeError:
        zk.create(path, encode_config(configs), makepath=True)  # type: ignore[attr-defined]
    zk.create(  # type: ignore[attr-defined]
        config_change_create_path(), encode_config_change(entity_type, name), sequence=True, makepath=True
    )
    print(f"Completed Updating config for entity: {ENTITY_NAMES[entity_type]} '{name}'.", file=out)


def describe(zk: object, entity_type: str, name: str | None, out: TextIO) -> None:
    if name is not None:
        names = [name]
    else:
        try:
            names = sorted(zk.get_children(f"/config/{entity_type}"))  # type: ignore[attr-defined]
        except NoNodeError:
            names = []
    for entity in names:
        configs = _read(zk, entity_type, entity)
        shown = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
        print(f"Configs for {ENTITY_NAMES[entity_type]} '{entity}' are {shown}", file=out)


# ---------------------------------------------------------------- --bootstrap-server (2.8 ConfigCommand)

_DYNAMIC_SOURCE = {CONFIG_TYPE_TOPIC: "DYNAMIC_TOPIC_CONFIG", CONFIG_TYPE_BROKER: "DYNAMIC_BROKER_CONFIG"}


def _run_with_admin(ns: argparse.Namespace, added: dict[str, str], deleted: list[str], out: TextIO) -> int:
    from zkraft.tools.topics import _admin, check_hosts

    try:
        with _admin(check_hosts(ns.bootstrap_server, "--bootstrap-server"), command_config.security_of(ns)) as admin:
            if ns.alter:
                alter_with_admin(admin, ns.entity_type, ns.entity_name, added, deleted, out)
            else:
                describe_with_admin(admin, ns.entity_type, ns.entity_name, ns.all, out)
    except KafkaError as error:
        raise ToolError(" ".join(str(error).split())) from None
    return 0


def _resource(entity_type: str, name: str) -> Any:
    from client.kafka.config_resources import ConfigResource, ConfigResourceType

    kind = ConfigResourceType.TOPIC if entity_type == CONFIG_TYPE_TOPIC else ConfigResourceType.BROKER
    return ConfigResource(kind, name)


def _entries(admin: Any, entity_type: str, name: str, describe_all: bool) -> list[Any]:
    """getResourceConfig: the entity's configs sorted by name, only its dynamic ones unless `describe_all`."""
    [description] = admin.describe_configs([_resource(entity_type, name)], include_synonyms=True)
    wanted = "DYNAMIC_DEFAULT_BROKER_CONFIG" if name == BROKER_DEFAULT_ENTITY else _DYNAMIC_SOURCE[entity_type]
    entries = [e for e in description.entries.values() if describe_all or e.source == wanted]
    return sorted(entries, key=lambda e: e.name)


def describe_with_admin(admin: Any, entity_type: str, name: str | None, describe_all: bool, out: TextIO) -> None:
    if name is not None:
        names = [name]
    elif entity_type == CONFIG_TYPE_TOPIC:
        names = sorted(admin.list_topics())
    else:
        names = [str(b[0]) for b in admin.describe_cluster().brokers] + [BROKER_DEFAULT_ENTITY]
    for entity in names:
        if entity == BROKER_DEFAULT_ENTITY:
            print(f"Default configs for {entity_type} in the cluster are:", file=out)
        else:
            kind = "All" if describe_all else "Dynamic"
            print(f"{kind} configs for {ENTITY_NAMES[entity_type]} {entity} are:", file=out)
        for entry in _entries(admin, entity_type, entity, describe_all):
            synonyms = ", ".join(f"{s.source}:{s.name}={_java(s.value)}" for s in entry.synonyms)
            print(
                f"  {entry.name}={_java(entry.value)} sensitive={_java(entry.is_sensitive)} synonyms={{{synonyms}}}",
                file=out,
            )


def _java(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def alter_with_admin(
    admin: Any, entity_type: str, name: str, added: dict[str, str], deleted: list[str], out: TextIO
) -> None:
    from client.kafka.config_resources import AlterConfigOp, ConfigResource

    current = {e.name: e.value for e in _entries(admin, entity_type, name, describe_all=False)}
    missing = [k for k in deleted if k not in current]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    resource = _resource(entity_type, name)
    if entity_type == CONFIG_TYPE_TOPIC:
        operations = [AlterConfigOp(k, v, "SET") for k, v in added.items()]
        operations += [AlterConfigOp(k, "", "DELETE") for k in deleted]
        admin.incremental_alter_configs([ConfigResource(resource.resource_type, name, operations=operations)])
    else:
        configs = {k: v or "" for k, v in current.items() if k not in deleted} | added
        admin.alter_configs([ConfigResource(resource.resource_type, name, configs=configs)])
    if name == BROKER_DEFAULT_ENTITY:
        print(f"Completed updating default config for {entity_type} in the cluster.", file=out)
    else:
        print(f"Completed updating config for {ENTITY_NAMES[entity_type]} {name}.", file=out)
