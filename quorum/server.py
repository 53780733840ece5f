"""`zkraft quorum start`: one quorum node as a process, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal
from typing import NoReturn, Protocol

import grpc

from quorum import errors
from quorum.join import ask_to_join
from quorum.lmdb_log_store import LogStoreIOError
from quorum.node import QuorumNode
from quorum.service import QuorumService, RaftPeerService
from quorum.settings import NodeSettings
from quorum.state_machine import StateMachine
from quorum.transport import GRPC_MESSAGE_BYTES_MAX, GRPC_OPTIONS
from runtime import event_loop, grpc_channels
from runtime.halt import EXIT_STORAGE_FAILED, halt
from runtime.heap_tuning import freeze_startup_objects
from runtime.json_logging import configure_logging
from runtime.message_limits import ENVELOPE_BYTES_MAX
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

HELLO_TIMEOUT_S = 1.0


async def check_peers_agree(settings: NodeSettings, digest: str) -> None:
    """Refuse to start when a reachable peer runs another cluster or another peer list."""

    async def hello(peer: int, address: str) -> str | None:
        async with grpc_channels.aio_channel(address, settings.peer_tls, GRPC_OPTIONS) as channel:
            try:
                reply = await pb_grpc.RaftPeerStub(channel).Hello(
                    pb.HelloRequest(cluster_id=settings.cluster_id, peers_digest=digest, **{"from": settings.node_id}),
                    timeout=HELLO_TIMEOUT_S,
                )
            except grpc.aio.AioRpcError:
                return None  # down or not started yet: nothing to compare
        if reply.cluster_id != settings.cluster_id:
            return f"peer {peer} at {address} belongs to cluster '{reply.cluster_id}', not '{settings.cluster_id}'"
        if reply.node_id != peer:
            return f"peer {peer} at {address} says it is node {reply.node_id}"
        if reply.peers_digest != digest:
            return (
                f"peer {peer} at {address} was started with peers {reply.peers}, this node with {settings.peers_string}"
            )
        return None

    problems = await asyncio.gather(*(hello(p, a) for p, a in settings.peers.items() if p != settings.node_id))
    for problem in problems:
        if problem:
            raise errors.StartupError(f"refusing to start: {problem}")


def server_options(settings: NodeSettings) -> list[tuple[str, object]]:
    """The peers' gRPC options, with the receive limit at least one session-stream message of jute.maxbuffer
    (zkemu.session_intake checks that bound itself: the Raft peers on the same port send larger batches).

    grpc enables SO_REUSEPORT by default on Linux, which would let a second node silently share a port
    that is already taken."""
    receive_bytes_max = max(GRPC_MESSAGE_BYTES_MAX, settings.jute_max_buffer_bytes + ENVELOPE_BYTES_MAX)
    options: list[tuple[str, object]] = [
        (key, receive_bytes_max if key == "grpc.max_receive_message_length" else value) for key, value in GRPC_OPTIONS
    ]
    return [*options, ("grpc.so_reuseport", 0)]


class NodeExtension(Protocol):
    """A service that runs inside a quorum node process (zkemu's ZooKeeper service)."""

    def register(self, node: QuorumNode, server: grpc.aio.Server) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def run_node(
    settings: NodeSettings,
    stop: asyncio.Event | None = None,
    state_machine: StateMachine | None = None,
    extension: NodeExtension | None = None,
) -> int:
    try:
        joined = await ask_to_join(settings) if settings.join else None
        node = QuorumNode(settings, state_machine, joined=joined)
    except errors.ClusterMismatchError as exc:
        if state_machine is not None:
            state_machine.close()
        raise errors.StartupError(f"refusing to start: {exc}") from None
    except errors.StartupError:  # nothing to rebuild a damaged state machine from, or a log it cannot start on
        if state_machine is not None:
            state_machine.close()
        raise
    server = grpc.aio.server(options=server_options(settings))
    pb_grpc.add_RaftPeerServicer_to_server(RaftPeerService(node), server)
    pb_grpc.add_QuorumServicer_to_server(QuorumService(node), server)
    if extension is not None:
        extension.register(node, server)
    try:
        grpc_channels.add_port(server, settings.listen, settings.peer_tls)
    except RuntimeError:
        node.state_machine.close()
        raise errors.StartupError(f"cannot listen on {settings.listen}: address in use or not local") from None
    await server.start()
    try:
        if not settings.join:
            await check_peers_agree(settings, node.digest)
    except errors.StartupError:
        await server.stop(grace=None)
        raise
    await node.start()
    if extension is not None:
        try:
            await extension.start()
        except errors.StartupError:  # e.g. its client port is taken: stop what started, then say why
            await extension.stop()
            await node.stop()
            await server.stop(grace=None)
            raise
    freeze_startup_objects()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: _log_loop_error(node, stop, ctx))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    failed = loop.create_task(node.wait_failed())
    stopped = loop.create_task(stop.wait())
    await asyncio.wait({failed, stopped}, return_when=asyncio.FIRST_COMPLETED)
    fatal = failed.result() if failed.done() else None
    if not failed.done():
        failed.cancel()
    if isinstance(fatal, LogStoreIOError):
        _halt_on_storage_failure(node, fatal)
    if extension is not None:
        await extension.stop()
    await node.stop()
    await server.stop(grace=0.2)
    node.log.info("node_stopped")
    return 1 if fatal is not None else 0


def _halt_on_storage_failure(node: QuorumNode, error: BaseException) -> NoReturn:
    """A write or fsync of the node's storage failed: stop now, as ZooKeeper's SyncThread does (it never
    acknowledges a transaction it could not sync). No clean stop: it would checkpoint and fsync again on a
    disk that just failed, and a retried fsync may report success for pages the kernel already dropped.
    The save that failed was never acknowledged (the node answers and votes only after its fsync returns);
    the next start replays the write-ahead log, whatever of that save reached it included."""
    node.log.critical(
        "storage_failed",
        error=str(error),
        data_dir=str(node.settings.data_dir),
        action="the node stops at once (exit code 1) and acknowledges nothing more; restart it once the disk is fixed",
    )
    halt(EXIT_STORAGE_FAILED)


def _log_loop_error(node: QuorumNode, stop: asyncio.Event, context: dict[str, object]) -> None:
    """Errors asyncio would print as a bare traceback become one JSON log line.

    While stopping, gRPC cancels the handlers of open peer streams; those
    cancellations are expected and not logged.
    """
    exc = context.get("exception")
    if isinstance(exc, asyncio.CancelledError) and stop.is_set():
        return
    node.log.error("event_loop_error", message=str(context.get("message")), error=repr(exc))


def serve(settings: NodeSettings) -> int:
    configure_logging()
    return event_loop.run(run_node(settings))
