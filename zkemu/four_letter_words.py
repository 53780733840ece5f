"""ZooKeeper's four-letter words, answered on the client port as ZooKeeper 3.9 answers them.

A connection whose first 4 bytes, before any ConnectRequest, spell a four-letter word gets a text
answer and is closed (NIOServerCnxn.checkFourLetterWord; docs/research/quorum.md §1.11). The wire front
end calls `reply_to` with those 4 bytes; None means they are not a word (a frame length, then).

Every output keeps ZooKeeper's shape (command/*.java, ServerStats.toString,
ServerCnxn.dumpConnectionInfo, WatchManager, ZooKeeperServer.dumpConf, Environment.list) so that
scripts and tools that parse it (zkServer.sh's `Mode:`, kazoo's `zookeeper.version=`, mntr
scrapers) work unchanged. A figure zkraft does not have is left out, never made up: mntr emits a
subset of 3.9's keys, in 3.9's order.
"""

from __future__ import annotations

import os
import platform
import resource
import socket
import sys
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from quorum.facade import FOUR_LETTER_WORDS, FOUR_LETTER_WORDS_NOT_SERVED, ClusterConfiguration, invariant
from zkemu.config_text import configuration_text
from zkemu.latency_summaries import MNTR_SUMMARY_KEYS
from zkemu.paths import CONFIG_PATH
from zkemu.server_stats import ConnectionStats
from zkemu.watches import Table

if TYPE_CHECKING:
    from zkemu.service import ZooKeeperService

# The ZooKeeper release whose protocol and answers zkraft serves; tools compare version numbers.
ZOOKEEPER_VERSION = "3.9.5"
# ZooKeeper's AbstractFourLetterCommand.ZK_NOT_SERVING: a node without a leader serves no requests.
NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"
# Above this many znodes mntr's zk_approximate_data_size is extrapolated from a scan of this many
# (about 60 ms): a monitoring poll must not stall the node's event loop (ZnodeTree.approximate_data_size).
DATA_SIZE_SCAN_NODES_MAX = 100_000
# The control sequence telnet sends when it closes: ZooKeeper knows it as a "word" (FourLetterCommands).
TELNET_CLOSE = b"\xff\xf4\xff\xfd"
_HEX64 = (1 << 64) - 1


def _zkraft_version() -> str:
    try:
        return metadata.version("zkraft")
    except metadata.PackageNotFoundError:
        return "unknown"


# What `srvr`, `mntr` and `envi` print as the version: ZooKeeper's shape ("3.9.5-<build>, built on
# ..."), the build part naming zkraft so that nobody mistakes it for the real server.
FULL_VERSION = f"{ZOOKEEPER_VERSION}-zkraft-{_zkraft_version()}"


def reply_to(word: bytes, service: ZooKeeperService) -> bytes | None:
    """The answer to a connection's first 4 bytes, or None if they are not a four-letter word."""
    name = _NAMES.get(word)
    if name is None:
        return None
    if name not in service.settings.four_letter_whitelist:
        # ZOOKEEPER-2693: a known word that is not enabled answers this, whatever the word.
        service.log.debug("four_letter_word_refused", word=name)
        return f"{name} is not executed because it is not in the whitelist.\n".encode()
    service.log.debug("four_letter_word", word=name)
    try:
        return _WORDS[name](service).encode("utf-8", errors="replace")
    except Exception as exc:  # loop boundary: a broken figure must not take the connection's server down
        service.log.warning("four_letter_word_failed", word=name, error=repr(exc))
        return NOT_SERVING.encode()


# ---------------------------------------------------------------- the node's state


def _serving(service: ZooKeeperService) -> bool:
    """ZooKeeperServer.isRunning: leading, or following a known leader."""
    return service.quorum is not None and service.quorum.serving


def _configuration(service: ZooKeeperService) -> ClusterConfiguration:
    """The configuration the node uses now (start-up --peers no longer says: members come and go)."""
    assert service.quorum is not None
    return service.quorum.configuration()


def _members(configuration: ClusterConfiguration) -> int:
    """Members that serve clients with the tree: voters and observers (a learner is still catching up)."""
    return len(configuration.voters) + len(configuration.observers)


def _mode(service: ZooKeeperService) -> str:
    """srvr's Mode: standalone for a one-node quorum (zkServer.sh status greps it), observer for an observer."""
    assert service.quorum is not None
    configuration = _configuration(service)
    if _members(configuration) == 1:
        return "standalone"
    if service.quorum.is_leader:
        return "leader"
    return "observer" if service.settings.node_id in configuration.observers else "follower"


def _is_leader(service: ZooKeeperService) -> bool:
    return service.quorum is not None and service.quorum.is_leader and _members(_configuration(service)) > 1


def _zxid(service: ZooKeeperService) -> int:
    """The last applied zxid (ServerStats.getLastProcessedZxid): zkraft's zxid is the log index."""
    return service.tree.applied_index()


def _node_count(service: ZooKeeperService) -> int:
    # ZooKeeper's DataTree holds the root under both "" and "/", so its count is one more than the
    # znodes; users compare this figure with ZooKeeper's.
    return service.tree.node_count() + 1


def _hex(value: int) -> str:
    """Java's Long.toHexString: two's complement for negative values."""
    return format(value & _HEX64, "x")


def _java_double(value: float) -> str:
    """A latency average as ZooKeeper prints it (AvgMinMaxCounter.getAvg: 4 decimals, Double.toString)."""
    return repr(round(value, 4) + 0.0)


def _connections(service: ZooKeeperService) -> list[ConnectionStats]:
    return list(service.server_stats.connections.values())


def _wrap_serving(word: Callable[[ZooKeeperService], str]) -> Callable[[ZooKeeperService], str]:
    """Most words answer ZK_NOT_SERVING while the node has no leader, as ZooKeeper's do."""

    def answer(service: ZooKeeperService) -> str:
        return word(service) if _serving(service) else NOT_SERVING

    return answer


# ---------------------------------------------------------------- ruok, isro, srvr, stat, srst


def _ruok(service: ZooKeeperService) -> str:
    return "imok"


def _isro(service: ZooKeeperService) -> str:
    # zkraft has no read-only mode: a node serves read-write or not at all (IsroCommand).
    return "rw" if _serving(service) else "null"


def _server_stats_lines(service: ZooKeeperService) -> str:
    """ServerStats.toString, then the node count (StatCommand)."""
    stats = service.server_stats
    latency = stats.latency
    return (
        f"Latency min/avg/max: {int(latency.min_ms)}/{_java_double(latency.avg_ms)}/{int(latency.max_ms)}\n"
        f"Received: {stats.packets_received}\n"
        f"Sent: {stats.packets_sent}\n"
        f"Connections: {len(stats.connections)}\n"
        f"Outstanding: {service.admission.requests}\n"
        f"Zxid: 0x{_hex(_zxid(service))}\n"
        f"Mode: {_mode(service)}\n"
        f"Node count: {_node_count(service)}\n"
    )


def _srvr(service: ZooKeeperService) -> str:
    return f"Zookeeper version: {FULL_VERSION}\n" + _server_stats_lines(service)


def _stat(service: ZooKeeperService) -> str:
    clients = "".join(_connection_info(service, c, brief=True) + "\n" for c in _connections(service))
    return f"Zookeeper version: {FULL_VERSION}\nClients:\n{clients}\n" + _server_stats_lines(service)


def _srst(service: ZooKeeperService) -> str:
    service.server_stats.reset()
    return "Server stats reset.\n"


# ---------------------------------------------------------------- cons, crst


def _connection_info(service: ZooKeeperService, c: ConnectionStats, brief: bool) -> str:
    """ServerCnxn.dumpConnectionInfo. [1]: the connection reads (NIO's OP_READ); [0]: not a session yet."""
    queued = service.requests_in_flight(c.session_id) if c.session_id else 0
    text = f" /{c.remote}[{1 if c.session_id else 0}](queued={queued},recved={c.packets_received},sent={c.packets_sent}"
    if not brief and c.session_id:
        latency = c.latency
        text += (
            f",sid=0x{_hex(c.session_id)},lop={c.last_operation},est={c.established_ms},to={c.timeout_ms}"
            f",lzxid=0x{_hex(c.last_zxid)},lresp={c.last_response_ms},llat={int(c.last_latency_ms)}"
            f",minlat={int(latency.min_ms)},avglat={int(latency.avg_ms)},maxlat={int(latency.max_ms)}"
        )
    return text + ")"


def _cons(service: ZooKeeperService) -> str:
    return "".join(_connection_info(service, c, brief=False) + "\n" for c in _connections(service)) + "\n"


def _crst(service: ZooKeeperService) -> str:
    service.server_stats.reset_connections()
    return "Connection stats reset.\n"


# ---------------------------------------------------------------- wchs, wchc, wchp


def _session_of(watcher: object) -> int:
    return int(getattr(watcher, "session_id", 0))


def _by_session(table: Table) -> dict[int, list[str]]:
    """path -> watchers turned into session -> paths (WatchManager.watch2Paths)."""
    paths_of: dict[int, list[str]] = {}
    for path in sorted(table):
        for session_id in sorted({_session_of(w) for w in table[path]}):
            paths_of.setdefault(session_id, []).append(path)
    return paths_of


def _wchs(service: ZooKeeperService) -> str:
    """WatchManager.toString over ZooKeeper's data watches (DataTree.dumpWatchesSummary)."""
    paths_of = _by_session(service.watches.data_watches())
    paths = {path for session_paths in paths_of.values() for path in session_paths}
    total = sum(len(session_paths) for session_paths in paths_of.values())
    return f"{len(paths_of)} connections watching {len(paths)} paths\nTotal watches:{total}\n"


def _wchc(service: ZooKeeperService) -> str:
    lines = []
    for session_id, paths in sorted(_by_session(service.watches.data_watches()).items()):
        lines.append(f"0x{_hex(session_id)}\n")
        lines.extend(f"\t{path}\n" for path in paths)
    return "".join(lines) + "\n"


def _wchp(service: ZooKeeperService) -> str:
    table = service.watches.data_watches()
    lines = []
    for path in sorted(table):
        lines.append(f"{path}\n")
        lines.extend(f"\t0x{_hex(session_id)}\n" for session_id in sorted({_session_of(w) for w in table[path]}))
    return "".join(lines) + "\n"


# ---------------------------------------------------------------- dump, dirs, conf, envi


def _dump(service: ZooKeeperService) -> str:
    """DumpCommand as a learner prints it (its session tracker lists global sessions with timeouts).

    After "Connections dump:" ZooKeeper's NIO factory lists expiry buckets and its Netty factory
    nothing; zkraft has no such buckets, so it prints what Netty does.
    """
    sessions = service.tree.sessions()
    lines = ["SessionTracker dump:\n", f"Global Sessions({len(sessions)}):\n"]
    lines.extend(f"0x{_hex(sid)}\t{timeout_ms}ms\n" for sid, timeout_ms in sorted(sessions.items()))
    owners = {sid: service.tree.ephemerals(sid) for sid in sorted(sessions)}
    owners = {sid: paths for sid, paths in owners.items() if paths}
    lines += ["ephemeral nodes dump:\n", f"Sessions with Ephemerals ({len(owners)}):\n"]
    for sid, paths in owners.items():
        lines.append(f"0x{_hex(sid)}:\n")
        lines.extend(f"\t{path}\n" for path in paths)
    lines.append("Connections dump:\n")
    return "".join(lines)


def _dir_bytes(paths: Iterable[Path]) -> int:
    """Total size of the files under `paths` (ZooKeeper sums its snapshot or its log files)."""
    total = 0
    for top in paths:
        for root, _dirs, files in os.walk(top):
            for name in files:
                try:
                    total += os.stat(os.path.join(root, name)).st_size
                except OSError:
                    continue  # removed while we walked (a snapshot replaced)
    return total


def _data_dirs(service: ZooKeeperService) -> tuple[Path, list[Path], Path]:
    """(dataDir, what ZooKeeper counts as its data: snapshots and the znode tree, dataLogDir: the Raft log)."""
    data_dir = Path(service.settings.data_dir).absolute()
    return data_dir, [data_dir / "snapshots", data_dir / "zk"], data_dir / "raft"


def _dirs(service: ZooKeeperService) -> str:
    _, data_paths, log_dir = _data_dirs(service)
    return f"datadir_size: {_dir_bytes(data_paths)}\nlogdir_size: {_dir_bytes([log_dir])}\n"


def _conf(service: ZooKeeperService) -> str:
    """ZooKeeperServer.dumpConf, then QuorumZooKeeperServer's quorum lines for a quorum of several.

    syncLimit and electionAlg are left out: Raft has neither (its election is not ZooKeeper's FLE).
    """
    settings = service.settings
    data_dir, data_paths, log_dir = _data_dirs(service)
    low_ms, high_ms = settings.session_timeout_bounds_ms
    peer_port = settings.advertised_address.rsplit(":", 1)[1]
    lines = [
        f"clientPort={settings.client_port}",
        f"secureClientPort={settings.secure_client_port or -1}",  # ZooKeeper's -1: none
        f"dataDir={data_dir}",
        f"dataDirSize={_dir_bytes(data_paths)}",
        f"dataLogDir={log_dir}",
        f"dataLogSize={_dir_bytes([log_dir])}",
        f"tickTime={settings.tick_time_ms}",
        f"maxClientCnxns={settings.max_client_connections}",
        f"minSessionTimeout={low_ms}",
        f"maxSessionTimeout={high_ms}",
        "clientPortListenBacklog=-1",
        f"serverId={settings.node_id}",
    ]
    configuration = _configuration(service)
    if _members(configuration) > 1:
        lines += [f"initLimit={settings.init_limit_ticks}", f"electionPort={peer_port}", f"quorumPort={peer_port}"]
        # LearnerType's ordinal: 0 PARTICIPANT, 1 OBSERVER.
        lines += [f"peerType={int(settings.node_id in configuration.observers)}", "membership: "]
        return "\n".join(lines) + "\n" + _membership_text(service, configuration)
    return "\n".join(lines) + "\n"


def _membership_text(service: ZooKeeperService, configuration: ClusterConfiguration) -> str:
    """QuorumVerifier.toString, as conf prints it: /zookeeper/config's text (zkemu.config_text), or, before
    the first one is written, the configuration's own lines without client addresses."""
    data = service.tree.get_data(CONFIG_PATH)[0]
    return data.decode("utf-8", errors="replace") if data else configuration_text(configuration, {})


def _envi(service: ZooKeeperService) -> str:
    """EnvCommand: ZooKeeper's keys where they mean the same here, Python's where ZooKeeper's say Java."""
    entries = [
        ("zookeeper.version", FULL_VERSION),
        ("host.name", socket.gethostname()),
        ("python.version", platform.python_version()),
        ("python.implementation", platform.python_implementation()),
        ("python.executable", sys.executable),
        ("python.path", os.pathsep.join(sys.path)),
        ("os.name", platform.system()),
        ("os.arch", platform.machine()),
        ("os.version", platform.release()),
        ("user.name", _user_name()),
        ("user.home", str(Path.home())),
        ("user.dir", os.getcwd()),
    ]
    return "Environment:\n" + "".join(f"{key}={value}\n" for key, value in entries)


def _user_name() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return "<NA>"


# ---------------------------------------------------------------- mntr


def _file_descriptors() -> tuple[int, int] | None:
    """(open, max) file descriptors of this process; None off Linux (ZooKeeper: "only on Unix")."""
    try:
        open_count = len(os.listdir("/proc/self/fd"))
    except OSError:
        return None
    return open_count, resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _leader_figures(service: ZooKeeperService) -> dict[str, int]:
    """The leader's mntr keys from Raft's progress of each follower (LeaderZooKeeperServer.registerMetrics).

    learners: members this leader replicates to (Raft progress replicate or snapshot); synced:
    those receiving the log as it grows (replicate), voters, learners and observers apart;
    pending_syncs: ReadIndex rounds in flight, which is what a sync waits on here; leader_uptime:
    ms since this node became leader.
    """
    assert service.quorum is not None
    configuration = _configuration(service)
    by_id = service.quorum.follower_states_by_id()
    states = list(by_id.values())
    synced = {member for member, state in by_id.items() if state == "replicate"}
    return {
        "synced_followers": len(synced.intersection(configuration.voters)),
        # A learner catching up is ZooKeeper's non-voting follower (a participant not yet in the voting view).
        "synced_non_voting_followers": len(synced.intersection(configuration.learners)),
        "synced_observers": len(synced.intersection(configuration.observers)),
        "pending_syncs": service.quorum.read_index_rounds_in_flight(),
        "learners": sum(state in ("replicate", "snapshot") for state in states),
        "leader_uptime": int((time.monotonic() - service.quorum.role_since_s) * 1000),
    }


def _mntr_values(service: ZooKeeperService, data_size: bool = True) -> dict[str, object]:
    stats = service.server_stats
    configuration = _configuration(service)
    quorum = _members(configuration) > 1
    values: dict[str, object] = {
        "version": FULL_VERSION,
        "server_state": _mode(service),
        "ephemerals_count": service.tree.ephemerals_count(),
        "num_alive_connections": len(stats.connections),
        # A number, as ZooKeeper's (the AdminServer's JSON has it so); mntr's text prints it as _java_double.
        "avg_latency": round(stats.latency.avg_ms, 4) + 0.0,
        "outstanding_requests": service.admission.requests,
        "znode_count": _node_count(service),
        "global_sessions": len(service.tree.sessions()),
        "packets_sent": stats.packets_sent,
        "packets_received": stats.packets_received,
        "watch_count": service.watches.zookeeper_count(),
        "min_latency": int(stats.latency.min_ms),
        "local_sessions": 0,  # every session is global (replicated through the log)
        "uptime": int((time.monotonic() - stats.started_s) * 1000),
        "max_latency": int(stats.latency.max_ms),
    }
    if data_size:  # a scan of up to DATA_SIZE_SCAN_NODES_MAX znodes
        values["approximate_data_size"] = service.tree.approximate_data_size(DATA_SIZE_SCAN_NODES_MAX)
    if quorum:
        role = "leading" if _is_leader(service) else "following"
        if service.settings.node_id in configuration.observers:
            role = "observing"
        values["peer_state"] = f"{role} - broadcast"
        values["quorum_size"] = len(configuration.voters)  # QuorumPeer.getQuorumSize: the voting view
    descriptors = _file_descriptors()
    if descriptors is not None:
        values["open_file_descriptor_count"], values["max_file_descriptor_count"] = descriptors
    if _is_leader(service):
        values |= _leader_figures(service)
    for summary in stats.latency_summaries:  # ServerMetrics' summaries (zkemu.latency_summaries)
        values |= summary.values()
    return values


# The order ZooKeeper 3.9.5 prints these keys in (its metrics dump is a hash map's order, stable for
# a given release), so that a diff against a real server's mntr lines up.
MNTR_KEY_ORDER = (
    "version",
    "server_state",
    "peer_state",
    "ephemerals_count",
    "num_alive_connections",
    "avg_latency",
    "outstanding_requests",
    "znode_count",
    "global_sessions",
    "packets_sent",
    "packets_received",
    "synced_followers",
    "watch_count",
    "synced_non_voting_followers",
    "synced_observers",
    "min_latency",
    "max_file_descriptor_count",
    "approximate_data_size",
    "open_file_descriptor_count",
    "pending_syncs",
    "leader_uptime",
    "local_sessions",
    "uptime",
    "max_latency",
    "learners",
    "quorum_size",
    *MNTR_SUMMARY_KEYS,
)


def _mntr(service: ZooKeeperService) -> str:
    """MonitorCommand: `zk_<key>\\t<value>` lines."""
    values = _mntr_values(service)
    return "".join(f"zk_{key}\t{values[key]}\n" for key in MNTR_KEY_ORDER if key in values)


# ---------------------------------------------------------------- the table

_WORDS: dict[str, Callable[[ZooKeeperService], str]] = {
    "conf": _wrap_serving(_conf),
    "cons": _wrap_serving(_cons),
    "crst": _wrap_serving(_crst),
    "dirs": _wrap_serving(_dirs),
    "dump": _wrap_serving(_dump),
    "envi": _envi,
    "isro": _isro,
    "mntr": _wrap_serving(_mntr),
    "ruok": _ruok,
    "srst": _wrap_serving(_srst),
    "srvr": _wrap_serving(_srvr),
    "stat": _wrap_serving(_stat),
    "wchc": _wrap_serving(_wchc),
    "wchp": _wrap_serving(_wchp),
    "wchs": _wrap_serving(_wchs),
}
invariant(set(_WORDS) == set(FOUR_LETTER_WORDS), "a four-letter word without its function")
# Every word ZooKeeper knows, by its 4 bytes: the ones not served still get the whitelist answer.
_NAMES: dict[bytes, str] = {
    **{word.encode(): word for word in (*FOUR_LETTER_WORDS, *FOUR_LETTER_WORDS_NOT_SERVED)},
    TELNET_CLOSE: "telnet close",
}


# ---------------------------------------------------------------- for the AdminServer and /metrics (zkemu.metrics)


def mntr_values(service: ZooKeeperService, data_size: bool = True) -> dict[str, object]:
    """mntr's figures by key (without `zk_`), for the AdminServer's JSON and the Prometheus gauges; a scrape
    every few seconds leaves out approximate_data_size, whose scan would stall the event loop each time."""
    return _mntr_values(service, data_size)


def conf_values(service: ZooKeeperService) -> dict[str, str]:
    """conf's `key=value` lines as a mapping (the AdminServer's `configuration` command)."""
    pairs = (line.split("=", 1) for line in _conf(service).splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def is_serving(service: ZooKeeperService) -> bool:
    return _serving(service)
