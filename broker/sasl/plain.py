"""SASL/PLAIN (RFC 4616) against the users of a JAAS config, as Kafka's PlainSaslServer and PlainLoginModule.

The broker's users are the `user_<name>="<password>"` options of the listener's PLAIN JAAS config
(`listener.name.<listener>.plain.sasl.jaas.config`, else `sasl.jaas.config`):

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

The client's one message is `authzid NUL authcid NUL password`; the answer is empty.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.sasl.errors import SaslAuthenticationFailed, SaslCredentialsRejected
from runtime.jaas import JaasError, JaasModule, parse_jaas_config

__all__ = ["JaasError", "JaasModule", "authenticate_plain", "parse_jaas_config", "plain_users"]


def plain_users(module: JaasModule) -> dict[str, str]:
    """The `user_<name>` options: Kafka's PlainServerCallbackHandler's user table."""
    return {key[len("user_") :]: value for key, value in module.options.items() if key.startswith("user_")}


def authenticate_plain(token: bytes, users: Mapping[str, str]) -> str:
    """The user `token` proves, or an exception with Kafka's PlainSaslServer message."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise SaslCredentialsRejected(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    try:
        authzid, username, password = (part.decode() for part in parts)
    except UnicodeDecodeError:
        raise SaslCredentialsRejected("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise SaslCredentialsRejected("Authentication failed: username not specified")
    if not password:
        raise SaslCredentialsRejected("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise SaslAuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    expected = users.get(username)
    # compare_digest on both branches: the time taken does not tell whether the user exists.
    if not hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00").encode()):
        raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
    if expected is None:
        raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
    return username
