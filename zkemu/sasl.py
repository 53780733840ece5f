"""The SASL login of a session's connection, once for both front ends (ZooKeeperServer.processSasl).

A client that logs in sends SASL packets (opcode 102 on the wire, `Request.sasl` on the gRPC
stream) right after connecting; each carries one DIGEST-MD5 token (client.zk.digest_md5, RFC 2831)
and is answered with the server's next token. When the login completes, the connection's
authenticated ids gain `sasl:<user>`, and `super` when the user is zookeeper.superUser. A failed
login is answered AUTHFAILED and the connection closes. A server without a JAAS Server section
answers every SASL packet OK with a null token, as ZooKeeper does when the connection has no SASL
server (processSasl's caught NullPointerException).

The users come from the JAAS file's `Server` section (`user_<name>="<password>"`), read once at
start-up; `enforce` implements ZooKeeper 3.7's enforce.auth.enabled / enforce.auth.schemes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from client.zk.digest_md5 import DigestMd5Server, SaslError
from quorum.facade import NodeSettings
from runtime.jaas import digest_server_users
from zkemu import acl

__all__ = ["DigestMd5Server", "SaslError", "SaslLogins", "SaslOutcome"]


@dataclass(frozen=True, slots=True)
class SaslOutcome:
    """One SASL packet's answer: the token to send (None: a null token), and the ids a completed login adds."""

    token: bytes | None
    ids: tuple[acl.Id, ...] = ()


class SaslLogins:
    """The server's SASL configuration; `step` runs one packet of one connection's login."""

    def __init__(self, users: Mapping[str, str], super_user: str = "", enforce_schemes: frozenset[str] = frozenset()):
        self._users = dict(users)
        self._super_user = super_user
        self.enforce_schemes = enforce_schemes  # empty: not enforced

    @classmethod
    def from_settings(cls, settings: NodeSettings) -> SaslLogins:
        users = digest_server_users(Path(settings.jaas_config_file)) if settings.jaas_config_file else {}
        schemes = frozenset(s.strip() for s in settings.enforce_auth_schemes.split(",") if s.strip())
        return cls(users, settings.sasl_super_user, schemes if settings.enforce_auth_enabled else frozenset())

    def step(self, server: DigestMd5Server | None, token: bytes) -> tuple[DigestMd5Server | None, SaslOutcome]:
        """Evaluate `token` on the connection's login `server` (None before its first packet); SaslError
        when the login fails."""
        if not self._users:
            return None, SaslOutcome(None)
        if server is None:
            server = DigestMd5Server(self._users)
        answer = server.evaluate(token)
        if not server.complete:
            return server, SaslOutcome(answer)
        user = server.authorization_id
        ids = (acl.Id(acl.SASL, user),)
        if self._super_user and user == self._super_user:
            ids += (acl.SUPER_ID,)
        return server, SaslOutcome(answer, ids)

    def allows(self, ids: tuple[acl.Id, ...]) -> bool:
        """AuthenticationHelper.enforceAuthentication: may a connection holding `ids` send other requests?"""
        return not self.enforce_schemes or any(who.scheme in self.enforce_schemes for who in ids)
