"""ZooKeeper's dynamic configuration text: what /zookeeper/config holds and what reconfig's strings say.

One line per member, `server.<id>=<host>:<quorumPort>:<electionPort>:<role>;<clientHost>:<clientPort>`,
ordered by id, then `version=<hex>` (QuorumMaj.toString, QuorumPeer.QuorumServer.toString). Here one
port carries Raft's elections and its replication: quorumPort is the peer port and electionPort is 0,
"none of its own". It cannot repeat the peer port: ZooKeeper's own parser of these lines (QuorumServer,
which zkCli's `config -c` and Curator's EnsembleTracker run) refuses a quorumPort equal to the
electionPort. The role is `participant` for a voter and `observer` for an observer. A learner still catching up
(a server being added) has no line: ZooKeeper shows a joining server only once the reconfig that adds
it commits, which here is its promotion. The `;client` part is left out while a member's ZooKeeper
client address is unknown (ZooKeeper accepts a server line without it). The version is the
configuration's: the index of the log entry that made it (0 for the peer list the cluster started
with), as ZooKeeper's is the zxid of the reconfig; `reconfig -v` takes it back in hex.

The SDK reads the same lines in client.zk.ensemble_config, for another purpose: it follows whatever a
ZooKeeper ensemble writes there (multi-address servers, IPv6, hierarchical weights) and keeps going on
what it can use. This module's parser takes reconfig's server strings from operators, with QuorumServer's
rules (three or four fields, the election port checked) and ZooKeeper's messages for each refusal, and
reads back only the text `render` wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from quorum.facade import ClusterConfiguration

__all__ = [
    "NO_ELECTION_PORT",
    "ConfigTextError",
    "DynamicConfig",
    "ServerSpec",
    "configuration_text",
    "parse_config",
    "parse_members",
    "parse_server",
    "render",
]

NO_ELECTION_PORT = 0  # the election port shown: elections share the peer port (the module's docstring says why)
PARTICIPANT = "participant"
OBSERVER = "observer"
_ROLES = (PARTICIPANT, OBSERVER)
_SERVER_KEY = re.compile(r"server\.(\d+)")
_PORT_MAX = 65535


class ConfigTextError(ValueError):
    """A server string or configuration text that does not parse; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    server_id: int
    host: str
    quorum_port: int
    election_port: int
    role: str  # PARTICIPANT or OBSERVER
    client: str = ""  # host:port of its ZooKeeper client port, "" when unknown

    @property
    def peer_address(self) -> str:
        return f"{self.host}:{self.quorum_port}"

    def line(self) -> str:
        spec = f"server.{self.server_id}={self.host}:{self.quorum_port}:{self.election_port}:{self.role}"
        return f"{spec};{self.client}" if self.client else spec


@dataclass(frozen=True, slots=True)
class DynamicConfig:
    servers: tuple[ServerSpec, ...]  # ordered by id
    version: int

    def by_id(self) -> dict[int, ServerSpec]:
        return {s.server_id: s for s in self.servers}

    def clients(self) -> dict[int, str]:
        return {s.server_id: s.client for s in self.servers if s.client}

    def with_client(self, server_id: int, client: str) -> DynamicConfig:
        """The same configuration with `server_id`'s client address set (unchanged when it is no member)."""
        servers = tuple(replace(s, client=client) if s.server_id == server_id else s for s in self.servers)
        return DynamicConfig(servers, self.version)


def render(config: DynamicConfig) -> str:
    """The text ZooKeeper writes into /zookeeper/config (QuorumMaj.toString): no newline after the version."""
    return "".join(s.line() + "\n" for s in config.servers) + f"version={config.version:x}"


def configuration_text(configuration: ClusterConfiguration, clients: Mapping[int, str]) -> str:
    """/zookeeper/config's text for the quorum's `configuration`, with the client addresses known."""
    servers = []
    roles = [(m, PARTICIPANT) for m in configuration.voters] + [(m, OBSERVER) for m in configuration.observers]
    for member, role in sorted(roles):
        address = configuration.addresses.get(member, "")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            continue  # a member whose address this node never learned: nothing true to show
        servers.append(ServerSpec(member, host, int(port), NO_ELECTION_PORT, role, clients.get(member, "")))
    return render(DynamicConfig(tuple(servers), configuration.version))


def _port(text: str, what: str, lowest: int = 1) -> int:
    if not text.isdigit() or not lowest <= int(text) <= _PORT_MAX:
        raise ConfigTextError(f"{what} {text!r} is not a port number ({lowest}-{_PORT_MAX})")
    return int(text)


def _client_part(text: str, server_host: str) -> str:
    """`[host:]port` (QuorumServer's client spec); a bare port, or a wildcard host, means the server's host."""
    host, _, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = server_host
    return f"{host}:{_port(port, 'client port')}"


def parse_server(key: str, value: str) -> ServerSpec:
    """`server.N` = `host:quorumPort:electionPort[:role][;[clientHost:]clientPort]` (QuorumServer's form)."""
    match = _SERVER_KEY.fullmatch(key.strip())
    if match is None:
        raise ConfigTextError(f"{key!r} is not of the form server.<id>")
    server_id = int(match.group(1))
    server_part, _, client_part = value.strip().partition(";")
    parts = server_part.split(":")
    if len(parts) not in (3, 4):
        raise ConfigTextError(
            f"server.{server_id}={value.strip()}: expected host:quorumPort:electionPort[:role][;[host:]clientPort]"
        )
    host = parts[0].strip()
    if not host:
        raise ConfigTextError(f"server.{server_id}: the host is empty")
    quorum_port = _port(parts[1], f"server.{server_id}: quorum port")
    election_port = _port(parts[2], f"server.{server_id}: election port", lowest=NO_ELECTION_PORT)
    role = parts[3].strip().lower() if len(parts) == 4 else PARTICIPANT
    if role not in _ROLES:
        raise ConfigTextError(f"server.{server_id}: unrecognised peer type {role!r} (participant or observer)")
    client = _client_part(client_part, host) if client_part.strip() else ""
    return ServerSpec(server_id, host, quorum_port, election_port, role, client)


def parse_members(lines: Iterable[str]) -> tuple[tuple[ServerSpec, ...], int | None]:
    """The servers of `key=value` lines and the `version=` line's value (None when absent); blank lines
    and other keys are skipped, as ZooKeeper's dynamic-configuration parser skips them."""
    servers: dict[int, ServerSpec] = {}
    version = None
    for line in lines:
        key, sep, value = line.strip().partition("=")
        if not sep:
            if key:
                raise ConfigTextError(f"{line.strip()!r} is not of the form server.<id>=<spec>")
            continue
        key = key.strip()
        if key == "version":
            try:
                version = int(value.strip(), 16)
            except ValueError:
                raise ConfigTextError(f"version {value.strip()!r} is not a hexadecimal number") from None
        elif key.startswith("server."):
            spec = parse_server(key, value)
            if spec.server_id in servers:
                raise ConfigTextError(f"server.{spec.server_id} is given twice")
            servers[spec.server_id] = spec
    return tuple(sorted(servers.values(), key=lambda s: s.server_id)), version


def parse_config(text: str) -> DynamicConfig:
    """/zookeeper/config's text back into its servers and version."""
    servers, version = parse_members(text.splitlines())
    return DynamicConfig(servers, version or 0)
