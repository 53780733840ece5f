"""The znode tree: children, data (JSON pretty-printed, else text, else hex), Stat and ACL of one path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zkraft.console.clients import ConsoleClients
from zkraft.console.forms import ConsoleInputError

DATA_SHOWN_BYTES_MAX = 64 * 1024


@dataclass(frozen=True, slots=True)
class ZnodeView:
    path: str
    parents: list[tuple[str, str]]  # (name, path) from the root, for the breadcrumb
    children: list[tuple[str, str]]  # (name, path), sorted
    data_text: str
    data_kind: str  # json, text, hex or empty
    truncated: bool
    stat: list[tuple[str, Any]]
    acl: list[tuple[str, str, str]]  # (scheme, id, permissions)


def normalized_path(path: str) -> str:
    path = (path or "/").strip()
    if not path.startswith("/"):
        raise ConsoleInputError(f"a znode path starts with '/', got {path!r}")
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    if "//" in path or any(part in (".", "..") for part in path.split("/")):
        raise ConsoleInputError(f"invalid znode path {path!r}")
    return path


def render_data(data: bytes) -> tuple[str, str, bool]:
    """(text, kind, truncated): JSON pretty-printed, UTF-8 text, or hex of the first DATA_SHOWN_BYTES_MAX."""
    if not data:
        return "", "empty", False
    truncated = len(data) > DATA_SHOWN_BYTES_MAX
    shown = data[:DATA_SHOWN_BYTES_MAX]
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        return shown.hex(" "), "hex", truncated
    if not truncated:
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False), "json", False
        except ValueError:
            pass
    return text, "text", truncated


def _child_path(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


def znode(clients: ConsoleClients, path: str) -> ZnodeView:
    path = normalized_path(path)
    zk = clients.zk
    data, stat = zk.get(path)
    children = sorted(zk.get_children(path))
    acls, _ = zk.get_acls(path)
    parents = [("/", "/")]
    walked = ""
    for part in [p for p in path.split("/") if p]:
        walked += "/" + part
        parents.append((part, walked))
    text, kind, truncated = render_data(data)
    return ZnodeView(
        path=path,
        parents=parents,
        children=[(name, _child_path(path, name)) for name in children],
        data_text=text,
        data_kind=kind,
        truncated=truncated,
        stat=list(stat._asdict().items()),
        acl=[(a.id.scheme, a.id.id, ",".join(a.acl_list)) for a in acls],
    )
