"""The Kafka listener in-process, on one event loop: its byte budget, its hand-over of HTTP/2 connections, its stop.

What an operator relies on: every request's bytes go back to `queued.max.request.bytes` whatever became of the
request (answered, refused, connection closed), so a stream of bad clients cannot starve good ones; a gRPC
client reaching the Kafka port is handed byte for byte to the gRPC server; stopping the listener ends its
connections.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import pytest

from broker import kafka_wire
from broker.kafka_api.registry import API_SPECS, CloseConnection, KafkaRequestContext
from broker.kafka_listener import HTTP2_PREFACE, KafkaListenerServer
from broker.kafka_wire import API_VERSIONS_KEY
from broker.listeners import KafkaListener
from broker.metadata_cache import MetadataCache
from broker.request_bounds import BytesInFlight
from client.kafka.znodes import EndPoint

TIMEOUT_S = 10.0
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, -1)


class _Log:
    def __getattr__(self, name: str) -> Callable[..., object]:
        return lambda *args, **kwargs: self


Scenario = Callable[[KafkaListenerServer, BytesInFlight, str], Awaitable[None]]


def run(scenario: Scenario, grpc: str | None = None) -> None:
    async def main() -> None:
        budget = BytesInFlight(1 << 20, _Log())
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, EndPoint("127.0.0.1", 0, "PLAINTEXT", "PLAINTEXT"))
        service = SimpleNamespace(metadata_cache=MetadataCache(1, "c"), admin=None)
        server = KafkaListenerServer(listener, service, budget, 4096, 8, TIMEOUT_S, grpc, _Log())
        port = await server.start()
        try:
            await asyncio.wait_for(scenario(server, budget, f"127.0.0.1:{port}"), TIMEOUT_S)
        finally:
            await server.stop()

    asyncio.run(main())


async def exchange(address: str, data: bytes, answers: int = 1) -> list[bytes]:
    """Sends `data` and ends the sending side, reads `answers` response frames (fewer if the broker closes first).

    The listener releases a request's bytes before it answers or closes, so they are back once this returns."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    frames = []
    try:
        writer.write(data)
        writer.write_eof()
        for _ in range(answers):
            try:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frames.append(await reader.readexactly(size))
            except asyncio.IncompleteReadError:
                break
    finally:
        writer.close()
    return frames


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_every_request_returns_its_bytes_to_the_budget() -> None:
    async def scenario(server: KafkaListenerServer, budget: BytesInFlight, address: str) -> None:
        assert len(await exchange(address, frame(API_VERSIONS_V0) * 5, answers=5)) == 5
        assert await exchange(address, frame(struct.pack(">hhih", 999, 0, 1, -1)), answers=1) == []  # unknown key
        assert await exchange(address, frame(struct.pack(">hhih", 3, 9, 1, -1)), answers=1) == []  # no body
        [fallback] = await exchange(address, frame(struct.pack(">hhih", 18, 9, 7, -1) + b"\0"), answers=1)
        assert struct.unpack_from(">ih", fallback) == (7, 35)  # ApiVersions v0, UNSUPPORTED_VERSION
        assert await exchange(address, struct.pack(">i", 5000), answers=1) == []  # above socket.request.max.bytes
        assert await exchange(address, frame(API_VERSIONS_V0)[:8], answers=1) == []  # truncated, then closed
        assert budget.used_bytes == 0

    run(scenario)


def test_an_http2_preface_is_handed_to_the_grpc_server_byte_for_byte() -> None:
    received: list[bytes] = []

    async def grpc_stand_in(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.readexactly(len(HTTP2_PREFACE) + 5)
        received.append(data)
        writer.write(b"settings")
        await writer.drain()
        writer.close()

    async def scenario_with_grpc() -> None:
        grpc_server = await asyncio.start_server(grpc_stand_in, "127.0.0.1", 0)
        grpc_address = f"127.0.0.1:{grpc_server.sockets[0].getsockname()[1]}"

        async def scenario(server: KafkaListenerServer, budget: BytesInFlight, address: str) -> None:
            host, port = address.rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(HTTP2_PREFACE + b"hello")
            assert await reader.read() == b"settings"
            writer.close()

        try:
            await asyncio.to_thread(run, scenario, grpc_address)
        finally:
            grpc_server.close()

    asyncio.run(scenario_with_grpc())
    assert received == [HTTP2_PREFACE + b"hello"]


def test_stop_ends_open_connections() -> None:
    async def scenario(server: KafkaListenerServer, budget: BytesInFlight, address: str) -> None:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(struct.pack(">i", 100) + b"partial")  # a request the listener waits on
        await writer.drain()
        await server.stop()
        assert await reader.read() == b""  # closed by the listener
        writer.close()

    run(scenario)


def test_a_handler_returning_none_sends_nothing_and_later_answers_follow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka sends nothing for a Produce with acks=0; the next request's answer still comes, in order."""
    real = API_SPECS[API_VERSIONS_KEY]

    async def silent_for_odd_ids(request: object, context: KafkaRequestContext) -> object:
        return None if context.correlation_id % 2 else await real.handler(request, context)

    monkeypatch.setitem(API_SPECS, API_VERSIONS_KEY, dataclasses.replace(real, handler=silent_for_odd_ids))
    monkeypatch.setattr(kafka_wire, "_CODECS", {})

    async def scenario(server: KafkaListenerServer, budget: BytesInFlight, address: str) -> None:
        requests = b"".join(frame(struct.pack(">hhih", 18, 0, cid, -1)) for cid in (1, 2, 3, 4))
        answers = await exchange(address, requests, answers=4)
        assert [struct.unpack_from(">i", a)[0] for a in answers] == [2, 4]

    run(scenario)


def test_pipelined_requests_run_at_once_and_are_answered_in_request_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first request's handler finishes only after the second's has run: both were in flight together,
    and the answers still come first-asked, first-answered."""
    real = API_SPECS[API_VERSIONS_KEY]
    second_ran = asyncio.Event()
    finished: list[int] = []

    async def first_waits_for_second(request: object, context: KafkaRequestContext) -> object:
        if context.correlation_id == 1:
            await second_ran.wait()
        else:
            second_ran.set()
        finished.append(context.correlation_id)
        return await real.handler(request, context)

    monkeypatch.setitem(API_SPECS, API_VERSIONS_KEY, dataclasses.replace(real, handler=first_waits_for_second))
    monkeypatch.setattr(kafka_wire, "_CODECS", {})

    async def scenario(server: KafkaListenerServer, budget: BytesInFlight, address: str) -> None:
        requests = b"".join(frame(struct.pack(">hhih", 18, 0, cid, -1)) for cid in (1, 2))
        answers = await exchange(address, requests, answers=2)
        assert finished == [2, 1]
        assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2]

    run(scenario)


def test_a_handler_raising_close_connection_ends_the_connection_after_the_answers_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = API_SPECS[API_VERSIONS_KEY]

    async def closes_on_two(request: object, context: KafkaRequestContext) -> object:
        if context.correlation_id == 2:
            raise CloseConnection("a failed Produce with acks=0")
        return await real.handler(request, context)

    monkeypatch.setitem(API_SPECS, API_VERSIONS_KEY, dataclasses.replace(real, handler=closes_on_two))
    monkeypatch.setattr(kafka_wire, "_CODECS", {})

    async def scenario(server: KafkaListenerServer, budget: BytesInFlight, address: str) -> None:
        requests = b"".join(frame(struct.pack(">hhih", 18, 0, cid, -1)) for cid in (1, 2, 3))
        answers = await exchange(address, requests, answers=3)
        assert [struct.unpack_from(">i", a)[0] for a in answers] == [1]
        assert budget.used_bytes == 0

    run(scenario)
