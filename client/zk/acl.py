"""ZooKeeper ACLs with kazoo.security's names: `ACL`, `Id`, `Permissions`, `make_acl`,
`make_digest_acl`, `make_digest_acl_credential`, `OPEN_ACL_UNSAFE`, `CREATOR_ALL_ACL`,
`READ_ACL_UNSAFE`.

    from client.zk.acl import make_digest_acl

    zk.add_auth("digest", "alice:secret")
    zk.create("/private", b"x", acl=[make_digest_acl("alice", "secret", all=True)])
    acls, stat = zk.get_acls("/private")

An ACL entry grants `perms` (a sum of `Permissions`) to one `Id` (scheme and
id): world:anyone, auth:"" (every id the session authenticated with),
digest:user:base64(sha1(user:password)), or ip:addr[/bits]. ZooKeeper
checks CREATE and DELETE on the parent, WRITE for set, READ for reads and
ADMIN for set_acls (docs/research/quorum.md §1.10).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple


class Permissions:
    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


_NAMES = (("READ", Permissions.READ), ("WRITE", Permissions.WRITE), ("CREATE", Permissions.CREATE))
_NAMES += (("DELETE", Permissions.DELETE), ("ADMIN", Permissions.ADMIN))


class Id(NamedTuple):
    scheme: str
    id: str


class ACL(NamedTuple):
    perms: int
    id: Id

    @property
    def acl_list(self) -> list[str]:
        """The permission names, as kazoo's ACL.acl_list (ALL when every bit is set)."""
        if self.perms == Permissions.ALL:
            return ["ALL"]
        return [name for name, bit in _NAMES if self.perms & bit]


ANYONE_ID_UNSAFE = Id("world", "anyone")
AUTH_IDS = Id("auth", "")
OPEN_ACL_UNSAFE = [ACL(Permissions.ALL, ANYONE_ID_UNSAFE)]
CREATOR_ALL_ACL = [ACL(Permissions.ALL, AUTH_IDS)]
READ_ACL_UNSAFE = [ACL(Permissions.READ, ANYONE_ID_UNSAFE)]


def make_digest_acl_credential(username: str, password: str) -> str:
    """`username:base64(sha1("username:password"))`, the id ZooKeeper's digest scheme gives that login."""
    sha1 = hashlib.sha1(f"{username}:{password}".encode()).digest()  # noqa: S324 - ZooKeeper's digest is SHA1
    return f"{username}:{base64.b64encode(sha1).decode()}"


def make_acl(
    scheme: str,
    credential: str,
    read: bool = False,
    write: bool = False,
    create: bool = False,
    delete: bool = False,
    admin: bool = False,
    all: bool = False,  # noqa: A002 - kazoo's keyword
) -> ACL:
    """One ACL entry from permission flags (kazoo.security.make_acl)."""
    if all:
        perms = Permissions.ALL
    else:
        flags = (read, write, create, delete, admin)
        perms = sum(bit for flag, (_, bit) in zip(flags, _NAMES, strict=True) if flag)
    return ACL(perms, Id(scheme, credential))


def make_digest_acl(
    username: str,
    password: str,
    read: bool = False,
    write: bool = False,
    create: bool = False,
    delete: bool = False,
    admin: bool = False,
    all: bool = False,  # noqa: A002 - kazoo's keyword
) -> ACL:
    """A digest ACL entry for `username`/`password` (kazoo.security.make_digest_acl)."""
    credential = make_digest_acl_credential(username, password)
    return make_acl("digest", credential, read, write, create, delete, admin, all)


def check_acl_list(acl: object, path: str) -> tuple[ACL, ...]:
    """The entries of an `acl=` argument, or TypeError naming what is wrong (None: the server's default)."""
    if acl is None:
        return ()
    if isinstance(acl, ACL):
        acl = [acl]
    if not isinstance(acl, Sequence | Iterable) or isinstance(acl, str | bytes):
        raise TypeError(f"acl for {path} must be a list of ACL, not {type(acl).__name__}")
    entries = []
    for entry in acl:
        if not isinstance(entry, tuple) or len(entry) != 2 or not isinstance(entry[0], int):
            raise TypeError(f"acl for {path}: {entry!r} is not an ACL(perms, Id(scheme, id))")
        perms, who = entry
        if not isinstance(who, tuple) or len(who) != 2 or not all(isinstance(part, str) for part in who):
            raise TypeError(f"acl for {path}: {who!r} is not an Id(scheme, id)")
        entries.append(ACL(perms, Id(who[0], who[1])))
    return tuple(entries)
