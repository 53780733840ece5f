"""The four-letter words (zkemu.four_letter_words) against a real znode tree and watch manager, the
`4lw.commands.whitelist` setting, and the shape of every answer beside a real ZooKeeper 3.9's.

The node under the words is a stand-in for QuorumNode's role, leader and Raft progress (the figures
the words read from it); everything else is the real thing: ZnodeTree in LMDB, WatchManager,
ServerStats, Admission, the settings parser.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from quorum.facade import ClusterConfiguration
from quorum.raft import Role
from quorum.raft.types import Entry, EntryKind
from quorum.settings import (
    FOUR_LETTER_WORDS,
    NodeSettings,
    SettingsError,
    load_node_settings,
    parse_four_letter_whitelist,
)
from tests import real_zookeeper
from zkemu import four_letter_words as flw
from zkemu.service import ZooKeeperService
from zkemu.tree import ZnodeTree
from zkraft import up as up_module
from zkraft_proto import zk_pb2 as pb

SESSION_A = 0x100009F01C30000
SESSION_B = 0x100009F01C30001
T0_MS = 1_700_000_000_000
REAL_ANSWER_TIMEOUT_S = 15.0
PEERS_3 = {1: "127.0.0.1:7001", 2: "127.0.0.1:7002", 3: "127.0.0.1:7003"}


# ---------------------------------------------------------------- a service over a real tree


@dataclass
class FakeQuorum:
    """The quorum facade's figures the words read: the node's role, leader and followers' progress."""

    role: Role = Role.FOLLOWER
    leader_id: int = 2
    followers: dict[int, tuple[int, int, str]] = field(default_factory=dict)
    read_rounds: int = 0
    role_since_s: float = field(default_factory=time.monotonic)
    # The configuration in use (QuorumFacade.configuration): voters are the members not observers.
    addresses: dict[int, str] = field(default_factory=lambda: dict(PEERS_3))
    observers: tuple[int, ...] = ()
    version: int = 0

    def configuration(self) -> ClusterConfiguration:
        voters = tuple(m for m in sorted(self.addresses) if m not in self.observers)
        return ClusterConfiguration(self.version, voters, (), self.observers, dict(self.addresses))

    def follower_states_by_id(self) -> dict[int, str]:
        return {m: state for m, (_match, _next, state) in self.followers.items()} if self.role is Role.LEADER else {}

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def serving(self) -> bool:
        return self.role in (Role.LEADER, Role.FOLLOWER) and self.leader_id != 0

    def follower_states(self) -> list[str]:
        return [state for _match, _next, state in self.followers.values()] if self.role is Role.LEADER else []

    def read_index_rounds_in_flight(self) -> int:
        return self.read_rounds


class Watcher:
    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.events: list[tuple[int, str, int]] = []

    def send_event(self, event_type: int, path: str, zxid: int) -> None:
        self.events.append((event_type, path, zxid))


class Log:
    """Applies Txns to the tree as committed entries (zxid = index), as tests/test_zk_tree.py does."""

    def __init__(self, tree: ZnodeTree) -> None:
        self.tree = tree
        self.index = 0

    def txn(self, session: int = 0, **body: Any) -> None:
        self.index += 1
        t = pb.Txn(time_ms=T0_MS + self.index, session_id=session, **body)
        self.tree.apply([Entry(self.index, 1, t.SerializeToString(), EntryKind.NORMAL)])

    def create(self, path: str, data: bytes = b"", mode: int = 0, session: int = 0) -> None:
        self.txn(session, create=pb.CreateOp(path=path, data=data, mode=mode))


def make_service(tmp_path: Path, peers: dict[int, str], node_id: int = 1, **settings: Any) -> ZooKeeperService:
    node_settings = NodeSettings(
        node_id=node_id,
        data_dir=tmp_path / "node",
        listen=peers[node_id],
        peers=peers,
        tick_time_ms=200,
        four_letter_whitelist=frozenset(FOUR_LETTER_WORDS),
        **settings,
    )
    tree = ZnodeTree(tmp_path / "node" / "zk")
    service = ZooKeeperService(node_settings, tree)
    service.quorum = FakeQuorum(addresses=dict(peers))  # type: ignore[assignment]
    return service


def populate(service: ZooKeeperService) -> tuple[Watcher, Watcher]:
    """The scenario the real-ZooKeeper comparison runs too: /a, /a/b, an ephemeral /e, two sessions
    with watches (session A: data and child watch on /a, exists on /nope; session B: data on /a)."""
    log = Log(service.tree)
    for sid in (SESSION_A, SESSION_B):
        log.txn(sid, create_session=pb.CreateSessionTxn(session_id=sid, timeout_ms=4000))
    log.create("/a", b"x")
    log.create("/a/b", b"yy")
    log.create("/e", mode=1, session=SESSION_A)
    a, b = Watcher(SESSION_A), Watcher(SESSION_B)
    service.watches.add_data_watch(a, "/a")
    service.watches.add_child_watch(a, "/a")
    service.watches.add_data_watch(a, "/nope")
    service.watches.add_data_watch(b, "/a")
    stats = service.server_stats
    for sid, remote in ((SESSION_A, "127.0.0.1:58526"), (SESSION_B, "127.0.0.1:46514")):
        conn = stats.connection_opened(remote)
        conn.session_id, conn.timeout_ms = sid, 4000
        conn.received(2)
        conn.answered("GETD", 5, 3.0)
        conn.answered("EXIS", 5, 7.0)
        conn.sent(2)
    stats.connection_opened("127.0.0.1:46538")  # the connection asking (no session)
    return a, b


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[ZooKeeperService]:
    service = make_service(tmp_path, PEERS_3)
    populate(service)
    yield service
    service.tree.close()


def ask(service: ZooKeeperService, word: str | bytes) -> str:
    answer = flw.reply_to(word.encode() if isinstance(word, str) else word, service)
    assert answer is not None, f"{word!r} is not a four-letter word"
    return answer.decode()


# ---------------------------------------------------------------- each word


def test_ruok_isro_and_bytes_that_are_not_a_word(follower: ZooKeeperService) -> None:
    assert ask(follower, "ruok") == "imok"
    assert ask(follower, "isro") == "rw"
    # A ConnectRequest's length prefix is not a word: the front end reads a frame.
    assert flw.reply_to(b"\x00\x00\x00\x2c", follower) is None
    assert flw.reply_to(b"RUOK", follower) is None


def test_srvr_reports_version_latency_packets_zxid_mode_and_node_count(follower: ZooKeeperService) -> None:
    lines = ask(follower, "srvr").splitlines()
    assert lines == [
        f"Zookeeper version: {flw.FULL_VERSION}",
        "Latency min/avg/max: 3/5.0/7",
        "Received: 4",
        "Sent: 4",
        "Connections: 3",
        "Outstanding: 0",
        "Zxid: 0x5",
        "Mode: follower",
        "Node count: 8",  # 7 znodes, counted as ZooKeeper counts them (its root is stored twice)
    ]
    assert flw.FULL_VERSION.startswith(f"{flw.ZOOKEEPER_VERSION}-zkraft-")


def test_mode_is_leader_on_the_leader_and_standalone_for_one_node(tmp_path: Path, follower: ZooKeeperService) -> None:
    follower.quorum.role = Role.LEADER  # type: ignore[union-attr]
    assert "Mode: leader" in ask(follower, "srvr")
    single = make_service(tmp_path / "one", {1: "127.0.0.1:7001"})
    single.quorum.role, single.quorum.leader_id = Role.LEADER, 1  # type: ignore[union-attr]
    try:
        assert "Mode: standalone" in ask(single, "srvr")
        assert "zk_peer_state" not in ask(single, "mntr")
    finally:
        single.tree.close()


def test_without_a_leader_the_words_say_not_serving_and_ruok_still_answers(follower: ZooKeeperService) -> None:
    follower.quorum.role, follower.quorum.leader_id = Role.CANDIDATE, 0  # type: ignore[union-attr]
    for word in ("srvr", "stat", "mntr", "conf", "cons", "wchs", "dump", "dirs"):
        assert ask(follower, word) == flw.NOT_SERVING, word
    assert ask(follower, "ruok") == "imok"
    assert ask(follower, "isro") == "null"


def test_stat_lists_each_client_briefly_then_the_server_figures(follower: ZooKeeperService) -> None:
    text = ask(follower, "stat")
    head, clients_and_rest = text.split("Clients:\n", 1)
    assert head == f"Zookeeper version: {flw.FULL_VERSION}\n"
    clients, rest = clients_and_rest.split("\n\n", 1)
    assert clients.splitlines() == [
        " /127.0.0.1:58526[1](queued=0,recved=2,sent=2)",
        " /127.0.0.1:46514[1](queued=0,recved=2,sent=2)",
        " /127.0.0.1:46538[0](queued=0,recved=0,sent=0)",
    ]
    assert rest.startswith("Latency min/avg/max: ")


CONS_LINE = re.compile(
    r" /127\.0\.0\.1:\d+\[1\]\(queued=0,recved=2,sent=2,sid=0x[0-9a-f]+,lop=EXIS,est=\d+,to=4000,"
    r"lzxid=0x5,lresp=\d+,llat=7,minlat=3,avglat=5,maxlat=7\)"
)


def test_cons_details_each_session_and_crst_resets_them(follower: ZooKeeperService) -> None:
    lines = ask(follower, "cons").split("\n")
    assert lines[-2:] == ["", ""]  # each connection's line, then an empty one, as ConsCommand
    assert CONS_LINE.fullmatch(lines[0]) and "sid=0x100009f01c30000" in lines[0]
    assert CONS_LINE.fullmatch(lines[1]) and "sid=0x100009f01c30001" in lines[1]
    assert lines[2] == " /127.0.0.1:46538[0](queued=0,recved=0,sent=0)"
    assert ask(follower, "crst") == "Connection stats reset.\n"
    assert ",recved=0,sent=0,sid=0x100009f01c30000,lop=NA," in ask(follower, "cons")
    assert "Received: 4" in ask(follower, "srvr")  # crst leaves the server's figures alone


def test_srst_resets_the_server_figures(follower: ZooKeeperService) -> None:
    assert ask(follower, "srst") == "Server stats reset.\n"
    text = ask(follower, "srvr")
    assert "Latency min/avg/max: 0/0.0/0\nReceived: 0\nSent: 0\n" in text


def test_mntr_reports_read_and_update_latency_until_srst(follower: ZooKeeperService) -> None:
    """ServerMetrics' readlatency and updatelatency as the default provider prints them (avg_, min_, max_,
    cnt_, sum_, p50_ ... p999_), and fsynctime's five; srst starts them over, /metrics' histograms not."""
    connection = next(iter(follower.server_stats.connections.values()))
    connection.answered("CREA", 9, 12.5)
    values = mntr_values(ask(follower, "mntr"))
    # populate's replies: two getData (3 ms) and two exists (7 ms), all reads.
    read = {key: values[f"zk_{key}_readlatency"] for key in ("avg", "min", "max", "cnt", "sum", "p50", "p999")}
    assert read == {"avg": "5.0", "min": "3", "max": "7", "cnt": "4", "sum": "20", "p50": "3", "p999": "7"}
    update = {key: values[f"zk_{key}_updatelatency"] for key in ("avg", "min", "max", "cnt", "sum", "p99")}
    assert update == {"avg": "12.5", "min": "12", "max": "12", "cnt": "1", "sum": "12", "p99": "12"}
    assert {"zk_avg_fsynctime", "zk_cnt_fsynctime", "zk_sum_fsynctime"} <= set(values)
    ask(follower, "srst")
    values = mntr_values(ask(follower, "mntr"))
    reset = {key: values[f"zk_{key}_readlatency"] for key in ("cnt", "avg", "max")}
    assert reset == {"cnt": "0", "avg": "0.0", "max": "0"}
    assert values["zk_cnt_updatelatency"] == "0"
    assert sum(follower.server_stats.read_latency.counts) == 4  # what /metrics publishes never goes back


def test_wchs_wchc_wchp_cover_zookeepers_data_watches(follower: ZooKeeperService) -> None:
    # ZooKeeper's wch* commands dump its data-watch table only (exists watches included, child
    # watches not): the same 3 watches as the real server's answer in the comparison test.
    assert ask(follower, "wchs") == "2 connections watching 2 paths\nTotal watches:3\n"
    assert ask(follower, "wchc") == "0x100009f01c30000\n\t/a\n\t/nope\n0x100009f01c30001\n\t/a\n\n"
    assert ask(follower, "wchp") == "/a\n\t0x100009f01c30000\n\t0x100009f01c30001\n/nope\n\t0x100009f01c30000\n\n"
    values = mntr_values(ask(follower, "mntr"))
    assert values["zk_watch_count"] == "4"  # data 3 + child 1 (DataTree.getWatchCount)


def test_persistent_watches_count_as_zookeeper_counts_them(follower: ZooKeeperService) -> None:
    from zkemu.watches import AddWatchMode

    watcher = Watcher(0x42)
    follower.watches.add_persistent(watcher, "/p", AddWatchMode.PERSISTENT)
    follower.watches.add_persistent(watcher, "/r", AddWatchMode.PERSISTENT_RECURSIVE)
    assert ask(follower, "wchs") == "3 connections watching 4 paths\nTotal watches:5\n"
    # A persistent watch sits in both of ZooKeeper's tables, a recursive one in the data table only.
    assert mntr_values(ask(follower, "mntr"))["zk_watch_count"] == "7"


def mntr_values(text: str) -> dict[str, str]:
    assert text.endswith("\n")
    pairs = [line.split("\t") for line in text.splitlines()]
    assert all(len(pair) == 2 for pair in pairs), text
    return dict(pairs)


def test_mntr_on_a_follower(follower: ZooKeeperService) -> None:
    values = mntr_values(ask(follower, "mntr"))
    assert values["zk_version"] == flw.FULL_VERSION
    assert values["zk_server_state"] == "follower"
    assert values["zk_peer_state"] == "following - broadcast"
    assert (values["zk_znode_count"], values["zk_ephemerals_count"], values["zk_global_sessions"]) == ("8", "1", "2")
    assert (values["zk_packets_received"], values["zk_packets_sent"], values["zk_num_alive_connections"]) == (
        "4",
        "4",
        "3",
    )
    assert (values["zk_min_latency"], values["zk_avg_latency"], values["zk_max_latency"]) == ("3", "5.0", "7")
    assert values["zk_outstanding_requests"] == "0"
    assert values["zk_quorum_size"] == "3"
    # Paths and data of /, /zookeeper, /zookeeper/quota, /zookeeper/config, /a (1 byte), /a/b (2), /e:
    # what a real standalone ZooKeeper reports for the same tree.
    assert values["zk_approximate_data_size"] == "55"
    assert int(values["zk_open_file_descriptor_count"]) > 0
    assert int(values["zk_max_file_descriptor_count"]) >= int(values["zk_open_file_descriptor_count"])
    assert "zk_learners" not in values and "zk_synced_followers" not in values


def test_mntr_on_the_leader_adds_its_followers(follower: ZooKeeperService) -> None:
    core = follower.quorum  # type: ignore[union-attr]
    core.role, core.leader_id = Role.LEADER, 1
    core.followers = {2: (5, 6, "replicate"), 3: (0, 1, "probe")}
    values = mntr_values(ask(follower, "mntr"))
    assert values["zk_server_state"] == "leader"
    assert values["zk_peer_state"] == "leading - broadcast"
    assert (values["zk_learners"], values["zk_synced_followers"], values["zk_pending_syncs"]) == ("1", "1", "0")
    assert int(values["zk_leader_uptime"]) >= 0
    core.followers[3] = (5, 6, "replicate")
    assert mntr_values(ask(follower, "mntr"))["zk_synced_followers"] == "2"


def test_approximate_data_size_is_extrapolated_past_its_scan_bound(tmp_path: Path) -> None:
    tree = ZnodeTree(tmp_path / "zk")
    try:
        log = Log(tree)
        for i in range(20):
            log.create(f"/n{i:02d}", b"0123456789")
        exact = tree.approximate_data_size(scan_nodes_max=1000)
        assert exact == 1 + 10 + 16 + 17 + 20 * (4 + 10)
        estimate = tree.approximate_data_size(scan_nodes_max=12)
        assert abs(estimate - exact) < exact // 4
    finally:
        tree.close()


def test_dump_lists_sessions_and_their_ephemerals(follower: ZooKeeperService) -> None:
    assert ask(follower, "dump") == (
        "SessionTracker dump:\n"
        "Global Sessions(2):\n"
        "0x100009f01c30000\t4000ms\n"
        "0x100009f01c30001\t4000ms\n"
        "ephemeral nodes dump:\n"
        "Sessions with Ephemerals (1):\n"
        "0x100009f01c30000:\n"
        "\t/e\n"
        "Connections dump:\n"
    )


def test_conf_of_a_quorum_node(follower: ZooKeeperService) -> None:
    text = ask(follower, "conf")
    keys = [line.split("=", 1)[0] for line in text.splitlines()]
    assert keys[:12] == [
        "clientPort",
        "secureClientPort",
        "dataDir",
        "dataDirSize",
        "dataLogDir",
        "dataLogSize",
        "tickTime",
        "maxClientCnxns",
        "minSessionTimeout",
        "maxSessionTimeout",
        "clientPortListenBacklog",
        "serverId",
    ]
    assert "tickTime=200\n" in text and "minSessionTimeout=400\n" in text and "maxSessionTimeout=4000\n" in text
    assert "serverId=1\n" in text and "clientPort=2181\n" in text and "maxClientCnxns=60\n" in text
    assert text.endswith(
        "membership: \n"
        "server.1=127.0.0.1:7001:0:participant\n"
        "server.2=127.0.0.1:7002:0:participant\n"
        "server.3=127.0.0.1:7003:0:participant\n"
        "version=0"
    )


def test_dirs_sums_the_data_and_the_log(follower: ZooKeeperService) -> None:
    raft = Path(follower.settings.data_dir) / "raft"
    raft.mkdir()
    (raft / "data.mdb").write_bytes(b"x" * 1000)
    datadir, logdir = ask(follower, "dirs").splitlines()
    assert int(datadir.removeprefix("datadir_size: ")) > 0  # the tree's LMDB files
    assert logdir == "logdir_size: 1000"


def test_envi_gives_kazoo_the_version_it_parses(follower: ZooKeeperService) -> None:
    from kazoo.client import ENVI_VERSION, ENVI_VERSION_KEY

    lines = ask(follower, "envi").splitlines()
    assert lines[0] == "Environment:"
    parsed = dict(line.split("=", 1) for line in lines[1:])
    version = ENVI_VERSION.match(parsed[ENVI_VERSION_KEY])
    assert version is not None and version.group(1) == flw.ZOOKEEPER_VERSION
    assert {"host.name", "os.name", "os.arch", "os.version", "user.name", "user.home", "user.dir"} <= set(parsed)


def test_a_word_whose_figures_fail_answers_not_serving_instead_of_raising(tmp_path: Path) -> None:
    service = make_service(tmp_path, PEERS_3)
    service.tree.close()  # every read of the tree now fails
    assert ask(service, "mntr") == flw.NOT_SERVING
    assert ask(service, "ruok") == "imok"


# ---------------------------------------------------------------- the whitelist


def test_a_word_not_whitelisted_gets_zookeepers_refusal(tmp_path: Path) -> None:
    settings = NodeSettings(node_id=1, data_dir=tmp_path / "n", listen=PEERS_3[1], peers=PEERS_3)
    service = ZooKeeperService(settings, ZnodeTree(tmp_path / "n" / "zk"))
    service.quorum = FakeQuorum()  # type: ignore[assignment]
    try:
        assert service.settings.four_letter_whitelist == frozenset({"srvr"})  # ZooKeeper's default
        assert ask(service, "ruok") == "ruok is not executed because it is not in the whitelist.\n"
        assert ask(service, "mntr") == "mntr is not executed because it is not in the whitelist.\n"
        # Words ZooKeeper knows and zkraft does not serve are refused the same way.
        assert ask(service, "gtmk") == "gtmk is not executed because it is not in the whitelist.\n"
        assert ask(service, "hash") == "hash is not executed because it is not in the whitelist.\n"
        assert ask(service, b"\xff\xf4\xff\xfd") == "telnet close is not executed because it is not in the whitelist.\n"
        assert ask(service, "srvr").startswith("Zookeeper version: ")
    finally:
        service.tree.close()


def test_whitelist_setting_parses_as_zookeepers() -> None:
    assert parse_four_letter_whitelist("*") == frozenset(FOUR_LETTER_WORDS)
    assert parse_four_letter_whitelist(" ruok , stat,,") == frozenset({"ruok", "stat", "srvr"})
    assert parse_four_letter_whitelist("") == frozenset({"srvr"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ruok,rouk", "4lw.commands.whitelist: unknown four-letter word 'rouk' (known: conf, cons,"),
        ("hash", "4lw.commands.whitelist: 'hash' is a ZooKeeper four-letter word zkraft does not serve"),
    ],
)
def test_whitelist_setting_refuses_a_word_it_does_not_know(tmp_path: Path, value: str, message: str) -> None:
    config = tmp_path / "node.properties"
    config.write_text(f"id=1\ndataDir={tmp_path}\nserver.1=127.0.0.1:7001\n4lw.commands.whitelist={value}\n")
    with pytest.raises(SettingsError) as caught:
        load_node_settings(None, config)
    assert str(caught.value).startswith(f"{config}: {message}")
    assert "\n" not in str(caught.value)


def test_whitelist_from_a_properties_file(tmp_path: Path) -> None:
    config = tmp_path / "node.properties"
    config.write_text(f"id=1\ndataDir={tmp_path}\nserver.1=127.0.0.1:7001\n4lw.commands.whitelist=mntr, ruok\n")
    settings = load_node_settings(None, config)
    assert settings.four_letter_whitelist == frozenset({"mntr", "ruok", "srvr"})


def test_zkraft_up_enables_the_monitoring_words(tmp_path: Path) -> None:
    [spec, *_] = up_module.plan_quorum(tmp_path, None, 17001)
    up_module.write_node_config(spec, {"raft.tick.ms": "20"})
    text = spec.config_path.read_text(encoding="utf-8")
    [line] = [line for line in text.splitlines() if line.startswith("4lw.commands.whitelist=")]
    words = parse_four_letter_whitelist(line.split("=", 1)[1])
    assert {"srvr", "ruok", "mntr", "stat", "conf", "isro", "envi"} <= words
    # --override 4lw.commands.whitelist=... wins.
    up_module.write_node_config(spec, {"4lw.commands.whitelist": "*"})
    assert "4lw.commands.whitelist=*\n" in spec.config_path.read_text(encoding="utf-8")


# ---------------------------------------------------------------- beside a real ZooKeeper 3.9


def _keys(text: str, separator: str) -> list[str]:
    return [line.split(separator, 1)[0] for line in text.splitlines() if separator in line]


def _blocks(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """wchc/wchp answers as sorted (head line, sorted tab-indented lines) with session ids masked."""
    blocks: list[tuple[str, list[str]]] = []
    for line in re.sub("0x[0-9a-f]+", "0xS", text).splitlines():
        if line.startswith("\t"):
            blocks[-1][1].append(line)
        elif line:
            blocks.append((line, []))
    return sorted((head, tuple(sorted(lines))) for head, lines in blocks)


def _is_subsequence(ours: list[str], theirs: list[str]) -> bool:
    remaining = iter(theirs)
    return all(key in remaining for key in ours)


def _real_answer(ensemble: real_zookeeper.RealZooKeeper, node_id: int, word: str) -> str:
    # A loaded machine can keep a JVM from answering within the harness's default second.
    answer = real_zookeeper.four_letter_word(ensemble.addresses[node_id], word, timeout_s=REAL_ANSWER_TIMEOUT_S)
    assert answer is not None, f"real ZooKeeper {node_id} did not answer {word}\n{ensemble.log_tail(node_id)}"
    return answer


@pytest.fixture(scope="module")
def real_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Each word's answer from a real 3-node ZooKeeper (by the server's mode), the same scenario as
    `populate` set up through kazoo on a follower."""
    reason = real_zookeeper.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    from kazoo.client import KazooClient

    answers: dict[str, dict[str, str]] = {}
    with real_zookeeper.RealZooKeeper(tmp_path_factory.mktemp("real-zk"), n=3) as ensemble:
        ensemble.start_all()
        modes = ensemble.wait_serving(timeout_s=60)
        leader = next(node_id for node_id, mode in modes.items() if mode == "leader")
        follower = next(node_id for node_id, mode in modes.items() if mode == "follower")
        clients = [KazooClient(ensemble.addresses[follower], timeout=10) for _ in range(2)]
        try:
            for client in clients:
                client.start(timeout=30)
            a, b = clients
            a.create("/a", b"x")
            a.create("/a/b", b"yy")
            a.create("/e", b"", ephemeral=True)
            a.get("/a", watch=lambda _event: None)
            a.get_children("/a", watch=lambda _event: None)
            a.exists("/nope", watch=lambda _event: None)
            b.get("/a", watch=lambda _event: None)
            for mode, node_id in (("leader", leader), ("follower", follower)):
                answers[mode] = {word: _real_answer(ensemble, node_id, word) for word in FOUR_LETTER_WORDS}
        finally:
            for client in clients:
                client.stop()
                client.close()
    return answers


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["leader", "follower"])
def test_answers_have_real_zookeepers_shape(
    real_answers: dict[str, dict[str, str]], follower: ZooKeeperService, mode: str
) -> None:
    real = real_answers[mode]
    if mode == "leader":
        follower.quorum.role, follower.quorum.leader_id = Role.LEADER, 1  # type: ignore[union-attr]
        follower.quorum.followers = {2: (5, 6, "replicate"), 3: (5, 6, "replicate")}  # type: ignore[union-attr]
    ours = {word: ask(follower, word) for word in FOUR_LETTER_WORDS}
    # srvr: the same lines in the same order (the leader adds its proposal sizes, which we have not).
    real_srvr = [key for key in _keys(real["srvr"], ":") if key != "Proposal sizes last/min/max"]
    assert _keys(ours["srvr"], ":") == real_srvr
    assert _keys(ours["stat"], ": ") == [key for key in _keys(real["stat"], ": ") if not key.startswith("Proposal")]
    # mntr: a subset of 3.9's keys, in its order.
    our_mntr, real_mntr = _keys(ours["mntr"], "\t"), _keys(real["mntr"], "\t")
    assert set(our_mntr) <= set(real_mntr), set(our_mntr) - set(real_mntr)
    assert _is_subsequence(our_mntr, real_mntr), (our_mntr, real_mntr)
    # conf and envi: ZooKeeper's keys we print come in its order.
    assert _is_subsequence(_keys(ours["conf"], "="), _keys(real["conf"], "="))
    shared_envi = [key for key in _keys(ours["envi"], "=") if key in _keys(real["envi"], "=")]
    assert _is_subsequence(shared_envi, _keys(real["envi"], "="))
    assert len(shared_envi) >= 8
    for word in ("ruok", "isro", "crst", "srst"):
        assert ours[word] == real[word], word
    assert _keys(ours["dirs"], ":") == _keys(real["dirs"], ":")
    assert _keys(ours["dump"], ":")[:1] == _keys(real["dump"], ":")[:1]
    # Only the real server whose clients set the watches has them.
    if mode == "follower":
        assert ours["wchs"] == real["wchs"]
        # ZooKeeper lists sessions and paths in its hash maps' order: compare the blocks as sets.
        for word in ("wchc", "wchp"):
            assert ours[word].endswith("\n\n") and real[word].endswith("\n\n")
            assert _blocks(ours[word]) == _blocks(real[word]), word
        # dump up to its connections (ZooKeeper's NIO buckets, which zkraft leaves out as Netty does).
        real_dump = real["dump"].split("Connections dump:\n", 1)[0] + "Connections dump:\n"
        assert re.sub("0x[0-9a-f]+", "0xS", ours["dump"]) == re.sub("0x[0-9a-f]+", "0xS", real_dump)
        cons_shape = re.compile(r" /[\d.:]+\[[01]\]\(queued=\d+,recved=\d+,sent=\d+(,sid=0x[0-9a-f]+,lop=\w+,[^)]*)?\)")
        for line in filter(None, real["cons"].splitlines() + ours["cons"].splitlines()):
            assert cons_shape.fullmatch(line), line
        # A session's fields: ZooKeeper's, in its order (lcxid, the last request's xid, is not kept).
        [real_session, *_] = [line for line in real["cons"].splitlines() if ",sid=" in line]
        [our_session, *_] = [line for line in ours["cons"].splitlines() if ",sid=" in line]
        real_fields = re.findall(r"[,(](\w+)=", real_session)
        our_fields = re.findall(r"[,(](\w+)=", our_session)
        assert our_fields == [name for name in real_fields if name != "lcxid"]


@pytest.mark.integration
def test_whitelist_refusal_is_real_zookeepers_text(tmp_path: Path) -> None:
    reason = real_zookeeper.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    service = ZooKeeperService(
        NodeSettings(node_id=1, data_dir=tmp_path / "n", listen=PEERS_3[1], peers=PEERS_3),
        ZnodeTree(tmp_path / "n" / "zk"),
    )
    try:
        with real_zookeeper.RealZooKeeper(tmp_path / "real", properties={"4lw.commands.whitelist": "srvr"}) as zk:
            zk.start_all()
            zk.wait_serving(timeout_s=60)
            for word in ("ruok", "mntr", "gtmk", "hash"):
                assert ask(service, word) == _real_answer(zk, 1, word), word
    finally:
        service.tree.close()


def test_zkraft_up_refuses_a_bad_whitelist_in_one_line(tmp_path: Path) -> None:
    from tests.test_up_cli import run_up_expecting_error

    data_dir = tmp_path / "cluster"
    result = run_up_expecting_error(data_dir, "--override", "4lw.commands.whitelist=srvr,rouk")
    assert result.returncode == 2, result.stderr
    assert "4lw.commands.whitelist: unknown four-letter word 'rouk'" in result.stderr
    assert not data_dir.exists()
