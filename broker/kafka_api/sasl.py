"""SaslAuthenticate (KIP-152, v1+ with the session lifetime of KIP-368): the SASL tokens of an exchange; and
DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554): SCRAM users for Kafka's admin clients.

SaslHandshake is in cluster.py (every listener answers it). Versions: Kafka 2.8's (SaslAuthenticate 0-2, the
KIP-554 APIs 0), all in kio. The KIP-554 APIs need Describe / Alter on the Cluster where an authorizer is
enabled (Kafka 2.8 KafkaApis.handleDescribeUserScramCredentialsRequest / handleAlterUserScramCredentialsRequest).
"""

from __future__ import annotations

from typing import Any

from broker.kafka_api.authorization import cluster_allowed
from broker.kafka_api.entities import build
from broker.kafka_api.registry import KafkaRequestContext, kafka_api
from broker.sasl.user_admin import alter_user_scram, describe_user_scram
from client.kafka import errors
from client.kafka.acls import AclOperation

SASL_AUTHENTICATE_KEY = 36
DESCRIBE_USER_SCRAM_CREDENTIALS_KEY = 50
ALTER_USER_SCRAM_CREDENTIALS_KEY = 51


@kafka_api(SASL_AUTHENTICATE_KEY, "SaslAuthenticate", 0, 2)
async def sasl_authenticate(request: Any, ctx: KafkaRequestContext) -> Any:
    """The connection's authenticator runs the exchange; a listener without SASL answers ILLEGAL_SASL_STATE
    (Kafka's KafkaApis.handleSaslAuthenticateRequest)."""
    authenticator = ctx.connection.authenticator
    if authenticator is not None:
        return await authenticator.authenticate(request, ctx)
    return build(
        ctx.response_type,
        error_code=errors.IllegalSaslStateError.code,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


@kafka_api(DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, "DescribeUserScramCredentials", 0, 0)
async def describe_user_scram_credentials(request: Any, ctx: KafkaRequestContext) -> Any:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return build(
            ctx.response_type,
            throttle_time=0,
            error_code=errors.ClusterAuthorizationFailedError.code,
            error_message="Cluster authorization failed.",  # Errors.CLUSTER_AUTHORIZATION_FAILED's message
            results=[],
        )
    users = None if request.users is None else [u.name for u in request.users]
    results = await describe_user_scram(ctx.service.admin.zk, users)
    return build(
        ctx.response_type,
        throttle_time=0,
        error_code=errors.NONE,
        error_message=None,
        results=[
            {
                "user": r.user,
                "error_code": r.error_code,
                "error_message": r.error_message,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credential_infos],
            }
            for r in results
        ],
    )


@kafka_api(ALTER_USER_SCRAM_CREDENTIALS_KEY, "AlterUserScramCredentials", 0, 0)
async def alter_user_scram_credentials(request: Any, ctx: KafkaRequestContext) -> Any:
    if not cluster_allowed(ctx, AclOperation.ALTER):  # every user named gets the error, as Kafka answers
        code = errors.ClusterAuthorizationFailedError.code
        users = dict.fromkeys([u.name for u in request.deletions] + [u.name for u in request.upsertions])
        return build(
            ctx.response_type,
            throttle_time=0,
            results=[{"user": user, "error_code": code, "error_message": None} for user in users],
        )
    results = await alter_user_scram(ctx.service.admin.zk, request.upsertions, request.deletions)
    return build(
        ctx.response_type,
        throttle_time=0,
        results=[{"user": r.user, "error_code": r.error_code, "error_message": r.error_message} for r in results],
    )
