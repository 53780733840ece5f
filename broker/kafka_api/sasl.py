"""SaslAuthenticate (KIP-152, v1+ with the session lifetime of KIP-368): the SASL tokens of an exchange.

SaslHandshake is in cluster.py (every listener answers it). Versions: Kafka 2.8's 0-2, all in kio.
"""

from __future__ import annotations

from typing import Any

from broker.kafka_api.entities import build
from broker.kafka_api.registry import KafkaRequestContext, kafka_api
from client.kafka import errors

SASL_AUTHENTICATE_KEY = 36


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
