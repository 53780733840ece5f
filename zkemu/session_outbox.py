"""What a session stream sends its client: replies and watch events, in the order they are put.

`serve` (run by the stream's handler, `ZooKeeperService.Session`) writes
them: whatever was put while a write was in flight, or since the writer's
last turn, leaves in one stream message. A watch event put while no write is
in flight goes to gRPC at once instead, in the caller (runtime.eager_start):
the apply that fired it, so the event does not wait for the writer's turn
(68 µs after the apply in a timestamp trace of watch-fire; paired runs, new/old
p50: watch-fire with the setter on the leader 1.031, 0.963, 0.998, 0.980, on
a follower 0.992, 0.956, 1.022, 0.918). Replies are not written in the caller: under
load a burst's first reply would leave alone and the rest wait for its write
(getData with 200 in flight fell from 40-50k to 21-31k/s when they were).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from runtime.eager_start import WriteInFlight
from zkraft_proto import zk_pb2


class Sink(Protocol):
    """Where a session's messages go: the gRPC servicer context, or a ZooKeeper wire connection
    (zkemu.jute_server.JuteSink). One write at a time; a write that fails raises (the client is gone).
    A sink with `takes_lists = True` is given the messages of a turn as a list instead of one
    ServerBatch (the wire front end encodes each: building the batch would copy them all)."""

    def write(self, message: Any) -> Coroutine[Any, Any, Any]: ...


class SessionOutbox:
    """`on_sent(requests, size_bytes)`: the replies put with those counts went to the sink (zkemu.admission)."""

    def __init__(self, context: Sink, on_sent: Callable[[int, int], None] | None = None) -> None:
        self._context = context
        self._takes_lists = getattr(context, "takes_lists", False)
        self._on_sent = on_sent
        self._pending: list[zk_pb2.ServerMessage] = []
        self._pending_requests = 0  # the requests whose replies are in `_pending`, and their bytes
        self._pending_bytes = 0
        self._write = WriteInFlight()
        self._wake = asyncio.Event()
        self._serving = False  # `serve` runs: the stream can be written
        self._ended = False

    def __len__(self) -> int:
        """Messages put and not yet handed to gRPC."""
        return len(self._pending)

    def put(self, message: zk_pb2.ServerMessage, at_once: bool = False, size_bytes: int = -1) -> None:
        """Queue `message`; `at_once`: hand it to gRPC now if no write is in flight (watch events).

        `size_bytes` >= 0: `message` answers one request of that many bytes in flight (on_sent)."""
        if self._ended:
            return  # the stream is ending: nothing after its last message
        self._pending.append(message)
        if size_bytes >= 0:
            self._pending_requests += 1
            self._pending_bytes += size_bytes
        if at_once and self._serving and self._write.idle:
            self._write.start(self._context.write(self._take_message()))
        self._wake.set()

    def end(self) -> None:
        """Send what was put so far, then nothing more: `serve` returns."""
        self._ended = True
        self._wake.set()

    async def serve(self) -> None:
        """Write what is put until `end`; raises what a write raised (the stream broke)."""
        self._serving = True
        try:
            while True:
                if self._write.idle:
                    if not self._pending:
                        if self._ended:
                            return
                        self._wake.clear()
                        await self._wake.wait()
                        continue
                    self._write.start(self._context.write(self._take_message()))
                await self._write.finish()
        finally:
            self._serving = False
            self._write.close()

    def _take_message(self) -> zk_pb2.ServerMessage | list[zk_pb2.ServerMessage]:
        """Everything put so far, as one stream message (or the list of them, for a sink taking lists)."""
        batch, self._pending = self._pending, []
        if self._pending_requests and self._on_sent is not None:
            self._on_sent(self._pending_requests, self._pending_bytes)
            self._pending_requests = self._pending_bytes = 0
        if self._takes_lists:
            return batch
        return batch[0] if len(batch) == 1 else zk_pb2.ServerMessage(batch=zk_pb2.ServerBatch(messages=batch))
