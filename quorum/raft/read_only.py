"""ReadIndex bookkeeping on the leader (Raft thesis §6.4, etcd read_only.go).

A read is linearizable once a quorum confirmed, after the read arrived, that
this node is still the leader: the heartbeat round carrying the read's
context. Requests are released in arrival order; an ack for a later request
confirms every earlier one too.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field


@dataclass(slots=True)
class ReadIndexRequest:
    index: int  # the leader's commit index when the read arrived
    context: bytes
    requester: int  # node that asked (the leader itself for local reads)
    acks: set[int] = field(default_factory=set)


class ReadOnlyTracker:
    def __init__(self) -> None:
        self._pending: dict[bytes, ReadIndexRequest] = {}
        self._queue: list[bytes] = []

    def add(self, index: int, context: bytes, requester: int) -> bool:
        if context in self._pending:
            return False
        self._pending[context] = ReadIndexRequest(index, context, requester)
        self._queue.append(context)
        return True

    def ack(self, voter: int, context: bytes, voters: Container[int]) -> int:
        """Record a heartbeat response; returns how many of `voters` (the configuration now in force: an ack
        of a server removed since no longer counts) confirmed that read (0 if unknown)."""
        req = self._pending.get(context)
        if req is None:
            return 0
        req.acks.add(voter)
        return sum(1 for a in req.acks if a in voters)

    def release_through(self, context: bytes) -> list[ReadIndexRequest]:
        """Remove and return every request up to and including `context`."""
        if context not in self._pending:
            return []
        k = self._queue.index(context)
        done = [self._pending.pop(c) for c in self._queue[: k + 1]]
        del self._queue[: k + 1]
        return done

    def last_context(self) -> bytes:
        return self._queue[-1] if self._queue else b""

    def __len__(self) -> int:
        return len(self._queue)
