"""Reading the console's HTML forms: every bad field is one ConsoleInputError naming it."""

from __future__ import annotations

from collections.abc import Mapping


class ConsoleInputError(Exception):
    """A form field the console cannot use; shown to the user as one line."""


def text_field(form: Mapping[str, str], name: str, label: str, required: bool = True) -> str:
    value = str(form.get(name, "") or "").strip()
    if required and not value:
        raise ConsoleInputError(f"{label} is required")
    return value


def int_field(
    form: Mapping[str, str], name: str, label: str, minimum: int | None = None, default: int | None = None
) -> int:
    text = str(form.get(name, "") or "").strip()
    if not text:
        if default is not None:
            return default
        raise ConsoleInputError(f"{label} is required")
    try:
        value = int(text)
    except ValueError:
        raise ConsoleInputError(f"{label} must be a whole number, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise ConsoleInputError(f"{label} must be at least {minimum}, got {value}")
    return value


def config_lines(text: str, label: str = "configs") -> dict[str, str]:
    """`key=value` per line (blank lines and # comments skipped), as kafka-topics.sh's --config takes them."""
    configs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConsoleInputError(f"{label} line {number}: {line!r} is not key=value")
        configs[key.strip()] = value.strip()
    return configs


def broker_ids(text: str, label: str) -> list[int]:
    """`1,2,3` into broker ids."""
    ids = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            ids.append(int(item))
        except ValueError:
            raise ConsoleInputError(f"{label}: {item!r} is not a broker id") from None
    if not ids:
        raise ConsoleInputError(f"{label}: no broker id given (expected 1,2,3)")
    return ids
