"""SASL authentication on the broker's Kafka listeners (KIP-43 SaslHandshake, KIP-152 SaslAuthenticate).

A listener whose security protocol starts with `SASL_` gives each connection a `SaslAuthenticator`
(authenticator.py) that serves only ApiVersions, SaslHandshake and SaslAuthenticate until the client has
proved who it is, then sets the connection's principal (`User:<name>`). Mechanisms: PLAIN (plain.py, users
from the JAAS config as Kafka's PlainLoginModule) and SCRAM-SHA-256/512 (scram.py, credentials from
`/config/users/<user>` through credential_cache.py). Per-listener settings: settings.py.
"""
