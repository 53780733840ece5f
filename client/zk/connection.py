"""One ZooKeeper session: the owner of its gRPC stream, its pending requests and its timers.

`ZkSession` is the single owner task behind `AsyncZkClient` (STYLE 13): a
runner that connects, serves the connection with a reader and a writer task,
and reconnects when the connection breaks, for as long as the session lives.

* **Ordering.** Requests get increasing xids in the order they were
  submitted; the server answers in that order, so the reader matches each
  reply to the oldest outstanding request, and a mismatch drops the
  connection. A reply's watch registration runs in the reader before the
  next message is read, so an event that follows the reply finds its watcher.
* **Timers** (docs/research/quorum.md §1.7, ZooKeeper paper §4.4): a ping after
  `timeout/3` without sending; the connection counts as lost after
  `2*timeout/3` without hearing anything.
* **Connection loss** (SUSPENDED): requests on the wire fail with
  `ConnectionLoss` (they may or may not have been applied); requests not yet
  sent wait for the next connection. The runner tries the servers round
  robin (shuffled once, and again when `update_hosts` replaces them) with
  the same session id, password and
  `last_zxid_seen` -- a server that is behind refuses, and the client moves
  on, so it never goes back in time -- then sends `SetWatches` first, so the
  server fires the events missed meanwhile (ZooKeeper's ClientCnxn
  primeConnection).
* **Session loss** (LOST): the server says the session expired, or no
  server took it back within the session timeout. Every request fails with
  `SessionExpiredError`, every watcher gets one NONE event and the table is
  cleared; the client stays LOST until `start()` makes a new session.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from client.zk import codec
from client.zk.codec import ClientMessage, ConnectReply, Reply, WireEvent, WireRequest
from client.zk.digest_md5 import DigestMd5Client, SaslError
from client.zk.exceptions import (
    AuthFailedError,
    BadArgumentsError,
    ConnectionClosedError,
    ConnectionLoss,
    SessionExpiredError,
    ThrottledError,
    ZkException,
    ZkTimeoutError,
    ZkTlsError,
    ZookeeperError,
)
from client.zk.paths import Chroot
from client.zk.states import (
    EVENT_TYPES_BY_CODE,
    KEEPER_STATES_BY_CODE,
    EventType,
    KeeperState,
    WatchedEvent,
    ZkState,
)
from client.zk.watches import WatchRegistry
from runtime import grpc_channels
from runtime.message_limits import JUTE_MAX_BUFFER_BYTES_DEFAULT
from runtime.tls import TlsConfig
from zkraft_proto import zk_pb2_grpc

log = logging.getLogger("zkraft.client.zk")

GRPC_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
    # A restarted server should be found again quickly, not after gRPC's default backoff of up to 120 s.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
# Requests submitted and not yet answered, per session; beyond it a call fails at once (ThrottledError).
OUTSTANDING_REQUESTS_MAX = 100_000
# Requests sent in one stream message at most (a burst is split rather than one huge message).
REQUESTS_PER_MESSAGE_MAX = 1024
# One connect attempt waits at least this long, however short timeout/len(hosts) is.
CONNECT_ATTEMPT_MIN_S = 0.2
# Pause after a full round of the servers failed: doubles from BASE up to MAX, jittered.
CONNECT_ROUND_BACKOFF_BASE_S = 0.05
CONNECT_ROUND_BACKOFF_MAX_S = 1.0
# stop() waits this long at most for the server to acknowledge the close.
CLOSE_REPLY_WAIT_MAX_S = 5.0
# A DIGEST-MD5 login takes two rounds (RFC 2831 §2.1); a server asking for more is refused.
SASL_ROUNDS_MAX = 4
# The keepalive timer never spins: at least this long between its checks.
KEEPALIVE_CHECK_MIN_S = 0.001

Emit = Callable[[Callable[..., Any], tuple[Any, ...]], None]
ReplyHook = Callable[[Reply], None]


@dataclass(slots=True)
class _Outstanding:
    request: WireRequest
    future: asyncio.Future[Reply] | None  # None: internal (ping, SetWatches), nobody awaits it
    on_reply: ReplyHook | None  # runs in the reader, before the next message is read


class _ConnectionBroken(Exception):
    """The current stream is unusable; the text says why (one line)."""


class _ConnectFailed(Exception):
    """One connect attempt failed; try the next server."""


class ZkSession:
    def __init__(
        self,
        hosts: Sequence[str],
        chroot: Chroot,
        session_timeout_ms: int,
        linearizable_reads: bool,
        emit: Emit,
        randomize_hosts: bool = True,
        rng: random.Random | None = None,
        tls: TlsConfig | None = None,
        sasl: tuple[str, str] | None = None,
    ) -> None:
        if session_timeout_ms <= 0:
            raise ValueError(f"session_timeout_ms must be > 0, got {session_timeout_ms}")
        self._rng = rng or random.Random()
        self._tls = tls  # zookeeper.client.secure: every channel is TLS (runtime.grpc_channels)
        # (username, password) of a SASL DIGEST-MD5 login run on every connection before its first request.
        self._sasl = sasl
        self._fatal: ZkTlsError | AuthFailedError | None = None
        self._tls_doubt: str | None = None
        self.hosts = list(hosts)
        self._randomize_hosts = randomize_hosts
        if randomize_hosts:
            self._rng.shuffle(self.hosts)
        # Called in the runner on every new connection, before any request is sent on it (EnsembleTracker).
        self.on_connected: Callable[[], None] | None = None
        self._chroot = chroot
        self.requested_timeout_ms = session_timeout_ms
        self.linearizable_reads = linearizable_reads
        self._emit = emit
        self.watches = WatchRegistry()
        # addauth credentials the server accepted, re-sent first on every reconnect (ClientCnxn.primeConnection).
        self._auth_data: list[tuple[str, bytes]] = []
        self._listeners: list[Callable[[ZkState], Any]] = []

        self.session_id = 0
        self.password = b""
        self.negotiated_timeout_ms = 0
        self.last_zxid = 0
        self.server: str | None = None  # the server of the live connection
        self.state = ZkState.LOST
        self.keeper_state = KeeperState.CLOSED

        self._host_index = 0
        self._xid = 0
        self._outbox: deque[_Outstanding] = deque()  # submitted, not yet written
        self._inflight: deque[tuple[int, _Outstanding]] = deque()  # written, not yet answered
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self._wake: asyncio.Event | None = None  # set when the outbox gets work
        self._connected: asyncio.Event | None = None  # set while CONNECTED
        self._last_heard_s = 0.0
        self._last_sent_s = 0.0

    # ---- listeners

    def add_listener(self, listener: Callable[[ZkState], Any]) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[ZkState], Any]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # ---- lifecycle

    @property
    def running(self) -> bool:
        return self._runner is not None and not self._runner.done()

    async def start(self, timeout_s: float) -> None:
        """Connect with a new session; ZkTimeoutError (after stopping) if no server takes it within `timeout_s`."""
        if self.running:
            return
        self._reset_session()
        self._fatal = None
        self._tls_doubt = None
        self._closing = False
        self._wake = asyncio.Event()
        self._connected = asyncio.Event()
        self.keeper_state = KeeperState.CONNECTING
        self._runner = asyncio.create_task(self._run(), name="zk-session")
        waiter = asyncio.create_task(self._connected.wait())
        try:
            await asyncio.wait({self._runner, waiter}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self.state is not ZkState.CONNECTED:
            await self.stop()
            if self._fatal is not None:
                raise self._fatal
            doubt = f" (last: {self._tls_doubt})" if self._tls_doubt else ""
            raise ZkTimeoutError(
                f"no server of {','.join(self.hosts)} accepted a session within {timeout_s:g} s{doubt}"
            )

    async def stop(self) -> None:
        """Close the session (its ephemeral nodes go at once) and end the connection; state LOST."""
        if self.keeper_state is KeeperState.CLOSED:
            return
        self._closing = True
        if self.state is ZkState.CONNECTED:
            await self._send_close()
        if self._runner is not None:
            self._runner.cancel()
            try:
                await self._runner
            except asyncio.CancelledError:
                # Our own cancel of the runner, unless stop() itself is being cancelled: re-raise then.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
        self._runner = None
        if self.keeper_state is not KeeperState.EXPIRED_SESSION:
            self._lose(KeeperState.CLOSED, "the client was stopped")
        self.keeper_state = KeeperState.CLOSED

    async def close_channels(self) -> None:
        for address in list(self._channels):
            await self._drop_channel(address)

    async def _send_close(self) -> None:
        future = self._enqueue(codec.close_request(), None)
        wait_s = min(CLOSE_REPLY_WAIT_MAX_S, self.negotiated_timeout_ms / 1000)
        try:
            async with asyncio.timeout(wait_s):
                await future
        except (ZkException, TimeoutError) as exc:
            log.info("zk_close_unacknowledged session_id=%#x error=%s", self.session_id, exc)

    def _reset_session(self) -> None:
        self.session_id = 0
        self.password = b""
        self.negotiated_timeout_ms = 0
        self.last_zxid = 0

    # ---- requests

    def submit(self, request: WireRequest, on_reply: ReplyHook | None = None) -> asyncio.Future[Reply]:
        """Queue a request; the future gets its reply (any err), or fails with ConnectionLoss / SessionExpiredError."""
        match self.keeper_state:
            case KeeperState.CLOSED:
                raise ConnectionClosedError()
            case KeeperState.EXPIRED_SESSION:
                raise SessionExpiredError(f"session {self.session_id:#x} expired; start() makes a new session")
            case KeeperState.AUTH_FAILED:
                raise AuthFailedError(str(self._fatal))
        if self._closing:
            raise ConnectionClosedError("the client is stopping")
        if len(self._outbox) + len(self._inflight) >= OUTSTANDING_REQUESTS_MAX:
            raise ThrottledError(f"{OUTSTANDING_REQUESTS_MAX} requests are outstanding on this session")
        return self._enqueue(request, on_reply)

    def submit_internal(self, request: WireRequest, on_reply: ReplyHook) -> None:
        """Queue a request of the client's own that nobody awaits: `on_reply` gets its reply in the reader;
        on connection or session loss it is dropped, as a ping or SetWatches is."""
        if self.keeper_state is KeeperState.CONNECTED and not self._closing:
            self._outbox.append(_Outstanding(request, None, on_reply))
            if self._wake is not None:
                self._wake.set()

    def update_hosts(self, hosts: Sequence[str]) -> bool:
        """Replace the server list a reconnect tries (ZooKeeper's ZooKeeper.updateServerList); True if it
        changed. The live connection stays, even on a server no longer listed: ZooKeeper's StaticHostProvider
        may also move a client to rebalance the servers' load, which this client does not need."""
        new_hosts = list(dict.fromkeys(hosts))
        if not new_hosts or sorted(new_hosts) == sorted(self.hosts):
            return False
        if self._randomize_hosts:
            self._rng.shuffle(new_hosts)
        log.info("zk_server_list_updated session_id=%#x old=%s new=%s", self.session_id, ",".join(self.hosts),
                 ",".join(new_hosts))  # fmt: skip
        self.hosts = new_hosts
        self._host_index = 0
        return True

    def _enqueue(self, request: WireRequest, on_reply: ReplyHook | None) -> asyncio.Future[Reply]:
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._outbox.append(_Outstanding(request, future, on_reply))
        if self._wake is not None:
            self._wake.set()
        return future

    # ---- the runner

    async def _run(self) -> None:
        try:
            while True:
                established = await self._establish()
                if established is None:
                    timeout_s = self.negotiated_timeout_ms / 1000
                    self._lose(KeeperState.EXPIRED_SESSION, f"no server took the session back within {timeout_s:g} s")
                    return
                host, call, reply = established
                reason = await self._serve(host, call, reply)
                if self._closing:
                    # The server ended the stream after (or instead of) answering the close.
                    self._fail_inflight(lambda path, what: ConnectionClosedError(f"client stopped {what}", path))
                    return
                self._suspend(host, reason)
        except SessionExpiredError as exc:
            self._lose(KeeperState.EXPIRED_SESSION, str(exc))
        except (ZkTlsError, AuthFailedError) as exc:
            self._fatal = exc
            self._lose(KeeperState.AUTH_FAILED if isinstance(exc, AuthFailedError) else KeeperState.CLOSED, str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # loop boundary: a bug here must fail the callers, not hang them
            log.exception("zk_session_runner_failed session_id=%#x", self.session_id)
            self._lose(KeeperState.CLOSED, f"session task failed: {exc!r}")

    async def _establish(self) -> tuple[str, grpc.aio.StreamStreamCall, ConnectReply] | None:
        """A connection with the session, trying servers round robin; None when the session timeout passed."""
        loop = asyncio.get_running_loop()
        deadline_s = self._last_heard_s + self.negotiated_timeout_ms / 1000 if self.session_id else None
        await self._drop_unlisted_channels()
        rounds = 0
        while True:
            for _ in range(len(self.hosts)):
                now_s = loop.time()
                if deadline_s is not None and now_s >= deadline_s:
                    return None
                host = self.hosts[self._host_index % len(self.hosts)]
                self._host_index += 1
                attempt_s = self._attempt_timeout_s()
                if deadline_s is not None:
                    attempt_s = min(attempt_s, deadline_s - now_s)
                try:
                    call, reply = await self._connect_to(host, attempt_s)
                except _ConnectFailed as exc:
                    log.info("zk_connect_failed server=%s session_id=%#x reason=%s", host, self.session_id, exc)
                    await self._drop_channel(host)
                    if not self.session_id:
                        await self._check_tls(host, str(exc))
                    continue
                return host, call, reply
            rounds += 1
            pause_s = min(CONNECT_ROUND_BACKOFF_MAX_S, CONNECT_ROUND_BACKOFF_BASE_S * 2 ** min(rounds, 10))
            pause_s *= self._rng.uniform(0.5, 1.0)
            if deadline_s is not None:
                pause_s = min(pause_s, max(0.0, deadline_s - loop.time()))
            await asyncio.sleep(pause_s)

    async def _check_tls(self, host: str, reason: str) -> None:
        """Raise ZkTlsError when a new session's connection failed for a TLS reason: no retry can fix that.
        Only before a session exists: a session's reconnects keep trying (a server may be restarting)."""
        explained = await asyncio.to_thread(grpc_channels.explain_failure, host, self._tls, reason)
        if explained is None:
            return
        # The quorum's TLS port always asks for a client certificate (docs/DESIGN.md §9).
        if grpc_channels.is_permanent(self._tls, reason, certificate_required=True):
            raise ZkTlsError(explained)
        self._tls_doubt = explained  # perhaps a server stopping: tried again, and named if start() times out

    def _attempt_timeout_s(self) -> float:
        if self.session_id:
            # Taking an existing session back is cheap: ZooKeeper's connectTimeout = timeout / number of hosts.
            attempt_s = self.negotiated_timeout_ms / 1000 / len(self.hosts)
        else:
            # A new session is a replicated write: allow the read timeout.
            attempt_s = self.requested_timeout_ms / 1000 * 2 / 3
        return max(attempt_s, CONNECT_ATTEMPT_MIN_S)

    async def _connect_to(self, host: str, attempt_s: float) -> tuple[grpc.aio.StreamStreamCall, ConnectReply]:
        call = zk_pb2_grpc.ZooKeeperStub(self._channel(host)).Session()
        try:
            reply = await self._handshake(call, host, attempt_s)
            if self._sasl is not None:
                await self._sasl_login(call, host, attempt_s)
            return call, reply
        except BaseException:
            call.cancel()
            raise

    async def _handshake(self, call: grpc.aio.StreamStreamCall, host: str, attempt_s: float) -> ConnectReply:
        hello = codec.connect_message(
            self.session_id, self.password, self.requested_timeout_ms, self.last_zxid, self.linearizable_reads
        )
        try:
            async with asyncio.timeout(attempt_s):
                await call.write(hello)
                msg = await call.read()
        except TimeoutError:
            raise _ConnectFailed(f"no answer within {attempt_s:.3g} s") from None
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            raise _ConnectFailed(_rpc_error_text(exc)) from None
        if msg is grpc.aio.EOF:
            # e.g. UNAVAILABLE: the server is behind our last_zxid_seen, or has no quorum.
            raise _ConnectFailed(await _end_status_text(call))
        try:
            parsed = codec.parse_server_message(msg)
        except codec.ProtocolError as exc:
            raise _ConnectFailed(str(exc)) from None
        if not isinstance(parsed, ConnectReply):
            raise _ConnectFailed(f"protocol error: expected a connect response, got {type(parsed).__name__}")
        if parsed.expired:
            if self.session_id:
                raise SessionExpiredError(f"session {self.session_id:#x} expired (server {host} does not know it)")
            raise _ConnectFailed("server refused to create a session")
        return parsed

    async def _sasl_login(self, call: grpc.aio.StreamStreamCall, host: str, attempt_s: float) -> None:
        """DIGEST-MD5 on the new connection, before anything else (ZooKeeperSaslClient; the server's ids are
        per connection). AuthFailedError when the server refuses the login: no retry can fix a password."""
        assert self._sasl is not None
        login = DigestMd5Client(*self._sasl)
        token = login.evaluate(b"")
        for _ in range(SASL_ROUNDS_MAX):
            self._xid += 1
            try:
                async with asyncio.timeout(attempt_s):
                    await call.write(codec.request_message(self._xid, codec.sasl_request(token)))
                    msg = await call.read()
            except TimeoutError:
                raise _ConnectFailed(f"no answer to the SASL login within {attempt_s:.3g} s") from None
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                raise _ConnectFailed(_rpc_error_text(exc)) from None
            if msg is grpc.aio.EOF:
                raise _ConnectFailed(await _end_status_text(call))
            reply = codec.parse_server_message(msg)
            if not isinstance(reply, Reply):
                raise _ConnectFailed(f"protocol error: expected a SASL reply, got {type(reply).__name__}")
            if reply.err:
                raise AuthFailedError(f"SASL login of {self._sasl[0]!r} refused by {host}: {reply.message}")
            challenge = codec.sasl_token(reply)
            if challenge is None:
                raise AuthFailedError(f"{host} does not serve SASL logins (no JAAS Server section)")
            try:
                token = login.evaluate(challenge)
            except SaslError as exc:
                raise AuthFailedError(f"SASL login to {host}: {exc}") from None
            if login.complete:
                return
        raise AuthFailedError(f"SASL login to {host} did not finish within {SASL_ROUNDS_MAX} rounds")

    async def _serve(self, host: str, call: grpc.aio.StreamStreamCall, reply: ConnectReply) -> str:
        """Run one connection until it breaks; returns why it did."""
        loop = asyncio.get_running_loop()
        reconnect = self.session_id != 0
        self.session_id, self.password = reply.session_id, reply.password
        self.negotiated_timeout_ms = reply.timeout_ms
        self.server = host
        self._last_heard_s = self._last_sent_s = loop.time()
        if reconnect and len(self.watches):
            self._queue_set_watches()
        self._queue_auth()  # also for a new session after stop() and start(), as kazoo keeps its auth_data
        log.info(
            "zk_connected server=%s session_id=%#x timeout_ms=%d reconnect=%s",
            host, self.session_id, self.negotiated_timeout_ms, reconnect,
        )  # fmt: skip
        self.keeper_state = KeeperState.CONNECTED
        if self.on_connected is not None:
            self.on_connected()
        self._change_state(ZkState.CONNECTED)
        assert self._connected is not None
        self._connected.set()
        reason = ""
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._read_loop(call, host))
                tasks.create_task(self._write_loop(call, host))
                tasks.create_task(self._keepalive(host))
        except* _ConnectionBroken as group:
            reason = str(group.exceptions[0])
        finally:
            self._connected.clear()
            call.cancel()
        return reason

    def remember_auth(self, scheme: str, credential: bytes) -> None:
        if (scheme, credential) not in self._auth_data:
            self._auth_data.append((scheme, credential))

    def _queue_auth(self) -> None:
        """The session's credentials go first on a new connection: ids are per connection on the server."""
        for scheme, credential in reversed(self._auth_data):
            self._outbox.appendleft(_Outstanding(codec.auth_request(scheme, credential), None, self._on_auth_reply))

    def _on_auth_reply(self, reply: Reply) -> None:
        if reply.err:
            log.warning("zk_auth_refused_on_reconnect session_id=%#x err=%d message=%s", self.session_id, reply.err,
                        reply.message)  # fmt: skip

    def _queue_set_watches(self) -> None:
        """SetWatches goes before anything queued meanwhile (ahead of the outbox), in batches of ~128 KB."""
        batches = list(self.watches.snapshot().batches())
        for batch in reversed(batches):
            request = codec.set_watches_request(
                self.last_zxid, batch.data, batch.exist, batch.child, batch.persistent, batch.persistent_recursive
            )
            self._outbox.appendleft(_Outstanding(request, None, self._on_set_watches_reply))

    def _on_set_watches_reply(self, reply: Reply) -> None:
        if reply.err:
            log.warning("zk_set_watches_failed session_id=%#x err=%d message=%s", self.session_id, reply.err,
                        reply.message)  # fmt: skip

    # ---- the connection's two tasks

    async def _read_loop(self, call: grpc.aio.StreamStreamCall, host: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                msg = await call.read()  # silence is _keepalive's business: no timer around every read
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                raise _ConnectionBroken(f"{host}: {_rpc_error_text(exc)}") from None
            if msg is grpc.aio.EOF:
                raise _ConnectionBroken(f"{host} ended the stream: {await _end_status_text(call)}")
            self._last_heard_s = loop.time()
            for one in codec.unbatch(msg):
                try:
                    parsed = codec.parse_server_message(one)
                except codec.ProtocolError as exc:
                    raise _ConnectionBroken(f"{host}: {exc}") from None
                match parsed:
                    case Reply():
                        self._on_reply(parsed, host)
                    case WireEvent():
                        self._on_event(parsed)
                    case ConnectReply():
                        raise _ConnectionBroken(f"{host}: protocol error: a second connect response")

    def _on_reply(self, reply: Reply, host: str) -> None:
        if not self._inflight:
            raise _ConnectionBroken(f"{host}: protocol error: reply xid {reply.xid} with no request outstanding")
        xid, outstanding = self._inflight[0]
        if reply.xid != xid:
            raise _ConnectionBroken(f"{host}: protocol error: reply xid {reply.xid}, expected {xid}")
        self._inflight.popleft()
        self.last_zxid = max(self.last_zxid, reply.zxid)
        if outstanding.on_reply is not None:
            outstanding.on_reply(reply)
        if outstanding.future is not None and not outstanding.future.done():
            outstanding.future.set_result(reply)

    def _on_event(self, wire: WireEvent) -> None:
        event_type = EVENT_TYPES_BY_CODE.get(wire.type)
        if event_type is None:
            log.warning("zk_unknown_event_type type=%d path=%s", wire.type, wire.path)
            return
        event = WatchedEvent(
            event_type,
            KEEPER_STATES_BY_CODE.get(wire.state, KeeperState.CONNECTED),
            self._chroot.to_client(wire.path),
            wire.zxid,
        )
        for watcher in self.watches.triggered(event_type, wire.path):
            self._emit(watcher, (event,))

    async def _write_loop(self, call: grpc.aio.StreamStreamCall, host: str) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            while self._outbox:
                # Everything queued since the last write goes in one stream message.
                batch = []
                while self._outbox and len(batch) < REQUESTS_PER_MESSAGE_MAX:
                    outstanding = self._outbox.popleft()
                    if outstanding.future is None or not outstanding.future.done():  # else the caller gave up
                        batch.append(outstanding)
                if not batch:
                    continue
                message = self._sent_as_one(batch)
                if message.ByteSize() > JUTE_MAX_BUFFER_BYTES_DEFAULT:
                    for _ in batch:  # not sent after all: taken apart below
                        self._inflight.pop()
                    messages = self._sent_under_jute_maxbuffer(batch)
                else:
                    messages = [message]
                for message in messages:
                    self._last_sent_s = loop.time()
                    try:
                        await call.write(message)
                    except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                        raise _ConnectionBroken(f"{host}: {_rpc_error_text(exc)}") from None
            self._wake.clear()
            if not self._outbox:
                await self._wake.wait()

    def _sent_as_one(self, batch: list[_Outstanding]) -> ClientMessage:
        """The stream message of `batch`, each request with its xid and in flight from now on."""
        requests = []
        for outstanding in batch:
            self._xid += 1
            self._inflight.append((self._xid, outstanding))
            requests.append(codec.request_message(self._xid, outstanding.request).request)
        return codec.requests_message(requests)

    def _sent_under_jute_maxbuffer(self, batch: list[_Outstanding]) -> list[ClientMessage]:
        """`batch` (its xids set) in messages of at most jute.maxbuffer bytes, in order, each request in
        flight again. A request larger than that alone is refused here with the reason: a server closes
        the stream of a message over its jute.maxbuffer (ZooKeeper closes the connection of a packet
        over it), and every other request in flight would fail with it. Only a burst of large requests
        comes here: the size is checked per message, not per request, on the usual path."""
        limit_bytes = JUTE_MAX_BUFFER_BYTES_DEFAULT
        messages: list[ClientMessage] = []
        part: list[WireRequest] = []
        part_bytes = 0
        for outstanding in batch:
            request = outstanding.request
            size_bytes = request.ByteSize() + codec.BATCH_FRAMING_BYTES
            if size_bytes > limit_bytes:
                problem = f"request of {request.ByteSize()} bytes exceeds jute.maxbuffer ({limit_bytes} bytes)"
                if outstanding.future is not None:
                    outstanding.future.set_exception(BadArgumentsError(problem, codec.request_path(request)))
                else:
                    log.warning("zk_request_not_sent session_id=%#x reason=%s", self.session_id, problem)
                continue
            if part and part_bytes + size_bytes > limit_bytes:
                messages.append(codec.requests_message(part))
                part, part_bytes = [], 0
            self._inflight.append((request.xid, outstanding))
            part.append(request)
            part_bytes += size_bytes
        if part:
            messages.append(codec.requests_message(part))
        return messages

    async def _keepalive(self, host: str) -> None:
        """ZooKeeper's client timers, in one task: ping after a third of the session timeout without sending;
        give the server up after two thirds without hearing from it.

        One sleeping task instead of a timeout around every read and every wait
        of the write loop: those cost a timer each per request (15-25 µs of a
        sequential getData's 200-230 µs of client CPU, measured)."""
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            read_timeout_s = self.negotiated_timeout_ms * 2 / 3 / 1000
            ping_interval_s = self.negotiated_timeout_ms / 3 / 1000
            now = loop.time()
            if now - self._last_heard_s >= read_timeout_s:
                raise _ConnectionBroken(f"nothing heard from {host} for {read_timeout_s:.3g} s")
            if now - self._last_sent_s >= ping_interval_s:
                self._outbox.append(_Outstanding(codec.ping_request(), None, None))
                self._last_sent_s = now  # the write loop sets it again when the ping leaves
                self._wake.set()
            next_check_s = min(self._last_heard_s + read_timeout_s, self._last_sent_s + ping_interval_s)
            await asyncio.sleep(max(next_check_s - loop.time(), KEEPALIVE_CHECK_MIN_S))

    # ---- state changes

    def _change_state(self, state: ZkState) -> None:
        if state is self.state:
            return
        log.info("zk_state_change old=%s new=%s session_id=%#x", self.state, state, self.session_id)
        self.state = state
        for listener in list(self._listeners):
            self._emit(listener, (state,))

    def _suspend(self, host: str, reason: str) -> None:
        log.warning("zk_connection_lost server=%s session_id=%#x reason=%s", host, self.session_id, reason)
        self.server = None
        self.keeper_state = KeeperState.CONNECTING
        self._change_state(ZkState.SUSPENDED)
        self._fail_inflight(lambda path, what: ConnectionLoss(f"connection to {host} lost {what}: {reason}", path))

    def _lose(self, keeper_state: KeeperState, reason: str) -> None:
        """The session is over: LOST, every request fails, every watcher gets one NONE event."""
        if self.state is not ZkState.LOST:
            level = logging.INFO if keeper_state is KeeperState.CLOSED else logging.WARNING
            log.log(level, "zk_session_lost session_id=%#x reason=%s", self.session_id, reason)
        self.server = None
        self.keeper_state = keeper_state
        self._change_state(ZkState.LOST)
        if keeper_state is KeeperState.CLOSED:
            self._fail_inflight(lambda path, what: ConnectionClosedError(f"client stopped {what}", path))
            self._fail_outbox(lambda path, what: ConnectionClosedError(f"client stopped {what}", path))
        else:
            sid = self.session_id
            self._fail_inflight(lambda path, what: SessionExpiredError(f"session {sid:#x} lost {what}: {reason}", path))
            self._fail_outbox(lambda path, what: SessionExpiredError(f"session {sid:#x} lost {what}: {reason}", path))
        event = WatchedEvent(EventType.NONE, keeper_state, None)
        for watcher in self.watches.drain():
            self._emit(watcher, (event,))

    def _fail_inflight(self, error: Callable[[str | None, str], ZookeeperError]) -> None:
        while self._inflight:
            _, outstanding = self._inflight.popleft()
            _fail(outstanding, error, "before the reply")

    def _fail_outbox(self, error: Callable[[str | None, str], ZookeeperError]) -> None:
        while self._outbox:
            _fail(self._outbox.popleft(), error, "before the request was sent")

    # ---- channels

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc_channels.aio_channel(address, self._tls, GRPC_OPTIONS)
            self._channels[address] = channel
        return channel

    async def _drop_unlisted_channels(self) -> None:
        """Close the channels of servers no longer listed (update_hosts), once no connection uses them."""
        for address in [a for a in self._channels if a not in self.hosts]:
            await self._drop_channel(address)

    async def _drop_channel(self, address: str) -> None:
        """A fresh channel next time: gRPC's reconnect backoff must not hide a server that came back."""
        channel = self._channels.pop(address, None)
        if channel is not None:
            await channel.close()


def _fail(outstanding: _Outstanding, error: Callable[[str | None, str], ZookeeperError], when: str) -> None:
    if outstanding.future is None or outstanding.future.done():
        return
    request = outstanding.request
    path = codec.request_path(request)
    what = f"{when} to {codec.op_name(request)}" + (f" {path}" if path else "")
    outstanding.future.set_exception(error(path, what))


def _rpc_error_text(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return f"{type(exc).__name__}: {exc}"


async def _end_status_text(call: grpc.aio.StreamStreamCall) -> str:
    try:
        code = await call.code()
        details = await call.details()
    except Exception as exc:  # the status of a dead call is only for the message
        return repr(exc)
    return f"{code.name}: {details}" if details else code.name
