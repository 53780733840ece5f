"""The console's web application: one route per page or action, HTML rendered on the server.

Pages read under the clients' lock on a worker thread (the SDK is blocking). Actions are POSTed plain forms
answered with a redirect (post/redirect/get) that carries a one-line outcome; a failed action shows the SDK's
error message, Kafka's error in plain words, never a stack trace. Templates autoescape everything.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import structlog
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from zkraft.console import charts, group_pages, kafka_pages, message_pages, reassign_pages, znode_pages
from zkraft.console.clients import ConsoleClients, ConsoleUnavailable
from zkraft.console.forms import ConsoleInputError
from zkraft.console.login import LoginGate
from zkraft.console.rates import RateSampler

HERE = Path(__file__).resolve().parent
log = structlog.get_logger("zkraft.console")


class ConsoleState:
    """What every request shares: the SDK clients, the rate sampler, the login gate and the templates."""

    def __init__(self, clients: ConsoleClients, sampler: RateSampler | None, gate: LoginGate | None) -> None:
        self.clients = clients
        self.sampler = sampler
        self.gate = gate
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # topic names, keys, values and znode data are user-controlled
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["human_bytes"] = human_bytes
        self.templates.filters["rate"] = lambda value: "–" if value is None else f"{value:,.1f}"
        self.templates.filters["q"] = lambda value: urllib.parse.quote(str(value), safe="")


def human_bytes(value: float | None) -> str:
    if value is None:
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"


def plain_error(error: BaseException) -> str:
    """One line a person reads: the SDK's message (Kafka's error in words), never a traceback."""
    from client.kafka.errors import KafkaError

    text = " ".join(str(error).split())
    if isinstance(error, KafkaError) and ":" not in text and error.default_message not in text:
        # The SDK's message is only the context ("describe topic t"): add what Kafka's error code means.
        text = f"{text}: {error.default_message}" if text else error.default_message
    return text or type(error).__name__


def _known_errors() -> tuple[type[BaseException], ...]:
    from client.kafka.client_errors import KafkaConfigurationError
    from client.kafka.errors import KafkaError
    from client.zk.exceptions import ZkException

    return (KafkaError, KafkaConfigurationError, ZkException, ConsoleInputError, ConsoleUnavailable)


def render(state: ConsoleState, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    context = {
        "request_path": request.url.path,
        "message": request.query_params.get("msg", ""),
        "error": values.pop("error", "") or request.query_params.get("error", ""),
        "user": request.scope.get("console_user"),
        **values,
    }
    html = state.templates.get_template(template).render(context)
    return HTMLResponse(html, status_code=status)


async def page(state: ConsoleState, request: Request, template: str, build: Callable[[], dict[str, Any]]) -> Response:
    """Build a page's values under the clients' lock; a failure renders the page's frame with the error."""

    def locked() -> dict[str, Any]:
        with state.clients.use():
            return build()

    try:
        values = await run_in_threadpool(locked)
    except _known_errors() as error:
        log.info("console_page_failed", path=request.url.path, error=plain_error(error))
        return render(state, request, "failed.html", status=502, error=plain_error(error))
    except Exception as error:  # the request's boundary: logged with its traceback, one line to the user
        log.exception("console_page_crashed", path=request.url.path)
        return render(state, request, "failed.html", status=500, error=unexpected(error))
    return render(state, request, template, **values)


def unexpected(error: BaseException) -> str:
    return f"unexpected {type(error).__name__}: {plain_error(error)} (the console's log has the details)"


async def action(state: ConsoleState, request: Request, run: Callable[[dict[str, str]], str], back: str) -> Response:
    """Run a POSTed action, then redirect to `back` with its outcome (or the error) in one line."""
    form = {key: str(value) for key, value in (await request.form()).items()}

    def locked() -> str:
        with state.clients.use():
            return run(form)

    try:
        outcome = await run_in_threadpool(locked)
        query = {"msg": outcome}
        log.info("console_action", path=request.url.path, outcome=outcome, user=request.scope.get("console_user"))
    except _known_errors() as error:
        query = {"error": plain_error(error)}
        log.info("console_action_failed", path=request.url.path, error=query["error"])
    except Exception as error:  # the request's boundary, as in page()
        log.exception("console_action_crashed", path=request.url.path)
        query = {"error": unexpected(error)}
    separator = "&" if "?" in back else "?"
    return RedirectResponse(f"{back}{separator}{urllib.parse.urlencode(query)}", status_code=303)


class Pages:
    """One method per page or action; `routes()` maps them to paths."""

    def __init__(self, state: ConsoleState) -> None:
        self.state = state
        self.clients = state.clients
        self.sampler = state.sampler

    async def overview(self, request: Request) -> Response:
        return await page(self.state, request, "overview.html", lambda: {"view": kafka_pages.overview(self.clients)})

    async def topics(self, request: Request) -> Response:
        def build() -> dict[str, Any]:
            return {"topics": kafka_pages.topic_rows(self.clients, self.sampler)}

        return await page(self.state, request, "topics.html", build)

    async def topic_create(self, request: Request) -> Response:
        return await action(self.state, request, lambda form: kafka_pages.create_topic(self.clients, form), "/topics")

    async def topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        return await page(
            self.state, request, "topic.html", lambda: {"topic": kafka_pages.topic_detail(self.clients, name)}
        )

    async def topic_action(self, request: Request) -> Response:
        name, verb = request.path_params["name"], request.path_params["verb"]
        back = f"/topics/{urllib.parse.quote(name, safe='')}"
        actions = {
            "delete": (kafka_pages.delete_topic, "/topics"),
            "partitions": (kafka_pages.add_partitions, back),
            "config": (kafka_pages.alter_topic_config, back),
        }
        if verb not in actions:
            return render(self.state, request, "failed.html", status=404, error=f"no topic action {verb!r}")
        run, target = actions[verb]
        return await action(self.state, request, lambda form: run(self.clients, name, form), target)

    async def messages(self, request: Request) -> Response:
        name = request.path_params["name"]
        params = dict(request.query_params)

        def build() -> dict[str, Any]:
            query = message_pages.browse_query(params)
            rows = message_pages.browse(self.clients, name, query) if "mode" in params else []
            return {"topic": name, "query": query, "rows": rows, "browsed": "mode" in params}

        return await page(self.state, request, "messages.html", build)

    async def groups(self, request: Request) -> Response:
        return await page(self.state, request, "groups.html", lambda: {"groups": group_pages.group_rows(self.clients)})

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        return await page(
            self.state, request, "group.html", lambda: {"group": group_pages.group_detail(self.clients, group_id)}
        )

    async def group_reset(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        back = f"/groups/{urllib.parse.quote(group_id, safe='')}"
        return await action(
            self.state, request, lambda form: group_pages.reset_offsets(self.clients, group_id, form), back
        )

    async def znodes(self, request: Request) -> Response:
        path = request.query_params.get("path", "/")
        return await page(self.state, request, "znodes.html", lambda: {"node": znode_pages.znode(self.clients, path)})

    async def reassignment(self, request: Request) -> Response:
        return await page(
            self.state, request, "reassignment.html", lambda: {"ongoing": reassign_pages.ongoing(self.clients)}
        )

    async def reassignment_action(self, request: Request) -> Response:
        verb = request.path_params["verb"]
        form = {key: str(value) for key, value in (await request.form()).items()}

        def build() -> dict[str, Any]:
            output = reassign_pages.run_action(self.clients, verb, form)
            return {"ongoing": reassign_pages.ongoing(self.clients), "output": output, "form": form}

        # The tool's output is the answer (a proposed plan to copy): shown on the page, not redirected away.
        return await page(self.state, request, "reassignment.html", build)

    async def election(self, request: Request) -> Response:
        return await action(
            self.state, request, lambda form: reassign_pages.preferred_election(self.clients, form), "/reassignment"
        )

    async def chart_page(self, request: Request) -> Response:
        history = self.sampler.history() if self.sampler is not None else []
        svgs = [charts.svg_line_chart(series) for series in charts.rate_series(history)]
        errors = history[-1].errors if history else ()
        sampling = self.sampler is not None
        return render(
            self.state, request, "charts.html", charts=svgs, sampling=sampling, errors=errors, samples=len(history)
        )

    def routes(self) -> list[Route | Mount]:
        post = ["POST"]
        return [
            Route("/", self.overview),
            Route("/topics", self.topics),
            Route("/topics", self.topic_create, methods=post),
            Route("/topics/{name}", self.topic),
            Route("/topics/{name}/messages", self.messages),
            Route("/topics/{name}/{verb}", self.topic_action, methods=post),
            Route("/groups", self.groups),
            Route("/groups/{group_id:path}/reset", self.group_reset, methods=post),
            Route("/groups/{group_id:path}", self.group),
            Route("/znodes", self.znodes),
            Route("/reassignment", self.reassignment),
            Route("/reassignment/election", self.election, methods=post),
            Route("/reassignment/{verb}", self.reassignment_action, methods=post),
            Route("/charts", self.chart_page),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]


def build_app(state: ConsoleState) -> Starlette:
    routes: list[Any] = Pages(state).routes()
    if state.gate is not None:
        routes += state.gate.routes(state, render)
    return Starlette(routes=routes, middleware=[Middleware(_timing_middleware_class(state))])


def same_origin(request: Request) -> bool:
    """Whether a POST comes from the console's own pages: no Origin header (not a browser's cross-site form),
    or one naming the host the request was sent to."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urllib.parse.urlsplit(origin).netloc == request.headers.get("host", "")


def _timing_middleware_class(state: ConsoleState) -> Any:
    """Server-Timing: how long the server took to render (what bench/console_bench.py reads); the login check."""
    from starlette.middleware.base import BaseHTTPMiddleware

    class Timing(BaseHTTPMiddleware):
        async def dispatch(self, request: Request, call_next: Any) -> Response:
            started = time.perf_counter()
            if request.method == "POST" and not same_origin(request):
                # A page of another site posting to the console (CSRF): browsers name the page's origin.
                return HTMLResponse("refused: a form posted from another site", status_code=403)
            if state.gate is not None:
                refused = state.gate.check(request)
                if refused is not None:
                    return refused
            response = await call_next(request)
            response.headers["Server-Timing"] = f"render;dur={(time.perf_counter() - started) * 1000:.1f}"
            return response

    return Timing
