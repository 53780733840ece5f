"""The authorizer's decisions, table-driven (Kafka 2.8 AclAuthorizer.authorizeAction), and the ACL znode formats."""

from __future__ import annotations

import json

import pytest

from broker.authorizer.authorizer import parse_super_users
from broker.authorizer.decision import AclSnapshot, AuthorizerSettings, authorize
from client.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_znode_path,
    binding_problem,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
)

ALICE = "User:alice"
BOB = "User:bob"
HOST = "10.0.0.1"
OTHER_HOST = "10.0.0.2"
Op = AclOperation
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
TOPIC = ResourceType.TOPIC
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED


def acl(name: str, principal: str, operation: AclOperation, permission: AclPermissionType = ALLOW,
        host: str = "*", pattern: PatternType = LITERAL, resource_type: ResourceType = TOPIC):  # fmt: skip
    return ResourcePattern(resource_type, name, pattern), AccessControlEntry(principal, host, operation, permission)


def snapshot(*bindings: tuple[ResourcePattern, AccessControlEntry]) -> AclSnapshot:
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for pattern, entry in bindings:
        acls[pattern] = acls.get(pattern, frozenset()) | {entry}
    return AclSnapshot.of(acls)


# (why, ACLs, settings, principal, host, operation, topic, allowed)
CASES = [
    ("no ACL, default: refused", [], AuthorizerSettings(), ALICE, HOST, Op.READ, "t", False),
    ("no ACL, allow.everyone.if.no.acl.found", [], AuthorizerSettings(allow_everyone_if_no_acl_found=True),
     ALICE, HOST, Op.READ, "t", True),
    ("an ACL for someone else: no longer 'no ACL found'", [acl("t", BOB, Op.READ)],
     AuthorizerSettings(allow_everyone_if_no_acl_found=True), ALICE, HOST, Op.READ, "t", False),
    ("literal allow", [acl("t", ALICE, Op.READ)], AuthorizerSettings(), ALICE, HOST, Op.READ, "t", True),
    ("literal allow of another topic", [acl("u", ALICE, Op.READ)], AuthorizerSettings(), ALICE, HOST, Op.READ,
     "t", False),
    ("allow of another operation", [acl("t", ALICE, Op.WRITE)], AuthorizerSettings(), ALICE, HOST, Op.READ, "t",
     False),
    ("DENY beats ALLOW", [acl("t", ALICE, Op.READ), acl("t", ALICE, Op.READ, DENY)], AuthorizerSettings(), ALICE,
     HOST, Op.READ, "t", False),
    ("DENY All beats ALLOW Read", [acl("t", ALICE, Op.READ), acl("t", ALICE, Op.ALL, DENY)], AuthorizerSettings(),
     ALICE, HOST, Op.READ, "t", False),
    ("DENY of User:* on a prefix beats a literal ALLOW", [acl("t", ALICE, Op.READ),
     acl("t", "User:*", Op.READ, DENY, pattern=PREFIXED)], AuthorizerSettings(), ALICE, HOST, Op.READ, "t", False),
    ("DENY Read does not deny Describe", [acl("t", ALICE, Op.WRITE), acl("t", ALICE, Op.READ, DENY)],
     AuthorizerSettings(), ALICE, HOST, Op.DESCRIBE, "t", True),
    ("All allows every operation", [acl("t", ALICE, Op.ALL)], AuthorizerSettings(), ALICE, HOST, Op.ALTER_CONFIGS,
     "t", True),
    ("prefixed allow", [acl("orders-", ALICE, Op.WRITE, pattern=PREFIXED)], AuthorizerSettings(), ALICE, HOST,
     Op.WRITE, "orders-eu", True),
    ("prefixed allow does not match a shorter name", [acl("orders-", ALICE, Op.WRITE, pattern=PREFIXED)],
     AuthorizerSettings(), ALICE, HOST, Op.WRITE, "orders", False),
    ("a literal name is not a prefix", [acl("orders", ALICE, Op.WRITE)], AuthorizerSettings(), ALICE, HOST,
     Op.WRITE, "orders-eu", False),
    ("wildcard resource", [acl("*", ALICE, Op.READ)], AuthorizerSettings(), ALICE, HOST, Op.READ, "any", True),
    ("a prefixed '*' is a prefix, not the wildcard", [acl("*", ALICE, Op.READ, pattern=PREFIXED)],
     AuthorizerSettings(), ALICE, HOST, Op.READ, "any", False),
    ("wildcard principal", [acl("t", "User:*", Op.READ)], AuthorizerSettings(), ALICE, HOST, Op.READ, "t", True),
    ("host matches", [acl("t", ALICE, Op.READ, host=HOST)], AuthorizerSettings(), ALICE, HOST, Op.READ, "t", True),
    ("host differs", [acl("t", ALICE, Op.READ, host=HOST)], AuthorizerSettings(), ALICE, OTHER_HOST, Op.READ, "t",
     False),
    ("deny from one host only", [acl("t", ALICE, Op.READ), acl("t", ALICE, Op.READ, DENY, host=OTHER_HOST)],
     AuthorizerSettings(), ALICE, HOST, Op.READ, "t", True),
    ("super user despite a DENY", [acl("t", ALICE, Op.ALL, DENY)],
     AuthorizerSettings(super_users=frozenset({ALICE})), ALICE, HOST, Op.DELETE, "t", True),
    ("super user without any ACL", [], AuthorizerSettings(super_users=frozenset({ALICE})), ALICE, HOST, Op.DELETE,
     "t", True),
    *[
        (f"{implying.kafka_name} implies Describe", [acl("t", ALICE, implying)], AuthorizerSettings(), ALICE, HOST,
         Op.DESCRIBE, "t", True)
        for implying in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    ],
    ("Create does not imply Describe", [acl("t", ALICE, Op.CREATE)], AuthorizerSettings(), ALICE, HOST,
     Op.DESCRIBE, "t", False),
    ("AlterConfigs implies DescribeConfigs", [acl("t", ALICE, Op.ALTER_CONFIGS)], AuthorizerSettings(), ALICE, HOST,
     Op.DESCRIBE_CONFIGS, "t", True),
    ("Describe does not imply Read", [acl("t", ALICE, Op.DESCRIBE)], AuthorizerSettings(), ALICE, HOST, Op.READ,
     "t", False),
    ("Alter does not imply AlterConfigs", [acl("t", ALICE, Op.ALTER)], AuthorizerSettings(), ALICE, HOST,
     Op.ALTER_CONFIGS, "t", False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("acls", "settings", "principal", "host", "operation", "topic", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decision(acls, settings, principal, host, operation, topic, expected) -> None:
    assert authorize(snapshot(*acls), settings, principal, host, operation, TOPIC, topic) is expected


def test_resource_types_do_not_mix() -> None:
    acls = snapshot(acl("billing", ALICE, Op.READ, resource_type=ResourceType.GROUP))
    assert authorize(acls, AuthorizerSettings(), ALICE, HOST, Op.READ, ResourceType.GROUP, "billing")
    assert not authorize(acls, AuthorizerSettings(), ALICE, HOST, Op.READ, TOPIC, "billing")


def test_snapshot_update_replaces_one_resource_and_removes_it_when_empty() -> None:
    pattern, entry = acl("t", ALICE, Op.READ)
    acls = AclSnapshot().with_resource(pattern, frozenset({entry}))
    assert authorize(acls, AuthorizerSettings(), ALICE, HOST, Op.READ, TOPIC, "t")
    emptied = acls.with_resource(pattern, frozenset())
    assert list(emptied.patterns()) == []
    assert authorize(acls, AuthorizerSettings(), ALICE, HOST, Op.READ, TOPIC, "t")  # the old snapshot is unchanged


def test_super_users_are_separated_by_semicolons() -> None:
    assert parse_super_users("User:admin; User:ops;") == {"User:admin", "User:ops"}
    assert parse_super_users("") == frozenset()


def test_znode_paths_and_json_are_kafkas() -> None:
    pattern, entry = acl("orders", ALICE, Op.IDEMPOTENT_WRITE)
    assert acl_znode_path(pattern) == "/kafka-acl/Topic/orders"
    prefixed = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED)
    assert acl_znode_path(prefixed) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    data = encode_acls({entry})
    assert json.loads(data) == {
        "version": 1,
        "acls": [{"principal": ALICE, "permissionType": "Allow", "operation": "IdempotentWrite", "host": "*"}],
    }
    assert decode_acls(data, "/p") == {entry}
    assert encode_change(pattern) == b"TOPIC:orders"
    assert decode_change(b"Topic:orders", LITERAL, "/c") == pattern  # Kafka 2.0's spelling reads the same
    assert decode_change(encode_change(prefixed), PREFIXED, "/c") == prefixed
    assert json.loads(encode_change(prefixed)) == {
        "version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-", "patternType": "PREFIXED"
    }  # fmt: skip


def test_a_damaged_acl_znode_is_named() -> None:
    with pytest.raises(AclError, match="/kafka-acl/Topic/t"):
        decode_acls(b'{"acls": [{"principal": "User:a"}]}', "/kafka-acl/Topic/t")


@pytest.mark.parametrize(
    ("binding", "problem"),
    [
        (AclBinding(*acl("t", ALICE, Op.ANY)), "Invalid operation"),
        (AclBinding(*acl("t", ALICE, Op.READ, AclPermissionType.ANY)), "Invalid permission type"),
        (AclBinding(*acl("t", ALICE, Op.READ, pattern=PatternType.MATCH)), "Invalid pattern type MATCH"),
        (AclBinding(*acl("c", ALICE, Op.ALTER, resource_type=ResourceType.CLUSTER)), "kafka-cluster"),
        (AclBinding(*acl("t", "alice", Op.READ)), "Invalid principal"),
        (AclBinding(*acl("", ALICE, Op.READ)), "empty resource name"),
    ],
)
def test_bindings_kafka_refuses_to_create(binding: AclBinding, problem: str) -> None:
    found = binding_problem(binding)
    assert found is not None and problem in found


def test_filters_match_as_kafkas() -> None:
    literal = ResourcePattern(TOPIC, "orders", LITERAL)
    wildcard = ResourcePattern(TOPIC, "*", LITERAL)
    prefix = ResourcePattern(TOPIC, "ord", PREFIXED)
    other = ResourcePattern(TOPIC, "payments", LITERAL)
    match = AclBindingFilter(TOPIC, "orders", PatternType.MATCH)
    assert [match.matches_pattern(p) for p in (literal, wildcard, prefix, other)] == [True, True, True, False]
    exact = AclBindingFilter(TOPIC, "orders", LITERAL)
    assert [exact.matches_pattern(p) for p in (literal, wildcard, prefix, other)] == [True, False, False, False]
    anything = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY)
    assert all(anything.matches_pattern(p) for p in (literal, wildcard, prefix, other))
    by_principal = AclBindingFilter(principal=BOB, pattern_type=PatternType.ANY)
    assert not by_principal.matches(AclBinding(literal, AccessControlEntry(ALICE, "*", Op.READ, ALLOW)))


def test_the_authorizer_forgets_its_cached_decisions_when_the_acls_change() -> None:
    """A decision is cached per snapshot; a change notification (or a write through this broker) replaces it."""
    import structlog

    from broker.authorizer.authorizer import AclAuthorizer

    authorizer = AclAuthorizer(zk=None, settings=AuthorizerSettings(), logger=structlog.get_logger("test"))  # type: ignore[arg-type]
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")
    pattern, entry = acl("t", ALICE, Op.WRITE)
    authorizer._on_change(pattern, frozenset({entry}))  # what AclChangeListener hands over
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")
    _, deny = acl("t", ALICE, Op.WRITE, DENY)
    authorizer._on_change(pattern, frozenset({entry, deny}))
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")


def test_change_notifications_are_followed_and_expired_ones_purged() -> None:
    """AclChangeListener: a new notification re-reads its resource; one already seen and older than 15 minutes is
    deleted (Kafka's changeExpirationMs), a younger one kept."""
    import asyncio
    from types import SimpleNamespace

    import structlog

    from broker.authorizer.zk_store import AclChangeListener
    from broker.change_notifications import CHANGE_EXPIRATION_MS
    from tests.quorum_harness import poll_until

    now_ms = 10 * CHANGE_EXPIRATION_MS
    pattern, entry = acl("t", ALICE, Op.READ)
    nodes = {
        "/kafka-acl-changes/acl_changes_0000000001": (b"TOPIC:old", now_ms - CHANGE_EXPIRATION_MS - 1),
        "/kafka-acl-changes/acl_changes_0000000002": (b"TOPIC:young", now_ms - 1),
        "/kafka-acl/Topic/t": (encode_acls({entry}), now_ms),
    }

    class Zk:
        async def ensure_path(self, path: str) -> None:
            pass

        async def get_children(self, path: str, watch: object = None) -> list[str]:
            return [p.rsplit("/", 1)[1] for p in nodes if p.rsplit("/", 1)[0] == path]

        async def exists(self, path: str) -> object:
            return SimpleNamespace(ctime=nodes[path][1], version=0) if path in nodes else None

        async def get(self, path: str) -> tuple[bytes, object]:
            return nodes[path][0], SimpleNamespace(ctime=nodes[path][1], version=0)

        async def delete(self, path: str, version: int = -1) -> None:
            del nodes[path]

    changes: list[tuple[ResourcePattern, frozenset[AccessControlEntry]]] = []

    async def changed() -> bool:
        return bool(changes)

    async def scenario() -> None:
        listener = AclChangeListener(Zk(), lambda p, e: changes.append((p, e)), structlog.get_logger("test"),
                                     wall_clock_ms=lambda: now_ms)  # type: ignore[arg-type]  # fmt: skip
        await listener.arm()
        nodes["/kafka-acl-changes/acl_changes_0000000003"] = (b"TOPIC:t", now_ms)
        listener.start()
        for store in listener._stores:  # what a watch on each store does
            store._on_event(None)
        await poll_until(changed, 2.0, "the listener delivered the change")  # its task runs on this loop
        await listener.stop()

    asyncio.run(scenario())
    assert changes == [(pattern, frozenset({entry}))]
    assert sorted(p for p in nodes if "changes" in p) == [
        "/kafka-acl-changes/acl_changes_0000000002",
        "/kafka-acl-changes/acl_changes_0000000003",
    ]
