"""The ZooKeeper session service: one bidirectional gRPC stream per session.

Requests of a session are answered strictly in order (ZooKeeper's per-session
FIFO): writes are pipelined to the log as they arrive, a read waits until
every earlier request of its session is answered, and a write waits for
earlier reads. Writes also reach the log in the session's order across a
change of leader: one is not submitted through the new leader while an
earlier one, submitted before the change, is unanswered (it may yet be lost
and retried; zkemu.session_writes). Watch events are queued on the stream
while the transaction is applied, so an event always precedes the reply to
any later read that sees its change.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import structlog

from quorum.facade import NodeSettings, QuorumError, QuorumFacade, QuorumTimeoutError, await_owned
from zkemu import acl
from zkemu.admission import Admission
from zkemu.config_announcer import ClientAddressAnnouncer
from zkemu.container_manager import ContainerManager
from zkemu.errors import AuthFailedError, Code, NoAuthError, ZkError, message_for
from zkemu.events import EventType
from zkemu.paths import validate_path
from zkemu.reconfig import reconfigure
from zkemu.request_checks import write_problem
from zkemu.sasl import DigestMd5Server, SaslError, SaslLogins
from zkemu.server_stats import ServerStats
from zkemu.session_intake import Received, Refused, add_service
from zkemu.session_outbox import SessionOutbox, Sink
from zkemu.session_writes import SessionWrite, SessionWrites
from zkemu.sessions import SessionIds, SessionTracker, session_password
from zkemu.tree import AppliedTxn, ZnodeTree
from zkemu.watches import AddWatchMode, WatcherType, WatchManager
from zkemu.write_router import ConnectionLossError, Way, WriteRouter
from zkraft_proto import zk_pb2, zk_pb2_grpc

OUTBOUND_MESSAGES_MAX = 100_000
# getData replies from this size on count as bytes in flight until they leave (zkemu.admission), so
# that a client pipelining reads of large znodes without reading the replies is paused too; smaller
# ones are not counted (the request count bounds them), which keeps a small read's path as it was.
LARGE_REPLY_BYTES = 64 << 10
# A stream message's requests are dispatched this many at a time, with a loop turn between: the
# replies to the first ones leave while the rest are worked on, so client and server work at once
# instead of taking turns with whole batches of a few hundred. Measured on the 2-core machine,
# 200 getData in flight from one client: 12-13k -> 22-24k/s (32: 21-22k, 128: 20-22k, 16: 17k).
INTAKE_CHUNK_REQUESTS = 64
KEEPER_STATE_SYNC_CONNECTED = 3
# Heartbeats a reconnecting client's server may take to apply what the client has seen.
CATCH_UP_HEARTBEATS = 3
WRITE_OPS = frozenset({"create", "delete", "set_data", "check", "multi", "set_acl"})
# What a connection may send before it holds an id of an enforced scheme (ZooKeeperServer.processPacket
# answers auth and sasl before AuthenticationHelper.enforceAuthentication).
_LOGIN_OPS = frozenset({"auth", "sasl"})
LINEARIZABLE_READ_OPS = frozenset(
    {"get_data", "exists", "get_children", "get_all_children_number", "get_ephemerals", "multi_read"}
)


class ZooKeeperService(zk_pb2_grpc.ZooKeeperServicer):
    """Registered in a quorum node process (see zkemu.server); also the node extension hooks."""

    def __init__(self, settings: NodeSettings, tree: ZnodeTree) -> None:
        self.settings = settings
        self.tree = tree
        self.watches = WatchManager()
        self._connections: dict[int, SessionConnection] = {}  # session id -> its live stream here
        self._open_streams = 0  # session streams open here, connected or not yet
        self.quorum: QuorumFacade | None = None  # given when the node registers this service
        self.router: WriteRouter | None = None
        self.tracker: SessionTracker | None = None
        self.ids: SessionIds | None = None
        self.containers: ContainerManager | None = None  # its sweep runs while this node leads
        self.announcer: ClientAddressAnnouncer | None = None  # this node's line of /zookeeper/config
        self.reconfiguring = asyncio.Lock()  # one client reconfig at a time from this node
        self.admission = Admission(settings)
        self.server_stats = ServerStats()  # the ZooKeeper wire front end's figures (four-letter words)
        self._jute_server: asyncio.Server | None = None
        self._secure_jute_server: Any = None  # zkemu.jute_server's TLS server (secureClientPort)
        self.log = structlog.get_logger("zk").bind(node=settings.node_id)
        self.sasl = SaslLogins.from_settings(settings)  # the JAAS Server section's users, read once

    # ---- HostedService (quorum.facade)
    def register(self, quorum: QuorumFacade, server: grpc.aio.Server) -> None:
        self.quorum = quorum
        add_service(self, server, self.settings.jute_max_buffer_bytes)

    async def start(self) -> None:
        assert self.quorum is not None
        self.router = WriteRouter(self.quorum)
        self.router.start()
        self.tracker = SessionTracker(self.quorum, self.tree.sessions, self.router, self.settings.tick_time_ms)
        self.tracker.start()
        self.admission.start()
        self.containers = ContainerManager(self.quorum, self.tree, self.router, self.settings)
        self.containers.start()
        self.announcer = ClientAddressAnnouncer(self.quorum, self.tree, self.router, self.settings)
        self.announcer.start()
        self.ids = SessionIds(self.settings.node_id, lambda: int(time.time() * 1000))
        # Until a client connects here, this node (as a follower) learns commits
        # with the leader's next append or heartbeat (QuorumNode.set_commit_interest says why).
        self.quorum.set_commit_interest(self._open_streams > 0)
        if self.settings.client_port:
            from zkemu.jute_server import start_jute_server  # the wire front end needs this module

            self._jute_server = await start_jute_server(self)
        if self.settings.secure_client_port:
            from zkemu.jute_server import start_jute_server

            self._secure_jute_server = await start_jute_server(self, secure=True)

    async def stop(self) -> None:
        if self._jute_server is not None:
            self._jute_server.close()  # no new ZooKeeper-wire connections; the live ones end below
        if self._secure_jute_server is not None:
            self._secure_jute_server.close()
        for conn in list(self._connections.values()):
            conn.end()
        await self.admission.stop()
        if self.containers is not None:
            await self.containers.stop()
        if self.announcer is not None:
            await self.announcer.stop()
        if self.tracker is not None:
            await self.tracker.stop()
        if self.router is not None:
            await self.router.stop()

    # ---- called while a transaction is applied (inside the node's Ready loop)
    def on_applied(self, applied: AppliedTxn) -> None:
        for trigger in applied.triggers:
            self.watches.trigger(EventType(trigger.type), trigger.path, applied.zxid, trigger.acl)
        if applied.forward_tag and self.router is not None:
            self.router.forwarded.applied(applied.forward_tag, applied.zxid, applied.result)
        if applied.created_session and self.tracker is not None:
            sid = applied.created_session
            timeout_ms = self.tree.session_timeout_ms(sid) or self.settings.session_timeout_bounds_ms[0]
            self.tracker.session_created(sid, timeout_ms)
        if applied.closed_session:
            if self.tracker is not None:
                self.tracker.session_closed(applied.closed_session)
            conn = self._connections.get(applied.closed_session)
            if conn is not None:
                conn.session_closed()

    # ---- the session stream
    async def Session(  # noqa: N802
        self, request_iterator: AsyncIterator[Received], context: grpc.aio.ServicerContext
    ) -> None:
        """One session stream: the connection's read loop takes the requests, `outbound` writes the
        replies and events (zkemu.session_outbox)."""
        conn = SessionConnection(self, context, _peer_host(context.peer()))
        self.stream_opened()
        reader = asyncio.get_running_loop().create_task(conn.read_loop(request_iterator))
        try:
            try:
                await conn.outbound.serve()
            except Exception as exc:  # a write failed: the client is gone, nobody to tell
                self.log.debug("session_stream_write_failed", session_id=conn.session_id, error=repr(exc))
                return
            if conn.abort_status is not None:
                await context.abort(*conn.abort_status)
        finally:
            reader.cancel()
            conn.detach()
            self.stream_closed()

    def stream_opened(self) -> None:
        """A client reads here from now on: commits must reach this node at once."""
        self._open_streams += 1
        if self._open_streams == 1 and self.quorum is not None:
            self.quorum.set_commit_interest(True)

    def stream_closed(self) -> None:
        self._open_streams -= 1
        if self._open_streams == 0 and self.quorum is not None:
            self.quorum.set_commit_interest(False)

    def attach(self, conn: SessionConnection) -> None:
        old = self._connections.get(conn.session_id)
        if old is not None and old is not conn:
            old.end()  # the session moved to a newer connection (ZooKeeper SESSIONMOVED)
        self._connections[conn.session_id] = conn

    def requests_in_flight(self, session_id: int) -> int:
        """Requests of the session connected here that are read and not yet answered (`cons` queued)."""
        conn = self._connections.get(session_id)
        return conn.requests_in_flight if conn is not None else 0

    def detach(self, conn: SessionConnection) -> None:
        if self._connections.get(conn.session_id) is conn:
            del self._connections[conn.session_id]
        self.watches.remove_watcher(conn)

    # ---- leader-side RPCs from followers
    async def Forward(  # noqa: N802
        self, request_iterator: AsyncIterator[zk_pb2.ForwardRequest], context: Any
    ) -> AsyncIterator[zk_pb2.ForwardResponse]:
        """A follower's write batches: each proposed as it arrives (log order = arrival order), answered in order."""
        assert self.router is not None and self.tracker is not None
        router, touch = self.router, self.tracker.touch
        proposed: asyncio.Queue[asyncio.Future[list[tuple[int, bytes]]] | zk_pb2.ForwardResponse | None]
        proposed = asyncio.Queue()

        async def propose_arrivals() -> None:
            try:
                async for request in request_iterator:
                    try:
                        proposed.put_nowait(router.propose_forwarded(list(request.txns), touch))
                    except QuorumError as exc:
                        proposed.put_nowait(_forward_error(exc))
            finally:
                proposed.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(propose_arrivals())
        timeout_s = self.settings.proposal_timeout_ms / 1000
        try:
            while (item := await proposed.get()) is not None:
                if isinstance(item, zk_pb2.ForwardResponse):
                    yield item
                    continue
                try:
                    results = await await_owned(item, timeout_s)
                except TimeoutError:
                    yield _forward_error(QuorumTimeoutError(f"not committed within {timeout_s:.1f}s"))
                except QuorumError as exc:
                    yield _forward_error(exc)
                else:
                    yield zk_pb2.ForwardResponse(zxids=[i for i, _ in results], results=[r for _, r in results])
        finally:
            reader.cancel()
            while not proposed.empty():  # the follower went away: nobody will read these outcomes
                left = proposed.get_nowait()
                if isinstance(left, asyncio.Future):
                    left.add_done_callback(_ignore_outcome)

    async def TouchSessions(  # noqa: N802
        self, request: zk_pb2.TouchSessionsRequest, context: Any
    ) -> zk_pb2.TouchSessionsResponse:
        assert self.tracker is not None
        return zk_pb2.TouchSessionsResponse(unknown_session_ids=self.tracker.touch_many(list(request.session_ids)))


class SessionConnection:
    """One client stream, of either front end: the gRPC Session stream, or a ZooKeeper wire (jute)
    connection (zkemu.jute_server). `sink` writes what the outbox sends (the gRPC servicer context,
    or the jute connection's encoder); `read_loop` takes the requests either front end decodes.
    Also the `Watcher` the watch manager notifies."""

    def __init__(self, service: ZooKeeperService, sink: Sink, peer_host: str = "") -> None:
        assert service.quorum is not None  # streams open once the node registered the service
        self.service = service
        self.quorum: QuorumFacade = service.quorum  # an attribute: every reply reads its applied index
        self.context = sink
        self.peer_host = peer_host  # the client's IP address (the ip ACL scheme reads it)
        self.session_id = 0
        # Names this connection in its writes (Txn.connection): the session's owner at apply fences writes
        # of a connection the client has left (zkemu.tree _check_session). Random: unique cluster-wide.
        self.connection_id = secrets.randbits(64) or 1
        self.linearizable = False
        # The session's authenticated ids on this connection (ServerCnxn.authInfo): ip:<address> from the
        # start, as IPAuthenticationProvider gives every connection; `auth` adds to them. Writes carry them
        # in Txn.auth, for the ACL checks at apply (zkemu.tree).
        self.auth_ids: tuple[acl.Id, ...] = (acl.Id(acl.IP, self.peer_host),)
        self._auth_pb = [zk_pb2.Id(scheme=i.scheme, id=i.id) for i in self.auth_ids]
        self._sasl_server: DigestMd5Server | None = None  # this connection's SASL login, once begun
        # enforce.auth.enabled: requests other than a login are refused until the connection has an id of the
        # enforced schemes (zkemu.sasl). False when not enforced: one attribute test a request.
        self._must_authenticate = not service.sasl.allows(self.auth_ids)
        self.outbound = SessionOutbox(sink, self._replies_sent)
        self.abort_status: tuple[grpc.StatusCode, str] | None = None
        # Requests in the order they came, until their replies are queued; a
        # reply leaves only when every earlier one has (ZooKeeper's FIFO).
        self._order: deque[_Slot] = deque()
        self._working: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references to tasks
        self._last_slot: asyncio.Task[None] | None = None  # the newest request still being worked on
        self._last_read: asyncio.Task[None] | None = None
        self._writes = SessionWrites()  # in the order they must reach the log
        self._group_replies = _GroupReplies(self)  # answers the writes the router sends in groups
        self._closed = False
        # Requests read and not yet answered to gRPC, and their bytes (zkemu.admission).
        self._requests_in_flight = 0
        self._bytes_in_flight = 0
        self._released = False  # detached: what was in flight was given back
        self._resume = asyncio.Event()  # set when a paused stream may read again
        self._paused = False
        self._reply_bytes = 0  # a large reply's data, between the read that made it and `_answer`

    def __hash__(self) -> int:
        return id(self)

    @property
    def requests_in_flight(self) -> int:
        return self._requests_in_flight

    # ---- Watcher
    def send_event(self, event_type: int, path: str, zxid: int) -> None:
        if self._closed:
            return
        if len(self.outbound) > OUTBOUND_MESSAGES_MAX:
            self.end(grpc.StatusCode.RESOURCE_EXHAUSTED, "client too slow: too many unread watch events")
            return
        self.outbound.put(
            zk_pb2.ServerMessage(
                event=zk_pb2.WatchEvent(type=event_type, state=KEEPER_STATE_SYNC_CONNECTED, path=path, zxid=zxid)
            ),
            at_once=True,
        )

    # ---- lifecycle
    def end(self, code: grpc.StatusCode | None = None, message: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        if code is not None:
            self.abort_status = (code, message)
        self.outbound.end()

    def session_closed(self) -> None:
        """The session was closed or expired through the log: once pending replies are out, end the stream."""
        self._order.append(_Slot(ends_stream=True))
        self._flush_replies()

    def detach(self) -> None:
        self._closed = True
        for t in list(self._working):
            t.cancel()
        if not self._released:
            self._released = True
            self.service.admission.forget(self._resume)
            self.service.admission.give_back(self._requests_in_flight, self._bytes_in_flight)
        if self.session_id:
            self.service.detach(self)

    async def read_loop(self, requests: AsyncIterator[Received]) -> None:
        try:
            first = await anext(requests, None)
            if isinstance(first, Refused):
                self._refuse(first)
                return
            if first is None or first[1].WhichOneof("kind") != "connect":
                self.end(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a session must be connect")
                return
            if not await self._connect(first[1].connect):
                return
            async for received in requests:
                rest = self._take_message(received)
                while rest is not None and not self._closed:
                    await asyncio.sleep(0)  # a large batch: the replies to its first requests leave meanwhile
                    rest = self._dispatch_chunk(*rest)
                if self._closed:
                    return
                if self._must_pause():
                    await self._paused_until_admitted()
            # The client closed its side: it sends nothing more, so the stream ends once what it
            # sent is answered (ZooKeeper closes a connection whose client closed it).
            self.session_closed()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # loop boundary: one bad stream must not hurt the server
            self.service.log.warning("session_stream_error", session_id=self.session_id, error=repr(exc))
            self.end(grpc.StatusCode.INTERNAL, f"server error: {exc}")

    def _refuse(self, refused: Refused) -> None:
        """Over jute.maxbuffer, or not parsable: ZooKeeper closes such a connection (zkemu.session_intake)."""
        self.service.log.warning("session_message_refused", session_id=self.session_id, reason=refused.problem)
        self.end(refused.status, refused.problem)

    def _take_message(self, received: Received) -> tuple[Sequence[zk_pb2.Request], int] | None:
        """Dispatch one stream message's requests, or its first INTAKE_CHUNK_REQUESTS: then the rest
        (and each request's bytes) is returned, to dispatch after a loop turn. Ends the stream when
        the message is refused or not a request."""
        if isinstance(received, Refused):
            self._refuse(received)
            return None
        size_bytes, msg = received
        kind = msg.WhichOneof("kind")
        if kind == "request":
            self._take_in_flight(1, size_bytes)
            self._dispatch_all((msg.request,), size_bytes)
            return None
        if kind == "batch":
            requests_in = msg.batch.requests
            if not requests_in:
                return None
            share_bytes = size_bytes // len(requests_in)
            self._take_in_flight(len(requests_in), share_bytes * len(requests_in))
            return self._dispatch_chunk(requests_in, share_bytes)
        self.end(grpc.StatusCode.INVALID_ARGUMENT, "connect may only be sent once per stream")
        return None

    def _dispatch_chunk(
        self, requests: Sequence[zk_pb2.Request], size_bytes: int
    ) -> tuple[Sequence[zk_pb2.Request], int] | None:
        self._dispatch_all(requests[:INTAKE_CHUNK_REQUESTS], size_bytes)
        rest = requests[INTAKE_CHUNK_REQUESTS:]
        return (rest, size_bytes) if len(rest) else None

    # ---- what this stream holds in flight (zkemu.admission)
    def _take_in_flight(self, count: int, size_bytes: int) -> None:
        self._requests_in_flight += count
        self._bytes_in_flight += size_bytes
        self.service.admission.take(count, size_bytes)

    def _replies_sent(self, count: int, size_bytes: int) -> None:
        """The outbox handed replies to gRPC: their requests are no longer in flight."""
        if self._released:
            return
        self._requests_in_flight -= count
        self._bytes_in_flight -= size_bytes
        self.service.admission.give_back(count, size_bytes)
        if self._paused and not self._must_pause():
            self._resume.set()

    def _must_pause(self) -> bool:
        """ZooKeeperServer.shouldThrottle, and the same for this session alone: only with requests of
        its own in flight (they finish without help, so the stream always resumes)."""
        if not self._requests_in_flight:
            return False
        admission = self.service.admission
        return (
            admission.over
            or self._requests_in_flight >= admission.session_requests_max
            or self._bytes_in_flight >= admission.session_bytes_max
        )

    async def _paused_until_admitted(self) -> None:
        """Read nothing more until this session and the node are below their bounds (backpressure:
        the client's writes wait in gRPC's flow control)."""
        admission = self.service.admission
        self._paused = True
        try:
            while self._must_pause() and not self._closed:
                self._resume.clear()
                if admission.over:
                    admission.wait_below(self._resume)
                await self._resume.wait()
        finally:
            self._paused = False
            admission.forget(self._resume)

    async def _connect(self, req: zk_pb2.ConnectRequest) -> bool:
        svc = self.service
        low, high = svc.settings.session_timeout_bounds_ms
        timeout_ms = min(max(req.timeout_ms, low), high)
        self.linearizable = req.linearizable_reads
        applied = self.quorum.applied_index
        if req.session_id == 0:
            assert svc.ids is not None and svc.router is not None
            sid = svc.ids.next()
            txn = zk_pb2.Txn(
                session_id=sid,
                connection=self.connection_id,
                create_session=zk_pb2.CreateSessionTxn(session_id=sid, timeout_ms=timeout_ms),
            )
            try:
                await svc.router.submit(txn, svc.settings.proposal_timeout_ms / 1000)
            except ConnectionLossError as exc:
                self.end(grpc.StatusCode.UNAVAILABLE, f"cannot create a session now: {exc}")
                return False
        else:
            sid = req.session_id
            if applied < req.last_zxid_seen:
                applied = await self._catch_up_to(req.last_zxid_seen)
            if applied < req.last_zxid_seen:
                # The client has seen newer state than this server has: it must go elsewhere (ZooKeeper rule).
                self.end(
                    grpc.StatusCode.UNAVAILABLE,
                    f"server is behind the client (zxid {applied} < {req.last_zxid_seen}); try another server",
                )
                return False
            if not svc.tree.has_session(sid):
                await self._apply_what_leader_committed()
            if (
                req.password != session_password(svc.settings.cluster_id, sid)
                or not svc.tree.has_session(sid)
                or not await self._attach(sid)
            ):
                if self._closed:
                    return False  # the attach could not be committed now: the client tries another server
                self.outbound.put(
                    zk_pb2.ServerMessage(
                        connect=zk_pb2.ConnectResponse(
                            session_id=0,
                            timeout_ms=0,
                            password=bytes(16),
                            server_id=svc.settings.node_id,
                            last_zxid=applied,
                        )
                    )
                )
                self.end()
                return False
            timeout_ms = svc.tree.session_timeout_ms(sid) or timeout_ms
        self.session_id = sid
        svc.attach(self)
        assert svc.tracker is not None
        svc.tracker.touch(sid)
        self.outbound.put(
            zk_pb2.ServerMessage(
                connect=zk_pb2.ConnectResponse(
                    session_id=sid,
                    password=session_password(svc.settings.cluster_id, sid),
                    timeout_ms=timeout_ms,
                    server_id=svc.settings.node_id,
                    last_zxid=self.quorum.applied_index,
                )
            )
        )
        return True

    async def _attach(self, sid: int) -> bool:
        """Make this connection the session's owner through the log before answering the reconnect, so that
        a write the client left on a connection it abandoned (on a paused or cut-off server, or still in
        TCP's retransmission queue) is refused if it reaches the log later, instead of landing after the
        writes the client makes here (ZooKeeper revalidates a moving session with its leader and refuses
        the old owner's requests with SESSIONMOVED). False: the session expired meanwhile; on a write
        that could not be committed now, the stream ends (the client tries another server)."""
        svc = self.service
        assert svc.router is not None
        txn = zk_pb2.Txn(session_id=sid, connection=self.connection_id, attach_session=zk_pb2.AttachSessionTxn())
        try:
            _, result = await svc.router.submit(txn, svc.settings.proposal_timeout_ms / 1000)
        except ConnectionLossError as exc:
            self.end(grpc.StatusCode.UNAVAILABLE, f"cannot attach the session now: {exc}")
            return False
        return result.err != Code.SESSIONEXPIRED

    async def _apply_what_leader_committed(self) -> None:
        """Apply everything the leader has committed (a ReadIndex round): a session this server does not
        know yet may have been created a moment ago elsewhere (a client that has seen nothing of it
        reconnects with last zxid 0). ZooKeeper's follower asks its leader the same way
        (Learner.validateSession) before answering a reconnect as expired."""
        timeout_s = self.service.settings.proposal_timeout_ms / 1000
        with contextlib.suppress(QuorumError):
            await self.quorum.wait_applied(await self.quorum.read_index(timeout_s), timeout_s)

    async def _catch_up_to(self, zxid: int) -> int:
        """This server's applied zxid after giving it a few heartbeats to reach `zxid`.

        A follower that had no sessions learns commits only with the leader's
        next append or heartbeat (QuorumNode.set_commit_interest), so a client
        moving here may have seen a zxid this server holds but has not applied
        yet. Waiting a few heartbeats tells that apart from a server that is
        really behind, which the client must leave."""
        settings = self.service.settings
        wait_s = CATCH_UP_HEARTBEATS * settings.heartbeat_interval_ticks * settings.tick_ms / 1000
        with contextlib.suppress(QuorumTimeoutError):
            await self.quorum.wait_applied(zxid, wait_s)
        return self.quorum.applied_index

    # ---- ordering
    def _dispatch_all(self, requests: Sequence[zk_pb2.Request], size_bytes: int) -> None:
        """Dispatch one stream message's requests in order; each run of consecutive writes together.
        `size_bytes`: what each request holds in flight (its share of the stream message)."""
        run: list[tuple[zk_pb2.Request, str]] = []
        for req in requests:
            if self._closed:
                return
            op = req.WhichOneof("op")
            if self._must_authenticate and op not in _LOGIN_OPS:
                if run:
                    self._dispatch_writes(run, size_bytes)
                self._refuse_unauthenticated(req)
                return
            if op in WRITE_OPS:
                run.append((req, op))
                continue
            if run:
                self._dispatch_writes(run, size_bytes)
                run = []
            self._dispatch(req, op, size_bytes)
        if run and not self._closed:
            self._dispatch_writes(run, size_bytes)

    def _dispatch_writes(self, requests: list[tuple[zk_pb2.Request, str]], size_bytes: int) -> None:
        """Consecutive writes of the session. With no earlier read to wait for, they go together the way
        the write router says (zkemu.write_router): the leader proposes them at once, as consecutive log
        entries, and a follower forwards them as one batch; one task answers them.

        Under load a client sends its writes in batches of up to hundreds, and
        a task, a timer and a proposal per write were most of the leader's
        work per write beyond applying it (a follower's: a task and a forward
        each; creates from a follower's client, 200 in flight: 1.05-1.15x). A
        write that cannot go this way (an earlier read or an earlier write on
        another route must be waited for, no leader is known) goes through
        `_dispatch`, one task each.
        """
        assert self.service.router is not None and self.service.tracker is not None
        router = self.service.router
        decision = router.way_now()
        if decision.way is Way.WAIT or _unfinished(self._last_read) is not None:
            for req, op in requests:
                self._dispatch(req, op, size_bytes)
            return
        self.service.tracker.touch(self.session_id)
        route = decision.route
        group: list[_GroupWrite] = []
        alone: list[_GroupWrite] = []  # after a write that may not join the group: one task each
        for req, op in requests:
            body = getattr(req, op)
            item = _GroupWrite(_Slot(req.xid, size_bytes), req, op, body, self._writes.add(), _NO_TXN)
            self._order.append(item.slot)
            problem = write_problem(op, body, self.service.settings.extended_types_enabled)
            if problem is not None:
                item.write.settle()
                self._answer(item.slot, self._reply(req, err=problem[0], error_message=problem[1]))
            elif not alone and item.write.try_take(route):
                item.txn = self._txn(op, body)
                group.append(item)
            else:
                alone.append(item)
        if group:
            sent = router.send_group(decision, group, self._group_replies)
            if sent is None:
                # Nothing was appended: each write takes the usual way, which retries or answers CONNECTIONLOSS.
                alone = group + alone
            else:
                self._track(self._answer_group(group, sent))
        for item in alone:
            self._work_on(item.slot, self._write(item.req, item.op, None, item.write))

    async def _answer_group(self, group: list[_GroupWrite], settle: Coroutine[Any, Any, None]) -> None:
        """Answer a group of writes sent together (_dispatch_writes), each in its slot, as `settle` does."""
        try:
            await settle
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: answer what is left, keep the session
            for item in group:
                if item.slot.response is None:
                    item.slot.response = self._server_error(exc, item.slot.xid)
            self._flush_replies()
        finally:
            for item in group:
                item.write.settle()

    def _txn(self, op: str, body: Any) -> zk_pb2.Txn:
        txn = zk_pb2.Txn(session_id=self.session_id, connection=self.connection_id, auth=self._auth_pb)
        getattr(txn, op).CopyFrom(body)
        return txn

    def _dispatch(self, req: zk_pb2.Request, op: str | None, size_bytes: int) -> None:
        """One request (`op`: its WhichOneof("op")), in the session's order."""
        assert self.service.tracker is not None
        self.service.tracker.touch(self.session_id)
        slot = _Slot(req.xid, size_bytes)
        self._order.append(slot)
        if op in WRITE_OPS:
            self._work_on(slot, self._write(req, op, _unfinished(self._last_read), self._writes.add()))
        elif op == "reconfig":
            self._work_on(slot, self._reconfig(req, _unfinished(self._last_slot)))
        elif op == "close":
            self._work_on(slot, self._close(req, _unfinished(self._last_slot)))
            self._order.append(_Slot(ends_stream=True))
        elif _unfinished(self._last_slot) is None and not self._needs_read_index(op):
            # Nothing earlier is outstanding: answer at once, without a task
            # (most reads; a task and its wake-ups are most of a read's cost).
            self._last_slot = self._last_read = None
            try:
                response = self._read_now(req, op)
            except Exception as exc:  # a bug in one request: answer it, keep the session
                response = self._server_error(exc, req.xid)
            self._answer(slot, response)
        else:
            self._last_read = self._work_on(slot, self._read(req, op, _unfinished(self._last_slot)))

    def _work_on(self, slot: _Slot, work: Coroutine[Any, Any, zk_pb2.Response]) -> asyncio.Task[None]:
        return self._track(self._answer_when_done(slot, work))

    def _track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `work` as the task of the session's newest request(s)."""
        task = asyncio.get_running_loop().create_task(work)
        self._working.add(task)
        task.add_done_callback(self._working.discard)
        self._last_slot = task
        return task

    async def _answer_when_done(self, slot: _Slot, work: Coroutine[Any, Any, zk_pb2.Response]) -> None:
        try:
            response = await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in one request: answer it, keep the session
            response = self._server_error(exc, slot.xid)
        self._answer(slot, response)

    def _server_error(self, exc: Exception, xid: int) -> zk_pb2.Response:
        self.service.log.error("request_failed", session_id=self.session_id, xid=xid, error=repr(exc))
        return zk_pb2.Response(
            xid=xid, zxid=self.quorum.applied_index, err=Code.SYSTEMERROR, error_message=f"server error: {exc}"
        )

    def _answer(self, slot: _Slot, response: zk_pb2.Response) -> None:
        if self._reply_bytes:
            # The large getData reply just made (_get_data) is held until it leaves, like a request's bytes.
            slot.size_bytes += self._reply_bytes
            self._take_in_flight(0, self._reply_bytes)
            self._reply_bytes = 0
        slot.response = response
        self._flush_replies()

    def _flush_replies(self) -> None:
        """Queue the replies at the head of the order that are ready, in order, and nothing after a gap."""
        order = self._order
        while order and (order[0].response is not None or order[0].ends_stream):
            head = order.popleft()
            if head.ends_stream:
                self.end()
                return
            if not self._closed:
                self.outbound.put(zk_pb2.ServerMessage(response=head.response), False, head.size_bytes)
            if head.response.err == Code.AUTHFAILED:
                # Only an `auth` is answered so: ZooKeeper closes the connection after the reply.
                self.end()
                return

    # ---- writes
    async def _write(
        self, req: zk_pb2.Request, op: str, after: Awaitable[Any] | None, write: SessionWrite
    ) -> zk_pb2.Response:
        try:
            if after is not None:
                await asyncio.wait([after])  # type: ignore[list-item]
            body = getattr(req, op)
            problem = write_problem(op, body, self.service.settings.extended_types_enabled)
            if problem is not None:
                return self._reply(req, err=problem[0], error_message=problem[1])
            return await self._submit(req, self._txn(op, body), op, body, write)
        finally:
            write.settle()

    async def _submit(
        self, req: zk_pb2.Request, txn: zk_pb2.Txn, op: str, body: Any, write: SessionWrite | None = None
    ) -> zk_pb2.Response:
        svc = self.service
        assert svc.router is not None
        try:
            # `write`: in the session's order across leader changes (zkemu.session_writes).
            _, result = await svc.router.submit(txn, svc.settings.proposal_timeout_ms / 1000, write)
        except ConnectionLossError as exc:
            return self._write_lost(req, str(exc))
        return self._write_response(req, op, body, result)

    def _write_lost(self, req: zk_pb2.Request, message: str) -> zk_pb2.Response:
        """A write whose outcome is unknown (its leader went away with it, or did not answer in time): the
        connection ends, as a ZooKeeper follower that loses its leader closes its clients' connections. The
        client reconnects, and its reconnect attaches the session through the log (_attach), after the lost
        write if that write survives, so what the client reads next shows the write or it never will be.
        An error on an open connection let kazoo's Lock look for its node before a new leader committed it,
        create a second one, and wait on its own first node forever (the long fault campaign's run 51)."""
        self.end(grpc.StatusCode.UNAVAILABLE, f"a write's outcome is unknown ({message}): reconnect")
        return self._reply(req, err=Code.CONNECTIONLOSS, error_message=message)

    def _write_response(self, req: zk_pb2.Request, op: str, body: Any, result: zk_pb2.TxnResult) -> zk_pb2.Response:
        if result.err == Code.SESSIONMOVED:
            # The session was attached to another connection after this one's (a reconnect elsewhere, or an
            # attach of an abandoned reconnect that reached the log late): ZooKeeper closes the connection
            # (FinalRequestProcessor, ZOOKEEPER-710), and the client's reconnect attaches the session anew.
            self.end(grpc.StatusCode.UNAVAILABLE, "the session moved to another connection: reconnect")
        if op == "multi":
            failed = next((r.err for r in result.results if r.err not in (0, Code.RUNTIMEINCONSISTENCY)), 0)
            return self._reply(
                req, err=0, results=result.results, error_message=message_for(failed, "multi") if failed else ""
            )
        path = getattr(body, "path", "")
        if result.err:
            return self._reply(req, err=result.err, error_message=message_for(result.err, path))
        resp = self._reply(req, path=result.path)
        if result.HasField("stat"):
            resp.stat.CopyFrom(result.stat)
        return resp

    async def _reconfig(self, req: zk_pb2.Request, after: Awaitable[Any] | None) -> zk_pb2.Response:
        """reconfig (zkemu.reconfig), after every earlier request of the session; answered as a getData of
        /zookeeper/config, or RECONFIGDISABLED while reconfigEnabled is off (ZooKeeper's default)."""
        if after is not None:
            await asyncio.wait([after])  # type: ignore[list-item]
        svc = self.service
        if not svc.settings.reconfig_enabled:
            return self._reply(req, err=Code.RECONFIGDISABLED, error_message=message_for(Code.RECONFIGDISABLED))
        assert svc.router is not None
        try:
            async with svc.reconfiguring:
                timeout_s = svc.settings.proposal_timeout_ms / 1000
                session_timeout_ms = svc.tree.session_timeout_ms(self.session_id) or 0
                data, stat = await reconfigure(
                    self.quorum, svc.router, svc.tree, req.reconfig, self.auth_ids, timeout_s, session_timeout_ms
                )
        except ZkError as exc:
            svc.log.info("reconfig_refused", session_id=self.session_id, err=exc.code.name, reason=str(exc))
            return self._reply(req, err=exc.code, error_message=str(exc))
        svc.log.info("reconfig_done", session_id=self.session_id, mzxid=stat.mzxid)
        return self._reply(req, data=data, stat=stat.to_pb())

    # ---- reads (and pings, sync, watch management): after every earlier request
    def _needs_read_index(self, op: str | None) -> bool:
        return op == "sync" or (self.linearizable and op in LINEARIZABLE_READ_OPS)

    async def _read(self, req: zk_pb2.Request, op: str | None, after: Awaitable[Any] | None) -> zk_pb2.Response:
        if after is not None:
            await asyncio.wait([after])  # type: ignore[list-item]
        if self._needs_read_index(op):
            timeout_s = self.service.settings.proposal_timeout_ms / 1000
            try:
                index = await self.quorum.read_index(timeout_s)
                await self.quorum.wait_applied(index, timeout_s)
            except QuorumError as exc:
                return self._reply(req, err=Code.CONNECTIONLOSS, error_message=str(exc))
        return self._read_now(req, op)

    def _read_now(self, req: zk_pb2.Request, op: str | None) -> zk_pb2.Response:
        handler = _READ_HANDLERS.get(op or "")
        if handler is None:
            return self._reply(req, err=Code.UNIMPLEMENTED, error_message=f"unknown request {op!r}")
        try:
            return handler(self, req)
        except ZkError as exc:
            return self._reply(req, err=exc.code, error_message=str(exc))

    def _reply(self, req: zk_pb2.Request, **fields: Any) -> zk_pb2.Response:
        return zk_pb2.Response(xid=req.xid, zxid=self.quorum.applied_index, **fields)

    # Reads do not validate their path: ZooKeeper answers NONODE for a path that
    # cannot exist (only writes run PathUtils.validatePath on the server).
    def _get_data(self, req: zk_pb2.Request) -> zk_pb2.Response:
        r = req.get_data
        data, stat, null = self.service.tree.get_data_or_null(r.path, self.auth_ids)
        if r.watch:
            self.service.watches.add_data_watch(self, r.path)
        if len(data) >= LARGE_REPLY_BYTES:
            self._reply_bytes = len(data)  # charged to its request's slot by `_answer`, which comes next
        if null:
            return self._reply(req, null_data=True, stat=stat.to_pb())
        return self._reply(req, data=data, stat=stat.to_pb())

    def _exists(self, req: zk_pb2.Request) -> zk_pb2.Response:
        r = req.exists
        stat = self.service.tree.stat(r.path, self.auth_ids)
        if r.watch:
            # Registered whether or not the node exists: a later create fires NodeCreated.
            self.service.watches.add_data_watch(self, r.path)
        if stat is None:
            return self._reply(req, exists=False)
        return self._reply(req, exists=True, stat=stat.to_pb())

    def _get_children(self, req: zk_pb2.Request) -> zk_pb2.Response:
        r = req.get_children
        children, stat = self.service.tree.get_children(r.path, self.auth_ids)
        if r.watch:
            self.service.watches.add_child_watch(self, r.path)
        resp = self._reply(req, children=children)
        if r.include_stat:
            resp.stat.CopyFrom(stat.to_pb())
        return resp

    def _sync(self, req: zk_pb2.Request) -> zk_pb2.Response:
        validate_path(req.sync.path)
        return self._reply(req, path=req.sync.path)

    def _get_ephemerals(self, req: zk_pb2.Request) -> zk_pb2.Response:
        prefix = req.get_ephemerals.prefix_path or "/"
        return self._reply(req, paths=self.service.tree.ephemerals(self.session_id, prefix))

    def _get_all_children_number(self, req: zk_pb2.Request) -> zk_pb2.Response:
        path = req.get_all_children_number.path
        return self._reply(req, number=self.service.tree.all_children_number(path, self.auth_ids))

    def _get_acl(self, req: zk_pb2.Request) -> zk_pb2.Response:
        """FinalRequestProcessor getACL: READ or ADMIN; without ADMIN, digest hashes are masked (3.9)."""
        path = req.get_acl.path
        entries, stat = self.service.tree.get_acl(path)
        acl.check(entries, acl.READ | acl.ADMIN, self.auth_ids, path)
        try:
            acl.check(entries, acl.ADMIN, self.auth_ids, path)
        except NoAuthError:
            entries = acl.masked(entries)
        acls = [zk_pb2.Acl(perms=a.perms, id=zk_pb2.Id(scheme=a.scheme, id=a.id)) for a in entries]
        return self._reply(req, acls=acls, stat=stat.to_pb())

    def _auth(self, req: zk_pb2.Request) -> zk_pb2.Response:
        """addauth (ZooKeeperServer.processPacket, AuthPacket): the provider's ids join the session's here;
        a failure answers AUTHFAILED and the connection ends (`_flush_replies`)."""
        r = req.auth
        try:
            ids = acl.authenticate(r.scheme, r.auth, self.peer_host, self.service.settings.super_digest)
        except AuthFailedError as exc:
            self.service.log.warning("auth_failed", session_id=self.session_id, scheme=r.scheme, reason=str(exc))
            return self._reply(req, err=Code.AUTHFAILED, error_message=str(exc))
        self._add_auth_ids(ids)
        self.service.log.info("auth_succeeded", session_id=self.session_id, scheme=r.scheme, ids=len(self.auth_ids))
        return self._reply(req)

    def _sasl(self, req: zk_pb2.Request) -> zk_pb2.Response:
        """One SASL token of the connection's login (ZooKeeperServer.processSasl, zkemu.sasl); answered
        with zxid 0. A failed login answers AUTHFAILED and the connection ends (`_flush_replies`)."""
        try:
            self._sasl_server, outcome = self.service.sasl.step(self._sasl_server, req.sasl.token)
        except SaslError as exc:
            self.service.log.warning("sasl_auth_failed", session_id=self.session_id, reason=str(exc))
            return zk_pb2.Response(xid=req.xid, zxid=0, err=Code.AUTHFAILED, error_message=str(exc))
        if outcome.ids:
            self._add_auth_ids(outcome.ids)
            self.service.log.info("sasl_auth_succeeded", session_id=self.session_id, user=outcome.ids[0].id)
        response = zk_pb2.Response(xid=req.xid, zxid=0)
        if outcome.token is not None:
            response.sasl_token = outcome.token
        return response

    def _add_auth_ids(self, ids: tuple[acl.Id, ...]) -> None:
        self.auth_ids += tuple(i for i in ids if i not in self.auth_ids)
        self._auth_pb = [zk_pb2.Id(scheme=i.scheme, id=i.id) for i in self.auth_ids]
        self._must_authenticate = not self.service.sasl.allows(self.auth_ids)

    def _refuse_unauthenticated(self, req: zk_pb2.Request) -> None:
        """AuthenticationHelper.enforceAuthentication: SESSIONCLOSEDREQUIRESASLAUTH, then the connection closes."""
        self.service.log.warning(
            "auth_required", session_id=self.session_id, schemes=sorted(self.service.sasl.enforce_schemes)
        )
        slot = _Slot(req.xid)
        self._order.append(slot)
        self._order.append(_Slot(ends_stream=True))
        message = "session closed: the server requires authentication by " + ", ".join(
            sorted(self.service.sasl.enforce_schemes)
        )
        self._answer(
            slot, zk_pb2.Response(xid=req.xid, zxid=0, err=Code.SESSIONCLOSEDREQUIRESASLAUTH, error_message=message)
        )

    def _who_am_i(self, req: zk_pb2.Request) -> zk_pb2.Response:
        infos = [zk_pb2.ClientInfo(auth_scheme=s, user=u) for s, u in acl.client_infos(self.auth_ids)]
        return self._reply(req, client_infos=infos)

    def _add_watch(self, req: zk_pb2.Request) -> zk_pb2.Response:
        r = req.add_watch
        validate_path(r.path)
        try:
            mode = AddWatchMode(r.mode)
        except ValueError:
            return self._reply(req, err=Code.BADARGUMENTS, error_message=f"unknown addWatch mode {r.mode}")
        self.service.watches.add_persistent(self, r.path, mode)
        return self._reply(req)

    def _remove_watches(self, req: zk_pb2.Request) -> zk_pb2.Response:
        return self._on_watches(req, req.remove_watches, self.service.watches.remove)

    def _check_watches(self, req: zk_pb2.Request) -> zk_pb2.Response:
        return self._on_watches(req, req.check_watches, self.service.watches.contains)

    def _on_watches(
        self, req: zk_pb2.Request, r: Any, act: Callable[[SessionConnection, str, WatcherType], bool]
    ) -> zk_pb2.Response:
        """removeWatches / checkWatches: `act` on this session's watches of r.path of r.watcher_type;
        NOWATCHER when it found none (FinalRequestProcessor)."""
        validate_path(r.path)
        try:
            kind = WatcherType(r.watcher_type)
        except ValueError:
            return self._reply(req, err=Code.BADARGUMENTS, error_message=f"unknown watcher type {r.watcher_type}")
        if not act(self, r.path, kind):
            return self._reply(req, err=Code.NOWATCHER, error_message=f"KeeperErrorCode = NoWatcher for {r.path}")
        return self._reply(req)

    def _set_watches(self, req: zk_pb2.Request) -> zk_pb2.Response:
        r = req.set_watches
        tree = self.service.tree

        def stat_of(path: str) -> tuple[int, int] | None:
            st = tree.stat(path)
            return None if st is None else (st.mzxid, st.pzxid)

        self.service.watches.set_watches(
            self,
            r.relative_zxid,
            r.data_watches,
            r.exist_watches,
            r.child_watches,
            r.persistent_watches,
            r.persistent_recursive_watches,
            stat_of,
        )
        return self._reply(req)

    def _multi_read(self, req: zk_pb2.Request) -> zk_pb2.Response:
        """multiRead (ZooKeeper opcode 22): each read on its own, not atomic; a failed one gives its
        error code in its result (FinalRequestProcessor, multiRead)."""
        resp = self._reply(req)
        for op in req.multi_read.ops:
            result = resp.results.add()
            try:
                if op.WhichOneof("op") == "get_data":
                    data, stat, null = self.service.tree.get_data_or_null(op.get_data.path, self.auth_ids)
                    if op.get_data.watch:
                        self.service.watches.add_data_watch(self, op.get_data.path)
                    result.data = data
                    result.null_data = null
                    result.stat.CopyFrom(stat.to_pb())
                else:
                    children, _ = self.service.tree.get_children(op.get_children.path, self.auth_ids)
                    if op.get_children.watch:
                        self.service.watches.add_child_watch(self, op.get_children.path)
                    result.children.extend(children)
            except ZkError as exc:
                result.err = exc.code
        return resp

    def _ping(self, req: zk_pb2.Request) -> zk_pb2.Response:
        return self._reply(req)

    async def _close(self, req: zk_pb2.Request, after: Awaitable[Any] | None) -> zk_pb2.Response:
        """An explicit close deletes the session's ephemerals at once (one log entry)."""
        if after is not None:
            await asyncio.wait([after])  # type: ignore[list-item]
        txn = zk_pb2.Txn(session_id=self.session_id, close_session=zk_pb2.CloseSessionTxn(session_id=self.session_id))
        return await self._submit(req, txn, "close_session", req.close)


def _peer_host(peer: str) -> str:
    """The IP address in gRPC's peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000")."""
    _, _, address = urllib.parse.unquote(peer).partition(":")  # gRPC may percent-encode the brackets
    host = address.rpartition(":")[0] if address.count(":") >= 1 else address
    return host.strip("[]")


_NO_TXN = zk_pb2.Txn()  # a group write's txn until it joins the group (never sent)


def _ignore_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved, so asyncio does not log it as never retrieved


def _forward_error(exc: QuorumError) -> zk_pb2.ForwardResponse:
    return zk_pb2.ForwardResponse(error_code=exc.code, error_message=str(exc))


@dataclass(slots=True)
class _GroupWrite:
    """One write of a group sent together (SessionConnection._dispatch_writes; zkemu.write_router.GroupWrite)."""

    slot: _Slot
    req: zk_pb2.Request
    op: str
    body: Any
    write: SessionWrite
    txn: zk_pb2.Txn  # _NO_TXN until it joins the group


class _GroupReplies:
    """How the write router answers a session's group writes: each in its slot, in the session's order."""

    __slots__ = ("_conn",)

    def __init__(self, conn: SessionConnection) -> None:
        self._conn = conn

    def applied(self, item: _GroupWrite, result: zk_pb2.TxnResult) -> None:
        item.slot.response = self._conn._write_response(item.req, item.op, item.body, result)

    def failed(self, item: _GroupWrite, message: str) -> None:
        item.slot.response = self._conn._write_lost(item.req, message)

    def flush(self) -> None:
        self._conn._flush_replies()


class _Slot:
    """One request's place in its session's reply order (or the end of the stream)."""

    __slots__ = ("xid", "size_bytes", "response", "ends_stream")

    def __init__(self, xid: int = 0, size_bytes: int = 0, ends_stream: bool = False) -> None:
        self.xid = xid  # the request's: a reply the client cannot match to it would break the session's stream
        self.size_bytes = size_bytes  # what the request holds in flight until its reply leaves
        self.response: zk_pb2.Response | None = None
        self.ends_stream = ends_stream


def _unfinished(task: asyncio.Task[None] | None) -> asyncio.Task[None] | None:
    """The task, if it still runs: waiting on a finished task would still cost loop turns."""
    return task if task is not None and not task.done() else None


_READ_HANDLERS: dict[str, Callable[[SessionConnection, zk_pb2.Request], zk_pb2.Response]] = {
    "get_data": SessionConnection._get_data,
    "exists": SessionConnection._exists,
    "get_children": SessionConnection._get_children,
    "sync": SessionConnection._sync,
    "get_ephemerals": SessionConnection._get_ephemerals,
    "get_all_children_number": SessionConnection._get_all_children_number,
    "add_watch": SessionConnection._add_watch,
    "remove_watches": SessionConnection._remove_watches,
    "set_watches": SessionConnection._set_watches,
    "ping": SessionConnection._ping,
    "get_acl": SessionConnection._get_acl,
    "auth": SessionConnection._auth,
    "who_am_i": SessionConnection._who_am_i,
    "sasl": SessionConnection._sasl,
    "check_watches": SessionConnection._check_watches,
    "multi_read": SessionConnection._multi_read,
}
