"""The SDK follows the quorum's membership (issue 32): /zookeeper/config parsed, watched, and the session's
server list replaced by its members (client.zk.ensemble_config, client.zk.ensemble_tracker).

The parser is tested directly; the tracker against the in-process fake servers of `tests/zk_fake_server.py`,
where the test writes /zookeeper/config itself (a real quorum keeps it current: tests in
test_zk_follow_membership_cluster.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from client import AsyncZkClient, ZkClient
from client.zk.ensemble_config import (
    OBSERVER,
    PARTICIPANT,
    EnsembleConfig,
    EnsembleConfigError,
    Member,
    parse_ensemble_config,
)
from client.zk.states import ZkState
from quorum.facade import ClusterConfiguration
from tests.helpers import wait_until
from tests.zk_fake_server import FakeCluster, FakeServer
from zkemu.config_text import configuration_text

SESSION_MS = 3000
WAIT_S = 10.0

# ---------------------------------------------------------------- the parser


def test_participants_observers_client_parts_and_the_version() -> None:
    config = parse_ensemble_config(
        b"server.2=127.0.0.1:7002:7002:participant;127.0.0.1:2182\n"
        b"server.1=127.0.0.1:7001:7001:participant;127.0.0.1:2181\n"
        b"server.4=127.0.0.1:7004:7004:observer;127.0.0.1:2184\n"
        b"version=1a\n"
    )
    assert config == EnsembleConfig(
        (
            Member(1, "127.0.0.1:7001", PARTICIPANT, "127.0.0.1:2181"),
            Member(2, "127.0.0.1:7002", PARTICIPANT, "127.0.0.1:2182"),
            Member(4, "127.0.0.1:7004", OBSERVER, "127.0.0.1:2184"),
        ),
        0x1A,
    )
    assert config.grpc_addresses() == ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7004"]
    assert config.wire_addresses() == ["127.0.0.1:2181", "127.0.0.1:2182", "127.0.0.1:2184"]


def test_what_the_quorum_writes_is_what_the_client_reads() -> None:
    """zkemu writes /zookeeper/config (electionPort 0, observers, a member whose client address is unknown);
    the SDK's parser must read exactly that text back."""
    configuration = ClusterConfiguration(
        0x1F, (1, 2), (3,), (4,), {1: "10.0.0.1:7001", 2: "10.0.0.2:7002", 3: "10.0.0.3:7003", 4: "10.0.0.4:7004"}
    )
    text = configuration_text(configuration, {1: "10.0.0.1:2181", 4: "10.0.0.4:2184"})
    config = parse_ensemble_config(text)
    assert config == EnsembleConfig(
        (
            Member(1, "10.0.0.1:7001", PARTICIPANT, "10.0.0.1:2181"),
            Member(2, "10.0.0.2:7002", PARTICIPANT, None),
            Member(4, "10.0.0.4:7004", OBSERVER, "10.0.0.4:2184"),
        ),
        0x1F,
    )  # the learner (3) is not shown, as ZooKeeper shows no server before its reconfig commits


def test_a_missing_client_part_role_or_client_host() -> None:
    config = parse_ensemble_config(
        "server.1=n1:7001:7001\n"  # no role: a participant; no client part: no wire address
        "server.2=n2:7002:7002:observer;2182\n"  # a port alone: every interface; the wire host is the peer's
        "server.3=[::1]:7003:7003:participant;[::]:2183\n"  # IPv6, a wildcard client host
        "server.5=n5:7005:7005|m5:7105:7105:participant\n"  # several peer addresses: the first is dialled
        "# a comment, and a hierarchical quorum's keys\n\ngroup.1=1:2:3\nweight.1=1\n"
    )
    assert [(m.server_id, m.role) for m in config.members] == [
        (1, PARTICIPANT), (2, OBSERVER), (3, PARTICIPANT), (5, PARTICIPANT)
    ]  # fmt: skip
    assert config.version is None
    assert config.grpc_addresses() == ["n1:7001", "n2:7002", "[::1]:7003", "n5:7005"]
    assert config.wire_addresses() == ["n2:2182", "[::1]:2183"]


def test_an_empty_text_has_no_members() -> None:
    assert parse_ensemble_config(b"") == EnsembleConfig((), None)
    assert parse_ensemble_config(b"version=0\n").grpc_addresses() == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("garbage", "line 1: 'garbage' is not key=value"),
        ("server.1=127.0.0.1:7001:7001\nsize=3", "line 2: unknown key 'size'"),
        ("server.x=127.0.0.1:7001:7001", "line 1: 'server.x' does not end in a server id"),
        ("server.1=127.0.0.1:7001", "line 1: '127.0.0.1:7001' is not host:port:port[:role]"),
        ("server.1=127.0.0.1:7001:70a1", "line 1: '127.0.0.1:7001:70a1' is not host:port:port[:role]"),
        ("server.1=h:7001:7001:voter", "line 1: unknown role 'voter' (participant or observer)"),
        ("server.1=h:7001:7001;h:2181;h:2182", "line 1: 'h:7001:7001;h:2181;h:2182' has more than one ';'"),
        ("server.1=h:7001:7001;h:99999", "line 1: client address 'h:99999' is not [host:]port"),
        ("server.1=[::1:7001:7001", "line 1: '[::1:7001:7001': an IPv6 host needs ']:' after it"),
        ("server.1=h:1:1\nserver.1=h:2:2", "line 2: server.1 is listed twice"),
        ("version=zz", "line 1: version 'zz' is not hexadecimal"),
    ],
)
def test_a_bad_text_is_refused_naming_the_line(text: str, problem: str) -> None:
    with pytest.raises(EnsembleConfigError) as refused:
        parse_ensemble_config(text)
    assert str(refused.value) == problem


# ---------------------------------------------------------------- the tracker, on fake servers


def config_text(servers: list[FakeServer], version: int) -> bytes:
    lines = [f"server.{s.server_id}={s.address}:{s.address.rsplit(':', 1)[1]}:participant" for s in servers]
    return ("\n".join(lines) + f"\nversion={version:x}\n").encode()


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    cl = FakeCluster(3)
    cl.create("/zookeeper")
    cl.create("/zookeeper/config")
    cl.create("/app")
    yield cl
    cl.close()


def test_the_client_follows_the_members_and_reconnects_to_one_it_learned(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    first, second, third = cluster.servers
    cluster.set_data("/zookeeper/config", config_text([first, second], 1))
    with ZkClient(f"{first.address}/app", session_timeout_ms=SESSION_MS, timeout=WAIT_S) as zk:
        wait_until(lambda: sorted(zk.hosts) == sorted([first.address, second.address]), WAIT_S)
        assert zk.ensemble_config is not None and zk.ensemble_config.version == 1
        session_id = (zk.client_id or (0, b""))[0]
        zk.create("/mine", ephemeral=True)

        # Node 1 leaves, node 3 joins: the list follows; the live connection to node 1 stays.
        cluster.set_data("/zookeeper/config", config_text([second, third], 2))
        wait_until(lambda: sorted(zk.hosts) == sorted([second.address, third.address]), WAIT_S)
        assert zk.server == first.address and zk.state is ZkState.CONNECTED

        # Node 1 goes: the session moves to a member it learned, keeping its chroot and its ephemeral.
        first.available = False
        cluster.kill_connections(first)
        wait_until(lambda: zk.state is ZkState.CONNECTED and zk.server in (second.address, third.address), WAIT_S)
        assert (zk.client_id or (0, b""))[0] == session_id
        assert zk.get_children("/") == ["mine"]
        assert cluster.node("/app/mine") is not None

        # Garbage, then an empty text: the list stays, one log line each.
        with caplog.at_level(logging.INFO, logger="zkraft.client.zk"):
            for data, event in (
                (b"server.1=nonsense", "zk_ensemble_config_unparsable"),
                (b"", "zk_ensemble_config_empty"),
            ):
                cluster.set_data("/zookeeper/config", data)
                wait_until(lambda event=event: event in caplog.text, WAIT_S)
        assert sorted(zk.hosts) == sorted([second.address, third.address])
        assert caplog.text.count("zk_ensemble_config_unparsable") == 1
        assert "error=line 1: 'nonsense' has no host:port" in caplog.text


def test_ensemble_tracker_off_keeps_the_hosts_given(cluster: FakeCluster) -> None:
    first, second, _ = cluster.servers
    cluster.set_data("/zookeeper/config", config_text([second], 1))
    with ZkClient(first.address, session_timeout_ms=SESSION_MS, timeout=WAIT_S, ensemble_tracker=False) as zk:
        zk.sync("/")
        assert zk.hosts == [first.address] and zk.ensemble_config is None
        assert all(r.WhichOneof("op") != "get_data" for r in first.requests)


def test_the_asyncio_client_follows_a_change_too(cluster: FakeCluster) -> None:
    """AsyncZkClient runs the tracker's watcher on its own loop (the brokers' client), not on a callback thread."""
    first, second, third = cluster.servers
    cluster.set_data("/zookeeper/config", config_text([first], 1))
    zk = AsyncZkClient(first.address, session_timeout_ms=SESSION_MS, timeout=WAIT_S)
    cluster.run(zk.start())
    try:
        wait_until(lambda: zk.ensemble_config is not None and zk.ensemble_config.version == 1, WAIT_S)
        cluster.set_data("/zookeeper/config", config_text([first, second, third], 2))
        wait_until(lambda: sorted(zk.hosts) == sorted(s.address for s in cluster.servers), WAIT_S)
    finally:
        cluster.run(zk.close())
