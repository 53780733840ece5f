"""ZooKeeper's dynamic configuration, the data of /zookeeper/config, parsed (pure: no I/O).

    server.1=127.0.0.1:7001:0:participant;127.0.0.1:2181
    server.4=127.0.0.1:7004:0:observer
    version=1a

One `server.<id>` line per member (ZooKeeper's QuorumPeerConfig.parseDynamicConfig and
QuorumPeer.QuorumServer): `host:port:port[:role]` is the member's peer address (the first
host:port; its second port is ZooKeeper's election port), the role `participant` (the default)
or `observer`; `;[host:]port` after it is the client address, where ZooKeeper's wire protocol
is served (a port alone means every interface, 0.0.0.0). Several peer addresses may be joined
by `|` (ZooKeeper 3.6's multi-address servers). `version=<hex>` is the configuration's version;
`group.*` and `weight.*` (hierarchical quorums) are read past; anything else is refused.

A zkraft node serves its gRPC services (the session service this SDK uses) on its peer
address, so `grpc_addresses` is what the SDK follows; `wire_addresses` is what
ZooKeeper's ConfigUtils.getClientConfigStr gives a wire-protocol client (ZooKeeper's Java
client's updateServerList, Curator's EnsembleTracker): members without a client address are
left out, and a wildcard client host is replaced by the member's peer host.

The server side has its own parser of these lines (zkemu.config_text): it checks reconfig's server
strings as ZooKeeper's QuorumServer does, with ZooKeeper's messages, where this one follows any
ensemble's text.
"""

from __future__ import annotations

from dataclasses import dataclass

PARTICIPANT = "participant"
OBSERVER = "observer"
ROLES = (PARTICIPANT, OBSERVER)
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0")
# Keys of a dynamic configuration that name no member (QuorumHierarchical's groups and weights).
IGNORED_KEY_PREFIXES = ("group.", "weight.")


class EnsembleConfigError(ValueError):
    """The text is not a dynamic configuration; the message names the line and what is wrong."""


@dataclass(frozen=True, slots=True)
class Member:
    server_id: int
    peer_address: str  # host:port, where the node's gRPC services listen
    role: str  # PARTICIPANT or OBSERVER
    client_address: str | None  # host:port of ZooKeeper's wire protocol, None when not given


@dataclass(frozen=True, slots=True)
class EnsembleConfig:
    members: tuple[Member, ...]  # by server id
    version: int | None  # None: no version line

    def grpc_addresses(self) -> list[str]:
        """Every member's gRPC address (peer address), participants and observers, by server id."""
        return [m.peer_address for m in self.members]

    def wire_addresses(self) -> list[str]:
        """The members' wire-protocol addresses, as ZooKeeper's getClientConfigStr lists them."""
        addresses = []
        for m in self.members:
            if m.client_address is None:
                continue
            host, port = split_host_port(m.client_address)
            if host in WILDCARD_HOSTS:
                host = split_host_port(m.peer_address)[0]
            addresses.append(f"{host}:{port}")
        return addresses


def parse_ensemble_config(data: bytes | str) -> EnsembleConfig:
    """The configuration in `data`; EnsembleConfigError naming the first bad line. An empty text parses
    to no members (what a standalone ZooKeeper's /zookeeper/config holds)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    members: dict[int, Member] = {}
    version: int | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):  # java.util.Properties' comments
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise EnsembleConfigError(f"line {number}: {line!r} is not key=value")
        if key == "version":
            version = _parse_version(value, number)
        elif key.startswith("server."):
            member = _parse_member(key, value, number)
            if member.server_id in members:
                raise EnsembleConfigError(f"line {number}: server.{member.server_id} is listed twice")
            members[member.server_id] = member
        elif not key.startswith(IGNORED_KEY_PREFIXES):
            raise EnsembleConfigError(f"line {number}: unknown key {key!r}")
    return EnsembleConfig(tuple(members[i] for i in sorted(members)), version)


def _parse_version(value: str, number: int) -> int:
    try:
        return int(value, 16)  # ZooKeeper writes the version in hex (Long.toHexString)
    except ValueError:
        raise EnsembleConfigError(f"line {number}: version {value!r} is not hexadecimal") from None


def _parse_member(key: str, value: str, number: int) -> Member:
    id_text = key.removeprefix("server.")
    if not id_text.isdigit():
        raise EnsembleConfigError(f"line {number}: {key!r} does not end in a server id")
    server_part, sep, client_part = value.partition(";")
    if sep and ";" in client_part:
        raise EnsembleConfigError(f"line {number}: {value!r} has more than one ';'")
    peer_address, role = _parse_server_part(server_part.strip(), number)
    client_address = _parse_client_part(client_part.strip(), number) if sep else None
    return Member(int(id_text), peer_address, role, client_address)


def _parse_server_part(text: str, number: int) -> tuple[str, str]:
    """(first peer host:port, role) of `host:port:port[:role][|host:port:port[:role]...]`."""
    addresses, roles = [], []
    for one in text.split("|"):
        host, fields = _leading_host(one.strip(), number)
        # The election port may be 0: zkraft writes it so (one port carries Raft's elections and
        # replication, and ZooKeeper's QuorumServer refuses the same port twice).
        if len(fields) not in (2, 3) or not (_is_port(fields[0]) and (fields[1] == "0" or _is_port(fields[1]))):
            raise EnsembleConfigError(f"line {number}: {one.strip()!r} is not host:port:port[:role]")
        role = fields[2] if len(fields) == 3 else PARTICIPANT
        if role not in ROLES:
            raise EnsembleConfigError(f"line {number}: unknown role {role!r} (participant or observer)")
        addresses.append(f"{host}:{fields[0]}")
        roles.append(role)
    return addresses[0], roles[-1]


def _parse_client_part(text: str, number: int) -> str:
    """host:port of `[host:]port`; a port alone is every interface (ZooKeeper's 0.0.0.0)."""
    if _is_port(text):
        return f"0.0.0.0:{text}"
    host, fields = _leading_host(text, number)
    if len(fields) != 1 or not _is_port(fields[0]):
        raise EnsembleConfigError(f"line {number}: client address {text!r} is not [host:]port")
    return f"{host}:{fields[0]}"


def _leading_host(text: str, number: int) -> tuple[str, list[str]]:
    """(host, the ':'-separated fields after it); an IPv6 host is in brackets (ZooKeeper's
    ConfigUtils.splitWithLeadingHostname)."""
    if text.startswith("["):
        end = text.find("]:")
        if end < 0:
            raise EnsembleConfigError(f"line {number}: {text!r}: an IPv6 host needs ']:' after it")
        return text[: end + 1], text[end + 2 :].split(":")
    host, _, rest = text.partition(":")
    if not host or not rest:
        raise EnsembleConfigError(f"line {number}: {text!r} has no host:port")
    return host, rest.split(":")


def _is_port(text: str) -> bool:
    return text.isdigit() and 0 < int(text) < 65536


def split_host_port(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return host, port
