"""Child process of the crash-durability test in tests/test_log_store.py.

    python3 -m tests.lmdb_crash_writer <store-dir> [checkpoint-bytes]

Appends batches to an LmdbLogStore with sync=True, continuing after whatever
the store already holds, and prints each batch's last index on stdout only
after `save` returned: a printed index is an acknowledged one. It runs until
killed (or BATCHES_MAX batches).
"""

from __future__ import annotations

import sys

from quorum.lmdb_log_store import LmdbLogStore
from quorum.raft.types import Entry, HardState

BATCH_ENTRIES = 64
BATCHES_MAX = 100_000
ENTRIES_PER_TERM = 1000


def payload(index: int) -> bytes:
    """The data of entry `index`: distinct per index, so a misplaced entry is caught."""
    return index.to_bytes(8, "big") * 12 + b"|%d" % index


def term_of(index: int) -> int:
    return 1 + index // ENTRIES_PER_TERM


def main(path: str, checkpoint_bytes: int | None) -> None:
    store = LmdbLogStore(path) if checkpoint_bytes is None else LmdbLogStore(path, checkpoint_bytes=checkpoint_bytes)
    state = store.load()
    last_index = state.entries[-1].index if state.entries else state.compacted_index
    for _ in range(BATCHES_MAX):
        first = last_index + 1
        entries = [Entry(index=i, term=term_of(i), data=payload(i)) for i in range(first, first + BATCH_ENTRIES)]
        last_index = entries[-1].index
        hard_state = HardState(term=term_of(last_index), vote=1, commit=last_index)
        store.save(hard_state, entries, None, sync=True)
        print(last_index, flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
