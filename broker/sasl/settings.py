"""A SASL listener's settings, from Kafka's broker properties with their per-listener prefixes.

    sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN          (or listener.name.<listener>.sasl.enabled.mechanisms)
    listener.name.<listener>.plain.sasl.jaas.config=... (or sasl.jaas.config): PLAIN's users
    connections.max.reauth.ms=0                          (or listener.name.<listener>.<mechanism>.connections...)

Listener names and mechanisms in a prefix are lower case, as Kafka's ListenerName.configPrefix and
saslMechanismConfigPrefix write them. `sasl.enabled.mechanisms` defaults to SCRAM-SHA-256,SCRAM-SHA-512
(Kafka's default, GSSAPI, is not served here). `connections.max.reauth.ms` 0 means sessions never expire
(KIP-368's default); above 0, a connection that does not re-authenticate within it is closed at its next
request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from broker.sasl.plain import JaasError, parse_jaas_config, plain_users
from client.kafka.scram import SCRAM_MECHANISMS

PLAIN = "PLAIN"
SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
DEFAULT_MECHANISMS = SCRAM_MECHANISMS
# The properties a listener (and, for the last two, a mechanism on it) may override with a prefix.
_PREFIXED = re.compile(
    r"listener\.name\.[a-z0-9_]+\.(?:sasl\.enabled\.mechanisms|(?:[a-z0-9-]+\.)?"
    r"(?:sasl\.jaas\.config|connections\.max\.reauth\.ms))"
)


class SaslConfigError(ValueError):
    """A bad SASL setting: one line naming the property and the listener."""


def is_listener_sasl_property(key: str) -> bool:
    """`listener.name.<l>.sasl.enabled.mechanisms`, `listener.name.<l>.<mech>.sasl.jaas.config`, ..."""
    return _PREFIXED.fullmatch(key) is not None


@dataclass(frozen=True, slots=True)
class SaslListenerSettings:
    listener_name: str
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]  # user -> password, from the PLAIN JAAS config
    reauth_ms_by_mechanism: Mapping[str, int]  # 0: the session does not expire


def listener_sasl_settings(listener_name: str, properties: Mapping[str, str]) -> SaslListenerSettings:
    """The settings of one SASL listener from the broker's properties as given; SaslConfigError when bad."""
    prefix = f"listener.name.{listener_name.lower()}."
    mechanisms_key = prefix + "sasl.enabled.mechanisms"
    if mechanisms_key not in properties:
        mechanisms_key = "sasl.enabled.mechanisms"
    mechanisms = _mechanisms(mechanisms_key, properties.get(mechanisms_key), listener_name)
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        users = _plain_users(prefix, properties, listener_name)
    return SaslListenerSettings(
        listener_name=listener_name,
        enabled_mechanisms=mechanisms,
        plain_users=users,
        reauth_ms_by_mechanism={m: _reauth_ms(prefix, m, properties) for m in mechanisms},
    )


def _mechanisms(key: str, text: str | None, listener_name: str) -> tuple[str, ...]:
    if text is None:
        return DEFAULT_MECHANISMS
    mechanisms = tuple(dict.fromkeys(part.strip().upper() for part in text.split(",") if part.strip()))
    unserved = [m for m in mechanisms if m not in SERVED_MECHANISMS]
    if unserved or not mechanisms:
        raise SaslConfigError(
            f"{key}: listener {listener_name} enables {', '.join(unserved) or 'no mechanism'}; "
            f"the mechanisms served are {', '.join(SERVED_MECHANISMS)}"
        )
    return mechanisms


def _plain_users(prefix: str, properties: Mapping[str, str], listener_name: str) -> dict[str, str]:
    key = prefix + "plain.sasl.jaas.config"
    if key not in properties:
        key = "sasl.jaas.config"
    text = properties.get(key)
    if text is None:
        raise SaslConfigError(
            f"listener {listener_name} enables PLAIN but has no JAAS config: set "
            f'{prefix}plain.sasl.jaas.config=...PlainLoginModule required user_<name>="<password>";'
        )
    try:
        users = plain_users(parse_jaas_config(text))
    except JaasError as exc:
        raise SaslConfigError(f"{key}: {exc}") from None
    if not users:
        raise SaslConfigError(f'{key}: no user_<name>="<password>" option, so no PLAIN user could log in')
    return users


def _reauth_ms(prefix: str, mechanism: str, properties: Mapping[str, str]) -> int:
    key = f"{prefix}{mechanism.lower()}.connections.max.reauth.ms"
    if key not in properties:
        key = "connections.max.reauth.ms"
    text = properties.get(key, "0")
    try:
        value = int(text.strip())
    except ValueError:
        raise SaslConfigError(f"{key}={text!r}: not a valid integer") from None
    if value < 0:
        raise SaslConfigError(f"{key}={text!r}: must be at least 0")
    return value
