"""The broker's Kafka listener: Kafka's binary protocol on a TCP port, dispatched to broker/kafka_api.

Framing (Kafka protocol guide, "Protocol Primitives" and "Common Request and Response Structure"): each
request is an int32 size, then a request header (v1, or v2 for the flexible versions of an API, KIP-482),
then the body; each response is an int32 size, a response header (v0, or v1 for flexible versions, except
ApiVersions whose responses always use v0 so that any client can read them) and the body. kio, generated
from Kafka's JSON message schemas, decodes and encodes headers and bodies; its readers and writers are
built once per (API key, version).

One connection, many requests: Kafka answers the requests of a connection in the order they came
(SocketServer mutes a channel until its response is sent). Clients pipeline (librdkafka keeps several
Produce requests in flight), so requests are handled concurrently, each as soon as it is read, and a
per-connection queue of their futures writes the answers in request order. The queue is bounded by
`max.concurrent.streams.per.connection`: beyond it, the connection is not read until answers go out.

Limits, as Kafka's SocketServer: a frame announcing more than `socket.request.max.bytes` (or less than a
header) closes the connection before its body is read; a request's bytes wait for room in
`queued.max.request.bytes` before they are read (KIP-72's memory pool); an unknown API key, or a request
kio cannot decode, closes the connection (Kafka 2.8's InvalidRequestException). A known API in a
version the broker does not serve is answered in that version's own response with UNSUPPORTED_VERSION in
each entity the request named (broker/kafka_error_response.py; Kafka 2.8 closes the connection instead), and
ApiVersions in any version it does not serve gets a v0 answer with the table, so the client downgrades. A
version kio has no schema for can be neither read nor answered, so it still closes the connection: below
kio's oldest schema, Produce v0-2, Fetch v0-3, ListOffsets v0, OffsetCommit v0-1, OffsetFetch v0,
CreateTopics v0-1, DeleteTopics v0, OffsetForLeaderEpoch v0-1, DescribeConfigs v0 and DescribeLogDirs v0,
and any version newer than kio's newest schema (an API's versions kio knows: kio.index).
A handler that fails is answered as Kafka 2.8's KafkaApis.handleError answers: the API's error response with
the exception's Kafka code (UNKNOWN_SERVER_ERROR for an unexpected one, logged with its traceback) in each
entity. A handler that raises CloseConnection (Kafka closes instead of answering), or whose failure has no
answer (a Produce with acks=0), has its connection closed: the client reconnects and retries, as after any
broken connection. A handler that returns None sends nothing (Produce with acks=0).

A connection that opens with HTTP/2's client preface ("PRI * HTTP/2.0...": read as a Kafka size it is
1,347,569,952, far above any `socket.request.max.bytes`, so no Kafka client ever sends it) is a gRPC
client that was given the Kafka bootstrap list: it is handed, byte for byte, to the broker's own gRPC
server, whose Metadata then names every broker's gRPC endpoint. Not on a TLS listener (SSL, SASL_SSL): the
broker's gRPC port has its own TLS, and handing decrypted bytes across would strip it. A gRPC client that
completes a TLS handshake there (few do: gRPC wants ALPN `h2`, which the listener does not offer) is answered
with HTTP/2 SETTINGS and a GOAWAY whose text names what to dial instead (the `GRPC` endpoint in
/brokers/ids/<id>), and the broker logs `grpc_handoff_refused`.

TLS (broker/listener_tls.py): a listener with an SSL context accepts through runtime/tls_accept.py, which
completes each client's handshake before `_on_connection` runs and logs `kafka_tls_handshake_failed` for one
that does not (a plaintext client, a client that does not trust the broker's CA); the request path is the same
code on both, so a PLAINTEXT listener pays nothing for TLS existing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import time
from typing import Any

import structlog

from broker.broker_stats import REQUEST_STATS
from broker.kafka_api import cluster
from broker.kafka_api.registry import API_SPECS, CloseConnection, KafkaConnectionState, KafkaRequestContext
from broker.kafka_error_response import RequestError, error_for_exception, unsupported_version_error
from broker.kafka_wire import (
    API_VERSIONS_KEY,
    HEADER_START,
    REQUEST_BYTES_MIN,
    SIZE,
    Codec,
    Frame,
    api_versions_fallback,
    codec_for,
    encode_response,
    error_frame,
    unserved_codec,
)
from broker.listeners import KafkaListener
from broker.request_bounds import BytesInFlight, RequestBytesExhausted, holding_request_bytes
from broker.sasl.authenticator import Admission, SaslAuthenticator, SaslListener
from runtime.tls_accept import TlsStreamServer, start_stream_server

# HTTP/2's connection preface (RFC 9113 §3.4); its first four bytes, read as a Kafka size, are 1,347,569,952.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_PREFACE_SIZE = SIZE.unpack(HTTP2_PREFACE[:4])[0]
# Bytes per read of the gRPC byte pump.
PUMP_CHUNK_BYTES = 256 * 1024
# RFC 9113 §6.5 and §6.8: an empty SETTINGS frame (a server's preface) and a GOAWAY (PROTOCOL_ERROR, no stream
# processed) whose debug text tells a gRPC client on a TLS Kafka listener where to go instead.
_HTTP2_SETTINGS, _HTTP2_GOAWAY, _HTTP2_PROTOCOL_ERROR = 0x4, 0x7, 0x1
GRPC_ON_TLS_LISTENER = (
    "this is a Kafka TLS listener, which does not hand gRPC clients over: "
    "dial the broker's GRPC endpoint (/brokers/ids/<id>)"
)

Answer = asyncio.Future[Frame | None]


class _CloseConnection(Exception):
    """The request breaks the protocol: close the connection (Kafka's InvalidRequestException)."""


class KafkaListenerServer:
    """One Kafka listener's TCP server on the broker's event loop."""

    def __init__(
        self,
        listener: KafkaListener,
        service: Any,
        budget: BytesInFlight,
        request_max_bytes: int,
        pipelined_requests_max: int,
        request_timeout_s: float,
        grpc_address: str | None,
        logger: Any = None,
        sasl: SaslListener | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.listener = listener
        self._sasl = sasl  # a SASL_ listener's authentication (broker/sasl/); None: connections start served
        self._service = service
        self._budget = budget
        self._request_max_bytes = request_max_bytes
        self._pipelined_max = pipelined_requests_max
        self._request_timeout_s = request_timeout_s
        # A TLS listener hands no connection to the gRPC port (see the module's docstring).
        self._grpc_address = grpc_address if tls is None else None
        self._tls = tls
        self._log = (logger or structlog.get_logger("zkraft.broker")).bind(listener=listener.name)
        self._server: asyncio.Server | TlsStreamServer | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._handlers: set[asyncio.Task[Frame | None]] = set()  # requests being worked on, for stop()
        self.bound_port = -1

    async def start(self) -> int:
        """Binds the listener; returns the bound port (the one registered when the configured port is 0)."""
        self._server = await start_stream_server(
            self._on_connection,
            self.listener.bind_host,
            self.listener.bind_port,
            tls=self._tls,
            on_handshake_failed=self._on_handshake_failed,
        )
        self.bound_port = self._server.sockets[0].getsockname()[1]
        self._log.info(
            "kafka_listener_started",
            host=self.listener.bind_host,
            port=self.bound_port,
            security_protocol=self.listener.advertised.security_protocol,
        )
        return self.bound_port

    def _on_handshake_failed(self, peer: str, reason: str) -> None:
        # Kafka's SslTransportLayer logs a failed handshake; its client sees the connection closed (SSL alert).
        self._log.warning("kafka_tls_handshake_failed", peer=peer, reason=reason)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [*self._connections, *self._handlers]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        connection = _Connection(self, reader, writer, peer[0] if peer else "")
        try:
            await connection.serve()
        except asyncio.CancelledError:
            # stop(): the connection ends with the listener. Not re-raised: asyncio's stream server would log a
            # cancelled connection task as an error.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class _Connection:
    """One client connection: a read loop that dispatches, a write loop that answers in request order."""

    def __init__(
        self, server: KafkaListenerServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        self._server = server
        self._reader = reader
        self._writer = writer
        self._peer = peer
        self._log = server._log.bind(peer=peer)
        self._answers: asyncio.Queue[Answer | None] = asyncio.Queue(server._pipelined_max)
        self._state = KafkaConnectionState(security_protocol=server.listener.advertised.security_protocol)
        self._sasl: SaslAuthenticator | None = None
        if server._sasl is not None:
            self._sasl = self._state.authenticator = server._sasl.authenticator(self._state, self._log)

    async def serve(self) -> None:
        """Reads and answers until either side ends; answers already owed are written before closing."""
        reading = asyncio.create_task(self._read_loop())
        writing = asyncio.create_task(self._write_loop())
        try:
            await asyncio.wait((reading, writing), return_when=asyncio.FIRST_COMPLETED)
            for task in (reading, writing):
                if task.done() and not task.cancelled() and task.exception() is not None:
                    # A bug, not the client's doing (those end the loops normally): one connection ends, logged.
                    self._log.error("kafka_connection_failed", exc_info=task.exception())
            if not writing.done():  # the client stopped sending (or broke the protocol): owed answers, then close
                await self._answers.put(None)
                await writing
        finally:
            for task in (reading, writing):
                task.cancel()
            await asyncio.gather(reading, writing, return_exceptions=True)

    async def _read_loop(self) -> None:
        server = self._server
        while True:
            try:
                size_bytes = SIZE.unpack(await self._reader.readexactly(4))[0]
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if size_bytes == HTTP2_PREFACE_SIZE and (server._grpc_address is not None or server._tls is not None):
                await (self._pump_to_grpc() if server._tls is None else self._refuse_grpc())
                return
            if self._sasl is not None and size_bytes > self._sasl.receive_bytes_max:
                # Before login a frame is bounded by sasl.server.max.receive.size, not socket.request.max.bytes:
                # an unauthenticated client makes the broker hold at most this much.
                self._log.warning("kafka_sasl_frame_refused", size_bytes=size_bytes)
                return
            if not REQUEST_BYTES_MIN <= size_bytes <= server._request_max_bytes:
                self._log.warning(
                    "kafka_frame_refused", size_bytes=size_bytes, socket_request_max_bytes=server._request_max_bytes
                )
                return
            try:
                await server._budget.acquire(size_bytes, server._request_timeout_s)
            except RequestBytesExhausted as exc:
                self._log.warning("kafka_request_bytes_exhausted", error=str(exc))
                return
            try:
                body = await self._reader.readexactly(size_bytes)
            except (asyncio.IncompleteReadError, ConnectionError):
                server._budget.release(size_bytes)
                return
            try:
                answer = self._dispatch(body)
            except _CloseConnection as exc:
                server._budget.release(size_bytes)
                self._log.warning("kafka_request_refused", reason=str(exc))
                return
            await self._answers.put(answer)
            if self._sasl is not None and not await self._sasl_settled(body, answer):
                return

    async def _sasl_settled(self, body: bytes, answer: Answer) -> bool:
        """During a SASL exchange, requests are handled one at a time (Kafka mutes the channel while it
        authenticates): the answer decides what the next request may be. False: the exchange failed, the
        connection ends once its answer is written."""
        sasl = self._sasl
        assert sasl is not None
        if sasl.in_exchange(HEADER_START.unpack_from(body)[0]):
            await asyncio.wait((answer,))
        return not sasl.failed

    def _dispatch(self, body: bytes) -> Answer:
        """Decodes `body` and starts its handler; the returned future resolves to the response frame."""
        size_bytes = len(body)
        api_key, api_version, correlation_id = HEADER_START.unpack_from(body)
        sasl = self._sasl
        if sasl is not None:
            admission, reason = sasl.admit(api_key)
            if admission is not Admission.SERVE:
                return self._refused_by_sasl(admission, reason, body, api_key, api_version, correlation_id)
        codec = codec_for(api_key, api_version)
        if codec is None:
            return self._unserved(body, api_key, api_version, correlation_id)
        try:  # inline rather than _decode: this is every request's path
            header, offset = codec.read_header(body, 0)
            request, _ = codec.read_request(body, offset)
        except Exception as exc:  # kio's decoders raise several types on truncated or malformed bytes
            raise _CloseConnection(
                f"cannot decode {codec.spec.name} v{api_version} (correlation id {correlation_id}): {exc}"
            ) from None
        context = KafkaRequestContext(
            service=self._server._service,
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=header.client_id,
            client_host=self._peer,
            listener_name=self._server.listener.name,
            response_type=codec.response_type,
            connection=self._state,
        )
        handling = asyncio.create_task(self._handle(codec, request, context, size_bytes))
        handlers = self._server._handlers
        handlers.add(handling)
        handling.add_done_callback(handlers.discard)
        return handling

    def _unserved(self, body: bytes, api_key: int, api_version: int, correlation_id: int) -> Answer:
        """A request for a key or version the broker does not serve: answered with UNSUPPORTED_VERSION in the API's
        own response when kio can read it, else closed (the caller then returns the request's bytes to the budget)."""
        future: Answer = asyncio.get_running_loop().create_future()
        if api_key == API_VERSIONS_KEY:
            # KIP-511: whatever the version, an ApiVersions v0 with UNSUPPORTED_VERSION and the table.
            self._server._budget.release(len(body))
            future.set_result(api_versions_fallback(correlation_id, cluster.unsupported_api_versions_response()))
            return future
        spec = API_SPECS.get(api_key)
        if spec is None:  # Kafka 2.8 closes the connection (ApiKeys.forId throws in RequestHeader.parse)
            raise _CloseConnection(f"unknown API key {api_key} (correlation id {correlation_id})")
        served = f"{spec.name} v{api_version} is not served (v{spec.min_version}-{spec.max_version})"
        codec = unserved_codec(api_key, api_version)
        if codec is None:
            raise _CloseConnection(f"{served} and has no schema to answer in (correlation id {correlation_id})")
        _, request = _decode(codec, body, api_version, correlation_id)
        error = unsupported_version_error(spec.name, api_version, spec.min_version, spec.max_version)
        try:
            answer = error_frame(codec, correlation_id, request, error)
        except Exception as exc:  # a bug in the error path: this connection ends, the broker serves on
            self._log.exception("kafka_error_response_failed", api=spec.name, api_version=api_version)
            raise _CloseConnection(f"{served}: its error response failed: {exc}") from None
        if answer is None:  # a Produce with acks=0: Kafka answers a failure by closing
            raise _CloseConnection(f"{served} and asks for no response (correlation id {correlation_id})")
        self._log.info(
            "kafka_unsupported_version", api=spec.name, api_version=api_version, correlation_id=correlation_id
        )
        self._server._budget.release(len(body))
        future.set_result(answer)
        return future

    def _refused_by_sasl(
        self, admission: Admission, reason: str, body: bytes, api_key: int, api_version: int, correlation_id: int
    ) -> Answer:
        """A request the connection's SASL state does not admit (broker/sasl/authenticator.py): closed, or answered
        with ILLEGAL_SASL_STATE in its own response and then closed, as Kafka's SaslServerAuthenticator does."""
        assert self._sasl is not None
        self._sasl.refuse()
        codec = codec_for(api_key, api_version) or unserved_codec(api_key, api_version)
        if admission is Admission.CLOSE or codec is None:
            raise _CloseConnection(reason)
        _, request = _decode(codec, body, api_version, correlation_id)
        try:
            answer = error_frame(codec, correlation_id, request, RequestError(34, reason))  # ILLEGAL_SASL_STATE
        except Exception:  # a bug in the error path: the connection ends, as it would anyway
            self._log.exception("kafka_error_response_failed", api=codec.spec.name, api_version=api_version)
            raise _CloseConnection(reason) from None
        if answer is None:
            raise _CloseConnection(reason)
        self._log.warning("kafka_sasl_state_refused", reason=reason, correlation_id=correlation_id)
        self._server._budget.release(len(body))
        future: Answer = asyncio.get_running_loop().create_future()
        future.set_result(answer)
        return future

    async def _handle(self, codec: Codec, request: Any, context: KafkaRequestContext, size_bytes: int) -> Frame | None:
        """Runs the handler with the request's bytes held in the budget; None closes the connection."""
        started_ns = time.perf_counter_ns()
        try:
            with holding_request_bytes(self._server._budget, size_bytes):
                response = await codec.spec.handler(request, context)
            frame = encode_response(codec, context.correlation_id, response)
            REQUEST_STATS.record(codec.spec.name, started_ns)  # RequestMetrics: requests and TotalTimeMs
            return frame
        except asyncio.CancelledError:
            raise
        except CloseConnection as exc:  # Kafka answers this request by closing (a failed acks=0 produce)
            self._log.warning(
                "kafka_connection_closed_by_handler",
                api=codec.spec.name,
                correlation_id=context.correlation_id,
                reason=str(exc),
            )
            return None
        except Exception as exc:  # the loop boundary of one request
            return self._failed(codec, request, context, exc)

    def _failed(self, codec: Codec, request: Any, context: KafkaRequestContext, exc: Exception) -> Frame | None:
        """Kafka 2.8's KafkaApis.handleError: the API's error response, the exception's code (UNKNOWN_SERVER_ERROR
        for a bug) in each of its entities; None (close) when Kafka sends none or it cannot be built."""
        error = error_for_exception(exc)
        self._log.error(
            "kafka_request_failed",
            api=codec.spec.name,
            api_version=context.api_version,
            correlation_id=context.correlation_id,
            error_code=error.code,
            error=str(exc),
            exc_info=exc,
        )
        try:
            return error_frame(codec, context.correlation_id, request, error)
        except Exception:  # a bug in the error path itself: the connection ends, as before any answer existed
            self._log.exception("kafka_error_response_failed", api=codec.spec.name, api_version=context.api_version)
            return None

    async def _write_loop(self) -> None:
        """Writes each answer in request order; answers already done behind it go out in the same write (one
        system call for a burst of pipelined answers)."""
        answers = self._answers
        carried: Answer | None = None
        has_carried = False
        while True:
            if has_carried:
                answer, has_carried = carried, False
            else:
                answer = await answers.get()
            if answer is None:
                return
            frame = await answer
            if frame is None:
                return
            frames = list(frame)
            while not answers.empty():
                following = answers.get_nowait()
                if following is None or not following.done():
                    carried, has_carried = following, True
                    break
                more = following.result()
                if more is None:  # a failed request: the answers before it still go out, then the connection ends
                    await self._write(frames)
                    return
                frames.extend(more)
            if frames and not await self._write(frames):
                return

    async def _write(self, frames: list[bytes | memoryview]) -> bool:
        try:
            self._writer.writelines(frames)
            await self._writer.drain()
        except ConnectionError:
            return False
        return True

    async def _pump_to_grpc(self) -> None:
        """Hands this connection to the broker's gRPC server: the preface's first bytes, then both ways."""
        address = self._server._grpc_address
        assert address is not None
        host, _, port = address.rpartition(":")
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        except OSError as exc:
            self._log.warning("grpc_handoff_failed", error=str(exc))
            return
        upstream_writer.write(HTTP2_PREFACE[:4])
        try:
            await asyncio.gather(
                _pump(self._reader, upstream_writer), _pump(upstream_reader, self._writer), return_exceptions=True
            )
        finally:
            upstream_writer.close()

    async def _refuse_grpc(self) -> None:
        """A gRPC client on a TLS listener: SETTINGS and GOAWAY with the way to go, then the connection ends."""
        self._log.warning("grpc_handoff_refused", reason="a TLS listener hands no connection to the gRPC port")
        debug = GRPC_ON_TLS_LISTENER.encode()
        goaway = struct.pack(">II", 0, _HTTP2_PROTOCOL_ERROR) + debug
        self._writer.write(_http2_frame(_HTTP2_SETTINGS, b"") + _http2_frame(_HTTP2_GOAWAY, goaway))
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()


def _http2_frame(frame_type: int, payload: bytes) -> bytes:
    """An HTTP/2 frame on stream 0 without flags (RFC 9113 §4.1)."""
    return len(payload).to_bytes(3, "big") + bytes((frame_type, 0)) + (0).to_bytes(4, "big") + payload


def _decode(codec: Codec, body: bytes, api_version: int, correlation_id: int) -> tuple[Any, Any]:
    """(request header, request body) as kio reads them; _CloseConnection when the bytes do not decode (the
    error path's copy of what _dispatch does inline)."""
    try:
        header, offset = codec.read_header(body, 0)
        request, _ = codec.read_request(body, offset)
    except Exception as exc:  # kio's decoders raise several types on truncated or malformed bytes
        raise _CloseConnection(
            f"cannot decode {codec.spec.name} v{api_version} (correlation id {correlation_id}): {exc}"
        ) from None
    return header, request


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copies `source` to `sink` until end of stream, then half-closes `sink`."""
    try:
        while True:
            chunk = await source.read(PUMP_CHUNK_BYTES)
            if not chunk:
                break
            sink.write(chunk)
            await sink.drain()
    finally:
        with contextlib.suppress(Exception):
            if sink.can_write_eof():
                sink.write_eof()
