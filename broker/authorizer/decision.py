"""The authorizer's decision, pure: given the ACLs, may this principal from this host do this to this resource?

Kafka 2.8 AclAuthorizer.authorizeAction, rule by rule:
* a super user (`super.users`) may do anything;
* the ACLs that apply to a resource are the LITERAL ones of its exact name, the LITERAL wildcard `*` of its type
  and every PREFIXED one whose name starts the resource's name (AclAuthorizer.matchingAcls);
* none apply: `allow.everyone.if.no.acl.found` decides (false by default, as in Kafka);
* an entry applies to a request when its principal is the request's or `User:*`, its host the client's address
  or `*`, its operation the one asked or All;
* a DENY that applies refuses, whatever allows (DENY beats ALLOW);
* else an ALLOW must apply, where Read, Write, Delete and Alter also allow Describe, and AlterConfigs also
  allows DescribeConfigs (the implied operations of AclAuthorizer.allowAclExists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from client.kafka.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}
_NO_ENTRIES: frozenset[AccessControlEntry] = frozenset()


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()  # `super.users`: User:a;User:b
    allow_everyone_if_no_acl_found: bool = False  # `allow.everyone.if.no.acl.found`


@dataclass(frozen=True, slots=True)
class AclSnapshot:
    """Every ACL the broker knows, indexed for the decision: by type, then LITERAL name or PREFIXED prefix.

    Immutable: an update builds a new snapshot (`with_resource`) and swaps it in whole, so a check never sees
    half an update."""

    literal: Mapping[ResourceType, Mapping[str, frozenset[AccessControlEntry]]] = field(default_factory=dict)
    prefixed: Mapping[ResourceType, Mapping[str, frozenset[AccessControlEntry]]] = field(default_factory=dict)

    @classmethod
    def of(cls, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> AclSnapshot:
        snapshot = cls()
        for pattern, entries in acls.items():
            snapshot = snapshot.with_resource(pattern, entries)
        return snapshot

    def with_resource(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> AclSnapshot:
        """This snapshot with the ACLs of one resource pattern replaced (none: the pattern removed)."""
        by_kind = {PatternType.LITERAL: self.literal, PatternType.PREFIXED: self.prefixed}
        names = dict(by_kind[pattern.pattern_type].get(pattern.resource_type, {}))
        if entries:
            names[pattern.name] = entries
        else:
            names.pop(pattern.name, None)
        updated = dict(by_kind[pattern.pattern_type])
        updated[pattern.resource_type] = names
        if pattern.pattern_type == PatternType.LITERAL:
            return AclSnapshot(updated, self.prefixed)
        return AclSnapshot(self.literal, updated)

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        kind = self.literal if pattern.pattern_type == PatternType.LITERAL else self.prefixed
        return kind.get(pattern.resource_type, {}).get(pattern.name, _NO_ENTRIES)

    def patterns(self) -> Iterable[tuple[ResourcePattern, frozenset[AccessControlEntry]]]:
        for pattern_type, kind in ((PatternType.LITERAL, self.literal), (PatternType.PREFIXED, self.prefixed)):
            for resource_type, names in kind.items():
                for name, entries in names.items():
                    yield ResourcePattern(resource_type, name, pattern_type), entries

    def matching(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        """AclAuthorizer.matchingAcls: the entry sets that apply to the resource `name` of `resource_type`."""
        found = []
        literal = self.literal.get(resource_type)
        if literal:
            for key in (name, WILDCARD_RESOURCE):
                entries = literal.get(key)
                if entries:
                    found.append(entries)
        prefixed = self.prefixed.get(resource_type)
        if prefixed:
            for end in range(1, len(name) + 1):
                entries = prefixed.get(name[:end])
                if entries:
                    found.append(entries)
        return found


def authorize(
    snapshot: AclSnapshot,
    settings: AuthorizerSettings,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Kafka 2.8 AclAuthorizer.authorizeAction for one LITERAL resource."""
    if principal in settings.super_users:
        return True
    applying = snapshot.matching(resource_type, name)
    if not applying:
        return settings.allow_everyone_if_no_acl_found
    principals = (principal, WILDCARD_PRINCIPAL)
    hosts = (host, WILDCARD_HOST)
    allowing = _IMPLIED_BY.get(operation, (operation,))
    allowed = False
    for entries in applying:
        for entry in entries:
            if entry.principal not in principals or entry.host not in hosts:
                continue
            if entry.permission_type == AclPermissionType.DENY:
                if entry.operation in (operation, AclOperation.ALL):
                    return False
            elif entry.operation == AclOperation.ALL or entry.operation in allowing:
                allowed = True
    return allowed
