"""ZooKeeper's four-letter words on the client port (minimal: `ruok` only)."""

from __future__ import annotations

from typing import Any


def reply_to(word: bytes, service: Any) -> bytes | None:
    """The answer to `word` (the first 4 bytes of a connection), or None when it is not a four-letter word."""
    if word == b"ruok":
        return b"imok"
    return None
