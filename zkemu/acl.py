"""ZooKeeper's ACLs, pure: permissions, ids, the checks, fixupACL, digests and the stored form.

Everything here follows ZooKeeper 3.9 (research quorum.md §1.10):

* `check` is `ZooKeeperServer.checkACL`: an empty list is open, a `super` id
  passes everything, else one entry granting the permission must match
  (world:anyone, or an id of the same scheme that the scheme's provider
  matches: digest by string equality, ip by address prefix, sasl by equality
  or a user named `super`, SASLAuthenticationProvider.matches);
* `fixup` is `PrepRequestProcessor.fixupACL`: duplicates dropped, an empty
  list, an unknown scheme, a malformed digest, ip or sasl id, or an `auth`
  entry from a caller without an authenticated (digest or sasl) id is
  INVALIDACL; `auth` becomes the caller's digest and sasl ids;
* `digest_of` is `DigestAuthenticationProvider.generateDigest`;
* `masked` is FinalRequestProcessor's getACL answer to a caller without
  ADMIN (ZOOKEEPER-1392): digest hashes replaced by `x`.

An ACL is a tuple of `Acl(perms, scheme, id)`; the stored form (`encode` /
`decode`) is the tree's `acls` database value. A node without a stored list
has `default_acl(path)`: world:anyone with every permission, except
/zookeeper/config, which ZooKeeper makes read-only at start-up.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from zkemu.errors import AuthFailedError, Code, InvalidAclError, NoAuthError, message_for
from zkemu.paths import CONFIG_PATH

__all__ = [
    "ADMIN",
    "ALL",
    "CREATE",
    "DELETE",
    "OPEN_ACL_UNSAFE",
    "READ",
    "READ_ACL_UNSAFE",
    "SASL",
    "WRITE",
    "Acl",
    "Id",
    "authenticate",
    "check",
    "client_infos",
    "decode",
    "default_acl",
    "digest_of",
    "encode",
    "fixup",
    "format_perms",
    "is_open",
    "masked",
    "parse_perms",
]

# ZooDefs.Perms
READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN
_PERM_LETTERS = (("c", CREATE), ("d", DELETE), ("r", READ), ("w", WRITE), ("a", ADMIN))  # zkCli's order

WORLD, AUTH, DIGEST, IP, SUPER, SASL = "world", "auth", "digest", "ip", "super", "sasl"
# Schemes with a provider (ProviderRegistry's defaults, and SASLAuthenticationProvider, which every
# SASL-enabled ZooKeeper registers); `world` only as world:anyone, `auth` only in a request.
_PROVIDER_SCHEMES = frozenset({DIGEST, IP, SASL})
# Providers whose isAuthenticated is true: their ids stand in for an `auth` ACL entry.
_AUTHENTICATED_SCHEMES = frozenset({DIGEST, SASL})


class Id(NamedTuple):
    """An identity (ZooDefs Id): a session's authenticated id, or the id part of an ACL entry."""

    scheme: str
    id: str


class Acl(NamedTuple):
    perms: int
    scheme: str
    id: str


ANYONE = Id(WORLD, "anyone")
SUPER_ID = Id(SUPER, "")
OPEN_ACL_UNSAFE: tuple[Acl, ...] = (Acl(ALL, WORLD, "anyone"),)
READ_ACL_UNSAFE: tuple[Acl, ...] = (Acl(READ, WORLD, "anyone"),)


def default_acl(path: str) -> tuple[Acl, ...]:
    """The ACL of a node with no stored list (every node written before ACLs existed reads as open)."""
    return READ_ACL_UNSAFE if path == CONFIG_PATH else OPEN_ACL_UNSAFE


def is_open(acl: Sequence[Acl]) -> bool:
    return tuple(acl) == OPEN_ACL_UNSAFE


# ------------------------------------------------------------------ the checks
def check(acl: Sequence[Acl], perm: int, ids: Sequence[Id], path: str) -> None:
    """ZooKeeperServer.checkACL: NoAuthError unless `ids` hold `perm` (any of its bits) on `acl`."""
    if not acl:
        return
    for who in ids:
        if who.scheme == SUPER:
            return
    for entry in acl:
        if not entry.perms & perm:
            continue
        if entry.scheme == WORLD and entry.id == "anyone":
            return
        if entry.scheme not in _PROVIDER_SCHEMES:
            continue
        for who in ids:
            if who.scheme == entry.scheme and _matches(entry.scheme, who.id, entry.id):
                return
    raise NoAuthError(message_for(Code.NOAUTH, path))


def _matches(scheme: str, id_: str, acl_expr: str) -> bool:
    if scheme == DIGEST:
        return id_ == acl_expr
    if scheme == SASL:
        return id_ == "super" or id_ == acl_expr
    return _ip_matches(id_, acl_expr)


def _ip_matches(address: str, acl_expr: str) -> bool:
    """IPAuthenticationProvider.matches: `address` within the `addr[/bits]` prefix, same address family."""
    network = _ip_network(acl_expr)
    if network is None:
        return False
    try:
        remote = ipaddress.ip_address(address)
    except ValueError:
        return False
    return remote.version == network.version and remote in network


def _ip_network(acl_expr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    addr, slash, bits_text = acl_expr.partition("/")
    try:
        parsed = ipaddress.ip_address(addr)
        bits = int(bits_text) if slash else parsed.max_prefixlen
    except ValueError:
        return None
    if not 0 <= bits <= parsed.max_prefixlen:
        return None
    return ipaddress.ip_network(f"{parsed}/{bits}", strict=False)


def _valid_id(scheme: str, id_: str) -> bool:
    """The provider's isValid: digest `user:hash` (Java's split, trailing empties dropped: two parts),
    ip `addr[/bits]`."""
    if scheme == DIGEST:
        return len(_java_split(id_, ":")) == 2
    if scheme == IP:
        return _ip_network(id_) is not None
    if scheme == SASL:
        # SASLAuthenticationProvider.isValid: what KerberosName accepts (a name with `@` must be name[/host]@realm).
        return "@" not in id_ or _KERBEROS_NAME.fullmatch(id_) is not None
    return False


_KERBEROS_NAME = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")


def _java_split(text: str, sep: str) -> list[str]:
    parts = text.split(sep)
    while len(parts) > 1 and not parts[-1]:
        parts.pop()
    return parts


def fixup(path: str, acl: Sequence[Acl], ids: Sequence[Id]) -> tuple[Acl, ...]:
    """PrepRequestProcessor.fixupACL: the ACL to store, or InvalidAclError."""
    unique = tuple(dict.fromkeys(acl))
    if not unique:
        raise InvalidAclError(message_for(Code.INVALIDACL, path))
    fixed: list[Acl] = []
    for entry in unique:
        if entry.scheme == WORLD and entry.id == "anyone":
            fixed.append(entry)
        elif entry.scheme == AUTH:
            # Only authenticated ids stand in for `auth` (digest, sasl; ip's provider is not "authenticated").
            mine = [Acl(entry.perms, who.scheme, who.id) for who in ids if who.scheme in _AUTHENTICATED_SCHEMES]
            if not mine:
                raise InvalidAclError(message_for(Code.INVALIDACL, path))
            fixed.extend(mine)
        elif entry.scheme in _PROVIDER_SCHEMES and len(entry.id) <= ID_CHARS_MAX and _valid_id(entry.scheme, entry.id):
            fixed.append(entry)
        else:
            raise InvalidAclError(message_for(Code.INVALIDACL, path))
    return tuple(fixed)


def masked(acl: Sequence[Acl]) -> tuple[Acl, ...]:
    """getACL for a caller without ADMIN: `digest` ids keep the user, the hash becomes `x`."""
    return tuple(Acl(a.perms, a.scheme, a.id.split(":", 1)[0] + ":x") if a.scheme == DIGEST else a for a in acl)


# ------------------------------------------------------------------ authentication
def digest_of(user_password: str) -> str:
    """DigestAuthenticationProvider.generateDigest: `user:base64(sha1("user:password"))`."""
    user = user_password.split(":", 1)[0]
    sha1 = hashlib.sha1(user_password.encode()).digest()  # noqa: S324 - ZooKeeper's digest scheme is SHA1
    return f"{user}:{base64.b64encode(sha1).decode()}"


def authenticate(scheme: str, credential: bytes, peer_host: str, super_digest: str) -> tuple[Id, ...]:
    """The ids an `addauth` adds (AuthenticationProvider.handleAuthentication), or AuthFailedError.

    digest: digest:user:hash, and super first when it equals `super_digest`
    (zookeeper.DigestAuthenticationProvider.superDigest); ip: the peer's address.
    """
    if scheme == DIGEST:
        try:
            text = credential.decode()
        except UnicodeDecodeError:
            raise AuthFailedError("digest credential is not UTF-8 user:password") from None
        digest = digest_of(text)
        return (SUPER_ID, Id(DIGEST, digest)) if super_digest and digest == super_digest else (Id(DIGEST, digest),)
    if scheme == IP:
        return (Id(IP, peer_host),)
    raise AuthFailedError(f"no authentication provider for scheme {scheme!r}")


def _java_string_hash(text: str) -> int:
    """java.lang.String.hashCode, over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _connection_set_bucket(who: Id) -> int:
    """The bucket of `who` in a ZooKeeper connection's authInfo, a ConcurrentHashMap-backed set of 16
    buckets (a connection holds far fewer than the 12 ids that would grow it): jute's Id.hashCode
    (37 * (37 * 17 + scheme.hashCode()) + id.hashCode()), spread as ConcurrentHashMap.spread does."""
    h = (37 * ((37 * 17 + _java_string_hash(who.scheme)) & 0xFFFFFFFF) + _java_string_hash(who.id)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 15


def client_infos(ids: Iterable[Id]) -> list[tuple[str, str]]:
    """whoAmI (AuthUtil.getClientInfos): (scheme, user) per id; digest's user is the name before `:`.

    In the order ZooKeeper iterates the connection's authInfo set (by hash bucket, then in the order
    added), so that whoami prints the lines zkCli users see against ZooKeeper."""
    out = []
    for who in sorted(ids, key=_connection_set_bucket):
        if who.scheme == DIGEST:
            user = who.id.split(":", 1)[0]
        elif who.scheme in (IP, SASL):
            user = who.id
        else:
            user = ""
        out.append((who.scheme, user))
    return out


# ------------------------------------------------------------------ text (zkCli)
def format_perms(perms: int) -> str:
    """zkCli's form: `cdrwa` letters of the granted permissions."""
    return "".join(letter for letter, bit in _PERM_LETTERS if perms & bit)


def parse_perms(text: str) -> int:
    perms = 0
    for ch in text:
        bit = dict(_PERM_LETTERS).get(ch)
        if bit is None:
            raise ValueError(f"unknown permission {ch!r} in {text!r} (use c, d, r, w, a)")
        perms |= bit
    return perms


# ------------------------------------------------------------------ the stored form
_ENTRY = struct.Struct(">iHH")  # perms, scheme length, id length; then scheme and id (UTF-8)
# An id longer than this is refused as INVALIDACL: in UTF-8 (4 bytes a character at most) it fits _ENTRY's 16 bits.
ID_CHARS_MAX = 16_000


def encode(acl: Sequence[Acl]) -> bytes:
    parts = []
    for a in acl:
        scheme, id_ = a.scheme.encode(), a.id.encode()
        parts.append(_ENTRY.pack(a.perms, len(scheme), len(id_)) + scheme + id_)
    return b"".join(parts)


def decode(raw: bytes) -> tuple[Acl, ...]:
    out = []
    at = 0
    while at < len(raw):
        perms, slen, ilen = _ENTRY.unpack_from(raw, at)
        at += _ENTRY.size
        scheme = raw[at : at + slen].decode()
        at += slen
        id_ = raw[at : at + ilen].decode()
        at += ilen
        if at > len(raw):
            raise ValueError(f"stored ACL truncated: {len(raw)} bytes")
        out.append(Acl(perms, scheme, id_))
    return tuple(out)
