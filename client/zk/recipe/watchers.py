"""kazoo's high-level watchers: `DataWatch` and `ChildrenWatch` (kazoo/recipe/watchers.py).

    @zk.DataWatch("/controller")
    def on_controller(data, stat):          # (data, stat, event) also accepted
        print("controller is", data)         # return False to stop watching

    @zk.ChildrenWatch("/brokers/ids")
    def on_brokers(children):
        print("live brokers", children)

Each calls its function at once with the current state, then again after
every change, re-arming its one-shot watch each time; it stops for good when
the function returns False. A DataWatch of a missing node calls
`func(None, None)` and keeps watching for the node's creation; a
ChildrenWatch stops when its node is deleted, as kazoo's.

Across a reconnect of the same session the server re-arms the watches and
sends what was missed (SetWatches), so nothing needs re-reading. After the
session is LOST, the watch is gone; when `start()` brings a new session the
recipe reads again and re-arms (unless `allow_session_lost=False` for a
ChildrenWatch, which then stops). Only the client's public API is used.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from client.zk.exceptions import ConnectionClosedError, NoNodeError, RetryFailedError, SessionExpiredError
from client.zk.retry import ZkRetry
from client.zk.states import EventType, WatchedEvent, ZkState, ZnodeStat

if TYPE_CHECKING:
    from client.zk.client import ZkClient

log = logging.getLogger("zkraft.client.recipe")

# How a recipe retries its reads through connection loss: ~15 s of retries, then it waits for a reconnect.
RECIPE_RETRY = ZkRetry(max_tries=10, delay=0.1, backoff=2.0, max_delay=2.0)
# A node that keeps being created and deleted between our get and exists: give up after this many rounds.
READ_ROUNDS_MAX = 100
# Errors after which the watch is not armed and must be re-read when the session is back.
_SESSION_GONE = (ConnectionClosedError, SessionExpiredError, RetryFailedError)


def _takes_event(func: Callable[..., Any], base_args: int) -> bool:
    """Whether `func` accepts the event as one more positional argument (kazoo's argument sniffing)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) > base_args


class DataWatch:
    """Calls `func(data, stat)` now and after every change of `path` (data None, stat None: no node)."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        func: Callable[..., Any] | None = None,
        send_event: bool | None = None,
    ) -> None:
        self._client = client
        self._path = path
        self._func: Callable[..., Any] | None = None
        self._send_event = send_event
        self._retry = RECIPE_RETRY.copy()
        self._run_lock = threading.Lock()
        self._stopped = False
        self._ever_called = False
        self._version: int | None = None  # mzxid of what func saw last
        self._reread_on_connect = False
        self._watcher = self._on_event  # one bound-method object: the client calls a watcher once per event
        client.add_listener(self._on_state)
        if func is not None:
            self(func)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator form: `@DataWatch(zk, "/p")` / `@zk.DataWatch("/p")`."""
        self._func = func
        if self._send_event is None:
            self._send_event = _takes_event(func, 2)
        self._get_data()
        return func

    def _get_data(self, event: WatchedEvent | None = None) -> None:
        with self._run_lock:
            if self._stopped or self._func is None:
                return
            try:
                data, stat = self._read()
            except _SESSION_GONE as exc:
                self._reread_on_connect = True
                log.info("data_watch_paused path=%s reason=%s", self._path, exc)
                return
            initial_version = self._version
            self._version = None if stat is None else stat.mzxid
            if self._version != initial_version or not self._ever_called:
                self._ever_called = True
                self._call(data, stat, event)

    def _read(self) -> tuple[bytes | None, ZnodeStat | None]:
        for _ in range(READ_ROUNDS_MAX):
            try:
                return self._retry(self._client.get, self._path, self._watcher)
            except NoNodeError:
                # Arm an exists watch instead: it fires when the node is created.
                stat = self._retry(self._client.exists, self._path, self._watcher)
                if stat is None:
                    return None, None
        raise RetryFailedError(f"{self._path} kept appearing and vanishing for {READ_ROUNDS_MAX} reads")

    def _call(self, data: bytes | None, stat: ZnodeStat | None, event: WatchedEvent | None) -> None:
        assert self._func is not None
        result = self._func(data, stat, event) if self._send_event else self._func(data, stat)
        if result is False:
            self._stop()

    def _stop(self) -> None:
        self._stopped = True
        self._func = None
        self._client.remove_listener(self._on_state)

    def _on_event(self, event: WatchedEvent) -> None:
        if event.type is EventType.NONE:
            self._reread_on_connect = True  # the session is gone, and the watch with it
            return
        self._get_data(event)

    def _on_state(self, state: ZkState) -> None:
        if state is ZkState.LOST:
            self._reread_on_connect = True
        elif state is ZkState.CONNECTED and self._reread_on_connect and not self._stopped:
            self._reread_on_connect = False
            self._get_data()


class ChildrenWatch:
    """Calls `func(children)` now and after every change of `path`'s children; stops if the node is deleted."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        func: Callable[..., Any] | None = None,
        allow_session_lost: bool = True,
        send_event: bool = False,
    ) -> None:
        self._client = client
        self._path = path
        self._func: Callable[..., Any] | None = None
        self._allow_session_lost = allow_session_lost
        self._send_event = send_event
        self._retry = RECIPE_RETRY.copy()
        self._run_lock = threading.Lock()
        self._stopped = False
        self._prior_children: list[str] | None = None
        self._reread_on_connect = False
        self._watcher = self._on_event
        client.add_listener(self._on_state)
        if func is not None:
            self(func)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        self._func = func
        self._get_children()
        return func

    def _get_children(self, event: WatchedEvent | None = None) -> None:
        with self._run_lock:
            if self._stopped or self._func is None:
                return
            try:
                children = self._retry(self._client.get_children, self._path, self._watcher)
            except NoNodeError:
                self._stop()
                return
            except _SESSION_GONE as exc:
                self._reread_on_connect = True
                log.info("children_watch_paused path=%s reason=%s", self._path, exc)
                return
            if event is None and self._prior_children == children:
                return  # a re-read after a new session that found nothing new
            self._prior_children = children
            result = self._func(children, event) if self._send_event else self._func(children)
            if result is False:
                self._stop()

    def _stop(self) -> None:
        self._stopped = True
        self._func = None
        self._client.remove_listener(self._on_state)

    def _on_event(self, event: WatchedEvent) -> None:
        if event.type is EventType.NONE:
            self._reread_on_connect = True
            return
        self._get_children(event)

    def _on_state(self, state: ZkState) -> None:
        if state is ZkState.LOST:
            if not self._allow_session_lost:
                self._stop()
                return
            self._reread_on_connect = True
        elif state is ZkState.CONNECTED and self._reread_on_connect and not self._stopped:
            self._reread_on_connect = False
            self._get_children()
