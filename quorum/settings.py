"""Settings of one quorum node: a properties file merged with command-line overrides.

The file uses Java `.properties` syntax and ZooKeeper's spelling where one
exists (`myid`, `dataDir`, `server.N=host:port`), so that

    id=1
    dataDir=/var/lib/zkraft/quorum-1
    listen=0.0.0.0:7001
    server.1=10.0.0.1:7001
    server.2=10.0.0.2:7001
    server.3=10.0.0.3:7001

starts a node the way a ZooKeeper operator expects. Every mistake is raised as
one `SettingsError` whose message is a single line naming the offending key.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from quorum.loop_options import LoopOptions
from runtime import properties
from runtime.cpu_placement import PLACEMENTS
from runtime.jaas import JaasError, digest_server_users
from runtime.message_limits import JUTE_MAX_BUFFER_BYTES_DEFAULT
from runtime.tls import TlsConfig, TlsConfigError, from_zookeeper_properties

# The sizes a cluster starts with: a majority of an even size tolerates no more failures than the odd size
# below it. Once running, single-server membership changes (`zkraft quorum add/remove`) pass through any size.
ALLOWED_CLUSTER_SIZES = (1, 3, 5, 7)
# With zookeeper.extendedTypesEnabled a session id carries its server id in the top byte, and 0xFF there marks a
# TTL node's owner (EphemeralType.MAX_EXTENDED_SERVER_ID); zkemu/ephemeral_type.py decodes owners with it.
EXTENDED_SERVER_ID_MAX = 0xFE
PORT_MIN = 1
PORT_MAX = 65535
# ZooKeeper 3.9's four-letter words (command/FourLetterCommands.java) and the ones a node answers
# (zkemu.four_letter_words). gtmk/stmk set ZooKeeper's trace mask and hash prints its digest log:
# zkraft has neither, so they are refused by name rather than answered with made-up figures.
FOUR_LETTER_WORDS = (
    "conf", "cons", "crst", "dirs", "dump", "envi", "isro", "mntr",
    "ruok", "srst", "srvr", "stat", "wchc", "wchp", "wchs",
)  # fmt: skip
FOUR_LETTER_WORDS_NOT_SERVED = ("gtmk", "stmk", "hash")
# ZooKeeper's default whitelist since 3.5.3: only srvr, which zkServer.sh status needs (and which
# ZooKeeper adds to any list given).
FOUR_LETTER_WHITELIST_DEFAULT = frozenset({"srvr"})
CLIENT_PORT_DEFAULT = 2181
CLIENT_PORT_ADDRESS_DEFAULT = "0.0.0.0"
# ZooKeeper's server properties for its secure client port (X509Util, prefix `ssl.`), PEM stores only. The
# Java system property spelling (`zookeeper.ssl.keyStore.location`) is read as the same property.
CLIENT_SSL_PROPERTIES = frozenset(
    {
        "ssl.keyStore.location",
        "ssl.keyStore.type",
        "ssl.trustStore.location",
        "ssl.trustStore.type",
        "ssl.clientAuth",
    }
)
_SYSTEM_PROPERTY_PREFIX = "zookeeper."


class SettingsError(ValueError):
    """A node's configuration is missing, malformed or inconsistent; the message is one line."""


@dataclass(frozen=True, slots=True)
class NodeSettings:
    node_id: int
    data_dir: Path
    listen: str  # host:port this node's gRPC server binds (peers and clients share it)
    peers: dict[int, str]  # every voter, this node included: id -> host:port others dial
    cluster_id: str = "zkraft"
    # host:port of a member of a running cluster this new node joins (quorum.join); its peer list is then
    # only itself, and the cluster tells it the rest.
    join: str = ""
    tick_ms: int = 50
    election_timeout_ticks: int = 12
    heartbeat_interval_ticks: int = 2
    # ZooKeeper's snapCount default: each snapshot writes the whole state, so its cost grows with the state,
    # and at 20,000 a loaded 3-node quorum spent a fifth of its CPU on them (quorum_bench, 256 in flight:
    # 63 against 80 us of node CPU per write).
    snapshot_interval_entries: int = 100000
    # Entries kept behind a snapshot so that a slightly-behind follower catches
    # up by appends instead of a whole snapshot transfer.
    snapshot_trailing_entries: int = 5000
    # The same two in bytes of entry data: the Raft log holds its entries in memory until a snapshot
    # compacts it, so these bound that memory whatever the entries' size (quorum.node._snapshot_due).
    snapshot_interval_bytes: int = 64 << 20
    snapshot_trailing_bytes: int = 16 << 20
    inflight_appends_max: int = 64
    # The Raft protocol's extensions (RaftConfig: durable_notice, lazy_follower_commits,
    # deferred_replication, campaign_on_leader_loss) and the Ready loop's (quorum.loop_options.LoopOptions,
    # the `loop` property); all on by default, the loop correct with any of them off.
    raft_durable_notice: bool = True
    raft_lazy_follower_commits: bool = True
    raft_deferred_replication: bool = True
    raft_campaign_on_leader_loss: bool = True
    loop_inline_persist_entries_max: int = 16
    loop_apply_ahead_during_save: bool = True
    loop_prepare_while_committing: bool = True
    loop_leader_sends_before_apply: bool = True
    loop_ready_in_handler: bool = True
    loop_idle_leader_inline_path: bool = True
    proposal_timeout_ms: int = 10000
    # What the quorum replicates: "zookeeper" (the znode tree and the session
    # service, zkemu) or "register" (a bare key/value map, for testing and
    # benchmarking the consensus layer alone).
    state_machine: str = "zookeeper"
    # ZooKeeper's tickTime and session bounds (defaults 2 x and 20 x tickTime).
    tick_time_ms: int = 2000
    min_session_timeout_ms: int = 0
    max_session_timeout_ms: int = 0
    # ZooKeeper's initLimit: the ticks (of tickTime) a node may take to get its state from a peer at
    # start-up, when its state-machine database was damaged and no snapshot of its own covers its log.
    init_limit_ticks: int = 10
    # Where the event-loop thread runs when the voters share this machine (runtime.cpu_placement): "off"
    # leaves it to the scheduler; "auto" (what `zkraft up` and the benchmarks set) gives the leader's loop
    # one CPU and the followers' the others, when every voter's address is a loopback one.
    cpu_placement: str = "off"
    # ---- what one client may make a node hold (zkemu.admission). ZooKeeper's jute.maxbuffer: the
    # largest session-stream message a node reads; a larger one closes the stream, as ZooKeeper
    # closes the connection of a packet over it (NIOServerCnxn.readLength, "Len error").
    jute_max_buffer_bytes: int = JUTE_MAX_BUFFER_BYTES_DEFAULT
    # ZooKeeper's globalOutstandingLimit: requests the node works on at once, all sessions together;
    # above it, a session with requests of its own in flight stops reading more until the count falls
    # (ZooKeeperServer.shouldThrottle).
    global_outstanding_limit: int = 1000
    # The same bound in request bytes (ZooKeeper has largeRequestMaxBytes, 100 MiB, which closes the
    # connection instead); and both bounds for one session alone. Half the Raft leader's bound on
    # uncommitted data (64 MiB, quorum.raft.config): a follower forwarding all it holds must not have
    # the leader refuse part of it, which fails the session's later writes with ConnectionLoss.
    global_outstanding_bytes_max: int = 32 << 20
    session_outstanding_requests_max: int = 1000
    session_outstanding_bytes_max: int = 8 << 20
    # After a burst, once nothing was in flight for this long, the heap's free pages go back to the kernel.
    memory_release_quiet_ms: int = 1000
    # ---- container and TTL znodes (zkemu.container_manager), ZooKeeper's properties and defaults.
    # TTL creates are refused with UNIMPLEMENTED unless this is on (EphemeralType.extendedEphemeralTypesEnabled).
    extended_types_enabled: bool = False
    # How often the leader looks for containers and TTL nodes to delete, and how many it deletes a minute.
    container_check_interval_ms: int = 60000
    container_max_per_minute: int = 10000
    # A container that never had a child goes after this long unmodified; 0: it stays.
    container_max_never_used_interval_ms: int = 0
    # ZooKeeper's zookeeper.DigestAuthenticationProvider.superDigest, `user:base64(sha1(user:password))`:
    # a session that authenticates with that digest passes every ACL check (zkemu.acl). Empty: none.
    super_digest: str = ""
    # ZooKeeper's SASL login (DIGEST-MD5): the JAAS file whose `Server` section lists the users
    # (`user_<name>="<password>"`), the system property java.security.auth.login.config that ZooKeeper
    # takes from SERVER_JVMFLAGS. Empty: SASL is not served (a SASL packet is answered with a null token).
    jaas_config_file: str = ""
    # ZooKeeper's zookeeper.superUser: a SASL user who passes every ACL check. Empty: none.
    sasl_super_user: str = ""
    # ZooKeeper 3.7's enforce.auth.enabled / enforce.auth.schemes (AuthenticationHelper): every request
    # but auth and SASL is refused with SESSIONCLOSEDREQUIRESASLAUTH, and the connection closed, until the
    # session holds an id of one of the schemes (sasl, digest).
    enforce_auth_enabled: bool = False
    enforce_auth_schemes: str = ""
    # ZooKeeper's reconfigEnabled: whether a client's reconfig (OpCode 16) is served; off, it is answered
    # RECONFIGDISABLED, as ZooKeeper's default. `zkraft up` turns it on (zkCli's reconfig against a local
    # cluster); a super user or one with WRITE on /zookeeper/config may reconfigure (ZooKeeper 3.9).
    reconfig_enabled: bool = False
    # ZooKeeper's 4lw.commands.whitelist: the four-letter words answered on the client port.
    four_letter_whitelist: frozenset[str] = FOUR_LETTER_WHITELIST_DEFAULT
    # ZooKeeper's clientPort and clientPortAddress: where the ZooKeeper wire protocol (jute) is served
    # to ZooKeeper clients (kazoo, zkCli, Curator); defaults as ZooKeeper's sample config. 0: not served.
    client_port: int = CLIENT_PORT_DEFAULT
    client_port_address: str = CLIENT_PORT_ADDRESS_DEFAULT
    # ZooKeeper's zookeeper.nio.sessionlessCnxnTimeout: a client connection that has not sent its
    # ConnectRequest within this long is closed (NIOServerCnxnFactory), so idle sockets cannot pile up.
    sessionless_connection_timeout_ms: int = 10000
    # ZooKeeper's maxClientCnxns: client connections one IP address may hold on this node; 0: no limit.
    max_client_connections: int = 60
    # ZooKeeper's secureClientPort and secureClientPortAddress: the same wire protocol over TLS, beside (or
    # instead of, with clientPort=0) the plaintext port; 0: not served. An unset address binds every interface,
    # as ZooKeeper's does (QuorumPeerConfig), whatever clientPortAddress says.
    secure_client_port: int = 0
    secure_client_port_address: str = CLIENT_PORT_ADDRESS_DEFAULT
    # ZooKeeper's server-side `ssl.*` properties for the secure client port, as given (names in
    # CLIENT_SSL_PROPERTIES; read by runtime.tls.from_zookeeper_properties). `ssl.clientAuth` defaults to
    # ZooKeeper's `need`: a client without a certificate from the trusted CA is refused.
    client_ssl: dict[str, str] = field(default_factory=dict)
    # ---- TLS on the gRPC port (ZooKeeper's sslQuorum and ssl.quorum.*, X509Util with the quorum prefix). The
    # port serves the Raft peers and the gRPC session service together, so with sslQuorum both need a
    # certificate from the trusted CA: gRPC's Python API can only require a client certificate or not ask
    # for one (no "want"), and a peer must never be let in without one (docs/DESIGN.md §9).
    ssl_quorum: bool = False
    ssl_quorum_keystore_location: str = ""
    ssl_quorum_keystore_type: str = "PEM"
    ssl_quorum_truststore_location: str = ""
    ssl_quorum_truststore_type: str = "PEM"
    ssl_quorum_hostname_verification: bool = True
    ssl_quorum_client_auth: str = "need"
    # ZooKeeper's metricsProvider.httpHost / httpPort (PrometheusMetricsProvider): where /metrics, /healthz
    # and /readyz are served (zkemu.metrics). 0: not served (ZooKeeper's default 7000 would collide on one host).
    metrics_port: int = 0
    metrics_host: str = "0.0.0.0"
    # ZooKeeper's AdminServer (admin.enableServer, admin.serverAddress, admin.serverPort): /commands/<name> as
    # JSON. Off unless a port is given (ZooKeeper's default 8080 would collide between nodes on one host).
    admin_enable_server: bool = True
    admin_server_address: str = "0.0.0.0"
    admin_server_port: int = 0

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def session_timeout_bounds_ms(self) -> tuple[int, int]:
        """ZooKeeper's [minSessionTimeout, maxSessionTimeout]: 2 and 20 tickTimes unless set."""
        low = self.min_session_timeout_ms or 2 * self.tick_time_ms
        high = self.max_session_timeout_ms or 20 * self.tick_time_ms
        return low, high

    @property
    def state_fetch_timeout_s(self) -> float:
        """How long a start may wait for a peer's state: initLimit x tickTime, ZooKeeper's limit on a sync."""
        return self.init_limit_ticks * self.tick_time_ms / 1000

    @property
    def peer_tls(self) -> TlsConfig | None:
        """The gRPC port's TLS (server and every channel to a peer), None without sslQuorum."""
        if not self.ssl_quorum:
            return None
        return from_zookeeper_properties(
            {
                "ssl.quorum.keyStore.location": self.ssl_quorum_keystore_location,
                "ssl.quorum.keyStore.type": self.ssl_quorum_keystore_type,
                "ssl.quorum.trustStore.location": self.ssl_quorum_truststore_location,
                "ssl.quorum.trustStore.type": self.ssl_quorum_truststore_type,
                "ssl.quorum.hostnameVerification": str(self.ssl_quorum_hostname_verification).lower(),
                "ssl.quorum.clientAuth": self.ssl_quorum_client_auth,
            },
            prefix="ssl.quorum.",
        )

    @property
    def voters(self) -> tuple[int, ...]:
        return tuple(sorted(self.peers))

    @property
    def advertised_address(self) -> str:
        """The address the other voters dial to reach this node."""
        return self.peers[self.node_id]

    @property
    def peers_string(self) -> str:
        return peers_string(self.peers)

    @property
    def loop(self) -> LoopOptions:
        """The Ready loop's options (quorum.loop_options), from the loop_* fields."""
        return LoopOptions(
            inline_persist_entries_max=self.loop_inline_persist_entries_max,
            apply_ahead_during_save=self.loop_apply_ahead_during_save,
            prepare_while_committing=self.loop_prepare_while_committing,
            leader_sends_before_apply=self.loop_leader_sends_before_apply,
            ready_in_handler=self.loop_ready_in_handler,
            idle_leader_inline_path=self.loop_idle_leader_inline_path,
        )


# ---- host:port and peer lists ----

_HOST_PORT = re.compile(r"^(?:\[(?P<ipv6>[0-9A-Fa-f:.%a-zA-Z]+)\]|(?P<host>[^\s:\[\]]+)):(?P<port>[^:]*)$")


def parse_host_port(text: str, what: str) -> tuple[str, int]:
    """Split `host:port` (or `[v6]:port`); `what` names the setting in the error."""
    match = _HOST_PORT.match(text.strip())
    if match is None:
        raise SettingsError(f"{what}: {text!r} is not host:port")
    host = match.group("ipv6") or match.group("host")
    port_text = match.group("port")
    if not port_text.isdigit():
        raise SettingsError(f"{what}: {text!r} is not host:port (port {port_text!r} is not a number)")
    port = int(port_text)
    if not PORT_MIN <= port <= PORT_MAX:
        raise SettingsError(f"{what}: port {port} in {text!r} is out of range {PORT_MIN}-{PORT_MAX}")
    return host, port


def _canonical_address(text: str, what: str) -> str:
    host, port = parse_host_port(text, what)
    host_text = f"[{host}]" if ":" in host else host
    return f"{host_text}:{port}"


def peers_string(peers: Mapping[int, str]) -> str:
    """The canonical `1=h:p,2=h:p` form (sorted by id) that nodes compare to detect a mismatched peer list."""
    return ",".join(f"{node_id}={peers[node_id]}" for node_id in sorted(peers))


def parse_peers(text: str, what: str = "peers") -> dict[int, str]:
    """Parse `1=h:p,2=h:p`; duplicate ids are an error."""
    peers: dict[int, str] = {}
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise SettingsError(f"{what}: empty peer list (expected 1=host:port,2=host:port,...)")
    for item in items:
        if not item:
            raise SettingsError(f"{what}: empty entry in {text!r} (expected 1=host:port,2=host:port,...)")
        node_text, sep, address = item.partition("=")
        if not sep:
            raise SettingsError(f"{what}: {item!r} is not id=host:port")
        node_id = _parse_node_id(node_text.strip(), f"{what}: id in {item!r}")
        if node_id in peers:
            raise SettingsError(f"{what}: node id {node_id} is listed twice")
        peers[node_id] = _canonical_address(address.strip(), f"{what}: node {node_id}")
    return peers


def _parse_node_id(text: str, what: str) -> int:
    node_id = _parse_int(text, what)
    if node_id < 1:
        raise SettingsError(f"{what}: node ids are integers >= 1, got {node_id}")
    return node_id


def _parse_int(text: str, what: str) -> int:
    """Decimal, or hexadecimal with 0x as Java's Integer.decode reads ZooKeeper's `jute.maxbuffer=0xfffff`."""
    value = text.strip()
    if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+", value):
        return int(value, 16)
    if not re.fullmatch(r"[+-]?\d+", value):
        raise SettingsError(f"{what}: expected an integer, got {text!r}")
    return int(value)


# ---- validation of a complete NodeSettings ----

# The numeric limits and the smallest value each accepts.
_INT_MINIMUMS = {
    "tick_ms": 1,
    "election_timeout_ticks": 2,
    "heartbeat_interval_ticks": 1,
    "snapshot_interval_entries": 1,
    "snapshot_trailing_entries": 0,
    "snapshot_interval_bytes": 1,
    "snapshot_trailing_bytes": 0,
    "inflight_appends_max": 1,
    "loop_inline_persist_entries_max": 0,
    "proposal_timeout_ms": 1,
    "tick_time_ms": 1,
    "min_session_timeout_ms": 0,
    "max_session_timeout_ms": 0,
    "init_limit_ticks": 1,
    # A session stream must carry at least one write of a path and a little data.
    "jute_max_buffer_bytes": 4096,
    "global_outstanding_limit": 1,
    "global_outstanding_bytes_max": 1,
    "session_outstanding_requests_max": 1,
    "session_outstanding_bytes_max": 1,
    "memory_release_quiet_ms": 1,
    "container_check_interval_ms": 1,
    "container_max_per_minute": 1,
    "container_max_never_used_interval_ms": 0,
    "client_port": 0,
    "sessionless_connection_timeout_ms": 1,
    "max_client_connections": 0,
    "secure_client_port": 0,
    "metrics_port": 0,
    "admin_server_port": 0,
}
STATE_MACHINES = ("zookeeper", "register")
JUTE_MAX_BUFFER_BYTES_MAX = 1 << 30


def _validate(settings: NodeSettings) -> None:
    if isinstance(settings.node_id, bool) or not isinstance(settings.node_id, int) or settings.node_id < 1:
        raise SettingsError(f"id: node ids are integers >= 1, got {settings.node_id!r}")
    if not settings.peers:
        raise SettingsError("peers: missing (give server.N=host:port per node, or peers=1=host:port,...)")
    _validate_peers(settings.peers)
    if settings.node_id not in settings.peers:
        raise SettingsError(f"id: node {settings.node_id} is not in the peer list {peers_string(settings.peers)}")
    _, listen_port = parse_host_port(settings.listen, "listen")
    _, advertised_port = parse_host_port(settings.peers[settings.node_id], f"peers: node {settings.node_id}")
    if listen_port != advertised_port:
        raise SettingsError(
            f"listen: port {listen_port} differs from port {advertised_port} that the peer list gives node "
            f"{settings.node_id} ({settings.peers[settings.node_id]})"
        )
    if not settings.cluster_id or not settings.cluster_id.strip():
        raise SettingsError("cluster.id: must not be empty")
    for name, minimum in _INT_MINIMUMS.items():
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{_PROPERTY_OF_FIELD[name]}: expected an integer, got {value!r}")
        if value < minimum:
            raise SettingsError(f"{_PROPERTY_OF_FIELD[name]}: must be >= {minimum}, got {value}")
    if settings.client_port > PORT_MAX:
        raise SettingsError(
            f"clientPort: must be <= {PORT_MAX} (0: no ZooKeeper client port), got {settings.client_port}"
        )
    _validate_client_port_address(settings.client_port_address)
    _validate_secure_client_port(settings)
    for name in ("metrics_port", "admin_server_port"):
        if getattr(settings, name) > PORT_MAX:
            raise SettingsError(f"{_PROPERTY_OF_FIELD[name]}: must be <= {PORT_MAX} (0: not served)")
    if settings.jute_max_buffer_bytes > JUTE_MAX_BUFFER_BYTES_MAX:
        raise SettingsError(
            f"jute.maxbuffer: must be <= {JUTE_MAX_BUFFER_BYTES_MAX} (1 GiB; gRPC messages stay under 2 GiB), "
            f"got {settings.jute_max_buffer_bytes}"
        )
    if settings.state_machine not in STATE_MACHINES:
        raise SettingsError(
            f"quorum.state.machine: must be one of {', '.join(STATE_MACHINES)}, got {settings.state_machine!r}"
        )
    if settings.cpu_placement not in PLACEMENTS:
        raise SettingsError(
            f"quorum.cpu.placement: must be one of {', '.join(PLACEMENTS)}, got {settings.cpu_placement!r}"
        )
    if 0 < settings.max_session_timeout_ms < settings.session_timeout_bounds_ms[0]:
        raise SettingsError(
            f"maxSessionTimeout ({settings.max_session_timeout_ms}) is below minSessionTimeout "
            f"({settings.session_timeout_bounds_ms[0]})"
        )
    if not isinstance(settings.extended_types_enabled, bool):
        raise SettingsError(
            f"zookeeper.extendedTypesEnabled: expected true or false, got {settings.extended_types_enabled!r}"
        )
    if settings.extended_types_enabled and max(settings.peers) > EXTENDED_SERVER_ID_MAX:
        # A session id carries its server id in the top byte; 255 would read as a TTL node's owner.
        raise SettingsError(
            f"zookeeper.extendedTypesEnabled: node ids must be <= {EXTENDED_SERVER_ID_MAX} with extended types "
            f"on, got {max(settings.peers)}"
        )
    _validate_super_digest(settings.super_digest)
    _validate_sasl(settings)
    _validate_ssl_quorum(settings)
    _validate_four_letter_whitelist(settings.four_letter_whitelist)
    if settings.election_timeout_ticks <= settings.heartbeat_interval_ticks:
        raise SettingsError(
            f"raft.election.timeout.ticks ({settings.election_timeout_ticks}) must be greater than "
            f"raft.heartbeat.interval.ticks ({settings.heartbeat_interval_ticks}), or followers campaign "
            "between heartbeats"
        )


_SHA1_BYTES = 20


def _validate_ssl_quorum(settings: NodeSettings) -> None:
    if not settings.ssl_quorum:
        return
    try:
        tls = settings.peer_tls
    except TlsConfigError as exc:
        raise SettingsError(str(exc)) from None
    if tls is None or tls.keystore_file is None:
        raise SettingsError("ssl.quorum.keyStore.location: sslQuorum=true needs this node's key and certificate")
    if not tls.verify_hostname:
        raise SettingsError(
            "ssl.quorum.hostnameVerification: cannot be turned off on gRPC connections; "
            "give certificates that name the addresses peers dial"
        )
    if tls.client_auth != "required":
        raise SettingsError(
            f"ssl.quorum.clientAuth: {settings.ssl_quorum_client_auth!r} is not served; only need: "
            "a peer must present a certificate from the trusted CA"
        )
    for path in (tls.keystore_file, tls.truststore_file):
        if not path.is_file():
            raise SettingsError(f"{path}: no such file (sslQuorum=true)")


ENFORCE_AUTH_SCHEMES = ("sasl", "digest")


def _validate_sasl(settings: NodeSettings) -> None:
    """The JAAS file parses and names users (ServerCnxnFactory.configureSaslLogin fails start-up otherwise);
    enforce.auth.schemes names schemes with a provider (AuthenticationHelper.validateConfiguredProperties)."""
    if settings.jaas_config_file:
        try:
            digest_server_users(Path(settings.jaas_config_file))
        except JaasError as exc:
            raise SettingsError(f"java.security.auth.login.config: {exc}") from None
    schemes = [s.strip() for s in settings.enforce_auth_schemes.split(",") if s.strip()]
    for scheme in schemes:
        if scheme not in ENFORCE_AUTH_SCHEMES:
            raise SettingsError(
                f"enforce.auth.schemes: authentication scheme {scheme!r} is not available "
                f"(one of {', '.join(ENFORCE_AUTH_SCHEMES)})"
            )
    if settings.enforce_auth_enabled and not schemes:
        raise SettingsError("enforce.auth.enabled is true: enforce.auth.schemes must be configured")
    if settings.enforce_auth_enabled and "sasl" in schemes and not settings.jaas_config_file:
        raise SettingsError("enforce.auth.schemes=sasl needs a JAAS file with a Server section (--jaas-config)")


def _validate_super_digest(digest: str) -> None:
    """Empty, or `user:hash` with hash the base64 of a SHA1 digest, as DigestAuthenticationProvider makes it."""
    if not digest:
        return
    user, colon, hash_text = digest.partition(":")
    try:
        hash_bytes = base64.b64decode(hash_text, validate=True) if colon else b""
    except binascii.Error:
        hash_bytes = b""
    if not user or len(hash_bytes) != _SHA1_BYTES:
        raise SettingsError(
            "zookeeper.DigestAuthenticationProvider.superDigest: expected user:base64(sha1(user:password)), "
            f"got {digest!r}"
        )


def parse_four_letter_whitelist(text: str, what: str = "4lw.commands.whitelist") -> frozenset[str]:
    """ZooKeeper's 4lw.commands.whitelist: comma-separated words, `*` for all; srvr is always in.

    ZooKeeper ignores a word it does not know; here it is an error naming the word, so that a typo
    does not silently leave a monitoring check without its answer (FourLetterCommands.isEnabled).
    """
    words = [word.strip() for word in text.split(",") if word.strip()]
    if "*" in words:
        return frozenset(FOUR_LETTER_WORDS)
    for word in words:
        _check_four_letter_word(word, what)
    return frozenset(words) | FOUR_LETTER_WHITELIST_DEFAULT


def _check_four_letter_word(word: object, what: str) -> None:
    if word in FOUR_LETTER_WORDS:
        return
    if word in FOUR_LETTER_WORDS_NOT_SERVED:
        raise SettingsError(
            f"{what}: {word!r} is a ZooKeeper four-letter word zkraft does not serve "
            f"(it serves {', '.join(FOUR_LETTER_WORDS)}, or * for all)"
        )
    raise SettingsError(
        f"{what}: unknown four-letter word {word!r} (known: {', '.join(FOUR_LETTER_WORDS)}, or * for all)"
    )


def _validate_four_letter_whitelist(words: object) -> None:
    if not isinstance(words, frozenset):
        raise SettingsError(f"4lw.commands.whitelist: expected a set of words, got {words!r}")
    for word in sorted(words, key=str):
        _check_four_letter_word(word, "4lw.commands.whitelist")


def _validate_secure_client_port(settings: NodeSettings) -> None:
    """secureClientPort, its address, and the `ssl.*` it needs when it is served."""
    if settings.secure_client_port > PORT_MAX:
        raise SettingsError(
            f"secureClientPort: must be <= {PORT_MAX} (0: no secure client port), got {settings.secure_client_port}"
        )
    _validate_client_port_address(settings.secure_client_port_address, "secureClientPortAddress")
    if settings.client_port and settings.client_port == settings.secure_client_port:
        raise SettingsError(f"secureClientPort: {settings.secure_client_port} is also the clientPort")
    if not settings.secure_client_port:
        return
    try:
        tls = from_zookeeper_properties(settings.client_ssl, "ssl.")
    except TlsConfigError as exc:
        raise SettingsError(f"secureClientPort: {exc}") from None
    if tls.keystore_file is None:
        raise SettingsError("secureClientPort: ssl.keyStore.location is not set (the node's key and certificate)")


def _validate_client_port_address(address: str, what: str = "clientPortAddress") -> None:
    """clientPortAddress: a host name or IP address to bind, without a port (ZooKeeper's spelling)."""
    if not isinstance(address, str) or not address.strip():
        raise SettingsError(f"{what}: must be a host name or IP address, got {address!r}")
    if any(c.isspace() for c in address) or address.startswith("[") or (":" in address and address.count(":") < 2):
        port_name = what.removesuffix("Address")
        raise SettingsError(f"{what}: {address!r} is not a host name or IP address (give the port as {port_name})")


def _validate_peers(peers: Mapping[int, str]) -> None:
    seen: dict[str, int] = {}
    for node_id in sorted(peers):
        if isinstance(node_id, bool) or not isinstance(node_id, int) or node_id < 1:
            raise SettingsError(f"peers: node ids are integers >= 1, got {node_id!r}")
        host, port = parse_host_port(peers[node_id], f"peers: node {node_id}")
        key = f"{host.lower()}:{port}"
        if key in seen:
            raise SettingsError(f"peers: nodes {seen[key]} and {node_id} have the same address {peers[node_id]}")
        seen[key] = node_id
    if len(peers) not in ALLOWED_CLUSTER_SIZES:
        raise SettingsError(
            f"peers: {len(peers)} nodes given, but the quorum uses static membership of 1, 3, 5 or 7 nodes "
            f"(a majority of {len(peers)} is {len(peers) // 2 + 1}, so an even size tolerates no more failures "
            "than the odd size below it)"
        )


# ---- property names ----

# Property name -> NodeSettings field. Aliases map to the same field.
_FIELD_OF_PROPERTY = {
    "id": "node_id",
    "myid": "node_id",
    "dataDir": "data_dir",
    "data.dir": "data_dir",
    "listen": "listen",
    "peers": "peers",
    "cluster.id": "cluster_id",
    "quorum.join": "join",
    "raft.tick.ms": "tick_ms",
    "raft.election.timeout.ticks": "election_timeout_ticks",
    "raft.heartbeat.interval.ticks": "heartbeat_interval_ticks",
    "snapshot.interval.entries": "snapshot_interval_entries",
    "snapshot.trailing.entries": "snapshot_trailing_entries",
    "snapshot.interval.bytes": "snapshot_interval_bytes",
    "snapshot.trailing.bytes": "snapshot_trailing_bytes",
    "raft.inflight.appends.max": "inflight_appends_max",
    "raft.durable.notice": "raft_durable_notice",
    "raft.lazy.follower.commits": "raft_lazy_follower_commits",
    "raft.deferred.replication": "raft_deferred_replication",
    "raft.campaign.on.leader.loss": "raft_campaign_on_leader_loss",
    "quorum.loop.inline.persist.entries.max": "loop_inline_persist_entries_max",
    "quorum.loop.apply.ahead.during.save": "loop_apply_ahead_during_save",
    "quorum.loop.prepare.while.committing": "loop_prepare_while_committing",
    "quorum.loop.leader.sends.before.apply": "loop_leader_sends_before_apply",
    "quorum.loop.ready.in.handler": "loop_ready_in_handler",
    "quorum.loop.idle.leader.inline.path": "loop_idle_leader_inline_path",
    "proposal.timeout.ms": "proposal_timeout_ms",
    "quorum.state.machine": "state_machine",
    "quorum.cpu.placement": "cpu_placement",
    "tickTime": "tick_time_ms",
    "minSessionTimeout": "min_session_timeout_ms",
    "maxSessionTimeout": "max_session_timeout_ms",
    "initLimit": "init_limit_ticks",
    "jute.maxbuffer": "jute_max_buffer_bytes",
    "globalOutstandingLimit": "global_outstanding_limit",
    "global.outstanding.bytes.max": "global_outstanding_bytes_max",
    "session.outstanding.requests.max": "session_outstanding_requests_max",
    "session.outstanding.bytes.max": "session_outstanding_bytes_max",
    "memory.release.quiet.ms": "memory_release_quiet_ms",
    "zookeeper.extendedTypesEnabled": "extended_types_enabled",
    "znode.container.checkIntervalMs": "container_check_interval_ms",
    "znode.container.maxPerMinute": "container_max_per_minute",
    "znode.container.maxNeverUsedIntervalMs": "container_max_never_used_interval_ms",
    "zookeeper.DigestAuthenticationProvider.superDigest": "super_digest",
    "java.security.auth.login.config": "jaas_config_file",
    "zookeeper.superUser": "sasl_super_user",
    "enforce.auth.enabled": "enforce_auth_enabled",
    "zookeeper.enforce.auth.enabled": "enforce_auth_enabled",
    "enforce.auth.schemes": "enforce_auth_schemes",
    "zookeeper.enforce.auth.schemes": "enforce_auth_schemes",
    "reconfigEnabled": "reconfig_enabled",
    "4lw.commands.whitelist": "four_letter_whitelist",
    # The same as a Java system property (-Dzookeeper.4lw.commands.whitelist), ZooKeeper's other spelling.
    "zookeeper.4lw.commands.whitelist": "four_letter_whitelist",
    "clientPort": "client_port",
    "clientPortAddress": "client_port_address",
    "zookeeper.nio.sessionlessCnxnTimeout": "sessionless_connection_timeout_ms",
    "maxClientCnxns": "max_client_connections",
    "secureClientPort": "secure_client_port",
    "secureClientPortAddress": "secure_client_port_address",
    "sslQuorum": "ssl_quorum",
    "ssl.quorum.keyStore.location": "ssl_quorum_keystore_location",
    "ssl.quorum.keyStore.type": "ssl_quorum_keystore_type",
    "ssl.quorum.trustStore.location": "ssl_quorum_truststore_location",
    "ssl.quorum.trustStore.type": "ssl_quorum_truststore_type",
    "ssl.quorum.hostnameVerification": "ssl_quorum_hostname_verification",
    "ssl.quorum.clientAuth": "ssl_quorum_client_auth",
    "metricsProvider.httpPort": "metrics_port",
    "metricsProvider.httpHost": "metrics_host",
    "admin.enableServer": "admin_enable_server",
    "admin.serverAddress": "admin_server_address",
    "admin.serverPort": "admin_server_port",
}
# The name used in error messages for each field (the first property spelling).
_PROPERTY_OF_FIELD: dict[str, str] = {}
for _prop, _field in _FIELD_OF_PROPERTY.items():
    _PROPERTY_OF_FIELD.setdefault(_field, _prop)
_SERVER_KEY = re.compile(r"^server\.(.*)$")
_INT_FIELDS = frozenset({"node_id", *_INT_MINIMUMS})
_BOOL_FIELDS = frozenset(
    {
        "extended_types_enabled",
        "admin_enable_server",
        "raft_durable_notice",
        "raft_lazy_follower_commits",
        "raft_deferred_replication",
        "raft_campaign_on_leader_loss",
        "loop_apply_ahead_during_save",
        "loop_prepare_while_committing",
        "loop_leader_sends_before_apply",
        "loop_ready_in_handler",
        "loop_idle_leader_inline_path",
        "ssl_quorum",
        "ssl_quorum_hostname_verification",
        "enforce_auth_enabled",
        "reconfig_enabled",
    }
)

# Properties a whole-cluster launcher sets per node; `zkraft up` refuses them as overrides.
NODE_IDENTITY_PROPERTIES = frozenset(
    {
        "id", "myid", "dataDir", "data.dir", "listen", "peers", "cluster.id", "clientPort", "clientPortAddress",
        "secureClientPort", "secureClientPortAddress", "metricsProvider.httpPort",
    }
)  # fmt: skip


def client_ssl_property(key: str) -> str | None:
    """The `ssl.*` name of a secure-client-port property (either spelling), or None."""
    name = key.removeprefix(_SYSTEM_PROPERTY_PREFIX)
    return name if name in CLIENT_SSL_PROPERTIES else None


def known_property(key: str) -> bool:
    return (
        key in _FIELD_OF_PROPERTY
        or _SERVER_KEY.match(key) is not None
        or client_ssl_property(key) is not None
        or _AUTH_PROVIDER_KEY.match(key) is not None
    )


# ZooKeeper's authProvider.<n>=<class> (ProviderRegistry): the zoo.cfg of a SASL ensemble names
# SASLAuthenticationProvider so. These providers are always on here, so naming one changes nothing; a class we
# do not serve is refused, rather than silently leaving its scheme out.
_AUTH_PROVIDER_KEY = re.compile(r"^authProvider\.[^.\s]+$")
AUTH_PROVIDER_CLASSES = frozenset(
    f"org.apache.zookeeper.server.auth.{name}"
    for name in ("SASLAuthenticationProvider", "DigestAuthenticationProvider", "IPAuthenticationProvider")
)


def _check_auth_provider(key: str, raw: str, where: str) -> None:
    if str(raw).strip() not in AUTH_PROVIDER_CLASSES:
        names = ", ".join(sorted(c.rsplit(".", 1)[1] for c in AUTH_PROVIDER_CLASSES))
        raise SettingsError(f"{where}{key}: {str(raw).strip()!r} is not served (the providers are {names})")


def check_property_key(key: str, where: str = "") -> None:
    """Raise SettingsError naming `key` if it is not a quorum node property."""
    if known_property(key):
        return
    close = difflib.get_close_matches(key, list(_FIELD_OF_PROPERTY), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise SettingsError(f"{where}unknown property {key!r}{hint}")


# ---- Java .properties syntax (runtime/properties.py) ----


def parse_properties(text: str, source: str = "properties") -> list[tuple[str, str, int]]:
    """runtime.properties.parse_properties, raising SettingsError."""
    try:
        return properties.parse_properties(text, source)
    except properties.PropertiesError as exc:
        raise SettingsError(str(exc)) from None


def read_properties_file(path: Path) -> dict[str, str]:
    """Read a node's properties file; unknown keys and duplicates are refused with SettingsError."""
    try:
        return properties.read_properties_file(path, check_property_key)
    except properties.PropertiesError as exc:
        raise SettingsError(str(exc)) from None


# ---- merging file and command line ----

# Names accepted from an argparse namespace or a kwargs mapping: CLI spellings and field names.
_FIELD_OF_ARGUMENT = {
    "id": "node_id",
    "node_id": "node_id",
    "data_dir": "data_dir",
    "listen": "listen",
    "peers": "peers",
    "cluster_id": "cluster_id",
    "jaas_config": "jaas_config_file",
    **{f.name: f.name for f in fields(NodeSettings) if f.init},
}


def properties_to_values(properties: Mapping[str, str], where: str = "") -> dict[str, Any]:
    """Convert property strings into NodeSettings field values (typed, aliases resolved)."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    server_peers: dict[int, str] = {}
    for key, raw in properties.items():
        check_property_key(key, where)
        server = _SERVER_KEY.match(key)
        if server is not None:
            node_id = _parse_node_id(server.group(1), f"{where}{key}")
            if node_id in server_peers:
                raise SettingsError(f"{where}{key}: node id {node_id} is listed twice")
            server_peers[node_id] = _canonical_address(raw, f"{where}{key}")
            continue
        if _AUTH_PROVIDER_KEY.match(key) is not None:
            _check_auth_provider(key, raw, where)
            continue
        ssl_name = client_ssl_property(key)
        if ssl_name is not None:
            if ssl_name in values.setdefault("client_ssl", {}):
                raise SettingsError(f"{where}{key}: the same setting as {ssl_name} given twice")
            values["client_ssl"][ssl_name] = str(raw).strip()
            continue
        name = _FIELD_OF_PROPERTY[key]
        if name in origin:
            raise SettingsError(f"{where}{key}: conflicts with {origin[name]} (the same setting given twice)")
        origin[name] = key
        values[name] = _convert(name, raw, f"{where}{key}")
    if server_peers:
        if "peers" in values:
            raise SettingsError(f"{where}peers: give either peers=... or server.N=... lines, not both")
        values["peers"] = server_peers
    return values


def _convert(name: str, raw: Any, what: str) -> Any:
    if name in _INT_FIELDS:
        if isinstance(raw, bool):
            raise SettingsError(f"{what}: expected an integer, got {raw!r}")
        if isinstance(raw, int):
            return raw
        return _parse_int(str(raw), what)
    if name in _BOOL_FIELDS:
        return _parse_bool(raw, what)
    if name == "peers":
        if isinstance(raw, Mapping):
            return {
                _convert("node_id", key, f"{what}: id"): _canonical_address(str(value), f"{what}: node {key}")
                for key, value in raw.items()
            }
        return parse_peers(str(raw), what)
    if name == "four_letter_whitelist":
        if isinstance(raw, str):
            return parse_four_letter_whitelist(raw, what)
        return parse_four_letter_whitelist(",".join(str(word) for word in raw), what)
    if name == "data_dir":
        text = str(raw)
        if not text.strip():
            raise SettingsError(f"{what}: must not be empty")
        return Path(text).expanduser()
    if name in ("listen", "join"):
        return _canonical_address(str(raw), what)
    if name == "client_ssl":
        if not isinstance(raw, Mapping) or any(client_ssl_property(str(key)) is None for key in raw):
            raise SettingsError(f"{what}: expected a map of {', '.join(sorted(CLIENT_SSL_PROPERTIES))}")
        return {str(client_ssl_property(str(key))): str(value).strip() for key, value in raw.items()}
    return str(raw).strip()


def _parse_bool(raw: Any, what: str) -> bool:
    """true/false as Java's Boolean.parseBoolean reads a system property, but a typo is an error, not false."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise SettingsError(f"{what}: expected true or false, got {raw!r}")
    return text == "true"


def _argument_values(overrides: argparse.Namespace | Mapping[str, Any] | None) -> dict[str, Any]:
    if overrides is None:
        return {}
    strict = not isinstance(overrides, argparse.Namespace)
    items = overrides.items() if isinstance(overrides, Mapping) else vars(overrides).items()
    values: dict[str, Any] = {}
    for name, raw in items:
        if raw is None:
            continue  # not given on the command line
        field_name = _FIELD_OF_ARGUMENT.get(name)
        if field_name is None:
            if strict:
                raise SettingsError(f"unknown setting {name!r}")
            continue  # argparse's own attributes (command, handler, config, ...)
        flag = "--" + name.replace("_", "-")
        values[field_name] = _convert(field_name, raw, flag)
    return values


def load_node_settings(
    args_namespace_or_kwargs: argparse.Namespace | Mapping[str, Any] | None,
    config_path: Path | None,
) -> NodeSettings:
    """Merge the properties file at `config_path` (if any) with command-line values; the command line wins.

    Raises SettingsError with a one-line message on any missing, malformed or inconsistent setting.
    """
    values: dict[str, Any] = {}
    if config_path is not None:
        path = Path(config_path)
        values.update(properties_to_values(read_properties_file(path), f"{path}: "))
    values.update(_argument_values(args_namespace_or_kwargs))
    if "node_id" not in values:
        raise SettingsError("id: missing (give --id N or id=N in the config file)")
    if "data_dir" not in values:
        raise SettingsError("data dir: missing (give --data-dir DIR or dataDir=DIR in the config file)")
    if "peers" not in values and values.get("join"):
        if "listen" not in values:
            raise SettingsError("listen: missing (--join needs --listen host:port, the address the others dial)")
        values["peers"] = {values["node_id"]: values["listen"]}
    if "peers" not in values:
        raise SettingsError(
            "peers: missing (give --peers 1=host:port,... or server.N=host:port lines in the config file)"
        )
    if "listen" not in values:
        # Default to the address the peer list advertises for this node.
        peers = values["peers"]
        values["listen"] = peers.get(values["node_id"], "")  # "" only when the id is not in peers: reported first
    return NodeSettings(**values)
