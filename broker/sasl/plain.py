"""SASL/PLAIN (RFC 4616) against the users of a JAAS config, as Kafka's PlainSaslServer and PlainLoginModule.

The broker's users are the `user_<name>="<password>"` options of the listener's PLAIN JAAS config
(`listener.name.<listener>.plain.sasl.jaas.config`, else `sasl.jaas.config`):

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

The client's one message is `authzid NUL authcid NUL password`; the answer is empty.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from broker.sasl.errors import SaslAuthenticationFailed, SaslCredentialsRejected

JAAS_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_HEAD = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(\w+)")
_JAAS_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class JaasConfigError(ValueError):
    """A JAAS config that does not parse: one line saying where."""


@dataclass(frozen=True, slots=True)
class JaasLoginModule:
    class_name: str
    control_flag: str
    options: Mapping[str, str]


def parse_jaas_config(text: str) -> JaasLoginModule:
    """One login module: `<class> <flag> key="value" ... ;` (Kafka's JaasConfig parser, one module per property)."""
    head = _JAAS_HEAD.match(text)
    if head is None:
        raise JaasConfigError("expected '<LoginModuleClass> <controlFlag> key=\"value\" ... ;'")
    if head.group(2).lower() not in JAAS_CONTROL_FLAGS:
        raise JaasConfigError(f"invalid control flag {head.group(2)!r} (one of {', '.join(JAAS_CONTROL_FLAGS)})")
    options: dict[str, str] = {}
    position = head.end()
    while True:
        option = _JAAS_OPTION.match(text, position)
        if option is None:
            break
        value = option.group(2) if option.group(2) is not None else option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", value)
        position = option.end()
    rest = text[position:].strip()
    if rest != ";":
        raise JaasConfigError(f"expected key=value options ending with ';' at {rest[:30]!r}")
    return JaasLoginModule(head.group(1), head.group(2).lower(), options)


def plain_users(module: JaasLoginModule) -> dict[str, str]:
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
