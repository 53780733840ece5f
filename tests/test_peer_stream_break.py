"""quorum.transport tells a stream that broke hard from a peer that is merely unreachable (on_stream_broken).

A follower campaigns at once when its live stream to the leader breaks
(Raft.leader_unreachable), so the report must come when the peer's process
dies (SIGKILL: its connections are reset), even while the stream is idle, and
never for a peer that was not there to begin with. The peer here is a bare
RaftPeer servicer in a process of its own, on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable

import pytest
import structlog

from quorum.raft.types import Message, MessageType
from quorum.transport import PeerTransport, broke_hard
from tests.quorum_harness import free_ports, poll_until, subprocess_env

DEADLINE_S = 20.0

# The peer: records nothing, keeps every stream open until its client goes.
PEER_PROGRAM = """
import asyncio, sys
import grpc
from zkraft_proto import quorum_pb2 as pb, quorum_pb2_grpc as pb_grpc

class Peer(pb_grpc.RaftPeerServicer):
    async def Stream(self, request_iterator, context):
        async for _batch in request_iterator:
            pass
        return pb.StreamAck()

async def main():
    server = grpc.aio.server()
    pb_grpc.add_RaftPeerServicer_to_server(Peer(), server)
    server.add_insecure_port(sys.argv[1])
    await server.start()
    print("serving", flush=True)
    await server.wait_for_termination()

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def peer_process(address: str) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PEER_PROGRAM, address, stdout=asyncio.subprocess.PIPE, env=subprocess_env()
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)
        assert line.strip() == b"serving", f"the peer process did not start: {line!r}"
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await asyncio.wait_for(proc.wait(), DEADLINE_S)


@contextlib.asynccontextmanager
async def transport_to(address: str) -> AsyncIterator[tuple[PeerTransport, list[int], list[int]]]:
    """Node 1's transport to node 2 at `address`; yields it with the peers it reported unreachable and
    those whose live stream it reported broken."""
    unreachable: list[int] = []
    broken: list[int] = []
    transport = PeerTransport(
        node_id=1,
        peers={1: "127.0.0.1:1", 2: address},
        cluster_id="test",
        digest="digest",
        snapshots=None,  # type: ignore[arg-type]  # no snapshot is sent here
        on_unreachable=unreachable.append,
        on_snapshot_done=lambda peer, ok: None,
        log=structlog.get_logger(),
        on_stream_broken=broken.append,
    )
    transport.start()
    try:
        yield transport, unreachable, broken
    finally:
        await transport.close()


def heartbeat_response() -> Message:
    return Message(MessageType.HEARTBEAT_RESP, 2, 1, 1)


async def until(condition: Callable[[], object], what: str) -> None:
    async def probe() -> bool | None:
        return True if condition() else None

    await poll_until(probe, DEADLINE_S, what)


def test_an_idle_live_stream_to_a_killed_peer_is_reported_broken_at_once() -> None:
    async def body() -> None:
        address = f"127.0.0.1:{free_ports(1)[0]}"
        async with peer_process(address) as peer, transport_to(address) as (transport, unreachable, broken):
            await until(transport.streams_idle, "the stream to the peer never connected")
            transport.send([heartbeat_response()])
            await until(transport.streams_idle, "the write to the peer never completed")
            assert broken == []
            peer.send_signal(signal.SIGKILL)
            # Nothing more is sent: the stream's end alone must wake the sender (a follower has nothing
            # to write to a dead leader).
            await until(lambda: broken, "a killed peer's live stream was not reported broken")
            assert broken == [2] and 2 in unreachable

    asyncio.run(body())


def test_a_peer_that_was_never_there_is_unreachable_but_no_stream_of_it_broke() -> None:
    async def body() -> None:
        address = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
        async with transport_to(address) as (transport, unreachable, broken):
            for attempt in range(1, 4):
                transport.send([heartbeat_response()])
                await until(lambda n=attempt: len(unreachable) >= n, "the refused peer was never reported")
            assert broken == []

    asyncio.run(body())


@pytest.mark.parametrize(
    ("code", "live", "broken"),
    [
        ("UNAVAILABLE", True, True),  # the connection reset (the peer's process died) or refused
        ("INTERNAL", True, True),  # gRPC's report of a reset under a write, now and then
        ("UNAVAILABLE", False, False),  # refused from the start: nothing new about the peer
        ("FAILED_PRECONDITION", True, False),  # the peer refused us (another cluster): an answer
        ("DEADLINE_EXCEEDED", True, False),  # slow, not gone
        ("CANCELLED", True, False),
    ],
)
def test_which_ends_of_a_stream_say_the_peer_is_gone(code: str, live: bool, broken: bool) -> None:
    assert broke_hard(code, live) is broken
