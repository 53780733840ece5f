"""Kafka's ACL model and its ZooKeeper layout, shared by the broker's authorizer and `zkraft acls`.

The values are Kafka's (clients/src/main/java/org/apache/kafka/common/acl and .../resource): the wire codes of
ResourceType, AclOperation, AclPermissionType and PatternType, the names kafka-acls.sh prints (`Topic`,
`IdempotentWrite`, `Allow`), a binding (resource pattern + access control entry) and a binding filter with
Kafka's matching rules (ResourcePatternFilter.matches, AccessControlEntryFilter.matches).

Znodes (Kafka 2.8 ZkData.scala, ZkAclStore and ZkAclChangeStore):
* LITERAL patterns: `/kafka-acl/<ResourceType>/<name>`;
  PREFIXED: `/kafka-acl-extended/prefixed/<ResourceType>/<name>`, each holding
  `{"version":1,"acls":[{"principal","permissionType","operation","host"}]}` (AclEntry.toJsonCompatibleMap).
* after each change, a persistent-sequential notification `/kafka-acl-changes/acl_changes_<seq>` holding
  `TOPIC:<name>` (LiteralAclChangeStore: the resource type's enum name), or for a prefixed pattern
  `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":...,"patternType":"PREFIXED"}` (ExtendedAclChangeEvent).
"""

from __future__ import annotations

import enum
import json
from typing import NamedTuple, Self

CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource (Kafka's CommonClientConfigs/Resource.CLUSTER_NAME)
WILDCARD_RESOURCE = "*"  # ResourcePattern.WILDCARD_RESOURCE: a LITERAL "*" names every resource of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
PRINCIPAL_TYPE_USER = "User"

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1


class AclError(ValueError):
    """A binding or a znode that Kafka would refuse; the message names the problem in one line."""


class _Named(enum.IntEnum):
    """A Kafka enum: `.code` on the wire, `.kafka_name` as kafka-acls.sh and the znodes spell it."""

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> Self:
        """Kafka's fromString: case-insensitive, underscores optional (`IdempotentWrite`, `IDEMPOTENT_WRITE`)."""
        wanted = text.replace("_", "").replace("-", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == wanted:
                return member
        raise AclError(f"unknown {cls.__name__} {text!r}")

    @classmethod
    def of(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN, as Kafka's fromCode answers a code it does not know


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


# The operations each resource type supports (kafka-acls.sh's AclCommand.ResourceToOperations, Kafka 2.8).
OPERATIONS_BY_RESOURCE: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.ALL,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALL}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.ALL,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.ALL}),
}


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:  # kafka-acls.sh: ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:  # kafka-acls.sh: (principal=User:a, host=*, operation=READ, permissionType=ALLOW)
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry


class AclBindingFilter(NamedTuple):
    """Kafka's AclBindingFilter: None (null on the wire) and the ANY values match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.LITERAL
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: MATCH also finds the literal wildcard and prefixes of the name."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name is None or self.name == pattern.name
        if self.pattern_type != PatternType.MATCH:
            return False
        if self.name is None:
            return True
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def problem(self) -> str | None:
        """AclBindingFilter.findIndefiniteField: what a DeleteAcls filter may not leave UNKNOWN."""
        for value, what in (
            (self.resource_type, "resource type"),
            (self.pattern_type, "pattern type"),
            (self.operation, "operation"),
            (self.permission_type, "permission type"),
        ):
            if value == 0:
                return f"Unknown {what}"
        return None


def binding_problem(binding: AclBinding) -> str | None:
    """Why Kafka 2.8 refuses to create this binding (AclApis / AclAuthorizer.createAcls), or None."""
    pattern, entry = binding
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "Invalid resource type"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid pattern type {pattern.pattern_type.name}: only LITERAL and PREFIXED ACLs can be created"
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return "Invalid operation"
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return "Invalid permission type"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name specified"
    principal_type, sep, principal_name = entry.principal.partition(":")
    if not sep or not principal_type or not principal_name:
        return f"Invalid principal {entry.principal!r}: expected <type>:<name>, such as User:alice"
    if not entry.host:
        return "Invalid empty host specified"
    return None


# ---------------------------------------------------------------- znodes


def acl_znode_path(pattern: ResourcePattern) -> str:
    """ZkAclStore.path: `/kafka-acl/Topic/t`, `/kafka-acl-extended/prefixed/Topic/t`."""
    return f"{store_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def store_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    if pattern_type == PatternType.LITERAL:
        return f"{LITERAL_ACL_PATH}/{resource_type.kafka_name}"
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/prefixed/{resource_type.kafka_name}"
    raise AclError(f"ACLs of pattern type {pattern_type.name} are not stored")


STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
STORED_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
)


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES_PATH if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES_PATH


def encode_acls(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    """AclEntry.toJsonCompatibleMap, in a stable order."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.kafka_name,
            "operation": e.operation.kafka_name,
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": ACL_JSON_VERSION, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None, path: str) -> frozenset[AccessControlEntry]:
    """AclEntry.fromBytes; an empty znode holds no ACL. Raises AclError naming the znode if it is not Kafka's JSON."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
        return frozenset(
            AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                AclOperation.parse(str(item["operation"])),
                AclPermissionType.parse(str(item["permissionType"])),
            )
            for item in document["acls"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise AclError(f"{path}: not Kafka's ACL JSON ({exc})") from None


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": ACL_JSON_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def decode_change(data: bytes, pattern_type: PatternType, path: str) -> ResourcePattern:
    """A notification of either store (ResourceType.fromString accepts `TOPIC` and `Topic` alike)."""
    try:
        text = data.decode()
        if pattern_type == PatternType.LITERAL:
            type_name, sep, name = text.partition(":")
            if not sep:
                raise AclError("expected a string in format ResourceType:ResourceName")
            return ResourcePattern(ResourceType.parse(type_name), name, PatternType.LITERAL)
        event = json.loads(text)
        return ResourcePattern(
            ResourceType.parse(event["resourceType"]),
            str(event["name"]),
            PatternType.parse(event["patternType"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise AclError(f"{path}: not an ACL change notification ({exc})") from None
