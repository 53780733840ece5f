"""zkemu.forwarded_writes: a follower answers a forwarded write when it applies the entry itself.

The tags travel in the replicated txn, so the tree tests here check that a tag
reaches the apply callback and changes nothing in the tree itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from quorum.raft.types import Entry
from zkemu.forwarded_writes import ForwardedWrites
from zkemu.tree import AppliedTxn, ZnodeTree
from zkraft_proto import zk_pb2 as pb

T0_MS = 1_700_000_000_000
SESSION = 7


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()  # futures only: nothing runs on it
    yield loop
    loop.close()


def entries(tags: list[int]) -> list[Entry]:
    """A session, then one create per tag (0: proposed on the leader, no tag)."""
    txns = [
        pb.Txn(
            time_ms=T0_MS, session_id=SESSION, create_session=pb.CreateSessionTxn(session_id=SESSION, timeout_ms=10_000)
        )
    ]
    for k, tag in enumerate(tags):
        create = pb.CreateOp(path=f"/n{k}", data=b"v", mode=k % 4)
        txns.append(pb.Txn(time_ms=T0_MS + k, session_id=SESSION, forward_tag=tag, create=create))
    return [Entry(i, 1, t.SerializeToString()) for i, t in enumerate(txns, start=1)]


def test_applying_a_tagged_entry_answers_its_write_with_the_zxid_and_result(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    writes = ForwardedWrites()
    first, second = loop.create_future(), loop.create_future()
    tags = [writes.tag(first), 0, writes.tag(second)]

    def answer(applied: AppliedTxn) -> None:
        if applied.forward_tag:
            writes.applied(applied.forward_tag, applied.zxid, applied.result)

    tree = ZnodeTree(tmp_path / "tree", on_applied=answer)
    results = tree.apply(entries(tags))
    assert first.result() == (2, results[1])
    assert second.result() == (4, results[3])
    # Sequential: the suffix is the root's cversion, two creates in.
    assert pb.TxnResult.FromString(second.result()[1]).path == "/n20000000002"
    assert len(writes) == 0
    tree.close()


def test_a_tag_changes_nothing_in_the_tree(tmp_path: Path) -> None:
    tagged = ZnodeTree(tmp_path / "tagged")
    plain = ZnodeTree(tmp_path / "plain")
    assert tagged.apply(entries([1 << 32 | 1, 1 << 32 | 2, 0, 5 << 32 | 9])) == plain.apply(entries([0, 0, 0, 0]))
    assert tagged.digest() == plain.digest()
    tagged.close()
    plain.close()


def test_tags_are_unique_nonzero_and_name_their_incarnation(loop: asyncio.AbstractEventLoop) -> None:
    writes = ForwardedWrites(incarnation=3)
    tags = [writes.tag(loop.create_future()) for _ in range(100)]
    assert len(set(tags)) == 100 and all(tag >> 32 == 3 and tag & 0xFFFFFFFF for tag in tags)
    restarted = ForwardedWrites(incarnation=4)
    assert restarted.tag(loop.create_future()) not in tags


def test_a_write_answered_otherwise_is_forgotten_and_its_apply_answers_nothing(
    loop: asyncio.AbstractEventLoop,
) -> None:
    writes = ForwardedWrites()
    by_reply, given_up, failed = loop.create_future(), loop.create_future(), loop.create_future()
    tags = [writes.tag(f) for f in (by_reply, given_up, failed)]
    by_reply.set_result((10, b"from the leader"))
    given_up.cancel()
    failed.set_exception(ConnectionError("forwarding failed"))
    loop.run_until_complete(asyncio.sleep(0))  # the futures' done callbacks
    assert len(writes) == 0
    assert [writes.applied(tag, 10 + k, pb.TxnResult()) for k, tag in enumerate(tags)] == [False, False, False]
    assert by_reply.result() == (10, b"from the leader")


def test_an_entry_tagged_elsewhere_answers_nothing(loop: asyncio.AbstractEventLoop) -> None:
    writes = ForwardedWrites(incarnation=1)
    waiting = loop.create_future()
    writes.tag(waiting)
    other_node = ForwardedWrites(incarnation=2).tag(loop.create_future())
    assert writes.applied(other_node, 5, pb.TxnResult()) is False
    assert not waiting.done() and len(writes) == 1


@pytest.mark.parametrize("incarnation", [0, -1, 1 << 32])
def test_an_incarnation_outside_32_bits_is_refused(incarnation: int) -> None:
    with pytest.raises(ValueError, match="incarnation must be in 1..4294967295"):
        ForwardedWrites(incarnation=incarnation)
