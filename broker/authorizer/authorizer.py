"""The broker's AclAuthorizer (Kafka 2.8 kafka.security.authorizer.AclAuthorizer), on when
`authorizer.class.name=kafka.security.authorizer.AclAuthorizer`.

It keeps every ACL in memory (an `AclSnapshot`, swapped whole on each change), loaded from ZooKeeper at start and
kept current by the change notifications (zk_store.AclChangeListener), so a check is a few dictionary look-ups
and no I/O. Off (no `authorizer.class.name`), the broker has no authorizer at all and the handlers' checks are
one `is None` test: nothing else runs.

The principal is one parameter of every check: Kafka's listener gives the connection's (`User:ANONYMOUS` until
SASL or TLS authenticates it), the gRPC front end its own.
"""

from __future__ import annotations

from typing import Any

from broker.authorizer import AUTHORIZER_CLASSES
from broker.authorizer.decision import AclSnapshot, AuthorizerSettings, authorize
from broker.authorizer.zk_store import (
    AclChangeListener,
    AclStoreError,
    Entries,
    add_bindings,
    load_all_acls,
    remove_bindings,
)
from client.kafka import errors
from client.kafka.acls import (
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    ResourcePattern,
    ResourceType,
    binding_problem,
)
from client.zk.aio import AsyncZkClient

DECISIONS_CACHED_MAX = 100_000  # distinct (principal, host, operation, resource) decisions kept at once
NONE = errors.NONE
INVALID_REQUEST = errors.InvalidRequestError.code
UNKNOWN_SERVER_ERROR = errors.UnknownServerError.code


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:broker`), as Kafka splits them."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def authorizer_settings(config: Any) -> AuthorizerSettings:
    return AuthorizerSettings(
        super_users=parse_super_users(config.super_users),
        allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
    )


async def start_authorizer(config: Any, zk: AsyncZkClient, logger: Any) -> AclAuthorizer | None:
    """The broker's authorizer, started (its ACLs loaded), or None when `authorizer.class.name` is empty."""
    if config.authorizer_class_name not in AUTHORIZER_CLASSES:
        return None
    authorizer = AclAuthorizer(zk, authorizer_settings(config), logger)
    await authorizer.start()
    return authorizer


class AclAuthorizer:
    def __init__(self, zk: AsyncZkClient, settings: AuthorizerSettings, logger: Any) -> None:
        self._zk = zk
        self.settings = settings
        self._log = logger
        self._snapshot = AclSnapshot()
        # Decisions already made on this snapshot: a client repeats the same checks on every request (Produce:
        # Write on its topics), so after the first each is one look-up. Emptied with every change of the ACLs.
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        self._listener = AclChangeListener(zk, self._on_change, logger)

    async def start(self) -> None:
        """AclAuthorizer.startup: watch the change stores first, then load everything, so no change between
        the two is missed (a change seen twice only re-reads the same resource)."""
        await self._listener.arm()
        acls = await load_all_acls(self._zk, self._on_unreadable)
        self._snapshot = AclSnapshot.of(acls)
        self._decisions = {}
        self._listener.start()
        self._log.info(
            "authorizer_started",
            resources=len(acls),
            super_users=sorted(self.settings.super_users),
            allow_everyone_if_no_acl_found=self.settings.allow_everyone_if_no_acl_found,
        )

    async def stop(self) -> None:
        await self._listener.stop()

    def _on_unreadable(self, path: str, error: str) -> None:
        self._log.warning("acl_znode_unreadable", path=path, error=error)

    def _on_change(self, pattern: ResourcePattern, entries: Entries) -> None:
        self._snapshot = self._snapshot.with_resource(pattern, entries)
        self._decisions = {}

    # ---------------------------------------------------------------- checks

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        """One decision; a refusal is logged (as Kafka's authorizer logger does) unless the caller only filters a
        listing (Metadata of all topics: Kafka's logIfDenied=false), which would log every hidden topic."""
        key = (principal, host, operation, resource_type, name)
        allowed = self._decisions.get(key)
        if allowed is None:
            allowed = authorize(self._snapshot, self.settings, principal, host, operation, resource_type, name)
            if len(self._decisions) >= DECISIONS_CACHED_MAX:
                self._decisions = {}
            self._decisions[key] = allowed
        if not allowed and log_denied:
            self._log.info(
                "authorization_denied",
                principal=principal,
                host=host,
                operation=operation.kafka_name,
                resource_type=resource_type.kafka_name,
                resource=name,
            )
        return allowed

    # ---------------------------------------------------------------- CreateAcls / DescribeAcls / DeleteAcls

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[int, str | None]]:
        """(error code, message) per binding, as CreateAclsResponse carries them; valid ones are written."""
        results: list[tuple[int, str | None]] = []
        valid = []
        for binding in bindings:
            problem = binding_problem(binding)
            results.append((INVALID_REQUEST, problem) if problem else (NONE, None))
            if problem is None:
                valid.append(binding)
        if valid:
            try:
                await add_bindings(self._zk, valid)
            except AclStoreError as exc:
                return [(UNKNOWN_SERVER_ERROR, str(exc)) if r[0] == NONE else r for r in results]
            for pattern in {b.pattern for b in valid}:  # read back what this broker wrote, as Kafka's cache update
                self._on_change(pattern, self._entries_after_write(pattern, valid))
        return results

    def _entries_after_write(self, pattern: ResourcePattern, added: list[AclBinding]) -> Entries:
        return self._snapshot.entries(pattern) | {b.entry for b in added if b.pattern == pattern}

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in self._snapshot.patterns()
            for entry in sorted(entries)
            if acl_filter.matches(AclBinding(pattern, entry))
        ]

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[tuple[int, str | None, list[AclBinding]]]:
        """(error code, message, deleted bindings) per filter, as DeleteAclsResponse carries them."""
        usable = [f for f in filters if f.problem() is None]
        try:
            removed = await remove_bindings(self._zk, list(self._snapshot.patterns()), usable)
        except (AclStoreError, AclError) as exc:
            return [(UNKNOWN_SERVER_ERROR, str(exc), []) for _ in filters]
        for bindings in removed:
            for binding in bindings:
                entries = self._snapshot.entries(binding.pattern) - {binding.entry}
                self._on_change(binding.pattern, entries)
        by_filter = dict(zip(usable, removed, strict=True))
        return [
            (INVALID_REQUEST, f.problem(), []) if f.problem() else (NONE, None, by_filter.get(f, [])) for f in filters
        ]
