"""The blocking ZooKeeper client, kazoo's `KazooClient` API over `AsyncZkClient`.

    from client import ZkClient
    from client.zk.states import ZkState

    zk = ZkClient(hosts="127.0.0.1:7001,127.0.0.1:7002")
    zk.start()
    zk.ensure_path("/brokers/ids")
    zk.create("/brokers/ids/1", b"{...}", ephemeral=True)

    @zk.DataWatch("/controller")
    def on_controller(data, stat):
        ...

    zk.stop()
    zk.close()

A thin wrapper (STYLE 13): every method runs the `AsyncZkClient` coroutine on
one event loop in a background thread shared by all `ZkClient`s of the
process, and waits for it. Watchers and state listeners run, one at a time
and in order, on this client's own callback thread (as kazoo's threading
handler does), so a callback may call this client's blocking methods; it
must not call `close()`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from client.zk.acl import ACL
from client.zk.aio import AsyncZkClient, Listener
from client.zk.ensemble_config import EnsembleConfig
from client.zk.recipe.watchers import ChildrenWatch, DataWatch
from client.zk.retry import ZkRetry
from client.zk.states import AddWatchMode, KeeperState, WatcherType, ZkState, ZnodeStat
from client.zk.transaction import Transaction, TxnOp
from client.zk.watches import Watcher
from runtime import event_loop
from runtime.tls import TlsConfig

log = logging.getLogger("zkraft.client.zk")

T = TypeVar("T")
_Callback = tuple[Callable[..., Any], tuple[Any, ...]]


class _SharedLoop:
    """One asyncio loop in one daemon thread, for every ZkClient of the process.

    Shared rather than one per client: gRPC's asyncio poller hands completions to the loop that first
    used it, so loops that come and go while others still hold channels leave gRPC stranded.
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def get(cls) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = event_loop.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="zkraft-zk-loop", daemon=True)
                thread.start()
                cls._loop, cls._thread = loop, thread
            return cls._loop, cls._thread


class ZkClient:
    """kazoo-compatible blocking client; see `AsyncZkClient` for the arguments."""

    def __init__(
        self,
        hosts: str | Sequence[str] = "127.0.0.1:2181",
        timeout: float = 10.0,
        session_timeout_ms: int = 10_000,
        linearizable_reads: bool = False,
        *,
        command_retry: ZkRetry | dict[str, Any] | None = None,
        randomize_hosts: bool = True,
        rng: random.Random | None = None,
        tls: TlsConfig | None = None,
        sasl_options: Mapping[str, str] | None = None,
        default_acl: Callable[[str], Sequence[ACL]] | None = None,
        ensemble_tracker: bool = True,
    ) -> None:
        self._loop, self._loop_thread = _SharedLoop.get()
        self._callbacks: queue.SimpleQueue[_Callback | None] = queue.SimpleQueue()
        self._callback_thread: threading.Thread | None = None
        self._aio = AsyncZkClient(
            hosts,
            timeout,
            session_timeout_ms,
            linearizable_reads,
            randomize_hosts=randomize_hosts,
            callback_dispatcher=self._dispatch,
            rng=rng,
            tls=tls,
            sasl_options=sasl_options,
            default_acl=default_acl,
            ensemble_tracker=ensemble_tracker,
        )
        self._retry = command_retry if isinstance(command_retry, ZkRetry) else ZkRetry(**(command_retry or {}))
        self.timeout = timeout

    # ---- lifecycle and state

    def start(self, timeout: float | None = None) -> None:
        """Connect with a new session (no-op if running); ZkTimeoutError if no server accepts in time."""
        self._start_callback_thread()
        self._run(self._aio.start(timeout))

    def stop(self) -> None:
        """Close the session: its ephemeral nodes are deleted at once; state LOST."""
        self._run(self._aio.stop())

    def close(self) -> None:
        """Free connections and the callback thread (stops first if needed)."""
        self._run(self._aio.close())
        thread = self._callback_thread
        if thread is not None:
            self._callbacks.put(None)
            self._callback_thread = None
            if thread is not threading.current_thread():
                thread.join()

    def __enter__(self) -> ZkClient:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def state(self) -> ZkState:
        return self._aio.state

    @property
    def client_state(self) -> KeeperState:
        return self._aio.client_state

    @property
    def connected(self) -> bool:
        return self._aio.connected

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return self._aio.client_id

    @property
    def session_timeout_ms(self) -> int:
        return self._aio.session_timeout_ms

    @property
    def last_zxid(self) -> int:
        return self._aio.last_zxid

    @property
    def server(self) -> str | None:
        return self._aio.server

    @property
    def hosts(self) -> list[str]:
        return self._aio.hosts

    @property
    def ensemble_config(self) -> EnsembleConfig | None:
        return self._aio.ensemble_config

    @property
    def chroot(self) -> str:
        return self._aio.chroot

    def add_listener(self, listener: Listener) -> None:
        """`listener(state)` on every change of `ZkState`, on the callback thread."""
        self._aio.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._aio.remove_listener(listener)

    # ---- the API (AsyncZkClient's, blocking)

    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
        container: bool = False,
        ttl_ms: int = 0,
    ) -> Any:
        return self._run(
            self._aio.create(path, value, acl, ephemeral, sequence, makepath, include_data, container, ttl_ms)
        )

    def ensure_path(self, path: str) -> bool:
        return self._run(self._aio.ensure_path(path))

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        return self._run(self._aio.get(path, watch))

    def get_config(self, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        return self._run(self._aio.get_config(watch))

    def reconfig(
        self, joining: str | None, leaving: str | None, new_members: str | None, from_config: int = -1
    ) -> tuple[bytes, ZnodeStat]:
        return self._run(self._aio.reconfig(joining, leaving, new_members, from_config))

    def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        return self._run(self._aio.exists(path, watch))

    def get_children(self, path: str, watch: Watcher | None = None, include_data: bool = False) -> Any:
        return self._run(self._aio.get_children(path, watch, include_data))

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self._run(self._aio.set(path, value, version))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        return self._run(self._aio.delete(path, version, recursive))

    def sync(self, path: str) -> str:
        return self._run(self._aio.sync(path))

    def get_ephemerals(self, prefix: str = "/") -> list[str]:
        return self._run(self._aio.get_ephemerals(prefix))

    def get_all_children_number(self, path: str) -> int:
        return self._run(self._aio.get_all_children_number(path))

    def add_watch(self, path: str, watch: Watcher, mode: AddWatchMode = AddWatchMode.PERSISTENT) -> None:
        self._run(self._aio.add_watch(path, watch, mode))

    def remove_watches(self, path: str, watcher_type: WatcherType) -> None:
        self._run(self._aio.remove_watches(path, watcher_type))

    def get_acls(self, path: str) -> tuple[list[ACL], ZnodeStat]:
        return self._run(self._aio.get_acls(path))

    def set_acls(self, path: str, acls: Sequence[ACL], version: int = -1) -> ZnodeStat:
        return self._run(self._aio.set_acls(path, acls, version))

    def add_auth(self, scheme: str, credential: str | bytes) -> bool:
        return self._run(self._aio.add_auth(scheme, credential))

    def whoami(self) -> list[tuple[str, str]]:
        return self._run(self._aio.whoami())

    def transaction(self) -> Transaction:
        """kazoo's transaction builder: `t.create/delete/set_data/check`, then `t.commit()` -> results."""
        return Transaction(self._commit_transaction)

    def _commit_transaction(self, ops: Sequence[TxnOp]) -> list[Any]:
        return self._run(self._aio._commit_transaction(ops))

    def retry(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`zk.retry(zk.get, "/p")`: the call, retried on connection loss per `command_retry`."""
        return self._retry.copy()(func, *args, **kwargs)

    def DataWatch(self, path: str, func: Callable[..., Any] | None = None, **kwargs: Any) -> DataWatch:  # noqa: N802
        """kazoo's `zk.DataWatch(path)` decorator / `zk.DataWatch(path, func)`."""
        return DataWatch(self, path, func, **kwargs)

    def ChildrenWatch(self, path: str, func: Callable[..., Any] | None = None, **kwargs: Any) -> ChildrenWatch:  # noqa: N802
        """kazoo's `zk.ChildrenWatch(path)` decorator / `zk.ChildrenWatch(path, func)`."""
        return ChildrenWatch(self, path, func, **kwargs)

    # ---- plumbing

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._loop_thread:
            coro.close()
            raise RuntimeError("a blocking ZkClient method was called on the client's own event loop thread")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the call running unseen
            raise

    def _dispatch(self, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._callbacks.put((callback, args))

    def _start_callback_thread(self) -> None:
        if self._callback_thread is not None and self._callback_thread.is_alive():
            return
        self._callbacks = queue.SimpleQueue()  # a fresh one: the old thread may not have taken its sentinel yet
        self._callback_thread = threading.Thread(
            target=self._run_callbacks, args=(self._callbacks,), name="zkraft-zk-callbacks", daemon=True
        )
        self._callback_thread.start()

    @staticmethod
    def _run_callbacks(callbacks: queue.SimpleQueue[_Callback | None]) -> None:
        while True:
            item = callbacks.get()
            if item is None:
                return
            callback, args = item
            try:
                callback(*args)
            except Exception:  # loop boundary: one failing callback must not stop the others
                log.exception("zk_callback_failed callback=%r", callback)
