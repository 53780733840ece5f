"""ZooKeeper's ACLs: the pure rules (zkemu.acl) table by table, then the tree applying them from Txn.auth.

The expected values come from ZooKeeper 3.9: ZooKeeperServer.checkACL,
PrepRequestProcessor.fixupACL, DigestAuthenticationProvider and
IPAuthenticationProvider, FinalRequestProcessor's getACL masking.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkemu import acl
from zkemu.acl import ADMIN, ALL, CREATE, DELETE, READ, WRITE, Acl, Id
from zkemu.errors import AuthFailedError, Code, InvalidAclError, NoAuthError
from zkemu.stat import Stat
from zkemu.tree import ZnodeTree
from zkraft_proto import zk_pb2 as pb

from .test_zk_tree import Zk

ALICE = "alice:secret"
ALICE_ID = Id("digest", acl.digest_of(ALICE))
BOB_ID = Id("digest", acl.digest_of("bob:other"))
LOCAL = Id("ip", "127.0.0.1")


def test_digest_is_zookeepers_user_colon_base64_sha1() -> None:
    expected = base64.b64encode(hashlib.sha1(b"alice:secret").digest()).decode()  # noqa: S324
    assert acl.digest_of(ALICE) == f"alice:{expected}"
    # The value ZooKeeper's DigestAuthenticationProvider prints for super:test (its documentation's example).
    assert acl.digest_of("super:test") == "super:D/InIHSb7yEEbrWz8b9l71RjZJU="


@pytest.mark.parametrize(
    ("entries", "perm", "ids", "allowed"),
    [
        ((), READ, (), True),  # an empty list is open (checkACL: acl.size() == 0)
        (acl.OPEN_ACL_UNSAFE, ADMIN, (), True),
        (acl.READ_ACL_UNSAFE, WRITE, (LOCAL,), False),
        (acl.READ_ACL_UNSAFE, READ | ADMIN, (), True),  # any bit of the asked permission
        ((Acl(ALL, *ALICE_ID),), READ, (LOCAL,), False),
        ((Acl(ALL, *ALICE_ID),), READ, (LOCAL, ALICE_ID), True),
        ((Acl(READ, *ALICE_ID),), WRITE, (ALICE_ID,), False),
        ((Acl(ALL, *ALICE_ID),), DELETE, (BOB_ID,), False),
        ((Acl(ALL, *ALICE_ID),), DELETE, (acl.SUPER_ID,), True),  # super passes everything
        ((Acl(CREATE, "ip", "127.0.0.0/8"),), CREATE, (LOCAL,), True),
        ((Acl(CREATE, "ip", "10.0.0.0/8"),), CREATE, (LOCAL,), False),
        ((Acl(CREATE, "ip", "127.0.0.1"),), CREATE, (LOCAL,), True),
        ((Acl(CREATE, "ip", "::1"),), CREATE, (LOCAL,), False),  # another address family
        ((Acl(CREATE, "ip", "::1"),), CREATE, (Id("ip", "::1"),), True),
        ((Acl(ALL, "digest", ALICE_ID.id),), READ, (Id("ip", ALICE_ID.id),), False),  # the scheme must match
    ],
)
def test_check(entries: tuple[Acl, ...], perm: int, ids: tuple[Id, ...], allowed: bool) -> None:
    if allowed:
        acl.check(entries, perm, ids, "/n")
    else:
        with pytest.raises(NoAuthError):
            acl.check(entries, perm, ids, "/n")


@pytest.mark.parametrize(
    ("entries", "ids", "fixed"),
    [
        (acl.OPEN_ACL_UNSAFE, (), acl.OPEN_ACL_UNSAFE),
        (acl.OPEN_ACL_UNSAFE * 2, (), acl.OPEN_ACL_UNSAFE),  # duplicates dropped (ZOOKEEPER-1877)
        ((Acl(ALL, "auth", ""),), (LOCAL, ALICE_ID, BOB_ID), (Acl(ALL, *ALICE_ID), Acl(ALL, *BOB_ID))),
        ((Acl(READ, "auth", "ignored"),), (acl.SUPER_ID, ALICE_ID), (Acl(READ, *ALICE_ID),)),
        ((Acl(READ, "ip", "10.1.0.0/16"),), (), (Acl(READ, "ip", "10.1.0.0/16"),)),
        ((Acl(READ, *ALICE_ID),), (), (Acl(READ, *ALICE_ID),)),
    ],
)
def test_fixup(entries: tuple[Acl, ...], ids: tuple[Id, ...], fixed: tuple[Acl, ...]) -> None:
    assert acl.fixup("/n", entries, ids) == fixed


@pytest.mark.parametrize(
    ("entries", "ids"),
    [
        ((), ()),  # empty list
        ((Acl(ALL, "auth", ""),), (LOCAL,)),  # auth without a digest id
        ((Acl(ALL, "world", "somebody"),), ()),
        ((Acl(ALL, "x509", "x"),), ()),  # no provider for the scheme
        ((Acl(ALL, "digest", "alice"),), ()),  # not user:hash
        ((Acl(ALL, "digest", "a:b:c"),), ()),
        ((Acl(ALL, "digest", "alice:"),), ()),
        ((Acl(ALL, "ip", "300.1.1.1"),), ()),
        ((Acl(ALL, "ip", "10.0.0.0/33"),), ()),
        ((Acl(ALL, "ip", "10.0.0.0/x"),), ()),
        ((Acl(ALL, "ip", "host.example"),), ()),
        ((Acl(ALL, "digest", "u:" + "h" * 20_000),), ()),  # too long to store
    ],
)
def test_fixup_refuses_invalid_acls(entries: tuple[Acl, ...], ids: tuple[Id, ...]) -> None:
    with pytest.raises(InvalidAclError):
        acl.fixup("/n", entries, ids)


def test_authenticate() -> None:
    assert acl.authenticate("digest", ALICE.encode(), "127.0.0.1", "") == (ALICE_ID,)
    super_digest = acl.digest_of("super:pw")
    assert acl.authenticate("digest", b"super:pw", "127.0.0.1", super_digest) == (
        acl.SUPER_ID,
        Id("digest", super_digest),
    )
    assert acl.authenticate("ip", b"whatever", "10.1.2.3", "") == (Id("ip", "10.1.2.3"),)
    for scheme, credential in (("kerberos", b"x"), ("super", b"x"), ("digest", b"\xff\xfe")):
        with pytest.raises(AuthFailedError):
            acl.authenticate(scheme, credential, "127.0.0.1", "")


def test_masking_client_infos_and_text() -> None:
    entries = (Acl(ALL, *ALICE_ID), Acl(READ, "world", "anyone"))
    assert acl.masked(entries) == (Acl(ALL, "digest", "alice:x"), Acl(READ, "world", "anyone"))
    # In ZooKeeper's authInfo iteration order (hash buckets 0, 7 and 12 of its 16), not the order added.
    infos = [("digest", "alice"), ("super", ""), ("ip", "127.0.0.1")]
    assert acl.client_infos((LOCAL, ALICE_ID, acl.SUPER_ID)) == infos
    assert acl.format_perms(ALL) == "cdrwa" and acl.format_perms(READ | ADMIN) == "ra"
    assert acl.parse_perms("rwa") == READ | WRITE | ADMIN
    with pytest.raises(ValueError, match="unknown permission 'x'"):
        acl.parse_perms("rx")


def test_stored_form_round_trips() -> None:
    entries = (Acl(ALL, *ALICE_ID), Acl(READ, "ip", "10.0.0.0/8"), Acl(0, "world", "anyone"))
    assert acl.decode(acl.encode(entries)) == entries
    with pytest.raises(ValueError, match="truncated"):
        acl.decode(acl.encode(entries)[:-3])


# ---------------------------------------------------------------- the tree, from Txn.auth
def _pb_acl(entries: tuple[Acl, ...]) -> list[pb.Acl]:
    return [pb.Acl(perms=a.perms, id=pb.Id(scheme=a.scheme, id=a.id)) for a in entries]


def _auth(*ids: Id) -> list[pb.Id]:
    return [pb.Id(scheme=i.scheme, id=i.id) for i in ids]


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[Zk]:
    z = Zk(tmp_path / "tree")
    yield z
    z.tree.close()


def _create(zk: Zk, path: str, entries: tuple[Acl, ...] = (), *ids: Id, parents: bool = False) -> pb.TxnResult:
    return zk.txn(auth=_auth(*ids), create=pb.CreateOp(path=path, acl=_pb_acl(entries), make_parents=parents))


def _set_acl(zk: Zk, path: str, entries: tuple[Acl, ...], version: int = -1, *ids: Id) -> pb.TxnResult:
    return zk.txn(auth=_auth(*ids), set_acl=pb.SetAclOp(path=path, acl=_pb_acl(entries), version=version))


def test_default_create_stores_no_acl_and_reads_as_open(zk: Zk) -> None:
    assert _create(zk, "/open").err == 0
    assert zk.tree.get_acl("/open")[0] == acl.OPEN_ACL_UNSAFE
    assert _create(zk, "/open2", acl.OPEN_ACL_UNSAFE).err == 0
    assert zk.tree.get_acl("/zookeeper/config")[0] == acl.READ_ACL_UNSAFE
    with zk.tree._env.begin() as txn:
        assert txn.stat(zk.tree._acls)["entries"] == 0


def test_each_write_checks_zookeepers_permission(zk: Zk) -> None:
    only_alice = (Acl(ALL, *ALICE_ID),)
    assert _create(zk, "/a", only_alice).err == 0  # the creator needs no id for a digest ACL
    assert _create(zk, "/a/x", (), LOCAL).err == Code.NOAUTH  # CREATE on the parent
    assert _create(zk, "/a/x", (), LOCAL, ALICE_ID).err == 0
    assert zk.txn(auth=_auth(BOB_ID), set_data=pb.SetDataOp(path="/a", data=b"v", version=-1)).err == Code.NOAUTH
    assert zk.txn(auth=_auth(ALICE_ID), set_data=pb.SetDataOp(path="/a", data=b"v", version=-1)).err == 0
    assert zk.txn(check=pb.CheckOp(path="/a", version=-1)).err == Code.NOAUTH  # READ
    assert zk.txn(delete=pb.DeleteOp(path="/a/x", version=-1)).err == Code.NOAUTH  # DELETE on the parent
    assert zk.txn(auth=_auth(acl.SUPER_ID), delete=pb.DeleteOp(path="/a/x", version=-1)).err == 0
    multi = pb.MultiOp(ops=[pb.Op(create=pb.CreateOp(path="/b")), pb.Op(create=pb.CreateOp(path="/a/y"))])
    assert [r.err for r in zk.txn(multi=multi).results] == [0, Code.NOAUTH]
    assert zk.tree.stat("/b") is None


def test_set_acl_checks_admin_and_aversion_and_a_delete_forgets_the_acl(zk: Zk) -> None:
    assert _create(zk, "/n").err == 0
    mine = (Acl(READ | ADMIN, *ALICE_ID),)
    assert _set_acl(zk, "/n", mine, 1).err == Code.BADVERSION
    result = _set_acl(zk, "/n", mine, 0)
    assert result.err == 0 and result.stat.aversion == 1
    assert zk.tree.get_acl("/n") == (mine, zk.stat("/n"))
    assert _set_acl(zk, "/n", acl.OPEN_ACL_UNSAFE, -1, BOB_ID).err == Code.NOAUTH
    assert _set_acl(zk, "/n", (), -1, ALICE_ID).err == Code.INVALIDACL
    assert _set_acl(zk, "/missing", mine).err == Code.NONODE
    assert _set_acl(zk, "/missing", ((Acl(ALL, "auth", ""),))).err == Code.INVALIDACL  # fixupACL comes first
    assert _set_acl(zk, "/n", acl.OPEN_ACL_UNSAFE, 1, ALICE_ID).err == 0
    assert zk.tree.get_acl("/n")[1].aversion == 2
    assert _set_acl(zk, "/n", mine).err == 0
    assert zk.txn(delete=pb.DeleteOp(path="/n", version=-1)).err == 0  # DELETE is checked on the parent
    assert _create(zk, "/n").err == 0
    assert zk.tree.get_acl("/n")[0] == acl.OPEN_ACL_UNSAFE  # a re-created node does not inherit the old ACL


def test_the_acl_lookups_start_with_the_first_stored_acl_and_stop_after_the_last(zk: Zk) -> None:
    """The tree skips the acls database while it is empty (ZnodeTree._acls_present): the first stored
    ACL turns the lookups on in its own batch, and they stay on while one is stored."""
    assert _create(zk, "/o").err == 0
    assert not zk.tree._acls_present
    only_alice = (Acl(ALL, *ALICE_ID),)
    assert _create(zk, "/a", only_alice).err == 0
    assert zk.tree._acls_present
    assert _create(zk, "/o/x").err == 0  # a batch without ACLs of its own
    assert zk.txn(auth=_auth(BOB_ID), set_data=pb.SetDataOp(path="/a", data=b"v", version=-1)).err == Code.NOAUTH
    assert zk.txn(delete=pb.DeleteOp(path="/a", version=-1)).err == 0
    assert _create(zk, "/o/y").err == 0  # the next batch finds the database empty
    assert not zk.tree._acls_present
    assert _create(zk, "/a", only_alice).err == 0
    assert zk.txn(auth=_auth(BOB_ID), set_data=pb.SetDataOp(path="/a", data=b"v", version=-1)).err == Code.NOAUTH


def test_auth_scheme_becomes_the_callers_digest_ids(zk: Zk) -> None:
    assert _create(zk, "/c", (Acl(ALL, "auth", ""),), LOCAL).err == Code.INVALIDACL
    assert _create(zk, "/c", (Acl(ALL, "auth", ""),), LOCAL, ALICE_ID).err == 0
    assert zk.tree.get_acl("/c")[0] == (Acl(ALL, *ALICE_ID),)
    assert _create(zk, "/p/q", (Acl(ALL, "auth", ""),), ALICE_ID, parents=True).err == 0
    assert zk.tree.get_acl("/p")[0] == zk.tree.get_acl("/p/q")[0] == (Acl(ALL, *ALICE_ID),)


def test_reads_check_read_when_given_ids(zk: Zk) -> None:
    assert _create(zk, "/r", (Acl(WRITE, "world", "anyone"),)).err == 0
    for read in (zk.tree.get_data, zk.tree.get_children, zk.tree.stat, zk.tree.all_children_number):
        read("/r")  # the server's own reads are not checked
        with pytest.raises(NoAuthError):
            read("/r", (LOCAL,))
        read("/r", (acl.SUPER_ID,))
    assert zk.tree.stat("/missing", (LOCAL,)) is None


def test_zookeeper_config_stays_read_only_but_not_for_super(zk: Zk) -> None:
    assert _create(zk, "/zookeeper/config/x").err == Code.NOAUTH
    assert _set_acl(zk, "/zookeeper/config", acl.OPEN_ACL_UNSAFE).err == Code.NOAUTH
    assert zk.stat("/zookeeper/config") == Stat(aversion=-1)
    assert _set_acl(zk, "/zookeeper/config", acl.OPEN_ACL_UNSAFE, -1, acl.SUPER_ID).err == 0
    assert zk.tree.get_acl("/zookeeper/config")[0] == acl.OPEN_ACL_UNSAFE
    assert zk.stat("/zookeeper/config").aversion == 0


def test_acls_are_in_the_digest_and_survive_a_snapshot(tmp_path: Path) -> None:
    a, b = Zk(tmp_path / "a"), Zk(tmp_path / "b")
    for z in (a, b):
        assert _create(z, "/s").err == 0
    assert a.tree.digest() == b.tree.digest()
    assert _set_acl(a, "/s", (Acl(READ, *ALICE_ID),)).err == 0
    assert _set_acl(b, "/s", (Acl(READ, *BOB_ID),)).err == 0
    assert a.tree.digest() != b.tree.digest()
    snap = tmp_path / "snap"
    snap.write_bytes(b"".join(a.tree.snapshot_chunks()))
    b.tree.restore(snap, a.tree.applied_index())
    assert b.tree.digest() == a.tree.digest()
    assert b.tree.get_acl("/s")[0] == (Acl(READ, *ALICE_ID),)
    with pytest.raises(NoAuthError):
        b.tree.get_data("/s", (LOCAL,))  # checked at once after a restore into a tree that had no ACLs
    a.tree.close()
    b.tree.close()


def test_a_tree_with_acls_passes_the_start_up_check(tmp_path: Path) -> None:
    from zkemu.tree_check import check_tree

    z = Zk(tmp_path / "t")
    assert _create(z, "/k", (Acl(ALL, *ALICE_ID),)).err == 0
    z.tree.close()
    check_tree(tmp_path / "t")
    reopened = ZnodeTree(tmp_path / "t")
    with pytest.raises(NoAuthError):
        reopened.get_data("/k", (LOCAL,))
    reopened.close()


def test_a_tree_written_before_acls_existed_reads_as_open_and_passes_the_check(tmp_path: Path) -> None:
    import lmdb

    from zkemu.tree_check import check_tree

    z = Zk(tmp_path / "old")
    assert z.create("/before", b"x").err == 0
    z.tree.close()
    env = lmdb.open(str(tmp_path / "old"), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"acls", txn=txn), delete=True)  # as a tree of the previous version has it
    env.close()
    check_tree(tmp_path / "old")
    z = Zk(tmp_path / "old")
    assert z.tree.get_acl("/before")[0] == acl.OPEN_ACL_UNSAFE
    z.tree.get_data("/before", (LOCAL,))
    z.tree.close()


def test_triggers_carry_the_nodes_stored_acl(zk: Zk) -> None:
    from zkemu.events import EventType, WatchTrigger

    mine = acl.encode((Acl(ALL, *ALICE_ID),))
    assert _create(zk, "/w", (Acl(ALL, *ALICE_ID),)).err == 0
    assert zk.last.triggers == (
        WatchTrigger(EventType.NODE_CREATED, "/w", mine),
        WatchTrigger(EventType.NODE_CHILDREN_CHANGED, "/", None),
    )
    assert _create(zk, "/w/c", (), ALICE_ID).err == 0
    assert zk.last.triggers[1] == WatchTrigger(EventType.NODE_CHILDREN_CHANGED, "/w", mine)
    assert zk.txn(auth=_auth(ALICE_ID), set_data=pb.SetDataOp(path="/w", data=b"v", version=-1)).err == 0
    assert zk.last.triggers == (WatchTrigger(EventType.NODE_DATA_CHANGED, "/w", mine),)
    assert zk.txn(auth=_auth(ALICE_ID), delete=pb.DeleteOp(path="/w/c", version=-1)).err == 0
    assert zk.txn(delete=pb.DeleteOp(path="/w", version=-1)).err == 0
    assert zk.last.triggers == (
        WatchTrigger(EventType.NODE_DELETED, "/w", mine),
        WatchTrigger(EventType.NODE_CHILDREN_CHANGED, "/", None),
    )


class _Watcher:
    def __init__(self, *ids: Id) -> None:
        self.auth_ids = ids
        self.events: list[tuple[int, str, int]] = []

    def send_event(self, event_type: int, path: str, zxid: int) -> None:
        self.events.append((event_type, path, zxid))


def test_a_watcher_without_read_gets_no_event_and_loses_its_watch() -> None:
    from zkemu.events import EventType
    from zkemu.watches import WatchManager

    manager = WatchManager()
    reader, stranger = _Watcher(LOCAL, ALICE_ID), _Watcher(LOCAL)
    for w in (reader, stranger):
        manager.add_data_watch(w, "/x")
    manager.trigger(EventType.NODE_DATA_CHANGED, "/x", 7, acl.encode((Acl(READ, *ALICE_ID),)))
    assert reader.events == [(EventType.NODE_DATA_CHANGED, "/x", 7)] and stranger.events == []
    assert manager.count() == 0  # ZooKeeper removes the one-shot watch before the ACL filter
    manager.add_data_watch(stranger, "/x")
    manager.trigger(EventType.NODE_DATA_CHANGED, "/x", 8)
    assert stranger.events == [(EventType.NODE_DATA_CHANGED, "/x", 8)]


@pytest.mark.parametrize(
    ("peer", "host"),
    [("ipv4:127.0.0.1:5000", "127.0.0.1"), ("ipv6:[::1]:5000", "::1"), ("ipv6:%5B::1%5D:5000", "::1")],
)
def test_the_session_ip_id_is_the_grpc_peers_address(peer: str, host: str) -> None:
    from zkemu.service import _peer_host

    assert _peer_host(peer) == host
