"""How a znode's stored ephemeralOwner says what kind of node it is (ZooKeeper's EphemeralType, research §1.3).

ZooKeeper keeps one 64-bit owner field per node and encodes the extended
types in it: Long.MIN_VALUE for a container, `0xFF00000000000000 | ttl` for a
TTL node (the top byte all ones, the 16 feature bits below it 0 for TTL, the
TTL in ms in the low 40 bits), a session id for an ephemeral, 0 for a
persistent node. Clients see 0 for containers and TTL nodes
(DataNode.getClientEphemeralOwner). A session id can only look like a TTL
owner when its server id is 255 and its clock bits 40-55 are 0;
ZooKeeper refuses server ids above 254 with extended types on
(EphemeralType.MAX_EXTENDED_SERVER_ID), and so do the node settings here.
"""

from __future__ import annotations

import enum

from quorum.facade import EXTENDED_SERVER_ID_MAX  # EphemeralType.MAX_EXTENDED_SERVER_ID

__all__ = [
    "CONTAINER_OWNER",
    "TTL_MS_MAX",
    "EXTENDED_SERVER_ID_MAX",
    "NodeKind",
    "client_owner",
    "kind_of",
    "ttl_owner",
    "ttl_of",
]

CONTAINER_OWNER = -(2**63)  # Long.MIN_VALUE (EphemeralType.CONTAINER_EPHEMERAL_OWNER)
_EXTENDED_MASK = 0xFF00000000000000
_FEATURE_BITS_MASK = 0x00FFFF0000000000
TTL_MS_MAX = (1 << 40) - 1  # EphemeralType.TTL.maxValue(): about 34 years
_TTL_TOP = _EXTENDED_MASK - (1 << 64)  # 0xFF00000000000000 as a signed 64-bit value


class NodeKind(enum.IntEnum):
    PERSISTENT = 0  # EphemeralType.VOID
    EPHEMERAL = 1  # NORMAL: the owner is a session id
    CONTAINER = 2
    TTL = 3


def kind_of(owner: int) -> NodeKind:
    """The kind of node a stored (signed 64-bit) owner value encodes (EphemeralType.get)."""
    if owner == 0:
        return NodeKind.PERSISTENT
    if owner == CONTAINER_OWNER:
        return NodeKind.CONTAINER
    if owner < 0 and (owner & _EXTENDED_MASK) == _EXTENDED_MASK and (owner & _FEATURE_BITS_MASK) == 0:
        return NodeKind.TTL
    return NodeKind.EPHEMERAL


def ttl_owner(ttl_ms: int) -> int:
    """The stored owner of a TTL node (EphemeralType.TTL.toEphemeralOwner); 0 < ttl_ms <= TTL_MS_MAX."""
    return _TTL_TOP | ttl_ms


def ttl_of(owner: int) -> int:
    """The TTL in ms of a TTL node's stored owner."""
    return owner & TTL_MS_MAX


def client_owner(owner: int) -> int:
    """What clients see as ephemeralOwner: the session id for an ephemeral, 0 for every other kind."""
    return owner if owner >= 0 or kind_of(owner) is NodeKind.EPHEMERAL else 0
