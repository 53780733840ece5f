"""One connection's SASL state on a SASL_ listener, as Kafka 2.8's SaslServerAuthenticator and KafkaChannel.

    HANDSHAKE --SaslHandshake v1, mechanism enabled--> AUTHENTICATE --SaslAuthenticate...--> COMPLETE
        ^                                                                                      |
        +----------------- SaslHandshake on an authenticated connection (KIP-368) ------------+

What each state admits (`admit`, called by the listener before a request is dispatched):
* HANDSHAKE: ApiVersions and SaslHandshake; anything else closes the connection (Kafka: "Unexpected Kafka
  request of type X during SASL handshake.", an InvalidRequestException).
* AUTHENTICATE: SaslAuthenticate; anything else is answered with ILLEGAL_SASL_STATE (34) in its own response,
  then the connection is closed.
* COMPLETE: everything, until the session's lifetime (`connections.max.reauth.ms`, KIP-368) has passed;
  after that, any request but a SaslHandshake (which begins re-authentication) closes the connection. While
  re-authenticating, the previous session keeps serving until it expires; the user must stay the same.
A refused mechanism (UNSUPPORTED_SASL_MECHANISM, 33) or a failed exchange (SASL_AUTHENTICATION_FAILED, 58,
with Kafka's message) is answered, then the connection is closed (`failed`).

SaslHandshake v0 (raw SASL tokens after the handshake, without SaslAuthenticate's framing) is not served:
the connection is closed with a log line naming it. Java clients since 1.0, librdkafka, kafka-python and
aiokafka send v1.
"""

from __future__ import annotations

import datetime
import enum
import time
from collections.abc import Callable
from typing import Any

from broker.kafka_api.entities import build
from broker.kafka_api.registry import CloseConnection, KafkaConnectionState
from broker.sasl.credential_cache import ScramCredentialCache
from broker.sasl.errors import SaslAuthenticationFailed, SaslCredentialsRejected
from broker.sasl.plain import authenticate_plain
from broker.sasl.scram import ScramServerExchange
from broker.sasl.settings import PLAIN, SaslListenerSettings
from client.kafka import errors

# Kafka's sasl.server.max.receive.size default: the largest frame a connection may send before it has logged in.
SASL_RECEIVE_BYTES_MAX = 524288
API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class Admission(enum.Enum):
    SERVE = "serve"
    ILLEGAL_STATE = "illegal_state"  # answer ILLEGAL_SASL_STATE, then close
    CLOSE = "close"


class _PlainExchange:
    """PLAIN's single step, shaped as the SCRAM exchange."""

    def __init__(self, users: Any) -> None:
        self._users = users
        self.username = ""
        self.complete = False

    async def step(self, token: bytes) -> bytes:
        self.username = authenticate_plain(token, self._users)
        self.complete = True
        return b""


class SaslAuthenticator:
    def __init__(
        self,
        settings: SaslListenerSettings,
        credentials: ScramCredentialCache,
        connection: KafkaConnectionState,
        logger: Any,
        now_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._credentials = credentials
        self._connection = connection
        self._log = logger
        self._now_s = now_s
        self.state = SaslState.HANDSHAKE
        self.mechanism = ""
        self._exchange: ScramServerExchange | _PlainExchange | None = None
        self._expires_at_s: float | None = None  # None: the session does not expire
        self._reauthenticating = False
        self._bad_mechanism = ""  # re-authentication asked for another mechanism: refused at its first token

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    @property
    def receive_bytes_max(self) -> int:
        """The largest frame the connection may send now: bounded until its first login completes."""
        if self.state is SaslState.COMPLETE or self._reauthenticating:
            return 2**31 - 1
        return SASL_RECEIVE_BYTES_MAX

    def in_exchange(self, api_key: int) -> bool:
        """True while the listener must handle one request at a time: during an exchange, and for the requests
        that drive one (the state they leave decides what the next request may be)."""
        return self.state is not SaslState.COMPLETE or api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY)

    def admit(self, api_key: int) -> tuple[Admission, str]:
        """May a request with `api_key` be served now? (admission, reason when refused)."""
        state = self.state
        if state is SaslState.COMPLETE or (self._reauthenticating and not self._expired()):
            if api_key != SASL_HANDSHAKE_KEY and self._expired():
                return Admission.CLOSE, "the SASL session expired without re-authentication (connections.max.reauth.ms)"
            return Admission.SERVE, ""
        if state is SaslState.HANDSHAKE:
            if api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY):
                return Admission.SERVE, ""
            return Admission.CLOSE, f"Unexpected Kafka request of type {api_key} during SASL handshake."
        if state is SaslState.AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE_KEY:
                return Admission.SERVE, ""
            return Admission.ILLEGAL_STATE, f"Unexpected Kafka request of type {api_key} during SASL authentication."
        return Admission.CLOSE, "SASL authentication failed"

    def refuse(self) -> None:
        """The listener answered a request with ILLEGAL_SASL_STATE: the connection ends after it."""
        self.state = SaslState.FAILED

    def _expired(self) -> bool:
        return self._expires_at_s is not None and self._now_s() > self._expires_at_s

    # ------------------------------------------------------------------ SaslHandshake (KIP-43)

    def handshake(self, request: Any, ctx: Any) -> Any:
        if ctx.api_version == 0:
            self.state = SaslState.FAILED
            raise CloseConnection(
                "SaslHandshake v0 (raw SASL tokens without SaslAuthenticate) is not served; clients send v1"
            )
        if self.state is SaslState.COMPLETE:  # KIP-368: re-authentication on the same connection
            self._reauthenticating = True
            self.state = SaslState.HANDSHAKE
        if self.state is not SaslState.HANDSHAKE:
            self.state = SaslState.FAILED
            return self._handshake_response(ctx, errors.IllegalSaslStateError.code)
        mechanism = request.mechanism
        if mechanism not in self._settings.enabled_mechanisms:
            self._log.info("kafka_sasl_mechanism_refused", mechanism=mechanism)
            self.state = SaslState.FAILED
            return self._handshake_response(ctx, errors.UnsupportedSaslMechanismError.code)
        if self._reauthenticating and mechanism != self.mechanism:
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self.mechanism}'"
            )
        else:
            self.mechanism = mechanism
            self._exchange = (
                _PlainExchange(self._settings.plain_users)
                if mechanism == PLAIN
                else ScramServerExchange(mechanism, self._credentials.credential)
            )
        self.state = SaslState.AUTHENTICATE
        return self._handshake_response(ctx, errors.NONE)

    def _handshake_response(self, ctx: Any, error_code: int) -> Any:
        return build(ctx.response_type, error_code=error_code, mechanisms=list(self._settings.enabled_mechanisms))

    # ------------------------------------------------------------------ SaslAuthenticate (KIP-152)

    async def authenticate(self, request: Any, ctx: Any) -> Any:
        if self.state is not SaslState.AUTHENTICATE:
            return _authenticate_response(
                ctx,
                errors.IllegalSaslStateError.code,
                "SaslAuthenticate request received after successful authentication",
            )
        exchange = self._exchange
        assert exchange is not None
        try:
            if self._bad_mechanism:
                raise SaslAuthenticationFailed(self._bad_mechanism)
            token = await exchange.step(bytes(request.auth_bytes))
            if exchange.complete:
                lifetime_ms = self._complete(exchange.username)
                return _authenticate_response(ctx, errors.NONE, None, token, lifetime_ms)
            return _authenticate_response(ctx, errors.NONE, None, token)
        except SaslAuthenticationFailed as exc:
            return self._fail(ctx, str(exc), str(exc))
        except SaslCredentialsRejected as exc:
            what = "re-authentication" if self._reauthenticating else "authentication"
            message = (
                f"Authentication failed during {what} due to invalid credentials with SASL mechanism {self.mechanism}"
            )
            return self._fail(ctx, message, str(exc))

    def _complete(self, username: str) -> int:
        """The exchange succeeded: the connection's principal, and the session's lifetime in ms (0: none)."""
        principal = f"User:{username}"
        previous = self._connection.principal
        if self._reauthenticating and principal != previous:
            raise SaslAuthenticationFailed(
                "Cannot change principals during re-authentication from "
                f"{previous.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}"
            )
        lifetime_ms = self._settings.reauth_ms_by_mechanism.get(self.mechanism, 0)
        self._expires_at_s = self._now_s() + lifetime_ms / 1000 if lifetime_ms > 0 else None
        self._connection.principal = principal
        self.state = SaslState.COMPLETE
        self._log.info(
            "kafka_sasl_authenticated",
            principal=principal,
            mechanism=self.mechanism,
            reauthentication=self._reauthenticating,
            session_lifetime_ms=lifetime_ms,
        )
        self._reauthenticating = False
        return lifetime_ms

    def _fail(self, ctx: Any, message: str, detail: str) -> Any:
        self._log.info(
            "kafka_sasl_authentication_failed",
            principal=self._connection.principal,  # User:ANONYMOUS at a first login, the user at a re-login
            mechanism=self.mechanism,
            reauthentication=self._reauthenticating,
            reason=detail,
        )
        self.state = SaslState.FAILED
        return _authenticate_response(ctx, errors.SaslAuthenticationFailedError.code, message)


def _authenticate_response(
    ctx: Any, error_code: int, message: str | None, token: bytes = b"", lifetime_ms: int = 0
) -> Any:
    fields: dict[str, Any] = {"error_code": error_code, "error_message": message, "auth_bytes": token}
    if ctx.api_version >= 1:
        fields["session_lifetime"] = datetime.timedelta(milliseconds=lifetime_ms)
    return build(ctx.response_type, **fields)


class SaslListener:
    """What a SASL_ listener shares between its connections: its settings and the broker's SCRAM credentials."""

    def __init__(
        self,
        settings: SaslListenerSettings,
        credentials: ScramCredentialCache,
        now_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.credentials = credentials
        self._now_s = now_s  # the clock sessions expire by (a test's own clock)

    def authenticator(self, connection: KafkaConnectionState, logger: Any) -> SaslAuthenticator:
        return SaslAuthenticator(self.settings, self.credentials, connection, logger, self._now_s)
