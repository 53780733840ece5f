"""SCRAM credentials as Kafka 2.x stores them (RFC 5802 §3, RFC 7677), shared by the broker and the tools.

A user's credential for one mechanism is what RFC 5802 lets a server keep instead of the password:
the salt, the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"), SaltedPassword = PBKDF2-HMAC(password, salt, iterations).
Kafka writes it into `/config/users/<user>` as one config per mechanism, in ScramCredentialUtils'
text form: `SCRAM-SHA-512` -> `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096`.

The iteration count is what makes a stolen credential slow to attack: PBKDF2 runs once, here, when a
credential is made (and on the client at each login); the broker never runs it, it checks a client's proof
with two HMACs against StoredKey (broker/sasl/scram.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from client.kafka.znodes import (
    CONFIG_TYPE_USER,
    config_change_create_path,
    config_entity_path,
    decode_config,
    encode_config,
    encode_config_change,
)

# Kafka's ScramMechanism: the hash of each mechanism and its minimum iteration count (4096 for both).
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SCRAM_MECHANISMS = tuple(SCRAM_HASHES)
ITERATIONS_MIN = 4096
ITERATIONS_DEFAULT = 4096  # ConfigCommand's DefaultScramIterations
ITERATIONS_MAX = 16384  # Kafka's AlterUserScramCredentials limit (KIP-554): bounds the work a login costs
SALT_RANDOM_BITS = 130  # ScramFormatter.secureRandomString: 130 random bits in base 36


class ScramCredentialError(ValueError):
    """A bad SCRAM mechanism, iteration count or stored credential: one line naming it."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def hash_name(mechanism: str) -> str:
    try:
        return SCRAM_HASHES[mechanism]
    except KeyError:
        raise ScramCredentialError(
            f"unknown SCRAM mechanism {mechanism!r} (one of {', '.join(SCRAM_MECHANISMS)})"
        ) from None


def secure_random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits written in base 36 (salts and server nonces)."""
    value = secrets.randbits(SALT_RANDOM_BITS)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while value:
        value, digit = divmod(value, 36)
        text = digits[digit] + text
    return text or "0"


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(): PBKDF2 with the mechanism's HMAC; the slow step, deliberately."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode(), salt, iterations)


def hmac_digest(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name(mechanism)).digest()


def digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), data).digest()


def make_credential(
    mechanism: str, password: str, iterations: int = ITERATIONS_DEFAULT, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for `password` (ScramFormatter.generateCredential), refusing iterations Kafka refuses."""
    check_iterations(mechanism, iterations)
    salt = salt if salt is not None else secure_random_string().encode()
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """ScramFormatter.generateCredential(salt, saltedPassword, iterations): what AlterUserScramCredentials
    (KIP-554) stores from the salted password a client computed."""
    client_key = hmac_digest(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=digest(mechanism, client_key),
        server_key=hmac_digest(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def check_iterations(mechanism: str, iterations: int) -> None:
    hash_name(mechanism)
    if iterations < ITERATIONS_MIN:
        raise ScramCredentialError(
            f"Iterations {iterations} is less than the minimum {ITERATIONS_MIN} required for {mechanism}"
        )
    if iterations > ITERATIONS_MAX:
        raise ScramCredentialError(f"Iterations {iterations} is more than the maximum {ITERATIONS_MAX} for {mechanism}")


def encode_credential(credential: ScramCredential) -> str:
    """ScramCredentialUtils.credentialToString."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


def decode_credential(text: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString; ScramCredentialError names what is missing or malformed."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ScramCredentialError(f"SCRAM credential field {part!r} is not key=value")
        fields[key.strip()] = value.strip()
    try:
        return ScramCredential(
            salt=base64.b64decode(fields["salt"], validate=True),
            stored_key=base64.b64decode(fields["stored_key"], validate=True),
            server_key=base64.b64decode(fields["server_key"], validate=True),
            iterations=int(fields["iterations"]),
        )
    except KeyError as exc:
        raise ScramCredentialError(f"SCRAM credential has no {exc.args[0]}") from None
    except ValueError as exc:
        raise ScramCredentialError(f"SCRAM credential is malformed: {exc}") from None


def sanitize_user(user: str) -> str:
    """Kafka's Sanitizer.sanitize: the user's znode name under /config/users (URL-encoded, '*' and '~' too)."""
    return quote(user, safe="").replace("~", "%7E")


def desanitize_user(entity_name: str) -> str:
    return unquote(entity_name)


def user_credentials(config: dict[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials among a user's configs (`/config/users/<user>`), by mechanism."""
    return {m: decode_credential(config[m]) for m in SCRAM_MECHANISMS if m in config}


def store_scram_credential(
    zk: object, user: str, mechanism: str, password: str, iterations: int = ITERATIONS_DEFAULT
) -> None:
    """Stores `user`'s credential for `mechanism` in `/config/users/<user>` (keeping its other configs) and writes
    the `/config/changes` notification running brokers follow. `zk` is a blocking client (client.ZkClient).
    Brokers accept the user from its next login on."""
    alter_scram_credentials(zk, user, {mechanism: (password, iterations)}, ())


def alter_scram_credentials(
    zk: object, user: str, upserts: Mapping[str, tuple[str, int]], deletions: Sequence[str]
) -> None:
    """Sets (mechanism -> (password, iterations)) and removes SCRAM credentials of `user`, as 2.x's
    kafka-configs.sh does through AdminZkClient.changeUserOrUserClientIdConfig: `/config/users/<user>` written
    with a version check (a concurrent change fails instead of being lost), then the notification."""
    if not user:
        raise ScramCredentialError("a SCRAM user needs a name")
    made = {m: encode_credential(make_credential(m, pw, it)) for m, (pw, it) in upserts.items()}
    path = config_entity_path(CONFIG_TYPE_USER, sanitize_user(user))
    stat = zk.exists(path)  # type: ignore[attr-defined]
    current = decode_config(zk.get(path)[0], path) if stat is not None else {}  # type: ignore[attr-defined]
    missing = [m for m in deletions if m not in current]
    if missing:
        raise ScramCredentialError(f"Invalid config(s): {','.join(missing)}")
    configs = {k: v for k, v in {**current, **made}.items() if k not in deletions}
    if stat is None:
        zk.create(path, encode_config(configs), makepath=True)  # type: ignore[attr-defined]
    else:
        zk.set(path, encode_config(configs), version=stat.version)  # type: ignore[attr-defined]
    zk.create(  # type: ignore[attr-defined]
        config_change_create_path(),
        encode_config_change(CONFIG_TYPE_USER, sanitize_user(user)),
        sequence=True,
        makepath=True,
    )


# ---------------------------------------------------------------------------------------------- the client's exchange


def _saslname(username: str) -> str:
    """RFC 5802 §5.1: ',' and '=' in a user name are written =2C and =3D."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClientExchange:
    """The client's side of one SCRAM exchange (RFC 5802 §3, as Kafka's ScramSaslClient runs it):
    `client_first()`, `client_final(server_first)`, then `verify(server_final)` proves the server knew the
    credential (a server that only replays messages cannot compute ServerSignature)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        hash_name(mechanism)
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce if nonce is not None else secure_random_string()
        self._client_first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def client_first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"], validate=True), int(fields["i"])
        except (KeyError, ValueError):
            raise ScramCredentialError(f"Invalid SCRAM server first message: {text[:60]!r}") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramCredentialError("Invalid SCRAM server first message: the server's nonce does not extend ours")
        check_iterations(self.mechanism, iterations)  # a server may not make the client run PBKDF2 without bound
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of the gs2 header "n,," (no channel binding)
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = hmac_digest(self.mechanism, salted, b"Client Key")
        signature = hmac_digest(self.mechanism, digest(self.mechanism, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac_digest(self.mechanism, salted, b"Server Key")
        self._server_signature = hmac_digest(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """ScramCredentialError unless `server_final` carries the ServerSignature of this exchange."""
        text = server_final.decode("utf-8", "replace")
        if not text.startswith("v="):
            raise ScramCredentialError(f"SCRAM server final message carries no signature: {text[:60]!r}")
        try:
            signature = base64.b64decode(text[2:], validate=True)
        except ValueError:
            raise ScramCredentialError("SCRAM server final message: bad base64") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramCredentialError("Invalid server signature in the SCRAM server final message")
