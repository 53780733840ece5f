"""/zookeeper/config without processes (issue 32): ZooKeeper's dynamic-configuration text (zkemu.config_text),
the tree writing it when a configuration entry or a member's client address applies, and the checks reconfig
makes before any change (zkemu.reconfig.plan), each with the code ZooKeeper's PrepRequestProcessor answers."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.protocol import serialization as kz

from quorum.address_book import encode_addresses
from quorum.facade import ClusterConfiguration
from quorum.raft.membership import ChangeKind, ConfChange, Membership, encode_config
from quorum.raft.types import Entry, EntryKind
from quorum.settings import NodeSettings, SettingsError, load_node_settings, read_properties_file
from zkemu import jute_codec as jute
from zkemu.config_text import (
    ConfigTextError,
    DynamicConfig,
    ServerSpec,
    configuration_text,
    parse_config,
    parse_server,
)
from zkemu.errors import Code, ZkError
from zkemu.events import EventType
from zkemu.paths import CONFIG_PATH
from zkemu.reconfig import Step, plan
from zkemu.tree import AppliedTxn, ZnodeTree
from zkraft import up as up_module
from zkraft.tools.zk_reconfig import (
    RECONFIG_USAGE,
    ReconfigArgs,
    ReconfigUsageError,
    client_config_string,
    parse_reconfig,
    read_members_file,
)
from zkraft_proto import zk_pb2 as pb

PEERS = {1: "10.0.0.1:7001", 2: "10.0.0.2:7001", 3: "10.0.0.3:7001"}
CLIENTS = {1: "10.0.0.1:2181", 2: "10.0.0.2:2181", 3: "10.0.0.3:2181"}
THREE = ClusterConfiguration(0, (1, 2, 3), (), (), dict(PEERS))
THREE_TEXT = (
    "server.1=10.0.0.1:7001:0:participant;10.0.0.1:2181\n"
    "server.2=10.0.0.2:7001:0:participant;10.0.0.2:2181\n"
    "server.3=10.0.0.3:7001:0:participant;10.0.0.3:2181\n"
    "version=0"
)


# ---------------------------------------------------------------- the text


def test_the_text_is_zookeepers_quorum_verifier_string() -> None:
    assert configuration_text(THREE, CLIENTS) == THREE_TEXT
    assert parse_config(THREE_TEXT) == DynamicConfig(
        tuple(ServerSpec(i, f"10.0.0.{i}", 7001, 0, "participant", CLIENTS[i]) for i in (1, 2, 3)), 0
    )


def test_observers_learners_unknown_clients_and_a_hex_version() -> None:
    configuration = ClusterConfiguration(0x1A2B, (1, 3), (4,), (2,), {**PEERS, 4: "10.0.0.4:7001"})
    text = configuration_text(configuration, {1: CLIENTS[1]})
    # Node 4 is a learner still catching up: ZooKeeper shows a joining server only once its reconfig commits.
    assert text == (
        "server.1=10.0.0.1:7001:0:participant;10.0.0.1:2181\n"
        "server.2=10.0.0.2:7001:0:observer\n"
        "server.3=10.0.0.3:7001:0:participant\n"
        "version=1a2b"
    )
    assert parse_config(text).version == 0x1A2B
    assert parse_config(text).clients() == {1: CLIENTS[1]}


@pytest.mark.parametrize(
    ("key", "value", "spec"),
    [
        ("server.4", "h:1:1;h:2", ServerSpec(4, "h", 1, 1, "participant", "h:2")),
        ("server.4", "h:1:1:observer;2", ServerSpec(4, "h", 1, 1, "observer", "h:2")),  # a bare client port
        ("server.4", "h:1:1:participant;0.0.0.0:2", ServerSpec(4, "h", 1, 1, "participant", "h:2")),
        ("server.4", "h:1:2", ServerSpec(4, "h", 1, 2, "participant", "")),
    ],
)
def test_server_strings_as_zookeeper_takes_them(key: str, value: str, spec: ServerSpec) -> None:
    assert parse_server(key, value) == spec


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("server.x", "h:1:1", "'server.x' is not of the form server.<id>"),
        ("server.4", "h:1", "server.4=h:1: expected host:quorumPort:electionPort[:role][;[host:]clientPort]"),
        ("server.4", "h:1:70000", "server.4: election port '70000' is not a port number (0-65535)"),
        ("server.4", "h:0:0", "server.4: quorum port '0' is not a port number (1-65535)"),
        ("server.4", "h:1:1:leader", "server.4: unrecognised peer type 'leader' (participant or observer)"),
        ("server.4", "h:1:1;h:", "client port '' is not a port number (1-65535)"),
    ],
)
def test_bad_server_strings_say_why_in_one_line(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigTextError) as error:
        parse_server(key, value)
    assert str(error.value) == message


# ---------------------------------------------------------------- the tree


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[ZnodeTree, list[AppliedTxn]]]:
    applied: list[AppliedTxn] = []
    t = ZnodeTree(tmp_path / "zk", on_applied=applied.append)
    yield t, applied
    t.close()


def config_entry(index: int, change: ChangeKind, node: int, membership: Membership) -> Entry:
    addresses = {m: PEERS.get(m, f"10.0.0.{m}:7001") for m in membership.members}
    context = encode_addresses(addresses)
    full = Membership(membership.voters, membership.learners, membership.observers, context)
    return Entry(index, 1, encode_config(ConfChange(change, node, context), full), EntryKind.CONFIG)


def member_client(index: int, server_id: int, client: str, base: str = "") -> Entry:
    txn = pb.Txn(time_ms=1000 + index, member_client=pb.MemberClientTxn(server_id=server_id, client_address=client,
                                                                         base_config=base))  # fmt: skip
    return Entry(index, 1, txn.SerializeToString(), EntryKind.NORMAL)


def test_announcements_fill_the_text_and_configuration_entries_change_it(
    tree: tuple[ZnodeTree, list[AppliedTxn]],
) -> None:
    t, applied = tree
    base = configuration_text(THREE, {})
    t.apply([member_client(1, 2, CLIENTS[2], base)])
    assert t.get_data(CONFIG_PATH)[0].decode() == base.replace("2:7001:0:participant\n",
                                                                "2:7001:0:participant;10.0.0.2:2181\n")  # fmt: skip
    t.apply([member_client(2, 1, CLIENTS[1]), member_client(3, 3, CLIENTS[3])])
    data, stat = t.get_data(CONFIG_PATH)
    # mzxid is the configuration's version (0: the start-up peers), as ZooKeeper's; the mtime the change's.
    assert (data.decode(), stat.mzxid, stat.mtime, stat.version) == (THREE_TEXT, 0, 1003, -1)
    t.apply([member_client(4, 3, CLIENTS[3])])  # nothing new: nothing written, no watch fires
    assert t.get_data(CONFIG_PATH)[1].mtime == 1003
    assert [(a.zxid, trigger.path) for a in applied for trigger in a.triggers] == [(z, CONFIG_PATH) for z in (1, 2, 3)]

    # Node 4 joins as a learner: no line, so nothing changes, not even the version, and no watch fires.
    t.apply([config_entry(5, ChangeKind.ADD_LEARNER, 4, Membership((1, 2, 3), (4,)))])
    assert t.get_data(CONFIG_PATH)[0].decode() == THREE_TEXT
    assert [a.zxid for a in applied if a.triggers] == [1, 2, 3]
    # Promoted: its line appears, the others keep their client.
    t.apply([config_entry(6, ChangeKind.PROMOTE, 4, Membership((1, 2, 3, 4)))])
    data, stat = t.get_data(CONFIG_PATH)
    assert data.decode().endswith("server.4=10.0.0.4:7001:0:participant\nversion=6")
    assert (stat.mzxid, stat.version) == (6, -1)
    assert applied[-1].triggers[0].type is EventType.NODE_DATA_CHANGED


def test_a_member_client_for_a_server_without_a_line_changes_nothing(tree: tuple[ZnodeTree, list[AppliedTxn]]) -> None:
    t, _ = tree
    t.apply([member_client(1, 1, CLIENTS[1], configuration_text(THREE, {}))])
    before = t.get_data(CONFIG_PATH)
    t.apply([member_client(2, 9, "10.0.0.9:2181")])
    assert t.get_data(CONFIG_PATH) == before


# ---------------------------------------------------------------- reconfig's checks


def request(**fields: object) -> pb.ReconfigRequest:
    return pb.ReconfigRequest(**{"cur_config_id": -1, **fields})  # type: ignore[arg-type]


def code_of(req: pb.ReconfigRequest, current: ClusterConfiguration = THREE, shown: int = 0) -> tuple[int, str]:
    with pytest.raises(ZkError) as error:
        plan(req, current, shown)
    return error.value.code, str(error.value)


def test_incremental_changes_are_removals_then_additions() -> None:
    steps = plan(request(joining_servers="server.4=10.0.0.4:7001:7001;2181", leaving_servers="3"), THREE, 0)
    assert steps == [Step(3), Step(4, ServerSpec(4, "10.0.0.4", 7001, 7001, "participant", "10.0.0.4:2181"))]
    assert plan(request(leaving_servers="2", cur_config_id=0), THREE, 0) == [Step(2)]


def test_the_version_reconfig_takes_is_the_one_zookeeper_config_shows() -> None:
    # A failed join left a learner's two entries (version 9 in the quorum) and /zookeeper/config at 0.
    after_failed_join = ClusterConfiguration(9, (1, 2, 3), (), (), dict(PEERS))
    assert plan(request(leaving_servers="2", cur_config_id=0), after_failed_join, 0) == [Step(2)]
    assert code_of(request(leaving_servers="2", cur_config_id=9), after_failed_join, shown=0) == (
        Code.BADVERSION, "Reconfiguration from version 9 failed -- last seen version is 0"
    )  # fmt: skip


def test_members_takes_one_server_more_or_less() -> None:
    four = THREE_TEXT.replace("version=0", "server.4=10.0.0.4:7001:7001:observer")
    steps = plan(request(new_members=four.replace("\n", ",")), THREE, 0)
    assert [(s.server_id, s.add.role if s.add else None) for s in steps] == [
        (1, "participant"), (2, "participant"), (3, "participant"), (4, "observer"),
    ]  # fmt: skip
    code, message = code_of(request(new_members="server.1=10.0.0.1:7001:7001"))
    assert code == Code.BADARGUMENTS and "differs from the current one by 2 servers" in message


@pytest.mark.parametrize(
    ("req", "current", "code", "message"),
    [
        (request(leaving_servers="3", cur_config_id=7), THREE, Code.BADVERSION,
         "Reconfiguration from version 7 failed -- last seen version is 0"),
        (request(leaving_servers="2"), ClusterConfiguration(9, (1, 2, 3), (4,), (), PEERS), Code.RECONFIGINPROGRESS,
         "a reconfiguration is in progress: server 4 is still catching up"),
        (request(leaving_servers="x"), THREE, Code.BADARGUMENTS, "leaving server 'x' is not a server id"),
        (request(leaving_servers="8"), THREE, Code.BADARGUMENTS,
         "leaving server 8 is not a member of the configuration"),
        (request(leaving_servers="1,2,3"), THREE, Code.BADARGUMENTS,
         "Reconfig failed - new configuration must include at least 1 follower"),
        (request(joining_servers="server.4=h:1:2"), THREE, Code.BADARGUMENTS,
         "server.4: election port 2 is not the quorum port 1; one port carries Raft's elections and replication "
         "here: give it twice, or 0"),
        (request(joining_servers="server.4=10.0.0.1:7001:7001"), THREE, Code.BADARGUMENTS,
         "server.4: 10.0.0.1:7001 is already server 1's address"),
        (request(joining_servers="server.2=10.0.0.2:7001:7001:observer"), THREE, Code.BADARGUMENTS,
         "server 2 is a member as participant at 10.0.0.2:7001: to change its address or role, remove it, then add it"),
        (request(joining_servers="4=h"), THREE, Code.BADARGUMENTS,
         "Wrong format of server string: server.4=h: expected host:quorumPort:electionPort[:role][;[host:]clientPort]"),
    ],
)  # fmt: skip
def test_refusals_carry_zookeepers_code_and_one_line(
    req: pb.ReconfigRequest, current: ClusterConfiguration, code: int, message: str
) -> None:
    assert code_of(req, current) == (code, message)


# ---------------------------------------------------------------- zkraft zk config / reconfig (zkCli's parsing)


def test_reconfig_arguments_as_zkcli_reads_them(tmp_path: Path) -> None:
    args = parse_reconfig(["-add", "Server.4=H:7004:7004;2184", "-remove", "3,5", "-v", "1a", "-s"])
    assert args == ReconfigArgs("server.4=h:7004:7004;2184", "3,5", None, None, 0x1A, True)
    assert parse_reconfig(["-members", "server.1=h:1:1", "-v1f"]).version == 0x1F
    dynamic = tmp_path / "zoo.cfg.dynamic"
    dynamic.write_text("server.1=h:1:1;2181\nserver.2=h:2:2;2182\nversion=100000000\n")
    assert read_members_file(str(parse_reconfig(["-file", str(dynamic)]).members_file)) == (
        "server.1=h:1:1;2181,server.2=h:2:2;2182"
    )


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ([], f"usage: {RECONFIG_USAGE}"),
        (["-s"], f"usage: {RECONFIG_USAGE}"),
        (["-add"], "Missing argument for option: add"),
        (["-remove", "3", "-v", "zz"], "-v must be followed by a long (configuration version)"),
        (["-members", "server.1=h:1:1", "-remove", "3"],
         "Can't use -file or -members together with -add or -remove (mixing incremental and non-incremental modes "
         "is not allowed)"),
        (["-members", "x", "-file", "y"], "Can't use -file and -members together (conflicting non-incremental modes)"),
        (["-remove", "3", "-x"], "Unrecognized option: -x"),
    ],
)  # fmt: skip
def test_reconfig_arguments_zkcli_refuses(words: list[str], message: str) -> None:
    with pytest.raises(ReconfigUsageError) as error:
        parse_reconfig(words)
    assert str(error.value) == message


def test_config_c_prints_the_version_and_the_client_connect_string() -> None:
    assert client_config_string(THREE_TEXT.replace("version=0", "version=1a")) == (
        "1a 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181"
    )
    # A member whose client address is unknown leaves an empty place, as ConfigUtils.getClientConfigStr does.
    assert client_config_string("server.1=h:1:1:participant\nserver.2=h:2:2;h:2\nversion=5") == "5 ,h:2"


# ---------------------------------------------------------------- reconfig on the wire (kazoo's bytes)


def test_kazoos_reconfig_decodes_with_its_nulls_and_reads_the_reply() -> None:
    record = kz.Reconfig("server.4=h:1:0;2", None, None, 0x1A)
    payload = struct.pack(">ii", 9, record.type) + record.serialize()
    reader = jute.JuteReader()
    reader.reset(payload, 0, len(payload))
    req = pb.Request()
    assert jute.decode_request(reader, req) == jute.OP_RECONFIG
    assert req.reconfig.joining_servers == "server.4=h:1:0;2" and req.reconfig.cur_config_id == 0x1A
    assert not req.reconfig.HasField("leaving_servers") and not req.reconfig.HasField("new_members")
    encoder = jute.JuteEncoder()
    encoder.expect(jute.OP_RECONFIG, 0.0)
    out: list[bytes] = []
    stat = pb.Stat(czxid=0, mzxid=0x1B, version=-1, data_length=len(THREE_TEXT))
    encoder.encode(pb.ServerMessage(response=pb.Response(xid=9, zxid=0x1B, data=THREE_TEXT.encode(), stat=stat)), out)
    data, got = record.deserialize(b"".join(out)[4:], 16)
    assert (data, got.mzxid, got.version) == (THREE_TEXT.encode(), 0x1B, -1)


# ---------------------------------------------------------------- reconfigEnabled


def test_reconfig_enabled_is_zookeepers_property_off_by_default_and_on_in_zkraft_up(tmp_path: Path) -> None:
    def settings(extra: str) -> NodeSettings:
        config = tmp_path / "node.properties"
        config.write_text(f"id=1\ndataDir={tmp_path}/data\nserver.1=127.0.0.1:7001\n{extra}", encoding="utf-8")
        return load_node_settings(None, config)

    assert settings("").reconfig_enabled is False
    assert settings("reconfigEnabled=true\n").reconfig_enabled is True
    with pytest.raises(SettingsError) as error:
        settings("reconfigEnabled=maybe\n")
    assert "reconfigEnabled" in str(error.value) and "\n" not in str(error.value)
    plan = up_module.plan(tmp_path / "up", brokers=0, base_port=17001, broker_base_port=None)
    spec = plan.quorum[0]
    spec.config_path.parent.mkdir(parents=True, exist_ok=True)
    up_module.write_node_config(spec, {})
    assert read_properties_file(spec.config_path)["reconfigEnabled"] == "true"
