"""SASL DIGEST-MD5 (RFC 2831) as ZooKeeper's sessions use it: both ends, pure (no I/O).

ZooKeeper logs a session in with DIGEST-MD5 after the connect handshake (ZooKeeperSaslClient and
ZooKeeperSaslServer), with the protocol `zookeeper` and the server name and realm `zk-sasl-md5`
(SecurityUtils.createSaslClient/createSaslServer), qop `auth` only (no integrity or privacy
layer). The server keeps no state between sessions, so a nonce is used once and `nc` is always 1.

The exchange (RFC 2831 §2.1): the client sends an empty token; the server answers a challenge
(§2.1.1: realm, nonce, qop, charset, algorithm); the client answers its digest-response (§2.1.2:
username, realm, nonce, cnonce, nc, qop, digest-uri, response[, authzid]); the server checks the
`response` value (§2.1.2.1) and answers `rspauth` (§2.1.3), which the client checks in turn.

Server and client live here together, as ZooKeeper's client and server share one jar: zkemu's
front ends run `DigestMd5Server`, the SDK's ZooKeeper client runs `DigestMd5Client`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

__all__ = ["DIGEST_MD5", "DigestMd5Client", "DigestMd5Server", "SaslError", "parse_directives"]

DIGEST_MD5 = "DIGEST-MD5"
SERVICE = "zookeeper"
SERVER_NAME = "zk-sasl-md5"  # ZooKeeper hard-codes it as the server name and realm for DIGEST-MD5
DIGEST_URI = f"{SERVICE}/{SERVER_NAME}"
TOKEN_BYTES_MAX = 4096  # RFC 2831 §2.1.2: a digest-response is at most 4096 bytes
_FIRST_NC = "00000001"


class SaslError(Exception):
    """A login that failed: one line saying why (wrong password, a malformed token, ...)."""


# RFC 2831 §7.1: `name=value` or `name="quoted value"`, comma separated, `\` escaping inside quotes.
_DIRECTIVE = re.compile(rb'\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,"\s]*))\s*(?:,|$)')


def parse_directives(token: bytes) -> dict[str, bytes]:
    """A challenge or response's directives; SaslError on a malformed or repeated one (§2.1.1, §2.1.2)."""
    out: dict[str, bytes] = {}
    at = 0
    while at < len(token):
        found = _DIRECTIVE.match(token, at)
        if found is None or found.end() == at:
            raise SaslError(f"malformed DIGEST-MD5 token at byte {at}")
        name = found.group(1).decode("ascii").lower()
        quoted = found.group(2)
        value = re.sub(rb"\\(.)", rb"\1", quoted) if quoted is not None else found.group(3)
        if name in out and name != "realm":  # a challenge may offer several realms
            raise SaslError(f"DIGEST-MD5 directive {name!r} given twice")
        out[name] = value
        at = found.end()
    return out


def _h(data: bytes) -> bytes:
    return hashlib.md5(data).digest()  # noqa: S324 - RFC 2831's hash is MD5


def _hex(data: bytes) -> bytes:
    return data.hex().encode("ascii")


def _response_value(
    *,
    user_realm_password: bytes,
    nonce: bytes,
    cnonce: bytes,
    nc: bytes,
    qop: bytes,
    a2_prefix: bytes,
    digest_uri: bytes,
    authzid: bytes | None,
) -> bytes:
    """§2.1.2.1: HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2)))), KD(k, s) = H(k:s).

    A1 = H(user:realm:password):nonce:cnonce[:authzid]; A2 = "AUTHENTICATE:" digest-uri for the
    client's response, ":" digest-uri for the server's rspauth (§2.1.3)."""
    a1 = _h(user_realm_password) + b":" + nonce + b":" + cnonce
    if authzid:
        a1 += b":" + authzid
    a2 = a2_prefix + b":" + digest_uri
    return _hex(_h(b":".join((_hex(_h(a1)), nonce, nc, cnonce, qop, _hex(_h(a2))))))


def _credentials(username: bytes, realm: bytes, password: str, utf8: bool) -> bytes:
    """user:realm:password in the charset the exchange names (§2.1.2.1: ISO 8859-1 unless charset=utf-8)."""
    encoded = password.encode("utf-8") if utf8 else password.encode("latin-1", errors="replace")
    return username + b":" + realm + b":" + encoded


class DigestMd5Server:
    """One login on one connection (Java's DigestMD5Server with ZooKeeper's SaslServerCallbackHandler).

    `users` is the JAAS Server section's `user_<name>="<password>"` table. `evaluate` takes each
    client token and returns the next server token; once `complete`, `authorization_id` is the user
    (ZooKeeper's handleAuthorizeCallback keeps the authentication id, so an `authzid` cannot name
    somebody else)."""

    def __init__(self, users: Mapping[str, str], nonce: bytes | None = None) -> None:
        self._users = users
        self._nonce = nonce if nonce is not None else base64.b64encode(secrets.token_bytes(30))
        self._step = 0
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        if self.complete or self._step > 1:
            raise SaslError("DIGEST-MD5 login already finished on this connection")
        self._step += 1
        if self._step == 1:
            return self._challenge()
        return self._check_response(token)

    def _challenge(self) -> bytes:
        """§2.1.1, as Java's server sends it (one realm, qop auth only, charset utf-8, md5-sess)."""
        return (
            b'realm="' + SERVER_NAME.encode() + b'",nonce="' + self._nonce + b'",qop="auth",charset=utf-8,'
            b"algorithm=md5-sess"
        )

    def _check_response(self, token: bytes) -> bytes:
        if len(token) > TOKEN_BYTES_MAX:
            raise SaslError(f"DIGEST-MD5 response of {len(token)} bytes exceeds {TOKEN_BYTES_MAX}")
        d = parse_directives(token)
        for name in ("username", "nonce", "cnonce", "nc", "digest-uri", "response"):
            if name not in d:
                raise SaslError(f"DIGEST-MD5 response without {name}")
        if not hmac.compare_digest(d["nonce"], self._nonce):
            raise SaslError("DIGEST-MD5 response names another nonce")
        if d["nc"] != _FIRST_NC.encode():
            raise SaslError(f"DIGEST-MD5 nonce count {d['nc']!r} is not 00000001")
        qop = d.get("qop", b"auth")
        if qop != b"auth":
            raise SaslError(f"DIGEST-MD5 qop {qop.decode(errors='replace')!r} is not offered (only auth)")
        if d["digest-uri"] != DIGEST_URI.encode():
            raise SaslError(f"DIGEST-MD5 digest-uri {d['digest-uri'].decode(errors='replace')!r} is not {DIGEST_URI}")
        utf8 = d.get("charset", b"").lower() == b"utf-8"
        try:
            username = d["username"].decode("utf-8" if utf8 else "latin-1")
        except UnicodeDecodeError:
            raise SaslError("DIGEST-MD5 username is not valid UTF-8") from None
        password = self._users.get(username)
        realm = d.get("realm", b"")
        # An unknown user is checked against a random password, so both failures take one path.
        secret = password if password is not None else secrets.token_hex(16)
        values = {
            "user_realm_password": _credentials(d["username"], realm, secret, utf8),
            "nonce": self._nonce,
            "cnonce": d["cnonce"],
            "nc": d["nc"],
            "qop": qop,
            "digest_uri": d["digest-uri"],
            "authzid": d.get("authzid"),
        }
        expected = _response_value(a2_prefix=b"AUTHENTICATE", **values)
        if password is None or not hmac.compare_digest(expected, d["response"].lower()):
            raise SaslError(f"DIGEST-MD5 login of user {username!r} failed: unknown user or wrong password")
        self.complete = True
        self.authorization_id = username
        return b"rspauth=" + _response_value(a2_prefix=b"", **values)


class DigestMd5Client:
    """The client's side (ZooKeeperSaslClient with Java's DigestMD5Client): `evaluate` each server token.

    The first call takes the empty challenge and returns the empty first token; `complete` once the
    server's rspauth checked out."""

    def __init__(self, username: str, password: str, cnonce: bytes | None = None) -> None:
        self._username = username
        self._password = password
        self._cnonce = cnonce if cnonce is not None else base64.b64encode(secrets.token_bytes(30))
        self._values: dict[str, bytes | None] | None = None
        self.complete = False

    def evaluate(self, challenge: bytes) -> bytes:
        if self.complete:
            raise SaslError("DIGEST-MD5 login already finished")
        if not challenge and self._values is None:
            return b""
        if self._values is None:
            return self._respond(parse_directives(challenge))
        d = parse_directives(challenge)
        rspauth = d.get("rspauth")
        if rspauth is None or not hmac.compare_digest(
            rspauth.lower(),
            _response_value(a2_prefix=b"", **self._values),  # type: ignore[arg-type]
        ):
            raise SaslError("DIGEST-MD5: the server did not prove it knows the password (bad rspauth)")
        self.complete = True
        return b""

    def _respond(self, d: dict[str, bytes]) -> bytes:
        if "nonce" not in d:
            raise SaslError("DIGEST-MD5 challenge without a nonce")
        qops = [q.strip() for q in d.get("qop", b"auth").split(b",")]
        if b"auth" not in qops:
            raise SaslError("DIGEST-MD5 challenge does not offer qop auth")
        realm = d.get("realm", SERVER_NAME.encode())
        user = self._username.encode("utf-8")
        self._values = {
            "user_realm_password": _credentials(user, realm, self._password, True),
            "nonce": d["nonce"],
            "cnonce": self._cnonce,
            "nc": _FIRST_NC.encode(),
            "qop": b"auth",
            "digest_uri": DIGEST_URI.encode(),
            "authzid": None,
        }
        response = _response_value(a2_prefix=b"AUTHENTICATE", **self._values)  # type: ignore[arg-type]
        return b",".join(
            (
                b'charset=utf-8,username="' + _quote(user) + b'"',
                b'realm="' + _quote(realm) + b'"',
                b'nonce="' + d["nonce"] + b'",nc=' + _FIRST_NC.encode(),
                b'cnonce="' + self._cnonce + b'"',
                b'digest-uri="' + DIGEST_URI.encode() + b'"',
                b"maxbuf=65536,response=" + response + b",qop=auth",
            )
        )


def _quote(value: bytes) -> bytes:
    return value.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
