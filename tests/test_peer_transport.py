"""quorum.transport over real gRPC on loopback: what a peer receives, and on which of its streams.

The receiving end here is a bare RaftPeer servicer that records each batch with
the stream it came on, so the test sees what a quorum node's service would."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import structlog

from quorum.codec import message_from_pb
from quorum.raft.types import Entry, Message, MessageType
from quorum.transport import NOTICE_TYPES, PeerTransport
from tests.quorum_harness import poll_until
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

DEADLINE_S = 10.0


class RecordingPeer(pb_grpc.RaftPeerServicer):
    def __init__(self) -> None:
        self.received: list[tuple[int, Message]] = []  # (stream number, message), in arrival order
        self._streams = itertools.count(1)

    async def Stream(self, request_iterator: AsyncIterator[pb.RaftBatch], context: Any) -> pb.StreamAck:  # noqa: N802
        stream = next(self._streams)
        async for batch in request_iterator:
            self.received.extend((stream, message_from_pb(m)) for m in batch.messages)
        return pb.StreamAck()


@contextlib.asynccontextmanager
async def _transport_to_recording_peer() -> AsyncIterator[tuple[RecordingPeer, PeerTransport, list[int]]]:
    """Node 1's transport to a recording peer (node 2) on loopback; yields the peer, the transport and
    the peers it reported unreachable."""
    peer = RecordingPeer()
    server = grpc.aio.server()
    pb_grpc.add_RaftPeerServicer_to_server(peer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    unreachable: list[int] = []
    transport = PeerTransport(
        node_id=1,
        peers={1: "127.0.0.1:1", 2: f"127.0.0.1:{port}"},
        cluster_id="test",
        digest="digest",
        snapshots=None,  # type: ignore[arg-type]  # no snapshot is sent here
        on_unreachable=unreachable.append,
        on_snapshot_done=lambda peer, ok: None,
        log=structlog.get_logger(),
    )
    transport.start()
    try:
        yield peer, transport, unreachable
    finally:
        await transport.close()
        await server.stop(None)


async def _true_when(condition: Callable[[], bool]) -> bool | None:
    return True if condition() else None


async def _send_and_collect(messages: list[Message]) -> list[tuple[int, Message]]:
    async with _transport_to_recording_peer() as (peer, transport, unreachable):
        for m in messages:  # one at a time, as Readies come: each may leave in its own batch
            transport.send([m])
            await asyncio.sleep(0)
        await poll_until(
            lambda: _true_when(lambda: len(peer.received) == len(messages)), DEADLINE_S, "not every message arrived"
        )
        assert unreachable == []
        return peer.received


def test_durable_notices_travel_beside_the_appends_which_keep_their_order() -> None:
    entry = Entry(5, 2, b"create /a")
    sent = [
        Message(MessageType.APPEND, 2, 1, 2, log_term=2, index=4, entries=(entry,), commit=4),
        Message(MessageType.DURABLE, 2, 1, 2, index=5),
        Message(MessageType.HEARTBEAT, 2, 1, 2, commit=4),
        Message(MessageType.APPEND, 2, 1, 2, log_term=2, index=5, commit=5),
        Message(MessageType.DURABLE, 2, 1, 2, index=6),
    ]
    received = asyncio.run(_send_and_collect(sent))
    assert sorted((m.type, m.index) for _, m in received) == sorted((m.type, m.index) for m in sent)
    notice_streams = {stream for stream, m in received if m.type in NOTICE_TYPES}
    main_streams = {stream for stream, m in received if m.type not in NOTICE_TYPES}
    assert len(notice_streams) == 1 and len(main_streams) == 1 and notice_streams != main_streams
    assert [m for _, m in received if m.type not in NOTICE_TYPES] == [m for m in sent if m.type not in NOTICE_TYPES]
    assert [m for _, m in received if m.type in NOTICE_TYPES] == [m for m in sent if m.type in NOTICE_TYPES]


async def _send_two_batches_back_to_back() -> tuple[bool, bool, list[Message]]:
    first = Message(MessageType.APPEND, 2, 1, 2, log_term=2, index=4, entries=(Entry(5, 2, b"x"),), commit=4)
    second = Message(MessageType.HEARTBEAT, 2, 1, 2, commit=4)
    async with _transport_to_recording_peer() as (peer, transport, _):
        await poll_until(lambda: _true_when(transport.streams_idle), DEADLINE_S, "the stream never connected")
        # The first goes to gRPC in this call; the second queues behind it, for the sender task.
        first_at_once, second_at_once = transport.send([first]), transport.send([second])
        await poll_until(
            lambda: _true_when(lambda: len(peer.received) == 2 and transport.streams_idle()),
            DEADLINE_S,
            "both batches did not arrive, or the stream did not become idle again",
        )
        return first_at_once, second_at_once, [m for _, m in peer.received]


def test_send_says_whether_messages_went_to_grpc_at_once_or_queued_behind_a_write() -> None:
    first_at_once, second_at_once, received = asyncio.run(_send_two_batches_back_to_back())
    assert first_at_once, "an idle, connected stream takes a batch in the caller"
    assert not second_at_once, "a batch sent while a write is in flight waits for the sender task"
    assert [m.type for m in received] == [MessageType.APPEND, MessageType.HEARTBEAT]
