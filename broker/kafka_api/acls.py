"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140): Kafka's admin clients manage the authorizer's ACLs.

Kafka 2.8 KafkaApis.handleCreateAcls / handleDescribeAcls / handleDeleteAcls (AclApis): the caller needs Alter
on the Cluster to create or delete and Describe on the Cluster to describe (else CLUSTER_AUTHORIZATION_FAILED
in each result); a broker without an authorizer answers SECURITY_DISABLED, "No Authorizer is configured on the
broker". Versions: 1-3, every version kio has (v0 predates pattern types; v2 is the flexible one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker.kafka_api.authorization import authorizer_of, cluster_allowed
from broker.kafka_api.entities import build
from broker.kafka_api.registry import KafkaRequestContext, kafka_api
from client.kafka import errors
from client.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured on the broker"
SECURITY_DISABLED = errors.SecurityDisabledError.code
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.code


def _refusal(ctx: KafkaRequestContext, operation: AclOperation) -> tuple[int, str] | None:
    """Why this request is refused as a whole, or None."""
    if authorizer_of(ctx) is None:
        return SECURITY_DISABLED, NO_AUTHORIZER
    if not cluster_allowed(ctx, operation):
        return CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    return None


@kafka_api(30, "CreateAcls", 1, 3)
async def create_acls(request: Any, ctx: KafkaRequestContext) -> Any:
    refusal = _refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        code, message = refusal
        results = [{"error_code": code, "error_message": message} for _ in request.creations]
        return build(ctx.response_type, throttle_time=0, results=results)
    bindings = [
        AclBinding(
            ResourcePattern(
                ResourceType.of(c.resource_type),
                c.resource_name,
                PatternType.of(c.resource_pattern_type),
            ),
            AccessControlEntry(
                c.principal,
                c.host,
                AclOperation.of(c.operation),
                AclPermissionType.of(c.permission_type),
            ),
        )
        for c in request.creations
    ]
    outcomes = await authorizer_of(ctx).create_acls(bindings)
    results = [{"error_code": code, "error_message": message} for code, message in outcomes]
    return build(ctx.response_type, throttle_time=0, results=results)


def _filter(resource_type: int, name: str | None, pattern_type: int, item: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.of(resource_type),
        name,
        PatternType.of(pattern_type),
        item.principal_filter,
        item.host_filter,
        AclOperation.of(item.operation),
        AclPermissionType.of(item.permission_type),
    )


def _resources(bindings: Iterable[AclBinding]) -> list[dict[str, Any]]:
    """Bindings grouped by resource pattern, as DescribeAclsResponse.aclsResources groups them."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for pattern, entry in bindings:
        grouped.setdefault(pattern, []).append(entry)
    return [
        {
            "resource_type": int(pattern.resource_type),
            "resource_name": pattern.name,
            "pattern_type": int(pattern.pattern_type),
            "acls": [
                {
                    "principal": e.principal,
                    "host": e.host,
                    "operation": int(e.operation),
                    "permission_type": int(e.permission_type),
                }
                for e in entries
            ],
        }  # fmt: skip
        for pattern, entries in grouped.items()
    ]


@kafka_api(29, "DescribeAcls", 1, 3)
async def describe_acls(request: Any, ctx: KafkaRequestContext) -> Any:
    refusal = _refusal(ctx, AclOperation.DESCRIBE)
    acl_filter = _filter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                         request)  # fmt: skip
    if refusal is None and acl_filter.problem() is not None:
        refusal = errors.InvalidRequestError.code, f"DescribeAcls filter: {acl_filter.problem()}"
    if refusal is not None:
        code, message = refusal
        return build(ctx.response_type, throttle_time=0, error_code=code, error_message=message, resources=[])
    bindings = authorizer_of(ctx).describe_acls(acl_filter)
    return build(
        ctx.response_type, throttle_time=0, error_code=errors.NONE, error_message=None, resources=_resources(bindings)
    )


@kafka_api(31, "DeleteAcls", 1, 3)
async def delete_acls(request: Any, ctx: KafkaRequestContext) -> Any:
    refusal = _refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        code, message = refusal
        results = [{"error_code": code, "error_message": message, "matching_acls": []} for _ in request.filters]
        return build(ctx.response_type, throttle_time=0, filter_results=results)
    filters = [
        _filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f) for f in request.filters
    ]
    outcomes = await authorizer_of(ctx).delete_acls(filters)
    results = [
        {
            "error_code": code,
            "error_message": message,
            "matching_acls": [_matching_acl(binding) for binding in deleted],
        }
        for code, message, deleted in outcomes
    ]
    return build(ctx.response_type, throttle_time=0, filter_results=results)


def _matching_acl(binding: AclBinding) -> dict[str, Any]:
    pattern, entry = binding
    return {
        "error_code": errors.NONE,
        "error_message": None,
        "resource_type": int(pattern.resource_type),
        "resource_name": pattern.name,
        "pattern_type": int(pattern.pattern_type),
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission_type),
    }
