"""The authorizer's checks as the Kafka handlers make them (Kafka 2.8 AuthHelper.authorize / filterByAuthorized).

The principal is the connection's (`ctx.connection.principal`), the host the client's address. Without an
authorizer (`ctx.service.authorizer` is None, `authorizer.class.name` unset) every check is that one test.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker.kafka_api.registry import KafkaRequestContext
from client.kafka.acls import CLUSTER_NAME, AclOperation, ResourceType


def authorizer_of(ctx: KafkaRequestContext) -> Any:
    """The broker's AclAuthorizer, or None (a service built without one, as tests' stand-ins are, has none)."""
    return getattr(ctx.service, "authorizer", None)


def allowed(
    ctx: KafkaRequestContext, operation: AclOperation, resource_type: ResourceType, name: str, log_denied: bool = True
) -> bool:
    authorizer = authorizer_of(ctx)
    if authorizer is None:
        return True
    principal = ctx.connection.principal
    return bool(authorizer.authorize(principal, ctx.client_host, operation, resource_type, name, log_denied))


def cluster_allowed(ctx: KafkaRequestContext, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def topics_refused(
    ctx: KafkaRequestContext, operation: AclOperation, names: Iterable[str], log_denied: bool = True
) -> set[str]:
    """The topics among `names` the principal may not do `operation` to (empty without an authorizer)."""
    if authorizer_of(ctx) is None:
        return set()
    return {name for name in set(names) if not allowed(ctx, operation, ResourceType.TOPIC, name, log_denied)}
