"""A SASL_PLAINTEXT listener in-process, on one event loop, spoken to byte by byte.

What Kafka's SaslServerAuthenticator does and a client sees: a request other than SaslAuthenticate in the
middle of an exchange is answered with ILLEGAL_SASL_STATE (34) and the connection closed; SaslHandshake v0
(raw tokens) is closed with a log line; a client that pipelines its handshake, its token and a request gets
them handled in order, the request served as the user it just became; every request's bytes go back to the
budget whatever became of it.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

from broker.kafka_listener import KafkaListenerServer
from broker.listeners import KafkaListener
from broker.metadata_cache import MetadataCache
from broker.request_bounds import BytesInFlight
from broker.sasl.authenticator import SaslListener
from broker.sasl.settings import listener_sasl_settings
from client.kafka.znodes import EndPoint

TIMEOUT_S = 10.0
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    def bind(self, **_kwargs: object) -> _Log:
        return self

    def __getattr__(self, level: str) -> Callable[..., None]:
        return lambda event, **fields: self.events.append((event, fields))


def run(scenario: Callable[[BytesInFlight, str, _Log], Awaitable[None]], clock: list[float] | None = None) -> None:
    """Runs `scenario` against a SASL_PLAINTEXT listener (PLAIN; sessions of 1 s on `clock` when given)."""

    async def main() -> None:
        log = _Log()
        budget = BytesInFlight(1 << 20, log)
        endpoint = EndPoint("127.0.0.1", 0, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
        listener = KafkaListener("SASL_PLAINTEXT", "127.0.0.1", 0, endpoint)
        properties = {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS}
        if clock is not None:
            properties["connections.max.reauth.ms"] = "1000"
        settings = listener_sasl_settings("SASL_PLAINTEXT", properties)
        now_s = (lambda: clock[0]) if clock is not None else time.monotonic
        sasl = SaslListener(settings, SimpleNamespace(), now_s)  # type: ignore[arg-type]  (PLAIN: no SCRAM lookup)
        service = SimpleNamespace(metadata_cache=MetadataCache(1, "c"), admin=None)
        server = KafkaListenerServer(listener, service, budget, 4096, 8, TIMEOUT_S, None, log, sasl=sasl)
        port = await server.start()
        try:
            await asyncio.wait_for(scenario(budget, f"127.0.0.1:{port}", log), TIMEOUT_S)
        finally:
            await server.stop()

    asyncio.run(main())


async def exchange(address: str, data: bytes, answers: int) -> list[bytes]:
    """Sends `data`, reads up to `answers` response frames (fewer when the broker closes first)."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    frames = []
    try:
        writer.write(data)
        for _ in range(answers):
            try:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frames.append(await reader.readexactly(size))
            except (asyncio.IncompleteReadError, ConnectionError):
                break
        if len(frames) == answers:  # the broker closes after what it owed (or keeps the connection: no more bytes)
            frames.extend([b"open"] if not await _closed(reader) else [])
    finally:
        writer.close()
    return frames


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.5) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, -1) + body  # header v1, null client id
    return struct.pack(">i", len(payload)) + payload


def string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


HANDSHAKE_PLAIN = request(17, 1, 1, string("PLAIN"))
METADATA_X = request(3, 1, 3, struct.pack(">i", 1) + string("x"))  # Metadata v1 for topic "x"


def authenticate(token: bytes, correlation_id: int = 2) -> bytes:
    return request(36, 1, correlation_id, struct.pack(">i", len(token)) + token)


def metadata_topic_error(frame: bytes) -> int:
    """The first topic's error code of a Metadata v1 response with no brokers."""
    correlation_id, brokers, _controller, topics = struct.unpack_from(">iiii", frame)
    assert (correlation_id, brokers, topics) == (3, 0, 1)
    return struct.unpack_from(">h", frame, 16)[0]


def test_a_request_during_the_exchange_is_answered_illegal_sasl_state_then_closed() -> None:
    async def scenario(budget: BytesInFlight, address: str, log: _Log) -> None:
        handshake, metadata = await exchange(address, HANDSHAKE_PLAIN + METADATA_X, answers=2)
        assert struct.unpack_from(">ih", handshake) == (1, 0)
        assert metadata_topic_error(metadata) == 34  # ILLEGAL_SASL_STATE, and nothing after it: closed
        assert budget.used_bytes == 0
        assert any(event == "kafka_sasl_state_refused" for event, _ in log.events)

    run(scenario)


def test_handshake_v0_is_closed_with_a_log_line() -> None:
    async def scenario(budget: BytesInFlight, address: str, log: _Log) -> None:
        assert await exchange(address, request(17, 0, 1, string("PLAIN")), answers=1) == []
        reasons = [fields.get("reason", "") for event, fields in log.events]
        assert any("SaslHandshake v0" in str(reason) for reason in reasons)
        assert budget.used_bytes == 0

    run(scenario)


def test_pipelined_login_then_request_is_served_in_order_as_the_user() -> None:
    async def scenario(budget: BytesInFlight, address: str, log: _Log) -> None:
        data = HANDSHAKE_PLAIN + authenticate(b"\x00alice\x00alice-secret") + METADATA_X
        handshake, login, metadata, still_open = await exchange(address, data, answers=3)
        assert struct.unpack_from(">ih", handshake) == (1, 0)
        assert struct.unpack_from(">ihh", login) == (2, 0, -1)  # no error, null message
        assert metadata_topic_error(metadata) != 34  # served: the topic's own answer
        assert still_open == b"open"
        logins = [fields for event, fields in log.events if event == "kafka_sasl_authenticated"]
        assert [f["principal"] for f in logins] == ["User:alice"]
        assert budget.used_bytes == 0

    run(scenario)


def test_a_wrong_password_is_answered_then_closed() -> None:
    async def scenario(budget: BytesInFlight, address: str, log: _Log) -> None:
        data = HANDSHAKE_PLAIN + authenticate(b"\x00alice\x00nope") + METADATA_X
        _handshake, login = await exchange(address, data, answers=2)
        correlation_id, code, length = struct.unpack_from(">ihh", login)
        assert (correlation_id, code) == (2, 58)
        assert login[8 : 8 + length] == b"Authentication failed: Invalid username or password"
        assert budget.used_bytes == 0

    run(scenario)


def test_a_request_after_the_session_expired_closes_the_connection() -> None:
    """KIP-368: a connection that did not re-authenticate within connections.max.reauth.ms is closed at its next
    request (only a SaslHandshake, which begins re-authentication, is still read)."""
    clock = [100.0]

    async def scenario(budget: BytesInFlight, address: str, log: _Log) -> None:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(HANDSHAKE_PLAIN + authenticate(b"\x00alice\x00alice-secret"))
            for _ in range(2):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answer = await reader.readexactly(size)
            assert struct.unpack_from(">ih", answer) == (2, 0)  # logged in
            clock[0] += 1.5  # past the 1 s session
            writer.write(METADATA_X)
            assert await reader.read() == b""  # closed, unanswered
        finally:
            writer.close()
        refused = [f["reason"] for e, f in log.events if e == "kafka_request_refused"]
        assert any("expired" in str(reason) for reason in refused)
        assert [f["session_lifetime_ms"] for e, f in log.events if e == "kafka_sasl_authenticated"] == [1000]
        assert budget.used_bytes == 0

    run(scenario, clock)
