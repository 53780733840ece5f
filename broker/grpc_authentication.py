"""Who calls the broker's gRPC port: each call's principal, or UNAUTHENTICATED with one line.

The gRPC port is registered as the listener `GRPC`; its security protocol is `listener.security.protocol.map`'s
entry for GRPC, else `security.inter.broker.protocol` (broker/tls_settings.py). A call's principal is, in order:
* the session of its `authorization: Bearer <token>` metadata, opened by a SASL login (broker/sasl/grpc_login.py)
  on a SASL_SSL or SASL_PLAINTEXT port; a token this broker does not know, or whose session expired, is refused;
* its client certificate's subject, `User:CN=broker-1,...` (broker/ssl_principal.py), with mutual TLS
  (`ssl.client.auth=required`): how brokers call each other, as on Kafka's SSL listeners;
* else, on a SASL port, nothing: refused, since the port requires a login; on any other port User:ANONYMOUS.

The principal is handed to the authorizer's checks (broker/authorizer/grpc_checks.py) through `CALL_PRINCIPAL`,
a context variable set for the call's own task. A port that needs no principal (no SASL, and no authorizer)
installs none of this, so its calls cost nothing more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import grpc

from broker.sasl.grpc_login import GrpcSaslLogin, Unauthenticated
from broker.ssl_principal import certificate_principal

ANONYMOUS = "User:ANONYMOUS"
CALL_PRINCIPAL: ContextVar[str] = ContextVar("grpc_call_principal", default=ANONYMOUS)
AUTHORIZATION_KEY = "authorization"
LOGIN_METHOD = "SaslAuthenticate"  # served before any login, as Kafka serves SaslHandshake/SaslAuthenticate
_PEM_CERT_PROPERTY = "x509_pem_cert"

Handler = Callable[[Any, Any], Awaitable[Any]]


def peer_certificate_principal(context: Any) -> str | None:
    """The principal of the caller's verified TLS certificate; None without one."""
    pems = context.auth_context().get(_PEM_CERT_PROPERTY)
    return certificate_principal(bytes(pems[0])) if pems else None


@dataclass(frozen=True, slots=True)
class GrpcAuthentication:
    """How the gRPC port knows its callers: `login` when it is a SASL port, `mutual_tls` with client certificates."""

    login: GrpcSaslLogin | None
    mutual_tls: bool

    @property
    def knows_callers(self) -> bool:
        """Whether a caller here can be told apart from another (so that brokers' calls can be checked)."""
        return self.login is not None or self.mutual_tls

    def principal(self, context: Any) -> str:
        authorization = _authorization(context)
        if authorization is not None and self.login is not None:
            return self.login.principal(authorization)
        if self.mutual_tls:
            principal = peer_certificate_principal(context)
            if principal is not None:
                return principal
        if self.login is not None:
            raise Unauthenticated(
                "this broker's gRPC port requires a SASL login: set security.protocol=SASL_SSL, sasl.mechanism "
                "and sasl.jaas.config (or sasl.username and sasl.password)"
            )
        return ANONYMOUS

    def wrap(self, name: str, handler: Handler) -> Handler:
        """`handler` (the RPC `name`) served only to an authenticated caller, as its principal."""
        if name == LOGIN_METHOD:
            return handler

        async def authenticated(request: Any, context: Any) -> Any:
            try:
                principal = self.principal(context)
            except Unauthenticated as exc:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
            token = CALL_PRINCIPAL.set(principal)
            try:
                return await handler(request, context)
            finally:
                CALL_PRINCIPAL.reset(token)

        return authenticated


def _authorization(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == AUTHORIZATION_KEY:
            return value if isinstance(value, str) else value.decode("latin-1")
    return None
