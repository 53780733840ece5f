"""Raft peer traffic over gRPC: one outgoing stream per peer, snapshots in chunks.

Raft tolerates lost messages, so the transport never blocks the node: each
peer has a bounded queue drained by one sender task into a long-lived
client stream; while a peer is unreachable its messages are dropped and the
node is told (`on_unreachable`), which puts that follower back into probing.
A stream that carried messages and then breaks hard (BROKEN_STREAM_CODES: the
connection was refused or reset, as when the peer's process died) is told
apart (`on_stream_broken`): a follower whose stream to its leader broke
campaigns at once instead of waiting out its election timeout
(Raft.leader_unreachable). A stream is watched for its end while idle too,
since a follower has nothing to write to a dead leader.
Every batch names the cluster id and a digest of the peer list, so that a
node started with the wrong configuration is refused instead of obeyed.

A gRPC stream takes one write at a time, and a write completes only when the
loop hears of it: after the leader's fsync, which runs on the loop thread for
a small batch. So the leader's DURABLE notice, due right after that fsync,
would wait behind its append's write. Notices go on a second stream to the
peer instead (NOTICE_TYPES): Raft tolerates the reordering, and a DURABLE
that overtakes its append commits nothing the follower does not hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

from quorum.codec import message_to_pb
from quorum.raft.types import Message, MessageType
from quorum.snapshot_store import SnapshotStore
from runtime import grpc_channels
from runtime.eager_start import WriteInFlight
from runtime.tls import TlsConfig
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

# Messages queued for one peer before the oldest are dropped (the peer is slow or gone).
PEER_QUEUE_MESSAGES_MAX = 8192
RECONNECT_DELAY_S_MIN = 0.02
RECONNECT_DELAY_S_MAX = 0.5
SNAPSHOT_CHUNK_BYTES = 1 << 20
# What goes on a peer's notice stream instead of its main one (the module docstring says why).
NOTICE_TYPES = frozenset({MessageType.DURABLE})
GRPC_MESSAGE_BYTES_MAX = 64 << 20
# How a live stream ends when the peer's connection is refused or reset (its process died): UNAVAILABLE,
# or, about one time in six when the reset comes under a write, INTERNAL ("Internal error from Core").
# A deliberate answer (FAILED_PRECONDITION: another cluster), a cancel or a deadline is not one.
BROKEN_STREAM_CODES = frozenset({"UNAVAILABLE", "INTERNAL"})
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", GRPC_MESSAGE_BYTES_MAX),
    ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX),
    # Notice a dead peer quickly when nothing is flowing; reconnect fast after it returns.
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 2000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
]


async def _final_code(call: Any) -> str | None:
    """The status of a call that failed under a write (grpc raises a bare error there)."""
    try:
        code = await asyncio.wait_for(call.code(), 0.5)
        return str(code.name)
    except Exception:
        return None


def broke_hard(code: str, live: bool) -> bool:
    """Whether a stream that failed with gRPC status `code` tells that the peer is gone, not slow: it
    had carried messages (`live`: a connection refused from the start says nothing new) and its
    connection was refused or reset (BROKEN_STREAM_CODES)."""
    return live and code in BROKEN_STREAM_CODES


def peers_digest(cluster_id: str, peers_text: str) -> str:
    return hashlib.sha256(f"{cluster_id}|{peers_text}".encode()).hexdigest()[:16]


class _Lane:
    """One stream to a peer: a bounded queue drained by one sender task into a long-lived client call.

    When the stream is idle, `enqueue` hands the batch to gRPC itself
    (runtime.eager_start) and the sender task only waits for the write to
    complete. Paired runs against the sender task writing everything (two
    clusters at once, 2-core machine, new/old p50): sequential creates from a
    client of the leader 0.936, 0.926, 0.955, 0.954, 0.889 (the follower's
    acknowledgement and the leader's append each leave a loop turn sooner);
    from a follower's client and watch-fire within the noise.
    """

    def __init__(self, sender: _PeerSender, name: str) -> None:
        self._sender = sender
        self._name = name
        self._queue: deque[Message] = deque()
        self._wakeup = asyncio.Event()
        self._call: Any = None  # the live stream, while the sender task has one
        self._write = WriteInFlight()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-{self._name}-{self._sender.peer}")

    @property
    def idle(self) -> bool:
        """Connected with no write in flight: `enqueue` would hand a batch to gRPC at once."""
        return self._write.idle and self._call is not None

    def enqueue(self, messages: Sequence[Message]) -> bool:
        """Queue `messages`; returns whether they went to gRPC at once (the stream was idle)."""
        q = self._queue
        q.extend(messages)
        overflow = len(q) - PEER_QUEUE_MESSAGES_MAX
        for _ in range(max(overflow, 0)):
            q.popleft()
        self._wakeup.set()
        if self.idle:
            # An idle stream: the batch goes to the socket now, not after a loop turn (runtime.eager_start).
            self._write.start(self._call.write(self._next_batch()))
            return True
        return False

    def _wake_on_end(self, _call: Any) -> None:
        """The call ended (a done callback of gRPC's, on the loop): an idle sender task finds out now."""
        self._wakeup.set()

    def _next_batch(self) -> pb.RaftBatch:
        msgs = list(self._queue)
        self._queue.clear()
        t = self._sender.transport
        return pb.RaftBatch(
            cluster_id=t.cluster_id,
            peers_digest=t.digest,
            messages=[message_to_pb(m) for m in msgs],
        )

    async def _run(self) -> None:
        sender = self._sender
        delay = RECONNECT_DELAY_S_MIN
        while True:
            # One call per connection attempt, written to directly: a request
            # iterator would outlive a failed call and swallow later batches.
            call = pb_grpc.RaftPeerStub(sender.channel()).Stream()
            self._call = call
            call.add_done_callback(self._wake_on_end)
            live = False  # a write completed on this call
            try:
                while True:
                    if self._write.idle:
                        if not self._queue:
                            if call.done():
                                await call  # an idle stream that ended: raises its error
                                raise ConnectionResetError("the peer ended the stream")
                            await self._wakeup.wait()
                            self._wakeup.clear()
                            continue
                        self._write.start(call.write(self._next_batch()))
                    await self._write.finish()
                    live = True
                    delay = RECONNECT_DELAY_S_MIN
            except asyncio.CancelledError:
                call.cancel()
                raise
            except grpc.aio.AioRpcError as exc:
                sender.unreachable(exc.code().name, exc.details() or "", live)
            except Exception as exc:  # loop boundary: log, back off, retry
                code = await _final_code(call)
                sender.unreachable(code or type(exc).__name__, str(exc), live)
            finally:
                self._call = None
                self._write.close()
            call.cancel()
            # Messages that piled up while the peer was away are stale by now.
            self._queue.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_DELAY_S_MAX)


class _PeerSender:
    """Everything sent to one peer: its channel, the main and notice lanes (streams), snapshot transfers."""

    def __init__(self, transport: PeerTransport, peer: int, address: str) -> None:
        self.transport = transport
        self.peer = peer
        self.address = address
        self._main = _Lane(self, "send")
        self._notices = _Lane(self, "notice")
        self._channel: grpc.aio.Channel | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._was_reachable = True

    def start(self) -> None:
        self._main.start()
        self._notices.start()

    def enqueue(self, messages: Sequence[Message]) -> bool:
        """Queue `messages` on their lanes; returns whether all went to gRPC at once."""
        notices = [m for m in messages if m.type in NOTICE_TYPES]
        if not notices:
            return self._main.enqueue(messages)
        at_once = self._notices.enqueue(notices)
        if len(notices) < len(messages):
            at_once &= self._main.enqueue([m for m in messages if m.type not in NOTICE_TYPES])
        return at_once

    @property
    def idle(self) -> bool:
        return self._main.idle

    def channel(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = grpc_channels.aio_channel(self.address, self.transport.tls, GRPC_OPTIONS)
        return self._channel

    def unreachable(self, code: str, details: str, live: bool = False) -> None:
        """A stream to the peer failed with gRPC status `code`; `live`: it had carried messages."""
        t = self.transport
        t.on_unreachable(self.peer)
        if broke_hard(code, live):
            t.on_stream_broken(self.peer)
        if code == "FAILED_PRECONDITION":
            t.log.error("peer_refused_us", peer=self.peer, address=self.address, reason=details)
        elif self._was_reachable:
            t.log.info("peer_unreachable", peer=self.peer, address=self.address, code=code)
        self._was_reachable = False

    def mark_reachable(self) -> None:
        self._was_reachable = True

    def send_snapshot(self, m: Message) -> None:
        if self._snapshot_task is not None and not self._snapshot_task.done():
            return  # one transfer at a time; the core waits for its report
        self._snapshot_task = asyncio.get_running_loop().create_task(
            self._stream_snapshot(m), name=f"raft-snapshot-{self.peer}"
        )

    async def _stream_snapshot(self, m: Message) -> None:
        assert m.snapshot is not None
        meta = m.snapshot
        ok = False
        try:
            stub = pb_grpc.RaftPeerStub(self.channel())
            result = await stub.InstallSnapshot(self._snapshot_chunks(m))
            ok = result.ok
            if not ok:
                self.transport.log.warning("snapshot_refused", peer=self.peer, index=meta.index, error=result.error)
            else:
                self.transport.log.info("snapshot_sent", peer=self.peer, index=meta.index, term=meta.term)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # loop boundary
            self.transport.log.warning("snapshot_send_failed", peer=self.peer, index=meta.index, error=str(exc))
        self.transport.on_snapshot_done(self.peer, ok)

    async def _snapshot_chunks(self, m: Message) -> AsyncIterator[pb.SnapshotChunk]:
        assert m.snapshot is not None
        header = message_to_pb(m)
        first = True
        chunks = self.transport.snapshots.read_chunks(m.snapshot, SNAPSHOT_CHUNK_BYTES)
        for data in chunks:
            yield pb.SnapshotChunk(cluster_id=self.transport.cluster_id, message=header if first else None, data=data)
            first = False
        yield pb.SnapshotChunk(cluster_id=self.transport.cluster_id, message=header if first else None, last=True)

    async def close(self) -> None:
        for task in (self._main.task, self._notices.task, self._snapshot_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._channel is not None:
            await self._channel.close(grace=None)


class PeerTransport:
    def __init__(
        self,
        node_id: int,
        peers: dict[int, str],
        cluster_id: str,
        digest: str,
        snapshots: SnapshotStore,
        on_unreachable: Callable[[int], None],
        on_snapshot_done: Callable[[int, bool], None],
        log: Any,
        tls: TlsConfig | None = None,
        on_stream_broken: Callable[[int], None] = lambda peer: None,
    ) -> None:
        self.node_id = node_id
        self.tls = tls  # sslQuorum: every peer stream is mutual TLS (runtime.grpc_channels)
        self.cluster_id = cluster_id
        self.digest = digest
        self.snapshots = snapshots
        self.on_unreachable = on_unreachable
        self.on_snapshot_done = on_snapshot_done
        self.on_stream_broken = on_stream_broken  # a live stream to the peer broke hard (_PeerSender.unreachable)
        self.log = log
        self._senders = {p: _PeerSender(self, p, addr) for p, addr in peers.items() if p != node_id}
        self._closing: set[asyncio.Task[None]] = set()  # senders of removed members, closing

    def start(self) -> None:
        for s in self._senders.values():
            s.start()

    def set_peers(self, peers: dict[int, str]) -> None:
        """The configuration changed (quorum.raft.membership): open streams to new members (or to a member's new
        address), close those to members no longer in it."""
        for p in [p for p, s in self._senders.items() if peers.get(p) != s.address]:
            sender = self._senders.pop(p)
            task = asyncio.get_running_loop().create_task(sender.close(), name=f"raft-close-{p}")
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        for p, address in peers.items():
            if p != self.node_id and p not in self._senders:
                sender = _PeerSender(self, p, address)
                self._senders[p] = sender
                sender.start()

    def send(self, messages: Sequence[Message]) -> bool:
        """Queue `messages` for their peers; returns whether every one went to gRPC at once (no stream
        had a write in flight), so that the caller need not give the sender tasks a loop turn."""
        at_once = True
        by_peer: dict[int, list[Message]] = {}
        for m in messages:
            if m.type is MessageType.SNAPSHOT:
                sender = self._senders.get(m.to)
                if sender is not None:
                    sender.send_snapshot(m)
                at_once = False
                continue
            by_peer.setdefault(m.to, []).append(m)
        for peer, msgs in by_peer.items():
            sender = self._senders.get(peer)
            if sender is not None:
                at_once &= sender.enqueue(msgs)
        return at_once

    def streams_idle(self) -> bool:
        """Whether every peer's main stream is connected with no write in flight (_Lane.idle)."""
        return all(s.idle for s in self._senders.values())

    def heard_from(self, peer: int) -> None:
        sender = self._senders.get(peer)
        if sender is not None:
            sender.mark_reachable()

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self._senders.values()), *self._closing)
