"""How a node reaches the members of its configuration: the address book a CONFIG entry carries.

The Raft core keeps each configuration's `context` opaque (quorum.raft.membership). The node puts there the
address of every member, as JSON `{"id": "host:port"}`, so that a node that joins or restarts learns from the
log or a snapshot how to reach members added after the cluster started (ZooKeeper keeps the same thing in
its dynamic configuration file, `server.N=host:port`). The configuration the cluster started with has no
context: its addresses are the peer list the data dir was created with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from quorum.raft.membership import Membership


def encode_addresses(addresses: Mapping[int, str]) -> bytes:
    return json.dumps({str(k): v for k, v in sorted(addresses.items())}, separators=(",", ":")).encode()


def decode_addresses(context: bytes) -> dict[int, str]:
    """The address book in a configuration's context ({} when it has none, or one this node cannot read)."""
    if not context:
        return {}
    try:
        raw = json.loads(context)
        return {int(k): str(v) for k, v in raw.items()}
    except (ValueError, AttributeError, TypeError):
        return {}


def member_addresses(membership: Membership, bootstrap: Mapping[int, str], known: Mapping[int, str]) -> dict[int, str]:
    """The address of every member of `membership`: from its context first, then the peer list the cluster
    started with (the data dir's, whatever a later start's --peers says), then those learned otherwise (a
    join's answer, this start's --peers)."""
    book = decode_addresses(membership.context)
    out: dict[int, str] = {}
    for member in membership.members:
        address = book.get(member) or bootstrap.get(member) or known.get(member)
        if address:
            out[member] = address
    return out


def members_string(membership: Membership, addresses: Mapping[int, str]) -> str:
    """`1=h:p,2=h:p` of the members with an address, voters first, as the Hello answer carries it."""
    return ",".join(f"{m}={addresses[m]}" for m in membership.members if m in addresses)


def parse_members(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in filter(None, text.split(",")):
        node_id, _, address = item.partition("=")
        out[int(node_id)] = address
    return out
