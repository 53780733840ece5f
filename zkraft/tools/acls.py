"""`zkraft acls`: Kafka's kafka-acls.sh (2.8 kafka.admin.AclCommand) for the brokers' AclAuthorizer.

    zkraft acls --bootstrap-server B --add --allow-principal User:alice --operation Read --topic orders
    zkraft acls --bootstrap-server B --add --allow-principal User:alice --producer --topic orders [--idempotent]
    zkraft acls --bootstrap-server B --add --allow-principal User:bob --consumer --topic orders --group billing
    zkraft acls --bootstrap-server B --remove --deny-principal User:eve --operation All --topic orders [--force]
    zkraft acls --bootstrap-server B --list [--topic orders] [--resource-pattern-type match] [--principal User:a]
    zkraft acls --authorizer-properties zookeeper.connect=Q --add ...     # the znodes directly, as 2.8 could
    zkraft acls --authorizer-properties zookeeper.connect=Q --zk-tls-config-file zookeeper-client.properties ...
    zkraft acls --bootstrap-server B --command-config client.properties ...  # SSL / SASL_SSL listeners

`--bootstrap-server` goes through CreateAcls/DescribeAcls/DeleteAcls on a broker's Kafka listener (the broker's
authorizer checks the caller); `--authorizer-properties zookeeper.connect=...` writes `/kafka-acl` and the change
notifications itself. The flags, their checks and the output lines are AclCommand's: `Adding ACLs for resource
`ResourcePattern(...)`: ` then one `\t(principal=..., host=..., operation=..., permissionType=...)` line per entry,
and after each change the resulting `Current ACLs for resource ...` blocks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from client.kafka.acls import (
    CLUSTER_NAME,
    OPERATIONS_BY_RESOURCE,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from zkraft.tools import command_config
from zkraft.tools.acl_backends import AclToolError, KafkaProtocolAcls, ZooKeeperAcls, bindings_by_pattern
from zkraft.tools.topics import ToolError, ToolUsageError

TIMEOUT_S_DEFAULT = 30.0
PatternFilter = tuple[ResourceType, str, PatternType]  # Kafka's ResourcePatternFilter as the tool builds them


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="brokers' Kafka listeners")
    parser.add_argument("--authorizer-properties", nargs="+", metavar="KEY=VALUE",
                        help="zookeeper.connect=HOST:PORT: write the ACL znodes directly")  # fmt: skip
    for action in ("add", "remove", "list"):
        parser.add_argument(f"--{action}", action="store_true", help=f"{action} ACLs")
    parser.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="a consumer group (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--transactional-id", action="append", default=[], help="a transactional id (repeatable)")
    parser.add_argument("--resource-pattern-type", default="literal", metavar="literal|prefixed|match|any",
                        help="how resource names match (default literal)")  # fmt: skip
    parser.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
    parser.add_argument("--principal", action="append", default=[], metavar="User:NAME", help="with --list")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--operation", action="append", default=[], help="Read, Write, ... (default All)")
    parser.add_argument("--producer", action="store_true", help="Write, Describe, Create on the topics")
    parser.add_argument("--consumer", action="store_true", help="Read, Describe on the topics, Read on the group")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument("--force", action="store_true", help="remove without asking")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S_DEFAULT, help="seconds to connect (default 30)")
    command_config.add_zk_tls_argument(parser)  # Kafka 2.5+'s AclCommand flag, for --authorizer-properties
    command_config.add_argument(parser)  # for --bootstrap-server: TLS and the SASL login, Kafka's client names


def run(ns: argparse.Namespace, out: TextIO | None = None, answers: TextIO | None = None) -> int:
    stream = out if out is not None else sys.stdout
    _check_args(ns)
    pattern_type = _pattern_type(ns.resource_pattern_type)
    # The flags are checked whole before any connection (AclCommand builds the ACLs before its admin client).
    changes = _to_add(ns, pattern_type) if ns.add else _filter_to_entries(ns, pattern_type) if ns.remove else {}
    _principals(ns.principal)
    backend = _backend(ns)
    try:
        if ns.add:
            _add(backend, changes, stream)
        elif ns.remove:
            _remove(backend, ns, changes, stream, answers if answers is not None else sys.stdin)
        _list(backend, ns, pattern_type, stream)
    except AclToolError as exc:
        raise ToolError(str(exc)) from None
    finally:
        backend.close()
    return 0


def _check_args(ns: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, in its order and with its messages."""
    if (ns.bootstrap_server is None) == (ns.authorizer_properties is None):
        raise ToolUsageError("One of --authorizer-properties or --bootstrap-server must be specified")
    if sum((ns.add, ns.remove, ns.list)) != 1:
        raise ToolUsageError("Command must include exactly one action: --list, --add, --remove. ")
    if ns.list:
        for flag, given in (("producer", ns.producer), ("consumer", ns.consumer), ("allow-host", ns.allow_host),
                            ("allow-principal", ns.allow_principal), ("deny-host", ns.deny_host),
                            ("deny-principal", ns.deny_principal)):  # fmt: skip
            if given:
                raise ToolUsageError(f'Option "[list]" can\'t be used with option "[{flag}]"')
    for inferred, name in ((ns.producer, "producer"), (ns.consumer, "consumer")):
        for flag, given in (("operation", ns.operation), ("deny-principal", ns.deny_principal),
                            ("deny-host", ns.deny_host)):  # fmt: skip
            if inferred and given:
                raise ToolUsageError(f'Option "[{name}]" can\'t be used with option "[{flag}]"')
    if ns.principal and not ns.list:
        raise ToolUsageError("The --principal option is only available if --list is set")
    if ns.producer and not ns.topic:
        raise ToolUsageError("With --producer you must specify a --topic")
    if ns.idempotent and not ns.producer:
        raise ToolUsageError("The --idempotent option is only available if --producer is set")
    if ns.consumer and (not ns.topic or not ns.group or (not ns.producer and (ns.cluster or ns.transactional_id))):
        raise ToolUsageError(
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
            "option should be specified."
        )


def _pattern_type(text: str) -> PatternType:
    try:
        pattern_type = PatternType.parse(text)
    except AclError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type == PatternType.UNKNOWN:
        raise ToolUsageError(f"--resource-pattern-type {text!r}: expected literal, prefixed, match or any")
    return pattern_type


def _backend(ns: argparse.Namespace) -> Any:
    try:
        if ns.bootstrap_server is not None:
            security = command_config.security_of(ns)
            return KafkaProtocolAcls(ns.bootstrap_server, ns.timeout, security.get("tls"), security.get("sasl"))
        tls = command_config.zk_tls_of(getattr(ns, "zk_tls_config_file", None))
        return ZooKeeperAcls(_zookeeper_connect(ns.authorizer_properties), ns.timeout, tls)
    except AclToolError as exc:
        raise ToolError(str(exc)) from None


def _zookeeper_connect(properties: list[str]) -> str:
    values = {}
    for item in properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolUsageError(f"--authorizer-properties {item!r}: expected key=value")
        values[key.strip()] = value.strip()
    if not values.get("zookeeper.connect"):
        raise ToolUsageError("--authorizer-properties must include zookeeper.connect=HOST:PORT[,...]")
    return values["zookeeper.connect"]


# ---------------------------------------------------------------- what the flags name


def _resource_filters(ns: argparse.Namespace, pattern_type: PatternType, required: bool) -> list[PatternFilter]:
    """AclCommand.getResourceFilter: topics, the cluster (literal only), groups, transactional ids."""
    filters: list[PatternFilter] = [(ResourceType.TOPIC, t.strip(), pattern_type) for t in ns.topic]
    if pattern_type == PatternType.LITERAL and (ns.cluster or ns.idempotent):
        filters.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    filters += [(ResourceType.GROUP, g.strip(), pattern_type) for g in ns.group]
    filters += [(ResourceType.TRANSACTIONAL_ID, t.strip(), pattern_type) for t in ns.transactional_id]
    if not filters and required:
        raise ToolUsageError(
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--delegation-token <Delegation Token ID>"
        )
    return list(dict.fromkeys(filters))


def _principals(names: Iterable[str]) -> list[str]:
    parsed = []
    for name in names:
        kind, sep, who = name.strip().partition(":")
        if not sep or not kind or not who:
            raise ToolUsageError(f"expected a string in format principalType:principalName but got {name.strip()}")
        parsed.append(f"{kind}:{who}")
    return parsed


def _entries(ns: argparse.Namespace, operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """AclCommand.getAcl: every (principal, host, operation) for --allow-* and for --deny-*; a principal given
    without hosts gets the wildcard host."""
    entries = set()
    for principals, hosts, permission in (
        (ns.allow_principal, ns.allow_host, AclPermissionType.ALLOW),
        (ns.deny_principal, ns.deny_host, AclPermissionType.DENY),
    ):
        named = _principals(principals)
        for principal in named:
            for host in [h.strip() for h in hosts] or [WILDCARD_HOST]:
                for operation in operations:
                    entries.add(AccessControlEntry(principal, host, operation, permission))
    return entries


def _operations(names: list[str]) -> set[AclOperation]:
    operations = set()
    for name in names or ["All"]:
        try:
            operation = AclOperation.parse(name.strip())
        except AclError:
            operation = AclOperation.UNKNOWN
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise ToolUsageError(f"--operation {name!r}: not one of Kafka's ACL operations")
        operations.add(operation)
    return operations


def _filter_to_entries(
    ns: argparse.Namespace, pattern_type: PatternType
) -> dict[PatternFilter, set[AccessControlEntry]]:
    """AclCommand.getResourceFilterToAcls: from the flags, or the --producer / --consumer sets."""
    result: dict[PatternFilter, set[AccessControlEntry]] = {}
    filters = _resource_filters(ns, pattern_type, required=True)
    if not ns.producer and not ns.consumer:
        entries = _entries(ns, _operations(ns.operation))
        result = {f: set(entries) for f in filters}
    if ns.producer:
        for f in filters:
            if f[0] == ResourceType.TOPIC:
                result[f] = _entries(ns, (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE))
            elif f[0] == ResourceType.TRANSACTIONAL_ID:
                result[f] = _entries(ns, (AclOperation.WRITE, AclOperation.DESCRIBE))
        if ns.idempotent:
            result[(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] = _entries(
                ns, (AclOperation.IDEMPOTENT_WRITE,)
            )
    if ns.consumer:
        for f in filters:
            if f[0] == ResourceType.TOPIC:
                result[f] = result.get(f, set()) | _entries(ns, (AclOperation.READ, AclOperation.DESCRIBE))
            elif f[0] == ResourceType.GROUP:
                result[f] = result.get(f, set()) | _entries(ns, (AclOperation.READ,))
    for (resource_type, _, _), entries in result.items():  # AclCommand.validateOperation
        valid = OPERATIONS_BY_RESOURCE[resource_type]
        if any(e.operation not in valid for e in entries):
            supported = ",".join(sorted(op.name for op in valid))
            raise ToolUsageError(f"ResourceType {resource_type.name} only supports operations {supported}")
    return result


# ---------------------------------------------------------------- the actions


def _block(title: str, entries: Iterable[AccessControlEntry]) -> str:
    lines = "\n".join(f"\t{entry}" for entry in sorted(entries))
    return f"{title} \n {lines} \n\n"


def _to_add(ns: argparse.Namespace, pattern_type: PatternType) -> dict[PatternFilter, set[AccessControlEntry]]:
    """AclCommand.getResourceToAcls: only LITERAL or PREFIXED, and each resource with at least one entry."""
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ToolUsageError(
            f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when adding acls."
        )
    to_add = _filter_to_entries(ns, pattern_type)
    if any(not entries for entries in to_add.values()):
        raise ToolUsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return to_add


def _add(backend: Any, to_add: dict[PatternFilter, set[AccessControlEntry]], out: TextIO) -> None:
    for (resource_type, name, kind), entries in to_add.items():
        pattern = ResourcePattern(resource_type, name, kind)
        out.write(_block(f"Adding ACLs for resource `{pattern}`:", entries))
        backend.create([AclBinding(pattern, entry) for entry in sorted(entries)])


def _remove(
    backend: Any,
    ns: argparse.Namespace,
    to_remove: dict[PatternFilter, set[AccessControlEntry]],
    out: TextIO,
    answers: TextIO,
) -> None:
    for (resource_type, name, kind), entries in to_remove.items():
        described = f"ResourcePattern(resourceType={resource_type.name}, name={name}, patternType={kind.name})"
        if entries:
            lines = "\n".join(f"\t{e}" for e in sorted(entries))
            question = f"Are you sure you want to remove ACLs: \n {lines} \n from resource filter `{described}`? (y/n)"
            filters = [AclBindingFilter(resource_type, name, kind, e.principal, e.host, e.operation, e.permission_type)
                       for e in sorted(entries)]  # fmt: skip
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{described}`? (y/n)"
            filters = [AclBindingFilter(resource_type, name, kind)]
        if _confirmed(ns, question, out, answers):
            backend.delete(filters)


def _confirmed(ns: argparse.Namespace, question: str, out: TextIO, answers: TextIO) -> bool:
    if ns.force:
        return True
    out.write(question + "\n")
    out.flush()
    return answers.readline().strip().lower() == "y"


def _list(backend: Any, ns: argparse.Namespace, pattern_type: PatternType, out: TextIO) -> None:
    """AclCommand.listAcls: the ACLs of the resources named (all without any), per principal with --principal."""
    filters = _resource_filters(ns, pattern_type, required=False)
    if filters:
        found = [b for t, n, k in filters for b in backend.describe(AclBindingFilter(t, n, k))]
    else:
        found = backend.describe(AclBindingFilter(ResourceType.ANY, None, PatternType.ANY))
    grouped = bindings_by_pattern(dict.fromkeys(found))
    principals = _principals(ns.principal)
    if not principals:
        _print_resources(grouped, out)
        return
    for principal in principals:
        out.write(f"ACLs for principal `{principal}`\n")
        mine = {p: [e for e in entries if e.principal == principal] for p, entries in grouped.items()}
        _print_resources({p: entries for p, entries in mine.items() if entries}, out)


def _print_resources(grouped: dict[ResourcePattern, list[AccessControlEntry]], out: TextIO) -> None:
    for pattern in sorted(grouped):
        out.write(_block(f"Current ACLs for resource `{pattern}`:", grouped[pattern]))
