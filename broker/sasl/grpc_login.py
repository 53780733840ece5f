"""SASL login on the broker's gRPC port: the same users and mechanisms as a SASL_ Kafka listener, and a session
token in place of the authenticated connection.

Kafka keeps a login on its TCP connection (SaslServerAuthenticator); a gRPC call has no connection of its own, so
the login is an RPC and its result a token:

    SaslAuthenticate(mechanism, client-first)              -> exchange_id, server-first
    SaslAuthenticate(mechanism, client-final, exchange_id) -> server-final, session_token, session_lifetime_ms
    any other call, metadata `authorization: Bearer <session_token>`  -> served as the token's principal

The exchange is broker/sasl/scram.py's (RFC 5802/7677), credentials from the same ScramCredentialCache
(`/config/users`); PLAIN, when `sasl.enabled.mechanisms` names it, is its single step. Failures answer Kafka's
codes and messages (SASL_AUTHENTICATION_FAILED with "Authentication failed during authentication due to invalid
credentials with SASL mechanism SCRAM-SHA-512", UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE).

A session lives `connections.max.reauth.ms` (KIP-368; 0: until the broker stops): an expired token is refused and
the client logs in again, which is when a deleted user is refused, as KIP-368's re-authentication does on a Kafka
connection. A token is not a connection the broker could close, so a user whose last credential is deleted also
loses its sessions at once (`end_sessions_of`, called by the credential cache's notification). Tokens are 256
random bits, held only in this broker's memory (a restarted broker refuses old tokens, and clients log in again).
Both tables are bounded: an exchange left half done is dropped after `EXCHANGE_TIMEOUT_S` or when `EXCHANGES_MAX`
newer ones wait, the oldest session when `SESSIONS_MAX` are live.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.sasl.credential_cache import ScramCredentialCache
from broker.sasl.errors import SaslAuthenticationFailed, SaslCredentialsRejected
from broker.sasl.plain import authenticate_plain
from broker.sasl.scram import ScramServerExchange
from broker.sasl.settings import PLAIN, SaslListenerSettings
from client.kafka import errors
from zkraft_proto import broker_pb2 as pb

TOKEN_BYTES = 32
EXCHANGES_MAX = 1024  # half-done exchanges kept at once (a SCRAM login is two calls)
EXCHANGE_TIMEOUT_S = 30.0
SESSIONS_MAX = 65536
BEARER = "bearer "


class Unauthenticated(Exception):
    """A call this port cannot serve for want of a login: str(self) is the one line the client reads."""


@dataclass(slots=True)
class _Pending:
    mechanism: str
    exchange: ScramServerExchange
    started_s: float


@dataclass(frozen=True, slots=True)
class _Session:
    principal: str
    expires_at_s: float | None  # None: does not expire


class GrpcSaslLogin:
    """The gRPC port's logins and the sessions they opened."""

    def __init__(
        self,
        settings: SaslListenerSettings,
        credentials: ScramCredentialCache,
        logger: Any,
        now_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._credentials = credentials
        self._log = logger
        self._now_s = now_s
        self._pending: dict[str, _Pending] = {}  # exchange id -> exchange, oldest first
        self._sessions: dict[str, _Session] = {}  # token -> session, oldest first
        if credentials is not None:
            credentials.on_user_deleted.append(self.end_sessions_of)

    # ------------------------------------------------------------------ the SaslAuthenticate RPC

    async def authenticate(self, request: pb.SaslAuthenticateRequest) -> pb.SaslAuthenticateResponse:
        mechanism = request.mechanism.upper()
        if mechanism not in self._settings.enabled_mechanisms:
            self._log.info("grpc_sasl_mechanism_refused", mechanism=mechanism)
            return pb.SaslAuthenticateResponse(
                error_code=errors.UnsupportedSaslMechanismError.code,
                error_message=f"Unsupported SASL mechanism {mechanism}; this broker enables "
                f"{', '.join(self._settings.enabled_mechanisms)} (sasl.enabled.mechanisms)",
            )
        try:
            if mechanism == PLAIN:
                return self._complete(mechanism, authenticate_plain(bytes(request.auth_bytes),
                                                                    self._settings.plain_users), b"")  # fmt: skip
            return await self._scram_step(mechanism, request)
        except SaslAuthenticationFailed as exc:
            return self._failed(mechanism, str(exc), str(exc))
        except SaslCredentialsRejected as exc:
            message = (
                "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                + mechanism
            )
            return self._failed(mechanism, message, str(exc))

    async def _scram_step(self, mechanism: str, request: pb.SaslAuthenticateRequest) -> pb.SaslAuthenticateResponse:
        self._expire_exchanges()
        if not request.exchange_id:
            exchange = ScramServerExchange(mechanism, self._credentials.credential)
            server_first = await exchange.step(bytes(request.auth_bytes))
            exchange_id = secrets.token_urlsafe(TOKEN_BYTES)
            while len(self._pending) >= EXCHANGES_MAX:
                self._pending.pop(next(iter(self._pending)))
            self._pending[exchange_id] = _Pending(mechanism, exchange, self._now_s())
            return pb.SaslAuthenticateResponse(auth_bytes=server_first, exchange_id=exchange_id)
        pending = self._pending.pop(request.exchange_id, None)
        if pending is None or pending.mechanism != mechanism:
            return pb.SaslAuthenticateResponse(
                error_code=errors.IllegalSaslStateError.code,
                error_message="SaslAuthenticate names no exchange in progress on this broker (it expired after "
                f"{EXCHANGE_TIMEOUT_S:.0f} s, or the broker restarted): start the login again",
            )
        server_final = await pending.exchange.step(bytes(request.auth_bytes))
        return self._complete(mechanism, pending.exchange.username, server_final)

    def _complete(self, mechanism: str, username: str, token: bytes) -> pb.SaslAuthenticateResponse:
        principal = f"User:{username}"
        lifetime_ms = self._settings.reauth_ms_by_mechanism.get(mechanism, 0)
        now_s = self._now_s()
        self._expire_sessions(now_s)
        while len(self._sessions) >= SESSIONS_MAX:
            self._sessions.pop(next(iter(self._sessions)))
        session_token = secrets.token_urlsafe(TOKEN_BYTES)
        self._sessions[session_token] = _Session(principal, now_s + lifetime_ms / 1000 if lifetime_ms > 0 else None)
        self._log.info("grpc_sasl_authenticated", principal=principal, mechanism=mechanism,
                       session_lifetime_ms=lifetime_ms)  # fmt: skip
        return pb.SaslAuthenticateResponse(
            auth_bytes=token, session_token=session_token, session_lifetime_ms=lifetime_ms
        )

    def _failed(self, mechanism: str, message: str, detail: str) -> pb.SaslAuthenticateResponse:
        self._log.info("grpc_sasl_authentication_failed", mechanism=mechanism, reason=detail)
        return pb.SaslAuthenticateResponse(error_code=errors.SaslAuthenticationFailedError.code, error_message=message)

    def _expire_exchanges(self) -> None:
        oldest_kept_s = self._now_s() - EXCHANGE_TIMEOUT_S
        while self._pending:
            first = next(iter(self._pending))
            if self._pending[first].started_s >= oldest_kept_s:
                break
            del self._pending[first]

    def _expire_sessions(self, now_s: float) -> None:
        """Drops expired sessions from the oldest on (every mechanism's lifetime is fixed, so the oldest expire
        first, except across mechanisms of different lifetimes, whose stragglers `principal` refuses anyway)."""
        while self._sessions:
            first = next(iter(self._sessions))
            expires_at_s = self._sessions[first].expires_at_s
            if expires_at_s is None or expires_at_s >= now_s:
                break
            del self._sessions[first]

    def end_sessions_of(self, username: str) -> None:
        """The user was deleted: its tokens are refused from now on (a scan: deletions are rare)."""
        principal = f"User:{username}"
        ended = [token for token, session in self._sessions.items() if session.principal == principal]
        for token in ended:
            del self._sessions[token]
        if ended:
            self._log.info("grpc_sasl_sessions_ended", principal=principal, sessions=len(ended))

    # ------------------------------------------------------------------ later calls

    def principal(self, authorization: str) -> str:
        """The principal of a call's `authorization` metadata; Unauthenticated (one line) when it opens no
        session here."""
        if not authorization.lower().startswith(BEARER):
            raise Unauthenticated("the authorization metadata is not 'Bearer <session token>'")
        session = self._sessions.get(authorization[len(BEARER) :].strip())
        if session is None:
            raise Unauthenticated(
                "the session token is not known to this broker (it restarted, or the session ended): log in again"
            )
        if session.expires_at_s is not None and self._now_s() > session.expires_at_s:
            raise Unauthenticated("the SASL session expired (connections.max.reauth.ms): log in again")
        return session.principal
