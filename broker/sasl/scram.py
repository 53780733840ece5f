"""The SCRAM server exchange (RFC 5802 §5, RFC 7677), as Kafka's ScramSaslServer runs it.

    client-first   n,[a=authzid],n=<user>,r=<client nonce>[,extensions]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<nonce>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>

The proof is checked with the stored credential only (RFC 5802 §3): ClientKey = ClientProof XOR
HMAC(StoredKey, AuthMessage) must hash to StoredKey. No PBKDF2 runs here; the iteration count costs the
client, at each login, and an attacker holding a stolen credential.

An unknown user, a wrong proof or a wrong nonce all end in `SaslCredentialsRejected` (Kafka's SaslException:
the client reads one generic line); Kafka's delegation-token extension (`tokenauth=true`) is refused the same
way, since this broker issues no tokens.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Awaitable, Callable
from enum import Enum

from broker.sasl.errors import SaslAuthenticationFailed, SaslCredentialsRejected
from client.kafka.scram import ScramCredential, digest, hmac_digest, secure_random_string

# RFC 5802 §7: printable ASCII except ',' for nonces; saslname escapes ',' and '=' as =2C and =3D.
_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<saslname>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<extensions>(?:,[A-Za-z][^,=]*=[^,]*)*))"
)
_CLIENT_FINAL = re.compile(
    r"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/=]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?:,[A-Za-z][^,=]*=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)"
)

CredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]  # (user, mechanism)


class _Step(Enum):
    CLIENT_FIRST = "client_first"
    CLIENT_FINAL = "client_final"
    COMPLETE = "complete"


def decode_saslname(saslname: str) -> str:
    """RFC 5802 §5.1: `=2C` is ',' and `=3D` is '='; any other '=' is malformed."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise SaslCredentialsRejected(f"Invalid username: {saslname}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServerExchange:
    """One SCRAM exchange: `await step(token)` twice; then `username` is authenticated."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, nonce: Callable[[], str] = secure_random_string):
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce
        self._step = _Step.CLIENT_FIRST
        self.username = ""
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._gs2_header = ""
        self._first_messages = ""  # client-first-bare "," server-first: the start of the AuthMessage

    @property
    def complete(self) -> bool:
        return self._step is _Step.COMPLETE

    async def step(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise SaslCredentialsRejected("SCRAM message is not UTF-8") from None
        if self._step is _Step.CLIENT_FIRST:
            return await self._client_first(text)
        if self._step is _Step.CLIENT_FINAL:
            return self._client_final(text)
        raise SaslCredentialsRejected("SCRAM exchange already complete")

    async def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslCredentialsRejected(f"Invalid SCRAM client first message: {text[:60]!r}")
        username = decode_saslname(match["saslname"])
        authzid = match["authzid"]
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if "tokenauth=true" in match["extensions"].lower():
            raise SaslCredentialsRejected("delegation tokens are not supported")
        credential = await self._lookup(username, self.mechanism)
        if credential is None:
            raise SaslCredentialsRejected("Authentication failed: Invalid user credentials")
        self.username, self._credential = username, credential
        self._gs2_header = text[: match.start("bare")]
        self._nonce = match["nonce"] + self._server_nonce()
        salt = base64.b64encode(credential.salt).decode()
        server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._first_messages = f"{match['bare']},{server_first}"
        self._step = _Step.CLIENT_FINAL
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        credential = self._credential
        assert credential is not None
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslCredentialsRejected("Invalid SCRAM client final message")
        if match["nonce"] != self._nonce:
            raise SaslCredentialsRejected("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(match["channel"], validate=True).decode()
            proof = base64.b64decode(match["proof"], validate=True)
        except (binascii.Error, UnicodeDecodeError):
            raise SaslCredentialsRejected("Invalid SCRAM client final message: bad base64") from None
        if channel != self._gs2_header:
            raise SaslCredentialsRejected("Invalid channel binding in the final client message.")
        auth_message = f"{self._first_messages},{match['without_proof']}".encode()
        client_signature = hmac_digest(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslCredentialsRejected("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(digest(self.mechanism, client_key), credential.stored_key):
            raise SaslCredentialsRejected("Invalid client credentials")
        server_signature = hmac_digest(self.mechanism, credential.server_key, auth_message)
        self._step = _Step.COMPLETE
        return f"v={base64.b64encode(server_signature).decode()}".encode()
