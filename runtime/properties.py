"""Java `.properties` files, the format of ZooKeeper's zoo.cfg and Kafka's server.properties.

Shared by the quorum node's and the broker's settings and by the tools.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path


class PropertiesError(ValueError):
    """A properties file cannot be read or parsed: one line naming the file and line."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "properties") -> list[tuple[str, str, int]]:
    """Parse Java `.properties` text into (key, value, line number) in file order.

    Supports `key=value`, `key:value` and `key value`, `#`/`!` comment lines,
    blank lines, a trailing backslash continuing the logical line, and the
    `\\t \\n \\r \\f \\uXXXX` escapes. Later duplicates are kept; the caller decides.
    """
    result: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        start_line = index + 1
        line = lines[index].lstrip(" \t\f")
        index += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip(" \t\f")
            index += 1
        if _ends_with_continuation(line):
            line = line[:-1]
        key, value = _split_logical_line(line, f"{source}:{start_line}")
        result.append((key, value, start_line))
    return result


def _ends_with_continuation(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_logical_line(line: str, where: str) -> tuple[str, str]:
    position = 0
    while position < len(line):
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=: \t\f":
            break
        position += 1
    key_raw = line[:position]
    rest = line[position:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key_raw, where), _unescape(rest, where).rstrip()


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\" or position + 1 >= len(text):
            out.append(char)
            position += 1
            continue
        code = text[position + 1]
        if code == "u":
            digits = text[position + 2 : position + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise PropertiesError(f"{where}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            position += 6
            continue
        out.append(_ESCAPES.get(code, code))
        position += 2
    return "".join(out)


def read_properties_file(path: Path, check_key: Callable[[str, str], None] | None = None) -> dict[str, str]:
    """Read a properties file into {key: value}; a key given twice is an error (it is always a mistake here).

    `check_key(key, where)` may raise to refuse a key (an unknown property name).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PropertiesError(f"config file {path}: not found") from None
    except IsADirectoryError:
        raise PropertiesError(f"config file {path}: is a directory") from None
    except UnicodeDecodeError as exc:
        raise PropertiesError(f"config file {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise PropertiesError(f"config file {path}: {exc.strerror or exc}") from None
    properties: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for key, value, line in parse_properties(text, str(path)):
        if not key:
            raise PropertiesError(f"{path}:{line}: a line has a value but no key")
        if check_key is not None:
            check_key(key, f"{path}:{line}: ")
        if key in properties:
            raise PropertiesError(f"{path}:{line}: {key!r} is already set on line {first_line[key]}")
        properties[key] = value
        first_line[key] = line
    return properties
