"""`zkraft zk`: a shell that speaks zkCli (ZooKeeper 3.9's `zkCli.sh`) to our ZooKeeper-semantics quorum.

    zkraft zk --server 127.0.0.1:7001            # REPL: [zk: 127.0.0.1:7001(CONNECTED) 0]
    zkraft zk --server 127.0.0.1:7001 ls -R /    # one command, then exit
    zkraft zk --server 127.0.0.1:7001 --json get /brokers/ids/1

Commands, flags, the Stat block, `WATCHER::` lines and error lines are
zkCli's (`org.apache.zookeeper.cli.*Command`, `StatPrinter`,
`CliWrapperException`, `ZooKeeperMain`; docs/research/ecosystem.md §1), so what a
user types and greps for carries over. Beyond zkCli: `tree`, JSON payloads
pretty-printed by `get` (`get -r` prints them raw, as zkCli does), and
`--json`, one JSON document per command for scripts.

Layout: tokenizing and flag parsing (pure), formatting (pure), completion,
the `Shell` (session, watches, history) with one small handler per command
and a table from command name to handler, then the REPL and `run()`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, TextIO

from client.zk.acl import ACL, Id
from client.zk.exceptions import NoNodeError, ZkException, ZkTlsError, ZookeeperError
from client.zk.states import NO_ZXID, TTL_MS_MAX, AddWatchMode, WatcherType, ZkState, ZnodeStat
from runtime.client_config import zookeeper_client_tls_file
from runtime.tls import TlsConfig, TlsConfigError
from zkraft.tools.zk_reconfig import (
    RECONFIG_USAGE,
    ReconfigUsageError,
    client_config_string,
    parse_reconfig,
    read_members_file,
)

SERVER_DEFAULT = "127.0.0.1:7001"  # what `zkraft up` serves first
SESSION_TIMEOUT_MS_DEFAULT = 30_000  # zkCli's -timeout default
CONNECT_TIMEOUT_S_DEFAULT = 10.0
HISTORY_FILE = Path("~/.zkraft_history")
HISTORY_FILE_LINES_MAX = 1000
HISTORY_SHOWN = 11  # zkCli's `history` prints the last 11 commands (this one included)
TREE_NODES_MAX = 10_000  # `tree` stops walking after this many znodes

EXIT_OK = 0
EXIT_FAILURE = 1  # zkCli's CliException exit code
EXIT_USAGE = 2


class ShellError(Exception):
    """A command failed; the message is the one line zkCli prints (exit 1)."""

    exit_code = EXIT_FAILURE


class ShellUsageError(ShellError):
    """A command was typed wrong: unknown command, flag or arity (exit 2)."""

    exit_code = EXIT_USAGE


# ---------------------------------------------------------------- parsing

# ZooKeeperMain.MyCommandOptions: a token is a quoted string or runs to the
# next blank, so JSON such as {"a":1} stays one argument with its quotes.
_TOKEN = re.compile(r"\s*([^\"'\s]\S*|\"[^\"]*\"|'[^']*')\s*")
_QUOTED = re.compile(r"^(['\"])(.*)\1$", re.DOTALL)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$")


def tokenize(line: str) -> list[str]:
    """Split a command line as zkCli does: blanks separate, '...' and "..." group (quotes stripped)."""
    tokens = []
    for match in _TOKEN.finditer(line):
        token = match.group(1)
        quoted = _QUOTED.match(token)
        tokens.append(quoted.group(2) if quoted else token)
    return tokens


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    name: str
    flags: frozenset[str]
    options: Mapping[str, str]
    args: tuple[str, ...]

    def has(self, flag: str) -> bool:
        return flag in self.flags


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    usage: str  # zkCli's option string, printed by `help` and on a usage error
    run: Callable[[Shell, ParsedCommand], None]
    flags: str = ""  # boolean single-letter flags
    valued: str = ""  # single-letter options that take a value
    min_args: int = 0
    max_args: int = 0
    needs_session: bool = True
    # The words reach the handler as they are (reconfig's long options, -add/-remove/-members/-file).
    raw_args: bool = False

    def usage_line(self) -> str:
        return f"{self.name} {self.usage}".rstrip()


def parse_args(spec: CommandSpec, words: Sequence[str]) -> ParsedCommand:
    """Flags anywhere among the arguments (commons-cli style: `-sw`, `-v 3`, `-v3`, `--` ends flags)."""
    if spec.raw_args:
        return ParsedCommand(spec.name, frozenset(), {}, tuple(words))
    flags: set[str] = set()
    options: dict[str, str] = {}
    args: list[str] = []
    pending = list(words)
    while pending:
        word = pending.pop(0)
        if word == "--":
            args.extend(pending)
            break
        if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
            args.append(word)
            continue
        for i, letter in enumerate(word[1:], start=1):
            if letter in spec.valued:
                value = word[i + 1 :] or (pending.pop(0) if pending else None)
                if value is None:
                    raise ShellUsageError(f"Missing argument for option: {letter}")
                options[letter] = value
                break
            if letter not in spec.flags:
                raise ShellUsageError(f"Unrecognized option: {word}")
            flags.add(letter)
    if not spec.min_args <= len(args) <= spec.max_args:
        raise ShellUsageError(f"usage: {spec.usage_line()}")
    return ParsedCommand(spec.name, frozenset(flags), options, tuple(args))


def parse_int_option(command: ParsedCommand, letter: str, default: int) -> int:
    text = command.options.get(letter)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ShellUsageError(f"-{letter} argument must be an int value") from None


def _is_invalid_char(c: str) -> bool:
    o = ord(c)
    return 0 < o <= 0x1F or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF or o >= 0xFFF0


def _path_reason(path: str) -> str | None:
    last = "/"
    for i in range(1, len(path)):
        c = path[i]
        at_name_end = i + 1 == len(path) or path[i + 1] == "/"
        if c == "\0":
            return f"null character not allowed @{i}"
        if c == "/" and last == "/":
            return f"empty node name specified @{i}"
        if c == "." and last == "." and path[i - 2] == "/" and at_name_end:
            return f"relative paths not allowed @{i}"
        if c == "." and last == "/" and at_name_end:
            return f"relative paths not allowed @{i}"
        if _is_invalid_char(c):
            return f"invalid character @{i}"
        last = c
    return None


def validate_path(path: str, sequential: bool = False) -> None:
    """ZooKeeper's client-side check (PathUtils.validatePath), with its messages, before any request."""
    checked = path + "1" if sequential else path
    if not checked:
        raise ShellError("Path length must be > 0")
    if not checked.startswith("/"):
        raise ShellError("Path must start with / character")
    if checked == "/":
        return
    if checked.endswith("/"):
        raise ShellError("Path must not end with / character")
    reason = _path_reason(checked)
    if reason is not None:
        raise ShellError(f'Invalid path string "{checked}" caused by {reason}')


# ---------------------------------------------------------------- formatting

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date(epoch_ms: int, tz: tzinfo | None = None) -> str:
    """`new Date(ms).toString()`: 'Thu Nov 21 10:38:15 UTC 2026', English names whatever the locale."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz).astimezone(tz)
    zone = moment.tzname() or "UTC"
    return (
        f"{_DAYS[moment.weekday()]} {_MONTHS[moment.month - 1]} {moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} {zone} {moment.year}"
    )


def format_stat(stat: ZnodeStat, tz: tzinfo | None = None) -> list[str]:
    """StatPrinter.print: the 11 lines in zkCli's order, zxids and the owner in hex."""
    return [
        f"cZxid = {stat.czxid:#x}",
        f"ctime = {java_date(stat.ctime, tz)}",
        f"mZxid = {stat.mzxid:#x}",
        f"mtime = {java_date(stat.mtime, tz)}",
        f"pZxid = {stat.pzxid:#x}",
        f"cversion = {stat.cversion}",
        f"dataVersion = {stat.version}",
        f"aclVersion = {stat.aversion}",
        f"ephemeralOwner = {stat.ephemeralOwner & 0xFFFF_FFFF_FFFF_FFFF:#x}",
        f"dataLength = {stat.dataLength}",
        f"numChildren = {stat.numChildren}",
    ]


def stat_to_dict(stat: ZnodeStat) -> dict[str, int]:
    return {name: int(value) for name, value in stat._asdict().items()}


def format_list(items: Iterable[str]) -> str:
    """Java's List.toString: '[a, b]'."""
    return "[" + ", ".join(items) + "]"


def pretty_json(data: bytes) -> str | None:
    """The payload re-indented (2 spaces) when it is a JSON object or array, else None."""
    stripped = data.strip()
    if not stripped or stripped[:1] not in (b"{", b"["):
        return None
    try:
        document = json.loads(stripped.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return json.dumps(document, indent=2, ensure_ascii=False)


def format_data(data: bytes, raw: bool = False, as_base64: bool = False) -> str:
    """What `get` prints: base64 (-b), raw UTF-8 as zkCli does (-r), else JSON pretty-printed."""
    if as_base64:
        return base64.b64encode(data).decode("ascii")
    if not raw:
        pretty = pretty_json(data)
        if pretty is not None:
            return pretty
    return data.decode("utf-8", errors="replace")


def data_to_dict(data: bytes) -> dict[str, Any]:
    """`--json` form of a payload: text when it is UTF-8 (plus the parsed document when JSON), else base64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"data": base64.b64encode(data).decode("ascii"), "encoding": "base64"}
    doc: dict[str, Any] = {"data": text, "encoding": "utf-8"}
    if pretty_json(data) is not None:
        doc["json"] = json.loads(text)
    return doc


# kazoo's names (client/zk/states.py) -> the names zkCli prints (Watcher.Event).
_EVENT_TYPE_NAMES = {
    "NONE": "None",
    "CREATED": "NodeCreated",
    "DELETED": "NodeDeleted",
    "CHANGED": "NodeDataChanged",
    "CHILD": "NodeChildrenChanged",
}
_KEEPER_STATE_NAMES = {
    "CONNECTED": "SyncConnected",
    "CONNECTING": "Disconnected",
    "EXPIRED_SESSION": "Expired",
    "AUTH_FAILED": "AuthFailed",
    "CONNECTED_RO": "ConnectedReadOnly",
    "CLOSED": "Closed",
}


@dataclass(frozen=True, slots=True)
class ShellEvent:
    """A watch or session event as zkCli names it."""

    type: str  # NodeDataChanged, None, ...
    state: str  # SyncConnected, Disconnected, Expired, Closed, ...
    path: str | None
    zxid: int = NO_ZXID


def shell_event(event: Any) -> ShellEvent:
    """From the client's WatchedEvent(type, state, path[, zxid])."""
    type_name = str(getattr(event.type, "value", event.type))
    state_name = str(getattr(event.state, "value", event.state))
    return ShellEvent(
        type=_EVENT_TYPE_NAMES.get(type_name, type_name),
        state=_KEEPER_STATE_NAMES.get(state_name, state_name),
        path=event.path,
        zxid=event.zxid,
    )


def format_event(event: ShellEvent) -> list[str]:
    """ZooKeeperMain's watcher: printMessage("WATCHER::") then the event, each after a blank line (3.9 adds zxid)."""
    path = "null" if event.path is None else event.path
    return ["", "WATCHER::", "", f"WatchedEvent state:{event.state} type:{event.type} path:{path} zxid: {event.zxid}"]


def event_to_dict(event: ShellEvent) -> dict[str, Any]:
    return {"event": {"type": event.type, "state": event.state, "path": event.path, "zxid": event.zxid}}


# KeeperException.getCodeMessage, for codes CliWrapperException has no sentence for.
_CODE_MESSAGES = {
    -1: "SystemError",
    -2: "RuntimeInconsistency",
    -3: "DataInconsistency",
    -4: "ConnectionLoss",
    -5: "MarshallingError",
    -6: "Unimplemented",
    -7: "OperationTimeout",
    -8: "BadArguments",
    -12: "Unknown session",
    -13: "NewConfigNoQuorum",
    -14: "ReconfigInProgress",
    -100: "APIError",
    -101: "NoNode",
    -102: "NoAuth",
    -103: "BadVersion",
    -108: "NoChildrenForEphemerals",
    -110: "NodeExists",
    -111: "Directory not empty",
    -112: "Session expired",
    -113: "Invalid callback",
    -114: "InvalidACL",
    -115: "AuthFailed",
    -118: "Session moved",
    -119: "Not a read-only call",
    -120: "Ephemeral node on local session",
    -121: "No such watcher",
    -122: "Request timeout",
    -123: "Reconfig is disabled",
    -124: "Session closed because client failed to authenticate",
    -125: "Quota has exceeded",
    -127: "Op throttled due to high load",
}
# CliWrapperException's sentences, "{}" being the path.
_CLI_MESSAGES = {
    -101: "Node does not exist: {}",
    -108: "Ephemerals cannot have children: {}",
    -110: "Node already exists: {}",
    -111: "Node not empty: {}",
    -119: "Not a read-only call: {}",
    -114: "Acl is not valid : {}",
    -102: "Insufficient permission : {}",
    -8: "Arguments are not valid : {}",
    -103: "version No is not valid : {}",
    -14: "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)",
    -13: (
        "No quorum of new config is connected and up-to-date with the leader of last commmitted config"
        " - try invoking reconfiguration after new servers are connected and synced"
    ),
}


def error_line(error: ZkException, path: str | None) -> str:
    """The line zkCli prints for a failed call; `path` is the command's, used when the error names none."""
    if not isinstance(error, ZookeeperError):
        return " ".join(str(error).split()) or type(error).__name__
    where = error.path or path
    sentence = _CLI_MESSAGES.get(error.code)
    if sentence is not None:
        return sentence.format(where)
    code_message = _CODE_MESSAGES.get(error.code, f"Unknown error {error.code}")
    return f"KeeperErrorCode = {code_message}" + (f" for {where}" if where else "")


# ZKUtil.getPermString's letters, in its order.
_PERM_LETTERS = (("c", 4), ("d", 8), ("r", 1), ("w", 2), ("a", 16))


def perm_string(perms: int) -> str:
    return "".join(letter for letter, bit in _PERM_LETTERS if perms & bit)


def parse_acl(text: str, warn: Callable[[str], None]) -> list[ACL]:
    """AclParser.parse: comma-separated `scheme:id:perm`; what is not of that form is skipped with
    zkCli's line (an empty result is the server's InvalidACL)."""
    letters = dict(_PERM_LETTERS)
    entries = []
    for item in text.split(","):
        first, last = item.find(":"), item.rfind(":")
        if first == -1 or first == last:
            warn(f"{item} does not have the form scheme:id:perm")
            continue
        perms = 0
        for letter in item[last + 1 :]:
            if letter not in letters:
                warn(f"Unknown perm type: {letter}")
                continue
            perms |= letters[letter]
        entries.append(ACL(perms, Id(item[:first], item[first + 1 : last])))
    return entries


def _jute_string(text: str) -> str:
    """A string as jute's ToStringOutputArchive writes it (escapeString): a quote, then escapes."""
    escapes = {"\0": "%00", "\n": "%0A", "\r": "%0D", ",": "%2C", "}": "%7D", "%": "%25"}
    return "'" + "".join(escapes.get(c, c) for c in text)


def format_acl(entries: Iterable[ACL]) -> list[str]:
    """GetAclCommand: `Id.toString()` (jute: `'scheme,'id` and a newline), then `: perms`."""
    lines = []
    for entry in entries:
        lines.append(f"{_jute_string(entry.id.scheme)},{_jute_string(entry.id.id)}")
        lines.append(f": {perm_string(entry.perms)}")
    return lines


def acl_to_dict(entries: Iterable[ACL]) -> list[dict[str, Any]]:
    return [{"scheme": e.id.scheme, "id": e.id.id, "perms": perm_string(e.perms)} for e in entries]


@dataclass(slots=True)
class TreeNode:
    path: str
    stat: ZnodeStat
    children: list[TreeNode] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path if self.path == "/" else self.path.rsplit("/", 1)[1]


def _tree_label(node: TreeNode, name: str) -> str:
    size = f"{node.stat.dataLength} B"
    return f"{name} [{size}, ephemeral]" if node.stat.ephemeralOwner else f"{name} [{size}]"


def format_tree(root: TreeNode) -> list[str]:
    """`tree`: the root's path, then one line per descendant drawn with ├── └── │, each with its data size."""
    lines = [_tree_label(root, root.path)]

    def walk(node: TreeNode, indent: str) -> None:
        for i, child in enumerate(node.children):
            last = i == len(node.children) - 1
            lines.append(f"{indent}{'└── ' if last else '├── '}{_tree_label(child, child.name)}")
            walk(child, indent + ("    " if last else "│   "))

    walk(root, "")
    return lines


def tree_to_dict(node: TreeNode) -> dict[str, Any]:
    return {
        "path": node.path,
        "dataLength": node.stat.dataLength,
        "ephemeral": bool(node.stat.ephemeralOwner),
        "children": [tree_to_dict(child) for child in node.children],
    }


def child_path(parent: str, name: str) -> str:
    return parent + name if parent.endswith("/") else f"{parent}/{name}"


# ---------------------------------------------------------------- completion


def completions(client: Any, line_before: str, word: str) -> list[str]:
    """JLineZNodeCompleter: command names for the first word, full znode paths for a word starting with /.

    A path completes from the children of the part up to its last '/'.
    """
    if not line_before.strip():
        return sorted(name for name in COMMANDS if name.startswith(word))
    if not word.startswith("/") or client is None:
        return []
    cut = word.rfind("/")
    parent, prefix = word[:cut] or "/", word[cut + 1 :]
    try:
        children = client.get_children(parent)
    except ZkException:  # a parent that does not exist (yet) has nothing to offer
        return []
    return [child_path(parent, name) for name in sorted(children) if name.startswith(prefix)]


class _ReadlineCompleter:
    """readline's `completer(text, state)` protocol over `completions()`."""

    def __init__(self, shell: Shell, readline: Any) -> None:
        self._shell = shell
        self._readline = readline
        self._matches: list[str] = []

    def __call__(self, text: str, state: int) -> str | None:
        if state == 0:
            before = self._readline.get_line_buffer()[: self._readline.get_begidx()]
            self._matches = completions(self._shell.client, before, text)
        return self._matches[state] if state < len(self._matches) else None


# ---------------------------------------------------------------- the shell


# kazoo-style ZkState -> ZooKeeper.States in the prompt.
_PROMPT_STATES: dict[str, str] = {ZkState.CONNECTED: "CONNECTED", ZkState.SUSPENDED: "CONNECTING"}


def _default_client_factory(hosts: str, timeout_s: float, session_timeout_ms: int, tls: TlsConfig | None = None) -> Any:
    from client import ZkClient  # imported late: the whole SDK, only when a session is opened
    from runtime.jaas import JaasError, sasl_options_from_env

    # zkCli.sh passes CLIENT_JVMFLAGS to the JVM: a JAAS file there makes the session log in (SASL DIGEST-MD5).
    try:
        sasl = sasl_options_from_env("CLIENT_JVMFLAGS")
    except JaasError as error:
        raise ShellError(f"CLIENT_JVMFLAGS: {error}") from None
    return ZkClient(hosts, timeout=timeout_s, session_timeout_ms=session_timeout_ms, tls=tls, sasl_options=sasl)


def _dispose(client: Any) -> None:
    """Close the session and free the client; a broken session is left to the server to expire."""
    with contextlib.suppress(ZkException, OSError):
        client.stop()
    with contextlib.suppress(ZkException, OSError):
        client.close()


class Shell:
    """One zkCli session: the client, watch printing, the numbered history and the output streams."""

    def __init__(
        self,
        hosts: str,
        *,
        json_output: bool = False,
        timeout_s: float = CONNECT_TIMEOUT_S_DEFAULT,
        session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT,
        out: TextIO | None = None,
        err: TextIO | None = None,
        client_factory: Callable[[str, float, int], Any] = _default_client_factory,
        tz: tzinfo | None = None,
    ) -> None:
        self.hosts = hosts
        self.json_output = json_output
        self.timeout_s = timeout_s
        self.session_timeout_ms = session_timeout_ms
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.client: Any = None
        self.print_watches = True
        self.show_session_events = False  # the REPL shows connection changes, a one-shot command does not
        self.history: dict[int, str] = {}
        self.command_count = 0
        self.exit_code = EXIT_OK
        self.tz = tz
        self._client_factory = client_factory
        self._closing = False
        self._session_state_shown: str | None = None
        self._output_lock = threading.RLock()  # watch callbacks print from the client's thread

    # ---- output

    def write(self, lines: str | Iterable[str], stream: TextIO | None = None) -> None:
        text = lines if isinstance(lines, str) else "\n".join(lines)
        with self._output_lock:
            target = stream or self.out
            target.write(text + "\n")
            target.flush()

    def emit(self, text: str | Iterable[str], document: Any) -> None:
        """A command's result: zkCli's text, or one JSON document with --json."""
        self.write(json.dumps(document, ensure_ascii=False) if self.json_output else text)

    def emit_json(self, document: Any) -> None:
        """The result of a command that prints nothing in zkCli: a JSON document with --json only."""
        if self.json_output:
            self.write(json.dumps(document, ensure_ascii=False))

    def warn(self, line: str) -> None:
        self.write(line, self.err)

    def on_watch(self, event: Any) -> None:
        shown = shell_event(event)
        if shown.type == "None":  # a session event: zkCli's one default watcher prints it once
            self._session_event(shown.state)
        elif self.print_watches:
            self._print_event(shown)

    def _print_event(self, event: ShellEvent) -> None:
        self.write(json.dumps(event_to_dict(event)) if self.json_output else format_event(event))

    def _on_state(self, state: Any) -> None:
        name = str(getattr(state, "value", state))
        keeper = {"CONNECTED": "SyncConnected", "SUSPENDED": "Disconnected"}.get(name)
        self._session_event(keeper or ("Closed" if self._closing else "Expired"))

    def _session_event(self, keeper: str) -> None:
        """Print a session state change once (the SDK may report one change twice, e.g. stop then close)."""
        with self._output_lock:
            if keeper == self._session_state_shown:
                return
            self._session_state_shown = keeper
        if self.show_session_events and self.print_watches:
            self._print_event(ShellEvent("None", keeper, None))

    # ---- session

    def connected(self) -> bool:
        return self.client is not None and self.client.state != ZkState.LOST

    def state_name(self) -> str:
        """ZooKeeper.States as zkCli's prompt shows them: CONNECTED, CONNECTING (suspended) or CLOSED."""
        if self.client is None:
            return "CLOSED"
        return _PROMPT_STATES.get(str(self.client.state), "CLOSED")

    def prompt(self) -> str:
        return f"[zk: {self.hosts}({self.state_name()}) {self.command_count}] "

    def connect(self, hosts: str | None = None) -> None:
        self.close()
        self.hosts = hosts or self.hosts
        client = self._client_factory(self.hosts, self.timeout_s, self.session_timeout_ms)
        self._session_state_shown = None
        client.add_listener(self._on_state)
        try:
            client.start()
        except (ZkException, OSError, ValueError) as error:
            _dispose(client)
            reason = " ".join(str(error).split()) or type(error).__name__
            if isinstance(error, ZkTlsError):  # refused at once, not a timeout
                raise ShellError(f"cannot connect to {self.hosts}: {reason}") from None
            raise ShellError(f"cannot connect to {self.hosts} within {self.timeout_s:g}s: {reason}") from None
        self.client = client
        self._session_event("SyncConnected")  # now, not whenever the listener's thread gets to it

    def close(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        self._closing = True
        try:
            _dispose(client)
        finally:
            self._closing = False

    # ---- commands

    def execute_line(self, line: str) -> int:
        """ZooKeeperMain.executeLine: number and remember the line, run it, print its error; the exit code."""
        if not line.strip():
            return self.exit_code
        self.history[self.command_count] = line
        try:
            self.run_tokens(tokenize(line))
            self.exit_code = EXIT_OK
        except ShellError as error:
            self.warn(str(error))
            self.exit_code = error.exit_code
        finally:
            self.command_count += 1
        return self.exit_code

    def run_tokens(self, tokens: Sequence[str]) -> None:
        """Run one command; a failure raises ShellError with zkCli's line."""
        if not tokens:
            raise ShellUsageError("No command entered")
        spec = COMMANDS.get(tokens[0])
        if spec is None:
            raise ShellUsageError(f"Command not found {tokens[0]}")
        command = parse_args(spec, tokens[1:])
        if spec.needs_session and not self.connected():
            raise ShellError("Not connected")
        path = next((arg for arg in command.args if arg.startswith("/")), None)
        try:
            spec.run(self, command)
        except ZkException as error:
            raise ShellError(error_line(error, path)) from None

    def watcher(self, command: ParsedCommand) -> Callable[[Any], None] | None:
        return self.on_watch if command.has("w") else None


# ---------------------------------------------------------------- command handlers


def _ls(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    if command.has("R"):
        paths = list(_walk_paths(shell.client, path, shell.watcher(command)))
        shell.emit(paths, paths)
        return
    if command.has("s"):
        children, stat = shell.client.get_children(path, watch=shell.watcher(command), include_data=True)
        children = sorted(children)
        shell.emit(
            [format_list(children), *format_stat(stat, shell.tz)], {"children": children, "stat": stat_to_dict(stat)}
        )
        return
    children = sorted(shell.client.get_children(path, watch=shell.watcher(command)))
    shell.emit(format_list(children), children)


def _walk_paths(client: Any, root: str, watch: Callable[[Any], None] | None) -> Iterable[str]:
    """ZKUtil.visitSubTreeDFS: the root, then each node's sorted children before their own subtrees."""
    client.get(root, watch=watch)  # NoNode for a missing root, as zkCli
    yield root
    stack = [root]
    while stack:
        parent = stack.pop()
        try:
            names = sorted(client.get_children(parent, watch=watch))
        except NoNodeError:  # deleted while we walked
            continue
        paths = [child_path(parent, name) for name in names]
        yield from paths
        stack.extend(reversed(paths))


def _get(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    data, stat = shell.client.get(path, watch=shell.watcher(command))
    text = [format_data(data, raw=command.has("r"), as_base64=command.has("b"))]
    if command.has("s"):
        text += format_stat(stat, shell.tz)
    shell.emit(text, {"path": path, **data_to_dict(data), "stat": stat_to_dict(stat)})


def _stat(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    stat = shell.client.exists(path, watch=shell.watcher(command))
    if stat is None:
        raise ShellError(f"Node does not exist: {path}")
    shell.emit(format_stat(stat, shell.tz), stat_to_dict(stat))


def _create(shell: Shell, command: ParsedCommand) -> None:
    """zkCli's CreateCommand: its checks of -s/-e/-c/-t in its order, with its messages."""
    sequential, ephemeral, container = command.has("s"), command.has("e"), command.has("c")
    if container and (ephemeral or sequential):
        raise ShellError("-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.")
    ttl_ms = _create_ttl_ms(command.options.get("t"), ephemeral, container)
    path = command.args[0]
    validate_path(path, sequential)
    data = command.args[1].encode("utf-8") if len(command.args) > 1 else b""
    acl = {"acl": parse_acl(command.args[2], shell.warn)} if len(command.args) > 2 else {}
    created = shell.client.create(
        path, data, ephemeral=ephemeral, sequence=sequential, container=container, ttl_ms=ttl_ms, **acl
    )
    shell.emit(f"Created {created}", {"created": created})


def _create_ttl_ms(text: str | None, ephemeral: bool, container: bool) -> int:
    """The value of create's -t (0 without it), checked as zkCli checks it."""
    if text is None:
        return 0
    try:
        ttl_ms = int(text)
    except ValueError:
        raise ShellError("-t argument must be a long value") from None
    if ephemeral:
        raise ShellError("TTLs cannot be used with Ephemeral znodes")
    if container:
        raise ShellError("TTLs cannot be used with Container znodes")
    if not 0 < ttl_ms <= TTL_MS_MAX:  # EphemeralType.TTL.toEphemeralOwner
        raise ShellError(f"ttl must be positive and cannot be larger than: {TTL_MS_MAX}")
    return ttl_ms


def _get_acl(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    entries, stat = shell.client.get_acls(path)
    lines = format_acl(entries) + (format_stat(stat, shell.tz) if command.has("s") else [])
    shell.emit(lines, {"acl": acl_to_dict(entries), "stat": stat_to_dict(stat)})


def _set_acl(shell: Shell, command: ParsedCommand) -> None:
    path, text = command.args
    validate_path(path)
    version = parse_int_option(command, "v", -1)
    entries = parse_acl(text, shell.warn)
    if command.has("R"):
        # ZKUtil.visitSubTreeDFS: the node, then every node below it.
        paths = [path, *(p for p in _walk_paths(shell.client, path, None) if p != path)]
        for each in paths:
            shell.client.set_acls(each, entries, version=version)
        shell.emit_json({"path": path, "nodes": len(paths)})
        return
    stat = shell.client.set_acls(path, entries, version=version)
    if command.has("s") or shell.json_output:
        shell.emit(format_stat(stat, shell.tz), stat_to_dict(stat))


def _addauth(shell: Shell, command: ParsedCommand) -> None:
    scheme = command.args[0]
    credential = command.args[1] if len(command.args) > 1 else ""
    shell.client.add_auth(scheme, credential)
    shell.emit_json({"scheme": scheme})


def _config(shell: Shell, command: ParsedCommand) -> None:
    """GetConfigCommand: the configuration's text (or, with -c, its client connect string), then the stat."""
    data, stat = shell.client.get_config(watch=shell.watcher(command))
    text = data.decode("utf-8", errors="replace") if data is not None else "null"
    lines = [client_config_string(text) if command.has("c") else text]
    if command.has("s"):
        lines += format_stat(stat, shell.tz)
    shell.emit(lines, {"config": lines[0], "stat": stat_to_dict(stat)})


def _reconfig(shell: Shell, command: ParsedCommand) -> None:
    """ReconfigCommand: `Committed new configuration:` and the new text, then the stat with -s. A refusal is
    zkCli's line for its code followed by the server's reason (ZooKeeperAdmin names no path)."""
    try:
        args = parse_reconfig(command.args)
        members = read_members_file(args.members_file) if args.members_file else args.members
    except ReconfigUsageError as error:
        raise ShellUsageError(str(error)) from None
    try:
        data, stat = shell.client.reconfig(args.joining, args.leaving, members, args.version)
    except ZookeeperError as error:
        sentence = error_line(error, "")
        raise ShellError(f"{sentence}{str(error) if sentence.endswith(': ') else ''}") from None
    lines = ["Committed new configuration:", data.decode("utf-8", errors="replace")]
    if args.stats:
        lines += format_stat(stat, shell.tz)
    shell.emit(lines, {"config": lines[1], "stat": stat_to_dict(stat)})


def _whoami(shell: Shell, _command: ParsedCommand) -> None:
    infos = list(shell.client.whoami())
    lines = ["Auth scheme: User", *(f"{scheme}: {user}" for scheme, user in infos)]
    shell.emit(lines, [{"scheme": scheme, "user": user} for scheme, user in infos])


def _set(shell: Shell, command: ParsedCommand) -> None:
    path, data = command.args
    validate_path(path)
    version = parse_int_option(command, "v", -1)
    stat = shell.client.set(path, data.encode("utf-8"), version=version)
    if command.has("s") or shell.json_output:
        shell.emit(format_stat(stat, shell.tz), stat_to_dict(stat))


def _delete(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    shell.client.delete(path, version=parse_int_option(command, "v", -1))
    shell.emit_json({"deleted": path})


def _deleteall(shell: Shell, command: ParsedCommand) -> None:
    if command.name == "rmr":
        shell.warn("The command 'rmr' has been deprecated. Please use 'deleteall' instead.")
    path = command.args[0]
    validate_path(path)
    shell.client.delete(path, recursive=True)
    shell.emit_json({"deleted": path})


def _sync(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    shell.client.sync(path)
    shell.emit("Sync is OK", {"synced": path})


def _get_ephemerals(shell: Shell, command: ParsedCommand) -> None:
    prefix = command.args[0] if command.args else "/"
    validate_path(prefix)
    paths = list(shell.client.get_ephemerals(prefix))
    shell.emit(format_list(paths), paths)


def _get_all_children_number(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    number = int(shell.client.get_all_children_number(path))
    shell.emit(str(number), number)


def _add_watch(shell: Shell, command: ParsedCommand) -> None:
    mode_name = command.options.get("m", AddWatchMode.PERSISTENT_RECURSIVE.name).upper()
    if mode_name not in AddWatchMode.__members__:
        raise ShellUsageError(f"usage: {COMMANDS['addWatch'].usage_line()}")
    path = command.args[0]
    validate_path(path)
    shell.client.add_watch(path, shell.on_watch, AddWatchMode[mode_name])
    shell.emit_json({"path": path, "mode": mode_name})


# removewatches flags -> Watcher.WatcherType; zkCli checks them in this order, ANY without a flag.
_WATCHER_TYPE_FLAGS = (
    ("c", WatcherType.CHILDREN),
    ("d", WatcherType.DATA),
    ("p", WatcherType.PERSISTENT),
    ("r", WatcherType.PERSISTENT_RECURSIVE),
    ("a", WatcherType.ANY),
)


def _remove_watches(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0]
    validate_path(path)
    watcher_type = next((kind for flag, kind in _WATCHER_TYPE_FLAGS if command.has(flag)), WatcherType.ANY)
    shell.client.remove_watches(path, watcher_type)
    shell.emit_json({"path": path, "watcherType": watcher_type.name})


def _tree(shell: Shell, command: ParsedCommand) -> None:
    path = command.args[0] if command.args else "/"
    validate_path(path)
    depth_max = parse_int_option(command, "d", -1)
    stat = shell.client.exists(path)
    if stat is None:
        raise ShellError(f"Node does not exist: {path}")
    root = TreeNode(path, stat)
    truncated = _grow_tree(shell.client, root, depth_max)
    lines = format_tree(root)
    if truncated:
        lines.append(f"(stopped after {TREE_NODES_MAX} znodes)")
    shell.emit(lines, tree_to_dict(root))


def _grow_tree(client: Any, root: TreeNode, depth_max: int) -> bool:
    """Fill `root` breadth-first with children and their stats; True when TREE_NODES_MAX cut it short."""
    count = 1
    level = [root]
    depth = 0
    while level and depth != depth_max:
        next_level: list[TreeNode] = []
        for node in level:
            with contextlib.suppress(NoNodeError):
                for name in sorted(client.get_children(node.path)):
                    if count >= TREE_NODES_MAX:
                        return True
                    stat = client.exists(child_path(node.path, name))
                    if stat is not None:
                        node.children.append(TreeNode(child_path(node.path, name), stat))
                        count += 1
            next_level.extend(node.children)
        level, depth = next_level, depth + 1
    return False


def _printwatches(shell: Shell, command: ParsedCommand) -> None:
    if not command.args:
        shell.write(f"printwatches is {'on' if shell.print_watches else 'off'}")
    else:
        shell.print_watches = command.args[0] == "on"


def _connect(shell: Shell, command: ParsedCommand) -> None:
    shell.connect(command.args[0] if command.args else None)


def _close(shell: Shell, _command: ParsedCommand) -> None:
    shell.close()


def _history(shell: Shell, _command: ParsedCommand) -> None:
    first = max(0, shell.command_count - HISTORY_SHOWN + 1)
    numbers = [i for i in range(first, shell.command_count + 1) if i in shell.history]
    shell.emit(
        [f"{i} - {shell.history[i]}" for i in numbers],
        [{"number": i, "command": shell.history[i]} for i in numbers],
    )


def _redo(shell: Shell, command: ParsedCommand) -> None:
    try:
        number = int(command.args[0], 0)
    except ValueError:
        raise ShellUsageError(f"usage: {COMMANDS['redo'].usage_line()}") from None
    if not 0 <= number < shell.command_count:  # this redo itself is not redoable
        raise ShellUsageError("Command index out of range")
    line = shell.history[number]
    tokens = tokenize(line)
    if tokens and tokens[0] == "redo":
        raise ShellUsageError("No redoing redos")
    shell.history[shell.command_count] = line
    shell.run_tokens(tokens)


def _quit(shell: Shell, _command: ParsedCommand) -> None:
    raise _Quit


class _Quit(Exception):
    """`quit`: leave the REPL with the last command's exit code."""


def _help(shell: Shell, _command: ParsedCommand) -> None:
    shell.write(help_lines())


def help_lines() -> list[str]:
    """ZooKeeperMain.usage: a header, then every command with its options, sorted."""
    header = "zkraft zk --server host:port[,host:port...] [--json] [--timeout S] cmd args"
    return [header] + [f"\t{spec.usage_line()}" for _name, spec in sorted(COMMANDS.items())]


_PATH = 1
COMMANDS: dict[str, CommandSpec] = {
    spec.name: spec
    for spec in (
        CommandSpec("ls", "[-s] [-w] [-R] path", _ls, flags="swR", min_args=_PATH, max_args=_PATH),
        CommandSpec("get", "[-s] [-w] [-r] [-b] path", _get, flags="swrb", min_args=_PATH, max_args=_PATH),
        CommandSpec("stat", "[-w] path", _stat, flags="w", min_args=_PATH, max_args=_PATH),
        CommandSpec(
            "create",
            "[-s] [-e] [-c] [-t ttl] path [data] [acl]",
            _create,
            flags="sec",
            valued="t",
            min_args=1,
            max_args=3,
        ),  # fmt: skip
        CommandSpec("getAcl", "[-s] path", _get_acl, flags="s", min_args=_PATH, max_args=_PATH),
        CommandSpec(
            "setAcl", "[-s] [-v version] [-R] path acl", _set_acl, flags="sR", valued="v", min_args=2, max_args=2
        ),
        CommandSpec("addauth", "scheme auth", _addauth, min_args=1, max_args=2),
        CommandSpec("whoami", "", _whoami),
        CommandSpec("config", "[-c] [-w] [-s]", _config, flags="cws"),
        CommandSpec("reconfig", RECONFIG_USAGE.removeprefix("reconfig "), _reconfig, raw_args=True),
        CommandSpec("set", "[-s] [-v version] path data", _set, flags="s", valued="v", min_args=2, max_args=2),
        CommandSpec("delete", "[-v version] path", _delete, valued="v", min_args=_PATH, max_args=_PATH),
        CommandSpec("deleteall", "path", _deleteall, min_args=_PATH, max_args=_PATH),
        CommandSpec("rmr", "path", _deleteall, min_args=_PATH, max_args=_PATH),
        CommandSpec("sync", "path", _sync, min_args=_PATH, max_args=_PATH),
        CommandSpec("getEphemerals", "[path]", _get_ephemerals, max_args=1),
        CommandSpec("getAllChildrenNumber", "path", _get_all_children_number, min_args=_PATH, max_args=_PATH),
        CommandSpec(
            "addWatch",
            "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE] - default is"
            " PERSISTENT_RECURSIVE",
            _add_watch,
            valued="m",
            min_args=_PATH,
            max_args=_PATH,
        ),
        CommandSpec("removewatches", "path [-c|-d|-a]", _remove_watches, flags="cdpra", min_args=1, max_args=1),
        CommandSpec("tree", "[-d depth] [path]", _tree, valued="d", max_args=1),
        CommandSpec("printwatches", "on|off", _printwatches, max_args=1, needs_session=False),
        CommandSpec("connect", "host:port", _connect, max_args=1, needs_session=False),
        CommandSpec("close", "", _close, needs_session=False),
        CommandSpec("history", "", _history, needs_session=False),
        CommandSpec("redo", "cmdno", _redo, min_args=1, max_args=1, needs_session=False),
        CommandSpec("quit", "", _quit, needs_session=False),
        CommandSpec("help", "", _help, needs_session=False),
    )
}


# ---------------------------------------------------------------- REPL and entry point


def _setup_readline(shell: Shell) -> Callable[[], None]:
    """Tab completion and ~/.zkraft_history when readline exists; returns what saves the history."""
    try:
        import readline
    except ImportError:
        return lambda: None
    readline.set_completer(_ReadlineCompleter(shell, readline))
    readline.set_completer_delims(" \t\n")  # a znode path is one word, '/' included
    if "libedit" in (readline.__doc__ or ""):
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
    history_file = HISTORY_FILE.expanduser()
    with contextlib.suppress(OSError):
        readline.read_history_file(history_file)
    readline.set_history_length(HISTORY_FILE_LINES_MAX)

    def save() -> None:
        with contextlib.suppress(OSError):  # a read-only home: no history, no error
            readline.write_history_file(history_file)

    return save


def _read_line(shell: Shell, stdin: TextIO, interactive: bool) -> str | None:
    if not interactive:
        line = stdin.readline()
        return line.rstrip("\r\n") if line else None
    try:
        return input(shell.prompt())
    except EOFError:
        shell.write("")
        return None


def repl(shell: Shell, stdin: TextIO, interactive: bool) -> int:
    """Read, run, repeat until `quit` or end of input; the exit code is the last command's (as zkCli)."""
    save_history = _setup_readline(shell) if interactive else (lambda: None)
    shell.show_session_events = True
    try:
        while True:
            try:
                line = _read_line(shell, stdin, interactive)
                if line is None:
                    break
                shell.execute_line(line)
            except _Quit:
                break
            except KeyboardInterrupt:  # Ctrl-C abandons the line or the command, not the shell
                shell.write("")
                if not interactive:
                    raise
            except Exception as error:  # the REPL's loop boundary: one line, the shell goes on
                shell.warn(f"unexpected {type(error).__name__}: {' '.join(str(error).split())}")
                shell.exit_code = EXIT_FAILURE
    finally:
        save_history()
    return shell.exit_code


def check_hosts(hosts: str) -> str:
    """`h:p,h:p[/chroot]`: every address must be host:port; the text is passed on unchanged."""
    from zkraft.tools.quorum_status import ServerListError, parse_server_list

    addresses, _slash, _chroot = hosts.partition("/")
    try:
        parse_server_list(addresses)
    except ServerListError as error:
        raise ShellUsageError(str(error)) from None
    return hosts


def run(
    server: str,
    command: Sequence[str] = (),
    *,
    json_output: bool = False,
    timeout_s: float = CONNECT_TIMEOUT_S_DEFAULT,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    client_factory: Callable[[str, float, int], Any] = _default_client_factory,
    client_configuration: Path | None = None,
) -> int:
    """`zkraft zk`: one command (ShellError on failure), or the REPL when `command` is empty.

    `client_configuration`: zkCli's `-client-configuration FILE`, ZooKeeper's client properties
    (`zookeeper.client.secure=true`, `zookeeper.ssl.trustStore.location`, ...)."""
    try:
        tls = zookeeper_client_tls_file(client_configuration)
    except TlsConfigError as error:
        raise ShellUsageError(str(error)) from None
    if tls is not None:
        client_factory = functools.partial(_default_client_factory, tls=tls)
    # The SDK's log lines (a session closed, a server lost) would reach stderr through logging's
    # last-resort handler; the shell reports what matters in zkCli's words (WATCHER:: events).
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    stdin = stdin or sys.stdin
    shell = Shell(
        check_hosts(server),
        json_output=json_output,
        timeout_s=timeout_s,
        out=out,
        err=err,
        client_factory=client_factory,
    )
    interactive = not command and stdin.isatty()
    if interactive:
        shell.write(f"Connecting to {server}")
    shell.connect()
    try:
        if command:
            shell.run_tokens(list(command))
            return EXIT_OK
        if interactive:
            shell.write(["Welcome to zkraft! Type 'help' for the commands, Tab completes commands and paths."])
        return repl(shell, stdin, interactive)
    except _Quit:
        return EXIT_OK
    finally:
        shell.show_session_events = False  # leaving: no "Closed" event after the last output
        shell.close()
