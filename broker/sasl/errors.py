"""How a SASL exchange fails, split as Kafka splits it (SaslServerAuthenticator.handleSaslToken).

`SaslAuthenticationFailed` carries a message the client may see (Kafka's SaslAuthenticationException: PLAIN's
"Invalid username or password", an authorization id that differs from the user). `SaslCredentialsRejected` is
Kafka's SaslException: its detail goes to the broker's log only and the client gets the generic "invalid
credentials" line, so that an answer never tells whether a user exists.
"""

from __future__ import annotations


class SaslAuthenticationFailed(Exception):
    """The exchange failed; str(self) is sent to the client."""


class SaslCredentialsRejected(Exception):
    """The exchange failed; str(self) is for the broker's log, the client gets a generic message."""
