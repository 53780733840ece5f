"""Znode paths: ZooKeeper's validation (`PathUtils.validatePath`, research §1.1) and small helpers.

Messages are ZooKeeper's word for word, so a user who knows zkCli recognises
them: `Invalid path string "/a//b" caused by empty node name specified @3`.
Positions count UTF-16 code units as Java does; the first character outside
the Basic Multilingual Plane is itself rejected (Java sees a surrogate), so
every position reported is also the Python index.
"""

from __future__ import annotations

import re

from zkemu.errors import BadArgumentsError

ROOT = "/"
ZOOKEEPER_PATH = "/zookeeper"
QUOTA_PATH = "/zookeeper/quota"
CONFIG_PATH = "/zookeeper/config"
# Built into every tree, never deleted (DataTree.isSpecialPath).
SPECIAL_PATHS = frozenset({ROOT, ZOOKEEPER_PATH, QUOTA_PATH, CONFIG_PATH})

# A path made only of non-empty names of allowed characters; "." and ".." names
# still need the slow check. Anything this does not match goes through the
# character loop, which finds ZooKeeper's exact reason.
_PLAIN = re.compile("(?:/[^/\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\U0010ffff]+)+")


def _is_invalid_char(c: str) -> bool:
    o = ord(c)
    return (
        0 < o <= 0x1F
        or 0x7F <= o <= 0x9F
        or 0xD800 <= o <= 0xF8FF
        or o >= 0xFFF0  # U+FFF0..U+FFFF, and any supplementary character (a surrogate pair in Java)
    )


def _reason(path: str) -> str | None:
    """PathUtils.validatePath's character loop: the reason the path is invalid, or None."""
    last = "/"
    n = len(path)
    for i in range(1, n):
        c = path[i]
        if c == "\0":
            return f"null character not allowed @{i}"
        if c == "/" and last == "/":
            return f"empty node name specified @{i}"
        if c == "." and last == ".":
            if path[i - 2] == "/" and (i + 1 == n or path[i + 1] == "/"):
                return f"relative paths not allowed @{i}"
        elif c == ".":
            if path[i - 1] == "/" and (i + 1 == n or path[i + 1] == "/"):
                return f"relative paths not allowed @{i}"
        elif _is_invalid_char(c):
            return f"invalid character @{i}"
        last = c
    return None


def validate_path(path: str, is_sequential: bool = False) -> None:
    """Raise BadArgumentsError unless `path` is a valid znode path.

    `is_sequential`: the path is the prefix of a sequential create, checked as
    if a digit followed (so "/a/" is a valid sequential prefix), as the client
    side of ZooKeeper does. The server checks the full name after appending the
    suffix instead.
    """
    if is_sequential:
        path = path + "1"
    if not path:
        raise BadArgumentsError("Path length must be > 0")
    if path[0] != "/":
        raise BadArgumentsError("Path must start with / character")
    if len(path) == 1:
        return
    if path[-1] == "/":
        raise BadArgumentsError("Path must not end with / character")
    if _PLAIN.fullmatch(path) and "/." not in path:
        return
    reason = _reason(path)
    if reason is not None:
        raise BadArgumentsError(f'Invalid path string "{path}" caused by {reason}')


def parent_of(path: str) -> str:
    """The parent of a valid non-root path ("/a/b" -> "/a", "/a" -> "/")."""
    slash = path.rfind("/")
    if slash <= 0:
        return ROOT
    return path[:slash]


def basename(path: str) -> str:
    """The last name of a path ("/a/b" -> "b"; "/" -> "")."""
    return path[path.rfind("/") + 1 :]


def join(parent: str, name: str) -> str:
    return parent + name if parent == ROOT else f"{parent}/{name}"


def is_special_path(path: str) -> bool:
    return path in SPECIAL_PATHS
