"""The operations HTTP port of a node: `/metrics` (Prometheus's text format), `/healthz`, `/readyz`, and any
JSON routes the node adds (ZooKeeper's AdminServer `/commands/<name>` on quorum nodes).

It runs in its own thread (a threading WSGI server, as prometheus_client's own `start_http_server`), so a
scrape never waits behind the event loop's queue and a slow scraper never stalls a request. The figures
themselves belong to the event loop's objects (one owner, no locks: docs/STYLE principle 3), so each route
reads them *on* the loop through `on_loop`, bounded by a timeout: a wedged loop answers 503, not a hang.
"""

from __future__ import annotations

import asyncio
import json
import socketserver
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

T = TypeVar("T")

# How long a scrape or a health check waits for the event loop before answering 503.
LOOP_TIMEOUT_S = 5.0


class LoopUnavailable(Exception):
    """The event loop did not answer within LOOP_TIMEOUT_S (wedged, or stopping)."""


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], timeout_s: float = LOOP_TIMEOUT_S) -> T:
    """Runs `fn` on `loop` (from another thread) and returns its result, so it reads a consistent state."""

    async def call() -> T:
        return fn()

    if loop.is_closed():
        raise LoopUnavailable("event loop closed")
    future = asyncio.run_coroutine_threadsafe(call(), loop)
    try:
        return future.result(timeout_s)
    except TimeoutError:
        future.cancel()
        raise LoopUnavailable(f"event loop did not answer within {timeout_s} s") from None


@dataclass(frozen=True, slots=True)
class Check:
    """A health answer: `ok` decides 200 or 503; `reasons` say why not, for the operator."""

    ok: bool
    reasons: tuple[str, ...] = ()


# A JSON route: returns (HTTP status, JSON-able body). Called on the HTTP thread; it uses on_loop itself.
JsonRoute = Callable[[], tuple[int, Any]]


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # a scrape every few seconds is not worth a log line


@dataclass
class OpsHttpServer:
    """A started operations port; `address` is host:port as bound (port 0 picks a free one)."""

    address: str
    _server: _ThreadingServer
    _thread: threading.Thread

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)


def _json_response(start_response: Callable[..., Any], status: int, body: Any) -> list[bytes]:
    reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}.get(status, "")
    payload = json.dumps(body, indent=2).encode() + b"\n"
    start_response(f"{status} {reason}", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]


def check_route(check: Callable[[], Check], loop: asyncio.AbstractEventLoop) -> JsonRoute:
    """`/healthz`-style route: 200 {"status": "ok"} or 503 with the reasons."""

    def route() -> tuple[int, Any]:
        try:
            result = on_loop(loop, check)
        except LoopUnavailable as exc:
            return 503, {"status": "unavailable", "reasons": [str(exc)]}
        if result.ok:
            return 200, {"status": "ok"}
        return 503, {"status": "unavailable", "reasons": list(result.reasons)}

    return route


def start_ops_server(
    host: str, port: int, registry: CollectorRegistry, routes: Mapping[str, JsonRoute]
) -> OpsHttpServer:
    """Binds host:port (OSError when taken) and serves in a daemon thread."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/").rstrip("/") or "/"
        if path == "/metrics":
            try:
                output = generate_latest(registry)
            except LoopUnavailable as exc:
                return _json_response(start_response, 503, {"error": str(exc)})
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(output)))])
            return [output]
        route = routes.get(path)
        if route is None:
            return _json_response(start_response, 404, {"error": f"no such path {path!r}", "paths": sorted(routes)})
        status, body = route()
        return _json_response(start_response, status, body)

    server = make_server(host, port, app, server_class=_ThreadingServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name=f"ops-http-{port}", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return OpsHttpServer(f"{bound_host}:{bound_port}", server, thread)
