"""A follower's forwarded writes, answered when the follower applies them itself.

ZooKeeper's followers answer a client's write when they commit it
themselves. Waiting for the leader's reply on the forward stream instead
costs two more hops: the leader answers after it applied the write, which
needs this follower's acknowledgement first. In a 3-node cluster the
streaming follower commits on the leader's DURABLE notice (quorum/raft
`_commit_durable_pair`), before the leader even hears that acknowledgement.

So each forwarded txn carries a tag unique to this process
(`Txn.forward_tag`), and applying an entry whose tag waits here resolves the
write's future with the zxid and result, exactly what the leader's reply
would bring. The reply still comes and resolves what apply did not (a write
this node learnt through a snapshot, an error); whichever comes first wins.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets

from zkraft_proto import zk_pb2

# A tag is this process's random nonzero 32-bit incarnation, then a 32-bit counter: a restarted node's
# new tags never answer for the entries its previous incarnation forwarded.
_SEQUENCE_BITS = 32

ForwardOutcome = tuple[int, bytes]  # (zxid, serialized TxnResult): what the leader's ForwardResponse gives


class ForwardedWrites:
    """The tags of this node's forwarded writes still waiting for an answer, and their futures."""

    def __init__(self, incarnation: int | None = None) -> None:
        incarnation = incarnation if incarnation is not None else secrets.randbits(_SEQUENCE_BITS - 1) + 1
        if not 0 < incarnation < 1 << _SEQUENCE_BITS:
            raise ValueError(f"incarnation must be in 1..{(1 << _SEQUENCE_BITS) - 1}, not {incarnation}")
        self._high = incarnation << _SEQUENCE_BITS
        self._sequence = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[ForwardOutcome]] = {}

    def tag(self, future: asyncio.Future[ForwardOutcome]) -> int:
        """A new tag for a write about to be forwarded; applying it resolves `future` until that is done."""
        tag = self._high | (next(self._sequence) & ((1 << _SEQUENCE_BITS) - 1))
        self._waiting[tag] = future
        future.add_done_callback(lambda _: self._waiting.pop(tag, None))
        return tag

    def applied(self, tag: int, zxid: int, result: zk_pb2.TxnResult) -> bool:
        """This node applied the entry tagged `tag` as `zxid`; returns whether that answered a waiting write.

        Every node applies the tagged entry; only the one that forwarded it serializes the result again."""
        future = self._waiting.pop(tag, None)
        if future is None or future.done():
            return False
        future.set_result((zxid, result.SerializeToString()))
        return True

    def __len__(self) -> int:
        return len(self._waiting)
