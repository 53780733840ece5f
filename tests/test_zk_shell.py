"""`zkraft zk`, the zkCli-compatible shell: parsing, formatting, error lines, completion and the REPL.

Everything but the last section runs against `FakeZk`, an in-memory
stand-in with the SDK's signatures; the `integration` tests run
`python3 -m zkraft zk` against a real 3-node quorum serving ZooKeeper.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from client.zk import exceptions as zk_errors
from client.zk.acl import ACL, OPEN_ACL_UNSAFE, Id
from client.zk.states import AddWatchMode, EventType, KeeperState, WatchedEvent, WatcherType, ZkState, ZnodeStat
from zkraft.tools import zk_shell
from zkraft.tools.zk_shell import (
    COMMANDS,
    ParsedCommand,
    Shell,
    ShellError,
    ShellUsageError,
    TreeNode,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
T0_MS = 1_795_338_300_000  # Sun Nov 22 2026 09:05:00 UTC


def stat(**fields: int) -> ZnodeStat:
    base = dict(
        czxid=0,
        mzxid=0,
        ctime=0,
        mtime=0,
        version=0,
        cversion=0,
        aversion=0,
        ephemeralOwner=0,
        dataLength=0,
        numChildren=0,
        pzxid=0,
    )
    base.update(fields)
    return ZnodeStat(**base)


class FakeZk:
    """An in-memory tree with the SDK's calls and errors; enough ZooKeeper to drive every command."""

    SESSION_ID = 0x1000000ABC

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, ZnodeStat]] = {"/": (b"", stat()), "/zookeeper": (b"", stat())}
        self.zxid = 1
        self.sequence = 0
        self.state = ZkState.LOST
        self.listeners: list[Callable[[Any], None]] = []
        self.watches: dict[str, list[Callable[[Any], None]]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.fail_start: Exception | None = None
        self.acls: dict[str, list[ACL]] = {}
        self.auth: list[tuple[str, str]] = [("ip", "127.0.0.1")]

    # lifecycle
    def add_listener(self, listener: Callable[[Any], None]) -> None:
        self.listeners.append(listener)

    def start(self) -> None:
        if self.fail_start is not None:
            raise self.fail_start
        self.state = ZkState.CONNECTED

    def stop(self) -> None:
        if self.state != ZkState.LOST:
            self.state = ZkState.LOST
            for listener in self.listeners:
                listener(ZkState.LOST)

    def close(self) -> None:
        self.stop()

    # helpers
    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = (p[len(prefix) :] for p in self.nodes if p != path and p.startswith(prefix))
        return [name for name in names if "/" not in name]

    def _require(self, path: str) -> tuple[bytes, ZnodeStat]:
        if path not in self.nodes:
            raise zk_errors.NoNodeError(path=path)
        return self.nodes[path]

    def _watch(self, path: str, watch: Callable[[Any], None] | None) -> None:
        if watch is not None:
            self.watches.setdefault(path, []).append(watch)

    def _fire(self, path: str, kind: EventType) -> None:
        for watch in self.watches.pop(path, []):
            watch(WatchedEvent(kind, KeeperState.CONNECTED, path))

    # the API
    def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        container: bool = False,
        ttl_ms: int = 0,
        acl: Any = None,
    ) -> str:
        if container or ttl_ms:
            self.calls.append(("create", path, container, ttl_ms))
        if acl is not None:
            self.acls[path] = list(acl)
        parent = path.rsplit("/", 1)[0] or "/"
        if parent not in self.nodes:
            raise zk_errors.NoNodeError(path=path)
        if self.nodes[parent][1].ephemeralOwner:
            raise zk_errors.NoChildrenForEphemeralsError(path=path)
        if sequence:
            path = f"{path}{self.sequence:010d}"
            self.sequence += 1
        if path in self.nodes:
            raise zk_errors.NodeExistsError(path=path)
        self.zxid += 1
        owner = self.SESSION_ID if ephemeral else 0
        self.nodes[path] = (
            value,
            stat(czxid=self.zxid, mzxid=self.zxid, pzxid=self.zxid, ctime=T0_MS, mtime=T0_MS, ephemeralOwner=owner),
        )
        self.nodes[path] = (value, self.nodes[path][1]._replace(dataLength=len(value)))
        self._fire(parent, EventType.CHILD)
        return path

    def get(self, path: str, watch: Callable[[Any], None] | None = None) -> tuple[bytes, ZnodeStat]:
        data, node_stat = self._require(path)
        self._watch(path, watch)
        return data, node_stat._replace(numChildren=len(self._children(path)))

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> ZnodeStat | None:
        self._watch(path, watch)
        return self.get(path)[1] if path in self.nodes else None

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        data, node_stat = self._require(path)
        if version not in (-1, node_stat.version):
            raise zk_errors.BadVersionError(path=path)
        self.zxid += 1
        node_stat = node_stat._replace(version=node_stat.version + 1, mzxid=self.zxid, dataLength=len(value))
        self.nodes[path] = (value, node_stat)
        self._fire(path, EventType.CHANGED)
        return node_stat

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        _data, node_stat = self._require(path)
        if recursive:
            for name in self._children(path):
                self.delete(f"{path.rstrip('/')}/{name}", recursive=True)
        elif self._children(path):
            raise zk_errors.NotEmptyError(path=path)
        if version not in (-1, node_stat.version):
            raise zk_errors.BadVersionError(path=path)
        del self.nodes[path]
        self._fire(path, EventType.DELETED)

    def get_children(self, path: str, watch: Callable[[Any], None] | None = None, include_data: bool = False) -> Any:
        self._require(path)
        self._watch(path, watch)
        children = self._children(path)
        return (children, self.get(path)[1]) if include_data else children

    def sync(self, path: str) -> str:
        self.calls.append(("sync", path))
        return path

    def get_ephemerals(self, prefix: str = "/") -> list[str]:
        return [p for p, (_d, s) in self.nodes.items() if s.ephemeralOwner and p.startswith(prefix)]

    def get_all_children_number(self, path: str) -> int:
        self._require(path)
        return sum(1 for p in self.nodes if p != path and p.startswith(path.rstrip("/") + "/"))

    def add_watch(self, path: str, watch: Callable[[Any], None], mode: AddWatchMode) -> None:
        self.calls.append(("add_watch", path, mode))

    def get_acls(self, path: str) -> tuple[list[ACL], ZnodeStat]:
        return self.acls.get(path, OPEN_ACL_UNSAFE), self.get(path)[1]

    def set_acls(self, path: str, acls: list[ACL], version: int = -1) -> ZnodeStat:
        _data, node_stat = self._require(path)
        if not acls:
            raise zk_errors.InvalidACLError(path=path)
        self.acls[path] = list(acls)
        node_stat = node_stat._replace(aversion=node_stat.aversion + 1)
        self.nodes[path] = (self.nodes[path][0], node_stat)
        return node_stat

    def add_auth(self, scheme: str, credential: str) -> bool:
        if scheme != "digest":
            raise zk_errors.AuthFailedError()
        self.auth.append((scheme, credential.split(":")[0]))
        return True

    def whoami(self) -> list[tuple[str, str]]:
        return list(self.auth)

    def remove_watches(self, path: str, watcher_type: WatcherType) -> None:
        if path not in self.watches and watcher_type != WatcherType.PERSISTENT:
            raise zk_errors.NoWatcherError(path=path)
        self.calls.append(("remove_watches", path, watcher_type))
        self.watches.pop(path, None)


class Console:
    """A Shell on a FakeZk with captured output."""

    def __init__(self, json_output: bool = False) -> None:
        self.zk = FakeZk()
        self.out = io.StringIO()
        self.err = io.StringIO()
        self.shell = Shell(
            "127.0.0.1:7001",
            json_output=json_output,
            out=self.out,
            err=self.err,
            client_factory=lambda hosts, timeout_s, session_ms: self.zk,
            tz=UTC,
        )
        self.shell.connect()

    def run(self, line: str) -> str:
        """Run one line as the REPL does; stdout since the last call."""
        self.out.seek(0)
        self.out.truncate()
        self.err.seek(0)
        self.err.truncate()
        self.shell.execute_line(line)
        return self.out.getvalue()

    def json(self, line: str) -> Any:
        return json.loads(self.run(line))

    @property
    def error(self) -> str:
        return self.err.getvalue()


@pytest.fixture
def console() -> Console:
    return Console()


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("line", "tokens"),
    [
        ("ls /", ["ls", "/"]),
        ("  get   -s  /a  ", ["get", "-s", "/a"]),
        ('create /a "hello world"', ["create", "/a", "hello world"]),
        ("create /a 'it is'", ["create", "/a", "it is"]),
        ('set /a {"x":1,"y":[1,2]}', ["set", "/a", '{"x":1,"y":[1,2]}']),
        ("", []),
    ],
)
def test_tokenize_groups_quotes_as_zkcli_does(line: str, tokens: list[str]) -> None:
    assert zk_shell.tokenize(line) == tokens


def parse(line: str) -> ParsedCommand:
    words = zk_shell.tokenize(line)
    return zk_shell.parse_args(COMMANDS[words[0]], words[1:])


def test_flags_parse_anywhere_clustered_or_with_values() -> None:
    assert parse("ls -s -w /a") == ParsedCommand("ls", frozenset("sw"), {}, ("/a",))
    assert parse("ls -swR /a").flags == frozenset("swR")
    assert parse("set /a data -v 3").options == {"v": "3"}
    assert parse("set -v3 /a data").options == {"v": "3"}
    assert parse("set /a -5").args == ("/a", "-5")  # a negative number is data
    assert parse("create /a -- -e").args == ("/a", "-e")  # -- ends the flags
    assert parse("removewatches /a -c").flags == frozenset("c")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ls -x /", "Unrecognized option: -x"),
        ("ls -sx /", "Unrecognized option: -sx"),
        ("set /a b -v", "Missing argument for option: v"),
        ("ls", "usage: ls [-s] [-w] [-R] path"),
        ("ls /a /b", "usage: ls [-s] [-w] [-R] path"),
        ("set /a", "usage: set [-s] [-v version] path data"),
        ("create", "usage: create [-s] [-e] [-c] [-t ttl] path [data] [acl]"),
    ],
)
def test_bad_arguments_are_usage_errors(line: str, message: str) -> None:
    with pytest.raises(ShellUsageError, match=f"^{message.replace('[', '.').replace(']', '.')}$"):
        parse(line)


@pytest.mark.parametrize(
    ("path", "sequential", "message"),
    [
        ("/", False, None),
        ("/a/b-c.d", False, None),
        ("/a/", True, None),  # a sequential prefix may end with / (ZooKeeper appends the counter)
        ("", False, "Path length must be > 0"),
        ("a", False, "Path must start with / character"),
        ("/a/", False, "Path must not end with / character"),
        ("/a//b", False, 'Invalid path string "/a//b" caused by empty node name specified @3'),
        ("/a/./b", False, 'Invalid path string "/a/./b" caused by relative paths not allowed @3'),
        ("/a/..", False, 'Invalid path string "/a/.." caused by relative paths not allowed @4'),
        ("/a\x01", False, 'Invalid path string "/a\x01" caused by invalid character @2'),
        ("/a\x00", False, 'Invalid path string "/a\x00" caused by null character not allowed @2'),
    ],
)
def test_paths_are_checked_with_zookeeper_messages(path: str, sequential: bool, message: str | None) -> None:
    if message is None:
        zk_shell.validate_path(path, sequential)
        return
    with pytest.raises(ShellError) as raised:
        zk_shell.validate_path(path, sequential)
    assert str(raised.value) == message


# ---------------------------------------------------------------- formatting


def test_java_date_matches_date_to_string() -> None:
    assert zk_shell.java_date(0, UTC) == "Thu Jan 01 00:00:00 UTC 1970"
    assert zk_shell.java_date(T0_MS, UTC) == "Sun Nov 22 09:05:00 UTC 2026"
    cet = timezone(timedelta(hours=1), "CET")
    assert zk_shell.java_date(T0_MS, cet) == "Sun Nov 22 10:05:00 CET 2026"


def test_stat_block_is_statprinter_layout() -> None:
    node = stat(
        czxid=0x1A,
        mzxid=0x2B,
        ctime=T0_MS,
        mtime=T0_MS + 1000,
        version=3,
        cversion=4,
        aversion=0,
        ephemeralOwner=0x100000ABC,
        dataLength=5,
        numChildren=2,
        pzxid=0x3C,
    )
    assert zk_shell.format_stat(node, UTC) == [
        "cZxid = 0x1a",
        "ctime = Sun Nov 22 09:05:00 UTC 2026",
        "mZxid = 0x2b",
        "mtime = Sun Nov 22 09:05:01 UTC 2026",
        "pZxid = 0x3c",
        "cversion = 4",
        "dataVersion = 3",
        "aclVersion = 0",
        "ephemeralOwner = 0x100000abc",
        "dataLength = 5",
        "numChildren = 2",
    ]
    assert zk_shell.format_stat(stat(), UTC)[0] == "cZxid = 0x0"
    # Long.toHexString of a negative owner is its two's complement
    assert zk_shell.format_stat(stat(ephemeralOwner=-1), UTC)[8] == "ephemeralOwner = 0xffffffffffffffff"


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (zk_errors.NoNodeError(path="/x"), "Node does not exist: /x"),
        (zk_errors.NodeExistsError(path="/x"), "Node already exists: /x"),
        (zk_errors.BadVersionError(path="/x"), "version No is not valid : /x"),
        (zk_errors.NotEmptyError(path="/x"), "Node not empty: /x"),
        (zk_errors.NoChildrenForEphemeralsError(path="/x/y"), "Ephemerals cannot have children: /x/y"),
        (zk_errors.BadArgumentsError(path="/x"), "Arguments are not valid : /x"),
        (zk_errors.NoAuthError(path="/x"), "Insufficient permission : /x"),
        (zk_errors.ConnectionLoss(), "KeeperErrorCode = ConnectionLoss for /cmd"),
        (zk_errors.SessionExpiredError(), "KeeperErrorCode = Session expired for /cmd"),
        (zk_errors.NoWatcherError(path="/x"), "KeeperErrorCode = No such watcher for /x"),
        (zk_errors.OperationTimeoutError(), "KeeperErrorCode = OperationTimeout for /cmd"),
        (zk_errors.ZkTimeoutError("no server answered within 2s"), "no server answered within 2s"),
    ],
)
def test_errors_map_to_zkcli_lines(error: zk_errors.ZkException, line: str) -> None:
    assert zk_shell.error_line(error, "/cmd") == line


def test_error_without_any_path() -> None:
    assert zk_shell.error_line(zk_errors.ConnectionLoss(), None) == "KeeperErrorCode = ConnectionLoss"


@pytest.mark.parametrize(
    ("data", "pretty"),
    [
        (b'{"version":1,"brokerid":2}', '{\n  "version": 1,\n  "brokerid": 2\n}'),
        (b" [1, 2] ", "[\n  1,\n  2\n]"),
        (b'{"name":"\xc3\xa9"}', '{\n  "name": "\u00e9"\n}'),
        (b"42", None),  # a JSON scalar prints raw
        (b'"text"', None),
        (b"{not json", None),
        (b"\xff{", None),
        (b"", None),
    ],
)
def test_pretty_json_only_for_objects_and_arrays(data: bytes, pretty: str | None) -> None:
    assert zk_shell.pretty_json(data) == pretty


def test_format_data_raw_base64_and_undecodable() -> None:
    assert zk_shell.format_data(b'{"a":1}', raw=True) == '{"a":1}'
    assert zk_shell.format_data(b"hi", as_base64=True) == "aGk="
    assert zk_shell.format_data(b"a\xffb") == "a\ufffdb"
    assert zk_shell.data_to_dict(b"\xff") == {"data": "/w==", "encoding": "base64"}
    assert zk_shell.data_to_dict(b'{"a":1}') == {"data": '{"a":1}', "encoding": "utf-8", "json": {"a": 1}}


def test_watch_events_print_as_zkcli_3_9() -> None:
    event = zk_shell.shell_event(WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/x", 0x1F))
    assert zk_shell.format_event(event) == [
        "",
        "WATCHER::",
        "",
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/x zxid: 31",
    ]
    session = zk_shell.shell_event(WatchedEvent(EventType.NONE, KeeperState.EXPIRED_SESSION, None))
    assert zk_shell.format_event(session)[3] == "WatchedEvent state:Expired type:None path:null zxid: -1"
    names = {zk_shell.shell_event(WatchedEvent(kind, KeeperState.CONNECTED, "/")).type for kind in EventType}
    assert names == {"NodeCreated", "NodeDeleted", "NodeDataChanged", "NodeChildrenChanged", "None"}


def test_tree_drawing() -> None:
    root = TreeNode("/a", stat(dataLength=3))
    b = TreeNode("/a/b", stat(dataLength=1))
    b.children.append(TreeNode("/a/b/c", stat(ephemeralOwner=7)))
    root.children += [b, TreeNode("/a/d", stat())]
    assert zk_shell.format_tree(root) == [
        "/a [3 B]",
        "├── b [1 B]",
        "│   └── c [0 B, ephemeral]",
        "└── d [0 B]",
    ]


# ---------------------------------------------------------------- completion


def test_completion_of_commands_and_paths() -> None:
    zk = FakeZk()
    for path in ("/brokers", "/brokers/ids", "/brokers/topics", "/admin"):
        zk.create(path)
    assert zk_shell.completions(zk, "", "get") == ["get", "getAcl", "getAllChildrenNumber", "getEphemerals"]
    assert zk_shell.completions(zk, "", "") == sorted(COMMANDS)
    assert zk_shell.completions(zk, "ls ", "/b") == ["/brokers"]
    assert zk_shell.completions(zk, "ls ", "/") == ["/admin", "/brokers", "/zookeeper"]
    assert zk_shell.completions(zk, "get -s ", "/brokers/") == ["/brokers/ids", "/brokers/topics"]
    assert zk_shell.completions(zk, "ls ", "/brokers/t") == ["/brokers/topics"]
    assert zk_shell.completions(zk, "ls ", "/nope/x") == []  # a missing parent offers nothing
    assert zk_shell.completions(zk, "ls ", "-") == []
    assert zk_shell.completions(None, "ls ", "/") == []  # not connected


# ---------------------------------------------------------------- commands on the fake


def test_create_get_set_stat_delete(console: Console) -> None:
    assert console.run("create /a hello") == "Created /a\n"
    assert console.run("get /a") == "hello\n"
    assert console.run("set /a world") == ""
    lines = console.run("get -s /a").splitlines()
    assert lines[0] == "world"
    assert lines[1:] == zk_shell.format_stat(console.zk.get("/a")[1], UTC)
    assert "dataVersion = 1" in console.run("stat /a")
    assert "dataVersion = 2" in console.run("set -s /a again")
    assert console.run("delete -v 2 /a") == ""
    assert "/a" not in console.zk.nodes


def test_create_containers_and_ttl_nodes_as_zkcli(console: Console) -> None:
    assert console.run("create -c /c") == "Created /c\n"
    assert console.run("create -t 5000 /t data") == "Created /t\n"
    assert console.run("create -s -t 7 /s-") == "Created /s-0000000000\n"
    assert [c for c in console.zk.calls if c[0] == "create"] == [
        ("create", "/c", True, 0),
        ("create", "/t", False, 5000),
        ("create", "/s-", False, 7),
    ]


def test_acl_commands_print_as_zkcli(console: Console) -> None:
    assert console.run("getAcl /zookeeper") == "'world,'anyone\n: cdrwa\n"
    assert console.run("create /p data digest:bob:aGFzaA==:cdrwa,ip:10.0.0.0/8:r") == "Created /p\n"
    assert console.zk.acls["/p"] == [ACL(31, Id("digest", "bob:aGFzaA==")), ACL(1, Id("ip", "10.0.0.0/8"))]
    assert console.run("getAcl /p") == "'digest,'bob:aGFzaA==\n: cdrwa\n'ip,'10.0.0.0/8\n: r\n"
    assert console.run("setAcl /p world:anyone:ra") == ""
    assert console.zk.acls["/p"] == [ACL(17, Id("world", "anyone"))]
    lines = console.run("setAcl -s /p world:anyone:cdrwa").splitlines()
    assert lines[7] == "aclVersion = 2" and len(lines) == 11
    assert console.run("getAcl -s /p").splitlines()[2:] == lines
    console.run("create /p/q")
    console.run("setAcl -R /p world:anyone:r")
    assert console.zk.acls["/p/q"] == [ACL(1, Id("world", "anyone"))]
    assert console.run("setAcl /p bad,world:anyone:rx") == ""
    assert console.error == "bad does not have the form scheme:id:perm\nUnknown perm type: x\n"
    assert console.run("addauth digest alice:pw") == ""
    assert console.run("whoami") == "Auth scheme: User\nip: 127.0.0.1\ndigest: alice\n"
    console.run("addauth kerberos x")
    assert console.error == "KeeperErrorCode = AuthFailed\n"
    console.run("setAcl /p nothing")
    assert console.error.splitlines() == ["nothing does not have the form scheme:id:perm", "Acl is not valid : /p"]
    as_json = Console(json_output=True)
    assert as_json.json("getAcl /zookeeper") == {
        "acl": [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}],
        "stat": zk_shell.stat_to_dict(as_json.zk.get("/zookeeper")[1]),
    }


def test_ls_variants(console: Console) -> None:
    for line in ("create /b", "create /a", "create /a/y", "create /a/x", "create /a/x/z"):
        console.run(line)
    assert console.run("ls /") == "[a, b, zookeeper]\n"
    assert console.run("ls /b") == "[]\n"
    assert console.run("ls -R /a").splitlines() == ["/a", "/a/x", "/a/y", "/a/x/z"]  # visitSubTreeDFS order
    lines = console.run("ls -s /a").splitlines()
    assert lines[0] == "[x, y]" and "numChildren = 2" in lines
    assert console.run("getAllChildrenNumber /a") == "3\n"


def test_sequential_ephemeral_and_ephemerals(console: Console) -> None:
    console.run("create /q")
    assert console.run("create -s /q/job- x") == "Created /q/job-0000000000\n"
    assert console.run("create -s -e /q/e-") == "Created /q/e-0000000001\n"
    assert console.run("getEphemerals") == "[/q/e-0000000001]\n"
    assert console.run("getEphemerals /nothing") == "[]\n"
    assert console.run("ls /q") == "[e-0000000001, job-0000000000]\n"


@pytest.mark.parametrize(
    ("setup", "line", "error"),
    [
        ([], "get /x", "Node does not exist: /x"),
        ([], "stat /x", "Node does not exist: /x"),
        ([], "ls -R /x", "Node does not exist: /x"),
        (["create /x"], "create /x", "Node already exists: /x"),
        ([], "create /x/y", "Node does not exist: /x/y"),
        (["create /x"], "set -v 7 /x d", "version No is not valid : /x"),
        (["create /x", "create /x/y"], "delete /x", "Node not empty: /x"),
        (["create -e /x"], "create /x/y", "Ephemerals cannot have children: /x/y"),
        ([], "get x", "Path must start with / character"),
        ([], "create /a/", "Path must not end with / character"),
        ([], "removewatches /x -d", "KeeperErrorCode = No such watcher for /x"),
        ([], "set -v one /x d", "-v argument must be an int value"),
        ([], "bogus /x", "Command not found bogus"),
        ([], "create -c -s /x", "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential."),
        ([], "create -t ten /x", "-t argument must be a long value"),
        ([], "create -e -t 10 /x", "TTLs cannot be used with Ephemeral znodes"),
        ([], "create -c -t 10 /x", "TTLs cannot be used with Container znodes"),
        ([], "create -t 0 /x", "ttl must be positive and cannot be larger than: 1099511627775"),
        ([], "create -t 1099511627776 /x", "ttl must be positive and cannot be larger than: 1099511627775"),
        ([], "addWatch -m ONCE /x", "usage: addWatch [-m mode] path"),
    ],
)
def test_failures_print_one_zkcli_line(console: Console, setup: list[str], line: str, error: str) -> None:
    for step in setup:
        console.run(step)
    assert console.run(line) == ""
    assert console.error.splitlines()[0].startswith(error)
    assert len(console.error.splitlines()) == 1
    assert console.shell.exit_code != 0


def test_exit_codes_follow_the_last_command(console: Console) -> None:
    assert console.shell.execute_line("get /missing") == zk_shell.EXIT_FAILURE
    assert console.shell.execute_line("ls") == zk_shell.EXIT_USAGE
    assert console.shell.execute_line("ls /") == zk_shell.EXIT_OK


def test_deleteall_and_rmr(console: Console) -> None:
    for line in ("create /t", "create /t/a", "create /t/a/b", "create /u"):
        console.run(line)
    assert console.run("deleteall /t") == ""
    assert "/t/a/b" not in console.zk.nodes and "/t" not in console.zk.nodes
    console.run("rmr /u")
    assert "deprecated" in console.error and "/u" not in console.zk.nodes


def test_get_pretty_prints_json_and_raw_flag(console: Console) -> None:
    console.run('create /j {"version":1,"host":"h"}')
    assert console.run("get /j") == '{\n  "version": 1,\n  "host": "h"\n}\n'
    assert console.run("get -r /j") == '{"version":1,"host":"h"}\n'


def test_sync_watches_and_printwatches(console: Console) -> None:
    assert console.run("sync /") == "Sync is OK\n"
    console.run("create /w v")
    console.run("get -w /w")
    assert (
        console.run("set /w v2")
        == "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/w zxid: -1\n"
    )
    console.run("ls -w /w")
    console.run("printwatches off")
    assert console.run("printwatches") == "printwatches is off\n"
    assert console.run("create /w/c") == "Created /w/c\n"  # the child watch fired silently
    console.run("printwatches on")
    console.run("addWatch -m persistent /w")
    console.run("addWatch /w")
    assert console.zk.calls[-2:] == [
        ("add_watch", "/w", AddWatchMode.PERSISTENT),
        ("add_watch", "/w", AddWatchMode.PERSISTENT_RECURSIVE),
    ]
    console.run("stat -w /w")
    console.run("removewatches /w -d")
    assert console.zk.calls[-1] == ("remove_watches", "/w", WatcherType.DATA)


def test_session_events_print_once_and_only_in_the_repl(console: Console) -> None:
    closed = WatchedEvent(EventType.NONE, KeeperState.CLOSED, None)
    console.shell.on_watch(closed)  # one-command mode: session events are not shown
    assert console.out.getvalue() == ""
    console.shell.show_session_events = True
    console.shell.on_watch(WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None))
    console.shell.on_watch(closed)
    console.shell.on_watch(closed)  # the same change again, e.g. to a second pending watcher
    console.shell._on_state(ZkState.CONNECTED)
    console.shell._on_state(ZkState.LOST)  # LOST while we are not closing: the session expired
    lines = console.out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("WatchedEvent")] == [
        "WatchedEvent state:Disconnected type:None path:null zxid: -1",
        "WatchedEvent state:Closed type:None path:null zxid: -1",
        "WatchedEvent state:SyncConnected type:None path:null zxid: -1",
        "WatchedEvent state:Expired type:None path:null zxid: -1",
    ]


def test_tree_command(console: Console) -> None:
    for line in ("create /t ab", "create /t/x", "create /t/x/y 123", "create -e /t/e"):
        console.run(line)
    assert console.run("tree /t").splitlines() == [
        "/t [2 B]",
        "├── e [0 B, ephemeral]",
        "└── x [0 B]",
        "    └── y [3 B]",
    ]
    assert console.run("tree -d 1 /t").splitlines() == ["/t [2 B]", "├── e [0 B, ephemeral]", "└── x [0 B]"]
    assert console.run("tree").splitlines()[0] == "/ [0 B]"


def test_json_output_is_one_document_per_command() -> None:
    console = Console(json_output=True)
    assert console.json('create /a {"k":[1]}') == {"created": "/a"}
    got = console.json("get /a")
    assert got["data"] == '{"k":[1]}' and got["json"] == {"k": [1]} and got["stat"]["dataLength"] == 9
    assert set(got["stat"]) == set(ZnodeStat._fields)
    assert console.json("ls /") == ["a", "zookeeper"]
    assert console.json("ls -s /")["children"] == ["a", "zookeeper"]
    assert console.json("ls -R /a") == ["/a"]
    assert console.json("stat /a")["version"] == 0
    assert console.json("set /a x")["version"] == 1
    assert console.json("getAllChildrenNumber /") == 2
    assert console.json("getEphemerals") == []
    assert console.json("sync /a") == {"synced": "/a"}
    assert console.json("tree /a") == {"path": "/a", "dataLength": 1, "ephemeral": False, "children": []}
    assert console.json("delete /a") == {"deleted": "/a"}
    assert console.run("get /a") == "" and console.error == "Node does not exist: /a\n"


def test_history_redo_and_prompt(console: Console) -> None:
    assert console.shell.prompt() == "[zk: 127.0.0.1:7001(CONNECTED) 0] "
    console.run("create /h 1")
    console.run("set /h 2")
    assert console.run("history") == "0 - create /h 1\n1 - set /h 2\n2 - history\n"
    assert console.run("redo 1") == ""
    assert console.zk.get("/h")[1].version == 2
    assert console.shell.history[3] == "set /h 2"  # the redone line replaces "redo 1"
    console.run("redo 3")
    assert console.zk.get("/h")[1].version == 3
    console.run("redo 9")
    assert console.error == "Command index out of range\n"
    console.run("redo 6")
    assert console.error == "Command index out of range\n"
    assert console.shell.prompt() == "[zk: 127.0.0.1:7001(CONNECTED) 7] "


def test_history_shows_the_last_eleven(console: Console) -> None:
    for i in range(15):
        console.run(f"ls /{i}")
    lines = console.run("history").splitlines()
    assert lines[0] == "5 - ls /5" and lines[-1] == "15 - history" and len(lines) == 11


def test_redo_refuses_redo(console: Console) -> None:
    console.run("ls /")
    console.run("redo 0")
    console.run("redo 1")  # history[1] became "ls /", so this one is allowed
    assert console.error == ""
    console.shell.history[2] = "redo 0"
    console.run("redo 2")
    assert console.error == "No redoing redos\n"


def test_close_then_commands_say_not_connected(console: Console) -> None:
    console.run("close")
    assert console.shell.prompt() == "[zk: 127.0.0.1:7001(CLOSED) 1] "
    assert console.run("ls /") == ""
    assert console.error == "Not connected\n"
    console.run("connect 127.0.0.1:7002")
    assert console.shell.prompt() == "[zk: 127.0.0.1:7002(CONNECTED) 3] "
    assert console.run("ls /") == "[zookeeper]\n"


def test_help_lists_every_command(console: Console) -> None:
    lines = console.run("help").splitlines()
    assert lines[0].startswith("zkraft zk --server")
    assert "\tls [-s] [-w] [-R] path" in lines
    assert "\tset [-s] [-v version] path data" in lines
    assert len(lines) == 1 + len(COMMANDS)


# ---------------------------------------------------------------- REPL and run()


def run_shell(
    command: list[str], stdin_text: str = "", json_output: bool = False, zk: FakeZk | None = None
) -> tuple[int, str, str]:
    zk = zk or FakeZk()
    out, err = io.StringIO(), io.StringIO()
    code = zk_shell.run(
        "127.0.0.1:7001",
        command,
        json_output=json_output,
        stdin=io.StringIO(stdin_text),
        out=out,
        err=err,
        client_factory=lambda hosts, timeout_s, session_ms: zk,
    )
    return code, out.getvalue(), err.getvalue()


def test_repl_runs_a_scripted_stdin() -> None:
    script = 'create /r {"a":1}\nget /r\n\nls /\nget /nope\nls /r\n'
    code, out, err = run_shell([], script)
    assert out == 'Created /r\n{\n  "a": 1\n}\n[r, zookeeper]\n[]\n'
    assert err == "Node does not exist: /nope\n"
    assert code == 0  # the last command succeeded


def test_repl_exit_code_is_the_last_commands_and_quit_stops() -> None:
    code, out, err = run_shell([], "get /nope\nquit\nls /\n")
    assert (code, out, err) == (1, "", "Node does not exist: /nope\n")


def test_repl_prints_session_events() -> None:
    zk = FakeZk()
    code, out, _err = run_shell([], "close\n", zk=zk)
    assert code == 0
    assert out == "\nWATCHER::\n\nWatchedEvent state:Closed type:None path:null zxid: -1\n"


def test_one_command_mode_raises_the_zkcli_line() -> None:
    assert run_shell(["create", "/o", "v"])[:2] == (0, "Created /o\n")
    with pytest.raises(ShellError, match="^Node does not exist: /o$"):
        run_shell(["get", "/o"])
    with pytest.raises(ShellUsageError, match="^Command not found nope$"):
        run_shell(["nope"])
    assert run_shell(["ls", "/"], json_output=True)[1] == '["zookeeper"]\n'


def test_connection_failure_is_one_line() -> None:
    zk = FakeZk()
    zk.fail_start = zk_errors.ZkTimeoutError("no server answered")
    with pytest.raises(ShellError, match=r"^cannot connect to 127.0.0.1:7001 within 10s: no server answered$"):
        run_shell(["ls", "/"], zk=zk)


def test_bad_server_list_is_a_usage_error() -> None:
    with pytest.raises(ShellUsageError, match="not host:port"):
        zk_shell.run("nohost", ["ls", "/"], client_factory=lambda *a: FakeZk())
    assert zk_shell.check_hosts("h1:1,h2:2/kafka") == "h1:1,h2:2/kafka"


# ---------------------------------------------------------------- the real command


def zkraft(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    env.pop("ZKRAFT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "zkraft", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def assert_error_line(result: subprocess.CompletedProcess[str], expected: str, exit_code: int = 1) -> None:
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"zkraft: error: {expected}"], result.stderr
    assert result.returncode == exit_code


def test_cli_usage_errors_without_a_server() -> None:
    assert_error_line(zkraft("zk", "--server", "nohost", "ls", "/"), "--server: 'nohost' is not host:port", 2)
    assert_error_line(
        zkraft("zk", "--timeout", "0", "ls", "/"),
        "argument --timeout: must be > 0 seconds, got '0' (see 'zkraft zk --help')",
        2,
    )


def _sdk_available() -> bool:
    import client

    return hasattr(client, "ZkClient")


@pytest.mark.skipif(not _sdk_available(), reason="the ZooKeeper SDK (client.ZkClient) is not there yet")
def test_cli_unreachable_server_is_one_line() -> None:
    from tests.quorum_harness import free_ports

    (port,) = free_ports(1)
    result = zkraft("zk", "--server", f"127.0.0.1:{port}", "--timeout", "1", "ls", "/")
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"zkraft: error: cannot connect to 127.0.0.1:{port} within 1s")


def _zookeeper_service_available() -> bool:
    return _sdk_available() and (REPO_ROOT / "zkemu" / "tree.py").exists()


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.quorum_harness import QuorumProcesses, wait_for_leader

    root = tmp_path_factory.mktemp("zk-shell")
    with QuorumProcesses(root, properties={"quorum.state.machine": "zookeeper", "raft.tick.ms": "20"}) as cluster:
        cluster.start_all()
        asyncio.run(wait_for_leader(cluster.addresses, timeout_s=30))
        yield ",".join(cluster.addresses.values())


needs_zookeeper_service = pytest.mark.skipif(
    not _zookeeper_service_available(), reason="the ZooKeeper service (zkemu) is not there yet"
)


@pytest.mark.integration
@pytest.mark.timeout(180)
@needs_zookeeper_service
def test_zk_commands_against_a_real_quorum(zk_server: str) -> None:
    server = ["zk", "--server", zk_server]
    created = zkraft(*server, "create", "/shell-a", '{"x":1}')
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created /shell-a\n", "")
    got = zkraft(*server, "get", "-s", "/shell-a")
    assert got.returncode == 0 and got.stdout.startswith('{\n  "x": 1\n}\ncZxid = 0x')
    assert "dataLength = 7" in got.stdout and "ephemeralOwner = 0x0" in got.stdout
    listed = zkraft(*server, "ls", "/")
    assert listed.returncode == 0 and "shell-a" in listed.stdout and listed.stdout.startswith("[")
    stat_lines = zkraft(*server, "stat", "/shell-a").stdout.splitlines()
    assert [line.split(" = ")[0] for line in stat_lines] == [
        "cZxid", "ctime", "mZxid", "mtime", "pZxid", "cversion", "dataVersion", "aclVersion",
        "ephemeralOwner", "dataLength", "numChildren",
    ]  # fmt: skip
    as_json = json.loads(zkraft(*server, "--json", "get", "/shell-a").stdout)
    assert as_json["json"] == {"x": 1} and as_json["stat"]["dataLength"] == 7
    assert json.loads(zkraft(*server, "--json", "stat", "/shell-a").stdout)["version"] == 0
    assert "shell-a" in json.loads(zkraft(*server, "--json", "ls", "/").stdout)
    seq = zkraft(*server, "create", "-s", "/shell-a/n-")
    assert seq.returncode == 0 and seq.stdout.startswith("Created /shell-a/n-00000000")
    assert_error_line(zkraft(*server, "delete", "/shell-a"), "Node not empty: /shell-a")
    assert_error_line(zkraft(*server, "create", "/shell-a"), "Node already exists: /shell-a")
    assert_error_line(zkraft(*server, "set", "-v", "9", "/shell-a", "y"), "version No is not valid : /shell-a")
    assert zkraft(*server, "deleteall", "/shell-a").returncode == 0
    assert_error_line(zkraft(*server, "get", "/shell-a"), "Node does not exist: /shell-a")
    assert_error_line(zkraft(*server, "ls", "shell-a"), "Path must start with / character")
    assert_error_line(zkraft(*server, "ls"), "usage: ls [-s] [-w] [-R] path", 2)


@pytest.mark.integration
@pytest.mark.timeout(180)
@needs_zookeeper_service
def test_zk_create_container_and_ttl_against_a_real_quorum(zk_server: str) -> None:
    server = ["zk", "--server", zk_server]
    created = zkraft(*server, "create", "-c", "/shell-box")
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created /shell-box\n", "")
    assert "ephemeralOwner = 0x0" in zkraft(*server, "stat", "/shell-box").stdout
    # The quorum runs without zookeeper.extendedTypesEnabled: TTL nodes are refused as ZooKeeper refuses them.
    assert_error_line(
        zkraft(*server, "create", "-t", "5000", "/shell-ttl"), "KeeperErrorCode = Unimplemented for /shell-ttl"
    )
    assert_error_line(
        zkraft(*server, "create", "-t", "0", "/shell-ttl"),
        "ttl must be positive and cannot be larger than: 1099511627775",
    )


@pytest.mark.integration
@pytest.mark.timeout(180)
@needs_zookeeper_service
def test_zk_repl_against_a_real_quorum(zk_server: str) -> None:
    script = "create /shell-r v1\nget -w /shell-r\nset /shell-r v2\nls /shell-r\ndelete /shell-r\nquit\n"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "zk", "--server", zk_server],
        cwd=REPO_ROOT,
        env=env,
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("Created /shell-r\nv1\n")
    assert "WatchedEvent state:SyncConnected type:NodeDataChanged path:/shell-r" in result.stdout
    assert result.stdout.endswith("[]\n")


@pytest.mark.integration
@pytest.mark.timeout(180)
@needs_zookeeper_service
def test_zk_acl_commands_against_a_real_quorum(zk_server: str) -> None:
    """addauth holds for the REPL's session; another session is refused what the digest ACL keeps."""
    digest = "alice:" + base64.b64encode(hashlib.sha1(b"alice:pw").digest()).decode()  # noqa: S324
    script = (
        "addauth digest alice:pw\n"
        f"create /shell-acl v digest:{digest}:cdrwa\n"
        "getAcl /shell-acl\n"
        "create /shell-auth v auth::cdr\n"
        "getAcl /shell-auth\n"
        "whoami\n"
        "quit\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRPC_VERBOSITY": "NONE"}
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "zk", "--server", zk_server],
        cwd=REPO_ROOT,
        env=env,
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "Created /shell-acl\n"
        f"'digest,'{digest}\n: cdrwa\n"
        "Created /shell-auth\n"
        "'digest,'alice:x\n: cdr\n"  # without ADMIN the hash is masked (ZooKeeper 3.9)
        "Auth scheme: User\nip: 127.0.0.1\ndigest: alice\n"
    )
    server = ["zk", "--server", zk_server]
    assert_error_line(zkraft(*server, "get", "/shell-acl"), "Insufficient permission : /shell-acl")
    assert_error_line(zkraft(*server, "getAcl", "/shell-acl"), "Insufficient permission : /shell-acl")
    assert_error_line(zkraft(*server, "create", "/shell-bad", "v", "auth::cdrwa"), "Acl is not valid : /shell-bad")
    assert_error_line(zkraft(*server, "setAcl", "/shell-acl", "world:anyone:r"), "Insufficient permission : /shell-acl")
