"""The SDK's SASL login on a broker's gRPC port, and the session token its calls carry.

A Kafka client logs in on each connection it opens to a SASL_ listener; the SDK logs in once per broker (one gRPC
channel each) with the broker's SaslAuthenticate RPC (broker/sasl/grpc_login.py) and then sends
`authorization: Bearer <token>` with every call on that channel (`SessionInterceptor`).

`ensure()` is called before a call is made (KafkaClusterClient hands out a stub only after it): it logs in when
there is no session, or when the session has passed 85% of its lifetime (`connections.max.reauth.ms`; Kafka's
clients re-authenticate between 85% and 95% of it, KIP-368), so the broker never sees an expired token from a
client that keeps calling. A call the broker answers UNAUTHENTICATED drops the token (the broker restarted, or the
session ended), so the next `ensure()` logs in again. A refused login raises Kafka's error with the broker's
message: SaslAuthenticationFailedError's "Authentication failed during authentication due to invalid credentials
with SASL mechanism SCRAM-SHA-512".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from client.kafka import codec
from client.kafka.client_errors import KafkaConnectionError
from client.kafka.errors import NONE, KafkaError, RequestTimedOutError, SaslAuthenticationFailedError, error_for
from client.kafka.scram import ScramClientExchange, ScramCredentialError
from runtime.client_config import SaslCredentials

REFRESH_AT_LIFETIME_FRACTION = 0.85
AUTHORIZATION_KEY = "authorization"


class GrpcSaslSession:
    """One broker's session: logs in on `channel` (the channel without the interceptor) when needed."""

    def __init__(
        self,
        address: str,
        channel: grpc.Channel,
        credentials: SaslCredentials,
        timeout_s: float,
        now_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._address = address
        self._stub = codec.broker_stub(channel)
        self._credentials = credentials
        self._timeout_s = timeout_s
        self._now_s = now_s
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at_s: float | None = None  # None: the session does not expire
        self.logins = 0

    @property
    def token(self) -> str | None:
        return self._token

    def ensure(self) -> None:
        """A live session with this broker, logging in if there is none (KafkaError when the login fails)."""
        if self._token is not None and (self._refresh_at_s is None or self._now_s() < self._refresh_at_s):
            return
        with self._lock:
            if self._token is not None and (self._refresh_at_s is None or self._now_s() < self._refresh_at_s):
                return
            self._token, self._refresh_at_s = self._login()
            self.logins += 1

    def invalidate(self, token: str) -> None:
        """The broker refused `token`: the next `ensure()` logs in again (unless another login replaced it)."""
        with self._lock:
            if self._token == token:
                self._token = None

    def _login(self) -> tuple[str, float | None]:
        mechanism = self._credentials.mechanism
        started_s = self._now_s()
        if mechanism == "PLAIN":
            message = f"\x00{self._credentials.username}\x00{self._credentials.password}".encode()
            step = self._step(message, "")
        else:
            exchange = ScramClientExchange(mechanism, self._credentials.username, self._credentials.password)
            first = self._step(exchange.client_first(), "")
            try:
                final = exchange.client_final(first.auth_bytes)
                step = self._step(final, first.exchange_id)
                exchange.verify(step.auth_bytes)
            except ScramCredentialError as exc:
                raise SaslAuthenticationFailedError(f"{self._address}: {exc}") from None
        if not step.session_token:
            raise SaslAuthenticationFailedError(f"{self._address}: the SASL login ended without a session")
        lifetime_s = step.session_lifetime_ms / 1000
        return step.session_token, started_s + lifetime_s * REFRESH_AT_LIFETIME_FRACTION if lifetime_s > 0 else None

    def _step(self, message: bytes, exchange_id: str) -> codec.SaslStep:
        request = codec.sasl_authenticate_request(self._credentials.mechanism, message, exchange_id)
        try:
            step = codec.sasl_authenticate_reply(self._stub.SaslAuthenticate(request, timeout=self._timeout_s))
        except grpc.RpcError as exc:
            raise _login_failure(self._address, exc) from None
        if step.error_code != NONE:
            raise error_for(step.error_code, step.error_message)
        return step


def _login_failure(address: str, exc: grpc.RpcError) -> KafkaError:
    code = exc.code() if hasattr(exc, "code") else None
    message = f"SaslAuthenticate to {address}: {exc.details() if hasattr(exc, 'details') else exc}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(message)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return SaslAuthenticationFailedError(f"{address} serves no SASL login (an older broker)")
    return KafkaConnectionError(message)


class SessionInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Adds the session's token to every call; a call answered UNAUTHENTICATED drops it."""

    def __init__(self, session: GrpcSaslSession) -> None:
        self._session = session

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        token = self._session.token
        if token is None:
            return continuation(client_call_details, request)
        metadata = [*(client_call_details.metadata or ()), (AUTHORIZATION_KEY, f"Bearer {token}")]
        outcome = continuation(client_call_details._replace(metadata=metadata), request)
        outcome.add_done_callback(lambda done: self._on_done(token, done))
        return outcome

    def _on_done(self, token: str, outcome: Any) -> None:
        if outcome.code() == grpc.StatusCode.UNAUTHENTICATED:
            self._session.invalidate(token)
