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
kio cannot decode, closes the connection (Kafka 2.8's InvalidRequestException); a known API in a
version the broker does not serve is answered UNSUPPORTED_VERSION (ApiVersions: a v0 answer with the
table, so the client downgrades).

A connection that opens with HTTP/2's client preface ("PRI * HTTP/2.0...": read as a Kafka size it is
1,347,569,952, far above any `socket.request.max.bytes`, so no Kafka client ever sends it) is a gRPC
client that was given the Kafka bootstrap list: it is handed, byte for byte, to the broker's own gRPC
server, whose Metadata then names every broker's gRPC endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from kio.index import UnknownEntity, load_request_schema, load_response_schema
from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from broker.kafka_api import cluster
from broker.kafka_api.registry import API_SPECS, ApiSpec, EncodedResponse, KafkaRequestContext
from broker.listeners import KafkaListener
from broker.request_bounds import BytesInFlight, RequestBytesExhausted, holding_request_bytes

_SIZE = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id: the start of every request header
_RESPONSE_HEADER_V0 = struct.Struct(">i")  # correlation id
_RESPONSE_HEADER_V1 = struct.Struct(">iB")  # correlation id, no tagged fields
# A request header v1 without a client id: api key, api version, correlation id, client id length.
REQUEST_BYTES_MIN = 10
# HTTP/2's connection preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (RFC 9113 §3.4), its first four bytes as a size.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_PREFACE_SIZE = _SIZE.unpack(HTTP2_PREFACE[:4])[0]
API_VERSIONS_KEY = 18
# Bytes per read of the gRPC byte pump.
PUMP_CHUNK_BYTES = 256 * 1024


class _CloseConnection(Exception):
    """The request breaks the protocol: close the connection (Kafka's InvalidRequestException)."""


@dataclass(frozen=True, slots=True)
class _Codec:
    """What one (API key, version) needs: its handler, kio's readers and writer, its header versions."""

    spec: ApiSpec
    read_header: Any
    read_request: Any
    response_type: type
    write_response: Callable[[Any, Any], None]
    response_header: struct.Struct


_CODECS: dict[tuple[int, int], _Codec] = {}


def codec_for(api_key: int, api_version: int) -> _Codec | None:
    """The cached codec of a served (key, version), or None when the broker does not serve it."""
    codec = _CODECS.get((api_key, api_version))
    if codec is not None:
        return codec
    spec = API_SPECS.get(api_key)
    if spec is None or not spec.min_version <= api_version <= spec.max_version:
        return None
    request_type = load_request_schema(api_key, api_version)
    response_type = load_response_schema(api_key, api_version)
    flexible = bool(request_type.__flexible__)
    codec = _Codec(
        spec=spec,
        read_header=entity_reader(RequestHeaderV2 if flexible else RequestHeaderV1),
        read_request=entity_reader(request_type),
        response_type=response_type,
        write_response=entity_writer(response_type),
        # ApiVersions answers with header v0 whatever its version (KIP-511: the client may not know it yet).
        response_header=_RESPONSE_HEADER_V1 if flexible and api_key != API_VERSIONS_KEY else _RESPONSE_HEADER_V0,
    )
    _CODECS[(api_key, api_version)] = codec
    return codec


def encode_response(codec: _Codec, correlation_id: int, response: Any) -> list[bytes | memoryview]:
    """The response frame: size, header, body (an EncodedResponse's buffers are written as they are)."""
    header = codec.response_header
    header_bytes = header.pack(correlation_id) if header is _RESPONSE_HEADER_V0 else header.pack(correlation_id, 0)
    if isinstance(response, EncodedResponse):
        parts = response.parts
        body_bytes = sum(len(p) for p in parts)
        return [_SIZE.pack(len(header_bytes) + body_bytes) + header_bytes, *parts]
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(header_bytes)
    codec.write_response(buffer, response)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    return [frame]


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
    ) -> None:
        self.listener = listener
        self._service = service
        self._budget = budget
        self._request_max_bytes = request_max_bytes
        self._pipelined_max = pipelined_requests_max
        self._request_timeout_s = request_timeout_s
        self._grpc_address = grpc_address
        self._log = (logger or structlog.get_logger("zkraft.broker")).bind(listener=listener.name)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.bound_port = -1

    async def start(self) -> int:
        """Binds the listener; returns the bound port (the one registered when the configured port is 0)."""
        self._server = await asyncio.start_server(
            self._on_connection, self.listener.bind_host, self.listener.bind_port, reuse_address=True
        )
        self.bound_port = self._server.sockets[0].getsockname()[1]
        self._log.info("kafka_listener_started", host=self.listener.bind_host, port=self.bound_port)
        return self.bound_port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
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
        self._answers: asyncio.Queue[asyncio.Future[Sequence[bytes | memoryview] | None] | None] = asyncio.Queue(
            server._pipelined_max
        )

    async def serve(self) -> None:
        """Reads and answers until either side ends; answers already owed are written before closing."""
        reading = asyncio.create_task(self._read_loop())
        writing = asyncio.create_task(self._write_loop())
        try:
            await asyncio.wait((reading, writing), return_when=asyncio.FIRST_COMPLETED)
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
                size_bytes = _SIZE.unpack(await self._reader.readexactly(4))[0]
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if size_bytes == HTTP2_PREFACE_SIZE and server._grpc_address is not None:
                await self._pump_to_grpc()
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

    def _dispatch(self, body: bytes) -> asyncio.Future[Sequence[bytes | memoryview] | None]:
        """Decodes `body` and starts its handler; the returned future resolves to the response frame."""
        size_bytes = len(body)
        api_key, api_version, correlation_id = _HEADER_START.unpack_from(body)
        codec = codec_for(api_key, api_version)
        if codec is None:
            return self._unserved(body, api_key, api_version, correlation_id)
        try:
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
        )
        return asyncio.ensure_future(self._handle(codec, request, context, size_bytes))

    def _unserved(
        self, body: bytes, api_key: int, api_version: int, correlation_id: int
    ) -> asyncio.Future[Sequence[bytes | memoryview] | None]:
        """A request for a key or version the broker does not serve."""
        self._server._budget.release(len(body))
        future: asyncio.Future[Sequence[bytes | memoryview] | None] = asyncio.get_running_loop().create_future()
        if api_key == API_VERSIONS_KEY:
            # KIP-511: whatever the version, the answer is an ApiVersions v0 with UNSUPPORTED_VERSION and the table.
            codec = codec_for(API_VERSIONS_KEY, 0)
            assert codec is not None
            future.set_result(encode_response(codec, correlation_id, cluster.unsupported_api_versions_response()))
            return future
        spec = API_SPECS.get(api_key)
        if spec is None:
            raise _CloseConnection(f"unknown API key {api_key} (correlation id {correlation_id})")
        answer = self._unsupported_version_answer(spec, api_version, correlation_id)
        if answer is None:
            raise _CloseConnection(
                f"{spec.name} v{api_version} is not served (v{spec.min_version}-{spec.max_version}) "
                f"and has no error answer in that version (correlation id {correlation_id})"
            )
        future.set_result(answer)
        return future

    def _unsupported_version_answer(
        self, spec: ApiSpec, api_version: int, correlation_id: int
    ) -> list[bytes | memoryview] | None:
        """UNSUPPORTED_VERSION in the API's own response, when kio knows that version and it has a top-level
        error code; None otherwise."""
        try:
            response_type = load_response_schema(spec.key, api_version)
        except (UnknownEntity, KeyError):
            return None
        if "error_code" not in getattr(response_type, "__dataclass_fields__", {}):
            return None
        from broker.kafka_api.entities import build

        try:
            response = build(response_type, error_code=35)
        except TypeError:
            return None
        request_type = load_request_schema(spec.key, api_version)
        codec = _Codec(
            spec=spec,
            read_header=None,
            read_request=None,
            response_type=response_type,
            write_response=entity_writer(response_type),
            response_header=_RESPONSE_HEADER_V1 if request_type.__flexible__ else _RESPONSE_HEADER_V0,
        )
        return encode_response(codec, correlation_id, response)

    async def _handle(
        self, codec: _Codec, request: Any, context: KafkaRequestContext, size_bytes: int
    ) -> Sequence[bytes | memoryview] | None:
        """Runs the handler with the request's bytes held in the budget; None closes the connection."""
        try:
            with holding_request_bytes(self._server._budget, size_bytes):
                response = await codec.spec.handler(request, context)
            return encode_response(codec, context.correlation_id, response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the loop boundary of one request: log it and close (the client retries)
            self._log.exception(
                "kafka_request_failed",
                api=codec.spec.name,
                api_version=context.api_version,
                correlation_id=context.correlation_id,
                error=str(exc),
            )
            return None

    async def _write_loop(self) -> None:
        writer = self._writer
        while True:
            answer = await self._answers.get()
            if answer is None:
                return
            frame = await answer
            if frame is None:
                return
            try:
                writer.writelines(frame)
                await writer.drain()
            except ConnectionError:
                return

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
