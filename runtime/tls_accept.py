"""Stream servers that may serve TLS, with one log line for each client that fails its handshake.

`asyncio.start_server(ssl=...)` runs the server side of each handshake out of the server's sight: a handshake
that fails (a plaintext client, a client that does not trust our CA, a client without the certificate
`ssl.client.auth` asks for) is dropped silently, while an operator needs one line saying who failed and why.
Upgrading an accepted plaintext stream (`StreamWriter.start_tls`) is no way out: the client's ClientHello can
land in the plaintext stream reader first, and the handshake then waits for it forever (cpython#142352,
uvloop#707). So a TLS server here accepts sockets itself and hands each to `loop.connect_accepted_socket`
with the SSL context: that call returns once the handshake completed and raises when it failed.

Without TLS, `start_stream_server` is `asyncio.start_server` itself: a plaintext port costs nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable

ClientConnected = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
# (peer "host:port", reason): called once per client that failed its handshake, to log it.
HandshakeFailed = Callable[[str, str], None]
# asyncio's own default for a stream reader's buffer.
STREAM_LIMIT_BYTES_DEFAULT = 64 << 10
# How long a client has to finish its handshake: one that opens a socket and says nothing must not hold it longer.
TLS_HANDSHAKE_TIMEOUT_S = 10.0
# Pending connections the kernel queues per listening socket (asyncio's default backlog).
LISTEN_BACKLOG = 100
# After a failed accept (out of file descriptors), the pause before the next one.
ACCEPT_RETRY_S = 0.1
# OpenSSL's reasons when the first record is not TLS at all: most likely a plaintext client.
_PLAINTEXT_REASONS = frozenset({"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE"})
_HINTS = {
    "TLSV1_ALERT_UNKNOWN_CA": "the client does not trust this server's CA",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the client refused this server's certificate",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "client authentication is required and the client sent no certificate",
    "CERTIFICATE_VERIFY_FAILED": "the client's certificate does not chain to the truststore",
}


async def start_stream_server(
    client_connected: ClientConnected,
    host: str | None,
    port: int,
    *,
    tls: ssl.SSLContext | None,
    on_handshake_failed: HandshakeFailed,
    limit: int = STREAM_LIMIT_BYTES_DEFAULT,
    handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S,
) -> asyncio.Server | TlsStreamServer:
    """`asyncio.start_server`, with each connection's TLS handshake done first when `tls` is given.

    A client that fails its handshake is reported to `on_handshake_failed` and closed; `client_connected` only
    sees connections that completed it. Raises OSError when the address cannot be bound.
    """
    if tls is None:
        return await asyncio.start_server(client_connected, host, port, limit=limit, reuse_address=True)
    server = TlsStreamServer(client_connected, tls, on_handshake_failed, limit, handshake_timeout_s)
    await server.bind(host, port)
    return server


class TlsStreamServer:
    """Listening sockets whose accepted connections complete a TLS handshake before `client_connected` runs.

    `sockets`, `close()` and `wait_closed()` as asyncio.Server's: closing stops accepting (and any handshake
    under way); connections already handed over stay with their owner.
    """

    def __init__(
        self,
        client_connected: ClientConnected,
        context: ssl.SSLContext,
        on_handshake_failed: HandshakeFailed,
        limit: int,
        handshake_timeout_s: float,
    ) -> None:
        self._client_connected = client_connected
        self._context = context
        self._on_handshake_failed = on_handshake_failed
        self._limit = limit
        self._handshake_timeout_s = handshake_timeout_s
        self.sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._handshakes: set[asyncio.Task[None]] = set()
        self._connections: set[asyncio.Task[None]] = set()

    async def bind(self, host: str | None, port: int) -> None:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self.sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                sock.listen(LISTEN_BACKLOG)
                sock.setblocking(False)
                if port == 0:  # every address family on the one port the first one got, as asyncio does
                    port = sock.getsockname()[1]
        except OSError:
            self.close()
            raise
        self._accepting = [loop.create_task(self._accept_loop(sock)) for sock in self.sockets]

    def close(self) -> None:
        for task in (*self._accepting, *self._handshakes):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._accepting, *self._handshakes, return_exceptions=True)

    async def _accept_loop(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listening)
            except OSError:  # EMFILE and friends: the next accept may succeed once descriptors are free
                if listening.fileno() == -1:
                    return
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            task = loop.create_task(self._handshake(sock))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        peer = _peer_of(sock)
        reader = asyncio.StreamReader(limit=self._limit, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, sock, ssl=self._context, ssl_handshake_timeout=self._handshake_timeout_s
            )
        except asyncio.CancelledError:
            sock.close()
            raise
        except Exception as exc:  # the boundary of one connection; ssl.SSLError is an OSError
            sock.close()
            self._on_handshake_failed(peer, handshake_failure(exc))
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        # The connection now belongs to `client_connected`: closing the server does not cancel it.
        task = loop.create_task(self._client_connected(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)


def handshake_failure(exc: BaseException) -> str:
    """One line on why a client's handshake failed."""
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        hint = _HINTS.get(reason) or ("a plaintext client on a TLS port?" if reason in _PLAINTEXT_REASONS else "")
        return f"{reason} ({hint})" if hint else reason
    if isinstance(exc, TimeoutError) or "taking longer" in str(exc):  # asyncio's and uvloop's handshake timeout
        return "no TLS handshake within the handshake timeout (a client that connected and said nothing)"
    if not isinstance(exc, OSError):
        return f"the handshake failed: {exc.__class__.__name__}: {exc}"
    # A client that does not trust our certificate sends its alert and closes: the server sees the close.
    detail = str(exc) or exc.__class__.__name__
    return f"the client ended the connection during the TLS handshake ({detail}; does it trust our CA?)"


def _peer_of(sock: socket.socket) -> str:
    with contextlib.suppress(OSError):
        host, port, *_ = sock.getpeername()
        return f"{host}:{port}"
    return "unknown"
