"""runtime/tls_accept.py on both event loops zkraft runs (uvloop and asyncio's own): every client that completes
its handshake reaches the server's code with its first bytes intact, even when it sends them at once and many
connect together; each client that fails is reported once, with why; a plaintext server is asyncio's own."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop

from runtime.tls import TlsConfig
from runtime.tls_accept import TlsStreamServer, start_stream_server
from tests.quorum_harness import poll_until
from tests.tls_material import TlsMaterial, make_tls_material

CLIENTS = 100
TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 0.5


def _reported(failures: list[str], count: int) -> Callable[[], Awaitable[bool]]:
    """A probe for poll_until: have the server's handshake-failure callbacks reported `count` failures yet?"""

    async def probe() -> bool:
        return len(failures) >= count

    return probe


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(await reader.readexactly(5))
    await writer.drain()
    writer.close()


async def exercise(material: TlsMaterial) -> list[str]:
    failures: list[str] = []
    server = await start_stream_server(
        echo,
        "127.0.0.1",
        0,
        tls=TlsConfig(material.server_keystore, material.ca_file).server_ssl_context(),
        on_handshake_failed=lambda peer, reason: failures.append(reason),
    )
    assert isinstance(server, TlsStreamServer)
    port = server.sockets[0].getsockname()[1]
    trusting = TlsConfig(None, material.ca_file).client_ssl_context()

    async def one(i: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trusting)
        writer.write(f"{i:05d}".encode())  # at once, before the server could have read anything
        answer = await reader.readexactly(5)
        writer.close()
        return answer

    answers = await asyncio.gather(*(one(i) for i in range(CLIENTS)))
    assert answers == [f"{i:05d}".encode() for i in range(CLIENTS)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"\x00\x00\x00\x10not a ClientHello")
    assert await reader.read() == b""  # closed, nothing answered
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncio.open_connection(
            "127.0.0.1", port, ssl=TlsConfig(None, material.other_ca_file).client_ssl_context()
        )
    await poll_until(_reported(failures, 2), TIMEOUT_S, lambda: f"two handshake failures reported: {failures}")
    server.close()
    await server.wait_closed()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    return failures


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_clients_complete_their_handshake_and_failures_are_reported(tmp_path: Path, loop: str) -> None:
    material = make_tls_material(tmp_path)
    runner = uvloop.run if loop == "uvloop" else asyncio.run
    failures = runner(exercise(material))
    assert "a plaintext client on a TLS port?" in failures[0]
    assert len(failures) == 2


def test_without_tls_the_server_is_asyncios_own() -> None:
    async def start() -> object:
        server = await start_stream_server(echo, "127.0.0.1", 0, tls=None, on_handshake_failed=lambda p, r: None)
        server.close()
        return server

    assert isinstance(asyncio.run(start()), asyncio.Server)


async def silent_client(material: TlsMaterial) -> list[str]:
    failures: list[str] = []
    server = await start_stream_server(
        echo,
        "127.0.0.1",
        0,
        tls=TlsConfig(material.server_keystore, material.ca_file).server_ssl_context(),
        on_handshake_failed=lambda peer, reason: failures.append(reason),
        handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
    )
    _, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    await poll_until(_reported(failures, 1), TIMEOUT_S, "the silent client's handshake failure reported")
    writer.close()
    server.close()
    await server.wait_closed()
    return failures


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_client_that_never_starts_its_handshake_is_dropped_after_the_timeout(tmp_path: Path, loop: str) -> None:
    runner = uvloop.run if loop == "uvloop" else asyncio.run
    [reason] = runner(silent_client(make_tls_material(tmp_path)))
    assert "no TLS handshake within the handshake timeout" in reason
