"""client.zk.acl against kazoo.security: the same names give the same ACLs."""

from __future__ import annotations

import pytest
from kazoo import security

from client.zk import acl as zk_acl
from client.zk.exceptions import InvalidACLError
from client.zk.transaction import Transaction


@pytest.mark.parametrize(
    "flags",
    [{"all": True}, {"read": True}, {"read": True, "admin": True}, {"write": True, "create": True, "delete": True}],
)
def test_helpers_match_kazoo_security(flags: dict[str, bool]) -> None:
    ours = zk_acl.make_digest_acl("alice", "secret", **flags)
    theirs = security.make_digest_acl("alice", "secret", **flags)
    assert (ours.perms, tuple(ours.id)) == (theirs.perms, tuple(theirs.id))
    assert ours.acl_list == theirs.acl_list
    assert zk_acl.make_acl("ip", "10.0.0.0/8", **flags).perms == security.make_acl("ip", "10.0.0.0/8", **flags).perms


def test_constants_and_credential_match_kazoo() -> None:
    assert zk_acl.make_digest_acl_credential("u", "p") == security.make_digest_acl_credential("u", "p")
    for name in ("OPEN_ACL_UNSAFE", "CREATOR_ALL_ACL", "READ_ACL_UNSAFE"):
        assert [(a.perms, tuple(a.id)) for a in getattr(zk_acl, name)] == [
            (a.perms, tuple(a.id)) for a in getattr(security, name)
        ]


def test_acl_arguments_are_checked_before_sending() -> None:
    kazoo_acl = security.make_digest_acl("alice", "secret", all=True)  # kazoo's namedtuples are accepted too
    assert zk_acl.check_acl_list([kazoo_acl], "/p") == (zk_acl.ACL(31, zk_acl.Id(*kazoo_acl.id)),)
    with pytest.raises(TypeError, match="is not an ACL"):
        zk_acl.check_acl_list(["world:anyone:cdrwa"], "/p")
    with pytest.raises(TypeError, match="must be a list of ACL"):
        zk_acl.check_acl_list("world", "/p")
    with pytest.raises(InvalidACLError):
        Transaction(lambda ops: []).create("/p", acl=[])
