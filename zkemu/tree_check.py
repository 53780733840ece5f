"""The znode tree's start-up check: every record of every database read back and decoded.

ZnodeTree runs it in a child process before it trusts its LMDB environment
(quorum.state_check says why a child). Besides decoding each record, it checks
what the tree keeps twice, so that a value garbled in place (LMDB has no page
checksums) shows: every child listing names a node, each node's child count
is the number of its listings, every ephemeral is indexed under its owner, a
live session, every container and TTL node is in the containers index and
nothing else is, and no zxid is beyond the applied index.

Cost, once per start of the node: 100,000 znodes of 40 bytes under 50
parents (a 27 MB file) took 1.1 s, the child's own start included, on the
2-core machine the tests run on; it grows linearly with the records.
"""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import lmdb

from quorum.facade import DamagedRecordError, open_read_only
from zkemu import acl as acls
from zkemu.ephemeral_type import NodeKind, kind_of
from zkemu.errors import ZkError
from zkemu.paths import ROOT, validate_path
from zkemu.tree import (
    _CZXID,
    _HDR,
    _META_APPLIED,
    _META_FORMAT,
    _MZXID,
    _NCHILDREN,
    _NODE,
    _OWNER,
    _PZXID,
    _SESSION_KEY_BYTES,
    _SESSION_RECORD,
    _SID,
    _TIMEOUT,
    _U32,
    _U64,
)

_DB_NAMES = (b"nodes", b"children", b"ephemerals", b"sessions", b"meta")
# Databases a tree written before they existed lacks; ZnodeTree creates them empty when it opens it.
_LATER_DB_NAMES = (b"containers", b"acls", b"nulls")
_MAX_DBS = 10


def check_tree(path: Path) -> None:
    """Raise DamagedRecordError (or the lmdb.Error a damaged page causes) unless the tree reads back whole."""
    env = open_read_only(path, _MAX_DBS)
    try:
        with env.begin() as txn:
            names = {bytes(k) for k, _ in txn.cursor()}
            if not set(_DB_NAMES) <= names <= set(_DB_NAMES + _LATER_DB_NAMES):
                raise DamagedRecordError(f"the main database names {sorted(names)}, expected {sorted(_DB_NAMES)}")
            dbs = {name: env.open_db(name, txn=txn, create=False) for name in names}
            applied = _check_meta(txn, dbs[b"meta"])
            nodes = _check_nodes(txn, dbs[b"nodes"], applied)
            _check_children(txn, dbs[b"children"], nodes)
            sessions = _check_sessions(txn, dbs[b"sessions"])
            _check_ephemerals(txn, dbs[b"ephemerals"], nodes, sessions)
            _check_containers(txn, dbs.get(b"containers"), nodes)
            if b"acls" in dbs:
                _check_acls(txn, dbs[b"acls"], nodes)
            if b"nulls" in dbs:
                _check_nulls(txn, dbs[b"nulls"], dbs[b"nodes"])
    finally:
        env.close()


def _check_meta(txn: lmdb.Transaction, db: lmdb._Database) -> int:
    fmt = txn.get(_META_FORMAT, db=db)
    applied = txn.get(_META_APPLIED, db=db)
    if fmt is None or len(fmt) != _U32.size:
        raise DamagedRecordError(f"meta: format record {fmt!r} is not 4 bytes")
    if applied is None or len(applied) != _U64.size:
        raise DamagedRecordError(f"meta: applied index record {applied!r} is not 8 bytes")
    return int(_U64.unpack(applied)[0])


def _check_nodes(txn: lmdb.Transaction, db: lmdb._Database, applied: int) -> dict[bytes, tuple[int, int]]:
    """key -> (child count, ephemeral owner) of every node, each decoded and within the applied index."""
    nodes: dict[bytes, tuple[int, int]] = {}
    for key, value in txn.cursor(db=db):
        path = _path_of(key, "nodes")
        if len(value) < _HDR:
            raise DamagedRecordError(f"nodes: {path}: {len(value)} bytes, shorter than a stat ({_HDR})")
        h = _NODE.unpack_from(value)
        zxids = (h[_CZXID], h[_MZXID], h[_PZXID])
        if min(zxids) < 0 or max(zxids) > applied:
            raise DamagedRecordError(f"nodes: {path}: zxids {zxids} outside 0..{applied} (the applied index)")
        if h[_NCHILDREN] < 0:
            raise DamagedRecordError(f"nodes: {path}: {h[_NCHILDREN]} children")
        nodes[bytes(key)] = (h[_NCHILDREN], h[_OWNER])
    if ROOT.encode() not in nodes:
        raise DamagedRecordError("nodes: the root is missing")
    return nodes


def _check_children(txn: lmdb.Transaction, db: lmdb._Database, nodes: dict[bytes, tuple[int, int]]) -> None:
    listed: Counter[bytes] = Counter()
    for key, value in txn.cursor(db=db):
        parent, nul, name = bytes(key).partition(b"\0")
        child = (b"" if parent == b"/" else parent) + b"/" + name
        if not nul or value != b"" or parent not in nodes or child not in nodes:
            raise DamagedRecordError(f"children: listing {bytes(key)!r} -> {bytes(value)!r} names no node")
        listed[parent] += 1
    if sum(listed.values()) != len(nodes) - 1:
        raise DamagedRecordError(f"children: {sum(listed.values())} listings for {len(nodes)} nodes")
    for key, (count, _) in nodes.items():
        if listed[key] != count:
            raise DamagedRecordError(f"nodes: {key!r} counts {count} children, {listed[key]} are listed")


_SESSION_SIZES = (_TIMEOUT.size, _SESSION_RECORD.size)


def _check_sessions(txn: lmdb.Transaction, db: lmdb._Database) -> set[int]:
    sessions: set[int] = set()
    for key, value in txn.cursor(db=db):
        # timeout, then (in records written since owners are kept) the owning connection
        if len(key) != _SID.size or len(value) not in _SESSION_SIZES or _TIMEOUT.unpack_from(value)[0] <= 0:
            raise DamagedRecordError(f"sessions: record {bytes(key)!r} -> {bytes(value)!r}")
        sessions.add(_SID.unpack(key)[0])
    return sessions


def _check_ephemerals(
    txn: lmdb.Transaction, db: lmdb._Database, nodes: dict[bytes, tuple[int, int]], sessions: set[int]
) -> None:
    count = 0
    for key, value in txn.cursor(db=db):
        sid = _SID.unpack_from(key)[0] if len(key) > _SESSION_KEY_BYTES else 0
        node = nodes.get(bytes(key[_SESSION_KEY_BYTES:]))
        if value != b"" or sid == 0 or sid not in sessions or node is None or node[1] != sid:
            raise DamagedRecordError(f"ephemerals: index record {bytes(key)!r} names no ephemeral of a live session")
        count += 1
    owned = sum(1 for _, owner in nodes.values() if owner != 0 and kind_of(owner) is NodeKind.EPHEMERAL)
    if owned != count:
        raise DamagedRecordError(f"ephemerals: {count} index records for {owned} ephemeral nodes")


def _check_containers(txn: lmdb.Transaction, db: lmdb._Database | None, nodes: dict[bytes, tuple[int, int]]) -> None:
    """The containers index names exactly the container and TTL nodes."""
    indexed: set[bytes] = set()
    for key, value in txn.cursor(db=db) if db is not None else ():
        node = nodes.get(bytes(key))
        if value != b"" or node is None or kind_of(node[1]) not in (NodeKind.CONTAINER, NodeKind.TTL):
            raise DamagedRecordError(f"containers: index record {bytes(key)!r} names no container or TTL node")
        indexed.add(bytes(key))
    extended = sum(1 for _, owner in nodes.values() if kind_of(owner) in (NodeKind.CONTAINER, NodeKind.TTL))
    if extended != len(indexed):
        raise DamagedRecordError(f"containers: {len(indexed)} index records for {extended} container/TTL nodes")


def _check_acls(txn: lmdb.Transaction, db: lmdb._Database, nodes: dict[bytes, tuple[int, int]]) -> None:
    """Every stored ACL belongs to a node and decodes to a non-empty list."""
    for key, value in txn.cursor(db=db):
        if bytes(key) not in nodes:
            raise DamagedRecordError(f"acls: record {bytes(key)!r} names no node")
        try:
            decoded = acls.decode(bytes(value))
        except (ValueError, UnicodeDecodeError, struct.error) as exc:
            raise DamagedRecordError(f"acls: {bytes(key)!r}: {exc}") from None
        if not decoded:
            raise DamagedRecordError(f"acls: {bytes(key)!r}: an empty list")


def _path_of(key: bytes, db: str) -> str:
    try:
        path = bytes(key).decode()
        validate_path(path)
    except (UnicodeDecodeError, ZkError) as exc:
        raise DamagedRecordError(f"{db}: key {bytes(key)!r} is not a znode path ({exc})") from None
    return path


def _check_nulls(txn: lmdb.Transaction, db: lmdb._Database, nodes_db: lmdb._Database) -> None:
    """Every null-data mark names a node without data."""
    for key, value in txn.cursor(db=db):
        record = txn.get(bytes(key), db=nodes_db)
        if value != b"" or record is None or len(record) != _HDR:
            raise DamagedRecordError(f"nulls: record {bytes(key)!r} names no node without data")
