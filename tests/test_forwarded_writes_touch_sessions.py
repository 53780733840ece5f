"""A write a follower forwards keeps its session alive at the leader.

Found by the ZooKeeper fault campaign (seed 1041): after a one-way cut and a split, the new leader expired two
sessions of one follower while their writes, forwarded by that follower, were still being acknowledged. A
follower passes its clients' touches on a separate call (TouchSessions), which can lag behind the write stream
after a partition heals; the leader now also touches the session of every write forwarded to it.

The test plays the follower against a real one-node quorum: it forwards a session's creation and then its
writes on the leader's Forward stream and never calls TouchSessions, and no client connects. The session must
live as long as its writes keep coming, and expire once they stop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest

from runtime import grpc_channels
from tests.quorum_harness import one_zookeeper_node, poll_until
from zkraft_proto import zk_pb2, zk_pb2_grpc

SESSION_ID = 0x7E00_0000_0000_0001
SESSION_TIMEOUT_MS = 2000  # within FAST_ZK_PROPERTIES' bounds (tickTime 500): 1000 to 10000 ms
WRITE_EVERY_S = 0.4
WRITES = 15  # 6 s of writes: three session timeouts
RPC_TIMEOUT_S = 10.0
ZNODE = "/alive"
OK = 0


@pytest.fixture(scope="module")
def leader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_zookeeper_node(tmp_path_factory.mktemp("quorum")) as cluster:
        yield cluster.addresses[1]


class FollowerStream:
    """The leader's Forward stream, as a follower uses it: one batch at a time, each answered in order."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._call = zk_pb2_grpc.ZooKeeperStub(channel).Forward()

    async def write(self, txn: zk_pb2.Txn) -> zk_pb2.TxnResult:
        await self._call.write(zk_pb2.ForwardRequest(txns=[txn.SerializeToString()]))
        reply = await asyncio.wait_for(self._call.read(), RPC_TIMEOUT_S)
        assert not reply.error_code, reply
        return zk_pb2.TxnResult.FromString(reply.results[0])

    async def close(self) -> None:
        await self._call.done_writing()


async def znode_exists(channel: grpc.aio.Channel) -> bool:
    """Whether the session's ephemeral is there, asked of the leader's own tree (a forwarded check)."""
    check = zk_pb2.Txn(check=zk_pb2.CheckOp(path=ZNODE, version=-1))
    stream = FollowerStream(channel)
    try:
        return (await stream.write(check)).err == OK
    finally:
        await stream.close()


async def play_follower(address: str) -> tuple[list[int], float]:
    """Create the session and its ephemeral, write every WRITE_EVERY_S, then stop: (each write's err, seconds
    from the last write until the ephemeral was gone)."""
    async with grpc_channels.aio_channel(address, None) as channel:
        stream = FollowerStream(channel)
        created = zk_pb2.CreateSessionTxn(session_id=SESSION_ID, timeout_ms=SESSION_TIMEOUT_MS)
        assert (await stream.write(zk_pb2.Txn(session_id=SESSION_ID, create_session=created))).err == OK
        ephemeral = zk_pb2.CreateOp(path=ZNODE, data=b"0", mode=1)
        assert (await stream.write(zk_pb2.Txn(session_id=SESSION_ID, create=ephemeral))).err == OK
        errs = []
        for n in range(WRITES):
            await asyncio.sleep(WRITE_EVERY_S)  # the client's pace, not a wait for anything
            set_data = zk_pb2.SetDataOp(path=ZNODE, data=str(n).encode(), version=-1)
            errs.append((await stream.write(zk_pb2.Txn(session_id=SESSION_ID, set_data=set_data))).err)
        await stream.close()
        last_write = time.monotonic()

        async def expired() -> bool:
            return not await znode_exists(channel)

        await poll_until(
            expired, 3 * SESSION_TIMEOUT_MS / 1000, "the session outlived its writes by three timeouts", 0.1
        )
        return errs, time.monotonic() - last_write


def test_forwarded_writes_keep_their_session_alive_until_they_stop(leader: str) -> None:
    errs, expired_after_s = asyncio.run(play_follower(leader))
    assert errs == [OK] * WRITES, "a write failed: its session expired while its writes were acknowledged"
    assert expired_after_s >= SESSION_TIMEOUT_MS / 1000 * 0.5, expired_after_s
