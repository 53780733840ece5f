"""The ZooKeeper wire protocol (jute over TCP) on clientPortAddress:clientPort: what kazoo, zkCli
and Curator speak; and the same over TLS on secureClientPortAddress:secureClientPort.

One TCP connection is one session stream of the session core (zkemu.service.SessionConnection):
this module only splits frames, decodes them into the core's requests (zkemu.jute_codec) and
encodes what the core's outbox sends; ordering, watches, admission and the outbox are the core's.

- A connection whose first 4 bytes are a four-letter word (before any ConnectRequest) is answered
  by zkemu.four_letter_words and closed (NIOServerCnxn.checkFourLetterWord).
- The first frame is a bare ConnectRequest (with or without the readOnly byte); later frames are
  RequestHeader + record. A frame longer than jute.maxbuffer, or of negative length, closes the
  connection with no reply (NIOServerCnxn.readLength "Len error"); a record that does not parse is
  answered MARSHALLINGERROR (PrepRequestProcessor / FinalRequestProcessor catch); an unknown opcode
  UNIMPLEMENTED, then the connection closes (UnimplementedRequestProcessor).
- All complete frames of one socket read go to the core as one batch (as the gRPC front end's
  stream messages do); the replies of one outbox turn leave in one socket write.
- Backpressure: while the core pauses the session (zkemu.admission) it reads nothing, so the
  stream reader's buffer fills and asyncio stops reading the socket; a client that does not read
  its replies fills the socket's write buffer, the outbox waits on it, and its unanswered requests
  keep it paused. Neither holds other connections back.
- The secure client port (ZooKeeper's secureClientPort, `ssl.keyStore.location`, `ssl.trustStore.location`,
  `ssl.clientAuth`; PEM files) completes each client's TLS handshake before its first frame is read
  (runtime/tls_accept.py) and logs `zk_tls_handshake_failed` for one that fails it: a plaintext client, a
  client that does not trust the node's CA, or, with ZooKeeper's default `ssl.clientAuth=need`, a client
  without a certificate from the trusted CA. After the handshake the connection is the plaintext port's, code
  and all: the plaintext port pays nothing for TLS existing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ssl
import struct
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc

from quorum.facade import StartupError
from runtime.tls import TlsConfigError, from_zookeeper_properties
from runtime.tls_accept import TlsStreamServer, start_stream_server
from zkemu import four_letter_words
from zkemu.jute_codec import (
    OP_MARSHALLING_ERROR,
    OP_MULTI,
    OP_MULTI_READ,
    OP_UNKNOWN,
    JuteEncoder,
    JuteError,
    JuteReader,
    decode_connect,
    decode_request,
)
from zkemu.server_stats import ConnectionStats
from zkemu.session_intake import Received, Refused
from zkraft_proto import zk_pb2

if TYPE_CHECKING:
    from zkemu.service import ZooKeeperService

# One socket read: up to this many bytes (many pipelined requests arrive together under load).
READ_CHUNK_BYTES = 256 << 10
# The stream reader stops reading the socket once it holds twice this many unread bytes.
READER_LIMIT_BYTES = 256 << 10
# Past this many unsent bytes, a write waits for the client to read (asyncio's drain): replies the
# client does not read stay in the session's outbox, where they count as in flight (zkemu.admission).
WRITE_HIGH_WATER_BYTES = 256 << 10
# Requests handed to the core at a time: it checks its bounds (zkemu.admission) between batches, so a
# socket read of thousands of pipelined requests is not all taken in before the session pauses. The
# core's own intake chunk (zkemu.service.INTAKE_CHUNK_REQUESTS) is as large.
BATCH_REQUESTS_MAX = 64
# A request frame shorter than its RequestHeader{xid, type} cannot be answered: the connection closes.
REQUEST_HEADER_BYTES = 8
_LENGTH = struct.Struct(">i")
# The requests whose reply follows the op types of their ops (JuteEncoder.expect).
_MULTI_OPCODES = frozenset({OP_MULTI, OP_MULTI_READ})


async def start_jute_server(service: ZooKeeperService, secure: bool = False) -> asyncio.Server | TlsStreamServer:
    """The plaintext client port, or with `secure` the TLS one; StartupError (one line) when it cannot serve."""
    settings = service.settings
    if secure:
        host, port, names = settings.secure_client_port_address, settings.secure_client_port, "secureClientPort"
        tls: ssl.SSLContext | None = secure_client_context(settings.client_ssl)
    else:
        host, port, names = settings.client_port_address, settings.client_port, "clientPort"
        tls = None
    per_ip: dict[str, int] = {}  # open connections by client IP (maxClientCnxns)

    def handshake_failed(peer: str, reason: str) -> None:
        service.log.warning("zk_tls_handshake_failed", peer=peer, reason=reason)

    try:
        server = await start_stream_server(
            lambda reader, writer: _serve(service, reader, writer, per_ip),
            host,
            port,
            tls=tls,
            on_handshake_failed=handshake_failed,
            limit=READER_LIMIT_BYTES,
        )
    except OSError as exc:
        reason = "address in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise StartupError(
            f"cannot serve ZooKeeper clients on {host}:{port} ({names}Address:{names}): {reason}"
        ) from None
    service.log.info("zk_secure_client_port_serving" if secure else "zk_client_port_serving", address=f"{host}:{port}")
    return server


def secure_client_context(client_ssl: dict[str, str]) -> ssl.SSLContext:
    """The secure client port's SSL context from ZooKeeper's `ssl.*` server properties; StartupError naming the
    property or file that cannot be used."""
    try:
        return from_zookeeper_properties(client_ssl, "ssl.").server_ssl_context()
    except TlsConfigError as exc:
        raise StartupError(f"secureClientPort: {exc}") from None
    except (ssl.SSLError, OSError) as exc:
        files = f"{client_ssl.get('ssl.keyStore.location')} / {client_ssl.get('ssl.trustStore.location')}"
        raise StartupError(f"secureClientPort: the keystore or truststore cannot be used ({files}): {exc}") from None


async def _serve(
    service: ZooKeeperService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, per_ip: dict[str, int]
) -> None:
    peer = writer.get_extra_info("peername") or ("", 0)
    host = str(peer[0])
    limit = service.settings.max_client_connections
    if limit and per_ip.get(host, 0) >= limit:
        # NIOServerCnxnFactory.AcceptThread: "Too many connections from {ip} - max is {limit}", closed at once.
        service.log.warning("zk_too_many_connections", client=host, max_client_connections=limit)
        writer.close()
        return
    per_ip[host] = per_ip.get(host, 0) + 1
    stats = service.server_stats.connection_opened(f"{host}:{peer[1]}")
    try:
        await JuteConnection(service, reader, writer, stats, host).run()
    except Exception as exc:  # connection boundary: one bad connection must not hurt the server
        service.log.warning("zk_connection_error", peer=stats.remote, error=repr(exc))
    finally:
        service.server_stats.connection_closed(stats)
        writer.close()
        per_ip[host] -= 1
        if not per_ip[host]:
            del per_ip[host]


class JuteSink:
    """The core outbox's sink for one connection: encodes what it writes, one socket write per turn."""

    __slots__ = ("encoder", "writer", "stats", "on_close")
    takes_lists = True  # the outbox hands over each turn's messages as a list (zkemu.session_outbox.Sink)

    def __init__(self, writer: asyncio.StreamWriter, stats: ConnectionStats) -> None:
        self.encoder = JuteEncoder(stats)
        self.writer = writer
        self.stats = stats
        self.on_close: Any = None  # ends the session connection (an AUTHFAILED or UNIMPLEMENTED reply)

    async def write(self, messages: list[zk_pb2.ServerMessage]) -> None:
        writer = self.writer
        if writer.is_closing():
            raise ConnectionResetError("the client closed the connection")
        out: list[bytes] = []
        encoder = self.encoder
        encoder.now = now = time.monotonic()  # the replies' latencies end here (one clock read a write)
        encode = encoder.encode
        frames = 0
        for message in messages:
            frames += encode(message, out)
        writer.write(b"".join(out))
        stats = self.stats
        stats.sent(frames)
        stats.last_response_ms = int(now * 1000)  # `cons` lresp
        if self.encoder.close_after and self.on_close is not None:
            self.on_close()
        if writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER_BYTES:
            await writer.drain()  # the transport's high-water mark is WRITE_HIGH_WATER_BYTES (JuteConnection)


class JuteConnection:
    """One client connection: the handshake, then frames in and out of a SessionConnection."""

    def __init__(
        self,
        service: ZooKeeperService,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        stats: ConnectionStats,
        peer_host: str,
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        self.stats = stats
        self.peer_host = peer_host
        self.max_frame_bytes = service.settings.jute_max_buffer_bytes
        self.log = service.log

    async def run(self) -> None:
        connect = await self._handshake()
        if connect is None:
            return
        request, with_read_only = connect
        from zkemu.service import SessionConnection  # the core imports this module lazily, and this one it

        self.writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER_BYTES)
        sink = JuteSink(self.writer, self.stats)
        sink.encoder.with_read_only = with_read_only
        conn = SessionConnection(self.service, sink, self.peer_host)
        sink.on_close = conn.end
        self.service.stream_opened()
        loop = asyncio.get_running_loop()
        reader_task = loop.create_task(conn.read_loop(self._messages(request, sink.encoder)))
        try:
            with contextlib.suppress(ConnectionError):  # the client went away: nobody to tell
                await conn.outbound.serve()
            if conn.abort_status is not None:
                self.log.info("zk_connection_ended", session_id=conn.session_id, reason=conn.abort_status[1])
        finally:
            reader_task.cancel()
            conn.detach()
            self.service.stream_closed()

    async def _handshake(self) -> tuple[zk_pb2.ConnectRequest, bool] | None:
        """The ConnectRequest, or None when the connection was a four-letter word or is to close (also
        when it sent none within zookeeper.nio.sessionlessCnxnTimeout)."""
        try:
            async with asyncio.timeout(self.service.settings.sessionless_connection_timeout_ms / 1000):
                return await self._read_connect()
        except TimeoutError:
            self.log.info("zk_connection_without_handshake_closed", peer=self.stats.remote)
            return None

    async def _read_connect(self) -> tuple[zk_pb2.ConnectRequest, bool] | None:
        try:
            head = await self.reader.readexactly(4)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        answer = four_letter_words.reply_to(head, self.service)
        if answer is not None:
            self.writer.write(answer)
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()
            return None
        (length,) = _LENGTH.unpack(head)
        if not 0 <= length <= self.max_frame_bytes:
            self.log.warning("zk_frame_refused", peer=self.stats.remote, length_bytes=length)
            return None
        try:
            payload = await self.reader.readexactly(length)
            return decode_connect(payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        except JuteError as exc:
            self.log.warning("zk_connect_refused", peer=self.stats.remote, reason=str(exc))
            return None

    async def _messages(self, connect: zk_pb2.ConnectRequest, encoder: JuteEncoder) -> AsyncIterator[Received]:
        """The connect, then the complete frames read, BATCH_REQUESTS_MAX requests at a time."""
        yield 0, zk_pb2.ClientMessage(connect=connect)
        buf = bytearray()
        start = 0  # where the frames not yet decoded begin in `buf`
        jute = JuteReader()
        while True:
            msg = zk_pb2.ClientMessage()
            end, last_opcode, refused = self._split(buf, start, msg.batch.requests, jute, encoder)
            if end == start and refused is None:
                del buf[:start]  # no whole frame left: read on
                start = 0
                chunk = await self.reader.read(READ_CHUNK_BYTES)
                if not chunk:
                    return  # the client closed its side
                buf += chunk
                continue
            if len(msg.batch.requests):
                yield end - start, msg
            start = end
            if refused is not None:
                yield refused
                return
            if last_opcode == OP_UNKNOWN:
                return  # answered UNIMPLEMENTED, then the connection closes: nothing after it is read

    def _split(
        self, buf: bytearray, pos: int, requests: Any, jute: JuteReader, encoder: JuteEncoder
    ) -> tuple[int, int, Refused | None]:
        """Decode the complete frames of `buf` from `pos` on into `requests` (BATCH_REQUESTS_MAX at
        most): (where the next frame begins, the last request's opcode, why the connection must
        close or None)."""
        opcode = 0
        end = len(buf)
        arrived = time.monotonic()
        while end - pos >= 4:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if not REQUEST_HEADER_BYTES <= length <= self.max_frame_bytes:
                problem = f"a frame of {length} bytes (jute.maxbuffer is {self.max_frame_bytes} bytes)"
                return pos, opcode, Refused(length, problem, grpc.StatusCode.RESOURCE_EXHAUSTED)
            if end - pos - 4 < length:
                break
            jute.reset(buf, pos + 4, pos + 4 + length)
            req = requests.add()
            try:
                opcode = decode_request(jute, req)
            except JuteError as exc:
                xid = req.xid
                req.Clear()
                req.xid = xid
                opcode = OP_MARSHALLING_ERROR
                self.log.info("zk_request_unreadable", session_id=self.stats.session_id, xid=xid, reason=str(exc))
            encoder.expect(opcode, arrived, jute.op_types if opcode in _MULTI_OPCODES else None)
            pos += 4 + length
            if opcode == OP_UNKNOWN or len(requests) == BATCH_REQUESTS_MAX:
                break  # an unknown opcode ends the connection: nothing after it is read
        self.stats.received(len(requests))
        return pos, opcode, None
