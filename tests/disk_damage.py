"""Damage done to a node's files on purpose, as a failing disk would: shared by the damaged-file tests."""

from __future__ import annotations

import random
from pathlib import Path

LMDB_PAGE_BYTES = 4096
DAMAGE_BYTES = 8192  # the reproduction: 8 KiB of random bytes


def damage_pages_holding(data_file: Path, needle: bytes, seed: int) -> int:
    """Write DAMAGE_BYTES of random bytes from the start of every page where `needle` occurs; returns how many.

    LMDB copies a page on write, so stale copies of the needle's page may sit in free pages: each
    occurrence is hit, so that the live page surely is."""
    content = data_file.read_bytes()
    rng = random.Random(seed)
    hits = 0
    with open(data_file, "r+b") as f:
        at = content.find(needle)
        while at != -1:
            f.seek(at - at % LMDB_PAGE_BYTES)
            f.write(rng.randbytes(DAMAGE_BYTES))
            hits += 1
            at = content.find(needle, at - at % LMDB_PAGE_BYTES + DAMAGE_BYTES)
    return hits
