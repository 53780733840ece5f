"""`zkraft zk config` and `zkraft zk reconfig`: zkCli's GetConfigCommand and ReconfigCommand (ZooKeeper 3.9).

    config [-c] [-w] [-s]
    reconfig [-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] |
             [-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]

The arguments are checked as zkCli checks them, with its messages (an -add or -remove, or -members or
-file, is needed; the incremental and the non-incremental forms do not mix; -v is hexadecimal, as the
`version=` line of the configuration shows it). `config -c` prints the client connect string the
configuration names (ConfigUtils.getClientConfigStr: the version, then every member's client address).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ReconfigArgs", "ReconfigUsageError", "client_config_string", "parse_reconfig", "read_members_file"]

RECONFIG_USAGE = (
    "reconfig [-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | "
    "[-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]"
)
_VALUED = frozenset({"v", "file", "members", "add", "remove"})
_MEMBERS_FILE_BYTES_MAX = 1 << 20


class ReconfigUsageError(ValueError):
    """Arguments zkCli refuses before it sends anything; the message is zkCli's line."""


@dataclass(frozen=True, slots=True)
class ReconfigArgs:
    joining: str | None
    leaving: str | None
    members: str | None
    members_file: str | None
    version: int  # -1: any
    stats: bool


def _options(words: Sequence[str]) -> tuple[dict[str, str], bool]:
    """commons-cli's reading of ReconfigCommand's options: `-name value` (or `-vVALUE`), `-s` alone; a repeated
    option keeps its first value, as CommandLine.getOptionValue does."""
    options: dict[str, str] = {}
    stats = False
    pending = list(words)
    while pending:
        word = pending.pop(0)
        name = word[1:] if word.startswith("-") else ""
        if name == "s":
            stats = True
            continue
        if name in _VALUED:
            if not pending:
                raise ReconfigUsageError(f"Missing argument for option: {name}")
            options.setdefault(name, pending.pop(0))
            continue
        if name[:1] == "v" and len(name) > 1:  # -v3: the value joined to its option
            options.setdefault("v", name[1:])
            continue
        if word.startswith("-"):
            raise ReconfigUsageError(f"Unrecognized option: {word}")
        raise ReconfigUsageError(f"usage: {RECONFIG_USAGE}")
    return options, stats


def parse_reconfig(words: Sequence[str]) -> ReconfigArgs:
    """ReconfigCommand.parse: its checks in its order; -add/-remove/-members lower-cased as zkCli does."""
    options, stats = _options(words)
    has = options.__contains__
    if not (has("file") or has("members")) and not has("add") and not has("remove"):
        raise ReconfigUsageError(f"usage: {RECONFIG_USAGE}")
    version = -1
    if has("v"):
        try:
            version = int(options["v"], 16)
        except ValueError:
            raise ReconfigUsageError("-v must be followed by a long (configuration version)") from None
    if (has("file") or has("members")) and (has("add") or has("remove")):
        raise ReconfigUsageError(
            "Can't use -file or -members together with -add or -remove (mixing incremental and non-incremental modes "
            "is not allowed)"
        )
    if has("file") and has("members"):
        raise ReconfigUsageError("Can't use -file and -members together (conflicting non-incremental modes)")

    def lowered(name: str) -> str | None:
        return options[name].lower() if has(name) else None

    return ReconfigArgs(lowered("add"), lowered("remove"), lowered("members"), options.get("file"), version, stats)


def read_members_file(path: str) -> str:
    """-file: a dynamic configuration file's `server.N=...` lines (and a `version=` line, ignored), joined by
    commas as the membership a non-incremental reconfig sends."""
    try:
        raw = Path(path).read_bytes()[:_MEMBERS_FILE_BYTES_MAX]
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ReconfigUsageError(f"Error processing {path}: {getattr(error, 'strerror', None) or error}") from None
    lines = [line.strip() for line in text.splitlines()]
    members = [line for line in lines if line.startswith("server.")]
    if not members:
        raise ReconfigUsageError(f"Error processing {path}: no server.N=... line in it")
    return ",".join(members)


def client_config_string(config_text: str) -> str:
    """ConfigUtils.getClientConfigStr: `<version> <host:port>,<host:port>...` of the members' client ports."""
    version = ""
    clients: list[str] = []
    for line in config_text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep:
            continue
        if key.strip() == "version":
            version = value.strip()
        elif key.strip().startswith("server."):
            client = value.partition(";")[2].strip()
            clients.append(client)
    return f"{version} {','.join(clients)}"
