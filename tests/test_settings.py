"""quorum.settings: properties parsing, command-line overrides, and one clear line per mistake."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from quorum.loop_options import LoopOptions
from quorum.settings import (
    NodeSettings,
    SettingsError,
    load_node_settings,
    parse_properties,
    peers_string,
)

PEERS3 = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "node.properties"
    path.write_text(text, encoding="utf-8")
    return path


def load(overrides: dict | None = None, text: str | None = None, tmp_path: Path | None = None) -> NodeSettings:
    config = write(tmp_path, text) if text is not None and tmp_path is not None else None
    return load_node_settings(overrides or {}, config)


def cli(**given: object) -> dict:
    base: dict = {"id": 1, "data_dir": "/tmp/q1", "peers": PEERS3}
    base.update(given)
    return {key: value for key, value in base.items() if value is not None}


def error_of(overrides: dict | None = None, text: str | None = None, tmp_path: Path | None = None) -> str:
    with pytest.raises(SettingsError) as caught:
        load(overrides, text, tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---- properties syntax ----


def test_properties_syntax_comments_separators_continuations_escapes() -> None:
    lines = [
        "# comment",
        "! also a comment",
        "",
        "  a = 1",
        "b:2",
        "c 3",
        "d=x\\",
        "    y",
        "e=tab\\there\\u0041",
        "f=",
        "g=trailing   ",
    ]
    text = "\n".join(lines) + "\n"
    parsed = {key: value for key, value, _ in parse_properties(text)}
    assert parsed == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": "tab\thereA", "f": "", "g": "trailing"}


def test_properties_line_numbers_point_at_the_logical_line_start() -> None:
    lines = [(key, line) for key, _, line in parse_properties("# c\n\na=1\\\n 2\nb=3\n")]
    assert lines == [("a", 3), ("b", 5)]


def test_file_with_server_lines_zookeeper_style(tmp_path: Path) -> None:
    text = (
        "myid=2\n"
        "dataDir=/var/lib/zkraft/q2\n"
        "listen=0.0.0.0:7002\n"
        "server.1=10.0.0.1:7001\n"
        "server.2=10.0.0.2:7002\n"
        "server.3=10.0.0.3:7003\n"
        "cluster.id=prod\n"
        "raft.tick.ms=20\n"
        "raft.election.timeout.ticks=10\n"
        "raft.heartbeat.interval.ticks=1\n"
        "snapshot.interval.entries=100\n"
        "snapshot.trailing.entries=10\n"
        "raft.inflight.appends.max=8\n"
    )
    settings = load(None, text, tmp_path)
    assert settings == NodeSettings(
        node_id=2,
        data_dir=Path("/var/lib/zkraft/q2"),
        listen="0.0.0.0:7002",
        peers={1: "10.0.0.1:7001", 2: "10.0.0.2:7002", 3: "10.0.0.3:7003"},
        cluster_id="prod",
        tick_ms=20,
        election_timeout_ticks=10,
        heartbeat_interval_ticks=1,
        snapshot_interval_entries=100,
        snapshot_trailing_entries=10,
        inflight_appends_max=8,
    )
    assert settings.advertised_address == "10.0.0.2:7002"
    assert settings.voters == (1, 2, 3)


def test_peers_property_and_aliases(tmp_path: Path) -> None:
    settings = load(None, f"id=1\ndata.dir=/d\npeers={PEERS3}\n", tmp_path)
    assert settings.peers == {1: "127.0.0.1:7001", 2: "127.0.0.1:7002", 3: "127.0.0.1:7003"}
    assert settings.data_dir == Path("/d")


def test_defaults() -> None:
    settings = load(cli())
    assert settings.cluster_id == "zkraft"
    assert settings.listen == "127.0.0.1:7001"  # defaults to this node's advertised address
    assert (settings.tick_ms, settings.election_timeout_ticks, settings.heartbeat_interval_ticks) == (50, 12, 2)
    assert (settings.snapshot_interval_entries, settings.snapshot_trailing_entries) == (100000, 5000)
    assert (settings.inflight_appends_max, settings.proposal_timeout_ms) == (64, 10000)


# ---- command line over file ----


def test_command_line_wins_over_file(tmp_path: Path) -> None:
    text = "id=1\ndataDir=/from/file\nlisten=127.0.0.1:7001\ncluster.id=file\n" + "".join(
        f"server.{n}=127.0.0.1:{7000 + n}\n" for n in (1, 2, 3)
    )
    settings = load(
        {"id": 3, "data_dir": "/from/cli", "listen": "0.0.0.0:9003", "peers": "1=h1:9001,2=h2:9002,3=h3:9003"},
        text,
        tmp_path,
    )
    assert settings.node_id == 3
    assert settings.data_dir == Path("/from/cli")
    assert settings.listen == "0.0.0.0:9003"
    assert settings.peers == {1: "h1:9001", 2: "h2:9002", 3: "h3:9003"}  # --peers replaces the server.N list
    assert settings.cluster_id == "file"


def test_argparse_namespace_ignores_its_own_attributes_and_none() -> None:
    namespace = argparse.Namespace(
        id=2, data_dir="/d", listen=None, peers=PEERS3, cluster_id=None, config=None, handler=print, command="x"
    )
    settings = load_node_settings(namespace, None)
    assert settings.node_id == 2
    assert settings.listen == "127.0.0.1:7002"
    assert settings.cluster_id == "zkraft"


def test_kwargs_take_field_names_and_a_peer_dict() -> None:
    settings = load_node_settings(
        {"node_id": 1, "data_dir": Path("/d"), "peers": {1: "localhost:7001"}, "tick_ms": 10}, None
    )
    assert settings.peers == {1: "localhost:7001"}
    assert settings.tick_ms == 10


def test_peers_string_is_sorted_and_canonical() -> None:
    assert peers_string({3: "c:3", 1: "a:1", 2: "b:2"}) == "1=a:1,2=b:2,3=c:3"
    settings = load(cli(peers="3=127.0.0.1:7003, 1=127.0.0.1:7001 ,2=127.0.0.1:7002"))
    assert settings.peers_string == PEERS3


def test_ipv6_addresses() -> None:
    settings = load(cli(peers="1=[::1]:7001", listen="[::]:7001"))
    assert settings.peers == {1: "[::1]:7001"}


# ---- one clear line per mistake ----


def test_missing_id() -> None:
    assert error_of(cli(id=None)) == "id: missing (give --id N or id=N in the config file)"


def test_missing_data_dir() -> None:
    assert "data dir: missing" in error_of(cli(data_dir=None))


def test_missing_peers() -> None:
    assert "peers: missing" in error_of(cli(peers=None))


def test_id_not_in_peers() -> None:
    assert error_of(cli(id=4)) == f"id: node 4 is not in the peer list {PEERS3}"


def test_listen_port_differs_from_peer_port() -> None:
    message = error_of(cli(listen="0.0.0.0:7009"))
    assert message.startswith("listen: port 7009 differs from port 7001")


@pytest.mark.parametrize(
    ("peers", "expected"),
    [
        ("1=127.0.0.1", "is not host:port"),
        ("1=127.0.0.1:http", "is not a number"),
        ("1=127.0.0.1:0", "out of range 1-65535"),
        ("1=127.0.0.1:65536", "out of range 1-65535"),
        ("1=:7001", "is not host:port"),
        ("127.0.0.1:7001", "is not id=host:port"),
        ("x=127.0.0.1:7001", "expected an integer"),
        ("0=127.0.0.1:7001", "integers >= 1"),
        ("1=a:1,1=b:2,2=c:3", "node id 1 is listed twice"),
        ("1=a:1,,2=b:2", "empty entry"),
    ],
)
def test_unparsable_peers(peers: str, expected: str) -> None:
    assert expected in error_of(cli(peers=peers))


def test_unparsable_listen() -> None:
    assert error_of(cli(listen="nowhere")).startswith("--listen: 'nowhere' is not host:port")


def test_duplicate_addresses() -> None:
    message = error_of(cli(peers="1=127.0.0.1:7001,2=127.0.0.1:7001,3=127.0.0.1:7003"))
    assert message == "peers: nodes 1 and 2 have the same address 127.0.0.1:7001"


@pytest.mark.parametrize("count", [2, 4, 6, 8])
def test_even_or_large_cluster_sizes_are_refused(count: int) -> None:
    peers = ",".join(f"{n}=127.0.0.1:{7000 + n}" for n in range(1, count + 1))
    message = error_of(cli(peers=peers))
    assert f"peers: {count} nodes given" in message
    assert "static membership of 1, 3, 5 or 7 nodes" in message
    assert "even size" in message


@pytest.mark.parametrize("count", [1, 3, 5, 7])
def test_odd_cluster_sizes_are_accepted(count: int) -> None:
    peers = ",".join(f"{n}=127.0.0.1:{7000 + n}" for n in range(1, count + 1))
    assert len(load(cli(peers=peers)).peers) == count


def test_unknown_property_is_named_with_file_and_line(tmp_path: Path) -> None:
    message = error_of(None, "id=1\n\nraft.tick.msec=5\n", tmp_path)
    assert message.endswith(":3: unknown property 'raft.tick.msec' (did you mean 'raft.tick.ms'?)")
    assert str(tmp_path) in message


def test_unknown_setting_in_kwargs() -> None:
    assert error_of({**cli(), "tick": 3}) == "unknown setting 'tick'"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("raft.tick.ms", "fast"),
        ("raft.election.timeout.ticks", "1.5"),
        ("id", "one"),
        ("snapshot.interval.entries", ""),
    ],
)
def test_non_integer_numbers(tmp_path: Path, key: str, value: str) -> None:
    text = f"dataDir=/d\npeers={PEERS3}\n" + ("" if key == "id" else "id=1\n") + f"{key}={value}\n"
    assert error_of(None, text, tmp_path).endswith(f"{key}: expected an integer, got {value!r}")


def test_non_integer_from_command_line() -> None:
    assert error_of(cli(tick_ms="x")) == "--tick-ms: expected an integer, got 'x'"


def test_election_ticks_must_exceed_heartbeat_ticks(tmp_path: Path) -> None:
    text = f"id=1\ndataDir=/d\npeers={PEERS3}\nraft.election.timeout.ticks=4\nraft.heartbeat.interval.ticks=4\n"
    message = error_of(None, text, tmp_path)
    assert message.startswith("raft.election.timeout.ticks (4) must be greater than raft.heartbeat.interval.ticks (4)")


def test_non_positive_limits(tmp_path: Path) -> None:
    text = f"id=1\ndataDir=/d\npeers={PEERS3}\nraft.inflight.appends.max=0\n"
    assert error_of(None, text, tmp_path) == "raft.inflight.appends.max: must be >= 1, got 0"


def test_init_limit_bounds_the_wait_for_a_peers_state_in_ticks_of_tick_time(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(f"id=1\ndataDir=/d\npeers={PEERS3}\ntickTime=500\ninitLimit=4\n")
    settings = load_node_settings(None, path)
    assert (settings.init_limit_ticks, settings.state_fetch_timeout_s) == (4, 2.0)
    assert load_node_settings({"id": 1, "data_dir": "/d", "peers": PEERS3}, None).state_fetch_timeout_s == 20.0
    text = f"id=1\ndataDir=/d\npeers={PEERS3}\ninitLimit=0\n"
    assert error_of(None, text, tmp_path) == "initLimit: must be >= 1, got 0"


def test_both_peers_and_server_lines(tmp_path: Path) -> None:
    text = f"id=1\ndataDir=/d\npeers={PEERS3}\nserver.1=127.0.0.1:7001\n"
    assert "give either peers=... or server.N=... lines, not both" in error_of(None, text, tmp_path)


def test_alias_and_name_together(tmp_path: Path) -> None:
    message = error_of(None, f"id=1\nmyid=1\ndataDir=/d\npeers={PEERS3}\n", tmp_path)
    assert "myid: conflicts with id" in message


def test_key_given_twice(tmp_path: Path) -> None:
    message = error_of(None, f"id=1\ndataDir=/d\npeers={PEERS3}\nid=2\n", tmp_path)
    assert message.endswith(":4: 'id' is already set on line 1")


def test_zookeeper_style_server_line_with_election_port_is_refused(tmp_path: Path) -> None:
    text = "id=1\ndataDir=/d\nserver.1=127.0.0.1:2888:3888\n"
    assert "server.1: '127.0.0.1:2888:3888' is not host:port" in error_of(None, text, tmp_path)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"config file .*nope\.properties: not found$"):
        load_node_settings(cli(), tmp_path / "nope.properties")


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(SettingsError, match="not in the peer list"):
        NodeSettings(node_id=2, data_dir=Path("/d"), listen="127.0.0.1:7001", peers={1: "127.0.0.1:7001"})


def test_super_digest_is_zookeepers_property_and_must_be_a_digest(tmp_path: Path) -> None:
    digest = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
    text = f"id=1\ndataDir=/d\npeers={PEERS3}\nzookeeper.DigestAuthenticationProvider.superDigest={digest}\n"
    assert load(None, text, tmp_path).super_digest == digest
    assert load(cli()).super_digest == ""
    for bad in ("super", "super:notbase64!", ":D/InIHSb7yEEbrWz8b9l71RjZJU=", "super:c2hvcnQ="):
        message = error_of(cli(super_digest=bad))
        assert message.startswith("zookeeper.DigestAuthenticationProvider.superDigest: expected user:base64")


# ---- the ZooKeeper client port ----


def test_client_port_defaults_and_properties(tmp_path: Path) -> None:
    settings = load(cli())
    assert (settings.client_port, settings.client_port_address) == (2181, "0.0.0.0")  # ZooKeeper's sample config
    assert (settings.sessionless_connection_timeout_ms, settings.max_client_connections) == (10000, 60)
    text = "clientPort=12181\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nzookeeper.nio.sessionlessCnxnTimeout=500\n"
    settings = load(cli(), text, tmp_path)
    assert (settings.client_port, settings.client_port_address) == (12181, "127.0.0.1")
    assert (settings.max_client_connections, settings.sessionless_connection_timeout_ms) == (0, 500)
    assert load(cli(client_port="0")).client_port == 0  # no ZooKeeper client port


@pytest.mark.parametrize(
    "given, expected",
    [
        ({"client_port": "70000"}, "clientPort: must be <= 65535"),
        ({"client_port": "-1"}, "clientPort: must be >= 0"),
        ({"client_port": "two"}, "--client-port: expected an integer"),
        ({"client_port_address": "127.0.0.1:2181"}, "clientPortAddress: '127.0.0.1:2181' is not a host name"),
        ({"client_port_address": " "}, "clientPortAddress: must be a host name or IP address"),
        ({"max_client_connections": "-1"}, "maxClientCnxns: must be >= 0"),
        ({"sessionless_connection_timeout_ms": "0"}, "zookeeper.nio.sessionlessCnxnTimeout: must be >= 1"),
    ],
)
def test_client_port_errors_are_one_line(given: dict, expected: str) -> None:
    assert expected in error_of(cli(**given))


def test_the_loop_and_protocol_options_are_on_by_default_and_each_can_be_turned_off(tmp_path: Path) -> None:
    default = load(cli())
    assert default.loop == LoopOptions()
    assert (default.raft_durable_notice, default.raft_lazy_follower_commits, default.raft_deferred_replication) == (
        True,
        True,
        True,
    )
    text = (
        "raft.durable.notice=false\nraft.lazy.follower.commits=false\nraft.deferred.replication=false\n"
        "quorum.loop.inline.persist.entries.max=0\nquorum.loop.apply.ahead.during.save=false\n"
        "quorum.loop.prepare.while.committing=false\nquorum.loop.leader.sends.before.apply=false\n"
        "quorum.loop.ready.in.handler=false\nquorum.loop.idle.leader.inline.path=false\n"
    )
    off = load(cli(), text, tmp_path)
    assert off.loop == LoopOptions(0, False, False, False, False, False)
    assert not (off.raft_durable_notice or off.raft_lazy_follower_commits or off.raft_deferred_replication)


def test_a_bad_loop_option_is_named(tmp_path: Path) -> None:
    assert "quorum.loop.ready.in.handler: expected true or false, got 'maybe'" in error_of(
        cli(), "quorum.loop.ready.in.handler=maybe\n", tmp_path
    )
    assert "quorum.loop.inline.persist.entries.max" in error_of(
        cli(), "quorum.loop.inline.persist.entries.max=-1\n", tmp_path
    )
